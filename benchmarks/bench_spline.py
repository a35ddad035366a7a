"""SplineConv: graphloc's against PyG's on the benchmark graphs, in one process.

PyG 2.8 takes its spline kernels from pyg-lib, which does not install here. pyg-lib's CPU
kernels are torch_spline_conv's, ported, and PyG up to 2.6 called torch_spline_conv; so
PyG's SplineConv runs here with its module's ``spline_basis`` and ``spline_weighting``
taken from torch_spline_conv (``pip install --no-build-isolation torch-spline-conv``),
which this benchmark needs. Outputs are checked equal; forward + backward (features,
pseudo-coordinates, weights), median of a few turns, the order alternating.

    python benchmarks/bench_spline.py [--turns 3] [--graphs road power-law] [--memory]

``--memory`` gives each library's peak resident memory for one forward + backward above
its inputs, each in a fresh process, instead of the times.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine  # noqa: E402
from graphs import power_law, road_like  # noqa: E402

CONFIGS = [  # (in, out, dim, kernel_size, degree)
    (64, 64, 2, 5, 1),
    (16, 64, 3, 5, 1),
    (64, 16, 2, 4, 2),
]


def step_ms(conv, x, edge_index, pseudo, turns: int) -> tuple[float, torch.Tensor]:
    leaves = [x.clone().requires_grad_(), pseudo.clone().requires_grad_()]
    times, out = [], None
    for _ in range(turns):
        start = time.perf_counter()
        out = conv(leaves[0], edge_index, leaves[1])
        out.square().mean().backward()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times), out.detach()


def pygs_with_torch_spline_conv():
    """PyG's nn module, its SplineConv's kernels taken from torch_spline_conv."""
    import torch_geometric.nn as pyg
    import torch_geometric.nn.conv.spline_conv as pygs_module
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch_spline_conv
    pygs_module.spline_basis = torch_spline_conv.spline_basis
    pygs_module.spline_weighting = torch_spline_conv.spline_weighting
    warnings.filterwarnings("ignore", ".*non-optimized CPU version.*")
    return pyg


def peak_mb(library: str, graph_name: str, config: tuple) -> float:
    """One forward + backward in this process: the peak resident memory above the inputs."""
    import graphloc.nn as gl
    module = gl if library == "graphloc" else pygs_with_torch_spline_conv()
    graph = (road_like if graph_name == "road" else power_law)()
    edge_index = graph.edge_index.clone()
    width_in, width_out, dim, kernel, degree = config
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(graph.num_nodes, width_in, generator=gen, requires_grad=True)
    pseudo = torch.rand(edge_index.size(1), dim, generator=gen, requires_grad=True)
    conv = module.SplineConv(width_in, width_out, dim, kernel, degree=degree)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    conv(x, edge_index, pseudo).square().mean().backward()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def memory_table(graphs: list) -> None:
    print("| graph | SplineConv(in, out, dim, kernel, degree) | graphloc peak MB | PyG peak MB | "
          "PyG / graphloc |")
    print("|---|---|---:|---:|---:|")
    for name in graphs:
        for config in CONFIGS:
            peaks = []
            for library in ("graphloc", "pyg"):
                code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
                        f"from bench_spline import peak_mb; "
                        f"print(peak_mb({library!r}, {name!r}, {config!r}))")
                run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                     text=True, check=True)
                peaks.append(float(run.stdout.split()[-1]))
            print(f"| {name} | {config} | {peaks[0]:,.0f} | {peaks[1]:,.0f} | "
                  f"{peaks[1] / peaks[0]:.1f}x |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--graphs", nargs="+", default=["road", "power-law"])
    parser.add_argument("--memory", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    if args.memory:
        print(machine())
        memory_table(args.graphs)
        return
    pyg = pygs_with_torch_spline_conv()

    import graphloc.nn as gl
    print(machine())
    print("| graph | SplineConv(in, out, dim, kernel, degree) | graphloc ms | PyG ms | "
          "PyG / graphloc |")
    print("|---|---|---:|---:|---:|")
    for name, make in (("road", road_like), ("power-law", power_law)):
        if name not in args.graphs:
            continue
        graph = make()
        edge_index = graph.edge_index.clone()
        gen = torch.Generator().manual_seed(0)
        for width_in, width_out, dim, kernel, degree in CONFIGS:
            x = torch.randn(graph.num_nodes, width_in, generator=gen)
            pseudo = torch.rand(edge_index.size(1), dim, generator=gen)
            convs = {}
            for key, module in (("ours", gl), ("theirs", pyg)):
                torch.manual_seed(0)
                convs[key] = module.SplineConv(width_in, width_out, dim, kernel, degree=degree)
            times, outs = {"ours": [], "theirs": []}, {}
            for turn in range(2):
                order = ("ours", "theirs") if turn % 2 else ("theirs", "ours")
                for key in order:
                    ms, outs[key] = step_ms(convs[key], x, edge_index, pseudo, args.turns)
                    times[key].append(ms)
            torch.testing.assert_close(outs["ours"], outs["theirs"], atol=1e-4, rtol=1e-4)
            ours, theirs = min(times["ours"]), min(times["theirs"])
            print(f"| {name} | ({width_in}, {width_out}, {dim}, {kernel}, {degree}) | "
                  f"{ours:,.0f} | {theirs:,.0f} | {theirs / ours:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
