"""Training benchmark: one epoch of a 16-layer GCN (hidden 64) on a 570,000-node synthetic
city: graphloc full-batch, graphloc sampled mini-batches, PyG full-batch, in one run.
PyG's mini-batch path (NeighborLoader) cannot run here: it needs pyg-lib or torch-sparse.

    python benchmarks/bench_train.py [--nodes 570000] [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402

from graphloc.datasets import synthetic_city  # noqa: E402
from graphloc.loader import NeighborLoader  # noqa: E402
from graphloc.nn import GNN  # noqa: E402


def full_batch_epoch(model, x, graph, y, train):
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)

    def epoch():
        opt.zero_grad()
        F.cross_entropy(model(x, graph)[train], y[train]).backward()
        opt.step()
    return epoch


def mini_batches(model, city, fanout, batch_size, count):
    """``count`` sampled mini-batch steps (an epoch has len(loader) of them)."""
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    loader = NeighborLoader(city.graph, city.x, city.y, fanout, batch_size=batch_size,
                            shuffle=True, input_nodes=city.train_index)

    def steps():
        for _, batch in zip(range(count), loader, strict=False):
            opt.zero_grad()
            out = model(batch.x, batch.graph)[:batch.batch_size]
            F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
            opt.step()
    return steps, len(loader)


def timed(fn, reps: int) -> float:
    fn()  # warm-up: caches, allocator
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=570_000)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    from torch_geometric.nn import GCN
    city = synthetic_city(args.nodes, seed=0, hops=2)  # labels only need to exist here
    x, y, train = city.x, city.y, city.train_index
    torch.manual_seed(0)
    runs = {
        "graphloc full batch": full_batch_epoch(GNN("gcn", x.size(1), 64, 10, 16), x,
                                                city.graph, y, train),
        "PyG full batch": full_batch_epoch(GCN(x.size(1), 64, 16, 10), x,
                                           city.graph.edge_index, y, train),
    }
    seconds = {}
    for name, epoch in runs.items():
        seconds[name] = timed(epoch, args.reps)
        print(f"  {name}: {seconds[name]:.2f} s", flush=True)
    steps, per_epoch = mini_batches(GNN("gcn", x.size(1), 64, 10, 16), city, [3] * 16, 1024,
                                    args.batches)
    step_s = timed(steps, 1) / args.batches
    print(f"  mini-batch: {step_s:.2f} s per batch, {per_epoch} batches per epoch", flush=True)
    base = seconds["PyG full batch"]
    lines = ["| run | s / epoch | vs PyG full batch |", "|---|---:|---:|"]
    lines += [f"| {n} | {s:.2f} | {base / s:.1f}x |" for n, s in seconds.items()]
    lines.append(f"| graphloc mini-batches (1,024 seeds, fan-out 3 per layer): "
                 f"{step_s:.2f} s per batch measured on {args.batches} batches, x "
                 f"{per_epoch} batches | {step_s * per_epoch:.1f} | "
                 f"{base / (step_s * per_epoch):.2f}x |")
    header = f"{datetime.date.today().isoformat()}, {machine()}"
    publish(f"\n## Training epoch (`benchmarks/bench_train.py`), {header}\n\n"
            f"16-layer GCN, hidden 64, synthetic city of {args.nodes:,} nodes "
            f"({city.graph.num_edges // 2:,} streets), {len(train):,} training nodes, AdamW; "
            "median of the timed epochs after one warm-up. A 16-hop sample around 1,024 road "
            "nodes covers much of the city, so a 16-layer model's mini-batch step costs a "
            "sizeable part of a full-graph step. PyG's mini-batch path cannot run here (no "
            "pyg-lib or torch-sparse).\n\n" + "\n".join(lines) + "\n", args.write)


if __name__ == "__main__":
    main()
