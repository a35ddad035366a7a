"""Dropout with a counter-based mask: element k of a call is kept where a hash of (seed, k)
says so, with probability 1 - p, the seed drawn from torch's random generator. The mask is
never stored (the backward hashes again), is the same whatever the thread count, and costs
a hash per element where torch's CPU dropout draws from a sequential Mersenne twister (a
[200,000, 64] float32 tensor on 2 threads: 4 ms against torch's 62 to 83 ms forward, 7 ms
against 67 to 75 ms forward + backward; RESULTS.md, 2026-12-03). The same
seed gives the same mask on every device: the C++ kernel (CPU) and the pure-torch path below
(other devices, or no extension) compute the same bits (tested)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc.ops._library import HAS_EXTENSION, kernels

# splitmix64's constants (element_hash in csrc/cpu/dropout.cpp), as int64 bit patterns
_GOLDEN, _MIX1, _MIX2 = (v - 2**64 for v in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9,
                                            0x94D049BB133111EB))


def dropout(x: Tensor, p: float = 0.5, training: bool = True,
            generator: torch.Generator | None = None) -> Tensor:
    """``torch.nn.functional.dropout``'s semantics (in training each element is zeroed with
    probability ``p`` and the others scaled by ``1 / (1 - p)``, rounded to ``x``'s dtype;
    NaN stays NaN even where dropped; ``p = 1`` gives zeros), with graphloc's mask: for a
    given ``torch.manual_seed`` a different mask from torch's, reproducible, and the same on
    every thread count and device. ``generator``: where the seed is drawn (torch's default
    one by default). Not in place."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"dropout probability p must lie in [0, 1], got {p!r}")
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor, got {got}")
    if not training or p == 0:
        return x
    # a tensor, not a Python int: under torch.compile the draw stays in the graph
    seed = torch.randint(-2**63, 2**63 - 1, (), generator=generator, dtype=torch.int64)
    if HAS_EXTENSION and x.device.type == "cpu":
        return kernels.dropout(x, float(p), seed)
    return x * kept_scale(x.numel(), float(p), seed, x.dtype, x.device).view(x.shape)


def _shift_right(z: Tensor, bits: int) -> Tensor:
    """A logical shift of int64 bit patterns (torch's ``>>`` is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def kept_scale(numel: int, p: float, seed: int | Tensor, dtype: torch.dtype,
               device: torch.device | str = "cpu") -> Tensor:
    """The multiplier of each of ``numel`` elements under ``seed`` (an int64, or a
    one-element int64 tensor): ``1 / (1 - p)`` (in ``dtype``) where kept, 0 where dropped;
    the kernel's hash in int64 arithmetic (products wrap around as the kernel's unsigned
    ones)."""
    k = torch.arange(1, numel + 1, dtype=torch.int64, device=device)
    z = k * _GOLDEN + seed
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    z = z ^ _shift_right(z, 31)
    keep = _shift_right(z, 32) >= math.ceil(p * 2**32)
    scale = torch.tensor(1 / (1 - p) if p < 1 else 0.0, dtype=dtype, device=device)
    return torch.where(keep, scale, torch.zeros((), dtype=dtype, device=device))
