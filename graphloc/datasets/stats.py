"""Summary statistics of road-like graphs (for dataset tables)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphloc.graph import Graph


def road_statistics(graph: Graph, sweeps: int = 4) -> dict:
    """Nodes, undirected edges, mean and max degree, a hop-diameter lower bound (repeated
    double sweep: BFS from the farthest node found so far) and the global clustering
    coefficient (3 x triangles / connected triples) of an undirected graph."""
    n = graph.num_nodes
    src, dst = graph.edge_index.numpy()
    off = src != dst
    adj = sp.coo_matrix((np.ones(int(off.sum())), (src[off], dst[off])), shape=(n, n)).tocsr()
    adj.data[:] = 1.0  # parallel edges count once
    adj = ((adj + adj.T) > 0).astype(np.float64)
    degree = np.asarray(adj.sum(1)).ravel()
    start, diameter = int(np.argmax(degree)), 0
    for _ in range(sweeps):
        dist = csgraph.shortest_path(adj, unweighted=True, indices=start)
        dist[np.isinf(dist)] = -1
        start, far = int(np.argmax(dist)), int(dist.max())
        diameter = max(diameter, far)
    triangles = adj.multiply(adj @ adj).sum() / 6
    triples = (degree * (degree - 1) / 2).sum()
    return {"nodes": n, "edges": int(adj.nnz // 2), "mean_degree": float(degree.mean()),
            "max_degree": int(degree.max()), "hop_diameter": diameter,
            "clustering": float(3 * triangles / triples) if triples else 0.0}
