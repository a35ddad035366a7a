"""graphloc.transforms against PyG's own transforms, which run here once their pyg-lib
search is swapped for a brute-force one (torch.cdist) in the test: the same edges for
KNNGraph and RadiusGraph, the same pooled data for GridSampling (whose voxel ids come from
PyG's formula written out); then what PyG's refuses, refused by name."""

import pytest
import torch
import torch_geometric
import torch_geometric.transforms as T
from torch_geometric.data import Data

from graphloc import transforms


def brute_knn_graph(x, k, batch=None, loop=False, flow="source_to_target", cosine=False,
                    num_workers=1, **_):
    """Each point's k nearest of its example (lower index on ties), as pyg-lib's."""
    batch = torch.zeros(x.size(0), dtype=torch.long) if batch is None else batch
    if cosine:
        x = torch.nn.functional.normalize(x, dim=-1)
    dist = torch.cdist(x.double(), x.double())
    dist[batch[:, None] != batch[None, :]] = float("inf")
    return nearest_edges(dist, k, loop, flow)


def nearest_edges(dist, limit, loop, flow):
    """Edges to each point from its at most ``limit`` nearest of finite distance, nearest
    first (lower index on ties)."""
    if not loop:
        dist.fill_diagonal_(float("inf"))
    order = torch.sort(dist, dim=1, stable=True)
    rows, cols = [], []
    for i in range(dist.size(0)):
        near = order.indices[i][order.values[i] < float("inf")][:limit]
        rows += [i] * len(near)
        cols += near.tolist()
    edge_index = torch.tensor([cols, rows])  # source -> target
    return edge_index if flow == "source_to_target" else edge_index.flip(0)


def brute_radius_graph(x, r, batch=None, loop=False, max_num_neighbors=32,
                       flow="source_to_target", num_workers=1, **_):
    """The points closer than r in the example, nearest first (lower index on ties), at
    most max_num_neighbors: graphloc's documented choice where PyG's tree keeps those it
    meets first (docs/models.md)."""
    batch = torch.zeros(x.size(0), dtype=torch.long) if batch is None else batch
    dist = torch.cdist(x.double(), x.double())
    dist[(dist >= r) | (batch[:, None] != batch[None, :])] = float("inf")
    return nearest_edges(dist, max_num_neighbors, loop, flow)


def brute_voxel_grid(pos, size, batch=None, start=None, end=None):
    """PyG's voxel ids: per dimension floor((p - start) / size), numbered with the example
    as the last coordinate."""
    pos = torch.cat([pos, batch.view(-1, 1).to(pos.dtype)], 1) if batch is not None else pos
    dims = pos.size(1)
    size = torch.tensor(size, dtype=pos.dtype).expand(dims).clone() if not isinstance(
        size, list) else torch.tensor(size + ([1.0] if batch is not None else []),
                                      dtype=pos.dtype)
    if batch is not None and not isinstance(size, list):
        size[-1] = 1
    low = pos.min(0).values if start is None else torch.tensor(start, dtype=pos.dtype).expand(
        dims).clone()
    high = pos.max(0).values if end is None else torch.tensor(end, dtype=pos.dtype).expand(
        dims).clone()
    if batch is not None:
        low[-1], high[-1] = 0, batch.max()
    cells = ((pos - low) / size).floor().long()
    extent = ((high - low) / size).floor().long() + 1
    ids, stride = torch.zeros(pos.size(0), dtype=torch.long), 1
    for d in range(dims):
        ids += cells[:, d] * stride
        stride *= int(extent[d])
    return ids


@pytest.fixture
def brute_force_search(monkeypatch):
    monkeypatch.setattr(torch_geometric.nn, "knn_graph", brute_knn_graph)
    monkeypatch.setattr(torch_geometric.nn, "radius_graph", brute_radius_graph)
    monkeypatch.setattr(torch_geometric.nn, "voxel_grid", brute_voxel_grid)


def cloud(seed, n=60, batched=True):
    gen = torch.Generator().manual_seed(seed)
    pos = torch.rand(n, 3, generator=gen) * 4
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor([25, 1, n - 26])) \
        if batched else None
    return Data(pos=pos, x=torch.randn(n, 5, generator=gen), batch=batch,
                y=torch.randint(0, 4, (n,), generator=gen),
                z=torch.randint(-9, 9, (n,), generator=gen))


@pytest.mark.parametrize("kwargs", [{}, {"k": 3, "loop": True}, {"force_undirected": True},
                                    {"flow": "target_to_source"}, {"k": 4, "cosine": True}])
@pytest.mark.parametrize("batched", [True, False])
def test_knn_graph_matches_pyg(brute_force_search, kwargs, batched):
    ours = transforms.KNNGraph(**kwargs)(cloud(1, batched=batched))
    theirs = T.KNNGraph(**kwargs)(cloud(1, batched=batched))
    assert torch.equal(ours.edge_index, theirs.edge_index) and ours.edge_attr is None
    assert str(transforms.KNNGraph(**kwargs)) == str(T.KNNGraph(**kwargs))


def test_knn_graph_force_undirected_refuses_a_string_by_name():
    """force_undirected="False" added the reversed edges, quietly (2026-12-07)."""
    with pytest.raises(TypeError, match="KNNGraph: force_undirected must be True or False"):
        transforms.KNNGraph(3, force_undirected="False")(cloud(1))


@pytest.mark.parametrize("kwargs", [{"r": 0.8}, {"r": 1.2, "loop": True},
                                    {"r": 2.0, "max_num_neighbors": 5},
                                    {"r": 0.9, "flow": "target_to_source"}])
@pytest.mark.parametrize("batched", [True, False])
def test_radius_graph_matches_pyg(brute_force_search, kwargs, batched):
    ours = transforms.RadiusGraph(**kwargs)(cloud(2, batched=batched))
    theirs = T.RadiusGraph(**kwargs)(cloud(2, batched=batched))
    assert torch.equal(ours.edge_index, theirs.edge_index)


@pytest.mark.parametrize("kwargs", [{"size": 1.0}, {"size": 0.7, "start": 0.0},
                                    {"size": 1.5, "start": -1.0, "end": 5.0}])
@pytest.mark.parametrize("batched", [True, False])
def test_grid_sampling_matches_pyg(brute_force_search, kwargs, batched):
    ours = transforms.GridSampling(**kwargs)(cloud(3, batched=batched))
    theirs = T.GridSampling(**kwargs)(cloud(3, batched=batched))
    assert sorted(ours.keys()) == sorted(theirs.keys())
    for key in theirs.keys():
        assert ours[key].dtype == theirs[key].dtype, key
        torch.testing.assert_close(ours[key], theirs[key])


def test_what_pyg_refuses_is_refused_by_name():
    data = cloud(4)
    data.edge_index = torch.tensor([[0], [1]])
    with pytest.raises(ValueError, match="does not coarsen edges: data holds 'edge_index'"):
        transforms.GridSampling(1.0)(data)
    for transform in (transforms.KNNGraph(), transforms.RadiusGraph(1.0),
                      transforms.GridSampling(1.0)):
        with pytest.raises(ValueError, match="needs data.pos"):
            transform(Data(x=torch.randn(4, 2)))


@pytest.mark.parametrize("walk_length,repeat", [(1, 1), (3, 2), (0, 1)])
def test_rooted_walk_subgraphs_hold_each_roots_walks(walk_length, repeat):
    """Every node of a root's subgraph lies on a walk from it (within walk_length steps
    along the edges), the root included; PyG's own extraction then gives each subgraph's
    induced edges (checked against the edges among its nodes)."""
    from helpers import random_edge_index
    edge_index = random_edge_index(12, 30, seed=6)
    data = Data(edge_index=edge_index, num_nodes=12, x=torch.randn(12, 3))
    torch.manual_seed(0)
    out = transforms.RootedRWSubgraph(walk_length, repeat)(data)
    torch.manual_seed(0)
    again = transforms.RootedRWSubgraph(walk_length, repeat)(data)
    assert torch.equal(out.n_id, again.n_id)  # torch.manual_seed repeats the walks
    reach = torch.eye(12, dtype=torch.bool)  # nodes within walk_length steps
    step = torch.zeros(12, 12, dtype=torch.bool)
    step[edge_index[0], edge_index[1]] = True
    frontier = torch.eye(12, dtype=torch.bool)
    for _ in range(walk_length):
        frontier = (frontier.double() @ step.double()) > 0
        reach |= frontier
    for root in range(12):
        nodes = out.n_id[out.n_sub_batch == root]
        assert root in nodes.tolist() and reach[root, nodes].all()
        inside = torch.isin(edge_index[0], nodes) & torch.isin(edge_index[1], nodes)
        assert (out.e_sub_batch == root).sum() == inside.sum()
    with pytest.raises(ValueError, match="walk_length"):
        transforms.RootedRWSubgraph(-1)


def test_no_points_give_no_edges_and_no_cells():
    empty = Data(pos=torch.zeros(0, 3), x=torch.zeros(0, 2), y=torch.zeros(0, dtype=torch.long))
    assert transforms.KNNGraph(k=3)(empty.clone()).edge_index.shape == (2, 0)
    assert transforms.RadiusGraph(1.0)(empty.clone()).edge_index.shape == (2, 0)
    pooled = transforms.GridSampling(1.0)(empty.clone())
    assert pooled.pos.shape == (0, 3) and pooled.x.shape == (0, 2) and pooled.y.shape == (0,)


@pytest.mark.parametrize("y,match", [
    (torch.tensor([0.0, 2.7, 2.2, 1.0]), "torch.float32 tensor of shape \\[4\\]"),
    (torch.tensor([[0, 1], [1, 1], [2, 0], [0, 0]]), "shape \\[4, 2\\]"),
    (torch.tensor([True, False, True, True]), "torch.bool"),
    (torch.tensor([0, 1, -1, 2]), "got -1 at point 2")])
def test_grid_sampling_refuses_what_is_no_class_id(y, match):
    """A floating y (regression targets) was truncated and voted on: 2.7 and 2.2 in one
    cell came out as class 2."""
    data = Data(pos=torch.tensor([[0.1, 0.1], [0.2, 0.2], [0.3, 0.3], [5.0, 5.0]]), y=y)
    with pytest.raises(ValueError, match=match):
        transforms.GridSampling(1.0)(data)


def test_grid_sampling_votes_any_integer_class_ids(brute_force_search):
    data = cloud(5)
    narrow = data.clone()
    narrow.y = narrow.y.to(torch.int32)
    ours, theirs = transforms.GridSampling(0.9)(narrow), T.GridSampling(0.9)(data)
    assert torch.equal(ours.y, theirs.y)
