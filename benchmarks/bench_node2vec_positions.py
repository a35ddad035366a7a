"""LargeGT's node2vec positions: the official scripts' epoch (``Node2Vec.loss`` and torch's
``SparseAdam``, as ``data/pos_enc/*_node2vec.py`` run it) against graphloc's fused epoch
(``node2vec_encoding``: one sddmm over the window pairs, SparseAdam's step on the rows
looked up), in one process, the order alternating each turn; the same seed, so both train
the same embedding (the largest difference is printed).

    python benchmarks/bench_node2vec_positions.py [--nodes 20000] [--dim 64] [--turns 2]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402
from graphs import road_like  # noqa: E402

from graphloc.datasets import CityNetwork  # noqa: E402
from graphloc.nn.models.largegt import node2vec_encoding  # noqa: E402
from graphloc.nn.models.node2vec import Node2Vec  # noqa: E402


def scripts_epoch(graph, dim: int, seed: int) -> torch.Tensor:
    """The official loop, on graphloc's Node2Vec (PyG's needs pyg-lib)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Node2Vec(graph.edge_index, dim, walk_length=40, context_size=20,
                         walks_per_node=10, num_nodes=graph.num_nodes, sparse=True)
        optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)
        for positive, negative in model.loader(batch_size=256, shuffle=True):
            optimizer.zero_grad()
            model.loss(positive, negative).backward()
            optimizer.step()
    return model.embedding.weight.detach()


def timed(run) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def compare(graph, dim: int, turns: int) -> dict:
    runs = {"scripts' loop": lambda: scripts_epoch(graph, dim, 0),
            "fused": lambda: node2vec_encoding(graph, dim, 0)}
    times, outputs = {key: [] for key in runs}, {}
    keys = list(runs)
    for turn in range(turns):
        for key in keys[turn % 2:] + keys[:turn % 2]:
            seconds, outputs[key] = timed(runs[key])
            times[key].append(seconds)
    loop, fused = (statistics.median(times[key]) for key in keys)
    difference = (outputs["scripts' loop"] - outputs["fused"]).abs().max().item()
    return {"loop": loop, "fused": fused, "difference": difference}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=20_000, help="road-like graph size")
    parser.add_argument("--dim", type=int, default=64, help="LargeGT's global_dim")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--root", default="data", help="where the Helsinki sample is built")
    parser.add_argument("--write", metavar="PATH", help="append the table to this file")
    args = parser.parse_args(argv)
    graphs = {"Helsinki (bundled)": CityNetwork(args.root, "helsinki").graph,
              f"road-like, {args.nodes:,} nodes": road_like(args.nodes)}
    lines = [f"\n## LargeGT's node2vec positions, {datetime.date.today().isoformat()}, "
             f"{machine()}\n",
             f"`python benchmarks/bench_node2vec_positions.py --nodes {args.nodes} --dim "
             f"{args.dim} --turns {args.turns}` (one epoch each, median of the turns):\n",
             "| graph | nodes | edges | scripts' loop s | fused s | speed-up | max abs "
             "difference |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, graph in graphs.items():
        res = compare(graph, args.dim, args.turns)
        lines.append(f"| {name} | {graph.num_nodes:,} | {graph.num_edges:,} | "
                     f"{res['loop']:.1f} | {res['fused']:.1f} | "
                     f"{res['loop'] / res['fused']:.1f}x | {res['difference']:.1e} |")
        print(lines[-1], flush=True)
    publish("\n".join(lines) + "\n", args.write)


if __name__ == "__main__":
    main()
