"""``torch.nn.Dropout`` on graphloc's counter-based mask (``graphloc.ops.dropout``): the same
distribution and scaling, another mask for a given seed, 10 to 20 times faster on the CPU
for full-graph activations (RESULTS.md)."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags


class Dropout(torch.nn.Dropout):
    """A drop-in for ``torch.nn.Dropout`` (same arguments, repr and state; ``inplace`` is
    accepted and writes the result back into the input)."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        check_flags("Dropout", inplace=inplace)
        super().__init__(p, inplace)

    def forward(self, x: Tensor) -> Tensor:
        out = ops.dropout(x, self.p, self.training)
        return x.copy_(out) if self.inplace and out is not x else out
