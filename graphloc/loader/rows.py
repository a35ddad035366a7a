"""The entries of chosen CSR rows, packed: the loaders' one way to gather neighbourhoods
(HGT's in-edges, ShaDow's and GraphSAINT's induced edges)."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.ops.reference import csr_rows


def packed_rows(indptr: Tensor, nodes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Rows ``nodes`` of a CSR's ``indptr``, one after another: each entry's CSR position,
    the index into ``nodes`` of its row, and the packed rows' pointer (int64)."""
    indptr = indptr.long()
    start = indptr[nodes]
    offsets = torch.cat([start.new_zeros(1), (indptr[nodes + 1] - start).cumsum(0)])
    owner = csr_rows(offsets)
    return start[owner] + torch.arange(owner.numel()) - offsets[owner], owner, offsets
