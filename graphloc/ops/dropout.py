"""Dropout with a counter-based mask: element k of a call is kept where a SplitMix64 draw of
(seed, k) says so, with probability 1 - p, the seed drawn from torch's random generator. The
mask is never stored (the backward draws it again), is the same whatever the thread count,
and costs a hash per element where torch's CPU dropout draws from a sequential Mersenne
twister (a [200,000, 64] float32 tensor on 2 threads: 4 ms against torch's 62 to 83 ms
forward, 7 ms against 67 to 75 ms forward + backward; RESULTS.md, 2026-12-03). The same seed
gives the same mask on every device: the C++ kernel (CPU) and its pure-torch twin
(``reference.dropout``: other devices, or no extension) compute the same bits (tested)."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_flags
from graphloc.ops import reference
from graphloc.ops._library import kernels


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
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a floating-point tensor, got {type(x).__name__}")
    check_flags("dropout", training=training)  # training="False" dropped, as a truthy value
    if not training or p == 0:
        return x  # any dtype, as torch.nn.Dropout in eval (the layer after it checks)
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
    # a tensor, not a Python int: under torch.compile the draw stays in the graph
    seed = torch.randint(-2**63, 2**63 - 1, (), generator=generator, dtype=torch.int64)
    return (kernels if x.device.type == "cpu" else reference).dropout(x, float(p), seed)
