r"""The UGT layer (`Hoang et al., "Transitivity-Preserving Graph Representation Learning
for Bridging Local Connectivity and Role-Based Similarity", AAAI 2024
<https://arxiv.org/abs/2308.09517>`_; official code ``NSLab-CUK/Unified-Graph-Transformer``,
``Node_level_tasks/models.py``): attention over the edges of an augmented attention graph
(k-hop pairs plus structural virtual edges, built by ``nn.models.ugt.ugt_inputs``) with two
edge biases, then a residual feed-forward block."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._utils import check_dropouts, check_sizes

ATTENTION_MODES = ("official", "softmax")


class UGTLayer(ConvModule):
    r"""One UGT layer on an attention graph with edge encodings:

    .. math::
        s_{ij} = \sqrt{C}\, \mathbf{q}_i^\top \mathbf{k}_j + \mathbf{1}^\top
        (\mathbf{W}_d \mathbf{d}_{ij} + \mathbf{W}_m \mathbf{m}_{ij}), \quad
        \alpha_{ij} = \frac{\exp(\mathrm{clamp}(s_{ij}, -10, 10))}
        {\sum_{j'} \exp(\mathrm{clamp}(s_{ij'}, -10, 10)) + 2 \cdot 10^{-6}}

    per head (C channels per head; the bias sums run over the head's channels), then
    ``h = LN(h + O(dropout(sum_j alpha_ij v_j) + W_I I_i))`` and
    ``h = LN(h + FFN(h))`` with a 2x ReLU feed-forward and dropout. ``attention="official"``
    (default) is the official code's score and normalisation; ``"softmax"`` fixes both (the
    score ``q^T k / sqrt(C)`` plus the biases, a max-subtracted softmax on the fused
    attention kernel, no clamp).

    Differences from the official code: none in the formula; the biases are computed as
    one ``[E, heads]`` product (the official ``[E, heads, C]`` projections summed over C give
    the same numbers), and the weighted sum is one fused sparse product (no per-edge
    messages).

    Args:
        in_channels (int): input width (also the residual's, so it must equal
            ``out_channels`` unless a projection is wanted: the official last layer maps
            hidden to out and adds the residual, which needs them equal).
        out_channels (int): output width, a multiple of ``heads``.
        heads (int, default 4): attention heads.
        edge_channels (int): width of the embedded edge encodings ``d`` and ``m``.
        structure_channels (int): width of the node structural vector ``I``.
        dropout (float, default 0.5): the official dropouts (attention output and FFN).
        attention (str, default "official"): "official" or "softmax" (above).

    Shapes:
        input: ``h [N, in_channels]``, the attention ``Graph``, ``d [E, edge_channels]`` and
        ``m [E, edge_channels]`` in its edge order, ``I [N, structure_channels]``.
        output: ``[N, out_channels]``.
    """

    pyg_aggr = None  # takes no aggr: no PyG twin

    def __init__(self, in_channels: int, out_channels: int, heads: int = 4,
                 edge_channels: int | None = None, structure_channels: int = 5,
                 dropout: float = 0.5, attention: str = "official"):
        super().__init__()
        edge_channels = in_channels if edge_channels is None else edge_channels
        check_sizes("UGTLayer", in_channels=in_channels, out_channels=out_channels,
                    heads=heads, edge_channels=edge_channels,
                    structure_channels=structure_channels)
        check_dropouts("UGTLayer", dropout=dropout)
        if out_channels % heads:
            raise ValueError(f"UGTLayer: out_channels ({out_channels}) must be a multiple of "
                             f"heads ({heads})")
        if in_channels != out_channels:
            raise ValueError(f"UGTLayer: the residual needs in_channels == out_channels, got "
                             f"{in_channels} and {out_channels}")
        if attention not in ATTENTION_MODES:
            raise ValueError(f"UGTLayer: attention must be one of {ATTENTION_MODES}, got "
                             f"{attention!r}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.dropout, self.attention = dropout, attention
        self.Q = torch.nn.Linear(in_channels, out_channels)
        self.K = torch.nn.Linear(in_channels, out_channels)
        self.V = torch.nn.Linear(in_channels, out_channels)
        self.proj_d = torch.nn.Linear(edge_channels, out_channels)
        self.proj_m = torch.nn.Linear(edge_channels, out_channels)
        self.proj_i = torch.nn.Linear(structure_channels, out_channels)
        self.O = torch.nn.Linear(out_channels, out_channels)
        self.layer_norm1 = torch.nn.LayerNorm(out_channels)
        self.layer_norm2 = torch.nn.LayerNorm(out_channels)
        self.FFN_layer1 = torch.nn.Linear(out_channels, 2 * out_channels)
        self.FFN_layer2 = torch.nn.Linear(2 * out_channels, out_channels)

    def reset_parameters(self) -> None:
        for module in self.children():
            module.reset_parameters()

    def _head_bias(self, lin: torch.nn.Linear, e: Tensor) -> Tensor:
        """``lin(e).view(E, H, C).sum(-1)`` as one ``[E, H]`` product."""
        H, C = self.heads, self.out_channels // self.heads
        weight = lin.weight.view(H, C, -1).sum(1)
        return e @ weight.t() + lin.bias.view(H, C).sum(1)

    def scores(self, h: Tensor, graph: Graph, d: Tensor, m: Tensor) -> Tensor:
        """The per-edge, per-head scores ``[E, H]`` (before clamp or softmax)."""
        H, C = self.heads, self.out_channels // self.heads
        q, k = self.Q(h).view(-1, H, C), self.K(h).view(-1, H, C)
        qk = ops.sddmm(graph, k, q, "dot")  # [E, H]: k at the source, q at the destination
        scale = math.sqrt(C) if self.attention == "official" else 1 / math.sqrt(C)
        return qk * scale + self._head_bias(self.proj_d, d) + self._head_bias(self.proj_m, m)

    def aggregate(self, h: Tensor, graph: Graph, d: Tensor, m: Tensor) -> Tensor:
        """The attention output ``[N, out_channels]``."""
        H, C = self.heads, self.out_channels // self.heads
        score = self.scores(h, graph, d, m)
        v = self.V(h).view(-1, H, C)
        if self.attention == "softmax":
            return ops.segment_attention(graph, score, v).reshape(-1, H * C)
        weight = score.clamp(-10, 10).exp() / 2  # the official exp, no max subtracted
        total = ops.spmm(graph, weight.new_ones(h.size(0), H, 1), weight)
        out = ops.spmm(graph, v, weight) / (total + 1e-6)
        return out.reshape(-1, H * C)

    def forward(self, h: Tensor, graph: Graph, d: Tensor, m: Tensor, structure: Tensor) -> Tensor:
        out = ops.dropout(self.aggregate(h, graph, d, m), self.dropout, self.training)
        out = self.layer_norm1(h + self.O(out + self.proj_i(structure)))
        ffn = ops.dropout(F.relu(self.FFN_layer1(out)), self.dropout, self.training)
        return self.layer_norm2(out + self.FFN_layer2(ffn))

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads}, attention={self.attention})")
