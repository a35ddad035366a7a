"""MEGA-GNN, the whole model: encoders, ``nn.conv.multi_edge.MultiEdgeConv`` layers (the
two-stage multigraph message passing, documented there) and the edge readout."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_flags, check_index
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import check_dropouts, check_input, check_sizes
from graphloc.nn.conv.multi_edge import MultiEdgeConv
from graphloc.nn.dropout import Dropout

#: the readout dropout of the official GIN setting (``hcagri/Mega-GNN``,
#: ``model_settings.json``, "gin": "final_dropout")
OFFICIAL_FINAL_DROPOUT = 0.10527690625126304


class MEGAGNN(ModelCapabilities, torch.nn.Module):
    """MEGA-GNN: node and edge embeddings, ``num_layers`` :class:`MultiEdgeConv` each
    followed by the node update ``x = (x + ReLU(BN(c))) / 2`` and then the edge update from
    the updated ``x``, and a readout, for edge classification (readout MLP on
    ``[ReLU([x_src, x_dst]) ‖ e]``, 3h -> 50 -> 25 -> out, as the official code) or node
    classification (an MLP on x).

    Bi-directional, as the official ``--reverse_mp``: the reversed edges are a relation of
    their own, with their own edge embedding and edge states (``reverse_states=
    "separate"``); the readout reads the forward states. ``reverse_states="shared"`` keeps
    one state per edge that both directions update (the mean of the two updates).

    Args:
        node_in, edge_in (int): input feature widths (AML: constant node features).
        hidden (int), out_channels (int), num_layers (int, default 2).
        edge_agg (str or None, default "sum"), node_agg (str, default "sum"),
        bidirectional (bool, default True), edge_update (bool, default True): per layer.
        dropout (float, default 0.0): after each layer (the official accepts it and
            applies none).
        final_dropout (float, default ``OFFICIAL_FINAL_DROPOUT``): in the readout, the
            official GIN setting (``model_settings.json``: 0.105..., a Bayesian-optimisation
            draw kept to all its digits).
        task (str, default "edge"): "edge" or "node".
        reverse_states (str, default "separate"): see above.
        pna_deg (Tensor, optional): the training graph's :func:`group_size_histogram`
            for PNA aggregators (else taken from the first training forward).
        share_edge_agg (bool, default True): one pair aggregator per direction for all
            layers, as the official code (its ``MultiEdgeAggModule`` is built once and
            called by every layer); False gives each layer its own. Matters only for the
            aggregators with parameters ("gin", "pna", "gru", "transformer").

    Forward: ``model(x, graph, edge_attr, time=None, edges=None)``: logits of the edges in
    ``edges`` (all when None) or of every node.

    Differences from the official code (``hcagri/Mega-GNN``; ``docs/models.md``): PNA's
    delta is the mean log(P + 1) over the training groups (PNA's definition; the official
    passes ``bincount(sizes)[1:]``, a histogram shifted by one, which gives the mean log P
    and divides by zero when every pair has one edge), taken from the whole training graph
    rather than its first sampled batch; the GRU aggregator runs on a packed sequence and
    the transformer aggregator on the groups of each length as one batch (no padding: the
    official pads every pair of a batch to the longest, so a pair's state depends on the
    other pairs of its batch); the GenAgg aggregator (an outside package) and the ADAMM
    baseline (``edge_agg_type="adamm"``: the pairs aggregated once, before the first
    layer) are not implemented; dropout (default
    0) is also applied after each layer, where the official accepts but does not use it;
    ``edge_agg`` defaults to "sum" where the official flag has no default (no stage 1: the
    Multi-GNN baseline, ``edge_agg=None`` here).
    """

    def __init__(self, node_in: int, edge_in: int, hidden: int, out_channels: int,
                 num_layers: int = 2, edge_agg: str | None = "sum", node_agg: str = "sum",
                 bidirectional: bool = True, edge_update: bool = True, dropout: float = 0.0,
                 final_dropout: float = OFFICIAL_FINAL_DROPOUT, task: str = "edge",
                 reverse_states: str = "separate", pna_deg: Tensor | None = None,
                 share_edge_agg: bool = True):
        super().__init__()
        check_sizes("MEGAGNN", node_in=node_in, edge_in=edge_in, hidden=hidden,
                    out_channels=out_channels, num_layers=num_layers)
        check_dropouts("MEGAGNN", dropout=dropout, final_dropout=final_dropout)
        check_flags("MEGAGNN", bidirectional=bidirectional, edge_update=edge_update,
                    share_edge_agg=share_edge_agg)
        if task not in ("edge", "node"):
            raise ValueError(f"task must be 'edge' or 'node', got {task!r}")
        if reverse_states not in ("separate", "shared"):
            raise ValueError(f"reverse_states must be 'separate' or 'shared', got "
                             f"{reverse_states!r}")
        self.task = task
        self.node_emb = torch.nn.Linear(node_in, hidden)
        self.edge_emb = torch.nn.Linear(edge_in, hidden)
        separate = bidirectional and reverse_states == "separate"
        self.edge_emb_reverse = torch.nn.Linear(edge_in, hidden) if separate else None
        self.convs = torch.nn.ModuleList(
            MultiEdgeConv(hidden, edge_agg, node_agg, bidirectional, edge_update,
                          deg=pna_deg)
            for _ in range(num_layers))
        self.share_edge_agg = bool(share_edge_agg)
        if self.share_edge_agg:
            self._share_pair_aggregators()
        self.norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(hidden)
                                         for _ in range(num_layers))
        self.dropout = Dropout(dropout)
        width = 3 * hidden if task == "edge" else hidden
        self.readout = torch.nn.Sequential(
            torch.nn.Linear(width, 50), torch.nn.ReLU(), Dropout(final_dropout),
            torch.nn.Linear(50, 25), torch.nn.ReLU(), Dropout(final_dropout),
            torch.nn.Linear(25, out_channels))

    def _share_pair_aggregators(self) -> None:
        """Layer 0's pair aggregator of each direction, registered in every layer."""
        first = self.convs[0]
        for conv in self.convs[1:]:
            for direction in ("forward_dir", "reverse_dir"):
                if getattr(conv, direction) is not None:
                    getattr(conv, direction).edge_agg = getattr(first, direction).edge_agg

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a shared aggregator appears under every layer's name: weights saved with one per
        # layer (share_edge_agg=False) would load the last layer's over the others quietly
        if self.share_edge_agg:
            for key, value in state_dict.items():
                head, _, rest = key[len(prefix):].partition(".edge_agg.")
                if key.startswith(prefix + "convs.") and rest:
                    layer0 = f"{prefix}convs.0.{head.split('.', 2)[2]}.edge_agg.{rest}"
                    if layer0 in state_dict and not torch.equal(state_dict[layer0], value):
                        raise ValueError(
                            f"these weights have a pair aggregator per layer ({key} differs "
                            f"from {layer0}): build MEGAGNN(..., share_edge_agg=False)")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: Tensor, graph: Graph, edge_attr: Tensor, time: Tensor | None = None,
                edges: Tensor | None = None) -> Tensor:
        check_input(self, x, self.node_emb.in_features)
        if edge_attr.shape != (graph.num_edges, self.edge_emb.in_features):
            raise ValueError(f"edge_attr must have shape [{graph.num_edges}, "
                             f"{self.edge_emb.in_features}], got {list(edge_attr.shape)}")
        if edges is not None:
            check_index(edges, graph.num_edges, "edges")
        x, e = self.node_emb(x), self.edge_emb(edge_attr)
        if self.edge_emb_reverse is not None:
            e = (e, self.edge_emb_reverse(edge_attr))
        for conv, norm in zip(self.convs, self.norms, strict=True):
            out, contexts = conv.aggregate(x, graph, e, time)
            x = self.dropout((x + torch.relu(norm(out))) / 2)
            e = conv.update_edges(x, graph, e, contexts)
            e = tuple(map(self.dropout, e)) if isinstance(e, tuple) else self.dropout(e)
        if self.task == "node":
            return self.readout(x)
        e = e[0] if isinstance(e, tuple) else e  # the forward relation's states
        src, dst = graph.edge_index
        if edges is not None:  # index_select: its backward is a fast index_add
            src, dst, e = src[edges], dst[edges], e.index_select(0, edges)
        ends = torch.cat([x.index_select(0, src), x.index_select(0, dst)], 1)
        return self.readout(torch.cat([torch.relu(ends), e], 1))
