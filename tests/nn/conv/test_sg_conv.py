import warnings

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, one_loop_per_node, parity_graph

from graphloc import Graph
from graphloc.nn import SGConv, from_pyg


@pytest.mark.parametrize("K", [0, 1, 3])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_sg_conv_matches_pyg(K, add_self_loops, bias, weighted):
    """Outputs and gradients (x, the weights, the edge weights) against PyG's SGConv, on a
    graph with isolated nodes, self-loops and parallel edges."""
    edge_index, n = one_loop_per_node(*parity_graph(3))
    kwargs = dict(K=K, add_self_loops=add_self_loops, bias=bias)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64, requires_grad=True) \
        if weighted else None
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(SGConv(8, 6, **kwargs), pyg.SGConv(8, 6, **kwargs),
                  lambda m, x: m(x, graph, weight), lambda m, x: m(x, edge_index, weight),
                  torch.randn(n, 8), extra=(weight,) if weighted and K else ())


def test_a_repeated_self_loop_gets_the_gradient_only_where_its_weight_is_used():
    """gcn_norm keeps one weight among a node's self-loops (PyG's rule: the last one), and
    only that one enters the output. PyG's gradient reaches the other loops' weights too
    (the backward of its index_put); graphloc's is the derivative: 0 there, PyG's at the
    loop used and at every other edge. Checked with a finite difference."""
    edge_index = torch.tensor([[0, 1, 2, 1, 1, 3], [1, 2, 0, 1, 1, 2]])  # node 1: two loops
    x = torch.randn(4, 3, dtype=torch.float64)
    weight = torch.rand(6, dtype=torch.float64, requires_grad=True)
    ours, theirs = SGConv(3, 2, K=2).double(), pyg.SGConv(3, 2, K=2).double()
    ours.load_state_dict(theirs.state_dict())
    grad, = torch.autograd.grad(ours(x, edge_index, weight).sum(), weight)
    pyg_grad, = torch.autograd.grad(theirs(x, edge_index, weight).sum(), weight)
    moved = weight.detach().clone()
    moved[3] += 1.0  # the first loop of node 1: not the one kept
    torch.testing.assert_close(ours(x, edge_index, moved), ours(x, edge_index, weight))
    assert grad[3] == 0 and pyg_grad[3] != 0
    keep = [0, 1, 2, 4, 5]
    torch.testing.assert_close(grad[keep], pyg_grad[keep])


def test_sg_conv_is_the_kth_power_of_the_normalised_adjacency():
    """Against the formula with dense matrices: (D^-1/2 (A + I) D^-1/2)^K X W + b."""
    edge_index = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 0]])
    conv = SGConv(3, 2, K=2).double()
    x = torch.randn(4, 3, dtype=torch.float64)
    a = torch.zeros(4, 4, dtype=torch.float64).index_put_(
        (edge_index[1], edge_index[0]), torch.ones(5, dtype=torch.float64)) + torch.eye(4)
    d = a.sum(1).rsqrt()
    s = d[:, None] * a * d[None, :]
    torch.testing.assert_close(conv(x, edge_index), conv.lin(s @ s @ x))


def test_sg_conv_cached_reuses_and_says_when_the_input_differs():
    """cached=True keeps the first call's product, as PyG's (whose later calls return it
    for any input without a word): new features are said with a warning, another node
    count is an error."""
    edge_index, n = parity_graph(5)
    ours, theirs = SGConv(4, 3, K=2, cached=True), pyg.SGConv(4, 3, K=2, cached=True)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 4)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(ours(x.clone(), Graph(edge_index, num_nodes=n)),
                                   theirs(x, edge_index))
    other = torch.randn(n, 4)
    with pytest.warns(UserWarning, match="features, graph or edge weights differ"):
        torch.testing.assert_close(ours(other, edge_index), theirs(other, edge_index))
    with pytest.raises(ValueError, match=f"propagated {n} nodes' features .* this call has 3"):
        ours(torch.randn(3, 4), torch.tensor([[0, 1], [1, 2]]))
    ours._cached_x = None  # PyG's way to clear it
    fresh = SGConv(4, 3, K=2)
    fresh.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(other, edge_index), fresh(other, edge_index))


def test_a_pyg_model_with_sg_conv_converts():
    edge_index, n = parity_graph(6)
    model = torch.nn.Sequential()
    model = pyg.Sequential("x, edge_index", [(pyg.SGConv(5, 4, K=3), "x, edge_index -> x")])
    x = torch.randn(n, 5)
    converted = from_pyg(model, example=(x, edge_index), strict=True)
    assert converted.pyg_conversion["converted"]
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))
