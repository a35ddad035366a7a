"""GATv2's dynamic attention (Brody, Alon and Yahav, ICLR 2022)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, attention_hooked, explain_mask
from graphloc.nn.conv._inputs import (
    check_flow,
    mapped_edge_features,
    read_inputs,
    refuse_edge_attr_without_edge_dim,
)
from graphloc.nn.conv._utils import (
    checked_features,
    glorot,
    glorot_linear,
    linear,
    reset_glorot,
    split_widths,
)
from graphloc.nn.conv.gat import (
    attend,
    attention_edge_features,
    attention_result,
    head_dots,
    set_attention_options,
    with_pyg_loops,
)


class GATv2Conv(ConvModule):
    r"""The dynamic graph attention operator of `Brody et al., "How Attentive are Graph
    Attention Networks?" (ICLR 2022) <https://arxiv.org/abs/2105.14491>`_:

    .. math::
        \mathbf{x}'_i = \Big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i) \cup \{i\}}
        \alpha^{h}_{ij} \mathbf{\Theta}^{h}_{s} \mathbf{x}_j, \qquad
        \alpha^{h}_{ij} = \mathrm{softmax}_j\Big(\mathbf{a}^{h\top} \mathrm{LeakyReLU}\big(
        \mathbf{\Theta}^{h}_{s} \mathbf{x}_j + \mathbf{\Theta}^{h}_{t} \mathbf{x}_i +
        \mathbf{\Theta}^{h}_{e} \mathbf{e}_{ji}\big)\Big)

    (heads averaged instead of concatenated when ``concat=False``). A drop-in for PyG's
    ``GATv2Conv`` (same arguments, parameter names ``lin_l``, ``lin_r``, ``att``,
    ``lin_edge``, ``res``, ``bias``, outputs and attention weights). The LeakyReLU sits
    inside the score, on each edge's ``[H, C]`` sum; ``ops.gatv2_scores`` forms those sums
    where it needs them, forward and backward (one CPU kernel: no ``[E, H, C]`` tensor), and
    the softmax and the weighted sum of the sources run fused per node
    (``ops.segment_attention``): no ``[E, H, C]`` messages and no stored ``[E, H]``
    weights, where PyG's keeps both for its backward. With edge features the sums are
    formed as ``[E, H * C]`` tensors (``ops.sddmm``), the edge term added to them.

    Differences from PyG's, each for a reason:

    - A destination whose scores are all -inf gets weights 0 (output 0 plus bias), where
      PyG's softmax gives NaN: graphloc's rule for a fully masked row (README, "Special
      values"), shared with GATConv.
    - Attention dropout draws graphloc's counter-based masks (same distribution and
      scaling as torch's, other draws).

    Args:
        in_channels (int or (int, int)): input width; a pair gives sources and
            destinations their own widths (``lin_l`` reads sources, ``lin_r``
            destinations).
        out_channels (int): width per head, C.
        heads (int, default 1): number of heads, H.
        concat (bool, default True): concatenate heads (``H * C`` outputs), else average.
        negative_slope (float, default 0.2): LeakyReLU slope.
        dropout (float, default 0.0): dropout on the attention weights in training.
        add_self_loops (bool, default True): replace self-loops by one loop per node.
        edge_dim (int, optional): edge feature width; edge features then enter the scores.
        fill_value (float, Tensor, str or None, default "mean"): edge features of the added
            loops: a constant, a tensor broadcast to each loop's row, ones (None), or "mean"
            / "add" / "max" / "min" / "mul" of the node's incoming edge features (PyG's).
        bias (bool, default True): biases in ``lin_l``, ``lin_r`` and on the output.
        share_weights (bool, default False): one projection for both ends (``lin_r`` is
            ``lin_l``).
        residual (bool, default False): add a linear projection of the destination input.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, in_channels]`` or a pair ``(x_src, x_dst)``, a ``Graph`` or
        ``edge_index [2, E]``, optional ``edge_attr [E, edge_dim]``. output:
        ``[N, H * C]`` (``[N, C]`` if not concat); with ``return_attention_weights`` also
        ``(edge_index, alpha [E', H])`` over the edges used (self-loops included).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: float | Tensor | str | None = "mean", bias: bool = True,
                 share_weights: bool = False, residual: bool = False,
                 flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("GATv2Conv", flow)
        check_flags("GATv2Conv", concat=concat, add_self_loops=add_self_loops, bias=bias,
                    share_weights=share_weights, residual=residual)
        set_attention_options(self, in_channels, out_channels, heads, concat, negative_slope,
                              dropout, add_self_loops, edge_dim, fill_value)
        self.share_weights = share_weights
        H, C = heads, out_channels
        total = H * C if concat else C
        src_width, dst_width = split_widths(in_channels)
        self.lin_l = linear(src_width, H * C, bias, glorot=True, uniform_bias=True)
        self.lin_r = self.lin_l if share_weights else \
            linear(dst_width, H * C, bias, glorot=True, uniform_bias=True)
        self.att = torch.nn.Parameter(torch.empty(1, H, C))
        self.lin_edge = glorot_linear(edge_dim, H * C) if edge_dim is not None else None
        self.res = glorot_linear(dst_width, total) if residual else None
        self.bias = torch.nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if lin is not None:  # PyG's Linear: glorot, and its default bias where one is
                reset_glorot(lin, uniform_bias=True)
        glorot(self.att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index,
                edge_attr: Tensor | None = None, return_attention_weights: bool | None = None,
                size: tuple[int, int] | None = None):
        # PyG's positional order (its GATv2Conv has no size; it comes last here, where a
        # PyG call's fourth argument, return_attention_weights, was read as the size)
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        if x_dst is None:
            raise ValueError("GATv2Conv needs destination features: its scores read both "
                             "ends of each edge (got a pair (x_src, None))")
        # PyG's rule: the weights are returned whenever the argument is given, even False
        return_attention_weights = return_attention_weights is not None
        mask, reported = explain_mask(self, inputs), attention_hooked(self)
        weights_needed = return_attention_weights or reported
        refuse_edge_attr_without_edge_dim(self, edge_attr)
        edge_attr = attention_edge_features(self, inputs, edge_attr)
        graph, edge_attr, stale, pyg_order = with_pyg_loops(
            inputs, self.add_self_loops, edge_attr, self.fill_value,
            weights_needed or mask is not None)
        h_src = self.lin_l(x_src)
        h_dst = h_src if self.share_weights and x_dst is x_src else self.lin_r(x_dst)
        score = self._scores(graph, h_src, h_dst, edge_attr, stale)
        out, alpha = attend(self, graph, score, h_src, mask, pyg_order, weights_needed)
        out = inputs.node_output(self._finish(out, x_dst))
        return attention_result(self, inputs, graph, pyg_order, out, alpha,
                                return_attention_weights, reported)

    def _scores(self, graph: Graph, h_src: Tensor, h_dst: Tensor, edge_attr: Tensor | None,
                stale: Tensor | None) -> Tensor:
        """``a . LeakyReLU(h_src[j] + h_dst[i] + e_ji)`` per edge and head, ``[E, H]``;
        -inf on the masked old loops (``stale``, under ``torch.compile``)."""
        if self.lin_edge is None or edge_attr is None:  # one kernel: no [E, H * C] tensor
            score = ops.gatv2_scores(graph, h_src, h_dst, self.att, self.negative_slope)
        else:  # the edge term enters each edge's sum: [E, H * C] tensors, the sums (twice)
            # and their LeakyReLU, the attention vectors' products as one thin matmul
            pre = ops.sddmm(graph, h_src, h_dst, "add") + \
                mapped_edge_features(self, self.lin_edge, edge_attr)
            score = head_dots(F.leaky_relu(pre, self.negative_slope), self.att)
        if stale is not None:
            score = score.masked_fill(stale.view(-1, 1), float("-inf"))
        return score

    def _finish(self, out: Tensor, x_dst: Tensor) -> Tensor:
        """The heads concatenated or averaged, plus the residual and the bias."""
        out = out if self.concat else out.view(-1, self.heads, self.out_channels).mean(dim=1)
        if self.res is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")
