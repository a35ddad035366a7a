"""Pure-torch twins of the ``torch.ops.graphloc`` kernels, with the same raw signatures.

They serve two purposes: the fallback when the compiled extension is missing (or disabled
with ``GRAPHLOC_DISABLE_EXT=1``), and the oracle the tests compare the kernels against.
They materialise per-edge tensors and rely on torch autograd, so they are simple rather
than fast. Conventions are the kernels': CSR rows are destinations, ``indices[e]`` is the
source of edge ``e``; empty rows reduce to 0; max/min ``arg`` holds the winning CSR position
(the lowest on ties, in the index dtype) or ``E`` for an empty row.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque

import torch
from torch import Tensor

from graphloc.checks import check_index

_REDUCE_ALIASES = {"sum": "sum", "add": "sum", "mean": "mean", "max": "max", "amax": "max",
                   "min": "min", "amin": "min"}


def canonical_reduce(reduce: str, allow_mul: bool = False) -> str:
    """The reduction's canonical name; ``mul`` (a product) only where ``allow_mul``."""
    if allow_mul and reduce == "mul":
        return "mul"
    try:
        return _REDUCE_ALIASES[reduce]
    except (KeyError, TypeError):
        names = "'sum', 'mean', 'max', 'min'" + (", 'mul'" if allow_mul else "")
        raise ValueError(f"reduce must be one of {names}, got {reduce!r}") from None


def as_rows(t: Tensor) -> Tensor:
    """``t`` as a contiguous 2-D ``[t.size(0), rest]`` (also when ``t`` has no elements).
    A 2-D contiguous ``t`` comes back itself, not as a view: the gradient of a view is a
    view, which autograd cannot accumulate in place, so every other gradient of ``t``
    would cost a fresh [N, F] tensor (ChebConv with glibc's default allocator: 456 -> 404
    ms per step, measured)."""
    if t.dim() == 2 and t.is_contiguous():
        return t
    return t.reshape(t.size(0), math.prod(t.shape[1:])).contiguous()


def csr_rows(indptr: Tensor, num_edges: int | None = None) -> Tensor:
    """The destination row of every CSR position (``repeat_interleave`` of the row lengths)."""
    counts = indptr[1:] - indptr[:-1]
    rows = torch.arange(counts.numel(), device=indptr.device, dtype=indptr.dtype)
    return rows.repeat_interleave(counts, output_size=num_edges)


def _head_scale(msgs: Tensor, value: Tensor | None) -> Tensor:
    if value is None:
        return msgs
    heads = 1 if value.dim() == 1 else value.size(1)
    E, K = msgs.shape
    return (msgs.view(E, heads, K // heads) * value.view(E, heads, 1)).view(E, K)


def _segment(msgs: Tensor, rows: Tensor, num_rows: int, reduce: str) -> tuple[Tensor, Tensor]:
    reduce = canonical_reduce(reduce, allow_mul=True)
    E, K = msgs.shape
    out = msgs.new_zeros(num_rows, K)
    long_rows = rows.long()
    no_arg = msgs.new_empty(0, K, dtype=rows.dtype)
    if reduce == "mul":  # an empty product is 1
        return _RowProducts.apply(msgs, long_rows, num_rows), no_arg
    if reduce in ("sum", "mean"):
        out = out.index_add(0, long_rows, msgs)
        if reduce == "mean":  # integer means truncate, as the kernels' C++ division
            count = torch.bincount(long_rows, minlength=num_rows).clamp(min=1).unsqueeze(1)
            count = count.to(msgs.dtype)
            out = out / count if msgs.is_floating_point() else \
                torch.div(out, count, rounding_mode="trunc")
        return out, no_arg
    amode = "amax" if reduce == "max" else "amin"
    idx = long_rows.unsqueeze(1).expand(E, K)
    extreme = out.scatter_reduce(0, idx, msgs.detach(), amode, include_self=False)
    position = torch.arange(E, device=msgs.device).unsqueeze(1).expand(E, K)
    winner = torch.where(_is_winner(msgs.detach(), extreme.gather(0, idx)), position, E)
    arg = torch.full((num_rows, K), E, dtype=torch.long, device=msgs.device)
    arg = arg.scatter_reduce(0, idx, winner, "amin", include_self=True)
    # The output is the winning message itself (an empty row's arg E reads the zero row
    # appended), so autograd routes the gradient to the first winner alone, as the kernels.
    # scatter_reduce's own backward splits it among ties, and counted the zeros it starts
    # from as a tie of a message 0 (a single edge got half its gradient).
    out = torch.cat([msgs, msgs.new_zeros(1, K)]).gather(0, arg)
    return out, arg.to(rows.dtype)


def _row_places(rows: Tensor) -> tuple[Tensor, Tensor]:
    """Per entry of a sorted row index: how many entries of its row come before it, and
    how many after."""
    positions = torch.arange(rows.numel(), device=rows.device)
    return (positions - torch.searchsorted(rows, rows),
            torch.searchsorted(rows, rows, right=True) - 1 - positions)


def _running_products(values: Tensor, ahead: Tensor) -> Tensor:
    """Inclusive products along each row of ``values [E, K]`` (rows in sequence, ``ahead``
    from ``_row_places``): log2(longest row) doubling passes, each multiplying an entry by
    the running product ``shift`` places back, or by 1 past its row's start (exact for every
    value, NaN and infinities included)."""
    running, shift = values, 1
    longest = int(ahead.max()) + 1 if ahead.numel() else 0
    while shift < longest:
        back = torch.cat([values.new_ones(shift, values.size(1)), running[:-shift]])
        running = running * torch.where((ahead >= shift).unsqueeze(1), back, 1)
        shift *= 2
    return running


def products_of_others(values: Tensor, rows: Tensor) -> Tensor:
    """Per entry of ``values [E, K]`` (``rows``: the sorted row of each), the product of
    the other entries of its row: the gradient of a row product, as torch.prod's backward
    computes it for rows holding a zero (IEEE products: 0 * inf is NaN). Without a zero torch
    divides the row's product by the entry, which makes a NaN or infinite entry's row NaN
    or inf / inf = NaN; here the others' product stands (finite when they are)."""
    ahead, behind = _row_places(rows)
    one = values.new_ones(1, values.size(1))
    before = torch.cat([one, _running_products(values, ahead)[:-1]])
    after = torch.cat([_running_products(values.flip(0), behind.flip(0)).flip(0)[1:], one])
    return torch.where((ahead > 0).unsqueeze(1), before, 1) * \
        torch.where((behind > 0).unsqueeze(1), after, 1)


class _RowProducts(torch.autograd.Function):
    """Each row's product of ``msgs [E, K]`` (``rows`` sorted), whose gradient is the
    product of the other entries (``products_of_others``), as the kernels'. Autograd of
    scatter_reduce("prod") divides by the entry, and autograd of a product scan multiplies
    unused partial products by a zero gradient (0 * inf = NaN in another entry's sum)."""

    generate_vmap_rule = True  # setup_context style: torch.func takes it

    @staticmethod
    def forward(msgs: Tensor, rows: Tensor, num_rows: int) -> Tensor:
        index = rows.unsqueeze(1).expand_as(msgs)
        return msgs.new_ones(num_rows, msgs.size(1)).scatter_reduce(0, index, msgs, "prod")

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        msgs, rows, _ = inputs
        ctx.save_for_backward(msgs, rows)

    @staticmethod
    def backward(ctx, grad: Tensor):
        msgs, rows = ctx.saved_tensors
        return grad.index_select(0, rows) * products_of_others(msgs, rows), None, None


def _is_winner(values: Tensor, extreme: Tensor) -> Tensor:
    """Where ``values`` equals its group's max/min; a NaN extreme (scatter_reduce propagates
    NaN, as torch.amax) is won by the NaN entries."""
    return (values == extreme) | (values.isnan() & extreme.isnan())


def spmm(indptr, indices, value, x, reduce, csc_indptr=None, csc_indices=None, csc_perm=None,
         value_index=None, csc_value=None):
    if csc_value is not None:  # read by the extension's backward only; checked as there
        _check_csc_value(csc_value, value, csc_perm, reduce)
    if value_index is not None:
        value = _values_through(value_index, value, reduce, indices.numel())
    msgs = _head_scale(x.index_select(0, indices.long()), value)
    return _segment(msgs, csr_rows(indptr, indices.numel()), indptr.numel() - 1, reduce)


def _check_csc_value(csc_value, value, csc_perm, reduce):
    if canonical_reduce(reduce) != "sum":
        raise ValueError(f"csc_value takes reduce 'sum', got {reduce!r}")
    if csc_perm is None:
        raise ValueError("csc_value needs the transpose (csc_perm is None)")
    if value is None:
        raise ValueError("csc_value needs edge values (value is None)")
    if csc_value.shape != value.shape or csc_value.dtype != value.dtype:
        raise ValueError(f"csc_value must have the shape and dtype of the edge values "
                         f"{list(value.shape)} {value.dtype}, got {list(csc_value.shape)} "
                         f"{csc_value.dtype}")


def _values_through(value_index, value, reduce, num_edges):
    """``value[value_index]``: the edge values of spmm's ``value_index`` (sum only)."""
    if canonical_reduce(reduce) != "sum":
        raise ValueError(f"value_index takes reduce 'sum', got {reduce!r}")
    if value is None:
        raise ValueError("value_index needs edge values (value is None)")
    if value_index.shape != (num_edges,):
        raise ValueError(f"value_index must be [{num_edges}] (one per edge), got shape "
                         f"{list(value_index.shape)}")
    check_index(value_index, value.size(0), "value_index")
    return value.index_select(0, value_index.long())


def segment_reduce(src, indptr, reduce):
    return _segment(src, csr_rows(indptr, src.size(0)), indptr.numel() - 1, reduce)


def gather_csr(src, indptr, num_edges):
    return src.index_select(0, csr_rows(indptr, num_edges).long())


def gather_rows(src, index):
    return src.index_select(0, index.long())


def sddmm(indptr, indices, a, b, op, heads, csc_indptr=None, csc_indices=None, csc_perm=None):
    a_e = a.index_select(0, indices.long())
    b_e = b.index_select(0, csr_rows(indptr, indices.numel()).long())
    if op == "dot":
        E, K = a_e.shape
        return (a_e * b_e).view(E, heads, K // heads).sum(-1)
    if op == "add":
        return a_e + b_e
    if op == "mul":
        return a_e * b_e
    raise ValueError(f"sddmm op must be one of 'dot', 'add', 'mul', got {op!r}")


def gatv2_scores(indptr, indices, src, dst, att, negative_slope, csc_indptr=None,
                 csc_indices=None, csc_perm=None):
    """GATv2's scores ``[E, H]``: per edge, ``att . leaky_relu(src[j] + dst[i])`` per head."""
    H, C = att.shape
    pre = sddmm(indptr, indices, src, dst, "add", 1).view(-1, H, C)
    return (torch.nn.functional.leaky_relu(pre, negative_slope) * att).sum(-1)


def gatv2_scores_backward(indptr, indices, src, dst, att, negative_slope, grad, csc_indptr,
                          csc_indices, csc_perm, need_src, need_dst, need_att):
    """The three gradients of gatv2_scores from differentiable ops (empty where not asked
    for): d pre = grad * att * the LeakyReLU's slope at each edge's sum, summed per source
    and per destination, and d att = the sum over the edges of grad * leaky_relu(pre)."""
    H, C = att.shape
    pre = sddmm(indptr, indices, src, dst, "add", 1).view(-1, H, C)
    g = grad.unsqueeze(-1)
    d_pre = (g * att * torch.where(pre > 0, 1.0, negative_slope).to(pre.dtype)).flatten(1)
    none = src.new_empty(0)
    d_src = src.new_zeros(src.shape).index_add(0, indices.long(), d_pre) if need_src else none
    d_dst = dst.new_zeros(dst.shape).index_add(
        0, csr_rows(indptr, indices.numel()).long(), d_pre) if need_dst else none
    d_att = (g * torch.nn.functional.leaky_relu(pre, negative_slope)).sum(0) if need_att \
        else none
    return d_src, d_dst, d_att


def head_dots(x, att):
    """Per-head dot products ``[N, A * H]`` of rows ``x [N, H * C]`` with ``att [A, H, C]``:
    PyG's ``(x.view(N, H, C) * att[a]).sum(-1)`` for each vector ``a``, side by side."""
    A, H, C = att.shape
    return (x.view(-1, 1, H, C) * att).sum(-1).reshape(-1, A * H)


def head_dots_backward(x, att, grad, need_x, need_att):
    """The two gradients of head_dots from differentiable ops (empty where not asked for):
    d x = sum_a grad[:, a, h] * att[a, h] per head, d att = sum_n grad[n, a, h] * x[n, h]."""
    A, H, C = att.shape
    g = grad.view(-1, A, H, 1)
    none = x.new_empty(0)
    d_x = (g * att).sum(1).reshape(-1, H * C) if need_x else none
    d_att = (g * x.view(-1, 1, H, C)).sum(0) if need_att else none
    return d_x, d_att


def gated_sum(indptr, indices, key, query, value, csc_indptr=None, csc_indices=None,
              csc_perm=None):
    """The residual gated conv's aggregation ``[rows, C]``: per edge (j -> i),
    ``sigmoid(key[i] + query[j]) * value[j]`` summed into row i."""
    sources = indices.long()
    rows = csr_rows(indptr, indices.numel()).long()
    gate = torch.sigmoid(key.index_select(0, rows) + query.index_select(0, sources))
    return key.new_zeros(key.shape).index_add(0, rows, gate * value.index_select(0, sources))


def gated_sum_backward(indptr, indices, key, query, value, grad, csc_indptr, csc_indices,
                       csc_perm, need_key, need_query, need_value):
    """The three gradients of gated_sum from differentiable ops (empty where not asked for):
    d value = the gates times grad[i] summed per source, and d pre = grad[i] * value[j] *
    gate * (1 - gate) summed per destination (d key) and per source (d query)."""
    sources = indices.long()
    rows = csr_rows(indptr, indices.numel()).long()
    gate = torch.sigmoid(key.index_select(0, rows) + query.index_select(0, sources))
    g = grad.index_select(0, rows)
    d_pre = g * value.index_select(0, sources) * (1 - gate) * gate
    none = key.new_empty(0)
    d_key = key.new_zeros(key.shape).index_add(0, rows, d_pre) if need_key else none
    d_query = query.new_zeros(query.shape).index_add(0, sources, d_pre) if need_query else none
    d_value = value.new_zeros(value.shape).index_add(0, sources, gate * g) if need_value \
        else none
    return d_key, d_query, d_value


def film_sum(indptr, indices, gamma, beta, value, csc_indptr=None, csc_indices=None,
             csc_perm=None):
    """The FiLM conv's aggregation ``[rows, C]``: per edge (j -> i),
    ``relu(gamma[i] * value[j] + beta[i])`` summed into row i."""
    rows = csr_rows(indptr, indices.numel()).long()
    messages = torch.relu(gamma.index_select(0, rows) * value.index_select(0, indices.long())
                          + beta.index_select(0, rows))
    return gamma.new_zeros(gamma.shape).index_add(0, rows, messages)


def film_sum_backward(indptr, indices, gamma, beta, value, grad, csc_indptr, csc_indices,
                      csc_perm, need_gamma, need_beta, need_value):
    """The three gradients of film_sum from differentiable ops (empty where not asked for):
    d pre = grad[i] where the message is not <= 0 (relu's backward), then d gamma = d pre *
    value[j] and d beta = d pre summed per destination, d value = d pre * gamma[i] per
    source."""
    sources = indices.long()
    rows = csr_rows(indptr, indices.numel()).long()
    gamma_i, value_j = gamma.index_select(0, rows), value.index_select(0, sources)
    message = torch.relu(gamma_i * value_j + beta.index_select(0, rows))
    d_pre = torch.where(message <= 0, 0, grad.index_select(0, rows))
    none = gamma.new_empty(0)
    d_gamma = gamma.new_zeros(gamma.shape).index_add(0, rows, d_pre * value_j) if need_gamma \
        else none
    d_beta = beta.new_zeros(beta.shape).index_add(0, rows, d_pre) if need_beta else none
    d_value = value.new_zeros(value.shape).index_add(0, sources, d_pre * gamma_i) \
        if need_value else none
    return d_gamma, d_beta, d_value


def edge_outer_sum(indptr, indices, weight, x, csc_indptr=None, csc_indices=None,
                   csc_perm=None):
    """The edge-conditioned aggregation ``[rows, K * C]``: per edge ``e = (j -> i)`` in CSR
    order, the outer product ``weight[e] (x) x[j]`` summed into row i."""
    rows = csr_rows(indptr, indices.numel()).long()
    products = weight.unsqueeze(2) * x.index_select(0, indices.long()).unsqueeze(1)
    out = x.new_zeros(indptr.numel() - 1, weight.size(1), x.size(1))
    return out.index_add(0, rows, products).view(indptr.numel() - 1, -1)


def edge_outer_sum_backward(indptr, indices, weight, x, grad, need_weight, need_x):
    """The gradients of edge_outer_sum from differentiable ops (empty where not asked for):
    d weight[e, k] = <grad[i, k], x[j]>, and per edge the source's share
    ``sum_k weight[e, k] grad[i, k]`` ([E, C], summed per source by the caller)."""
    rows = csr_rows(indptr, indices.numel()).long()
    g = grad.view(grad.size(0), weight.size(1), x.size(1)).index_select(0, rows)
    none = x.new_empty(0)
    d_weight = (g * x.index_select(0, indices.long()).unsqueeze(1)).sum(2) if need_weight \
        else none
    shares = (weight.unsqueeze(2) * g).sum(1) if need_x else none
    return d_weight, shares


def _row_softmax(score, indptr):
    """Per CSR row and head of ``score [E, H]``: the softmax weights (edge order), as
    torch.softmax computes them, exp(score - row max) / their sum, and the log-sum-exp
    [rows, H] (0 for empty rows). The weights are never exp(score - lse): where the scores
    are large, lse = max + log(sum) rounds at the max's scale, and two tied scores of 1e30
    weighed 1 each (0.05% off at 1e4, 3% at 1e6)."""
    rows, numerators, shift, total = _row_normalisers(score, indptr)
    return numerators / total[rows], shift + total.log()


def _row_normalisers(score, indptr):
    """``(rows, numerators, shift, total)`` of the row softmax of ``score [E, H]``: each
    edge's row, exp(score - shift), and per row and head the shift (the max, held constant)
    and the sum of the numerators (1 where it is 0)."""
    rows = csr_rows(indptr, score.size(0)).long()
    num_rows, H = indptr.numel() - 1, score.size(1)
    row_max = score.new_full((num_rows, H), float("-inf")).scatter_reduce(
        0, rows.unsqueeze(1).expand(-1, H), score.detach(), "amax", include_self=True)
    # A row of only -inf (masked) shifts by 0, so its weights are exp(-inf) = 0 and its
    # log-sum-exp is 0, as an empty row's. NaN or +inf make the row NaN, as torch.softmax.
    row_max = row_max.masked_fill(row_max == float("-inf"), 0.0)
    numerators = (score - row_max[rows]).exp()
    total = score.new_zeros(num_rows, H).index_add(0, rows, numerators)
    # A fully masked (or empty) row's total is 0: divided by 1 its weights stay 0, and
    # log(0 + 1) makes its log-sum-exp 0. where(total == 0, 0, log(total)) gave the same
    # value, but the backward of its discarded log(0) made the row's score gradients NaN
    # (inf times 0); here they are the kernels' 0 * (d weight - <g, out>): 0, or NaN where
    # a product is.
    return rows, numerators, row_max, total + (total == 0).to(total.dtype)


def _softmax_sum_parts(x, t, indptr, indices, detach_scores):
    """softmax_sum's pieces in the accumulation type, differentiable: each edge's row, its
    source's values, its weight, and the shift and total per row."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    values = x.index_select(0, indices.long())
    scores = (values * t).to(acc)  # rounded to x's dtype first, as the product of the two
    if detach_scores:
        scores = scores.detach()
    rows, numerators, shift, total = _row_normalisers(scores, indptr)
    return rows, values.to(acc), numerators / total[rows], shift, total


def softmax_sum(x, t, indptr, indices, detach_scores, csc_indptr=None, csc_indices=None,
                csc_perm=None):
    """DeeperGCN's softmax aggregation: per row i and channel k, the sum over i's edges of
    softmax(t[k] * x[src, k]) * x[src, k]; and the shift and total per row (norm)."""
    rows, values, weights, shift, total = _softmax_sum_parts(x, t, indptr, indices,
                                                             detach_scores)
    out = values.new_zeros(indptr.numel() - 1, x.size(1)).index_add(0, rows, weights * values)
    return out.to(x.dtype), torch.stack([shift, total]).detach()


def softmax_sum_backward(x, t, out, norm, grad, indptr, indices, csc_indptr, csc_indices,
                         csc_perm, detach_scores, need_x, need_t):
    """softmax_sum's gradients, differentiable in x, t and grad (a backward of the backward):
    the output and weights are recomputed from x and t, not read from out and norm, which
    have no history. With g = grad[i], a weight a and ds = a * (g * x[j] - g * out[i]) (the
    softmax's backward), x's gradient sums a * g and t * ds over j's edges (a * g alone for
    detached scores), t's sums ds * x[j]."""
    rows, values, weights, _, _ = _softmax_sum_parts(x, t, indptr, indices, detach_scores)
    out = values.new_zeros(indptr.numel() - 1, x.size(1)).index_add(0, rows, weights * values)
    g = grad.to(values.dtype).index_select(0, rows)
    ds = weights * (g * values - g * out.index_select(0, rows))
    per_edge = weights * g if detach_scores else weights * g + t.to(values.dtype) * ds
    grad_x = per_edge.new_zeros(x.shape).index_add(0, indices.long(), per_edge).to(x.dtype) \
        if need_x else x.new_empty(0)
    grad_t = (ds * values).sum(0).to(t.dtype) if need_t else t.new_empty(0)
    return grad_x, grad_t


def segment_softmax(score, indptr):
    return _row_softmax(score, indptr)[0]


def segment_softmax_backward(out, grad, indptr):
    rows = csr_rows(indptr, out.size(0)).long()
    dot = out.new_zeros(indptr.numel() - 1, out.size(1)).index_add(0, rows, out * grad)
    return out * (grad - dot.index_select(0, rows))


def segment_attention(score, indptr, indices, x, csc_indptr=None, csc_indices=None,
                      csc_perm=None):
    weights, lse = _row_softmax(score, indptr)
    return spmm(indptr, indices, weights, x, "sum")[0], lse


def coo_to_csr(index, num_rows):
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= num_rows):
        raise ValueError(f"index holds values outside [0, {num_rows})")
    perm = torch.sort(index, stable=True).indices.to(index.dtype)
    counts = torch.bincount(index.long(), minlength=num_rows)
    indptr = torch.zeros(num_rows + 1, dtype=index.dtype, device=index.device)
    indptr[1:] = counts.cumsum(0)
    return indptr, perm


def arg_sources(arg, perm, num_edges):
    if arg.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"arg must be int32 or int64, got {arg.dtype}")
    if arg.numel() and (int(arg.min()) < 0 or int(arg.max()) > num_edges):
        raise ValueError(f"arg holds values outside [0, {num_edges}]")
    if perm is None:
        return arg.long().clone() if arg.dtype == torch.long else arg.long()
    if perm.numel() != num_edges:
        raise ValueError(f"perm has {perm.numel()} entries but num_edges is {num_edges}")
    table = torch.cat([perm.long(), perm.new_full((1,), num_edges, dtype=torch.long)])
    return table[arg.long()]


def _row_stats(x, indptr, indices):
    """The kernels' two sweeps: per CSR row and channel of the gathered rows (in float32
    for half types), the max (held constant), the rows minus it (0 where it is -inf), the
    sum of their exponentials; and each position's row."""
    E = indices.numel() if indices is not None else x.size(0)
    if indptr.numel() == 0 or int(indptr[0]) != 0 or int(indptr[-1]) != E:
        raise ValueError(f"indptr must run from 0 to {E}")
    rows = csr_rows(indptr, E).long()
    vals = x.index_select(0, indices.long()) if indices is not None else x
    acc = vals.float() if vals.dtype in (torch.float16, torch.bfloat16) else vals
    num_rows, K = indptr.numel() - 1, x.size(1)
    top = acc.new_full((num_rows, K), float("-inf")).scatter_reduce(
        0, rows.unsqueeze(1).expand(-1, K), acc.detach(), "amax", include_self=True)
    centred = acc - top.masked_fill(top == float("-inf"), 0.0)[rows]
    return top, centred, acc.new_zeros(num_rows, K).index_add(0, rows, centred.exp()), rows


def segment_logsumexp(x, indptr, indices, eps):
    top, _, total, _ = _row_stats(x, indptr, indices)
    empty = (indptr[1:] == indptr[:-1]).unsqueeze(1)
    return torch.where(empty, 0.0, (total + eps).log() + top).to(x.dtype)


def segment_softmax_rows(x, indptr, indices, eps, log):
    if indices is not None and (indices.numel() != x.size(0) or
                                indices.unique().numel() != indices.numel()):
        raise ValueError("indices must list every row of x once")
    _, centred, total, rows = _row_stats(x, indptr, indices)
    if log:
        result = centred - (total + eps).log()[rows]
    else:
        result = centred.exp() / (total + (total == 0).to(total.dtype))[rows]
    if indices is None:
        return result.to(x.dtype)
    return torch.empty_like(x).index_copy(0, indices.long(), result.to(x.dtype))


def logsumexp_edge_grad(x, indptr, indices, norm, grad):
    E = indices.numel() if indices is not None else x.size(0)
    rows = csr_rows(indptr, E).long()
    vals = x.index_select(0, indices.long()) if indices is not None else x
    return (vals - norm[rows]).exp() * grad[rows]


def spmm_arg_backward(csc_indptr, csc_indices, csc_perm, value, x, arg, grad_out,
                      need_value_grad):
    # Route grad_out[i, k] to (indices[arg[i, k]], k) through the CSC: entry c of source j
    # is the edge csc_perm[c] into csc_indices[c].
    E = csc_perm.numel()
    rows = csr_rows(csc_indptr, E).long()
    dst, pos = csc_indices.long(), csc_perm.long()
    hit = (arg.index_select(0, dst).long() == pos.unsqueeze(1)).to(grad_out.dtype)
    g = grad_out.index_select(0, dst) * hit
    scale = value.index_select(0, pos) if value is not None else None
    grad_x = x.new_zeros(x.shape).index_add(0, rows, _head_scale(g, scale))
    if not (need_value_grad and value is not None):
        return grad_x, x.new_empty(0)
    heads = 1 if value.dim() == 1 else value.size(1)
    per_head = (g * x.index_select(0, rows)).view(E, heads, -1).sum(-1)
    grad_value = value.new_zeros(E, heads).index_copy(0, pos, per_head)
    return grad_x, grad_value.view(value.shape)


# --- balls (the influence tool): plain Python loops, the kernels' exact output order ----

def _check_seeds(seeds: Tensor, num_nodes: int, hops: int) -> list[int]:
    if hops < 0:
        raise ValueError(f"hops must be >= 0, got {hops}")
    if seeds.dim() != 1 or seeds.dtype != torch.long:
        raise ValueError(f"seeds must be int64 [S], got {seeds.dtype} {list(seeds.shape)}")
    out = seeds.tolist()
    bad = [s for s in out if not 0 <= s < num_nodes]
    if bad:
        raise ValueError(f"seed {bad[0]} is out of range for {num_nodes} nodes")
    return out


def _bfs(indptr: list, indices: list, source: int, hops: int) -> tuple[list, list, dict]:
    """The in-ball of ``source``: nodes in BFS order (CSR order within a node), their hop
    distances, and node -> position."""
    nodes, depth, local = [source], [0], {source: 0}
    for head, w in enumerate(nodes):  # the list grows while it is walked
        if depth[head] == hops:
            continue
        for u in indices[indptr[w]:indptr[w + 1]]:
            if u not in local:
                local[u] = len(nodes)
                nodes.append(u)
                depth.append(depth[head] + 1)
    return nodes, depth, local


def khop_subgraphs(indptr, indices, seeds, hops):
    """Per seed, its ``hops``-ball over in-edges and the induced edges (ball-local ids, the
    CSR position of each), packed: ``(node_ptr, nodes, hops, edge_ptr, src, dst, edge)``."""
    ip, ix = indptr.tolist(), indices.tolist()
    node_ptr, edge_ptr, nodes, depth, src, dst, edge = [0], [0], [], [], [], [], []
    for seed in _check_seeds(seeds, len(ip) - 1, hops):
        ball, ball_depth, local = _bfs(ip, ix, seed, hops)
        for i, w in enumerate(ball):
            for e in range(ip[w], ip[w + 1]):
                if ix[e] in local:
                    src.append(local[ix[e]])
                    dst.append(i)
                    edge.append(e)
        nodes += ball
        depth += ball_depth
        node_ptr.append(len(nodes))
        edge_ptr.append(len(src))
    return tuple(torch.tensor(t, dtype=torch.long)
                 for t in (node_ptr, nodes, depth, edge_ptr, src, dst, edge))


def separated_rounds(indptr, indices, t_indptr, t_indices, seeds, hops):
    """Greedy rounds of seeds with pairwise disjoint ``hops``-in-balls: each seed takes the
    smallest round of no earlier seed that its ball reaches within ``hops`` out-edges."""
    ip, ix, tp, tx = indptr.tolist(), indices.tolist(), t_indptr.tolist(), t_indices.tolist()
    if len(tp) != len(ip) or len(tx) != len(ix):
        raise ValueError("the transpose must have the same nodes and edges as the CSR")
    order = _check_seeds(seeds, len(ip) - 1, hops)
    if len(set(order)) != len(order):
        twice = next(s for i, s in enumerate(order) if s in order[:i])
        raise ValueError(f"seed {twice} appears twice")
    round_at, rounds = {}, []
    for seed in order:
        ball, _, _ = _bfs(ip, ix, seed, hops)
        reach, depth, seen = list(ball), [0] * len(ball), set(ball)
        held = set()
        for head, w in enumerate(reach):
            if w in round_at:
                held.add(round_at[w])
            if depth[head] == hops:
                continue
            for t in tx[tp[w]:tp[w + 1]]:
                if t not in seen:
                    seen.add(t)
                    reach.append(t)
                    depth.append(depth[head] + 1)
        rounds.append(min(set(range(len(held) + 1)) - held))
        round_at[seed] = rounds[-1]
    return torch.tensor(rounds, dtype=torch.long)


def _refuse_more_pairs(pairs: int, hops: int, max_entries: int) -> None:
    """The kernel's refusal (checked level by level here: the pattern only grows)."""
    if pairs > max_entries:
        raise ValueError(f"walk_counts: the walks of up to {hops} hops join more node pairs "
                         f"than the limit of {max_entries} (memory); use fewer hops")


def walk_counts(indptr, indices, weight, hops, max_entries):
    """Rows of ``A^0, ..., A^hops`` (``A[i, j]`` the weight of ``j -> i``) on their joint
    pattern: ``(indptr, indices, counts [nnz, hops + 1])``, rows' columns ascending. Each
    power is the previous one times ``A``, entry by entry: every entry ``(i, k, v)`` is
    extended by row ``k``'s edges and equal ``(i, j)`` summed (a sparse product in COO)."""
    if hops < 0:
        raise ValueError(f"hops must be >= 0, got {hops}")
    n = indptr.numel() - 1
    ptr, src = indptr.long(), indices.long()
    edge_weight = torch.ones(src.numel(), dtype=torch.float64) if weight is None else weight
    row = torch.arange(n)
    col, value = row.clone(), torch.ones(n, dtype=torch.float64)
    keys, levels = [row * n + col], [(row * n + col, value)]
    for _ in range(hops):
        degree = ptr[col + 1] - ptr[col]
        start = torch.repeat_interleave(ptr[col], degree)
        offset = torch.arange(start.numel()) - torch.repeat_interleave(
            torch.cumsum(degree, 0) - degree, degree)
        edge = start + offset
        key = torch.repeat_interleave(row, degree) * n + src[edge]
        key, inverse = torch.unique(key, return_inverse=True)
        value = torch.zeros(key.numel(), dtype=torch.float64).index_add_(
            0, inverse, torch.repeat_interleave(value, degree) * edge_weight[edge])
        row, col = key // n, key % n
        keys.append(key)
        levels.append((key, value))
        _refuse_more_pairs(torch.unique(torch.cat(keys)).numel(), hops, max_entries)
    pattern = torch.unique(torch.cat(keys))
    _refuse_more_pairs(pattern.numel(), hops, max_entries)
    counts = torch.zeros(pattern.numel(), hops + 1, dtype=torch.float64)
    for level, (key, value) in enumerate(levels):
        counts[torch.searchsorted(pattern, key), level] = value
    out_indptr = torch.zeros(n + 1, dtype=torch.long)
    out_indptr[1:] = torch.cumsum(torch.bincount(pattern // max(n, 1), minlength=n), 0)
    return out_indptr, pattern % max(n, 1), counts


# --- sampling: the kernels' counter-based streams, so the twins draw the same samples ----

_U64 = (1 << 64) - 1
# SplitMix64's increment (the golden ratio) and multipliers (csrc/cpu/splitmix.h)
_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _mix(z: int) -> int:
    """SplitMix64's finaliser, in Python integers wrapped to 64 bits."""
    z = (z + _GOLDEN) & _U64
    z = ((z ^ (z >> 30)) * _MIX1) & _U64
    z = ((z ^ (z >> 27)) * _MIX2) & _U64
    return z ^ (z >> 31)


def _as_int64(v: int) -> int:
    """A 64-bit pattern as the int64 holding it."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _shift_right(z: Tensor, bits: int) -> Tensor:
    """A logical shift of int64 bit patterns (torch's ``>>`` is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def _mix_tensor(z: Tensor) -> Tensor:
    """``_mix`` of every element of an int64 tensor of 64-bit patterns (torch's int64
    products wrap around as the kernels' unsigned ones)."""
    z = z + _as_int64(_GOLDEN)
    z = (z ^ _shift_right(z, 30)) * _as_int64(_MIX1)
    z = (z ^ _shift_right(z, 27)) * _as_int64(_MIX2)
    return z ^ _shift_right(z, 31)


def dropout(x, p, seed):
    """Element k of ``x`` (row-major) kept where the top 32 bits of
    ``mix(seed + k * golden)`` reach ``ceil(p * 2^32)``, scaled by ``1 / (1 - p)`` rounded to
    ``x``'s dtype; dropped ones multiplied by 0 (NaN stays NaN). ``seed``: a one-element
    int64 tensor."""
    k = torch.arange(x.numel(), dtype=torch.int64, device=x.device)
    z = _mix_tensor(k * _as_int64(_GOLDEN) + seed.to(x.device).reshape(()))
    keep = _shift_right(z, 32) >= math.ceil(p * 2**32)
    scale = torch.tensor(1 / (1 - p) if p < 1 else 0.0, dtype=x.dtype, device=x.device)
    return x * torch.where(keep, scale, torch.zeros_like(scale)).view(x.shape)


class _Stream:
    def __init__(self, state: int):
        self.state = state

    def below(self, n: int) -> int:
        value = _mix(self.state)
        self.state = (self.state + 1) & _U64
        return value % n

    def unit(self) -> float:
        """A uniform double in [0, 1) from the top 53 bits of the next draw."""
        value = _mix(self.state)
        self.state = (self.state + 1) & _U64
        return (value >> 11) * 2.0**-53


def _sample_offsets(deg: int, k: int, replace: bool, rng: _Stream) -> list[int]:
    """Offsets in [0, deg), sorted: all if k < 0 or (without replacement) deg <= k; else k
    distinct ones uniformly (Floyd's algorithm), or with replacement k independent draws."""
    if deg == 0:
        return []
    if k < 0 or (not replace and deg <= k):
        return list(range(deg))
    if replace:
        return sorted(rng.below(deg) for _ in range(k))
    out = []
    for j in range(deg - k, deg):
        t = rng.below(j + 1)
        out.append(j if t in out else t)
    return sorted(out)


def _sample_stream(seed: int, hop: int, relation: int, tree: int, w: int) -> _Stream:
    """The kernel's stream of node ``w`` at ``hop`` over ``relation`` in ``tree``."""
    key = (seed & _U64) ^ _mix((hop * 0x100000001B3 + w) & _U64)
    if relation or tree:
        key ^= _mix(((relation << 40) ^ tree ^ 0x5BD1E995) & _U64)
    return _Stream(_mix(key))


def _weighted_pick(cand: list, weight: list, k: int, replace: bool, rng: _Stream) -> list:
    """As the kernel: by inverse CDF with replacement (none when every weight is 0), else
    the k largest keys log(1 - u) / w among positive weights (ties to the lower position);
    all candidates when k < 0 or, without replacement, k >= their count. Sorted."""
    if k < 0 or (not replace and k >= len(cand)):
        return list(cand)
    if replace:
        cum, total = [], 0.0
        for e in cand:
            total += weight[e]
            cum.append(total)
        if not total > 0:
            return []
        return sorted(cand[bisect.bisect_right(cum, rng.unit() * total)] for _ in range(k))
    keys = []
    for e in cand:
        u = rng.unit()
        if weight[e] > 0:
            keys.append((-(math.log(1.0 - u) / weight[e]), e))
    return sorted(e for _, e in sorted(keys)[:k])


def _draw_row(row: range, k: int, replace: bool, last: bool, time, weight, seed_time,
              rng: _Stream) -> list:
    """The CSR positions a row draws, sorted (the kernel's ``draw_row``): ``time(e)`` (or
    None) keeps entries at or before ``seed_time``, the latest k with ``last``; ``weight``
    (or None) draws by weight."""
    if time is None and weight is None:
        return [row[0] + o for o in _sample_offsets(len(row), k, replace, rng)]
    cand = [e for e in row if time is None or time(e) <= seed_time]
    if time is not None and last and 0 <= k < len(cand):
        cand = sorted(sorted(cand, key=time)[len(cand) - k:])
    if weight is not None:
        return _weighted_pick(cand, weight, k, replace, rng)
    return [cand[o] for o in _sample_offsets(len(cand), k, replace, rng)]


def _checked_row(ip: list, w: int) -> range:
    if not 0 <= w < len(ip) - 1:
        raise ValueError(f"node {w} has no row in a CSR of {len(ip) - 1} destination nodes")
    return range(ip[w], ip[w + 1])


def _checked_source(ix: list, e: int, count: int) -> int:
    if not 0 <= ix[e] < count:
        raise ValueError(f"indices holds {ix[e]} at position {e}, out of range for {count} "
                         f"source nodes")
    return ix[e]


def _emit(edges: tuple, src: int, dst: int, pos: int) -> None:
    """Appends one sampled edge to a relation's (src, dst, pos, per-hop counts) lists."""
    edges[0].append(src)
    edges[1].append(dst)
    edges[2].append(pos)


def neighbor_sample(indptrs, indices, src_types, dst_types, num_nodes, seeds, fanouts, replace,
                    disjoint, induced, seed, node_times=(), edge_times=(), seed_times=None,
                    edge_weights=(), last=False):
    """Layer-wise in-neighbour sampling over relations, as the kernel: per node type its
    nodes, trees and cumulative counts per hop, then per relation its edges' sources,
    destinations, CSR positions and cumulative counts per hop."""
    T, R = len(num_nodes), len(indptrs)
    if len(seeds) != T or any(s.dim() != 1 or s.dtype != torch.long for s in seeds):
        raise ValueError("neighbor_sample needs one int64 [S] seed tensor per node type")
    if any(k < -1 for k in fanouts):
        raise ValueError(f"fan-outs must be >= 0, or -1 for all neighbours, got {fanouts}")
    if induced and disjoint:
        raise ValueError("induced subgraphs are not sampled disjointly")
    hops = len(fanouts) // R if R else 0
    ip, ix = [p.tolist() for p in indptrs], [i.tolist() for i in indices]
    given = lambda ts, i: ts[i].tolist() if len(ts) and ts[i].numel() else None  # noqa: E731
    seed_time = seed_times.tolist() if seed_times is not None and seed_times.numel() else None
    rules = []  # per relation: (time of a CSR entry or None, weights or None)
    for r in range(R):
        node_time, edge_time = given(node_times, src_types[r]), given(edge_times, r)
        time = ((lambda e, t=edge_time: t[e]) if edge_time is not None else
                (lambda e, t=node_time, i=ix[r]: t[i[e]]) if node_time is not None else None)
        if time is not None and seed_time is None:
            raise ValueError("temporal sampling needs seed_times (one per tree)")
        rules.append((time, given(edge_weights, r)))
    nodes, trees, where = [[] for _ in range(T)], [[] for _ in range(T)], [{} for _ in range(T)]
    tree = 0
    for t in range(T):
        for s in seeds[t].tolist():
            if not 0 <= s < num_nodes[t]:
                raise ValueError(f"seed node {s} is out of range for {num_nodes[t]} nodes")
            where[t].setdefault((tree if disjoint else 0, s), len(nodes[t]))
            nodes[t].append(s)
            trees[t].append(tree)
            tree += disjoint
    per_hop = [[len(n)] for n in nodes]
    edges = [([], [], [], [0]) for _ in range(R)]

    def source(r, f, e):  # (tree, u) of CSR entry e read from frontier entry f
        u = _checked_source(ix[r], e, num_nodes[src_types[r]])
        return trees[dst_types[r]][f] if disjoint else 0, u

    begin = [0] * T
    for hop in range(hops):
        end = [len(n) for n in nodes]
        for r in range(R):
            t, k = dst_types[r], fanouts[r * hops + hop]
            for f in range(begin[t], end[t]):
                row = _checked_row(ip[r], nodes[t][f])
                tree = trees[t][f] if disjoint else 0
                rng = _sample_stream(seed, hop, r, tree, nodes[t][f])
                for e in _draw_row(row, k, replace, last, *rules[r],
                                   seed_time[tree] if seed_time else None, rng):
                    key, s = source(r, f, e), src_types[r]
                    if key not in where[s]:
                        where[s][key] = len(nodes[s])
                        nodes[s].append(key[1])
                        trees[s].append(key[0])
                    _emit(edges[r], where[s][key], f, e)
            edges[r][3].append(len(edges[r][0]))
        begin = end
        for t in range(T):
            per_hop[t].append(len(nodes[t]))
    if induced:
        edges = [([], [], [], [0]) for _ in range(R)]
        for r in range(R):
            for f, w in enumerate(nodes[dst_types[r]]):
                for e in _checked_row(ip[r], w):
                    key = source(r, f, e)
                    if key in where[src_types[r]]:
                        _emit(edges[r], where[src_types[r]][key], f, e)
            edges[r][3].append(len(edges[r][0]))
    as_tensor = lambda v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    return ([as_tensor(n) for n in nodes] + [as_tensor(tr if disjoint else []) for tr in trees]
            + [as_tensor(h) for h in per_hop]
            + [as_tensor(e[i]) for i in range(4) for e in edges])


def _hop2_pool(ip: list, ix: list, v: int) -> list[int]:
    """The official pool: v's distinct in-neighbours, then the distinct nodes two in-steps
    away (v included when reached), each in increasing id."""
    first = sorted(set(ix[ip[v]:ip[v + 1]]))
    return first + sorted({u for w in first for u in ix[ip[w]:ip[w + 1]]})


def _draw_tokens(pool: list, k: int, n: int, rng: _Stream) -> list[int]:
    """As the kernel: a partial Fisher-Yates when the pool has k entries, else the pool in
    list order repeated, else distinct random nodes."""
    m = len(pool)
    if m >= k:
        for j in range(k):
            r = j + rng.below(m - j)
            pool[j], pool[r] = pool[r], pool[j]
        return pool[:k]
    if m:
        return [pool[j % m] for j in range(k)]
    out = []
    while len(out) < k:
        u = rng.below(n)
        if n < k or u not in out:
            out.append(u)
    return out


def hop2_sample(indptr, indices, K, seed):
    """Per node v, ``K`` tokens: v, then ``K - 1`` draws from its official 1- and 2-hop pool
    (:func:`_hop2_pool`), as the kernel draws them. ``[N, K]`` int64."""
    if K < 1:
        raise ValueError(f"K (tokens per node) must be >= 1, got {K}")
    ip, ix, n = indptr.tolist(), indices.tolist(), indptr.numel() - 1
    rows = [[v] + _draw_tokens(_hop2_pool(ip, ix, v), K - 1, n,
                               _Stream(_mix((seed & _U64) ^ _mix(v))))
            for v in range(n)]
    return torch.tensor(rows, dtype=torch.long).view(n, K)


# --- local eccentricity (City-Networks labels) -------------------------------------------

def local_eccentricity(indptr: Tensor, indices: Tensor, weight: Tensor, hops: int) -> Tensor:
    """Per node, the BFS ball of radius ``hops`` and a Dijkstra restricted to it (``weight``
    in CSR order): the kernel's computation, in plain Python."""
    ptr, idx, w = indptr.tolist(), indices.tolist(), weight.tolist()
    n = len(ptr) - 1
    out = torch.zeros(n, dtype=torch.float64)
    for v in range(n):
        depth = {v: 0}
        queue = deque([v])
        while queue:
            u = queue.popleft()
            if depth[u] == hops:
                continue
            for e in range(ptr[u], ptr[u + 1]):
                if idx[e] not in depth:
                    depth[idx[e]] = depth[u] + 1
                    queue.append(idx[e])
        dist, heap, farthest = {v: 0.0}, [(0.0, v)], 0.0
        done = set()
        while heap:
            d, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            farthest = d
            for e in range(ptr[u], ptr[u + 1]):
                t = idx[e]
                if t in depth and t not in done and d + w[e] < dist.get(t, float("inf")):
                    dist[t] = d + w[e]
                    heapq.heappush(heap, (d + w[e], t))
        out[v] = farthest
    return out


# --- nearest neighbours -------------------------------------------------------------------

# distances per block (float64: 32 MiB)
_KNN_BLOCK = 1 << 22
_FLOAT64_MAX = torch.finfo(torch.float64).max


def knn(x, y, ptr_x, ptr_y, k, exclude_self, within):
    """Per row of ``y``, the indices of its ``k`` nearest rows of ``x`` in its example
    (rows ``ptr_x[b]:ptr_x[b + 1]`` of ``x`` for those ``ptr_y[b]:ptr_y[b + 1]`` of ``y``):
    ``[M, k]`` int64, nearest first, equal distances by index, -1 past the example's points.
    A distance is the sum over the coordinates, in order, of the squared differences in
    float64 (the kernel's arithmetic); NaN distances rank after infinite ones, which rank
    after finite ones. With ``exclude_self`` row ``i`` of ``x`` is no neighbour of row ``i``
    of ``y``; with a finite ``within`` (a radius search) only squared distances below it
    count. By blocks of padded distances, several small examples to a block."""
    x, y = x.to(torch.float64), y.to(torch.float64)
    out = torch.full((y.size(0), k), -1, dtype=torch.long, device=y.device)
    counts_x, counts_y = (ptr_x[1:] - ptr_x[:-1]).tolist(), (ptr_y[1:] - ptr_y[:-1]).tolist()
    for block in _knn_blocks(counts_x, counts_y):
        _block_nearest(x, y, ptr_x, ptr_y, block, k, exclude_self, within, out)
    return out


def _knn_blocks(counts_x: list[int], counts_y: list[int]):
    """``(first, last, row_start, row_end)``: consecutive examples ``first..last - 1`` with
    their query rows ``row_start..row_end`` (a large example alone, cut into row chunks),
    each block at most ``_KNN_BLOCK`` padded distances."""
    first, count = 0, len(counts_x)
    while first < count:
        width = max(counts_x[first], 1)
        if counts_y[first] * width > _KNN_BLOCK:
            chunk = max(_KNN_BLOCK // width, 1)
            for start in range(0, counts_y[first], chunk):
                yield first, first + 1, start, min(start + chunk, counts_y[first])
            first += 1
            continue
        last, widest, tallest = first + 1, width, counts_y[first]
        while last < count:
            widest_next = max(widest, counts_x[last])
            tallest_next = max(tallest, counts_y[last])
            if (last + 1 - first) * widest_next * tallest_next > _KNN_BLOCK:
                break
            last, widest, tallest = last + 1, widest_next, tallest_next
        yield first, last, 0, None
        first = last


def padded_rows(t: Tensor, starts: Tensor, counts: Tensor, length: int) -> tuple[Tensor, Tensor]:
    """Rows ``starts[g] .. starts[g] + counts[g]`` of ``t`` per example ``g`` as
    ``[G, length, F]``, with a mask of the real rows."""
    offsets = torch.arange(length, device=t.device)
    real = offsets < counts.unsqueeze(1)
    index = (starts.unsqueeze(1) + offsets).where(real, 0)
    if t.size(0) == 0:
        return t.new_zeros(*index.shape, t.size(1)), real
    return t.index_select(0, index.view(-1)).view(*index.shape, t.size(1)), real


def _block_nearest(x, y, ptr_x, ptr_y, block, k, exclude_self, within, out) -> None:
    first, last, row_start, row_end = block
    starts_x, counts_x = ptr_x[first:last], ptr_x[first + 1:last + 1] - ptr_x[first:last]
    counts_y = ptr_y[first + 1:last + 1] - ptr_y[first:last]
    starts_y = ptr_y[first:last] + row_start
    if row_end is not None:
        counts_y = torch.full_like(counts_y, row_end - row_start)
    width, height = int(counts_x.max()), int(counts_y.max())
    if width == 0 or height == 0:
        return
    points, real_x = padded_rows(x, starts_x, counts_x, width)
    queries, real_y = padded_rows(y, starts_y, counts_y, height)
    squared = torch.zeros(last - first, height, width, dtype=x.dtype, device=x.device)
    for f in range(x.size(1)):  # a coordinate at a time, in order: no [G, M, N, F] tensor
        squared += (queries[:, :, f].unsqueeze(2) - points[:, :, f].unsqueeze(1)).pow(2)
    valid = real_x.unsqueeze(1) & real_y.unsqueeze(2)
    if exclude_self:  # the same row of the same example (a query is its own point)
        own = torch.arange(height, device=x.device).unsqueeze(1) + row_start
        valid &= own != torch.arange(width, device=x.device)
    if within != float("inf"):
        valid &= squared < within
    columns = _smallest_columns(_ranking_key(squared, valid), min(k, width))
    picked = valid.gather(2, columns)
    rank = torch.arange(columns.size(2), device=x.device).expand_as(columns)
    query = (starts_y.view(-1, 1, 1) + torch.arange(height, device=x.device).view(1, -1, 1))
    keep = picked & real_y.unsqueeze(2)
    out[query.expand_as(columns)[keep], rank[keep]] = (
        starts_x.view(-1, 1, 1).expand_as(columns)[keep] + columns[keep])


def _ranking_key(distance: Tensor, valid: Tensor) -> Tensor:
    """Distances as keys for torch's ascending order (NaN last): finite first, then
    infinite, then NaN, then the padding and excluded pairs."""
    key = distance.masked_fill(distance == float("inf"), _FLOAT64_MAX)
    key = key.masked_fill(distance.isnan(), float("inf"))
    return key.masked_fill(~valid, float("nan"))


def _smallest_columns(key: Tensor, k: int) -> Tensor:
    """Per row of ``key`` (``[G, M, N]``), the columns of its ``k`` smallest keys in
    ascending order, equal keys by column."""
    n = key.size(2)
    if k < n:  # topk's choice among equal keys at the k-th place is its own: ties redone
        values, columns = torch.topk(key, k + 1, dim=2, largest=False, sorted=True)
        tied = (values[..., k - 1] == values[..., k]) | (
            values[..., k - 1].isnan() & values[..., k].isnan())
        columns = columns[..., :k]
        if tied.any():
            columns[tied] = torch.sort(key[tied], dim=1, stable=True).indices[:, :k]
    else:
        columns = torch.arange(n, device=key.device).expand(*key.shape[:2], n)
    # ascending key, equal keys by column: sorted by column, then stably by key
    columns = columns.sort(dim=2).values
    order = torch.sort(key.gather(2, columns), dim=2, stable=True).indices
    return columns.gather(2, order)


def random_walk(indptr, indices, start, walk_length, p, q, seed, edge_ids=None,
                sorted_rows=False):
    """node2vec's walks along a source-major CSR, as the kernel draws them: ``(nodes
    [S, walk_length + 1], CSR positions [S, walk_length])``, -1 where the walk stays;
    with ``edge_ids``, the positions reported through it."""
    if start.dim() != 1 or start.dtype != torch.long:
        raise ValueError(f"start must be int64 [S], got {start.dtype} {list(start.shape)}")
    if walk_length < 0:
        raise ValueError(f"walk_length must be >= 0, got {walk_length}")
    if not (math.isfinite(p) and p > 0 and math.isfinite(q) and q > 0):
        raise ValueError(f"p and q must be finite and > 0, got p = {p}, q = {q}")
    ip, ix, n = indptr.tolist(), indices.tolist(), indptr.numel() - 1
    top = max(1.0 / p, 1.0, 1.0 / q)
    nodes, positions = [], []
    for i, v in enumerate(start.tolist()):
        if not 0 <= v < n:
            raise ValueError(f"start node {v} is out of range for {n} nodes")
        rng, t, walk, taken = _Stream(_mix((seed & _U64) ^ _mix(i))), -1, [v], []
        for _ in range(walk_length):
            deg, e, x = ip[v + 1] - ip[v], -1, v
            while deg > 0:
                e = ip[v] + rng.below(deg)
                x = ix[e]
                if (p == 1.0 and q == 1.0) or t < 0 or deg == 1:
                    break
                weight = 1.0 / p if x == t else (1.0 if t in ix[ip[x]:ip[x + 1]] else 1.0 / q)
                if rng.unit() * top < weight:
                    break
            taken.append(e if e < 0 or edge_ids is None else int(edge_ids[e]))
            walk.append(x)
            t, v = v, x
        nodes.append(walk)
        positions.append(taken)
    return (torch.tensor(nodes, dtype=torch.long).view(len(nodes), walk_length + 1),
            torch.tensor(positions, dtype=torch.long).view(len(nodes), walk_length))


def graclus(indptr, indices, order, weight=None):
    """Graclus's greedy matching, as the kernel: nodes in ``order``; an unmatched node pairs
    with its first unmatched out-neighbour (with ``weight``, the heaviest, ties to the later
    entry), both taking the smaller id; self-loops never pair."""
    ip, ix, n = indptr.tolist(), indices.tolist(), indptr.numel() - 1
    if sorted(order.tolist()) != list(range(n)):
        raise ValueError(f"order is not a permutation of the {n} nodes")
    w = None if weight is None else weight.tolist()
    out = [-1] * n
    for u in order.tolist():
        if out[u] >= 0:
            continue
        best, best_weight = u, 0.0
        for e in range(ip[u], ip[u + 1]):
            v = ix[e]
            if v == u or out[v] >= 0:
                continue
            if w is None:
                best = v
                break
            if w[e] >= best_weight:
                best, best_weight = v, w[e]
        out[u] = out[best] = min(u, best)
    return torch.tensor(out, dtype=torch.long)


class _WeightedGraph:
    """The partitioning kernel's graph: CSR lists with node and edge weights, and how many
    input nodes each node stands for (``members``)."""

    def __init__(self, xadj, adj, ewgt, vwgt, members):
        self.xadj, self.adj, self.ewgt, self.vwgt = xadj, adj, ewgt, vwgt
        self.members = members

    def size(self) -> int:
        return len(self.vwgt)

    def row(self, u: int) -> range:
        return range(self.xadj[u], self.xadj[u + 1])


_REFINE_PASSES, _GROW_TRIES, _FM_PASSES = 10, 4, 8


def _random_order(n: int, rng: _Stream) -> list[int]:
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def _part_limits(total: int, shares: list[int], tolerance: int) -> list[int]:
    whole = sum(shares)
    return [max(-(-total * s // whole), total * s * (1000 + tolerance) // (1000 * whole))
            for s in shares]


def _match_nodes(g: _WeightedGraph, max_weight: int, order: list[int]) -> list[int]:
    mate = [-1] * g.size()
    for u in order:
        if mate[u] >= 0:
            continue
        best, best_weight = -1, -1
        for e in g.row(u):
            v = g.adj[e]
            if v != u and mate[v] < 0 and g.vwgt[u] + g.vwgt[v] <= max_weight \
                    and g.ewgt[e] > best_weight:
                best, best_weight = v, g.ewgt[e]
        if best >= 0:
            mate[u], mate[best] = best, u
    single = mate.count(-1)
    for h in order if 10 * single > g.size() else []:
        pending = -1
        for e in g.row(h):
            v = g.adj[e]
            if v == h or v == pending or mate[v] >= 0:
                continue
            if pending < 0:
                pending = v
            elif g.vwgt[pending] + g.vwgt[v] <= max_weight:
                mate[pending], mate[v], pending = v, pending, -1
    island = -1
    for u in range(g.size()):
        if mate[u] >= 0 or g.xadj[u] != g.xadj[u + 1]:
            continue
        if island >= 0 and g.vwgt[island] + g.vwgt[u] <= max_weight:
            mate[island], mate[u], island = u, island, -1
        else:
            island = u
    return [u if m < 0 else m for u, m in enumerate(mate)]


def _contract(g: _WeightedGraph, mate: list[int]) -> tuple[_WeightedGraph, list[int]]:
    coarse_of, pairs = [-1] * g.size(), []
    for u, m in enumerate(mate):
        if m >= u:
            coarse_of[u] = coarse_of[m] = len(pairs)
            pairs.append((u,) if m == u else (u, m))
    xadj, adj, ewgt, vwgt, counts = [0], [], [], [], []
    for c, members in enumerate(pairs):
        where = {}
        vwgt.append(sum(g.vwgt[u] for u in members))
        counts.append(sum(g.members[u] for u in members))
        for u in members:
            for e in g.row(u):
                d = coarse_of[g.adj[e]]
                if d == c:
                    continue
                if d in where:
                    ewgt[where[d]] += g.ewgt[e]
                else:
                    where[d] = len(adj)
                    adj.append(d)
                    ewgt.append(g.ewgt[e])
        xadj.append(len(adj))
    return _WeightedGraph(xadj, adj, ewgt, vwgt, counts), coarse_of


def _refine(g: _WeightedGraph, part: list[int], limits: list[int], fewest: list[int],
            rng: _Stream) -> None:
    """The kernel's Refiner: greedy passes over boundary nodes, then, while a part is over
    its limit, one shedding pass and the greedy passes again."""
    k = len(limits)
    weight, count = [0] * k, [0] * k
    for u in range(g.size()):
        weight[part[u]] += g.vwgt[u]
        count[part[u]] += g.members[u]

    def visit(u: int, shed: bool) -> bool:
        a = part[u]
        over = weight[a] > limits[a]
        if (shed and not over) or count[a] - g.members[u] < fewest[a]:
            return False
        conn = {}
        for e in g.row(u):
            p = part[g.adj[e]]
            conn[p] = conn.get(p, 0) + g.ewgt[e]
        inside, best, best_gain = conn.get(a, 0), -1, 0
        for p, c in conn.items():
            if p == a or weight[p] + g.vwgt[u] > limits[p]:
                continue
            gain = c - inside
            if best < 0 or gain > best_gain or (gain == best_gain and weight[p] < weight[best]):
                best, best_gain = p, gain
        if best < 0 and shed:
            best, best_gain = min(range(k), key=lambda p: (weight[p], p)), -inside
            if best == a or weight[best] + g.vwgt[u] > limits[best]:
                best = -1
        if best < 0:
            return False
        evens = best_gain == 0 and weight[best] + g.vwgt[u] < weight[a]
        if not (best_gain > 0 or evens or over):
            return False
        weight[a] -= g.vwgt[u]
        count[a] -= g.members[u]
        weight[best] += g.vwgt[u]
        count[best] += g.members[u]
        part[u] = best
        return True

    def greedy_passes():
        for _ in range(_REFINE_PASSES):
            if sum(visit(u, False) for u in _random_order(g.size(), rng)) * 1000 <= g.size():
                break

    greedy_passes()
    if any(w > lim for w, lim in zip(weight, limits, strict=True)):
        for u in _random_order(g.size(), rng):
            visit(u, True)
        greedy_passes()


def _fm_bisection(g: _WeightedGraph, side: list[int], limits: list[int], target: int,
                  fewest: list[int]) -> None:
    """The kernel's Fiduccia-Mattheyses passes (from the side further above its target,
    largest gain first, ties to the smaller id; back to the best state seen), with its gains
    and cut read once and then updated move by move."""
    n = g.size()
    patience = min(max(n // 100, 15), 100)
    weight, count = [0, 0], [0, 0]
    for u in range(n):
        weight[side[u]] += g.vwgt[u]
        count[side[u]] += g.members[u]
    targets = [target, sum(weight) - target]
    gain, reach, cut = [0] * n, [0] * n, 0
    for u in range(n):
        for e in g.row(u):
            crosses = side[g.adj[e]] != side[u]
            gain[u] += g.ewgt[e] if crosses else -g.ewgt[e]
            cut += g.ewgt[e] if crosses else 0
            reach[u] += g.ewgt[e]
    cut //= 2

    def excess():
        return max(0, weight[0] - limits[0]) + max(0, weight[1] - limits[1])

    def flip(u: int) -> int:  # returns the cut's change
        a = side[u]
        b = 1 - a
        side[u] = b
        weight[a] -= g.vwgt[u]
        weight[b] += g.vwgt[u]
        count[a] -= g.members[u]
        count[b] += g.members[u]
        saved = gain[u]
        gain[u] = -gain[u]
        for e in g.row(u):
            v = g.adj[e]
            if v != u:
                gain[v] += -2 * g.ewgt[e] if side[v] == b else 2 * g.ewgt[e]
        return -saved

    for _ in range(_FM_PASSES):
        locked, moves, heaps = [False] * n, [], ([], [])
        for u in range(n):
            if gain[u] > -reach[u]:
                heaps[side[u]].append((-gain[u], u))
        for heap in heaps:
            heapq.heapify(heap)
        best, best_moves = (excess(), cut), 0
        while len(moves) - best_moves < patience:
            a = 0 if weight[0] - targets[0] > weight[1] - targets[1] else 1
            heap = heaps[a]
            while heap and (locked[heap[0][1]] or -heap[0][0] != gain[heap[0][1]]):
                heapq.heappop(heap)
            if not heap:
                break
            u = heapq.heappop(heap)[1]
            locked[u] = True
            if count[a] - g.members[u] < fewest[a]:
                continue
            cut += flip(u)
            moves.append(u)
            for e in g.row(u):
                v = g.adj[e]
                if not locked[v]:
                    heapq.heappush(heaps[side[v]], (-gain[v], v))
            if (excess(), cut) < best:
                best, best_moves = (excess(), cut), len(moves)
        for u in reversed(moves[best_moves:]):
            cut += flip(u)
        if best_moves == 0:
            break


def _improve(g, part, shares, tolerance, rng):
    total = sum(g.vwgt)
    limits = _part_limits(total, shares, tolerance)
    if len(shares) == 2:
        _fm_bisection(g, part, limits, total * shares[0] // sum(shares), shares)
    _refine(g, part, limits, shares, rng)


def _grow_side(g: _WeightedGraph, target: int, rng: _Stream) -> list[int]:
    n = g.size()
    side, queued, queue = [1] * n, [False] * n, []
    start, head, weight = rng.below(n), 0, 0
    while weight < target:
        if head == len(queue):
            while queued[start]:
                start = (start + 1) % n
            queued[start] = True
            queue.append(start)
        u = queue[head]
        head += 1
        side[u] = 0
        weight += g.vwgt[u]
        for e in g.row(u):
            if not queued[g.adj[e]]:
                queued[g.adj[e]] = True
                queue.append(g.adj[e])
    return side


def _weighed_split(g: _WeightedGraph, part: list[int], limits: list[int]) -> tuple[int, int]:
    """(weight over the limits, cut weight) of a split."""
    weight = [0] * len(limits)
    for u in range(g.size()):
        weight[part[u]] += g.vwgt[u]
    cut = sum(g.ewgt[e] for u in range(g.size()) for e in g.row(u) if part[g.adj[e]] != part[u])
    return sum(max(0, w - lim) for w, lim in zip(weight, limits, strict=True)), cut


def _grown_bisection(g, shares, tolerance, rng):
    total = sum(g.vwgt)
    limits = _part_limits(total, shares, tolerance)
    target = total * shares[0] // (shares[0] + shares[1])
    best, best_score = None, None
    for _ in range(_GROW_TRIES):
        side = _grow_side(g, target, rng)
        _improve(g, side, shares, tolerance, rng)
        score = _weighed_split(g, side, limits)
        if best is None or score < best_score:
            best, best_score = side, score
    return best


def _side_subgraph(g: _WeightedGraph, side: list[int], s: int):
    nodes = [u for u in range(g.size()) if side[u] == s]
    local = {u: i for i, u in enumerate(nodes)}
    xadj, adj, ewgt = [0], [], []
    for u in nodes:
        for e in g.row(u):
            if g.adj[e] in local:
                adj.append(local[g.adj[e]])
                ewgt.append(g.ewgt[e])
        xadj.append(len(adj))
    return _WeightedGraph(xadj, adj, ewgt, [g.vwgt[u] for u in nodes],
                          [g.members[u] for u in nodes]), nodes


def _bisect_recursively(g, shares, first, tolerance, rng, bisect, out):
    k = len(shares)
    if k == 1 or g.size() == 0:
        out[:] = [first] * len(out)
        return
    half = k // 2
    side = bisect(g, [sum(shares[:half]), sum(shares[half:])], tolerance, rng)
    for s, sub_shares, sub_first in ((0, shares[:half], first), (1, shares[half:], first + half)):
        sub, nodes = _side_subgraph(g, side, s)
        sub_part = [0] * len(nodes)
        _bisect_recursively(sub, sub_shares, sub_first, tolerance, rng, bisect, sub_part)
        for u, p in zip(nodes, sub_part, strict=True):
            out[u] = p


def _multilevel(g, shares, tolerance, rng):
    k, total = len(shares), sum(g.vwgt)
    coarsest = 60 if k == 2 else max(30 * k, g.size() // (20 * (k.bit_length() - 1)))
    split = _grown_bisection if k == 2 else _multilevel
    levels, maps, current = [g], [], g
    while current.size() > coarsest:
        max_weight = max(1, 3 * (total // (2 * coarsest)))
        order = _random_order(current.size(), rng)
        order.sort(key=lambda u: current.xadj[u + 1] - current.xadj[u])  # stable
        mate = _match_nodes(current, max_weight, order)
        coarse, coarse_of = _contract(current, mate)
        if 20 * coarse.size() > 19 * current.size():
            break
        levels.append(coarse)
        maps.append(coarse_of)
        current = coarse
    part = [0] * current.size()
    _bisect_recursively(current, shares, 0, tolerance, rng, split, part)
    _improve(current, part, shares, tolerance, rng)
    for level in range(len(maps) - 1, -1, -1):
        part = [part[c] for c in maps[level]]
        _improve(levels[level], part, shares, tolerance, rng)
    return part


def partition(indptr, indices, node_weight, edge_weight, num_parts, recursive, tolerance,
              seed):
    """METIS's multilevel partitioning, step for step as the kernel (csrc/cpu/partition.cpp):
    the same matching, contraction, grown bisections and refinement, drawing from one
    SplitMix64 stream in the same order."""
    n = indptr.numel() - 1
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if not 0 <= tolerance <= 1_000_000:
        raise ValueError(f"tolerance (per mille) must be in [0, 1000000], got {tolerance}")
    if indices.numel() and not 0 <= int(indices.min()) <= int(indices.max()) < n:
        raise ValueError(f"indices must be node ids in [0, {n})")
    weights = []
    for name, w, count in (("node_weight", node_weight, n), ("edge_weight", edge_weight,
                                                             indices.numel())):
        values = [1] * count if w is None else w.tolist()
        if any(v < 0 for v in values):
            raise ValueError(f"{name} must be >= 0")
        weights.append(values)
    g = _WeightedGraph(indptr.tolist(), indices.tolist(), weights[1], weights[0], [1] * n)
    num_parts = min(num_parts, max(n, 1))
    rng, shares = _Stream(_mix(seed & _U64)), [1] * num_parts
    if num_parts == 1:
        part = [0] * n
    elif not recursive:
        part = _multilevel(g, shares, tolerance, rng)
    else:
        part = [0] * n
        _bisect_recursively(g, shares, 0, tolerance, rng, _multilevel, part)
        _improve(g, part, shares, tolerance, rng)
    return torch.tensor(part, dtype=torch.long)
