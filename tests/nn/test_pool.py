"""PANPooling against PyG's own PANPooling, which runs here once its path matrix comes as an
object with torch-sparse's coo() (its forward reads nothing else): kept nodes, features,
edges, weights, batch and scores, for ratios, counts and min_score, on batches of graphs;
then where graphloc's differs (a float ratio of 1.0) and bad arguments."""

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index
from parity import CooOnly

from graphloc.nn import PANConv, PANPooling


def pooled_case(seed: int, sizes=(5, 9, 1, 7)):
    """Features and PANConv's path matrix on a batch of random graphs (a one-node graph
    among them), the batch vector shuffled within nothing: graphs in order."""
    parts, offset = [], 0
    for i, size in enumerate(sizes):
        parts.append(random_edge_index(size, 3 * size, seed=seed + i) + offset)
        offset += size
    edge_index = torch.cat(parts, dim=1)
    batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    torch.manual_seed(seed)
    x, m = PANConv(6, 8, filter_size=2)(torch.randn(offset, 6), edge_index)
    return x.detach(), m.detach(), batch


@pytest.mark.parametrize("kwargs", [{"ratio": 0.5}, {"ratio": 0.25}, {"ratio": 3},
                                    {"min_score": 0.1}, {"ratio": 0.6, "multiplier": 2.0},
                                    {"ratio": 0.5, "nonlinearity": "sigmoid"},
                                    {"ratio": 0.5, "nonlinearity": torch.sin}])
@pytest.mark.parametrize("batched", [True, False])
def test_matches_pyg(kwargs, batched):
    x, m, batch = pooled_case(3)
    ours, theirs = PANPooling(8, **kwargs), pyg.PANPooling(8, **kwargs)
    with torch.no_grad():  # distinct scores: PyG's sort does not order equal ones
        theirs.p.copy_(torch.randn(8))
        theirs.beta.copy_(torch.tensor([0.7, -1.3]))
    ours.load_state_dict(theirs.state_dict())
    batch = batch if batched else None
    got, want = ours(x, m, batch), theirs(x, CooOnly(m), batch)
    assert len(got) == len(want) == 6
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b)
    assert str(ours) == str(theirs)


def test_gradients_match_pyg():
    x, m, batch = pooled_case(4)
    ours, theirs = PANPooling(8, ratio=0.5), pyg.PANPooling(8, ratio=0.5)
    ours.load_state_dict(theirs.state_dict())
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = ours(x1, m, batch)[0], theirs(x2, CooOnly(m), batch)[0]
    grad = torch.randn_like(out1)
    g1 = torch.autograd.grad(out1, [x1, ours.p, ours.beta, ours.select.weight], grad)
    g2 = torch.autograd.grad(out2, [x2, theirs.p, theirs.beta, theirs.select.weight], grad)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b)


def test_a_seed_draws_pygs_initial_weights():
    torch.manual_seed(5)
    ours = PANPooling(8)
    torch.manual_seed(5)
    theirs = pyg.PANPooling(8)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value)


@pytest.mark.parametrize("layout", [torch.sparse_csr, torch.sparse_csc])
def test_any_sparse_layout_of_m(layout):
    x, m, batch = pooled_case(6)
    pool = PANPooling(8)
    want = pool(x, m, batch)
    got = pool(x, m.to_dense().to_sparse(layout=layout), batch)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


def test_a_float_ratio_of_one_keeps_every_node_and_an_int_counts():
    # PyG's reads any ratio >= 1 as a count: 1.0 keeps one node per graph there
    x, m, batch = pooled_case(7)
    kept = PANPooling(8, ratio=1.0)(x, m, batch)[4]
    assert sorted(kept.tolist()) == list(range(x.size(0)))
    counted = PANPooling(8, ratio=2)(x, m, batch)[4]
    assert torch.bincount(batch[counted]).tolist() == [2, 2, 1, 2]


def test_equal_scores_keep_node_order_and_pooled_edges_are_the_kept_entries():
    m = torch.eye(4).to_sparse()  # equal column sums
    x = torch.ones(4, 2)
    pool = PANPooling(2, ratio=0.5)
    out, edge_index, weight, batch, perm, score = pool(x, m)
    assert perm.tolist() == [0, 1]  # equal scores: the lower ids first
    assert edge_index.tolist() == [[0, 1], [0, 1]] and weight.tolist() == [1.0, 1.0]
    assert batch.tolist() == [0, 0]


def test_bad_arguments_are_named():
    x, m, batch = pooled_case(8)
    for ratio in (0.0, 1.5, -2, True, "half"):
        with pytest.raises(ValueError, match="ratio must be a float in"):
            PANPooling(8, ratio=ratio)
    with pytest.raises(ValueError, match="min_score must be a finite number"):
        PANPooling(8, min_score=float("nan"))
    with pytest.raises(ValueError, match="in_channels"):
        PANPooling(0)
    with pytest.raises(ValueError, match="unknown activation"):
        PANPooling(8, nonlinearity="no-such")
    pool = PANPooling(8)
    with pytest.raises(ValueError, match=r"x must be \[N, 8\]"):
        pool(x[:, :5], m)
    with pytest.raises(ValueError, match="M must be"):
        pool(x[:-1], m)
    with pytest.raises(TypeError, match="M must be a sparse matrix"):
        pool(x, m.to_dense())
    with pytest.raises(ValueError, match="batch must be"):
        pool(x, m, batch[:-1])
    with pytest.raises(ValueError, match="batch holds -1"):
        pool(x, m, batch - 1)
