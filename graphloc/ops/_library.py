"""Loads the compiled kernels and registers their fake kernels and autograd formulas.

``kernels`` holds ``torch.ops.graphloc``'s ops when the extension loads (the differentiable
ones routed through torch.func-capable Functions under a transform, see the end), else the
pure-torch ``reference`` module with the same signatures; everything above calls
``kernels.<op>``.
Backward passes are made of graphloc ops themselves (spmm on the cached transpose, sddmm
for edge-value gradients), so they are fast, run on every backend and trace under compile.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import types
import warnings

import torch

from graphloc.ops import reference


def _has_arg(reduce: str) -> bool:
    """Whether the reduction also returns the winning positions (max and min)."""
    return reference.canonical_reduce(reduce, allow_mul=True) in ("max", "min")


def _load_extension() -> bool:
    if os.environ.get("GRAPHLOC_DISABLE_EXT", "0") == "1":
        return False
    # find_spec first: importing a missing submodule while graphloc itself is still
    # importing reports a "circular import", which hides the real reason
    if importlib.util.find_spec("graphloc._C") is None:
        reason = "it was not built (GRAPHLOC_BUILD_EXT=0, or no compiler at install time)"
    else:
        try:
            importlib.import_module("graphloc._C")  # loading it registers torch.ops.graphloc
            return True
        except ImportError as err:  # e.g. built against another torch: undefined symbols
            reason = str(err)
    warnings.warn(f"graphloc._C could not be loaded: {reason}; falling back to the "
                  "pure-torch reference ops, which are correct but slower", stacklevel=3)
    return False


HAS_EXTENSION = _load_extension()
# replaced below by the ops with their functorch adapters (``_kernels_namespace``)
kernels = torch.ops.graphloc if HAS_EXTENSION else reference


def csr_transpose(indptr, indices, num_cols):
    """The transpose of a CSR, with ``perm`` mapping each transposed entry to its CSR position.

    Returns ``(t_indptr, t_indices, perm)``: row ``j`` of the transpose lists the rows ``i``
    that have an entry in column ``j``, in increasing CSR position (a stable sort).
    """
    t_indptr, perm = kernels.coo_to_csr(indices, num_cols)
    rows = reference.csr_rows(indptr, indices.numel())
    return t_indptr, rows.index_select(0, perm.long()), perm


def _transpose_of(indptr, indices, num_cols, t_indptr, t_indices, t_perm):
    """The transpose (t_indptr, t_indices, t_perm) passed to the op, or built now."""
    if t_indptr is not None and t_indices is not None and t_perm is not None:
        return t_indptr, t_indices, t_perm
    return csr_transpose(indptr, indices, num_cols)


def _inverse_degree(indptr, dtype):
    return (indptr[1:] - indptr[:-1]).clamp(min=1).to(dtype).reciprocal()


def _degree_scale(grad, indptr):
    return grad * _inverse_degree(indptr, grad.dtype).unsqueeze(1)


def _heads(value):
    return 1 if value is None or value.dim() == 1 else value.size(1)


# --- spmm ------------------------------------------------------------------------------

def _backward_kernel(name: str):
    """A backward kernel, or under ``create_graph`` (grad mode on inside a backward) its
    pure-torch twin: the kernels have no derivative of their own, and torch would treat
    their outputs as constants (a second derivative silently missing their terms)."""
    return getattr(reference, name) if torch.is_grad_enabled() else getattr(kernels, name)


def _check_csr_fake(indptr, indices=None, num_edges=None) -> None:
    """The shape checks of the kernels' argument checks, on fake tensors (no values)."""
    torch._check(indptr.dim() == 1 and indptr.shape[0] >= 1,
                 lambda: f"indptr must be 1-D with at least one entry, got {list(indptr.shape)}")
    if indices is not None:
        torch._check(indices.dim() == 1, lambda: f"indices must be 1-D, got {list(indices.shape)}")
        torch._check(indices.dtype == indptr.dtype, lambda: "indices and indptr must share one "
                     "index dtype")
    if num_edges is not None and indices is not None:
        torch._check(indices.shape[0] == num_edges,
                     lambda: f"indices has {indices.shape[0]} entries, expected {num_edges}")


def _check_rows_fake(t, name: str) -> None:
    torch._check(t.dim() == 2, lambda: f"{name} must be 2-D [rows, channels], got "
                 f"{list(t.shape)}")


def _spmm_fake(indptr, indices, value, x, reduce, csc_indptr=None, csc_indices=None,
               csc_perm=None, value_index=None, csc_value=None):
    _check_csr_fake(indptr, indices)
    _check_rows_fake(x, "x")
    rows = indptr.shape[0] - 1
    arg_rows = rows if _has_arg(reduce) else 0
    return x.new_empty(rows, x.shape[1]), x.new_empty(arg_rows, x.shape[1], dtype=indptr.dtype)


def _spmm_setup(ctx, inputs, output):
    indptr, indices, value, x, reduce, t_indptr, t_indices, t_perm, value_index, t_value = inputs
    ctx.reduce = reference.canonical_reduce(reduce, allow_mul=True)
    ctx.num_src = x.size(0)
    # x is only read back for edge-value gradients, max/min routing and products: otherwise
    # the op keeps no reference to it (deep GCNs then hold one activation per layer, not two).
    keep_x = (value is not None and value.requires_grad) or ctx.reduce in ("max", "min", "mul")
    ctx.save_for_backward(indptr, indices, value, x if keep_x else None, t_indptr, t_indices,
                          t_perm, output[1], value_index, t_value)


def _spmm_mul_backward(ctx, grad_out, indptr, indices, value, x, t_indptr, t_indices, t_perm):
    if value is not None:
        raise NotImplementedError("reduce='mul' with edge values has no gradient")
    msgs = x.index_select(0, indices.long())
    others = reference.products_of_others(msgs, reference.csr_rows(indptr, msgs.size(0)).long())
    per_edge = kernels.gather_csr(grad_out.contiguous(), indptr, msgs.size(0)) * others
    t_indptr, _, t_perm = _transpose_of(indptr, indices, ctx.num_src, t_indptr, t_indices, t_perm)
    return kernels.spmm(t_indptr, t_perm, None, per_edge.contiguous(), "sum")[0]


def _spmm_grads(grad_value, grad_x):
    """spmm's gradients in its argument order: only value and x have one."""
    return None, None, grad_value, grad_x, None, None, None, None, None, None


def _spmm_backward(ctx, grad_out, _grad_arg):
    (indptr, indices, value, x, t_indptr, t_indices, t_perm, arg, value_index,
     t_value) = ctx.saved_tensors
    need_value, need_x = ctx.needs_input_grad[2], ctx.needs_input_grad[3]
    if value_index is not None:  # the values in edge order; their gradient summed back below
        grad_value, grad_x = _spmm_sum_backward(ctx, grad_out, indptr, indices,
                                                value.index_select(0, value_index), x, t_indptr,
                                                t_indices, t_perm, need_value, need_x)
        if grad_value is not None:
            grad_value = value.new_zeros(value.shape).index_add(0, value_index, grad_value)
        return _spmm_grads(grad_value, grad_x)
    if ctx.reduce == "mul":
        grad_x = _spmm_mul_backward(ctx, grad_out, indptr, indices, value, x, t_indptr,
                                    t_indices, t_perm)
        return _spmm_grads(None, grad_x)
    if ctx.reduce in ("max", "min"):
        t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, ctx.num_src, t_indptr,
                                                    t_indices, t_perm)
        # the reductions take float16 (scatter's, torch_scatter's dtypes) but the routing
        # kernel does not: it runs in float32, and a source that wins many rows sums its
        # gradients there, not in float16
        half = x.dtype == torch.float16
        widen = (lambda t: t.float() if t is not None else None) if half else (lambda t: t)
        grad_x, grad_value = _backward_kernel("spmm_arg_backward")(
            t_indptr, t_indices, t_perm, widen(value), widen(x), arg,
            widen(grad_out).contiguous(), need_value)
        if half:
            grad_x, grad_value = grad_x.half(), grad_value.half()
        return _spmm_grads(grad_value if need_value else None, grad_x)
    return _spmm_grads(*_spmm_sum_backward(ctx, grad_out, indptr, indices, value, x, t_indptr,
                                           t_indices, t_perm, need_value, need_x, t_value))


def _spmm_sum_backward(ctx, grad_out, indptr, indices, value, x, t_indptr, t_indices, t_perm,
                       need_value, need_x, t_value=None):
    """(grad_value, grad_x) of a sum or mean spmm whose values are in edge order (and, with
    t_value, also in the transpose's order: a sum's d x then reads them in place)."""
    grad_value = grad_x = None
    if need_x:
        t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, ctx.num_src, t_indptr,
                                                    t_indices, t_perm)
        if t_value is not None and ctx.reduce == "sum":
            grad_x = kernels.spmm(t_indptr, t_indices, t_value, grad_out, "sum")[0]
        else:
            grad_x = _transpose_product(ctx.reduce, indptr, t_indptr, t_indices, t_perm, value,
                                        grad_out)
    if need_value:
        g = _degree_scale(grad_out, indptr) if ctx.reduce == "mean" else grad_out
        grad_value = kernels.sddmm(indptr, indices, x, g, "dot", _heads(value)).view(value.shape)
    return grad_value, grad_x


def _transpose_product(reduce, indptr, t_indptr, t_indices, t_perm, value, grad_out):
    """d x of a sum / mean spmm: grad_out's rows summed over the transpose, each scaled by
    its edge's value (and, for a mean, by 1 / the destination's degree). The kernel reads the
    values where they lie, through value_index, not a permuted copy of them: the copy cost
    as much as a third of the product (4 ms of 11 on 2.5 million edges)."""
    if value is None and reduce == "sum":
        return kernels.spmm(t_indptr, t_indices, None, grad_out, "sum")[0]
    inv_deg = _inverse_degree(indptr, grad_out.dtype) if reduce == "mean" else None
    if value is None:  # a mean: the transpose entry into i weighs 1 / deg(i)
        return kernels.spmm(t_indptr, t_indices, inv_deg, grad_out, "sum",
                            value_index=t_indices)[0]
    if inv_deg is not None:  # a weighted mean: each edge's value over its row's degree
        per_edge = kernels.gather_csr(inv_deg.unsqueeze(1), indptr, value.size(0))
        value = value * per_edge.view(-1, *[1] * (value.dim() - 1))
    return kernels.spmm(t_indptr, t_indices, value.contiguous(), grad_out, "sum",
                        value_index=t_perm)[0]


# --- segment_reduce and gather_csr -----------------------------------------------------

def _segment_reduce_fake(src, indptr, reduce):
    _check_csr_fake(indptr)
    _check_rows_fake(src, "src")
    rows = indptr.shape[0] - 1
    arg_rows = rows if _has_arg(reduce) else 0
    return src.new_empty(rows, src.shape[1]), src.new_empty(arg_rows, src.shape[1],
                                                             dtype=indptr.dtype)


def _segment_reduce_setup(ctx, inputs, output):
    src, indptr, reduce = inputs
    ctx.reduce = reference.canonical_reduce(reduce, allow_mul=True)
    ctx.num_edges = src.shape[0]
    ctx.save_for_backward(indptr, output[1], src if ctx.reduce == "mul" else None)


def _segment_reduce_backward(ctx, grad_out, _grad_arg):
    indptr, arg, src = ctx.saved_tensors
    if ctx.reduce == "mul":
        grad = kernels.gather_csr(grad_out.contiguous(), indptr, ctx.num_edges)
        rows = reference.csr_rows(indptr, ctx.num_edges).long()
        return grad * reference.products_of_others(src, rows), None, None
    if ctx.reduce in ("max", "min"):
        # Each position wins at most once per channel: a plain scatter into E + 1 rows,
        # the last absorbing empty rows (arg == E).
        buf = grad_out.new_zeros(ctx.num_edges + 1, grad_out.size(1))
        return buf.scatter_(0, arg.long(), grad_out)[:-1], None, None
    g = _degree_scale(grad_out, indptr) if ctx.reduce == "mean" else grad_out
    return kernels.gather_csr(g.contiguous(), indptr, ctx.num_edges), None, None


def _gather_csr_fake(src, indptr, num_edges):
    _check_csr_fake(indptr)
    _check_rows_fake(src, "src")
    torch._check(src.shape[0] == indptr.shape[0] - 1, lambda: f"src has {src.shape[0]} rows "
                 f"but indptr describes {indptr.shape[0] - 1}")
    return src.new_empty(num_edges, src.shape[1])


def _gather_csr_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _gather_csr_backward(ctx, grad):
    (indptr,) = ctx.saved_tensors
    return kernels.segment_reduce(grad.contiguous(), indptr, "sum")[0], None, None


def _gather_rows_fake(src, index):
    _check_rows_fake(src, "src")
    torch._check(index.dim() == 1, lambda: f"index must be 1-D, got shape {list(index.shape)}")
    return src.new_empty(index.shape[0], src.shape[1])


def _gather_rows_setup(ctx, inputs, output):
    src, index = inputs
    ctx.num_rows = src.shape[0]
    ctx.save_for_backward(index)


def _gather_rows_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    grad_src = grad.new_zeros(ctx.num_rows, grad.shape[1])
    return grad_src.index_add_(0, index.long(), grad), None


def permute_rows(values, index, inverse, validated=False):
    """``values[index]`` along dim 0 for a permutation ``index`` whose inverse is ``inverse``
    (``inverse[index[k]] = k``): the gradient is ``grad[inverse]``, another permutation,
    where a general index would need a scatter-add. The edge tensors that
    ``Graph.to_csr_order`` and ``from_csr_order`` move take this path. ``validated=True``
    skips the check that ``inverse`` inverts ``index`` (one pass over them), for a caller
    that built the pair (``Graph``): a wrong inverse would give wrong gradients silently."""
    if not validated and not torch.compiler.is_compiling():
        _check_permutation_pair(values, index, inverse)
    return _PermutedRows.apply(values, index, inverse)


def _check_permutation_pair(values, index, inverse):
    for name, t in (("index", index), ("inverse", inverse)):
        if t.dtype not in (torch.int32, torch.int64) or t.dim() != 1:
            raise ValueError(f"{name} must be a 1-D int32 or int64 tensor, got "
                             f"{t.dtype} of shape {list(t.shape)}")
        if t.numel() != values.size(0):
            raise ValueError(f"{name} has {t.numel()} entries but values have "
                             f"{values.size(0)} rows")
    n = values.size(0)
    if n and (int(index.min()) < 0 or int(index.max()) >= n):
        raise ValueError(f"index holds values outside [0, {n})")
    if n and not torch.equal(inverse.long().index_select(0, index.long()),
                             torch.arange(n, device=index.device)):
        raise ValueError("inverse is not the inverse of index (inverse[index[k]] != k), or "
                         "index is not a permutation")


_GATHERABLE = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
               torch.int64)


def _permuted(values, index, inverse):
    """``values[index]``. Rows of two values or more on the CPU: graphloc's row-gather kernel
    (ATen's index_select and index_copy pay more per narrow row than the copy: [E, 4]
    float32 on the power-law graph 19 to 47 ms, the kernel 5.3 to 8.4). Single values:
    ATen's index_copy through the inverse, its fastest 1-D form (1.9 to 3.0 ms against 4.8
    to 5.8 for index_select, [E] float32 on the power-law graph); other devices:
    index_select."""
    if values.device.type == "cpu" and values.dim() >= 1 and _row_width(values) == 1:
        return torch.empty_like(values).index_copy_(0, inverse.long(), values)
    return gather_rows(values, index)


def _row_width(values):
    """The values in one row along dim 0 (0-row tensors included)."""
    return math.prod(values.shape[1:])


def gather_rows(values, index):
    """``values[index]`` along dim 0 (``index`` 1-D, in range): graphloc's row-gather kernel
    for rows of two values or more on the CPU, ATen's ``index_select`` otherwise."""
    width = _row_width(values) if values.dim() >= 1 else 0
    if not (HAS_EXTENSION and values.device.type == "cpu" and width >= 2
            and values.dtype in _GATHERABLE):
        return values.index_select(0, index.long())
    rows = values.reshape(values.size(0), width)
    index = index.contiguous() if index.dtype in (torch.int32, torch.int64) else index.long()
    return kernels.gather_rows(rows, index).view(index.numel(), *values.shape[1:])


class _PermutedRows(torch.autograd.Function):
    generate_vmap_rule = True  # setup_context style: torch.func takes it

    @staticmethod
    def forward(values, index, inverse):
        return _permuted(values, index, inverse)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        _, index, inverse = inputs
        ctx.save_for_backward(index, inverse)

    @staticmethod
    def backward(ctx, grad):
        index, inverse = ctx.saved_tensors
        return _permuted(grad.contiguous(), inverse, index), None, None


# --- sddmm -----------------------------------------------------------------------------

def _sddmm_fake(indptr, indices, a, b, op, heads, csc_indptr=None, csc_indices=None,
                csc_perm=None):
    _check_csr_fake(indptr, indices)
    _check_rows_fake(a, "a")
    _check_rows_fake(b, "b")
    torch._check(a.shape[1] == b.shape[1], lambda: f"a has {a.shape[1]} channels but b has "
                 f"{b.shape[1]}")
    torch._check(heads >= 1 and a.shape[1] % heads == 0,
                 lambda: f"heads must divide the {a.shape[1]} channels, got {heads}")
    return a.new_empty(indices.shape[0], heads if op == "dot" else a.shape[1])


def _sddmm_setup(ctx, inputs, output):
    indptr, indices, a, b, op, heads, t_indptr, t_indices, t_perm = inputs
    ctx.op, ctx.heads = op, heads
    ctx.save_for_backward(indptr, indices, a, b, t_indptr, t_indices, t_perm)


def _sddmm_backward(ctx, grad):
    indptr, indices, a, b, t_indptr, t_indices, t_perm = ctx.saved_tensors
    need_a, need_b = ctx.needs_input_grad[2], ctx.needs_input_grad[3]
    grad = grad.contiguous()
    grad_a = grad_b = None
    if need_a:
        t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, a.size(0), t_indptr,
                                                    t_indices, t_perm)
        if ctx.op == "dot":  # grad_a[j] = sum over out-edges e of grad[e] * b[dst(e)]
            grad_a = kernels.spmm(t_indptr, t_indices, grad, b, "sum", value_index=t_perm)[0]
        else:  # gather the per-edge gradient rows of each source through the transpose
            per_edge = grad if ctx.op == "add" else \
                grad * kernels.gather_csr(b, indptr, indices.numel())
            grad_a = kernels.spmm(t_indptr, t_perm, None, per_edge.contiguous(), "sum")[0]
    if need_b:
        if ctx.op == "dot":
            grad_b = kernels.spmm(indptr, indices, grad, a, "sum")[0]
        else:
            per_edge = grad if ctx.op == "add" else grad * a.index_select(0, indices.long())
            grad_b = kernels.segment_reduce(per_edge.contiguous(), indptr, "sum")[0]
    return None, None, grad_a, grad_b, None, None, None, None, None


# --- segment_softmax, coo_to_csr, spmm_arg_backward ------------------------------------

def _softmax_fake(score, indptr):
    _check_csr_fake(indptr)
    _check_rows_fake(score, "score")
    return torch.empty_like(score)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output, inputs[1])


def _softmax_backward(ctx, grad):
    out, indptr = ctx.saved_tensors
    return _backward_kernel("segment_softmax_backward")(out, grad.contiguous(), indptr), None


def _attention_fake(score, indptr, indices, x, csc_indptr=None, csc_indices=None,
                    csc_perm=None):
    _check_csr_fake(indptr, indices, score.shape[0])
    _check_rows_fake(score, "score")
    _check_rows_fake(x, "x")
    rows = indptr.shape[0] - 1
    return x.new_empty(rows, x.shape[1]), x.new_empty(rows, score.shape[1])


def _attention_setup(ctx, inputs, output):
    score, indptr, indices, x, t_indptr, t_indices, t_perm = inputs
    ctx.save_for_backward(score, indptr, indices, x, t_indptr, t_indices, t_perm, *output)
    _unmaterialized_grads(ctx)


def _unmaterialized_grads(ctx) -> None:
    # An attention's log-sum-exp output is rarely used: its gradient then comes as None,
    # not as a zero [rows, H] tensor filled on every backward and read by the kernel.
    ctx.set_materialize_grads(False)


def _attention_backward(ctx, grad_out, grad_lse):
    # The attention weights are recomputed from the saved log-sum-exp ([E, H], never the
    # [E, H, C] messages). With g = grad_out: d score = alpha * (<g_i, x_j> - <g_i, out_i>),
    # d x = the transpose spmm of g weighted by alpha. On the CPU one fused kernel does both;
    # on CUDA two (the CSR rows, then the transpose).
    score, indptr, indices, x, t_indptr, t_indices, t_perm, out, lse = ctx.saved_tensors
    need_score, need_x = ctx.needs_input_grad[0], ctx.needs_input_grad[3]
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, x.size(0), t_indptr, t_indices,
                                                t_perm)
    if score.device.type in ("cpu", "cuda") and not torch.is_grad_enabled():
        grad_score, grad_x = kernels.segment_attention_backward(
            score, lse, out, grad_out.contiguous(), grad_lse, indptr, indices, x, t_indptr,
            t_indices, t_perm,
            need_score, need_x)
    else:  # other devices, and differentiable for a backward of the backward
        grad_score, grad_x = _attention_backward_composed(
            score, out, grad_out.contiguous(), grad_lse, indptr, indices, x, t_indptr,
            t_indices, t_perm)
    return (grad_score if need_score else None), None, None, \
        (grad_x if need_x else None), None, None, None


def _attention_backward_composed(score, out, grad_out, grad_lse, indptr, indices, x, t_indptr,
                                 t_indices, t_perm):
    """The backward from graphloc ops (devices without the fused kernel, and under
    ``create_graph``: the fused kernel has no derivative of its own)."""
    num_edges, heads = score.shape
    # the softmax itself: exp(score - lse) is off where lse rounds at the scores' scale
    alpha = kernels.segment_softmax(score.contiguous(), indptr)
    per_edge = kernels.sddmm(indptr, indices, x, grad_out, "dot", heads)
    per_row = (grad_out * out).view(out.size(0), heads, -1).sum(-1)
    if grad_lse is not None:
        per_row = per_row - grad_lse
    grad_score = alpha * (per_edge - kernels.gather_csr(per_row.contiguous(), indptr, num_edges))
    grad_x = kernels.spmm(t_indptr, t_indices, alpha, grad_out, "sum", value_index=t_perm)[0]
    return grad_score, grad_x


def _additive_fake(a_src, a_dst, negative_slope, indptr, indices, x, csc_indptr=None,
                   csc_indices=None, csc_perm=None):
    _check_csr_fake(indptr, indices)
    for t, name in ((a_src, "a_src"), (a_dst, "a_dst"), (x, "x")):
        _check_rows_fake(t, name)
    rows = indptr.shape[0] - 1
    return x.new_empty(rows, x.shape[1]), x.new_empty(2, rows, a_src.shape[1])


def _additive_backward_fake(a_src, a_dst, negative_slope, norm, out, grad_out, indptr, indices,
                            x, csc_indptr, csc_indices, csc_perm, need_scores, need_x):
    return (a_src.new_empty(a_src.shape if need_scores else (0,)),
            a_dst.new_empty(a_dst.shape if need_scores else (0,)),
            x.new_empty(x.shape if need_x else (0,)))


def _additive_setup(ctx, inputs, output):
    a_src, a_dst, ctx.negative_slope, indptr, indices, x, t_indptr, t_indices, t_perm = inputs
    ctx.save_for_backward(a_src, a_dst, indptr, indices, x, t_indptr, t_indices, t_perm,
                          *output)
    ctx.mark_non_differentiable(output[1])  # norm: the backward's row statistics
    _unmaterialized_grads(ctx)


def _additive_backward(ctx, grad_out, _grad_norm):
    # As segment_attention's fused backward, the scores recomputed from a_src and a_dst and
    # taken through the LeakyReLU, the weights from the forward's norm (shift and sum per
    # row); the op only runs on the CPU (ops.additive_attention composes it from sddmm and
    # segment_attention elsewhere).
    a_src, a_dst, indptr, indices, x, t_indptr, t_indices, t_perm, out, norm = ctx.saved_tensors
    need_scores = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
    need_x = ctx.needs_input_grad[5]
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, x.size(0), t_indptr, t_indices,
                                                t_perm)
    if torch.is_grad_enabled():  # create_graph: the backward itself differentiable
        grad_src, grad_dst, grad_x = _additive_backward_composed(
            a_src, a_dst, ctx.negative_slope, out, grad_out.contiguous(), indptr, indices, x,
            t_indptr, t_indices, t_perm)
    else:
        grad_src, grad_dst, grad_x = kernels.additive_attention_backward(
            a_src, a_dst, ctx.negative_slope, norm, out, grad_out.contiguous(), indptr, indices,
            x, t_indptr, t_indices, t_perm, need_scores, need_x)
    return (grad_src if ctx.needs_input_grad[0] else None,
            grad_dst if ctx.needs_input_grad[1] else None, None, None, None,
            grad_x if need_x else None, None, None, None)


def _additive_backward_composed(a_src, a_dst, negative_slope, out, grad_out, indptr, indices, x,
                                t_indptr, t_indices, t_perm):
    """additive_attention's backward from differentiable ops (under ``create_graph``): the
    scores leaky_relu(a_src[j] + a_dst[i]) gathered again, the attention's composed backward,
    and d pre = d score * (1 or the slope) summed per source (a_src) and per row (a_dst)."""
    sources, rows = indices.long(), reference.csr_rows(indptr, indices.numel()).long()
    pre = a_src.index_select(0, sources) + a_dst.index_select(0, rows)
    score = torch.nn.functional.leaky_relu(pre, negative_slope)
    grad_score, grad_x = _attention_backward_composed(
        score, out, grad_out, None, indptr, indices, x, t_indptr, t_indices, t_perm)
    d_pre = grad_score * torch.where(pre > 0, 1.0, negative_slope).to(grad_score.dtype)
    grad_src = a_src.new_zeros(a_src.shape).index_add(0, sources, d_pre)
    grad_dst = a_dst.new_zeros(a_dst.shape).index_add(0, rows, d_pre)
    return grad_src, grad_dst, grad_x


# --- gatv2_scores --------------------------------------------------------------------------

def _gatv2_fake(indptr, indices, src, dst, att, negative_slope, csc_indptr=None,
                csc_indices=None, csc_perm=None):
    _check_csr_fake(indptr, indices)
    for t, name in ((src, "src"), (dst, "dst"), (att, "att")):
        _check_rows_fake(t, name)
    torch._check(src.shape[1] == att.shape[0] * att.shape[1],
                 lambda: f"src has {src.shape[1]} channels but att is {list(att.shape)}")
    return src.new_empty(indices.shape[0], att.shape[0])


def _gatv2_backward_fake(indptr, indices, src, dst, att, negative_slope, grad, csc_indptr,
                         csc_indices, csc_perm, need_src, need_dst, need_att):
    return (src.new_empty(src.shape if need_src else (0,)),
            dst.new_empty(dst.shape if need_dst else (0,)),
            att.new_empty(att.shape if need_att else (0,)))


def _gatv2_setup(ctx, inputs, output):
    indptr, indices, src, dst, att, ctx.negative_slope, t_indptr, t_indices, t_perm = inputs
    ctx.save_for_backward(indptr, indices, src, dst, att, t_indptr, t_indices, t_perm)


def _gatv2_backward(ctx, grad):
    indptr, indices, src, dst, att, t_indptr, t_indices, t_perm = ctx.saved_tensors
    need_src, need_dst, need_att = ctx.needs_input_grad[2:5]
    # under create_graph the backward itself differentiable: the same formula, composed
    backward = reference.gatv2_scores_backward if torch.is_grad_enabled() else \
        kernels.gatv2_scores_backward
    if backward is kernels.gatv2_scores_backward:
        t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, src.size(0), t_indptr,
                                                    t_indices, t_perm)
    grads = backward(indptr, indices, src, dst, att, ctx.negative_slope, grad.contiguous(),
                     t_indptr, t_indices, t_perm, need_src, need_dst, need_att)
    return (None, None, *(g if need else None for g, need in
                          zip(grads, (need_src, need_dst, need_att), strict=True)),
            None, None, None, None)


# --- head_dots -----------------------------------------------------------------------------

def _head_dots_fake(x, att):
    _check_rows_fake(x, "x")
    torch._check(att.dim() == 3 and x.shape[1] == att.shape[1] * att.shape[2],
                 lambda: f"x has {x.shape[1]} channels but att is {list(att.shape)}")
    return x.new_empty(x.shape[0], att.shape[0] * att.shape[1])


def _head_dots_backward_fake(x, att, grad, need_x, need_att):
    return x.new_empty(x.shape if need_x else (0,)), att.new_empty(att.shape if need_att else (0,))


def _head_dots_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _head_dots_backward(ctx, grad):
    x, att = ctx.saved_tensors
    need_x, need_att = ctx.needs_input_grad
    # under create_graph the backward itself differentiable: the same formula, composed
    backward = reference.head_dots_backward if torch.is_grad_enabled() else \
        kernels.head_dots_backward
    d_x, d_att = backward(x, att, grad.contiguous(), need_x, need_att)
    return d_x if need_x else None, d_att if need_att else None


# --- softmax_sum ---------------------------------------------------------------------------

def _accumulation_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _softmax_sum_fake(x, t, indptr, indices, detach_scores, csc_indptr=None, csc_indices=None,
                      csc_perm=None):
    _check_csr_fake(indptr, indices)
    _check_rows_fake(x, "x")
    torch._check(t.dim() == 1 and t.shape[0] == x.shape[1], lambda: f"t must be 1-D with one "
                 f"value per channel ({x.shape[1]}), got {list(t.shape)}")
    rows, channels = indptr.shape[0] - 1, x.shape[1]
    return (x.new_empty(rows, channels),
            x.new_empty(2, rows, channels, dtype=_accumulation_dtype(x)))


def _softmax_sum_backward_fake(x, t, out, norm, grad, indptr, indices, csc_indptr,
                               csc_indices, csc_perm, detach_scores, need_x, need_t):
    return x.new_empty(x.shape if need_x else (0,)), t.new_empty(t.shape if need_t else (0,))


def _softmax_sum_setup(ctx, inputs, output):
    x, t, indptr, indices, ctx.detach_scores, t_indptr, t_indices, t_perm = inputs
    ctx.save_for_backward(x, t, indptr, indices, t_indptr, t_indices, t_perm, *output)
    ctx.mark_non_differentiable(output[1])  # norm: the backward's row statistics
    _unmaterialized_grads(ctx)  # (no zero [2, rows, K] gradient for norm on every backward)


def _softmax_sum_backward(ctx, grad, _grad_norm):
    if grad is None:  # only norm was used
        return None, None, None, None, None, None, None, None
    x, t, indptr, indices, t_indptr, t_indices, t_perm, out, norm = ctx.saved_tensors
    need_x = ctx.needs_input_grad[0]
    need_t = ctx.needs_input_grad[1] and not ctx.detach_scores
    backward = _backward_kernel("softmax_sum_backward")
    if backward is kernels.softmax_sum_backward:
        t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, x.size(0), t_indptr,
                                                    t_indices, t_perm)
    grad_x, grad_t = backward(x, t, out, norm, grad.contiguous(), indptr, indices, t_indptr,
                              t_indices, t_perm, ctx.detach_scores, need_x, need_t)
    return (grad_x if need_x else None, grad_t if need_t else None,
            None, None, None, None, None, None)


# --- gated_sum and film_sum ----------------------------------------------------------------

def _edge_function_fake(names: tuple[str, str, str], same_rows: tuple[int, int]):
    """The fake of an op ``(indptr, indices, a, b, value, csc...)`` over the edges whose three
    node inputs share their channels, ``same_rows`` naming the two on one side (and so of one
    shape); the output has ``a``'s shape."""
    def fake(indptr, indices, *tensors_and_transpose):
        tensors = tensors_and_transpose[:3]
        _check_csr_fake(indptr, indices)
        for t, name in zip(tensors, names, strict=True):
            _check_rows_fake(t, name)
        first, second = (tensors[i] for i in same_rows)
        torch._check(first.shape == second.shape, lambda: f"{names[same_rows[1]]} has shape "
                     f"{list(second.shape)} but {names[same_rows[0]]} has shape "
                     f"{list(first.shape)}")
        torch._check(tensors[0].shape[1] == tensors[2].shape[1], lambda: f"{names[2]} has "
                     f"{tensors[2].shape[1]} channels but {names[0]} has {tensors[0].shape[1]}")
        return tensors[0].new_empty(tensors[0].shape)
    return fake


def _edge_function_backward_fake(indptr, indices, a, b, value, grad, csc_indptr, csc_indices,
                                 csc_perm, need_a, need_b, need_value):
    """gated_sum's and film_sum's gradients: empty where not asked for."""
    return (a.new_empty(a.shape if need_a else (0,)), b.new_empty(b.shape if need_b else (0,)),
            value.new_empty(value.shape if need_value else (0,)))


def _edge_function_autograd(name: str):
    """(setup_context, backward) of an op ``name(indptr, indices, a, b, value, csc_indptr,
    csc_indices, csc_perm)`` whose kernel ``name_backward`` recomputes its per-edge function
    and returns the three tensors' gradients (gated_sum, film_sum). Under create_graph the
    backward itself is differentiable: the same formula composed (``reference``)."""

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:5], *inputs[5:8])

    def backward(ctx, grad):
        indptr, indices, a, b, value, t_indptr, t_indices, t_perm = ctx.saved_tensors
        needs = ctx.needs_input_grad[2:5]
        if torch.is_grad_enabled():
            kernel = getattr(reference, f"{name}_backward")
        else:
            kernel = getattr(kernels, f"{name}_backward")
            t_indptr, t_indices, t_perm = _transpose_of(indptr, indices, value.size(0),
                                                        t_indptr, t_indices, t_perm)
        grads = kernel(indptr, indices, a, b, value, grad, t_indptr, t_indices, t_perm, *needs)
        return (None, None, *(g if need else None for g, need in zip(grads, needs, strict=True)),
                None, None, None)

    return setup, backward


# --- edge_outer_sum ------------------------------------------------------------------------

def _outer_fake(indptr, indices, weight, x, csc_indptr=None, csc_indices=None, csc_perm=None):
    _check_csr_fake(indptr, indices)
    for t, name in ((weight, "weight"), (x, "x")):
        _check_rows_fake(t, name)
    torch._check(weight.shape[0] == indices.shape[0], lambda: f"weight has {weight.shape[0]} "
                 f"rows but the graph has {indices.shape[0]} edges")
    return x.new_empty(indptr.shape[0] - 1, weight.shape[1] * x.shape[1])


def _outer_backward_fake(indptr, indices, weight, x, grad, need_weight, need_x):
    return (weight.new_empty(weight.shape if need_weight else (0,)),
            x.new_empty((indices.shape[0], x.shape[1]) if need_x else (0,)))


def _outer_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _outer_backward(ctx, grad):
    indptr, indices, weight, x, t_indptr, t_indices, t_perm = ctx.saved_tensors
    need_weight, need_x = ctx.needs_input_grad[2:4]
    differentiable = torch.is_grad_enabled()  # create_graph: the composed formula
    backward = reference.edge_outer_sum_backward if differentiable else \
        kernels.edge_outer_sum_backward
    d_weight, shares = backward(indptr, indices, weight, x, grad.contiguous(), need_weight,
                                need_x)
    d_x = None
    if need_x and differentiable:
        d_x = torch.zeros_like(x).index_add(0, indices.long(), shares)
    elif need_x:  # each source's shares summed through the transpose
        t_indptr, _, t_perm = _transpose_of(indptr, indices, x.size(0), t_indptr, t_indices,
                                            t_perm)
        d_x = kernels.spmm(t_indptr, t_perm, None, shares, "sum")[0]
    return None, None, d_weight if need_weight else None, d_x, None, None, None


class EdgeHeadSum(torch.autograd.Function):
    """``out[i] = sum over edges e = (j -> i) and blocks k of weight[e, k] * x[j, k]``: the
    adjoint of edge_outer_sum, computed with its two kernels over the transpose (rows the
    sources, so each source's ``[K, C]`` block is read once): per edge the message
    ``sum_k weight[e, k] x[j, k]`` (edge_outer_sum_backward's share), summed per
    destination; backward d x is edge_outer_sum and d weight its weight gradient.

    Arguments: ``weight [E, K]`` in the transpose's (CSC) order, ``x [N_src, K * C]``, the
    CSR's indptr, the transpose (t_indptr, t_indices) and ``csc_position [E]``, each CSR
    entry's position in CSC order. Under ``create_graph`` the backward is the pure-torch
    formula, differentiable again."""

    @staticmethod
    def forward(weight, x, indptr, t_indptr, t_indices, csc_position):
        channels = x.size(1) // max(weight.size(1), 1)
        placeholder = x.new_empty(indptr.numel() - 1, channels)  # (read for its shape only)
        _, messages = kernels.edge_outer_sum_backward(t_indptr, t_indices, weight, placeholder,
                                                      x, False, True)
        return kernels.spmm(indptr, csc_position, None, messages, "sum")[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def vmap(info, in_dims, *args):  # one call per batch entry, as the kernels' own ops
        return _per_entry(EdgeHeadSum.apply, info, in_dims, args)

    @staticmethod
    def backward(ctx, grad):
        weight, x, _, t_indptr, t_indices, _ = ctx.saved_tensors
        need_weight, need_x = ctx.needs_input_grad[:2]
        differentiable = torch.is_grad_enabled()
        outer = reference.edge_outer_sum if differentiable else kernels.edge_outer_sum
        outer_grads = reference.edge_outer_sum_backward if differentiable else \
            kernels.edge_outer_sum_backward
        grad = grad.contiguous()
        d_x = outer(t_indptr, t_indices, weight, grad) if need_x else None
        d_weight = outer_grads(t_indptr, t_indices, weight, grad, x, True, False)[0] \
            if need_weight else None
        return d_weight, d_x, None, None, None, None


def _attention_backward_fake(score, lse, out, grad_out, grad_lse, indptr, indices, x,
                             csc_indptr, csc_indices, csc_perm,
                             need_score, need_x):
    return (score.new_empty(score.shape if need_score else (0,)),
            x.new_empty(x.shape if need_x else (0,)))


def _coo_to_csr_fake(index, num_rows):
    torch._check(index.dim() == 1, lambda: f"index must be 1-D, got {list(index.shape)}")
    torch._check(num_rows >= 0, lambda: f"num_rows must be >= 0, got {num_rows}")
    return index.new_empty(num_rows + 1), index.new_empty(index.shape[0])


def _arg_backward_fake(csc_indptr, csc_indices, csc_perm, value, x, arg, grad_out,
                       need_value_grad):
    grad_value = value.new_empty(value.shape) if need_value_grad and value is not None \
        else x.new_empty(0)
    return x.new_empty(x.shape), grad_value


def _logsumexp_setup(ctx, inputs, output):
    x, indptr, indices, ctx.eps = inputs
    ctx.save_for_backward(x, indptr, indices, output)


def _logsumexp_backward(ctx, grad_out):
    """d out[i] / d x[j] = exp(x[j] - out[i]) for each edge j -> i: the row's softmax, scaled
    by sum / (sum + eps). The max is held constant, as in torch_scatter's formula, so for
    eps > 0 the slope of its eps * exp(max) term is left out. A row of only -inf (out =
    -inf) normalises by log(eps) instead, as its shift is 0: its weights are exp(-inf) = 0
    (NaN for eps = 0, where the forward's autograd divides 0 by 0 too)."""
    x, indptr, indices, out = ctx.saved_tensors
    masked = math.log(ctx.eps) if ctx.eps > 0 else -math.inf if ctx.eps == 0 else math.nan
    differentiable = torch.is_grad_enabled()  # create_graph: torch ops with autograd
    if differentiable:  # and the output again: the saved one has no history
        out = kernels.segment_logsumexp(x, indptr, indices, ctx.eps)
    norm = out.nan_to_num(nan=math.nan, posinf=math.inf, neginf=masked)
    edge_grad = reference.logsumexp_edge_grad if differentiable else kernels.logsumexp_edge_grad
    per_edge = edge_grad(x, indptr, indices, norm, grad_out.contiguous())
    if indices is None:
        grad_x = per_edge
    elif differentiable:
        grad_x = torch.zeros_like(x).index_add(0, indices.long(), per_edge)
    else:  # summed per row of x through the transpose: index_add's scatter and copy took 2x
        t_indptr, t_perm = kernels.coo_to_csr(indices, x.size(0))  # the rest of the backward
        grad_x = kernels.spmm(t_indptr, t_perm, None, per_edge, "sum")[0]
    return grad_x, None, None, None


def _dropout_fake(x, p, seed):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _dropout_setup(ctx, inputs, output):
    _, ctx.p, seed = inputs
    ctx.save_for_backward(seed)


def _dropout_backward(ctx, grad):
    # the same mask from the same seed: no mask was kept for the backward
    (seed,) = ctx.saved_tensors
    return kernels.dropout(grad.contiguous(), ctx.p, seed), None, None


#: op -> (setup_context, backward): the autograd formulas of the differentiable ops
_AUTOGRAD = {"dropout": (_dropout_setup, _dropout_backward),
             "spmm": (_spmm_setup, _spmm_backward),
             "segment_reduce": (_segment_reduce_setup, _segment_reduce_backward),
             "gather_csr": (_gather_csr_setup, _gather_csr_backward),
             "gather_rows": (_gather_rows_setup, _gather_rows_backward),
             "segment_logsumexp": (_logsumexp_setup, _logsumexp_backward),
             "sddmm": (_sddmm_setup, _sddmm_backward),
             "segment_softmax": (_softmax_setup, _softmax_backward),
             "segment_attention": (_attention_setup, _attention_backward),
             "additive_attention": (_additive_setup, _additive_backward),
             "gatv2_scores": (_gatv2_setup, _gatv2_backward),
             "head_dots": (_head_dots_setup, _head_dots_backward),
             "gated_sum": _edge_function_autograd("gated_sum"),
             "film_sum": _edge_function_autograd("film_sum"),
             "edge_outer_sum": (_outer_setup, _outer_backward),
             "softmax_sum": (_softmax_sum_setup, _softmax_sum_backward)}


def _register() -> None:
    lib = "graphloc::"
    fake = torch.library.register_fake
    fake(lib + "dropout")(_dropout_fake)
    fake(lib + "spmm")(_spmm_fake)
    fake(lib + "segment_reduce")(_segment_reduce_fake)
    fake(lib + "gather_csr")(_gather_csr_fake)
    fake(lib + "gather_rows")(_gather_rows_fake)
    fake(lib + "sddmm")(_sddmm_fake)
    fake(lib + "segment_attention_backward")(_attention_backward_fake)
    fake(lib + "segment_softmax")(_softmax_fake)
    fake(lib + "segment_softmax_backward")(lambda out, grad, indptr: _softmax_fake(out, indptr))
    fake(lib + "segment_attention")(_attention_fake)
    fake(lib + "additive_attention")(_additive_fake)
    fake(lib + "additive_attention_backward")(_additive_backward_fake)
    fake(lib + "gatv2_scores")(_gatv2_fake)
    fake(lib + "gatv2_scores_backward")(_gatv2_backward_fake)
    fake(lib + "head_dots")(_head_dots_fake)
    fake(lib + "head_dots_backward")(_head_dots_backward_fake)
    fake(lib + "gated_sum")(_edge_function_fake(("key", "query", "value"), (1, 2)))
    fake(lib + "gated_sum_backward")(_edge_function_backward_fake)
    fake(lib + "film_sum")(_edge_function_fake(("gamma", "beta", "value"), (0, 1)))
    fake(lib + "film_sum_backward")(_edge_function_backward_fake)
    fake(lib + "edge_outer_sum")(_outer_fake)
    fake(lib + "edge_outer_sum_backward")(_outer_backward_fake)
    fake(lib + "softmax_sum")(_softmax_sum_fake)
    fake(lib + "softmax_sum_backward")(_softmax_sum_backward_fake)
    fake(lib + "coo_to_csr")(_coo_to_csr_fake)
    fake(lib + "segment_logsumexp")(
        lambda x, indptr, indices, eps: x.new_empty(indptr.shape[0] - 1, x.shape[1]))
    fake(lib + "segment_softmax_rows")(
        lambda x, indptr, indices, eps, log: x.new_empty(x.shape))
    fake(lib + "logsumexp_edge_grad")(
        lambda x, indptr, indices, norm, grad: x.new_empty(
            indices.shape[0] if indices is not None else x.shape[0], x.shape[1]))
    fake(lib + "arg_sources")(lambda arg, perm, num_edges: arg.new_empty(arg.shape,
                                                                          dtype=torch.long))
    fake(lib + "spmm_arg_backward")(_arg_backward_fake)
    # five int64 facts on the CPU, whatever the inputs' device (the checks read them there)
    fake(lib + "csr_facts")(lambda indptr, index: torch.empty(5, dtype=torch.long))
    for name, (setup, backward) in _AUTOGRAD.items():
        torch.library.register_autograd(lib + name, backward, setup_context=setup)


# --- torch.func ---------------------------------------------------------------------------
# torch.library's autograd registration builds an autograd.Function without setup_context,
# which torch.func (grad, vjp, jacrev, vmap of a backward) refuses. Under a functorch
# transform the differentiable ops go through a Function of their own with the same setup and
# backward; everywhere else (and under torch.compile) they are called directly.

def _functorch_capable(op, setup, backward):
    schema = op.default._schema
    name = schema.name.split("::")[1]

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(*args):
            return op(*args)

        @staticmethod
        def vmap(info, in_dims, *args):
            # one call per batch entry, stacked: fresh outputs (the layers add to them in
            # place, which a generated rule's view outputs refuse)
            return _per_entry(Function.apply, info, in_dims, args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            setup(ctx, inputs, output)

        @staticmethod
        def backward(ctx, *grads):
            return backward(ctx, *grads)

        @staticmethod
        def jvp(ctx, *tangents):
            raise NotImplementedError(
                f"graphloc.{name} has no forward-mode derivative (torch.func.jvp, jacfwd, "
                f"hessian): use reverse mode (grad, vjp, jacrev; a Hessian as "
                f"jacrev(jacrev(f)))")

    def call(*args, **kwargs):
        if torch.compiler.is_compiling() or not torch._C._are_functorch_transforms_active() \
                or not any(map(_is_transformed, (*args, *kwargs.values()))):
            return op(*args, **kwargs)  # (no transformed input: also under _DisableFuncTorch)
        return Function.apply(*_bound(schema, args, kwargs))

    call.__name__ = call.__qualname__ = name
    return call


def _per_entry(run, info, in_dims, args):
    """A vmap rule: ``run`` on each batch entry, the outputs stacked (graphloc's kernels
    take one feature set at a time)."""
    entries = [run(*(a if d is None else a.select(d, b)
                     for a, d in zip(args, in_dims, strict=True)))
               for b in range(info.batch_size)]
    if isinstance(entries[0], tuple):
        return tuple(torch.stack(parts) for parts in zip(*entries, strict=True)), \
            (0,) * len(entries[0])
    return torch.stack(entries), 0


def _is_transformed(value) -> bool:
    return isinstance(value, torch.Tensor) and \
        torch._C._functorch.is_functorch_wrapped_tensor(value)


def _bound(schema, args: tuple, kwargs: dict) -> tuple:
    """Every argument of ``schema`` positionally: those given by name, then the defaults
    (torch's ``fill_defaults`` drops positional arguments given by name)."""
    return tuple(args[i] if i < len(args) else kwargs.get(info.name, info.default_value)
                 for i, info in enumerate(schema.arguments))


def _kernels_namespace():
    """``torch.ops.graphloc``'s ops by name, the differentiable ones functorch-capable."""
    names = {schema.name.split("::")[1] for schema in torch._C._jit_get_all_schemas()
             if schema.name.startswith("graphloc::")}
    ops = {name: getattr(torch.ops.graphloc, name) for name in names}
    for name, op in ops.items():  # the others (backward kernels): the same loop, no warning
        if name not in _AUTOGRAD:
            torch.library.register_vmap(f"graphloc::{name}",
                                        lambda info, in_dims, *args, op=op:
                                        _per_entry(op, info, in_dims, args))
    return types.SimpleNamespace(**{
        name: _functorch_capable(op, *_AUTOGRAD[name]) if name in _AUTOGRAD else op
        for name, op in ops.items()})


if HAS_EXTENSION:
    _register()
    kernels = _kernels_namespace()
