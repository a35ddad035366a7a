"""Summary statistics of road-like graphs (for dataset tables)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphloc.graph import Graph

#: components up to this many nodes get their exact hop diameter (a BFS from every node)
EXACT_DIAMETER_NODES = 4096


def road_statistics(graph: Graph, sweeps: int = 4) -> dict:
    """Statistics of the undirected simple graph underlying ``graph`` (each edge read both
    ways; loops and parallel edges dropped): nodes, undirected edges, mean and max degree,
    connected components and the largest one's size, the hop diameter (the longest
    shortest path within any component) and the global clustering coefficient
    (3 x triangles / connected triples).

    The hop diameter is exact where ``hop_diameter_exact`` is True: every component that
    could hold the longest path has at most ``EXACT_DIAMETER_NODES`` nodes and was searched
    from every node. Otherwise it is a lower bound from ``sweeps`` double sweeps (a BFS
    from the farthest node found so far) in each such larger component; a component whose
    size cannot beat the bound so far is skipped, since its diameter is below its size."""
    if not isinstance(graph, Graph):
        raise TypeError(f"road_statistics takes a graphloc.Graph, got {type(graph).__name__} "
                        "(wrap an edge_index with Graph(edge_index, num_nodes))")
    if graph.is_bipartite:
        raise ValueError(f"road_statistics reads one node set; the graph is bipartite "
                         f"({graph.num_src_nodes} sources, {graph.num_nodes} destinations)")
    n = graph.num_nodes
    adj = _simple_undirected(graph)
    degree = np.asarray(adj.sum(1)).ravel()
    count, component = csgraph.connected_components(adj, directed=False)
    sizes = np.bincount(component, minlength=count)
    diameter, exact = _hop_diameter(adj, component, sizes, sweeps)
    triangles = adj.multiply(adj @ adj).sum() / 6
    triples = (degree * (degree - 1) / 2).sum()
    return {"nodes": n, "edges": int(adj.nnz // 2),
            "mean_degree": float(degree.mean()) if n else 0.0,
            "max_degree": int(degree.max()) if n else 0,
            "components": int(count), "largest_component": int(sizes.max()) if n else 0,
            "hop_diameter": diameter, "hop_diameter_exact": exact,
            "clustering": float(3 * triangles / triples) if triples else 0.0}


def _simple_undirected(graph: Graph) -> sp.csr_matrix:
    n = graph.num_nodes
    src, dst = graph.edge_index.numpy()
    off = src != dst
    adj = sp.coo_matrix((np.ones(int(off.sum())), (src[off], dst[off])), shape=(n, n)).tocsr()
    adj.data[:] = 1.0  # parallel edges count once
    return ((adj + adj.T) > 0).astype(np.float64).tocsr()


def _hop_diameter(adj, component, sizes, sweeps: int) -> tuple[int, bool]:
    """(the largest hop diameter over the components, whether it is exact), the
    components visited from the largest down."""
    best, exact = 0, True
    members = np.split(np.argsort(component, kind="stable"), np.cumsum(sizes)[:-1])
    for c in np.argsort(-sizes, kind="stable"):
        if sizes[c] - 1 <= best:  # a component's diameter is below its node count
            break
        nodes = members[c]
        sub = adj[nodes][:, nodes]
        if len(nodes) <= EXACT_DIAMETER_NODES:
            best = max(best, _exact_diameter(sub))
        else:
            best, exact = max(best, _double_sweeps(sub, sweeps)), False
    return int(best), exact


def _exact_diameter(adj, block: int = 256) -> int:
    """The largest eccentricity of a connected graph, by BFS from every node (``block``
    sources at a time, so at most ``block`` x N distances are held)."""
    n, longest = adj.shape[0], 0
    for first in range(0, n, block):
        dist = csgraph.shortest_path(adj, unweighted=True, directed=False,
                                     indices=np.arange(first, min(first + block, n)))
        longest = max(longest, int(dist.max()))
    return longest


def _double_sweeps(adj, sweeps: int) -> int:
    """A lower bound of a connected graph's diameter: BFS from the highest-degree node,
    then ``sweeps - 1`` times from the farthest node the last BFS found."""
    start = int(np.argmax(np.asarray(adj.sum(1)).ravel()))
    longest = 0
    for _ in range(sweeps):
        dist = csgraph.shortest_path(adj, unweighted=True, directed=False, indices=start)
        start, far = int(np.argmax(dist)), int(dist.max())
        longest = max(longest, far)
    return longest
