"""Influence benchmark: graphloc's total influence against PyG's, in one run.

A 16-layer GCN (hidden 64, 37 input features, 10 classes) on a road-like graph; PyG's
``total_influence`` on a few seeds (it costs the same per seed), graphloc on many; the
numbers of the common seeds must agree. Time per seed and the ratio are reported, for
the default (PyG's numbers, batched balls) and the exact full-graph method. Then exact
influence of every node of a smaller graph with the full-graph method, per depth.

    python benchmarks/bench_influence.py [--nodes 500000] [--seeds 1000] [--pyg-seeds 10]
        [--all-nodes 100000] [--all-nodes-depths 2 4 8]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402
from graphs import road_like  # noqa: E402

from graphloc.influence import influence_per_hop, total_influence  # noqa: E402
from graphloc.nn import GNN  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=500_000)
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--pyg-seeds", type=int, default=10)
    parser.add_argument("--max-hops", type=int, default=16)
    parser.add_argument("--all-nodes", type=int, default=100_000)
    parser.add_argument("--all-nodes-depths", type=int, nargs="*", default=[2, 4, 8])
    parser.add_argument("--device", default="cpu", help="where the models run (both tools)")
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    from torch_geometric.data import Data
    from torch_geometric.nn import GCN
    from torch_geometric.utils import total_influence as pyg_total_influence

    graph = road_like(args.nodes)
    torch.manual_seed(0)
    data = Data(x=torch.randn(args.nodes, 37), edge_index=graph.edge_index,
                num_nodes=args.nodes)
    nodes = torch.randperm(args.nodes)[:args.seeds]
    pyg_model = GCN(37, 64, 16, 10).to(args.device)
    ours_model = GNN("gcn", 37, 64, 10, 16).to(args.device)
    rows, check = [], None
    for label, model, prune, convert in (
            ("PyG GCN, measured as its graphloc twin (convert=True, the default)", pyg_model,
             True, True),
            ("PyG GCN as given (convert=False)", pyg_model, True, False),
            ("graphloc GNN('gcn')", ours_model, True, True),
            ("graphloc GNN('gcn'), layers not pruned", ours_model, False, True)):
        device = {"device": args.device, "convert": convert}
        start = time.perf_counter()
        ours, _ = total_influence(model, data, args.max_hops, nodes=nodes, average=False,
                                  prune_layers=prune, **device)
        ours_s = time.perf_counter() - start
        torch.manual_seed(1)  # PyG draws its seeds from the global generator: make them ours
        perm = torch.randperm(args.nodes)
        torch.manual_seed(1)
        start = time.perf_counter()
        theirs, _ = pyg_total_influence(model, data, args.max_hops,
                                        num_samples=args.pyg_seeds, average=False,
                                        device=args.device)
        pyg_s = time.perf_counter() - start
        mine, _ = total_influence(model, data, args.max_hops, nodes=perm[:args.pyg_seeds],
                                  average=False, prune_layers=prune, **device)
        err = ((mine - theirs).abs() / theirs.abs().clamp(min=1e-30)).max().item()
        check = max(err, check or 0.0)
        del ours
        start = time.perf_counter()
        total_influence(model, data, args.max_hops, nodes=nodes, average=False,
                        method="full_graph", locality=16, prune_layers=prune, **device)
        full_s = time.perf_counter() - start
        rows.append((label, 1e3 * pyg_s / args.pyg_seeds, 1e3 * ours_s / args.seeds,
                     1e3 * full_s / args.seeds))
        print(f"  {label}: PyG {rows[-1][1]:.1f} ms/seed, graphloc {rows[-1][2]:.2f} ms/seed, "
              f"full graph {rows[-1][3]:.2f} ms/seed, max relative difference on common "
              f"seeds {err:.1e}", flush=True)
    lines = ["| model measured | PyG ms / seed | graphloc ms / seed | speed-up | graphloc "
             "full graph ms / seed | speed-up |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {label} | {p:.1f} | {o:.2f} | {p / o:.1f}x | {f:.2f} | {p / f:.1f}x |"
              for label, p, o, f in rows]
    header = f"{datetime.date.today().isoformat()}, {machine()}"
    publish(f"\n## Influence (`benchmarks/bench_influence.py`), {header}\n\n"
            f"16-layer GCN (hidden 64, 37 features, 10 classes) on {args.device}, road-like "
            f"graph of {args.nodes:,} nodes, max_hops {args.max_hops}; PyG on "
            f"{args.pyg_seeds} seeds, graphloc on {args.seeds}; largest relative difference "
            f"between the two on common seeds: {check:.1e}. Full graph: "
            f"`method=\"full_graph\"` (exact full-graph Jacobians, seeds in rounds with "
            f"disjoint 16-balls). graphloc's own GNN runs each layer only on the nodes the "
            f"seeds' outputs still read (`GNN.forward_within`); the last row turns that off "
            f"(`prune_layers=False`).\n\n"
            + "\n".join(lines) + "\n" + shallow_model_table(args) + all_nodes_table(args),
            args.write)


def shallow_model_table(args) -> str:
    """A 4-layer GCN measured to 16 hops: the default path extracts 16-hop balls, the full
    graph only the model's reach (5 hops)."""
    graph = road_like(args.all_nodes)
    torch.manual_seed(0)
    x, nodes = torch.randn(args.all_nodes, 37), torch.randperm(args.all_nodes)[:500]
    model = GNN("gcn", 37, 64, 10, 4).to(args.device)
    lines = ["| method | ms / seed |", "|---|---:|"]
    for method in ("batched", "full_graph"):
        start = time.perf_counter()
        influence_per_hop(model, (x, graph), 16, nodes, method=method, device=args.device)
        lines.append(f"| {method} | {1e3 * (time.perf_counter() - start) / 500:.2f} |")
        print("  " + lines[-1], flush=True)
    return (f"\n4-layer GCN, 500 seeds of a {args.all_nodes:,}-node road-like graph, max_hops "
            f"16 (same numbers: max_hops > L):\n\n" + "\n".join(lines) + "\n")


def all_nodes_table(args) -> str:
    """Exact influence of every node (max_hops 16) of a road-like graph, per GCN depth."""
    if not args.all_nodes_depths:
        return ""
    graph = road_like(args.all_nodes)
    torch.manual_seed(0)
    x = torch.randn(args.all_nodes, 37)
    csr, csc = graph.csr, graph.csc
    lines = ["| GCN depth L | rounds | seconds, all nodes |", "|---:|---:|---:|"]
    for depth in args.all_nodes_depths:
        rounds = torch.ops.graphloc.separated_rounds(
            csr.indptr, csr.indices, csc.indptr, csc.indices, torch.arange(args.all_nodes),
            depth)
        model = GNN("gcn", 37, 64, 10, depth).to(args.device)
        start = time.perf_counter()
        influence_per_hop(model, (x, graph), 16, torch.arange(args.all_nodes),
                          method="full_graph", device=args.device)
        seconds = time.perf_counter() - start
        lines.append(f"| {depth} | {int(rounds.max()) + 1:,} | {seconds:.1f} |")
        print("  " + lines[-1], flush=True)
    return (f"\nEvery node of a {args.all_nodes:,}-node road-like graph, exact (full graph), "
            f"max_hops 16:\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
