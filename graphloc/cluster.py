"""Drop-in replacement for the ``torch_cluster`` package, on graphloc's kernels.

``from graphloc.cluster import knn_graph, random_walk, graclus_cluster`` wherever code
imported them from torch_cluster: torch_cluster 1.6's public API with its signatures and
return values. ``fps``, ``knn``, ``knn_graph``, ``nearest``, ``radius`` and
``radius_graph`` run ``graphloc.ops``'s own (which take torch_cluster's arguments); the
others translate torch_cluster's ``(row, col)`` arrays for graphloc's ops.

Differences, by design:
- ``graclus_cluster`` without weights pairs a node with its first unmatched neighbour in
  id order (pyg-lib's rule, ``graphloc.ops.graclus``), where torch_cluster shuffles the
  edges and takes a random one; a self-loop is dropped as torch_cluster drops it.
- ``grid_cluster`` refuses a point outside ``[start, end]`` by name (torch_cluster numbers
  it as another voxel) and a size, start or end that is not finite; a one-entry ``size``
  applies to every dimension, as PyG's ``voxel_grid`` reads it (torch_cluster's ids then
  collide across dimensions).
- ``random_walk`` walks correctly on rows in any order with ``coalesced=False`` (torch_cluster
  then walks on a row pointer that does not describe them); edge indices are positions in
  the arrays walked on, the sorted ones with ``coalesced=True``, as torch_cluster's.
- ``neighbor_sampler`` draws every row with ``torch.randperm``; torch_cluster draws a row
  of many more neighbours than asked for with C's ``rand()``, unseeded by torch.

Each function takes ``torch.jit.script`` as torch_cluster's do (its own tests script them):
the typed function below compiles and runs graphloc's Python implementation through
``torch.jit.ignore``, as ``graphloc.scatter``'s do (a scripted module calling one runs in
this process, but cannot be saved with ``torch.jit.save``).

(No ``from __future__ import annotations`` here: TorchScript reads these annotations as
types.)
"""


import itertools
import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.graph import Graph

__all__ = ["graclus_cluster", "grid_cluster", "fps", "nearest", "knn", "knn_graph", "radius",
           "radius_graph", "random_walk", "neighbor_sampler"]


# --- graphloc's implementations, called from TorchScript as Python ----------------------

@torch.jit.ignore
def _fps(src: Tensor, batch: Tensor | None, ratio: float | Tensor | None, random_start: bool,
         batch_size: int | None, ptr: Tensor | list[int] | None) -> Tensor:
    return ops.fps(src, batch, 0.5 if ratio is None else ratio, random_start, batch_size, ptr)


@torch.jit.ignore
def _knn(x: Tensor, y: Tensor, k: int, batch_x: Tensor | None, batch_y: Tensor | None,
         cosine: bool, num_workers: int, batch_size: int | None) -> Tensor:
    return ops.knn(x, y, k, batch_x, batch_y, cosine, num_workers, batch_size)


@torch.jit.ignore
def _knn_graph(x: Tensor, k: int, batch: Tensor | None, loop: bool, flow: str, cosine: bool,
               num_workers: int, batch_size: int | None) -> Tensor:
    return ops.knn_graph(x, k, batch, loop, flow, cosine, num_workers, batch_size)


@torch.jit.ignore
def _radius(x: Tensor, y: Tensor, r: float, batch_x: Tensor | None, batch_y: Tensor | None,
            max_num_neighbors: int, num_workers: int, batch_size: int | None) -> Tensor:
    return ops.radius(x, y, r, batch_x, batch_y, max_num_neighbors, num_workers, batch_size)


@torch.jit.ignore
def _radius_graph(x: Tensor, r: float, batch: Tensor | None, loop: bool,
                  max_num_neighbors: int, flow: str, num_workers: int,
                  batch_size: int | None) -> Tensor:
    return ops.radius_graph(x, r, batch, loop, max_num_neighbors, flow, num_workers,
                            batch_size)


@torch.jit.ignore
def _nearest(x: Tensor, y: Tensor, batch_x: Tensor | None, batch_y: Tensor | None) -> Tensor:
    return ops.nearest(x, y, batch_x, batch_y)


@torch.jit.ignore
def _graclus(row: Tensor, col: Tensor, weight: Tensor | None, num_nodes: int | None) -> Tensor:
    edge_index = _edge_index(row, col, "graclus_cluster")
    if isinstance(num_nodes, int) and not isinstance(num_nodes, bool):
        for name, t in (("row", row), ("col", col)):
            _check_ids(t, name, "graclus_cluster", num_nodes)
    return ops.graclus(edge_index, weight, num_nodes)


@torch.jit.ignore
def _grid(pos: Tensor, size: Tensor, start: Tensor | None, end: Tensor | None) -> Tensor:
    if isinstance(pos, Tensor) and not pos.is_floating_point():  # read exactly, as float64
        pos, size, start, end = (None if t is None else torch.as_tensor(t).double()
                                 for t in (pos, size, start, end))
    return ops.voxel_grid(pos, size, None, start, end)


@torch.jit.ignore
def _walks(row: Tensor, col: Tensor, start: Tensor, walk_length: int, p: float, q: float,
           coalesced: bool, num_nodes: int | None,
           return_edge_indices: bool) -> tuple[Tensor, Tensor | None]:
    edge_index = _edge_index(row, col, "random_walk")
    if not isinstance(start, Tensor) or start.dim() != 1:
        raise ValueError(f"random_walk: start must be a 1-D tensor of node ids, got "
                         f"{getattr(start, 'shape', type(start).__name__)}")
    if num_nodes is None:
        ids = [edge_index.max()] if edge_index.numel() else []
        ids += [start.max()] if start.numel() else []
        num_nodes = int(max(ids)) + 1 if ids else 0
    for name, t in (("row", edge_index[0]), ("col", edge_index[1]), ("start", start)):
        _check_ids(t, name, "random_walk", num_nodes)
    if coalesced:  # torch_cluster's order: by row, then col
        key = edge_index[0].long() * num_nodes + edge_index[1].long()
        edge_index = edge_index[:, torch.sort(key, stable=True).indices]
    seed = int(torch.randint(0, 2**62, (), dtype=torch.long))
    walks = ops.random_walk(Graph(edge_index, num_nodes=num_nodes), start, walk_length, p, q,
                            seed=seed, return_edges=return_edge_indices)
    return walks.nodes, walks.edges


@torch.jit.ignore
def _sampled(start: Tensor, rowptr: Tensor, size: float) -> Tensor:
    if isinstance(size, bool) or not isinstance(size, (int, float)) \
            or not math.isfinite(size) or size <= 0:
        raise ValueError(f"neighbor_sampler: size must be a finite number > 0, got {size!r}")
    for name, t in (("start", start), ("rowptr", rowptr)):
        if not isinstance(t, Tensor) or t.dim() != 1 or t.is_floating_point() \
                or t.dtype == torch.bool:
            raise ValueError(f"neighbor_sampler: {name} must be a 1-D integer tensor, got "
                             f"{getattr(t, 'dtype', type(t).__name__)}")
    if start.is_cuda:
        raise ValueError("neighbor_sampler: start must be on the CPU, as torch_cluster's")
    ptr = rowptr.tolist()
    if not ptr or ptr[0] != 0 or any(b < a for a, b in itertools.pairwise(ptr)):
        raise ValueError("neighbor_sampler: rowptr must start at 0 and never decrease")
    drawn = []
    for node in start.tolist():
        if not 0 <= node < len(ptr) - 1:
            raise ValueError(f"neighbor_sampler: start holds node {node}, outside the "
                             f"{len(ptr) - 1} rows of rowptr")
        degree = ptr[node + 1] - ptr[node]
        count = math.ceil(size * degree) if size <= 1 else int(size)
        drawn.append(torch.randperm(degree)[:min(count, degree)] + ptr[node])
    return torch.cat(drawn) if drawn else torch.empty(0, dtype=torch.long)


# --- torch_cluster's API ------------------------------------------------------------------

def fps(src: Tensor, batch: Tensor | None = None, ratio: float | Tensor | None = None,
        random_start: bool = True, batch_size: int | None = None,
        ptr: Tensor | list[int] | None = None) -> Tensor:
    """torch_cluster's ``fps``: farthest point sampling, ``ratio`` (default 0.5) of each
    example's points (``graphloc.ops.fps``)."""
    return _fps(src, batch, ratio, random_start, batch_size, ptr)


def knn(x: Tensor, y: Tensor, k: int, batch_x: Tensor | None = None,
        batch_y: Tensor | None = None, cosine: bool = False, num_workers: int = 1,
        batch_size: int | None = None) -> Tensor:
    """torch_cluster's ``knn``: each row of ``y``'s ``k`` nearest rows of ``x``."""
    return _knn(x, y, k, batch_x, batch_y, cosine, num_workers, batch_size)


def knn_graph(x: Tensor, k: int, batch: Tensor | None = None, loop: bool = False,
              flow: str = "source_to_target", cosine: bool = False, num_workers: int = 1,
              batch_size: int | None = None) -> Tensor:
    """torch_cluster's ``knn_graph``: edges from each point's ``k`` nearest points."""
    return _knn_graph(x, k, batch, loop, flow, cosine, num_workers, batch_size)


def radius(x: Tensor, y: Tensor, r: float, batch_x: Tensor | None = None,
           batch_y: Tensor | None = None, max_num_neighbors: int = 32, num_workers: int = 1,
           batch_size: int | None = None) -> Tensor:
    """torch_cluster's ``radius``: each row of ``y``'s rows of ``x`` within ``r``."""
    return _radius(x, y, r, batch_x, batch_y, max_num_neighbors, num_workers, batch_size)


def radius_graph(x: Tensor, r: float, batch: Tensor | None = None, loop: bool = False,
                 max_num_neighbors: int = 32, flow: str = "source_to_target",
                 num_workers: int = 1, batch_size: int | None = None) -> Tensor:
    """torch_cluster's ``radius_graph``: edges between points within ``r``."""
    return _radius_graph(x, r, batch, loop, max_num_neighbors, flow, num_workers, batch_size)


def nearest(x: Tensor, y: Tensor, batch_x: Tensor | None = None,
            batch_y: Tensor | None = None) -> Tensor:
    """torch_cluster's ``nearest``: each row of ``x``'s nearest row of ``y``."""
    return _nearest(x, y, batch_x, batch_y)


def graclus_cluster(row: Tensor, col: Tensor, weight: Tensor | None = None,
                    num_nodes: int | None = None) -> Tensor:
    """torch_cluster's ``graclus_cluster``: Graclus's greedy matching of the graph
    ``row -> col``, each node's cluster id the smaller id of its pair (see
    ``graphloc.ops.graclus``)."""
    return _graclus(row, col, weight, num_nodes)


def grid_cluster(pos: Tensor, size: Tensor, start: Tensor | None = None,
                 end: Tensor | None = None) -> Tensor:
    """torch_cluster's ``grid_cluster``: the id of each point's voxel in a grid of ``size``
    from ``start`` to ``end`` (default: the points' extremes), the first dimension
    fastest. Integer positions are read exactly (as float64)."""
    return _grid(pos, size, start, end)


def random_walk(row: Tensor, col: Tensor, start: Tensor, walk_length: int, p: float = 1,
                q: float = 1, coalesced: bool = True, num_nodes: int | None = None,
                return_edge_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """torch_cluster's ``random_walk``: node2vec walks of ``walk_length`` steps along
    ``row -> col`` from each ``start`` node, ``[len(start), walk_length + 1]`` nodes and,
    with ``return_edge_indices``, the ``[len(start), walk_length]`` edges taken (-1 where a
    node without out-edges kept the walk in place). The walks' seed comes from torch's
    default generator (``torch.manual_seed`` repeats them; other walks than
    torch_cluster's for a seed)."""
    nodes, edges = _walks(row, col, start, walk_length, p, q, coalesced,
                          num_nodes, return_edge_indices)
    if return_edge_indices and edges is not None:
        return nodes, edges
    return nodes


def neighbor_sampler(start: Tensor, rowptr: Tensor, size: float) -> Tensor:
    """torch_cluster's deprecated ``neighbor_sampler``: for each ``start`` node, the CSR
    positions (in ``rowptr``'s rows) of ``size`` of its neighbours drawn without
    replacement (all of them if it has fewer), or of ``ceil(size * degree)`` for
    ``0 < size <= 1``; one row after another."""
    return _sampled(start, rowptr, size)


def _edge_index(row, col, owner: str) -> Tensor:
    """``[row; col]``, their ids checked >= 0 under the caller's names (graphloc's ops
    check them again, as ``edge_index``)."""
    for name, t in (("row", row), ("col", col)):
        if not isinstance(t, Tensor) or t.dim() != 1:
            raise ValueError(f"{owner}: {name} must be a 1-D tensor of node ids, got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    if row.numel() != col.numel():
        raise ValueError(f"{owner}: row has {row.numel()} entries but col has {col.numel()}")
    for name, t in (("row", row), ("col", col)):
        _check_ids(t, name, owner)
    return torch.stack([row, col])


def _check_ids(ids: Tensor, name: str, owner: str, num_nodes: int | None = None) -> None:
    """Integer ids in ``[0, num_nodes)`` (>= 0 where num_nodes is None), or a ValueError
    naming the argument, the position and the value."""
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"{owner}: {name} must hold integer node ids, got {ids.dtype}")
    bad = ids < 0 if num_nodes is None else (ids < 0) | (ids >= num_nodes)
    if bool(bad.any()):
        at = int(bad.nonzero()[0])
        within = "" if num_nodes is None else f" of the {num_nodes} nodes"
        raise ValueError(f"{owner}: {name}[{at}] = {int(ids[at])} is not a node id{within}")
