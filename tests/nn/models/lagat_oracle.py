"""Writes ``data/lagat_official.pt``: the official LAGAT's evaluation forward
(github.com/SongtaoLiu0823/LAGNN, ``Citation/lagat.py``'s ``LAGAT`` on PyG's ``GATConv``,
with its argument defaults: 8 heads, one output head, ELU with alpha 0.2), its inputs as
the script makes them: the original branch reads ``utils.normalize_features(features)``,
each generated one ``cvae_models.VAE.inference`` of the raw 0/1 features row-normalised by
``cvae_pretrain.feature_tensor_normalize``. Run with the weights of a graphloc ``la-gat``
``LAModel`` and ``LocalAugmenter`` copied in, on small graphs; ``test_aug.py`` compares
graphloc's forward with it. Not run by the tests:

    python tests/nn/models/lagat_oracle.py path/to/LAGNN

Needs torch, numpy, scipy and torch_geometric; the script's data loading, argument
parsing and training are not run: the class is read from the file, with ``args`` set to
the parser's defaults it reads.
"""

import os
import sys
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from lagcn_oracle import _graph, citation_case
from official_runs import definition_from, write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "lagat_official.pt")
FEATURES, CLASSES, LATENT, CVAE_HIDDEN = 6, 3, 4, 8
# the parser's defaults that LAGAT reads (--hidden is per head)
ARGS = SimpleNamespace(hidden=2, nb_heads=8, nb_heads_2=1, dropout=0.6, alpha=0.2)
CASES = [(1, 0), (2, 1)]  # (generated branches, seed)


def _official(checkout: str):
    citation = os.path.join(checkout, "Citation")
    sys.path.insert(0, citation)
    import utils
    from cvae_models import VAE
    from torch_geometric.nn import GATConv
    namespace = {"torch": torch, "nn": torch.nn, "F": F, "GATConv": GATConv, "args": ARGS}
    lagat = definition_from(os.path.join(citation, "lagat.py"), "LAGAT", namespace)
    normalize = definition_from(os.path.join(citation, "cvae_pretrain.py"),
                                "feature_tensor_normalize", {"torch": torch})
    return utils, VAE, lagat, normalize


def _lagat_weights(model, generated: int) -> dict:
    """The official names: its branch list holds the generated branches first and the
    original last, so conv2 reads its input columns in that order."""
    width = ARGS.hidden * ARGS.nb_heads
    order = [*range(1, generated + 1), 0]
    weights = {}
    for k, branch in enumerate(order):
        for name, value in model.branches[branch].state_dict().items():
            weights[f"gcn1_list.{k}.{name}"] = value
    for name, value in model.rest.convs[0].state_dict().items():
        if name == "lin.weight":
            blocks = value.split(width, dim=1)
            value = torch.cat([*blocks[1:], blocks[0]], dim=1)
        weights[f"conv2.{name}"] = value
    return weights


def _case(official, generated: int, seed: int) -> dict:
    from graphloc.nn.models.aug import LAModel, LocalAugmenter
    edges, x = _graph(seed)
    torch.manual_seed(seed)
    aug = LocalAugmenter(FEATURES, CVAE_HIDDEN, LATENT, likelihood="bernoulli").double()
    model = LAModel("gat", FEATURES, ARGS.hidden * ARGS.nb_heads, CLASSES, 2, augmenter=aug,
                    num_generated=generated, dropout=0.6).double()
    net = official[2](generated + 1, FEATURES, CLASSES).double()
    net.load_state_dict(_lagat_weights(model, generated))
    return citation_case(official, aug, model, net, edges, x, generated, seed, edges)


def main(checkout: str) -> None:
    official = _official(checkout)
    write_fixture(FIXTURE, lambda *case: _case(official, *case), CASES)


if __name__ == "__main__":
    main(sys.argv[1])
