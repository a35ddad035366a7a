"""XConv against PyG's (its knn the brute-force oracle: PyG needs pyg-lib for it): values
and every gradient in training and evaluation, dilation, batches; from_pyg; named
errors."""

import functools

import pytest
import torch
import torch_geometric.nn as pyg
from parity import (
    assert_converts_and_trains_as_pygs,
    assert_twins_agree,
    pyg_knn_by_brute_force,
    seeded_twins_without_pyg_lib,
)

import graphloc.nn as gl

_twins = functools.partial(seeded_twins_without_pyg_lib, "XConv")


def _cloud(seed=0, n=40, width=8, dim=3):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, width, dtype=torch.float64, generator=gen)
    pos = torch.randn(n, dim, dtype=torch.float64, generator=gen)
    return x, pos, torch.tensor([0] * 16 + [1] * (n - 16))


@pytest.mark.parametrize("options", [{}, {"dilation": 2}, {"hidden_channels": 5, "bias": False}])
@pytest.mark.parametrize("training", [True, False])
def test_matches_pyg_with_every_gradient(options, training):
    x, pos, batch = _cloud()
    ours, theirs = _twins(8, 12, 3, 4, **options)
    ours.train(training), theirs.train(training)
    with pyg_knn_by_brute_force():
        assert_twins_agree(ours, theirs, [x, pos], lambda conv, x, p: conv(x, p, batch))
        assert_twins_agree(ours, theirs, [x, pos], lambda conv, x, p: conv(x, p))


def test_from_pyg_converts_and_trains_as_pygs():
    x, pos, batch = _cloud(1)

    class PointCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = pyg.XConv(8, 16, 3, 4)
            self.second = pyg.XConv(16, 3, 3, 3, dilation=2)

        def forward(self, x, pos, batch):
            return self.second(self.first(x, pos, batch).relu(), pos, batch)

    with pyg_knn_by_brute_force():
        torch.manual_seed(0)
        converted = assert_converts_and_trains_as_pygs(PointCNN().double(), (x, pos, batch))
    assert isinstance(converted.second, gl.XConv) and converted.second.dilation == 2


def test_bad_arguments_are_named():
    x, pos, batch = _cloud(2)
    conv = gl.XConv(8, 12, 3, 4, dilation=5).double()
    with pytest.raises(ValueError, match="point 0's example has fewer than kernel_size \\* "
                                         "dilation = 20 points"):
        conv(x, pos, batch)
    with pytest.raises(ValueError, match=r"pos must be \[N, 3\]"):
        conv(x, pos[:, :2])
    with pytest.raises(ValueError, match=r"x must be \[N, 8\]"):
        gl.XConv(8, 12, 3, 4).double()(x[:, :5], pos)
    with pytest.raises(ValueError, match="hidden_channels .* must be an integer >= 1, got 0"):
        gl.XConv(3, 12, 3, 4)
    assert str(gl.XConv(8, 12, 3, 4)) == "XConv(8, 12)"


def test_no_points():
    conv = gl.XConv(8, 12, 3, 4).double().eval()
    assert conv(torch.zeros(0, 8, dtype=torch.float64),
                torch.zeros(0, 3, dtype=torch.float64)).shape == (0, 12)
