"""The torch_scatter API of graphloc.scatter against torch's own scatter ops, in one run.

Per case: graphloc.scatter's function and torch's equivalent (``scatter_reduce`` /
``index_add_`` on the same inputs; torch_scatter too when installed), median ms over
alternating blocks, and graphloc's speed-up (max/min compute the argmax too, which
torch's scatter_reduce does not). The cases cover what the drop-in added: the
dtypes torch_scatter takes, a broadcast N-D index, N-D indptr, products, logsumexp and the
two softmaxes (forward; the softmax with its backward too).

    python benchmarks/bench_scatter.py [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import HAS_TORCH_SCATTER, blocked_medians, machine, publish  # noqa: E402
from graphs import road_like  # noqa: E402

import graphloc.scatter as gs  # noqa: E402


def torch_scatter_like(src, index, dim_size, reduce):
    """torch's scatter_reduce with torch_scatter's empty-group convention (0)."""
    shape = list(src.shape)
    shape[0] = dim_size
    idx = index.view(-1, *[1] * (src.dim() - 1)).expand_as(src)
    return src.new_zeros(shape).scatter_reduce(0, idx, src, reduce, include_self=False)


def cases(num_edges: int, num_nodes: int, channels: int):
    """(name, graphloc call, {peer: call}) for each case, on E messages into N nodes."""
    gen = torch.Generator().manual_seed(0)
    index = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    x = torch.randn(num_edges, channels, generator=gen)
    ints = torch.randint(-100, 100, (num_edges, channels), generator=gen)
    half = x.half()
    batched = torch.randn(4, num_edges // 4, channels, generator=gen)
    bindex = torch.randint(0, num_nodes // 4, (4, num_edges // 4), generator=gen)
    sorted_index = index.sort().values
    indptr = torch.ops.graphloc.coo_to_csr(sorted_index, num_nodes)[0].long()
    out = [
        ("sum float32", lambda: gs.scatter(x, index, 0, dim_size=num_nodes),
         {"torch index_add_": lambda: x.new_zeros(num_nodes, channels).index_add_(0, index, x)}),
        ("max float32", lambda: gs.scatter_max(x, index, 0, dim_size=num_nodes),
         {"torch scatter_reduce": lambda: torch_scatter_like(x, index, num_nodes, "amax")}),
        ("sum int64", lambda: gs.scatter(ints, index, 0, dim_size=num_nodes),
         {"torch index_add_": lambda: ints.new_zeros(num_nodes, channels).index_add_(
             0, index, ints)}),
        ("sum float16", lambda: gs.scatter(half, index, 0, dim_size=num_nodes),
         {"torch index_add_": lambda: half.new_zeros(num_nodes, channels).index_add_(
             0, index, half)}),
        ("mul float32", lambda: gs.scatter_mul(x, index, 0, dim_size=num_nodes),
         {"torch scatter_reduce": lambda: torch.ones(num_nodes, channels).scatter_reduce(
             0, index.view(-1, 1).expand_as(x), x, "prod")}),
        ("sum, [4, E/4] index along dim 1",
         lambda: gs.scatter(batched, bindex, 1, dim_size=num_nodes // 4),
         {"torch scatter_reduce": lambda: batched.new_zeros(4, num_nodes // 4, channels)
          .scatter_reduce(1, bindex.unsqueeze(-1).expand_as(batched), batched, "sum",
                          include_self=False)}),
        ("segment_csr mean", lambda: gs.segment_csr(x, indptr, reduce="mean"),
         {"torch segment_reduce": lambda: torch.segment_reduce(
             x, "mean", offsets=indptr, unsafe=True)}),
        ("scatter_logsumexp", lambda: gs.scatter_logsumexp(x, index, 0, dim_size=num_nodes),
         {"torch (max, exp, index_add_, log)": lambda: logsumexp_torch(x, index, num_nodes)}),
        ("scatter_softmax", lambda: gs.scatter_softmax(x, index, 0, dim_size=num_nodes),
         {"torch (max, exp, index_add_, div)": lambda: softmax_torch(x, index, num_nodes)}),
        ("scatter_log_softmax", lambda: gs.scatter_log_softmax(x, index, 0, dim_size=num_nodes),
         {"torch (max, exp, index_add_, log)": lambda: softmax_torch(x, index, num_nodes,
                                                                    log=True)}),
        ("scatter_softmax forward + backward",
         lambda: with_backward(gs.scatter_softmax, x, index, num_nodes),
         {"torch (max, exp, index_add_, div)": lambda: with_backward(
             lambda src, idx, _, dim_size: softmax_torch(src, idx, dim_size), x, index,
             num_nodes)}),
    ]
    if HAS_TORCH_SCATTER:
        import torch_scatter

        for name, _, peers in out:
            if name == "sum float32":
                peers["torch_scatter"] = lambda: torch_scatter.scatter(
                    x, index, 0, dim_size=num_nodes)
            if name == "max float32":
                peers["torch_scatter"] = lambda: torch_scatter.scatter_max(
                    x, index, 0, dim_size=num_nodes)
            if name in ("scatter_logsumexp", "scatter_softmax", "scatter_log_softmax"):
                composite = getattr(torch_scatter, name)
                peers["torch_scatter"] = lambda fn=composite: fn(x, index, 0, dim_size=num_nodes)
            if name == "scatter_softmax forward + backward":
                peers["torch_scatter"] = lambda: with_backward(torch_scatter.scatter_softmax, x,
                                                               index, num_nodes)
    return out


def logsumexp_torch(x, index, num_nodes):
    group_max = torch_scatter_like(x, index, num_nodes, "amax")
    shifted = (x - group_max[index]).exp()
    total = x.new_zeros(num_nodes, x.size(1)).index_add_(0, index, shifted)
    return total.log() + group_max


def with_backward(fn, x, index, num_nodes):
    """fn's forward and the gradient of src, for a fixed upstream gradient."""
    src = x.detach().requires_grad_()
    out = fn(src, index, 0, dim_size=num_nodes)
    torch.autograd.grad(out, src, torch.ones_like(out))


def softmax_torch(x, index, num_nodes, log=False):
    group_max = torch_scatter_like(x, index, num_nodes, "amax")
    shifted = x - group_max[index]
    exp = shifted.exp()
    total = x.new_zeros(num_nodes, x.size(1)).index_add_(0, index, exp)
    return shifted - total.log()[index] if log else exp / total[index]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--write", metavar="PATH", help="append the table to this markdown file")
    args = parser.parse_args(argv)
    graph = road_like(200_000)
    num_edges, num_nodes, channels = graph.num_edges, graph.num_nodes, 64
    lines = ["| case | method | ms | graphloc speed-up |", "|---|---|---:|---:|"]
    all_cases = cases(num_edges, num_nodes, channels)
    # Warm-up of every method first: glibc's mmap threshold adapts over the first large
    # frees, and until then each fresh [N, F] output pays its page faults (3x-6x measured).
    for _, ours, peers in all_cases:
        for fn in (ours, *peers.values(), ours, *peers.values()):
            fn()
    for name, ours, peers in all_cases:
        ms = blocked_medians({"graphloc.scatter": ours, **peers}, args.reps, budget_s=20)
        for method, t in ms.items():
            lines.append(f"| {name} | {method} | {t:.2f} | {t / ms['graphloc.scatter']:.2f}x |")
        print("  " + name + ": " + "  ".join(f"{m}={t:.1f}ms" for m, t in ms.items()),
              flush=True)
    header = (f"torch_scatter API (`benchmarks/bench_scatter.py`, E = {num_edges:,} messages "
              f"into N = {num_nodes:,} rows, F = {channels}), {datetime.date.today()}, "
              f"{machine()}")
    publish(f"\n## {header}\n\n" + "\n".join(lines) + "\n", args.write)


if __name__ == "__main__":
    main()
