"""The graph kernels (BFS balls, separated rounds, neighbour and 2-hop sampling, local
eccentricity), each behind one documented, argument-checked wrapper on a ``Graph``.

They walk one node set (a bipartite graph is refused) and run on the CPU (the graph's
arrays are moved there when needed). Each kernel has a twin in ``ops/reference.py`` with
the same outputs in the same order; without the extension the twins run.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from graphloc.checks import (
    check_fits_in_memory,
    check_flags,
    check_int,
    check_seed,
    first_repeated,
    physical_memory_bytes,
    sampling_weights,
)
from graphloc.ops._library import HAS_EXTENSION, kernels
from graphloc.ops.cluster import checked_edge_index, row_sorted_csr
from graphloc.ops.reference import local_eccentricity as _eccentricity_twin


class KHopBalls(NamedTuple):
    """Per seed, its ball and the ball's induced edges, packed: seed ``s`` owns
    ``nodes[node_ptr[s]:node_ptr[s+1]]`` (BFS order, the seed first; ``hops`` their
    distances) and ``src/dst/edge[edge_ptr[s]:edge_ptr[s+1]]`` (ball-local ids, and the
    edge's CSR position in the graph)."""

    node_ptr: Tensor
    nodes: Tensor
    hops: Tensor
    edge_ptr: Tensor
    src: Tensor
    dst: Tensor
    edge: Tensor


class SampledNeighbourhood(NamedTuple):
    """A layer-wise sample: ``nodes`` (the seeds first), the sampled edges in local ids
    (``src -> dst``) with their CSR positions ``pos``, and the cumulative node and edge
    counts per hop."""

    nodes: Tensor
    src: Tensor
    dst: Tensor
    pos: Tensor
    hop_nodes: Tensor
    hop_edges: Tensor


class SampledRelations(NamedTuple):
    """A layer-wise sample over relations: per node type (lists indexed by type) its
    ``nodes`` (the seeds first), their ``trees`` (the seed each was reached from, for
    disjoint sampling; empty otherwise) and cumulative node counts per hop; per relation
    the sampled edges ``src -> dst`` in local ids of its source and destination types, their
    CSR positions ``pos`` and cumulative edge counts per hop."""

    nodes: list
    trees: list
    hop_nodes: list
    src: list
    dst: list
    pos: list
    hop_edges: list


def _csr_on_cpu(graph, what: str):
    if not hasattr(graph, "csr") or not hasattr(graph, "num_nodes"):
        raise TypeError(f"{what} expects a graphloc.Graph, got {type(graph).__name__}")
    graph._require_one_node_set(what)
    csr = graph.csr
    return csr.indptr.cpu(), csr.indices.cpu()


def _checked_seeds(seeds, num_nodes: int, distinct: bool = False) -> Tensor:
    """A 1-D int64 CPU tensor of node ids in range (distinct when asked)."""
    if not isinstance(seeds, Tensor) or seeds.dim() != 1 or seeds.is_floating_point() \
            or seeds.is_complex() or seeds.dtype == torch.bool:
        got = f"{seeds.dtype} {list(seeds.shape)}" if isinstance(seeds, Tensor) \
            else type(seeds).__name__
        raise TypeError(f"seeds must be a 1-D integer tensor of node ids, got {got}")
    seeds = seeds.long().cpu()
    if seeds.numel():
        low, high = int(seeds.min()), int(seeds.max())
        if low < 0 or high >= num_nodes:
            bad = low if low < 0 else high
            raise ValueError(f"seed {bad} is out of range for {num_nodes} nodes")
    twice = first_repeated(seeds) if distinct else None
    if twice is not None:
        raise ValueError(f"seed {twice} appears twice")
    return seeds


def khop_subgraphs(graph, seeds: Tensor, hops: int) -> KHopBalls:
    """The ``hops``-hop in-ball of every seed and its induced subgraph (:class:`KHopBalls`).

    Example::

        balls = ops.khop_subgraphs(graph, torch.tensor([0, 5]), hops=2)
        first = balls.nodes[balls.node_ptr[0]:balls.node_ptr[1]]  # node 0 and its 2-hop ball
    """
    check_int(hops, "hops", 0)
    indptr, indices = _csr_on_cpu(graph, "khop_subgraphs")
    return KHopBalls(*kernels.khop_subgraphs(indptr, indices,
                                             _checked_seeds(seeds, graph.num_nodes), hops))


def separated_rounds(graph, seeds: Tensor, hops: int) -> Tensor:
    """A round per seed (int64, from 0) such that the ``hops``-in-balls of the seeds of one
    round are pairwise disjoint (greedy, in seed order). Seeds must be distinct."""
    check_int(hops, "hops", 0)
    indptr, indices = _csr_on_cpu(graph, "separated_rounds")
    csc = graph.csc
    seeds = _checked_seeds(seeds, graph.num_nodes, distinct=True)
    return kernels.separated_rounds(indptr, indices, csc.indptr.cpu(), csc.indices.cpu(),
                                    seeds, hops)


#: this machine's memory, read once (torch.compile cannot trace the system call)
_MEMORY = physical_memory_bytes()


class WalkCounts(NamedTuple):
    """The rows of ``A^0, ..., A^hops`` on their joint pattern, in CSR: row ``i`` owns
    positions ``indptr[i]:indptr[i+1]``, ``indices`` its columns (ascending) and
    ``counts[p, n]`` the entry of ``A^n`` there (float64)."""

    indptr: Tensor
    indices: Tensor
    counts: Tensor


def walk_counts(graph, hops: int, edge_weight: Tensor | None = None) -> WalkCounts:
    """Per node ``i``, every node ``j`` that reaches ``i`` within ``hops`` edges, with the
    number of walks ``j -> ... -> i`` of each length ``0..hops``: the entries of the powers
    ``A^0, ..., A^hops`` of ``A[i, j] = `` the weight of ``j -> i`` (PyG's ``adj_t``;
    parallel edges add), on the pattern they share (:class:`WalkCounts`).

    With ``edge_weight`` (``[E]``, the graph's edge order) a walk counts the product of its
    edges' weights. The pattern is structural: a pair whose weighted walks add to 0 keeps
    its entry. Counts are float64 (exact up to 2^53 without weights). Raises, naming
    ``hops``, where the pairs would not fit in memory.

    Example::

        walks = ops.walk_counts(graph, hops=2)   # A^0, A^1 and A^2 in one CSR
        two_hop = walks.counts[:, 2]
    """
    check_int(hops, "hops", 0)
    indptr, indices = _csr_on_cpu(graph, "walk_counts")
    weight = None
    if edge_weight is not None:
        if not isinstance(edge_weight, Tensor) or not edge_weight.is_floating_point():
            got = edge_weight.dtype if isinstance(edge_weight, Tensor) else \
                type(edge_weight).__name__
            raise TypeError(f"walk_counts: edge_weight must be a floating-point tensor, got "
                            f"{got}")
        if tuple(edge_weight.shape) != (graph.num_edges,):
            raise ValueError(f"walk_counts: edge_weight must be [E] = [{graph.num_edges}], got "
                             f"shape {list(edge_weight.shape)}")
        if edge_weight.requires_grad and torch.is_grad_enabled():
            raise ValueError("walk_counts has no gradient for edge_weight, which requires "
                             "grad; pass edge_weight.detach() where none is wanted")
        weight = graph.to_csr_order(edge_weight).to(torch.float64).cpu()
    bytes_per_pair = 8 * (hops + 2)  # the column and the hops + 1 counts
    max_entries = 2**62 if _MEMORY is None else min(_MEMORY // bytes_per_pair, 2**62)
    if graph.num_nodes > max_entries:  # each node's row holds itself: refused before the
        # kernel, whose int64 argument a hops of 2^63 or more would not even fit
        raise ValueError(f"walk_counts: the walks of up to {hops} hops join more node pairs "
                         f"than the limit of {max_entries} (memory); use fewer hops")
    return WalkCounts(*kernels.walk_counts(indptr, indices, weight, hops, max_entries))


def neighbor_sample(graph, seeds: Tensor, fanouts: list[int], seed: int = 0
                    ) -> SampledNeighbourhood:
    """Layer-wise uniform in-neighbour sampling without replacement around distinct
    ``seeds``: ``fanouts[l]`` neighbours per node at hop ``l + 1`` (-1: all of them).
    Deterministic for a ``seed``."""
    indptr, indices = _csr_on_cpu(graph, "neighbor_sample")
    seeds = _checked_seeds(seeds, graph.num_nodes, distinct=True)
    out = relational_neighbor_sample([(indptr, indices)], [(0, 0)], [graph.num_nodes], [seeds],
                                     [fanouts], seed=seed)
    return SampledNeighbourhood(*(part[0] for part in (out.nodes, out.src, out.dst, out.pos,
                                                       out.hop_nodes, out.hop_edges)))


def _checked_fanouts(fanouts, relations: int) -> list[list[int]]:
    """One list of integer fan-outs (>= 0, or -1 for all) per relation, all of one length."""
    if not isinstance(fanouts, (list, tuple)) or len(fanouts) != relations:
        raise ValueError(f"fanouts must hold one list of fan-outs per relation ({relations}), "
                         f"got {fanouts!r}")
    for k in fanouts:
        if not isinstance(k, (list, tuple)) or any(
                isinstance(v, bool) or not isinstance(v, int) or v < -1 for v in k):
            raise ValueError(f"fanouts must be a list of integers >= 0, or -1 for all "
                             f"neighbours, got {k!r}")
    if len({len(k) for k in fanouts}) > 1:
        raise ValueError(f"every relation needs one fan-out per hop (the same number of hops), "
                         f"got lengths {[len(k) for k in fanouts]}")
    return [list(k) for k in fanouts]


def _checked_relation_csr(csr, r: int) -> tuple[Tensor, Tensor]:
    """Relation r's destination-major CSR ``(indptr, indices)``: 1-D integer tensors, on
    the CPU. Their values are checked by the kernel where it reads them."""
    if not isinstance(csr, (tuple, list)) or len(csr) != 2 or not all(
            isinstance(t, Tensor) and t.dim() == 1 and t.dtype in (torch.int32, torch.int64)
            for t in csr):
        raise TypeError(f"relation {r}'s CSR must be a pair (indptr, indices) of 1-D int32 or "
                        f"int64 tensors")
    if csr[0].numel() == 0:
        raise ValueError(f"relation {r}'s indptr is empty (it needs num_rows + 1 entries)")
    return csr[0].cpu(), csr[1].cpu()


def _checked_per_part(tensors, sizes: list[int], name: str, kind: str) -> list[Tensor]:
    """An optional list with one entry per node type or relation (None or a 1-D tensor of
    the given size) as the kernel takes it: [] when absent, empty tensors for None."""
    if tensors is None:
        return []
    if not isinstance(tensors, (list, tuple)) or len(tensors) != len(sizes):
        count = len(tensors) if isinstance(tensors, (list, tuple)) else None
        raise ValueError(f"{name} must hold one entry per {kind} ({len(sizes)}), got "
                         f"{type(tensors).__name__}" + ("" if count is None else f" of {count}"))
    out = []
    for i, (t, size) in enumerate(zip(tensors, sizes, strict=True)):
        if t is None:
            out.append(torch.empty(0, dtype=torch.long))
            continue
        if not isinstance(t, Tensor) or t.dim() != 1 or t.numel() != size:
            raise ValueError(f"{name}[{i}] must be a 1-D tensor of {size} entries, got "
                             f"{list(t.shape) if isinstance(t, Tensor) else type(t).__name__}")
        out.append(t.cpu())
    return out


def _checked_times(times, sizes: list[int], name: str, kind: str) -> list[Tensor]:
    out = _checked_per_part(times, sizes, name, kind)
    for i, t in enumerate(out):
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{name}[{i}] must hold integer times, got {t.dtype} (map "
                            f"floating times to integers that keep their order)")
    return [t.long() for t in out]


def _checked_weights(weights, sizes: list[int]) -> list[Tensor]:
    out = _checked_per_part(weights, sizes, "edge_weights", "relation")
    return [sampling_weights(w, f"edge_weights[{i}]", "CSR position") if w.numel() else w
            for i, w in enumerate(out)]


def relational_neighbor_sample(csrs, relations, num_nodes, seeds, fanouts, *, replace=False,
                               disjoint=False, induced=False, seed: int = 0, node_times=None,
                               edge_times=None, seed_times=None, edge_weights=None,
                               last: bool = False) -> SampledRelations:
    """Layer-wise uniform in-neighbour sampling over several relations (PyG's
    heterogeneous ``NeighborLoader`` semantics; one relation is the homogeneous case).

    Args:
        csrs: per relation, its destination-major CSR ``(indptr, indices)`` (PyG's CSC:
            ``indptr`` over destination nodes, ``indices`` the sources).
        relations: per relation, ``(source type, destination type)``, type indices.
        num_nodes: the node count of each type.
        seeds: per type, the seed node ids (a repeated seed keeps its own row).
        fanouts: per relation, its fan-out at each hop (-1: all in-neighbours).
        replace: draw with replacement. disjoint: every seed grows its own tree (nodes
            are (tree, node) pairs). induced: return every edge between sampled nodes
            instead of the sampled edges.
        seed: the random stream (deterministic whatever the thread count).

    At each hop, for each relation in order, every node of its destination type reached at
    the previous hop draws its in-neighbours; new nodes are numbered in that order.
    """
    if not isinstance(relations, (list, tuple)) or not isinstance(csrs, (list, tuple)) \
            or len(csrs) != len(relations):
        raise ValueError("relational_neighbor_sample needs one CSR per relation")
    if not isinstance(num_nodes, (list, tuple)) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in num_nodes):
        raise ValueError(f"num_nodes must be a list of node counts >= 0, got {num_nodes!r}")
    T = len(num_nodes)
    if T == 0 and not relations:  # nothing to sample (the kernel needs a tensor to dispatch)
        return SampledRelations(*([] for _ in SampledRelations._fields))
    for r, rel in enumerate(relations):
        if not isinstance(rel, (tuple, list)) or len(rel) != 2 or not all(
                isinstance(t, int) and 0 <= t < T for t in rel):
            raise ValueError(f"relation {r} must be a (source type, destination type) pair of "
                             f"type indices below {T}, got {rel!r}")
    if not isinstance(seeds, (list, tuple)) or len(seeds) != T:
        raise ValueError(f"seeds must hold one tensor per node type ({T})")
    check_flags("relational_neighbor_sample", replace=replace, disjoint=disjoint,
                induced=induced, last=last)
    if induced and disjoint:
        raise ValueError("induced subgraphs are not sampled disjointly (disjoint=True with "
                         "induced=True)")
    check_seed(seed)
    fanouts = _checked_fanouts(fanouts, len(relations))
    pairs = [_checked_relation_csr(c, r) for r, c in enumerate(csrs)]
    if len({t.dtype for pair in pairs for t in pair}) > 1:
        raise TypeError("every relation's indptr and indices must share one index dtype")
    seeds = [_checked_seeds(s, n) for s, n in zip(seeds, num_nodes, strict=True)]
    nnz = [p[1].numel() for p in pairs]
    times = (_checked_times(node_times, list(num_nodes), "node_times", "node type"),
             _checked_times(edge_times, nnz, "edge_times", "relation"))
    timed = any(t.numel() for ts in times for t in ts)
    if timed and not disjoint:
        raise ValueError("temporal sampling (node_times / edge_times) needs disjoint=True: "
                         "each seed's tree is bounded by its own time")
    if timed:
        total = sum(s.numel() for s in seeds)
        if seed_times is None:
            raise ValueError(f"temporal sampling (node_times / edge_times) needs seed_times: "
                             f"one time per seed ({total})")
        seed_times = _checked_times([seed_times], [total], "seed_times", "seed")[0]
    else:
        seed_times = None
    out = kernels.neighbor_sample([p[0] for p in pairs], [p[1] for p in pairs],
                                  [r[0] for r in relations], [r[1] for r in relations],
                                  list(num_nodes), seeds, [k for ks in fanouts for k in ks],
                                  bool(replace), bool(disjoint), bool(induced), seed, *times,
                                  seed_times, _checked_weights(edge_weights, nnz), bool(last))
    R = len(relations)
    return SampledRelations(out[:T], out[T:2 * T], out[2 * T:3 * T],
                            *(out[3 * T + i * R:3 * T + (i + 1) * R] for i in range(4)))


class RandomWalks(NamedTuple):
    """Walks from each start node: ``nodes`` ``[S, walk_length + 1]`` (the start first) and
    the ``edges`` taken ``[S, walk_length]`` (edge ids; -1 where a node without out-edges
    kept the walk in place; None when not asked for)."""

    nodes: Tensor
    edges: Tensor


def random_walk(graph, start: Tensor, walk_length: int, p: float = 1.0, q: float = 1.0,
                seed: int = 0, return_edges: bool = True) -> RandomWalks:
    """node2vec's random walks (Grover and Leskovec, KDD 2016) along the graph's edges
    (``src -> dst``) from each ``start`` node.

    From node ``v``, having come from ``t``, an edge to ``x`` weighs ``1 / p`` if ``x`` is
    ``t``, 1 if the graph has an edge ``x -> t``, ``1 / q`` otherwise (the reference
    implementation's rule; parallel edges count once each), and is drawn with exactly that
    probability (rejection sampling). The first step, ``p = q = 1`` and a single out-edge
    draw uniformly; a node without out-edges keeps the walk in place (as PyG's samplers).
    Deterministic for a ``seed`` whatever the thread count. ``return_edges=False`` leaves
    ``edges`` None (walks for Node2Vec need only the nodes).
    """
    if not hasattr(graph, "csc") or not hasattr(graph, "num_nodes"):
        raise TypeError(f"random_walk expects a graphloc.Graph, got {type(graph).__name__}")
    graph._require_one_node_set("random_walk")
    check_int(walk_length, "walk_length", 0)
    check_seed(seed)
    check_walk_bias(p, q)
    check_flags("random_walk", return_edges=return_edges)
    start = _checked_seeds(start, graph.num_nodes)
    check_fits_in_memory((start.numel(), walk_length + 1), torch.long,
                         f"walk_length={walk_length}")
    csc = graph.csc
    ids = graph.cached("csc_edge_ids", lambda: _csc_edge_ids(graph)) if return_edges else None
    # graphloc's source-major rows are sorted by destination (a stable transpose of the
    # destination-major CSR), which the kernel's test for an edge x -> t searches
    nodes, edges = kernels.random_walk(csc.indptr.cpu(), csc.indices.cpu(), start,
                                       walk_length, float(p), float(q), seed, ids, True)
    return RandomWalks(nodes, edges if return_edges else None)


def dropout_path(edge_index: Tensor, p: float = 0.2, walks_per_node: int = 1,
                 walk_length: int = 3, num_nodes: int | None = None, is_sorted: bool = False,
                 training: bool = True) -> tuple[Tensor, Tensor]:
    """PyG's ``dropout_path`` (GraphMAE2's path masking; pyg-lib's walk in PyG 2.8): each
    edge is drawn with probability ``p``, ``walks_per_node`` uniform random walks of
    ``walk_length`` steps start at each drawn edge's source, and every edge whose
    ``(source, destination)`` pair a walk steps along is dropped, parallel copies included
    (PyG's rule). Returns ``(kept edge_index, edge_mask)``, the mask True for kept edges.
    The walks' seed comes from torch's default generator (``torch.manual_seed`` repeats
    them; other walks than pyg-lib's for a seed). ``is_sorted`` is accepted for PyG's
    signature: the edges are sorted here either way. A no-op when not ``training`` or
    ``p = 0``.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"dropout_path: p must lie in [0, 1], got {p!r}")
    check_int(walks_per_node, "walks_per_node", 1)
    check_int(walk_length, "walk_length", 0)
    check_flags("dropout_path", is_sorted=is_sorted, training=training)
    num_nodes = checked_edge_index(edge_index, num_nodes)
    mask = torch.ones(edge_index.size(1), dtype=torch.bool, device=edge_index.device)
    if not training or p == 0:
        return edge_index, mask
    row, col = edge_index.long().cpu()
    drawn = torch.rand(row.numel(), device=edge_index.device).cpu() <= p
    start = row[drawn].repeat(walks_per_node)
    check_fits_in_memory((start.numel(), walk_length + 1), torch.long,
                         f"walk_length={walk_length}")
    indptr, perm = row_sorted_csr(row, col, num_nodes)  # rows by destination: as the
    # kernel's sorted_rows needs (its p = q = 1 walk never searches them)
    seed = int(torch.randint(0, 2**62, (), dtype=torch.long))
    nodes, _ = kernels.random_walk(indptr, col[perm].to(indptr.dtype), start, walk_length,
                                   1.0, 1.0, seed, None, True)
    stepped = nodes[:, :-1].reshape(-1) * num_nodes + nodes[:, 1:].reshape(-1)
    mask = ~torch.isin(row * num_nodes + col, stepped)
    mask = mask.to(edge_index.device)
    return edge_index[:, mask], mask


def check_walk_bias(p, q) -> None:
    """node2vec's return (``p``) and in-out (``q``) parameters: finite numbers > 0."""
    for name, value in (("p", p), ("q", q)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _csc_edge_ids(graph) -> Tensor:
    """The edge id of each position of the source-major CSR, int64 on the CPU."""
    ids = graph.csc.perm.cpu().long()
    return ids if graph.csr.perm is None else graph.csr.perm.cpu().long()[ids]


def hop2_sample(graph, K: int, seed: int = 0) -> Tensor:
    """Per node ``v``, ``K`` tokens ``[N, K]``: ``v``, then ``K - 1`` draws without
    replacement from its distinct in-neighbours followed by the distinct nodes two
    in-steps away (LargeGT's official pool). Deterministic for a ``seed``."""
    check_int(K, "K (tokens per node)", 1)
    check_seed(seed)
    indptr, indices = _csr_on_cpu(graph, "hop2_sample")
    check_fits_in_memory((indptr.numel() - 1, K), torch.long, f"K={K} (tokens per node)")
    return kernels.hop2_sample(indptr, indices, K, seed)


def local_eccentricity(graph, lengths: Tensor, hops: int, twin: bool = False) -> Tensor:
    """Per node, the largest length-weighted distance to a node of its ``hops``-hop ball,
    inside the ball's induced subgraph (City-Networks' local eccentricity), float64 ``[N]``.

    ``lengths`` holds one non-negative length per edge, in the graph's edge order.
    ``twin=True`` runs the pure-Python twin (the reference the kernel is tested against).
    """
    check_int(hops, "hops", 0)
    check_flags("local_eccentricity", twin=twin)
    indptr, indices = _csr_on_cpu(graph, "local_eccentricity")
    if not isinstance(lengths, Tensor) or lengths.shape != (graph.num_edges,):
        raise ValueError(f"lengths must be a tensor of shape [{graph.num_edges}] (one per "
                         f"edge), got {getattr(lengths, 'shape', type(lengths).__name__)}")
    if not lengths.dtype.is_floating_point:
        raise TypeError(f"lengths must be floating point, got {lengths.dtype}")
    if lengths.numel() and not bool((lengths >= 0).all()):
        bad = int(torch.nonzero(~(lengths >= 0))[0])
        raise ValueError(f"lengths must be non-negative, got {lengths[bad].item()} at edge {bad}")
    weight = graph.to_csr_order(lengths.detach()).cpu().double()
    run = _eccentricity_twin if twin else kernels.local_eccentricity
    return run(indptr, indices, weight, hops)


# --- fake kernels (shapes only, for torch.compile), beside the ops they stand for ----------

def _eccentricity_fake(indptr, indices, weight, hops):
    torch._check(indptr.dim() == 1 and weight.dim() == 1 and weight.shape == indices.shape,
                 lambda: "local_eccentricity needs 1-D indptr and one weight per CSR entry")
    torch._check(hops >= 0, lambda: f"hops must be >= 0, got {hops}")
    return weight.new_empty(indptr.shape[0] - 1, dtype=torch.float64)


def _hop2_fake(indptr, indices, K, seed):
    torch._check(indptr.dim() == 1 and indices.dim() == 1, lambda: "hop2_sample needs a CSR")
    torch._check(K >= 1, lambda: f"K (tokens per node) must be >= 1, got {K}")
    return indptr.new_empty(indptr.shape[0] - 1, K, dtype=torch.long)


def _rounds_fake(indptr, indices, t_indptr, t_indices, seeds, hops):
    torch._check(indptr.shape == t_indptr.shape and indices.shape == t_indices.shape,
                 lambda: "the transpose must have the CSR's nodes and edges")
    torch._check(seeds.dim() == 1, lambda: f"seeds must be 1-D, got {list(seeds.shape)}")
    return seeds.new_empty(seeds.shape)


def _check_seeds_fake(seeds):
    torch._check(seeds.dim() == 1 and seeds.dtype == torch.int64,
                 lambda: f"seeds must be int64 [S], got {seeds.dtype} {list(seeds.shape)}")


def _khop_fake(indptr, indices, seeds, hops):
    _check_seeds_fake(seeds)
    torch._check(hops >= 0, lambda: f"hops must be >= 0, got {hops}")
    ctx = torch.library.get_ctx()  # the balls' sizes depend on the graph's values
    nodes, edges = ctx.new_dynamic_size(), ctx.new_dynamic_size()
    pointers = seeds.shape[0] + 1
    return (seeds.new_empty(pointers), seeds.new_empty(nodes), seeds.new_empty(nodes),
            seeds.new_empty(pointers), *(seeds.new_empty(edges) for _ in range(3)))


def _sample_fake(indptrs, indices, src_types, dst_types, num_nodes, seeds, fanouts, replace,
                 disjoint, induced, seed, node_times, edge_times, seed_times, edge_weights, last):
    for s in seeds:
        _check_seeds_fake(s)
    ctx = torch.library.get_ctx()  # how many neighbours exist depends on the graph's values
    if not seeds and not indptrs:
        return []
    like = seeds[0] if seeds else indptrs[0]
    hops = len(fanouts) // len(indptrs) if indptrs else 0

    def dynamic(count):
        return [like.new_empty(ctx.new_dynamic_size(), dtype=torch.long) for _ in range(count)]

    parts = dynamic(2 * len(seeds)) + [like.new_empty(hops + 1, dtype=torch.long)
                                       for _ in seeds]
    parts += dynamic(3 * len(indptrs))
    parts += [like.new_empty(2 if induced else hops + 1, dtype=torch.long) for _ in indptrs]
    return parts


def _walk_counts_fake(indptr, indices, weight, hops, max_entries):
    torch._check(hops >= 0, lambda: f"hops must be >= 0, got {hops}")
    pairs = torch.library.get_ctx().new_dynamic_size()  # the pattern depends on the values
    return (indptr.new_empty(indptr.shape[0], dtype=torch.long),
            indptr.new_empty(pairs, dtype=torch.long),
            indptr.new_empty(pairs, hops + 1, dtype=torch.float64))


def _walk_fake(indptr, indices, start, walk_length, p, q, seed, edge_ids, sorted_rows):
    torch._check(start.dim() == 1 and start.dtype == torch.int64,
                 lambda: f"start must be int64 [S], got {start.dtype} {list(start.shape)}")
    torch._check(walk_length >= 0, lambda: f"walk_length must be >= 0, got {walk_length}")
    return (start.new_empty(start.shape[0], walk_length + 1),
            start.new_empty(start.shape[0], walk_length))


if HAS_EXTENSION:
    torch.library.register_fake("graphloc::random_walk")(_walk_fake)
    torch.library.register_fake("graphloc::khop_subgraphs")(_khop_fake)
    torch.library.register_fake("graphloc::walk_counts")(_walk_counts_fake)
    torch.library.register_fake("graphloc::neighbor_sample")(_sample_fake)
    torch.library.register_fake("graphloc::local_eccentricity")(_eccentricity_fake)
    torch.library.register_fake("graphloc::hop2_sample")(_hop2_fake)
    torch.library.register_fake("graphloc::separated_rounds")(_rounds_fake)
