"""Sampler benchmark: NeighborLoader throughput on the road-like and power-law graphs.

PyG's NeighborLoader needs pyg-lib or torch-sparse, neither installable here, so there is
no peer in this run: absolute throughput is reported.

    python benchmarks/bench_loader.py [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402
from graphs import power_law, road_like  # noqa: E402

from graphloc.loader import NeighborLoader  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    lines = ["| graph | fan-out | batch | ms / batch | sampled nodes / s | sampled edges / s |",
             "|---|---|---:|---:|---:|---:|"]
    for name, graph in (("road 200k", road_like()), ("power-law 169k/2.3M", power_law())):
        x = torch.randn(graph.num_nodes, 64)
        for fanout in ([15, 10, 5], [-1, -1]):
            loader = NeighborLoader(graph, x, None, fanout, batch_size=1024, shuffle=True)
            nodes = edges = 0
            start = time.perf_counter()
            for i, batch in enumerate(loader):
                if i == args.batches:
                    break
                nodes += batch.n_id.numel()
                edges += batch.graph.num_edges
            seconds = time.perf_counter() - start
            lines.append(f"| {name} | {fanout} | 1024 | {1e3 * seconds / args.batches:.1f} | "
                         f"{nodes / seconds:,.0f} | {edges / seconds:,.0f} |")
            print("  " + lines[-1], flush=True)
    header = f"{datetime.date.today().isoformat()}, {machine()}"
    publish(f"\n## Neighbour sampling (`benchmarks/bench_loader.py`), {header}\n\n"
            "Each batch: sampling in C++, relabelling, the batch's Graph and the feature "
            "gather (F = 64); PyG's NeighborLoader cannot run here (no pyg-lib or "
            "torch-sparse).\n\n" + "\n".join(lines) + "\n", args.write)


if __name__ == "__main__":
    main()
