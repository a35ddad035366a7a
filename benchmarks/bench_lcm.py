"""LCM aggregation: graphloc's unpadded tree against PyG's padded one, time and peak memory.

Each measurement runs in its own process (forward and backward of the aggregation alone,
F channels, edges sorted by destination), so its peak resident memory is its own: the
table gives the peak above the process's footprint once the inputs are built. PyG pads
every neighbourhood to the largest degree (N x max-degree x F floats per tree level);
graphloc keeps only the entries the neighbours reach. Where PyG cannot allocate, the
table says so.

    python benchmarks/bench_lcm.py [--channels 32] [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402
from graphs import power_law, road_like  # noqa: E402

GRAPHS = {"road": lambda: road_like(200_000), "power-law": power_law}
METHODS = ("graphloc padded (PyG's numbers)", "graphloc unpadded", "PyG LCMAggregation")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure_one(graph_name: str, method: str, channels: int) -> dict:
    """Forward + backward once, in this process (whose peak memory is measured)."""
    from graphloc import Graph
    from graphloc.nn.aggr import LCMAggregation

    torch.manual_seed(0)
    built = GRAPHS[graph_name]()
    order = built.csr.perm.long() if built.csr.perm is not None else slice(None)
    graph = Graph(built.edge_index[:, order], num_nodes=built.num_nodes)  # sorted by dst
    x = torch.randn(graph.num_nodes, channels, requires_grad=True)
    ours = LCMAggregation(channels, channels, project=False,
                          padded=not method.startswith("graphloc unpadded"))
    if method.startswith("PyG"):
        from torch_geometric.nn import LCMAggregation as PygLCM

        theirs = PygLCM(channels, channels, project=False)
        src, dst = graph.edge_index
        run = lambda: theirs(x[src], dst, dim_size=graph.num_nodes)  # noqa: E731
    else:
        run = lambda: ours(graph, x)  # noqa: E731
    base = peak_rss_mb()
    try:
        start = time.perf_counter()
        run().sum().backward()
        seconds = time.perf_counter() - start
    except (RuntimeError, MemoryError) as err:  # PyG's padded batch may not fit
        asked = re.search(r"allocate (\d+) bytes", str(err))
        return {"error": f"out of memory: it asked for {int(asked.group(1)) / 1e9:.1f} GB"
                if asked else str(err).split("\n")[0][:120]}
    return {"seconds": seconds, "peak_mb": peak_rss_mb() - base}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--write", metavar="PATH")
    parser.add_argument("--one", nargs=2, metavar=("GRAPH", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(*args.one, args.channels)))
        return
    lines = ["| graph | method | forward + backward s | peak memory above inputs |",
             "|---|---|---:|---:|"]
    for graph_name in GRAPHS:
        for method in METHODS:
            out = subprocess.run([sys.executable, __file__, "--channels", str(args.channels),
                                  "--one", graph_name, method], capture_output=True, text=True)
            result = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 \
                else {"error": f"process ended with {out.returncode} (killed: out of memory)"}
            cells = ("n/a", result["error"]) if "error" in result else \
                (f"{result['seconds']:.2f}", f"{result['peak_mb']:,.0f} MB")
            lines.append(f"| {graph_name} | {method} | {cells[0]} | {cells[1]} |")
            print("  " + lines[-1], flush=True)
    header = (f"LCM aggregation (`benchmarks/bench_lcm.py`, F = {args.channels}), "
              f"{datetime.date.today()}, {machine()}")
    publish(f"\n## {header}\n\n" + "\n".join(lines) + "\n", args.write)


if __name__ == "__main__":
    main()
