"""Writes ``data/lagnn_ogb_official.pt``: the official OGB models of LAGNN
(github.com/SongtaoLiu0823/LAGNN, ``OGB/lagcn_arxiv.py``'s ``LAGCN`` and
``OGB/lasage_arxiv.py``'s ``LASAGE``, on PyG's ``GCNConv`` and ``SAGEConv``) in evaluation
mode, run with the weights of graphloc ``LAModel``s (BatchNorm, no input dropout, 3 and 4
layers) copied in, on given generated features; ``test_aug.py`` compares graphloc's
forward with it. The layers after the branches are ``concat * hidden`` wide there. Not
run by the tests:

    python tests/nn/models/lagnn_ogb_oracle.py path/to/LAGNN

Needs torch and torch_geometric; the scripts' other imports (ogb, their argument parsing
and training) are not needed: the two classes are read from the files.
"""

import os
import sys

import torch
import torch.nn.functional as F
from official_runs import definition_from, write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "lagnn_ogb_official.pt")
N, FEATURES, HIDDEN, CLASSES = 30, 7, 4, 3
# (conv, official class, layers, generated branches, seed)
CASES = [("gcn", "LAGCN", 3, 1, 0), ("gcn", "LAGCN", 4, 2, 1), ("sage", "LASAGE", 3, 1, 2),
         ("sage", "LASAGE", 4, 1, 3)]
FILES = {"LAGCN": "lagcn_arxiv.py", "LASAGE": "lasage_arxiv.py"}


def _official(checkout: str) -> dict:
    from torch_geometric.nn import GCNConv, SAGEConv
    namespace = {"torch": torch, "F": F, "GCNConv": GCNConv, "SAGEConv": SAGEConv}
    return {name: definition_from(os.path.join(checkout, "OGB", path), name, namespace)
            for name, path in FILES.items()}


def _graph(seed: int, generated: int):
    """A symmetric graph without self-loops (``adj_t.to_symmetric()`` of a graph without
    them), with an isolated node, and continuous features."""
    gen = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, N - 1, (2, 70), generator=gen)
    edges = edges[:, edges[0] != edges[1]]
    edges = torch.cat([edges, edges.flip(0)], 1).unique(dim=1)
    x = torch.randn(N, FEATURES, dtype=torch.float64, generator=gen)
    draws = [torch.randn(N, FEATURES, dtype=torch.float64, generator=gen)
             for _ in range(generated)]
    return edges, x, draws


def _randomise_norms(model, seed: int) -> None:
    """BatchNorm statistics and affine weights away from their initial values, so that
    evaluation mode reads them."""
    gen = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            width = module.num_features
            module.running_mean.copy_(torch.randn(width, generator=gen))
            module.running_var.copy_(torch.rand(width, generator=gen) + 0.5)
            module.weight.data.copy_(torch.randn(width, generator=gen))
            module.bias.data.copy_(torch.randn(width, generator=gen))


def _permuted_rows(weight, generated: int):
    """A [out, (g + 1) * HIDDEN] weight of graphloc's input order [original, generated...]
    in the official's [generated..., original]."""
    blocks = weight.split(HIDDEN, dim=1)
    return torch.cat([*blocks[1:], blocks[0]], dim=1)


def _official_weights(model, generated: int) -> dict:
    """The official class's state dict from graphloc's: its first-layer lists hold the
    generated branches first and the original last, so the first conv after them reads
    its input columns in that order."""
    order = [*range(1, generated + 1), 0]
    weights = {}
    for k, branch in enumerate(order):
        for name, value in model.branches[branch].state_dict().items():
            weights[f"convs_initial.{k}.{name}"] = value
        for name, value in model.branch_norms[branch].state_dict().items():
            weights[f"bns_initial.{k}.{name}"] = value
    for i, conv in enumerate(model.rest.convs):
        for name, value in conv.state_dict().items():
            if i == 0 and name.endswith("weight") and value.dim() == 2:
                value = _permuted_rows(value, generated)
            weights[f"convs.{i}.{name}"] = value
    for i, norm in enumerate(model.rest.norms):
        for name, value in norm.state_dict().items():
            weights[f"bns.{i}.{name}"] = value
    return weights


def _case(official, conv: str, name: str, layers: int, generated: int, seed: int) -> dict:
    from graphloc.nn.models.aug import LAModel, LocalAugmenter
    edges, x, draws = _graph(seed, generated)
    torch.manual_seed(seed)
    augmenter = LocalAugmenter(FEATURES, 8, 4).double()
    model = LAModel(conv, FEATURES, HIDDEN, CLASSES, layers, augmenter=augmenter,
                    num_generated=generated, dropout=0.5, input_dropout=0.0,
                    norm="batch").double()
    _randomise_norms(model, seed)
    net = official[name](generated + 1, FEATURES, HIDDEN, CLASSES, layers, 0.5).double()
    net.load_state_dict(_official_weights(model, generated))
    model.eval()
    net.eval()
    with torch.no_grad():
        out = net(draws + [x], edges)
    return {"conv": conv, "layers": layers, "generated": generated, "edge_index": edges,
            "x": x, "draws": draws, "augmenter": augmenter.state_dict(),
            "model": model.state_dict(), "official": out}


def main(checkout: str) -> None:
    official = _official(checkout)
    write_fixture(FIXTURE, lambda *case: _case(official, *case), CASES)


if __name__ == "__main__":
    main(sys.argv[1])
