"""Engine benchmark: graphloc's spmm against torch's sparse and scatter paths, in one run.

Prints a markdown table (median ms over repetitions in alternating blocks, speed-up of graphloc over
each peer, effective bandwidth) and, with --write, records it in benchmarks/RESULTS.md with
the date and machine. Effective bandwidth = (index bytes + N*F read + N*F written) / time,
shown next to the copy bandwidth of an N*F tensor measured in the same run.

    python benchmarks/bench_ops.py            # full: 3 graphs x F in {16, 64, 256}
    python benchmarks/bench_ops.py --quick    # road graph at F=64 (the demo)
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
from graphs import power_law, road_like  # noqa: E402

import graphloc  # noqa: E402
from graphloc import ops  # noqa: E402

warnings.filterwarnings("ignore", message=".*Sparse.*")
HAS_TORCH_SCATTER = importlib.util.find_spec("torch_scatter") is not None


def blocked_medians(fns: dict, reps: int, budget_s: float, rounds: int = 3) -> dict:
    """Median milliseconds of each function. Methods alternate in blocks (a warm-up call,
    then a few timed ones) over several rounds: alternation spreads machine noise over all
    methods, blocks keep one method's allocations from disturbing the next one's timing."""
    times = {name: [] for name in fns}
    per_block = max(1, reps // rounds)
    start = time.perf_counter()
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            for _ in range(per_block):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
        if time.perf_counter() - start > budget_s:
            break
    return {name: 1e3 * statistics.median(ts) for name, ts in times.items()}


def copy_bandwidth(num_nodes: int, channels: int) -> float:
    x = torch.randn(num_nodes, channels)
    y = torch.empty_like(x)
    ms = blocked_medians({"copy": lambda: y.copy_(x)}, reps=20, budget_s=2)["copy"]
    return 2 * x.numel() * 4 / ms / 1e6  # GB/s


def sum_peers(graph, x):
    csr = graph.csr
    adj = torch.sparse_csr_tensor(csr.indptr.long(), csr.indices.long(),
                                  torch.ones(graph.num_edges), (graph.num_nodes,) * 2)
    src, dst = graph.edge_index
    peers = {
        "graphloc": lambda: ops.spmm(graph, x),
        "torch.sparse.mm": lambda: torch.sparse.mm(adj, x, "sum"),
        "index_select+index_add_": lambda: torch.zeros_like(x).index_add_(
            0, dst, x.index_select(0, src)),
    }
    if HAS_TORCH_SCATTER:
        import torch_scatter

        peers["torch_scatter"] = lambda: torch_scatter.scatter(
            x.index_select(0, src), dst, 0, dim_size=graph.num_nodes, reduce="sum")
    return peers


def max_fwd_bwd_peers(graph, x):
    src, dst = graph.edge_index
    grad = torch.randn_like(x)
    xg = x.detach().requires_grad_()

    def ours():
        torch.autograd.grad(ops.spmm(graph, xg, reduce="max"), xg, grad)

    def scatter_reduce():
        msgs = xg.index_select(0, src)
        out = x.new_zeros(x.shape).scatter_reduce(
            0, dst.view(-1, 1).expand_as(msgs), msgs, "amax", include_self=False)
        torch.autograd.grad(out, xg, grad)

    peers = {"graphloc": ours, "index_select+scatter_reduce_(amax)": scatter_reduce}
    if HAS_TORCH_SCATTER:
        import torch_scatter

        def ts():
            out = torch_scatter.scatter_max(xg.index_select(0, src), dst, 0,
                                            dim_size=graph.num_nodes)[0]
            torch.autograd.grad(out, xg, grad)
        peers["torch_scatter"] = ts
    return peers


def run(graphs: dict, channel_list, reps: int) -> list[dict]:
    rows = []
    for gname, graph in graphs.items():
        index_bytes = 4 * (graph.num_nodes + 1 + graph.num_edges)
        for channels in channel_list:
            x = torch.randn(graph.num_nodes, channels)
            bytes_moved = index_bytes + 2 * 4 * graph.num_nodes * channels
            copy_gbs = copy_bandwidth(graph.num_nodes, channels)
            for op, peers in (("sum", sum_peers(graph, x)),
                              ("max fwd+bwd", max_fwd_bwd_peers(graph, x))):
                ms = blocked_medians(peers, reps, budget_s=20)
                for name, t in ms.items():
                    rows.append(dict(graph=gname, F=channels, op=op, method=name, ms=t,
                                     speedup=t / ms["graphloc"],
                                     gbs=bytes_moved / t / 1e6, copy_gbs=copy_gbs))
                print(f"  {gname:>14} F={channels:<4} {op:<12} " + "  ".join(
                    f"{n}={t:.1f}ms" for n, t in ms.items()), flush=True)
    return rows


def table(rows) -> str:
    lines = ["| graph | F | op | method | ms | graphloc speed-up | effective GB/s | % of copy |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['F']} | {r['op']} | {r['method']} | {r['ms']:.2f} | "
                     f"{r['speedup']:.2f}x | {r['gbs']:.1f} | "
                     f"{100 * r['gbs'] / r['copy_gbs']:.0f}% |")
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"{cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
            f"graphloc {graphloc.__version__} (extension: {graphloc.HAS_EXTENSION}), "
            f"torch_scatter: {'yes' if HAS_TORCH_SCATTER else 'not installed'}")


def times_in_turns(calls: dict, turns: int) -> dict[str, list[float]]:
    """Each call's returned times over ``turns`` turns, every call once per turn and the
    order rotating (after one warm call each: caches, allocator), so the machine's drift
    reaches every call alike."""
    for call in calls.values():
        call()
    times = {key: [] for key in calls}
    keys = list(calls)
    for turn in range(turns):
        for key in keys[turn % len(keys):] + keys[:turn % len(keys)]:
            times[key].append(calls[key]())
    return times


def publish(text: str, path: str | None) -> None:
    """Prints a result section and, with a path, appends it to that markdown file."""
    print(text)
    if path:
        with open(path, "a") as f:
            f.write(text)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="road graph at F=64 only")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--write", metavar="PATH", help="append the table to this markdown file")
    args = parser.parse_args(argv)

    print("building graphs ...", flush=True)
    road = road_like(200_000)
    graphs = {"road": road, "road (RCM)": road.reorder("rcm")[0]}
    if not args.quick:
        graphs["power-law"] = power_law()
    for name, g in graphs.items():
        print(f"  {name}: {g.num_nodes} nodes, {g.num_edges} edges", flush=True)
    rows = run(graphs, [64] if args.quick else [16, 64, 256], args.reps)
    header = f"{datetime.date.today().isoformat()}, {machine()}"
    print(f"\n{header}\n\n{table(rows)}")
    if args.write:
        with open(args.write, "a") as f:
            f.write(f"\n## CPU ops, {header}\n\n{table(rows)}\n")


if __name__ == "__main__":
    main()
