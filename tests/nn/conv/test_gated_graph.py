"""GatedGraphConv against PyG's GatedGraphConv (values and gradients, every aggregation, edge
weights) and the paper's recurrence written with a dense adjacency; its errors; from_pyg."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_weighted_parity, parity_graph

from graphloc import Graph
from graphloc.nn import GatedGraphConv, from_pyg


@pytest.mark.parametrize("aggr", ["add", "mean", "max", "min"])
@pytest.mark.parametrize("num_layers,bias", [(0, True), (3, True), (2, False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg(aggr, num_layers, bias, weighted):
    kwargs = dict(num_layers=num_layers, aggr=aggr, bias=bias)
    assert_weighted_parity(GatedGraphConv(12, **kwargs), pyg.GatedGraphConv(12, **kwargs), 61,
                           weighted)


def test_the_recurrence_on_a_dense_adjacency():
    """h0 = [x, 0]; m = A (h W_l) with A_ij the summed weights of the edges j -> i; h = GRU(m,
    h), the GRU's gates written out (torch's GRUCell equations)."""
    edge_index, n = parity_graph(62)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1
    conv = GatedGraphConv(6, num_layers=2).double()
    x = torch.randn(n, 4, dtype=torch.float64)
    A = torch.zeros(n, n, dtype=torch.float64).index_put_((edge_index[1], edge_index[0]),
                                                          weight, accumulate=True)
    rnn = conv.rnn
    h = torch.cat([x, x.new_zeros(n, 2)], dim=1)
    for step in range(2):
        m = A @ (h @ conv.weight[step])
        gi = m @ rnn.weight_ih.t() + rnn.bias_ih
        gh = h @ rnn.weight_hh.t() + rnn.bias_hh
        r = torch.sigmoid(gi[:, :6] + gh[:, :6])
        z = torch.sigmoid(gi[:, 6:12] + gh[:, 6:12])
        candidate = torch.tanh(gi[:, 12:] + r * gh[:, 12:])
        h = (1 - z) * candidate + z * h
    torch.testing.assert_close(conv(x, edge_index, weight), h)


def test_bad_calls_are_refused_by_name():
    edge_index, n = parity_graph(63)
    with pytest.raises(ValueError, match="x has 9 channels, more than out_channels=8"):
        GatedGraphConv(8, 2)(torch.randn(n, 9), edge_index)
    with pytest.raises(ValueError, match="aggr must be one of .* got 'mul'"):
        GatedGraphConv(8, 2, aggr="mul")
    with pytest.raises(ValueError, match="num_layers must be an integer >= 0, got -1"):
        GatedGraphConv(8, -1)
    bipartite = Graph.bipartite(torch.tensor([[0, 1], [0, 0]]), (2, 1))
    with pytest.raises(ValueError, match="GatedGraphConv .* needs a graph on one node set"):
        GatedGraphConv(8, 2)(torch.randn(2, 8), bipartite)


def test_from_pyg_converts_it_and_keeps_what_it_cannot_fuse():
    edge_index, n = parity_graph(64)
    x = torch.randn(n, 5)
    theirs = pyg.GatedGraphConv(8, 3, aggr="mean")
    ours = from_pyg(theirs)  # a random probe of width out_channels
    assert isinstance(ours, GatedGraphConv) and ours.pyg_conversion["checked"]
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    with pytest.warns(UserWarning, match="aggr='mul'"):
        kept = from_pyg(pyg.GatedGraphConv(8, 3, aggr="mul"), example=(x, edge_index))
    assert isinstance(kept, pyg.GatedGraphConv)
