"""coo_to_csr and csr_transpose against torch's stable sort."""

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
