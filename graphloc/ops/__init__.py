"""Message-passing ops over a ``Graph``: fused gather + reduce, edge scores, edge softmax.

Edge tensors (weights, scores) are in the graph's edge order (the order of
``graph.edge_index``) on input and output; the kernels run in CSR order internally. All ops
are differentiable (float32/float64; spmm and sddmm also bfloat16 with float32
accumulation) and compile with ``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from graphloc.checks import check_flags, check_index, check_int, check_number
from graphloc.ops._library import (
    HAS_EXTENSION,
    EdgeHeadSum,
    csr_transpose,
    kernels,
    permute_rows,
)
from graphloc.ops.cluster import graclus, partition, row_sorted_csr, voxel_grid
from graphloc.ops.dropout import dropout
from graphloc.ops.heads import composed_head_dots
from graphloc.ops.neighbours import fps, knn, knn_graph, nearest, radius, radius_graph
from graphloc.ops.reference import as_rows, canonical_reduce
from graphloc.ops.reference import edge_outer_sum as _composed_outer_sum
from graphloc.ops.reference import film_sum as _composed_film_sum
from graphloc.ops.scatter import _check_indptr, gather, scatter
from graphloc.ops.sparse_library import library_spmm, set_spmm_backend, uses_sparse_library
from graphloc.ops.spline import spline_basis, spline_weighting
from graphloc.ops.traversal import (
    KHopBalls,
    RandomWalks,
    SampledNeighbourhood,
    SampledRelations,
    WalkCounts,
    dropout_path,
    hop2_sample,
    khop_subgraphs,
    local_eccentricity,
    neighbor_sample,
    random_walk,
    relational_neighbor_sample,
    separated_rounds,
    walk_counts,
)
from graphloc.ops.values import autocast_enabled

__all__ = ["HAS_EXTENSION", "spmm", "set_spmm_backend", "sddmm", "segment_softmax",
           "segment_attention", "additive_attention", "gatv2_scores", "head_dots", "gated_sum",
           "film_sum", "softmax_sum",
           "edge_outer_sum", "edge_head_sum",
           "segment_reduce", "gather", "scatter", "coo_to_csr", "csr_transpose", "permute_rows",
           "khop_subgraphs", "walk_counts", "separated_rounds", "neighbor_sample",
           "relational_neighbor_sample", "random_walk", "dropout_path", "hop2_sample",
           "local_eccentricity", "dropout", "knn", "knn_graph", "radius", "radius_graph",
           "nearest", "fps", "graclus", "partition", "row_sorted_csr", "voxel_grid", "spline_basis",
           "spline_weighting",
           "KHopBalls",
           "SampledNeighbourhood", "SampledRelations", "RandomWalks", "WalkCounts"]

_FLOATS = (torch.float32, torch.float64, torch.bfloat16)


def _check_graph(graph) -> None:
    if not hasattr(graph, "csr") or not hasattr(graph, "num_nodes"):
        raise TypeError(f"expected a graphloc.Graph, got {type(graph).__name__}; wrap an "
                        "edge_index with graphloc.Graph(edge_index, num_nodes)")


def _check_float_dtype(t: Tensor, name: str) -> None:
    if t.dtype == torch.float16:  # alone it runs in float32 (_float16_in_float32)
        raise TypeError(f"{name} is float16 but another floating input is not: float16 runs "
                        f"only when every floating input is float16 (mixed dtypes are an "
                        f"error, as for torch.mm, outside torch.autocast)")
    if t.dtype not in _FLOATS:
        raise TypeError(f"{name} must be float16, float32, float64 or bfloat16, got {t.dtype}")


def _check_node_features(graph, x: Tensor, name: str, side: str = "source") -> None:
    """``x`` holds a row per source node (or destination node, ``side="destination"``)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    _check_float_dtype(x, name)
    bipartite = getattr(graph, "is_bipartite", False)
    expected = graph.num_src_nodes if bipartite and side == "source" else graph.num_nodes
    if x.dim() == 0 or x.size(0) != expected:
        rows = x.size(0) if x.dim() else "no"
        nodes = f"{expected} {side} nodes" if bipartite else f"{expected} nodes"
        raise ValueError(f"{name} has {rows} rows but the graph has {nodes}")
    if x.device != graph.device:
        raise ValueError(f"{name} is on {x.device} but the graph is on {graph.device}")


def _check_edge_values(graph, values: Tensor, like: Tensor, name: str) -> None:
    if not isinstance(values, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(values).__name__}")
    if values.dim() not in (1, 2) or values.size(0) != graph.num_edges:
        raise ValueError(f"{name} must have shape [E] or [E, heads] with E = "
                         f"{graph.num_edges}, got {list(values.shape)}")
    if values.dim() == 2 and values.size(1) == 0:
        raise ValueError(f"{name} has shape {list(values.shape)}: 0 heads (it needs at least "
                         "one column)")
    if values.dtype != like.dtype:
        raise TypeError(f"{name} has dtype {values.dtype} but the features have {like.dtype}")
    if values.device != like.device:
        raise ValueError(f"{name} is on {values.device} but the features are on {like.device}")


def _promoted_under_autocast(*tensors: Tensor | None) -> tuple:
    """Under ``torch.autocast`` the floating inputs in their promoted dtype (autocast's
    "promote" policy, as for ``torch.cat`` or ``scatter_add``), float16 as float32 (the
    kernels have no float16: autocast's fp32 policy): a layer's linear maps then give
    low-precision features while its edge weights or attention parameters stay float32,
    whose products PyG's layers take in float32. Outside autocast, unchanged: mixed dtypes
    are an error there, as for ``torch.mm``, and so is float16."""
    present = [t for t in tensors if isinstance(t, Tensor) and t.is_floating_point()]
    if not present or not autocast_enabled(present[0].device.type):
        return tensors
    dtype = functools.reduce(torch.promote_types, (t.dtype for t in present))
    dtype = torch.float32 if dtype == torch.float16 else dtype
    return tuple(t.to(dtype) if isinstance(t, Tensor) and t.is_floating_point() else t
                 for t in tensors)


def _float16_in_float32(op):
    """``op`` with float16 inputs (outside autocast, which has its own rule above) computed
    in float32 and its floating outputs rounded back to float16, as torch's CPU float16
    ops accumulate in float32: the kernels have no float16, and a model cast with
    ``.half()`` runs as PyG's does. Inputs mixing float16 with another dtype go through
    unchanged, so the checks refuse them as ``torch.mm`` does."""
    @functools.wraps(op)
    def run(*args, **kwargs):
        floats = [t for t in (*args, *kwargs.values())
                  if isinstance(t, Tensor) and t.is_floating_point()]
        if not floats or any(t.dtype != torch.float16 for t in floats) \
                or autocast_enabled(floats[0].device.type):
            return op(*args, **kwargs)
        out = op(*map(_as_float32, args), **{k: _as_float32(v) for k, v in kwargs.items()})
        return tuple(map(_as_float16, out)) if isinstance(out, tuple) else _as_float16(out)
    return run


def _as_float32(value):
    return value.float() if isinstance(value, Tensor) and value.dtype == torch.float16 \
        else value


def _as_float16(value):
    return value.half() if isinstance(value, Tensor) and value.dtype == torch.float32 \
        else value


def _transpose_args(graph, needed: bool):
    if not needed:
        return None, None, None
    csc = graph.csc
    return csc.indptr, csc.indices, csc.perm


def _node_inputs(graph, sides: dict[str, str], *tensors: Tensor) -> tuple[Tensor, ...]:
    """The node inputs of an op over the edges, in their dtype under autocast, each checked to
    hold a row per node of its side (``sides``: name -> "source" or "destination"), all of
    one dtype."""
    tensors = _promoted_under_autocast(*tensors)
    for (name, side), t in zip(sides.items(), tensors, strict=True):
        _check_node_features(graph, t, name, side=side)
    _check_one_dtype(dict(zip(sides, tensors, strict=True)))
    return tensors


def _check_one_dtype(named: dict[str, Tensor]) -> None:
    if len({t.dtype for t in named.values()}) > 1:
        listed = [f"{name} ({t.dtype})" for name, t in named.items()]
        raise TypeError(f"{', '.join(listed[:-1])} and {listed[-1]} must have one dtype")


def _has_cpu_kernel(t: Tensor) -> bool:
    """Whether the fused CPU kernels take ``t``: float32 or float64 on the CPU, extension
    built (elsewhere the ops compose their definition)."""
    return t.device.type == "cpu" and HAS_EXTENSION and t.dtype in (torch.float32, torch.float64)


@_float16_in_float32
def spmm(graph, x: Tensor, edge_weight: Tensor | None = None, reduce: str = "sum") -> Tensor:
    """``out[i] = reduce_{(j -> i)} w_ji * x[j]``: fused gather and reduce, no per-edge tensor.

    Args:
        graph: the ``Graph``.
        x: node features ``[N]``, ``[N, F]`` or ``[N, H, F]``.
        edge_weight: optional ``[E]``, or ``[E, H]`` to scale each of ``H`` channel blocks.
        reduce: ``"sum"``, ``"mean"``, ``"max"`` or ``"min"``. Nodes without incoming edges
            get 0. For max/min the gradient goes to the winning edge (the first in CSR order on
            ties), like torch_scatter.

    Returns ``[N, ...]`` with the shape of ``x`` (bipartite graphs: ``x`` has a row per
    source node, the output one per destination node). On CUDA, sum and mean run through
    cuSPARSE by default (``set_spmm_backend``).
    """
    _check_graph(graph)
    x, edge_weight = _promoted_under_autocast(x, edge_weight)
    _check_node_features(graph, x, "x")
    reduce = canonical_reduce(reduce)
    value = None
    rows = as_rows(x)
    if edge_weight is not None:
        _check_edge_values(graph, edge_weight, x, "edge_weight")
        value = graph.to_csr_order(edge_weight).contiguous()
        if value.dim() == 2 and x.dim() == 3 and x.size(1) != value.size(1):
            raise ValueError(f"x has {x.size(1)} heads ({list(x.shape)}) but edge_weight "
                             f"has {value.size(1)}")
        if value.dim() == 2 and rows.size(1) % value.size(1):
            raise ValueError(f"x has {rows.size(1)} channels, not divisible into "
                             f"{value.size(1)} heads of edge_weight")
    if uses_sparse_library(rows, value, reduce):  # cuSPARSE on CUDA: set_spmm_backend
        out = library_spmm(graph, rows, value, reduce)
    else:
        # the backward reads the transpose for x's gradient, and with max / min for the
        # weights' too (else it would rebuild the transpose at every call)
        needs_transpose = torch.is_grad_enabled() and (x.requires_grad or (
            value is not None and value.requires_grad and reduce in ("max", "min")))
        transposed = (graph.transposed_values(value) if needs_transpose and x.requires_grad
                      and value is not None and reduce == "sum" else None)
        out, _ = kernels.spmm(graph.csr.indptr, graph.csr.indices, value, rows, reduce,
                              *_transpose_args(graph, needs_transpose), None, transposed)
    # explicit row counts: view(-1, ...) cannot size a tensor without elements
    return out.view(out.size(0), *x.shape[1:]) if x.dim() != 2 else out


@_float16_in_float32
def sddmm(graph, a: Tensor, b: Tensor, op: str = "dot") -> Tensor:
    """Per-edge values from source features ``a`` and destination features ``b``.

    For edge ``e = (j -> i)``: ``dot`` gives ``<a[j], b[i]>`` (per head for ``[N, H, F]``
    inputs, so ``[E]`` or ``[E, H]``); ``add`` and ``mul`` give ``a[j] + b[i]`` and
    ``a[j] * b[i]`` with the trailing shape of the inputs (``[E]``, ``[E, F]``, ...).
    Output is in the graph's edge order.
    """
    _check_graph(graph)
    a, b = _promoted_under_autocast(a, b)
    _check_node_features(graph, a, "a")
    _check_node_features(graph, b, "b", side="destination")
    if a.shape[1:] != b.shape[1:] or a.dtype != b.dtype:
        raise ValueError(f"a and b must match, got {list(a.shape)} {a.dtype} and "
                         f"{list(b.shape)} {b.dtype}")
    if op not in ("dot", "add", "mul"):
        raise ValueError(f"sddmm op must be one of 'dot', 'add', 'mul', got {op!r}")
    heads = a.size(1) if a.dim() == 3 else 1
    if heads == 0:
        raise ValueError(f"a and b have shape {list(a.shape)}: 0 heads")
    needs_grad = torch.is_grad_enabled() and a.requires_grad
    a2, b2 = as_rows(a), as_rows(b)
    out = kernels.sddmm(graph.csr.indptr, graph.csr.indices, a2, b2, op, heads,
                        *_transpose_args(graph, needs_grad))
    if op == "dot":
        out = out.view(-1, heads) if a.dim() == 3 else out.view(-1)
    else:
        out = out.view(out.size(0), *a.shape[1:])
    return graph.from_csr_order(out)


@_float16_in_float32
def segment_softmax(graph, scores: Tensor) -> Tensor:
    """Softmax of edge scores ``[E]`` or ``[E, H]`` over the incoming edges of each node."""
    _check_graph(graph)
    (scores,) = _promoted_under_autocast(scores)
    if not isinstance(scores, Tensor):
        raise TypeError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    _check_float_dtype(scores, "scores")
    if scores.dim() not in (1, 2) or scores.size(0) != graph.num_edges:
        raise ValueError(f"scores must have shape [E] or [E, H] with E = {graph.num_edges}, "
                         f"got {list(scores.shape)}")
    if scores.device != graph.device:
        raise ValueError(f"scores are on {scores.device} but the graph is on {graph.device}")
    if scores.dim() == 2 and scores.size(1) == 0:
        raise ValueError(f"scores has shape {list(scores.shape)}: 0 heads")
    s = graph.to_csr_order(scores)
    out = kernels.segment_softmax(as_rows(s), graph.csr.indptr)
    return graph.from_csr_order(out.view(scores.shape))


def _attention_rows(x: Tensor, heads: int, scores_name: str) -> Tensor:
    """``x`` as ``[N, heads * C]`` rows, after checking that it splits into ``heads``."""
    if x.dim() == 3 and x.size(1) != heads:
        raise ValueError(f"x has {x.size(1)} heads ({list(x.shape)}) but {scores_name} have "
                         f"{heads}")
    rows = as_rows(x)
    if rows.size(1) % heads:
        raise ValueError(f"x has {rows.size(1)} channels, not divisible into {heads} heads")
    return rows


@_float16_in_float32
def segment_attention(graph, scores: Tensor, x: Tensor,
                      return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Attention aggregation: ``out[i] = sum_{(j -> i)} softmax_i(scores)_{ji} * x[j]``.

    The softmax over each node's incoming edges and the weighted sum run in one pass
    per node (no ``[E, H, C]`` messages, no stored ``[E, H]`` weights: the backward
    recomputes them from a per-node log-sum-exp, each row divided by its sum, so they are
    the softmax at any score magnitude).

    Args:
        scores: ``[E]`` or ``[E, H]`` edge scores in the graph's edge order.
        x: ``[N, C]`` for one head, or ``[N, H, C]`` / ``[N, H * C]`` for ``H`` heads.
        return_weights: also return the attention weights ``[E]`` / ``[E, H]``.

    Returns ``out`` with ``x``'s shape (nodes without incoming edges get 0), and the weights
    if asked.
    """
    _check_graph(graph)
    check_flags("segment_attention", return_weights=return_weights)
    scores, x = _promoted_under_autocast(scores, x)
    _check_node_features(graph, x, "x")
    _check_edge_values(graph, scores, x, "scores")
    x2 = _attention_rows(x, 1 if scores.dim() == 1 else scores.size(1), "scores")
    s = as_rows(graph.to_csr_order(scores))
    # the backward reads the transpose for either gradient (on the CPU the scores' comes
    # from the same pass over it as x's)
    needs_transpose = torch.is_grad_enabled() and (x.requires_grad or scores.requires_grad)
    out, lse = kernels.segment_attention(s, graph.csr.indptr, graph.csr.indices, x2,
                                         *_transpose_args(graph, needs_transpose))
    out = out.view(out.size(0), *x.shape[1:])
    if not return_weights:
        return out
    # the rows' softmax itself, not exp(s - lse): lse = max + log(sum) rounds at the
    # scores' scale (tied scores of 1e30 weighed 1 each)
    weights = kernels.segment_softmax(s, graph.csr.indptr)
    return out, graph.from_csr_order(weights.view(scores.shape))


@_float16_in_float32
def additive_attention(graph, src_scores: Tensor, dst_scores: Tensor, x: Tensor,
                       negative_slope: float = 0.2) -> Tensor:
    """GAT's attention: ``segment_attention`` with the scores
    ``leaky_relu(src_scores[j] + dst_scores[i], negative_slope)`` per edge ``(j -> i)`` and
    head. On the CPU the kernel computes the scores where it needs them: no ``[E, H]``
    score tensor forward or backward, and the gradients of both halves come out of the
    attention's own passes. Elsewhere, and for a negative slope, it runs as ``sddmm``,
    ``leaky_relu`` and ``segment_attention``, which is also its definition.

    Args:
        src_scores: ``[N_src]`` or ``[N_src, H]``, a score half per source node and head.
        dst_scores: ``[N]`` or ``[N, H]``, a score half per destination node and head.
        x: ``[N_src, C]`` for one head, or ``[N_src, H, C]`` / ``[N_src, H * C]``.
        negative_slope: the LeakyReLU's slope for negative scores.

    Returns ``out`` with ``x``'s shape (nodes without incoming edges get 0). With bfloat16
    inputs the kernel computes the scores in float32, where the composed ops round them
    to bfloat16 first (outputs agree to bfloat16's precision, tested).
    """
    _check_graph(graph)
    src_scores, dst_scores, x = _promoted_under_autocast(src_scores, dst_scores, x)
    _check_node_features(graph, x, "x")
    _check_node_features(graph, src_scores, "src_scores")
    _check_node_features(graph, dst_scores, "dst_scores", side="destination")
    if src_scores.dim() > 2 or src_scores.shape[1:] != dst_scores.shape[1:]:
        raise ValueError(f"src_scores and dst_scores must be [N] or [N, heads] with the same "
                         f"heads, got {list(src_scores.shape)} and {list(dst_scores.shape)}")
    if src_scores.dtype != x.dtype or dst_scores.dtype != x.dtype:
        raise TypeError(f"src_scores ({src_scores.dtype}) and dst_scores ({dst_scores.dtype}) "
                        f"must have x's dtype {x.dtype}")
    check_number("additive_attention", "negative_slope", negative_slope)
    heads = 1 if src_scores.dim() == 1 else src_scores.size(1)
    if heads == 0:
        raise ValueError(f"src_scores has shape {list(src_scores.shape)}: 0 heads")
    x2 = _attention_rows(x, heads, "the scores")
    # the kernel reads the LeakyReLU's side off the sign of its output: a slope >= 0
    if x.device.type != "cpu" or not HAS_EXTENSION or not negative_slope >= 0:
        score = torch.nn.functional.leaky_relu(sddmm(graph, src_scores, dst_scores, "add"),
                                               negative_slope)
        return segment_attention(graph, score, x)
    needs_transpose = torch.is_grad_enabled() and (
        x.requires_grad or src_scores.requires_grad or dst_scores.requires_grad)
    out, _ = kernels.additive_attention(
        as_rows(src_scores), as_rows(dst_scores), float(negative_slope), graph.csr.indptr,
        graph.csr.indices, x2, *_transpose_args(graph, needs_transpose))
    return out.view(out.size(0), *x.shape[1:])


@_float16_in_float32
def gatv2_scores(graph, src: Tensor, dst: Tensor, att: Tensor,
                 negative_slope: float = 0.2) -> Tensor:
    """GATv2's attention scores: per edge ``(j -> i)`` and head ``h``,
    ``sum_c att[h, c] * leaky_relu(src[j, h, c] + dst[i, h, c], negative_slope)``.

    On the CPU (float32, float64) one kernel computes them, and its backward recomputes the
    per-edge sums where it needs them: no ``[E, H, C]`` tensor forward or backward.
    Elsewhere ``sddmm``, ``leaky_relu`` and a product with ``att``, which is also its
    definition (the pure-torch twin, ``graphloc.ops.reference.gatv2_scores``).

    Args:
        src: ``[N_src, H, C]`` or ``[N_src, H * C]``, the source side per node.
        dst: ``[N, H, C]`` or ``[N, H * C]``, the destination side per node.
        att: ``[H, C]`` or ``[1, H, C]`` (PyG's parameter), the attention vectors.
        negative_slope: the LeakyReLU's slope for negative sums.

    Returns ``[E, H]`` in the graph's edge order.
    """
    _check_graph(graph)
    src, dst, att = _promoted_under_autocast(src, dst, att)
    _check_node_features(graph, src, "src")
    _check_node_features(graph, dst, "dst", side="destination")
    if not isinstance(att, Tensor) or att.dim() not in (2, 3) or att.size(-2) < 1 or (
            att.dim() == 3 and att.size(0) != 1):
        raise ValueError(f"att must be [heads, C] or [1, heads, C], got "
                         f"{list(att.shape) if isinstance(att, Tensor) else type(att).__name__}")
    att = att.reshape(att.shape[-2:])
    width = att.numel()
    for name, t in (("src", src), ("dst", dst)):
        if t.dim() not in (2, 3) or math.prod(t.shape[1:]) != width:
            raise ValueError(f"{name} must be [N, {att.size(0)}, {att.size(1)}] or "
                             f"[N, {width}] for att of shape {list(att.shape)}, got "
                             f"{list(t.shape)}")
    _check_one_dtype({"src": src, "dst": dst, "att": att})
    check_number("gatv2_scores", "negative_slope", negative_slope)
    src2, dst2 = src.reshape(src.size(0), width), dst.reshape(dst.size(0), width)
    if not _has_cpu_kernel(src):
        pre = sddmm(graph, src2, dst2, "add").view(-1, *att.shape)
        return (torch.nn.functional.leaky_relu(pre, negative_slope) * att).sum(-1)
    needs_transpose = torch.is_grad_enabled() and src.requires_grad
    score = kernels.gatv2_scores(graph.csr.indptr, graph.csr.indices, src2.contiguous(),
                                 dst2.contiguous(), att.contiguous(), float(negative_slope),
                                 *_transpose_args(graph, needs_transpose))
    return graph.from_csr_order(score)


def head_dots(x: Tensor, att: Tensor) -> Tensor:
    """Per-head dot products of node rows with attention vectors, the per-node score halves
    of GAT and its kin: ``out[n, a * H + h] = sum_c x[n, h, c] * att[a, h, c]``, PyG's
    ``(x.view(N, H, C) * att[a]).sum(-1)`` for each vector ``a``, side by side.

    On the CPU (float32, float64) one kernel pass over ``x`` forward and one over ``x`` and
    the gradient backward, with no ``[N, A * H, C]`` products. Elsewhere a thin matmul with
    the vectors' block-diagonal matrix (``graphloc.ops.heads``). Either way an infinite or
    NaN channel of one head reaches only that head's dots, as in PyG's product.

    Args:
        x: ``[N, H * C]`` or ``[N, H, C]`` node rows.
        att: ``[A, H, C]`` attention vectors, or ``[H, C]`` for one.

    Returns ``[N, A * H]``, vector a's head h in column ``a * H + h``, in the promoted dtype
    of ``x`` and ``att`` as PyG's product, also under ``torch.autocast`` (scores rounded to
    bfloat16 made GAT's attention weights ten times less accurate).
    """
    for name, t in (("x", x), ("att", att)):
        if not isinstance(t, Tensor) or not t.is_floating_point():
            raise TypeError(f"{name} must be a floating torch.Tensor, got "
                            f"{t.dtype if isinstance(t, Tensor) else type(t).__name__}")
    if att.dim() not in (2, 3) or 0 in att.shape:
        raise ValueError(f"att must be [vectors, heads, C] or [heads, C] with no zero size, "
                         f"got {list(att.shape)}")
    att = att.reshape(-1, *att.shape[-2:])
    H, C = att.shape[1:]
    if x.dim() not in (2, 3) or (x.dim() == 3 and tuple(x.shape[1:]) != (H, C)) or (
            x.dim() == 2 and x.size(1) != H * C):
        raise ValueError(f"x must be [N, {H}, {C}] or [N, {H * C}] for att of shape "
                         f"{list(att.shape)}, got {list(x.shape)}")
    if x.device != att.device:
        raise ValueError(f"x is on {x.device} but att is on {att.device}")
    dtype = torch.promote_types(x.dtype, att.dtype)
    x, att = x.reshape(x.size(0), H * C).to(dtype), att.to(dtype)
    if _has_cpu_kernel(x):
        return kernels.head_dots(x.contiguous(), att.contiguous())
    return composed_head_dots(x, att)


@_float16_in_float32
def gated_sum(graph, key: Tensor, query: Tensor, value: Tensor) -> Tensor:
    """The residual gated graph conv's aggregation (Bresson and Laurent, 2017): per edge
    ``(j -> i)`` and channel ``c``, ``sigmoid(key[i, c] + query[j, c]) * value[j, c]``, summed
    into row ``i``.

    On the CPU (float32, float64) one kernel computes it, and its backward recomputes the
    gates where it needs them: no ``[E, C]`` tensor forward or backward. Elsewhere
    ``sddmm``, ``sigmoid`` and a weighted ``spmm``, which is also its definition (the
    pure-torch twin, ``graphloc.ops.reference.gated_sum``).

    Args:
        key: ``[N, C]``, the destination side per node.
        query: ``[N_src, C]``, the source side of the gates per node.
        value: ``[N_src, C]``, the gated source rows.

    Returns ``[N, C]`` (0 for nodes without incoming edges).
    """
    _check_graph(graph)
    key, query, value = _node_inputs(
        graph, {"key": "destination", "query": "source", "value": "source"}, key, query, value)
    if key.dim() != 2 or query.shape != value.shape or query.shape[1:] != key.shape[1:]:
        raise ValueError(f"key [N, C], query and value [N_src, C] must share C, got "
                         f"{list(key.shape)}, {list(query.shape)} and {list(value.shape)}")
    if not _has_cpu_kernel(key):
        gate = torch.sigmoid(sddmm(graph, query, key, "add"))
        return spmm(graph, value.unsqueeze(-1), gate).squeeze(-1)
    needs_transpose = torch.is_grad_enabled() and (query.requires_grad or value.requires_grad)
    return kernels.gated_sum(graph.csr.indptr, graph.csr.indices, key.contiguous(),
                             query.contiguous(), value.contiguous(),
                             *_transpose_args(graph, needs_transpose))


@_float16_in_float32
def film_sum(graph, gamma: Tensor, beta: Tensor, value: Tensor) -> Tensor:
    """The FiLM conv's aggregation (Brockschmidt, 2020): per edge ``(j -> i)`` and channel
    ``c``, ``relu(gamma[i, c] * value[j, c] + beta[i, c])``, summed into row ``i``.

    On the CPU (float32, float64) one kernel computes it, and its backward recomputes each
    pre-activation where it needs it: no ``[E, C]`` tensor forward or backward. Elsewhere
    the per-edge messages, which is also its definition (the pure-torch twin,
    ``graphloc.ops.reference.film_sum``). Rounding and special values are torch's: the
    product and the sum round apart, relu keeps NaN, and its gradient is exactly 0 where
    the message is <= 0.

    Args:
        gamma: ``[N, C]``, the destination side's scales.
        beta: ``[N, C]``, the destination side's shifts.
        value: ``[N_src, C]``, the source rows.

    Returns ``[N, C]`` (0 for nodes without incoming edges).
    """
    _check_graph(graph)
    gamma, beta, value = _node_inputs(
        graph, {"gamma": "destination", "beta": "destination", "value": "source"}, gamma, beta,
        value)
    if gamma.dim() != 2 or beta.shape != gamma.shape or value.shape[1:] != gamma.shape[1:]:
        raise ValueError(f"gamma and beta [N, C] and value [N_src, C] must share C, got "
                         f"{list(gamma.shape)}, {list(beta.shape)} and {list(value.shape)}")
    csr = graph.csr
    if not _has_cpu_kernel(gamma):
        return _composed_film_sum(csr.indptr, csr.indices, gamma, beta, value)
    needs_transpose = torch.is_grad_enabled() and value.requires_grad
    # (the kernel reads rows at any stride: FiLM's beta and gamma are views of one product)
    return kernels.film_sum(csr.indptr, csr.indices, gamma, beta, value,
                            *_transpose_args(graph, needs_transpose))


@_float16_in_float32
def edge_outer_sum(graph, weight: Tensor, x: Tensor) -> Tensor:
    """The edge-conditioned aggregation: per edge ``(j -> i)``, the outer product of the
    edge's values ``weight[e]`` and the source's features ``x[j]``, summed into row ``i``:
    ``out[i, k, c] = sum_{(j -> i)} weight[e, k] * x[j, c]``.

    With it, a sum of per-edge matrix products ``x_j W(e)`` where ``W(e) = sum_k
    weight[e, k] A_k`` is ``out`` contracted with the ``A_k`` once per node (NNConv's
    regrouping): per edge only ``K + C`` values are read, never a ``[C, C_out]`` matrix.
    On the CPU one kernel computes it and its backward (no ``[E, K, C]`` products);
    elsewhere the per-edge products are summed (the pure-torch twin,
    ``graphloc.ops.reference.edge_outer_sum``).

    Args:
        weight: ``[E]`` or ``[E, K]`` edge values in the graph's edge order.
        x: ``[N_src, C]`` source features.

    Returns ``[N, K, C]`` (``[N, 1, C]`` for ``[E]`` weights; 0 for nodes without incoming
    edges).
    """
    _check_graph(graph)
    weight, x = _promoted_under_autocast(weight, x)
    _check_node_features(graph, x, "x")
    _check_edge_values(graph, weight, x, "weight")
    if x.dim() != 2:
        raise ValueError(f"x must be [N_src, C], got shape {list(x.shape)}")
    values = as_rows(graph.to_csr_order(weight)).contiguous()
    run = kernels.edge_outer_sum if x.device.type == "cpu" and HAS_EXTENSION else \
        _composed_outer_sum
    needs_transpose = torch.is_grad_enabled() and x.requires_grad
    out = run(graph.csr.indptr, graph.csr.indices, values, x.contiguous(),
              *_transpose_args(graph, needs_transpose))
    return out.view(graph.num_nodes, values.size(1), x.size(1))


@_float16_in_float32
def edge_head_sum(graph, weight: Tensor, x: Tensor) -> Tensor:
    """Per edge ``(j -> i)``, the source's ``K`` blocks weighted by the edge's ``K`` values
    and summed, then summed into row ``i``:
    ``out[i, c] = sum_{(j -> i)} sum_k weight[e, k] * x[j, k, c]``.

    The adjoint of ``edge_outer_sum``: NNConv's regrouped sum where its output is the
    narrower side (``x`` the per-node products ``x_j A_k``). On the CPU the two kernels of
    ``edge_outer_sum`` compute it over the transpose, where each source's blocks are read
    once (no ``[N, K, C]`` per-destination output, no per-edge ``[K, C]`` gathers);
    elsewhere a weighted ``spmm`` per block, summed over the blocks.

    Args:
        weight: ``[E]`` or ``[E, K]`` edge values in the graph's edge order.
        x: ``[N_src, K, C]`` source blocks.

    Returns ``[N, C]`` (0 for nodes without incoming edges).
    """
    _check_graph(graph)
    weight, x = _promoted_under_autocast(weight, x)
    _check_node_features(graph, x, "x")
    _check_edge_values(graph, weight, x, "weight")
    blocks = 1 if weight.dim() == 1 else weight.size(1)
    if x.dim() != 3 or x.size(1) != blocks:
        raise ValueError(f"x must be [N_src, K, C] with K = {blocks} (weight's columns), got "
                         f"shape {list(x.shape)}")
    if x.device.type != "cpu" or not HAS_EXTENSION:
        return spmm(graph, x, weight.view(-1, blocks)).sum(1)
    csc = graph.csc
    by_source = permute_rows(as_rows(graph.to_csr_order(weight)), csc.perm,
                             _csc_positions(graph), validated=True)
    return EdgeHeadSum.apply(by_source.contiguous(),
                             x.reshape(x.size(0), blocks * x.size(2)).contiguous(),
                             graph.csr.indptr, csc.indptr, csc.indices, _csc_positions(graph))


def _csc_positions(graph) -> Tensor:
    """Each CSR entry's position in the transpose's order (the inverse of ``csc.perm``)."""
    def build():
        perm = graph.csc.perm
        positions = torch.empty_like(perm)
        positions[perm.long()] = torch.arange(perm.numel(), dtype=perm.dtype,
                                              device=perm.device)
        return positions
    return graph.cached("csc_positions", build)


@_float16_in_float32
def softmax_sum(graph, x: Tensor, t: float | Tensor = 1.0, detach_scores: bool = False) -> Tensor:
    """DeeperGCN's softmax aggregation (Li et al., 2020): per node ``i`` and channel ``k``,
    ``out[i, k] = sum_{(j -> i)} softmax_j(t[k] * x[j, k]) * x[j, k]``, the softmax over
    ``i``'s incoming edges (a duplicate edge counts twice).

    On the CPU (float32, float64, bfloat16) one kernel computes it without the ``[E, K]``
    neighbour rows, scores or weights, forward or backward. Elsewhere the scores
    ``t * x[j]`` are gathered and ``segment_attention`` runs with one head per channel,
    which is also its definition.

    Args:
        x: ``[N_src, K]`` source features.
        t: the temperature: a number, or a tensor of 1 or ``K`` values (one per channel) of
            ``x``'s dtype; differentiable.
        detach_scores: no gradient through the scores ``t * x[j]`` (DeeperGCN's
            ``semi_grad``): ``x``'s gradient comes only through the values, ``t`` gets none.

    Returns ``[N, K]`` (0 for nodes without incoming edges; a node whose scores are all
    -inf gets weights 0, so 0 unless a value is infinite; NaN or a +inf score makes the
    node's channel NaN, as ``torch.softmax``).
    """
    _check_graph(graph)
    check_flags("softmax_sum", detach_scores=detach_scores)
    x, t = _promoted_under_autocast(x, t)
    _check_node_features(graph, x, "x")
    if x.dim() != 2:
        raise ValueError(f"x must be [N, K], got shape {list(x.shape)}")
    t = _temperatures(t, x)
    csr = graph.csr
    if x.device.type != "cpu" or not HAS_EXTENSION:
        scores = gather(x, graph.edge_index[0]) * t
        return segment_attention(graph, scores.detach() if detach_scores else scores,
                                 x.unsqueeze(-1)).squeeze(-1)
    needs_transpose = torch.is_grad_enabled() and (x.requires_grad or t.requires_grad)
    return kernels.softmax_sum(x.contiguous(), t, csr.indptr, csr.indices, bool(detach_scores),
                               *_transpose_args(graph, needs_transpose))[0]


def _temperatures(t, x: Tensor) -> Tensor:
    """softmax_sum's ``t`` as ``[K]`` of x's dtype (a number or 1 value: each channel's)."""
    K = x.size(1)
    if isinstance(t, bool) or not isinstance(t, (int, float, Tensor)):
        raise TypeError(f"t must be a number or a tensor, got {type(t).__name__}")
    if not isinstance(t, Tensor):  # (a tensor's NaN propagates, as torch's: it may be learnt)
        check_number("softmax_sum", "t", t)
        return torch.full((K,), float(t), dtype=x.dtype, device=x.device)
    if t.numel() not in (1, K):
        raise ValueError(f"t has {t.numel()} values ({list(t.shape)}) but x has {K} channels: "
                         f"t needs 1 or {K}")
    if t.dtype != x.dtype:
        raise TypeError(f"t is {t.dtype} but x is {x.dtype}")
    if t.device != x.device:
        raise ValueError(f"t is on {t.device} but x is on {x.device}")
    return t.reshape(-1).expand(K).contiguous()


def segment_reduce(src: Tensor, indptr: Tensor, reduce: str = "sum") -> Tensor:
    """Reduces consecutive row blocks of ``src``: ``out[i] = reduce(src[indptr[i]:indptr[i+1]])``.

    ``indptr`` must start at 0, be non-decreasing and end at ``src.size(0)``.
    """
    _check_indptr(indptr, src)
    out, _ = kernels.segment_reduce(as_rows(src), indptr.contiguous(), canonical_reduce(reduce))
    return out.view(indptr.numel() - 1, *src.shape[1:])


def coo_to_csr(index: Tensor, num_rows: int, validated: bool = False) -> tuple[Tensor, Tensor]:
    """Stable counting sort of ``index`` (values in ``[0, num_rows)``) into ``(indptr, perm)``:
    ``index[perm]`` is sorted and row ``r`` owns ``perm[indptr[r]:indptr[r+1]]``.
    ``validated=True`` skips the Python range check for a caller that has made it already
    (``Graph``); the kernel still checks every index it reads."""
    check_int(num_rows, "num_rows", 0)
    if not validated and not torch.compiler.is_compiling():  # traced: the kernel checks
        check_index(index, num_rows, "index")
    return kernels.coo_to_csr(index, num_rows)
