"""DirGNNConv against PyG's DirGNNConv with the same weights (PyG's convs inside both, and
graphloc's), on an edge_index, a Graph and a sparse adj_t, and against Dir-GNN's formula
written out with the two directions' convs."""

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import assert_reaches_exactly
from parity import assert_parity, parity_graph
from torch_geometric.utils import coalesce, to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph

CONVS = [lambda m: m.SAGEConv(8, 6), lambda m: m.GCNConv(8, 6),
         lambda m: m.GATConv(8, 6, heads=2, concat=False), lambda m: m.GraphConv(8, 6, aggr="mean"),
         lambda m: m.ResGatedGraphConv(8, 6)]


@pytest.mark.parametrize("make", CONVS)
@pytest.mark.parametrize("inner", ["graphloc", "pyg"])
@pytest.mark.parametrize("kwargs", [{}, {"alpha": 0.2, "root_weight": False}])
def test_matches_pyg(make, inner, kwargs):
    edge_index, n = parity_graph(81)
    conv = make(gl if inner == "graphloc" else pyg)
    assert_parity(gl.DirGNNConv(conv, **kwargs), pyg.DirGNNConv(make(pyg), **kwargs),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


@pytest.mark.parametrize("make", CONVS)
def test_pygs_wrapper_around_graphlocs_conv_is_pygs_model(make):
    # PyG's DirGNNConv switches root_weight / add_self_loops off on its copies after
    # building them: graphloc's convs must read the flags as PyG's do
    edge_index, n = parity_graph(82)
    assert_parity(pyg.DirGNNConv(make(gl)), pyg.DirGNNConv(make(pyg)),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc])
def test_a_graph_or_sparse_adjacency_gives_what_the_edges_give(layout):
    edge_index, n = parity_graph(83)
    edge_index = coalesce(edge_index)  # an adjacency's repeated entry is one weighted edge
    conv = gl.DirGNNConv(gl.SAGEConv(8, 6), alpha=0.3)
    x = torch.randn(n, 8)
    want = conv(x, edge_index)
    adj = to_torch_coo_tensor(edge_index.flip(0), size=(n, n)).to_sparse(layout=layout)
    torch.testing.assert_close(conv(x, adj), want)
    torch.testing.assert_close(conv(x, Graph(edge_index, num_nodes=n)), want)


def test_the_formula_with_the_two_convs():
    edge_index, n = parity_graph(84)
    conv = gl.DirGNNConv(gl.GCNConv(8, 6), alpha=0.7)
    x = torch.randn(n, 8)
    along = gl.GCNConv(8, 6, add_self_loops=False)
    against = gl.GCNConv(8, 6, add_self_loops=False)
    along.load_state_dict(conv.conv_in.state_dict())
    against.load_state_dict(conv.conv_out.state_dict())
    want = 0.7 * against(x, edge_index.flip(0)) + 0.3 * along(x, edge_index) + conv.lin(x)
    torch.testing.assert_close(conv(x, edge_index), want)
    assert not conv.conv_in.add_self_loops and str(conv) == \
        "DirGNNConv(GCNConv(8, 6), alpha=0.7)"


def test_static_graphs_and_bad_arguments():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    assert gl.DirGNNConv(gl.SAGEConv(16, 32))(torch.randn(3, 4, 16), edge_index).shape == \
        (3, 4, 32)
    with pytest.raises(ValueError, match="alpha must be a finite number"):
        gl.DirGNNConv(gl.SAGEConv(16, 32), alpha=float("inf"))
    with pytest.raises(ValueError, match="integer in_channels >= 1"):
        gl.DirGNNConv(gl.SAGEConv(-1, 32))
    with pytest.raises(TypeError, match="conv must be a module"):
        gl.DirGNNConv(3)
    with pytest.raises(TypeError, match="edge_index"):
        gl.DirGNNConv(gl.SAGEConv(16, 32))(torch.randn(4, 16), [[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="bipartite"):
        gl.DirGNNConv(gl.SAGEConv(16, 32))(
            torch.randn(4, 16), Graph.bipartite(torch.tensor([[0], [1]]), (4, 2)))


def test_declared_reach_is_the_convs():
    # the reversed copy reads the path's far end too, but the node at its end has no
    # out-neighbours: its output reads the nodes up to K back, along the edges
    conv = gl.DirGNNConv(gl.TAGConv(4, 3, K=2)).double()
    assert conv.graphloc_hops == 2
    assert_reaches_exactly(conv, 2, 4)
    assert gl.DirGNNConv(gl.GCNConv(4, 3)).graphloc_hops == 1
    assert gl.DirGNNConv(pyg.GCNConv(4, 3)).graphloc_hops is None  # unknown
