"""Node classification with any registered model on any supported dataset: the code to
copy. Full batch by default; --batch-size switches to sampled mini-batches.

    python examples/node_classification.py --dataset helsinki --model gcn --layers 4
    python examples/node_classification.py --dataset synthetic:100000 --model sage \\
        --layers 3 --batch-size 1024 --fanout 10 10 10
"""

from __future__ import annotations

import argparse

from graphloc.datasets import load_dataset
from graphloc.train import TrainConfig, evaluate, fit, load_checkpoint


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="helsinki")
    parser.add_argument("--model", default="gcn")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--fanout", type=int, nargs="+")
    parser.add_argument("--root", default="data")
    parser.add_argument("--out", default="runs/node_classification")
    args = parser.parse_args(argv)

    dataset = load_dataset(args.dataset, args.root)
    print(f"{dataset.name}: {dataset.num_nodes} nodes, {dataset.graph.num_edges} edges, "
          f"{dataset.num_features} features, {dataset.num_classes} classes")
    config = TrainConfig(model=args.model, layers=args.layers, hidden=args.hidden,
                         lr=args.lr, epochs=args.epochs, eval_every=5,
                         batch_size=args.batch_size, fanout=args.fanout)
    fit(dataset, config, out_dir=args.out)
    model, info = load_checkpoint(f"{args.out}/best.pt")
    scores = evaluate(model, dataset)
    print(f"best checkpoint (epoch {info['metrics']['epoch']}): " +
          ", ".join(f"{split} {100 * acc:.1f}%" for split, acc in scores.items()))


if __name__ == "__main__":
    main()
