"""LGConv against PyG's LGConv (values and gradients, edge weights, both normalisations)
and LightGCN's formula on a dense adjacency; from_pyg on PyG's LightGCN model."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_weighted_parity, parity_graph

from graphloc.nn import LGConv, from_pyg


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg(normalize, weighted):
    assert_weighted_parity(LGConv(normalize), pyg.LGConv(normalize), 61, weighted)


def test_lightgcn_formula_on_a_dense_adjacency():
    """D^-1/2 A D^-1/2 X with A_ij the summed weights of the edges j -> i and D_ii its row
    sums; no loops are added, so a node without in-edges gets 0, and weights that cancel at
    a node (degree 0) give it 0 too, not inf."""
    edge_index, n = parity_graph(62)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1
    into_zero = (edge_index[1] == 3).nonzero().flatten()
    weight[into_zero] = torch.tensor([1.0, -1.0] * (len(into_zero) // 2) + [0.0] *
                                     (len(into_zero) % 2), dtype=torch.float64)
    x = torch.randn(n, 8, dtype=torch.float64)
    A = torch.zeros(n, n, dtype=torch.float64).index_put_((edge_index[1], edge_index[0]),
                                                          weight, accumulate=True)
    deg = A.sum(1)
    inv_sqrt = torch.where(deg != 0, deg.abs().pow(-0.5) * deg.sign().where(
        deg > 0, torch.nan), torch.zeros_like(deg))
    assert float(deg[3]) == 0.0 and bool((deg[25:] == 0).all())  # isolated ids 25..29
    got = LGConv()(x, edge_index, weight)
    want = inv_sqrt[:, None] * (A @ (inv_sqrt[:, None] * x))
    torch.testing.assert_close(got, want.nan_to_num(0.0) if bool(deg.ge(0).all()) else want)
    assert bool((got[3] == 0).all()) and bool((got[25:] == 0).all())
    torch.testing.assert_close(LGConv(normalize=False)(x, edge_index, weight), A @ x)


def test_lightgcn_model_converts():
    """PyG's LightGCN model holds LGConvs: from_pyg swaps them in place, same rankings."""
    torch.manual_seed(0)
    edge_index, n = parity_graph(63)
    theirs = pyg.LightGCN(n, 8, num_layers=3).eval()
    pairs = torch.randint(0, n, (2, 12))
    ours = from_pyg(theirs, example=(edge_index, pairs))
    assert ours.pyg_conversion["converted"] == ["convs.0", "convs.1", "convs.2"]
    assert ours.pyg_conversion["checked"]
    assert all(type(conv) is LGConv for conv in ours.convs)
    with pytest.warns(UserWarning, match="no probe"):  # no width to make one at
        assert from_pyg(theirs).pyg_conversion["converted"] == ours.pyg_conversion["converted"]
    torch.testing.assert_close(ours(edge_index, pairs), theirs(edge_index, pairs))
    torch.testing.assert_close(ours.get_embedding(edge_index),
                               theirs.get_embedding(edge_index))


def test_other_aggregations_stay_pyg():
    with pytest.warns(UserWarning, match="aggr='mean'"):
        kept = from_pyg(pyg.LGConv(aggr="mean"))
    assert type(kept).__module__.startswith("torch_geometric")
