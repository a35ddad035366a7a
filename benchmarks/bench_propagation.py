"""The drop-ins added after the layer benchmark's table (SGConv, APPNP, GCN2Conv,
GATv2Conv) against PyG's, forward + backward, on the two benchmark graphs.

One process; graphloc's layer and PyG's (same weights) in turns, the order alternating;
times are medians, the speed-up the median of the per-turn ratios, so the machine's drift
cancels. The layers are called as PyG's, ``layer(x, edge_index)`` (GCN2Conv:
``layer(x, x_0, edge_index)``, x_0 = x), with F = 64 features.

    python benchmarks/bench_propagation.py [--turns 7] [--layers GATv2Conv ...]
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

F = 64


def step(layer, x, edge_index) -> float:
    start = time.perf_counter()
    takes_x_0 = type(layer).__name__ == "GCN2Conv"
    (layer(x, x, edge_index) if takes_x_0 else layer(x, edge_index)).sum().backward()
    return time.perf_counter() - start


def compare(ours, theirs, x, edge_index, turns: int) -> tuple[float, float, float]:
    theirs.load_state_dict(ours.state_dict())
    for _ in range(2):  # warm: the cached graph, the allocator
        step(ours, x, edge_index), step(theirs, x, edge_index)
    times = {"ours": [], "theirs": []}
    for turn in range(turns):
        pair = [("ours", ours), ("theirs", theirs)]
        for key, layer in pair if turn % 2 else pair[::-1]:
            times[key].append(step(layer, x, edge_index))
    ratio = statistics.median(t / o for o, t in zip(times["ours"], times["theirs"],
                                                    strict=True))
    return statistics.median(times["ours"]), statistics.median(times["theirs"]), ratio


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--layers", nargs="+", metavar="NAME",
                        help="only the layers whose label starts with one of these")
    args = parser.parse_args()
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    from graphloc.memory import retain_freed_memory
    retain_freed_memory()
    torch.set_num_threads(2)
    print(machine())
    print("| graph | layer | graphloc ms | PyG ms | PyG / graphloc |")
    print("|---|---|---:|---:|---:|")
    for name, make in (("road", road_like), ("power-law", power_law)):
        graph = make()
        edge_index = graph.edge_index.clone()
        x = torch.randn(graph.num_nodes, F, requires_grad=True)
        for label, ours, theirs in (
                ("APPNP(K=10, alpha=0.1)", gl.APPNP(10, 0.1), pyg.APPNP(10, 0.1)),
                ("SGConv(64, 64, K=2)", gl.SGConv(F, F, K=2), pyg.SGConv(F, F, K=2)),
                ("GCN2Conv(64, alpha=0.1, theta=0.5, layer=1)",
                 gl.GCN2Conv(F, 0.1, theta=0.5, layer=1),
                 pyg.GCN2Conv(F, 0.1, theta=0.5, layer=1)),
                ("GATv2Conv(64, 16, heads=4)", gl.GATv2Conv(F, 16, heads=4),
                 pyg.GATv2Conv(F, 16, heads=4))):
            if args.layers and not label.startswith(tuple(args.layers)):
                continue
            mine, peer, ratio = compare(ours, theirs, x, edge_index, args.turns)
            print(f"| {name} | {label} | {mine * 1e3:.0f} | {peer * 1e3:.0f} | {ratio:.1f}x |",
                  flush=True)


if __name__ == "__main__":
    main()
