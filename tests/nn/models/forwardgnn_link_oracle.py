"""Writes ``data/forwardgnn_link_official.pt``: the official ForwardGNN link-prediction
code's own training (github.com/facebookresearch/forwardgnn, ``src/forward_learning/
linkpred``: ``GNNForward.forward_train`` and ``GNNTowDownForward.forward_train``, built as
``train_forward.py``'s ``build_link_prediction_model`` builds them for ``GNN_FL-FF-<gnn>``,
``GNN_FL-<gnn>`` and ``GNN_FL-CE-TopDown-<gnn>``), then its test evaluation
(``eval_model``, as its ``main`` runs it), with the initial weights of graphloc's
``ForwardLinkGNN``
copied in, on small graphs split by PyG's ``RandomLinkSplit`` as the official
``datasplit.py`` splits them; ``test_forward_link.py`` trains graphloc on the same splits
and compares the weights and the per-layer test AUCs. Not run by the tests:

    python tests/nn/models/forwardgnn_link_oracle.py path/to/forwardgnn

Needs torch and torch-geometric (2.8 here). torch_scatter and torch_sparse (the cached
convs, never called here) are stand-ins that raise when called; scikit-learn's metrics,
which ``eval_link_prediction`` calls, are stand-ins too: the ROC AUC by counting every
(positive, negative) pair of scores, ties one half; average precision and NDCG (computed
by the official evaluation, never read by its training) 0.
"""

import argparse
import os
import random
import sys
import types

import torch
from forwardgnn_oracle import stand_ins
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "forwardgnn_link_official.pt")
N, F, HIDDEN = 40, 6, 8
#: (procedure, conv, layers, seed, epochs, val_every, patience, alternating_update)
CASES = [("ff", "gcn", 2, 0, 12, 2, 2, False), ("fl", "sage", 2, 1, 12, 2, 2, False),
         ("ff", "gat", 2, 2, 8, 2, 30, False), ("fl", "gcn", 3, 3, 10, 3, 1, False),
         ("ff", "sage", 1, 4, 6, 1, 3, False), ("fl", "gat", 1, 5, 5, 1, -1, False),
         ("top-down", "gcn", 2, 6, 10, 2, 2, True), ("top-down", "sage", 3, 7, 8, 2, -1, False),
         ("top-down", "gat", 1, 8, 6, 1, 2, True), ("top-down", "gcn", 4, 9, 6, 2, 1, True)]
OFFICIAL_CONV = {"gcn": "GCN", "sage": "SAGE", "gat": "GAT"}


def pairwise_auc(y_true, y_score) -> float:
    """The ROC AUC by counting: every positive against every negative, ties one half."""
    positives = [s for s, y in zip(y_score, y_true, strict=True) if y == 1]
    negatives = [s for s, y in zip(y_score, y_true, strict=True) if y == 0]
    wins = sum((p > q) + 0.5 * (p == q) for p in positives for q in negatives)
    return float(wins) / (len(positives) * len(negatives))


def _stand_ins_with_metrics() -> None:
    """``forwardgnn_oracle``'s stand-ins, and scikit-learn's metrics by counting."""
    stand_ins()
    metrics = types.ModuleType("sklearn.metrics")
    metrics.roc_auc_score = pairwise_auc
    metrics.average_precision_score = lambda *args: 0.0
    metrics.ndcg_score = lambda *args, **kwargs: 0.0
    sys.modules["sklearn.metrics"] = metrics


def _official(checkout: str):
    _stand_ins_with_metrics()
    sys.path.insert(0, os.path.join(checkout, "src"))
    import forward_learning.linkpred as linkpred
    return linkpred


def _splits(seed: int):
    """A random undirected graph split as the official ``datasplit.py`` splits one."""
    from torch_geometric.data import Data
    from torch_geometric.transforms import RandomLinkSplit
    gen = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, N, (2, 120), generator=gen)
    edges = edges[:, edges[0] != edges[1]]
    edges = torch.cat([edges, edges.flip(0)], 1).unique(dim=1)
    data = Data(x=torch.randn(N, F, generator=gen), edge_index=edges)
    random.seed(seed)  # (PyG's negative sampling draws from Python's generator)
    torch.manual_seed(seed)
    return RandomLinkSplit(is_undirected=True, num_val=0.16, num_test=0.2,
                           neg_sampling_ratio=1.0, split_labels=False)(data)


def _official_model(linkpred, procedure, conv, layers, args):
    """The network ``build_link_prediction_model`` builds, and its GNN layers in order."""
    sizes = [F] + [HIDDEN] * layers
    if procedure == "top-down":
        official = linkpred.GNNTowDownForward(sizes + [0], "Adam", {"lr": 1e-3},
                                              "forwardforward_loss_fn", OFFICIAL_CONV[conv],
                                              args)
        return official, [layer.gnn_layer.gnn for layer in official.layers]
    official = linkpred.GNNForward(sizes, "Adam", {"lr": 1e-3, "weight_decay": 5e-4},
                                   "FF" if procedure == "ff" else "FL", OFFICIAL_CONV[conv],
                                   args)
    # official layer 2j is the normalisation, 2j + 1 the GNN
    return official, [official.layers[2 * j + 1].gnn_layer.gnn for j in range(layers)]


def run_case(procedure, conv, layers, seed, epochs, val_every, patience, alternating) -> dict:
    from graphloc.nn.models.forward_link import ForwardLinkGNN
    linkpred = _official(sys.argv[1])
    train, val, test = _splits(seed)
    torch.manual_seed(seed)
    ours = ForwardLinkGNN(conv, F, HIDDEN, layers, procedure=procedure,
                          alternating_update=alternating)
    initial = ours.state_dict()
    args = argparse.Namespace(device=torch.device("cpu"), ff_theta=2.0, patience=patience,
                              val_every=val_every, val_from=0, epochs=epochs,
                              alternating_update=alternating, test_time_steps=10,
                              storable_time_steps=list(range(10))[2:])
    official, gnns = _official_model(linkpred, procedure, conv, layers, args)
    for j, gnn in enumerate(gnns):
        gnn.load_state_dict({k[len(f"convs.{j}."):]: v for k, v in initial.items()
                             if k.startswith(f"convs.{j}.")})

    class Results:
        test_auc, epochs, best_epochs = [], None, None

        def save_run_result(self, run_i, perf_dict, num_layers):
            self.test_auc.append(perf_dict["perf"])
            self.epochs, self.best_epochs = (perf_dict["train_epochs"],
                                             perf_dict["best_val_epochs"])

    results = Results()
    returned = official.forward_train(train, val, test, results, 0)
    test_auc, test_scores = official.eval_model(test)  # the whole network, as main() does
    if procedure == "top-down":  # (it reports to main(), not to the result manager)
        results.test_auc = [test_auc]
        results.epochs, results.best_epochs = (returned["train_epochs"],
                                               returned["best_val_epochs"])
    trained = {f"convs.{j}.{k}": v.clone() for j, gnn in enumerate(gnns)
               for k, v in gnn.state_dict().items()}
    return {"case": (procedure, conv, layers, seed, epochs, val_every, patience, alternating),
            "initial": initial, "trained": trained, "test_auc": results.test_auc,
            "test_scores": test_scores, "last_epochs": results.epochs,
            "best_epochs": results.best_epochs,
            "splits": [{key: getattr(s, key) for key in
                        ("x", "edge_index", "edge_label_index", "edge_label")}
                       for s in (train, val, test)]}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
