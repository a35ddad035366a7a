"""LATTE (Tran et al., "Layer-stacked Attention for Heterogeneous Network Embedding";
official code JonnyTran/LATTE, ``conv.py`` ``LATTE``, ``models.py`` ``LATTENodeClf``): node
classification on a :class:`~graphloc.hetero.HeteroGraph`.

Layer t attends over the meta-paths of order exactly t. Those of order 1 are the graph's
relations; those of order t are built by stacking: each order t - 1 meta-path a is joined
with each relation b that ends where a starts, over the edges of a whose layer t - 1
attention (the maximum over heads) is at least ``edge_threshold`` (the largest one when
none is): the pattern of A diag(1/d) B, which keeps A B's pattern. Layer t recomputes its
own attention on that pattern, so the join carries no gradient. The node embeddings of the
target type from every layer are concatenated and classified.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_flags, check_number
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import check_dropouts, check_sizes
from graphloc.nn.conv.latte import LATTEConv, MetaPath, check_heads, path_dst, path_src
from graphloc.nn.dropout import Dropout

_POOLING = ("concat", "last", "max", "mean")


class LayerAttention(NamedTuple):
    """One layer's attention. ``edges``: meta-path -> (edge_index, alpha [E, heads]),
    alpha a softmax over each destination node's edges; ``relations``: node type ->
    (its meta-paths then "self", beta [N_type, len(paths)]), a softmax per node."""

    edges: dict
    relations: dict


def meta_paths(relations: list, order: int) -> list[MetaPath]:
    """The meta-paths of exactly ``order`` relations, built by stacking: those of order
    t - 1 extended by every relation that ends where they start."""
    paths = [(tuple(r),) for r in relations]
    for _ in range(order - 1):
        paths = [a + (tuple(b),) for a in paths for b in relations if b[2] == path_src(a)]
    return paths


def join(a: Graph, keep: Tensor, b: Graph, one_node_set: bool = False) -> Graph:
    """The edges v -> u such that v -> k is an edge of ``b`` and k -> u a kept edge of
    ``a`` (``keep``: a boolean per edge of ``a``, in its edge order), without repeats: the
    pattern of the meta-path a + b, from ``b``'s source nodes to ``a``'s destinations
    (a graph on one node set when ``one_node_set``: the path returns to its type)."""
    k, u = a.edge_index[0][keep], a.edge_index[1][keep]
    indptr, indices = b.csr.indptr, b.csr.indices  # rows: b's destinations (the k)
    counts = indptr[k + 1] - indptr[k]
    owner = torch.repeat_interleave(torch.arange(k.numel(), device=k.device), counts)
    offsets = torch.arange(int(counts.sum()), device=k.device) - \
        torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    v = indices[indptr[k][owner] + offsets].long()
    pairs = torch.unique(u[owner] * b.num_src_nodes + v)
    edge_index = torch.stack([pairs % b.num_src_nodes, pairs // b.num_src_nodes])
    if one_node_set:
        return Graph(edge_index, a.num_nodes)
    return Graph.bipartite(edge_index, (b.num_src_nodes, a.num_nodes))


def kept_edges(attention: Tensor, threshold: float) -> Tensor:
    """Edges whose attention (max over heads) reaches ``threshold``; the largest alone
    when none does (the official rule)."""
    value = attention.max(1).values if attention.dim() == 2 else attention
    keep = value >= threshold
    if value.numel() and not keep.any():
        keep[value.argmax()] = True
    return keep


class LATTE(ModelCapabilities, torch.nn.Module):
    """LATTE node classifier for the ``target`` node type.

    Args:
        in_channels (dict): node type -> input width.
        hidden_channels (int, default 128): the embedding width D (official 128).
        out_channels (int): classes.
        num_layers (int, default 2): T, the highest meta-path order (LATTE-1, LATTE-2).
        metadata (tuple): ``(node_types, relations)``, as ``HeteroGraph.metadata()``.
        target (str): the node type classified.
        heads (int, default 2), dropout (0.2), attn_dropout (0.2), classifier_dropout
            (0.4), edge_threshold (0.5), layer_pooling ("concat"; or "last", "max",
            "mean"), neg_sampling_ratio (2.0): the official defaults.
        proximity (bool, default False): LATTE-2proximity's link-prediction loss on every
            layer's attention logits, returned by ``auxiliary_loss()`` after a forward
            (``graphloc.train`` adds it to the cross-entropy).

    ``forward(x, graph, return_attention=False)``: ``x`` node type -> features, ``graph``
    a ``HeteroGraph``; returns the target nodes' logits and, with ``return_attention``, a
    :class:`LayerAttention` per layer: the neighbour-level weights of each meta-path and
    the relation-level weights of each node, the interpretable weights the paper reports.

    Differences from the official code (docs/models.md): full-batch (the official trains
    on sampled 2-hop neighbourhoods of 2,048 target nodes), so the joins run on the whole
    graph; the official training loop's Adam with weight decay 0.01 is graphloc.train's
    optimiser and settings here; ``layer_pooling`` and the whole join are ``run.py``'s
    settings (the released ``LATTENodeClf`` passes neither, so its two-layer model raises
    and its joins would be sampled); the proximity negatives are drawn with repeats (the
    official draws distinct pairs, and drops a draw of one pair).
    """

    def __init__(self, in_channels: dict, hidden_channels: int = 128, out_channels: int = 2,
                 num_layers: int = 2, metadata=None, target: str | None = None,
                 heads: int = 2, dropout: float = 0.2, attn_dropout: float = 0.2,
                 classifier_dropout: float = 0.4, edge_threshold: float = 0.5,
                 layer_pooling: str = "concat", proximity: bool = False,
                 neg_sampling_ratio: float = 2.0):
        super().__init__()
        node_types, relations = self._check_metadata(metadata, in_channels, target)
        check_sizes("LATTE", hidden_channels=hidden_channels, out_channels=out_channels,
                    num_layers=num_layers)
        check_heads(hidden_channels, heads)
        check_dropouts("LATTE", dropout=dropout, attn_dropout=attn_dropout,
                       classifier_dropout=classifier_dropout)
        check_flags("LATTE", proximity=proximity)
        check_number("LATTE", "edge_threshold", edge_threshold)
        check_number("LATTE", "neg_sampling_ratio", neg_sampling_ratio)
        if neg_sampling_ratio < 0:
            raise ValueError(f"LATTE: neg_sampling_ratio must be >= 0, got {neg_sampling_ratio!r}")
        if layer_pooling not in _POOLING:
            raise ValueError(f"layer_pooling must be one of {_POOLING}, got {layer_pooling!r}")
        self.node_types, self.relations, self.target = node_types, relations, target
        self.edge_threshold, self.layer_pooling = edge_threshold, layer_pooling
        self.proximity, self.neg_sampling_ratio = proximity, neg_sampling_ratio
        relu = torch.nn.init.calculate_gain("relu")
        self.project = torch.nn.ModuleDict({t: torch.nn.Linear(in_channels[t], hidden_channels)
                                            for t in node_types})
        for lin in self.project.values():
            torch.nn.init.xavier_normal_(lin.weight, gain=relu)
        self.convs = torch.nn.ModuleList(
            LATTEConv(hidden_channels, hidden_channels, node_types,
                      meta_paths(relations, t + 1), heads=heads, attn_dropout=attn_dropout,
                      dropout=dropout) for t in range(num_layers))
        self.dropout = Dropout(dropout)
        width = hidden_channels * (num_layers if layer_pooling == "concat" else 1)
        self.classifier = torch.nn.Sequential(Dropout(classifier_dropout),
                                              torch.nn.Linear(width, out_channels))
        # the official DenseClassification draws its weight with PyG's glorot (Xavier
        # uniform) and keeps torch's default bias
        torch.nn.init.xavier_uniform_(self.classifier[1].weight)
        self._proximity_terms: list = []

    @staticmethod
    def _check_metadata(metadata, in_channels, target):
        if not (isinstance(metadata, (tuple, list)) and len(metadata) == 2):
            raise ValueError("metadata must be (node_types, relations), as "
                             f"HeteroGraph.metadata(), got {metadata!r}")
        node_types, relations = list(metadata[0]), [tuple(r) for r in metadata[1]]
        if target not in node_types:
            raise ValueError(f"target must be one of the node types {node_types}, got "
                             f"{target!r}")
        if not isinstance(in_channels, dict) or set(in_channels) != set(node_types):
            raise ValueError(f"in_channels must give a width for each node type "
                             f"{node_types}, got {in_channels!r}")
        if not any(r[2] == target for r in relations):
            raise ValueError(f"no relation arrives at the target type {target!r}: its "
                             "embedding would ignore the graph")
        return node_types, relations

    def forward(self, x: dict, graph, return_attention: bool = False):
        graph.check_features(x)
        if graph.relations != self.relations or graph.node_types != self.node_types:
            raise ValueError(f"the graph's metadata {graph.metadata()} differs from the "
                             f"model's ({self.node_types}, {self.relations})")
        h = {t: self.dropout(F.relu(self.project[t](x[t]))) for t in self.node_types}
        graphs = {(r,): graph[r] for r in self.relations}
        first_order = dict(graph.edges)
        layers, betas, outputs, self._proximity_terms = [], [], [], []
        for t, conv in enumerate(self.convs):
            if t:
                graphs = self._stack(conv, layers[-1], first_order)
            inputs = h
            h, attention, beta = conv(inputs, graphs)
            outputs.append(h[self.target])
            layers.append({p: (graphs[p], attention[p]) for p in attention})
            betas.append(beta)
            if self.proximity and self.training:
                self._proximity_terms.append((conv, inputs, layers[-1]))
        logits = self.classifier(self._pool(outputs))
        if not return_attention:
            return logits
        return logits, [LayerAttention(
            {p: (g.edge_index, a) for p, (g, a) in layer.items()},
            {t: (conv.paths_into(t) + ["self"], b) for t, b in beta.items()})
            for conv, layer, beta in zip(self.convs, layers, betas, strict=True)]

    def _stack(self, conv, previous, first_order) -> dict:
        """The graphs of ``conv``'s meta-paths from the previous layer's attention."""
        out = {}
        for path in conv.paths:
            a_graph, attention = previous[path[:-1]]
            keep = kept_edges(attention.detach(), self.edge_threshold)
            out[path] = join(a_graph, keep, first_order[path[-1]],
                             one_node_set=path_src(path) == path_dst(path))
        return out

    def _pool(self, outputs: list[Tensor]) -> Tensor:
        if self.layer_pooling == "concat":
            return torch.cat(outputs, 1)
        if self.layer_pooling == "last":
            return outputs[-1]
        stacked = torch.stack(outputs)
        return stacked.max(0).values if self.layer_pooling == "max" else stacked.mean(0)

    def auxiliary_loss(self) -> Tensor | None:
        """LATTE-2proximity's loss for the last training forward (None without
        ``proximity``): per layer, the mean over its meta-paths with edges of
        -mean(w log sigmoid(s)) on the edges (w: the edge's attention, max over heads)
        plus -mean(log sigmoid(-s)) on ``neg_sampling_ratio`` times as many uniform
        non-edges, halved; summed over the layers."""
        if not self.proximity or not self._proximity_terms:
            return None
        total = 0
        for conv, inputs, layer in self._proximity_terms:
            terms = []
            for path, (graph, attention) in layer.items():
                if graph.num_edges == 0:
                    continue
                src, dst = graph.edge_index
                weight = attention.max(1).values
                positive = -(weight * F.logsigmoid(conv.link_logits(path, inputs, src, dst))
                             ).mean()
                neg_src, neg_dst = _non_edges(graph, int(self.neg_sampling_ratio
                                                         * graph.num_edges))
                negative = -F.logsigmoid(-conv.link_logits(path, inputs, neg_src, neg_dst)
                                         ).mean() if neg_src.numel() else 0
                terms.append(positive + negative)
            if terms:
                total = total + sum(terms) / (2 * len(terms))
        return total


def _non_edges(graph: Graph, count: int) -> tuple[Tensor, Tensor]:
    """Up to ``count`` uniform (src, dst) pairs of the graph's end types that are not
    edges (drawn with repeats, the observed edges dropped)."""
    device = graph.edge_index.device
    src = torch.randint(0, max(graph.num_src_nodes, 1), (count,), device=device)
    dst = torch.randint(0, max(graph.num_nodes, 1), (count,), device=device)
    observed = torch.unique(graph.edge_index[1] * graph.num_src_nodes + graph.edge_index[0])
    keys = dst * graph.num_src_nodes + src
    position = torch.searchsorted(observed, keys).clamp(max=max(observed.numel() - 1, 0))
    fresh = observed[position] != keys if observed.numel() else torch.ones_like(keys).bool()
    return src[fresh], dst[fresh]

