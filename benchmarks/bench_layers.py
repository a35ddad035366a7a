"""Layer benchmark: graphloc's convs against their PyG twins, forward + backward.

Each (graph, layer, library) runs in its own process, so its peak memory is measurable:
the growth of the process's peak resident set over its size just before the first
forward + backward. Time is the median of repeated forward + backward passes. Also a full
training epoch (forward, backward, Adam step) of a 16-layer GCN.

"Dense floor": graphloc's layer with its sparse ops (spmm, sddmm, attention) replaced by
copies of their input, so only the dense work is left (linear maps, biases, activations,
one write per sparse output each way: the output forward, the gradient of the op's input
backward), which PyG's layer does too: PyG ms / floor ms bounds the speed-up that faster
sparse kernels can give. (Until 2026-12-02 the copies handed the gradient through
unwritten, which set the floor lower than any implementation can go.)

"Gather floor" (attention layers): graphloc's layer with its attention replaced by a
plain unweighted spmm over the same edges. Any attention kernel gathers each edge's
source row in the forward and each destination's gradient row in the backward, which is
all that spmm does (one gather pass each way), so PyG ms / gather floor ms bounds the
speed-up of an attention layer whose kernels are as fast as spmm.

"Stream floor": the dense floor plus, per sparse op, one contiguous read of the values it
must gather (the E rows of its input, forward and backward). Gathers cannot move fewer
bytes, nor move them faster than a streaming read, so PyG ms / stream floor ms bounds the
speed-up on this machine (up to cache reuse of repeated rows, which on these graphs is
small: spmm takes about the streaming time of its bytes).

"Share of the bound" (paired): graphloc's layer and its floors in one more process, a
step of each in turn with the sparse ops swapped between steps; per floor, the median of
floor ms / graphloc ms over the turns. This machine's speed drifts by 10% to 30% over
minutes (other tenants), which separate processes turn into errors of the ratios; steps
side by side share the machine's state.

"Reachable share": dense floor ms / stream floor ms (paired), the largest share of the
dense bound that any kernel reaches on this machine (cache reuse aside). For attention
layers also dense floor ms / gather floor ms (paired): the largest share an attention
whose kernels cost no more than spmm's gathers reaches.

"Rounds": each row's processes run ``--rounds`` times, in a rotated order each round;
times and shares are medians over the rounds.

    python benchmarks/bench_layers.py [--quick] [--layers GATConv ...] [--retain-memory]
        [--rounds 3] [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine  # noqa: E402
from graphs import power_law, road_like  # noqa: E402

F = 64
LAYERS = {  # name -> (graphloc factory, PyG factory)
    "GCNConv": ("GCNConv(F, F)", "GCNConv(F, F)"),
    "SAGEConv": ("SAGEConv(F, F)", "SAGEConv(F, F)"),
    "GATConv (4 heads x 16)": ("GATConv(F, 16, heads=4)", "GATConv(F, 16, heads=4)"),
    "GINConv": ("GINConv(mlp())", "GINConv(mlp())"),
    "ChebConv (K=3)": ("ChebConv(F, F, K=3)", "ChebConv(F, F, K=3)"),
}


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(F, F), torch.nn.ReLU(), torch.nn.Linear(F, F))


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(graph_file: str, lib: str, layer: str, reps: int) -> dict:
    """One measurement, in this (fresh) process."""
    import torch_geometric.nn as pyg_nn

    import graphloc.nn as gl_nn
    from graphloc import Graph

    edge_index, num_nodes = torch.load(graph_file)
    torch.manual_seed(0)
    x = torch.randn(num_nodes, F, requires_grad=True)
    if layer == "GCN x16 epoch":
        return run_epoch(lib, edge_index, num_nodes, x.detach(), reps)
    ours, theirs = LAYERS[layer]
    if lib == "paired":
        return run_paired(ours, edge_index, num_nodes, x, reps)
    if lib == "dense floor":
        without_sparse_ops()
    if lib == "gather floor":
        attention_as_spmm()
    if lib == "stream floor":
        sparse_ops_as_streams()
    namespace = {**vars(pyg_nn if lib == "PyG" else gl_nn), "F": F, "mlp": mlp}
    model = eval(theirs if lib == "PyG" else ours, namespace)  # noqa: S307 (fixed table)
    graph = edge_index if lib == "PyG" else Graph(edge_index, num_nodes=num_nodes)

    return peak_and_median(lambda: forward_backward(model, x, graph), reps)


def forward_backward(model, x, graph) -> None:
    out = model(x, graph)
    torch.autograd.grad(out, [x, *model.parameters()], torch.ones_like(out),
                        allow_unused=True)  # the floor leaves GAT's attention unused


def rotated(libs, r: int) -> list:
    """``libs`` starting at its r-th entry (cyclically): each round or turn starts at
    another library, so that a slow spell of the machine does not fall on one of them."""
    r %= len(libs)
    return [*libs[r:], *libs[:r]]


_SPARSE_OPS = ("spmm", "sddmm", "segment_attention", "additive_attention")


def has_attention(layer: str) -> bool:
    """Whether a row of ``LAYERS`` (its name or either factory) is an attention layer,
    whose gather floor is measured too."""
    return layer.startswith("GATConv")


def sparse_op_sets(attention: bool) -> dict:
    """graphloc's sparse ops as shipped and as each floor replaces them (this process
    keeps the shipped ones installed); the gather floor for an ``attention`` layer."""
    from graphloc import ops
    shipped = {name: getattr(ops, name) for name in _SPARSE_OPS}
    sets = {"graphloc": shipped}
    floors = [("dense floor", without_sparse_ops), ("stream floor", sparse_ops_as_streams)]
    if attention:
        floors.append(("gather floor", attention_as_spmm))
    for lib, patch in floors:
        patch()
        sets[lib] = {name: getattr(ops, name) for name in _SPARSE_OPS}
        for name, op in shipped.items():
            setattr(ops, name, op)
    return sets


def run_paired(ours: str, edge_index, num_nodes, x, reps: int) -> dict:
    """graphloc's layer and its floors in one process, a step of each in turn (the
    first of each turn rotating) with the sparse ops swapped between steps: each floor's
    share of the layer's time from steps that share the machine's state, where separate
    processes (the other rows) see the machine's drift. Per floor, the median over the
    turns of floor ms / graphloc ms; for an attention layer also the dense floor's share
    of the gather floor, the most of the dense bound that a layer whose attention costs
    what spmm's gathers cost reaches."""
    import graphloc.nn as gl_nn
    from graphloc import Graph, ops

    sets = sparse_op_sets(attention=has_attention(ours))
    model = eval(ours, {**vars(gl_nn), "F": F, "mlp": mlp})  # noqa: S307 (fixed table)
    graph = Graph(edge_index, num_nodes=num_nodes)

    def step(lib):
        for name, op in sets[lib].items():
            setattr(ops, name, op)
        forward_backward(model, x, graph)

    libs = list(sets)
    for _ in range(WARMUP):
        for lib in libs:
            step(lib)
    times = {lib: [] for lib in libs}
    for turn in range(reps):
        for lib in rotated(libs, turn):
            t = time.perf_counter()
            step(lib)
            times[lib].append(time.perf_counter() - t)

    def share(floor, of):
        return statistics.median(f / o for f, o in zip(times[floor], times[of], strict=True))
    shares = {"dense floor share": share("dense floor", "graphloc"),
              "stream floor share": share("stream floor", "graphloc"),
              "reachable share": share("dense floor", "stream floor")}
    if "gather floor" in sets:
        shares["spmm-fast attention share"] = share("dense floor", "gather floor")
    return shares


def _zero_gradients(like, needs) -> tuple:
    """A written zero gradient for each input (a tensor of ``like``) whose ``needs`` is
    set, None for the others."""
    return tuple(torch.zeros_like(t) if need else None for t, need in zip(like, needs,
                                                                          strict=True))


class _Copy(torch.autograd.Function):
    """A copy of ``x``, and of the gradient in the backward: a sparse op's one write of
    its output each way (``x.clone()`` alone would hand the gradient through unwritten,
    though every implementation writes the gradient of the op's input). The op's per-edge
    ``values`` (an attention's scores or GAT's per-node score halves, an edge weight; None:
    absent) get a written zero gradient, as every implementation writes theirs, so the
    dense work that made them runs its backward."""

    @staticmethod
    def forward(ctx, x, *values):
        ctx.values = values
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad.clone(), *_zero_gradients(ctx.values, ctx.needs_input_grad[1:])


class _ZeroGradientFor(torch.autograd.Function):
    """``out`` itself (as a view: not for outputs modified in place), and a written zero
    gradient for ``values``, as ``_Copy`` gives them, for an op whose own output stands."""

    @staticmethod
    def forward(ctx, out, *values):
        ctx.values = values
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad):
        return grad, *_zero_gradients(ctx.values, ctx.needs_input_grad[1:])


class _Zeros(torch.autograd.Function):
    """A zero tensor of ``shape`` for a sparse op that makes new values from its inputs
    (sddmm's [E, ...] scores): one write of its output forward and of each input's
    gradient backward, so that the dense work that feeds the inputs (GAT's score
    projection) and the work on the output (its LeakyReLU) run their backward as in the
    layer. Before 2026-12-02 the floor's sddmm returned a tensor without a gradient, which
    left that dense backward out of the floor."""

    @staticmethod
    def forward(ctx, shape, *inputs):
        ctx.inputs = inputs
        return inputs[0].new_zeros(shape)

    @staticmethod
    def backward(ctx, grad):
        return None, *_zero_gradients(ctx.inputs, ctx.needs_input_grad[1:])


def without_sparse_ops() -> None:
    """graphloc's sparse ops become copies of their node input (this process only): what
    is left is the dense work plus one write of each sparse output (forward) and of the
    gradient of each of its inputs (backward), which any implementation pays."""
    from graphloc import ops
    ops.spmm = lambda graph, x, edge_weight=None, reduce="sum": _Copy.apply(
        x, edge_weight)
    ops.sddmm = lambda graph, a, b, op="dot": _Zeros.apply(
        (graph.num_edges, *(b.shape[1:-1] if op == "dot" and b.dim() == 3 else
                            () if op == "dot" else b.shape[1:])), a, b)
    ops.segment_attention = lambda graph, scores, x, return_weights=False: \
        _Copy.apply(x, scores)
    ops.additive_attention = lambda graph, src_scores, dst_scores, x, negative_slope=0.2: \
        _Copy.apply(x, src_scores, dst_scores)


def attention_as_spmm() -> None:
    """Attention scores become zero writes (forward, and their gradients backward) and the
    attention a plain spmm (this process only): the gathers any attention kernel makes,
    without the attention's own work."""
    from graphloc import ops
    spmm = ops.spmm
    without_sparse_ops()
    ops.segment_attention = lambda graph, scores, x, return_weights=False: \
        _ZeroGradientFor.apply(spmm(graph, x), scores)
    ops.additive_attention = lambda graph, src_scores, dst_scores, x, negative_slope=0.2: \
        _ZeroGradientFor.apply(spmm(graph, x), src_scores, dst_scores)


class _Stream(torch.autograd.Function):
    """``_Copy`` that also reads ``buffer`` (contiguous) in the forward and, when a
    gradient is asked for, again in the backward."""

    @staticmethod
    def forward(ctx, x, buffer, *values):
        ctx.buffer, ctx.values = buffer, values
        buffer.sum()
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.buffer.sum()
        return grad.clone(), None, *_zero_gradients(ctx.values, ctx.needs_input_grad[2:])


_BUFFER = []


def _stream_of(count: int) -> torch.Tensor:
    """``count`` contiguous floats, allocated and touched once per process."""
    if not _BUFFER or _BUFFER[0].numel() < count:
        _BUFFER[:] = [torch.ones(count)]
    return _BUFFER[0][:count]


def sparse_ops_as_streams() -> None:
    """The dense floor plus, for each sparse op, a contiguous read of the values it must
    gather: E rows of x for spmm and attention (forward, and the gradient's E rows in the
    backward), a[src] and b[dst] for sddmm. No kernel can move fewer bytes, and a
    contiguous read is the fastest way to move them, so PyG ms / stream floor ms bounds
    the speed-up on this machine, cache reuse of repeated rows aside."""
    from graphloc import ops
    without_sparse_ops()
    copy_sddmm = ops.sddmm

    def row_values(graph, x):
        return graph.num_edges * (x[0].numel() if x.dim() > 1 else 1)

    ops.spmm = lambda graph, x, edge_weight=None, reduce="sum": _Stream.apply(
        x, _stream_of(row_values(graph, x)), edge_weight)
    ops.segment_attention = lambda graph, scores, x, return_weights=False: \
        _Stream.apply(x, _stream_of(row_values(graph, x)), scores)
    ops.additive_attention = lambda graph, src_scores, dst_scores, x, negative_slope=0.2: \
        _Stream.apply(x, _stream_of(row_values(graph, x)), src_scores, dst_scores)

    def sddmm(graph, a, b, op="dot"):
        _stream_of(2 * row_values(graph, a)).sum()
        return copy_sddmm(graph, a, b, op)
    ops.sddmm = sddmm


WARMUP = 5  # untimed calls after the first: see peak_and_median


def peak_and_median(step, reps: int) -> dict:
    """Peak memory growth of the first call (graphloc also builds its cached layouts
    there), then ``WARMUP`` untimed calls, then the median time of ``reps`` more. The
    warm-up matters: glibc's mmap threshold rises to the size of the blocks freed, so
    after it buffers up to its 32 MB cap come from the heap; measured on SAGEConv, the
    first calls of a process take 1.6x the steady state's time, for either library.
    Larger buffers (a [N, 64] one is 51 MB here) are mmapped and faulted in at every
    call unless ``--retain-memory`` is given."""
    before = rss_mb()
    step()
    peak = peak_rss_mb() - before
    for _ in range(WARMUP):
        step()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return {"ms": 1e3 * statistics.median(times), "peak_mb": peak}


def run_epoch(lib, edge_index, num_nodes, x, reps):
    import torch_geometric.nn as pyg_nn

    from graphloc import Graph
    from graphloc.nn import GNN

    y = torch.randint(0, 10, (num_nodes,))
    if lib == "graphloc":
        model, graph = GNN("gcn", F, F, 10, num_layers=16), Graph(edge_index, num_nodes)
    else:
        model, graph = pyg_nn.GCN(F, F, 16, 10), edge_index
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def epoch():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x, graph), y).backward()
        opt.step()

    return peak_and_median(epoch, reps)


# glibc returns every freed block above its mmap threshold (at most 32 MB) to the OS, so
# each fresh [N, 64] buffer (51 MB here) is faulted in and zeroed again at every step;
# these settings keep freed memory in the process instead (what a long training run with
# a caching allocator sees), so that the kernels, not the page faults, are timed.
RETAIN_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(2**32), "MALLOC_TRIM_THRESHOLD_": str(2**32)}


def measure(graph_file, lib, layer, reps, retain_memory=False):
    cmd = [sys.executable, __file__, "--one", graph_file, lib, layer, str(reps)]
    env = {**os.environ, **RETAIN_MEMORY} if retain_memory else None
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_rounds(graph_file, libs, layer, reps, retain_memory, rounds) -> dict:
    """Per library, the median time and peak over ``rounds`` processes (``rotated``), and
    each round's shares from the paired process."""
    runs = {lib: [] for lib in libs}
    for r in range(rounds):
        for lib in rotated(libs, r):
            runs[lib].append(measure(graph_file, lib, layer, reps, retain_memory))
    out = {lib: {"ms": statistics.median(run["ms"] for run in results),
                 "peak_mb": statistics.median(run["peak_mb"] for run in results),
                 "rounds_ms": [run["ms"] for run in results]}
           for lib, results in runs.items() if lib != "paired"}
    if "paired" in runs:
        out["paired"] = {name: [run[f"{name} share"] for run in runs["paired"]]
                         for name in ("dense floor", "stream floor", "reachable",
                                      "spmm-fast attention")
                         if f"{name} share" in runs["paired"][0]}
    return out


def _shares(shares: list[float]) -> str:
    """The median share and, with several rounds, each round's."""
    median = f"{statistics.median(shares):.0%}"
    return median if len(shares) == 1 else \
        f"{median} ({', '.join(f'{share:.0%}' for share in shares)})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="road graph only")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--layers", nargs="+", metavar="NAME",
                        help="only the layers whose name starts with one of these")
    parser.add_argument("--retain-memory", action="store_true",
                        help="glibc keeps freed memory (no page faults on reused buffers)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="processes per library and row, in rotated order (median)")
    parser.add_argument("--write", metavar="PATH")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        graph_file, lib, layer, reps = args.one
        print(json.dumps(run_one(graph_file, lib, layer, int(reps))))
        return
    graphs = {"road": road_like}
    if not args.quick:
        graphs["power-law"] = power_law
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for gname, make in graphs.items():
            g = make()
            path = os.path.join(tmp, f"{gname}.pt")
            torch.save((g.edge_index, g.num_nodes), path)
            for layer in [*LAYERS, "GCN x16 epoch"]:
                if layer == "GCN x16 epoch" and gname != "road":
                    continue
                if args.layers and not layer.startswith(tuple(args.layers)):
                    continue
                libs = ("graphloc", "PyG") if layer == "GCN x16 epoch" \
                    else ("graphloc", "PyG", "dense floor", "stream floor", "paired")
                if has_attention(layer):
                    libs += ("gather floor",)
                res = measure_rounds(path, libs, layer, args.reps, args.retain_memory,
                                     args.rounds)
                rows.append((gname, layer, res))
                print(f"  {gname:>9} {layer:<24} " + "  ".join(
                    f"{lib}={r['ms']:.0f}ms/{r['peak_mb']:.0f}MB "
                    f"({'/'.join(f'{t:.0f}' for t in r['rounds_ms'])})"
                    for lib, r in res.items() if lib != "paired") + "".join(
                    f"  {floor} share (paired)={_shares(shares)}"
                    for floor, shares in res.get("paired", {}).items()), flush=True)
    lines = ["| graph | layer (F=64, fwd+bwd) | graphloc ms | PyG ms | speed-up | "
             "dense floor ms | PyG / floor (bound) | share of the bound, paired (per round) | "
             "reachable share (stream floor) | graphloc peak MB | PyG peak MB | "
             "PyG / graphloc memory |", "|---|---|" + "---:|" * 10]
    for gname, layer, res in rows:
        ours, theirs = res["graphloc"], res["PyG"]
        ratio = theirs["peak_mb"] / max(ours["peak_mb"], 1)
        floor = res.get("dense floor")
        bound = ("", "", "", "") if floor is None else \
            (f"{floor['ms']:.0f}", f"{theirs['ms'] / floor['ms']:.1f}x",
             _shares(res["paired"]["dense floor"]), _shares(res["paired"]["reachable"]))
        lines.append(f"| {gname} | {layer} | {ours['ms']:.0f} | {theirs['ms']:.0f} | "
                     f"{theirs['ms'] / ours['ms']:.1f}x | {' | '.join(bound)} | "
                     f"{ours['peak_mb']:.0f} | {theirs['peak_mb']:.0f} | {ratio:.1f}x |")
    streams = [(gname, layer, res) for gname, layer, res in rows if "stream floor" in res]
    if streams:
        lines += ["", "| graph | layer | graphloc ms | PyG ms | speed-up | stream floor ms | "
                  "PyG / stream floor (bound) | share of the bound, paired (per round) |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for gname, layer, res in streams:
            ours, theirs, stream = res["graphloc"], res["PyG"], res["stream floor"]
            lines.append(f"| {gname} | {layer} | {ours['ms']:.0f} | {theirs['ms']:.0f} | "
                         f"{theirs['ms'] / ours['ms']:.1f}x | {stream['ms']:.0f} | "
                         f"{theirs['ms'] / stream['ms']:.1f}x | "
                         f"{_shares(res['paired']['stream floor'])} |")
    gathers = [(gname, layer, res) for gname, layer, res in rows if "gather floor" in res]
    if gathers:
        lines += ["", "| graph | layer | graphloc ms | PyG ms | speed-up | gather floor ms | "
                  "PyG / gather floor (bound) | dense floor / gather floor, paired "
                  "(per round) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for gname, layer, res in gathers:
            ours, theirs, gather = res["graphloc"], res["PyG"], res["gather floor"]
            lines.append(f"| {gname} | {layer} | {ours['ms']:.0f} | {theirs['ms']:.0f} | "
                         f"{theirs['ms'] / ours['ms']:.1f}x | {gather['ms']:.0f} | "
                         f"{theirs['ms'] / gather['ms']:.1f}x | "
                         f"{_shares(res['paired']['spmm-fast attention'])} |")
    header = f"{datetime.date.today().isoformat()}, {machine()}" + \
        (", freed memory retained (--retain-memory)" if args.retain_memory else "") + \
        (f", median of {args.rounds} rounds" if args.rounds > 1 else "")
    print(f"\n{header}\n\n" + "\n".join(lines))
    if args.write:
        with open(args.write, "a") as f:
            f.write(f"\n## Layers vs PyG, {header}\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
