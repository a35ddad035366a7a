"""Synthetic benchmark graphs: a road-like planar graph and a power-law graph."""

from __future__ import annotations

import numpy as np
import torch

from graphloc import Graph


def road_like(num_nodes: int = 200_000, mean_degree: float = 3.3, seed: int = 0) -> Graph:
    """A thinned Delaunay triangulation of uniform random points, in random node order.

    Delaunay graphs are planar with mean degree ~6; keeping a random subset of the
    undirected edges (both directions of each) gives street-network-like degrees and
    long shortest paths, like the City-Networks graphs.
    """
    from scipy.spatial import Delaunay

    rng = np.random.default_rng(seed)
    tri = Delaunay(rng.random((num_nodes, 2))).simplices
    pairs = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]])
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)
    keep = rng.random(len(pairs)) < mean_degree / 2 / (len(pairs) / num_nodes)
    pairs = torch.from_numpy(pairs[keep]).long().t()
    edge_index = torch.cat([pairs, pairs.flip(0)], dim=1)
    order = torch.from_numpy(rng.permutation(edge_index.size(1)))
    return Graph(edge_index[:, order], num_nodes=num_nodes)


def power_law(num_nodes: int = 169_343, num_edges: int = 2_315_598, exponent: float = 2.1,
              seed: int = 0) -> Graph:
    """A Chung-Lu graph with power-law expected degrees (ogbn-arxiv's size by default)."""
    gen = torch.Generator().manual_seed(seed)
    weight = (torch.rand(num_nodes, generator=gen) + 1e-3) ** (-1.0 / (exponent - 1.0))
    src = torch.multinomial(weight, num_edges, replacement=True, generator=gen)
    dst = torch.multinomial(weight, num_edges, replacement=True, generator=gen)
    return Graph(torch.stack([src, dst]), num_nodes=num_nodes)


def benchmark_graph(name: str) -> Graph:
    """``road_like()`` or ``power_law()`` by name ("road", "power-law"), on 2 threads with
    freed memory retained (as the graphloc command runs), for every library alike."""
    torch.set_num_threads(2)
    from graphloc.memory import retain_freed_memory
    retain_freed_memory()
    return road_like() if name == "road" else power_law()
