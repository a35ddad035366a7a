"""``head_dots`` where no CPU kernel runs (other devices, bfloat16, float16): a thin matmul
with the attention vectors' block-diagonal matrix, and PyG's per-head products where that
matmul's zeros met a non-finite value."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.ops.values import all_finite, autocast_enabled, can_branch_on, can_branch_on_values


def block_diagonal(att: Tensor) -> Tensor:
    """``[A, H, C]`` attention vectors as a ``[H * C, A * H]`` matrix, vector a's head h in
    column a * H + h."""
    A, H, C = att.shape
    eye = torch.eye(H, dtype=att.dtype, device=att.device)
    blocks = att.unsqueeze(-1) * eye.unsqueeze(1)  # [A, H, C, H]
    return blocks.permute(1, 2, 0, 3).reshape(H * C, A * H)


def _matmul(x: Tensor, w: Tensor) -> Tensor:
    """``x @ w`` in their dtype even under autocast: the sum of products it stands for
    (PyG's (h * att).sum(-1)) is not rounded to autocast's lower precision."""
    if not autocast_enabled(x.device.type):
        return x @ w
    with torch.autocast(x.device.type, enabled=False):
        return x @ w


class _HeadDots(torch.autograd.Function):
    """``x [N, H * C]`` against ``A`` attention vectors ``att [A, H, C]``: the per-head dot
    products ``[N, A * H]`` as one thin matmul with their block-diagonal matrix (no
    ``[N, H, C]`` products). Its backward is the matmul's, with the attention vectors'
    gradient read off the diagonal blocks (not through the blocks' zeros), where the
    incoming gradient is finite, and PyG's per-head products where it is not: an infinite
    gradient of one head's score met the matmul's zeros and made every other head's
    gradients NaN (0 * inf), where PyG's stay finite. Differentiable twice: the backward
    is made of differentiable ops."""

    generate_vmap_rule = True  # setup_context style: torch.func takes it

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def forward(x: Tensor, att: Tensor) -> Tensor:
        return _matmul(x, block_diagonal(att))

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, att = ctx.saved_tensors
        A, H, C = att.shape
        if can_branch_on(grad) and all_finite(grad):
            grad_x = grad @ block_diagonal(att).t()
            # (grad^T x)[a * H + j, h * C + c]: vector a's head j against head h's channel c
            products = (grad.t() @ x).view(A, H, H, C)
            grad_att = torch.diagonal(products, dim1=1, dim2=2).permute(0, 2, 1)
        else:
            per_head = grad.view(-1, A, H)
            grad_x = (per_head.unsqueeze(-1) * att).sum(1).reshape(-1, H * C)
            # per head: [A, N] @ [N, C] (a batched matmul, which every vmap takes)
            grad_att = torch.matmul(per_head.permute(2, 1, 0),
                                    x.view(-1, H, C).transpose(0, 1)).transpose(0, 1)
        return grad_x, grad_att


def composed_head_dots(x: Tensor, att: Tensor) -> Tensor:
    """``head_dots`` of ``x [N, H * C]`` and ``att [A, H, C]`` (one dtype) from torch ops.

    One thin matmul with the vectors' block-diagonal matrix, whose zeros meet every head's
    channels: an infinite or NaN channel of one head (or an infinite attention entry) made
    the other heads' dots NaN there (0 * inf), where PyG's are the head's own. Such a
    product has a non-finite entry in every column of that row, so a non-finite result is
    recomputed head by head; under ``torch.func`` and ``torch.compile``, which cannot
    branch on values, with more than one head always."""
    A, H, C = att.shape
    if H == 1 or can_branch_on_values():
        out = _HeadDots.apply(x, att)
        # (all_finite: 40 times faster than isfinite(out).all() at [200,000, 8])
        if H == 1 or all_finite(out):
            return out
    return (x.view(-1, 1, H, C) * att).sum(-1).reshape(-1, A * H)
