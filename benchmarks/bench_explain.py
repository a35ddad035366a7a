"""PyG's tools on graphloc's convs against the same tools on PyG's convs: GNNExplainer's
epochs (the edge mask on every message) and a training step of a ``to_hetero_with_bases``
model (each message weighed by its edge type's basis coefficient).

Same model, same weights, one process; graphloc's and PyG's runs in turns (the order
rotating), and the ratio is the median of the per-turn ratios, so the machine's drift
cancels. Freed memory is retained for both alike.

    python benchmarks/bench_explain.py [--turns 5] [--epochs 10] [--graph road|power-law]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, times_in_turns  # noqa: E402
from graphs import benchmark_graph  # noqa: E402

F = 64
MODELS = {"GCNConv x2": ("GCNConv(F, F)", "GCNConv(F, 8)"),
          "SAGEConv x2": ("SAGEConv(F, F)", "SAGEConv(F, 8)"),
          "GATConv x2 (4 heads x 16, then 1 x 8)": ("GATConv(F, 16, heads=4)",
                                                  "GATConv(F, 8)")}


class Net(torch.nn.Module):
    def __init__(self, first, second):
        super().__init__()
        self.conv1, self.conv2 = first, second

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def twins(first: str, second: str):
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    torch.manual_seed(0)
    theirs = Net(*(eval(f, {**vars(pyg), "F": F}) for f in (first, second))).eval()
    ours = Net(*(eval(f, {**vars(gl), "F": F}) for f in (first, second))).eval()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def explain_seconds(model, x, edge_index, epochs: int) -> float:
    from torch_geometric.explain import Explainer
    from torch_geometric.explain.algorithm import GNNExplainer
    explainer = Explainer(model, GNNExplainer(epochs=epochs), explanation_type="model",
                          node_mask_type="attributes", edge_mask_type="object",
                          model_config=dict(mode="multiclass_classification",
                                            task_level="node", return_type="raw"))
    start = time.perf_counter()
    explainer(x, edge_index, index=torch.arange(100))
    return time.perf_counter() - start


def in_turns(calls: dict, turns: int) -> dict:
    """Medians of graphloc's and PyG's times, and the median of PyG's / graphloc's per
    turn."""
    times = times_in_turns(calls, turns)
    ratio = statistics.median(p / g for p, g in zip(times["PyG"], times["graphloc"],
                                                      strict=True))
    return {**{key: statistics.median(v) for key, v in times.items()}, "ratio": ratio}


def bases_models(num_nodes: int, num_edges: int):
    """A typed graph of three node and four edge types, and PyG's and graphloc's
    ``to_hetero_with_bases`` of linear, SAGEConv, linear (same weights)."""
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    gen = torch.Generator().manual_seed(0)
    sizes = {"a": num_nodes // 2, "b": num_nodes // 3, "c": num_nodes // 6}
    x_dict = {key: torch.randn(n, F, generator=gen) for key, n in sizes.items()}
    edge_index_dict = {
        (s, "to", d): torch.stack([torch.randint(0, sizes[s], (num_edges // 4,), generator=gen),
                                   torch.randint(0, sizes[d], (num_edges // 4,), generator=gen)])
        for s, d in [("a", "b"), ("b", "a"), ("a", "a"), ("c", "a")]}
    metadata = (list(x_dict), list(edge_index_dict))

    class Bases(torch.nn.Module):
        def __init__(self, conv):
            super().__init__()
            self.lin, self.conv = torch.nn.Linear(F, F), conv

        def forward(self, x, edge_index):
            return self.conv(self.lin(x).relu(), edge_index)

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # node type "c" is never a destination
        theirs = pyg.to_hetero_with_bases(Bases(pyg.SAGEConv(F, F)), metadata, 4)
        ours = gl.to_hetero_with_bases(Bases(gl.SAGEConv(F, F)), metadata, 4)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs, (x_dict, edge_index_dict)


def step_seconds(model, inputs) -> float:
    start = time.perf_counter()
    out = model(*inputs)
    sum(value.sum() for value in out.values()).backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--graph", choices=("road", "power-law"), default="road")
    args = parser.parse_args()
    graph = benchmark_graph(args.graph)
    edge_index = graph.edge_index.clone()
    x = torch.randn(graph.num_nodes, F, generator=torch.Generator().manual_seed(1))
    print(f"{args.graph} graph, {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, F = {F}, "
          f"GNNExplainer {args.epochs} epochs on 100 nodes, {args.turns} turns, {machine()}")
    print("| model | graphloc s | PyG s | PyG / graphloc |")
    print("|---|---:|---:|---:|")
    for name, (first, second) in MODELS.items():
        ours, theirs = twins(first, second)
        r = in_turns({"graphloc": lambda m=ours: explain_seconds(m, x, edge_index, args.epochs),
                      "PyG": lambda m=theirs: explain_seconds(m, x, edge_index, args.epochs)},
                     args.turns)
        print(f"| {name} | {r['graphloc']:.2f} | {r['PyG']:.2f} | {r['ratio']:.1f}x |",
              flush=True)
    ours, theirs, inputs = bases_models(graph.num_nodes, graph.num_edges)
    r = in_turns({"graphloc": lambda: step_seconds(ours, inputs),
                  "PyG": lambda: step_seconds(theirs, inputs)}, args.turns)
    print(f"\nto_hetero_with_bases(linear, SAGEConv), 4 bases, 3 node and 4 edge types of the "
          f"same sizes, forward + backward: graphloc {r['graphloc'] * 1e3:.0f} ms, PyG "
          f"{r['PyG'] * 1e3:.0f} ms, PyG / graphloc {r['ratio']:.1f}x")


if __name__ == "__main__":
    main()
