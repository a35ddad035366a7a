"""The self-supervised graph attention conv of Kim and Oh (SuperGAT; PyG's
``SuperGATConv``): GAT's weighted sum with scores that also predict the edges, and the
link-prediction loss on those scores."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice, check_flags, check_index, check_int, check_number
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_one_node_set
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_sizes,
    checked_features,
    glorot,
    glorot_linear,
)
from graphloc.nn.conv.gat import attend, fresh_self_loops, head_dots, pyg_loop_order


class SuperGATConv(ConvModule):
    r"""The self-supervised graph attention operator of `Kim and Oh, "How to Find Your
    Friendly Neighborhood: Graph Attention Design with Self-Supervision" (ICLR 2021)
    <https://openreview.net/forum?id=Wi5KUNlqWty>`_, as PyG's ``SuperGATConv``. With
    :math:`\mathbf{h} = \mathbf{x} \mathbf{W}` (``H`` heads of width ``C``) and the edge
    logits :math:`\phi_{ij} = \langle \mathbf{h}_i, \mathbf{h}_j \rangle` per head:

    .. math::
        e_{ij} = \big(\mathbf{a}_l^\top \mathbf{h}_j + \mathbf{a}_r^\top \mathbf{h}_i\big)
        \, \sigma(\phi_{ij})\ (\text{"MX"})\quad \text{or}\quad \phi_{ij} / \sqrt{C}\
        (\text{"SD"}),\qquad
        \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i) \cup \{i\}} \mathrm{softmax}_j\big(
        \mathrm{LeakyReLU}(e_{ij})\big)\, \mathbf{h}_j,

    heads concatenated or averaged, plus the bias. In training the layer also keeps the
    logits of its edges (each kept with probability ``edge_sample_ratio``) and of negative
    pairs (``neg_edge_index``, else sampled: ``neg_sample_ratio * edge_sample_ratio`` times
    the edge count, non-edges of the graph made undirected, no loops, within each graph of
    ``batch``) as ``att_x`` with the labels ``att_y``; ``get_attention_loss()`` is the binary
    cross-entropy of their mean over heads (0 in eval mode).

    A drop-in for PyG's ``SuperGATConv``: the same arguments, parameters (``lin``,
    ``att_l``, ``att_r``, ``bias``) in PyG's layout and initial draws, outputs, ``att_x``,
    ``att_y`` and loss. PyG gathers ``[E, H, C]`` rows at both ends of every edge for the
    logits and the scores, and an ``[E, H, C]`` message; here the logits are one ``sddmm``,
    the score halves per node, and the softmax and sum are fused per node
    (``ops.segment_attention``): ``[E, H]`` tensors only.

    Args:
        in_channels (int): input width.
        out_channels (int): width per head, C.
        heads (int, default 1): number of heads, H.
        concat (bool, default True): concatenate heads, else average them.
        negative_slope (float, default 0.2): LeakyReLU's slope.
        dropout (float, default 0.0): dropout on the attention weights in training
            (graphloc's dropout: other masks than PyG's ``F.dropout``).
        add_self_loops (bool, default True): replace self-loops by one loop per node.
        bias (bool, default True): add a learnt bias.
        attention_type (str, default "MX"): ``"MX"`` (mixed) or ``"SD"`` (scaled dot).
        neg_sample_ratio (float, default 0.5): negatives per kept edge.
        edge_sample_ratio (float, default 1.0): the share of edges kept as positives.
        is_undirected (bool, default False): the graph is undirected already (negatives
            are then drawn against its edges as given).
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, F]``; the graph (``edge_index [2, E]``, a ``Graph`` or a
        ``torch.sparse`` ``adj_t``, its pattern); ``neg_edge_index [2, E_neg]``; ``batch
        [N]`` (sorted graph ids). output: ``[N, H C]`` (``[N, C]`` averaged).

    Differences from PyG's: the random draws (kept positives, sampled negatives, attention
    dropout) are graphloc's, so a seed gives other samples (of the same distributions,
    with the counts of PyG's method where the graph is sparse: PyG oversamples once and may
    return fewer, graphloc draws until it has them or the graph has no more non-edges); a
    destination whose scores are all -inf gets weights 0 (PyG's: NaN), as in ``GATConv``.
    docs/models.md lists these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, bias: bool = True, attention_type: str = "MX",
                 neg_sample_ratio: float = 0.5, edge_sample_ratio: float = 1.0,
                 is_undirected: bool = False, flow: str = "source_to_target"):
        super().__init__()
        _check_options(in_channels, out_channels, heads, negative_slope, dropout,
                       attention_type, neg_sample_ratio, edge_sample_ratio)
        check_flags("SuperGATConv", concat=concat, add_self_loops=add_self_loops, bias=bias,
                    is_undirected=is_undirected)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.attention_type = add_self_loops, attention_type
        self.neg_sample_ratio, self.edge_sample_ratio = neg_sample_ratio, edge_sample_ratio
        self.is_undirected = is_undirected
        self.flow = check_flow("SuperGATConv", flow)
        self.lin = glorot_linear(in_channels, heads * out_channels)
        if attention_type == "MX":
            self.att_l = torch.nn.Parameter(torch.empty(1, heads, out_channels))
            self.att_r = torch.nn.Parameter(torch.empty(1, heads, out_channels))
        else:
            self.att_l = self.att_r = None
        self.att_x = self.att_y = None  # the last training call's logits and labels
        self.bias = torch.nn.Parameter(torch.empty(heads * out_channels if concat else
                                                   out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation, in its order (the same draws for a seed)."""
        self.lin.reset_parameters()
        for att in (self.att_l, self.att_r):
            if att is not None:
                glorot(att)
        if self.bias is not None:
            with torch.no_grad():
                self.bias.zero_()

    def forward(self, x: Tensor, edge_index, neg_edge_index: Tensor | None = None,
                batch: Tensor | None = None) -> Tensor:
        inputs = read_one_node_set(self, x, edge_index, "its scores read x_i and x_j")
        if inputs.batch is not None:  # (negatives and batch are per node set)
            raise ValueError("SuperGATConv takes x [N, F]; call it on each feature set of a "
                             f"static batch (got x of shape {list(x.shape)})")
        x, _ = checked_features(self, inputs, self.in_channels)
        graph = fresh_self_loops(inputs.graph) if self.add_self_loops else inputs.graph
        H, C = self.heads, self.out_channels
        h = self.lin(x)
        logits = ops.sddmm(graph, h.view(-1, H, C), h.view(-1, H, C))  # [E, H]
        alpha = self._scores(graph, h, logits)
        mask = explain_mask(self, inputs)
        loops = pyg_loop_order(inputs.graph) if self.add_self_loops and mask is not None \
            else None
        out, _ = attend(self, graph, alpha, h, mask, loops, False)
        if self.training:
            self._keep_attention_targets(inputs, graph, h, logits, neg_edge_index, batch)
        out = out.reshape(-1, H * C) if self.concat else out.view(-1, H, C).mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    def _scores(self, graph: Graph, h: Tensor, logits: Tensor) -> Tensor:
        """``LeakyReLU(e_ij)`` per edge and head, ``[E, H]``."""
        if self.attention_type == "MX":
            src, dst = graph.edge_index
            if self.add_self_loops:  # every node at both ends: one product for both halves
                at_src, at_dst = head_dots(h, self.att_l, self.att_r).split(self.heads, dim=1)
            else:  # the halves of nodes at both ends only, as PyG's per-edge products
                at_src = head_dots(_rows_of(h, graph.out_degree() > 0), self.att_l)
                at_dst = head_dots(_rows_of(h, graph.in_degree() > 0), self.att_r)
            score = (at_src.index_select(0, src) + at_dst.index_select(0, dst)) * \
                logits.sigmoid()
        else:
            score = logits / math.sqrt(self.out_channels)
        return F.leaky_relu(score, self.negative_slope)

    def _keep_attention_targets(self, inputs, graph: Graph, h: Tensor, logits: Tensor,
                                neg_edge_index: Tensor | None, batch: Tensor | None) -> None:
        """``att_x``: the logits of the kept edges (in PyG's edge order, loops last) and of
        the negatives; ``att_y``: 1 for the first, 0 for the others."""
        edges, logits = self._in_pyg_order(inputs, graph, logits)
        if self.attention_type == "SD":
            logits = logits / math.sqrt(self.out_channels)
        if torch.compiler.is_compiling() and (neg_edge_index is None or
                                              self.edge_sample_ratio < 1):
            raise ValueError("SuperGATConv: a training forward under torch.compile cannot draw "
                             "its samples (their counts depend on the data): pass "
                             "neg_edge_index (conv.negative_sampling outside the compiled "
                             "code) and keep edge_sample_ratio=1, or compile the eval forward")
        logits = logits[self._kept_positives(edges.size(1), edges.device)]
        if neg_edge_index is None:  # the edges' codes sorted once per graph
            known = inputs.graph.cached(("supergat_edge_codes", self.add_self_loops,
                                         self.is_undirected),
                                        lambda: _edge_codes(edges, h.size(0), self.is_undirected))
            count = int(self.neg_sample_ratio * self.edge_sample_ratio * edges.size(1))
            neg_edge_index = _negative_edges(known, h.size(0), count, batch, edges.device)
        else:
            neg_edge_index = _checked_negatives(neg_edge_index, h.size(0), inputs)
        negatives = _pair_logits(h.view(-1, self.heads, self.out_channels), neg_edge_index)
        if self.attention_type == "SD":
            negatives = negatives / math.sqrt(self.out_channels)
        self.att_x = torch.cat([logits, negatives])
        self.att_y = self.att_x.new_zeros(self.att_x.size(0))
        self.att_y[:logits.size(0)] = 1.0

    def negative_sampling(self, edge_index: Tensor, num_nodes: int,
                          batch: Tensor | None = None) -> Tensor:
        """PyG's method: ``neg_sample_ratio * edge_sample_ratio`` times the edge count of
        distinct pairs ``(j, i)``, ``j != i``, that are edges of ``edge_index`` in neither
        direction (in the given one alone with ``is_undirected``), drawn uniformly; with
        ``batch`` (sorted graph ids), that many within each graph. Fewer where the graph
        has fewer non-edges. ``[2, E_neg]``."""
        check_int(num_nodes, "SuperGATConv.negative_sampling: num_nodes", 0)
        if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or \
                edge_index.size(0) != 2 or edge_index.is_floating_point():
            raise ValueError("SuperGATConv.negative_sampling: edge_index must be an integer "
                             f"tensor [2, E], got {list(getattr(edge_index, 'shape', ()))}")
        check_index(edge_index, num_nodes, "SuperGATConv.negative_sampling: edge_index")
        count = int(self.neg_sample_ratio * self.edge_sample_ratio * edge_index.size(1))
        known = _edge_codes(edge_index.long(), num_nodes, self.is_undirected)
        return _negative_edges(known, num_nodes, count, batch, edge_index.device)

    def positive_sampling(self, edge_index: Tensor) -> Tensor:
        """PyG's method: the edges of ``edge_index``, each kept with probability
        ``edge_sample_ratio`` in training (all of them in eval mode)."""
        return edge_index[:, self._kept_positives(edge_index.size(1), edge_index.device)]

    def _kept_positives(self, num_edges: int, device) -> Tensor | slice:
        """Which edges count as positives: each with probability ``edge_sample_ratio`` in
        training (PyG's ``dropout_edge`` with ``p = 1 - edge_sample_ratio``)."""
        if not self.training or self.edge_sample_ratio == 1:
            return slice(None)
        return torch.rand(num_edges, device=device) >= 1 - self.edge_sample_ratio

    def _in_pyg_order(self, inputs, graph: Graph, logits: Tensor) -> tuple[Tensor, Tensor]:
        """``(edge_index, logits)`` in the order of PyG's edge list (the caller's edges, old
        loops dropped and one loop per node appended, as PyG's ``add_self_loops``), in the
        caller's direction."""
        if not self.add_self_loops:
            edges = graph.edge_index
        else:
            edges, order, _ = pyg_loop_order(inputs.graph)
            logits = torch.empty_like(logits).index_copy(0, order, logits)
        return (edges.flip(0) if inputs.reversed else edges), logits

    def get_attention_loss(self) -> Tensor:
        """The self-supervised loss: binary cross-entropy of the mean over heads of
        ``att_x`` against ``att_y`` (``tensor([0])`` in eval mode, as PyG's)."""
        if not self.training:
            return torch.tensor([0], device=self.lin.weight.device)
        if self.att_x is None:
            raise RuntimeError("SuperGATConv.get_attention_loss: no training forward has run "
                               "yet, so there are no attention logits to score")
        return F.binary_cross_entropy_with_logits(self.att_x.mean(dim=-1), self.att_y)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads}, type={self.attention_type})")


def _check_options(in_channels, out_channels, heads, negative_slope, dropout, attention_type,
                   neg_sample_ratio, edge_sample_ratio) -> None:
    check_sizes("SuperGATConv", lazy=True, in_channels=in_channels,
                out_channels=out_channels, heads=heads)
    check_number("SuperGATConv", "negative_slope", negative_slope)
    check_dropouts("SuperGATConv", upto_one=True, dropout=dropout)
    check_choice("SuperGATConv", "attention_type", attention_type, ("MX", "SD"))
    for name, ratio in (("neg_sample_ratio", neg_sample_ratio),
                        ("edge_sample_ratio", edge_sample_ratio)):
        check_number("SuperGATConv", name, ratio)
    if not neg_sample_ratio > 0:
        raise ValueError(f"SuperGATConv: neg_sample_ratio must be > 0, got {neg_sample_ratio}")
    if not 0 < edge_sample_ratio <= 1:
        raise ValueError("SuperGATConv: edge_sample_ratio must lie in (0, 1], got "
                         f"{edge_sample_ratio}")


def _rows_of(h: Tensor, used: Tensor) -> Tensor:
    """``h`` with the rows of unused nodes zeroed: their features, NaN say, then reach no
    gradient of the attention vectors (a product over all rows passes 0 * NaN on)."""
    return torch.where(used.unsqueeze(-1), h, 0)


def _pair_logits(h: Tensor, pairs: Tensor) -> Tensor:
    """``<h_i, h_j>`` per head for each pair ``(j, i)`` of ``pairs`` (PyG's ``x_i * x_j``
    summed), ``[P, H]``."""
    return (h.index_select(0, pairs[1]) * h.index_select(0, pairs[0])).sum(dim=-1)


def _checked_negatives(neg_edge_index, num_nodes: int, inputs) -> Tensor:
    """The caller's negatives ``[2, E_neg]``, in range, in the caller's direction."""
    if not isinstance(neg_edge_index, Tensor) or neg_edge_index.dim() != 2 or \
            neg_edge_index.size(0) != 2 or neg_edge_index.is_floating_point():
        shape = list(getattr(neg_edge_index, "shape", ()))
        raise ValueError(f"SuperGATConv: neg_edge_index must be an integer tensor [2, E_neg], "
                         f"got {type(neg_edge_index).__name__} of shape {shape}")
    check_index(neg_edge_index, num_nodes, "SuperGATConv: neg_edge_index")
    neg_edge_index = neg_edge_index.long()
    return neg_edge_index.flip(0) if inputs.reversed else neg_edge_index


def _edge_codes(edges: Tensor, num_nodes: int, is_undirected: bool) -> Tensor:
    """The sorted distinct codes ``j N + i`` of the edges ``(j, i)`` and, unless
    ``is_undirected``, of their reverses: the pairs a negative must not be."""
    codes = edges[0] * num_nodes + edges[1]
    if not is_undirected:
        codes = torch.cat([codes, edges[1] * num_nodes + edges[0]])
    return codes.unique()


def _negative_edges(known: Tensor, num_nodes: int, count: int, batch: Tensor | None,
                    device) -> Tensor:
    """``count`` distinct pairs ``(j, i)``, ``j != i``, whose codes are not in ``known``,
    drawn uniformly; with ``batch``, ``count`` of them within each graph (PyG's batched
    sampling). Fewer where the graph has fewer non-edges."""
    if batch is None:
        return _draw_non_edges(known, 0, num_nodes, num_nodes, count, device)
    if not isinstance(batch, Tensor) or batch.shape != (num_nodes,) or \
            batch.is_floating_point() or (num_nodes and bool((batch.diff() < 0).any())):
        raise ValueError(f"SuperGATConv: batch must be a sorted integer tensor [{num_nodes}] "
                         "(a graph id per node)")
    sizes = torch.bincount(batch).tolist() if num_nodes else []
    starts = [0, *torch.tensor(sizes, dtype=torch.long).cumsum(0).tolist()][:-1]
    return torch.cat([_draw_non_edges(known, start, size, num_nodes, count, device)
                      for start, size in zip(starts, sizes, strict=True) if size > 1] or
                     [torch.empty(2, 0, dtype=torch.long, device=device)], dim=1)


def _draw_non_edges(known: Tensor, start: int, size: int, num_nodes: int, count: int,
                    device) -> Tensor:
    """Up to ``count`` distinct non-edges among nodes ``start .. start + size - 1``, uniform
    (loops and ``known`` codes ``j N + i`` excluded): rounds of uniform candidates until
    ``count`` are found, or where they would be at least half of the non-edges (rounds
    would look long for the last few), a random choice among all of them."""
    available = size * (size - 1) - int(((known // num_nodes >= start) &
                                         (known // num_nodes < start + size) &
                                         (known % num_nodes >= start) &
                                         (known % num_nodes < start + size) &
                                         (known // num_nodes != known % num_nodes)).sum())
    count = min(count, available)
    if 2 * count >= available:  # (then size^2 is at most a few times the edges and count)
        nodes = torch.arange(start, start + size, device=device)
        src, dst = nodes.repeat_interleave(size), nodes.repeat(size)
        codes = src * num_nodes + dst
        codes = codes[(src != dst) & ~_holds(known, codes)]
        found = codes[torch.randperm(codes.numel(), device=device)[:count]]
        return torch.stack([found // num_nodes, found % num_nodes])
    found = torch.empty(0, dtype=torch.long, device=device)
    while found.numel() < count:
        want = count - found.numel()
        draws = max(2 * want, 64)
        src = torch.randint(start, start + size, (draws,), device=device)
        dst = torch.randint(start, start + size, (draws,), device=device)
        codes = src * num_nodes + dst
        fresh = (src != dst) & ~_holds(known, codes)
        if found.numel():
            fresh &= ~torch.isin(codes, found)
        codes = _first_occurrences(codes[fresh])  # distinct, in order of drawing
        found = torch.cat([found, codes[:want]])
    return torch.stack([found // num_nodes, found % num_nodes])


def _holds(sorted_codes: Tensor, codes: Tensor) -> Tensor:
    """Whether each of ``codes`` is in ``sorted_codes`` (a binary search each: ``isin``
    sorted the edges' codes again at every draw)."""
    if not sorted_codes.numel():
        return torch.zeros_like(codes, dtype=torch.bool)
    at = torch.searchsorted(sorted_codes, codes).clamp_(max=sorted_codes.numel() - 1)
    return sorted_codes[at] == codes


def _first_occurrences(codes: Tensor) -> Tensor:
    """``codes`` with repeats dropped, in order of first occurrence."""
    unique, inverse = torch.unique(codes, return_inverse=True)
    first = torch.full((unique.numel(),), codes.numel(), dtype=torch.long,
                       device=codes.device).scatter_reduce(
        0, inverse, torch.arange(codes.numel(), device=codes.device), "amin")
    return codes[first.sort().values]
