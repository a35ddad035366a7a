r"""TANGNN: top-m attention over the whole graph plus neighbourhood aggregation
(`Jiang et al., arXiv 2411.15458 <https://arxiv.org/abs/2411.15458>`_).

Every node attends to its own m most cosine-similar vertices anywhere in the graph. This
is graphloc's reading, not the released code's: the paper's text we could read (abstract
and a third-party summary) speaks of a Top-m attention component that reaches distant
similar vertices with an efficient Top-m algorithm; the released code (``ejwww/TANGNN``)
scores every vertex against one auxiliary vector, keeps one global set of m vertices for
all nodes, tiles it over the nodes (node i gets selected vertex i mod m), and runs a
Transformer over all N nodes whose output the base variant discards. That selection gives
a node a vertex by its id modulo m, unrelated to the node; the released network is
``graphloc.nn.TANGNNReleased`` (``docs/models.md``). The top-m sets are found without an
N x N matrix: exactly by blocks of query rows (memory O(N m + block)), or approximately on
large graphs by an inverted file over about sqrt(N) spherical k-means clusters
(O(probes N^1.5 d) for balanced clusters). The m-nearest-neighbour graph then feeds the
engine's fused sddmm and segment attention: no [N, m, d] gathers.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int, check_seed
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._utils import check_dropouts, check_input, check_sizes
from graphloc.nn.conv.sage import SAGEConv
from graphloc.nn.dropout import Dropout

#: query rows x nodes held at once by the exact search (float32: 64 MB)
_EXACT_BLOCK_ENTRIES = 1 << 24


def _exact_top_m(z: Tensor, m: int, exclude_self: bool) -> tuple[Tensor, Tensor]:
    n = z.size(0)
    rows = max(1, _EXACT_BLOCK_ENTRIES // n)
    sims, index = [], []
    for start in range(0, n, rows):
        block = z[start:start + rows] @ z.T  # [rows, N]
        if exclude_self:
            block.diagonal(offset=start).fill_(float("-inf"))
        top = block.topk(m, dim=1)
        sims.append(top.values)
        index.append(top.indices)
    return torch.cat(index), torch.cat(sims)


def _merge_top_m(index: Tensor, sims: Tensor, m: int) -> tuple[Tensor, Tensor]:
    """Top-m per row of candidate lists that may repeat a node (each kept once)."""
    order = index.argsort(dim=1)
    index, sims = index.gather(1, order), sims.gather(1, order)
    repeated = torch.zeros_like(index, dtype=torch.bool)
    repeated[:, 1:] = index[:, 1:] == index[:, :-1]
    top = sims.masked_fill(repeated, float("-inf")).topk(m, dim=1)
    return index.gather(1, top.indices), top.values


def _spherical_kmeans(z: Tensor, k: int, iters: int, gen: torch.Generator) -> Tensor:
    """``k`` unit centroids of unit rows ``z`` (Lloyd's iterations on cosine similarity)."""
    centroids = z[torch.randperm(z.size(0), generator=gen)[:k].to(z.device)]
    for _ in range(iters):
        home = (z @ centroids.T).argmax(1)
        sums = torch.zeros_like(centroids).index_add_(0, home, z)
        empty = sums.norm(dim=1) == 0  # keep an empty cluster's old centroid
        centroids = torch.where(empty.unsqueeze(1), centroids, F.normalize(sums, dim=-1))
    return centroids


def _groups(labels: Tensor, k: int) -> tuple[Tensor, list[int]]:
    """Nodes ordered by label and the boundaries of each label's run."""
    order = labels.argsort(stable=True)
    bounds = torch.bincount(labels, minlength=k).cumsum(0).tolist()
    return order, [0, *bounds]


def _ivf_top_m(z: Tensor, m: int, exclude_self: bool, probes: int,
               gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Inverted-file search: ~sqrt(N) spherical k-means clusters; every node is compared
    exactly with the members of its ``probes`` nearest clusters. Rows left with fewer than
    m candidates (tiny clusters) fall back to exact search."""
    n = z.size(0)
    k = max(1, round(math.sqrt(n)))
    sample = z[torch.randperm(n, generator=gen)[:min(n, 64 * k)].to(z.device)]
    centroids = _spherical_kmeans(sample, k, iters=10, gen=gen)
    near = torch.cat([(block @ centroids.T).topk(min(probes, k), dim=1).indices
                      for block in z.split(max(1, _EXACT_BLOCK_ENTRIES // k))])
    members, member_bounds = _groups(near[:, 0], k)
    best_index = torch.full((n, m), -1, dtype=torch.long, device=z.device)
    best_sims = torch.full((n, m), float("-inf"), dtype=z.dtype, device=z.device)
    for probe in range(near.size(1)):
        queries, query_bounds = _groups(near[:, probe], k)
        found_index, found_sims = torch.full_like(best_index, -1), torch.full_like(best_sims,
                                                                                  float("-inf"))
        for c in range(k):
            q = queries[query_bounds[c]:query_bounds[c + 1]]
            mem = members[member_bounds[c]:member_bounds[c + 1]]
            if q.numel() == 0 or mem.numel() == 0:
                continue
            keys, width = z[mem].T, min(m, mem.numel())
            rows = max(1, _EXACT_BLOCK_ENTRIES // mem.numel())  # bounded for big clusters
            for start in range(0, q.numel(), rows):
                block = q[start:start + rows]
                sims = z[block] @ keys
                if exclude_self and probe == 0:  # queries are the members, in order
                    sims.diagonal(offset=start).fill_(float("-inf"))
                top = sims.topk(width, dim=1)
                found_index[block, :width] = mem[top.indices]
                found_sims[block, :width] = top.values
        best_index, best_sims = _merge_top_m(torch.cat([best_index, found_index], 1),
                                             torch.cat([best_sims, found_sims], 1), m)
    short = torch.isinf(best_sims[:, -1]).nonzero().flatten()
    if short.numel():
        sims = z[short] @ z.T
        if exclude_self:
            sims[torch.arange(short.numel(), device=z.device), short] = float("-inf")
        top = sims.topk(m, dim=1)
        best_index[short], best_sims[short] = top.indices, top.values
    return best_index, best_sims


@torch.no_grad()
def top_m_similar(z: Tensor, m: int, mode: str = "auto", exclude_self: bool = True,
                  exact_max_nodes: int = 20_000, probes: int = 2,
                  seed: int = 0) -> tuple[Tensor, Tensor]:
    """For every row of ``z`` (``[N, d]``), the ``m`` rows of highest cosine similarity.

    Args:
        m: neighbours per node (capped at ``N - 1`` with ``exclude_self``, else ``N``).
        mode: ``"exact"`` (blocked brute force, O(N^2 d) time, O(N m) memory),
            ``"approx"`` (inverted file: about sqrt(N) spherical k-means clusters, each
            node compared exactly with the members of its ``probes`` nearest clusters,
            O(probes N^1.5 d) time for balanced clusters), or ``"auto"``: exact up to
            ``exact_max_nodes`` nodes.
        exclude_self: never return a node as its own neighbour.
        seed: seed of the clustering (the same seed, the same candidates).

    Returns ``(index [N, m] int64, similarity [N, m])``, rows sorted by similarity.
    Approximate rows may miss true neighbours (recall is measured in
    ``benchmarks/bench_longrange.py``) but every returned similarity is exact.

    A row of ``z`` holding NaN or inf has NaN cosine with every row. Exact mode ranks it
    first for every node, as ``torch.topk`` orders NaN; approximate mode returns it where
    its cluster is probed. Where it is returned its similarity is NaN, never a number (so
    ``TopMAttention`` gives NaN there, as torch propagates it).
    """
    if mode not in ("auto", "exact", "approx"):
        raise ValueError(f"mode must be 'auto', 'exact' or 'approx', got {mode!r}")
    if z.dim() != 2 or not z.is_floating_point():
        raise ValueError(f"z must be a floating-point [N, d] tensor, got {z.dtype} "
                         f"{list(z.shape)}")
    check_int(m, "m", 1)
    check_int(probes, "probes", 1)
    check_int(exact_max_nodes, "exact_max_nodes", 0)
    check_seed(seed)
    check_flags("top_m_similar", exclude_self=exclude_self)  # "False" read as true
    n = z.size(0)
    m = min(m, n - 1 if exclude_self else n)
    if m < 1:
        return z.new_zeros(n, 0, dtype=torch.long), z.new_zeros(n, 0)
    z = F.normalize(z, dim=-1)
    if mode == "exact" or (mode == "auto" and n <= exact_max_nodes):
        return _exact_top_m(z, m, exclude_self)
    return _ivf_top_m(z, m, exclude_self, probes, torch.Generator().manual_seed(seed))


def top_m_graph(index: Tensor) -> Graph:
    """The graph with an edge ``u -> v`` for every ``u`` in ``index[v]``."""
    n, m = index.shape
    dst = torch.arange(n, device=index.device).repeat_interleave(m)
    return Graph(torch.stack([index.reshape(-1), dst]), num_nodes=n)


class TopMAttention(torch.nn.Module):
    r"""Multi-head attention of every node over its ``m`` most similar vertices in the
    whole graph:

    .. math::
        \mathbf{t}_v = \Big\Vert_{h=1}^{H} \sum_{u \in T_m(v)} \alpha^h_{vu}
        \mathbf{W}^h_V \mathbf{x}_u, \qquad
        \alpha^h_{vu} = \mathrm{softmax}_{u \in T_m(v)}\big(\tau
        \cos(\mathbf{W}^h_Z \mathbf{x}_v, \mathbf{W}^h_Z \mathbf{x}_u)\big)

    where :math:`T_m(v)` holds the m vertices of highest mean cosine over heads, which are
    the m largest logits (for one head, exact mode is full softmax attention truncated to
    each query's top m logits). Queries and keys share the projection
    :math:`\mathbf{W}_Z` (as in Reformer): similarity search and attention use one space,
    and the gradient reaches :math:`\mathbf{W}_Z` through the logits (the selection itself is
    not differentiated). :math:`\tau` is learned (starts at :math:`\sqrt{C}`).

    Args:
        in_channels (int): input width.
        out_channels (int): width per head, C.
        heads (int, default 1): heads, H.
        m (int, default 20): vertices attended per node (the released code's base model).
        concat (bool, default True): concatenate heads, else average.
        mode, exact_max_nodes, probes: the search (see :func:`top_m_similar`).
        exclude_self (bool, default True): a node does not attend to itself.
        dropout (float, default 0.0): dropout on the attention weights in training.

    Shapes: ``forward(x [N, in_channels]) -> [N, H * C]`` (``[N, C]`` if not concat).

    A model built on it connects nodes beyond the graph's edges: give it
    ``graphloc_global = True`` so that ``graphloc.influence`` measures one seed at a time.
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, m: int = 20,
                 concat: bool = True, mode: str = "auto", exact_max_nodes: int = 20_000,
                 probes: int = 2, exclude_self: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        check_sizes("TopMAttention", in_channels=in_channels, out_channels=out_channels,
                    heads=heads, m=m, exact_max_nodes=exact_max_nodes, probes=probes)
        check_dropouts("TopMAttention", dropout=dropout)
        check_flags("TopMAttention", concat=concat, exclude_self=exclude_self)
        if m < 1:
            raise ValueError(f"m must be >= 1, got {m}")
        self.in_channels, self.out_channels, self.heads, self.m = in_channels, out_channels, \
            heads, m
        self.concat, self.dropout, self.exclude_self = concat, dropout, exclude_self
        self.search = dict(mode=mode, exact_max_nodes=exact_max_nodes, probes=probes)
        self.lin_z = torch.nn.Linear(in_channels, heads * out_channels)
        self.lin_value = torch.nn.Linear(in_channels, heads * out_channels)
        self.log_scale = torch.nn.Parameter(torch.empty(()))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_z.reset_parameters()
        self.lin_value.reset_parameters()
        torch.nn.init.constant_(self.log_scale, 0.5 * math.log(self.out_channels))

    def _unit_heads(self, x: Tensor) -> Tensor:
        return F.normalize(self.lin_z(x).view(-1, self.heads, self.out_channels), dim=-1)

    def neighbours(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(index [N, m], mean cosine [N, m])``: the vertices each node attends to."""
        z = self._unit_heads(x).detach().flatten(1) / math.sqrt(self.heads)
        return top_m_similar(z, self.m, exclude_self=self.exclude_self, **self.search)

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x, self.in_channels)
        H, C = self.heads, self.out_channels
        index, _ = self.neighbours(x)
        if index.size(1) == 0:  # a single node has no one else to attend to
            out = x.new_zeros(x.size(0), H, C)
        else:
            graph = top_m_graph(index)
            z = self._unit_heads(x)
            score = ops.sddmm(graph, z, z * self.log_scale.exp(), "dot")  # [E, H]
            value = self.lin_value(x).view(-1, H, C)
            if self.dropout > 0 and self.training:
                alpha = ops.dropout(ops.segment_softmax(graph, score), p=self.dropout)
                out = ops.spmm(graph, value, alpha)
            else:
                out = ops.segment_attention(graph, score, value)
        return out.reshape(-1, H * C) if self.concat else out.mean(dim=1)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads}, m={self.m})")


def sample_in_edges(graph: Graph, k: int, generator: torch.Generator | None = None) -> Graph:
    """A uniform sample of at most ``k`` incoming edges per node, without replacement."""
    return sample_edges_per_node(graph, k, "in", generator)


def sample_edges_per_node(graph: Graph, k: int, side: str = "in",
                          generator: torch.Generator | None = None) -> Graph:
    """A uniform sample, without replacement, of at most ``k`` edges per node: its
    incoming edges (``side="in"``, per destination) or its outgoing ones (``"out"``, per
    source, the released TANGNN's ``sample_neighbors``). The edges keep their direction,
    their ``edge_attr`` rows and the graph's node sets (a bipartite graph stays one)."""
    check_int(k, "k", 0)
    if side not in ("in", "out"):
        raise ValueError(f"sample_edges_per_node: side must be 'in' or 'out', got {side!r}")
    src, dst = graph.edge_index
    group = dst if side == "in" else src
    # a random order within each node's edges: ids plus a uniform key in [0, 1)
    key = group.double() + torch.rand(group.numel(), generator=generator,
                                      dtype=torch.float64).to(group.device)
    order = key.argsort()
    counts = torch.bincount(group, minlength=graph.num_nodes if side == "in"
                            else graph.num_src_nodes)
    start = counts.cumsum(0) - counts
    keep = order[torch.arange(order.numel(), device=group.device) - start[group[order]] < k]
    keep = keep.sort().values
    attr = None if graph.edge_attr is None else graph.edge_attr[keep]
    # a subset of a validated graph's edges: in range by construction
    return Graph._derived(graph.edge_index[:, keep], graph.num_nodes,
                          graph.num_src_nodes if graph.is_bipartite else None, attr)


class TANGNNLayer(ConvModule):
    r"""One TANGNN layer: :math:`\mathbf{h}'_v = \mathrm{ReLU}(\mathbf{W}
    [\mathrm{SAGE}(\mathbf{h})_v \Vert \mathbf{t}_v])` with :math:`\mathbf{t}` from
    :class:`TopMAttention` and a mean GraphSAGE over at most ``sample_size`` uniformly
    sampled in-neighbours per node, redrawn every training forward (all neighbours in
    evaluation: the deterministic mean that the samples estimate). The released code keeps
    at most that many out-edges per source instead, in evaluation too, which leaves a
    node's in-neighbours unbounded (``docs/models.md``, TANGNN)."""

    def __init__(self, in_channels: int, out_channels: int, m: int = 20, heads: int = 1,
                 sample_size: int | None = 5, dropout: float = 0.3, **search):
        super().__init__()
        check_sizes("TANGNNLayer", in_channels=in_channels, out_channels=out_channels, m=m,
                    heads=heads, sample_size=sample_size)
        check_dropouts("TANGNNLayer", dropout=dropout)
        self.sample_size = sample_size
        self.sage = SAGEConv(in_channels, out_channels)
        self.attention = TopMAttention(in_channels, out_channels, heads=heads, m=m,
                                       concat=False, **search)
        self.lin = torch.nn.Linear(2 * out_channels, out_channels)
        self.dropout = Dropout(dropout)

    def reset_parameters(self) -> None:
        for module in (self.sage, self.attention, self.lin):
            module.reset_parameters()

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        local_graph = graph
        if self.training and self.sample_size is not None:
            local_graph = sample_in_edges(graph, self.sample_size)
        h = torch.cat([self.sage(x, local_graph), self.attention(x)], dim=1)
        return self.dropout(torch.relu(self.lin(h)))
