"""graclus and voxel_grid (graphloc.ops.cluster): PyG's clusterings without pyg-lib, checked
against a transcription of pyg-lib's graclus kernel under the same random order, the
matching's own properties, and brute-force voxels."""

import math

import pytest
import torch
from helpers import requires_ext

from graphloc import Graph
from graphloc.ops import graclus, reference, row_sorted_csr, voxel_grid


def symmetric_graph(num_nodes, num_edges, seed, loops=False):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    if not loops:
        edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    return torch.cat([edge_index, edge_index.flip(0)], dim=1)


def pyg_lib_graclus(edge_index, weight, num_nodes):
    """pyg-lib's CPU graclus kernel read line by line, after PyG's preprocessing
    (sort_edge_index by row then column, one torch.randperm of the nodes)."""
    order = edge_index[0] * num_nodes + edge_index[1]
    perm = torch.sort(order, stable=True).indices
    row, col = edge_index[0, perm].tolist(), edge_index[1, perm].tolist()
    w = None if weight is None else weight[perm].tolist()
    rowptr = [0] * (num_nodes + 1)
    for r in row:
        rowptr[r + 1] += 1
    for i in range(num_nodes):
        rowptr[i + 1] += rowptr[i]
    out = [-1] * num_nodes
    for u in torch.randperm(num_nodes, dtype=torch.long).tolist():
        if out[u] >= 0:
            continue
        if w is None:
            out[u] = u
            for e in range(rowptr[u], rowptr[u + 1]):
                v = col[e]
                if out[v] >= 0:
                    continue
                out[u] = out[v] = min(u, v)
                break
        else:
            v_max, w_max = u, 0.0
            for e in range(rowptr[u], rowptr[u + 1]):
                v = col[e]
                if out[v] >= 0:
                    continue
                if w[e] >= w_max:
                    v_max, w_max = v, w[e]
            out[u] = out[v_max] = min(u, v_max)
    return torch.tensor(out)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graclus_gives_pyg_libs_clusters_for_the_same_seed(seed, weighted):
    edge_index = symmetric_graph(50, 120, seed)
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randint(0, 4, (edge_index.size(1),), generator=gen).float() \
        if weighted else None  # small integers: ties
    torch.manual_seed(seed)
    ours = graclus(edge_index, weight, num_nodes=50)
    torch.manual_seed(seed)
    assert torch.equal(ours, pyg_lib_graclus(edge_index, weight, 50))


def test_graclus_is_a_maximal_matching():
    for seed in range(5):
        edge_index = symmetric_graph(80, 150, seed)
        torch.manual_seed(seed)
        cluster = graclus(edge_index, num_nodes=80)
        members = {}
        for node, c in enumerate(cluster.tolist()):
            members.setdefault(c, []).append(node)
        edges = set(map(tuple, edge_index.t().tolist()))
        for c, nodes in members.items():
            assert c == min(nodes) and len(nodes) <= 2
            if len(nodes) == 2:
                assert tuple(nodes) in edges  # pairs are neighbours
        single = {nodes[0] for nodes in members.values() if len(nodes) == 1}
        assert not any(u in single and v in single for u, v in edges)  # maximal


def test_graclus_never_pairs_a_node_with_its_own_loop():
    edge_index = torch.tensor([[0, 0, 1], [0, 1, 0]])  # 0 has a loop heavier than 0 - 1
    weight = torch.tensor([5.0, 1.0, 1.0])
    for seed in range(6):
        torch.manual_seed(seed)
        assert graclus(edge_index, weight).tolist() == [0, 0]


def test_graclus_bad_input_is_named():
    edge_index = symmetric_graph(10, 20, 0)
    with pytest.raises(ValueError, match="weight must be finite and >= 0, got nan at edge 3"):
        weight = torch.ones(edge_index.size(1))
        weight[3] = float("nan")
        graclus(edge_index, weight)
    with pytest.raises(ValueError, match="weight must be finite and >= 0, got -1.0"):
        graclus(edge_index, -torch.ones(edge_index.size(1)))
    with pytest.raises(ValueError, match="one entry per edge"):
        graclus(edge_index, torch.ones(3))
    with pytest.raises(ValueError, match="edge_index holds 9 but dim_size is 5"):
        graclus(edge_index, num_nodes=5)
    with pytest.raises(ValueError, match="edge_index must be a \\[2, E\\] tensor"):
        graclus(edge_index.t())
    assert graclus(torch.empty(2, 0, dtype=torch.long), num_nodes=3).tolist() == [0, 1, 2]


@requires_ext
def test_graclus_kernel_and_twin_agree():
    for seed in range(3):
        edge_index = symmetric_graph(40, 90, seed, loops=True)
        csc = Graph(edge_index, num_nodes=40).csc
        order = torch.randperm(40, generator=torch.Generator().manual_seed(seed))
        weight = torch.rand(csc.indices.numel(), dtype=torch.float64)
        for w in (None, weight, weight.round()):
            assert torch.equal(torch.ops.graphloc.graclus(csc.indptr, csc.indices, order, w),
                               reference.graclus(csc.indptr, csc.indices, order, w))
        with pytest.raises(RuntimeError, match="order is not a permutation of the 40 nodes"):
            torch.ops.graphloc.graclus(csc.indptr, csc.indices, order.clamp(max=38), None)


def brute_force_voxels(pos, size, batch, start, end):
    """Each point's voxel id counted out by hand: per dimension floor((x - start) / size),
    the first dimension fastest, then the example."""
    n, dim = pos.shape
    counts = [math.floor((end[d] - start[d]) / size[d]) + 1 for d in range(dim)]
    out = []
    for i in range(n):
        cell, stride = 0, 1
        for d in range(dim):
            cell += math.floor((float(pos[i, d]) - start[d]) / size[d]) * stride
            stride *= counts[d]
        out.append(cell + int(batch[i]) * stride)
    return torch.tensor(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_voxel_ids_are_the_voxels_counted_out(dtype):
    gen = torch.Generator().manual_seed(0)
    pos = (torch.rand(200, 3, generator=gen, dtype=torch.float64) * 4 - 1).to(dtype)
    batch = torch.arange(4).repeat_interleave(50)
    size = [0.5, 0.7, 1.1]
    start = [-1.0, -1.5, -1.0]
    end = [3.0, 3.0, 3.2]
    ours = voxel_grid(pos, size, batch, start=start, end=end)
    expected = brute_force_voxels(pos.double(), size, batch, start, end)
    assert torch.equal(ours, expected)
    default = voxel_grid(pos, 0.5, batch)  # the grid spans the points
    low = pos.min(0).values.tolist()
    high = pos.max(0).values.tolist()
    assert torch.equal(default, brute_force_voxels(pos.double(), [0.5] * 3, batch, low, high))


def test_voxel_grid_refuses_what_pyg_lib_misplaces():
    pos = torch.tensor([[0.0, 0.0], [1.0, 2.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match="pos\\[1\\] = \\[1.0, 2.0\\] \\(example 0\\) lies "
                                         "outside the grid"):
        voxel_grid(pos, 0.5, end=[1.0, 1.0])
    with pytest.raises(ValueError, match="pos\\[0\\] .* lies outside"):
        voxel_grid(pos, 0.5, start=0.1)
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match=f"pos holds \\[{bad}\\] at row 2: coordinates "
                                             f"must be finite"):
            voxel_grid(torch.tensor([[0.0], [1.0], [bad]]), 0.5)
        with pytest.raises(ValueError, match="start must be finite"):
            voxel_grid(pos, 0.5, start=bad)
        with pytest.raises(ValueError, match="end must be finite"):
            voxel_grid(pos, 0.5, end=[1.0, bad])
    assert voxel_grid(torch.empty(0, 2), 0.5).shape == (0,)  # no points, no ids
    with pytest.raises(ValueError, match="batch must be an integer tensor of shape \\[3\\], "
                                         "got torch.float32"):
        voxel_grid(pos, 0.5, batch=torch.zeros(3))
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="size must be finite and > 0"):
            voxel_grid(pos, bad)
    with pytest.raises(ValueError, match="one value or one per dimension \\(2\\)"):
        voxel_grid(pos, [0.5, 0.5, 0.5])
    with pytest.raises(TypeError, match="pos must be a floating-point"):
        voxel_grid(pos.long(), 0.5)


def test_row_sorted_csr_against_sorted():
    gen = torch.Generator().manual_seed(0)
    row, col = torch.randint(0, 9, (2, 60), generator=gen)
    indptr, perm = row_sorted_csr(row, col, 9)
    expected = sorted(range(60), key=lambda e: (int(row[e]), int(col[e]), e))
    assert perm.tolist() == expected
    assert indptr.tolist() == [int((row < r).sum()) for r in range(10)]
    with pytest.raises(ValueError, match="col holds 9 but dim_size is 9"):
        row_sorted_csr(row, torch.full_like(col, 9), 9)
