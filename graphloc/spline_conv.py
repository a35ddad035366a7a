"""Drop-in replacement for the ``torch_spline_conv`` package, on graphloc's ops.

``from graphloc.spline_conv import spline_basis, spline_weighting, spline_conv`` wherever
code imported them from torch_spline_conv: its public API with its signatures and return
values. ``spline_basis`` and ``spline_weighting`` run ``graphloc.ops``'s; ``spline_conv``
composes them as torch_spline_conv's does. Where it differs, by design: a pseudo-coordinate
that is negative, NaN or infinite is refused by name (torch_spline_conv's kernels read a
weight outside the array with it), and so are a root weight or bias of another shape than
``[C_in, C_out]`` and ``[C_out]`` (torch broadcast a one-entry bias).

Each function takes ``torch.jit.script`` (torch_spline_conv scripts ``spline_conv``): the
typed function below compiles and runs graphloc's Python implementation through
``torch.jit.ignore``, as ``graphloc.scatter``'s do (a scripted module calling one runs in
this process, but cannot be saved with ``torch.jit.save``).

(No ``from __future__ import annotations`` here: TorchScript reads these annotations as
types.)
"""

import torch
from torch import Tensor

from graphloc.ops import check_index, scatter
from graphloc.ops import spline as _spline

__all__ = ["spline_basis", "spline_weighting", "spline_conv"]


# --- graphloc's implementations, called from TorchScript as Python ----------------------

@torch.jit.ignore
def _basis(pseudo: Tensor, kernel_size: Tensor, is_open_spline: Tensor,
           degree: int) -> tuple[Tensor, Tensor]:
    return _spline.spline_basis(pseudo, kernel_size, is_open_spline, degree)


@torch.jit.ignore
def _weighting(x: Tensor, weight: Tensor, basis: Tensor, weight_index: Tensor) -> Tensor:
    return _spline.spline_weighting(x, weight, basis, weight_index)


@torch.jit.ignore
def _conv(x: Tensor, edge_index: Tensor, pseudo: Tensor, weight: Tensor, kernel_size: Tensor,
          is_open_spline: Tensor, degree: int, norm: bool, root_weight: Tensor | None,
          bias: Tensor | None) -> Tensor:
    x = x.unsqueeze(-1) if x.dim() == 1 else x
    pseudo = pseudo.unsqueeze(-1) if pseudo.dim() == 1 else pseudo
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"spline_conv: edge_index must be [2, E], got "
                         f"{list(edge_index.shape)}")
    check_index(edge_index, x.size(0), "edge_index")  # ids of x's rows
    row, col = edge_index[0], edge_index[1]
    basis, weight_index = _spline.spline_basis(pseudo, kernel_size, is_open_spline, degree)
    messages = _spline.spline_weighting(x.index_select(0, col), weight, basis, weight_index)
    out = scatter(messages, row, 0, dim_size=x.size(0), reduce="mean" if norm else "sum")
    _check_shape(root_weight, (x.size(1), weight.size(2)), "root_weight")
    _check_shape(bias, (weight.size(2),), "bias")
    if root_weight is not None:
        out = out + x @ root_weight
    if bias is not None:
        out = out + bias
    return out


def _check_shape(t: Tensor | None, shape: tuple, name: str) -> None:
    """An optional tensor of exactly ``shape`` (torch's broadcasting took a bias of
    another width, or failed in a product that named neither argument)."""
    if t is not None and tuple(t.shape) != shape:
        raise ValueError(f"spline_conv: {name} must be {list(shape)} (C_in = x's features, "
                         f"C_out = weight's last size), got {list(t.shape)}")


# --- torch_spline_conv's API --------------------------------------------------------------

def spline_basis(pseudo: Tensor, kernel_size: Tensor, is_open_spline: Tensor,
                 degree: int) -> tuple[Tensor, Tensor]:
    """torch_spline_conv's ``spline_basis``: per edge its ``(degree + 1) ** D`` B-spline
    basis values and the indices of the weights they multiply (``graphloc.ops``'s)."""
    return _basis(pseudo, kernel_size, is_open_spline, degree)


def spline_weighting(x: Tensor, weight: Tensor, basis: Tensor, weight_index: Tensor) -> Tensor:
    """torch_spline_conv's ``spline_weighting``:
    ``out[e] = sum_s basis[e, s] * x[e] @ weight[weight_index[e, s]]``."""
    return _weighting(x, weight, basis, weight_index)


def spline_conv(x: Tensor, edge_index: Tensor, pseudo: Tensor, weight: Tensor,
                kernel_size: Tensor, is_open_spline: Tensor, degree: int = 1,
                norm: bool = True, root_weight: Tensor | None = None,
                bias: Tensor | None = None) -> Tensor:
    """torch_spline_conv's ``spline_conv``: each edge ``(i, j)`` of ``edge_index`` carries
    ``x[j]`` through the B-spline kernel at ``pseudo``, summed at ``i`` (the first row, as
    torch_spline_conv's) and divided by ``i``'s edge count with ``norm``; then
    ``x @ root_weight`` and ``bias`` are added. ``x`` ``[N, C_in]`` (or ``[N]``),
    ``pseudo`` ``[E, D]`` (or ``[E]``), ``weight`` ``[K, C_in, C_out]``."""
    return _conv(x, edge_index, pseudo, weight, kernel_size, is_open_spline, degree, norm,
                 root_weight, bias)
