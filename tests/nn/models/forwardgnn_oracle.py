"""Writes ``data/forwardgnn_official.pt``: the official ForwardGNN node-classification
code's own training steps and predictions (github.com/facebookresearch/forwardgnn,
``src/forward_learning/nodeclass``: ``GNNLabelAppendingFF``, ``GNNVirtualNodeLabelAppendingFF``,
``GNNSingleForward``, ``GNNTop2InputSF``, ``GNNTop2LossSF``, built as its ``train_forward.py``
builds them with the arguments of its ``exp/nodeclass`` scripts), run with the initial
weights graphloc's ``fit`` builds copied in, on small graphs; ``test_forward.py`` trains
graphloc for the same number of steps and compares. Not run by the tests:

    python tests/nn/models/forwardgnn_oracle.py path/to/forwardgnn

Needs torch and torch-geometric (2.8 here). Modules the exercised code imports but never
calls (torch_scatter and torch_sparse for the cached convs, sklearn for link prediction
and the data splits)
are stand-ins that raise when called. The class nodes' features (the official draws them
from ``nn.Embedding``'s initialiser) are graphloc's, and the forward-forward negatives are
the official draw, stored for the test to give graphloc.
"""

import argparse
import os
import sys
import types

import torch
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "forwardgnn_official.pt")
N, F, HIDDEN, C, STEPS = 16, 5, 8, 3, 3
#: (procedure, conv, layers, seed); the official classes by procedure
CASES = [("ff", "gcn", 2, 0), ("ff", "sage", 2, 1), ("ff-vn", "gcn", 2, 2),
         ("sf", "gcn", 3, 3), ("sf", "gat", 2, 4), ("sf-top2input", "gcn", 3, 5),
         ("sf-top2input", "sage", 2, 6), ("sf-top2loss", "gcn", 3, 7),
         ("sf-top2loss", "sage", 2, 8)]
#: procedure -> (the ``--model`` prefix train_forward.py reads, the class it builds)
OFFICIAL_MODEL = {"ff": ("GNN_LA-", "GNNLabelAppendingFF"),
                  "ff-vn": ("GNN_VNLA-", "GNNVirtualNodeLabelAppendingFF"),
                  "sf": ("GNN_SingleForward-", "GNNSingleForward"),
                  "sf-top2input": ("GNN_Top2Input_SingleForward-", "GNNTop2InputSF"),
                  "sf-top2loss": ("GNN_Top2Loss_SingleForward-", "GNNTop2LossSF")}
OFFICIAL_CONV = {"gcn": "GCN", "sage": "SAGE", "gat": "GAT"}


def stand_ins() -> None:
    """Stand-ins for the packages the official code imports but these runs never call:
    each raises when called (``forwardgnn_link_oracle.py`` replaces scikit-learn's
    metrics, which its evaluation calls)."""
    import torch_geometric  # noqa: F401  (its optional-package flags read before the stand-ins)

    def unavailable(*args, **kwargs):
        raise RuntimeError("a stand-in was called")

    class StandIn(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return unavailable

    for name in ("torch_scatter", "torch_sparse", "sklearn", "sklearn.metrics",
                 "sklearn.model_selection"):
        sys.modules[name] = StandIn(name)


def _official(checkout: str):
    stand_ins()
    sys.path.insert(0, os.path.join(checkout, "src"))
    import forward_learning.nodeclass as nodeclass
    return nodeclass


def _args(procedure: str) -> argparse.Namespace:
    """``train_forward.py``'s arguments as the ``exp/nodeclass`` scripts set them, with
    early stopping off (patience -1) so that every layer takes exactly STEPS steps."""
    return argparse.Namespace(
        device=torch.device("cpu"), patience=-1, val_every=2, val_from=0, epochs=STEPS,
        append_label=None, temperature=1.0, grad_max_norm=1.0, ff_theta=2.0,
        num_negs=100, aug_edge_direction="bidirection", test_time_steps=10,
        storable_time_steps=list(range(10))[2:],
        alternating_update=procedure == "sf-top2input")


def _problem(seed: int):
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, N, (2, 40), generator=gen)
    edges = edges[:, edges[0] != edges[1]]
    edges = torch.cat([edges, edges.flip(0)], 1).unique(dim=1)
    x = torch.randn(N, F, generator=gen)
    y = torch.arange(N) % C  # every class present (the official augmenter asserts it)
    y = y[torch.randperm(N, generator=gen)]
    split = torch.randperm(N, generator=gen)
    masks = [torch.zeros(N, dtype=torch.bool) for _ in range(3)]
    for mask, part in zip(masks, split.tensor_split([7, 11]), strict=True):
        mask[part] = True
    return Data(x=x, y=y, edge_index=edges, train_mask=masks[0], val_mask=masks[1],
                test_mask=masks[2])


def _graphloc_model(procedure: str, conv: str, layers: int, seed: int):
    """The model ``fit`` builds for this config (``fit`` seeds torch with config.seed)."""
    from graphloc.train import TrainConfig, _build
    config = TrainConfig(model=conv, layers=layers, hidden=HIDDEN, dropout=0.0,
                         standardize=False, procedure=procedure, seed=seed)
    torch.manual_seed(seed)
    return _build(config, F, C)


def _trainable_layers(official) -> list:
    """The official network's conv layers (ff's also holds normalisation layers)."""
    return [m for m in official.layers if hasattr(m, "gnn_layer")]


def _copy_weights(official, model) -> None:
    """graphloc's conv j into the official network's j-th trainable layer (PyG's names)."""
    for layer, conv in zip(_trainable_layers(official), model.convs, strict=True):
        layer.gnn_layer.gnn.load_state_dict(conv.state_dict())


def _use_class_features(nodeclass, class_x: torch.Tensor) -> None:
    """Every GraphAugmenter gets graphloc's class-node features instead of its draw."""
    for module in (nodeclass.gnn_ff_with_virtual_nodes, nodeclass.gnn_sf,
                   nodeclass.gnn_top2input_sf, nodeclass.gnn_top2loss_sf):
        augmenter = module.GraphAugmenter
        original = getattr(augmenter, "_original_init", augmenter.__init__)

        def init(self, *args, _original=original, **kwargs):
            _original(self, *args, **kwargs)
            self.virtual_node_feats = class_x.clone()
            self.aug_x = torch.cat([self.x, self.virtual_node_feats])

        augmenter._original_init = original
        augmenter.__init__ = init


def _negatives(official, procedure: str, data) -> torch.Tensor:
    """[N, C - 1] the wrong classes the official draw gives each node, in order (the
    torch random state is restored, so its own forward_train draws them again)."""
    state = torch.get_rng_state()
    if procedure == "ff":
        _, negs = official.label_appender.append_for_train(data.x, data.y, data.train_mask,
                                                            num_negs=C - 1)
        wrong = torch.stack([neg[:, F:].argmax(1) for neg in negs], 1)
    else:
        module = sys.modules[type(official).__module__]
        official.graph_augmenter = module.GraphAugmenter(
            data=data, aug_edge_direction="bidirection", append_label=None,
            device=torch.device("cpu"))
        _, graphs = official.create_pos_and_neg_graphs(C - 1, data.train_mask)
        wrong = torch.stack([g.edge_index[1, data.edge_index.size(1):][
            :int(data.train_mask.sum())] - N for g in graphs], 1)
        full = torch.full((N, C - 1), -1)
        full[data.train_mask] = wrong
        wrong = full
    torch.set_rng_state(state)
    return wrong.masked_fill(~data.train_mask[:, None], -1)


class _Results:
    def save_run_result(self, *args, **kwargs):
        pass


def _scores(official, procedure: str, data) -> torch.Tensor:
    """The official evaluation on the validation nodes: ff and ff-vn's per-class summed
    goodness [N, C] (training labels as context), the others' summed probabilities."""
    if procedure in ("ff", "ff-vn"):
        _, goodness = official.eval_model(data, train_mask=data.train_mask,
                                          eval_mask=data.val_mask, print_eval=False)
        return torch.cat(goodness, 1)
    _, probs = official.eval_model(eval_mask=data.val_mask)
    return sum(probs)


def run_case(procedure: str, conv: str, layers: int, seed: int) -> dict:
    nodeclass = _official(sys.argv[1])
    from train_forward import build_node_classification_model
    data = _problem(seed)
    model = _graphloc_model(procedure, conv, layers, seed)
    _use_class_features(nodeclass, model.class_x)
    args = _args(procedure)
    prefix, class_name = OFFICIAL_MODEL[procedure]
    data.num_classes = C
    official = build_node_classification_model(
        prefix + OFFICIAL_CONV[conv], layers, HIDDEN, "forwardforward_loss_fn", 1e-3, data,
        args)
    assert type(official).__name__ == class_name
    _copy_weights(official, model)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(seed)
    negatives = _negatives(official, procedure, data) if procedure.startswith("ff") else None
    official.forward_train(data, _Results(), 0)
    trained = [{k: v.detach().clone() for k, v in layer.gnn_layer.gnn.state_dict().items()}
               for layer in _trainable_layers(official)]
    with torch.no_grad():
        scores = _scores(official, procedure, data)
    return {"case": (procedure, conv, layers, seed), "data": data.to_dict(),
            "initial": initial, "negatives": negatives, "steps": STEPS,
            "trained": trained, "scores": scores.detach().clone()}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
