"""ForwardGNN against backpropagation: peak training memory by depth, and accuracy.

    python benchmarks/bench_forward.py memory [--nodes 100000] [--depths 2 8 16]
    python benchmarks/bench_forward.py accuracy [--seeds 0 1 2] [--epochs 200]
        [--datasets helsinki synthetic-10k] [--procedures ...]

memory: each (procedure, depth) trains one epoch (per layer, for the greedy procedures) of
a GCN stack (hidden 64) on a synthetic road graph in a fresh process; the number is the
growth of the process's peak resident memory over the run (ru_maxrss after it minus
before it: data and model are loaded first), so every activation the run keeps at once
counts.

accuracy: GCN, hidden 128, 4 layers, Adam lr 1e-3 and weight decay 5e-4 for every
procedure (the paper's settings), validation every 2 epochs, patience 25 checks, on the
bundled Helsinki city and a 10,000-node synthetic city; test accuracy at the best
validation (backprop) or of the final model (each layer kept its best).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

# Large blocks straight from mmap and back to the system when freed: glibc's adaptive
# threshold otherwise keeps freed activations in the heap, and the peak resident memory
# then counts fragmentation that grows with the number of passes, not live tensors.
_EXACT_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
PROCEDURES = ["backprop", "ff", "ff-vn", "sf", "sf-top2input", "sf-top2loss"]


def _peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def one_memory_run(procedure: str, depth: int, nodes: int) -> dict:
    """In this process: the peak memory growth of one training epoch."""
    import torch

    from graphloc.datasets import synthetic_city
    from graphloc.train import TrainConfig, fit
    torch.set_num_threads(2)
    data = synthetic_city(nodes, seed=0, hops=4)
    config = TrainConfig(model="gcn", layers=depth, hidden=64, epochs=1, dropout=0.0,
                         procedure=procedure, standardize=False)
    before = _peak_kib()
    start = time.perf_counter()
    fit(data, config, progress=False)
    return {"procedure": procedure, "depth": depth, "nodes": nodes,
            "peak_growth_mib": (_peak_kib() - before) / 1024,
            "seconds": time.perf_counter() - start}


def memory(args) -> None:
    rows = []
    for procedure in args.procedures:
        for depth in args.depths:
            out = subprocess.run([sys.executable, __file__, "_one", procedure, str(depth),
                                  str(args.nodes)], capture_output=True, text=True, check=True,
                                 env={**os.environ, **_EXACT_MALLOC})
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"{procedure:13s} L={depth:2d}: {rows[-1]['peak_growth_mib']:8.1f} MiB "
                  f"({rows[-1]['seconds']:.1f} s)", flush=True)
    print(json.dumps(rows))


def accuracy(args) -> None:
    import torch

    from graphloc.datasets import load_dataset, synthetic_city
    from graphloc.train import TrainConfig, fit
    torch.set_num_threads(2)
    makers = {"helsinki": lambda: load_dataset("helsinki", args.root, 0),
              "synthetic-10k": lambda: synthetic_city(10_000, seed=0)}
    datasets = {name: makers[name]() for name in args.datasets}
    table = {}
    for name, data in datasets.items():
        for procedure in args.procedures:
            scores, seconds = [], []
            for seed in args.seeds:
                config = TrainConfig(model="gcn", layers=4, hidden=128, dropout=0.0,
                                     lr=1e-3, weight_decay=5e-4, epochs=args.epochs,
                                     eval_every=2, patience=25, seed=seed,
                                     procedure=procedure)
                start = time.perf_counter()
                history = fit(data, config, progress=False)
                seconds.append(time.perf_counter() - start)
                final = history[-1] if history[-1].get("final") else \
                    max(history, key=lambda h: h["val"])
                scores.append(final["test"])
            mean = statistics.mean(scores)
            std = statistics.stdev(scores) if len(scores) > 1 else 0.0
            table[(name, procedure)] = (mean, std, statistics.mean(seconds))
            print(f"{name:14s} {procedure:13s} test {100 * mean:5.1f} +- {100 * std:4.1f} "
                  f"({statistics.mean(seconds):.0f} s per run)", flush=True)


def main() -> None:
    if sys.argv[1:2] == ["_one"]:
        procedure, depth, nodes = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(one_memory_run(procedure, depth, nodes)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    mem = sub.add_parser("memory")
    mem.add_argument("--nodes", type=int, default=100_000)
    mem.add_argument("--depths", type=int, nargs="+", default=[2, 8, 16])
    mem.add_argument("--procedures", nargs="+", default=PROCEDURES)
    acc = sub.add_parser("accuracy")
    acc.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    acc.add_argument("--epochs", type=int, default=200)
    acc.add_argument("--root", default="data")
    acc.add_argument("--procedures", nargs="+", default=PROCEDURES)
    acc.add_argument("--datasets", nargs="+", default=["helsinki", "synthetic-10k"],
                     choices=["helsinki", "synthetic-10k"])
    args = parser.parse_args()
    memory(args) if args.what == "memory" else accuracy(args)


if __name__ == "__main__":
    main()
