"""GraphGym's general message-passing layer (PyG's ``GeneralConv``): linear messages with
optional edge features, attention over the in-edges and several heads, averaged."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice, check_flags
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import (
    check_flow,
    edge_feature_rows,
    mapped_edge_features,
    read_inputs,
)
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features_with_root,
    destinations_read,
    glorot,
    linear,
    read_rows_only,
    sources_read,
    split_widths,
    width_keeping_aggregation,
)

_NEGATIVE_SLOPE = 0.2  # PyG's, fixed


class GeneralConv(ConvModule):
    r"""The general GNN layer of `You et al., "Design Space for Graph Neural Networks"
    (NeurIPS 2020) <https://arxiv.org/abs/2011.08843>`_ (GraphGym):

    .. math::
        \mathbf{x}'_i = \frac{1}{H} \sum_{h=1}^{H} \mathrm{aggr}_{j \in \mathcal{N}(i)}
        \alpha^h_{i,j} \mathbf{m}^h_{i,j} + \mathbf{W}_{\textrm{self}} \mathbf{x}_i,
        \quad \mathbf{m}_{i,j} = \mathbf{W}_{\textrm{msg}} \mathbf{x}_j
        \,[+ \mathbf{W}_{\textrm{msg},i} \mathbf{x}_i] \,[+ \mathbf{W}_e \mathbf{e}_{j,i}]

    with ``alpha = 1`` without attention, else a softmax over i's in-edges of
    ``leaky_relu(a^h . m^h_ij, 0.2)`` (additive) or of ``leaky_relu(m^h_ji . m^h_ij /
    sqrt(C), 0.2)`` (dot product; ``m_ji`` the message with the two ends swapped). A
    drop-in for PyG's ``GeneralConv`` (same arguments, parameters ``lin_msg``,
    ``lin_msg_i``, ``lin_self``, ``lin_edge``, ``att_msg`` and the ``scaler`` buffer, PyG's
    initialisation, and outputs). PyG applies the message maps to ``[E, F]`` gathered
    features; here they act once per node. Directed messages without edge features go
    through fused kernels (no ``[E, H C]`` tensor: one sparse product, or the attention's
    softmax and sum in one pass); otherwise the ``[E, H C]`` messages are formed, as PyG's.

    Args:
        in_channels (int or (int, int)): input width, or the source and destination widths;
            -1 infers them at the first call.
        out_channels (int): output width C.
        in_edge_channels (int, optional): edge feature width (None: no edge features).
        aggr (str, list or module, default "add"): the aggregation of the messages, as
            ``SAGEConv``'s (one that keeps the width).
        skip_linear (bool, default False): ``W_self`` a Linear even when the widths match
            (else the identity there).
        directed_msg (bool, default True): False adds ``W_msg,i x_i`` to each message.
        heads (int, default 1): H.
        attention (bool, default False), attention_type ("additive" or "dot_product").
        l2_normalize (bool, default False): the output rows scaled to unit L2 norm.
        bias (bool, default True): the biases of the maps.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, F]``, a pair ``(x_src, x_dst)``, or (PyG's ``node_dim = 0``) a static
        batch ``[N, B, F]``; the graph (a ``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t``: values ``[E, D]`` are edge features, values ``[E]``
        weights, which this layer does not read); ``edge_attr [E, D]`` (in a sparse
        adjacency's storage order, else the Graph's own), optional ``size``. output:
        ``[N_dst, C]``.

    Differences from PyG's: ``edge_attr`` given to a layer without ``in_edge_channels``,
    or features of another width than a map takes, is a ``ValueError`` naming them (PyG's
    fails in a matrix product or on a missing attribute); a static batch works (PyG's
    views its ``[E, B, H C]`` messages as ``[E B, H, C]`` and fails);
    ``reset_parameters()`` also resets ``lin_msg_i`` (PyG's leaves it as built; building
    draws PyG's values).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 in_edge_channels: int | None = None, aggr="add", skip_linear: bool = False,
                 directed_msg: bool = True, heads: int = 1, attention: bool = False,
                 attention_type: str = "additive", l2_normalize: bool = False,
                 bias: bool = True, aggr_kwargs: dict | None = None,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("GeneralConv", lazy=True, pair=True, optional=("in_edge_channels",),
                    in_channels=in_channels, out_channels=out_channels, heads=heads,
                    in_edge_channels=in_edge_channels)
        check_flags("GeneralConv", skip_linear=skip_linear, directed_msg=directed_msg,
                    attention=attention, l2_normalize=l2_normalize, bias=bias)
        check_choice("GeneralConv", "attention_type", attention_type,
                     ("additive", "dot_product"))
        self.flow = check_flow("GeneralConv", flow)
        self.node_dim = 0  # PyG's: a static batch is [N, B, F]
        self.in_channels, self.out_channels = in_channels, out_channels
        self.in_edge_channels, self.heads = in_edge_channels, heads
        self.skip_linear, self.directed_msg = skip_linear, directed_msg
        self.attention, self.attention_type = attention, attention_type
        self.normalize_l2 = l2_normalize  # PyG's attribute name
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        width = out_channels * heads
        self.aggr_module = width_keeping_aggregation(
            "GeneralConv", aggr, aggr_kwargs, width,
            "the heads are averaged over the messages' width")
        src_width, dst_width = split_widths(in_channels)
        # built in PyG's order, each map drawing its initial weights as PyG's does
        self.lin_msg = linear(src_width, width, bias=bias)
        if not directed_msg:  # (PyG's takes the source width for x_i too)
            self.lin_msg_i = linear(src_width, width, bias=bias)
        self.lin_self = linear(dst_width, out_channels, bias=bias) \
            if skip_linear or in_channels != out_channels else torch.nn.Identity()
        if in_edge_channels is not None:
            self.lin_edge = linear(in_edge_channels, width, bias=bias)
        if attention and attention_type == "additive":
            self.att_msg = torch.nn.Parameter(torch.empty(1, heads, out_channels))
        elif attention:
            self.register_buffer("scaler", torch.tensor(out_channels, dtype=torch.float).sqrt())
        self._reset_as_pyg()

    def _reset_as_pyg(self) -> None:
        """PyG's ``reset_parameters``: every map but ``lin_msg_i``, then the attention."""
        self.aggr_module.reset_parameters()
        for name in ("lin_msg", "lin_self", "lin_edge"):
            module = getattr(self, name, None)
            if module is not None and hasattr(module, "reset_parameters") and \
                    not isinstance(module, torch.nn.LazyLinear):  # (drawn at the first call)
                module.reset_parameters()
        if hasattr(self, "att_msg"):
            glorot(self.att_msg)

    def reset_parameters(self) -> None:
        self._reset_as_pyg()
        if not self.directed_msg and not isinstance(self.lin_msg_i, torch.nn.LazyLinear):
            self.lin_msg_i.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None
                ) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features_with_root(self, inputs, self.in_channels,
                                                  "lin_self(x_dst)")
        graph = inputs.graph.in_csr_order()
        edge_attr = self._edge_features(inputs, edge_attr)
        mask = explain_mask(self, inputs)
        out = self._aggregate(graph, x_src, x_dst, edge_attr,
                              None if mask is None else inputs.graph.to_csr_order(mask))
        out = out.view(out.size(0), self.heads, self.out_channels).mean(dim=1)
        out = out + self.lin_self(x_dst)
        if self.normalize_l2:
            out = F.normalize(out, p=2.0, dim=-1)
        return inputs.node_output(out)

    def _edge_features(self, inputs, edge_attr: Tensor | None) -> Tensor | None:
        """The call's edge features ``[E, D]`` in CSR order: ``edge_attr``, else a sparse
        adjacency's ``[E, D]`` values, else the Graph's own (for a layer with
        ``in_edge_channels``); None where there are none."""
        if edge_attr is not None and self.in_edge_channels is None:
            raise ValueError(f"GeneralConv was built without in_edge_channels, so the "
                             f"edge_attr of shape {list(getattr(edge_attr, 'shape', ()))} "
                             "would be ignored; build it with in_edge_channels")
        if self.in_edge_channels is None:
            return None
        edge_attr = edge_feature_rows(self, inputs, edge_attr, self.in_edge_channels,
                                      "in_edge_channels")
        return None if edge_attr is None else inputs.graph.to_csr_order(edge_attr)

    def _aggregate(self, graph, x_src: Tensor, x_dst: Tensor, edge_attr: Tensor | None,
                   mask: Tensor | None) -> Tensor:
        """The aggregated (attention-weighted) messages of every head, ``[N_dst, H C]``;
        each message times an explainer's ``mask`` entry (CSR order) where one is set."""
        # each map acts per node, on the rows PyG's per-edge maps read (read_rows_only)
        x_src = read_rows_only(x_src, sources_read(graph))
        x_dst = read_rows_only(x_dst, destinations_read(graph))
        h_src = self.lin_msg(x_src)
        per_node = self.directed_msg and edge_attr is None  # each message is h_src[j]
        messages = None if per_node else self._edge_messages(graph, h_src, x_src, x_dst,
                                                             edge_attr, swapped=False)
        fused_sum = per_node and self.aggr in ("add", "sum") and mask is None
        if not self.attention:
            if per_node:  # (the weights multiply the messages)
                return self.aggr_module(graph, h_src, mask)
            if mask is not None:
                messages = messages * mask.unsqueeze(-1)
            return self.aggr_module(aggregations.per_edge(graph), messages)
        heads = h_src.view(h_src.size(0), self.heads, self.out_channels)
        if self.attention_type == "additive" and fused_sum:
            src_scores = (heads * self.att_msg).sum(-1)
            return ops.additive_attention(graph, src_scores, src_scores.new_zeros(
                x_dst.size(0), self.heads), heads, _NEGATIVE_SLOPE).flatten(1)
        scores = self._scores(graph, heads, messages, x_src, x_dst, edge_attr)
        scores = F.leaky_relu(scores, _NEGATIVE_SLOPE)
        if fused_sum:
            return ops.segment_attention(graph, scores, heads).flatten(1)
        if messages is None:
            messages = h_src.index_select(0, graph.edge_index[0])
        alpha = ops.segment_softmax(graph, scores)
        if mask is not None:
            alpha = alpha * mask.unsqueeze(-1)
        weighted = messages.view(-1, self.heads, self.out_channels) * alpha.unsqueeze(-1)
        return self.aggr_module(aggregations.per_edge(graph), weighted.flatten(1))

    def _scores(self, graph, heads: Tensor, messages: Tensor | None, x_src: Tensor,
                x_dst: Tensor, edge_attr: Tensor | None) -> Tensor:
        """The attention scores ``[E, H]`` before the leaky ReLU, in CSR order."""
        if self.attention_type == "additive":
            if messages is None:
                return (heads * self.att_msg).sum(-1).index_select(0, graph.edge_index[0])
            return (messages.view(-1, self.heads, self.out_channels) * self.att_msg).sum(-1)
        scale = self.scaler.to(heads.dtype)
        if messages is None:  # <W x_i, W x_j> per head
            at_dst = self.lin_msg(_as_source_width(self, x_dst, "x_dst"))
            return ops.sddmm(graph, heads, at_dst.view(-1, self.heads, self.out_channels),
                             "dot") / scale
        swapped = self._edge_messages(graph, None, x_src, x_dst, edge_attr, swapped=True)
        products = swapped.view(-1, self.heads, self.out_channels) * \
            messages.view(-1, self.heads, self.out_channels)
        return products.sum(-1) / scale

    def _edge_messages(self, graph, h_src: Tensor | None, x_src: Tensor, x_dst: Tensor,
                       edge_attr: Tensor | None, swapped: bool) -> Tensor:
        """PyG's ``message_basic`` per edge ``j -> i`` in CSR order, ``[E, H C]``: ``W_msg
        x_j [+ W_msg,i x_i] [+ W_e e_ji]``; ``swapped`` reads ``x_i`` for ``x_j`` and back
        (the dot product's other side). Each map acts per node, on the end it reads."""
        undirected = not self.directed_msg
        x_dst = _as_source_width(self, x_dst, "x_dst") if swapped or undirected else x_dst
        if swapped:  # W_msg x_i [+ W_msg,i x_j], in PyG's call order
            at_dst = self.lin_msg(x_dst)
            at_src = self.lin_msg_i(x_src) if undirected else None
        else:  # W_msg x_j [+ W_msg,i x_i]
            at_src, at_dst = h_src, self.lin_msg_i(x_dst) if undirected else None
        src, dst = graph.edge_index
        if at_dst is None:
            messages = at_src.index_select(0, src)
        elif at_src is None:
            messages = at_dst.index_select(0, dst)
        else:
            messages = ops.sddmm(graph, at_src, at_dst, "add")
        if edge_attr is not None:
            messages = messages + mapped_edge_features(self, self.lin_edge, edge_attr)
        return messages

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def _as_source_width(layer: GeneralConv, x: Tensor, name: str) -> Tensor:
    """``x`` for a map of the source width (PyG's ``lin_msg`` and ``lin_msg_i`` take
    ``in_channels[0]`` for both ends): a clear error where the widths differ."""
    width = getattr(layer.lin_msg, "in_features", 0)
    if width and x.size(-1) != width:
        raise ValueError(f"GeneralConv: {name} has {x.size(-1)} features, but its messages "
                         f"map the source width {width} at both ends (undirected messages "
                         "or dot-product attention need equal widths)")
    return x
