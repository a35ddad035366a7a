"""ForwardGNN link prediction on a City-Networks city: test ROC AUC and training time of
the official schedule (``graphloc.train_link``), forward-forward and forward learning,
and of the same network trained end to end by backpropagation, per conv, over seeds; the
splits are PyG's ``RandomLinkSplit`` as the official ``datasplit.py`` draws them (16%
validation, 20% test, one negative per positive).

    python benchmarks/bench_forward_link.py [--dataset helsinki] [--seeds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from graphloc.datasets import load_dataset
from graphloc.nn.models.forward_link import ForwardLinkGNN
from graphloc.train_link import train_forward_link_prediction


def splits(dataset, seed: int):
    from torch_geometric.data import Data
    from torch_geometric.transforms import RandomLinkSplit
    data = Data(x=dataset.x, edge_index=dataset.graph.edge_index)
    random.seed(seed)  # (PyG's negative sampling draws from Python's generator)
    torch.manual_seed(seed)
    return RandomLinkSplit(is_undirected=True, num_val=0.16, num_test=0.2,
                           neg_sampling_ratio=1.0, split_labels=False)(data)


def backprop(model: ForwardLinkGNN, train, val, test, epochs: int = 1000, every: int = 2,
             patience: int = 100) -> float:
    """The baseline: the same network trained end to end (Adam lr 1e-3, weight decay
    5e-4) on the forward-learning loss of its last layer, with the forward schedule's
    validation (every 2 epochs, the best weights kept, stopped after 100 checks without a
    better AUC); its test AUC from the last layer's scores."""
    import copy

    from graphloc.train_link import as_link_split, roc_auc
    train, val, test = (as_link_split(s, name, model)
                        for s, name in ((train, "train"), (val, "val"), (test, "test")))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=5e-4)

    def auc(split) -> float:
        with torch.no_grad():
            z = model(split.x, split.graph)
        return roc_auc(split.labels, model.layer_scores(z, split.pairs))

    best, since = (-1.0, None), 0
    for epoch in range(epochs):
        optimizer.zero_grad()
        model.layer_loss(model(train.x, train.graph), train.pairs, train.labels).backward()
        optimizer.step()
        if (epoch + 1) % every or epoch == 0:
            continue
        score = auc(val)
        best, since = ((score, copy.deepcopy(model.state_dict())), 0) if score > best[0] \
            else (best, since + 1)
        if since >= patience:
            break
    model.load_state_dict(best[1])
    return auc(test)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="helsinki")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    mean, std = dataset.x.mean(0), dataset.x.std(0).clamp_min(1e-6)
    dataset.x = (dataset.x - mean) / std  # (the City-Networks features span 1e-1 to 1e2)
    print(f"{args.dataset}: {dataset.graph.num_nodes} nodes, {dataset.graph.num_edges} edges; "
          f"{args.layers} layers of {args.hidden}, {torch.get_num_threads()} threads")
    print("| conv | procedure | test AUC (mean +- sd) | seconds per run |")
    print("|---|---|---:|---:|")
    for conv in ("gcn", "sage"):
        for procedure in ("fl", "ff", "top-down", "backprop"):
            aucs, seconds = [], []
            for seed in range(args.seeds):
                train, val, test = splits(dataset, seed)
                torch.manual_seed(seed)
                model = ForwardLinkGNN(conv, dataset.x.size(1), args.hidden, args.layers,
                                       procedure="fl" if procedure == "backprop" else procedure)
                start = time.perf_counter()
                if procedure == "backprop":
                    aucs.append(backprop(model, train, val, test))
                else:
                    aucs.append(train_forward_link_prediction(model, train, val,
                                                              test).test_auc[-1])
                seconds.append(time.perf_counter() - start)
            print(f"| {conv} | {procedure} | {100 * statistics.mean(aucs):.1f} +- "
                  f"{100 * statistics.stdev(aucs):.1f} | {statistics.mean(seconds):.1f} |")


if __name__ == "__main__":
    main()
