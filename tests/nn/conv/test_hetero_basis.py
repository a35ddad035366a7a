"""graphloc's HeteroBasisConv: a conv's copies, each message weighed by its edge type's
weight per copy, against a dense re-implementation (the transform around it:
tests/nn/test_fx.py)."""

import pytest
import torch

import graphloc.nn as gl
from graphloc.nn.conv._base import message_weights
from graphloc.nn.conv.hetero_basis import HeteroBasisConv

pytest.importorskip("torch_geometric")


def test_the_basis_conv_checks_its_edge_types():
    basis = HeteroBasisConv(gl.SAGEConv(4, 4), num_relations=3, num_bases=2)
    x, edge_index = torch.randn(5, 4), torch.tensor([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match="edge_type holds 3 but dim_size is 3"):
        basis(torch.tensor([0, 1, 3]), x, edge_index)
    with pytest.raises(ValueError, match=r"the edge-type weights has shape \[2\].*3 edges"):
        basis(torch.tensor([0, 1]), x, edge_index)
    edge_type = torch.tensor([2, 0, 2])
    out = basis(edge_type, x, edge_index)
    # dense: each copy's mean of the weighted messages, plus its root term; summed
    degree = torch.zeros(5).index_add(0, edge_index[1], torch.ones(3)).clamp(min=1)
    want = sum(conv.lin_l(torch.zeros(5, 4).index_add(
        0, edge_index[1], x[edge_index[0]] * conv.edge_type_weight[0, edge_type, None])
        / degree[:, None]) + conv.lin_r(x) for conv in basis.convs)
    torch.testing.assert_close(out, want)


def test_a_nan_weight_reaches_only_its_edges_destination_and_no_edges_leave_the_root():
    """torch semantics: a NaN edge-type weight makes its edges' destinations NaN and no
    other row; a graph without edges gives each copy's root term alone."""
    torch.manual_seed(0)
    basis = HeteroBasisConv(gl.GraphConv(4, 3), num_relations=2, num_bases=2)
    x = torch.randn(5, 4)
    edge_index, edge_type = torch.tensor([[0, 1, 2], [1, 2, 3]]), torch.tensor([0, 1, 0])
    with torch.no_grad():
        basis.convs[1].edge_type_weight[0, 1] = float("nan")
    out = basis(edge_type, x, edge_index)
    assert out[2].isnan().all() and not out[[0, 1, 3, 4]].isnan().any()
    empty = basis(torch.empty(0, dtype=torch.long), x, torch.empty(2, 0, dtype=torch.long))
    want = sum(conv.lin_root(x) + conv.lin_rel.bias for conv in basis.convs)
    torch.testing.assert_close(empty, want)


def test_copies_are_drawn_apart_and_take_the_convs_dtype():
    conv = gl.SAGEConv(4, 4).double()
    basis = HeteroBasisConv(conv, num_relations=3, num_bases=2)
    first, second = basis.convs
    assert first.edge_type_weight.dtype == torch.float64 and \
        first.edge_type_weight.shape == (1, 3)
    assert not torch.equal(first.lin_l.weight, second.lin_l.weight)
    assert not torch.equal(first.edge_type_weight, second.edge_type_weight)
    assert basis.convs[0] is not conv  # copies: the conv passed stays as it was


def test_a_conv_that_cannot_weigh_its_messages_is_refused():
    with pytest.raises(ValueError, match="SignedConv cannot weigh its messages edge by edge"):
        HeteroBasisConv(gl.SignedConv(8, 4, first_aggr=True), num_relations=2,
                        num_bases=2)
    with pytest.raises(ValueError, match="num_bases must be an integer >= 1, got 0"):
        HeteroBasisConv(gl.SAGEConv(4, 4), num_relations=2, num_bases=0)


def test_bad_edge_types_and_weights_are_named():
    basis = HeteroBasisConv(gl.SAGEConv(4, 4), num_relations=3, num_bases=2)
    x, edge_index = torch.randn(5, 4), torch.tensor([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(TypeError, match=r"edge_type must be an integer tensor \(int8, int16, "
                                        r"int32, int64 or uint8\), got torch.float32"):
        basis(torch.tensor([0.0, 1.0, 2.0]), x, edge_index)
    with pytest.raises(ValueError, match="edge_type holds -1; indices must be >= 0"):
        basis(torch.tensor([0, -1, 2]), x, edge_index)
    with pytest.raises(ValueError, match="SAGEConv: the edge-type weights must be a "
                                         "floating-point tensor, got torch.int64"):
        with message_weights(basis.convs[0], torch.tensor([1, 2, 3])):
            basis.convs[0](x, edge_index)
