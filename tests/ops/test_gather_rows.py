"""gather_rows (rows of a tensor through an index) and permute_rows, which Graph's edge-order
helpers use: against index_select and brute force, gradients, bad indices."""

import pytest
import torch
from helpers import random_edge_index, requires_ext

from graphloc import Graph, ops

pytestmark = requires_ext
kernels = torch.ops.graphloc

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [1, 2, 4, 7, 64, 130])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_gather_rows_equals_index_select(dtype, width, index_dtype):
    """Every row through an index with repeats, over more rows than one thread's block and
    the prefetch distance, against index_select; special values copied bit for bit."""
    gen = torch.Generator().manual_seed(width)
    src = (torch.randn(5000, width, generator=gen) * 100).to(dtype)
    if dtype.is_floating_point:
        src[1, 0], src[2, -1], src[3, 0] = float("nan"), float("-inf"), -0.0
    index = torch.randint(0, 5000, (40000,), generator=gen).to(index_dtype)
    out = kernels.gather_rows(src, index)
    expected = src.index_select(0, index.long())
    assert out.dtype == dtype and out.shape == expected.shape
    assert torch.equal(_bits(out), _bits(expected))


def _bits(t):
    """The tensor's bytes as integers: NaN == NaN and -0.0 != 0.0."""
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def test_gather_rows_of_empty_index_and_empty_rows():
    assert kernels.gather_rows(torch.randn(4, 3), torch.empty(0, dtype=torch.long)).shape == (0, 3)
    assert kernels.gather_rows(torch.randn(4, 0), torch.tensor([1, 2])).shape == (2, 0)


@pytest.mark.parametrize("bad", [-1, 10, 2**31 - 1])
def test_gather_rows_refuses_an_index_out_of_range(bad):
    index = torch.tensor([0, 3, bad, 1], dtype=torch.int64)
    with pytest.raises(RuntimeError, match=rf"index\[2\] = {bad} is out of range: src has 10"):
        kernels.gather_rows(torch.randn(10, 4), index)


def test_gather_rows_refuses_a_strided_index_and_non_rows():
    with pytest.raises(RuntimeError, match="index must be contiguous"):
        kernels.gather_rows(torch.randn(10, 4), torch.arange(10)[::2])
    with pytest.raises(RuntimeError, match="index must be int32 or int64"):
        kernels.gather_rows(torch.randn(10, 4), torch.tensor([0.0, 1.0]))
    with pytest.raises(RuntimeError, match="src must be 2-D"):
        kernels.gather_rows(torch.randn(10), torch.tensor([0, 1]))


def test_gather_rows_gradient_adds_repeated_rows():
    src = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([5, 0, 5, 2, 5])
    assert torch.autograd.gradcheck(lambda s: kernels.gather_rows(s, index), (src,))


@pytest.mark.parametrize("shape", [(), (1,), (4,), (3, 5), (0,)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_edge_order_round_trip_against_brute_force(shape, dtype):
    """Graph.to_csr_order / from_csr_order of [E, ...] edge tensors (every dtype, widths of one
    value and more, zero width) against the CSR's own edge list, and back."""
    edge_index = random_edge_index(50, 3000, seed=4, hub_degree=400)
    graph = Graph(edge_index, num_nodes=50)
    values = (torch.randn(graph.num_edges, *shape) * 10).to(dtype)
    in_csr = graph.to_csr_order(values)
    # CSR order: the edges sorted by destination, stably (so ties keep the user's order)
    order = torch.sort(edge_index[1], stable=True).indices
    assert torch.equal(in_csr, values[order])
    assert torch.equal(graph.from_csr_order(in_csr), values)


@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_edge_order_gradients_are_the_inverse_permutation(shape):
    edge_index = random_edge_index(30, 500, seed=6)
    graph = Graph(edge_index, num_nodes=30)
    values = torch.randn(graph.num_edges, *shape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(graph.to_csr_order, (values,))
    assert torch.autograd.gradcheck(graph.from_csr_order, (values,))
    weights = torch.randn(graph.num_edges, *shape, dtype=torch.float64)
    (grad,) = torch.autograd.grad((graph.from_csr_order(values) * weights).sum(), values)
    assert torch.equal(grad, graph.to_csr_order(weights))


def test_permute_rows_matches_indexing():
    gen = torch.Generator().manual_seed(0)
    index = torch.randperm(1000, generator=gen)
    inverse = torch.empty_like(index).scatter_(0, index, torch.arange(1000))
    values = torch.randn(1000, 4, generator=gen)
    assert torch.equal(ops.permute_rows(values, index, inverse), values[index])
    assert torch.equal(ops.permute_rows(values[:, 0], index, inverse), values[index, 0])


@pytest.mark.parametrize("index_dtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
def test_ops_gather_takes_the_kernel_with_any_integer_index(index_dtype):
    """ops.gather of [N, 3, 2] rows (the kernel's path) with every integer index dtype and a
    strided index: values and the gradient (repeats added) against indexing."""
    x = torch.randn(40, 3, 2, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 40, (300,)).to(index_dtype)[::3]
    out = ops.gather(x, index)
    assert torch.equal(out, x[index.long()])
    grad = torch.randn_like(out)
    (ours,) = torch.autograd.grad(out, x, grad)
    (theirs,) = torch.autograd.grad(x[index.long()], x, grad)
    torch.testing.assert_close(ours, theirs)


def test_permute_rows_refuses_a_wrong_inverse_or_a_non_permutation():
    """A wrong inverse would give wrong gradients quietly: refused, named."""
    index = torch.tensor([2, 0, 1, 3])
    inverse = torch.tensor([1, 2, 0, 3])
    values = torch.randn(4, 2)
    assert torch.equal(ops.permute_rows(values, index, inverse), values[index])
    with pytest.raises(ValueError, match="inverse is not the inverse of index"):
        ops.permute_rows(values, index, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="inverse is not the inverse of index"):
        ops.permute_rows(values, torch.tensor([0, 0, 1, 3]), inverse)
    with pytest.raises(ValueError, match=r"index holds values outside \[0, 4\)"):
        ops.permute_rows(values, torch.tensor([0, 4, 1, 3]), inverse)
    with pytest.raises(ValueError, match="inverse has 3 entries but values have 4 rows"):
        ops.permute_rows(values, index, inverse[:3])
    with pytest.raises(ValueError, match="index must be a 1-D int32 or int64 tensor"):
        ops.permute_rows(values, index.float(), inverse)


@pytest.mark.parametrize("shape", [(), (1,), (4,)])
def test_edge_order_of_a_graph_without_edges(shape):
    graph = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=5)
    values = torch.randn(0, *shape, requires_grad=True)
    for moved in (graph.to_csr_order(values), graph.from_csr_order(values)):
        assert moved.shape == values.shape
    assert ops.gather(torch.randn(5, 3), torch.empty(0, dtype=torch.long)).shape == (0, 3)
    empty = torch.empty(0, dtype=torch.long)
    for values in (torch.randn(0), torch.randn(0, 4), torch.randn(0, 2, 3)):
        assert ops.permute_rows(values, empty, empty).shape == values.shape
