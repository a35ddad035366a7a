"""The graph kernels (BFS balls, separated rounds, neighbour and 2-hop sampling, local
eccentricity), each behind one documented, argument-checked wrapper on a ``Graph``.

They walk one node set (a bipartite graph is refused) and run on the CPU (the graph's
arrays are moved there when needed). Each kernel has a twin in ``ops/reference.py`` with
the same outputs in the same order; without the extension the twins run.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from graphloc.checks import check_fits_in_memory, check_int, first_repeated
from graphloc.ops._library import HAS_EXTENSION, kernels
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


def neighbor_sample(graph, seeds: Tensor, fanouts: list[int], seed: int = 0
                    ) -> SampledNeighbourhood:
    """Layer-wise uniform in-neighbour sampling without replacement around distinct
    ``seeds``: ``fanouts[l]`` neighbours per node at hop ``l + 1`` (-1: all of them).
    Deterministic for a ``seed``."""
    if not isinstance(fanouts, (list, tuple)) or any(
            isinstance(k, bool) or not isinstance(k, int) or k < -1 for k in fanouts):
        raise ValueError(f"fanouts must be a list of integers >= 0, or -1 for all "
                         f"neighbours, got {fanouts!r}")
    check_int(seed, "seed", 0)
    indptr, indices = _csr_on_cpu(graph, "neighbor_sample")
    seeds = _checked_seeds(seeds, graph.num_nodes, distinct=True)
    return SampledNeighbourhood(*kernels.neighbor_sample(indptr, indices, seeds,
                                                         list(fanouts), seed))


def hop2_sample(graph, K: int, seed: int = 0) -> Tensor:
    """Per node ``v``, ``K`` tokens ``[N, K]``: ``v``, then ``K - 1`` draws without
    replacement from its distinct in-neighbours followed by the distinct nodes two
    in-steps away (LargeGT's official pool). Deterministic for a ``seed``."""
    check_int(K, "K (tokens per node)", 1)
    check_int(seed, "seed", 0)
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


def _sample_fake(indptr, indices, seeds, fanouts, seed):
    _check_seeds_fake(seeds)
    ctx = torch.library.get_ctx()  # how many neighbours exist depends on the graph's values
    nodes, edges = ctx.new_dynamic_size(), ctx.new_dynamic_size()
    counts = len(fanouts) + 1
    return (seeds.new_empty(nodes), *(seeds.new_empty(edges) for _ in range(3)),
            seeds.new_empty(counts), seeds.new_empty(counts))


if HAS_EXTENSION:
    torch.library.register_fake("graphloc::khop_subgraphs")(_khop_fake)
    torch.library.register_fake("graphloc::neighbor_sample")(_sample_fake)
    torch.library.register_fake("graphloc::local_eccentricity")(_eccentricity_fake)
    torch.library.register_fake("graphloc::hop2_sample")(_hop2_fake)
    torch.library.register_fake("graphloc::separated_rounds")(_rounds_fake)
