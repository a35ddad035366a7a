"""GraphConv against PyG's, with the same weights: every aggregation, edge weights, sparse
adjacencies, bipartite inputs and conversion."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, parity_graph
from torch_geometric.utils import to_torch_coo_tensor

from graphloc import Graph
from graphloc.nn import GNN, GraphConv, from_pyg


@pytest.mark.parametrize("aggr", ["add", "mean", "max", "min"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_graph_conv_is_pygs(aggr, weighted, bias):
    edge_index, n = parity_graph(31)  # loops, parallel edges, isolated nodes
    weight = torch.randn(edge_index.size(1), dtype=torch.float64) if weighted else None
    graph = Graph(edge_index, num_nodes=n)
    for ours_graph in (edge_index, graph):
        assert_parity(GraphConv(5, 4, aggr=aggr, bias=bias),
                      pyg.GraphConv(5, 4, aggr=aggr, bias=bias),
                      lambda m, x, g=ours_graph: m(x, g, weight),
                      lambda m, x: m(x, edge_index, weight), torch.randn(n, 5))


def test_graph_conv_other_aggregations_and_inputs_are_pygs():
    """Unweighted aggregations (softmax, and median from PyG), a torch.sparse adjacency
    whose values weight the neighbours, and a bipartite pair with x_dst None (no root)."""
    edge_index, n = parity_graph(32)
    for aggr in ("softmax", "median"):
        assert_parity(GraphConv(5, 4, aggr=aggr), pyg.GraphConv(5, 4, aggr=aggr),
                      lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                      torch.randn(n, 5))
    unique = torch.unique(edge_index, dim=1)  # a sparse matrix holds each edge once
    values = torch.rand(unique.size(1), dtype=torch.float64) + 0.5
    adj = to_torch_coo_tensor(unique.flip(0), values, size=(n, n))
    assert_parity(GraphConv(5, 4), pyg.GraphConv(5, 4), lambda m, x: m(x, adj),
                  lambda m, x: m(x, unique, values), torch.randn(n, 5))
    src, dst = torch.randint(0, 7, (20,)), torch.randint(0, 4, (20,))
    pair = torch.stack([src, dst])
    x_dst = torch.randn(4, 3, dtype=torch.float64)
    assert_parity(GraphConv((5, 3), 4), pyg.GraphConv((5, 3), 4),
                  lambda m, x: m((x, x_dst), pair), lambda m, x: m((x, x_dst), pair),
                  torch.randn(7, 5))
    assert_parity(GraphConv((5, 3), 4), pyg.GraphConv((5, 3), 4),
                  lambda m, x: m((x, None), pair, size=(7, 4)),
                  lambda m, x: m((x, None), pair, size=(7, 4)), torch.randn(7, 5))


@pytest.mark.parametrize("aggr", ["softmax", "std", "var", "powermean", "max"])
def test_graph_conv_weights_the_messages_of_every_aggregation_as_pyg(aggr):
    """Aggregations that cannot weight neighbours in a fused product reduce the weighted
    messages e_ji * x_j, as PyG's GraphConv does: outputs and gradients (of x, the
    parameters and the edge weights) on an unsorted graph with parallel edges."""
    edge_index, n = parity_graph(33)
    weight = (torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5).requires_grad_()
    assert_parity(GraphConv(5, 4, aggr=aggr), pyg.GraphConv(5, 4, aggr=aggr),
                  lambda m, x: m(x, edge_index, weight),
                  lambda m, x: m(x, edge_index, weight), torch.randn(n, 5), extra=(weight,))


def test_graph_conv_weighted_lstm_needs_sorted_edges_as_pyg():
    """The LSTM reads each node's neighbours in edge order: sorted edges give PyG's result
    with weights, unsorted ones are refused (as PyG refuses them) even though the weighted
    messages are listed by destination."""
    edge_index, n = parity_graph(35)
    edge_index = edge_index[:, torch.sort(edge_index[1], stable=True).indices]
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    torch.manual_seed(0)
    assert_parity(GraphConv(5, 4, aggr="lstm", aggr_kwargs=dict(in_channels=5, out_channels=5)),
                  pyg.GraphConv(5, 4, aggr="lstm",
                                aggr_kwargs=dict(in_channels=5, out_channels=5)),
                  lambda m, x: m(x, edge_index, weight), lambda m, x: m(x, edge_index, weight),
                  torch.randn(n, 5))
    with pytest.raises(ValueError, match="not sorted"):
        GraphConv(5, 4, aggr="lstm", aggr_kwargs=dict(in_channels=5, out_channels=5))(
            torch.randn(n, 5), edge_index.flip(1), weight)


def test_graph_conv_bad_input():
    edge_index, n = parity_graph(33)
    x = torch.randn(n, 5)
    with pytest.raises(ValueError, match=r"GraphConv: edge_weight has 3 rows but the graph "
                                         r"has \d+ edges"):
        GraphConv(5, 4)(x, edge_index, torch.ones(3))
    with pytest.raises(ValueError, match=r"GraphConv expects x of shape \[N, 5\]"):
        GraphConv(5, 4)(torch.randn(n, 6), edge_index)
    assert repr(GraphConv(5, 4, aggr="mean")) == repr(pyg.GraphConv(5, 4, aggr="mean"))


def test_graph_conv_converts_and_stacks():
    torch.manual_seed(0)
    edge_index, n = parity_graph(34)
    x = torch.randn(n, 5)
    theirs = pyg.GraphConv(5, 4, aggr="max").eval()
    ours = from_pyg(theirs, example=(x, edge_index), strict=True)
    assert isinstance(ours, GraphConv)
    weight = torch.rand(edge_index.size(1))
    torch.testing.assert_close(ours(x, edge_index, weight), theirs(x, edge_index, weight))
    with pytest.warns(UserWarning, match="aggr='softmax'"):
        kept = from_pyg(pyg.GraphConv(5, 4, aggr="softmax").eval(), example=(x, edge_index))
    assert type(kept).__module__.startswith("torch_geometric")
    model = GNN("graphconv", 5, 8, 3, num_layers=2)
    assert model(x, edge_index).shape == (n, 3)


def test_graph_conv_empty_graphs_and_special_values_are_pygs():
    """No edges, no nodes, and NaN / -inf features: PyG's outputs (NaN propagated)."""
    torch.manual_seed(0)
    ours, theirs = GraphConv(3, 2, aggr="max"), pyg.GraphConv(3, 2, aggr="max")
    ours.load_state_dict(theirs.state_dict())
    no_edges = torch.empty(2, 0, dtype=torch.long)
    for x in (torch.randn(4, 3), torch.randn(0, 3)):
        torch.testing.assert_close(ours(x, no_edges), theirs(x, no_edges))
    edge_index, n = parity_graph(35)
    x = torch.randn(n, 3)
    x[3, 0], x[7, 1] = float("nan"), float("-inf")
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index), equal_nan=True)


def test_graph_conv_weighted_messages_on_pairs_and_special_weights_as_pyg():
    """The weighted-message path on a bipartite pair (x_src, x_dst) with a hub and isolated
    destinations, and with NaN and inf weights: PyG's outputs, NaN where PyG's are."""
    gen = torch.Generator().manual_seed(5)
    src = torch.cat([torch.randint(0, 7, (20,), generator=gen), torch.arange(7)])
    dst = torch.cat([torch.randint(0, 3, (20,), generator=gen), torch.zeros(7, dtype=torch.long)])
    pair = torch.stack([src, dst])  # destination 0 a hub, 3 isolated
    x_dst = torch.randn(4, 3, dtype=torch.float64)
    weight = (torch.rand(27, dtype=torch.float64, generator=gen) + 0.5).requires_grad_()
    assert_parity(GraphConv((5, 3), 4, aggr="std"), pyg.GraphConv((5, 3), 4, aggr="std"),
                  lambda m, x: m((x, x_dst), pair, weight),
                  lambda m, x: m((x, x_dst), pair, weight), torch.randn(7, 5), extra=(weight,))
    special = weight.detach().clone()
    special[3], special[8] = float("nan"), float("inf")
    ours, theirs = GraphConv((5, 3), 4, aggr="var").double(), pyg.GraphConv((5, 3), 4,
                                                                          aggr="var").double()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(7, 5, dtype=torch.float64)
    got, want = ours((x, x_dst), pair, special), theirs((x, x_dst), pair, special)
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got.nan_to_num(), want.nan_to_num())
