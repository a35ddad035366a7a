"""TAGConv against PyG's TAGConv (values and gradients, edge weights, both flows) and the
paper's formula on a dense normalised adjacency; from_pyg."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, assert_weighted_parity, parity_graph

from graphloc.nn import GNN, TAGConv, from_pyg


@pytest.mark.parametrize("K", [0, 1, 3])
@pytest.mark.parametrize("normalize,bias", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg(K, normalize, bias, weighted):
    kwargs = dict(K=K, normalize=normalize, bias=bias)
    assert_weighted_parity(TAGConv(8, 5, **kwargs), pyg.TAGConv(8, 5, **kwargs), 51, weighted)


def test_target_to_source_flow_matches_pyg():
    edge_index, n = parity_graph(52)
    assert_parity(TAGConv(8, 5, K=2, flow="target_to_source"),
                  pyg.TAGConv(8, 5, K=2, flow="target_to_source"),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


def test_the_papers_formula_on_a_dense_adjacency():
    """sum_k (D^-1/2 A D^-1/2)^k X W_k + b, A_ij the summed weights of the edges j -> i and
    D_ii its row sums (no loops added; a node without in-edges has a zero row)."""
    edge_index, n = parity_graph(53)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1
    conv = TAGConv(8, 5, K=3).double()
    torch.nn.init.normal_(conv.bias)
    x = torch.randn(n, 8, dtype=torch.float64)
    A = torch.zeros(n, n, dtype=torch.float64).index_put_((edge_index[1], edge_index[0]),
                                                          weight, accumulate=True)
    deg = A.sum(1)
    inv_sqrt = torch.where(deg > 0, deg.pow(-0.5), torch.zeros_like(deg))
    S = inv_sqrt[:, None] * A * inv_sqrt[None, :]
    dense, h = conv.bias.clone(), x
    for lin in conv.lins:
        dense = dense + lin(h)
        h = S @ h
    torch.testing.assert_close(conv(x, edge_index, weight), dense)


def test_lazy_width():
    """PyG's TAGConv(-1, ...) fails at its first call for K >= 1 (it calls its lazy maps'
    forward directly, past the hook that sets their width); graphloc's takes the width."""
    edge_index, n = parity_graph(55)
    lazy, fixed = TAGConv(-1, 4, K=2), TAGConv(8, 4, K=2)
    x = torch.randn(n, 8)
    lazy(x, edge_index)
    lazy.load_state_dict(fixed.state_dict())
    torch.testing.assert_close(lazy(x, edge_index), fixed(x, edge_index))


def test_registry_and_from_pyg():
    edge_index, n = parity_graph(54)
    x = torch.randn(n, 8)
    assert GNN("tag", 8, 16, 3, 2)(x, edge_index).shape == (n, 3)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = pyg.TAGConv(8, 4, K=2)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index).relu()

    model = Model()
    ours = from_pyg(model, example=(x, edge_index))
    assert ours.pyg_conversion["converted"] == ["conv"] and isinstance(ours.conv, TAGConv)
    torch.testing.assert_close(ours(x, edge_index), model(x, edge_index))
    with pytest.raises(ValueError, match="TAGConv: K must be an integer >= 0, got -1"):
        TAGConv(8, 4, K=-1)

