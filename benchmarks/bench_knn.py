"""Nearest-neighbour graphs and the convs built on them, in one process.

PyG 2.8 needs pyg-lib for knn_graph, radius_graph, DynamicEdgeConv and GravNetConv, and
pyg-lib does not install here, so the search is timed against SciPy's cKDTree (both
threads) and against graphloc's own pure-torch twin (the path without the extension or on
a GPU); each result is checked to hold SciPy's neighbours. The convs are timed against
PyG's with graphloc's knn standing in for pyg-lib's, so the ratio is the message passing
alone. Medians over a few turns, the order alternating.

    python benchmarks/bench_knn.py [--turns 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine  # noqa: E402

from graphloc.ops import knn, knn_graph, neighbours, radius_graph  # noqa: E402

K = 20


def clouds(examples: int, points: int, width: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(examples * points, width, generator=gen)
    return x, torch.arange(examples).repeat_interleave(points)


CASES = [  # (name, examples, points per example, width)
    ("32 clouds x 1,024 points, 3-D", 32, 1024, 3),
    ("32 clouds x 1,024 points, 64-D features", 32, 1024, 64),
    ("one scan of 100,000 points, 3-D", 1, 100_000, 3),
    ("2,000 molecules x 25 atoms, 3-D", 2000, 25, 3),
]


def median_ms(run, turns: int) -> float:
    times = []
    for _ in range(turns):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def scipy_knn_graph(x, batch, k):
    """SciPy's neighbours of each point (itself left out), per example, as sets."""
    from scipy.spatial import cKDTree
    found, start = [], 0
    for count in torch.bincount(batch).tolist():
        block = x[start:start + count].numpy()
        _, index = cKDTree(block).query(block, k=min(k + 1, count), workers=2)
        found += [set((row[row != i] + start).tolist()) for i, row in enumerate(index)]
        start += count
    return found


def as_sets(edge_index, n):
    sets = [set() for _ in range(n)]
    for j, i in edge_index.t().tolist():
        sets[i].add(j)
    return sets


def search_table(turns: int) -> None:
    print(f"\n### knn_graph, k = {K} (ms)\n")
    print("| points | graphloc (KD-tree kernel) | graphloc twin (torch) | SciPy cKDTree | "
          "SciPy / graphloc |")
    print("|---|---:|---:|---:|---:|")
    for name, examples, points, width in CASES:
        x, batch = clouds(examples, points, width)
        got = knn_graph(x, K, batch)
        assert as_sets(got, x.size(0)) == scipy_knn_graph(x, batch, K), name
        ours = median_ms(lambda x=x, batch=batch: knn_graph(x, K, batch), turns)
        scipy = median_ms(lambda x=x, batch=batch: scipy_knn_graph(x, batch, K), turns)
        neighbours.HAS_EXTENSION = False
        try:  # (one turn: the twin's scan is quadratic in the example's size)
            twin = median_ms(lambda x=x, batch=batch: knn_graph(x, K, batch), 1)
        finally:
            neighbours.HAS_EXTENSION = True
        print(f"| {name} | {ours:,.0f} | {twin:,.0f} | {scipy:,.0f} | {scipy / ours:.1f}x |")
    x, batch = clouds(2000, 25, 3)
    ours = median_ms(lambda: radius_graph(x, 1.0, batch), turns)
    print(f"\nradius_graph, r = 1, 2,000 molecules x 25 atoms: {ours:,.1f} ms")


def conv_table(turns: int) -> None:
    import torch_geometric.nn as pyg
    import torch_geometric.typing

    import graphloc.nn as gl

    def graphlocs_knn(x, y, ptr_x, ptr_y, k, cosine, num_workers):
        batch = (None if ptr is None else torch.repeat_interleave(ptr.diff())
                 for ptr in (ptr_x, ptr_y))
        return knn(x, y, k, *batch, cosine=cosine)

    torch_geometric.typing.WITH_KNN = True
    torch.ops.pyg.knn = graphlocs_knn
    _, batch = clouds(32, 1024, 3)
    features = torch.randn(batch.numel(), 64)
    print("\n### Convs on 32 clouds x 1,024 points, forward + backward (ms; PyG's knn is "
          "graphloc's)\n")
    print("| conv | graphloc | PyG | PyG / graphloc |")
    print("|---|---:|---:|---:|")
    layers = [
        ("DynamicEdgeConv, 64 -> 64, k = 20, max", features,
         lambda m: m.DynamicEdgeConv(torch.nn.Sequential(
             torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)), k=K)),
        ("GravNetConv, 64 -> 64, space 4, propagate 22, k = 16", features,
         lambda m: m.GravNetConv(64, 64, 4, 22, k=16)),
    ]
    for name, inputs, make in layers:
        times = {}
        for module in (gl, pyg):
            torch.manual_seed(0)
            conv = make(module)
            leaf = inputs.clone().requires_grad_()

            def step(conv=conv, leaf=leaf):
                conv(leaf, batch).square().mean().backward()
            step()
            times[module.__name__] = median_ms(step, turns)
        ours, theirs = times["graphloc.nn"], times["torch_geometric.nn"]
        print(f"| {name} | {ours:,.0f} | {theirs:,.0f} | {theirs / ours:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(machine())
    search_table(args.turns)
    conv_table(args.turns)


if __name__ == "__main__":
    main()
