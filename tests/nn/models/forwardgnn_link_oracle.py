"""Writes ``data/forwardgnn_link_official.pt``: the official ForwardGNN link-prediction
code's own training (github.com/facebookresearch/forwardgnn,
``src/forward_learning/linkpred/gnn_forward.py``: ``GNNForward.forward_train``, built as
``train_forward.py``'s ``build_link_prediction_model`` builds it for ``GNN_FL-FF-<gnn>``
and ``GNN_FL-<gnn>``), run with the initial weights of graphloc's ``ForwardLinkGNN``
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
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "forwardgnn_link_official.pt")
N, F, HIDDEN = 40, 6, 8
#: (procedure, conv, layers, seed, epochs, val_every, patience)
CASES = [("ff", "gcn", 2, 0, 12, 2, 2), ("fl", "sage", 2, 1, 12, 2, 2),
         ("ff", "gat", 2, 2, 8, 2, 30), ("fl", "gcn", 3, 3, 10, 3, 1),
         ("ff", "sage", 1, 4, 6, 1, 3), ("fl", "gat", 1, 5, 5, 1, -1)]
OFFICIAL_CONV = {"gcn": "GCN", "sage": "SAGE", "gat": "GAT"}


def pairwise_auc(y_true, y_score) -> float:
    """The ROC AUC by counting: every positive against every negative, ties one half."""
    positives = [s for s, y in zip(y_score, y_true, strict=True) if y == 1]
    negatives = [s for s, y in zip(y_score, y_true, strict=True) if y == 0]
    wins = sum((p > q) + 0.5 * (p == q) for p in positives for q in negatives)
    return float(wins) / (len(positives) * len(negatives))


def _stand_ins() -> None:
    import torch_geometric  # noqa: F401  (its optional-package flags read before the stand-ins)

    def unavailable(*args, **kwargs):
        raise RuntimeError("a stand-in was called")

    class StandIn(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return unavailable

    for name in ("torch_scatter", "torch_sparse", "sklearn", "sklearn.model_selection"):
        sys.modules[name] = StandIn(name)
    metrics = types.ModuleType("sklearn.metrics")
    metrics.roc_auc_score = pairwise_auc
    metrics.average_precision_score = lambda *args: 0.0
    metrics.ndcg_score = lambda *args, **kwargs: 0.0
    sys.modules["sklearn.metrics"] = metrics


def _official(checkout: str):
    _stand_ins()
    sys.path.insert(0, os.path.join(checkout, "src"))
    from forward_learning.linkpred import GNNForward
    return GNNForward


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


def run_case(procedure, conv, layers, seed, epochs, val_every, patience) -> dict:
    from graphloc.nn.models.forward_link import ForwardLinkGNN
    GNNForward = _official(sys.argv[1])
    train, val, test = _splits(seed)
    torch.manual_seed(seed)
    ours = ForwardLinkGNN(conv, F, HIDDEN, layers, procedure=procedure)
    initial = ours.state_dict()
    args = argparse.Namespace(device=torch.device("cpu"), ff_theta=2.0, patience=patience,
                              val_every=val_every, val_from=0, epochs=epochs)
    official = GNNForward([F] + [HIDDEN] * layers, "Adam", {"lr": 1e-3, "weight_decay": 5e-4},
                          "FF" if procedure == "ff" else "FL", OFFICIAL_CONV[conv], args)
    for j in range(layers):  # official layer 2j is the normalisation, 2j + 1 the GNN
        official.layers[2 * j + 1].gnn_layer.gnn.load_state_dict(
            {k[len(f"convs.{j}."):]: v for k, v in initial.items() if k.startswith(f"convs.{j}.")})

    class Results:
        test_auc = []

        def save_run_result(self, run_i, perf_dict, num_layers):
            self.test_auc.append(perf_dict["perf"])
            self.epochs, self.best_epochs = (perf_dict["train_epochs"],
                                             perf_dict["best_val_epochs"])

    results = Results()
    official.forward_train(train, val, test, results, 0)
    _, test_scores = official.eval_model(test, print_eval=False)  # the whole network's
    trained = {f"convs.{j}.{k}": v.clone() for j in range(layers)
               for k, v in official.layers[2 * j + 1].gnn_layer.gnn.state_dict().items()}
    return {"case": (procedure, conv, layers, seed, epochs, val_every, patience),
            "initial": initial, "trained": trained, "test_auc": results.test_auc,
            "test_scores": test_scores, "last_epochs": results.epochs,
            "best_epochs": results.best_epochs,
            "splits": [{key: getattr(s, key) for key in
                        ("x", "edge_index", "edge_label_index", "edge_label")}
                       for s in (train, val, test)]}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
