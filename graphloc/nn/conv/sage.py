"""GraphSAGE convolution."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_flags, keyword_arguments
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features,
    linear,
    root_map,
    split_widths,
)
from graphloc.ops import autocast_enabled


class SAGEConv(ConvModule):
    r"""The GraphSAGE operator of `Hamilton et al., "Inductive Representation Learning on
    Large Graphs" (NeurIPS 2017) <https://arxiv.org/abs/1706.02216>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2 \cdot
        \mathrm{aggr}_{j \in \mathcal{N}(i)} \mathbf{x}_j

    A drop-in for PyG's ``SAGEConv`` (``lin_l`` acts on the aggregate and carries the bias,
    ``lin_r`` on the root, ``lin`` is the projection, ``aggr_module`` the aggregation); the
    plain aggregations are one fused sparse reduce.

    Args:
        in_channels (int or (int, int)): input feature width, or the source and destination
            widths of a bipartite input; -1 infers them at the first call.
        out_channels (int): output feature width.
        aggr (str, list or module, default "mean"): "mean", "max", "min", "sum" (alias
            "add"), "var", "std", "softmax", "lstm" or "lcm" (see ``graphloc.nn.aggr``), a list of
            them (combined by ``aggr_kwargs["mode"]``, default concatenation), or an
            aggregation module (graphloc's, or PyG's such as ``MLPAggregation``). Nodes
            without neighbours aggregate to 0.
        normalize (bool, default False): L2-normalise the output rows.
        root_weight (bool, default True): add the root term :math:`\mathbf{W}_1 \mathbf{x}_i`.
        project (bool, default False): first map the neighbours through
            ``ReLU(lin(x_j))`` (PyG's ``project``).
        bias (bool, default True): bias of ``lin_l``.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation (for a list: of
            the ``MultiAggregation``, e.g. ``mode``, ``mode_kwargs``, ``aggrs_kwargs``).
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, in_channels]``, a static batch ``[B, N, in_channels]``, or a pair
        ``(x_src, x_dst)`` (aggregated over ``x_src``, root term from ``x_dst``; ``x_dst``
        may be None, then no root term), the graph (a ``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t``, whose values weight the plain aggregations), and
        optionally ``size=(N_src, N_dst)``. output: ``[N, out_channels]``
        (``[N_dst, out_channels]``).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr="mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False,
                 bias: bool = True, aggr_kwargs: dict | None = None,
                 flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("SAGEConv", flow)
        check_flags("SAGEConv",
                    normalize=normalize, root_weight=root_weight, project=project, bias=bias)
        check_sizes("SAGEConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        # a module is kept once, as aggr_module (PyG's state dict layout)
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.normalize, self.root_weight = normalize, root_weight
        self.project = project
        src_width, dst_width = split_widths(in_channels)
        aggr_kwargs = keyword_arguments("SAGEConv", "aggr_kwargs", aggr_kwargs)
        if aggr in ("lstm", "lcm"):  # learned aggregations of the input width by default
            aggr_kwargs.setdefault("in_channels", src_width)
            aggr_kwargs.setdefault("out_channels", src_width)
        self.aggr_module = aggregations.resolve(aggr, **aggr_kwargs)
        if project and src_width == -1:
            raise ValueError("SAGEConv does not support lazy initialization (in_channels=-1) "
                             "with project=True")
        self.lin = linear(src_width, src_width) if project else None
        aggregated = src_width if src_width == -1 else \
            self.aggr_module.out_channels_for(src_width)
        self.lin_l = linear(aggregated, out_channels, bias=bias)
        self.lin_r = linear(dst_width, out_channels, bias=False) if root_weight else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in (self.aggr_module, self.lin, self.lin_l, self.lin_r):
            if module is not None:
                module.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                size: tuple[int, int] | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        if self.lin is not None:
            x_src = self.lin(x_src).relu()
        weight = masked_weights(weights_from(self, inputs, None), explain_mask(self, inputs))
        out = self.lin_l(self.aggr_module(inputs.graph, x_src, weight))
        lin_r = root_map(self, "lin_r")
        if lin_r is not None and x_dst is not None:
            if isinstance(self.lin_r.weight, torch.nn.parameter.UninitializedParameter):
                self.lin_r(x_dst)  # a lazy width: the first call sets it
            # accumulated in place: one [N, out] tensor, not three
            root, weight = x_dst, self.lin_r.weight.t()
            if autocast_enabled(out.device.type):
                # in out's dtype, autocast's for lin_l: it casts no in-place product itself
                root, weight = root.to(out.dtype), weight.to(out.dtype)
            out = out.addmm_(root, weight)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return inputs.node_output(out)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"aggr={self.aggr})")
