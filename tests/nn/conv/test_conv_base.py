"""What every graphloc conv shares (``nn/conv/_base.py``): under torch.fx tracing a conv is
one ``call_module`` node, as PyG's tracers keep its ``MessagePassing`` layers."""

import pytest
import torch
import torch.fx
from helpers import TwoLayers, random_edge_index

import graphloc.nn as gl
from graphloc import Graph

LAYERS = {
    "GCNConv": lambda: (gl.GCNConv(8, 16), gl.GCNConv(16, 4)),
    "SAGEConv": lambda: (gl.SAGEConv(8, 16, aggr="max"), gl.SAGEConv(16, 4)),
    "GATConv": lambda: (gl.GATConv(8, 8, heads=2), gl.GATConv(16, 4, heads=1)),
    "ChebConv": lambda: (gl.ChebConv(8, 16, K=3), gl.ChebConv(16, 4, K=2)),
    "GINConv": lambda: (gl.GINConv(torch.nn.Linear(8, 16)), gl.GINConv(torch.nn.Linear(16, 4))),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_torch_fx_traces_a_model_of_graphloc_convs(name):
    """torch.fx.symbolic_trace traced into the convs, whose checks refused its proxies
    ("GCNConv expects node features x as a tensor, got Proxy"). Now each conv is one
    call_module node, and the traced module computes what the model computes."""
    torch.manual_seed(0)
    model = TwoLayers(*LAYERS[name]()).eval()
    traced = torch.fx.symbolic_trace(model)
    calls = [(n.op, n.target) for n in traced.graph.nodes if n.op == "call_module"]
    assert calls == [("call_module", "first"), ("call_module", "second")]
    x, edge_index = torch.randn(12, 8), random_edge_index(12, 40, seed=1)
    assert torch.equal(traced(x, edge_index), model(x, edge_index))
    graph = Graph(edge_index, num_nodes=12)  # a Graph passed in as the edge argument
    assert torch.equal(traced(x, graph), model(x, graph))


def test_a_traced_conv_returns_what_the_call_returns():
    """Attention weights, a (x_src, x_dst) pair and keyword arguments pass through the
    node as the eager call takes and returns them."""
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = gl.GATConv((8, 6), 4, heads=2, add_self_loops=False)

        def forward(self, x_src, x_dst, edge_index):
            out, (edges, alpha) = self.conv((x_src, x_dst), edge_index,
                                            return_attention_weights=True)
            return out, edges, alpha

    torch.manual_seed(0)
    model = Attention().eval()
    traced = torch.fx.symbolic_trace(model)
    x_src, x_dst = torch.randn(10, 8), torch.randn(7, 6)
    edge_index = torch.stack([torch.randint(0, 10, (30,)), torch.randint(0, 7, (30,))])
    for got, expected in zip(traced(x_src, x_dst, edge_index), model(x_src, x_dst, edge_index),
                             strict=True):
        assert torch.equal(got, expected)


def test_pygs_sequential_with_graphloc_convs_traces():
    """PyG 2.8's test_sequential_tracable with graphloc's GCNConv: its tracer keeps PyG's
    MessagePassing as leaves and traces into everything else."""
    pyg_nn = pytest.importorskip("torch_geometric.nn")

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, module, *args, **kwargs) -> bool:
            return isinstance(module, pyg_nn.MessagePassing) or \
                super().is_leaf_module(module, *args, **kwargs)

    torch.manual_seed(0)
    model = pyg_nn.Sequential("x, edge_index", [
        (gl.GCNConv(16, 64), "x, edge_index -> x1"),
        torch.nn.ReLU(),
        (gl.GCNConv(64, 64), "x1, edge_index -> x2"),
        torch.nn.ReLU(),
        (lambda x1, x2: x1 + x2, "x1, x2 -> x"),
        torch.nn.Linear(64, 7),
    ])
    traced = torch.fx.GraphModule(model, Tracer().trace(model))
    x, edge_index = torch.randn(9, 16), random_edge_index(9, 30, seed=2)
    assert torch.equal(traced(x, edge_index), model(x, edge_index))


def test_a_conv_outside_the_traced_module_meets_torch_fx_s_own_error():
    """A conv that is no submodule of the traced root has no path to name in a
    call_module node: it is left to torch.fx, which refuses any such module."""
    conv = gl.GCNConv(8, 4)

    def uses_a_free_conv(x, edge_index):
        return conv(x, edge_index)

    with pytest.raises(NameError, match="module is not installed as a submodule"):
        torch.fx.symbolic_trace(uses_a_free_conv)
