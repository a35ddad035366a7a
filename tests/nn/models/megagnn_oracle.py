"""Writes ``data/megagnn_official.pt``: the official MEGA-GNN code's own outputs (its
``models.GINe`` under PyG's ``to_hetero(..., aggr="mean")``, as its ``training.py`` builds
it for ``--flatten_edges --emlps --reverse_mp``), run from a checkout of
github.com/hcagri/Mega-GNN on small multigraphs with graphloc ``MEGAGNN`` weights copied
in; ``test_mega.py`` compares graphloc's forward with them. Not run by the tests:

    python tests/nn/models/megagnn_oracle.py path/to/Mega-GNN

It needs torch and torch-geometric (2.8 here); modules the model code imports but never
calls on these flags (torch_scatter, genagg, pandas, ports_cpp) are replaced by small
stand-ins, and PyG 2.8's ``torch.index_select`` override, which ``torch.fx`` cannot trace,
by torch's own.
"""

import os
import sys
import types

import torch
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "megagnn_official.pt")
#: (edge aggregator, layers, seed); "gru" and "transformer" run on pairs of exactly two
#: edges each, where the official padded batches hold no padding (graphloc packs the GRU's
#: and batches the transformer's groups by length: docs/models.md)
CASES = [("sum", 2, 0), ("gin", 2, 1), ("pna", 2, 2), ("gin", 3, 3), ("gru", 2, 4),
         ("transformer", 2, 5)]
#: the official TransformerAgg on groups of 1 to 5 rows, each group alone in its call (so
#: without the padding a batch of mixed lengths gets): ``megagnn_transformer_groups.pt``
GROUPS_FIXTURE = os.path.join(HERE, "data", "megagnn_transformer_groups.pt")
N, HIDDEN, NODE_IN, EDGE_IN = 9, 6, 3, 4


def _stand_ins() -> None:
    from torch_geometric.utils import scatter as pyg_scatter

    def scatter(src, index, dim=0, dim_size=None, reduce="sum"):
        if src.is_floating_point():
            return pyg_scatter(src, index, dim, dim_size=dim_size, reduce=reduce)
        return pyg_scatter(src.double(), index, dim, dim_size=dim_size, reduce=reduce).long()

    sys.modules["torch_scatter"] = types.SimpleNamespace(scatter=scatter)
    genagg = types.ModuleType("genagg")
    genagg.GenAgg = object
    sys.modules["genagg"] = genagg
    sys.modules["genagg.MLPAutoencoder"] = types.SimpleNamespace(MLPAutoencoder=object)
    sys.modules["pandas"] = types.ModuleType("pandas")
    sys.modules["ports_cpp"] = types.ModuleType("ports_cpp")


def _official_modules(checkout: str):
    """``models`` (torch_scatter's scatter kept a leaf of torch.fx's trace, as the compiled
    original is) and ``data_util`` of the checkout."""
    _stand_ins()
    sys.path.insert(0, checkout)
    import data_util
    with open(os.path.join(checkout, "models.py")) as f:
        source = f.read().replace("from torch_scatter import scatter\n",
                                  "from torch_scatter import scatter\n"
                                  "import torch.fx\ntorch.fx.wrap('scatter')\n", 1)
    models = types.ModuleType("models")
    models.__file__ = os.path.join(checkout, "models.py")
    exec(compile(source, models.__file__, "exec"), models.__dict__)
    torch.index_select = torch._C._VariableFunctions.index_select
    return models, data_util


def official_key(key: str) -> str:
    """The official hetero model's name of a graphloc ``MEGAGNN`` state-dict entry."""
    relation = {"forward_dir": "node__to__node", "reverse_dir": "node__rev_to__node"}
    p = key.split(".")
    simple = {"node_emb": f"node_emb.node.{p[-1]}",
              "edge_emb": f"edge_emb.node__to__node.{p[-1]}",
              "edge_emb_reverse": f"edge_emb.node__rev_to__node.{p[-1]}"}
    if p[0] in simple:
        return simple[p[0]]
    if p[0] == "norms":
        return f"batch_norms.{p[1]}.node.module.{p[2]}"
    if p[0] == "readout":
        return f"mlp.{p[1]}.node__to__node.{p[2]}"
    layer, rel, part = p[1], relation[p[2]], p[3]
    if part == "gine":
        return f"convs.{layer}.{rel}." + ".".join(p[4:])
    if part == "edge_mlp":
        return f"emlps.{layer}.{p[4]}.{rel}.{p[5]}"
    inner = {"mlp": "nn"}.get(p[4], p[4])  # edge_agg: the official's one per relation
    return f"edge_agg.{rel}.agg.{inner}." + ".".join(p[5:])


def _multigraph(agg: str, gen: torch.Generator) -> torch.Tensor:
    if agg in ("gru", "transformer"):
        pairs = torch.randint(0, N, (2, 16), generator=gen).unique(dim=1)
        return pairs.repeat_interleave(2, dim=1)
    edges = torch.randint(0, N, (2, 40), generator=gen)
    return torch.cat([edges, edges[:, :12]], 1)  # parallel edges


def _case(models, data_util, agg: str, layers: int, seed: int) -> dict:
    from torch_geometric.nn import to_hetero

    from graphloc.nn import MEGAGNN
    gen = torch.Generator().manual_seed(seed)
    edge_index = _multigraph(agg, gen)
    num_edges = edge_index.size(1)
    x = torch.randn(N, NODE_IN, generator=gen, dtype=torch.float64)
    edge_attr = torch.randn(num_edges, EDGE_IN, generator=gen, dtype=torch.float64)
    edge_attr[:, 0] = torch.randperm(num_edges, generator=gen) + 1.0  # the time column
    groups = data_util.find_parallel_edges(edge_index)
    args = types.SimpleNamespace(data="Small_HI", flatten_edges=True, ports=False)
    data = data_util.create_hetero_obj(x, torch.zeros(num_edges), edge_index, edge_attr,
                                       edge_attr[:, 0], args, groups)
    official = models.GINe(NODE_IN, layers, 2, n_hidden=HIDDEN, edge_updates=True,
                           edge_dim=EDGE_IN, flatten_edges=True, edge_agg_type=agg,
                           node_agg_type="sum", index_=groups, args=args)
    official = to_hetero(official, data.metadata(), aggr="mean").double().eval()
    torch.manual_seed(seed)
    ours = MEGAGNN(NODE_IN, EDGE_IN, HIDDEN, 2, num_layers=layers, edge_agg=agg).double()
    for norm in ours.norms:  # running statistics that are not the identity
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 2.0)
    weights = ours.state_dict()
    theirs = official.state_dict()
    for key, value in weights.items():
        if key.endswith("pna_delta"):  # the official delta, from its own histogram
            weights[key] = theirs["edge_agg.node__to__node.agg.agg.avg_deg_log"].double()
        else:
            theirs[official_key(key)] = value
    official.load_state_dict(theirs)
    with torch.no_grad():
        out = official(data.x_dict, data.edge_index_dict, data.edge_attr_dict,
                       data.simp_edge_batch_dict)[("node", "to", "node")]
    return {"edge_agg": agg, "num_layers": layers, "x": x, "edge_index": edge_index,
            "edge_attr": edge_attr, "weights": weights, "official": out}


def _transformer_groups(models, seed: int) -> dict:
    """graphloc's transformer aggregator's weights in the official ``TransformerAgg``,
    run in eval mode on each group of rows alone, in time order."""
    from graphloc.nn.conv.multi_edge import Aggregation
    gen = torch.Generator().manual_seed(seed)
    index = torch.repeat_interleave(torch.arange(7), torch.tensor([1, 3, 2, 5, 3, 1, 4]))
    index = index[torch.randperm(index.numel(), generator=gen)]  # groups interleaved
    values = torch.randn(index.numel(), HIDDEN, generator=gen, dtype=torch.float64)
    times = torch.randperm(index.numel(), generator=gen).double() + 1.0
    torch.manual_seed(seed)
    ours = Aggregation("transformer", HIDDEN).double()
    official = models.TransformerAgg(d_model=HIDDEN).double().eval()
    kept = official.state_dict()
    official.load_state_dict({**kept, **ours.state_dict()})  # (its positions buffer kept)
    with torch.no_grad():
        out = torch.stack([official(values[index == g], torch.zeros(int((index == g).sum()),
                                                                    dtype=torch.long),
                                    times[index == g]).view(HIDDEN)
                           for g in range(7)])
    return {"index": index, "values": values, "times": times, "weights": ours.state_dict(),
            "official": out}


def main(checkout: str) -> None:
    models, data_util = _official_modules(checkout)
    write_fixture(FIXTURE, lambda *case: _case(models, data_util, *case), CASES)
    write_fixture(GROUPS_FIXTURE, lambda seed: _transformer_groups(models, seed), [(0,), (1,)])


if __name__ == "__main__":
    main(sys.argv[1])
