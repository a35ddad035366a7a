"""graphloc.cluster, torch_cluster's API: each function against an oracle written here
(matching rules, the voxel formula, walks read back along the edges), its draws against
torch's generator, and its bad input refused by name. torch_cluster's own tests run on it
in benchmarks/peer_tests.sh."""

import math

import pytest
import torch
from helpers import random_edge_index

from graphloc import cluster


def _undirected(edge_index):
    return torch.cat([edge_index, edge_index.flip(0)], 1)


def _assert_maximal_matching(row, col, clusters, weight=None):
    """Every cluster is one node or two adjacent ones named by the smaller id, and no edge
    joins two nodes left alone (the greedy matching is maximal). With weights, a node
    matched greedily took its heaviest free neighbour, so no edge from a lone node outweighs
    nothing: checked through maximality alone."""
    n = clusters.numel()
    members = {}
    for node, c in enumerate(clusters.tolist()):
        members.setdefault(c, []).append(node)
    edges = {(u, v) for u, v in zip(row.tolist(), col.tolist(), strict=True) if u != v}
    for c, nodes in members.items():
        assert len(nodes) <= 2 and c == min(nodes)
        if len(nodes) == 2:
            assert tuple(nodes) in edges or tuple(reversed(nodes)) in edges
    alone = {nodes[0] for nodes in members.values() if len(nodes) == 1}
    assert not any(u in alone and v in alone for u, v in edges)
    assert n == max(int(row.max()), int(col.max())) + 1


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [False, True])
def test_graclus_cluster_is_a_maximal_matching(seed, weighted):
    edge_index = _undirected(random_edge_index(40, 90, seed=seed))
    row, col = edge_index
    weight = torch.rand(row.numel(), generator=torch.Generator().manual_seed(seed)) \
        if weighted else None
    torch.manual_seed(seed)
    _assert_maximal_matching(row, col, cluster.graclus_cluster(row, col, weight), weight)


def test_graclus_cluster_takes_the_heaviest_free_neighbour():
    # a path 0 - 1 - 2 whose heavier edge is 1 - 2: whichever node comes first, 1 and 2 pair
    row, col = torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1])
    weight = torch.tensor([1.0, 1.0, 5.0, 5.0])
    for seed in range(6):
        torch.manual_seed(seed)
        clusters = cluster.graclus_cluster(row, col, weight).tolist()
        assert clusters[1] == clusters[2] == 1 or clusters[0] == clusters[1] == 0


def _voxels(pos, size, start, end):
    """The voxel id by the definition: floor((pos - start) / size) per dimension, the
    first dimension fastest, each dimension's count of voxels from start to end."""
    pos = pos.double().reshape(pos.size(0), -1)
    start = pos.min(0).values if start is None else start.double()
    end = pos.max(0).values if end is None else end.double()
    size = size.double()
    counts = [math.floor((e - s) / z) + 1 for s, e, z in
              zip(start.tolist(), end.tolist(), size.tolist(), strict=True)]
    ids = []
    for point in pos.tolist():
        cell, stride = 0, 1
        for d, value in enumerate(point):
            cell += math.floor((value - start[d].item()) / size[d].item()) * stride
            stride *= counts[d]
        ids.append(cell)
    return ids


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("bounds", [False, True])
def test_grid_cluster_numbers_voxels_as_the_definition(dtype, bounds):
    gen = torch.Generator().manual_seed(3)
    pos = (torch.rand(60, 3, generator=gen) * 40).to(dtype)
    size = torch.tensor([5, 7, 4]).to(dtype)
    start = torch.tensor([-2, 0, -1]).to(dtype) if bounds else None
    end = torch.tensor([45, 41, 50]).to(dtype) if bounds else None
    assert cluster.grid_cluster(pos, size, start, end).tolist() == \
        _voxels(pos, size, start, end)


def test_a_one_entry_size_applies_to_every_dimension():
    pos = torch.rand(40, 3, generator=torch.Generator().manual_seed(6)) * 10
    assert torch.equal(cluster.grid_cluster(pos, torch.tensor([2.5])),
                       cluster.grid_cluster(pos, torch.tensor([2.5, 2.5, 2.5])))
    assert cluster.grid_cluster(pos, torch.tensor([2.5])).tolist() == \
        _voxels(pos, torch.tensor([2.5, 2.5, 2.5]), None, None)


def test_grid_cluster_refuses_a_point_outside_the_grid_by_name():
    with pytest.raises(ValueError, match="outside"):
        cluster.grid_cluster(torch.tensor([[0.0], [9.0]]), torch.tensor([2.0]),
                             end=torch.tensor([5.0]))


def _assert_walks_follow(row, col, start, nodes, edges):
    assert torch.equal(nodes[:, 0], start)
    has_out = set(row.tolist())
    for walk, taken in zip(nodes.tolist(), edges.tolist(), strict=True):
        for step, edge in enumerate(taken):
            here, there = walk[step], walk[step + 1]
            if here in has_out:
                assert (row[edge].item(), col[edge].item()) == (here, there)
            else:
                assert edge == -1 and there == here


@pytest.mark.parametrize("coalesced", [True, False])
def test_random_walk_steps_along_the_edges_it_reports(coalesced):
    edge_index = random_edge_index(30, 80, seed=5)  # unsorted rows, parallel edges
    row, col = edge_index
    start = torch.arange(32)  # 30 and 31 have no edges: num_nodes counts start too
    torch.manual_seed(0)
    nodes, edges = cluster.random_walk(row, col, start, 6, p=0.5, q=2.0, coalesced=coalesced,
                                       return_edge_indices=True)
    assert nodes.shape == (32, 7) and edges.shape == (32, 6)
    if coalesced:  # positions in torch_cluster's order: by row, then col
        order = torch.sort(row * 32 + col, stable=True).indices
        row, col = row[order], col[order]
    _assert_walks_follow(row, col, start, nodes, edges)
    assert (nodes[30:] == torch.tensor([[30], [31]])).all()


def test_random_walk_draws_from_torchs_generator():
    row, col = _undirected(random_edge_index(20, 50, seed=2))
    start = torch.arange(20)
    torch.manual_seed(7)
    first = cluster.random_walk(row, col, start, 8)
    second = cluster.random_walk(row, col, start, 8)
    torch.manual_seed(7)
    assert torch.equal(cluster.random_walk(row, col, start, 8), first)
    assert not torch.equal(first, second)


def test_neighbor_sampler_draws_each_row_with_randperm():
    rowptr = torch.tensor([0, 3, 7, 7, 12])
    start = torch.tensor([0, 1, 2, 3, 1])
    for size, counts in ((1.0, [3, 4, 0, 5, 4]), (0.5, [2, 2, 0, 3, 2]), (3, [3, 3, 0, 3, 3])):
        torch.manual_seed(11)
        drawn = cluster.neighbor_sampler(start, rowptr, size)
        torch.manual_seed(11)
        expected = [torch.randperm(rowptr[v + 1].item() - rowptr[v].item())[:c] + rowptr[v]
                    for v, c in zip(start.tolist(), counts, strict=True)]
        assert torch.equal(drawn, torch.cat(expected))


@pytest.mark.parametrize("call, message", [
    (lambda: cluster.graclus_cluster(torch.tensor([0, 1]), torch.tensor([1])),
     "row has 2 entries but col has 1"),
    (lambda: cluster.graclus_cluster(torch.tensor([[0, 1]]), torch.tensor([1, 0])),
     "row must be a 1-D tensor"),
    (lambda: cluster.graclus_cluster(torch.tensor([0, -1]), torch.tensor([1, 0])),
     r"graclus_cluster: row\[1\] = -1 is not a node id"),
    (lambda: cluster.graclus_cluster(torch.tensor([0, 1]), torch.tensor([1.0, 0.0])),
     "col must hold integer node ids, got torch.float32"),
    (lambda: cluster.graclus_cluster(torch.tensor([0, 3]), torch.tensor([3, 0]), num_nodes=2),
     r"graclus_cluster: row\[1\] = 3 is not a node id of the 2 nodes"),
    (lambda: cluster.random_walk(torch.tensor([0, 1]), torch.tensor([1, 0]),
                                 torch.tensor([[0]]), 3), "start must be a 1-D tensor"),
    (lambda: cluster.random_walk(torch.tensor([0, 1]), torch.tensor([1, 0]),
                                 torch.tensor([0]), 3, p=0), "p must be a finite number"),
    (lambda: cluster.random_walk(torch.tensor([0, 1]), torch.tensor([1, 0]),
                                 torch.tensor([0]), 3, num_nodes=1),
     r"random_walk: row\[1\] = 1 is not a node id of the 1 nodes"),
    (lambda: cluster.random_walk(torch.tensor([0, 1]), torch.tensor([1, 0]),
                                 torch.tensor([0, 5]), 3, num_nodes=2),
     r"random_walk: start\[1\] = 5 is not a node id of the 2 nodes"),
    (lambda: cluster.neighbor_sampler(torch.tensor([0]), torch.tensor([0, 2]), 0),
     "size must be a finite number > 0, got 0"),
    (lambda: cluster.neighbor_sampler(torch.tensor([0]), torch.tensor([0, 2]), math.nan),
     "size must be a finite number > 0, got nan"),
    (lambda: cluster.neighbor_sampler(torch.tensor([2]), torch.tensor([0, 2]), 1),
     "start holds node 2, outside the 1 rows"),
    (lambda: cluster.neighbor_sampler(torch.tensor([0]), torch.tensor([0, 3, 1]), 1),
     "rowptr must start at 0 and never decrease"),
    (lambda: cluster.neighbor_sampler(torch.tensor([0.0]), torch.tensor([0, 2]), 1),
     "start must be a 1-D integer tensor"),
])
def test_bad_input_is_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_functions_script_and_give_the_eager_numbers():
    """torch_cluster's own tests script its functions; so may a user's module."""
    gen = torch.Generator().manual_seed(4)
    x, y = torch.rand(30, 3, generator=gen), torch.rand(7, 3, generator=gen)
    batch = torch.arange(30) // 15
    row, col = _undirected(random_edge_index(30, 60, seed=4))
    calls = {
        "knn": (x, y, 3), "knn_graph": (x, 4, batch), "radius": (x, y, 0.4),
        "radius_graph": (x, 0.3, batch), "nearest": (y, x),
        "fps": (x, batch, 0.25, False), "grid_cluster": (x, torch.tensor([0.3, 0.3, 0.3])),
        "graclus_cluster": (row, col, torch.rand(row.numel(), generator=gen)),
        "random_walk": (row, col, torch.arange(30), 5, 0.5, 2.0),
        "neighbor_sampler": (torch.tensor([0, 2]), torch.tensor([0, 3, 3, 7]), 2.0),
    }
    for name, args in calls.items():
        eager, scripted = getattr(cluster, name), torch.jit.script(getattr(cluster, name))
        torch.manual_seed(9)
        expected = eager(*args)
        torch.manual_seed(9)
        assert torch.equal(scripted(*args), expected), name
    nodes, edges = torch.jit.script(cluster.random_walk)(row, col, torch.arange(30), 5,
                                                         return_edge_indices=True)
    assert nodes.shape == (30, 6) and edges.shape == (30, 5)


def test_empty_inputs_give_empty_results():
    none = torch.empty(0, dtype=torch.long)
    assert cluster.graclus_cluster(none, none).numel() == 0
    assert cluster.graclus_cluster(none, none, num_nodes=3).tolist() == [0, 1, 2]
    assert cluster.grid_cluster(torch.rand(0, 2), torch.tensor([0.5, 0.5])).numel() == 0
    walks = cluster.random_walk(torch.tensor([0, 1]), torch.tensor([1, 0]), none, 3)
    assert walks.shape == (0, 4)
    assert cluster.neighbor_sampler(none, torch.tensor([0, 2]), 1.0).numel() == 0
