"""SGFormer on PyG's mini-batches of disjoint subgraphs (PyG's ``ogbn_train.py`` recipe:
``NeighborLoader(..., disjoint=True)``, ``model(x, edge_index, batch)``): graphloc's
``SGFormer`` (each subgraph attending to its own nodes, and ``pyg_padding=True``, PyG's
padded numbers) against PyG's, one training step (forward, NLL loss on the seeds, backward).

Same weights, same batch, one process; the three run in turns (the order rotating), and
each ratio is the median of the per-turn ratios, so the machine's drift cancels. Freed
memory is retained for all alike.

    python benchmarks/bench_sgformer_batches.py [--turns 7] [--graph road|power-law]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, times_in_turns  # noqa: E402
from graphs import benchmark_graph  # noqa: E402

F, CLASSES, SEEDS, FANOUT = 64, 10, 1024, [10, 10]


def disjoint_batch(graph):
    """One batch of ``SEEDS`` seeds' disjoint 2-hop samples, as PyG's recipe loads it."""
    from torch_geometric.data import Data

    from graphloc.loader import NeighborLoader
    torch.manual_seed(0)
    data = Data(x=torch.randn(graph.num_nodes, F), edge_index=graph.edge_index,
                y=torch.randint(0, CLASSES, (graph.num_nodes,)))
    loader = NeighborLoader(data, num_neighbors=FANOUT, batch_size=SEEDS, disjoint=True,
                            shuffle=True)
    return next(iter(loader))


def step(model, batch):
    def run() -> float:
        start = time.perf_counter()
        out = model(batch.x, batch.edge_index, batch.batch)
        torch.nn.functional.nll_loss(out[:SEEDS], batch.y[:SEEDS]).backward()
        return time.perf_counter() - start
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--graph", default="road", choices=["road", "power-law"])
    args = parser.parse_args()
    from torch_geometric.nn.models import SGFormer as PyGSGFormer

    from graphloc.nn import SGFormer
    graph = benchmark_graph(args.graph)
    batch = disjoint_batch(graph)
    sizes = torch.bincount(batch.batch)
    torch.manual_seed(0)
    theirs = PyGSGFormer(F, F, CLASSES)
    models = {"PyG": theirs}
    for name, padded in (("graphloc", False), ("graphloc, pyg_padding", True)):
        models[name] = SGFormer(F, F, CLASSES, pyg_padding=padded)
        models[name].load_state_dict(theirs.state_dict())
    times = times_in_turns({name: step(m, batch) for name, m in models.items()}, args.turns)
    print(f"{args.graph} graph ({graph.num_nodes:,} nodes), one batch of {SEEDS} seeds' disjoint "
          f"{FANOUT} samples: {batch.num_nodes:,} nodes, subgraphs of {int(sizes.min())} to "
          f"{int(sizes.max())} nodes; SGFormer({F}, {F}, {CLASSES}), PyG's defaults (2 "
          f"attention, 3 GCN layers); {args.turns} turns; {machine()}")
    print("| model | ms per step | PyG / it (paired) |")
    print("|---|---:|---:|")
    for name, values in times.items():
        ratio = statistics.median(p / t for p, t in zip(times["PyG"], values, strict=True))
        print(f"| {name} | {1e3 * statistics.median(values):.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
