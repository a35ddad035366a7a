"""The crystal graph convolution of Xie and Grossman (PyG's ``CGConv``): gated messages from
the pair of end features and the edge's."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_messages
from graphloc.nn.conv._inputs import check_flow, edge_feature_rows, read_inputs
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features_with_root,
    destinations_read,
    read_rows_only,
    sources_read,
    split_widths,
    width_keeping_aggregation,
)


class CGConv(ConvModule):
    r"""The crystal graph convolution of `Xie and Grossman, "Crystal Graph Convolutional
    Neural Networks for an Accurate and Interpretable Prediction of Material Properties"
    (PRL 2018) <https://arxiv.org/abs/1710.10324>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{x}_i + \mathrm{aggr}_{j \in \mathcal{N}(i)}
        \sigma(\mathbf{z}_{i,j} \mathbf{W}_f + \mathbf{b}_f) \odot
        g(\mathbf{z}_{i,j} \mathbf{W}_s + \mathbf{b}_s),
        \quad \mathbf{z}_{i,j} = [\mathbf{x}_i, \mathbf{x}_j, \mathbf{e}_{j,i}]

    (sigma the sigmoid, g the softplus). A drop-in for PyG's ``CGConv`` (same arguments,
    parameters ``lin_f``, ``lin_s`` and ``bn`` with PyG's initialisation, and outputs).
    PyG multiplies each edge's ``[E, 2 F + D]`` concatenation by both weights; here the
    weights' node blocks act once per node (``x_i W`` and ``x_j W`` are node products),
    so per edge only the sum of two gathered rows, the edge block's product and the gate
    are left. The rounding of that regrouped sum differs from PyG's in the last bits.

    Args:
        channels (int or (int, int)): the node width, or the source and destination
            widths; the output has the destination width.
        dim (int, default 0): the edge feature width (0: no edge features).
        aggr (str, list or module, default "add"): the aggregation of the messages ("add",
            "mean", "max", "min", or any that keeps the width, as ``SAGEConv``'s).
        batch_norm (bool, default False): a ``BatchNorm1d`` on the aggregate.
        bias (bool, default True): the biases of ``lin_f`` and ``lin_s``.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, F]``, a static batch ``[B, N, F]`` or a pair ``(x_src, x_dst)``; the
        graph (a ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``: values
        ``[E, D]`` are the edge features, values ``[E]`` weights, which CGConv does not
        read); ``edge_attr [E, dim]`` (in a sparse adjacency's storage order) when ``dim >
        0``, else the Graph's own. output: ``[N_dst, F_dst]``.

    Differences from PyG's: ``edge_attr`` given to a layer of ``dim = 0``, or missing for
    ``dim > 0``, is a ``ValueError`` naming ``dim`` (PyG's fails in a matrix product); with
    ``batch_norm`` a static batch ``[B, N, F]`` is normalised over all ``B N`` nodes
    (PyG's ``BatchNorm1d`` reads its node axis as the channels and fails).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, channels: int | tuple[int, int], dim: int = 0, aggr="add",
                 batch_norm: bool = False, bias: bool = True, aggr_kwargs: dict | None = None,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("CGConv", pair=True, channels=channels)
        check_int(dim, "CGConv: dim", 0)
        check_flags("CGConv", batch_norm=batch_norm, bias=bias)
        self.flow = check_flow("CGConv", flow)
        self.channels, self.dim, self.batch_norm = channels, dim, batch_norm
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        src_width, dst_width = split_widths(channels)
        self.aggr_module = width_keeping_aggregation("CGConv", aggr, aggr_kwargs, dst_width,
                                                     "the output adds x_dst")
        width = src_width + dst_width + dim
        self.lin_f = torch.nn.Linear(width, dst_width, bias=bias)
        self.lin_s = torch.nn.Linear(width, dst_width, bias=bias)
        self.bn = torch.nn.BatchNorm1d(dst_width) if batch_norm else None
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.aggr_module.reset_parameters()
        for module in (self.lin_f, self.lin_s, self.bn):
            if module is not None:
                module.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index,
                edge_attr: Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = checked_features_with_root(self, inputs, self.channels, "x_dst")
        graph = inputs.graph.in_csr_order()
        edge_attr = self._edge_features(inputs, edge_attr)
        messages = self._messages(graph, x_src, x_dst, edge_attr)
        messages = masked_messages(messages, inputs.graph, explain_mask(self, inputs))
        out = self.aggr_module(aggregations.per_edge(graph), messages)
        if self.bn is not None:
            out = self.bn(out)
        return inputs.node_output(out + x_dst)

    def _edge_features(self, inputs, edge_attr: Tensor | None) -> Tensor | None:
        """The call's ``[E, dim]`` edge features in CSR order, or None for ``dim = 0``:
        ``edge_attr``, else a sparse adjacency's ``[E, D]`` values, else the Graph's own."""
        if self.dim == 0:
            if edge_attr is not None:
                raise ValueError(f"CGConv was built with dim=0, so the edge_attr of shape "
                                 f"{list(getattr(edge_attr, 'shape', ()))} would be ignored; "
                                 "build it with dim=<edge feature width>")
            return None
        edge_attr = edge_feature_rows(self, inputs, edge_attr, self.dim, "dim")
        if edge_attr is None:
            raise ValueError(f"CGConv was built with dim={self.dim}: it needs edge_attr "
                             f"[E, {self.dim}] (or a Graph with edge features)")
        return inputs.graph.to_csr_order(edge_attr)

    def _messages(self, graph, x_src: Tensor, x_dst: Tensor, edge_attr: Tensor | None
                  ) -> Tensor:
        """sigmoid(z W_f + b_f) * softplus(z W_s + b_s) per edge in CSR order, z W taken
        as x_i W_i + x_j W_j + e W_e with the node blocks multiplied per node, both gates
        side by side (``[E, 2 F]``)."""
        src_width, dst_width = split_widths(self.channels)
        weight = torch.cat([self.lin_f.weight, self.lin_s.weight])  # [2 F, dst + src + dim]
        w_dst, w_src, w_edge = weight.split([dst_width, src_width, self.dim], dim=1)
        x_src = read_rows_only(x_src, sources_read(graph))  # (PyG's reads edges' rows only)
        x_dst = read_rows_only(x_dst, destinations_read(graph))
        at_dst = F.linear(x_dst, w_dst, None if self.lin_f.bias is None else
                          torch.cat([self.lin_f.bias, self.lin_s.bias]))
        gates = ops.sddmm(graph, F.linear(x_src, w_src), at_dst, "add")  # x_j W_j + x_i W_i
        if edge_attr is not None:  # (integer features, bond types say, in the weights' dtype)
            autocast = torch.is_autocast_enabled(edge_attr.device.type)
            gates = gates + F.linear(edge_attr if autocast else edge_attr.to(weight.dtype),
                                     w_edge)
        gate_f, gate_s = gates.chunk(2, dim=-1)
        return torch.sigmoid(gate_f) * F.softplus(gate_s)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.channels}, dim={self.dim})"
