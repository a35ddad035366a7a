"""City-Networks labels: k-hop local eccentricity and its quantile classes."""

from __future__ import annotations

import heapq
from collections import deque

import torch
from torch import Tensor

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
    graph._require_one_node_set("local_eccentricity")
    check_int(hops, "hops", 0)
    if not isinstance(lengths, Tensor) or lengths.shape != (graph.num_edges,):
        raise ValueError(f"lengths must be a tensor of shape [{graph.num_edges}] (one per "
                         f"edge), got {getattr(lengths, 'shape', type(lengths).__name__)}")
    if not lengths.dtype.is_floating_point:
        raise TypeError(f"lengths must be floating point, got {lengths.dtype}")
    if lengths.numel() and not bool((lengths >= 0).all()):
        bad = int(torch.nonzero(~(lengths >= 0))[0])
        raise ValueError(f"lengths must be non-negative, got {lengths[bad].item()} at edge {bad}")
    if method not in ("auto", "cpp", "python"):
        raise ValueError(f"method must be 'auto', 'cpp' or 'python', got {method!r}")
    from graphloc import HAS_EXTENSION
    if method == "cpp" and not HAS_EXTENSION:
        raise RuntimeError("method='cpp' needs the compiled extension graphloc._C")
    graph = graph.to("cpu")
    csr_lengths = graph.to_csr_order(lengths.detach().cpu().double())
    if method == "python" or not HAS_EXTENSION:
        return _local_eccentricity_python(graph.csr.indptr, graph.csr.indices, csr_lengths, hops)
    return torch.ops.graphloc.local_eccentricity(graph.csr.indptr, graph.csr.indices,
                                                 csr_lengths, hops)


def _local_eccentricity_python(indptr: Tensor, indices: Tensor, weight: Tensor,
                               hops: int) -> Tensor:
    """Reference: the same BFS + ball-restricted Dijkstra in plain Python."""
    ptr, idx, w = indptr.tolist(), indices.tolist(), weight.tolist()
    n = len(ptr) - 1
    out = torch.zeros(n, dtype=torch.float64)
    for v in range(n):
        depth = {v: 0}
        queue = deque([v])
        while queue:
            u = queue.popleft()
            if depth[u] == hops:
                continue
            for e in range(ptr[u], ptr[u + 1]):
                if idx[e] not in depth:
                    depth[idx[e]] = depth[u] + 1
                    queue.append(idx[e])
        dist, heap, farthest = {v: 0.0}, [(0.0, v)], 0.0
        done = set()
        while heap:
            d, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            farthest = d
            for e in range(ptr[u], ptr[u + 1]):
                t = idx[e]
                if t in depth and t not in done and d + w[e] < dist.get(t, float("inf")):
                    dist[t] = d + w[e]
                    heapq.heappush(heap, (d + w[e], t))
        out[v] = farthest
    return out


def eccentricity_classes(values: Tensor, num_classes: int = 10) -> Tensor:
    """Near-equal quantile classes of ``values`` as City-Networks cuts them: rank in
    ascending order, ``chunk = N // num_classes + 1``, ``class = rank // chunk`` (class 0
    the smallest values). Ties are ranked by node id (the release used an unstable sort)."""
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if values.dim() != 1 or values.numel() == 0:
        raise ValueError(f"values must be a non-empty 1-D tensor, got shape {list(values.shape)}")
    if values.is_floating_point() and values.isnan().any():
        node = int(values.isnan().nonzero()[0])
        raise ValueError(f"values holds NaN (node {node}): a NaN eccentricity has no rank")
    order = torch.sort(values, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(values.numel())
    return rank // (values.numel() // num_classes + 1)
