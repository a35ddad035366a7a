"""Bipartite message passing, ``conv((x_src, x_dst), edge_index)``, against PyG's layers:
same weights, same outputs and gradients (both feature matrices and every parameter)."""

import pytest
import torch
import torch_geometric.nn as pyg

from graphloc import Graph
from graphloc.nn import GATConv, GINConv, GINEConv, SAGEConv, TransformerConv


def bipartite_edges(num_src: int, num_dst: int, num_edges: int = 60, seed: int = 0):
    """Edges from the first num_src - 2 sources into the first num_dst - 2 destinations (so
    isolated nodes on both sides), with parallel edges and i -> i pairs."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src - 2, (num_edges,), generator=gen)
    dst = torch.randint(0, num_dst - 2, (num_edges,), generator=gen)
    edge_index = torch.stack([src, dst])
    return torch.cat([edge_index, edge_index[:, :5], torch.arange(3).expand(2, -1)], dim=1)


def assert_bipartite_parity(ours, theirs, num_src, num_dst, widths, edge_attr=None,
                            as_graph=False, **call):
    ours.load_state_dict(theirs.state_dict(), strict=True)
    ours, theirs = ours.double(), theirs.double()
    edge_index = bipartite_edges(num_src, num_dst)
    structure = Graph.bipartite(edge_index, (num_src, num_dst)) if as_graph else edge_index
    gen = torch.Generator().manual_seed(1)
    x_src = torch.randn(num_src, widths[0], generator=gen, dtype=torch.float64)
    x_dst = torch.randn(num_dst, widths[1], generator=gen, dtype=torch.float64)
    extra = {} if edge_attr is None else {"edge_attr": torch.randn(
        edge_index.size(1), edge_attr, generator=gen, dtype=torch.float64)}
    inputs = [[t.clone().requires_grad_() for t in (x_src, x_dst)] for _ in range(2)]
    out1 = ours(tuple(inputs[0]), structure, **extra, **call)
    out2 = theirs(tuple(inputs[1]), edge_index, **extra, **call)
    if call.get("return_attention_weights"):
        (out1, (ei1, a1)), (out2, (ei2, a2)) = out1, out2
        assert torch.equal(ei1, ei2)
        torch.testing.assert_close(a1, a2, rtol=1e-5, atol=1e-8)
    assert out1.size(0) == num_dst
    torch.testing.assert_close(out1, out2, rtol=1e-5, atol=1e-8)
    grad = torch.randn_like(out1)
    g1 = torch.autograd.grad(out1, [*inputs[0], *ours.parameters()], grad, allow_unused=True)
    g2 = torch.autograd.grad(out2, [*inputs[1], *theirs.parameters()], grad, allow_unused=True)
    for a, b in zip(g1, g2, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)


SIZES = [(12, 7), (6, 11)]  # more sources than destinations, and fewer


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("aggr", ["mean", "max", "sum"])
@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("in_channels", [(8, 5), 8])
def test_sage(sizes, aggr, root_weight, in_channels):
    widths = in_channels if isinstance(in_channels, tuple) else (8, 8)
    kwargs = dict(aggr=aggr, root_weight=root_weight)
    assert_bipartite_parity(SAGEConv(in_channels, 6, **kwargs),
                            pyg.SAGEConv(in_channels, 6, **kwargs), *sizes, widths,
                            as_graph=aggr == "mean")


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("in_channels", [(8, 5), 8])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("concat", [True, False])
def test_gat(sizes, in_channels, add_self_loops, concat):
    widths = in_channels if isinstance(in_channels, tuple) else (8, 8)
    kwargs = dict(heads=2, concat=concat, add_self_loops=add_self_loops, residual=True)
    assert_bipartite_parity(GATConv(in_channels, 4, **kwargs), pyg.GATConv(in_channels, 4,
                                                                           **kwargs),
                            *sizes, widths, return_attention_weights=True)


@pytest.mark.parametrize("sizes,fill_value", [(SIZES[0], "mean"), (SIZES[0], 0.5),
                                              (SIZES[1], 0.5)])
def test_gat_with_edge_features(sizes, fill_value):
    """(PyG fails on "mean" with fewer sources than destinations: it scatters into the
    loop count. graphloc averages the incoming edges of the destinations that get loops.)"""
    kwargs = dict(heads=3, edge_dim=2, fill_value=fill_value)
    assert_bipartite_parity(GATConv((8, 5), 4, **kwargs), pyg.GATConv((8, 5), 4, **kwargs),
                            *sizes, (8, 5), edge_attr=2, as_graph=True)


@pytest.mark.parametrize("sizes", SIZES)
def test_gin_and_gine(sizes):
    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6))
    assert_bipartite_parity(GINConv(mlp(), train_eps=True), pyg.GINConv(mlp(), train_eps=True),
                            *sizes, (8, 8))
    assert_bipartite_parity(GINEConv(mlp(), train_eps=True, edge_dim=3),
                            pyg.GINEConv(mlp(), train_eps=True, edge_dim=3), *sizes, (8, 8),
                            edge_attr=3)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("beta", [False, True])
@pytest.mark.parametrize("edge_dim", [None, 2])
def test_transformer(sizes, beta, edge_dim):
    kwargs = dict(heads=2, beta=beta, edge_dim=edge_dim)
    assert_bipartite_parity(TransformerConv((8, 5), 4, **kwargs),
                            pyg.TransformerConv((8, 5), 4, **kwargs), *sizes, (8, 5),
                            edge_attr=edge_dim, return_attention_weights=True)


def test_bipartite_graph_and_bad_input():
    edge_index = bipartite_edges(12, 7)
    graph = Graph.bipartite(edge_index, (12, 7))
    assert (graph.num_src_nodes, graph.num_nodes, graph.is_bipartite) == (12, 7, True)
    assert repr(graph) == f"Graph(size=(12, 7), num_edges={edge_index.size(1)}, device=cpu)"
    assert graph.csc.indptr.numel() == 13 and graph.out_degree().sum() == edge_index.size(1)
    loops = graph.add_self_loops()  # one per id below both counts, as PyG's GAT
    assert loops.is_bipartite and loops.num_edges == graph.num_edges + 7
    assert graph.coalesce().num_edges == torch.unique(edge_index, dim=1).size(1)
    for method in (graph.gcn_norm, graph.to_undirected, graph.reorder):
        with pytest.raises(ValueError, match="bipartite \\(12 source, 7 destination nodes\\)"):
            method()
    with pytest.raises(ValueError, match="edge_index\\[1\\] holds 7 at column 0 but the graph "
                                         "has 7 destination nodes"):
        Graph.bipartite(torch.tensor([[0], [7]]), (12, 7))
    with pytest.raises(ValueError, match="size must be \\(num_src_nodes, num_dst_nodes\\)"):
        Graph.bipartite(edge_index, (12, -1))
    with pytest.raises(ValueError, match="holds 4 at column 0 but the graph has 0 destination"):
        Graph.bipartite(edge_index, (12, 0))  # an empty side is allowed, edges into it not
    with pytest.raises(TypeError, match="edge_index must have an integer dtype"):
        Graph.bipartite(edge_index.float(), (12, 7))
    with pytest.raises(ValueError, match="edge_index\\[0\\] holds -1"):
        Graph.bipartite(torch.tensor([[-1], [0]]), (12, 7))
    with pytest.raises(ValueError, match="edge_attr has 1 rows but edge_index has"):
        Graph.bipartite(edge_index, (12, 7), edge_attr=torch.ones(1, 2))
    conv = SAGEConv((8, 5), 6)
    x_src, x_dst = torch.randn(12, 8), torch.randn(7, 5)
    with pytest.raises(ValueError, match="SAGEConv: x_dst has 6 rows but the graph has 7 "
                                         "destination nodes"):
        conv((x_src, x_dst[:6]), graph)
    with pytest.raises(ValueError, match="expects x_dst of shape \\[N, 5\\], got \\[7, 4\\]"):
        conv((x_src, x_dst[:, :4]), graph)
    with pytest.raises(TypeError, match="expects floating-point node features x_src"):
        conv((x_src.long(), x_dst), graph)
    with pytest.raises(TypeError, match="a pair \\(x_src, x_dst\\) of tensors"):
        conv((x_src, "x_dst"), graph)
    with pytest.raises(ValueError, match="x has 7 rows but the graph has 12 source nodes"):
        from graphloc import ops
        ops.spmm(graph, x_dst)
