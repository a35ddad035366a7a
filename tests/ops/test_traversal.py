"""The checked wrappers of the graph kernels (graphloc.ops.traversal): values against
brute-force oracles on small graphs, and every bad argument named."""

import networkx as nx
import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph, ops
from graphloc.ops import reference


def graph_and_nx(seed=0, n=40):
    graph = Graph(random_edge_index(n - 5, 120, seed=seed), num_nodes=n)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(graph.edge_index.t().tolist())
    return graph, g


def test_khop_balls_are_the_in_balls():
    graph, g = graph_and_nx(1)
    seeds = torch.tensor([0, 7, 39])
    balls = ops.khop_subgraphs(graph, seeds, 2)
    for s, seed in enumerate(seeds.tolist()):
        nodes = balls.nodes[balls.node_ptr[s]:balls.node_ptr[s + 1]].tolist()
        hops = balls.hops[balls.node_ptr[s]:balls.node_ptr[s + 1]].tolist()
        dist = nx.single_source_shortest_path_length(g.reverse(), seed, cutoff=2)
        assert nodes[0] == seed and dict(zip(nodes, hops, strict=True)) == dist


def test_separated_rounds_have_disjoint_balls():
    graph, g = graph_and_nx(2)
    seeds = torch.arange(0, 40, 3)
    rounds = ops.separated_rounds(graph, seeds, 1)
    ball = {s: set(nx.single_source_shortest_path_length(g.reverse(), s, cutoff=1))
            for s in seeds.tolist()}
    for r in rounds.unique().tolist():
        members = seeds[rounds == r].tolist()
        for a in members:
            for b in members:
                assert a == b or not ball[a] & ball[b]


def test_sampling_and_eccentricity_match_their_twins():
    graph, _ = graph_and_nx(3)
    sample = ops.neighbor_sample(graph, torch.tensor([1, 2]), [-1])
    assert sample.nodes[:2].tolist() == [1, 2]
    full_in = {(int(s), int(d)) for s, d in graph.edge_index.t() if d in (1, 2)}
    got = {(int(sample.nodes[a]), int(sample.nodes[b])) for a, b in
           zip(sample.src, sample.dst, strict=True)}
    assert got == full_in  # fan-out -1: every in-edge of the seeds
    lengths = torch.rand(graph.num_edges, dtype=torch.float64)
    torch.testing.assert_close(ops.local_eccentricity(graph, lengths, 3),
                               ops.local_eccentricity(graph, lengths, 3, twin=True))
    tokens = ops.hop2_sample(graph, 4, seed=5)
    assert tokens.shape == (graph.num_nodes, 4) and tokens[:, 0].tolist() == \
        list(range(graph.num_nodes))


def test_bad_arguments_are_named():
    graph, _ = graph_and_nx(4)
    with pytest.raises(TypeError, match="seeds must be a 1-D integer tensor"):
        ops.khop_subgraphs(graph, torch.tensor([0.5]), 1)
    with pytest.raises(ValueError, match="seed 40 is out of range for 40 nodes"):
        ops.khop_subgraphs(graph, torch.tensor([0, 40]), 1)
    with pytest.raises(ValueError, match="hops must be an integer >= 0, got -1"):
        ops.khop_subgraphs(graph, torch.tensor([0]), -1)
    with pytest.raises(ValueError, match="seed 3 appears twice"):
        ops.separated_rounds(graph, torch.tensor([3, 3]), 1)
    with pytest.raises(ValueError, match="fanouts must be a list of integers"):
        ops.neighbor_sample(graph, torch.tensor([0]), [-2])
    with pytest.raises(ValueError, match="K \\(tokens per node\\) must be an integer >= 1"):
        ops.hop2_sample(graph, 0)
    # [40, 10^12] tokens: 320 TB, beyond any machine (the allocator named only bytes)
    with pytest.raises(ValueError, match=r"K=1000000000000 \(tokens per node\) asks for a "
                                         r"\[40, 1000000000000\] torch.int64 output of"):
        ops.hop2_sample(graph, 10**12)
    with pytest.raises(ValueError, match="lengths must be a tensor of shape"):
        ops.local_eccentricity(graph, torch.rand(3), 2)
    with pytest.raises(ValueError, match="lengths must be non-negative"):
        ops.local_eccentricity(graph, -torch.ones(graph.num_edges), 2)
    with pytest.raises(ValueError, match="bipartite"):
        ops.khop_subgraphs(Graph.bipartite(torch.tensor([[0], [1]]), (3, 2)),
                           torch.tensor([0]), 1)
    with pytest.raises(TypeError, match="expects a graphloc.Graph"):
        ops.hop2_sample(graph.edge_index, 2)
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)  # raised before
    assert ops.hop2_sample(nodeless, 3).shape == (0, 3)
    assert reference.hop2_sample(nodeless.csr.indptr, nodeless.csr.indices, 3, 0).shape == (0, 3)
    empty = ops.khop_subgraphs(graph, torch.tensor([], dtype=torch.long), 2)
    assert empty.node_ptr.tolist() == [0] and empty.nodes.numel() == 0
