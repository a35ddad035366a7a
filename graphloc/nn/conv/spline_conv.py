"""SplineCNN's convolution: each edge's message weighted by a continuous B-spline kernel
of its pseudo-coordinates."""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from graphloc import ops
from graphloc.checks import check_choice, check_flags, check_int
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs, required_edge_feature_rows
from graphloc.nn.conv._utils import (
    PYG_REDUCTIONS,
    check_sizes,
    checked_features,
    split_widths,
    uniform_linear,
)
from graphloc.ops.reference import csr_rows
from graphloc.ops.spline import (
    check_open_spans,
    per_dimension,
    spline_basis,
    spline_weighting,
)

# entries of a chunk's per-weight sums [rows, K, C_in] (float32: 32 MiB)
_CHUNK_SUMS = 1 << 23


class SplineConv(ConvModule):
    r"""The spline-based convolution of `Fey et al., "SplineCNN: Fast Geometric Deep
    Learning with Continuous B-Spline Kernels" (CVPR 2018)
    <https://arxiv.org/abs/1711.08920>`_:

    .. math::
        \mathbf{x}'_i = \frac{1}{|\mathcal{N}(i)|} \sum_{j \in \mathcal{N}(i)}
        \sum_{s} B_s(\mathbf{u}_{ji}) \, \mathbf{x}_j \mathbf{W}_{k_s(\mathbf{u}_{ji})}
        + \mathbf{x}_i \mathbf{W}_{root} + \mathbf{b},

    :math:`\mathbf{u}_{ji} \in [0, 1]^D` the edge's pseudo-coordinates (``edge_attr``),
    :math:`B_s` the ``(degree + 1)^D`` products of B-spline pieces that are non-zero there
    and :math:`k_s` the weight matrices they pick, of :math:`\prod_d` ``kernel_size``.

    A drop-in for PyG's ``SplineConv`` (same arguments, parameter names ``weight``,
    ``lin``, ``bias``, buffers ``kernel_size`` and ``is_open_spline``, PyG's initial draws,
    and outputs), without pyg-lib, which PyG 2.8 needs even to build one: the basis is
    :func:`graphloc.ops.spline_basis`, the kernels' steps in torch's ops. The sum over
    edges and basis terms is regrouped: per chunk of destinations, one sparse product over
    their edges' ``(degree + 1)^D`` weighted terms gives their sums per weight
    ``[rows, K, C_in]``, and one dense product with the stacked weights ``[K C_in, C_out]``
    their outputs. The same numbers to rounding, no ``[E, C_out]`` messages (PyG's kernel
    forms them per edge); each chunk is recomputed in the backward rather than kept, so the
    sums never hold more than 2^23 entries (32 MiB in float32). Max and min aggregations
    form the messages per edge, as PyG's. Pseudo-coordinates that are negative, NaN or infinite
    (PyG's kernels index out of range with them) raise a ``ValueError``; values above 1
    wrap as in PyG's.

    Args:
        in_channels (int or (int, int)): input width (-1: taken from the first call), or
            the source and destination widths.
        out_channels (int): output width.
        dim (int): pseudo-coordinate dimensions ``D``.
        kernel_size (int or list): weights per dimension.
        is_open_spline (bool or list, default True): open or closed (periodic) splines.
        degree (int, default 1): 1, 2 or 3.
        aggr (str, default "mean"): "mean", "add", "sum", "max" or "min".
        root_weight (bool, default True): add ``lin(x_i)``.
        bias (bool, default True).
        flow (str, default "source_to_target").

    Shapes:
        input: ``x [N, F]`` or a pair, ``edge_index`` (or a Graph or sparse adjacency),
        ``edge_attr [E, D]``. output: ``[N_dst, out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, dim: int,
                 kernel_size: int | list, is_open_spline: bool | list = True,
                 degree: int = 1, aggr: str = "mean", root_weight: bool = True,
                 bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("SplineConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels, dim=dim)
        check_choice("SplineConv", "aggr", aggr, tuple(PYG_REDUCTIONS))
        check_flags("SplineConv", root_weight=root_weight, bias=bias)
        if degree not in (1, 2, 3) or isinstance(degree, bool):
            raise ValueError(f"SplineConv: degree must be 1, 2 or 3, got {degree!r}")
        self.in_channels, self.out_channels, self.dim = in_channels, out_channels, dim
        self.degree, self.aggr, self.root_weight = degree, aggr, root_weight
        self.flow = check_flow("SplineConv", flow)
        sizes = per_dimension("SplineConv", "kernel_size", kernel_size, dim)
        opens = per_dimension("SplineConv", "is_open_spline", is_open_spline, dim)
        for size in sizes:
            check_int(size, "SplineConv: kernel_size", 1)
        check_flags("SplineConv", **{f"is_open_spline[{d}]": o for d, o in enumerate(opens)})
        check_open_spans("SplineConv", sizes, [bool(o) for o in opens], degree)
        self.K = math.prod(sizes)
        self.register_buffer("kernel_size", torch.tensor(sizes, dtype=torch.long))
        self.register_buffer("is_open_spline", torch.tensor(opens, dtype=torch.uint8))
        src_width, dst_width = split_widths(in_channels)
        self.weight = torch.nn.Parameter(torch.empty(self.K, src_width, out_channels)) \
            if src_width > 0 else torch.nn.parameter.UninitializedParameter()
        if root_weight:
            self.lin = uniform_linear(dst_width, out_channels)
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        if not isinstance(self.weight, torch.nn.parameter.UninitializedParameter):
            self._draw_weight()
        if self.root_weight:
            self.lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def _draw_weight(self) -> None:
        bound = 1.0 / math.sqrt(self.weight.size(0) * self.weight.size(1))
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_attr: Tensor | None = None, size=None) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        if isinstance(self.weight, torch.nn.parameter.UninitializedParameter):
            self._materialize(inputs.x_src)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        if x_src.size(1) != self.weight.size(1):
            raise ValueError(f"SplineConv expects x of shape [N, {self.weight.size(1)}], got "
                             f"{list(x_src.shape)}")
        pseudo = required_edge_feature_rows(self, inputs, edge_attr, self.dim, "dim",
                                            "pseudo-coordinates")
        basis, weight_index = spline_basis(pseudo.to(x_src.dtype), self.kernel_size,
                                           self.is_open_spline, self.degree)
        mask = explain_mask(self, inputs)
        if mask is not None:  # a message is linear in its edge's basis values
            basis = basis * mask.to(basis.dtype).unsqueeze(-1)
        graph = inputs.graph
        if PYG_REDUCTIONS[self.aggr] in ("max", "min"):
            src, dst = graph.edge_index
            messages = spline_weighting(x_src.index_select(0, src), self.weight, basis,
                                        weight_index)
            out = ops.scatter(messages, dst, 0, dim_size=graph.num_nodes,
                              reduce=PYG_REDUCTIONS[self.aggr])
        else:
            out = self._weighted_sum(graph, x_src, basis, weight_index)
        if x_dst is not None and self.root_weight:
            out = out + self.lin(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    def _weighted_sum(self, graph: Graph, x: Tensor, basis: Tensor,
                      weight_index: Tensor) -> Tensor:
        """The sum (or mean) over edges and basis terms of ``B x_j W_k``: per chunk of
        destinations, their sums per weight ``[rows, K, C_in]`` by one sparse product over
        their edges' terms, then one dense product with the stacked weights. Each chunk is
        recomputed in the backward instead of kept, so the sums never take more than
        ``_CHUNK_SUMS`` entries (nor its terms' graph, rebuilt there too)."""
        indptr = graph.csr.indptr
        bounds = indptr.tolist()
        value = graph.to_csr_order(basis)
        if PYG_REDUCTIONS[self.aggr] == "mean":  # (the mean over edges, not terms)
            degree = graph.in_degree().clamp(min=1).to(value.dtype)
            value = value / degree.index_select(0, csr_rows(indptr)).unsqueeze(1)
        k, src = graph.to_csr_order(weight_index), graph.csr.indices.long()
        rows_per_chunk = max(1, _CHUNK_SUMS // (self.K * x.size(1)))
        chunks = []
        for first in range(0, graph.num_nodes, rows_per_chunk):
            last = min(graph.num_nodes, first + rows_per_chunk)
            edges = slice(bounds[first], bounds[last])
            chunks.append(checkpoint(self._chunk_product, x, value[edges], src[edges],
                                     k[edges], indptr[first:last + 1], use_reentrant=False))
        if not chunks:
            return x.new_zeros(0, self.out_channels)
        return torch.cat(chunks)

    def _chunk_terms(self, indptr: Tensor, src: Tensor, k: Tensor, sources: int) -> Graph:
        """The terms of a chunk's edges (``indptr``: the chunk's rows of the CSR) as a graph
        from the ``sources`` to the chunk's ``[rows K, C_in]`` sums: the term (edge j -> the
        chunk's row i, weight k) goes to row ``i K + k``."""
        terms = k.size(1)
        dst = (csr_rows(indptr).unsqueeze(1) * self.K + k).reshape(-1)
        edges = torch.stack([src.repeat_interleave(terms), dst])
        return Graph.bipartite(edges, (sources, (indptr.numel() - 1) * self.K))

    def _chunk_product(self, x: Tensor, value: Tensor, src: Tensor, k: Tensor,
                       indptr: Tensor) -> Tensor:
        """A chunk's outputs. Its terms' graph is built here, inside the checkpoint, so the
        backward rebuilds it rather than every chunk's being kept."""
        rows = indptr.numel() - 1
        sums = ops.spmm(self._chunk_terms(indptr, src, k, x.size(0)), x, value.reshape(-1))
        width = self.K * self.weight.size(1)
        return sums.view(rows, width) @ self.weight.reshape(width, self.weight.size(2))

    @torch.no_grad()
    def _materialize(self, x_src: Tensor) -> None:
        self.weight.materialize((self.K, x_src.size(-1), self.out_channels))
        self._draw_weight()

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"dim={self.dim})")
