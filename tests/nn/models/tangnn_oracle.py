"""Writes ``data/tangnn_official.pt``: the released TANGNN (github.com/ejwww/TANGNN, class
``CustomGNN`` of ``TANGNN/TANGNN``, the base model, and of ``TANGNN/TANGNN-LC``) run with
graphloc ``TANGNNReleased`` weights loaded as they are (the same module names), in eval
mode, on directed graphs with self-loops, parallel edges and an isolated node whose
out-degrees stay within the sample sizes (so the released sampler keeps every edge and the
run is deterministic); the log-probabilities and the gradients of the features and of every
parameter. ``test_tangnn.py`` compares graphloc with it. Not run by the tests:

    python tests/nn/models/tangnn_oracle.py path/to/TANGNN

Needs torch and torch-geometric (2.8 here): the classes are compiled alone from the files,
in float64 (the released code makes its all-ones vector in the default dtype).
"""

import contextlib
import io
import os
import sys
from types import SimpleNamespace

import torch
from official_runs import definition_from, write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "tangnn_official.pt")
N, HIDDEN, CLASSES = 24, 8, 3
CASES = [("base", 2, 5, 4, 0), ("base", 3, 8, 30, 1), ("base", 1, 5, 3, 2),
         ("lc", 2, 5, 6, 3), ("lc", 2, 8, 5, 4)]
# (variant, layers, in_channels, m, seed); in_channels 8 = HIDDEN: the learned a is used
FILES = {"base": "TANGNN", "lc": "TANGNN-LC", "nai": "TANGNN-NAI", "tai": "TANGNN-TAI",
         "flc": "TANGNN-FLC"}
# the NAI, TAI and FLC files (TANGNNReleasedPooled, TANGNNReleasedFLC), written to
# data/tangnn_official_variants.pt: (variant, layers, in_channels, m, seed); FLC's layers
# are its encoder's, and its m is the released 1 (any other fails in the released code)
VARIANTS_FIXTURE = os.path.join(HERE, "data", "tangnn_official_variants.pt")
VARIANT_CASES = [("nai", 2, 5, 4, 0), ("nai", 1, 8, 30, 1), ("tai", 2, 5, 6, 2),
                 ("tai", 3, 8, 5, 3), ("flc", 3, 5, 1, 4), ("flc", 1, 8, 1, 5)]
NAN_FIXTURE = os.path.join(HERE, "data", "tangnn_official_nan.pt")
# (variant, layers, in_channels, m, seed, the node with a NaN feature): one with edges, the
# isolated one
NAN_CASES = [("base", 2, 5, 4, 0, 4), ("base", 2, 8, 5, 1, N - 1), ("lc", 2, 5, 6, 3, 4)]
CLASSES_NEEDED = ["GraphSAGENet", "TransformerLayer", "MultiLayerTransformer",
                  "DimensionAdjustmentLayer", "CustomGNN"]


def _official_class(checkout: str, variant: str):
    import torch.nn as nn
    import torch.nn.functional as functional
    from torch_geometric.nn import SAGEConv
    namespace = {"nn": nn, "F": functional, "SAGEConv": SAGEConv, "torch": torch}
    path = os.path.join(checkout, "TANGNN", FILES[variant])
    needed = CLASSES_NEEDED if variant in ("base", "lc") else \
        [c for c in CLASSES_NEEDED if c != "DimensionAdjustmentLayer"]
    for name in needed:
        definition_from(path, name, namespace)
    return namespace["CustomGNN"]


def _graph(seed: int, width: int):
    """Out-degrees of at most 5 (the first block's sample size: 0 to 3 drawn, node 4 gets
    two more); node N - 1 has no edge; a loop and a repeated pair are added. Positive
    features (as Cora's), so no two scores tie at 0 and the selection's order is fixed."""
    gen = torch.Generator().manual_seed(seed)
    sources = [s for s in range(N - 1) for _ in range(int(torch.randint(0, 4, (1,),
                                                                          generator=gen)))]
    src = torch.tensor(sources + [3, 4, 4])
    dst = torch.cat([torch.randint(0, N - 1, (len(sources),), generator=gen),
                     torch.tensor([3, 6, 6])])
    return torch.stack([src, dst]), torch.rand(N, width, generator=gen) + 0.1


def _graphloc_model(variant: str, layers: int, width: int, m: int):
    from graphloc.nn.models.tangnn import (
        TANGNNReleased,
        TANGNNReleasedFLC,
        TANGNNReleasedPooled,
    )
    if variant == "flc":
        return TANGNNReleasedFLC(width, HIDDEN, CLASSES, num_layers=layers)
    cls = TANGNNReleased if variant in ("base", "lc") else TANGNNReleasedPooled
    return cls(width, HIDDEN, CLASSES, num_layers=layers, m=m, variant=variant)


def run_case(variant: str, layers: int, width: int, m: int, seed: int) -> dict:
    official_class = _official_class(sys.argv[1], variant)
    edge_index, x = _graph(seed, width)
    torch.manual_seed(seed)
    model = _graphloc_model(variant, layers, width, m)
    released_arguments = (5,) if variant in ("base", "lc") else ()  # the sample size
    official = official_class(width, HIDDEN, CLASSES, 1, layers, m, N, *released_arguments)
    official.load_state_dict(model.state_dict())
    official.eval()
    features = x.clone().requires_grad_()
    with contextlib.redirect_stdout(io.StringIO()):  # the released code prints shapes
        out = official(SimpleNamespace(x=features, edge_index=edge_index))
    names, params = zip(*official.named_parameters(), strict=True)
    weights = torch.linspace(-1, 1, out.numel()).view_as(out)
    grads = torch.autograd.grad((out * weights).sum(), [features, *params],
                                allow_unused=True)
    return {"case": (variant, layers, width, m, seed), "weights": model.state_dict(),
            "x": x, "edge_index": edge_index, "official": out.detach(),
            "grad_x": grads[0], "grads": {n: g for n, g in zip(names, grads[1:], strict=True)
                                          if g is not None}}


def run_nan_case(variant: str, layers: int, width: int, m: int, seed: int, node: int) -> dict:
    """The released forward with one NaN feature: where torch's semantics carry it."""
    from graphloc.nn.models.tangnn import TANGNNReleased
    official_class = _official_class(sys.argv[1], variant)
    edge_index, x = _graph(seed, width)
    x[node, 0] = float("nan")
    torch.manual_seed(seed)
    model = TANGNNReleased(width, HIDDEN, CLASSES, num_layers=layers, m=m, variant=variant)
    official = official_class(width, HIDDEN, CLASSES, 1, layers, m, N, 5)
    official.load_state_dict(model.state_dict())
    official.eval()
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        out = official(SimpleNamespace(x=x, edge_index=edge_index))
    return {"case": (variant, layers, width, m, seed, node), "weights": model.state_dict(),
            "x": x, "edge_index": edge_index, "official": out}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    torch.set_default_dtype(torch.float64)
    write_fixture(FIXTURE, run_case, CASES)
    write_fixture(NAN_FIXTURE, run_nan_case, NAN_CASES)
    write_fixture(VARIANTS_FIXTURE, run_case, VARIANT_CASES)
