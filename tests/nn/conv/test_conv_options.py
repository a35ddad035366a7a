"""PyG's MessagePassing options in a graphloc conv's constructor (``nn/conv/_options.py``):
each value that computes what the conv computes is taken, with PyG's outputs on the same
weights; any other is refused by name."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import parity_graph

import graphloc.nn as gl

# (graphloc's class, PyG's class, constructor arguments, extra forward inputs)
CONVS = {
    "GCNConv": ((8, 6), ()), "GATConv": ((8, 3), ()), "GATv2Conv": ((8, 3), ()),
    "ChebConv": ((8, 6, 2), ()), "TransformerConv": ((8, 3), ()), "LEConv": ((8, 6), ()),
    "TAGConv": ((8, 6), ()), "SGConv": ((8, 6), ()), "ResGatedGraphConv": ((8, 6), ()),
    "ClusterGCNConv": ((8, 6), ()), "AGNNConv": ((), ()), "LGConv": ((), ()),
    "MixHopConv": ((8, 6), ()), "ARMAConv": ((8, 6), ()), "GCN2Conv": ((8, 0.1), ("x0",)),
    "FAConv": ((8,), ("x0",)), "SSGConv": ((8, 6, 0.1), ()), "PDNConv": ((8, 6, 2, 4), ("e",)),
}


def _run(conv, x, edge_index, extra):
    inputs = {"x0": x.flip(0), "e": torch.rand(edge_index.size(1), 2, dtype=x.dtype,
                                                 generator=torch.Generator().manual_seed(1))}
    if extra == ("x0",):
        return conv(x, inputs["x0"], edge_index)
    if extra == ("e",):
        return conv(x, edge_index, inputs["e"])
    return conv(x, edge_index)


def _pyg_default_options(theirs):
    """The options PyG's conv takes, each at the value it holds by default."""
    options = {"aggr": theirs.aggr, "decomposed_layers": 1, "flow": "source_to_target"}
    if theirs.node_dim == -2:  # (a conv that fixes node_dim=0 refuses the option)
        options["node_dim"] = -2
    return options


@pytest.mark.parametrize("name", list(CONVS))
def test_pygs_own_options_give_pygs_outputs(name):
    args, extra = CONVS[name]
    edge_index, n = parity_graph(3)
    x = torch.randn(n, 8, dtype=torch.float64)
    torch.manual_seed(0)
    theirs = getattr(pyg, name)(*args)
    options = _pyg_default_options(theirs)
    # graphloc's conv takes any slice count: it holds no per-edge messages to slice
    ours = getattr(gl, name)(*args, **{**options, "decomposed_layers": 3}).double().eval()
    assert type(ours).pyg_aggr == theirs.aggr or {type(ours).pyg_aggr, theirs.aggr} <= \
        {"add", "sum"}
    torch.manual_seed(0)
    theirs = getattr(pyg, name)(*args, **options).double().eval()
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(_run(ours, x, edge_index, extra),
                               _run(theirs, x, edge_index, extra))


@pytest.mark.parametrize("name", ["GCNConv", "SGConv", "ChebConv", "TAGConv", "LGConv"])
def test_pygs_feature_slices_give_the_numbers_graphloc_gives(name):
    """PyG's decomposed_layers slices the features of convs whose messages are linear per
    channel, with the same values (other convs' slices fail there, or change AGNNConv's
    cosines: graphloc computes the unsliced conv)."""
    args, extra = CONVS[name]
    edge_index, n = parity_graph(5)
    x = torch.randn(n, 8, dtype=torch.float64)
    torch.manual_seed(0)
    theirs = getattr(pyg, name)(*args, decomposed_layers=2).double().eval()
    ours = getattr(gl, name)(*args, decomposed_layers=2).double().eval()
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(_run(ours, x, edge_index, extra),
                               _run(theirs, x, edge_index, extra))


@pytest.mark.parametrize("make, message", [
    (lambda: gl.GCNConv(8, 6, aggr="mean"),
     r"GCNConv: aggr='mean': graphloc's GCNConv aggregates its messages by 'add'.*from_pyg"),
    (lambda: gl.GATConv(8, 6, aggr="max"), r"GATConv: aggr='max'"),
    (lambda: gl.FastRGCNConv(8, 6, 2, aggr="max"), r"aggr"),
    (lambda: gl.PNAConv(8, 6, ["mean"], ["identity"], torch.tensor([0, 1]), aggr="add"),
     r"PNAConv: aggr='add': PNAConv takes no aggr"),
    (lambda: gl.GCNConv(8, 6, node_dim="0"), r"GCNConv: node_dim must be an integer axis"),
    (lambda: gl.GravNetConv(8, 6, 2, 4, 3, flow="target_to_source"),
     r"GravNetConv: flow='target_to_source'"),
    (lambda: gl.GCNConv(8, 6, decomposed_layers=0),
     r"GCNConv: decomposed_layers must be an integer >= 1, got 0"),
    (lambda: gl.GCNConv(8, 6, aggr=None), r"GCNConv: aggr=None"),
])
def test_other_values_are_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_users_subclass_takes_the_options_too():
    class Scaled(gl.GCNConv):
        def __init__(self, *args, scale=2.0, **kwargs):
            super().__init__(*args, **kwargs)
            self.scale = scale

        def forward(self, x, edge_index):
            return self.scale * super().forward(x, edge_index)

    edge_index, n = parity_graph(4)
    x = torch.randn(n, 8)
    torch.manual_seed(0)
    plain = gl.GCNConv(8, 6)
    torch.manual_seed(0)
    scaled = Scaled(8, 6, aggr="add", decomposed_layers=2, scale=3.0)
    torch.testing.assert_close(scaled(x, edge_index), 3.0 * plain(x, edge_index))
    with pytest.raises(ValueError, match="GCNConv: aggr='mean'"):
        Scaled(8, 6, aggr="mean")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        gl.GCNConv(8, 6, bogus=1)


@pytest.mark.parametrize("name", ["LEConv", "ResGatedGraphConv", "GraphConv", "SAGEConv"])
def test_node_dim_zero_reads_a_static_batch_nodes_first_as_pyg(name):
    """x of shape [N, B, F] under node_dim=0: PyG's static-graph call, its outputs [N, B, out]
    (the attribute is what from_pyg sets; the constructor now takes it as PyG's does). The
    convs whose PyG twin runs this call (PyG's GCNConv, TAGConv, LGConv fail on it)."""
    args = (8, 6)
    edge_index, n = parity_graph(6)
    x = torch.randn(n, 3, 8, dtype=torch.float64)
    torch.manual_seed(0)
    theirs = getattr(pyg, name)(*args, node_dim=0).double().eval()
    ours = getattr(gl, name)(*args, node_dim=0).double().eval()
    ours.load_state_dict(theirs.state_dict())
    assert ours.node_dim == 0
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    with pytest.raises(ValueError, match="node_dim=5 does not name the node axis"):
        getattr(gl, name)(*args, node_dim=5)(x, edge_index)
