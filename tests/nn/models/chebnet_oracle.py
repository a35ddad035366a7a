"""Writes ``data/chebnet_official.pt``: City-Networks' ChebNet
(github.com/LeonResearch/City-Networks, ``benchmark/gnn.py``, the class its
``benchmark/configs.py`` builds for ``--method cheb``) run with graphloc ``ChebNet`` weights
loaded as they are (the same module names), in eval mode and in training mode with dropout
0, on directed graphs with self-loops, parallel edges, an isolated node and edge weights;
the outputs and the gradient of the features. ``test_chebnet.py`` compares graphloc with
it. Not run by the tests:

    python tests/nn/models/chebnet_oracle.py path/to/City-Networks

Needs torch and torch-geometric (2.8 here): the class is compiled alone from the file.
"""

import os
import sys

import torch
from official_runs import definition_from, write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "chebnet_official.pt")
F, HIDDEN, CLASSES = 5, 8, 3
CASES = [(1, 2, False, 0), (3, 2, True, 1), (2, 3, True, 2), (4, 2, False, 3)]
# (layers, K, edge weights, seed)


def _official_class(checkout: str):
    import torch.nn as nn
    import torch.nn.functional as functional
    from torch_geometric.nn import ChebConv
    namespace = {"nn": nn, "F": functional, "ChebConv": ChebConv}
    return definition_from(os.path.join(checkout, "benchmark", "gnn.py"), "ChebNet",
                           namespace)


def _graph(seed: int, weighted: bool):
    gen = torch.Generator().manual_seed(seed)
    n = 24
    edge_index = torch.randint(0, n - 1, (2, 70), generator=gen)  # node n - 1 isolated
    edge_index = torch.cat([edge_index, torch.tensor([[2, 2, 5], [2, 7, 7]])], 1)
    weight = torch.rand(edge_index.size(1), generator=gen, dtype=torch.float64) + 0.5 \
        if weighted else None
    return edge_index, weight, torch.randn(n, F, generator=gen, dtype=torch.float64)


def run_case(layers: int, K: int, weighted: bool, seed: int) -> dict:
    from graphloc.nn.models.chebnet import ChebNet
    official_class = _official_class(sys.argv[1])
    edge_index, weight, x = _graph(seed, weighted)
    torch.manual_seed(seed)
    model = ChebNet(F, HIDDEN, CLASSES, num_layers=layers, K=K).double()
    results = {}
    for mode, dropout in (("eval", 0.5), ("train", 0.0)):
        official = official_class(F, HIDDEN, CLASSES, num_layers=layers, dropout=dropout,
                                  K=K).double()
        official.load_state_dict(model.state_dict())
        official.train(mode == "train")
        features = x.clone().requires_grad_()
        out = official(features, edge_index, weight)
        (grad,) = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel(),
                                                            dtype=out.dtype).view_as(out)).sum(),
                                      features)
        results[mode] = (out.detach(), grad)
    return {"case": (layers, K, weighted, seed), "weights": model.state_dict(), "x": x,
            "edge_index": edge_index, "edge_weight": weight, "official": results}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
