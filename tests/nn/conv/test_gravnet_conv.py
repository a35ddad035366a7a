"""GravNetConv against PyG's (its knn the brute-force oracle: PyG needs pyg-lib for it),
values and every gradient, batches and pairs; the formula node by node; from_pyg."""

import functools
import math

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import brute_force_neighbours, pointers
from parity import (
    assert_converts_and_trains_as_pygs,
    assert_twins_agree,
    pyg_knn_by_brute_force,
    seeded_twins_without_pyg_lib,
)

import graphloc.nn as gl

_twins = functools.partial(seeded_twins_without_pyg_lib, "GravNetConv")


def _points(seed=0, n=30, width=5):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, width, dtype=torch.float64, generator=gen)
    batch = torch.tensor([0] * 12 + [1] * 3 + [2] * (n - 15))
    return x, batch


@pytest.mark.parametrize("k", [1, 4, 20])
def test_matches_pyg_with_every_gradient(k):
    x, batch = _points()
    ours, theirs = _twins(5, 7, 3, 6, k=k)
    with pyg_knn_by_brute_force():
        assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, batch))
        assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x))


def test_pairs_match_pyg():
    x, batch = _points(1)
    y = torch.randn(8, 5, dtype=torch.float64)
    batch_y = torch.tensor([0, 0, 1, 3, 3, 3, 3, 3])  # (example 3: no source points)
    ours, theirs = _twins(5, 4, 2, 3, k=3)
    with pyg_knn_by_brute_force():
        assert_twins_agree(ours, theirs, [x, y], lambda conv, x, y: conv((x, y), (batch, batch_y)))
        assert_twins_agree(ours, theirs, [x, y], lambda conv, x, y: conv((x, y)))


def test_is_the_formula_node_by_node():
    """Each point's k nearest in the learned space (the oracle's), weights
    exp(-10 d^2), the mean and max of the weighted features, then the two maps."""
    x, batch = _points(2, n=20)
    conv = gl.GravNetConv(5, 4, 3, 6, k=4).double()
    s, h = conv.lin_s(x), conv.lin_h(x)
    ptr = pointers(batch, 3)
    query, point = brute_force_neighbours(s.detach(), s.detach(), 4, ptr, ptr)
    rows = []
    for i in range(x.size(0)):
        js = point[query == i].tolist()
        weighted = [h[j] * math.exp(-10 * float((s[i] - s[j]).pow(2).sum())) for j in js]
        stacked = torch.stack(weighted)
        rows.append(torch.cat([stacked.mean(0), stacked.max(0).values]))
    want = conv.lin_out1(x) + conv.lin_out2(torch.stack(rows))
    torch.testing.assert_close(conv(x, batch), want)


def test_a_nan_feature_reaches_its_neighbours_outputs():
    x, batch = _points(3, n=20)
    conv = gl.GravNetConv(5, 4, 3, 6, k=3).double()
    x[7, 2] = math.nan
    out = conv(x, batch)
    assert out[7].isnan().all()  # (its own row reads it through lin_out1)
    finite = torch.isfinite(out).all(1)
    assert finite.sum() > 0 and not finite.all()


def test_from_pyg_converts_and_trains_as_pygs():
    x, batch = _points(4)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = pyg.GravNetConv(5, 8, 3, 6, k=4)
            self.second = pyg.GravNetConv(8, 3, 2, 4, k=5)

        def forward(self, x, batch):
            return self.second(self.first(x, batch).relu(), batch)

    with pyg_knn_by_brute_force():
        torch.manual_seed(0)
        converted = assert_converts_and_trains_as_pygs(Net().double(), (x, batch))
    assert isinstance(converted.first, gl.GravNetConv)


def test_bad_arguments_are_named():
    x, batch = _points()
    conv = gl.GravNetConv(5, 4, 3, 6, k=2).double()
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        gl.GravNetConv(5, 4, 3, 6, k=0)
    with pytest.raises(ValueError, match=r"static graphs are not supported"):
        conv(x.view(2, 15, 5))
    with pytest.raises(ValueError, match="batch_x must be sorted"):
        conv(x, batch.flip(0))
    with pytest.raises(TypeError, match="batch must be a tensor of example ids"):
        conv(x, [batch])
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 5\], got \[30, 3\]"):
        conv(x[:, :3].contiguous())
    with pytest.warns(UserWarning, match="num_workers is deprecated"):
        gl.GravNetConv(5, 4, 3, 6, k=2, num_workers=2)
    assert str(conv) == "GravNetConv(5, 4, k=2)"


def test_no_points_and_an_example_of_one_point():
    conv = gl.GravNetConv(5, 4, 3, 6, k=3).double()
    assert conv(torch.zeros(0, 5, dtype=torch.float64)).shape == (0, 4)
    x, batch = _points(5, n=16)
    ours, theirs = _twins(5, 4, 3, 6, k=3)
    lone = torch.tensor([0] * 15 + [1])  # (point 15 alone: its only neighbour is itself)
    with pyg_knn_by_brute_force():
        assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, lone))
