"""The hypergraph convolution of Bai et al. (PyG's ``HypergraphConv``): nodes to hyperedges
and back, normalised by the hyperedge sizes and the nodes' weighted degrees, optionally
with attention over the incidences."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice, check_flags, check_int, check_number
from graphloc.graph import degree_power, graph_of_edges
from graphloc.nn.conv._base import ConvModule, graph_explain_mask
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_input,
    check_sizes,
    glorot,
    glorot_linear,
)
from graphloc.ops.values import all_finite, can_branch_on_values


class HypergraphConv(ConvModule):
    r"""The hypergraph convolution of `Bai et al., "Hypergraph Convolution and Hypergraph
    Attention" (Pattern Recognition 2021) <https://arxiv.org/abs/1901.08150>`_:

    .. math::
        \mathbf{X}' = \mathbf{D}^{-1} \mathbf{H} \mathbf{B}^{-1} \mathbf{H}^{\top}
        \mathbf{X} \mathbf{\Theta}

    for the incidence matrix ``H`` (``hyperedge_index``: row 0 the nodes, row 1 their
    hyperedges), ``B`` the hyperedges' sizes and ``D`` the nodes' degrees weighted by the
    hyperedge weights ``W``; with ``use_attention``, each incidence is weighted by a softmax
    over the hyperedge's nodes (``attention_mode="node"``) or the node's hyperedges
    (``"edge"``) of ``LeakyReLU(a^T [x_i Theta, e_j Theta])``, per head. A drop-in for PyG's
    ``HypergraphConv`` (same arguments, parameters ``lin``, ``att`` and ``bias``, PyG's
    initialisation from one seed, and outputs): the two propagations are two ``spmm`` over
    the incidences (PyG's gather ``[nnz, H, C]`` messages twice), the attention scores
    per-node and per-hyperedge halves (per incidence, as PyG's, where the mapped features
    are not finite or the forward may not branch on values).

    PyG's code, which this follows by default, uses ``W`` only in ``D``, where the paper's
    formula (and PyG's docstring) reads ``D^-1 H W B^-1 H^T X Theta``:
    ``hyperedge_weight_in_messages=True`` weighs each hyperedge's message by ``W`` as the
    formula does (the same outputs without hyperedge weights).

    Args:
        in_channels (int): input width (-1: taken from the first call).
        out_channels (int): output width per head.
        use_attention (bool, default False): attention over the incidences (needs
            ``hyperedge_attr``).
        attention_mode (str, default "node"): the softmax over each hyperedge's nodes
            ("node") or over each node's hyperedges ("edge").
        heads (int, default 1): attention heads (1 without attention).
        concat (bool, default True): concatenate the heads, else average them.
        negative_slope (float, default 0.2): the LeakyReLU's slope.
        dropout (float, default 0): dropout on the attention weights in training.
        bias (bool, default True): add a bias.
        hyperedge_weight_in_messages (bool, default False): the paper's ``W`` in the
            messages (PyG's: in ``D`` only).

    Shapes:
        input: ``x [N, in_channels]``, ``hyperedge_index [2, nnz]``, optional
        ``hyperedge_weight [M]``, ``hyperedge_attr [M, in_channels]`` and ``num_edges``
        (M; by default the rows of ``hyperedge_weight`` or ``hyperedge_attr``, at least the
        largest hyperedge id + 1). output: ``[N, heads * out_channels]``
        (``[N, out_channels]`` averaged).

    Differences from PyG's: a node or hyperedge whose weights sum to -0.0 takes 0 (PyG's
    masks only +inf), and hyperedge weights summing to 0 at a node have a finite gradient
    (PyG's NaN: 0 * inf); a hyperedge whose attention scores are all -inf gives its
    incidences weight 0 (graphloc's masked-row rule; PyG's NaN); ``heads > 1`` without
    attention is a ``ValueError`` (PyG's builds a bias its output cannot take); a missing
    ``hyperedge_attr`` with attention, or hyperedge weights or features of another size
    than ``num_edges``, are ``ValueError`` naming them. docs/models.md lists these.

    An explainer's edge mask has one entry per incidence (``hyperedge_index``'s columns)
    and scales both of its messages, node to hyperedge and back, as PyG's explain mode.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, use_attention: bool = False,
                 attention_mode: str = "node", heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, bias: bool = True,
                 hyperedge_weight_in_messages: bool = False):
        super().__init__()
        check_sizes("HypergraphConv", lazy=True, in_channels=in_channels,
                    out_channels=out_channels, heads=heads)
        check_flags("HypergraphConv", use_attention=use_attention, concat=concat, bias=bias,
                    hyperedge_weight_in_messages=hyperedge_weight_in_messages)
        check_choice("HypergraphConv", "attention_mode", attention_mode, ("node", "edge"))
        check_dropouts("HypergraphConv", upto_one=True, dropout=dropout)
        if heads > 1 and not use_attention:
            raise ValueError(f"HypergraphConv: heads={heads} needs use_attention=True (without "
                             "attention there is one head; PyG's builds a bias of heads * "
                             "out_channels that its output cannot take)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.use_attention, self.attention_mode = use_attention, attention_mode
        self.heads, self.concat = (heads, concat) if use_attention else (1, True)
        check_number("HypergraphConv", "negative_slope", negative_slope)
        self.negative_slope, self.dropout = negative_slope, dropout
        self.hyperedge_weight_in_messages = hyperedge_weight_in_messages
        self.flow = "source_to_target"  # (PyG's fixed flow, read by from_pyg)
        self.lin = glorot_linear(in_channels, self.heads * out_channels)
        if use_attention:
            self.att = torch.nn.Parameter(torch.empty(1, heads, 2 * out_channels))
        width = heads * out_channels if concat else out_channels
        self.bias = torch.nn.Parameter(torch.empty(width)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.lin.reset_parameters()
        if self.use_attention:
            glorot(self.att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor, hyperedge_index: Tensor,
                hyperedge_weight: Tensor | None = None, hyperedge_attr: Tensor | None = None,
                num_edges: int | None = None) -> Tensor:
        check_input(self, x, self.in_channels)
        num_edges = _num_hyperedges(hyperedge_index, num_edges, hyperedge_weight,
                                    hyperedge_attr)
        to_edges, to_nodes = _incidence_graphs(hyperedge_index, x.size(0), num_edges)
        weight = _hyperedge_rows("hyperedge_weight", hyperedge_weight, num_edges, 1)
        weight = x.new_ones(num_edges) if weight is None else weight.to(x.dtype)
        h = self.lin(x).view(-1, self.heads, self.out_channels)
        alpha = self._attention(h, hyperedge_attr, to_edges, to_nodes, num_edges) \
            if self.use_attention else None
        # an explainer's mask: one factor per incidence, on both of its messages (PyG's
        # explain mode scales the messages of each of its two propagations)
        mask = graph_explain_mask(self, to_edges)
        if mask is not None:
            mask = mask.to(h.dtype).view(-1, 1)
            alpha = mask if alpha is None else alpha * mask
        # B: each hyperedge's size; D: each node's degree weighted by its hyperedges
        size_inverse = degree_power(to_edges.in_degree().to(x.dtype), -1.0)
        degree = to_nodes.weighted_in_degree(weight.index_select(0, to_nodes.edge_index[0]))
        degree_inverse = degree_power(degree.to(x.dtype), -1.0)
        at_edges = ops.spmm(to_edges, h, alpha) * size_inverse.view(-1, 1, 1)
        if self.hyperedge_weight_in_messages:
            at_edges = at_edges * weight.view(-1, 1, 1)
        out = ops.spmm(to_nodes, at_edges, alpha) * degree_inverse.view(-1, 1, 1)
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(1)
        return out if self.bias is None else out + self.bias

    def _attention(self, h: Tensor, hyperedge_attr: Tensor | None, to_edges, to_nodes,
                   num_edges: int) -> Tensor:
        """Each incidence's weights ``[nnz, heads]`` in the caller's order: the softmax of
        ``LeakyReLU(a_node h_i + a_edge e_j)`` over the hyperedge's nodes or the node's
        hyperedges, dropped out in training as PyG's (one mask over the same tensor)."""
        features = _hyperedge_rows("hyperedge_attr", hyperedge_attr, num_edges, 2)
        if features is None:
            raise ValueError("HypergraphConv(use_attention=True) needs hyperedge_attr "
                             "[num_edges, in_channels]: its scores read each hyperedge's "
                             "features")
        check_input(self, features, self.in_channels, "hyperedge_attr")
        edges = self.lin(features).view(-1, self.heads, self.out_channels)
        att_node, att_edge = self.att.split(self.out_channels, dim=-1)
        nodes, hyperedges = to_edges.edge_index
        if can_branch_on_values() and all_finite(h) and all_finite(edges):
            node_half = (h * att_node).sum(-1).index_select(0, nodes)
            edge_half = (edges * att_edge).sum(-1).index_select(0, hyperedges)
        else:  # PyG's per incidence: a NaN row of a node in no hyperedge stays out of att's
            # gradient (per node, 0 * NaN would reach it)
            node_half = (h.index_select(0, nodes) * att_node).sum(-1)
            edge_half = (edges.index_select(0, hyperedges) * att_edge).sum(-1)
        scores = F.leaky_relu(node_half + edge_half, self.negative_slope)
        grouped_by = to_edges if self.attention_mode == "node" else to_nodes
        alpha = ops.segment_softmax(grouped_by, scores)
        return F.dropout(alpha, p=self.dropout, training=self.training)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def _num_hyperedges(hyperedge_index, num_edges, *per_hyperedge) -> int:
    """M: ``num_edges``, else the most rows of the per-hyperedge tensors given (trailing
    hyperedges without nodes), at least the largest hyperedge id + 1 (0 without any)."""
    if not isinstance(hyperedge_index, Tensor):
        raise TypeError(f"HypergraphConv: hyperedge_index must be a torch.Tensor [2, nnz], got "
                        f"{type(hyperedge_index).__name__}")
    if hyperedge_index.dim() != 2 or hyperedge_index.size(0) != 2:
        raise ValueError(f"HypergraphConv: hyperedge_index must have shape [2, nnz], got "
                         f"{list(hyperedge_index.shape)}")
    if num_edges is not None:
        check_int(num_edges, "HypergraphConv: num_edges", 0)
        return num_edges
    used = int(hyperedge_index[1].max()) + 1 if hyperedge_index.size(1) else 0
    rows = [t.size(0) for t in per_hyperedge if isinstance(t, Tensor) and t.dim()]
    return max([used, *rows])


def _incidence_graphs(hyperedge_index: Tensor, num_nodes: int, num_edges: int):
    """The incidences as two bipartite graphs, nodes -> hyperedges and back, in the caller's
    incidence order (built once per unchanged tensor); an id out of range is named."""
    try:
        return (graph_of_edges(hyperedge_index, num_edges, num_nodes),
                graph_of_edges(hyperedge_index, num_nodes, num_edges, flip=True))
    except (TypeError, ValueError) as err:
        raise type(err)(f"HypergraphConv: hyperedge_index (row 0 nodes < {num_nodes}, row 1 "
                        f"hyperedges < num_edges = {num_edges}): {err}") from None


def _hyperedge_rows(name: str, t: Tensor | None, num_edges: int, dims: int) -> Tensor | None:
    """A per-hyperedge tensor of ``dims`` dimensions with ``num_edges`` rows, or None."""
    if t is None:
        return None
    if not isinstance(t, Tensor):
        raise TypeError(f"HypergraphConv: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims or t.size(0) != num_edges:
        want = "[num_edges]" if dims == 1 else "[num_edges, in_channels]"
        raise ValueError(f"HypergraphConv: {name} must have shape {want} with num_edges = "
                         f"{num_edges}, got {list(t.shape)}")
    return t
