"""spline_basis and spline_weighting: the weighting against the formula written as one
einsum, empty inputs, and named errors for every bad argument. (The basis against the
Cox-de Boor recursion: tests/nn/conv/test_spline_conv.py.)"""

import math

import pytest
import torch

from graphloc.ops import spline_basis, spline_weighting


def test_weighting_is_the_sum_of_basis_weighted_products():
    gen = torch.Generator().manual_seed(0)
    pseudo = torch.rand(30, 2, dtype=torch.float64, generator=gen)
    basis, index = spline_basis(pseudo, torch.tensor([4, 3]), torch.tensor([1, 0]), 2)
    x = torch.randn(30, 5, dtype=torch.float64, generator=gen)
    weight = torch.randn(12, 5, 3, dtype=torch.float64, generator=gen)
    want = torch.einsum("es,esio,ei->eo", basis, weight[index], x)
    torch.testing.assert_close(spline_weighting(x, weight, basis, index), want)


def test_empty_inputs_give_empty_outputs():
    basis, index = spline_basis(torch.zeros(0, 2), torch.tensor([3, 3]),
                                torch.tensor([1, 1]), 1)
    assert basis.shape == (0, 4) and index.shape == (0, 4)
    out = spline_weighting(torch.zeros(0, 5), torch.randn(9, 5, 2), basis, index)
    assert out.shape == (0, 2)


@pytest.mark.parametrize("call, error, message", [
    (lambda p: spline_basis(p.long(), [3, 3], [1, 1]), TypeError,
     "pseudo .the edge_attr. must be a floating tensor, got torch.int64"),
    (lambda p: spline_basis(p.view(2, 5, 2), [3, 3], [1, 1]), ValueError,
     r"pseudo .the edge_attr. must be \[E, D\], got shape \[2, 5, 2\]"),
    (lambda p: spline_basis(p, [3], [1, 1]), ValueError,
     r"one entry per pseudo dimension \(2\), got 1 and 2"),
    (lambda p: spline_basis(p, [3, 0], [1, 1]), ValueError, r"kernel_size must be >= 1"),
    (lambda p: spline_basis(p, [3, 3], [1, 2]), ValueError, "is_open_spline must hold 0 or 1"),
    (lambda p: spline_basis(p, [3, 3], [1, 1], degree=4), ValueError,
     "degree must be 1, 2 or 3, got 4"),
    (lambda p: spline_basis(p, [3, 2], [1, 1], degree=3), ValueError,
     "an open spline of degree 3 needs kernel_size >= 3"),
    (lambda p: spline_basis(p.index_fill(0, torch.tensor([4]), -0.5), [3, 3], [1, 1]),
     ValueError, r"edge 4, dimension 0 holds -0.5"),
    (lambda p: spline_basis(p.index_fill(0, torch.tensor([2]), math.nan), [3, 3], [1, 1]),
     ValueError, r"edge 2, dimension 0 holds nan"),
])
def test_basis_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call(torch.rand(10, 2))


def test_weighting_bad_arguments_are_named():
    basis, index = spline_basis(torch.rand(6, 1), torch.tensor([4]), torch.tensor([1]), 1)
    x, weight = torch.randn(6, 3), torch.randn(4, 3, 2)
    with pytest.raises(ValueError, match=r"x must be \[E, C_in\] and weight \[K, C_in, C_out\] "
                                         r"of the same C_in, got \[6, 3\] and \[4, 5, 2\]"):
        spline_weighting(x, torch.randn(4, 5, 2), basis, index)
    with pytest.raises(ValueError, match=r"basis and weight_index must both be \[E, S\] with "
                                         r"E = 6"):
        spline_weighting(x, weight, basis[:5], index[:5])
    with pytest.raises(ValueError, match=r"weight_index must lie in \[0, 3\), got values "
                                         r"from 0 to 3"):
        spline_weighting(x, weight[:3], basis, index)
    with pytest.raises(ValueError, match=r"weight_index must lie in \[0, 4\), got values "
                                         r"from -1 to"):
        spline_weighting(x, weight, basis, index - 1)
