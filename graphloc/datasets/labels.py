"""City-Networks labels: k-hop local eccentricity and its quantile classes."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_int
from graphloc.graph import Graph


def local_eccentricity(graph: Graph, lengths: Tensor, hops: int = 16,
                       method: str = "auto") -> Tensor:
    """``ecc[v] = max_{u in B_k(v)} dist(v, u)`` for every node, ``float64 [N]``.

    ``B_k(v)`` is the set of nodes within ``hops`` unweighted hops of ``v`` and ``dist`` the
    ``lengths``-weighted shortest-path distance inside the subgraph induced by that ball (the
    City-Networks label, Liang et al.). The graph should be undirected (both directions of
    each street present); paths follow edges into each node. ``method``: "cpp" (the
    extension: per node a depth-limited BFS, then Dijkstra on the ball, parallel over
    nodes), "python" (the reference), or "auto" (cpp when the extension is built).
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a graphloc.Graph, got {type(graph).__name__}")
    if method not in ("auto", "cpp", "python"):
        raise ValueError(f"method must be 'auto', 'cpp' or 'python', got {method!r}")
    if method == "cpp" and not ops.HAS_EXTENSION:
        raise RuntimeError("method='cpp' needs the compiled extension graphloc._C")
    return ops.local_eccentricity(graph, lengths, hops, twin=method == "python")


def eccentricity_classes(values: Tensor, num_classes: int = 10, *,
                         stacklevel: int = 2) -> Tensor:
    """Near-equal quantile classes of ``values`` as City-Networks cuts them: rank in
    ascending order, ``chunk = N // num_classes + 1``, ``class = rank // chunk`` (class 0
    the smallest values). Ties are ranked by node id (the release used an unstable sort).

    Warns (at ``stacklevel``) where the cut makes fewer classes than ``num_classes`` (few
    nodes: 6 values make 6 classes of one node, 36 make 9 of four), and where the values
    take fewer distinct values than the classes made: equal values (every eccentricity is 0
    at 0 hops) are then told apart by node id alone."""
    check_int(num_classes, "num_classes", 1)
    if not isinstance(values, Tensor) or values.dim() != 1 or values.numel() == 0:
        shape = list(values.shape) if isinstance(values, Tensor) else type(values).__name__
        raise ValueError(f"values must be a non-empty 1-D tensor, got {shape}")
    if values.is_floating_point() and values.isnan().any():
        node = int(values.isnan().nonzero()[0])
        raise ValueError(f"values holds NaN (node {node}): a NaN eccentricity has no rank")
    n = values.numel()
    chunk = n // num_classes + 1
    made = -(-n // chunk)
    if made < num_classes:  # the release's cut: few nodes (or many classes) give fewer
        warnings.warn(f"{n} values in chunks of {chunk} make {made} classes, not "
                      f"{num_classes}", stacklevel=stacklevel)
    ordered, order = torch.sort(values, stable=True)
    distinct = 1 + int((ordered[1:] != ordered[:-1]).sum())  # from the one sort
    if distinct < made:
        warnings.warn(f"the values take {distinct} distinct values for {made} classes: nodes "
                      f"of equal value are split between classes by node id alone",
                      stacklevel=stacklevel)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(n)
    return rank // chunk
