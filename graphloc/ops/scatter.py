"""Scatter and segment reductions with torch_scatter's signatures, on graphloc's kernels.

An unsorted ``index`` is turned into a CSR by a stable counting sort, then reduced row by
row (``spmm`` gathering ``src`` through the sort permutation): no atomics, deterministic.
``graphloc.scatter`` re-exports these as a drop-in for the deprecated torch_scatter package.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_int
from graphloc.ops._library import kernels
from graphloc.ops.reference import _is_winner, as_rows, canonical_reduce

_INDEX_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)


def _check_index(index: Tensor, dim_size: int, name: str) -> None:
    if not isinstance(index, Tensor) or index.dtype not in _INDEX_DTYPES:
        got = index.dtype if isinstance(index, Tensor) else type(index).__name__
        raise TypeError(f"{name} must be an integer tensor, got {got}")
    if index.numel() == 0:
        return
    low, high = torch.aminmax(index)
    if low < 0:
        raise ValueError(f"{name} holds {int(low)}; indices must be >= 0")
    if high >= dim_size:
        raise ValueError(f"{name} holds {int(high)} but dim_size is {dim_size}")


def _check_indptr(indptr: Tensor, src: Tensor) -> None:
    if not isinstance(indptr, Tensor) or indptr.dtype not in (torch.int32, torch.int64):
        raise TypeError("indptr must be an int32 or int64 tensor")
    if indptr.dim() != 1 or indptr.numel() == 0:
        raise ValueError(f"indptr must be 1-D with at least one entry, got {list(indptr.shape)}")
    if not isinstance(src, Tensor) or src.dim() == 0:
        raise ValueError("src must be a tensor with at least one dimension")
    if indptr.device != src.device:
        raise ValueError(f"indptr is on {indptr.device} but src is on {src.device}")
    if int(indptr[0]) != 0 or int(indptr[-1]) != src.size(0):
        raise ValueError(f"indptr must run from 0 to src.size(0) = {src.size(0)}, got "
                         f"{int(indptr[0])} .. {int(indptr[-1])}")
    if indptr.numel() > 1 and bool((indptr[1:] < indptr[:-1]).any()):
        pos = int((indptr[1:] < indptr[:-1]).nonzero()[0])
        raise ValueError(f"indptr must be non-decreasing, but indptr[{pos + 1}] = "
                         f"{int(indptr[pos + 1])} < indptr[{pos}] = {int(indptr[pos])}")


def _check_src(src: Tensor) -> None:
    if not isinstance(src, Tensor) or not src.dtype.is_floating_point:
        got = src.dtype if isinstance(src, Tensor) else type(src).__name__
        raise TypeError(f"src must be a floating-point tensor, got {got}")
    if src.dim() == 0:
        raise ValueError("src is a 0-d tensor (a scalar): scatter needs at least one "
                         "dimension to reduce along")


def _checked_dim(dim, src: Tensor) -> int:
    """``dim`` in ``[-src.dim(), src.dim())`` as a non-negative axis (no silent wrapping)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if not -src.dim() <= dim < src.dim():
        raise ValueError(f"dim={dim} is out of range for src with {src.dim()} dimensions "
                         f"(expected {-src.dim()} .. {src.dim() - 1})")
    return dim % src.dim()


def _checked_dim_size(dim_size, index: Tensor) -> int:
    if dim_size is None:
        return int(index.max()) + 1 if index.numel() else 0
    return check_int(dim_size, "dim_size", 0)


def _check_out(out: Tensor, src: Tensor, dim: int, name: str = "out") -> None:
    """``out`` has src's shape except along ``dim``, and src's dtype and device."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(out).__name__}")
    expected = list(src.shape)
    expected[dim] = out.size(dim) if out.dim() == src.dim() else -1
    if out.dim() != src.dim() or list(out.shape) != expected:
        raise ValueError(f"{name} has shape {list(out.shape)} but must match src's shape "
                         f"{list(src.shape)} in every dimension except dim={dim}")
    if out.dtype != src.dtype or out.device != src.device:
        raise TypeError(f"{name} is {out.dtype} on {out.device} but src is {src.dtype} on "
                        f"{src.device}")


def _index_along(index: Tensor, src: Tensor, dim: int) -> Tensor | None:
    """The 1-D index along ``dim`` if ``index`` is one (or a broadcast of one), else None."""
    if index.dim() == 1:
        if index.numel() != src.size(dim):
            raise ValueError(f"index has {index.numel()} entries but src has {src.size(dim)} "
                             f"along dim {dim}")
        return index
    if index.shape != src.shape:
        raise ValueError(f"index must be 1-D or have src's shape {list(src.shape)}, got "
                         f"{list(index.shape)}")
    rows = as_rows(index.movedim(dim, 0))
    return rows[:, 0] if bool((rows == rows[:, :1]).all()) else None


def _scatter_csr(src2: Tensor, index: Tensor, dim_size: int, reduce: str):
    """Reduces rows of ``src2 [M, K]`` into ``dim_size`` rows: (out, arg as source rows)."""
    M = src2.size(0)
    dtype = torch.int32 if max(M, dim_size) < 2**31 - 1 else torch.int64
    index = index.to(dtype)
    indptr, perm = kernels.coo_to_csr(index, dim_size)
    csc = (None, None, None)
    if torch.is_grad_enabled() and src2.requires_grad:
        # The transpose has one entry per source row m: destination index[m], at CSR
        # position inv[m].
        inv = torch.empty_like(perm).index_copy_(0, perm.long(), torch.arange(
            M, dtype=dtype, device=src2.device))
        csc = (torch.arange(M + 1, dtype=dtype, device=src2.device), index, inv)
    out, arg = kernels.spmm(indptr, perm, None, src2, reduce, *csc)
    if arg.numel():  # CSR positions -> source rows; the sentinel M stays M
        arg = torch.cat([perm.long(), perm.new_full((1,), M).long()])[arg.long()]
    return out, arg


def _scatter(src, index, dim, dim_size, reduce):
    _check_src(src)
    reduce = canonical_reduce(reduce)
    dim = _checked_dim(dim, src)
    _check_index(index, 2**63 - 1, "index")
    dim_size = _checked_dim_size(dim_size, index)
    _check_index(index, dim_size, "index")
    if index.device != src.device:
        raise ValueError(f"index is on {index.device} but src is on {src.device}")
    flat = _index_along(index, src, dim)
    if flat is None:
        return _scatter_elementwise(src, index, dim, dim_size, reduce)
    moved = src.movedim(dim, 0)
    out, arg = _scatter_csr(as_rows(moved), flat, dim_size,
                            reduce)
    shape = (dim_size, *moved.shape[1:])
    out = out.view(shape).movedim(0, dim)
    return out, (arg.view(shape).movedim(0, dim) if arg.numel() else None)


def _scatter_elementwise(src, index, dim, dim_size, reduce):
    # A different index per element: torch's scatter_reduce, with the arg found afterwards.
    shape = list(src.shape)
    shape[dim] = dim_size
    index = index.long()
    if reduce in ("sum", "mean"):
        out = src.new_zeros(shape).scatter_reduce(dim, index, src, reduce, include_self=False)
        return out, None
    mode = "amax" if reduce == "max" else "amin"
    out = src.new_zeros(shape).scatter_reduce(dim, index, src, mode, include_self=False)
    pos = torch.arange(src.size(dim), device=src.device).view(
        [-1 if d == dim else 1 for d in range(src.dim())]).expand_as(src)
    won = torch.where(_is_winner(src, out.detach().gather(dim, index)), pos, src.size(dim))
    arg = torch.full(shape, src.size(dim), dtype=torch.long, device=src.device)
    return out, arg.scatter_reduce(dim, index, won, "amin", include_self=True)


# --- torch_scatter's API ------------------------------------------------------------------

def _reduce_into(out: Tensor, src, index, dim, reduce):
    """torch_scatter's ``out=`` contract: the existing values of ``out`` take part."""
    _check_src(src)
    dim = _checked_dim(dim, src)
    _check_out(out, src, dim)
    result, arg = _scatter(src, index, dim, out.size(dim), reduce)
    if reduce in ("sum", "mean"):
        out.add_(result if reduce == "sum" else _scatter(src, index, dim, out.size(dim),
                                                         "sum")[0])
        if reduce == "mean":
            flat = index if index.dim() == 1 else index.movedim(dim, 0)[(slice(None),) +
                                                                         (0,) * (src.dim() - 1)]
            count = torch.bincount(flat.long(), minlength=out.size(dim)).clamp(min=1)
            out.div_(count.view([-1 if d == dim else 1 for d in range(out.dim())]).to(out.dtype))
        return out, None
    better = result > out if reduce == "max" else result < out
    better |= result.isnan() & ~out.isnan()  # NaN propagates, as torch.amax
    wins = better & (arg < src.size(dim))  # empty groups and ties keep out's value
    out.copy_(torch.where(wins, result, out))
    return out, torch.where(wins, arg, src.size(dim))


def _scatter_api(src, index, dim, out, dim_size, reduce):
    reduce = canonical_reduce(reduce)
    if out is None:
        return _scatter(src, index, dim, dim_size, reduce)
    return _reduce_into(out, src, index, dim, reduce)


def scatter(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
            dim_size: int | None = None, reduce: str = "sum") -> Tensor:
    """``out[..., index[i], ...] = reduce(src[..., i, ...])`` along ``dim``.

    ``index`` is 1-D (along ``dim``) or src's shape. ``reduce`` is sum/add, mean, max or min;
    empty outputs are 0. With ``out``, the result is reduced into it as torch_scatter does:
    sum adds to it, max/min keep its values where they win, mean divides (out + sum) by
    the group sizes.
    """
    return _scatter_api(src, index, dim, out, dim_size, reduce)[0]


def scatter_sum(src, index, dim=-1, out=None, dim_size=None):
    return scatter(src, index, dim, out, dim_size, "sum")


scatter_add = scatter_sum


def scatter_mean(src, index, dim=-1, out=None, dim_size=None):
    return scatter(src, index, dim, out, dim_size, "mean")


def scatter_max(src, index, dim=-1, out=None, dim_size=None):
    """Returns ``(out, argmax)``; argmax is ``src.size(dim)`` where no element of src won."""
    return _scatter_api(src, index, dim, out, dim_size, "max")


def scatter_min(src, index, dim=-1, out=None, dim_size=None):
    """Returns ``(out, argmin)``; argmin is ``src.size(dim)`` where no element of src won."""
    return _scatter_api(src, index, dim, out, dim_size, "min")


def segment_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None,
                reduce: str = "sum"):
    """Reduces ``src`` rows ``indptr[i]:indptr[i+1]`` (along dim 0); max/min also return the
    arg (``src.size(0)`` for empty segments), like torch_scatter's ``segment_csr``."""
    _check_src(src)
    _check_indptr(indptr, src)
    reduce = canonical_reduce(reduce)
    result, arg = kernels.segment_reduce(as_rows(src), indptr,
                                         reduce)
    shape = (indptr.numel() - 1, *src.shape[1:])
    if out is not None:
        _check_out(out, result.view(shape), 0)
        if out.size(0) != shape[0]:
            raise ValueError(f"out has {out.size(0)} rows but indptr describes {shape[0]}")
    result = result.view(shape) if out is None else out.copy_(result.view(shape))
    return (result, arg.long().view(shape)) if arg.numel() else result


def gather_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None) -> Tensor:
    """Repeats ``src[i]`` for every position of segment ``i``: the inverse of segment_csr."""
    _check_src(src)
    if not isinstance(indptr, Tensor) or indptr.dim() != 1 or indptr.numel() != src.size(0) + 1:
        raise ValueError(f"indptr must be 1-D with src.size(0) + 1 = {src.size(0) + 1} entries")
    num_edges = int(indptr[-1])
    _check_indptr(indptr, src.new_empty(num_edges, 0))
    result = kernels.gather_csr(as_rows(src), indptr, num_edges)
    result = result.view(num_edges, *src.shape[1:])
    return result if out is None else out.copy_(result)


def _group_shift(src: Tensor, index: Tensor, dim: int, dim_size) -> tuple[Tensor, Tensor]:
    """``src`` minus its group's max, and the expanded index. A group of only -inf shifts by
    0 (its exponentials are then 0, not exp(nan)); NaN and +inf propagate, as torch."""
    dim = _checked_dim(dim, src)
    idx = index if index.dim() != 1 else index.view(
        [-1 if d == dim else 1 for d in range(src.dim())]).expand_as(src)
    group_max = scatter(src.detach(), index, dim, dim_size=dim_size, reduce="max")
    group_max = group_max.masked_fill(group_max == float("-inf"), 0.0)
    return src - group_max.gather(dim, idx.long()), idx


def scatter_softmax(src: Tensor, index: Tensor, dim: int = -1,
                    dim_size: int | None = None) -> Tensor:
    """Softmax of ``src`` over the groups of equal ``index`` along ``dim``. A group whose
    entries are all -inf (fully masked) gets weights 0; NaN or +inf make the group NaN."""
    shifted, idx = _group_shift(src, index, dim, dim_size)
    dim = dim % src.dim()
    exp = shifted.exp()
    total = scatter(exp, index, dim, dim_size=dim_size, reduce="sum").gather(dim, idx.long())
    return torch.where(total == 0, 0.0, exp / total)


def scatter_log_softmax(src: Tensor, index: Tensor, dim: int = -1, eps: float = 1e-12,
                        dim_size: int | None = None) -> Tensor:
    """Log-softmax of ``src`` over the groups of equal ``index`` along ``dim`` (-inf
    entries give -inf)."""
    shifted, idx = _group_shift(src, index, dim, dim_size)
    dim = dim % src.dim()
    total = scatter(shifted.exp(), index, dim, dim_size=dim_size, reduce="sum")
    return shifted - (total + eps).log().gather(dim, idx.long())


def gather(x: Tensor, index: Tensor) -> Tensor:
    """``x[index]`` along dim 0, with the index range checked."""
    if not isinstance(x, Tensor) or x.dim() == 0:
        raise ValueError("x must be a tensor with at least one dimension")
    _check_index(index, x.size(0), "index")
    if index.dim() != 1:
        raise ValueError(f"index must be 1-D, got shape {list(index.shape)}")
    return x.index_select(0, index.long())
