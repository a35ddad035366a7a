import numpy as np
import pytest
import torch

from graphloc.distributed import check_same_on_every_rank, digest


def test_a_digest_is_equal_only_for_equal_tensors():
    """Equal dtype, shape and bytes give equal digests, whatever the strides; anything
    else differs (the check between processes rests on it)."""
    x = torch.randn(6, 4, dtype=torch.float64)
    assert digest(x) == digest(x.t().contiguous().t())  # other strides, same values
    assert digest(x[:, ::2]) == digest(x[:, ::2].clone())
    changed = x.clone()
    changed[5, 3] = torch.nextafter(changed[5, 3], torch.tensor(2.0, dtype=torch.float64))
    others = [changed, x.float(), x.reshape(4, 6), x[:5], torch.tensor([-0.0]),
              torch.tensor([0.0])]
    digests = [digest(t) for t in [x, *others]]
    assert len(set(digests)) == len(digests)
    assert digest(torch.empty(0, 3)) != digest(torch.empty(3, 0))
    nan = torch.tensor([float("nan")])
    other_nan = nan.view(torch.int32).add(1).view(torch.float32)  # another NaN payload
    assert torch.isnan(other_nan).all() and digest(nan) != digest(other_nan)
    assert digest(torch.tensor([1, 2])) == digest(torch.tensor([1, 2]))


def test_outside_torch_distributed_the_check_passes():
    check_same_on_every_rank({"x": torch.randn(3)}, "anything")  # one process: no peers


def test_a_digest_of_what_is_no_tensor_is_refused_by_name():
    with pytest.raises(TypeError, match="digest takes a tensor, got list"):
        digest([1.0, 2.0])
    with pytest.raises(TypeError, match="digest takes a tensor, got ndarray"):
        digest(np.zeros(3))


@pytest.mark.parametrize("cuda, nccl, local_rank, expected", [
    (False, False, "1", ("gloo", None)),
    (True, False, "1", ("gloo", None)),  # a CUDA build without NCCL
    (True, True, "1", ("cpu:gloo,cuda:nccl", 1)),
    (True, True, "3", ("cpu:gloo,cuda:nccl", None)),  # more processes than GPUs
])
def test_the_group_carries_cpu_collectives_where_a_gpu_is_present(monkeypatch, cuda, nccl,
                                                                  local_rank, expected):
    """The commands compute on the CPU, so their collectives are CPU tensors. On a machine
    with CUDA the group was nccl alone, which has no CPU collectives (train and influence
    with --nproc failed there), and every process sat on GPU 0. Run for real on a GPU by
    benchmarks/device_check.sh (the two-process tests)."""
    import torch.distributed as dist

    from graphloc import distributed
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: nccl)
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    assert distributed._backend() == expected
