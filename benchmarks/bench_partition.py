"""Graph partitioning: graphloc's ``ops.partition`` against METIS 5 (pymetis), k-way and
recursive bisection, on the benchmark graphs: time, edge cut and the heaviest part.

PyG's ``ClusterData`` calls METIS through pyg-lib or torch-sparse, which do not install
here; pymetis wraps the same METIS library, so it stands in for them. Both run on one
thread (METIS is serial). Medians over a few turns in alternating order; cuts count each
undirected edge once.

    python benchmarks/bench_partition.py [--turns 3]
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

from graphloc.ops import partition  # noqa: E402
from graphloc.ops.cluster import _undirected_csr  # noqa: E402


def methods(edge_index, num_nodes, k, recursive):
    yield "graphloc", lambda: partition(edge_index, k, num_nodes=num_nodes,
                                        recursive=recursive)
    try:
        import pymetis
    except ImportError:
        return
    indptr, indices, _ = _undirected_csr(edge_index, None, num_nodes)
    adjacency = pymetis.CSRAdjacency(indptr.numpy(), indices.numpy())
    yield "METIS 5 (pymetis)", lambda: torch.tensor(
        pymetis.part_graph(k, adjacency=adjacency, recursive=recursive)[1])


def cut(edge_index, parts) -> int:
    """Undirected edges between parts (each pair of nodes once)."""
    src, dst = edge_index
    keep = src < dst
    pairs = torch.unique(src[keep] * parts.numel() + dst[keep])
    a, b = pairs // parts.numel(), pairs % parts.numel()
    return int((parts[a] != parts[b]).sum())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{machine()}\n")
    print("| graph | parts | scheme | method | ms | edge cut | heaviest part / ideal | "
          "time / graphloc's | cut / graphloc's |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    graphs = (("road 200k", road_like()), ("power-law 169k/2.3M", power_law()))
    for name, graph in graphs:
        edge_index, n = graph.edge_index, graph.num_nodes
        for k in (16, 256):
            for recursive in (False, True):
                timed = list(methods(edge_index, n, k, recursive))
                times = {label: [] for label, _ in timed}
                parts = {}
                for turn in range(args.turns):
                    for label, run in (timed if turn % 2 == 0 else timed[::-1]):
                        start = time.perf_counter()
                        parts[label] = run()
                        times[label].append(time.perf_counter() - start)
                ours_t = statistics.median(times["graphloc"])
                ours_cut = cut(edge_index, parts["graphloc"])
                for label, values in times.items():
                    t, c = statistics.median(values), cut(edge_index, parts[label])
                    heaviest = int(torch.bincount(parts[label], minlength=k).max()) * k / n
                    print(f"| {name} | {k} | {'recursive' if recursive else 'k-way'} | "
                          f"{label} | {1e3 * t:.0f} | {c:,} | {heaviest:.3f} | "
                          f"{t / ours_t:.2f}x | {c / ours_cut:.3f} |", flush=True)


if __name__ == "__main__":
    main()
