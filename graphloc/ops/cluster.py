"""Clusterings PyG takes from pyg-lib or torch-sparse, without either: ``graclus`` (greedy
matching) and ``voxel_grid`` (a regular grid), with PyG's signatures and cluster ids (PyG 2.8
needs pyg-lib for both: ``graclus``, ``voxel_grid``, ``max_pool``'s graclus recipes and the
``GridSampling`` transform raise ``ImportError`` without it), and ``partition``, METIS's
multilevel partitioning, which ``ClusterData`` (Cluster-GCN) needs."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc.checks import (
    check_flags,
    check_index,
    check_int,
    check_seed,
    sampling_weights,
    whole_numbers,
)
from graphloc.ops._library import HAS_EXTENSION, kernels


def graclus(edge_index: Tensor, weight: Tensor | None = None,
            num_nodes: int | None = None) -> Tensor:
    """Graclus's greedy matching (Dhillon et al., PAMI 2007) as PyG's ``graclus``: nodes
    visited in a random order (``torch.randperm`` from torch's default generator, as PyG's
    kernel draws it, so the same seed gives PyG's clusters); an unmatched node pairs with its
    first unmatched neighbour along ``edge_index`` (rows ``edge_index[0]``, neighbours in
    increasing id), or with ``weight`` the heaviest (ties to the larger id); both take the
    smaller id as cluster id. A node left unmatched is its own cluster.

    Differences from pyg-lib, by design: a self-loop never pairs a node with itself (pyg-lib's
    weighted path can take one, leaving that node unmatched when a neighbour was free);
    weights must be finite and >= 0 (pyg-lib never matches along a negative or NaN weight,
    silently).
    """
    num_nodes = checked_edge_index(edge_index, num_nodes)
    row, col = edge_index.long().cpu()
    indptr, perm = row_sorted_csr(row, col, num_nodes)
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.dim() != 1 or weight.numel() != row.numel():
            raise ValueError(f"weight must be a 1-D tensor with one entry per edge "
                             f"({row.numel()}), got "
                             f"{getattr(weight, 'shape', type(weight).__name__)}")
        weight = sampling_weights(weight, "weight", "edge")[perm]
    order = torch.randperm(num_nodes, dtype=torch.long)
    return kernels.graclus(indptr, col[perm], order, weight)


def row_sorted_csr(row: Tensor, col: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """The edges ``row -> col`` (int64, ids below ``num_nodes``) sorted by row, then column,
    parallel edges in edge order (PyG's ``sort_edge_index`` order, which torch-sparse's
    ``SparseTensor`` keeps): ``(indptr over rows, perm)``, two stable counting sorts."""
    check_index(row, num_nodes, "row")
    check_index(col, num_nodes, "col")
    _, by_col = kernels.coo_to_csr(col, num_nodes)
    indptr, by_row = kernels.coo_to_csr(row[by_col], num_nodes)
    return indptr, by_col[by_row.long()].long()


def voxel_grid(pos: Tensor, size, batch: Tensor | None = None, start=None,
               end=None) -> Tensor:
    """PyG's ``voxel_grid``: the id of each point's voxel in a regular grid of ``size``
    (per dimension) from ``start`` to ``end`` (default: the points' smallest and largest
    coordinates), examples of ``batch`` in separate grids; ids as pyg-lib numbers them (the
    first dimension fastest, then the next, the example last).

    A point outside ``[start, end]`` (pyg-lib gives it the id of another voxel) and a NaN or
    infinite coordinate, start or end (pyg-lib's cast of those to an integer is undefined)
    raise ``ValueError``, as does a size that is not finite and > 0. No points give no ids.
    """
    if not isinstance(pos, Tensor) or not pos.is_floating_point() or pos.dim() not in (1, 2):
        raise TypeError(f"pos must be a floating-point [N, D] (or [N]) tensor, got "
                        f"{getattr(pos, 'dtype', type(pos).__name__)} "
                        f"{list(getattr(pos, 'shape', []))}")
    pos = pos.unsqueeze(-1) if pos.dim() == 1 else pos
    n, dim = pos.shape
    if batch is None:
        batch = torch.zeros(n, dtype=torch.long, device=pos.device)
    elif not isinstance(batch, Tensor) or batch.shape != (n,) or batch.is_floating_point() \
            or batch.is_complex() or batch.dtype == torch.bool:
        raise ValueError(f"batch must be an integer tensor of shape [{n}], got "
                         f"{getattr(batch, 'dtype', type(batch).__name__)} "
                         f"{list(getattr(batch, 'shape', []))}")
    if n == 0:
        return torch.empty(0, dtype=torch.long, device=pos.device)
    if not bool(pos.isfinite().all()):
        row = int((~pos.isfinite()).any(1).nonzero()[0])
        raise ValueError(f"pos holds {pos[row].tolist()} at row {row}: coordinates must be "
                         f"finite")
    points = torch.cat([pos, batch.view(-1, 1).to(pos.dtype)], dim=-1)
    size = _per_dimension(size, dim, pos, "size")
    if not bool((torch.isfinite(size) & (size > 0)).all()):
        raise ValueError(f"size must be finite and > 0 in every dimension, got {size.tolist()}")
    size = torch.cat([size, size.new_ones(1)])
    for name, bound in (("start", start), ("end", end)):
        if bound is not None and not bool(_per_dimension(bound, dim, pos, name).isfinite().all()):
            raise ValueError(f"{name} must be finite, got {bound!r}")
    low = points.min(0).values if start is None else torch.cat(
        [_per_dimension(start, dim, pos, "start"), points.new_zeros(1)])
    high = points.max(0).values if end is None else torch.cat(
        [_per_dimension(end, dim, pos, "end"), batch.max().view(1).to(pos.dtype)])
    outside = ((points < low) | (points > high)).any(1)
    if bool(outside.any()):
        i = int(outside.nonzero()[0])
        raise ValueError(f"pos[{i}] = {pos[i].tolist()} (example {int(batch[i])}) lies outside "
                         f"the grid from start {low[:-1].tolist()} to end {high[:-1].tolist()}")
    counts = (high - low).div(size, rounding_mode="trunc").long() + 1
    strides = torch.cat([counts.new_ones(1), counts.cumprod(0)[:-1]])
    cells = (points - low).div(size, rounding_mode="trunc").long()
    return (cells * strides).sum(1)


def partition(edge_index: Tensor, num_parts: int, num_nodes: int | None = None,
              node_weight: Tensor | None = None, edge_weight: Tensor | None = None,
              recursive: bool = False, imbalance: float = 0.03, seed: int = 0) -> Tensor:
    """Each node's part (int64 [N], ids ``0..num_parts-1``) in a partition that cuts little
    edge weight and keeps every part near ``1 / num_parts`` of the node weight: METIS's
    multilevel scheme (Karypis and Kumar 1998) in graphloc's kernel, as PyG's
    ``ClusterData`` takes it from pyg-lib or torch-sparse.

    The graph is taken as undirected: an edge ``u -> v`` of weight ``w`` (``edge_weight``,
    default 1) joins u and v with weight w, both directions of a pair add up, self-loops are
    dropped (METIS needs a symmetric graph and gives undefined parts on another). Weights
    are whole numbers >= 0 (``node_weight`` [N], default 1), as METIS's: a fractional
    weight is refused rather than rounded.

    Balance: no part outweighs ``(1 + imbalance)`` times its share of the total node weight
    (rounded down, never below the share rounded up) where node weights allow it; with unit
    weights it always holds, and no part is left empty where the graph has at least
    ``num_parts`` nodes (more parts than nodes: each node its own part). ``recursive``: recursive
    multilevel bisection instead of multilevel k-way (METIS's ``PartGraphRecursive``),
    under the same final limit. Deterministic for a ``seed`` (METIS's own parts are not
    reproduced: its coarsening and refinement differ in detail). CPU; a CUDA
    ``edge_index`` is partitioned on the CPU and the parts returned on its device.
    """
    num_nodes = checked_edge_index(edge_index, num_nodes)
    if num_nodes >= 2**31:  # node pairs are keyed as u * num_nodes + v in int64
        raise ValueError(f"num_nodes must be below 2^31 to partition, got {num_nodes}")
    check_int(num_parts, "num_parts", 1)
    check_seed(seed)
    check_flags("partition", recursive=recursive)
    if isinstance(imbalance, bool) or not isinstance(imbalance, (int, float)) \
            or not (math.isfinite(imbalance) and 0 <= imbalance <= 1000):
        raise ValueError(f"imbalance must be a number in [0, 1000], got {imbalance!r}")
    node_weight = _whole_weights(node_weight, num_nodes, "node_weight", "node")
    edge_weight = _whole_weights(edge_weight, edge_index.size(1), "edge_weight", "edge")
    indptr, indices, weight = _undirected_csr(edge_index, edge_weight, num_nodes)
    # parts beyond the node count stay empty (and the kernel takes an int64 count)
    parts = kernels.partition(indptr, indices, node_weight, weight,
                              min(num_parts, max(num_nodes, 1)), bool(recursive),
                              round(imbalance * 1000), seed)
    return parts.to(edge_index.device)


def checked_edge_index(edge_index, num_nodes: int | None) -> int:
    """The node count (``edge_index``'s largest id + 1 when None) after checking that
    ``edge_index`` is an integer ``[2, E]`` tensor of ids below it."""
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must be a [2, E] tensor, got "
                         f"{getattr(edge_index, 'shape', type(edge_index).__name__)}")
    if num_nodes is None:
        check_index(edge_index, 2**63 - 1, "edge_index")  # its dtype before max() reads it
        num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
    check_int(num_nodes, "num_nodes", 0)
    check_index(edge_index, num_nodes, "edge_index")
    return num_nodes


def _whole_weights(weight: Tensor | None, count: int, name: str, position: str):
    """``weight`` as int64 on the CPU: one whole number >= 0 per ``position``."""
    if weight is None:
        return None
    if not isinstance(weight, Tensor) or weight.shape != (count,):
        raise ValueError(f"{name} must be a 1-D tensor with one entry per {position} "
                         f"({count}), got {getattr(weight, 'shape', type(weight).__name__)}")
    weight = sampling_weights(weight, name, position)  # finite and >= 0
    if bool((weight != weight.round()).any()):
        at = int((weight != weight.round()).nonzero()[0])
        raise ValueError(f"{name} must hold whole numbers (METIS's integer weights; scale "
                         f"and round fractional ones), got {weight[at].item()} at {position} "
                         f"{at}")
    if float(weight.sum()) >= 2.0**52:
        raise ValueError(f"{name} sums to {float(weight.sum()):.4g}, past 2^52: too large to "
                         f"weigh parts exactly")
    return whole_numbers(weight, name)


def _undirected_csr(edge_index: Tensor, weight: Tensor | None, num_nodes: int):
    """The symmetric CSR without self-loops (rows and columns increasing) of ``edge_index``,
    each pair's weight the sum over its edges in either direction (1 each without
    ``weight``)."""
    row, col = edge_index.long().cpu()  # int64: the pair keys reach num_nodes^2
    keep = row != col
    weight = torch.ones(row.numel(), dtype=torch.long) if weight is None else weight
    row, col, weight = row[keep], col[keep], weight[keep]
    keys = torch.cat([row * num_nodes + col, col * num_nodes + row])
    pairs, slot = torch.unique(keys, return_inverse=True)
    summed = torch.zeros(pairs.numel(), dtype=torch.long).index_add_(0, slot,
                                                                      weight.repeat(2))
    indptr, _ = kernels.coo_to_csr(pairs.div(num_nodes, rounding_mode="floor"), num_nodes)
    return indptr, pairs.remainder(num_nodes), summed


def _per_dimension(value, dim: int, pos: Tensor, name: str) -> Tensor:
    """A number, a list or a tensor as one value per dimension, in ``pos``'s dtype."""
    out = value if isinstance(value, Tensor) else torch.tensor(value)
    out = out.to(pos.dtype).to(pos.device).flatten()
    if out.numel() == 1:
        return out.repeat(dim)
    if out.numel() != dim:
        raise ValueError(f"{name} must hold one value or one per dimension ({dim}), got "
                         f"{out.numel()}")
    return out


def _partition_fake(indptr, indices, node_weight, edge_weight, num_parts, recursive, tolerance,
                    seed):
    return indptr.new_empty(indptr.shape[0] - 1, dtype=torch.long)


def _graclus_fake(indptr, indices, order, weight):
    torch._check(order.dim() == 1 and order.dtype == torch.int64,
                 lambda: f"order must be int64 [N], got {order.dtype} {list(order.shape)}")
    return order.new_empty(indptr.shape[0] - 1)


if HAS_EXTENSION:
    torch.library.register_fake("graphloc::graclus")(_graclus_fake)
    torch.library.register_fake("graphloc::partition")(_partition_fake)
