import random

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_twins_agree, seeded_twins
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _signed_graph(seed=0, n=14):
    """``(x, pos_edge_index, neg_edge_index)`` in float64: loops, parallel edges, a hub,
    isolated nodes, and a node with only negative neighbours."""
    pos = random_edge_index(n - 2, 40, seed=seed, hub_degree=9)
    neg = random_edge_index(n - 2, 25, seed=seed + 100)
    neg = torch.cat([neg, torch.tensor([[0, 1], [n - 2, n - 2]])], dim=1)
    pos = pos[:, pos[1] != n - 2]
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, dtype=torch.float64, generator=gen), pos, neg


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
def test_matches_pyg_with_gradients(first, aggr):
    x, pos, neg = _signed_graph()
    if aggr == "max":  # (tied messages: graphloc's max sends the gradient to one winner)
        pos, neg = torch.unique(pos, dim=1), torch.unique(neg, dim=1)
    ours, theirs = seeded_twins("SignedConv", 8 if first else 4, 5, first, aggr=aggr)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, pos, neg))


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_a_bipartite_pair_and_a_flow_match_pyg(flow):
    x, pos, neg = _signed_graph(seed=1)
    for first in (True, False):
        ours, theirs = seeded_twins("SignedConv", 8 if first else 4, 3, first, flow=flow)
        assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, pos, neg))
    ours, theirs = seeded_twins("SignedConv", 8, 3, True)
    keep_pos, keep_neg = pos[:, pos[1] < 6], neg[:, neg[1] < 6]
    assert_twins_agree(ours, theirs, [x, x[:6]],
                       lambda conv, a, b: conv((a, b), keep_pos, keep_neg))


def _dense_signed(conv, x, pos, neg):
    """The paper's layers node by node: means over the positive and the negative
    in-neighbours (0 without any); a later layer's halves cross over the negative edges."""
    def mean(edges, i, features):
        into = edges[0, edges[1] == i]
        return features[into].mean(0) if into.numel() else torch.zeros_like(features[0])
    rows = []
    for i in range(x.size(0)):
        if conv.first_aggr:
            h_pos = conv.lin_pos_l(mean(pos, i, x)) + conv.lin_pos_r(x[i])
            h_neg = conv.lin_neg_l(mean(neg, i, x)) + conv.lin_neg_r(x[i])
        else:
            F = conv.in_channels
            balanced, unbalanced = x[:, :F], x[:, F:]
            h_pos = conv.lin_pos_l(torch.cat([mean(pos, i, balanced), mean(neg, i, unbalanced)])) \
                + conv.lin_pos_r(balanced[i])
            h_neg = conv.lin_neg_l(torch.cat([mean(pos, i, unbalanced), mean(neg, i, balanced)])) \
                + conv.lin_neg_r(unbalanced[i])
        rows.append(torch.cat([h_pos, h_neg]))
    return torch.stack(rows)


@pytest.mark.parametrize("first", [True, False])
def test_the_formula_node_by_node(first):
    x, pos, neg = _signed_graph(seed=2)
    torch.manual_seed(3)
    conv = gl.SignedConv(8 if first else 4, 3, first).double()
    want = _dense_signed(conv, x, pos, neg)
    torch.testing.assert_close(conv(x, pos, neg), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, pos, neg), want)


def test_special_values_give_pygs_numbers():
    x, pos, neg = _signed_graph(seed=4)
    x[3, 1], x[5, 0], x[6, 6] = float("nan"), float("inf"), float("-inf")
    for first in (True, False):
        ours, theirs = seeded_twins("SignedConv", 8 if first else 4, 3, first)
        torch.testing.assert_close(ours(x, pos, neg), theirs(x, pos, neg), equal_nan=True)
        empty = torch.empty(2, 0, dtype=torch.long)
        torch.testing.assert_close(ours(x, empty, empty), theirs(x, empty, empty),
                                   equal_nan=True)


def test_sparse_adjacencies_graphs_and_static_batches_match_pyg():
    x, pos, neg = _signed_graph(seed=5)
    pos, neg = torch.unique(pos, dim=1), torch.unique(neg, dim=1)
    ours, theirs = seeded_twins("SignedConv", 4, 3, False)
    want = theirs(x, pos, neg)
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor):
        adjs = [to_sparse(edges.flip(0), size=(14, 14)) for edges in (pos, neg)]
        torch.testing.assert_close(ours(x, *adjs), want)
    torch.testing.assert_close(ours(x, Graph(pos, num_nodes=14), Graph(neg, num_nodes=14)),
                               want)
    torch.testing.assert_close(ours(torch.stack([x, 2 * x]), pos, neg),
                               torch.stack([want, theirs(2 * x, pos, neg)]))


def test_from_pyg_converts_a_signed_gcn():
    torch.manual_seed(0)
    model = pyg.SignedGCN(8, 6, num_layers=3, lamb=5).double()
    x, pos, neg = _signed_graph(seed=6)
    converted = from_pyg(model, example=(x, pos, neg))
    assert all(type(conv) is gl.SignedConv for conv in (converted.conv1, *converted.convs))
    torch.testing.assert_close(converted(x, pos, neg), model(x, pos, neg))
    z = converted(x, pos, neg)
    losses = []
    for net in (converted, model):  # (its loss samples negative pairs: one seed for both)
        torch.manual_seed(1)
        random.seed(1)
        losses.append(net.loss(z, pos, neg))
    torch.testing.assert_close(*losses)


def test_bad_arguments_are_named():
    x, pos, neg = _signed_graph(seed=7)
    for kwargs, match in (({"out_channels": 0}, "SignedConv: out_channels"),
                          ({"first_aggr": "yes"}, "first_aggr"),
                          ({"aggr": "lstm"}, "SignedConv: aggr"),
                          ({"flow": "up"}, "SignedConv: flow")):
        with pytest.raises((ValueError, TypeError), match=match):
            gl.SignedConv(**{"in_channels": 4, "out_channels": 3, "first_aggr": False,
                             **kwargs})
    conv = gl.SignedConv(4, 3, False).double()
    with pytest.raises(ValueError, match=r"SignedConv expects x of shape \[N, 8\], got "
                                         r"\[14, 4\]"):
        conv(x[:, :4], pos, neg)
    with pytest.raises(ValueError, match="its root maps"):
        conv((x, None), pos, neg)
    with pytest.raises(ValueError, match=r"^neg_edge_index: edge_index\[0\] holds 1\d\d"):
        conv(x, pos, neg + 100)
    with pytest.raises(TypeError, match="^pos_edge_index: .*got NoneType"):
        conv(x, None, neg)
    with pytest.raises(TypeError, match="^SignedConv expects floating-point node features"):
        conv(x.long(), pos, neg)
