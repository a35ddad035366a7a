"""Helpers shared by the convs (graphloc/nn/conv/_utils.py)."""


import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg
from helpers import CONV_LAYERS, classes_with_true_false_options, true_false_options
from parity import parity_graph

import graphloc.nn as gl
from graphloc import Graph


@pytest.mark.parametrize("name", sorted(CONV_LAYERS))
def test_features_in_another_dtype_than_the_parameters_are_refused_by_name(name):
    """float64 features into a float32 layer: a TypeError naming x and both dtypes (torch's
    own error named neither). The same layer converted runs, and its float64 output is the
    float32 run's to float32 precision."""
    edge_index, n = parity_graph(15)
    torch.manual_seed(0)
    graph = Graph(edge_index, num_nodes=n, edge_attr=torch.randn(edge_index.size(1), 3))
    conv, x = CONV_LAYERS[name](), torch.randn(n, 5)
    if not any(p.is_floating_point() for p in conv.parameters()):  # APPNP: nothing to meet
        assert conv(x.double(), graph).dtype == torch.float64
        return
    with pytest.raises(TypeError, match=rf"^{type(conv).__name__} has torch.float32 "
                                        r"parameters, but x is torch.float64"):
        conv(x.double(), graph)
    want = conv(x, graph)
    graph64 = Graph(edge_index, num_nodes=n, edge_attr=graph.edge_attr.double())
    got = conv.double()(x.double(), graph64)
    torch.testing.assert_close(got, want.double(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["GATConv", "GATv2Conv", "TransformerConv"])
def test_attention_dropout_of_one_drops_every_weight_as_pygs(name):
    """torch's and PyG's dropout take p = 1: every attention weight 0 in training, so the
    output is the layer's bias and root terms alone, as PyG's."""
    edge_index, n = parity_graph(38)
    ours = getattr(gl, name)(4, 3, heads=2, dropout=1.0).train()
    theirs = getattr(pyg, name)(4, 3, heads=2, dropout=1.0).train()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 4)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    if name != "TransformerConv":  # no root term: the bias alone
        torch.testing.assert_close(ours(x, edge_index), ours.bias.expand(n, 6))


@pytest.mark.parametrize("name", ["GATv2Conv", "TransformerConv"])
def test_edge_features_without_edge_dim_are_refused_by_name(name):
    """They would enter no score: PyG's GATv2Conv fails an empty assert there, its
    TransformerConv on mismatched shapes. A Graph's own edge features are not the call's."""
    edge_index, n = parity_graph(37)
    conv = getattr(gl, name)(6, 4)
    with pytest.raises(ValueError, match=rf"{name} was built without edge_dim, so the "
                                         r"edge_attr of shape \[\d+, 5\] would be ignored; "
                                         r"build it with edge_dim=5"):
        conv(torch.randn(n, 6), edge_index, torch.randn(edge_index.size(1), 5))
    graph = Graph(edge_index, num_nodes=n, edge_attr=torch.randn(edge_index.size(1), 5))
    conv(torch.randn(n, 6), graph)


@pytest.mark.parametrize("cls", ["TAGConv", "GatedGraphConv"])
def test_bad_features_weights_and_indices_are_refused_by_name(cls):
    """The propagation convs added on 2026-12-04 read their calls through the shared checks."""
    edge_index, n = parity_graph(56)
    conv = getattr(gl, cls)(8, 2)
    E = edge_index.size(1)
    with pytest.raises(TypeError, match=f"{cls} expects floating-point node features x"):
        conv(torch.ones(n, 8, dtype=torch.long), edge_index)
    with pytest.raises(ValueError, match=f"{cls}: edge_weight has 3 rows but the graph has {E}"):
        conv(torch.randn(n, 8), edge_index, torch.rand(3))
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds 99 at column 0"):
        conv(torch.randn(n, 8), torch.tensor([[99], [0]]))


ONE_NODE_SET = {  # layers on one node set: in_channels is one integer
    "GCNConv": lambda w: gl.GCNConv(w, 4), "SGConv": lambda w: gl.SGConv(w, 4),
    "SSGConv": lambda w: gl.SSGConv(w, 4, 0.1), "TAGConv": lambda w: gl.TAGConv(w, 4),
    "ChebConv": lambda w: gl.ChebConv(w, 4, 2), "MixHopConv": lambda w: gl.MixHopConv(w, 4),
    "PNAConv": lambda w: gl.PNAConv(w, 4, ["sum"], ["identity"], torch.tensor([1, 1])),
    "UGTLayer": lambda w: gl.UGTLayer(w, 4),
    "TopMAttention": lambda w: gl.TopMAttention(w, 4),
}
BIPARTITE = {  # a pair (source, destination widths) is taken
    "SAGEConv": lambda w: gl.SAGEConv(w, 4), "GraphConv": lambda w: gl.GraphConv(w, 4),
    "GATConv": lambda w: gl.GATConv(w, 4), "GATv2Conv": lambda w: gl.GATv2Conv(w, 4),
    "TransformerConv": lambda w: gl.TransformerConv(w, 4), "LEConv": lambda w: gl.LEConv(w, 4),
    "ResGatedGraphConv": lambda w: gl.ResGatedGraphConv(w, 4),
    "GENConv": lambda w: gl.GENConv(w, 4),
}


@pytest.mark.parametrize("name", sorted(ONE_NODE_SET))
def test_a_pair_of_widths_is_refused_by_name_on_one_node_set(name):
    """A list or pair of widths passed the size check of the one-node-set layers and failed
    in torch.empty ("argument 'size' failed to unpack"), naming no layer or argument."""
    for widths in ([6], [6, 6], (6, 3)):
        with pytest.raises(ValueError, match=f"{name}: in_channels must be an integer >= 1"):
            ONE_NODE_SET[name](widths)


@pytest.mark.parametrize("name", sorted(BIPARTITE))
def test_bipartite_layers_take_exactly_a_pair(name):
    BIPARTITE[name]((6, 3))
    for widths in ([6], (6, 3, 2), (6, 0)):
        with pytest.raises(ValueError, match=f"{name}: in_channels must be an integer >= 1"):
            BIPARTITE[name](widths)


def _mlp():
    return torch.nn.Linear(4, 4)


# the drop-in convs with the least each needs; the sweep below varies one option at a time
DROP_INS = {
    "GCNConv": dict(in_channels=4, out_channels=4), "SAGEConv": dict(in_channels=4, out_channels=4),
    "GATConv": dict(in_channels=4, out_channels=4),
    "GATv2Conv": dict(in_channels=4, out_channels=4),
    "GINConv": dict(nn=_mlp()), "GINEConv": dict(nn=_mlp()),
    "ChebConv": dict(in_channels=4, out_channels=4, K=2),
    "GraphConv": dict(in_channels=4, out_channels=4),
    "ResGatedGraphConv": dict(in_channels=4, out_channels=4),
    "TAGConv": dict(in_channels=4, out_channels=4),
    "GatedGraphConv": dict(out_channels=4, num_layers=2),
    "GENConv": dict(in_channels=4, out_channels=4),
    "PNAConv": dict(in_channels=4, out_channels=4, aggregators=["sum"], scalers=["identity"],
                    deg=torch.tensor([1, 1])),
    "TransformerConv": dict(in_channels=4, out_channels=4),
    "SGConv": dict(in_channels=4, out_channels=4), "APPNP": dict(K=2, alpha=0.1),
    "GCN2Conv": dict(channels=4, alpha=0.1), "LGConv": dict(),
    "LEConv": dict(in_channels=4, out_channels=4),
    "SSGConv": dict(in_channels=4, out_channels=4, alpha=0.1),
    "MixHopConv": dict(in_channels=4, out_channels=4),
}


@pytest.mark.parametrize("name", sorted(DROP_INS))
def test_every_true_false_option_refuses_anything_else_by_name(name):
    """A string such as "False" read as true (PyG's do so), and a tensor or a list failed at
    the first call ("unhashable type", "Boolean value of Tensor ... is ambiguous")."""
    cls = getattr(gl, name)
    flags = true_false_options(cls) + (["add_self_loops"] if name == "GCNConv" else [])
    assert flags
    for flag in flags:
        for junk in ("False", torch.tensor([1.0, 2.0]), [1], None if flag != "add_self_loops"
                     or name != "GCNConv" else "no"):
            with pytest.raises(TypeError, match=f"{name}: {flag} must be True or False"):
                cls(**{**DROP_INS[name], flag: junk})
        cls(**{**DROP_INS[name], flag: 0})  # 0 and 1, and NumPy's bools, are taken
        cls(**{**DROP_INS[name], flag: np.bool_(True)})


@pytest.mark.parametrize("build,match", [
    (lambda: gl.SAGEConv(4, 4, aggr_kwargs="t=2"), "SAGEConv: aggr_kwargs must be a dict"),
    (lambda: gl.GraphConv(4, 4, aggr_kwargs=[1]), "GraphConv: aggr_kwargs must be a dict"),
    (lambda: gl.GINConv(_mlp(), aggr_kwargs=1), "GINConv: aggr_kwargs must be a dict"),
    (lambda: gl.GENConv(4, 4, aggr_kwargs="x"), "GENConv: aggr_kwargs must be a dict"),
    (lambda: gl.GINConv(_mlp(), eps="0.1"), "GINConv: eps must be a number, got str"),
    (lambda: gl.GINEConv(_mlp(), eps=None), "GINEConv: eps must be a number, got NoneType"),
    (lambda: gl.GENConv(4, 4, eps=[1e-7]), "GENConv: eps must be a number, got list"),
    (lambda: gl.GINConv(None), "GINConv: nn must be a torch.nn.Module, got NoneType"),
    (lambda: gl.GENConv(4, 4, norm=["batch"]), "GENConv: norm must be one of"),
    (lambda: gl.PNAConv(4, 4, [1], ["identity"], None), "PNAConv: aggregators must be"),
    (lambda: gl.PNAConv(4, 4, ["sum"], None, None), "scalers must be a name or a list"),
    (lambda: gl.PNAConv(4, 4, ["sum"], [3], None), "scalers must be among"),
    (lambda: gl.PNAConv(4, 4, ["sum"], ["identity"], "1 2"), "deg must be a non-empty histogram"),
    (lambda: gl.PNAConv(4, 4, ["sum"], ["identity"], None, act_kwargs="slope"),
     "PNAConv: act_kwargs must be a dict"),
])
def test_other_options_are_refused_by_name(build, match):
    with pytest.raises((TypeError, ValueError), match=match):
        build()


# every other layer and model of graphloc.nn with a True/False option, at its least
OTHERS_WITH_FLAGS = {
    "ADGN": dict(in_channels=4, hidden_channels=4, out_channels=2, num_layers=2),
    "AGNNConv": dict(), "ARMAConv": dict(in_channels=4, out_channels=4),
    "AntiSymmetricConv": dict(in_channels=4), "CGConv": dict(channels=4),
    "ClusterGCNConv": dict(in_channels=4, out_channels=4),
    "DNAConv": dict(channels=4, heads=1), "DirGNNConv": dict(conv=gl.GCNConv(4, 4)),
    "Distance": dict(cutoff=1.0), "EGConv": dict(in_channels=8, out_channels=8),
    "FAConv": dict(channels=4), "FeaStConv": dict(in_channels=4, out_channels=4),
    "ForwardLinkGNN": dict(conv="gcn", in_channels=4, hidden_channels=4, num_layers=2,
                           procedure="top-down"),
    "GMMConv": dict(in_channels=4, out_channels=4, dim=2, kernel_size=2),
    "GNN": dict(conv="gcn", in_channels=4, hidden_channels=4, out_channels=2, num_layers=2),
    "GeneralConv": dict(in_channels=4, out_channels=4),
    "HEATConv": dict(in_channels=4, out_channels=4, num_node_types=2, num_edge_types=2,
                     edge_type_emb_dim=2, edge_dim=2, edge_attr_emb_dim=2),
    "HypergraphConv": dict(in_channels=4, out_channels=4),
    "LAModel": dict(conv="gcn", in_channels=4, hidden_channels=4, out_channels=2,
                    num_layers=2, num_generated=0),
    "LATTE": dict(in_channels={"a": 4}, hidden_channels=4, out_channels=2, num_layers=1,
                  metadata=(["a"], [("a", "to", "a")]), target="a"),
    "CityNetworksMLP": dict(in_channels=4, hidden_channels=4, out_channels=2),
    "LiftConv": dict(channels=4),
    "LiftGCN": dict(in_channels=4, hidden_channels=4, out_channels=2, num_layers=2),
    "MEGAGNN": dict(node_in=1, edge_in=2, hidden=4, out_channels=2),
    "MFConv": dict(in_channels=4, out_channels=4), "MultiEdgeConv": dict(channels=4),
    "NNConv": dict(in_channels=4, out_channels=4, nn=torch.nn.Linear(2, 16)),
    "Node2Vec": dict(edge_index=torch.tensor([[0, 1], [1, 0]]), embedding_dim=4,
                     walk_length=3, context_size=2),
    "PDNConv": dict(in_channels=4, out_channels=4, edge_dim=2, hidden_channels=4),
    "PPFConv": dict(), "PointNetConv": dict(),
    "PointTransformerConv": dict(in_channels=4, out_channels=4),
    "RGATConv": dict(in_channels=4, out_channels=4, num_relations=2),
    "RGCNConv": dict(in_channels=4, out_channels=4, num_relations=2),
    "SGFormer": dict(in_channels=4, hidden_channels=4, out_channels=2),
    "SGFormerAttention": dict(channels=4), "SignedConv": dict(in_channels=4, out_channels=4,
                                                             first_aggr=True),
    "SparseLinear": dict(in_channels=4, out_channels=4),
    "SplineConv": dict(in_channels=4, out_channels=4, dim=2, kernel_size=2),
    "SuperGATConv": dict(in_channels=4, out_channels=4),
    "TopMAttention": dict(in_channels=4, out_channels=4),
    "XConv": dict(in_channels=4, out_channels=4, dim=2, kernel_size=2),
}


def test_every_layer_and_model_with_a_true_false_option_is_swept_below():
    import graphloc.nn.models as models
    assert classes_with_true_false_options(gl, models) <= set(DROP_INS) | set(OTHERS_WITH_FLAGS)


@pytest.mark.parametrize("name", sorted(OTHERS_WITH_FLAGS))
def test_every_other_true_false_option_refuses_a_string_by_name(name):
    """MEGAGNN(edge_update="False") trained with edge updates, quietly; the same for
    MultiEdgeConv, SGFormerAttention, SparseLinear and TopMAttention (2026-12-07)."""
    import graphloc.nn.models as models
    cls = getattr(gl, name, None) or getattr(models, name)
    for flag in true_false_options(cls):
        with pytest.raises(TypeError, match=rf"{flag}(\[0\])? must be True or False, "
                                            "got 'False'"):
            cls(**{**OTHERS_WITH_FLAGS[name], flag: "False"})
