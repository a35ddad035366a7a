"""Train several models, then measure and plot their total influence per hop and R.

    python examples/measure_influence.py --dataset helsinki --models gcn sage gat --layers 8
"""

from __future__ import annotations

import argparse
import os

from graphloc.datasets import load_dataset
from graphloc.influence import measure, plot_influence
from graphloc.train import TrainConfig, fit, load_checkpoint


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="helsinki", help="as graphloc train --dataset")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage", "gat"])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--root", default="data")
    parser.add_argument("--out", default="runs/influence")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset, args.root)
    results = {}
    for name in args.models:
        run = os.path.join(args.out, name)
        fit(dataset, TrainConfig(model=name, layers=args.layers, lr=5e-3, epochs=args.epochs,
                                 eval_every=10), out_dir=run)
        model, info = load_checkpoint(os.path.join(run, "best.pt"))
        result = measure(model, dataset, max_hops=16, num_samples=args.samples)
        results[f"{name} x{args.layers}"] = result
        print(f"{name}: validation accuracy {100 * info['metrics']['val']:.1f}%, "
              f"R = {result.R:.2f} ({result.R_ci[0]:.2f} to {result.R_ci[1]:.2f})")
    plot_influence(results, os.path.join(args.out, "influence.png"))
    print(f"plot: {os.path.join(args.out, 'influence.png')}")


if __name__ == "__main__":
    main()
