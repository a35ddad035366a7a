"""Long-range layers at 200,000 nodes (road-like graph): time and peak memory of one
training step (forward, backward, Adam step; full batch, LargeGT one batch of 1024 nodes),
graphloc against PyG where PyG has the layer; and the recall of the approximate top-m
search against the exact one.

Each (model, library) runs in its own process, so its peak memory is measurable (the
growth of the peak resident set during the first step, graph layouts included).

    python benchmarks/bench_longrange.py [--quick] [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_layers import peak_and_median  # noqa: E402
from bench_ops import machine, publish  # noqa: E402
from graphs import road_like  # noqa: E402

F, CLASSES = 64, 10
MODELS = {  # name -> (graphloc factory, PyG factory or None, repetitions)
    "TopMAttention exact (m=16, 64 wide)":
        ("TopMAttention(F, F, m=16, mode='exact')", None, 1),
    "TopMAttention approx (m=16, 2 probes)":
        ("TopMAttention(F, F, m=16, mode='approx')", None, 3),
    "TANGNN (2 layers, approx)": ("TANGNN(F, F, CLASSES, num_layers=2, m=16)", None, 3),
    "TransformerConv (4 heads x 16)":
        ("TransformerConv(F, 16, heads=4)", "TransformerConv(F, 16, heads=4)", 5),
    "SGFormer (1 attention + 3 GCN layers)":
        ("SGFormer(F, F, CLASSES, trans_num_layers=1)",
         "SGFormer(F, F, CLASSES, trans_num_layers=1)", 5),
    "LargeGT (K=50, batch 1024)": ("LargeGT(F, F, CLASSES)", None, 5),
    "LiftGCN (16 layers)": ("LiftGCN(F, F, CLASSES, num_layers=16)", None, 5),
    "LiftGCN (16 layers, checkpointed blocks)":
        ("LiftGCN(F, F, CLASSES, num_layers=16, checkpoint=True)", None, 5),
}


def run_one(graph_file: str, lib: str, name: str) -> dict:
    import torch_geometric.nn as pyg_nn

    import graphloc.nn as gl_nn
    from graphloc import Graph

    edge_index, num_nodes = torch.load(graph_file)
    torch.manual_seed(0)
    x, y = torch.randn(num_nodes, F), torch.randint(0, CLASSES, (num_nodes,))
    ours, theirs, reps = MODELS[name]
    namespace = {**vars(gl_nn if lib == "graphloc" else pyg_nn), "F": F, "CLASSES": CLASSES}
    model = eval(ours if lib == "graphloc" else theirs, namespace)  # noqa: S307 (fixed table)
    graph = Graph(edge_index, num_nodes=num_nodes) if lib == "graphloc" else edge_index
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = torch.randperm(num_nodes)[:1024]

    def outputs():
        if name.startswith("TopMAttention"):
            return model(x)
        if name.startswith("LargeGT"):
            return model(x, graph, index=batch)
        if lib == "PyG" and name.startswith("SGFormer"):
            return model(x, graph, torch.zeros(num_nodes, dtype=torch.long))
        return model(x, graph)

    def step():
        opt.zero_grad()
        out = outputs()
        target = y[batch] if name.startswith("LargeGT") else y
        loss = torch.nn.functional.cross_entropy(out, target) if out.size(1) == CLASSES \
            else out.pow(2).mean()
        loss.backward()
        opt.step()

    return peak_and_median(step, reps)


def measure(graph_file: str, lib: str, name: str) -> dict:
    cmd = [sys.executable, __file__, "--one", graph_file, lib, name]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def recall_rows(num_nodes: int, queries: int = 2000) -> list[str]:
    """Recall of the approximate top-16 against exact search for sampled query nodes."""
    from graphloc.nn.conv.tangnn import top_m_similar

    gen = torch.Generator().manual_seed(0)
    centers = torch.randn(200, F, generator=gen)
    kinds = {
        "isotropic Gaussian (worst case)": torch.randn(num_nodes, F, generator=gen),
        "200 Gaussian clusters": centers[torch.randint(0, 200, (num_nodes,), generator=gen)]
        + 0.5 * torch.randn(num_nodes, F, generator=gen),
    }
    rows = []
    q = torch.randperm(num_nodes, generator=gen)[:queries]
    for kind, z in kinds.items():
        unit = torch.nn.functional.normalize(z, dim=-1)
        sims = unit[q] @ unit.T
        sims[torch.arange(queries), q] = float("-inf")
        truth = sims.topk(16, dim=1).indices
        for probes in (1, 2, 4):
            start = time.perf_counter()
            found, _ = top_m_similar(z, 16, mode="approx", probes=probes)
            seconds = time.perf_counter() - start
            recall = (found[q].unsqueeze(2) == truth.unsqueeze(1)).any(2).float().mean()
            rows.append(f"| {kind} | {probes} | {recall:.3f} | {seconds:.2f} |")
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="skip the exact top-m step")
    parser.add_argument("--write", metavar="PATH")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return
    graph = road_like()
    lines = ["| model (F=64) | graphloc ms/step | PyG ms/step | speed-up | graphloc peak MB | "
             "PyG peak MB |", "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "road.pt")
        torch.save((graph.edge_index, graph.num_nodes), path)
        for name, (_, theirs, _) in MODELS.items():
            if args.quick and "exact" in name:
                continue
            ours = measure(path, "graphloc", name)
            peer = measure(path, "PyG", name) if theirs else None
            cells = [f"{ours['ms']:.0f}", "-", "-", f"{ours['peak_mb']:.0f}", "-"]
            if peer:
                cells[1:3] = [f"{peer['ms']:.0f}", f"{peer['ms'] / ours['ms']:.1f}x"]
                cells[4] = f"{peer['peak_mb']:.0f}"
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    recall = ["| features | probed clusters | recall@16 | search s |", "|---|---:|---:|---:|",
              *recall_rows(graph.num_nodes)]
    header = f"{datetime.date.today().isoformat()}, {machine()}"
    text = (f"\n## Long-range layers at {graph.num_nodes:,} nodes (road-like, "
            f"{graph.num_edges:,} edges), {header}\n\n" + "\n".join(lines)
            + "\n\nApproximate top-16 search (inverted file over ~sqrt(N) k-means clusters)"
            " against exact search, 2,000 sampled queries:\n\n" + "\n".join(recall) + "\n")
    publish(text, args.write)


if __name__ == "__main__":
    main()
