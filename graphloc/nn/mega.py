r"""MEGA-GNN (`Bilgi et al., "Multigraph Message Passing with Bi-Directional Multi-Edge
Aggregation", arXiv 2412.00241 <https://arxiv.org/abs/2412.00241>`_): message passing on
multigraphs in two stages. Stage 1 aggregates the parallel edges of each ordered (src, dst)
pair into one pair state; stage 2 runs a GINE convolution over the distinct neighbours
with the pair states as edge features. Pairs come from ``Graph.edge_groups`` (ids, not
Python dictionaries) and every aggregation is a segment op of the engine.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from graphloc import ops
from graphloc.graph import Graph
from graphloc.nn.conv._utils import check_dropouts, check_input, check_sizes
from graphloc.nn.conv.gin import GINEConv
from graphloc.ops.scatter import _check_index

EDGE_AGGREGATORS = ("sum", "mean", "max", "gin", "pna", "gru")


def _mlp(in_channels: int, hidden: int, out_channels: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(in_channels, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, out_channels))


class Aggregation(torch.nn.Module):
    """Reduces rows ``values [M, C]`` into ``size`` groups by ``index [M]``.

    ``kind``: ``"sum"``, ``"mean"``, ``"max"`` (empty groups give 0); ``"gin"`` (an MLP
    on the sum); ``"pna"`` (mean, min, max and std, each times the identity, amplification
    ``log(P + 1) / delta`` and attenuation ``delta / log(P + 1)`` degree scalers with ``P``
    the group size and ``delta`` the mean ``log(P + 1)`` over the groups seen, then a
    linear map); ``"gru"`` (a 2-layer GRU over each group's rows in ``order`` order, its
    outputs averaged: order-aware, so not permutation invariant unless ``order`` is strict).
    """

    def __init__(self, kind: str, channels: int):
        super().__init__()
        if kind not in EDGE_AGGREGATORS:
            raise ValueError(f"edge aggregator must be one of {EDGE_AGGREGATORS}, got {kind!r}")
        self.kind = kind
        if kind == "gin":
            self.mlp = _mlp(channels, channels, channels)
        elif kind == "pna":
            self.lin = torch.nn.Linear(12 * channels, channels)
        elif kind == "gru":
            self.gru = torch.nn.GRU(channels, channels, num_layers=2)

    def forward(self, values: Tensor, index: Tensor, size: int,
                order: Tensor | None = None) -> Tensor:
        if self.kind in ("sum", "mean", "max"):
            return ops.scatter(values, index, 0, dim_size=size, reduce=self.kind)
        if self.kind == "gin":
            return self.mlp(ops.scatter(values, index, 0, dim_size=size, reduce="sum"))
        if self.kind == "pna":
            return self.lin(self._pna(values, index, size))
        if order is None:
            raise ValueError("the gru aggregator needs an order (edge timestamps)")
        return self._gru(values, index, size, order)

    def _pna(self, values: Tensor, index: Tensor, size: int) -> Tensor:
        mean = ops.scatter(values, index, 0, dim_size=size, reduce="mean")
        square = ops.scatter(values * values, index, 0, dim_size=size, reduce="mean")
        std = (square - mean * mean).clamp_min(0).add(1e-5).sqrt()
        stats = torch.cat([mean, ops.scatter(values, index, 0, dim_size=size, reduce="min"),
                           ops.scatter(values, index, 0, dim_size=size, reduce="max"), std], 1)
        log_count = torch.bincount(index, minlength=size).to(values.dtype).add(1).log()
        seen = log_count > 0
        stats = stats * seen.unsqueeze(1)  # empty groups: all zero
        delta = log_count[seen].mean().clamp_min(1e-6)
        scale = log_count.unsqueeze(1)
        return torch.cat([stats, stats * scale / delta,
                          stats * delta / scale.clamp_min(1e-6)], dim=1)

    def _gru(self, values: Tensor, index: Tensor, size: int, order: Tensor) -> Tensor:
        # A PackedSequence built directly: time step t holds the t-th row of every group
        # longer than t, groups by decreasing length; no padding to the longest group.
        by_group = torch.sort(order, stable=True).indices
        by_group = by_group[torch.sort(index[by_group], stable=True).indices]
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


class _Direction(torch.nn.Module):
    """One direction's parameters: pair aggregation, GINE, optional edge update."""

    def __init__(self, channels: int, edge_agg: str | None, node_agg: str, edge_update: bool,
                 train_eps: bool):
        super().__init__()
        self.edge_agg = Aggregation(edge_agg, channels) if edge_agg else None
        self.node_agg = Aggregation(node_agg, channels) if node_agg != "sum" else None
        self.gine = GINEConv(_mlp(channels, channels, channels), train_eps=train_eps)
        self.edge_mlp = _mlp(3 * channels, channels, channels) if edge_update else None

    def forward(self, x: Tensor, graph: Graph, e: Tensor, time: Tensor | None,
                reverse: bool) -> tuple[Tensor, Tensor | None]:
        src, dst = graph.edge_index
        if reverse:
            src, dst = dst, src
        if self.edge_agg is None:  # GINE over every parallel edge
            pair_graph, pair_state = _directed(graph, reverse), e
            edge_context = x.index_select(0, dst)
        else:
            group, num_pairs = graph.edge_groups()
            pair_graph = _pair_graph(graph, reverse)
            pair_state = self.edge_agg(e, group, num_pairs, time)
            edge_context = pair_state.index_select(0, group)
        if self.node_agg is None:
            out = self.gine(x, pair_graph, pair_state)
        else:
            ps, pd = pair_graph.edge_index
            messages = torch.relu(x.index_select(0, ps) + pair_state)
            out = self.gine.nn((1 + self.gine.eps) * x + self.node_agg(messages, pd,
                                                                       x.size(0)))
        if self.edge_mlp is None:
            return out, None
        return out, self.edge_mlp(torch.cat([x.index_select(0, src), edge_context, e], 1)) / 2


def _pair_graph(graph: Graph, reverse: bool) -> Graph:
    """The graph of distinct ordered pairs, edge ``g`` being pair ``g`` of ``edge_groups``
    (``coalesce`` keeps that order), flipped for the reverse direction; cached."""
    def build():
        pairs = graph.coalesce().edge_index
        return Graph(pairs.flip(0) if reverse else pairs, num_nodes=graph.num_nodes)
    return graph.cached(("mega_pairs", reverse), build)


def _directed(graph: Graph, reverse: bool) -> Graph:
    if not reverse:
        return graph
    return graph.cached("mega_reversed", lambda: Graph(graph.edge_index.flip(0),
                                                       num_nodes=graph.num_nodes))


class MultiEdgeConv(torch.nn.Module):
    r"""One MEGA-GNN layer on node states ``x [N, C]`` and per-edge states ``e [E, C]``:

    .. math::
        h_{ij} = \mathrm{EdgeAgg}\{e_{ijp}\}_p, \qquad
        c_j = \mathrm{MLP}\Big((1 + \epsilon) x_j + \sum_{i \in N(j)}
        \mathrm{ReLU}(x_i + h_{ij})\Big)

    (GINE over the distinct neighbours, pair states as edge features) and, with
    ``edge_update``, :math:`e'_{ijp} = e_{ijp} + \tfrac12 \mathrm{MLP}([x_i \Vert h_{ij}
    \Vert e_{ijp}])` (the pair state broadcast back to its edges; the official code feeds the
    node states after the layer's update, here the layer's input, which keeps the layer
    self-contained). Bi-directional: the reverse direction (every edge flipped, the same
    pairs) has its own parameters; the two directions' outputs and edge updates are
    averaged. ``edge_agg=None`` skips stage 1: GINE over every parallel edge (the Multi-GNN
    baseline, edge update on :math:`[x_i \Vert x_j \Vert e]`). ``node_agg`` replaces stage
    2's sum by another :class:`Aggregation` (e.g. ``"pna"``). The node update
    :math:`\tfrac12 (x + \mathrm{ReLU}(\mathrm{BN}(c)))` is the model's (:class:`MEGAGNN`).

    Args:
        channels (int): width C of node and edge states.
        edge_agg (str or None, default "sum"): one of ``EDGE_AGGREGATORS``; ``"gru"`` needs
            ``time``.
        node_agg (str, default "sum"): stage 2's aggregation.
        bidirectional (bool, default False), edge_update (bool, default False),
        train_eps (bool, default False): GINE's learnable epsilon.

    Shapes: ``forward(x, graph, e, time=None) -> (c [N, C], e' [E, C])``.
    """

    def __init__(self, channels: int, edge_agg: str | None = "sum", node_agg: str = "sum",
                 bidirectional: bool = False, edge_update: bool = False,
                 train_eps: bool = False):
        super().__init__()
        check_sizes("MultiEdgeConv", channels=channels)
        if node_agg not in ("sum", *EDGE_AGGREGATORS) or node_agg == "gru":
            raise ValueError(f"node_agg must be 'sum', 'mean', 'max', 'gin' or 'pna', got "
                             f"{node_agg!r}")
        self.channels, self.bidirectional = channels, bidirectional
        args = (channels, edge_agg, node_agg, edge_update, train_eps)
        self.forward_dir = _Direction(*args)
        self.reverse_dir = _Direction(*args) if bidirectional else None

    def forward(self, x: Tensor, graph: Graph, e: Tensor,
                time: Tensor | None = None) -> tuple[Tensor, Tensor]:
        check_input(self, x, self.channels)
        if e.dim() != 2 or e.shape != (graph.num_edges, self.channels):
            raise ValueError(f"e must have shape [{graph.num_edges}, {self.channels}], got "
                             f"{list(e.shape)}")
        if time is not None and time.shape != (graph.num_edges,):
            raise ValueError(f"time must have shape [{graph.num_edges}], got "
                             f"{list(time.shape)}")
        out, update = self.forward_dir(x, graph, e, time, reverse=False)
        if self.reverse_dir is not None:
            out_rev, update_rev = self.reverse_dir(x, graph, e, time, reverse=True)
            out = (out + out_rev) / 2
            update = None if update is None else (update + update_rev) / 2
        return out, e if update is None else e + update

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.channels}, "
                f"bidirectional={self.bidirectional})")


class MEGAGNN(torch.nn.Module):
    """MEGA-GNN: node and edge embeddings, ``num_layers`` :class:`MultiEdgeConv` each
    followed by the node update ``x = (x + ReLU(BN(c))) / 2``, and a readout, for edge
    classification (readout MLP on ``[ReLU([x_src, x_dst]) ‖ e]``,
    3h -> 50 -> 25 -> out, as the official code) or node classification (an MLP on x).

    Args:
        node_in, edge_in (int): input feature widths (AML: constant node features).
        hidden (int), out_channels (int), num_layers (int, default 2).
        edge_agg (str or None, default "sum"), node_agg (str, default "sum"),
        bidirectional (bool, default True), edge_update (bool, default True): per layer.
        dropout (float, default 0.0): after each layer; ``final_dropout`` in the readout.
        task (str, default "edge"): "edge" or "node".

    Forward: ``model(x, graph, edge_attr, time=None, edges=None)``: logits of the edges in
    ``edges`` (all when None) or of every node.
    """

    def __init__(self, node_in: int, edge_in: int, hidden: int, out_channels: int,
                 num_layers: int = 2, edge_agg: str | None = "sum", node_agg: str = "sum",
                 bidirectional: bool = True, edge_update: bool = True, dropout: float = 0.0,
                 final_dropout: float = 0.0, task: str = "edge"):
        super().__init__()
        check_sizes("MEGAGNN", node_in=node_in, edge_in=edge_in, hidden=hidden,
                    out_channels=out_channels, num_layers=num_layers)
        check_dropouts("MEGAGNN", dropout=dropout, final_dropout=final_dropout)
        if task not in ("edge", "node"):
            raise ValueError(f"task must be 'edge' or 'node', got {task!r}")
        self.task = task
        self.node_emb = torch.nn.Linear(node_in, hidden)
        self.edge_emb = torch.nn.Linear(edge_in, hidden)
        self.convs = torch.nn.ModuleList(
            MultiEdgeConv(hidden, edge_agg, node_agg, bidirectional, edge_update)
            for _ in range(num_layers))
        self.norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(hidden)
                                         for _ in range(num_layers))
        self.dropout = torch.nn.Dropout(dropout)
        width = 3 * hidden if task == "edge" else hidden
        self.readout = torch.nn.Sequential(
            torch.nn.Linear(width, 50), torch.nn.ReLU(), torch.nn.Dropout(final_dropout),
            torch.nn.Linear(50, 25), torch.nn.ReLU(), torch.nn.Dropout(final_dropout),
            torch.nn.Linear(25, out_channels))

    def forward(self, x: Tensor, graph: Graph, edge_attr: Tensor, time: Tensor | None = None,
                edges: Tensor | None = None) -> Tensor:
        check_input(self, x, self.node_emb.in_features)
        if edge_attr.shape != (graph.num_edges, self.edge_emb.in_features):
            raise ValueError(f"edge_attr must have shape [{graph.num_edges}, "
                             f"{self.edge_emb.in_features}], got {list(edge_attr.shape)}")
        if edges is not None:
            _check_index(edges, graph.num_edges, "edges")
        x, e = self.node_emb(x), self.edge_emb(edge_attr)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            out, e = conv(x, graph, e, time)
            x = self.dropout((x + torch.relu(norm(out))) / 2)
            e = self.dropout(e)
        if self.task == "node":
            return self.readout(x)
        src, dst = graph.edge_index
        if edges is not None:  # index_select: its backward is a fast index_add
            src, dst, e = src[edges], dst[edges], e.index_select(0, edges)
        ends = torch.cat([x.index_select(0, src), x.index_select(0, dst)], 1)
        return self.readout(torch.cat([torch.relu(ends), e], 1))
