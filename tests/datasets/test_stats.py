"""road_statistics against networkx on the undirected simple graph: degrees, components,
the hop diameter (exact, and a lower bound past the exact size) and the transitivity, on
graphs with loops, parallel edges, one-way edges, isolated nodes and several components."""

import networkx as nx
import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph
from graphloc.datasets import stats as stats_module
from graphloc.datasets.stats import road_statistics


def _simple(graph: Graph) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(graph.num_nodes))
    g.add_edges_from((u, v) for u, v in graph.edge_index.t().tolist() if u != v)
    return g


def _diameter(g: nx.Graph) -> int:
    return max((nx.diameter(g.subgraph(c)) for c in nx.connected_components(g)), default=0)


@pytest.mark.parametrize("seed", range(6))
def test_statistics_are_networkxs(seed):
    n = 30 + 7 * seed
    edge_index = random_edge_index(n, n + 3 * seed, seed)  # sparse: several components
    graph = Graph(edge_index, num_nodes=n + 5)  # and isolated nodes
    g = _simple(graph)
    stats = road_statistics(graph)
    degrees = [d for _, d in g.degree()]
    components = list(nx.connected_components(g))
    assert stats["nodes"] == g.number_of_nodes() and stats["edges"] == g.number_of_edges()
    assert stats["mean_degree"] == pytest.approx(sum(degrees) / len(degrees))
    assert stats["max_degree"] == max(degrees)
    assert stats["components"] == len(components)
    assert stats["largest_component"] == max(len(c) for c in components)
    assert stats["hop_diameter"] == _diameter(g) and stats["hop_diameter_exact"]
    assert stats["clustering"] == pytest.approx(nx.transitivity(g))


def test_the_longest_path_in_a_smaller_component_counts():
    """A 10-node path beside a 30-node clique: the diameter is the path's 9, not the
    clique's 1 (the sweeps ran in the highest-degree node's component only)."""
    clique = torch.combinations(torch.arange(30)).t()
    path = torch.stack([torch.arange(30, 39), torch.arange(31, 40)])
    graph = Graph(torch.cat([clique, path], 1), num_nodes=40)
    stats = road_statistics(graph)
    assert stats["hop_diameter"] == 9 and stats["components"] == 2


def test_past_the_exact_size_a_lower_bound_said_so(monkeypatch):
    monkeypatch.setattr(stats_module, "EXACT_DIAMETER_NODES", 10)
    for seed in range(5):
        graph = Graph(random_edge_index(60, 150, seed), num_nodes=60)
        stats = road_statistics(graph)
        assert stats["hop_diameter"] <= _diameter(_simple(graph))
        assert not stats["hop_diameter_exact"]
    path = Graph(torch.stack([torch.arange(59), torch.arange(1, 60)]), num_nodes=60)
    stats = road_statistics(path)  # double sweeps find a tree's diameter
    assert stats["hop_diameter"] == 59 and not stats["hop_diameter_exact"]


def test_graphs_without_nodes_or_edges():
    none = road_statistics(Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0))
    assert none["nodes"] == 0 and none["hop_diameter"] == 0 and none["components"] == 0
    loops = road_statistics(Graph(torch.tensor([[0, 1], [0, 1]]), num_nodes=3))
    assert loops["edges"] == 0 and loops["components"] == 3 and loops["largest_component"] == 1


def test_what_is_not_one_node_set_is_refused_by_name():
    with pytest.raises(TypeError, match="takes a graphloc.Graph, got Tensor"):
        road_statistics(torch.tensor([[0, 1], [1, 0]]))
    bipartite = Graph.bipartite(torch.tensor([[0, 1, 5], [0, 1, 1]]), (6, 2))
    with pytest.raises(ValueError, match=r"bipartite \(6 sources, 2 destinations\)"):
        road_statistics(bipartite)
