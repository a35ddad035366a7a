"""Total influence of untrained LATTE models on a heterogeneous graph, by method.

    python benchmarks/bench_hetero_influence.py [--layers 1 2] [--seeds 100] [--max-hops 4]

The synthetic AML accounts (``load_dataset("aml-accounts")``), LATTE with hidden 64 and
the dataset's classes (weights drawn after ``torch.manual_seed(0)``), the seeds drawn by
``measure``'s default seed, 100 bootstrap draws; each method once, one after the other.
Prints seconds, R and the curve's first hops per (layers, method).
"""

from __future__ import annotations

import argparse
import time

import torch

from graphloc.datasets import load_dataset
from graphloc.influence import measure
from graphloc.nn.models.latte import LATTE


def one(data, layers: int, method: str, args) -> dict:
    torch.manual_seed(0)
    model = LATTE({t: x.size(1) for t, x in data.x.items()}, 64, data.num_classes, layers,
                  data.graph.metadata(), data.target)
    start = time.perf_counter()
    result = measure(model, data, args.max_hops, num_samples=args.seeds,
                     method=method, bootstrap=100, target=data.target)
    seconds = time.perf_counter() - start
    curve = result.curve.tolist()
    return {"layers": layers, "method": method, "seconds": seconds, "R": float(result.R),
            "ratios": curve[1:4]}  # the curve is already mean T_h / mean T_0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--methods", nargs="+", default=["auto", "per_seed"])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--max-hops", type=int, default=4)
    parser.add_argument("--root", default="data")
    args = parser.parse_args()
    data = load_dataset("aml-accounts", root=args.root)
    print("| model | method | s | R | T_1 / T_0, T_2 / T_0, T_3 / T_0 |")
    print("|---|---|---:|---:|---|")
    for layers in args.layers:
        for method in args.methods:
            row = one(data, layers, method, args)
            ratios = ", ".join(f"{r:.2f}" for r in row["ratios"])
            print(f"| LATTE-{layers} | {method} | {row['seconds']:.2f} | {row['R']:.2f} | "
                  f"{ratios} |", flush=True)


if __name__ == "__main__":
    main()
