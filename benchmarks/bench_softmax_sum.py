"""The softmax aggregation alone: ``ops.softmax_sum`` (one CPU kernel), the composed path
it replaced on the CPU (the gathered ``[E, F]`` rows scaled, then ``segment_attention``
with one head per channel, still the path of other devices) and PyG's
``SoftmaxAggregation`` on the gathered rows, F = 64, a learnt temperature per channel.

One process; the three in turns; times are medians of the turns after the first.

    python benchmarks/bench_softmax_sum.py [--turns 5]
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


def _composed(graph, x, t):
    from graphloc import ops
    scores = x.index_select(0, graph.edge_index[0]) * t
    return ops.segment_attention(graph, scores, x.unsqueeze(-1)).squeeze(-1)


def _timed(run, params, backward: bool) -> float:
    start = time.perf_counter()
    if backward:
        out = run()
        torch.autograd.grad(out, params, torch.ones_like(out))
    else:
        with torch.no_grad():
            run()
    return time.perf_counter() - start


def _rows(name: str, graph, turns: int) -> None:
    """The table's rows of one graph: forward, then forward + backward."""
    import torch_geometric.nn.aggr as pyg_aggr

    from graphloc import ops
    src, dst = graph.edge_index
    x = torch.randn(graph.num_nodes, F, requires_grad=True)
    t = torch.ones(F, requires_grad=True)
    theirs = pyg_aggr.SoftmaxAggregation(learn=True, channels=F)
    runs = {"kernel": (lambda: ops.softmax_sum(graph, x, t), [x, t]),
            "composed": (lambda: _composed(graph, x, t), [x, t]),
            "pyg": (lambda: theirs(x[src], dst, dim_size=graph.num_nodes),
                    [x, *theirs.parameters()])}
    for label, backward in (("forward", False), ("forward + backward", True)):
        times = {key: [] for key in runs}
        for _ in range(turns):
            for key, (run, params) in runs.items():
                times[key].append(_timed(run, params, backward))
        ms = {key: statistics.median(v[1:]) * 1e3 for key, v in times.items()}
        print(f"| {name} | {label} | {ms['kernel']:.0f} | {ms['composed']:.0f} | "
              f"{ms['pyg']:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(machine())
    print("| graph | pass | softmax_sum ms | composed ms | PyG ms |")
    print("|---|---|---:|---:|---:|")
    for name, make in (("road", road_like), ("power-law", power_law)):
        _rows(name, make(), args.turns)


if __name__ == "__main__":
    main()
