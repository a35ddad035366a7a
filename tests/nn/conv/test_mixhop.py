"""MixHopConv against PyG's MixHopConv (values and gradients, edge weights, powers in any
order, repeated or skipped) and the paper's formula on a dense normalised adjacency;
from_pyg."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, one_loop_per_node, parity_graph

from graphloc import Graph
from graphloc.nn import MixHopConv, from_pyg


@pytest.mark.parametrize("powers", [None, [0, 1, 2, 4], [2, 0], [3], [1, 1]])
@pytest.mark.parametrize("add_self_loops,bias", [(True, True), (False, False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg(powers, add_self_loops, bias, weighted):
    edge_index, n = one_loop_per_node(*parity_graph(91))
    kwargs = dict(powers=powers, add_self_loops=add_self_loops, bias=bias)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64, requires_grad=True) \
        if weighted else None
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(MixHopConv(8, 5, **kwargs), pyg.MixHopConv(8, 5, **kwargs),
                  lambda m, x: m(x, graph, weight), lambda m, x: m(x, edge_index, weight),
                  torch.randn(n, 8), extra=(weight,) if weighted else ())


def test_the_papers_formula_on_a_dense_adjacency():
    """[S^p X W_p for p in powers] + b side by side, S = D^-1/2 (A + I) D^-1/2."""
    edge_index, n = parity_graph(92)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    conv = MixHopConv(8, 5, powers=[0, 3, 1]).double()
    torch.nn.init.normal_(conv.bias)
    x = torch.randn(n, 8, dtype=torch.float64)
    A = torch.zeros(n, n, dtype=torch.float64).index_put_(
        (edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.float64),
        accumulate=True) + torch.eye(n, dtype=torch.float64)
    inv_sqrt = A.sum(1).pow(-0.5)
    S = inv_sqrt[:, None] * A * inv_sqrt[None, :]
    want = torch.cat([torch.linalg.matrix_power(S, p) @ x @ conv.lins[p].weight.t()
                      for p in (0, 3, 1)], dim=1) + conv.bias
    torch.testing.assert_close(conv(x, edge_index), want)
    assert isinstance(conv.lins[2], torch.nn.Identity)  # PyG's layout: no map for power 2


def test_bad_powers_are_named():
    for powers in ([], [-1, 2], [1.5], "12"):
        with pytest.raises(ValueError, match="MixHopConv: powers must be a non-empty list"):
            MixHopConv(8, 5, powers=powers)


def test_converts():
    edge_index, n = parity_graph(93)
    x = torch.randn(n, 8)
    theirs = pyg.MixHopConv(8, 5, powers=[1, 3]).eval()
    ours = from_pyg(theirs, example=(x, edge_index))
    assert type(ours) is MixHopConv and ours.powers == [1, 3]
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
