"""The Python twins of the graph kernels (balls, rounds, sampling) give exactly the kernels'
output, so the fallback without the extension draws the same samples."""

import pytest
import torch
from helpers import random_edge_index, requires_ext

from graphloc import Graph
from graphloc.ops import reference

pytestmark = requires_ext


def _graphs():
    for seed, hub in ((10, 0), (11, 30)):  # loops, parallel edges, isolated nodes; a hub
        yield seed, Graph(random_edge_index(50, 140, seed=seed, hub_degree=hub), num_nodes=50)


def test_ball_twins_give_the_kernels_output():
    for seed, graph in _graphs():
        csr, csc = graph.csr, graph.csc
        seeds = torch.randperm(50, generator=torch.Generator().manual_seed(seed))[:30]
        for hops in (0, 1, 3):
            ours = reference.khop_subgraphs(csr.indptr, csr.indices, seeds, hops)
            kernel = torch.ops.graphloc.khop_subgraphs(csr.indptr, csr.indices, seeds, hops)
            for a, b in zip(ours, kernel, strict=True):
                assert torch.equal(a, b)
            args = (csr.indptr, csr.indices, csc.indptr, csc.indices, seeds, hops)
            assert torch.equal(reference.separated_rounds(*args),
                               torch.ops.graphloc.separated_rounds(*args))
    with pytest.raises(ValueError, match="seed 50 is out of range for 50 nodes"):
        reference.khop_subgraphs(csr.indptr, csr.indices, torch.tensor([3, 50]), 2)
    with pytest.raises(ValueError, match="hops must be >= 0"):
        reference.khop_subgraphs(csr.indptr, csr.indices, seeds, -1)
    with pytest.raises(ValueError, match="seed 3 appears twice"):
        reference.separated_rounds(csr.indptr, csr.indices, csc.indptr, csc.indices,
                                   torch.tensor([3, 4, 3]), 1)


def test_walk_count_twin_gives_the_kernels_output():
    for seed, graph in _graphs():
        csr = graph.csr
        weight = torch.rand(graph.num_edges, dtype=torch.float64,
                            generator=torch.Generator().manual_seed(seed)) - 0.3
        for hops in (0, 1, 3):
            for w in (None, weight):
                ours = reference.walk_counts(csr.indptr, csr.indices, w, hops, 2**40)
                kernel = torch.ops.graphloc.walk_counts(csr.indptr, csr.indices, w, hops, 2**40)
                assert torch.equal(ours[0], kernel[0]) and torch.equal(ours[1], kernel[1])
                torch.testing.assert_close(ours[2], kernel[2], rtol=1e-12, atol=1e-12)
    pairs = int(kernel[0][-1])
    for run in (reference.walk_counts, torch.ops.graphloc.walk_counts):  # the same refusal
        with pytest.raises(ValueError, match=f"limit of {pairs - 1} .memory"):
            run(csr.indptr, csr.indices, None, 3, pairs - 1)
        run(csr.indptr, csr.indices, None, 3, pairs)  # the limit itself is allowed


def _relational_cases(graph, seed):
    """(csrs, relations, num_nodes, seeds) of one graph read as one relation, and as two
    node types (even and odd ids) with the four relations between them."""
    csr, gen = graph.csr, torch.Generator().manual_seed(seed)
    n = graph.num_nodes
    yield ([(csr.indptr, csr.indices)], [(0, 0)], [n],
           [torch.randperm(n, generator=gen)[:8]])
    src, dst = graph.edge_index
    half = [(n + 1) // 2, n // 2]
    csrs, relations = [], []
    for a in (0, 1):
        for b in (0, 1):
            keep = (src % 2 == a) & (dst % 2 == b)
            part = Graph.bipartite(torch.stack([src[keep] // 2, dst[keep] // 2]),
                                   (half[a], half[b]))
            csrs.append((part.csr.indptr, part.csr.indices))
            relations.append((a, b))
    yield csrs, relations, half, [torch.randperm(half[0], generator=gen)[:5], torch.tensor([2, 2])]


def _rules(csrs, num_nodes, seeds, gen):
    """Sampling rules beside uniform draws: (node_times, edge_times, seed_times,
    edge_weights, last), each with ties (times in a small range, weights with zeros)."""
    trees = sum(s.numel() for s in seeds)
    seed_times = torch.randint(0, 6, (trees,), generator=gen)
    node_times = [torch.randint(0, 8, (n,), generator=gen) for n in num_nodes]
    edge_times = [torch.randint(0, 8, (c[1].numel(),), generator=gen) for c in csrs]
    weights = [torch.randint(0, 4, (c[1].numel(),), generator=gen).double() / 2 for c in csrs]
    yield [], [], None, weights, False
    yield node_times, [], seed_times, [], False
    yield node_times, [], seed_times, [], True
    yield [], edge_times, seed_times, [], True
    yield [], edge_times, seed_times, weights, False


def _flags_and_rules(csrs, num_nodes, seeds, gen):
    """(stream, replace, disjoint, induced, rules): the uniform draws in every mode, then
    each weighted or temporal rule with and without replacement (temporal: disjoint)."""
    for stream, replace, disjoint, induced in ((0, False, False, False),
                                               (12345, True, False, False),
                                               (2**62, False, True, False),
                                               (7, True, True, False), (3, False, False, True)):
        yield stream, replace, disjoint, induced, ([], [], None, [], False)
    for i, rule in enumerate(_rules(csrs, num_nodes, seeds, gen)):
        for replace in (False, True):
            yield 100 + i, replace, rule[2] is not None, False, rule


def test_sampling_twins_draw_the_kernels_samples():
    for seed, graph in _graphs():
        for csrs, relations, num_nodes, seeds in _relational_cases(graph, seed):
            R, gen = len(relations), torch.Generator().manual_seed(seed)
            for fanouts in ([2, 3], [-1, 1], [0], [5, 5, 5], []):
                for stream, replace, disjoint, induced, rule in _flags_and_rules(
                        csrs, num_nodes, seeds, gen):
                    args = ([c[0] for c in csrs], [c[1] for c in csrs],
                            [r[0] for r in relations], [r[1] for r in relations], num_nodes,
                            seeds, [k + r % 2 if k >= 0 else k for r in range(R) for k in fanouts],
                            replace, disjoint, induced, stream, *rule)
                    ours = reference.neighbor_sample(*args)
                    kernel = torch.ops.graphloc.neighbor_sample(*args)
                    assert len(ours) == len(kernel) == 3 * len(num_nodes) + 4 * R
                    for a, b in zip(ours, kernel, strict=True):
                        assert torch.equal(a, b)
        csr = graph.csr
        for K in (1, 3, 8):
            assert torch.equal(reference.hop2_sample(csr.indptr, csr.indices, K, 99),
                               torch.ops.graphloc.hop2_sample(csr.indptr, csr.indices, K, 99))
    for seed, graph in _graphs():  # walks: loops, parallel edges, dead ends, a hub
        csc = graph.csc
        start = torch.arange(50)
        for p, q in ((1.0, 1.0), (0.5, 2.0), (4.0, 0.25), (1.0, 3.0)):
            for length in (0, 1, 6):
                for ids in (None, torch.randperm(csc.indices.numel())):
                    args = (csc.indptr, csc.indices, start, length, p, q, seed, ids,
                            length == 6)  # graphloc's csc rows are sorted
                    for a, b in zip(reference.random_walk(*args),
                                    torch.ops.graphloc.random_walk(*args), strict=True):
                        assert torch.equal(a, b)
    # a pool of more than 4,096 two-hop paths: sampled by position in both
    dense = torch.cartesian_prod(torch.arange(80), torch.arange(80)).t()
    csr = Graph(dense, num_nodes=80).csr
    assert torch.equal(reference.hop2_sample(csr.indptr, csr.indices, 6, 7),
                       torch.ops.graphloc.hop2_sample(csr.indptr, csr.indices, 6, 7))
    one = ([csr.indptr], [csr.indices], [0], [0], [80])
    with pytest.raises(ValueError, match="seed node 80 is out of range for 80 nodes"):
        reference.neighbor_sample(*one, [torch.tensor([80])], [2], False, False, False, 0)
    with pytest.raises(ValueError, match="fan-outs must be >= 0, or -1"):
        reference.neighbor_sample(*one, [torch.tensor([3])], [-2], False, False, False, 0)
    with pytest.raises(ValueError, match="induced subgraphs are not sampled disjointly"):
        reference.neighbor_sample(*one, [torch.tensor([3])], [2], False, True, True, 0)
    with pytest.raises(ValueError, match="K \\(tokens per node\\) must be >= 1"):
        reference.hop2_sample(csr.indptr, csr.indices, 0, 0)


def test_walk_count_twin_and_kernel_agree_on_nan_and_infinite_weights():
    graph = Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 3, 0]]), num_nodes=4)
    csr = graph.csr
    weight = graph.to_csr_order(torch.tensor([float("nan"), 2.0, float("-inf"), 0.5],
                                             dtype=torch.float64))
    ours = reference.walk_counts(csr.indptr, csr.indices, weight, 3, 2**40)
    kernel = torch.ops.graphloc.walk_counts(csr.indptr, csr.indices, weight, 3, 2**40)
    torch.testing.assert_close(ours[2], kernel[2], equal_nan=True)
    # torch's arithmetic: a walk through the NaN edge is NaN, one through -inf is -inf
    rows = torch.repeat_interleave(torch.arange(4), kernel[0].diff())
    pairs = zip(rows.tolist(), kernel[1].tolist(), strict=True)
    at = {pair: kernel[2][p] for p, pair in enumerate(pairs)}
    assert torch.isnan(at[(1, 0)][1]) and at[(3, 2)][1] == float("-inf")
    assert torch.isnan(at[(2, 0)][2]) and at[(0, 2)][1] == 0.5
