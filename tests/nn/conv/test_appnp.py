import pytest
import torch
import torch_geometric.nn as pyg
from parity import one_loop_per_node, parity_graph

from graphloc import Graph
from graphloc.nn import APPNP, from_pyg


@pytest.mark.parametrize("K", [0, 1, 10])
@pytest.mark.parametrize("alpha", [0.0, 0.1, 1.0])
@pytest.mark.parametrize("add_self_loops,normalize", [(True, True), (False, True),
                                                      (False, False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_appnp_matches_pyg(K, alpha, add_self_loops, normalize, weighted):
    """Outputs and gradients (x and the edge weights) against PyG's APPNP."""
    edge_index, n = one_loop_per_node(*parity_graph(7))  # (see test_sg_conv.py)
    kwargs = dict(add_self_loops=add_self_loops, normalize=normalize)
    x = torch.randn(n, 5, dtype=torch.float64)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    w = torch.rand(edge_index.size(1), dtype=torch.float64)
    w1, w2 = (w.clone().requires_grad_(), w.clone().requires_grad_()) if weighted else (None,
                                                                                        None)
    ours = APPNP(K, alpha, **kwargs)(x1, Graph(edge_index, num_nodes=n), w1)
    theirs = pyg.APPNP(K, alpha, **kwargs)(x2, edge_index, w2)
    torch.testing.assert_close(ours, theirs)
    grad = torch.randn_like(ours)
    inputs = lambda a, b: [a, b] if weighted and K else [a]  # noqa: E731 (K = 0: x alone)
    for g1, g2 in zip(torch.autograd.grad(ours, inputs(x1, w1), grad),
                      torch.autograd.grad(theirs, inputs(x2, w2), grad), strict=True):
        torch.testing.assert_close(g1, g2)


def test_appnp_is_personalised_pagerank():
    """K steps of X <- (1 - alpha) S X + alpha X0 with dense matrices; many steps approach
    the closed form alpha (I - (1 - alpha) S)^-1 X0."""
    edge_index, n = parity_graph(8)
    x = torch.randn(n, 3, dtype=torch.float64)
    a = torch.zeros(n, n, dtype=torch.float64)
    keep = edge_index[0] != edge_index[1]
    a.index_put_((edge_index[1][keep], edge_index[0][keep]),
                 torch.ones(int(keep.sum()), dtype=torch.float64), accumulate=True)
    a += torch.eye(n, dtype=torch.float64)
    d = a.sum(1).rsqrt()
    s = d[:, None] * a * d[None, :]
    h = x
    for _ in range(4):
        h = 0.75 * s @ h + 0.25 * x
    torch.testing.assert_close(APPNP(4, 0.25)(x, edge_index), h)
    closed = 0.25 * torch.linalg.solve(torch.eye(n, dtype=torch.float64) - 0.75 * s, x)
    torch.testing.assert_close(APPNP(200, 0.25)(x, edge_index), closed)


def test_appnp_edge_dropout_only_in_training_and_its_arguments():
    edge_index, n = parity_graph(9)
    x = torch.randn(n, 4)
    layer = APPNP(3, 0.2, dropout=0.5)
    plain = APPNP(3, 0.2)
    torch.testing.assert_close(layer.eval()(x, edge_index), plain(x, edge_index))
    torch.manual_seed(0)
    dropped = layer.train()(x, edge_index)
    assert not torch.allclose(dropped, plain(x, edge_index))
    # unbiased: the mean over many draws approaches the plain output (edge weights scaled
    # by 1 / (1 - p)), here at one step
    one, one_plain = APPNP(1, 0.0, dropout=0.5).train(), APPNP(1, 0.0)
    mean = torch.stack([one(x, edge_index) for _ in range(4000)]).mean(0)
    torch.testing.assert_close(mean, one_plain(x, edge_index), atol=0.1, rtol=0.05)
    for bad, match in ((dict(K=-1, alpha=0.1), "K must be an integer >= 0"),
                       (dict(K=2, alpha=1.5), "alpha must be a number in"),
                       (dict(K=2, alpha=0.1, dropout=1.5), r"dropout must be a probability "
                                                             r"in \[0, 1\], got 1.5")):
        with pytest.raises(ValueError, match=match):
            APPNP(**bad)
    # p = 1 (torch's and PyG's dropout take it): every edge dropped at every step, alpha x
    torch.testing.assert_close(APPNP(2, 0.2, dropout=1.0).train()(x, edge_index), 0.2 * x)


def test_a_pyg_model_with_appnp_converts():
    edge_index, n = parity_graph(10)
    model = pyg.Sequential("x, edge_index", [(torch.nn.Linear(5, 4), "x -> x"),
                                             (pyg.APPNP(5, 0.1), "x, edge_index -> x")]).eval()
    x = torch.randn(n, 5)
    converted = from_pyg(model, example=(x, edge_index), strict=True)
    assert converted.pyg_conversion["converted"]
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))
