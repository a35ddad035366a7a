"""UGT's preprocessing (``graphloc.nn.models.ugt.ugt_inputs``) on the 200,000-node road
graph: the time of each step, in one process; then its pre-training: the targets of the
official loss over all node pairs, and one pre-training step (median of three after a
first one).

    python benchmarks/bench_ugt.py [--nodes 200000] [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402
from graphs import road_like  # noqa: E402

from graphloc.nn.models import ugt  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    graph = road_like(args.nodes)
    rows, results = [], {}

    def step(name, fn):
        start = time.perf_counter()
        results[name] = fn()
        rows.append(f"| {name} | {time.perf_counter() - start:.1f} |")
        print("  " + rows[-1], flush=True)

    step("simple undirected graph", lambda: ugt._simple_undirected(graph))
    simple = results["simple undirected graph"]
    step("structural vectors I (k = 1)", lambda: ugt.structural_vectors(simple, 1))
    structure = results["structural vectors I (k = 1)"]
    step("virtual edges (10% of the edge count, window 8)",
         lambda: ugt.virtual_edges(simple, structure, int(0.1 * graph.num_edges), 8))
    virtual = results["virtual edges (10% of the edge count, window 8)"]
    step("attention graph", lambda: ugt._attention_graph(simple, virtual, 1))
    src, dst = results["attention graph"].edge_index
    step("transitions P^1..P^8 at the attention edges", lambda: ugt.transitions(simple, src, dst))
    step("10 Laplacian eigenvectors", lambda: ugt.laplacian_eigenvectors(simple, 10))
    start = time.perf_counter()
    inputs = ugt.ugt_inputs(graph)
    total = time.perf_counter() - start
    header = (f"UGT preprocessing (`benchmarks/bench_ugt.py`, road-like graph, "
              f"{graph.num_nodes:,} nodes, {graph.num_edges:,} edges; attention graph "
              f"{inputs.attention.num_edges:,} edges with {inputs.virtual.size(1):,} virtual), "
              f"{datetime.date.today()}, {machine()}")
    rows.append(f"| all of `ugt_inputs` | {total:.1f} |")
    step("pre-training targets (t = 1..6: the pairs within 6 hops)",
         lambda: ugt.pretraining_targets(simple, 6))
    pairs = results["pre-training targets (t = 1..6: the pairs within 6 hops)"].weight.numel()
    rows[-1] = rows[-1].replace("6 hops)", f"6 hops, {pairs:,} of them)")
    rows.append(f"| one pre-training step (16 features, hidden 16, forward + backward) | "
                f"{_pretraining_step_seconds(graph):.2f} |")
    lines = ["| step | s |", "|---|---:|", *rows]
    publish(f"\n## {header}\n\n" + "\n".join(lines) + "\n", args.write)


def _pretraining_step_seconds(graph) -> float:
    """The median time of three ``pretrain_loss`` forward + backward steps after a first
    one (which builds the inputs and targets, cached on the graph)."""
    import torch
    torch.manual_seed(0)
    model = ugt.UGT(16, 16, 5).train()
    x = torch.randn(graph.num_nodes, 16)
    model.pretrain_loss(x, graph).backward()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        model.pretrain_loss(x, graph).backward()
        times.append(time.perf_counter() - start)
    return sorted(times)[1]


if __name__ == "__main__":
    main()
