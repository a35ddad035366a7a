"""Scatter and segment reductions with torch_scatter's signatures, on graphloc's kernels.

An unsorted ``index`` is turned into a CSR by a stable counting sort, then reduced row by
row (``spmm`` gathering ``src`` through the sort permutation): no atomics, deterministic.
``graphloc.scatter`` re-exports these as a drop-in for the deprecated torch_scatter package.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from graphloc.checks import check_flags, check_index, check_int
from graphloc.ops import reference
from graphloc.ops._library import gather_rows, kernels
from graphloc.ops.reference import canonical_reduce


def _check_indptr(indptr: Tensor, src: Tensor) -> None:
    if not isinstance(indptr, Tensor) or indptr.dtype not in (torch.int32, torch.int64):
        raise TypeError("indptr must be an int32 or int64 tensor")
    if indptr.dim() != 1 or indptr.numel() == 0:
        raise ValueError(f"indptr must be 1-D with at least one entry, got {list(indptr.shape)}")
    if not isinstance(src, Tensor) or src.dim() == 0:
        raise ValueError("src must be a tensor with at least one dimension")
    if indptr.device != src.device:
        raise ValueError(f"indptr is on {indptr.device} but src is on {src.device}")
    if torch.compiler.is_compiling():  # traced: the kernel checks the values it reads
        return
    if int(indptr[0]) != 0 or int(indptr[-1]) != src.size(0):
        raise ValueError(f"indptr must run from 0 to src.size(0) = {src.size(0)}, got "
                         f"{int(indptr[0])} .. {int(indptr[-1])}")
    if indptr.numel() > 1 and bool((indptr[1:] < indptr[:-1]).any()):
        pos = int((indptr[1:] < indptr[:-1]).nonzero()[0])
        raise ValueError(f"indptr must be non-decreasing, but indptr[{pos + 1}] = "
                         f"{int(indptr[pos + 1])} < indptr[{pos}] = {int(indptr[pos])}")


_VALUE_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                 torch.int64)
_CUDA_KERNEL_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


# torch_scatter's other integer dtypes, which the kernels do not take: see _small_ints_widened
_SMALL_INTS = (torch.int8, torch.uint8, torch.int16)


def _check_src(src: Tensor, name: str = "src") -> None:
    if not isinstance(src, Tensor) or src.dtype not in _VALUE_DTYPES + _SMALL_INTS:
        got = src.dtype if isinstance(src, Tensor) else type(src).__name__
        raise TypeError(f"{name} must be a float32, float64, bfloat16, float16, int64, int32, "
                        f"int16, int8 or uint8 tensor, got {got}")
    if src.dim() == 0:
        raise ValueError(f"{name} is a 0-d tensor (a scalar): scatter needs at least one "
                         "dimension to reduce along")


def _check_floating(src: Tensor, what: str) -> None:
    _check_src(src)
    if not src.is_floating_point():
        raise ValueError(f"{what} can only be computed over floating-point tensors, got "
                         f"src of dtype {src.dtype}")


def _small_ints_widened(function: Callable) -> Callable:
    """``function`` also for int8, uint8 and int16 ``src`` (torch_scatter takes them): the
    work runs in int64 and the values come back in src's dtype, so sums and products wrap
    around as torch's and torch_scatter's do, maxima and minima are exact, and a mean is
    the exact mean rounded as the wider integers' (torch_scatter wraps the sum, and its
    count, before dividing: uint8 [200, 200] gave 72). ``out`` must have src's dtype,
    and is written in place."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def widened(*args, **kwargs):
        src = args[0] if args else kwargs.get("src")
        if not isinstance(src, Tensor) or src.dtype not in _SMALL_INTS:
            return function(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        out = bound.arguments.get("out")
        if out is not None:
            if not isinstance(out, Tensor) or out.dtype != src.dtype:
                got = out.dtype if isinstance(out, Tensor) else type(out).__name__
                raise TypeError(f"out is {got} but src is {src.dtype}")
            bound.arguments["out"] = out.long()
        bound.arguments["src"] = src.long()
        try:
            result = function(*bound.args, **bound.kwargs)
        except (TypeError, ValueError) as err:  # name the caller's dtype, not the widened
            raise type(err)(str(err).replace(str(torch.int64), str(src.dtype))) from None
        values, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, None)
        values = out.copy_(values) if out is not None else values.to(src.dtype)
        return values if rest is None else (values, *rest)
    return widened


def _engine(src: Tensor, reduce: str):
    """The kernels, or their pure-torch twins where a GPU has no kernel for the call (the
    CUDA reductions take float32, float64 and bfloat16, and no products, log-sum-exps or
    softmaxes)."""
    if src.device.type != "cuda" or (src.dtype in _CUDA_KERNEL_DTYPES and
                                     reduce not in ("mul", "logsumexp", "softmax")):
        return kernels
    return reference


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


def _check_index_fits_out(index: Tensor, out: Tensor, dim: int) -> None:
    """With ``out=``, out's size along ``dim`` bounds the index: an error that names out
    (the dim_size the user never passed)."""
    check_index(index, 2**63 - 1, "index")
    if index.numel() and int(index.max()) >= out.size(dim):
        raise ValueError(f"index holds {int(index.max())} but out has {out.size(dim)} "
                         f"entries along dim={dim}")


def _broadcast_index(index: Tensor, src: Tensor, dim: int) -> Tensor:
    """torch_scatter's broadcasting, as a view: a 1-D index runs along ``dim``; an N-D index
    gains trailing dimensions of size 1; sizes of 1 stand for any size of src."""
    if index.device != src.device:
        raise ValueError(f"index is on {index.device} but src is on {src.device}")
    if index.dim() == 1:
        if index.numel() != src.size(dim):
            raise ValueError(f"index has {index.numel()} entries but src has {src.size(dim)} "
                             f"along dim {dim}")
        return index.reshape([-1 if d == dim else 1 for d in range(src.dim())])
    if index.dim() > src.dim():
        raise ValueError(f"index has {index.dim()} dimensions but src only {src.dim()}")
    shaped = index.reshape(*index.shape, *[1] * (src.dim() - index.dim()))
    for d, (i, n) in enumerate(zip(shaped.shape, src.shape, strict=True)):
        if i not in (1, n):
            raise ValueError(f"index of shape {list(index.shape)} does not broadcast against "
                             f"src of shape {list(src.shape)} (dimension {d}: {i} vs {n})")
    return shaped


def _traced_sizes():
    """torch's size predicates for sizes unknown while traced (imported then: they import
    sympy, 0.4 s and 34 MB that an eager import of graphloc does not need)."""
    from torch.fx.experimental import symbolic_shapes
    return symbolic_shapes


def _index_dtype(*sizes: int) -> torch.dtype:
    if torch.compiler.is_compiling():  # a size unknown while traced (a masked src's): int64
        known = _traced_sizes().statically_known_true
        return torch.int32 if all(known(size < 2**31 - 1) for size in sizes) else torch.int64
    return torch.int32 if max(sizes, default=0) < 2**31 - 1 else torch.int64


def _empty_result(src: Tensor, shape, reduce: str) -> Tensor:
    """The result over no elements (0, or 1 for products), still connected to src's graph."""
    out = src.new_ones(shape) if reduce == "mul" else src.new_zeros(shape)
    return out + src.sum() * 0 if src.requires_grad else out


def _divide_by_count(total: Tensor, count: Tensor) -> Tensor:
    """torch_scatter's means: true division for floats, floor division for integers."""
    count = count.clamp(min=1)
    if total.is_floating_point():
        return total / count.to(total.dtype)
    return torch.div(total, count.to(total.dtype), rounding_mode="floor")


def _slot_csr(slot: Tensor, num_slots: int, num_rows: int):
    """``slot`` in the smallest index dtype, and its CSR (indptr, perm) by a stable counting
    sort: the rows of each slot in their order."""
    slot = slot.to(_index_dtype(num_rows, num_slots))
    return (slot, *kernels.coo_to_csr(slot, num_slots))


def _reduce_slots(rows: Tensor, slot: Tensor, num_slots: int, reduce: str,
                  with_arg: bool = True, eps: float = 0.0):
    """Reduces ``rows [M, K]`` into ``num_slots`` rows by ``slot [M]``: a stable counting
    sort to a CSR, then one row-parallel kernel pass. Returns (out, arg as source rows, M
    where a slot is empty). ``reduce`` "logsumexp" adds ``eps`` inside the log (see
    ``segment_logsumexp``)."""
    M = rows.size(0)
    engine = _engine(rows, reduce)
    slot, indptr, perm = _slot_csr(slot, num_slots, M)
    if reduce == "logsumexp":  # its autograd is the op's own
        return engine.segment_logsumexp(rows, indptr, perm, eps), None
    csc = (None, None, None)
    if torch.is_grad_enabled() and rows.requires_grad:
        # The transpose has one entry per source row m: destination slot[m], at CSR
        # position inv[m].
        inv = torch.empty_like(perm).index_copy_(0, perm.long(), torch.arange(
            M, dtype=slot.dtype, device=rows.device))
        csc = (torch.arange(M + 1, dtype=slot.dtype, device=rows.device), slot, inv)
    out, arg = engine.spmm(indptr, perm, None, rows, reduce, *csc)
    if not arg.numel() or not with_arg:
        return out, None
    return out, engine.arg_sources(arg, perm, M)  # CSR positions -> rows (M stays M)


class _Slots(NamedTuple):
    """src's elements as rows [M, channels] with their output slot [M]: the dimensions
    before ``dim`` become batches of slots (slot = batch * dim_size + index), and an index
    that also varies along the dimensions after ``dim`` makes every (batch, channel) pair a
    batch of one channel."""
    rows: Tensor
    slot: Tensor
    num_slots: int
    batches: int
    shape: tuple  # of the reduced result
    length: int  # src.size(dim)
    restore: Callable  # [num_slots, channels] -> shape
    restore_rows: Callable  # [M, channels] -> src.shape


def _slots(src, index, dim, dim_size) -> _Slots:
    """The checked arguments as ``_Slots``; rows and slot are None for an empty result."""
    _check_src(src)
    dim = _checked_dim(dim, src)
    check_index(index, 2**63 - 1, "index")
    shaped = _broadcast_index(index, src, dim)
    dim_size = _checked_dim_size(dim_size, index)
    check_index(index, dim_size, "index")
    lead, trail = src.shape[:dim], src.shape[dim + 1:]
    B, L, K = math.prod(lead), src.size(dim), math.prod(trail)
    shape = (*lead, dim_size, *trail)
    # a masked src's size is unknown while traced: taken as non-empty, whose path also
    # reduces an empty src (to empty slots)
    empty = _traced_sizes().guard_or_false if torch.compiler.is_compiling() else bool
    if empty(src.numel() == 0) or empty(B * dim_size * K == 0):
        return _Slots(None, None, 0, 0, shape, L, None, None)
    per_channel = any(shaped.size(d) > 1 for d in range(dim + 1, src.dim()))
    if per_channel:
        idx = shaped.expand(src.shape).reshape(B, L, K).transpose(1, 2).reshape(B * K, L)
        rows = src.reshape(B, L, K).transpose(1, 2).reshape(B * K * L, 1)
    else:
        idx = shaped.expand(*lead, L, *[1] * len(trail)).reshape(B, L)
        rows = src.reshape(B * L, K)
    batches, channels = idx.size(0), rows.size(1)
    slot = idx.long() + torch.arange(batches, device=src.device).unsqueeze(1) * dim_size

    def restore(t):
        t = t.view(batches, dim_size, channels)
        if per_channel:
            t = t.view(B, K, dim_size).transpose(1, 2)
        return t.reshape(shape)

    def restore_rows(t):
        return t.view(B, K, L).transpose(1, 2).reshape(src.shape) if per_channel else \
            t.view(src.shape)
    return _Slots(rows, slot.reshape(-1), batches * dim_size, batches, shape, L, restore,
                  restore_rows)


def _scatter(src, index, dim, dim_size, reduce, with_arg: bool = True, eps: float = 0.0):
    """(out, arg) of reducing ``src`` along ``dim`` into ``dim_size`` slots (``_Slots``), in
    one kernel pass. arg (max/min) is the winner's position along ``dim``,
    ``src.size(dim)`` for an empty slot."""
    slots = _slots(src, index, dim, dim_size)
    if slots.rows is None:
        arg = torch.full(slots.shape, slots.length, dtype=torch.long, device=src.device)
        return _empty_result(src, slots.shape, reduce), arg
    integer_mean = reduce == "mean" and not src.is_floating_point()
    out, arg = _reduce_slots(slots.rows, slots.slot, slots.num_slots,
                             "sum" if integer_mean else reduce, with_arg, eps)
    if integer_mean:
        count = torch.bincount(slots.slot, minlength=slots.num_slots).unsqueeze(1)
        out = _divide_by_count(out, count)
    if arg is not None and slots.batches > 1:  # source rows -> positions along dim
        arg = torch.where(arg == slots.rows.size(0), slots.length, arg % slots.length)
    return slots.restore(out), (slots.restore(arg) if arg is not None else None)


def _group_softmax(src, index, dim, dim_size, eps: float, log: bool) -> Tensor:
    """The (log-)softmax of ``src`` over its groups (``_Slots``), in one kernel pass that
    writes each element at its own position: ``segment_softmax_rows``."""
    slots = _slots(src, index, dim, dim_size)
    if slots.rows is None:
        return torch.empty_like(src)
    engine = _engine(slots.rows, "softmax")
    _, indptr, perm = _slot_csr(slots.slot, slots.num_slots, slots.rows.size(0))
    return slots.restore_rows(engine.segment_softmax_rows(slots.rows, indptr, perm, eps, log))


def _group_sizes(src: Tensor, index: Tensor, dim: int, dim_size: int) -> Tensor:
    """How many elements of ``src`` each output element reduces, broadcastable to the
    output: a bincount for a 1-D index, else a scatter of ones."""
    if index.dim() == 1:
        count = torch.bincount(index.long(), minlength=dim_size).to(src.dtype)
        return count.view([-1 if d == dim else 1 for d in range(src.dim())])
    return _scatter(torch.ones_like(src), index, dim, dim_size, "sum", with_arg=False)[0]


# --- torch_scatter's API ------------------------------------------------------------------

def _reduce_into(out: Tensor, src, index, dim, reduce):
    """torch_scatter's ``out=`` contract: the existing values of ``out`` take part (sum adds,
    mul multiplies, mean divides out + sum by the group sizes, max/min keep out's values
    where they win)."""
    _check_src(src)
    dim = _checked_dim(dim, src)
    _check_out(out, src, dim)
    _check_index_fits_out(index, out, dim)
    size = out.size(dim)
    if reduce in ("sum", "mean", "mul"):
        result = _scatter(src, index, dim, size, "mul" if reduce == "mul" else "sum",
                          with_arg=False)[0]
        if reduce == "mul":
            return out.mul_(result), None
        out.add_(result)
        if reduce == "mean":
            out.copy_(_divide_by_count(out, _group_sizes(src, index, dim, size)))
        return out, None
    result, arg = _scatter(src, index, dim, size, reduce)
    better = result > out if reduce == "max" else result < out
    if result.is_floating_point():
        better |= result.isnan() & ~out.isnan()  # NaN propagates, as torch.amax
    wins = better & (arg < src.size(dim))  # empty groups and ties keep out's value
    out.copy_(torch.where(wins, result, out))
    return out, torch.where(wins, arg, src.size(dim))


def _scatter_api(src, index, dim, out, dim_size, reduce, with_arg: bool = True):
    reduce = canonical_reduce(reduce, allow_mul=True)
    if out is None:
        return _scatter(src, index, dim, dim_size, reduce, with_arg)
    return _reduce_into(out, src, index, dim, reduce)


@_small_ints_widened
def scatter(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
            dim_size: int | None = None, reduce: str = "sum") -> Tensor:
    """``out[..., index[i], ...] = reduce(src[..., i, ...])`` along ``dim``.

    ``index`` broadcasts against ``src`` as in torch_scatter (1-D along ``dim``, or N-D with
    sizes equal to src's or 1). ``reduce`` is sum/add, mul, mean, max or min; empty outputs
    are 0 (1 for mul). Integer means round down, as torch_scatter's. With ``out``, the result
    is reduced into it as torch_scatter does: sum adds to it, mul multiplies it, max/min
    keep its values where they win, mean divides (out + sum) by the group sizes.
    """
    return _scatter_api(src, index, dim, out, dim_size, reduce, with_arg=False)[0]


def scatter_sum(src, index, dim=-1, out=None, dim_size=None):
    return scatter(src, index, dim, out, dim_size, "sum")


scatter_add = scatter_sum


def scatter_mul(src, index, dim=-1, out=None, dim_size=None):
    """Products of the groups (1 for an empty group); each entry's gradient is the product
    of its group's other entries (no division: exact with zeros, NaN or infinities)."""
    return scatter(src, index, dim, out, dim_size, "mul")


def scatter_mean(src, index, dim=-1, out=None, dim_size=None):
    return scatter(src, index, dim, out, dim_size, "mean")


@_small_ints_widened
def scatter_max(src, index, dim=-1, out=None, dim_size=None):
    """Returns ``(out, argmax)``; argmax is ``src.size(dim)`` where no element of src won."""
    return _scatter_api(src, index, dim, out, dim_size, "max")


@_small_ints_widened
def scatter_min(src, index, dim=-1, out=None, dim_size=None):
    """Returns ``(out, argmin)``; argmin is ``src.size(dim)`` where no element of src won."""
    return _scatter_api(src, index, dim, out, dim_size, "min")


def scatter_std(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                dim_size: int | None = None, unbiased: bool = True) -> Tensor:
    """Standard deviation of each group. A group of one element gets 0 (torch gives NaN);
    unlike torch_scatter, no 1e-6 is added to the divisor. With ``out``, the squared
    deviations are added to it before the division, as torch_scatter does."""
    _check_floating(src, "scatter_std")
    check_flags("scatter_std", unbiased=unbiased)
    dim = _checked_dim(dim, src)
    if out is not None:
        _check_out(out, src, dim)
        _check_index_fits_out(index, out, dim)
        dim_size = out.size(dim)
    total = scatter(src, index, dim, dim_size=dim_size)
    count = _group_sizes(src, index, dim, total.size(dim))
    mean = total / count.clamp(min=1)
    deviation = src - _per_element(mean, index, dim, src)
    squares = scatter(deviation * deviation, index, dim, out, dim_size, "sum")
    divisor = (count - 1 if unbiased else count).clamp(min=1)
    result = (squares / divisor).sqrt()
    return out.copy_(result) if out is not None else result


def scatter_logsumexp(src: Tensor, index: Tensor, dim: int = -1, out: Tensor | None = None,
                      dim_size: int | None = None, eps: float = 1e-12) -> Tensor:
    """``log(eps + sum(exp(src - m))) + m`` of each group, m its max (no overflow), as
    torch_scatter's formula, in one kernel pass (``segment_logsumexp``).

    An empty group gives 0 (as torch_scatter), a group of only -inf gives -inf (as
    torch.logsumexp; torch_scatter gives 0). With ``out``, its values join their groups
    (``logaddexp(out, group)``), and empty groups keep them. The gradient holds m
    constant, as torch_scatter's autograd does (its max is written into a tensor without
    history): the group's softmax scaled by sum / (sum + eps).
    """
    _check_floating(src, "scatter_logsumexp")
    dim = _checked_dim(dim, src)
    if out is not None:
        _check_out(out, src, dim)
        _check_index_fits_out(index, out, dim)
        dim_size = out.size(dim)
    result = _scatter(src, index, dim, dim_size, "logsumexp", eps=eps)[0]
    if out is None:
        return result
    count = _group_sizes(src, index, dim, result.size(dim))
    return out.copy_(torch.where(count > 0, torch.logaddexp(out, result), out))


def _expanded_indptr(src: Tensor, indptr: Tensor, name: str = "indptr"):
    """torch_scatter's N-D indptr: ``[*src.shape[:dim], R + 1]`` with ``dim =
    indptr.dim() - 1`` (leading sizes of 1 broadcast). Returns (dim, indptr as [B, R + 1])."""
    if not isinstance(indptr, Tensor) or indptr.dtype not in (torch.int32, torch.int64):
        got = indptr.dtype if isinstance(indptr, Tensor) else type(indptr).__name__
        raise TypeError(f"{name} must be an int32 or int64 tensor, got {got}")
    if indptr.dim() == 0 or indptr.dim() > src.dim():
        raise ValueError(f"{name} must have 1 to src.dim() = {src.dim()} dimensions, got "
                         f"shape {list(indptr.shape)}")
    if indptr.device != src.device:
        raise ValueError(f"{name} is on {indptr.device} but src is on {src.device}")
    dim = indptr.dim() - 1
    for d in range(dim):
        if indptr.size(d) not in (1, src.size(d)):
            raise ValueError(f"{name} of shape {list(indptr.shape)} does not broadcast against "
                             f"src of shape {list(src.shape)} (dimension {d})")
    B = math.prod(src.shape[:dim])
    return dim, indptr.expand(*src.shape[:dim], indptr.size(-1)).reshape(B, indptr.size(-1))


def _check_segment_bounds(indptr: Tensor, low_end: int | None, high: int, name: str) -> None:
    """Every row of ``indptr [B, R + 1]`` is non-decreasing within [0, high]; with
    ``low_end``, rows start at 0 and end exactly at ``low_end``."""
    if indptr.numel() == 0:
        return
    first, last = indptr[:, 0], indptr[:, -1]
    if low_end is not None and bool(((first != 0) | (last != low_end)).any()):
        b = int(((first != 0) | (last != low_end)).nonzero()[0])
        raise ValueError(f"{name} must run from 0 to {low_end} in every segment row, but row "
                         f"{b} runs from {int(first[b])} to {int(last[b])}")
    if bool((first < 0).any()) or bool((last > high).any()):
        b = int(((first < 0) | (last > high)).nonzero()[0])
        raise ValueError(f"{name} row {b} runs from {int(first[b])} to {int(last[b])}, "
                         f"outside src's 0 .. {high} along the segment dimension")
    step = indptr[:, 1:] - indptr[:, :-1]
    if step.numel() and bool((step < 0).any()):
        b, r = (int(v) for v in (step < 0).nonzero()[0])
        raise ValueError(f"{name} must be non-decreasing, but in row {b} {name}[{r + 1}] = "
                         f"{int(indptr[b, r + 1])} < {name}[{r}] = {int(indptr[b, r])}")


def _segment_csr(src: Tensor, indptr: Tensor, reduce: str):
    """(out, arg) of reducing src's segments along ``dim = indptr.dim() - 1``; arg is the
    winner's position along dim, ``src.size(dim)`` for an empty segment."""
    _check_src(src)
    reduce = canonical_reduce(reduce)
    dim, ip = _expanded_indptr(src, indptr)
    lead, trail = src.shape[:dim], src.shape[dim + 1:]
    B, L, K, R = ip.size(0), src.size(dim), math.prod(trail), max(ip.size(1) - 1, 0)
    _check_segment_bounds(ip, None, L, "indptr")
    shape = (*lead, R, *trail)
    if src.numel() == 0 or B * R * K == 0:
        arg = torch.full(shape, L, dtype=torch.long, device=src.device)
        return _empty_result(src, shape, reduce), arg
    rows, engine = src.reshape(B * L, K), _engine(src, reduce)
    if B == 1 and int(ip[0, 0]) == 0 and int(ip[0, -1]) == L:  # one segment list over src
        out, arg = engine.segment_reduce(rows, ip[0].contiguous(), reduce)  # (a user's view)
        positions = None
    else:  # gather each segment's rows by position: one spmm over all batches
        dtype = _index_dtype(B * L, rows.size(0))
        starts = (ip[:, :-1] + torch.arange(B, device=src.device).unsqueeze(1) * L).reshape(-1)
        counts = (ip[:, 1:] - ip[:, :-1]).reshape(-1)
        gptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
        total = int(gptr[-1])
        positions = (torch.repeat_interleave(starts - gptr[:-1], counts, output_size=total) +
                     torch.arange(total, device=src.device)).to(dtype)
        out, arg = engine.spmm(gptr.to(dtype), positions, None, rows, reduce)
    if arg.numel():
        if positions is None:  # positions along dim already (L for an empty segment)
            arg = engine.arg_sources(arg, None, L)
        else:
            sentinel, arg = positions.numel(), arg.long()
            rows_won = torch.cat([positions.long(), positions.new_full((1,), -1).long()])[arg]
            arg = torch.where(arg == sentinel, L, rows_won % max(L, 1))
        return out.view(shape), arg.view(shape)
    return out.view(shape), None


def _into(out: Tensor | None, result: Tensor, name: str = "out") -> Tensor:
    """torch_scatter's segment ``out=``: overwritten by the result."""
    if out is None:
        return result
    if not isinstance(out, Tensor) or out.shape != result.shape or out.dtype != result.dtype:
        got = (list(out.shape), out.dtype) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"{name} must be a {result.dtype} tensor of shape "
                         f"{list(result.shape)}, got {got}")
    return out.copy_(result)


@_small_ints_widened
def segment_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None,
                reduce: str = "sum") -> Tensor:
    """Reduces the segments ``indptr[..., i] : indptr[..., i + 1]`` of ``src`` along
    ``dim = indptr.dim() - 1`` (torch_scatter's ``segment_csr``: values only; see
    ``segment_max_csr`` for the arg). Empty segments give 0; ``out`` is overwritten."""
    return _into(out, _segment_csr(src, indptr, reduce)[0])


def _segment_csr_with_arg(src, indptr, out, reduce):
    result, arg = _segment_csr(src, indptr, reduce)
    return _into(out, result), arg


def segment_sum_csr(src, indptr, out=None):
    return segment_csr(src, indptr, out, "sum")


segment_add_csr = segment_sum_csr


def segment_mean_csr(src, indptr, out=None):
    """Segment means (integer means truncate toward zero, as torch_scatter's)."""
    return segment_csr(src, indptr, out, "mean")


@_small_ints_widened
def segment_max_csr(src, indptr, out=None):
    """Returns ``(out, argmax)``; argmax is ``src.size(dim)`` for an empty segment."""
    return _segment_csr_with_arg(src, indptr, out, "max")


@_small_ints_widened
def segment_min_csr(src, indptr, out=None):
    """Returns ``(out, argmin)``; argmin is ``src.size(dim)`` for an empty segment."""
    return _segment_csr_with_arg(src, indptr, out, "min")


@_small_ints_widened
def gather_csr(src: Tensor, indptr: Tensor, out: Tensor | None = None) -> Tensor:
    """Repeats ``src[..., i, ...]`` over segment ``i`` along ``dim = indptr.dim() - 1``: the
    inverse of segment_csr. Every row of ``indptr`` runs from 0 to the output's size."""
    _check_src(src)
    dim, ip = _expanded_indptr(src, indptr)
    lead, trail = src.shape[:dim], src.shape[dim + 1:]
    B, R, K = ip.size(0), max(ip.size(1) - 1, 0), math.prod(trail)
    if src.size(dim) != R:
        raise ValueError(f"src has {src.size(dim)} entries along dim {dim} but indptr "
                         f"describes {R} segments")
    E = out.size(dim) if isinstance(out, Tensor) and out.dim() == src.dim() else \
        (int(ip[0, -1]) if ip.numel() else 0)
    _check_segment_bounds(ip, E, E, "indptr")
    shape = (*lead, E, *trail)
    if B * E * K == 0:
        return _into(out, _empty_result(src, shape, "sum"))
    dtype = _index_dtype(B * E)
    starts = ip[:, :-1] + torch.arange(B, device=src.device).unsqueeze(1) * E
    gptr = torch.cat([starts.reshape(-1), starts.new_full((1,), B * E)]).to(dtype)
    result = _engine(src, "sum").gather_csr(src.reshape(B * R, K), gptr, B * E)
    return _into(out, result.view(shape))


def _coo_dim(index: Tensor, src: Tensor) -> int:
    _check_src(src)
    check_index(index, 2**63 - 1, "index")
    if index.dim() == 0 or index.dim() > src.dim():
        raise ValueError(f"index must have 1 to src.dim() = {src.dim()} dimensions, got shape "
                         f"{list(index.shape)}")
    return index.dim() - 1


@_small_ints_widened
def segment_coo(src: Tensor, index: Tensor, out: Tensor | None = None,
                dim_size: int | None = None, reduce: str = "sum") -> Tensor:
    """torch_scatter's ``segment_coo``: reduces along ``dim = index.dim() - 1`` by a
    (sorted) index. Computed as ``scatter``, so an unsorted index gives the scatter result."""
    return scatter(src, index, _coo_dim(index, src), out, dim_size, reduce)


def segment_sum_coo(src, index, out=None, dim_size=None):
    return segment_coo(src, index, out, dim_size, "sum")


segment_add_coo = segment_sum_coo


def segment_mean_coo(src, index, out=None, dim_size=None):
    return segment_coo(src, index, out, dim_size, "mean")


@_small_ints_widened
def segment_max_coo(src, index, out=None, dim_size=None):
    """Returns ``(out, argmax)``; argmax is ``src.size(dim)`` for an empty slot."""
    return _scatter_api(src, index, _coo_dim(index, src), out, dim_size, "max")


@_small_ints_widened
def segment_min_coo(src, index, out=None, dim_size=None):
    """Returns ``(out, argmin)``; argmin is ``src.size(dim)`` for an empty slot."""
    return _scatter_api(src, index, _coo_dim(index, src), out, dim_size, "min")


@_small_ints_widened
def gather_coo(src: Tensor, index: Tensor, out: Tensor | None = None) -> Tensor:
    """``out[..., e, ...] = src[..., index[..., e], ...]`` along ``dim = index.dim() - 1``:
    the inverse of segment_coo."""
    dim = _coo_dim(index, src)
    lead, trail = src.shape[:dim], src.shape[dim + 1:]
    if index.device != src.device:
        raise ValueError(f"index is on {index.device} but src is on {src.device}")
    for d in range(dim):
        if index.size(d) not in (1, src.size(d)):
            raise ValueError(f"index of shape {list(index.shape)} does not broadcast against "
                             f"src of shape {list(src.shape)} (dimension {d})")
    L, E = src.size(dim), index.size(-1)
    check_index(index, L, "index")
    B, K = math.prod(lead), math.prod(trail)
    idx = index.expand(*lead, E).reshape(B, E).long() + \
        torch.arange(B, device=src.device).unsqueeze(1) * L
    result = src.reshape(B * L, K).index_select(0, idx.reshape(-1))
    return _into(out, result.view(*lead, E, *trail))


def _per_element(values: Tensor, index: Tensor, dim: int, src: Tensor) -> Tensor:
    """``values [..., dim_size, ...]`` (one per group) read at each element of ``src``: a
    row gather (``index_select``) where the index runs along ``dim`` only, else ``gather``
    with the broadcast index (an int64 entry per element: 40 ms against index_select's 16
    at [659,868, 64])."""
    shaped = _broadcast_index(index, src, dim)
    if all(shaped.size(d) == 1 for d in range(src.dim()) if d != dim):
        return values.index_select(dim, shaped.reshape(-1))
    return values.gather(dim, shaped.expand_as(src).long())


class _GroupSoftmax(torch.autograd.Function):
    """Over each group, m its max: the softmax y = exp(src - m) / sum(exp(src - m)), with
    d src = y * (g - the group's sum of g * y), a group of only -inf giving y = 0 and the
    gradient 0; or (log) out = src - m - log(eps + sum(exp(src - m))), torch_scatter's
    formula, with d src = g - exp(out) * (the group's sum of g)."""

    generate_vmap_rule = True  # setup_context style: torch.func takes it

    @staticmethod
    def forward(src, index, dim, dim_size, eps, log):
        return _group_softmax(src, index, dim, dim_size, eps, log)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        _, index, dim, dim_size, _, log = inputs
        ctx.save_for_backward(output, index)
        ctx.dim, ctx.dim_size, ctx.log = dim, dim_size, log

    @staticmethod
    def backward(ctx, grad):
        out, index = ctx.saved_tensors
        weights = out.exp() if ctx.log else out
        summed = grad if ctx.log else grad * out
        group = scatter(summed, index, ctx.dim, dim_size=ctx.dim_size, reduce="sum")
        d_src = torch.addcmul(summed, weights, _per_element(group, index, ctx.dim, out),
                              value=-1)
        return d_src, None, None, None, None, None


def scatter_softmax(src: Tensor, index: Tensor, dim: int = -1,
                    dim_size: int | None = None) -> Tensor:
    """Softmax of ``src`` over the groups of equal ``index`` along ``dim``. A group whose
    entries are all -inf (fully masked) gets weights 0, and its entries the gradient 0;
    NaN or +inf make the group NaN."""
    _check_floating(src, "scatter_softmax")
    dim = _checked_dim(dim, src)
    return _GroupSoftmax.apply(src, index, dim, dim_size, 0.0, False)


def scatter_log_softmax(src: Tensor, index: Tensor, dim: int = -1, eps: float = 1e-12,
                        dim_size: int | None = None) -> Tensor:
    """Log-softmax of ``src`` over the groups of equal ``index`` along ``dim``:
    ``src - m - log(eps + sum(exp(src - m)))``, m the group max, as torch_scatter's formula
    (-inf entries give -inf)."""
    _check_floating(src, "scatter_log_softmax")
    dim = _checked_dim(dim, src)
    return _GroupSoftmax.apply(src, index, dim, dim_size, eps, True)


def gather(x: Tensor, index: Tensor) -> Tensor:
    """``x[index]`` along dim 0, with the index range checked."""
    if not isinstance(x, Tensor) or x.dim() == 0:
        raise ValueError("x must be a tensor with at least one dimension")
    check_index(index, x.size(0), "index")
    if index.dim() != 1:
        raise ValueError(f"index must be 1-D, got shape {list(index.shape)}")
    return gather_rows(x, index)
