"""PANConv against PyG's algorithm on torch's sparse products: forward times, and
graphloc's forward + backward.

PyG 2.8's PANConv needs torch-sparse, which does not install with this torch, so PyG's own
layer cannot run here. The stand-in is PyG's forward written with ``torch.sparse`` COO
tensors where PyG uses torch-sparse's ``SparseTensor``: the identity times ``w_0``, then
per hop one sparse-sparse product with ``adj_t`` and the values times ``w_n``, all hops
concatenated and coalesced, rows scaled by their entry counts, one sparse-dense product,
then ``lin`` (same weights as graphloc's). Both outputs are compared before timing. The
stand-in times its forward only: torch's backward of a sparse-sparse product allocates the
dense ``[N, N]`` gradient (160 GB here), so it cannot train at this size.

One process; the two in turns, the order alternating; medians, and the median of the
per-turn ratios. graphloc's layer keeps each graph's walk counts (as the convs keep their
normalisations), so its forward is timed on a graph it has seen, and on a new Graph each
time (the walks counted by ``ops.walk_counts``). On the road-like graph only; left out,
the power-law graph, whose hubs join 324,838,595 node pairs within two hops (147 times
the road graph's).

    python benchmarks/bench_pan.py [--turns 5] [--filter-sizes 1 2 4]
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
from graphs import road_like  # noqa: E402

F = 64


def pyg_algorithm(conv, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """PyG's PANConv.forward with torch.sparse in torch-sparse's place (module docstring)."""
    n = x.size(0)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1)),
                                    (n, n)).coalesce()
    eye = torch.arange(n)
    tmp = torch.sparse_coo_tensor(torch.stack([eye, eye]), conv.weight[0].expand(n), (n, n))
    outs = [tmp.coalesce()]
    for i in range(1, conv.weight.numel()):
        tmp = torch.sparse.mm(outs[-1], adj_t).coalesce()
        tmp = torch.sparse_coo_tensor(tmp.indices(), tmp.values() * conv.weight[i], (n, n))
        outs.append(tmp.coalesce())
    path = torch.sparse_coo_tensor(torch.cat([t.indices() for t in outs], dim=1),
                                   torch.cat([t.values() for t in outs]), (n, n)).coalesce()
    row, col = path.indices()
    scale = torch.bincount(row, minlength=n).to(x.dtype).rsqrt()
    m = torch.sparse_coo_tensor(path.indices(), path.values() * scale[row] * scale[col],
                                (n, n))
    return conv.lin(torch.sparse.mm(m, x))


def timed(run, backward: bool) -> float:
    start = time.perf_counter()
    if backward:
        run().sum().backward()
    else:
        with torch.no_grad():
            run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--filter-sizes", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    import graphloc.nn as gl
    from graphloc import Graph
    from graphloc.memory import retain_freed_memory
    retain_freed_memory()
    torch.set_num_threads(2)
    print(machine())
    graph = road_like()
    edge_index = graph.edge_index.clone()
    x = torch.randn(graph.num_nodes, F, requires_grad=True)
    print("| graph | layer | path matrix entries | forward: graphloc ms | forward: PyG's "
          "algorithm on torch.sparse ms | ratio | graphloc forward, walks counted ms | "
          "graphloc forward + backward ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for size in args.filter_sizes:
        conv = gl.PANConv(F, F, filter_size=size)
        with torch.no_grad():
            conv.weight.uniform_(0.3, 0.9)
        ours = lambda conv=conv: conv(x, edge_index)[0]  # noqa: E731
        # a new Graph: its walks are counted again (the layer keeps them per graph)
        first = lambda conv=conv: conv(x, Graph(edge_index, num_nodes=x.size(0)))[0]  # noqa: E731
        theirs = lambda conv=conv: pyg_algorithm(conv, x, edge_index)  # noqa: E731
        with torch.no_grad():
            torch.testing.assert_close(ours(), theirs(), rtol=1e-4, atol=1e-5)
            entries = conv(x, edge_index)[1]._nnz()
        times = {"ours": [], "theirs": [], "first": [], "train": []}
        for turn in range(args.turns):
            pair = [("ours", ours), ("theirs", theirs)]
            for key, run in pair if turn % 2 else pair[::-1]:
                times[key].append(timed(run, backward=False))
            times["first"].append(timed(first, backward=False))
            times["train"].append(timed(ours, backward=True))
        ratio = statistics.median(t / o for o, t in zip(times["ours"], times["theirs"],
                                                        strict=True))
        ms = {key: statistics.median(value) * 1e3 for key, value in times.items()}
        print(f"| road | PANConv(64, 64, filter_size={size}) | {entries:,} | {ms['ours']:.0f} | "
              f"{ms['theirs']:.0f} | {ratio:.1f}x | {ms['first']:.0f} | {ms['train']:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
