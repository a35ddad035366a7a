"""Sum and mean spmm through torch.sparse: cuSPARSE on CUDA, MKL on the CPU.

On an H200 (benchmarks/RESULTS.md, 2026-12-04) cuSPARSE's CSR x dense product was 1.1x
to 1.3x faster than graphloc's CUDA sum kernel at 64 channels on both benchmark graphs
(2.1x before that kernel's rewrite), so ``spmm`` sends sum and mean there on CUDA until
graphloc's kernel wins (``set_spmm_backend``), at twice the kernel's peak memory. The CPU
keeps graphloc's kernels, which are faster there; the library path runs on the CPU too, so
it is tested without a GPU.

Supported: reduce ``sum`` / ``mean``, float32 / float64 features, no edge weight or one
weight per edge. The forward is ``A @ x`` with ``A``'s values the edge weights (divided by
the row's degree for mean); the backward is ``A^T @ grad`` over the graph's cached
transpose, and the weight gradient the per-edge ``<x_j, grad_i>`` (graphloc's sddmm).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from graphloc.ops._library import kernels

BACKENDS = ("auto", "graphloc", "sparse")
_backend = "auto"
_DTYPES = (torch.float32, torch.float64)


def set_spmm_backend(backend: str) -> str:
    """Chooses where ``ops.spmm`` runs sum and mean; returns the previous choice.

    ``"auto"`` (default): torch.sparse (cuSPARSE) for supported calls on CUDA, graphloc's
    kernels otherwise. ``"graphloc"``: always graphloc's kernels. ``"sparse"``: torch.sparse
    for supported calls on any device (CPU: MKL), for tests and benchmarks.
    """
    global _backend
    if backend not in BACKENDS:
        raise ValueError(f"spmm backend must be one of {BACKENDS}, got {backend!r}")
    previous, _backend = _backend, backend
    return previous


def uses_sparse_library(x: Tensor, value: Tensor | None, reduce: str) -> bool:
    """Whether spmm of rows ``x [N, K]`` goes to torch.sparse under the current backend."""
    if _backend == "graphloc" or torch.compiler.is_compiling():  # sparse tensors do not trace
        return False
    if _backend == "auto" and x.device.type != "cuda":
        return False
    one_weight = value is None or value.dim() == 1 or value.size(1) == 1
    return reduce in ("sum", "mean") and x.dtype in _DTYPES and one_weight


def library_spmm(graph, x: Tensor, value: Tensor | None, reduce: str) -> Tensor:
    """``spmm`` of rows ``x [N_src, K]`` with ``value`` (None or CSR-ordered ``[E]`` /
    ``[E, 1]``) through torch.sparse."""
    flat = None if value is None else value.reshape(-1)
    return _LibrarySpmm.apply(x, flat, graph, reduce)


def _edge_scale(graph, reduce: str, dtype: torch.dtype) -> Tensor | None:
    """Per CSR edge, 1 / its row's degree for mean (None for sum), cached on the graph."""
    if reduce != "mean":
        return None

    def build():
        indptr = graph.csr.indptr
        inverse = (indptr[1:] - indptr[:-1]).clamp(min=1).to(dtype).reciprocal()
        return kernels.gather_csr(inverse.view(-1, 1), indptr, graph.num_edges).view(-1)
    return graph.cached(("spmm_mean_scale", dtype), build)


def _csr_values(graph, value: Tensor | None, scale: Tensor | None, x: Tensor) -> Tensor:
    if value is None:
        return scale if scale is not None else x.new_ones(graph.num_edges)
    return value if scale is None else value * scale


def _matrix(indptr: Tensor, indices: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    with warnings.catch_warnings():  # torch's "CSR support is in beta" notice, at every first use
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(indptr, indices, values, shape, check_invariants=False)


def _transpose_product(graph, values: Tensor, grad: Tensor, num_src: int) -> Tensor:
    """``A^T @ grad``. Under create_graph (double backward) graphloc's differentiable
    kernel runs instead, so the product stays differentiable in ``grad`` and ``values``."""
    csc = graph.csc
    transposed = graph.transposed_values(values)
    if transposed is None:
        transposed = values.index_select(0, csc.perm.long())
    if torch.is_grad_enabled():
        return kernels.spmm(csc.indptr, csc.indices, transposed, grad, "sum")[0]
    matrix = _matrix(csc.indptr, csc.indices, transposed, (num_src, graph.num_nodes))
    return torch.sparse.mm(matrix, grad)


class _LibrarySpmm(torch.autograd.Function):
    generate_vmap_rule = True  # setup_context style: torch.func takes it

    @staticmethod
    def forward(x: Tensor, value: Tensor | None, graph, reduce: str) -> Tensor:
        values = _csr_values(graph, value, _edge_scale(graph, reduce, x.dtype), x)
        csr = graph.csr
        return torch.sparse.mm(_matrix(csr.indptr, csr.indices, values,
                                       (graph.num_nodes, x.size(0))), x)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, value, graph, reduce = inputs
        ctx.graph, ctx.reduce = graph, reduce
        ctx.save_for_backward(x, value)

    @staticmethod
    def backward(ctx, grad: Tensor):
        # the edge values are rebuilt here, so that under create_graph they stay linked to
        # the weights (forward runs without recording)
        x, value = ctx.saved_tensors
        graph, grad = ctx.graph, grad.contiguous()
        scale = _edge_scale(graph, ctx.reduce, x.dtype)
        grad_x = grad_value = None
        if ctx.needs_input_grad[0]:
            values = _csr_values(graph, value, scale, x)
            grad_x = _transpose_product(graph, values, grad, x.size(0))
        if ctx.needs_input_grad[1]:
            csr = graph.csr
            grad_value = kernels.sddmm(csr.indptr, csr.indices, x, grad, "dot", 1).view(-1)
            if scale is not None:
                grad_value = grad_value * scale
        return grad_x, grad_value, None, None
