"""knn_interpolate against PyG's (its knn the brute-force oracle: PyG needs pyg-lib for
it), values and the gradient of x, and against the formula point by point."""

import math

import pytest
import torch
from helpers import brute_force_neighbours, pointers
from parity import pyg_knn_by_brute_force
from torch_geometric.nn import knn_interpolate as pygs_knn_interpolate

from graphloc.nn import knn_interpolate


def _clouds(seed=0):
    gen = torch.Generator().manual_seed(seed)
    pos_x = torch.randn(30, 3, dtype=torch.float64, generator=gen)
    pos_y = torch.randn(17, 3, dtype=torch.float64, generator=gen)
    pos_y[4] = pos_x[20]  # a point on a coarse point: distance 0, weight 1e16
    x = torch.randn(30, 5, dtype=torch.float64, generator=gen)
    batch_x = torch.tensor([0] * 12 + [1] * 3 + [2] * 15)
    batch_y = torch.tensor([0] * 4 + [2] * 9 + [3] * 4)  # (example 3: no coarse points)
    return x, pos_x, pos_y, batch_x, batch_y


@pytest.mark.parametrize("k", [1, 3, 20])
def test_matches_pyg_with_the_gradient_of_x(k):
    x, pos_x, pos_y, batch_x, batch_y = _clouds()
    results = []
    for interpolate in (knn_interpolate, pygs_knn_interpolate):
        leaf = x.clone().requires_grad_()
        with pyg_knn_by_brute_force():
            out = interpolate(leaf, pos_x, pos_y, batch_x, batch_y, k=k)
        grad = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
        results.append((out, torch.autograd.grad(out, leaf, grad.nan_to_num(0))[0]))
    (got, got_grad), (want, want_grad) = results
    torch.testing.assert_close(got, want, equal_nan=True)
    torch.testing.assert_close(got_grad, want_grad.nan_to_num(0), equal_nan=True)
    assert got[13:].isnan().all() and not got[:13].isnan().any()


def test_is_the_inverse_distance_weighted_mean():
    x, pos_x, pos_y, batch_x, batch_y = _clouds(1)
    query, point = brute_force_neighbours(pos_x, pos_y, 3, pointers(batch_x, 4),
                                          pointers(batch_y, 4))
    got = knn_interpolate(x, pos_x, pos_y, batch_x, batch_y, k=3)
    for i in range(13):
        js = point[query == i].tolist()
        weights = [1 / max(float((pos_x[j] - pos_y[i]).pow(2).sum()), 1e-16) for j in js]
        want = sum(w * x[j] for w, j in zip(weights, js, strict=True)) / math.fsum(weights)
        torch.testing.assert_close(got[i], want)


def test_bad_arguments_are_named():
    x, pos_x, pos_y, batch_x, batch_y = _clouds()
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        knn_interpolate(x, pos_x, pos_y, k=0)
    with pytest.raises(ValueError, match="x must be .N, F. with a row per point of pos_x"):
        knn_interpolate(x[:5], pos_x, pos_y)
    with pytest.raises(ValueError, match="batch_y must be sorted"):
        knn_interpolate(x, pos_x, pos_y, batch_x, batch_y.flip(0))


def test_no_points_to_fill_and_no_coarse_points():
    x, pos_x, pos_y, _, _ = _clouds()
    assert knn_interpolate(x, pos_x, pos_y[:0]).shape == (0, 5)
    out = knn_interpolate(x[:0], pos_x[:0], pos_y)
    assert out.shape == (17, 5) and out.isnan().all()  # (0 / 0, as PyG's)
