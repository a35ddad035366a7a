"""Backward of a backward (create_graph=True: gradient penalties, Hessian-vector products,
MAML) through every op, against the pure-torch reference ops under torch's autograd. The
fused backward kernels have no derivative: torch treated their outputs as constants and
the second derivatives of max aggregation, the softmax and attention were wrong, with
only a warning."""

import pytest
import torch
from helpers import random_edge_index, reference_ops, requires_ext

import graphloc.scatter as gs
from graphloc import Graph, ops

pytestmark = requires_ext

def _cases(graph):
    gen = torch.Generator().manual_seed(0)
    w = torch.rand(graph.num_edges, dtype=torch.float64, generator=gen) + 0.5
    b = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    index = torch.randint(0, 5, (9,), generator=gen)
    return {
        "spmm sum": lambda x: ops.spmm(graph, x, w),
        "spmm max": lambda x: ops.spmm(graph, x, w, reduce="max"),
        "spmm min": lambda x: ops.spmm(graph, x, reduce="min"),
        "sddmm": lambda x: ops.sddmm(graph, x, b),
        "segment_softmax": lambda x: ops.segment_softmax(graph, ops.sddmm(graph, x, b)),
        "segment_attention": lambda x: ops.segment_attention(
            graph, ops.sddmm(graph, x[:, :2], b[:, :2], "add"), x),
        "additive_attention": lambda x: ops.additive_attention(graph, x[:, :2], x[:, 2:], x),
        "additive_attention (slope 0)": lambda x: ops.additive_attention(
            graph, x[:, :2], x[:, 2:], x, negative_slope=0.0),
        "gated_sum": lambda x: ops.gated_sum(graph, x, x.flip(1), x.sin()),
        "film_sum": lambda x: ops.film_sum(graph, x, x.flip(1), x.sin()),
        "edge_outer_sum": lambda x: ops.edge_outer_sum(graph, ops.sddmm(graph, x, b), x).sum(1),
        "edge_head_sum": lambda x: ops.edge_head_sum(graph, ops.sddmm(graph, x, b, "add"),
                                                     x.unsqueeze(2)),
        "softmax_sum": lambda x: ops.softmax_sum(graph, x, x[0].cos()),
        "softmax_sum (detached scores)": lambda x: ops.softmax_sum(graph, x, 0.7, True),
        "scatter_max": lambda x: gs.scatter_max(x, index, 0)[0],
        "scatter_logsumexp": lambda x: gs.scatter_logsumexp(x, index, 0),
        "scatter_softmax": lambda x: gs.scatter_softmax(x, index, 0),
    }


def _second_order(f, x: torch.Tensor) -> torch.Tensor:
    """d/dx of a function of the gradient (a gradient penalty)."""
    x = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(f(x).pow(2).sum(), x, create_graph=True)
    return torch.autograd.grad(g.pow(2).sum() + (g * x.sin()).sum(), x)[0]


@pytest.mark.parametrize("name", sorted(_cases(Graph(torch.zeros(2, 0, dtype=torch.long),
                                                     num_nodes=9))))
def test_second_derivatives_are_the_reference_ops(name):
    graph = Graph(random_edge_index(9, 40, seed=3), num_nodes=9)
    f = _cases(graph)[name]
    x = torch.randn(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got = _second_order(f, x)
    with reference_ops():
        want = _second_order(f, x)
    torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name, args", [("GCNConv", (5, 4)), ("GATConv", (5, 2)),
                                        ("SAGEConv", (5, 4)), ("TransformerConv", (5, 2)),
                                        ("ChebConv", (5, 4, 3))])
def test_gradient_penalty_through_layers_is_pygs(name, args):
    """A gradient penalty (WGAN-GP, input-gradient regularisers): the parameters' gradient
    of ||d loss / d x||^2, against PyG's layer with the same weights."""
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    kwargs = {"heads": 2} if name in ("GATConv", "TransformerConv") else \
        {"aggr": "max"} if name == "SAGEConv" else {}
    theirs = getattr(pyg, name)(*args, **kwargs).double()
    ours = getattr(gl, name)(*args, **kwargs).double()
    ours.load_state_dict(theirs.state_dict())
    edge_index = random_edge_index(12, 50, seed=7)
    x = torch.randn(12, 5, dtype=torch.float64)

    def penalty_grads(layer):
        xg = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(layer(xg, edge_index).tanh().sum(), xg, create_graph=True)
        return torch.autograd.grad(g.pow(2).sum(), list(layer.parameters()), allow_unused=True)

    for a, b in zip(penalty_grads(ours), penalty_grads(theirs), strict=True):
        if a is None or b is None:
            assert (a if a is not None else b).abs().max() == 0
            continue
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)
