"""Writes ``data/sgformer_official.pt``: City-Networks' own SGFormer forward
(github.com/LeonResearch/City-Networks, ``benchmark/sgformer.py``, with the arguments of
its ``configs.py``) run with graphloc ``SGFormer(variant="citynetworks")`` weights and
batch-norm statistics copied in, on symmetric and directed graphs with 1 to 3 GCN layers,
with and without ``gnn_use_init``;
``test_sgformer.py`` compares graphloc with it. Not run by the tests:

    python tests/nn/models/sgformer_oracle.py path/to/City-Networks

Needs torch and torch-geometric (2.8 here); ``torch_sparse``'s ``SparseTensor`` and
``matmul`` (one sparse product, duplicates summed) are replaced by ``torch.sparse``.
"""

import os
import sys
import types

import torch
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "sgformer_official.pt")
N, F, HIDDEN, CLASSES = 30, 5, 8, 3
# (seed, GCN layers, directed, gnn_use_init)
CASES = [(0, 2, False, False), (1, 3, True, False), (2, 1, True, False), (3, 2, False, True),
         (4, 3, True, True)]


class _SparseTensor:
    def __init__(self, row, col, value, sparse_sizes):
        self.t = torch.sparse_coo_tensor(torch.stack([row, col]), value, sparse_sizes)


def _official(checkout: str):
    stand_in = types.ModuleType("torch_sparse")
    stand_in.SparseTensor = _SparseTensor
    stand_in.matmul = lambda adj, x: torch.sparse.mm(adj.t.to(x.dtype), x)
    sys.modules["torch_sparse"] = stand_in
    sys.path.insert(0, checkout)
    from benchmark.sgformer import SGFormer
    return SGFormer


def _official_names(weights: dict) -> dict:
    """graphloc's parameter names as the official module's; with ``gnn_use_init``, each
    official ``W`` is the conv's weight (the columns reading ``A h``) beside ``inits.i``'s
    (the columns reading ``h_0``)."""
    out = {}
    for name, value in weights.items():
        if name.startswith("graph_conv.inits."):
            continue
        if name.startswith("graph_conv.convs") and name.endswith("lin.weight"):
            init = name.replace("convs", "inits").replace("lin.weight", "weight")
            if init in weights:
                value = torch.cat([value, weights[init]], dim=1)
        for ours, theirs in (("q", "Wq"), ("k", "Wk"), ("v", "Wv")):
            name = name.replace(f"trans_conv.attns.0.{ours}", f"trans_conv.convs.0.{theirs}")
        if name.startswith("graph_conv.convs") and name.endswith("lin.weight"):
            name = name.replace("lin.weight", "W.weight")
        elif name.startswith("graph_conv.convs") and name.endswith("bias"):
            name = name.replace("bias", "W.bias")
        out[name] = value
    return out


def run_case(seed: int, layers: int, directed: bool, use_init: bool) -> dict:
    from graphloc.nn import SGFormer
    official_class = _official(sys.argv[1])
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, N, (2, 90), generator=gen)
    if not directed:
        edge_index = torch.cat([edge_index, edge_index.flip(0)], 1)
    x = torch.randn(N, F, generator=gen)
    torch.manual_seed(seed)
    model = SGFormer(F, HIDDEN, CLASSES, variant="citynetworks", gnn_num_layers=layers,
                     gnn_use_init=use_init)
    for bn in model.graph_conv.bns:  # statistics away from their initial 0 and 1
        bn.running_mean.uniform_(-0.5, 0.5, generator=gen)
        bn.running_var.uniform_(0.5, 2.0, generator=gen)
    official = official_class(F, HIDDEN, CLASSES, trans_num_layers=1, trans_num_heads=1,
                              trans_dropout=0.5, trans_use_act=False, gnn_num_layers=layers,
                              gnn_dropout=0.2, graph_weight=0.8,
                              gnn_use_init=use_init).eval()
    official.load_state_dict(_official_names(model.state_dict()))
    with torch.no_grad():
        out = official(x, edge_index)
    return {"case": (seed, layers, directed, use_init), "state": model.state_dict(), "x": x,
            "edge_index": edge_index, "official": out}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
