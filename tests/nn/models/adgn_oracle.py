"""Writes ``data/adgn_official.pt``: the official A-DGN's own forward
(github.com/gravins/Anti-SymmetricDGN, ``graph_benchmark/models/antisymmetric_dgn.py``:
``GraphAntiSymmetricNN``) run with graphloc ``ADGN`` weights copied in, on small directed
graphs with and without edge weights; ``test_adgn.py`` compares graphloc with it. Not run
by the tests:

    python tests/nn/models/adgn_oracle.py path/to/Anti-SymmetricDGN

Needs torch and torch-geometric (2.8 here). The file's ``weight_sharing=True`` branch
reads ``self.trainable_conv_layer``, which its ``__init__`` never sets (an
``AttributeError`` as released); the run sets it to True on the class, as the repository's
``Tree-NeighborsMatch`` copy of the model does.
"""

import importlib.util
import os
import sys

import torch
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "adgn_official.pt")
N, F, HIDDEN, CLASSES, LAYERS = 25, 4, 6, 3, 3
#: (weight sharing, the GCN aggregation, edge weights, seed)
CASES = [(share, gcn, weighted, 4 * share + 2 * gcn + weighted)
         for share in (True, False) for gcn in (False, True) for weighted in (False, True)]


def _official(checkout: str):
    path = os.path.join(checkout, "graph_benchmark", "models", "antisymmetric_dgn.py")
    spec = importlib.util.spec_from_file_location("antisymmetric_dgn", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # PyG's MessagePassing reads its class's module
    spec.loader.exec_module(module)
    module.GraphAntiSymmetricNN.trainable_conv_layer = True
    return module.GraphAntiSymmetricNN


def _official_names(weights: dict, gcn: bool) -> dict:
    """graphloc's parameter names as the official module's."""
    out = {}
    for name, value in weights.items():
        name = name.replace("convs.", "conv.").replace(".eye", ".I")
        out[name.replace(".phi.lin.", ".gcn_conv.lin." if gcn else ".lin.")] = value
    return out


def run_case(share: bool, gcn: bool, weighted: bool, seed: int) -> dict:
    from torch_geometric.data import Data

    from graphloc.nn.models.adgn import ADGN
    official_class = _official(sys.argv[1])
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, N, (2, 70), generator=gen)
    weight = torch.rand(70, generator=gen, dtype=torch.float64) if weighted else None
    x = torch.randn(N, F, generator=gen, dtype=torch.float64)
    torch.manual_seed(seed)
    model = ADGN(F, HIDDEN, CLASSES, LAYERS, gcn_norm=gcn, weight_sharing=share).double()
    official = official_class(F, CLASSES, HIDDEN, LAYERS, gcn_norm=gcn,
                              weight_sharing=share).double().eval()
    weights = _official_names(model.state_dict(), gcn)
    kept = official.state_dict()  # the official's own entries graphloc has no twin of
    unused = set(kept) - set(weights)
    official.load_state_dict({**{k: kept[k] for k in unused}, **weights})
    with torch.no_grad():
        out = official(Data(x=x, edge_index=edge_index, edge_weight=weight))
    return {"case": (share, gcn, weighted, seed), "weights": model.state_dict(), "x": x,
            "edge_index": edge_index, "edge_weight": weight, "official": out,
            "official_only": sorted(unused)}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
