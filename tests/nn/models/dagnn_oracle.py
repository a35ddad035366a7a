"""Writes ``data/dagnn_official.pt``: the official DAGNN's own evaluation forward
(github.com/mengliu1998/DeeperGNN, ``DeeperGNN/dagnn.py``: its ``gcn_norm``, ``Prop`` and
``Net``) run with graphloc ``DAGNN`` weights copied in, on small graphs with self-loops,
parallel edges and isolated nodes; ``test_models.py`` compares graphloc with it. Not run
by the tests:

    python tests/nn/models/dagnn_oracle.py path/to/DeeperGNN

Needs torch and torch-geometric (2.8 here). The file's model code (from ``gcn_norm`` up
to its training script) is run on its own; its ``torch_scatter.scatter_add`` is PyG's
``scatter`` with ``reduce="sum"``.
"""

import os
import sys
import types

import torch
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "dagnn_official.pt")
F, HIDDEN, CLASSES, K = 5, 8, 3, 4
CASES = [(30, 80, 0), (5, 0, 1), (12, 40, 2)]  # (nodes, random edges, seed)


def _official(checkout: str) -> dict:
    from torch_geometric.utils import scatter
    stand_in = types.ModuleType("torch_scatter")
    stand_in.scatter_add = lambda src, index, dim=0, dim_size=None: scatter(
        src, index, dim, dim_size=dim_size, reduce="sum")
    sys.modules["torch_scatter"] = stand_in
    with open(os.path.join(checkout, "DeeperGNN", "dagnn.py")) as f:
        source = f.read()
    model_code = source[source.index("def gcn_norm"):source.index("warnings.filterwarnings")]
    namespace = {}
    exec("import torch\nfrom torch.nn import Linear\nimport torch.nn.functional as F\n"
         "from torch_geometric.nn.conv import MessagePassing\n"
         "from torch_scatter import scatter_add\n"
         "from torch_geometric.utils import add_remaining_self_loops\n" + model_code,
         namespace)
    namespace["args"] = types.SimpleNamespace(hidden=HIDDEN, dropout=0.5, K=K)
    return namespace


def _graph(nodes: int, edges: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    if edges:
        edge_index = torch.randint(0, nodes, (2, edges), generator=gen)
    else:  # a doubled self-loop, a pair both ways, a chain, and isolated node 4
        edge_index = torch.tensor([[0, 1, 1, 2, 3, 3], [1, 0, 2, 1, 3, 3]])
    return edge_index, torch.randn(nodes, F, generator=gen, dtype=torch.float64)


def run_case(nodes: int, edges: int, seed: int) -> dict:
    from torch_geometric.data import Data

    from graphloc.nn.models.gnn import DAGNN
    official = _official(sys.argv[1])
    edge_index, x = _graph(nodes, edges, seed)
    torch.manual_seed(seed)
    model = DAGNN(F, HIDDEN, CLASSES, K=K).double()
    net = official["Net"](types.SimpleNamespace(num_features=F, num_classes=CLASSES))
    net = net.double().eval()
    net.lin1.load_state_dict(model.lin1.state_dict())
    net.lin2.load_state_dict(model.lin2.state_dict())
    net.prop.proj.load_state_dict(model.gate.state_dict())
    with torch.no_grad():
        out = net(Data(x=x, edge_index=edge_index))
    return {"case": (nodes, edges, seed), "weights": model.state_dict(), "x": x,
            "edge_index": edge_index, "official": out}


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    write_fixture(FIXTURE, run_case, CASES)
