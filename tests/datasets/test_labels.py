"""Local eccentricity labels against a networkx brute force, and their quantile classes."""

import warnings

import networkx as nx
import numpy as np
import pytest
import torch
from helpers import requires_ext

from graphloc import Graph
from graphloc.datasets import eccentricity_classes, local_eccentricity


def road_graph(num_nodes: int, seed: int):
    """A thinned Delaunay graph with Euclidean lengths, both directions of each edge,
    plus one parallel edge of another length and a few isolated nodes."""
    from scipy.spatial import Delaunay
    rng = np.random.default_rng(seed)
    pts = rng.random((num_nodes, 2))
    tri = Delaunay(pts).simplices
    pairs = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]),
                              axis=1), axis=0)
    pairs = pairs[rng.random(len(pairs)) < 0.55]
    lengths = np.linalg.norm(pts[pairs[:, 0]] - pts[pairs[:, 1]], axis=1)
    pairs = np.concatenate([pairs, pairs[:1]])
    lengths = np.concatenate([lengths, lengths[:1] * 0.5])  # a shorter parallel street
    edge_index = torch.from_numpy(np.concatenate([pairs, pairs[:, ::-1]]).T.copy())
    length = torch.from_numpy(np.concatenate([lengths, lengths]))
    return Graph(edge_index, num_nodes=num_nodes + 3), length


def brute_force(graph: Graph, lengths: torch.Tensor, hops: int) -> torch.Tensor:
    g = nx.MultiGraph()
    g.add_nodes_from(range(graph.num_nodes))
    for (u, v), w in zip(graph.edge_index.t().tolist(), lengths.tolist(), strict=True):
        g.add_edge(u, v, length=w)
    out = torch.zeros(graph.num_nodes, dtype=torch.float64)
    for v in g:
        ball = nx.single_source_shortest_path_length(g, v, cutoff=hops)
        dist = nx.single_source_dijkstra_path_length(g.subgraph(ball), v, weight="length")
        out[v] = max(dist.values())
    return out


@requires_ext
@pytest.mark.parametrize("hops", [0, 1, 3, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_networkx_on_road_graphs(hops, seed):
    graph, lengths = road_graph(120, seed)
    expected = brute_force(graph, lengths, hops)
    torch.testing.assert_close(local_eccentricity(graph, lengths, hops, method="cpp"), expected)
    if hops <= 3:
        torch.testing.assert_close(local_eccentricity(graph, lengths, hops, method="python"),
                                   expected)


@requires_ext
def test_grid_with_unit_lengths_has_closed_form():
    """On a 9x9 grid with unit lengths, distances equal hop counts, so ecc_k(v) = min(k,
    graph eccentricity of v); with k = 4 the centre's ball is the radius-4 diamond."""
    g = nx.convert_node_labels_to_integers(nx.grid_2d_graph(9, 9))
    edges = torch.tensor(list(g.edges())).t()
    graph = Graph(torch.cat([edges, edges.flip(0)], dim=1), num_nodes=81)
    lengths = torch.ones(graph.num_edges, dtype=torch.float64)
    ecc = local_eccentricity(graph, lengths, hops=4)
    expected = torch.tensor([min(4, nx.eccentricity(g, v)) for v in range(81)],
                            dtype=torch.float64)
    torch.testing.assert_close(ecc, expected)
    torch.testing.assert_close(ecc, brute_force(graph, lengths, 4))


@requires_ext
def test_ball_restriction_matters():
    """Path 0-1-2 of lengths 10, 10 and a shortcut 0-3-4-5-2 of length 1 per edge. With
    k = 2 node 5 is 3 hops from 0, outside its ball, so inside the ball dist(0, 2) = 20
    (on the whole graph it would be 4)."""
    edges = torch.tensor([[0, 1], [1, 2], [0, 3], [3, 4], [4, 5], [5, 2]]).t()
    graph = Graph(torch.cat([edges, edges.flip(0)], dim=1), num_nodes=6)
    lengths = torch.tensor([10.0, 10.0, 1.0, 1.0, 1.0, 1.0] * 2, dtype=torch.float64)
    ecc = local_eccentricity(graph, lengths, hops=2)
    assert ecc[0].item() == 20.0
    torch.testing.assert_close(ecc, brute_force(graph, lengths, 2))
    assert local_eccentricity(graph, lengths, hops=1)[0].item() == 10.0
    assert local_eccentricity(graph, lengths, hops=4)[0].item() == 10.0  # 1 and 2 via 5: 4, 10


def test_bad_input():
    graph, lengths = road_graph(30, 0)
    with pytest.raises(ValueError, match="hops must be an integer >= 0, got -1"):
        local_eccentricity(graph, lengths, hops=-1)
    with pytest.raises(ValueError, match=r"lengths must be a tensor of shape \[\d+\]"):
        local_eccentricity(graph, lengths[:-1])
    with pytest.raises(TypeError, match="floating point, got torch.int64"):
        local_eccentricity(graph, lengths.long())
    negative = lengths.clone()
    negative[5] = -2.0
    with pytest.raises(ValueError, match="non-negative, got -2.0 at edge 5"):
        local_eccentricity(graph, negative)
    with pytest.raises(ValueError, match="method must be"):
        local_eccentricity(graph, lengths, method="gpu")


def test_classes_are_near_equal_quantiles_with_ties_by_node_id():
    values = torch.tensor([5.0, 1.0, 5.0, 3.0, 2.0, 5.0, 0.5])
    classes = eccentricity_classes(values, num_classes=3)  # chunk = 7 // 3 + 1 = 3
    # ranks: 0.5->0 (node 6), 1->1 (1), 2->2 (4), 3->3 (3), 5s -> 4, 5, 6 (nodes 0, 2, 5)
    assert classes.tolist() == [1, 0, 1, 1, 0, 2, 0]
    big = torch.rand(1003, generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(eccentricity_classes(big, 10))
    assert counts.tolist() == [101] * 9 + [94]
    with pytest.raises(ValueError, match="num_classes must be an integer >= 1"):
        eccentricity_classes(big, 0)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        eccentricity_classes(torch.zeros(0), 10)


def test_nan_eccentricities_have_no_class():
    with pytest.raises(ValueError, match=r"values holds NaN \(node 1\)"):
        eccentricity_classes(torch.tensor([0.1, float("nan"), 0.3], dtype=torch.float64), 2)


def test_classes_the_cut_cannot_make_or_ties_cannot_tell_apart_warn_at_the_caller():
    """At 0 hops every eccentricity is 0 and the classes split the nodes by id alone; with
    few nodes the release's cut makes fewer classes than asked (6 nodes: 6 classes of one).
    Both were silent. The counts are the release formula's: chunk = N // C + 1."""
    with pytest.warns(UserWarning, match="take 1 distinct values for 9 classes") as record:
        classes = eccentricity_classes(torch.zeros(36, dtype=torch.float64), 10)
    assert record[0].filename == __file__
    assert classes.tolist() == [k // 4 for k in range(36)]  # ranks by node id, chunks of 4
    with pytest.warns(UserWarning, match="36 values in chunks of 4 make 9 classes, not 10"):
        eccentricity_classes(torch.arange(36.0), 10)
    with pytest.warns(UserWarning, match="6 values in chunks of 1 make 6 classes, not 10"):
        eccentricity_classes(torch.arange(6.0), 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # distinct values, a full cut: silent
        eccentricity_classes(torch.rand(1003, generator=torch.Generator().manual_seed(0)), 10)


def test_synthetic_city_refuses_zero_hops():
    from graphloc.datasets import synthetic_city
    with pytest.raises(ValueError, match="hops must be an integer >= 1"):
        synthetic_city(100, hops=0)


def test_eccentricity_classes_of_a_list_are_named():
    with pytest.raises(ValueError, match="values must be a non-empty 1-D tensor, got list"):
        eccentricity_classes([3.0, 1.0], 2)
