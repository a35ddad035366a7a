"""The drop-in call: a conv called as PyG's, ``conv(x, edge_index)``, against the same conv
on a ``Graph`` and PyG's conv on the same ``edge_index``.

One process, the three calls in turns (the order rotating), forward + backward, median
over the turns; the ratios are medians of the per-turn ratios, so the machine's drift
cancels. The edge_index tensor is the same object at every call, as in a PyG training
loop over one graph; a fourth call passes a new tensor of the same values at every call
(``edge_index.clone()``, the clone timed too), as a model that makes its edges in its
forward (PyG's ``DirGNNConv`` flips them). Freed memory is retained
(``retain_freed_memory``, as the graphloc command runs), for every library alike.

    python benchmarks/bench_dropin.py [--turns 9] [--graph road|power-law]
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

F = 64
LAYERS = {"GCNConv": "GCNConv(F, F)", "SAGEConv": "SAGEConv(F, F)",
          "GATConv (4 heads x 16)": "GATConv(F, 16, heads=4)",
          "ChebConv (K=3)": "ChebConv(F, F, K=3)"}


def step(conv, x, graph) -> float:
    start = time.perf_counter()
    conv(x, graph).sum().backward()
    return time.perf_counter() - start


def run(name: str, factory: str, edge_index, graph, turns: int) -> dict:
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    torch.manual_seed(0)
    ours = eval(factory, {**vars(gl), "F": F})
    theirs = eval(factory, {**vars(pyg), "F": F})
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(graph.num_nodes, F, requires_grad=True)
    calls = {"graphloc, Graph": lambda: step(ours, x, graph),
             "graphloc, edge_index": lambda: step(ours, x, edge_index),
             "PyG, edge_index": lambda: step(theirs, x, edge_index),
             "graphloc, new equal edge_index": lambda: step(ours, x, edge_index.clone())}
    times = times_in_turns(calls, turns)
    per_turn = lambda a, b: statistics.median(  # noqa: E731
        t / u for t, u in zip(times[a], times[b], strict=True))
    return {"layer": name, **{k: statistics.median(v) * 1e3 for k, v in times.items()},
            "edge_index / Graph": per_turn("graphloc, edge_index", "graphloc, Graph"),
            "new edge_index / Graph": per_turn("graphloc, new equal edge_index",
                                               "graphloc, Graph"),
            "PyG / graphloc edge_index": per_turn("PyG, edge_index", "graphloc, edge_index")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument("--graph", choices=("road", "power-law"), default="road")
    args = parser.parse_args()
    graph = benchmark_graph(args.graph)
    edge_index = graph.edge_index.clone()
    print(f"{args.graph} graph, {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, F = {F}, "
          f"{machine()}")
    print("| layer | graphloc, Graph ms | graphloc, edge_index ms | PyG, edge_index ms | "
          "edge_index / Graph | PyG / graphloc (edge_index) | graphloc, new equal "
          "edge_index ms | new / Graph |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, factory in LAYERS.items():
        r = run(name, factory, edge_index, graph, args.turns)
        print(f"| {name} | {r['graphloc, Graph']:.0f} | {r['graphloc, edge_index']:.0f} | "
              f"{r['PyG, edge_index']:.0f} | {r['edge_index / Graph']:.2f} | "
              f"{r['PyG / graphloc edge_index']:.1f}x | "
              f"{r['graphloc, new equal edge_index']:.0f} | {r['new edge_index / Graph']:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
