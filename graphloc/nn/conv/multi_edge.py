r"""MEGA-GNN (`Bilgi et al., "Multigraph Message Passing with Bi-Directional Multi-Edge
Aggregation", arXiv 2412.00241 <https://arxiv.org/abs/2412.00241>`_): message passing on
multigraphs in two stages. Stage 1 aggregates the parallel edges of each ordered (src, dst)
pair into one pair state; stage 2 runs a GINE convolution over the distinct neighbours
with the pair states as edge features. Pairs come from ``Graph.edge_groups`` (ids, not
Python dictionaries) and every aggregation is a segment op of the engine.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.graph import Graph
from graphloc.nn.aggr import degree_averages
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._utils import check_input, check_sizes
from graphloc.nn.conv.gin import GINEConv
from graphloc.nn.dropout import Dropout

EDGE_AGGREGATORS = ("sum", "mean", "max", "gin", "pna", "gru", "transformer")
#: the aggregators that read the rows in time order (``order``: the edges' timestamps)
ORDERED_AGGREGATORS = ("gru", "transformer")
#: the official ``TransformerAgg``: 2 heads, a feed-forward 4 times as wide, no dropout
#: inside the layer, 0.05 on the positionally encoded input
TRANSFORMER_HEADS, TRANSFORMER_INPUT_DROPOUT = 2, 0.05


def _mlp(in_channels: int, hidden: int, out_channels: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(in_channels, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, out_channels))


class Aggregation(torch.nn.Module):
    """Reduces rows ``values [M, C]`` into ``size`` groups by ``index [M]``.

    ``kind``: ``"sum"``, ``"mean"``, ``"max"`` (empty groups give 0); ``"gin"`` (an MLP
    on the sum); ``"pna"`` (mean, min, max and std, each times the identity, amplification
    ``log(P + 1) / delta`` and attenuation ``delta / log(P + 1)`` degree scalers with ``P``
    the group size, then a linear map; the std is PyG's, 0 below sqrt(1e-5), as the
    official code's ``DegreeScalerAggregation``); ``"gru"`` (a 2-layer GRU over each group's rows in
    ``order`` order, its outputs averaged: order-aware, so not permutation invariant
    unless ``order`` is strict); ``"transformer"`` (the official ``TransformerAgg``: each
    group's rows in ``order`` order plus sinusoidal positions, dropout 0.05, one
    post-norm ``TransformerEncoderLayer`` of 2 heads attending within the group, its
    outputs averaged; ``channels`` must be even).

    PNA's ``delta`` is a constant of the model, as in PyG's ``PNAConv(deg=...)`` and the
    official MEGA-GNN: the mean ``log(P + 1)`` over the training graph's groups, from
    ``deg`` (a histogram, ``deg[i]`` = number of groups of size ``i``) or, when ``deg`` is
    None, from the first forward in training mode; it is kept in the buffer ``pna_delta``
    (saved with the weights), so a group's state never depends on other, unrelated groups.
    """

    def __init__(self, kind: str, channels: int, deg: Tensor | None = None):
        super().__init__()
        if kind not in EDGE_AGGREGATORS:
            raise ValueError(f"edge aggregator must be one of {EDGE_AGGREGATORS}, got {kind!r}")
        self.kind = kind
        if kind == "gin":
            self.mlp = _mlp(channels, channels, channels)
        elif kind == "pna":
            self.lin = torch.nn.Linear(12 * channels, channels)
            self.register_buffer("pna_delta", torch.tensor(float("nan")))
            if deg is not None:
                self.pna_delta.fill_(pna_delta(deg))
        elif kind == "gru":
            self.gru = torch.nn.GRU(channels, channels, num_layers=2)
        elif kind == "transformer":
            if channels % TRANSFORMER_HEADS:
                raise ValueError(f"the transformer aggregator's {TRANSFORMER_HEADS} heads need "
                                 f"an even channel count, got {channels}")
            self.trans_enc = torch.nn.TransformerEncoderLayer(
                channels, TRANSFORMER_HEADS, dim_feedforward=4 * channels, dropout=0.0,
                batch_first=True)
            self.input_dropout = Dropout(TRANSFORMER_INPUT_DROPOUT)

    def forward(self, values: Tensor, index: Tensor, size: int,
                order: Tensor | None = None) -> Tensor:
        if self.kind in ("sum", "mean", "max"):
            return ops.scatter(values, index, 0, dim_size=size, reduce=self.kind)
        if self.kind == "gin":
            return self.mlp(ops.scatter(values, index, 0, dim_size=size, reduce="sum"))
        if self.kind == "pna":
            return self.lin(self._pna(values, index, size))
        if order is None:
            raise ValueError(f"the {self.kind} aggregator needs an order (edge timestamps)")
        if self.kind == "gru":
            return self._gru(values, index, size, order)
        return self._transformer(values, index, size, order)

    def _pna(self, values: Tensor, index: Tensor, size: int) -> Tensor:
        mean = ops.scatter(values, index, 0, dim_size=size, reduce="mean")
        # the official code's std is PyG's StdAggregation: sqrt(var) with variances below
        # 1e-5 giving 0 (a one-edge pair's std is 0, not sqrt(1e-5)); var is the mean
        # squared deviation, PyG's mean(x^2) - mean(x)^2 without its cancellation where
        # the mean dwarfs the spread (graphloc.nn.aggr.VarAggregation)
        deviation = values - mean.index_select(0, index)
        variance = ops.scatter(deviation * deviation, index, 0, dim_size=size, reduce="mean")
        std = variance.clamp(min=1e-5).sqrt()
        std = std.masked_fill(std <= math.sqrt(1e-5), 0.0)
        stats = torch.cat([mean, ops.scatter(values, index, 0, dim_size=size, reduce="min"),
                           ops.scatter(values, index, 0, dim_size=size, reduce="max"), std], 1)
        count = torch.bincount(index, minlength=size)
        log_count = count.to(values.dtype).add(1).log()
        seen = count > 0
        stats = stats * seen.unsqueeze(1)  # empty groups: all zero
        if self.pna_delta.isnan():
            if not self.training:
                raise RuntimeError("the PNA aggregator has no degree statistics yet: pass "
                                   "deg= (a histogram of the training graph's group sizes) "
                                   "or run a forward in training mode first")
            if not bool(seen.any()):
                raise ValueError("the PNA aggregator takes its degree statistics from its "
                                 "first training forward, but this graph has no edges: pass "
                                 "deg= (a histogram of the training graph's group sizes)")
            self.pna_delta.fill_(pna_delta(torch.bincount(count[seen])))
        delta = self.pna_delta.to(values.dtype)
        scale = log_count.unsqueeze(1)
        return torch.cat([stats, stats * scale / delta,
                          stats * delta / scale.clamp_min(1e-6)], dim=1)

    def _gru(self, values: Tensor, index: Tensor, size: int, order: Tensor) -> Tensor:
        # A PackedSequence built directly: time step t holds the t-th row of every group
        # longer than t, groups by decreasing length; no padding to the longest group.
        if values.size(0) == 0:  # no groups: every output the empty mean, 0
            return values.new_zeros(size, self.gru.hidden_size)
        by_group = _by_group_in_time_order(index, order)
        group = index[by_group]
        lengths = torch.bincount(index, minlength=size)
        starts = torch.cumsum(lengths, 0) - lengths
        step = torch.arange(group.numel(), device=values.device) - starts[group]
        rank = torch.empty_like(lengths)
        rank[torch.sort(lengths, descending=True, stable=True).indices] = torch.arange(
            size, device=values.device)
        batch_sizes = torch.bincount(step, minlength=int(lengths.max()))
        step_start = torch.cumsum(batch_sizes, 0) - batch_sizes
        packed_pos = step_start[step] + rank[group]
        data = torch.empty_like(values).index_copy_(0, packed_pos, values[by_group])
        out, _ = self.gru(PackedSequence(data, batch_sizes.cpu()))
        return ops.scatter(out.data.index_select(0, packed_pos), group, 0, dim_size=size,
                           reduce="mean")

    def _transformer(self, values: Tensor, index: Tensor, size: int, order: Tensor) -> Tensor:
        # The groups of each length run as one dense batch [groups, length, C]: every
        # group attends to its own rows only and averages over them, with positions 0 ..
        # length - 1 in time order. (The official pads every group of a batch to the
        # longest, averages over the padded length and sorts the padding's zero
        # timestamps among the real ones, so a pair's state depends on the other pairs of
        # its batch; docs/models.md.)
        by_group = _by_group_in_time_order(index, order)
        lengths = torch.bincount(index, minlength=size)
        starts = torch.cumsum(lengths, 0) - lengths  # each group's first row in by_group
        out = values.new_zeros(size, values.size(1))
        for length in torch.unique(lengths[lengths > 0]).tolist():
            members = torch.nonzero(lengths == length).flatten()
            # [groups, length]: the rows of the groups of this length, into by_group
            rows = starts[members].unsqueeze(1) + torch.arange(length, device=index.device)
            dense = values[by_group[rows]] + _positions(length, values)
            encoded = self.trans_enc(self.input_dropout(dense))
            out = out.index_copy(0, members, encoded.mean(1))
        return out


def _by_group_in_time_order(index: Tensor, order: Tensor) -> Tensor:
    """The rows sorted by group, and within a group by ``order`` (stable: ties keep the
    rows' order)."""
    by_time = torch.sort(order, stable=True).indices
    return by_time[torch.sort(index[by_time], stable=True).indices]


def _positions(length: int, like: Tensor) -> Tensor:
    """The official ``PositionalEncoding``'s sinusoids for positions 0 .. length - 1:
    ``sin`` on the even channels, ``cos`` on the odd ones, ``[length, C]``. Computed in
    float32, as the official's buffer is (a float64 model casts those values)."""
    channels = like.size(1)
    position = torch.arange(length, dtype=torch.float32, device=like.device).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, channels, 2, device=like.device).float()
                          * (-math.log(10000.0) / channels))
    table = torch.zeros(length, channels, device=like.device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table.to(like.dtype)


def pna_delta(deg: Tensor) -> float:
    """PNA's ``delta`` from a histogram of group sizes (``deg[i]`` groups of size ``i``, as
    PyG's ``PNAConv(deg=...)``): the mean of ``log(i + 1)`` over the groups, in float64."""
    return degree_averages(deg, torch.float64)[1]


def group_size_histogram(graph: Graph) -> Tensor:
    """``deg`` for the PNA aggregator: how many ordered pairs have 0, 1, 2, ... parallel
    edges in ``graph`` (give it the training graph)."""
    group, num_pairs = graph.edge_groups()
    return torch.bincount(torch.bincount(group, minlength=num_pairs))


class _Direction(torch.nn.Module):
    """One direction's parameters: pair aggregation, GINE, optional edge update."""

    def __init__(self, channels: int, edge_agg: str | None, node_agg: str, edge_update: bool,
                 train_eps: bool, deg: Tensor | None):
        super().__init__()
        self.edge_agg = Aggregation(edge_agg, channels, deg) if edge_agg else None
        self.node_agg = Aggregation(node_agg, channels, deg) if node_agg != "sum" else None
        # edge_dim: a Linear on the pair states before they join x_src, as the official
        # GINEConv(..., edge_dim=hidden)
        self.gine = GINEConv(_mlp(channels, channels, channels), train_eps=train_eps,
                             edge_dim=channels)
        self.edge_mlp = _mlp(3 * channels, channels, channels) if edge_update else None

    def messages(self, x: Tensor, graph: Graph, e: Tensor, time: Tensor | None,
                 reverse: bool) -> tuple[Tensor, Tensor | None]:
        """c [N, C] of this direction, and the pair state of every edge (None without
        stage 1: the edge update then reads the destination's state)."""
        if self.edge_agg is None:  # GINE over every parallel edge
            pair_graph, pair_state, edge_context = _directed(graph, reverse), e, None
        else:
            group, num_pairs = graph.edge_groups()
            pair_graph = _pair_graph(graph, reverse)
            pair_state = self.edge_agg(e, group, num_pairs, time)
            edge_context = pair_state.index_select(0, group)
        if self.node_agg is None:
            return self.gine(x, pair_graph, pair_state), edge_context
        ps, pd = pair_graph.edge_index
        messages = torch.relu(x.index_select(0, ps) + self.gine.lin(pair_state))
        out = self.gine.nn((1 + self.gine.eps) * x + self.node_agg(messages, pd, x.size(0)))
        return out, edge_context

    def edge_update(self, x: Tensor, graph: Graph, e: Tensor, edge_context: Tensor | None,
                    reverse: bool) -> Tensor:
        """``½ MLP([x_src ‖ pair state ‖ e])`` per edge (``[x_src ‖ x_dst ‖ e]`` without
        stage 1), the direction's source and destination."""
        src, dst = graph.edge_index
        if reverse:
            src, dst = dst, src
        context = x.index_select(0, dst) if edge_context is None else edge_context
        return self.edge_mlp(torch.cat([x.index_select(0, src), context, e], 1)) / 2


def _pair_graph(graph: Graph, reverse: bool) -> Graph:
    """The graph of distinct ordered pairs, edge ``g`` being pair ``g`` of ``edge_groups``
    (``coalesce`` keeps that order), flipped for the reverse direction; cached."""
    def build():
        pairs = graph.coalesce().edge_index
        return Graph(pairs.flip(0) if reverse else pairs, num_nodes=graph.num_nodes)
    return graph.cached(("mega_pairs", reverse), build)


def _directed(graph: Graph, reverse: bool) -> Graph:
    return graph.reversed() if reverse else graph


class MultiEdgeConv(ConvModule):
    r"""One MEGA-GNN layer on node states ``x [N, C]`` and per-edge states ``e [E, C]``:

    .. math::
        h_{ij} = \mathrm{EdgeAgg}\{e_{ijp}\}_p, \qquad
        c_j = \mathrm{MLP}\Big((1 + \epsilon) x_j + \sum_{i \in N(j)}
        \mathrm{ReLU}(x_i + W h_{ij})\Big)

    (GINE over the distinct neighbours, pair states as edge features through a Linear
    ``W``, as the official ``GINEConv(edge_dim=hidden)``) and, with ``edge_update``,
    :math:`e'_{ijp} = e_{ijp} + \tfrac12 \mathrm{MLP}([x_i \Vert h_{ij} \Vert e_{ijp}])`
    (the pair state broadcast back to its edges). ``edge_agg=None`` skips stage 1: GINE over
    every parallel edge (the Multi-GNN baseline, edge update on :math:`[x_i \Vert x_j \Vert
    e]`). ``node_agg`` replaces stage 2's sum by another :class:`Aggregation` (e.g.
    ``"pna"``). The node update :math:`\tfrac12 (x + \mathrm{ReLU}(\mathrm{BN}(c)))` is the
    model's (:class:`MEGAGNN`), which calls ``aggregate``, updates the nodes, then
    ``update_edges`` with the updated node states, as the official code; ``forward`` (the
    layer alone) updates the edges from its input ``x``.

    Bi-directional: the reverse direction (every edge flipped, the same pairs) has its own
    parameters and the two directions' ``c`` are averaged (the official ``to_hetero(...,
    aggr="mean")``). Its edge states are separate when ``e`` is a pair ``(e_forward,
    e_reverse)`` (the official: reversed edges are another relation with their own states),
    or shared when ``e`` is one tensor (each edge then gets the mean of the two updates).

    Args:
        channels (int): width C of node and edge states.
        edge_agg (str or None, default "sum"): one of ``EDGE_AGGREGATORS``; ``"gru"`` needs
            ``time``.
        node_agg (str, default "sum"): stage 2's aggregation.
        bidirectional (bool, default False), edge_update (bool, default False),
        train_eps (bool, default False): GINE's learnable epsilon.
        deg (Tensor, optional): histogram of the training graph's group sizes for the PNA
            aggregators (:func:`group_size_histogram`); else taken from the first training
            forward.

    Shapes: ``forward(x, graph, e, time=None) -> (c [N, C], e')``, ``e'`` shaped like ``e``.
    """

    pyg_aggr = None  # takes no aggr: no PyG twin

    def __init__(self, channels: int, edge_agg: str | None = "sum", node_agg: str = "sum",
                 bidirectional: bool = False, edge_update: bool = False,
                 train_eps: bool = False, deg: Tensor | None = None):
        super().__init__()
        check_sizes("MultiEdgeConv", channels=channels)
        check_flags("MultiEdgeConv", bidirectional=bidirectional, edge_update=edge_update,
                    train_eps=train_eps)
        if node_agg not in ("sum", *EDGE_AGGREGATORS) or node_agg in ORDERED_AGGREGATORS:
            raise ValueError(f"node_agg must be 'sum', 'mean', 'max', 'gin' or 'pna', got "
                             f"{node_agg!r}")
        if deg is not None and "pna" not in (edge_agg, node_agg):
            # a histogram passed for nothing is a sign the caller meant another aggregator
            raise ValueError(f"deg (the PNA histogram) is only read by the 'pna' aggregator, "
                             f"but edge_agg={edge_agg!r} and node_agg={node_agg!r}")
        self.channels, self.bidirectional = channels, bidirectional
        args = (channels, edge_agg, node_agg, edge_update, train_eps, deg)
        self.forward_dir = _Direction(*args)
        self.reverse_dir = _Direction(*args) if bidirectional else None

    def _edge_states(self, graph: Graph, e) -> tuple[Tensor, Tensor]:
        separate = isinstance(e, (tuple, list))
        if separate and (len(e) != 2 or not self.bidirectional):
            raise ValueError("e may be a pair (e_forward, e_reverse) only for a "
                             "bidirectional layer")
        states = tuple(e) if separate else (e, e)
        for name, t in zip(("e", "e_reverse"), states, strict=True):
            if not isinstance(t, Tensor) or t.shape != (graph.num_edges, self.channels):
                raise ValueError(f"{name} must have shape [{graph.num_edges}, "
                                 f"{self.channels}], got {list(getattr(t, 'shape', []))}")
        return states

    def aggregate(self, x: Tensor, graph: Graph, e, time: Tensor | None = None):
        """Stages 1 and 2: ``c [N, C]`` and the per-edge contexts ``update_edges`` needs."""
        check_input(self, x, self.channels)
        e_forward, e_reverse = self._edge_states(graph, e)
        if time is not None and time.shape != (graph.num_edges,):
            raise ValueError(f"time must have shape [{graph.num_edges}], got "
                             f"{list(time.shape)}")
        out, context = self.forward_dir.messages(x, graph, e_forward, time, reverse=False)
        contexts = [context]
        if self.reverse_dir is not None:
            out_rev, context_rev = self.reverse_dir.messages(x, graph, e_reverse, time,
                                                             reverse=True)
            out = (out + out_rev) / 2
            contexts.append(context_rev)
        return out, contexts

    def update_edges(self, x: Tensor, graph: Graph, e, contexts):
        """The edge states after the edge update (unchanged without ``edge_update``),
        read from node states ``x``."""
        if self.forward_dir.edge_mlp is None:
            return e
        e_forward, e_reverse = self._edge_states(graph, e)
        update = self.forward_dir.edge_update(x, graph, e_forward, contexts[0], reverse=False)
        if self.reverse_dir is None:
            return e_forward + update
        update_rev = self.reverse_dir.edge_update(x, graph, e_reverse, contexts[1],
                                                  reverse=True)
        if isinstance(e, (tuple, list)):
            return e_forward + update, e_reverse + update_rev
        return e_forward + (update + update_rev) / 2

    def forward(self, x: Tensor, graph: Graph, e, time: Tensor | None = None):
        out, contexts = self.aggregate(x, graph, e, time)
        return out, self.update_edges(x, graph, e, contexts)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.channels}, "
                f"bidirectional={self.bidirectional})")
