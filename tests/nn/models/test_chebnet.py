import os

import pytest
import torch

from graphloc import Graph
from graphloc.nn import ChebNet, build_model

OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "chebnet_official.pt")


def _weighted_sum(out):
    return (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum()


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "layers{}-K{}-weighted{}".format(*c["case"][:3]))
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_chebnet_equals_the_official_code_run_on_the_same_weights(case, mode):
    """City-Networks' ``benchmark/gnn.py`` ChebNet (``chebnet_oracle.py``) on graphloc's
    weights, loaded under the same names: outputs and the features' gradient, in eval mode
    and in training mode without dropout, on graphs with loops, parallel edges, an isolated
    node and edge weights."""
    layers, K, _, _ = case["case"]
    model = ChebNet(5, 8, 3, num_layers=layers, K=K,
                    dropout=0.0 if mode == "train" else 0.5).double()
    model.load_state_dict(case["weights"])
    model.train(mode == "train")
    x = case["x"].clone().requires_grad_()
    graph = Graph(case["edge_index"], num_nodes=x.size(0))
    out = model(x, graph, case["edge_weight"])
    (grad,) = torch.autograd.grad(_weighted_sum(out), x)
    want_out, want_grad = case["official"][mode]
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, want_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layers, K", [(1, 2), (3, 2), (2, 3)])
def test_chebnet_reaches_exactly_its_declared_hops(layers, K):
    """``graphloc_hops`` (what influence's full-graph method trusts) against the brute-force
    Jacobian on a path: node 0's output depends on the nodes within that many hops and on
    no farther one."""
    n = 12
    chain = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    graph = Graph(torch.cat([chain, chain.flip(0)], 1), num_nodes=n)
    torch.manual_seed(0)
    model = ChebNet(4, 8, 2, num_layers=layers, K=K).double().eval()
    x = torch.randn(n, 4, dtype=torch.float64)
    jacobian = torch.autograd.functional.jacobian(lambda v: model(v, graph)[0], x)
    reached = jacobian.abs().sum(dim=(0, 2)) > 0
    hops = model.graphloc_hops
    assert hops == layers * (K - 1)
    assert reached[:hops + 1].all() and not reached[hops + 1:].any()


def test_chebnet_without_edges_is_its_projections_and_first_chebyshev_terms():
    """No edges: the scaled Laplacian is 0 (PyG's L = I on loop-only nodes, 2L/2 - I), so
    each conv is its T_0 term, h W_0 + b; the dense formula is the oracle. No nodes give
    no rows."""
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = ChebNet(5, 8, 3, num_layers=2).double().eval()
    x = torch.randn(6, 5, dtype=torch.float64)
    h = F.silu(model.input_proj(x))
    for conv in model.convs:
        h = F.silu(conv.lins[0](h) + conv.bias)
    no_edges = torch.zeros(2, 0, dtype=torch.long)
    torch.testing.assert_close(model(x, Graph(no_edges, num_nodes=6)), model.output_proj(h),
                               rtol=1e-12, atol=1e-12)
    assert model(x[:0], Graph(no_edges, num_nodes=0)).shape == (0, 3)


def test_chebnet_refuses_bad_inputs_by_name():
    model = ChebNet(5, 8, 3)
    edges = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(TypeError, match="ChebNet expects floating-point node features x, "
                                        "got torch.int64"):
        model(torch.ones(4, 5, dtype=torch.long), edges)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds 9 at column 1 but the graph "
                                         r"has 4 nodes"):
        model(torch.randn(4, 5), torch.tensor([[0, 9], [1, 2]]))
    with pytest.raises(ValueError, match="edge_weight has 3 rows but the graph has 2 edges"):
        model(torch.randn(4, 5), edges, torch.ones(3))
    with pytest.raises(ValueError, match="x has 4 rows but the graph has 6"):
        model(torch.randn(4, 5), Graph(edges, num_nodes=6))


def test_chebnet_is_registered_with_the_official_defaults_and_refuses_bad_sizes():
    model = build_model("chebnet", 5, 8, 3, 4, dropout=0.2)
    assert isinstance(model, ChebNet) and len(model.convs) == 4
    assert model.dropout.p == 0.2 and model.K == 2
    assert ChebNet(5, 8, 3).dropout.p == 0.5 and len(ChebNet(5, 8, 3).convs) == 2
    for kwargs, name in (({"num_layers": 0}, "num_layers"), ({"K": 0}, "K"),
                         ({"dropout": 1.5}, "dropout")):
        with pytest.raises(ValueError, match=name):
            ChebNet(5, 8, 3, **kwargs)
    with pytest.raises(ValueError, match="x"):
        ChebNet(5, 8, 3)(torch.randn(4, 6), torch.tensor([[0, 1], [1, 2]]))
