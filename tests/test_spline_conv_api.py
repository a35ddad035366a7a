"""graphloc.spline_conv, torch_spline_conv's API: spline_conv against the convolution
written out edge by edge on the independent basis oracle; torch_spline_conv's own tests run
on it in benchmarks/peer_tests.sh."""

import pytest
import torch
from helpers import oracle_spline_basis, random_edge_index

from graphloc.spline_conv import spline_conv


def _written_out(x, edge_index, pseudo, weight, kernel_size, is_open, degree, norm, root,
                 bias):
    """Each node i: the mean (or sum) over its edges (i, j) of
    sum_s B_s(pseudo) x[j] @ weight[k_s], then x[i] @ root and the bias."""
    basis, index = oracle_spline_basis(pseudo, kernel_size, is_open, degree)
    out = torch.zeros(x.size(0), weight.size(2), dtype=x.dtype)
    count = [0] * x.size(0)
    for e, (i, j) in enumerate(edge_index.t().tolist()):
        for b, k in zip(basis[e].tolist(), index[e].tolist(), strict=True):
            out[i] += b * (x[j] @ weight[k])
        count[i] += 1
    if norm:
        out = out / torch.tensor(count, dtype=x.dtype).clamp(min=1).unsqueeze(1)
    if root is not None:
        out = out + x @ root
    return out if bias is None else out + bias


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("norm, extras", [(True, True), (False, False)])
def test_spline_conv_is_the_convolution_written_out(degree, norm, extras):
    gen = torch.Generator().manual_seed(degree)
    edge_index = random_edge_index(12, 40, seed=degree)  # isolated nodes 12, 13
    x = torch.randn(14, 3, dtype=torch.float64, generator=gen)
    pseudo = torch.rand(edge_index.size(1), 2, dtype=torch.float64, generator=gen)
    kernel_size, is_open = torch.tensor([5, 4]), torch.tensor([1, 0], dtype=torch.uint8)
    weight = torch.randn(20, 3, 2, dtype=torch.float64, generator=gen)
    root = torch.randn(3, 2, dtype=torch.float64, generator=gen) if extras else None
    bias = torch.randn(2, dtype=torch.float64, generator=gen) if extras else None
    args = (x, edge_index, pseudo, weight, kernel_size, is_open, degree, norm, root, bias)
    torch.testing.assert_close(spline_conv(*args), _written_out(*args))


def test_spline_conv_takes_one_feature_and_one_coordinate_as_vectors():
    edge_index = torch.tensor([[0, 0, 1], [1, 2, 0]])
    x, pseudo = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.2, 0.7, 0.5])
    weight = torch.randn(4, 1, 2)
    args = (edge_index, weight, torch.tensor([4]), torch.tensor([1]))
    torch.testing.assert_close(spline_conv(x, args[0], pseudo, *args[1:]),
                               spline_conv(x[:, None], args[0], pseudo[:, None], *args[1:]))


@pytest.mark.parametrize("edge_index, pseudo, message", [
    (torch.tensor([0, 1]), torch.rand(2, 1), r"edge_index must be \[2, E\]"),
    (torch.tensor([[0, 1], [1, 0]]), torch.tensor([[0.5], [-0.1]]), "pseudo .* must hold finite"),
    (torch.tensor([[0, 1], [1, 5]]), torch.rand(2, 1), "edge_index holds 5 but dim_size is 3"),
    (torch.tensor([[0, -1], [1, 0]]), torch.rand(2, 1), "edge_index holds -1"),
])
def test_bad_input_is_refused_by_name(edge_index, pseudo, message):
    with pytest.raises(ValueError, match=message):
        spline_conv(torch.randn(3, 2), edge_index, pseudo, torch.randn(3, 2, 2),
                    torch.tensor([3]), torch.tensor([1]))


@pytest.mark.parametrize("root, bias, message", [
    (torch.randn(3, 4), None, r"root_weight must be \[2, 4\] .* got \[3, 4\]"),
    (None, torch.randn(3), r"bias must be \[4\] .* got \[3\]"),
    (None, torch.randn(1), r"bias must be \[4\]"),  # torch would broadcast it
])
def test_root_weight_and_bias_of_other_shapes_are_refused_by_name(root, bias, message):
    with pytest.raises(ValueError, match=message):
        spline_conv(torch.randn(3, 2), torch.tensor([[0, 1], [1, 2]]), torch.rand(2, 1),
                    torch.randn(3, 2, 4), torch.tensor([3]), torch.tensor([1]), 1, True, root,
                    bias)


def test_the_functions_script_and_give_the_eager_numbers():
    """torch_spline_conv scripts spline_conv; a user's module may script all three."""
    from graphloc import spline_conv as module
    gen = torch.Generator().manual_seed(2)
    edge_index = random_edge_index(10, 30, seed=2)
    x = torch.randn(12, 3, generator=gen)
    pseudo = torch.rand(edge_index.size(1), 2, generator=gen)
    kernel_size, is_open = torch.tensor([3, 4]), torch.tensor([1, 0], dtype=torch.uint8)
    weight = torch.randn(12, 3, 2, generator=gen)
    args = (x, edge_index, pseudo, weight, kernel_size, is_open, 2, True,
            torch.randn(3, 2, generator=gen), torch.randn(2, generator=gen))
    torch.testing.assert_close(torch.jit.script(spline_conv)(*args), spline_conv(*args))
    basis = torch.jit.script(module.spline_basis)(pseudo, kernel_size, is_open, 2)
    eager = module.spline_basis(pseudo, kernel_size, is_open, 2)
    assert all(torch.equal(a, b) for a, b in zip(basis, eager, strict=True))
    messages = torch.jit.script(module.spline_weighting)(x[edge_index[1]], weight, *eager)
    torch.testing.assert_close(messages, module.spline_weighting(x[edge_index[1]], weight,
                                                                  *eager))


def test_ids_of_another_dtype_and_no_edges():
    args = (torch.randn(3, 2, 4), torch.tensor([3]), torch.tensor([1]))
    with pytest.raises(TypeError, match="edge_index must be an integer tensor"):
        spline_conv(torch.randn(3, 2), torch.tensor([[0.0, 1.0], [1.0, 2.0]]),
                    torch.rand(2, 1), *args)
    x = torch.randn(3, 2)
    out = spline_conv(x, torch.empty(2, 0, dtype=torch.long), torch.rand(0, 1), *args,
                      root_weight=torch.ones(2, 4))
    torch.testing.assert_close(out, x @ torch.ones(2, 4))  # no messages: the root term
