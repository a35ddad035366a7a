"""PyG's transforms that PyG 2.8 runs only with pyg-lib (the point-cloud ``KNNGraph``,
``RadiusGraph`` and ``GridSampling``; the subgraph GNNs' ``RootedRWSubgraph``), as drop-ins
on graphloc's neighbour search, voxel grid and random walks: PyG's classes (arguments,
``repr``, functional names, outputs), each with its own search.

Needs torch_geometric (``pip install graphloc[pyg]``), like ``graphloc.loader``'s drop-ins.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.transforms import GridSampling as _PyGGridSampling
from torch_geometric.transforms import KNNGraph as _PyGKNNGraph
from torch_geometric.transforms import RadiusGraph as _PyGRadiusGraph
from torch_geometric.transforms import RootedRWSubgraph as _PyGRootedRWSubgraph
from torch_geometric.utils import to_undirected

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.graph import Graph


class KNNGraph(_PyGKNNGraph):
    """PyG's ``KNNGraph``: edges from each point's ``k`` nearest points of its example
    (``data.batch``) to it, from ``graphloc.ops.knn_graph``; ``force_undirected`` adds the
    reversed edges (PyG's ``to_undirected``, which sorts and merges); ``edge_attr`` is
    dropped. Equal distances go to the lower index."""

    def forward(self, data):
        check_flags("KNNGraph", force_undirected=self.force_undirected)
        pos = _positions(self, data)
        edge_index = ops.knn_graph(pos, self.k, data.batch, loop=self.loop, flow=self.flow,
                                   cosine=self.cosine)
        if self.force_undirected:
            edge_index = to_undirected(edge_index, num_nodes=data.num_nodes)
        data.edge_index, data.edge_attr = edge_index, None
        return data


class RadiusGraph(_PyGRadiusGraph):
    """PyG's ``RadiusGraph``: edges from the points of each point's example within ``r``
    to it (at most ``max_num_neighbors`` each), from ``graphloc.ops.radius_graph``;
    ``edge_attr`` is dropped."""

    def forward(self, data):
        pos = _positions(self, data)
        data.edge_index = ops.radius_graph(pos, self.r, data.batch, self.loop,
                                           max_num_neighbors=self.max_num_neighbors,
                                           flow=self.flow)
        data.edge_attr = None
        return data


class GridSampling(_PyGGridSampling):
    """PyG's ``GridSampling``: one point per occupied voxel of a grid of ``size`` (cells
    from ``graphloc.ops.voxel_grid``, numbered in voxel order). Each node tensor is
    averaged over its cell's points, except ``y`` (the cell's most frequent class id, the
    lowest on ties) and ``batch`` (the cell's example); a data with edges is refused, as
    PyG's refuses it."""

    def forward(self, data):
        pos = _positions(self, data)
        n = data.num_nodes
        for key in data.keys():
            if "edge" in key:
                raise ValueError(f"GridSampling does not coarsen edges: data holds {key!r}")
        cells = ops.voxel_grid(pos, self.size, data.batch, self.start, self.end)
        _, cell = torch.unique(cells, sorted=True, return_inverse=True)
        count = int(cell.max()) + 1 if n else 0
        for key, item in list(data.items()):
            if not isinstance(item, Tensor) or item.dim() == 0 or item.size(0) != n:
                continue
            if key == "y":
                data[key] = _majority(item, cell, count)
            elif key == "batch":
                data[key] = item.new_empty(count).scatter_(0, cell, item)
            else:
                data[key] = _cell_means(item, cell, count)
        return data


class RootedRWSubgraph(_PyGRootedRWSubgraph):
    """PyG's ``RootedRWSubgraph`` (subgraph GNNs' rooted subgraphs): each node's subgraph
    holds the nodes of ``repeat`` uniform random walks of ``walk_length`` steps from it
    along the edges (``graphloc.ops.random_walk`` with ``p = q = 1``; a node without
    out-edges stays put, as pyg-lib's walk), then PyG's own subgraph extraction. The walks'
    seed is drawn from torch's default generator, so ``torch.manual_seed`` repeats them
    (other walks than pyg-lib's for the same seed)."""

    def __init__(self, walk_length: int, repeat: int = 1):
        check_int(walk_length, "walk_length", 0)
        check_int(repeat, "repeat", 1)
        super().__init__(walk_length, repeat)

    def extract(self, data):
        if data.edge_index is None:
            raise ValueError("RootedRWSubgraph needs data.edge_index, got none")
        n = data.num_nodes
        start = torch.arange(n, device=data.edge_index.device).repeat_interleave(self.repeat)
        seed = int(torch.randint(0, 2**62, (), dtype=torch.long))
        walks = ops.random_walk(Graph(data.edge_index, num_nodes=n), start, self.walk_length,
                                seed=seed, return_edges=False).nodes
        reached = torch.zeros(n, n, dtype=torch.bool, device=walks.device)
        reached[start.repeat_interleave(self.walk_length + 1), walks.reshape(-1)] = True
        return self.map(data, reached)


def _positions(transform, data) -> Tensor:
    if getattr(data, "pos", None) is None:
        raise ValueError(f"{type(transform).__name__} needs data.pos (the points), got none")
    return data.pos


def _majority(labels: Tensor, cell: Tensor, count: int) -> Tensor:
    """Each cell's most frequent label (the lowest of equally frequent ones)."""
    _check_class_ids(labels)
    if not labels.numel():  # no points, no cells
        return labels.new_empty(0, dtype=torch.long)
    classes = int(labels.max()) + 1
    votes = torch.bincount(cell * classes + labels, minlength=count * classes)
    return votes.view(count, classes).argmax(dim=-1)


def _check_class_ids(labels: Tensor) -> None:
    """``y`` is voted on per cell, so it must hold one class id per point. Floating targets
    were truncated to ids and voted on (2.7 counted as class 2) without a word; PyG's
    ``one_hot`` refuses them, and a -1 or an [N, C] ``y``, with a less telling error."""
    if labels.dim() != 1 or labels.is_floating_point() or labels.is_complex() or \
            labels.dtype == torch.bool:
        raise ValueError(f"GridSampling votes data.y per cell and needs one integer class id "
                         f"per point, got a {labels.dtype} tensor of shape "
                         f"{list(labels.shape)} (store other targets under another key, "
                         "which is averaged)")
    if labels.numel() and int(labels.min()) < 0:
        point = int((labels < 0).nonzero()[0])
        raise ValueError(f"GridSampling votes data.y per cell; its class ids must be >= 0, "
                         f"got {int(labels[point])} at point {point}")


def _cell_means(item: Tensor, cell: Tensor, count: int) -> Tensor:
    """Per cell, the mean of its points' rows (PyG's ``scatter(..., reduce='mean')``; the
    sum in the rows' dtype, then a true division)."""
    total = ops.scatter(item, cell, 0, dim_size=count, reduce="sum")
    points = torch.bincount(cell, minlength=count).view(-1, *[1] * (item.dim() - 1))
    return total / points.clamp(min=1)  # (integer rows give floating means, as PyG's)
