"""coo_to_csr and csr_transpose against torch's stable sort; arg_sources against a
position-by-position oracle."""

import pytest
import torch
from helpers import requires_ext
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import ops
from graphloc.ops import reference

pytestmark = requires_ext


@settings(max_examples=40, deadline=None)
@given(num_rows=st.integers(1, 50), size=st.integers(0, 300_000),
       dtype=st.sampled_from([torch.int32, torch.int64]), seed=st.integers(0, 1000))
def test_coo_to_csr_is_a_stable_sort(num_rows, size, dtype, seed):
    size = size if size < 1000 or seed % 10 == 0 else size % 1000  # a few large, parallel ones
    index = torch.randint(0, num_rows, (size,), generator=torch.Generator().manual_seed(seed),
                          dtype=dtype)
    indptr, perm = ops.coo_to_csr(index, num_rows)
    assert indptr.dtype == perm.dtype == dtype
    assert torch.equal(perm.long(), torch.sort(index, stable=True).indices)
    assert torch.equal(indptr, reference.coo_to_csr(index, num_rows)[0])


@pytest.mark.parametrize("num_rows", [100_000, 150_000, 1_000_000])
def test_coo_to_csr_with_many_rows_per_edge_is_a_stable_sort(num_rows):
    """Past 2^17 edges the sort counts per thread chunk; with as many rows as edges or more
    it now keeps to fewer chunks (the counts take a row's int64 per chunk)."""
    index = torch.randint(0, num_rows, (300_000,), generator=torch.Generator().manual_seed(3))
    indptr, perm = ops.coo_to_csr(index, num_rows)
    assert torch.equal(perm, torch.sort(index, stable=True).indices)
    assert torch.equal(indptr, reference.coo_to_csr(index, num_rows)[0])


def test_csr_transpose_lists_out_edges_in_csr_order():
    indptr = torch.tensor([0, 2, 3, 3, 5])
    indices = torch.tensor([1, 3, 1, 0, 1])
    t_indptr, t_indices, perm = ops.csr_transpose(indptr, indices, 4)
    assert t_indptr.tolist() == [0, 1, 4, 4, 5]
    assert t_indices.tolist() == [3, 0, 1, 3, 0]
    assert perm.tolist() == [3, 0, 2, 4, 1]


def test_coo_to_csr_rejects_out_of_range():
    with pytest.raises(ValueError, match="holds 7 but dim_size is 5"):
        ops.coo_to_csr(torch.tensor([0, 7, 1]), 5)
    with pytest.raises(ValueError, match="holds -1"):
        ops.coo_to_csr(torch.tensor([0, -1]), 5)
    with pytest.raises(RuntimeError, match=r"index\[1\] = 7 is out of range for 5 rows"):
        torch.ops.graphloc.coo_to_csr(torch.tensor([0, 7, 1]), 5)


def _sources_oracle(arg, perm, num_edges):
    """Position by position: num_edges stays, any other position goes through perm."""
    return torch.tensor([a if a == num_edges or perm is None else int(perm[a])
                         for a in arg.reshape(-1).tolist()], dtype=torch.long).view(arg.shape)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("mapped", [True, False])
@pytest.mark.parametrize("shape", [(0, 4), (7,), (3, 5), (300, 64)])  # the last: threads
def test_arg_sources_maps_positions_through_perm(dtype, mapped, shape):
    gen = torch.Generator().manual_seed(len(shape) * 10 + mapped)
    E = 1000
    arg = torch.randint(0, E + 1, shape, generator=gen).to(dtype)
    arg.view(-1)[::7] = E  # empty rows
    perm = torch.randperm(E, generator=gen).to(dtype) if mapped else None
    for engine in (torch.ops.graphloc, reference):
        got = engine.arg_sources(arg, perm, E)
        assert got.dtype == torch.long and got.shape == arg.shape
        assert torch.equal(got, _sources_oracle(arg, perm, E))


def test_arg_sources_returns_a_new_tensor():
    arg = torch.tensor([[0, 2], [1, 2]])
    for engine in (torch.ops.graphloc, reference):
        got = engine.arg_sources(arg, None, 2)
        got.fill_(9)
        assert arg.tolist() == [[0, 2], [1, 2]]


def test_arg_sources_rejects_bad_arguments():
    k = torch.ops.graphloc
    arg, perm = torch.tensor([[0, 1], [2, 3]]), torch.tensor([2, 0, 1])
    with pytest.raises(RuntimeError, match=r"arg \(flattened\)\[3\] = 3 is not a CSR position "
                                           r"in \[0, 2\]"):
        k.arg_sources(arg, perm[:2], 2)
    with pytest.raises(RuntimeError, match="perm has 3 entries but num_edges is 4"):
        k.arg_sources(arg, perm, 4)
    with pytest.raises(RuntimeError, match="perm is Int but arg is Long"):
        k.arg_sources(arg, perm.int(), 3)
    with pytest.raises(RuntimeError, match="arg must be int32 or int64, got Float"):
        k.arg_sources(arg.float(), perm, 3)
    with pytest.raises(RuntimeError, match="num_edges must be >= 0, got -1"):
        k.arg_sources(arg, None, -1)
    with pytest.raises(ValueError, match=r"outside \[0, 2\]"):
        reference.arg_sources(arg, perm[:2], 2)
