"""Graph transformer convolution (multi-head dot-product attention over each neighbourhood)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, attention_hooked, explain_mask, report_attention
from graphloc.nn.conv._inputs import (
    check_edge_rows,
    check_flow,
    edge_features_from,
    mapped_edge_features,
    read_inputs,
    refuse_edge_attr_without_edge_dim,
)
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_sizes,
    checked_features,
    linear,
    split_widths,
)


class TransformerConv(ConvModule):
    r"""The graph transformer operator of `Shi et al., "Masked Label Prediction: Unified
    Message Passing Model for Semi-Supervised Classification" (IJCAI 2021)
    <https://arxiv.org/abs/2009.03509>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \sum_{j \in \mathcal{N}(i)}
        \alpha_{ij} (\mathbf{W}_2 \mathbf{x}_j + \mathbf{W}_6 \mathbf{e}_{ij}), \qquad
        \alpha_{ij} = \mathrm{softmax}_j\Big(\frac{(\mathbf{W}_3 \mathbf{x}_i)^\top
        (\mathbf{W}_4 \mathbf{x}_j + \mathbf{W}_6 \mathbf{e}_{ij})}{\sqrt{C}}\Big)

    per head; with ``beta`` the root term is gated, :math:`\beta_i \mathbf{r}_i + (1 -
    \beta_i) \mathbf{m}_i` with :math:`\beta_i = \sigma(\mathbf{w}_5^\top [\mathbf{m}_i \Vert
    \mathbf{r}_i \Vert \mathbf{m}_i - \mathbf{r}_i])`. A drop-in for PyG's
    ``TransformerConv`` (same arguments, parameter names, outputs and attention weights; no
    self-loops are added). Without edge features and attention dropout the softmax and the
    weighted sum run fused per node (``ops.segment_attention``): no ``[E, H, C]`` keys,
    values or messages.

    Args:
        in_channels (int or (int, int)): input feature width, or the source (key, value)
            and destination (query, skip) widths of a bipartite input.
        out_channels (int): width per head, C.
        heads (int, default 1): number of heads, H.
        concat (bool, default True): concatenate heads (``H * C`` outputs), else average.
        beta (bool, default False): gate the root term (needs ``root_weight``).
        dropout (float, default 0.0): dropout on the attention weights in training.
        edge_dim (int, optional): edge feature width; edge features then enter keys and
            values.
        bias (bool, default True): biases of the query, key, value and root projections.
        root_weight (bool, default True): add the projected root features.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, in_channels]``, a static batch ``[B, N, in_channels]``, or a pair
        ``(x_src, x_dst)`` (keys and values from ``x_src``, queries, skip and output rows
        from ``x_dst``), the graph (a ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse``
        ``adj_t``), optional ``edge_attr [E, edge_dim]``. output: ``[N, H * C]`` (``[N, C]``
        if not concat); with ``return_attention_weights`` given (PyG's rule: even False)
        also ``(edge_index, alpha [E, H])``, or for a sparse ``adj_t`` the weights as a
        sparse tensor of its layout. ``in_channels=-1`` infers the widths at the first call.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    # PyG keeps the attention weights there between calls; graphloc never stores them.
    _alpha = None

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1,
                 concat: bool = True, beta: bool = False, dropout: float = 0.0,
                 edge_dim: int | None = None, bias: bool = True, root_weight: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("TransformerConv", flow)
        check_flags("TransformerConv", concat=concat, beta=beta, bias=bias, root_weight=root_weight)
        check_sizes("TransformerConv", lazy=True, pair=True, optional=("edge_dim",),
                    in_channels=in_channels, out_channels=out_channels, heads=heads,
                    edge_dim=edge_dim)
        check_dropouts("TransformerConv", upto_one=True, dropout=dropout)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.beta, self.root_weight = concat, beta and root_weight, root_weight
        self.dropout, self.edge_dim = dropout, edge_dim
        H, C = heads, out_channels
        total = H * C if concat else C
        src_width, dst_width = split_widths(in_channels)
        self.lin_key = linear(src_width, H * C, bias=bias)
        self.lin_query = linear(dst_width, H * C, bias=bias)
        self.lin_value = linear(src_width, H * C, bias=bias)
        self.lin_edge = torch.nn.Linear(edge_dim, H * C, bias=False) \
            if edge_dim is not None else None
        # Built even without root_weight (unused then), as PyG does: state dicts load both ways.
        self.lin_skip = linear(dst_width, total, bias=bias)
        self.lin_beta = torch.nn.Linear(3 * total, 1, bias=False) if self.beta else None
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_edge,
                    self.lin_skip, self.lin_beta):
            if lin is not None:
                lin.reset_parameters()

    def _edge_features(self, graph, edge_attr: Tensor | None) -> Tensor | None:
        if self.lin_edge is None:
            return None
        if edge_attr is None:
            raise ValueError("TransformerConv was built with edge_dim but got no edge_attr")
        edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        check_edge_rows(self, "edge_attr", edge_attr, graph.num_edges)
        return mapped_edge_features(self, self.lin_edge, edge_attr) \
            .view(-1, self.heads, self.out_channels)

    def _attend(self, graph, query: Tensor, key: Tensor, value: Tensor, edge: Tensor | None,
                need_weights: bool, mask: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """The attention over ``graph`` (``out``, and where asked for the weights ``[E, H]``
        in its edge order), run on its edges in CSR order: the scores go from sddmm to the
        softmax without two permutations each way. An explainer's ``mask`` scales each
        edge's weighted message."""
        ordered = graph.in_csr_order()
        if edge is not None:
            edge = graph.to_csr_order(edge)
        if mask is not None:
            mask = graph.to_csr_order(mask).unsqueeze(-1)
        out, alpha = self._attend_in_order(ordered, query, key, value, edge, need_weights,
                                           mask)
        return out, graph.from_csr_order(alpha) if need_weights else None

    def _attend_in_order(self, graph, query, key, value, edge, need_weights, mask):
        score = ops.sddmm(graph, key, query, "dot")  # [E, H], query pre-scaled by 1/sqrt(C)
        if edge is None and mask is None and not (self.dropout > 0 and self.training):
            out = ops.segment_attention(graph, score, value, return_weights=need_weights)
            return out if need_weights else (out, None)
        dst = graph.edge_index[1]
        if edge is not None:
            score = score + (query[dst] * edge).sum(-1)
        alpha = ops.segment_softmax(graph, score)
        dropped = ops.dropout(alpha, p=self.dropout, training=self.training)
        if mask is not None:
            dropped = dropped * mask
        out = ops.spmm(graph, value, dropped)
        if edge is not None:
            out = out + ops.scatter(dropped.unsqueeze(-1) * edge, dst, 0,
                                    dim_size=graph.num_nodes, reduce="sum")
        return out, alpha

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index,
                edge_attr: Tensor | None = None, return_attention_weights: bool | None = None):
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        graph = inputs.graph
        if x_dst is None:
            raise ValueError("TransformerConv needs destination features (the queries): got "
                             "x = (x_src, None)")
        refuse_edge_attr_without_edge_dim(self, edge_attr)
        edge_attr = edge_features_from(self, inputs, edge_attr) if self.lin_edge is not None \
            else None
        return_attention_weights = return_attention_weights is not None
        mask, reported = explain_mask(self, inputs), attention_hooked(self)
        H, C = self.heads, self.out_channels
        query = (self.lin_query(x_dst) / math.sqrt(C)).view(-1, H, C)
        key = self.lin_key(x_src).view(-1, H, C)
        value = self.lin_value(x_src).view(-1, H, C)
        out, alpha = self._attend(graph, query, key, value,
                                  self._edge_features(graph, edge_attr),
                                  return_attention_weights or reported, mask)
        out = out.reshape(-1, H * C) if self.concat else out.mean(dim=1)
        if self.root_weight:
            root = self.lin_skip(x_dst)
            if self.lin_beta is not None:
                gate = torch.sigmoid(self.lin_beta(torch.cat([out, root, out - root], -1)))
                out = gate * root + (1 - gate) * out
            else:
                out = out + root
        if reported:
            report_attention(self, alpha)
        out = inputs.node_output(out)
        if return_attention_weights:
            return out, inputs.attention_output(graph.edge_index, alpha)
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")
