"""graphloc.checks: the shared argument checks, against brute-force oracles."""

import collections

import pytest
import torch

from graphloc import checks
from graphloc.checks import first_repeated, refuse_integer_mask


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64, torch.float32])
def test_a_zero_one_vector_with_one_entry_per_node_is_refused_as_ids(dtype):
    mask = torch.tensor([1, 0, 1, 1, 0], dtype=dtype)
    with pytest.raises(ValueError, match=f"seeds holds only 0s and 1s, one per node of the 5: "
                                         f"a mask stored as {dtype}"):
        refuse_integer_mask(mask, "seeds", 5)
    with pytest.raises(ValueError, match="or the mask as a bool tensor"):
        refuse_integer_mask(torch.zeros(5, dtype=dtype), "seeds", 5, masks_accepted=True)


@pytest.mark.parametrize("ids, num_nodes", [
    (torch.tensor([True, False, True]), 3),  # a real mask
    (torch.tensor([1, 0]), 2),  # both nodes of a 2-node graph: a valid id list
    (torch.tensor([1, 0, 1]), 5),  # not one entry per node: ids (repeats are checked apart)
    (torch.tensor([2, 0, 1, 4, 3]), 5),  # every node once
    (torch.tensor([0, 1, 1, 2]), 4),  # a value other than 0 and 1
])
def test_ids_that_are_not_a_mask_pass(ids, num_nodes):
    refuse_integer_mask(ids, "ids", num_nodes)


def test_first_repeated_against_counting():
    gen = torch.Generator().manual_seed(0)
    for size in [0, 1, 2, 5, 40]:
        for _ in range(20):
            ids = torch.randint(0, 30, (size,), generator=gen)
            counts = collections.Counter(ids.tolist())
            repeated = sorted(v for v, c in counts.items() if c > 1)
            assert first_repeated(ids) == (repeated[0] if repeated else None)


def test_outputs_beyond_the_machines_memory_are_refused_by_argument(monkeypatch):
    """The byte count is the shape's product times the element size (2^20 x 2^10 float64
    is exactly 8 GiB): refused below that memory, allowed at it."""
    monkeypatch.setattr(checks, "physical_memory_bytes", lambda: 8 * 2**30 - 1)
    with pytest.raises(ValueError, match=r"K=1024 asks for a \[1048576, 1024\] torch.float64 "
                                         r"output of 8.0 GiB"):
        checks.check_fits_in_memory((2**20, 2**10), torch.float64, "K=1024")
    monkeypatch.setattr(checks, "physical_memory_bytes", lambda: 8 * 2**30)
    checks.check_fits_in_memory((2**20, 2**10), torch.float64, "K=1024")
    monkeypatch.setattr(checks, "physical_memory_bytes", lambda: None)  # unknown: no check
    checks.check_fits_in_memory((2**40, 2**20), torch.float64, "K")


@pytest.mark.parametrize("value", [-1, 2**63, 2**64, 1.0, True, "3", None])
def test_seeds_outside_int64_or_not_ints_are_refused(value):
    from graphloc.checks import check_seed
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\^63\)"):
        check_seed(value)


def test_seeds_in_range_pass():
    from graphloc.checks import check_seed
    assert [check_seed(v) for v in (0, 7, 2**63 - 1)] == [0, 7, 2**63 - 1]
