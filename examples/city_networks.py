"""The City-Networks protocol: GCN, GraphSAGE, GAT and ChebNet at depths 2, 4, 8 and 16
(hidden 64, dropout 0.2, AdamW lr 5e-4, weight decay 1e-5), several seeds; test accuracy
and influence R per depth, as a markdown table and a plot of accuracy and R against depth.
The models are the benchmark's (``benchmark/configs.py``): PyG's GCN, GraphSAGE and GAT
(one head: graphloc's ``GNN`` defaults to 4) and its own ChebNet (``chebnet``).

Runs on the published cities when their archives are in --root (or downloadable), and on
Helsinki and a synthetic city otherwise. The paper's graph transformer runs with
``--models sgformer-citynetworks``, its MLP baseline (PyG's ``MLP``, R = 0) with
``--models mlp``, and LiftGCN with ``--models liftgcn``.

    python examples/city_networks.py --datasets helsinki synthetic:20000 --seeds 3
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch

from graphloc.datasets import load_dataset
from graphloc.influence import measure
from graphloc.train import TrainConfig, fit, load_checkpoint

#: the benchmark's settings where graphloc's defaults differ (PyG's GAT has one head)
OFFICIAL_KWARGS = {"gat": {"heads": 1}}


def run(dataset, model: str, depth: int, seed: int, args) -> tuple[float, float]:
    out = os.path.join(args.out, dataset.name, f"{model}-{depth}-seed{seed}")
    config = TrainConfig(model=model, layers=depth, epochs=args.epochs, lr=args.lr,
                         eval_every=10, seed=seed,
                         model_kwargs=OFFICIAL_KWARGS.get(model, {}))
    history = fit(dataset, config, out_dir=out, progress=False)
    trained, _ = load_checkpoint(os.path.join(out, "best.pt"))
    result = measure(trained, dataset, 16, args.samples, seed=seed, bootstrap=100)
    return max(history, key=lambda h: h["val"])["test"], result.R


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["helsinki"])
    parser.add_argument("--models", nargs="+", default=["gcn", "sage", "gat", "chebnet"])
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=500)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--root", default="data")
    parser.add_argument("--out", default="runs/city_networks")
    args = parser.parse_args(argv)
    table = ["| dataset | model | depth | test accuracy % | R |", "|---|---|---:|---:|---:|"]
    points = {}
    for spec in args.datasets:
        dataset = load_dataset(spec, args.root)
        for model in args.models:
            for depth in args.depths:
                torch.manual_seed(0)
                runs = [run(dataset, model, depth, seed, args) for seed in range(args.seeds)]
                acc = [100 * a for a, _ in runs]
                rs = [r for _, r in runs]
                spread = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0  # noqa: E731
                table.append(f"| {dataset.name} | {model} | {depth} | "
                             f"{statistics.mean(acc):.1f} ± {spread(acc):.1f} | "
                             f"{statistics.mean(rs):.2f} ± {spread(rs):.2f} |")
                points.setdefault((dataset.name, model), []).append(
                    (depth, statistics.mean(acc), statistics.mean(rs)))
                print(table[-1], flush=True)
    print("\n" + "\n".join(table))
    _plot(points, os.path.join(args.out, "accuracy_and_R.png"))


def _plot(points: dict, path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: matplotlib is not installed")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for (name, model), rows in points.items():
        depths, acc, rs = zip(*rows, strict=True)
        left.plot(depths, acc, marker="o", label=f"{name} {model}")
        right.plot(depths, rs, marker="o", label=f"{name} {model}")
    left.set(xscale="log", xlabel="depth", ylabel="test accuracy %")
    right.set(xscale="log", xlabel="depth", ylabel="R")
    left.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
