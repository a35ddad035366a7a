"""SplineCNN's B-spline kernels: torch_spline_conv's (and pyg-lib's) ``spline_basis`` and
``spline_weighting`` in torch's ops, so PyG's SplineConv runs without pyg-lib (PyG 2.8
needs it even to build one).

The basis takes the kernels' steps: each pseudo-coordinate scaled by ``kernel_size -
degree`` (open) or ``kernel_size`` (closed), its integer part naming the first of the
``degree + 1`` weights it touches in that dimension (modulo ``kernel_size``: a closed spline
wraps), its fractional part ``t`` giving their B-spline values (degree 1: ``1 - t`` and
``t``), a product over the dimensions. Gradients come from autograd.
"""

from __future__ import annotations

import torch
from torch import Tensor

# the pieces of the uniform B-spline of each degree on [0, 1), for the k-th of the degree + 1
# weights a point touches, written as the kernels write them (same operations, same order)
_DEGREES = (1, 2, 3)
_CHUNK_ROWS = 4096  # spline_weighting's edges per gathered [rows, C_in, C_out] block


def spline_basis(pseudo: Tensor, kernel_size: Tensor, is_open_spline: Tensor,
                 degree: int = 1) -> tuple[Tensor, Tensor]:
    """Per edge its ``(degree + 1) ** D`` B-spline basis values and the indices of the
    weights they multiply: ``(basis [E, S], weight_index [E, S])``.

    Args:
        pseudo: ``[E, D]`` (or ``[E]``) pseudo-coordinates in [0, 1] (values above 1 wrap as
            in PyG's kernels; negative, NaN or infinite ones, whose weight index PyG's
            kernels would read out of range, raise).
        kernel_size: ``[D]`` integers >= 1, weights per dimension.
        is_open_spline: ``[D]`` flags (0/1 or bool): open or closed (periodic) B-splines.
        degree: 1, 2 or 3.
    """
    pseudo = _pseudo(pseudo)
    sizes, open_flags = _kernel(kernel_size, is_open_spline, pseudo.size(1))
    if degree not in _DEGREES or isinstance(degree, bool):
        raise ValueError(f"spline_basis: degree must be 1, 2 or 3, got {degree!r}")
    check_open_spans("spline_basis", sizes.tolist(), open_flags.tolist(), degree)
    sizes, open_flags = sizes.to(pseudo.device), open_flags.to(pseudo.device)
    dims, width = pseudo.size(1), degree + 1
    count = width ** dims
    # k_mod[s, d]: which of the degree + 1 weights of dimension d term s takes
    powers = width ** torch.arange(dims, device=pseudo.device)
    k_mod = torch.arange(count, device=pseudo.device).unsqueeze(1).div(
        powers, rounding_mode="floor") % width
    scaled = pseudo * (sizes - degree * open_flags).to(pseudo.dtype)
    first = scaled.long().unsqueeze(1)  # (pseudo >= 0: truncation is the floor)
    fraction = (scaled - scaled.floor()).unsqueeze(1)  # [E, 1, D]
    strides = torch.cumprod(torch.cat([sizes.new_ones(1), sizes[:-1]]), 0)
    weight_index = (((first + k_mod) % sizes) * strides).sum(-1)
    basis = torch.ones(pseudo.size(0), count, dtype=pseudo.dtype, device=pseudo.device)
    for d in range(dims):  # (a product in the kernels' order of dimensions)
        basis = basis * _piece(fraction[..., d], k_mod[:, d].to(pseudo.dtype), degree)
    return basis, weight_index


def _piece(t: Tensor, k: Tensor, degree: int) -> Tensor:
    """The value at ``t`` of the ``k``-th B-spline piece of ``degree`` (``t`` ``[E, 1]``,
    ``k`` ``[S]``)."""
    if degree == 1:
        return 1.0 - t - k + 2.0 * t * k
    if degree == 2:
        pieces = (0.5 * t * t - t + 0.5, -t * t + t + 0.5, 0.5 * t * t)
    else:
        pieces = ((1.0 - t) * (1.0 - t) * (1.0 - t) / 6.0,
                  (3.0 * t * t * t - 6.0 * t * t + 4.0) / 6.0,
                  (-3.0 * t * t * t + 3.0 * t * t + 3.0 * t + 1.0) / 6.0,
                  t * t * t / 6.0)
    out = pieces[-1].expand(-1, k.numel())
    for index in range(degree - 1, -1, -1):
        out = torch.where(k == index, pieces[index], out)
    return out


def spline_weighting(x: Tensor, weight: Tensor, basis: Tensor, weight_index: Tensor) -> Tensor:
    """``out[e] = sum_s basis[e, s] * x[e] @ weight[weight_index[e, s]]``: ``[E, C_out]``
    for ``x [E, C_in]`` (each edge's source features), ``weight [K, C_in, C_out]``."""
    if x.dim() != 2 or weight.dim() != 3 or x.size(1) != weight.size(1):
        raise ValueError(f"spline_weighting: x must be [E, C_in] and weight [K, C_in, C_out] "
                         f"of the same C_in, got {list(x.shape)} and {list(weight.shape)}")
    if basis.shape != weight_index.shape or basis.dim() != 2 or basis.size(0) != x.size(0):
        raise ValueError(f"spline_weighting: basis and weight_index must both be [E, S] with "
                         f"E = {x.size(0)}, got {list(basis.shape)} and "
                         f"{list(weight_index.shape)}")
    if weight_index.numel() and not (0 <= int(weight_index.min()) and
                                     int(weight_index.max()) < weight.size(0)):
        raise ValueError(f"spline_weighting: weight_index must lie in [0, {weight.size(0)}), "
                         f"got values from {int(weight_index.min())} to "
                         f"{int(weight_index.max())}")
    blocks = []
    for start in range(0, x.size(0), _CHUNK_ROWS):  # [rows, C_in, C_out] at a time
        rows = slice(start, start + _CHUNK_ROWS)
        block = torch.zeros(x[rows].size(0), weight.size(2), dtype=x.dtype, device=x.device)
        for s in range(basis.size(1)):
            product = torch.bmm(x[rows].unsqueeze(1), weight[weight_index[rows, s]]).squeeze(1)
            block = block + basis[rows, s].unsqueeze(1) * product
        blocks.append(block)
    if not blocks:
        return x.new_zeros(0, weight.size(2))
    return torch.cat(blocks)


def _pseudo(pseudo) -> Tensor:
    if not isinstance(pseudo, Tensor) or not pseudo.is_floating_point():
        got = pseudo.dtype if isinstance(pseudo, Tensor) else type(pseudo).__name__
        raise TypeError(f"spline_basis: pseudo (the edge_attr) must be a floating tensor, "
                        f"got {got}")
    pseudo = pseudo.unsqueeze(-1) if pseudo.dim() == 1 else pseudo
    if pseudo.dim() != 2:
        raise ValueError(f"spline_basis: pseudo (the edge_attr) must be [E, D], got shape "
                         f"{list(pseudo.shape)}")
    bad = ~(pseudo >= 0) | ~torch.isfinite(pseudo)
    if bad.any():
        edge, dim = (int(v) for v in bad.nonzero()[0])
        raise ValueError(f"spline_basis: pseudo (the edge_attr) must hold finite values >= 0 "
                         f"(pseudo-coordinates in [0, 1]); edge {edge}, dimension {dim} holds "
                         f"{float(pseudo[edge, dim])}")
    return pseudo


def _kernel(kernel_size, is_open_spline, dims: int) -> tuple[Tensor, Tensor]:
    sizes = torch.as_tensor(kernel_size).long().view(-1)
    flags = torch.as_tensor(is_open_spline).long().view(-1)
    if sizes.numel() != dims or flags.numel() != dims:
        raise ValueError(f"spline_basis: kernel_size and is_open_spline must hold one entry "
                         f"per pseudo dimension ({dims}), got {sizes.numel()} and "
                         f"{flags.numel()}")
    if dims and int(sizes.min()) < 1:
        raise ValueError(f"spline_basis: kernel_size must be >= 1, got {sizes.tolist()}")
    if dims and not bool(((flags == 0) | (flags == 1)).all()):
        raise ValueError(f"spline_basis: is_open_spline must hold 0 or 1, got {flags.tolist()}")
    return sizes, flags


def check_open_spans(owner: str, sizes: list, opens: list, degree: int) -> None:
    """An open spline of ``degree`` spans ``kernel_size - degree`` knot intervals: fewer
    than 0 scales every coordinate negative, and PyG's kernels then index weights out of
    range."""
    for size, is_open in zip(sizes, opens, strict=True):
        if is_open and size < degree:
            raise ValueError(f"{owner}: an open spline of degree {degree} needs "
                             f"kernel_size >= {degree}, got {sizes}")


def per_dimension(owner: str, name: str, value, dims: int) -> list:
    """A per-dimension option (kernel sizes, open flags): one value for every dimension,
    or a list or tuple of one each."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * dims
    if len(values) != dims:
        raise ValueError(f"{owner}: {name} needs one entry per dimension ({dims}), got "
                         f"{value!r}")
    return values
