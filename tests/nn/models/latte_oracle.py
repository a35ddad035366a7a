"""Writes ``data/latte_official.pt``: the official LATTE's own forward, proximity loss and
gradients (github.com/JonnyTran/LATTE: ``conv.LATTE`` with the hyperparameters of its
``run.py`` and the classifier ``models.DenseClassification``, as ``models.LATTENodeClf``
builds them) run with graphloc ``LATTE`` weights copied in, on small heterogeneous graphs;
``test_latte.py`` compares graphloc with them. Not run by the tests:

    python tests/nn/models/latte_oracle.py path/to/LATTE

Needs torch and torch-geometric (2.8 here). The repository was written for PyG 1.7, whose
``MessagePassing`` pairs a tuple ``x=(x_j, x_i)`` with ``size=(N_j, N_i)`` under
``flow="target_to_source"``; PyG 2 reads those tuples the other way round, so the run
swaps them before PyG 2.8's ``propagate`` (the PyG 1.7 call, unchanged). Other stand-ins:
``pytorch_lightning.LightningModule`` (a plain module), ``pandas.DataFrame`` (the saved
relation weights, never read here), and ``torch_sparse``'s ``SparseTensor`` for the
meta-path join (``A @ D @ B`` on torch's sparse tensors). Two things the released code
does not do as ``run.py`` configures it are set by hand, and listed in docs/models.md:
``LATTENodeClf`` passes neither ``layer_pooling`` nor ``edge_sampling`` to ``LATTE``, so
a two-layer model raises in its forward (``layer_pooling=False``); the run sets
``run.py``'s "concat" and its ``edge_sampling=False``. The proximity loss's negatives are
drawn by a seeded stand-in for ``negative_sample`` and stored for the test.
"""

import argparse
import os
import sys
import types

import torch
from official_runs import definition_from, write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "latte_official.pt")
HIDDEN, HEADS, CLASSES, FEAT = 8, 2, 3, 5
NODES = {"paper": 14, "author": 9, "subject": 3}
#: graphloc relations (src, name, dst); the official meta-path of one is (dst, name, src)
RELATIONS = [("author", "writes", "paper"), ("paper", "by", "author"),
             ("subject", "has", "paper"), ("paper", "in", "subject")]
CASES = [(1, False, 0), (2, False, 1), (2, True, 2), (3, True, 3)]  # layers, proximity, seed


def official_path(path) -> tuple:
    """graphloc's meta-path (relations head first, each (src, name, dst)) as the
    official tuple (head type, name, type, name, ..., tail type)."""
    out = (path[0][2],)
    for src, name, _ in path:
        out += (name, src)
    return out


class _SparseTensor:
    """torch_sparse's SparseTensor as ``adamic_adar`` uses it (duplicates summed)."""

    def __init__(self, row, col, value, sparse_sizes, is_sorted=False):
        self.t = torch.sparse_coo_tensor(torch.stack([row, col]), value,
                                         sparse_sizes).coalesce()

    def sum(self, dim):
        return torch.sparse.sum(self.t, dim).to_dense()

    def __matmul__(self, other):
        out = _SparseTensor.__new__(_SparseTensor)
        out.t = torch.sparse.mm(self.t, other.t).coalesce()
        return out

    def coo(self):
        row, col = self.t.indices()
        return row, col, self.t.values()


def _stand_ins() -> None:
    import torch_geometric  # noqa: F401  (its optional-package flags read before the stand-ins)
    lightning = types.ModuleType("pytorch_lightning")
    lightning.LightningModule = type("LightningModule", (torch.nn.Module,), {})
    sys.modules["pytorch_lightning"] = lightning
    pandas = types.ModuleType("pandas")
    pandas.DataFrame = lambda *args, **kwargs: None
    sys.modules["pandas"] = pandas
    sparse = types.ModuleType("torch_sparse")
    sparse_tensor = types.ModuleType("torch_sparse.tensor")
    sparse_tensor.SparseTensor = _SparseTensor
    sparse.tensor = sparse_tensor
    sys.modules["torch_sparse"], sys.modules["torch_sparse.tensor"] = sparse, sparse_tensor


def _pyg17_propagate(cls) -> None:
    """PyG 1.7's reading of the tuples under flow="target_to_source" on PyG 2.8."""
    if hasattr(cls, "_pyg2_propagate"):
        return
    propagate = cls._pyg2_propagate = cls.propagate

    def swapped(self, edge_index, size=None, **kwargs):
        kwargs = {k: tuple(reversed(v)) if isinstance(v, tuple) else v
                  for k, v in kwargs.items()}
        return propagate(self, edge_index, size=tuple(reversed(size)), **kwargs)

    cls.propagate = swapped


def _official(checkout: str):
    _stand_ins()
    sys.path.insert(0, checkout)
    from collections import OrderedDict

    import conv
    from torch_geometric.nn.inits import glorot
    _pyg17_propagate(conv.LATTEConv)
    dense = definition_from(os.path.join(checkout, "models.py"), "DenseClassification",
                        {"nn": torch.nn, "torch": torch, "OrderedDict": OrderedDict,
                         "glorot": glorot})
    return conv, dense


def _hparams(layers: int, proximity: bool) -> argparse.Namespace:
    """run.py's LATTE hyperparameters (dropouts 0 here, so that training-mode forwards,
    where the proximity loss and the gradients are taken, are deterministic)."""
    return argparse.Namespace(
        embedding_dim=HIDDEN, layer_pooling="concat", n_layers=layers, nb_cls_dense_size=0,
        nb_cls_dropout=0.0, activation="relu", dropout=0.0, attn_heads=HEADS,
        attn_activation="sharpening", batchnorm=False, layernorm=False,
        edge_sampling=False, edge_threshold=0.5, attn_dropout=0.0,
        loss_type="SOFTMAX_CROSS_ENTROPY", use_proximity=proximity, neg_sampling_ratio=2.0,
        n_classes=CLASSES)


def _graph(seed: int):
    from graphloc.hetero import HeteroGraph
    gen = torch.Generator().manual_seed(seed)
    writes = torch.stack([torch.randint(0, NODES["author"], (22,), generator=gen),
                          torch.randint(0, NODES["paper"], (22,), generator=gen)])
    subject = torch.randint(0, NODES["subject"], (NODES["paper"],), generator=gen)
    has = torch.stack([subject, torch.arange(NODES["paper"])])
    edges = {RELATIONS[0]: writes, RELATIONS[1]: writes.flip(0), RELATIONS[2]: has,
             RELATIONS[3]: has.flip(0)}
    x = {t: torch.randn(n, FEAT, generator=gen, dtype=torch.float64) for t, n in NODES.items()}
    y = torch.randint(0, CLASSES, (NODES["paper"],), generator=gen)
    return HeteroGraph(dict(NODES), edges), edges, x, y


def _graphloc_model(layers: int, proximity: bool, seed: int):
    from graphloc.nn.models.latte import LATTE
    torch.manual_seed(seed)
    metadata = (list(NODES), RELATIONS)
    return LATTE(dict.fromkeys(NODES, FEAT), HIDDEN, CLASSES, layers, metadata, "paper",
                 heads=HEADS, dropout=0.0, attn_dropout=0.0, classifier_dropout=0.0,
                 proximity=proximity).double()


def _copy_weights(official, classifier, model) -> None:
    from graphloc.nn.conv.latte import path_name
    with torch.no_grad():
        for t in NODES:
            official.feature_projection[t].load_state_dict(model.project[t].state_dict())
        for layer, conv in zip(official.layers, model.convs, strict=True):
            assert layer.metapaths == [official_path(p) for p in conv.paths]
            for t in NODES:
                layer.linear_l[t].load_state_dict(conv.left[t].state_dict())
                layer.linear_r[t].load_state_dict(conv.right[t].state_dict())
                layer.conv[t].weight.copy_(conv.beta[t].weight[:, :, None])
                layer.conv[t].bias.copy_(conv.beta[t].bias)
            for i, path in enumerate(conv.paths):
                layer.attn_l[i].copy_(conv.att_left[path_name(path)])
                layer.attn_r[i].copy_(conv.att_right[path_name(path)])
                layer.alpha_activation[i] = conv.sharpening[path_name(path)]
        classifier.fc_classifier.linear.load_state_dict(model.classifier[1].state_dict())


def _official_gradients(official, classifier, model) -> dict:
    """The official gradients under graphloc's parameter names."""
    from graphloc.nn.conv.latte import path_name
    grads = {}
    for t in NODES:
        for k in ("weight", "bias"):
            grads[f"project.{t}.{k}"] = getattr(official.feature_projection[t], k).grad
    for depth, (layer, conv) in enumerate(zip(official.layers, model.convs, strict=True)):
        for t in NODES:
            for k in ("weight", "bias"):
                grads[f"convs.{depth}.left.{t}.{k}"] = getattr(layer.linear_l[t], k).grad
                grads[f"convs.{depth}.right.{t}.{k}"] = getattr(layer.linear_r[t], k).grad
            weight = layer.conv[t].weight.grad
            grads[f"convs.{depth}.beta.{t}.weight"] = None if weight is None else weight[:, :, 0]
            grads[f"convs.{depth}.beta.{t}.bias"] = layer.conv[t].bias.grad
        for i, path in enumerate(conv.paths):
            name = path_name(path)
            grads[f"convs.{depth}.att_left.{name}"] = layer.attn_l.grad[i]
            grads[f"convs.{depth}.att_right.{name}"] = layer.attn_r.grad[i]
            grads[f"convs.{depth}.sharpening.{name}"] = layer.alpha_activation.grad[i]
    for k in ("weight", "bias"):
        grads[f"classifier.1.{k}"] = getattr(classifier.fc_classifier.linear, k).grad
    return {k: v.clone() for k, v in grads.items() if v is not None}  # None: unused


def _seeded_negatives(conv, seed: int, drawn: dict):
    """``negative_sample``'s draw (distinct uniform non-edges, E x ratio of them) from a
    generator seeded by the case and the graph, so that two meta-paths with the same
    edges draw the same; each draw is kept under its graph (graphloc's direction)."""
    def negative_sample(edge_index, M, N, n_sample_per_edge):
        key = (M, N, *edge_index.flip(0).flatten().tolist())
        gen = torch.Generator().manual_seed(seed * 1_000_003 + hash(key) % 2**31)
        count = int(min(edge_index.size(1) * n_sample_per_edge, M * N - edge_index.size(1)))
        taken = set((edge_index[0] * N + edge_index[1]).tolist())
        free = torch.tensor([k for k in range(M * N) if k not in taken])
        pick = free[torch.randperm(free.numel(), generator=gen)[:count]]
        neg = torch.stack([pick // N, pick % N])
        drawn[key] = neg.flip(0)
        return neg

    conv.negative_sample = negative_sample


def run_case(layers: int, proximity: bool, seed: int) -> dict:
    conv, dense = _official(sys.argv[1])
    graph, edges, x, y = _graph(seed)
    model = _graphloc_model(layers, proximity, seed)
    hparams = _hparams(layers, proximity)
    metapaths = [official_path((r,)) for r in RELATIONS]
    torch.set_default_dtype(torch.float64)
    official = conv.LATTE(layers, HIDDEN, dict.fromkeys(NODES, FEAT), dict(NODES), metapaths,
                          activation="relu", attn_heads=HEADS, attn_activation="sharpening",
                          attn_dropout=0.0, use_proximity=proximity, neg_sampling_ratio=2.0,
                          hparams=hparams)
    classifier = dense(argparse.Namespace(**{**vars(hparams),
                                             "embedding_dim": HIDDEN * layers}))
    torch.set_default_dtype(torch.float32)
    official.layer_pooling, official.edge_sampling = "concat", False  # run.py's values
    _copy_weights(official, classifier, model)
    edge_index_dict = {official_path((r,)): e.flip(0) for r, e in edges.items()}
    index = {t: torch.arange(n) for t, n in NODES.items()}
    drawn = {}
    _seeded_negatives(conv, seed, drawn)
    official.train()
    embeddings, proximity_loss, _ = official(x, edge_index_dict, index)
    logits = classifier(embeddings["paper"])
    loss = torch.nn.functional.cross_entropy(logits, y)
    if proximity:
        loss = loss + proximity_loss
    loss.backward()
    return {"case": (layers, proximity, seed), "weights": model.state_dict(), "x": x,
            "edges": edges, "y": y, "logits": logits.detach(), "loss": loss.detach(),
            "proximity": proximity_loss.detach() if proximity else None,
            "negatives": drawn, "grads": _official_gradients(official, classifier, model)}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
