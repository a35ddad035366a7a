"""node2vec random walks: graphloc's kernel against torch_cluster's (when installed) and a
vectorised pure-torch walk (uniform walks only), in one process.

PyG 2.8's Node2Vec needs pyg-lib, which does not install here (and whose walk refuses
p, q != 1). torch_cluster's biased walk draws another distribution whenever q < p or
q < 1 (its acceptance tests are chained; see docs/models.md), so its biased rows time a
different computation. One walk of 20 steps from every node; medians over a few turns in
alternating order.

    python benchmarks/bench_walk.py [--turns 3]
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
from graphs import power_law, road_like  # noqa: E402

from graphloc import ops  # noqa: E402

LENGTH = 20


def torch_walk(rowptr, col, start, length):
    """Uniform walks with torch's ops, step by step over all walks (dead ends stay)."""
    out, cur = [start], start
    degree = rowptr.diff()
    for _ in range(length):
        deg = degree[cur]
        pick = (torch.rand(cur.numel()) * deg).long()
        nxt = col[(rowptr[cur] + pick).clamp(max=col.numel() - 1)]
        cur = torch.where(deg > 0, nxt, cur)
        out.append(cur)
    return torch.stack(out, dim=1)


def methods(graph, p, q):
    start = torch.arange(graph.num_nodes)
    seed = iter(range(10**6))
    yield "graphloc", lambda: ops.random_walk(graph, start, LENGTH, p, q, seed=next(seed))
    csc = graph.csc
    rowptr, col = csc.indptr.long(), csc.indices.long()
    try:
        import torch_cluster  # noqa: F401
        yield "torch_cluster 1.6.3", lambda: torch.ops.torch_cluster.random_walk(
            rowptr, col, start, LENGTH, p, q)
    except ImportError:
        pass
    if p == 1.0 and q == 1.0:
        yield "pure torch", lambda: torch_walk(rowptr, col, start, LENGTH)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{machine()}\n")
    print("| graph | p, q | method | ms | steps / s | graphloc's speed-up |")
    print("|---|---|---|---:|---:|---:|")
    for name, graph in (("road 200k", road_like()), ("power-law 169k/2.3M", power_law())):
        for p, q in ((1.0, 1.0), (0.5, 2.0), (4.0, 0.25)):
            timed = list(methods(graph, p, q))
            times = {label: [] for label, _ in timed}
            for turn in range(args.turns):
                for label, run in (timed if turn % 2 == 0 else timed[::-1]):
                    start = time.perf_counter()
                    run()
                    times[label].append(time.perf_counter() - start)
            ours = statistics.median(times["graphloc"])
            for label, values in times.items():
                t = statistics.median(values)
                print(f"| {name} | {p:g}, {q:g} | {label} | {1e3 * t:.1f} | "
                      f"{graph.num_nodes * LENGTH / t:,.0f} | {t / ours:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
