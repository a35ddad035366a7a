"""Nearest neighbours in feature or coordinate space: PyG's ``knn``, ``knn_graph``,
``radius``, ``radius_graph``, ``nearest`` and ``fps`` with its signatures, outputs and edge
direction, without pyg-lib (which PyG 2.8 needs for them, and for DynamicEdgeConv and
GravNetConv).

Exact search: on the CPU a KD-tree per example (the ``knn`` kernel), elsewhere (and without
the extension) the pure-torch twin's blocks of distances. Both rank by the same float64
distances and break ties by the lower index, so they return the same neighbours; PyG leaves
ties to its tree.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_fits_in_memory, check_flags, check_int
from graphloc.ops import reference
from graphloc.ops._library import HAS_EXTENSION, kernels


def knn(x: Tensor, y: Tensor, k: int, batch_x: Tensor | None = None,
        batch_y: Tensor | None = None, cosine: bool = False, num_workers: int = 1,
        batch_size: int | None = None) -> Tensor:
    """For each point of ``y``, the ``k`` nearest points of ``x`` in its example: PyG's
    ``knn`` (``[2, E]``: row 0 the index into ``y``, row 1 into ``x``).

    Rows come in the order of ``y``, each query's neighbours nearest first; equal distances
    go to the lower index of ``x``. A distance is the sum of the squared coordinate
    differences in float64. A query whose example has fewer than ``k`` points gets them
    all. Distances are Euclidean, or with ``cosine`` one minus the cosine similarity (a
    zero vector has none: its distances are NaN). Distances that are not numbers rank after
    every other (infinite ones after every finite one), so a point with a NaN coordinate is
    a neighbour only where its example has too few others, and its own neighbours are the
    first ``k`` points of its example.

    Args:
        x: ``[N, F]`` (or ``[N]``) points searched.
        y: ``[M, F]`` (or ``[M]``) queries.
        k: neighbours per query (>= 1).
        batch_x, batch_y: sorted example ids of the rows of ``x`` and ``y`` (None: one
            example).
        cosine: cosine distance instead of Euclidean.
        num_workers: accepted for PyG's signature; the search runs on torch's threads.
        batch_size: the number of examples (None: the largest id plus one).
    """
    check_flags("knn", cosine=cosine)
    return torch.stack(_search("knn", x, y, k, batch_x, batch_y, num_workers, batch_size,
                               cosine=cosine))


def knn_graph(x: Tensor, k: int, batch: Tensor | None = None, loop: bool = False,
              flow: str = "source_to_target", cosine: bool = False, num_workers: int = 1,
              batch_size: int | None = None) -> Tensor:
    """Edges from each point's ``k`` nearest points of its example to it: PyG's
    ``knn_graph`` (``edge_index[0]`` the neighbour and ``[1]`` the point under
    ``flow="source_to_target"``, the other way round under ``"target_to_source"``).

    Without ``loop`` a point is never its own neighbour and still gets ``k`` others where
    its example has them. (PyG searches ``k + 1`` and drops the point itself, so where
    ``k + 1`` or more points coincide with it and its own index is not among the first, it
    keeps ``k + 1``.) Ties, NaN and the arguments as in :func:`knn`.
    """
    check_flags("knn_graph", loop=loop, cosine=cosine)
    found = _search("knn_graph", x, x, k, batch, batch, num_workers, batch_size,
                    cosine=cosine, exclude_self=not loop)
    return _directed("knn_graph", found, flow)


def radius(x: Tensor, y: Tensor, r: float, batch_x: Tensor | None = None,
           batch_y: Tensor | None = None, max_num_neighbors: int = 32, num_workers: int = 1,
           batch_size: int | None = None) -> Tensor:
    """For each point of ``y``, the points of ``x`` in its example closer than ``r``: PyG's
    ``radius`` (``[2, E]``: row 0 the index into ``y``, row 1 into ``x``).

    Where more than ``max_num_neighbors`` are that close, the nearest of them are kept
    (equal distances by the lower index). PyG's CPU search keeps those its tree meets
    first, "biased towards certain quadrants" in its words; its GPU one the first by
    index. Rows come in the order of ``y``, each query's neighbours nearest first. A
    distance is Euclidean, compared as its square in float64 against ``r`` squared, so
    a point at distance exactly ``r`` is out, as in PyG; a point with a NaN or infinite
    coordinate is nobody's neighbour and has none. Other arguments as in :func:`knn`.
    """
    within = _squared_radius("radius", r)
    check_int(max_num_neighbors, "max_num_neighbors", 1)
    return torch.stack(_search("radius", x, y, max_num_neighbors, batch_x, batch_y,
                               num_workers, batch_size, within=within))


def radius_graph(x: Tensor, r: float, batch: Tensor | None = None, loop: bool = False,
                 max_num_neighbors: int = 32, flow: str = "source_to_target",
                 num_workers: int = 1, batch_size: int | None = None) -> Tensor:
    """Edges from the points of each point's example closer than ``r`` to it: PyG's
    ``radius_graph`` (``edge_index[0]`` the neighbour and ``[1]`` the point under
    ``flow="source_to_target"``). Without ``loop`` a point is not its own neighbour. At
    most ``max_num_neighbors`` per point, the nearest, as in :func:`radius`.
    """
    within = _squared_radius("radius_graph", r)
    check_int(max_num_neighbors, "max_num_neighbors", 1)
    check_flags("radius_graph", loop=loop)
    found = _search("radius_graph", x, x, max_num_neighbors, batch, batch, num_workers,
                    batch_size, exclude_self=not loop, within=within)
    return _directed("radius_graph", found, flow)


def nearest(x: Tensor, y: Tensor, batch_x: Tensor | None = None,
            batch_y: Tensor | None = None) -> Tensor:
    """For each point of ``x``, the index of its nearest point of ``y`` in its example:
    PyG's ``nearest`` (``[N]``, a cluster assignment). Equal distances go to the lower
    index; every example of ``x`` must have points in ``y`` (a ``ValueError`` otherwise,
    as PyG's)."""
    points, queries = _points(y, "y"), _points(x, "x")
    if points.size(1) != queries.size(1):
        raise ValueError(f"nearest: x has {queries.size(1)} features per point but y has "
                         f"{points.size(1)}")
    ptr_y, ptr_x = _example_pointers(batch_y, batch_x, points, queries, None,
                                     ("batch_y", "batch_x"))
    counts_x, counts_y = ptr_x.diff(), ptr_y.diff()
    lacking = ((counts_x > 0) & (counts_y == 0)).nonzero()
    if lacking.numel():
        raise ValueError(f"nearest: example {int(lacking[0])} has points in x but none in y")
    return _nearest(points, queries, ptr_y, ptr_x, 1, False, False, float("inf"))[1]


def fps(x: Tensor, batch: Tensor | None = None, ratio: float | Tensor = 0.5,
        random_start: bool = True, batch_size: int | None = None,
        ptr: Tensor | list | None = None) -> Tensor:
    """Farthest point sampling (PointNet++): per example, ``ceil(n * ratio)`` points, each
    the farthest (squared Euclidean, in ``x``'s dtype) from those taken before it, the
    first at random (``random_start``, torch's generator) or the example's first point.
    PyG's ``fps`` (and torch_cluster's ``ptr=``, and a ratio per example), the indices
    example by example in the order taken; equal distances go to the lower index and a
    NaN distance counts as the largest, as torch's ``argmax`` (PyG's kernels take the same
    steps with torch's own ops). All examples step together, padded to the largest."""
    points = _points(x.view(x.size(0), -1) if isinstance(x, Tensor) and x.dim() > 2 else x,
                     "x")
    if not points.is_floating_point():
        raise TypeError(f"fps: x must be floating point, got {points.dtype}")
    check_flags("fps", random_start=random_start)
    if ptr is not None:
        pointer = torch.as_tensor(ptr, dtype=torch.long, device=points.device)
        if pointer.dim() != 1 or pointer.numel() < 1 or int(pointer[0]) != 0 or \
                int(pointer[-1]) != points.size(0) or bool((pointer.diff() < 0).any()):
            raise ValueError(f"fps: ptr must rise from 0 to {points.size(0)} (the rows), got "
                             f"{pointer.tolist()}")
    else:
        pointer, _ = _example_pointers(batch, batch, points, points, batch_size,
                                       ("batch", "batch"))
    counts = pointer.diff()
    ratios = _ratios(ratio, counts.numel(), points)
    taken = torch.ceil(counts.to(torch.float32) * ratios).long().minimum(counts)
    return _farthest_points(points, pointer, taken, random_start)


def _ratios(ratio, examples: int, points: Tensor) -> Tensor:
    """The sampling ratio of each example, as PyG's kernels multiply it (float32 counts
    times the ratio), each in (0, 1]."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float, Tensor)):
        raise ValueError(f"fps: ratio must be a number in (0, 1], got {ratio!r}")
    ratios = torch.as_tensor(ratio, device=points.device)
    if ratios.dim() > 1 or (ratios.dim() == 1 and ratios.numel() not in (1, examples)):
        raise ValueError(f"fps: ratio must be one number or one per example ({examples}), "
                         f"got shape {list(ratios.shape)}")
    if ratios.numel() and not bool(((ratios > 0) & (ratios <= 1)).all()):
        raise ValueError(f"fps: ratio must lie in (0, 1], got {ratios.tolist()}")
    return ratios.to(points.dtype if isinstance(ratio, Tensor) else torch.float64)


def _farthest_points(points: Tensor, pointer: Tensor, taken: Tensor,
                     random_start: bool) -> Tensor:
    counts = pointer.diff()
    if points.size(0) == 0 or counts.numel() == 0 or int(taken.max()) == 0:
        return torch.zeros(0, dtype=torch.long, device=points.device)
    padded, real = reference.padded_rows(points, pointer[:-1], counts, int(counts.max()))
    if random_start:
        first = (torch.rand(counts.numel(), device=points.device) * counts).long()
        first = first.minimum((counts - 1).clamp(min=0))
    else:
        first = torch.zeros_like(counts)
    examples = torch.arange(counts.numel(), device=points.device)
    chosen = [first]
    distance = _squared_to(padded, padded[examples, first], real)
    for _ in range(1, int(taken.max())):
        chosen.append(distance.argmax(1))
        distance = torch.minimum(distance, _squared_to(padded, padded[examples, chosen[-1]],
                                                       real))
    local = torch.stack(chosen, 1)
    keep = torch.arange(local.size(1), device=points.device) < taken.unsqueeze(1)
    return (local + pointer[:-1].unsqueeze(1))[keep]


def _squared_to(padded: Tensor, centre: Tensor, real: Tensor) -> Tensor:
    """Squared distances of each example's points to its centre; padding at -inf, so no
    argmax takes it."""
    squared = (padded - centre.unsqueeze(1)).pow(2).sum(-1)
    return squared.masked_fill(~real, float("-inf"))


def _search(owner: str, x, y, k, batch_x, batch_y, num_workers, batch_size,
            cosine: bool = False, exclude_self: bool = False,
            within: float = float("inf")) -> tuple[Tensor, Tensor]:
    """The checked arguments' (query, point) pairs, in query order and nearest first (the
    graph functions, ``owner`` ``*_graph``, name their one batch ``batch``)."""
    points, queries = _points(x, "x"), _points(y, "y")
    check_int(k, "k", 1)
    check_int(num_workers, "num_workers", 1)
    if points.size(1) != queries.size(1):
        raise ValueError(f"{owner}: x has {points.size(1)} features per point but y has "
                         f"{queries.size(1)}")
    if points.device != queries.device:
        raise ValueError(f"{owner}: x is on {points.device} but y on {queries.device}")
    names = ("batch", "batch") if owner.endswith("_graph") else ("batch_x", "batch_y")
    ptr_x, ptr_y = _example_pointers(batch_x, batch_y, points, queries, batch_size, names)
    return _nearest(points, queries, ptr_x, ptr_y, k, cosine, exclude_self, within)


def _directed(owner: str, found: tuple[Tensor, Tensor], flow) -> Tensor:
    """A graph function's (point, neighbour) pairs as PyG's ``edge_index`` for ``flow``."""
    if flow not in ("source_to_target", "target_to_source"):
        raise ValueError(f"{owner}: flow must be 'source_to_target' or 'target_to_source', "
                         f"got {flow!r}")
    rows, cols = found
    return torch.stack([cols, rows] if flow == "source_to_target" else [rows, cols])


def _squared_radius(owner: str, r) -> float:
    if isinstance(r, Tensor) and r.numel() == 1:
        r = r.item()
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not r >= 0:
        raise ValueError(f"{owner}: r must be a number >= 0, got {r!r}")
    return float(r) ** 2


def _points(t, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a tensor of points, got {type(t).__name__}")
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name} must hold real coordinates, got {t.dtype}")
    if t.dim() == 1:
        return t.view(-1, 1)
    if t.dim() != 2:
        raise ValueError(f"{name} must be [num_points, num_features] (or one feature per "
                         f"point, 1-D), got shape {list(t.shape)}")
    return t


def _example_pointers(batch_x, batch_y, points: Tensor, queries: Tensor, batch_size,
                      names: tuple[str, str] = ("batch_x", "batch_y")) -> tuple[Tensor, Tensor]:
    """The row range of each example in ``x`` and ``y`` (``[B + 1]`` each); an absent batch
    puts every row in example 0."""
    ids = [_example_ids(batch, rows, name, points.device)
           for batch, rows, name in zip((batch_x, batch_y), (points, queries), names, strict=True)]
    largest = max([int(t[-1]) for t in ids if t.numel()] + [-1])
    if batch_size is None:
        count = largest + 1
    else:
        count = check_int(batch_size, "batch_size", 0)
        if largest >= count:
            raise ValueError(f"batch_size is {count} but an example id is {largest}")
    return tuple(_pointer(t, count) for t in ids)


def _example_ids(batch, rows: Tensor, name: str, device) -> Tensor:
    if batch is None:
        return torch.zeros(rows.size(0), dtype=torch.long, device=device)
    if not isinstance(batch, Tensor) or batch.is_floating_point() or batch.dtype == torch.bool:
        got = batch.dtype if isinstance(batch, Tensor) else type(batch).__name__
        raise TypeError(f"{name} must be an integer tensor of example ids, got {got}")
    if batch.dim() != 1 or batch.numel() != rows.size(0):
        raise ValueError(f"{name} must hold one example id per row ({rows.size(0)}), got "
                         f"shape {list(batch.shape)}")
    batch = batch.to(device=device, dtype=torch.long)
    if batch.numel() and int(batch[0]) < 0:
        raise ValueError(f"{name} holds {int(batch[0])}; example ids must be >= 0")
    descending = (batch[1:] < batch[:-1]).nonzero()
    if descending.numel():
        at = int(descending[0]) + 1
        raise ValueError(f"{name} must be sorted (each example's rows together, in order): "
                         f"row {at} has example {int(batch[at])} after {int(batch[at - 1])}")
    return batch


def _pointer(ids: Tensor, count: int) -> Tensor:
    pointer = torch.zeros(count + 1, dtype=torch.long, device=ids.device)
    pointer[1:] = torch.bincount(ids, minlength=count).cumsum(0)
    return pointer




def _nearest(points: Tensor, queries: Tensor, ptr_x: Tensor, ptr_y: Tensor, k: int,
             cosine: bool, exclude_self: bool, within: float) -> tuple[Tensor, Tensor]:
    """The (query, point) pairs of each query's ``k`` nearest points, in query order and
    nearest first, as two index vectors."""
    points, queries = _prepared(points, cosine), _prepared(queries, cosine)
    # no query has more neighbours than its example has points: [M, k] sized to that
    k = max(min(k, int((ptr_x[1:] - ptr_x[:-1]).max()) if ptr_x.numel() > 1 else 1), 1)
    check_fits_in_memory((queries.size(0), k), torch.long, "k (neighbours per query)")
    search = kernels.knn if HAS_EXTENSION and points.device.type == "cpu" else reference.knn
    nearest = search(points, queries, ptr_x, ptr_y, k, exclude_self, within)
    found = nearest >= 0
    rows = torch.arange(queries.size(0), device=queries.device).unsqueeze(1).expand_as(nearest)
    return rows[found], nearest[found]


def _prepared(t: Tensor, cosine: bool) -> Tensor:
    """Float64 rows; for cosine, unit rows, whose squared distances are 2 (1 - cos), so they
    rank as the cosine distance does (a zero row divides to NaN: it has no direction)."""
    t = t.detach().to(torch.float64)
    return (t / t.norm(dim=1, keepdim=True) if cosine else t).contiguous()


def _knn_fake(x, y, ptr_x, ptr_y, k, exclude_self, within):
    torch._check(x.dim() == 2 and y.dim() == 2, lambda: "knn needs 2-D x and y")
    torch._check(k >= 1, lambda: f"k must be >= 1, got {k}")
    return y.new_empty(y.shape[0], k, dtype=torch.long)


if HAS_EXTENSION:
    torch.library.register_fake("graphloc::knn")(_knn_fake)
