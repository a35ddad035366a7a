"""GATv2Conv against PyG's GATv2Conv (values, gradients, attention weights) and a dense
per-destination re-implementation of the paper's formula."""

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg
from parity import (
    assert_attention_weights_parity,
    assert_edge_feature_parity,
    assert_parity,
    parity_graph,
)

from graphloc import Graph
from graphloc.nn import GATConv, GATv2Conv, from_pyg


@pytest.mark.parametrize("heads,concat", [(1, True), (3, True), (3, False)])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("bias,residual,share_weights",
                         [(True, False, False), (False, True, False), (True, True, True)])
def test_gatv2_matches_pyg(heads, concat, add_self_loops, bias, residual, share_weights):
    edge_index, n = parity_graph(31)
    kwargs = dict(heads=heads, concat=concat, add_self_loops=add_self_loops, bias=bias,
                  residual=residual, share_weights=share_weights, negative_slope=0.15)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(GATv2Conv(8, 5, **kwargs), pyg.GATv2Conv(8, 5, **kwargs),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


@pytest.mark.parametrize("fill_value", ["mean", "max", "mul", 0.5, None,  # None: ones
                                        torch.tensor([0.5, -1.0, 2.0]),  # one per feature
                                        torch.tensor(0.25)])
def test_gatv2_with_edge_features_matches_pyg(fill_value):
    assert_edge_feature_parity(GATv2Conv, pyg.GATv2Conv, fill_value, seed=32)


@pytest.mark.parametrize("share_weights", [False, True])
def test_gatv2_bipartite_matches_pyg(share_weights):
    edge_index = torch.tensor([[0, 1, 2, 3, 3, 4], [0, 0, 1, 1, 2, 2]])
    x_dst = torch.randn(3, 6, dtype=torch.float64)
    widths = (6, 6) if share_weights else (7, 6)
    ours = GATv2Conv(widths, 4, heads=2, share_weights=share_weights, residual=True)
    theirs = pyg.GATv2Conv(widths, 4, heads=2, share_weights=share_weights, residual=True)
    assert_parity(ours, theirs, lambda m, xs: m((xs, x_dst), edge_index, size=(5, 3)),
                  lambda m, xs: m((xs, x_dst), edge_index), torch.randn(5, widths[0]))
    with pytest.raises(ValueError, match="GATv2Conv needs destination features"):
        ours((torch.randn(5, widths[0]).double(), None), edge_index, size=(5, 3))


def test_gatv2_attention_weights_match_pyg():
    edge_index, n = parity_graph(33)
    assert_attention_weights_parity(GATv2Conv(6, 4, heads=2), pyg.GATv2Conv(6, 4, heads=2),
                                    torch.randn(n, 6), edge_index)


def test_gatv2_is_the_papers_formula():
    """Per destination i, a dense softmax over its in-neighbours and itself of
    a . LeakyReLU(W_l x_j + W_r x_i), then the weighted sum of W_l x_j (float64)."""
    torch.manual_seed(0)
    n, H, C = 9, 2, 3
    edge_index = torch.tensor([[1, 2, 3, 0, 4, 5, 8, 8], [0, 0, 0, 1, 1, 2, 2, 7]])
    conv = GATv2Conv(4, C, heads=H).double()
    x = torch.randn(n, 4, dtype=torch.float64)
    xl = conv.lin_l(x).view(n, H, C)
    xr = conv.lin_r(x).view(n, H, C)
    rows = []
    for i in range(n):
        sources = torch.cat([edge_index[0][edge_index[1] == i], torch.tensor([i])])
        e = (F.leaky_relu(xl[sources] + xr[i], 0.2) * conv.att[0]).sum(-1)  # [S, H]
        w = torch.softmax(e, dim=0)
        rows.append((w.unsqueeze(-1) * xl[sources]).sum(0).reshape(-1))
    torch.testing.assert_close(conv(x, edge_index), torch.stack(rows) + conv.bias)


def test_gatv2_dropout_only_in_training_and_bad_arguments():
    edge_index, n = parity_graph(34)
    conv, x = GATv2Conv(4, 4, heads=2, dropout=0.5), torch.randn(n, 4)
    conv.eval()
    torch.testing.assert_close(conv(x, edge_index), conv(x, edge_index))
    conv.train()
    assert not torch.allclose(conv(x, edge_index), conv.eval()(x, edge_index))
    with pytest.raises(ValueError, match="GATv2Conv: heads must be an integer >= 1, got 0"):
        GATv2Conv(4, 4, heads=0)
    with pytest.raises(ValueError, match=r"GATv2Conv: dropout must be a probability in "
                                         r"\[0, 1\], got 1.5"):
        GATv2Conv(4, 4, dropout=1.5)
    for slope in (float("nan"), float("inf"), "0.2"):
        for cls in (GATv2Conv, GATConv):
            with pytest.raises(ValueError, match=rf"{cls.__name__}: negative_slope must be a "
                                                 r"finite number"):
                cls(4, 4, negative_slope=slope)
    with pytest.raises(ValueError, match="GATv2Conv expects x of shape \\[N, 4\\]"):
        GATv2Conv(4, 4)(torch.randn(n, 5), edge_index)


def test_gatv2_initialisation_follows_pygs_bounds():
    """Glorot weights, lin_l/lin_r biases uniform in +-1/sqrt(in), a zero output bias."""
    torch.manual_seed(0)
    conv = GATv2Conv(64, 32, heads=4)
    assert conv.lin_l.bias.abs().max() <= 1 / 8 and conv.lin_l.bias.std() > 0.03
    bound = (6 / (64 + 128)) ** 0.5
    assert conv.lin_r.weight.abs().max() <= bound and conv.lin_r.weight.std() > bound / 3
    assert conv.att.abs().max() <= (6 / (4 + 32)) ** 0.5
    assert torch.count_nonzero(conv.bias) == 0
    lazy = GATv2Conv(-1, 32, heads=4)
    lazy(torch.randn(5, 64), torch.tensor([[0, 1], [1, 2]]))  # the width known: initialised
    assert lazy.lin_l.bias.abs().max() <= 1 / 8 and lazy.lin_l.bias.std() > 0.03


def test_from_pyg_converts_gatv2_and_pygs_gat_model_with_v2():
    edge_index, n = parity_graph(35)
    x = torch.randn(n, 8)
    for theirs in (pyg.GATv2Conv(8, 3, heads=2, share_weights=True),
                   pyg.GAT(8, 12, 2, 4, v2=True, heads=3)):
        ours = from_pyg(theirs.eval(), (x, edge_index), strict=True)
        assert any(isinstance(m, GATv2Conv) for m in ours.modules())
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
