"""Weisfeiler-Lehman colour refinement: graphloc's WLConv against PyG's, in one process.

Three rounds on each benchmark graph from 5 random colours, each library with its own
colour dictionary; the colours are checked equal, and the table gives the median time of
the three-round refinement over a few turns (alternating which library goes first) and
their ratio, measured within each turn.

    python benchmarks/bench_wl.py [--turns 3]
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

ROUNDS = 3


def refine(conv_type, x, edge_index) -> tuple[float, torch.Tensor]:
    """Seconds for ROUNDS rounds of a fresh conv, and the last colours."""
    conv = conv_type()
    start = time.perf_counter()
    for _ in range(ROUNDS):
        x = conv(x, edge_index)
    return time.perf_counter() - start, x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    torch.set_num_threads(2)
    print(machine())
    print(f"| graph | graphloc ms ({ROUNDS} rounds) | PyG ms | PyG / graphloc | colours numbered |")
    print("|---|---:|---:|---:|---:|")
    for name, make in (("road", road_like), ("power-law", power_law)):
        graph = make()
        edge_index = graph.edge_index.clone()
        x = torch.randint(0, 5, (graph.num_nodes,), generator=torch.Generator().manual_seed(0))
        times = {"ours": [], "theirs": []}
        for turn in range(args.turns):
            pair = [("ours", gl.WLConv), ("theirs", pyg.WLConv)]
            out = {}
            for key, conv_type in pair if turn % 2 else pair[::-1]:
                seconds, out[key] = refine(conv_type, x, edge_index)
                times[key].append(seconds)
            if not torch.equal(out["ours"], out["theirs"]):
                raise SystemExit(f"{name}: the colours differ from PyG's")
        ratio = statistics.median(t / o for o, t in zip(times["ours"], times["theirs"],
                                                        strict=True))
        mine, peer = statistics.median(times["ours"]), statistics.median(times["theirs"])
        colours = int(out["ours"].max()) + 1
        print(f"| {name} | {mine * 1e3:.0f} | {peer * 1e3:.0f} | {ratio:.1f}x | {colours} |",
              flush=True)


if __name__ == "__main__":
    main()
