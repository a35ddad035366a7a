"""The higher-order graph convolution of Morris et al. (PyG's ``GraphConv``)."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_flags, keyword_arguments
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import (
    ConvModule,
    explain_mask,
    masked_weights,
)
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import check_sizes, checked_features, linear, split_widths


class GraphConv(ConvModule):
    r"""The graph convolution of `Morris et al., "Weisfeiler and Leman Go Neural: Higher-order
    Graph Neural Networks" (AAAI 2019) <https://arxiv.org/abs/1810.02244>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2 \,
        \mathrm{aggr}_{j \in \mathcal{N}(i)} \, e_{j,i} \cdot \mathbf{x}_j

    A drop-in for PyG's ``GraphConv`` (``lin_rel`` acts on the aggregate and carries the
    bias, ``lin_root`` on the root); the aggregation of the weighted neighbours is one fused
    sparse product, without ``[E, F]`` messages.

    Args:
        in_channels (int or (int, int)): input feature width, or the source and destination
            widths of a bipartite input; -1 infers them at the first call.
        out_channels (int): output feature width.
        aggr (str, list or module, default "add"): the aggregation, as ``SAGEConv``'s.
            Edge weights scale the neighbours of "add" ("sum"), "mean", "max" and "min" in
            the fused products; any other aggregation reduces the weighted messages
            ``e_ji * x_j`` (``[E, F]``), as PyG's does.
        bias (bool, default True): bias of ``lin_rel``.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, in_channels]``, a static batch ``[B, N, in_channels]``, or a pair
        ``(x_src, x_dst)`` (``x_dst`` may be None: no root term), the graph (a ``Graph``,
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` whose values are the edge
        weights), optional ``edge_weight [E]`` and ``size=(N_src, N_dst)``. output:
        ``[N, out_channels]`` (``[N_dst, out_channels]``).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr="add",
                 bias: bool = True, aggr_kwargs: dict | None = None,
                 flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("GraphConv", flow)
        check_flags("GraphConv", bias=bias)
        check_sizes("GraphConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.aggr_module = aggregations.resolve(
            aggr, **keyword_arguments("GraphConv", "aggr_kwargs", aggr_kwargs))
        src_width, dst_width = split_widths(in_channels)
        aggregated = src_width if src_width == -1 else \
            self.aggr_module.out_channels_for(src_width)
        self.lin_rel = linear(aggregated, out_channels, bias=bias)
        self.lin_root = linear(dst_width, out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in (self.aggr_module, self.lin_rel, self.lin_root):
            module.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_weight: Tensor | None = None, size: tuple[int, int] | None = None
                ) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        weight = weights_from(self, inputs, edge_weight)
        if weight is not None:
            weight = weight.to(x_src.dtype)
        weight = masked_weights(weight, explain_mask(self, inputs))
        out = self.lin_rel(self.aggr_module(inputs.graph, x_src, weight))
        if x_dst is not None:
            out = out + self.lin_root(x_dst)
        return inputs.node_output(out)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
