"""What a computation may read to choose its path: whether it may branch on its tensors'
values, the cheap finiteness check such a branch reads, and whether autocast is on."""

from __future__ import annotations

import torch
from torch import Tensor


def can_branch_on_values() -> bool:
    """Whether a forward may choose its path by reading a tensor's values (a finiteness
    check): not while ``torch.compile`` traces it, nor under ``torch.func``'s transforms
    (``vmap`` refuses data-dependent control flow)."""
    return not torch.compiler.is_compiling() and \
        not torch._C._are_functorch_transforms_active()


def can_branch_on(t: Tensor) -> bool:
    """:func:`can_branch_on_values`, and ``t`` is no batched tensor: a backward's gradient
    under ``autograd.grad(..., is_grads_batched=True)`` (legacy vmap, which the transforms
    check does not see) cannot be read either."""
    functorch = torch._C._functorch
    return can_branch_on_values() and not functorch.is_legacy_batchedtensor(t) and \
        not functorch.is_batchedtensor(t)


def all_finite(t: Tensor) -> bool:
    """Whether every entry of ``t`` is finite, read from its sum: one vectorised pass, far
    cheaper than ``isfinite(t).all()``. A sum that overflows reads as not finite, and the
    callers then take their exact (PyG's) path, at its cost, which is never wrong."""
    return bool(torch.isfinite(t.sum()))


def autocast_enabled(device_type: str) -> bool:
    """Whether ``torch.autocast`` is on for ``device_type`` (False for devices it does not
    know, such as meta, where torch's own query raises)."""
    return torch.amp.is_autocast_available(device_type) and \
        torch.is_autocast_enabled(device_type)
