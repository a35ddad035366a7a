"""Writes ``data/liftgcn_official.pt``: the official LiftGCN's own evaluation forward
(github.com/ChenZeng001/LiftGCN, ``models.py``: ``StressJoukowskiGCN`` on its
``normalized_adjacency``) run with graphloc ``LiftGCN`` weights (perturbed away from their
initial values) copied in, on symmetric graphs, 1 to 5 layers; ``test_lift.py`` compares
graphloc with it. Not run by the tests:

    python tests/nn/models/liftgcn_oracle.py path/to/LiftGCN

Needs torch only (the folder holding the repository's ``models.py``).
"""

import os
import sys

import torch
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "liftgcn_official.pt")
N, F, HIDDEN = 40, 4, 8
CASES = [(1, 1), (2, 2), (5, 5)]  # (layers, seed)


def _official_names(weights: dict) -> dict:
    """graphloc's parameter names as the official module's."""
    out = {"input.weight": weights["lin_in.weight"], "input.bias": weights["lin_in.bias"],
           "input_norm.weight": weights["norm_in.weight"],
           "input_norm.bias": weights["norm_in.bias"],
           "output.weight": weights["lin_out.weight"], "output.bias": weights["lin_out.bias"],
           "raw_rho": weights["conv.r"]}
    for name, value in weights.items():
        if name.startswith("blocks."):
            out[name.replace(".lin.", ".linear.").replace(".scale", ".res_scale")] = value
    return out


def run_case(layers: int, seed: int) -> dict:
    from graphloc.nn.models.lift import LiftGCN
    sys.path.insert(0, sys.argv[1])
    from models import StressJoukowskiGCN, normalized_adjacency
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, N, (2, 100), generator=gen)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    edge_index = torch.cat([edge_index, edge_index.flip(0)], 1).unique(dim=1)
    x = torch.randn(N, F, generator=gen, dtype=torch.float64)
    torch.manual_seed(seed)
    model = LiftGCN(F, HIDDEN, 1, layers).double()
    with torch.no_grad():  # away from the initial values (unit norms, zero biases)
        for param in model.parameters():
            param.add_(0.1 * torch.randn(param.shape, generator=gen, dtype=param.dtype))
    official = StressJoukowskiGCN(F, HIDDEN, layers).double().eval()
    official.load_state_dict(_official_names(model.state_dict()))
    with torch.no_grad():
        out = official(x, normalized_adjacency(edge_index, N))
    return {"case": (layers, seed), "weights": model.state_dict(), "x": x,
            "edge_index": edge_index, "official": out}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
