"""Chebyshev spectral graph convolution."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.graph import Graph, degree_power
from graphloc.nn.conv._base import ConvModule, explain_mask, loop_factors
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import (
    check_input,
    check_sizes,
    glorot_linear,
    reset_glorot,
)


def scaled_laplacian(graph: Graph, normalization: str | None, edge_weight: Tensor | None,
                     lambda_max: float | Tensor | None, dtype: torch.dtype,
                     batch: Tensor | None = None,
                     degree_at_destination: bool = False,
                     edge_mask: Tensor | None = None) -> tuple[Graph, Tensor]:
    """:math:`\\hat{L} = 2L / \\lambda_{max} - I` on the loop-free graph plus one loop per
    node, as PyG's ``get_laplacian`` and ``ChebConv.__norm__`` build it (edges sorted by
    destination, the weights in that order). ``lambda_max`` is one value, or one per graph
    of a mini-batch whose node assignment is ``batch``; None takes PyG's default, twice the
    largest weight of L (2 for "sym" and "rw" with non-negative weights).

    Degrees are summed at the sources, as PyG's are at ``edge_index[0]``; with
    ``flow="target_to_source"`` the graph here is the reversed ``edge_index``, so PyG's
    ``edge_index[0]`` are its destinations (``degree_at_destination``). An explainer's
    ``edge_mask`` (one factor per edge of ``graph``) scales the entries of the non-loop
    edges once L is built, the diagonal keeping factor 1, as PyG's explain mode does."""
    keep = graph.edge_index[0] != graph.edge_index[1]
    edge_index = graph.edge_index[:, keep]
    n = graph.num_nodes
    w = (torch.ones(edge_index.size(1), dtype=dtype, device=graph.device)
         if edge_weight is None else edge_weight[keep].to(dtype))
    src, dst = edge_index
    at = dst if degree_at_destination else src
    deg = ops.scatter(w, at, 0, dim_size=n, reduce="sum")
    if normalization is None:
        off, diag = -w, deg
    elif normalization == "sym":
        inv_sqrt = degree_power(deg, -0.5)
        off, diag = -inv_sqrt[src] * w * inv_sqrt[dst], torch.ones_like(deg)
    else:
        inv = degree_power(deg, -1.0)
        off, diag = -inv[at] * w, torch.ones_like(deg)
    weight = torch.cat([off, diag])
    loops = torch.arange(n, device=graph.device).expand(2, -1)
    if lambda_max is None:  # PyG's default (a graph without nodes scales nothing)
        lambda_max = 2.0 * weight.max() if weight.numel() else 2.0
        if normalization is None and not bool(lambda_max > 0):
            # PyG divides by it anyway: every weight NaN (0 / 0) or inf
            raise ValueError(f"ChebConv: the Laplacian D - A has no positive weight (largest "
                             f"{float(lambda_max) / 2}), so PyG's default lambda_max = 2 "
                             f"max(L) is {float(lambda_max)}; pass lambda_max")
    if isinstance(lambda_max, Tensor) and lambda_max.numel() > 1:
        lambda_max = lambda_max.to(dtype)[batch[torch.cat([src, loops[0]])]]
    weight = 2.0 * weight / lambda_max
    weight = weight.masked_fill(torch.isinf(weight), 0.0)
    weight[edge_index.size(1):] -= 1.0
    if edge_mask is not None:
        weight = weight * torch.cat([edge_mask[keep], loop_factors(edge_mask, n)])
    # sorted by destination: each of the K - 1 products reads the weights in place instead
    # of permuting them into CSR order
    edge_index = torch.cat([edge_index, loops], dim=1)
    order = torch.sort(edge_index[1], stable=True).indices
    return Graph._derived(edge_index[:, order], n, dst_sorted=True), weight[order]


class ChebConv(ConvModule):
    r"""The Chebyshev spectral convolution of `Defferrard et al., "Convolutional Neural
    Networks on Graphs with Fast Localized Spectral Filtering" (NeurIPS 2016)
    <https://arxiv.org/abs/1606.09375>`_:

    .. math::
        \mathbf{X}' = \sum_{k=0}^{K-1} \mathbf{Z}^{(k)} \mathbf{\Theta}^{(k)} + \mathbf{b},
        \quad \mathbf{Z}^{(0)} = \mathbf{X}, \;
        \mathbf{Z}^{(1)} = \hat{\mathbf{L}} \mathbf{X}, \;
        \mathbf{Z}^{(k)} = 2 \hat{\mathbf{L}} \mathbf{Z}^{(k-1)} - \mathbf{Z}^{(k-2)},

    with :math:`\hat{\mathbf{L}} = 2\mathbf{L}/\lambda_{\max} - \mathbf{I}`. A drop-in for
    PyG's ``ChebConv`` (parameters ``lins.k.weight`` and ``bias``); each step is one fused
    sparse product, and the scaled Laplacian is cached on a ``Graph`` input.

    Args:
        in_channels (int): input feature width.
        out_channels (int): output feature width.
        K (int): Chebyshev filter size (hops = K - 1), at least 1.
        normalization (str or None, default "sym"): the Laplacian: None
            (:math:`\mathbf{D} - \mathbf{A}`), "sym" (:math:`\mathbf{I} -
            \mathbf{D}^{-1/2}\mathbf{A}\mathbf{D}^{-1/2}`) or "rw"
            (:math:`\mathbf{I} - \mathbf{D}^{-1}\mathbf{A}`); degrees at the source, as PyG.
        bias (bool, default True): learn the additive bias.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, in_channels]`` (or a static batch ``[B, N, in_channels]``), the graph
        (a ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` whose values are
        the weights), optional ``edge_weight [E]``, ``batch [N]`` (the graph of each node
        in a mini-batch) and ``lambda_max``: a number, or one per graph with ``batch``
        (default, as PyG: twice the largest weight of L, 2 for "sym" and "rw" with
        non-negative weights). PyG's argument order. output: ``[N, out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, K: int,
                 normalization: str | None = "sym", bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("ChebConv", flow)
        check_flags("ChebConv", bias=bias)
        check_sizes("ChebConv", lazy=True, in_channels=in_channels, out_channels=out_channels, K=K)
        if K < 1:
            raise ValueError(f"ChebConv needs K >= 1, got {K}")
        if normalization not in (None, "sym", "rw"):
            raise ValueError(f"normalization must be None, 'sym' or 'rw', got {normalization!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.normalization = normalization
        self.lins = torch.nn.ModuleList([glorot_linear(in_channels, out_channels)
                                         for _ in range(K)])
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return len(self.lins) - 1  # (K terms: up to the Laplacian's (K - 1)-th power)

    def reset_parameters(self) -> None:
        for lin in self.lins:
            reset_glorot(lin)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None,
                batch: Tensor | None = None, lambda_max: float | Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x, graph = inputs.x_src, inputs.graph
        check_input(self, x, self.in_channels)
        graph._require_one_node_set("ChebConv (a Laplacian of one node set)")
        edge_weight = weights_from(self, inputs, edge_weight)
        lambda_max = _checked_lambda_max(lambda_max, batch, graph.num_nodes, inputs.batch)
        mask = explain_mask(self, inputs)
        out = self.lins[0](x)  # accumulated in place: no backward reads it
        if len(self.lins) > 1:  # K = 1 reads no Laplacian (which may be undefined: below)
            out = self._add_laplacian_terms(out, x, graph, edge_weight, lambda_max, batch, mask)
        return inputs.node_output(out if self.bias is None else out.add_(self.bias))

    def _add_laplacian_terms(self, out: Tensor, x: Tensor, graph: Graph,
                             edge_weight: Tensor | None, lambda_max, batch,
                             mask: Tensor | None) -> Tensor:
        """``out`` plus the terms k = 1 .. K-1 of the Chebyshev sum (the Laplacian's entries
        scaled by an explainer's ``mask`` where one is set)."""
        def build():
            lap, weight = scaled_laplacian(graph, self.normalization, edge_weight, lambda_max,
                                           x.dtype, batch, self.flow == "target_to_source",
                                           mask)
            # 2 L x as one product with doubled weights: bit for bit 2 * (L x) (doubling is
            # exact), without a pass over [N, F] forward and backward
            return lap, weight, weight * 2.0
        def build_kept():  # reused at every call: kept in the transpose's order too
            lap, weight, doubled = build()
            return lap, lap.keep_transposed(weight), lap.keep_transposed(doubled)
        if edge_weight is None and mask is None and not isinstance(lambda_max, Tensor):
            lap, weight, doubled = graph.cached(
                ("cheb", self.normalization, lambda_max, x.dtype, self.flow), build_kept)
        else:
            lap, weight, doubled = build()
        tx0, tx1 = x, ops.spmm(lap, x, weight)
        out.add_(self.lins[1](tx1))
        for lin in self.lins[2:]:
            tx0, tx1 = tx1, ops.spmm(lap, tx1, doubled).sub_(tx0)
            out.add_(lin(tx1))
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"K={len(self.lins)}, normalization={self.normalization})")


def _checked_lambda_max(lambda_max, batch, num_nodes: int, static):
    """A positive finite float, 0-d tensor (as a float) or one value per graph of
    ``batch``; per-graph values need ``batch``."""
    if lambda_max is None:
        return None
    if isinstance(lambda_max, Tensor) and lambda_max.numel() == 1:
        lambda_max = float(lambda_max)
    values = lambda_max if isinstance(lambda_max, Tensor) else torch.tensor([lambda_max])
    if isinstance(lambda_max, bool) or not isinstance(lambda_max, (int, float, Tensor)) or \
            values.numel() == 0 or not bool(torch.isfinite(values).all() & (values > 0).all()):
        raise ValueError(f"ChebConv: lambda_max must be a positive finite number (or one per "
                         f"graph), got {lambda_max!r}")
    if isinstance(lambda_max, Tensor):
        if batch is None or static is not None:
            raise ValueError("ChebConv: one lambda_max per graph needs the batch vector "
                             "(and a [N, F] input)")
        if not isinstance(batch, Tensor) or batch.shape != (num_nodes,) or \
                batch.is_floating_point():
            raise ValueError(f"ChebConv: batch must be an integer tensor of shape "
                             f"[{num_nodes}], got {batch!r}")
        if int(batch.min()) < 0 or int(batch.max()) >= lambda_max.numel():
            raise ValueError(f"ChebConv: batch holds graph ids {int(batch.min())} .. "
                             f"{int(batch.max())} but lambda_max has {lambda_max.numel()} "
                             "values")
    return lambda_max
