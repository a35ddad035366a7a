"""UGT's preprocessing (``graphloc.nn.models.ugt.ugt_inputs``) on the 200,000-node road
graph: the time of each step, in one process.

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
    lines = ["| step | s |", "|---|---:|", *rows, f"| all of `ugt_inputs` | {total:.1f} |"]
    publish(f"\n## {header}\n\n" + "\n".join(lines) + "\n", args.write)


if __name__ == "__main__":
    main()
