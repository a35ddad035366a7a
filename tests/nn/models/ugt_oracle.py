"""Writes ``data/ugt_official.pt``: the official UGT network's own forward
(github.com/NSLab-CUK/Unified-Graph-Transformer, ``Node_level_tasks/models.py``: the
pre-trained ``Transformer``'s ``extract_features`` and ``forward``, and the fine-tuning
head ``MLP`` with the softmax ``Transformer_class`` applies) run with graphloc ``UGT``
weights copied in, on graphloc's attention graph and encodings (``ugt_inputs``) of small
graphs; ``test_ugt.py`` compares graphloc with it. Not run by the tests:

    python tests/nn/models/ugt_oracle.py path/to/Unified-Graph-Transformer

Needs torch and torch-geometric (2.8 here). DGL does not install beside this torch: the
model code's DGL calls are served by a stand-in graph (``ndata``, ``edata``, ``edges()``,
``apply_edges`` with its edge functions, and ``send_and_recv`` with ``u_mul_e`` /
``copy_e`` messages summed at the destination). The official casts its encodings to
float32, so the run is in float32. Of the preprocessing, ``util.py``'s ``getI`` (the
structural vectors) and ``getM_logM`` (the powers of ``P``) run here too, on the graph the
official builds (``to_networkx(data, to_undirected=True)``: self-loops kept, counted twice
in the degrees), without their roundings to 3 decimals; its struc2vec edges and DGL's
``lap_pe`` are not (DGL does not install here): they are tested against
re-implementations in ``test_ugt.py``.

Each case also runs one official pre-training step (``gnnutils_10.py``'s ``train``, with
``util.py``'s ``getM_logM`` targets of the graph, ``k_transition`` 6, alpha = beta = 0.5)
on the same weights, and keeps its structure loss and the gradient of its loss on every
parameter. Its dropouts are switched off (graphloc's side runs in eval mode), and
``getM_logM``'s rounding of 1/deg to 3 decimals, which graphloc leaves out (documented),
is taken out.
"""

import os
import sys
import types

import numpy as np
import torch
from official_runs import definition_from, write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "ugt_official.pt")
N, F, HIDDEN, CLASSES, HEADS = 24, 5, 16, 3, 4
CASES = [(1, 2, 0), (2, 2, 1), (1, 1, 2)]  # (k_hop, layers before the last, seed)


class _Edges:
    def __init__(self, graph):
        src, dst = graph.edges()
        self.src = {k: v[src] for k, v in graph.ndata.items()}
        self.dst = {k: v[dst] for k, v in graph.ndata.items()}
        self.data = graph.edata


class _Graph:
    """The DGLGraph calls of the official model, on one edge list."""

    def __init__(self, src, dst, num_nodes):
        self.src, self.dst, self.num_nodes = src, dst, num_nodes
        self.ndata, self.edata = {}, {}

    def edges(self):
        return self.src, self.dst

    def to(self, device):
        return self

    def apply_edges(self, func):
        self.edata.update(func(_Edges(self)))

    def send_and_recv(self, eids, message, reduce):
        kind, fields, out = message
        assert eids[0] is self.src and eids[1] is self.dst  # every edge, in order
        if kind == "u_mul_e":
            values = self.ndata[fields[0]][self.src] * self.edata[fields[1]]
        else:  # copy_e
            values = self.edata[fields[0]]
        assert reduce[0] == "sum" and reduce[1] == out
        total = values.new_zeros((self.num_nodes, *values.shape[1:]))
        self.ndata[reduce[2]] = total.index_add(0, self.dst, values)


def _stand_ins() -> None:
    import torch_geometric  # noqa: F401  (its optional-package flags read before the stand-ins)
    dgl = types.ModuleType("dgl")
    function = types.ModuleType("dgl.function")
    function.u_mul_e = lambda u, e, out: ("u_mul_e", (u, e), out)
    function.copy_e = lambda e, out: ("copy_e", (e,), out)
    function.sum = lambda msg, out: ("sum", msg, out)
    dgl.function, dgl.sparse = function, types.ModuleType("dgl.sparse")
    sys.modules.update({"dgl": dgl, "dgl.function": function, "dgl.sparse": dgl.sparse})


def _official(checkout: str):
    _stand_ins()
    sys.path.insert(0, os.path.join(checkout, "Node_level_tasks"))
    import models
    models.F = _WithoutDropout()  # eval mode leaves them out; the pre-training step too
    return models


class _WithoutDropout(types.ModuleType):
    """``torch.nn.functional`` with ``dropout`` the identity, for the official modules."""

    def __init__(self):
        super().__init__("functional_without_dropout")

    def __getattr__(self, name):
        if name == "dropout":
            return lambda h, *args, **kwargs: h
        return getattr(torch.nn.functional, name)


def _official_preprocessing(checkout: str) -> dict:
    """``getI`` (with its ``BFS`` and ``getSI_D``), ``getM_logM`` and ``train`` from the
    official files, without the roundings graphloc leaves out (``round`` and ``np.round``
    to 3 decimals)."""
    import collections

    import networkx as nx
    folder = os.path.join(checkout, "Node_level_tasks")
    unrounded_np = types.SimpleNamespace(**{name: getattr(np, name) for name in dir(np)
                                            if not name.startswith("__")})
    unrounded_np.round = lambda value, digits: value
    namespace = {"np": unrounded_np, "torch": torch, "F": torch.nn.functional, "nx": nx,
                 "deque": collections.deque, "defaultdict": collections.defaultdict,
                 "kth_step": collections.defaultdict(list),
                 "round": lambda value, digits: value}
    for name in ("GetProbTranMat", "getM_logM", "BFS", "getSI_D", "getI"):
        definition_from(os.path.join(folder, "util.py"), name, namespace)
    for name in ("cosinSim", "train"):
        definition_from(os.path.join(folder, "gnnutils_10.py"), name, namespace)
    return namespace


def _official_graph(edge_index: torch.Tensor):
    """The official's networkx graph of a PyG dataset (``exp_10.py``: ``to_networkx(data,
    to_undirected=True)``, whose datasets hold both directions of every edge): a simple
    undirected graph that keeps self-loops."""
    from torch_geometric.data import Data
    from torch_geometric.utils import to_networkx, to_undirected
    return to_networkx(Data(edge_index=to_undirected(edge_index), num_nodes=N),
                       to_undirected=True)


def _pretraining_step(official, g, x: torch.Tensor, code: dict, nx_graph) -> tuple:
    """One official pre-training step's structure loss and its loss's gradients (by the
    official parameter names); the optimizer's step is left out, so the weights stay."""
    get_targets, train = code["getM_logM"], code["train"]
    _, trans_M, trans_logM = get_targets(nx_graph, N, 8)

    class _NoStep:
        def zero_grad(self):
            official.zero_grad()

        def step(self):
            pass

    loss = train(official, types.SimpleNamespace(x=x), torch.ones(N, dtype=torch.bool),
                 _NoStep(), "cpu", g=g, A_k=None, D=None, Kindices=None, de=None, M=None,
                 I=None, trans_logM=trans_logM, pre_train=1, trans_M=trans_M,
                 k_transition=6, current_epoch=1, alfa=0.5, beta=0.5)
    official.eval()
    return loss, {name: p.grad.clone() for name, p in official.named_parameters()
                  if p.grad is not None}


def _official_names(weights: dict) -> dict:
    """graphloc's parameter names as the official Transformer's and MLP head's."""
    out = {}
    for name, value in weights.items():
        for part in ("Q", "K", "V", "proj_d", "proj_m"):
            name = name.replace(f".{part}.", f".attention.{part}.")
        name = name.replace("MLP_layer_x.", "MLP_layer_x.mlp.").replace("head.", "MLP.mlp.")
        out[name] = value
    return out


def run_case(k_hop: int, layers: int, seed: int) -> dict:
    from graphloc import Graph
    from graphloc.nn.models.ugt import UGT
    models = _official(sys.argv[1])
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, N, (2, 50), generator=gen)
    ring = torch.arange(N)  # a cycle through every node: no isolated node
    edge_index = torch.cat([edge_index, torch.stack([ring, (ring + 1) % N])], 1)
    x = torch.randn(N, F, generator=gen)
    torch.manual_seed(seed)
    model = UGT(F, HIDDEN, CLASSES, num_layers=layers, heads=HEADS, k_hop=k_hop).eval()
    graph = Graph(edge_index, num_nodes=N)
    inputs = model.inputs(graph)
    structure = 4 * k_hop + 1
    official = models.Transformer(F, HIDDEN, inputs.positions.size(1), CLASSES, HIDDEN,
                                  layers, HEADS, structure, 8).eval()
    head = models.MLP(HIDDEN, CLASSES).eval()
    weights = _official_names(model.state_dict())
    head.load_state_dict({k[4:]: v for k, v in weights.items() if k.startswith("MLP.")})
    kept = official.state_dict()  # its modules graphloc has no twin of (never called)
    unused = sorted(set(kept) - set(weights))
    official.load_state_dict({**{k: kept[k] for k in unused},
                              **{k: v for k, v in weights.items() if not k.startswith("MLP.")}})
    src, dst = inputs.attention.edge_index
    g = _Graph(src, dst, N)
    g.ndata.update(x=x, PE=inputs.positions.float(), I=inputs.structure.float())
    g.edata.update(m=inputs.transition.float(), de=inputs.distance.float())
    with torch.no_grad():
        h, x_hat = official(g, 8, 0)
        probabilities = torch.softmax(head(h), 1)  # Transformer_class's output
    code = _official_preprocessing(sys.argv[1])
    nx_graph = _official_graph(edge_index)
    structure_loss, gradients = _pretraining_step(official, g, x, code, nx_graph)
    official_I = torch.from_numpy(code["getI"](nx_graph, k_hop))
    official_P = torch.from_numpy(np.stack(code["getM_logM"](nx_graph, N, 8)[0]))
    names = {official_name: name for name, official_name in
             zip(model.state_dict(), _official_names(model.state_dict()), strict=True)}
    return {"case": (k_hop, layers, seed), "weights": model.state_dict(), "x": x,
            "edge_index": edge_index, "embedding": h, "x_hat": x_hat,
            "probabilities": probabilities, "official_only": unused,
            "structure_loss": structure_loss, "loops": int((edge_index[0] ==
                                                            edge_index[1]).sum()),
            "structural_vectors": official_I, "transitions": official_P,
            "pretraining_gradients": {names[k]: v for k, v in gradients.items()}}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
