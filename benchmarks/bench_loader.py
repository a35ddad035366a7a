"""Sampler benchmark: NeighborLoader throughput on the road-like and power-law graphs.

PyG's NeighborLoader needs pyg-lib or torch-sparse, neither installable here, so there is
no peer in this run: absolute throughput is reported, for graphloc's own loader (a Graph,
SampledBatch) and for its PyG drop-in (PyG's NeighborLoader on graphloc's kernel, PyG Data
batches), the two timed in alternating blocks, and for the drop-in's temporal and weighted
draws.

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


def timed_batches(loader, batches: int) -> tuple[float, int, int]:
    """Seconds for ``batches`` batches, and the nodes and edges they sampled."""
    nodes = edges = 0
    start = time.perf_counter()
    for i, batch in enumerate(loader):
        if i == batches:
            break
        nodes += batch.n_id.numel()
        edges += batch.e_id.numel()
    return time.perf_counter() - start, nodes, edges


def loaders(graph, x, fanout):
    """(label, factory) of the loaders compared on one graph and fan-out."""
    from torch_geometric.data import Data
    data = Data(x=x, edge_index=graph.edge_index, num_nodes=graph.num_nodes)
    gen = torch.Generator().manual_seed(0)
    timed = data.clone()
    timed.time = torch.randint(0, 1000, (graph.num_nodes,), generator=gen)
    weighted = data.clone()
    weighted.weight = torch.rand(graph.num_edges, generator=gen)
    common = dict(num_neighbors=fanout, batch_size=1024, shuffle=True)
    yield "graphloc (Graph)", lambda: NeighborLoader(graph, x, None, fanout, batch_size=1024,
                                                     shuffle=True)
    yield "PyG drop-in", lambda: NeighborLoader(data, **common)
    if -1 not in fanout:
        yield "PyG drop-in, node times", lambda: NeighborLoader(timed, time_attr="time",
                                                                **common)
        yield "PyG drop-in, weighted", lambda: NeighborLoader(weighted, weight_attr="weight",
                                                              **common)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    lines = ["| graph | fan-out | loader | ms / batch | sampled nodes / s | sampled edges / s |",
             "|---|---|---|---:|---:|---:|"]
    for name, graph in (("road 200k", road_like()), ("power-law 169k/2.3M", power_law())):
        x = torch.randn(graph.num_nodes, 64)
        for fanout in ([15, 10, 5], [-1, -1]):
            made = [(label, make()) for label, make in loaders(graph, x, fanout)]
            runs = {label: [] for label, _ in made}
            for _ in range(args.rounds):  # alternating blocks, the median kept
                for label, loader in made:
                    runs[label].append(timed_batches(loader, args.batches))
            for label, results in runs.items():
                seconds, nodes, edges = sorted(results)[len(results) // 2]
                lines.append(f"| {name} | {fanout} | {label} | "
                             f"{1e3 * seconds / args.batches:.1f} | {nodes / seconds:,.0f} | "
                             f"{edges / seconds:,.0f} |")
                print("  " + lines[-1], flush=True)
    header = f"{datetime.date.today().isoformat()}, {machine()}"
    publish(f"\n## Neighbour sampling (`benchmarks/bench_loader.py`), {header}\n\n"
            "Batches of 1,024 seeds, median of the rounds. graphloc's loader: sampling in "
            "C++, relabelling, the batch's Graph and the feature gather (F = 64). The PyG "
            "drop-in: PyG's NeighborLoader with graphloc's draw (its batches are PyG Data, "
            "filtered by PyG's code); with node times (disjoint trees, one per seed) or "
            "edge weights. PyG's own NeighborLoader cannot run here (no pyg-lib or "
            "torch-sparse).\n\n" + "\n".join(lines) + "\n", args.write)


if __name__ == "__main__":
    main()
