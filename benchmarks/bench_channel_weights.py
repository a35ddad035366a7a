"""spmm with one value per edge and channel (edge values ``[E, F]`` on rows ``[N, F, 1]``, a
continuous filter per edge as SchNet's CFConv) against the per-edge form PyG's message
passing computes (``x[src] * W`` summed into the destinations with ``scatter_add``),
forward + backward with both gradients, on the two benchmark graphs.

One process; the two forms in turns, the order alternating; medians, and the speed-up as the
median of the per-turn ratios, so the machine's drift cancels.

    python benchmarks/bench_channel_weights.py [--turns 9] [--channels 64]
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

from graphloc import ops  # noqa: E402

GRAPHS = {"road": road_like, "power-law": power_law}


def per_edge(graph, x, w):
    """PyG's messages x_j * W_e, summed into their destinations."""
    src, dst = graph.edge_index
    messages = x.index_select(0, src) * w
    index = dst.view(-1, 1).expand_as(messages)
    return torch.zeros_like(x).scatter_add(0, index, messages)


def fused(graph, x, w):
    return ops.spmm(graph, x.unsqueeze(-1), w).squeeze(-1)


def step(form, graph, x, w) -> float:
    start = time.perf_counter()
    form(graph, x, w).sum().backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument("--channels", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(machine())
    print("| graph | F | graphloc spmm ms | per-edge form ms | per-edge / graphloc |")
    print("|---|---:|---:|---:|---:|")
    for name, make in GRAPHS.items():
        graph = make()
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(graph.num_nodes, args.channels, generator=gen, requires_grad=True)
        w = torch.randn(graph.num_edges, args.channels, generator=gen, requires_grad=True)
        forms = {"fused": fused, "per_edge": per_edge}
        for form in forms.values():  # warm: the graph's caches, the allocator
            step(form, graph, x, w)
        times = {key: [] for key in forms}
        for turn in range(args.turns):
            order = list(forms.items())
            for key, form in order if turn % 2 else order[::-1]:
                times[key].append(step(form, graph, x, w))
        ratio = statistics.median(p / f for f, p in zip(times["fused"], times["per_edge"],
                                                         strict=True))
        print(f"| {name} | {args.channels} | {statistics.median(times['fused']) * 1e3:.0f} | "
              f"{statistics.median(times['per_edge']) * 1e3:.0f} | {ratio:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
