"""Drop-in replacement for the deprecated ``torch_scatter`` package, on graphloc's kernels.

``from graphloc.scatter import scatter, scatter_max, segment_csr`` wherever code imported
them from torch_scatter: torch_scatter 2.1's whole public API, with its signatures, return
values, dtypes and index broadcasting; deterministic and parallel on CPU.

Each function takes ``torch.jit.script`` as torch_scatter's do (its own test suite scripts
them): the typed function below compiles, and the work runs in graphloc's Python
implementation (``graphloc.ops.scatter``) through ``torch.jit.ignore``. So a scripted
module that calls them runs in this process, but cannot be saved with ``torch.jit.save``
(torch names the Python call it cannot export).

(No ``from __future__ import annotations`` here: TorchScript reads these annotations as
types, and it calls an ignored function only with every argument given, so each function
passes all of its own.)
"""


import importlib

import torch
from torch import Tensor

# by module path: graphloc.ops's function ``scatter`` shadows the submodule's attribute
_ops = importlib.import_module("graphloc.ops.scatter")

# --- graphloc's implementations, called from TorchScript as Python ----------------------

@torch.jit.ignore
def _reduced(src: Tensor, index: Tensor, dim: int, out: Tensor | None,
             dim_size: int | None, reduce: str) -> Tensor:
    return _ops.scatter(src, index, dim, out, dim_size, reduce)


@torch.jit.ignore
def _reduced_with_arg(src: Tensor, index: Tensor, dim: int, out: Tensor | None,
                      dim_size: int | None, reduce: str) -> tuple[Tensor, Tensor]:
    function = _ops.scatter_max if reduce == "max" else _ops.scatter_min
    return function(src, index, dim, out, dim_size)


@torch.jit.ignore
def _coo_reduced(src: Tensor, index: Tensor, out: Tensor | None, dim_size: int | None,
                 reduce: str) -> Tensor:
    return _ops.segment_coo(src, index, out, dim_size, reduce)


@torch.jit.ignore
def _coo_reduced_with_arg(src: Tensor, index: Tensor, out: Tensor | None,
                          dim_size: int | None, reduce: str) -> tuple[Tensor, Tensor]:
    function = _ops.segment_max_coo if reduce == "max" else _ops.segment_min_coo
    return function(src, index, out, dim_size)


@torch.jit.ignore
def _csr_reduced(src: Tensor, indptr: Tensor, out: Tensor | None, reduce: str) -> Tensor:
    return _ops.segment_csr(src, indptr, out, reduce)


@torch.jit.ignore
def _csr_reduced_with_arg(src: Tensor, indptr: Tensor, out: Tensor | None,
                          reduce: str) -> tuple[Tensor, Tensor]:
    function = _ops.segment_max_csr if reduce == "max" else _ops.segment_min_csr
    return function(src, indptr, out)


@torch.jit.ignore
def _gathered(src: Tensor, index: Tensor, out: Tensor | None, csr: bool) -> Tensor:
    return (_ops.gather_csr if csr else _ops.gather_coo)(src, index, out)


@torch.jit.ignore
def _std(src: Tensor, index: Tensor, dim: int, out: Tensor | None,
         dim_size: int | None, unbiased: bool) -> Tensor:
    return _ops.scatter_std(src, index, dim, out, dim_size, unbiased)


@torch.jit.ignore
def _logsumexp(src: Tensor, index: Tensor, dim: int, out: Tensor | None,
               dim_size: int | None, eps: float) -> Tensor:
    return _ops.scatter_logsumexp(src, index, dim, out, dim_size, eps)


@torch.jit.ignore
def _softmax(src: Tensor, index: Tensor, dim: int, eps: float, dim_size: int | None,
             log: bool) -> Tensor:
    if log:
        return _ops.scatter_log_softmax(src, index, dim, eps, dim_size)
    return _ops.scatter_softmax(src, index, dim, dim_size)


# --- torch_scatter's API ------------------------------------------------------------------

def scatter(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
            dim_size: int | None = None, reduce: str = "sum") -> Tensor:
    """``out[..., index[i], ...] = reduce(src[..., i, ...])`` along ``dim``; reduce is
    sum/add, mul, mean, max or min (``graphloc.ops.scatter.scatter``)."""
    return _reduced(src, index, dim, out, dim_size, reduce)


def scatter_sum(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                dim_size: int | None = None) -> Tensor:
    return _reduced(src, index, dim, out, dim_size, "sum")


scatter_add = scatter_sum


def scatter_mul(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                dim_size: int | None = None) -> Tensor:
    """Products of the groups (1 for an empty group)."""
    return _reduced(src, index, dim, out, dim_size, "mul")


def scatter_mean(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                 dim_size: int | None = None) -> Tensor:
    return _reduced(src, index, dim, out, dim_size, "mean")


def scatter_max(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                dim_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Returns ``(out, argmax)``; argmax is ``src.size(dim)`` where no element of src won."""
    return _reduced_with_arg(src, index, dim, out, dim_size, "max")


def scatter_min(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                dim_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Returns ``(out, argmin)``; argmin is ``src.size(dim)`` where no element of src won."""
    return _reduced_with_arg(src, index, dim, out, dim_size, "min")


def scatter_std(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                dim_size: int | None = None, unbiased: bool = True) -> Tensor:
    """Standard deviation of each group (``graphloc.ops.scatter.scatter_std``)."""
    return _std(src, index, dim, out, dim_size, unbiased)


def scatter_logsumexp(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                      dim_size: int | None = None, eps: float = 1e-12) -> Tensor:
    """``log(eps + sum(exp(src - m))) + m`` of each group, m its max
    (``graphloc.ops.scatter.scatter_logsumexp``)."""
    return _logsumexp(src, index, dim, out, dim_size, eps)


def scatter_softmax(src: Tensor, index: Tensor, dim: int = -1,
                    dim_size: int | None = None) -> Tensor:
    """Softmax over the groups of equal ``index`` (a fully masked group gets weights 0)."""
    return _softmax(src, index, dim, 0.0, dim_size, False)


def scatter_log_softmax(src: Tensor, index: Tensor, dim: int = -1, eps: float = 1e-12,
                        dim_size: int | None = None) -> Tensor:
    """Log-softmax over the groups of equal ``index``, torch_scatter's formula."""
    return _softmax(src, index, dim, eps, dim_size, True)


def segment_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None,
                reduce: str = "sum") -> Tensor:
    """Reduces the segments ``indptr[..., i] : indptr[..., i + 1]`` of ``src`` along
    ``dim = indptr.dim() - 1`` (``graphloc.ops.scatter.segment_csr``)."""
    return _csr_reduced(src, indptr, out, reduce)


def segment_sum_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None) -> Tensor:
    return _csr_reduced(src, indptr, out, "sum")


segment_add_csr = segment_sum_csr


def segment_mean_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None) -> Tensor:
    """Segment means (integer means truncate toward zero, as torch_scatter's)."""
    return _csr_reduced(src, indptr, out, "mean")


def segment_max_csr(src: Tensor, indptr: Tensor,
                    out: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Returns ``(out, argmax)``; argmax is ``src.size(dim)`` for an empty segment."""
    return _csr_reduced_with_arg(src, indptr, out, "max")


def segment_min_csr(src: Tensor, indptr: Tensor,
                    out: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Returns ``(out, argmin)``; argmin is ``src.size(dim)`` for an empty segment."""
    return _csr_reduced_with_arg(src, indptr, out, "min")


def gather_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None) -> Tensor:
    """Repeats ``src[..., i, ...]`` over segment ``i`` along ``dim = indptr.dim() - 1``."""
    return _gathered(src, indptr, out, True)


def segment_coo(src: Tensor, index: Tensor, out: Tensor | None = None,
                dim_size: int | None = None, reduce: str = "sum") -> Tensor:
    """Reduces along ``dim = index.dim() - 1`` by a sorted index (any order works)."""
    return _coo_reduced(src, index, out, dim_size, reduce)


def segment_sum_coo(src: Tensor, index: Tensor, out: Tensor | None = None,
                    dim_size: int | None = None) -> Tensor:
    return _coo_reduced(src, index, out, dim_size, "sum")


segment_add_coo = segment_sum_coo


def segment_mean_coo(src: Tensor, index: Tensor, out: Tensor | None = None,
                     dim_size: int | None = None) -> Tensor:
    return _coo_reduced(src, index, out, dim_size, "mean")


def segment_max_coo(src: Tensor, index: Tensor, out: Tensor | None = None,
                    dim_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Returns ``(out, argmax)``; argmax is ``src.size(dim)`` for an empty slot."""
    return _coo_reduced_with_arg(src, index, out, dim_size, "max")


def segment_min_coo(src: Tensor, index: Tensor, out: Tensor | None = None,
                    dim_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Returns ``(out, argmin)``; argmin is ``src.size(dim)`` for an empty slot."""
    return _coo_reduced_with_arg(src, index, out, dim_size, "min")


def gather_coo(src: Tensor, index: Tensor, out: Tensor | None = None) -> Tensor:
    """``out[..., e, ...] = src[..., index[..., e], ...]`` along ``dim = index.dim() - 1``."""
    return _gathered(src, index, out, False)


__all__ = ["scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
           "scatter_max", "scatter_min", "scatter_std", "scatter_logsumexp",
           "scatter_softmax", "scatter_log_softmax",
           "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr",
           "segment_max_csr", "segment_min_csr", "gather_csr",
           "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
           "segment_max_coo", "segment_min_coo", "gather_coo"]
