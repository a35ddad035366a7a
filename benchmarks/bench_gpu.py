"""GPU benchmark: graphloc's CUDA ops and layers against torch and PyG, in one run.

Time is the median of CUDA-synchronised calls after warm-up; memory is the peak of
torch's CUDA allocator during one call, above what was allocated before it (graphloc's
cached layouts are built in the warm-up, as in training). Prints markdown tables; with
--write, appends them to a file with the date and GPU.

    python benchmarks/bench_gpu.py [--nodes 2000000] [--write benchmarks/RESULTS.md]
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
from bench_layers import LAYERS, F, mlp  # noqa: E402
from bench_ops import publish  # noqa: E402
from graphs import power_law, road_like  # noqa: E402

import graphloc  # noqa: E402
from graphloc import Graph, ops  # noqa: E402

DEVICE = "cuda"


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def cuda_median_ms(fn, reps: int) -> float:
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def peak_mb(fn) -> float:
    if DEVICE != "cuda":
        return float("nan")
    fn()  # caches, allocator warm-up
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def op_peers(graph: Graph, x: torch.Tensor) -> dict:
    """(op name, {method: fn}) pairs: graphloc first, then what a torch/PyG user would run."""
    from torch_geometric.utils import softmax as pyg_softmax

    src, dst = graph.edge_index
    csr = torch.sparse_csr_tensor(graph.csr.indptr.long(), graph.csr.indices.long(),
                                  torch.ones(graph.num_edges, device=x.device),
                                  (graph.num_nodes, graph.num_nodes))
    xg = x.detach().requires_grad_()
    grad = torch.randn_like(x)
    H, C = 4, F // 4
    score = torch.randn(graph.num_edges, H, device=x.device, requires_grad=True)
    xh = x.view(-1, H, C).detach().requires_grad_()
    gh = torch.randn_like(xh)

    def attention_pyg():
        alpha = pyg_softmax(score, dst, num_nodes=graph.num_nodes)
        out = torch.zeros_like(xh).index_add_(0, dst, xh[src] * alpha.unsqueeze(-1))
        torch.autograd.grad(out, (score, xh), gh)

    def max_scatter():
        out = torch.zeros_like(xg).scatter_reduce(
            0, dst.view(-1, 1).expand(-1, F), xg.index_select(0, src), "amax", include_self=False)
        torch.autograd.grad(out, xg, grad)

    def with_backend(backend, fn):
        def run():
            previous = ops.set_spmm_backend(backend)
            try:
                return fn()
            finally:
                ops.set_spmm_backend(previous)
        return run

    def spmm_step():
        return torch.autograd.grad(ops.spmm(graph, xg), xg, grad)

    # "graphloc" is ops.spmm as shipped (auto: cuSPARSE for sum on CUDA); "graphloc kernel"
    # forces graphloc's own CUDA kernel, whose ratio to cuSPARSE decides the auto rule
    no_features = x[:, :0]  # the argument checks alone: the kernel returns at once
    return {
        "argument checks (F=0)": {
            "graphloc": with_backend("graphloc", lambda: ops.spmm(graph, no_features)),
        },
        "spmm sum": {
            "graphloc": lambda: ops.spmm(graph, x),
            "graphloc kernel": with_backend("graphloc", lambda: ops.spmm(graph, x)),
            "torch.sparse (cuSPARSE)": lambda: torch.sparse.mm(csr, x),
            "index_add_": lambda: torch.zeros_like(x).index_add_(0, dst, x.index_select(0, src)),
        },
        "spmm sum fwd+bwd": {
            "graphloc": spmm_step,
            "graphloc kernel": with_backend("graphloc", spmm_step),
        },
        "spmm max fwd+bwd": {
            "graphloc": lambda: torch.autograd.grad(ops.spmm(graph, xg, reduce="max"), xg, grad),
            "scatter_reduce": max_scatter,
        },
        "attention fwd+bwd (4x16)": {
            "graphloc": lambda: torch.autograd.grad(ops.segment_attention(graph, score, xh),
                                                    (score, xh), gh),
            "PyG softmax + messages": attention_pyg,
        },
    }


def bench_ops(graphs: dict, reps: int) -> list[str]:
    lines = ["| graph | op (F=64) | method | ms | graphloc speed-up | peak MB |",
             "|---|---|---|---:|---:|---:|"]
    for gname, graph in graphs.items():
        x = torch.randn(graph.num_nodes, F, device=DEVICE)
        for op, peers in op_peers(graph, x).items():
            ms = {name: cuda_median_ms(fn, reps) for name, fn in peers.items()}
            for name, fn in peers.items():
                lines.append(f"| {gname} | {op} | {name} | {ms[name]:.2f} | "
                             f"{ms[name] / ms['graphloc']:.1f}x | {peak_mb(fn):.0f} |")
            print(f"  {gname} {op}: " + "  ".join(f"{n}={t:.2f}ms" for n, t in ms.items()),
                  flush=True)
    return lines


SWEEP_WIDTHS = (16, 32, 64, 128, 256)


def bench_width_sweep(graphs: dict, reps: int) -> list[str]:
    """Sum spmm by feature width: graphloc's kernel against cuSPARSE (the auto rule's data)."""
    lines = ["| graph | F | graphloc kernel ms | cuSPARSE ms | kernel speed-up |",
             "|---|---:|---:|---:|---:|"]
    for gname, graph in graphs.items():
        csr = torch.sparse_csr_tensor(graph.csr.indptr.long(), graph.csr.indices.long(),
                                      torch.ones(graph.num_edges, device=DEVICE),
                                      (graph.num_nodes, graph.num_nodes))
        for width in SWEEP_WIDTHS:
            x = torch.randn(graph.num_nodes, width, device=DEVICE)
            previous = ops.set_spmm_backend("graphloc")
            try:
                ours = cuda_median_ms(lambda: ops.spmm(graph, x), reps)  # noqa: B023
            finally:
                ops.set_spmm_backend(previous)
            theirs = cuda_median_ms(lambda: torch.sparse.mm(csr, x), reps)  # noqa: B023
            lines.append(f"| {gname} | {width} | {ours:.2f} | {theirs:.2f} | "
                         f"{theirs / ours:.2f}x |")
            print("  " + lines[-1], flush=True)
    return lines


def layer_step(lib: str, layer: str, graph: Graph, x: torch.Tensor):
    import torch_geometric.nn as pyg_nn

    import graphloc.nn as gl_nn
    torch.manual_seed(0)
    ours, theirs = LAYERS[layer]
    namespace = {**vars(gl_nn if lib == "graphloc" else pyg_nn), "F": F, "mlp": mlp}
    model = eval(ours if lib == "graphloc" else theirs, namespace).to(DEVICE)  # noqa: S307
    inputs = graph if lib == "graphloc" else graph.edge_index

    def step():
        out = model(x, inputs)
        torch.autograd.grad(out, [x, *model.parameters()], torch.ones_like(out))
    return step


def epoch_step(lib: str, graph: Graph, x: torch.Tensor):
    import torch_geometric.nn as pyg_nn

    from graphloc.nn import GNN
    torch.manual_seed(0)
    y = torch.randint(0, 10, (graph.num_nodes,), device=DEVICE)
    if lib == "graphloc":
        model, inputs = GNN("gcn", F, F, 10, num_layers=16).to(DEVICE), graph
    else:
        model, inputs = pyg_nn.GCN(F, F, 16, 10).to(DEVICE), graph.edge_index
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x.detach(), inputs), y).backward()
        opt.step()
    return step


def bench_layers(graphs: dict, reps: int) -> list[str]:
    lines = ["| graph | layer (F=64, fwd+bwd) | graphloc ms | PyG ms | speed-up | "
             "graphloc peak MB | PyG peak MB | PyG / graphloc memory |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for gname, graph in graphs.items():
        x = torch.randn(graph.num_nodes, F, device=DEVICE, requires_grad=True)
        for layer in [*LAYERS, "GCN x16 epoch"]:
            res = {}
            for lib in ("graphloc", "PyG"):
                step = epoch_step(lib, graph, x) if layer == "GCN x16 epoch" \
                    else layer_step(lib, layer, graph, x)
                res[lib] = (cuda_median_ms(step, reps), peak_mb(step))
                del step
                torch.cuda.empty_cache()
            (ours, our_mb), (theirs, their_mb) = res["graphloc"], res["PyG"]
            lines.append(f"| {gname} | {layer} | {ours:.2f} | {theirs:.2f} | "
                         f"{theirs / ours:.1f}x | {our_mb:.0f} | {their_mb:.0f} | "
                         f"{their_mb / max(our_mb, 1e-3):.1f}x |")
            print("  " + lines[-1], flush=True)
    return lines


def profile(graph: Graph) -> None:
    """The CUDA kernels of one spmm, attention and GATConv step, by time (torch.profiler)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    x = torch.randn(graph.num_nodes, F, device=DEVICE)
    peers = op_peers(graph, x)
    steps = {"spmm (graphloc kernel)": peers["spmm sum"]["graphloc kernel"],
             "attention fwd+bwd": peers["attention fwd+bwd (4x16)"]["graphloc"],
             "GATConv fwd+bwd": layer_step("graphloc", "GATConv (4 heads x 16)", graph,
                                           x.requires_grad_())}
    for name, step in steps.items():
        step()
        sync()
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            sync()
        print(f"\n  profile: {name}")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12,
                                        max_name_column_width=70))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2_000_000, help="road graph size")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--power-law", type=int, nargs=2, default=[1_000_000, 20_000_000],
                        metavar=("NODES", "EDGES"))
    parser.add_argument("--write", metavar="PATH")
    parser.add_argument("--dry-run-on-cpu", action="store_true", help="check the script")
    parser.add_argument("--skip-layers", action="store_true", help="the op table alone")
    parser.add_argument("--profile", action="store_true",
                        help="also print the kernels of a few steps on the road graph")
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = "cpu" if args.dry_run_on_cpu else "cuda"
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_gpu.py needs a CUDA device")
    print("building graphs ...", flush=True)
    graphs = {f"road {args.nodes // 1000}k": road_like(args.nodes).to(DEVICE),
              f"power-law {args.power_law[0] // 1000}k/{args.power_law[1] // 1000}k":
                  power_law(*args.power_law).to(DEVICE)}
    for name, g in graphs.items():
        print(f"  {name}: {g.num_nodes} nodes, {g.num_edges} edges", flush=True)
    op_lines = bench_ops(graphs, args.reps) + [""] + bench_width_sweep(graphs, args.reps)
    if args.profile and DEVICE == "cuda":
        profile(next(iter(graphs.values())))
    layer_lines = [] if args.skip_layers else bench_layers(graphs, args.reps)
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU dry run"
    header = (f"{datetime.date.today().isoformat()}, {gpu}, "
              f"torch {torch.__version__}, graphloc {graphloc.__version__}")
    text = f"\n## GPU ops, {header}\n\n" + "\n".join(op_lines) + "\n"
    if layer_lines:
        text += f"\n## GPU layers vs PyG, {header}\n\n" + "\n".join(layer_lines) + "\n"
    publish(text, args.write)


if __name__ == "__main__":
    main()
