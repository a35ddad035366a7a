"""from_pyg: PyG models and convs become graphloc ones with PyG's outputs."""

import copy
import inspect
import warnings

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index
from parity import pyg_knn_by_brute_force, pygs_spline_conv_by_oracle
from torch_geometric.nn import MessagePassing

from graphloc.influence import measure, total_influence
from graphloc.nn import GNN, GATConv, GCNConv, Unconvertible, from_pyg
from graphloc.nn.conv import sage as gl_sage


@pytest.fixture(autouse=True)
def _pygs_knn():
    """PyG's DynamicEdgeConv, GravNetConv and SplineConv need pyg-lib: here the oracles'
    knn and spline basis."""
    with pyg_knn_by_brute_force(), pygs_spline_conv_by_oracle():
        yield


def _probe(width=6, n=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, width, generator=gen), random_edge_index(n, 160, seed=seed)


BASIC = [
    ("GCN", lambda: pyg.GCN(6, 8, 3, 4, dropout=0.3, norm="batch_norm")),
    ("GCN 1 layer", lambda: pyg.GCN(6, 8, 1, 4)),
    ("GraphSAGE", lambda: pyg.GraphSAGE(6, 8, 3, 4, act="gelu", aggr="max")),
    ("GIN", lambda: pyg.GIN(6, 8, 2, 4, act="elu")),
    ("GAT", lambda: pyg.GAT(6, 8, 3, 4, heads=2)),
    # PyG's default of one head, and heads averaged, at a width 4 does not divide (the GNN
    # around the converted convs was built with 4 heads and raised)
    ("GAT 1 head width 6", lambda: pyg.GAT(6, 6, 2, 4)),
    ("GAT 3 heads averaged", lambda: pyg.GAT(6, 6, 3, 4, heads=3, concat=False)),
    ("GCN layer_norm node", lambda: pyg.GCN(6, 8, 3, 4, norm="layer_norm",
                                            norm_kwargs={"mode": "node"})),
    # an activation's own arguments (the GNN around the convs built ELU(alpha=1), and the
    # probe kept PyG's container)
    ("GAT ELU alpha 0.2", lambda: pyg.GAT(6, 8, 3, 4, heads=2, act="elu",
                                          act_kwargs={"alpha": 0.2})),
    ("GCN GELU tanh", lambda: pyg.GCN(6, 8, 3, 4, act="gelu",
                                      act_kwargs={"approximate": "tanh"})),
    # activations GNN has no name for (they kept PyG's container)
    ("GCN LeakyReLU 0.3", lambda: pyg.GCN(6, 8, 3, 4, act="leaky_relu",
                                          act_kwargs={"negative_slope": 0.3})),
    ("GraphSAGE SiLU", lambda: pyg.GraphSAGE(6, 8, 3, 4, act="silu")),
    ("GIN PReLU", lambda: pyg.GIN(6, 8, 3, 4, act=torch.nn.PReLU(init=0.1))),
]


@pytest.mark.parametrize("name, build", BASIC, ids=[b[0] for b in BASIC])
def test_basic_gnns_become_gnns_with_pyg_outputs(name, build):
    torch.manual_seed(0)
    theirs = build().double()
    x, edge_index = _probe()
    x = x.double()
    ours = from_pyg(theirs)
    assert isinstance(ours, GNN) and ours.prunes_layers
    assert ours.pyg_conversion["checked"] and ours.pyg_conversion["kept"] == []
    theirs.eval()
    ours.eval()
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    # training mode too, dropout off: batch statistics and gradients agree
    for module in (ours, theirs):
        module.train()
        for m in module.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = ours(x1, edge_index), theirs(x2, edge_index)
    torch.testing.assert_close(out1, out2)
    grad = torch.randn_like(out1)
    torch.testing.assert_close(torch.autograd.grad(out1, x1, grad)[0],
                               torch.autograd.grad(out2, x2, grad)[0])


def test_what_gnn_lacks_keeps_pyg_container_with_graphloc_convs():
    torch.manual_seed(0)
    x, edge_index = _probe()
    for theirs, reason in ((pyg.GCN(6, 8, 3, 4, jk="cat"), "jumping knowledge"),
                           (pyg.GCN(6, 8, 3, 4, norm="layer_norm"), "mode='graph'")):
        with pytest.warns(UserWarning, match=reason):
            ours = from_pyg(theirs.eval())
        assert type(ours) is type(theirs) and ours is not theirs
        assert all(type(c).__module__.startswith("graphloc") for c in ours.convs)
        assert all(type(c).__module__.startswith("torch_geometric") for c in theirs.convs)
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


class _UserModel(torch.nn.Module):
    def __init__(self, aggr="mean", flow="source_to_target", improved=False):
        super().__init__()
        self.first = pyg.GCNConv(6, 8, improved=improved)
        self.second = pyg.SAGEConv(8, 4, aggr=aggr, flow=flow)

    def forward(self, x, edge_index):
        return self.second(torch.relu(self.first(x, edge_index)), edge_index)


def test_convs_inside_a_users_module_are_replaced_in_place():
    torch.manual_seed(0)
    x, edge_index = _probe()
    theirs = _UserModel().eval()
    ours = from_pyg(theirs, example=(x, edge_index))
    assert ours.pyg_conversion["converted"] == ["first", "second"]
    assert type(ours.first).__module__ == "graphloc.nn.conv.gcn"
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    reversed_flow = _UserModel(flow="target_to_source").eval()
    converted = from_pyg(reversed_flow, example=(x, edge_index))
    assert converted.second.flow == "target_to_source"
    torch.testing.assert_close(converted(x, edge_index), reversed_flow(x, edge_index))
    improved = _UserModel(improved=True).eval()
    converted = from_pyg(improved, example=(x, edge_index), strict=True)
    assert converted.pyg_conversion["converted"] == ["first", "second"]
    torch.testing.assert_close(converted(x, edge_index), improved(x, edge_index))
    with pytest.warns(UserWarning, match="no probe"):
        from_pyg(theirs)


@pytest.mark.parametrize("inner", [lambda: pyg.SAGEConv(6, 6), lambda: pyg.TransformerConv(6, 6),
                                   lambda: pyg.ResGatedGraphConv(6, 6),
                                   lambda: pyg.GCNConv(6, 6), lambda: pyg.GATConv(6, 6)])
def test_directed_wrappers_convert_the_copies_whose_root_weight_they_switch_off(inner):
    """PyG's DirGNNConv copies its conv twice and sets root_weight = False on the copies,
    which still hold the root map their forward no longer reads: they were kept as PyG's
    (a state-dict mismatch). Converted, the wrapper gives PyG's outputs and gradients."""
    torch.manual_seed(3)
    x, edge_index = _probe()
    x = x.double().requires_grad_()
    theirs = pyg.DirGNNConv(inner()).double().eval()
    ours = from_pyg(theirs, example=(x.detach(), edge_index), strict=True)
    assert ours.pyg_conversion["converted"] == ["conv_in", "conv_out"]
    assert type(ours.conv_in).__module__.startswith("graphloc.")
    want, got = theirs(x, edge_index), ours(x, edge_index)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0],
                               torch.autograd.grad(want.sum(), x)[0])


@pytest.mark.parametrize("wrapper", [
    lambda: pyg.AntiSymmetricConv(6, num_iters=3),
    lambda: pyg.AntiSymmetricConv(6, phi=pyg.GATConv(6, 6), num_iters=2),
    lambda: pyg.GPSConv(6, pyg.ResGatedGraphConv(6, 6), heads=2)])
def test_convs_inside_pyg_wrappers_convert(wrapper):
    """The long-range wrappers (A-DGN's AntiSymmetricConv, GraphGPS's GPSConv) keep their
    own code and get graphloc's convs inside: PyG's outputs and gradients."""
    torch.manual_seed(4)
    x, edge_index = _probe()
    x = x.double().requires_grad_()
    theirs = wrapper().double().eval()
    ours = from_pyg(theirs, example=(x.detach(), edge_index), strict=True)
    assert ours.pyg_conversion["converted"] and not ours.pyg_conversion["kept"]
    want, got = theirs(x, edge_index), ours(x, edge_index)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0],
                               torch.autograd.grad(want.sum(), x)[0])


class UsersConv(MessagePassing):
    """A user's own PyG conv, which graphloc has no equivalent for: a Linear, then sums of
    the neighbours."""

    def __init__(self, channels):
        super().__init__(aggr="add")
        self.lin = torch.nn.Linear(channels, channels)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))


class _MixedModel(torch.nn.Module):
    """A PyG conv graphloc converts, then one it has no equivalent for (a user's own; until
    2026-12-05 SuperGATConv, and before RGATConv, which convert now)."""

    def __init__(self):
        super().__init__()
        self.first = pyg.GCNConv(6, 4)
        self.second = UsersConv(4)

    def forward(self, x, edge_index):
        return self.second(torch.relu(self.first(x, edge_index)), edge_index)


def test_pyg_convs_without_an_equivalent_are_reported_as_kept():
    """A user's own conv stays PyG's; the report lists it, with the warning (it said kept: []
    and left the user to believe nothing of PyG remained)."""
    x, edge_index = _probe()
    theirs = _MixedModel().eval()
    with pytest.warns(UserWarning, match="second: UsersConv has no graphloc equivalent"):
        ours = from_pyg(theirs, example=(x, edge_index))
    assert ours.pyg_conversion["converted"] == ["first"]
    assert ours.pyg_conversion["kept"] == [("second",
                                            "UsersConv has no graphloc equivalent")]
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    with pytest.raises(Unconvertible, match="second: UsersConv"):
        from_pyg(theirs, example=(x, edge_index), strict=True)
    model = measure(theirs, (x, edge_index), 2, nodes=[0], bootstrap=10).settings["model"]
    assert model == {"converted": False,
                     "reason": "could not convert second: UsersConv has no graphloc "
                               "equivalent", "call": "model(x, edge_index)"}
    alone = UsersConv(6)
    with pytest.warns(UserWarning,
                      match="UsersConv: UsersConv has no graphloc equivalent"):
        kept = from_pyg(alone.eval(), example=(x, edge_index))
    assert kept.pyg_conversion["kept"] == [("UsersConv",
                                            "UsersConv has no graphloc equivalent")]


def test_a_basic_gnn_is_probed_at_its_input_width():
    """EdgeCNN's first MLP reads [x_i, x_j - x_i], twice the input width: the random probe
    takes the model's in_channels (a probe of the MLP's width failed, blamed on the model)."""
    model = pyg.EdgeCNN(6, 8, 2, 4).eval()
    converted = from_pyg(model)  # its EdgeConvs become graphloc's (2026-12-05)
    assert converted.pyg_conversion["checked"]
    assert converted.pyg_conversion["converted"] == ["convs.0", "convs.1"]
    x, edge_index = _probe()
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))


CONVS = [
    pyg.GCNConv(6, 4, normalize=True), pyg.SAGEConv(6, 4, normalize=True, root_weight=False),
    pyg.GATConv(6, 4, heads=3, concat=False, add_self_loops=False),
    pyg.GINConv(torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU()), train_eps=True),
    pyg.ChebConv(6, 4, K=3), pyg.TransformerConv(6, 4, heads=2, beta=True),
    pyg.ResGatedGraphConv(6, 4, root_weight=False), pyg.TAGConv(6, 4, K=2, normalize=False),
    pyg.GatedGraphConv(6, 2, aggr="max"), pyg.LGConv(), pyg.LGConv(normalize=False),
    pyg.LEConv(6, 4), pyg.LEConv(6, 4, bias=False),
]


SAGE_AGGREGATIONS = [
    {"aggr": "max", "project": True}, {"aggr": "min"}, {"aggr": "softmax"}, {"aggr": "std"},
    {"aggr": "lstm"}, {"aggr": "median"}, {"aggr": ["mean", "max"]},
    {"aggr": ["mean", "max"], "aggr_kwargs": {"mode": "proj",
                                              "mode_kwargs": {"in_channels": 6,
                                                              "out_channels": 6}}},
    {"aggr": "softmax", "aggr_kwargs": {"t": 0.5}},
]


@pytest.mark.parametrize("kwargs", SAGE_AGGREGATIONS, ids=str)
def test_sage_converts_with_any_aggregation(kwargs):
    """SAGEConv converted only for mean, max and sum without project: a user model with
    any other aggregation kept PyG's conv. A plain one now runs on graphloc's kernel, any
    other is PyG's own module, copied (hyperparameters such as t = 0.5 included), with
    PyG's outputs."""
    torch.manual_seed(0)
    x, edge_index = _probe()
    edge_index = edge_index[:, edge_index[1].argsort(stable=True)]  # PyG's LSTM needs it
    theirs = pyg.SAGEConv(6, 4, **kwargs).eval()
    ours = from_pyg(theirs, example=(x, edge_index), strict=True)
    assert type(ours).__module__ == "graphloc.nn.conv.sage"
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


@pytest.mark.parametrize("conv", CONVS, ids=lambda c: type(c).__name__)
def test_each_conv_converts_with_its_options(conv):
    x, edge_index = _probe()
    edge_index = torch.cat([edge_index, edge_index.flip(0)], 1)  # Cheb: undirected
    ours = from_pyg(conv.eval(), example=(x, edge_index))
    assert type(ours).__module__.startswith("graphloc")
    torch.testing.assert_close(ours(x, edge_index), conv(x, edge_index))


def test_influence_measures_a_pyg_model_as_its_graphloc_twin():
    torch.manual_seed(0)
    x, edge_index = _probe(n=80)
    edge_index = torch.cat([edge_index, edge_index.flip(0)], 1)
    model = pyg.GCN(6, 8, 4, 3).eval()
    fast, r_fast = total_influence(model, (x, edge_index), 5, nodes=[0, 3, 9], average=False)
    slow, r_slow = total_influence(model, (x, edge_index), 5, nodes=[0, 3, 9], average=False,
                                   convert=False)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-7)
    assert r_fast == pytest.approx(r_slow, rel=1e-5)
    result = measure(model, (x, edge_index), 5, nodes=[0, 3], bootstrap=10)
    assert result.settings["model"]["converted"] and result.settings["model"]["measured"] == \
        "GNN"
    assert type(model.convs[0]).__module__.startswith("torch_geometric")  # left unchanged
    jk = pyg.GCN(6, 8, 2, 3, jk="max").eval()
    assert measure(jk, (x, edge_index), 3, nodes=[0], bootstrap=10).settings["model"][
        "measured"] == "GCN"  # graphloc convs in PyG's container


def test_improved_gcn_converts_with_pygs_loop_weights():
    """PyG's improved GCNConv gives the loops it adds to an edge_index weight 1 without
    edge weights and 2 with them (and on a torch.sparse adjacency). It was kept as PyG's
    (graphloc's gives 2 throughout), so GraphUNet, built of them, had no fast path: the
    twin now takes PyG's rule, checked here without a probe on every path."""
    torch.manual_seed(0)
    x, edge_index = _probe()
    weight = torch.rand(edge_index.size(1)) + 0.5
    theirs = pyg.GCNConv(6, 4, improved=True).eval()
    ours = from_pyg(torch.nn.ModuleList([theirs]))[0]  # unchecked: no probe
    assert type(ours) is GCNConv and ours.pyg_improved_loops
    adj = torch.sparse_coo_tensor(edge_index.flip(0), weight, (x.size(0),) * 2).coalesce()
    for args in ((x, edge_index), (x, edge_index, weight), (x, adj)):
        torch.testing.assert_close(ours(*args), theirs(*args))
    unet = pyg.GraphUNet(6, 8, 4, depth=2).eval()
    converted = from_pyg(unet, example=(x, edge_index), strict=True)
    assert len(converted.pyg_conversion["converted"]) == 5
    torch.testing.assert_close(converted(x, edge_index), unet(x, edge_index))


def test_bad_arguments_are_named():
    model = pyg.GCN(6, 8, 2, 4)
    with pytest.raises(TypeError, match="module must be a torch.nn.Module, got int"):
        from_pyg(3)
    with pytest.raises(TypeError, match="example must be a tuple"):
        from_pyg(model, example=torch.zeros(3, 6))
    for atol in (-1.0, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match="atol must be a number >= 0"):
            from_pyg(model, atol=atol)
    x, edge_index = _probe()
    out_of_range = edge_index.clone()
    out_of_range[1, 0] = x.size(0) + 3
    for bad in ((x[:, :5], edge_index), (x, out_of_range)):  # wrong width, index
        with pytest.raises(ValueError, match="the original module fails on example"):
            from_pyg(model, example=bad)


CONVERTED = [*BASIC, ("user model", _UserModel),
             ("jumping knowledge", lambda: pyg.GCN(6, 8, 3, 4, jk="cat"))]


@pytest.mark.parametrize("name, build", CONVERTED, ids=[c[0] for c in CONVERTED])
def test_conversion_leaves_the_global_random_state_as_it_was(name, build):
    """Building the twins (their initialisation) and the random probe drew from the global
    generator, so a seeded script's later draws (dropout, sampling, the next model's
    weights) changed with the conversion; its warnings still point at the caller."""
    torch.manual_seed(0)
    theirs = build().eval()
    for example in (_probe(), None):
        if example is None and name == "user model":
            continue  # a module of the user's own is only checked on the user's probe
        state = torch.get_rng_state()
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            from_pyg(theirs, example=example)
        assert torch.equal(torch.get_rng_state(), state)
        assert all(w.filename == __file__ for w in record)
        assert (name == "jumping knowledge") == bool(record)


def test_converted_gnns_take_pyg_basic_gnn_arguments():
    """PyG's BasicGNN call (edge_weight, edge_attr, batch) on the converted model gives
    PyG's outputs; a kind whose convs ignore an argument says so."""
    torch.manual_seed(0)
    x, edge_index = _probe()
    gen = torch.Generator().manual_seed(3)
    weight = torch.rand(edge_index.size(1), generator=gen)
    attr = torch.randn(edge_index.size(1), 3, generator=gen)
    batch = torch.zeros(x.size(0), dtype=torch.long)
    cases = [(pyg.GCN(6, 8, 3, 4), {"edge_weight": weight}),
             (pyg.GAT(6, 8, 2, 4, heads=2, edge_dim=3), {"edge_attr": attr}),
             (pyg.GAT(6, 8, 2, 4, edge_dim=3), {}),  # PyG's: no edge term without them
             (pyg.GIN(6, 8, 2, 4), {"batch": batch, "batch_size": 1})]
    for theirs, kwargs in cases:
        theirs.eval()
        ours = from_pyg(theirs).eval()
        assert isinstance(ours, GNN)
        torch.testing.assert_close(ours(x, edge_index, **kwargs), theirs(x, edge_index, **kwargs))
    theirs = pyg.GraphSAGE(6, 8, 2, 4).eval()
    ours = from_pyg(theirs).eval()
    with pytest.warns(UserWarning, match="take no edge_weight; ignored"):
        got = ours(x, edge_index, edge_weight=weight)
    torch.testing.assert_close(got, theirs(x, edge_index, edge_weight=weight))


def _hop_ordered_batch(n=60, seeds=5, hops=2, seed=0):
    """A NeighborLoader-style batch from graphloc's loader: nodes and edges listed by the
    hop that added them, with the counts PyG's trim_to_layer reads."""
    from graphloc import Graph
    from graphloc.loader import NeighborLoader
    x, edge_index = _probe(n=n, seed=seed)
    graph = Graph(edge_index, num_nodes=n)
    loader = NeighborLoader(graph, x, None, [3] * hops, batch_size=seeds)
    return next(iter(loader))


@pytest.mark.parametrize("kind", ["GCN", "GraphSAGE", "GAT", "GIN"])
def test_trimmed_layers_give_pyg_trim_to_layer_outputs(kind):
    torch.manual_seed(0)
    theirs = getattr(pyg, kind)(6, 8, 2, 4).eval()
    ours = from_pyg(theirs).eval()
    batch = _hop_ordered_batch()
    counts = {"num_sampled_nodes_per_hop": batch.num_sampled_nodes,
              "num_sampled_edges_per_hop": batch.num_sampled_edges}
    edge_index = batch.graph.edge_index
    want = theirs(batch.x, edge_index, **counts)
    got = ours(batch.x, edge_index, **counts)
    torch.testing.assert_close(got, want)
    assert got.size(0) < batch.x.size(0)
    if kind != "GCN":  # GCN's normalisation reads the trimmed degrees (PyG's too)
        torch.testing.assert_close(got[:batch.batch_size],
                                   ours(batch.x, edge_index)[:batch.batch_size])
    with pytest.raises(ValueError, match="go together"):
        ours(batch.x, edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes)
    with pytest.raises(TypeError, match="edge_index tensor"):
        ours(batch.x, batch.graph, **counts)
    nodes, edges = batch.num_sampled_nodes, batch.num_sampled_edges
    with pytest.raises(ValueError, match=rf"num_sampled_nodes_per_hop must be counts >= 0 "
                                         rf"summing to the batch's {batch.x.size(0)} nodes"):
        ours(batch.x, edge_index, num_sampled_nodes_per_hop=[nodes[0] + 1, *nodes[1:]],
             num_sampled_edges_per_hop=edges)
    with pytest.raises(ValueError, match="num_sampled_edges_per_hop must be counts >= 0"):
        ours(batch.x, edge_index, num_sampled_nodes_per_hop=nodes,
             num_sampled_edges_per_hop=[-1, *edges[1:]])
    with pytest.raises(ValueError, match="one more node count"):
        ours(batch.x, edge_index, num_sampled_nodes_per_hop=nodes,
             num_sampled_edges_per_hop=edges[:-1])
    if kind == "GCN":
        with pytest.raises(NotImplementedError, match="both edge_weight and edge_attr"):
            ours(batch.x, edge_index, edge_weight=torch.ones(edge_index.size(1)),
                 edge_attr=torch.ones(edge_index.size(1), 2), **counts)


def _gin_mlp():
    return torch.nn.Sequential(torch.nn.Linear(6, 4))


# one PyG conv of each class from_pyg converts, built with PyG's aggr= keyword
AGGREGATED = {
    "GCNConv": lambda a: pyg.GCNConv(6, 4, aggr=a),
    "SAGEConv": lambda a: pyg.SAGEConv(6, 4, aggr=a),
    "GATConv": lambda a: pyg.GATConv(6, 4, heads=2, aggr=a),
    "GATv2Conv": lambda a: pyg.GATv2Conv(6, 4, aggr=a),
    "GINConv": lambda a: pyg.GINConv(_gin_mlp(), aggr=a),
    "GINEConv": lambda a: pyg.GINEConv(_gin_mlp(), aggr=a),
    "ChebConv": lambda a: pyg.ChebConv(6, 4, 2, aggr=a),
    "TransformerConv": lambda a: pyg.TransformerConv(6, 4, aggr=a),
    "GraphConv": lambda a: pyg.GraphConv(6, 4, aggr=a),
    "SGConv": lambda a: pyg.SGConv(6, 4, aggr=a),
    "APPNP": lambda a: pyg.APPNP(2, 0.1, aggr=a),
    "GCN2Conv": lambda a: pyg.GCN2Conv(6, 0.1, aggr=a),
    "ResGatedGraphConv": lambda a: pyg.ResGatedGraphConv(6, 4, aggr=a),
    "TAGConv": lambda a: pyg.TAGConv(6, 4, aggr=a),
    "GatedGraphConv": lambda a: pyg.GatedGraphConv(6, 2, aggr=a),
    "GENConv": lambda a: pyg.GENConv(6, 4, aggr=a),
    "PNAConv": lambda a: pyg.PNAConv(6, 4, [a], ["identity"], torch.tensor([1, 2, 3])),
    "LGConv": lambda a: pyg.LGConv(aggr=a),
    "LEConv": lambda a: pyg.LEConv(6, 4, aggr=a),
    "SSGConv": lambda a: pyg.SSGConv(6, 4, 0.1, aggr=a),
    "MixHopConv": lambda a: pyg.MixHopConv(6, 4, aggr=a),
    "FAConv": lambda a: pyg.FAConv(6, aggr=a),
    "ClusterGCNConv": lambda a: pyg.ClusterGCNConv(6, 4, diag_lambda=0.5, aggr=a),
    "AGNNConv": lambda a: pyg.AGNNConv(aggr=a),
    "EdgeConv": lambda a: pyg.EdgeConv(torch.nn.Linear(12, 4), aggr=a),
    "SimpleConv": lambda a: pyg.SimpleConv(aggr=a, combine_root="sum"),
    "RGCNConv": lambda a: pyg.RGCNConv(6, 4, 3, aggr=a),
    "FastRGCNConv": lambda a: pyg.FastRGCNConv(6, 4, 3, aggr=a),
    "ARMAConv": lambda a: pyg.ARMAConv(6, 4, num_stacks=2, num_layers=2, aggr=a),
    "MFConv": lambda a: pyg.MFConv(6, 4, aggr=a),
    "CGConv": lambda a: pyg.CGConv(6, aggr=a),
    "GeneralConv": lambda a: pyg.GeneralConv(6, 4, aggr=a),
    "EGConv": lambda a: pyg.EGConv(6, 4, num_heads=2, aggr=a),
    "NNConv": lambda a: pyg.NNConv(6, 4, torch.nn.Linear(3, 24), aggr=a),
    "GMMConv": lambda a: pyg.GMMConv(6, 4, dim=3, kernel_size=2, aggr=a),
    "FeaStConv": lambda a: pyg.FeaStConv(6, 4, heads=2, aggr=a),
    "PDNConv": lambda a: pyg.PDNConv(6, 4, 3, 5, aggr=a),
    "WLConvContinuous": lambda a: _with_aggregation(pyg.WLConvContinuous(), a),
    "SignedConv": lambda a: pyg.SignedConv(6, 4, True, aggr=a),
    "HypergraphConv": lambda a: pyg.HypergraphConv(6, 4, aggr=a),
    "PointNetConv": lambda a: pyg.PointNetConv(torch.nn.Linear(9, 4), aggr=a),
    "FiLMConv": lambda a: pyg.FiLMConv(6, 4, aggr=a),
    "LabelPropagation": lambda a: _with_aggregation(pyg.LabelPropagation(2, 0.7), a),
    "GATEConv": lambda a: _gate_conv(a),
    "CFConv": lambda a: _with_aggregation(_cf_conv(), a),
    "HGTConv": lambda a: _with_aggregation(pyg.HGTConv(6, 4, _ONE_TYPE, heads=2), a),
    "HANConv": lambda a: _with_aggregation(pyg.HANConv(6, 4, _ONE_TYPE, heads=2), a),
    "SparseLinear": lambda a: _with_aggregation(_sparse_linear(), a),
    "RGATConv": lambda a: pyg.RGATConv(6, 4, 3, heads=2, aggr=a),
    "SuperGATConv": lambda a: pyg.SuperGATConv(6, 4, heads=2, aggr=a),
    "PointTransformerConv": lambda a: pyg.PointTransformerConv(6, 4, aggr=a),
    "DNAConv": lambda a: pyg.DNAConv(6, heads=2, aggr=a),
    "HEATConv": lambda a: pyg.HEATConv(6, 4, 2, 3, 3, 2, 3, heads=2, aggr=a),
    "WLConv": lambda a: _with_aggregation(pyg.WLConv(), a),
    "PPFConv": lambda a: pyg.PPFConv(torch.nn.Linear(10, 4), aggr=a),
    "PointGNNConv": lambda a: pyg.PointGNNConv(torch.nn.Linear(6, 3), torch.nn.Linear(9, 4),
                                               torch.nn.Linear(4, 6), aggr=a),
    "DynamicEdgeConv": lambda a: pyg.DynamicEdgeConv(torch.nn.Linear(12, 4), k=3, aggr=a),
    "GravNetConv": lambda a: _gravnet(a),
    "SplineConv": lambda a: pyg.SplineConv(6, 4, dim=2, kernel_size=3, aggr=a),
    "XConv": lambda a: pyg.XConv(6, 4, dim=3, kernel_size=4),  # (no aggregation to set)
}


def _sparse_linear():
    """LINKX's SparseLinear (not exported by torch_geometric.nn): a weight row for each of
    the probe's 40 nodes."""
    from torch_geometric.nn.models.linkx import SparseLinear
    return SparseLinear(40, 4)

#: HGTConv's and HANConv's metadata for the sweeps: one node type, one relation (as x and
#: edge_index)
_ONE_TYPE = (["n"], [("n", "to", "n")])


def _node_rows(out):
    """A conv's output; a heterogeneous conv's one node type's."""
    return out["n"] if isinstance(out, dict) else out


def _cf_conv():
    """SchNet's CFConv (not exported by torch_geometric.nn) on 4 edge features."""
    from torch_geometric.nn.models.schnet import CFConv
    return CFConv(6, 5, 8, torch.nn.Linear(4, 8), cutoff=5.0)


def _with_aggregation(conv, aggr):
    """``conv`` (whose constructor fixes aggr="add": WLConvContinuous, LabelPropagation)
    with ``aggr`` set as PyG's MessagePassing takes it."""
    conv.aggr = aggr
    return conv


def _gravnet(aggr):
    """GravNetConv, whose aggregations (mean and max) its constructor fixes: as built for
    "sum", the sweeps' default, else with ``aggr`` set as PyG's MessagePassing takes it."""
    conv = pyg.GravNetConv(6, 4, 2, 3, k=3)
    return conv if aggr == "sum" else _with_aggregation(conv, aggr)


def _gate_conv(aggr):
    """AttentiveFP's GATEConv (not exported by torch_geometric.nn), with ``aggr`` set as
    PyG's MessagePassing takes it."""
    from torch_geometric.nn.models.attentive_fp import GATEConv
    conv = GATEConv(6, 6, 3)
    conv.aggr = aggr
    return conv


#: converted classes outside the sweep: PyG's PANConv runs only with torch-sparse (its
#: aggregation: test_a_pan_model_converts_with_its_pooling), PANPooling aggregates nothing
_NOT_SWEPT = {"PANConv", "PANPooling"}


def test_every_converted_class_is_in_the_aggregation_sweep():
    from graphloc.nn.convert import _CONVERTERS, _GRAPH_BUILDERS
    # (the graph builders aggregate nothing)
    assert set(AGGREGATED) == set(_CONVERTERS) - set(_GRAPH_BUILDERS) - _NOT_SWEPT


@pytest.mark.parametrize("aggr", ["mean", "max"])
@pytest.mark.parametrize("name", sorted(AGGREGATED))
def test_a_conv_built_with_another_aggregation_is_kept_or_converted_with_it(name, aggr):
    """PyG's MessagePassing takes aggr= for every conv. Converted without a probe (inside a
    ModuleList: no example to check on), APPNP, GCN2Conv and GINEConv with aggr="mean"
    became graphloc's summing twins, and GINConv dropped its aggregation: other outputs
    without a word. Now a conv is converted with its aggregation or kept, said so."""
    torch.manual_seed(0)
    x, edge_index = _probe()
    theirs = AGGREGATED[name](aggr).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = from_pyg(torch.nn.ModuleList([theirs]))
    ours, report = converted[0], converted.pyg_conversion
    if type(ours).__module__.startswith("torch_geometric"):
        [(where, reason)] = report["kept"]
        assert where == "0" and f"aggr='{aggr}'" in reason
        if name == "FastRGCNConv":
            return  # PyG's takes add, sum and mean only: its forward asserts on the rest
    else:
        assert report["converted"] == ["0"]
    args = _call_args(name, x, edge_index)
    torch.testing.assert_close(_node_rows(ours(*args)), _node_rows(theirs(*args)), atol=1e-5,
                               rtol=1e-5)


def _call_args(name: str, x, edge_index) -> tuple:
    """How a conv of ``AGGREGATED`` is called on features x."""
    edge_type = torch.arange(edge_index.size(1)) % 3
    return {"GCN2Conv": (x, x, edge_index), "FAConv": (x, x, edge_index),
            "GINEConv": (x, edge_index, torch.randn(edge_index.size(1), 6)),
            "NNConv": (x, edge_index, torch.randn(edge_index.size(1), 3)),
            "GMMConv": (x, edge_index, torch.rand(edge_index.size(1), 3)),
            "PDNConv": (x, edge_index, torch.randn(edge_index.size(1), 3)),
            "SignedConv": (x, edge_index, edge_index.flip(0)),
            "PointNetConv": (x, x[..., :3], edge_index),
            "PointTransformerConv": (x, x[..., :3], edge_index),
            "PPFConv": (x, x[..., :3], x[..., 3:], edge_index),
            "PointGNNConv": (x, x[..., :3], edge_index),
            # (they find their own neighbours: the points and their examples)
            "DynamicEdgeConv": (x, torch.arange(x.size(-2)) // 8),
            "GravNetConv": (x, torch.arange(x.size(-2)) // 8),
            "XConv": (x, x[..., :3], torch.arange(x.size(-2)) // 8),
            # (pseudo-coordinates in [0, 1])
            "SplineConv": (x, edge_index, torch.rand(edge_index.size(1), 2,
                                                     generator=torch.Generator().manual_seed(1))),
            "GATEConv": (x, edge_index, torch.randn(edge_index.size(1), 3)),
            "RGCNConv": (x, edge_index, edge_type),
            "CFConv": (x, edge_index, torch.rand(edge_index.size(1)) * 6,
                       torch.randn(edge_index.size(1), 4)),
            "HGTConv": ({"n": x}, {_ONE_TYPE[1][0]: edge_index}),
            "HANConv": ({"n": x}, {_ONE_TYPE[1][0]: edge_index}),
            "SparseLinear": (edge_index,),  # (x not read: a weight row per node)
            "FastRGCNConv": (x, edge_index, edge_type),
            "RGATConv": (x, edge_index, edge_type),
            # (two layers' representations per node: [.., N, 2, F])
            "DNAConv": (torch.stack([x, x.tanh()], dim=-2), edge_index),
            "HEATConv": (x, edge_index, torch.arange(x.size(0)) % 2, edge_type,
                         torch.randn(edge_index.size(1), 2)),
            # (colours: integers, [N]; a 3-D x gives [B, N] or [N, B], not one-hot rows)
            "WLConv": ((x[..., 0] * 3).long().abs() % 3, edge_index)}.get(name, (x, edge_index))


# (PyG's WLConv is no MessagePassing: it has no node_dim, and its colours are [N])
@pytest.mark.parametrize("name", sorted(set(AGGREGATED) - {"WLConv"}))
def test_a_conv_reading_nodes_on_another_axis_keeps_pyg_outputs(name):
    """PyG's MessagePassing takes node_dim= for every conv. With node_dim=0 a static batch
    is [N, B, F]; converted convs read every [.., N, F] input as [B, N, F] whatever the
    node_dim, so SAGEConv, GraphConv and GINConv returned other numbers without a word.
    Wherever PyG computes per-node outputs, the converted conv computes the same ones or
    refuses the input."""
    torch.manual_seed(0)
    x, edge_index = _probe()
    n = x.size(0)
    inputs = {"[N, F]": x, "[B, N, F]": torch.randn(3, n, 6), "[N, B, F]": torch.randn(n, 3, 6),
              "B = N": torch.randn(n, n, 6)}  # where reading the wrong axis raised nothing
    compared = 0
    for node_dim in (0, -2, 1):
        theirs = AGGREGATED[name]("sum").eval()
        theirs.node_dim = node_dim
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = from_pyg(torch.nn.ModuleList([theirs]))[0]
        assert not type(ours).__module__.startswith("torch_geometric")
        for xs in inputs.values():
            if name == "WLConvContinuous" and xs.dim() == 3:
                continue  # PyG's degrees scale a batch's wrong axis (docs/models.md)
            args = _call_args(name, xs, edge_index)
            try:
                expected = _node_rows(theirs(*args))
            except (RuntimeError, IndexError, AssertionError, ValueError):
                continue  # PyG gives no number: graphloc may compute or refuse
            if expected.dim() != xs.dim():
                continue  # PyG's PNAConv flattened the batch: no node layout to compare
            try:
                got = _node_rows(ours(*args))
            except ValueError:
                assert xs.dim() == 3  # an [N, F] input is always taken
                continue
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            compared += 1
    assert compared >= 1


def test_a_node_dim_naming_no_node_axis_is_refused_by_name():
    x, edge_index = _probe()
    theirs = pyg.SAGEConv(6, 4)
    theirs.node_dim = 2  # the features of a static batch
    ours = from_pyg(torch.nn.ModuleList([theirs]))[0]
    with pytest.raises(ValueError, match=r"SAGEConv: node_dim=2 does not name the node axis"):
        ours(torch.randn(3, x.size(0), 6), edge_index)
    ours.node_dim = 1  # on [N, F]: the features
    with pytest.raises(ValueError, match=r"node_dim=1 .* 2 dimensions"):
        ours(x, edge_index)


def _converted_quietly(module, example=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_pyg(module, example)


def _is_graphlocs(module) -> bool:
    return type(module).__module__.startswith("graphloc")


def test_a_convs_forward_hooks_come_with_it():
    """Hooks registered on a PyG conv (register_forward_hook and its kin) were dropped
    with the conv they sat on: without a probe, another output and no word."""
    x, edge_index = _probe()
    theirs = pyg.GCNConv(6, 4)
    theirs.register_forward_pre_hook(lambda m, args: (args[0] * 3, *args[1:]))
    theirs.register_forward_hook(lambda m, args, out: out - 1)
    theirs.register_forward_hook(lambda m, args, kwargs, out: out * 2, with_kwargs=True)
    ours = _converted_quietly(torch.nn.ModuleList([theirs]))[0]
    assert _is_graphlocs(ours)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    plain = pyg.GCNConv(6, 4)
    plain.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, edge_index), (plain(x * 3, edge_index) - 1) * 2)
    seen = []
    theirs.register_full_backward_hook(lambda m, grad_in, grad_out: seen.append(m))
    ours = _converted_quietly(theirs)
    ours(x.requires_grad_(), edge_index).sum().backward()
    assert seen == [ours]
    ours.register_forward_hook(lambda m, args, out: out * 0)  # the caller's conv keeps its own
    assert len(theirs._forward_hooks) == 2 and len(ours._forward_hooks) == 3


def test_hooks_graphlocs_conv_would_not_call_keep_the_pyg_conv():
    x, edge_index = _probe()
    on_message = pyg.GCNConv(6, 4)
    on_message.register_message_forward_hook(lambda m, inputs, out: out * 2)
    on_lin = pyg.SAGEConv(6, 4)  # graphloc's SAGEConv reads lin_l's weight, not the module
    on_lin.lin_l.register_forward_hook(lambda m, args, out: out + 1)
    on_object = pyg.GCNConv(6, 4)  # a step set on the object, not its class
    on_object.message = lambda x_j, edge_weight: 3 * edge_weight.view(-1, 1) * x_j
    for theirs, reason in ((on_message, "message_forward_hooks"),
                           (on_lin, "submodule 'lin_l'"),
                           (on_object, "its own message set on the conv object")):
        converted = _converted_quietly(torch.nn.ModuleList([theirs]))
        assert not _is_graphlocs(converted[0])
        [(where, why)] = converted.pyg_conversion["kept"]
        assert reason in why
        torch.testing.assert_close(converted[0](x, edge_index), theirs(x, edge_index))


def test_pygs_own_propagate_on_the_object_still_converts():
    """PyG's explain mode and ``decomposed_layers`` set ``conv.propagate`` on the object
    (the class's plain or compiled propagate): the conv is still PyG's own."""
    x, edge_index = _probe()
    toggled = pyg.GCNConv(6, 4)
    toggled.explain = True
    toggled.explain = False
    assert "propagate" in vars(toggled)
    converted = _converted_quietly(torch.nn.ModuleList([toggled]))
    assert _is_graphlocs(converted[0]) and not converted.pyg_conversion["kept"]
    torch.testing.assert_close(converted[0](x, edge_index), toggled(x, edge_index))


def test_hooks_on_a_network_graphlocs_conv_calls_are_kept_on_it():
    x, edge_index = _probe()
    theirs = pyg.GINConv(torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU()))
    theirs.nn[0].register_forward_hook(lambda m, args, out: out * 5)
    ours = _converted_quietly(torch.nn.ModuleList([theirs]))[0]
    assert _is_graphlocs(ours)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_a_basic_gnn_with_hooks_outside_its_convs_keeps_its_container():
    """GNN builds its own norms around the converted convs, so a hook on PyG's model or
    on its norms would be lost: the model stays PyG's, with graphloc's convs."""
    x, edge_index = _probe()
    for hook_on in ("model", "norm"):
        theirs = pyg.GCN(6, 8, 2, 4, norm="batch_norm").eval()
        target = theirs if hook_on == "model" else theirs.norms[0]
        target.register_forward_hook(lambda m, args, out: out * 0.5)
        ours = _converted_quietly(theirs)
        assert type(ours).__name__ == "GCN" and all(_is_graphlocs(c) for c in ours.convs)
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


@pytest.mark.parametrize("make", [lambda: pyg.GCNConv(6, 4, cached=True),
                                  lambda: pyg.SGConv(6, 4, cached=True),
                                  lambda: pyg.APPNP(2, 0.1, cached=True),
                                  lambda: pyg.GCN2Conv(6, 0.1, cached=True),
                                  lambda: pyg.FAConv(6, cached=True),
                                  lambda: pyg.SSGConv(6, 4, 0.1, cached=True)],
                         ids=["gcn", "sg", "appnp", "gcn2", "fa", "ssg"])
def test_a_conv_whose_cache_is_filled_is_kept_with_pygs_numbers(make):
    """A cached=True PyG conv that has run reuses its first graph's normalisation (or
    propagated features) on any later graph. Its converted twin started with an empty cache
    and normalised the next graph instead: other numbers, without a word. Now it is kept;
    with the cache cleared it converts."""
    x, edge_index = _probe()
    other = random_edge_index(40, 160, seed=9)
    theirs = make()
    takes_x_0 = type(theirs).__name__ in ("GCN2Conv", "FAConv")
    call = (lambda m, e: m(x, x, e)) if takes_x_0 else (lambda m, e: m(x, e))
    call(theirs, edge_index)  # fills PyG's cache from the first graph
    converted = _converted_quietly(torch.nn.ModuleList([theirs]))
    [(_, reason)] = converted.pyg_conversion["kept"]
    assert "filled cache" in reason
    torch.testing.assert_close(call(converted[0], other), call(theirs, other))
    theirs.reset_parameters()  # clears the cache (and draws new weights)
    ours = _converted_quietly(torch.nn.ModuleList([theirs]))[0]
    assert _is_graphlocs(ours)
    torch.testing.assert_close(call(ours, other), call(theirs, other), atol=1e-5, rtol=1e-5)


CACHED = [lambda: pyg.GCNConv(6, 4, cached=True), lambda: pyg.SGConv(6, 4, cached=True),
          lambda: pyg.APPNP(2, 0.1, cached=True), lambda: pyg.GCN2Conv(6, 0.1, cached=True),
          lambda: pyg.FAConv(6, cached=True), lambda: pyg.SSGConv(6, 4, 0.1, cached=True),
          lambda: pyg.DNAConv(6, cached=True)]


@pytest.mark.parametrize("example", [True, False], ids=["example", "own probe"])
@pytest.mark.parametrize("make", CACHED,
                         ids=["gcn", "sg", "appnp", "gcn2", "fa", "ssg", "dna"])
def test_the_probe_leaves_no_cache_in_the_users_model_or_the_copy(make, example):
    """from_pyg runs the user's model on the probe. That filled the cache of a cached=True
    conv, so the user's own PyG model reused the probe graph's normalisation on every
    later graph (PyG's says nothing), and the converted copy's refused the user's first
    graph. After the conversion both give a fresh model's outputs on a new graph."""
    x, edge_index = _probe()
    other = random_edge_index(40, 160, seed=9)
    theirs = make()
    fresh = copy.deepcopy(theirs)
    name = type(theirs).__name__

    def call(module, edges):
        if name in ("GCN2Conv", "FAConv"):
            return module(x, x, edges)
        return module(torch.stack([x, x.tanh()], dim=1), edges) if name == "DNAConv" \
            else module(x, edges)

    probe = None
    if example:
        probe = (x, x, edge_index) if name in ("GCN2Conv", "FAConv") else \
            (torch.stack([x, x.tanh()], dim=1), edge_index) if name == "DNAConv" else \
            (x, edge_index)
    converted = _converted_quietly(theirs, probe)
    # (APPNP has no width: its own probe is at any, since 2026-12-06)
    assert converted.pyg_conversion["checked"]
    assert _is_graphlocs(converted)
    assert all(getattr(theirs, attr, None) is None for attr in
               ("_cached_edge_index", "_cached_x", "_cached_h"))
    want = call(fresh, other)
    torch.testing.assert_close(call(theirs, other), want)
    torch.testing.assert_close(call(converted, other), want, atol=1e-5, rtol=1e-5)


def _hetero_data():
    from torch_geometric.data import HeteroData
    gen = torch.Generator().manual_seed(0)
    data = HeteroData()
    data["a"].x = torch.randn(10, 8, generator=gen)
    data["b"].x = torch.randn(6, 8, generator=gen)
    data["a", "to", "b"].edge_index = torch.stack([torch.randint(0, 10, (30,), generator=gen),
                                                   torch.randint(0, 6, (30,), generator=gen)])
    data["b", "rev", "a"].edge_index = data["a", "to", "b"].edge_index.flip(0)
    data["a", "self", "a"].edge_index = torch.randint(0, 10, (2, 20), generator=gen)
    return data


class _TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = pyg.SAGEConv((-1, -1), 16), pyg.SAGEConv((-1, -1), 4)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


@pytest.mark.parametrize("kind", ["HeteroConv", "to_hetero"])
def test_a_heterogeneous_model_converts_and_is_checked_on_every_node_type(kind):
    """A heterogeneous model returns a dict of node types: the probe's comparison read
    `.shape` of it and failed with an AttributeError, so no such model converted."""
    data = _hetero_data()
    torch.manual_seed(0)
    if kind == "HeteroConv":
        model = pyg.HeteroConv({("a", "to", "b"): pyg.SAGEConv((-1, -1), 16),
                                ("b", "rev", "a"): pyg.GATConv((-1, -1), 16,
                                                               add_self_loops=False),
                                ("a", "self", "a"): pyg.GCNConv(-1, 16)}, aggr="sum")
    else:
        model = pyg.to_hetero(_TwoLayers(), data.metadata(), aggr="sum")
    want = model(data.x_dict, data.edge_index_dict)  # (sets the lazy widths)
    converted = from_pyg(model, example=(data.x_dict, data.edge_index_dict))
    report = converted.pyg_conversion
    assert report["checked"] and not report["kept"] and len(report["converted"]) >= 3
    got = converted(data.x_dict, data.edge_index_dict)
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key])


def test_every_output_of_a_converted_module_is_checked(monkeypatch):
    """Only the first of a tuple of outputs was compared on the probe: a twin that changed
    the second passed as checked. A SAGEConv twin made wrong on purpose (another
    aggregation) is caught in the second output."""
    from graphloc.nn import convert

    class TwoOutputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.conv = torch.nn.Linear(6, 4), pyg.SAGEConv(6, 4, aggr="mean")

        def forward(self, x, edge_index):
            return self.lin(x), {"neighbours": self.conv(x, edge_index)}

    wrong = lambda conv: convert._sage(conv).__class__(6, 4, aggr="max")  # noqa: E731
    monkeypatch.setitem(convert._CONVERTERS, "SAGEConv", wrong)
    with pytest.raises(Unconvertible, match="outputs differ from the original's"):
        from_pyg(TwoOutputs(), example=_probe())
    monkeypatch.undo()
    converted = from_pyg(TwoOutputs(), example=_probe())
    assert converted.pyg_conversion["converted"] == ["conv"]


class _TiedModel(torch.nn.Module):
    """Weights tied across convs and with the model: two GINConvs on one MLP, two
    GCNConvs on one Linear, and an NNConv whose edge network the model also holds (as
    SchNet's interaction block holds its conv's filter network)."""

    def __init__(self):
        super().__init__()
        mlp = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6))
        self.gin1, self.gin2 = pyg.GINConv(mlp), pyg.GINConv(mlp)
        self.gcn1, self.gcn2 = pyg.GCNConv(6, 6), pyg.GCNConv(6, 6)
        self.gcn2.lin = self.gcn1.lin
        self.filters = torch.nn.Sequential(torch.nn.Linear(3, 36))
        self.nn = pyg.NNConv(6, 6, self.filters, aggr="mean")

    def forward(self, x, edge_index, edge_attr):
        h = self.gcn2(self.gcn1(self.gin2(self.gin1(x, edge_index), edge_index), edge_index),
                      edge_index)
        return self.nn(h, edge_index, edge_attr)


def test_tied_weights_stay_tied_and_train_as_pygs():
    """from_pyg copied each conv's weights into fresh parameters: tied weights came apart
    (18 tensors for PyG's 11 here), a frozen weight thawed, and the converted model trained
    another model."""
    torch.manual_seed(0)
    x, edge_index = _probe()
    edge_attr = torch.randn(edge_index.size(1), 3)
    theirs = _TiedModel()
    theirs.gcn1.bias.requires_grad_(False)
    before = {k: v.clone() for k, v in theirs.state_dict().items()}
    ours = from_pyg(theirs, example=(x, edge_index, edge_attr))
    assert ours.pyg_conversion["kept"] == []
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    assert ours.nn.nn[0].weight is ours.filters[0].weight
    assert not ours.gcn1.bias.requires_grad
    for model in (ours, theirs):
        optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            optimiser.zero_grad()
            model(x, edge_index, edge_attr).square().mean().backward()
            optimiser.step()
        if model is ours:  # training the converted model leaves the original as it was
            for key, value in theirs.state_dict().items():
                assert torch.equal(value, before[key]), key
    torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr))


def test_converting_never_shares_the_originals_parameters():
    torch.manual_seed(0)
    x, edge_index = _probe()
    frozen = pyg.GCN(6, 8, 3, 4, norm="batch_norm")
    frozen.norms[0].module.weight.requires_grad_(False)
    assert not type(from_pyg(frozen, example=(x, edge_index))).__module__.startswith(
        "torch_geometric")
    assert not from_pyg(frozen, example=(x, edge_index)).norms[0].weight.requires_grad
    for theirs in (pyg.GINConv(torch.nn.Linear(6, 6)), pyg.GCN(6, 8, 2, 4), frozen,
                   torch.nn.ModuleList([pyg.GCNConv(6, 6)])):
        ours = from_pyg(theirs, example=None if isinstance(theirs, torch.nn.ModuleList)
                        else (x, edge_index))
        originals = {id(p) for p in theirs.parameters()}
        assert not any(id(p) in originals for p in ours.parameters())


def test_a_conv_under_two_names_is_replaced_under_both():
    """A model that reaches a conv under a second name (self.first = self.convs[0]) kept
    PyG's conv under that name (torch lists a module once), called by its forward, while
    the report said every conv was converted."""
    class Aliased(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([pyg.GCNConv(6, 6), pyg.GCNConv(6, 6)])
            self.first = self.convs[0]

        def forward(self, x, edge_index):
            return self.convs[1](self.first(x, edge_index), edge_index)

    x, edge_index = _probe()
    theirs = Aliased()
    ours = from_pyg(theirs, example=(x, edge_index))
    assert ours.first is ours.convs[0] and type(ours.first) is GCNConv
    assert ours.pyg_conversion["converted"] == ["convs.0", "convs.1", "first"]
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_a_conv_that_does_not_convert_keeps_its_weights(monkeypatch):
    """graphloc's conv takes over the PyG conv's network and its constructor resets it: a
    conversion that fails after that (here, made to fail) must leave the kept PyG conv
    with its own weights."""
    import graphloc.nn.convert as convert
    torch.manual_seed(0)
    x, edge_index = _probe()
    conv = pyg.EdgeConv(torch.nn.Linear(12, 6))
    want = conv(x, edge_index)

    def failing(module):
        convert._edge(module)  # (resets module.nn)
        raise convert.Unconvertible("made to fail")
    monkeypatch.setitem(convert._CONVERTERS, "EdgeConv", failing)
    with pytest.warns(UserWarning, match="made to fail"):
        kept = from_pyg(torch.nn.ModuleList([conv]))
    torch.testing.assert_close(kept[0](x, edge_index), want)


def _constructor_call(factory) -> tuple[type, dict]:
    """The class and keyword arguments ``factory`` builds its PyG conv with (its
    ``__init__`` spied on while the factory runs)."""
    cls = type(factory("sum"))
    init, seen = cls.__init__, []

    def spy(self, *args, **kwargs):
        if not seen:
            seen.append(inspect.signature(init).bind(self, *args, **kwargs).arguments)
        init(self, *args, **kwargs)

    cls.__init__ = spy
    try:
        factory("sum")
    finally:
        cls.__init__ = init
    params = inspect.signature(init).parameters
    kwargs = {}
    for name, value in seen[0].items():
        if name == "self":
            continue
        if params[name].kind is inspect.Parameter.VAR_KEYWORD:
            kwargs.update(value)
        else:
            kwargs[name] = value
    return cls, kwargs


def _changed(value):
    """Another value of an option's kind: the other flag, the next integer, another
    number; None for the rest (names, networks, tensors)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 0.5 + 0.1
    return None


@pytest.mark.parametrize("name", sorted(AGGREGATED))
def test_every_flag_and_number_of_a_conv_is_carried_without_a_probe(name):
    """Each option a converted conv was built with (its flags and numbers, one changed at
    a time from the defaults the sweeps use) is carried by the converter or makes it keep
    PyG's conv: converted inside a ModuleList there is no probe to catch an option the
    twin drops. Dropout and the widths are left as built (draws, and the probe's x)."""
    cls, kwargs = _constructor_call(AGGREGATED[name])
    x, edge_index = _probe()
    args = _call_args(name, x, edge_index)
    for option, value in kwargs.items():
        new = _changed(value)
        if new is None or option in ("dropout", "in_channels", "out_channels", "channels"):
            continue
        try:
            torch.manual_seed(0)
            theirs = cls(**{**kwargs, option: new}).eval()
            want = _node_rows(theirs(*args))
        except Exception:  # an option PyG refuses with these others, or a width the
            continue  # probe's x does not have
        ours = _converted_quietly(torch.nn.ModuleList([theirs]))[0].eval()
        torch.testing.assert_close(_node_rows(ours(*args)), want, atol=1e-4, rtol=1e-4,
                                   msg=lambda m, o=option, v=new: f"{o}={v!r}: {m}")


def test_a_lazy_model_converts_on_its_example_and_stays_lazy():
    """A model built with in_channels=-1 and converted with an example: the probe drew the
    original's weights and the twin's separately, so the check failed ("outputs differ"),
    and the user's model had its weights drawn by the conversion. Now a copy is called once
    on the example and converted: the twin is that copy (its draws: a copy called on the
    example from the same seed), and the model passed stays lazy."""
    class Lazy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = pyg.GCNConv(-1, 8), pyg.SAGEConv(-1, 3)

        def forward(self, x, edge_index):
            return self.second(self.first(x, edge_index).relu(), edge_index)

    torch.manual_seed(0)
    model = Lazy()
    x, edge_index = _probe()
    lazy = [torch.nn.parameter.is_lazy(p) for p in model.parameters()]
    torch.manual_seed(5)
    converted = from_pyg(model, (x, edge_index), strict=True)
    assert converted.pyg_conversion["converted"] == ["first", "second"]
    assert [torch.nn.parameter.is_lazy(p) for p in model.parameters()] == lazy and any(lazy)
    torch.manual_seed(5)
    reference = copy.deepcopy(model).eval()
    reference(x, edge_index)
    torch.testing.assert_close(converted(x, edge_index), reference(x, edge_index))


def test_a_model_with_graphloc_convs_already_keeps_no_pyg_module():
    """graphloc's convs carry an explain port (a PyG MessagePassing, for PyG's explainers):
    it is no PyG layer left unconverted."""
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = pyg.GCNConv(4, 4), GATConv(4, 4, heads=2)

        def forward(self, x, edge_index):
            return self.second(self.first(x, edge_index), edge_index)

    x, edge_index = torch.randn(6, 4), torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])
    model = Mixed()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        converted = from_pyg(model, example=(x, edge_index), strict=True)
    assert type(converted.first) is GCNConv
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))


def _basis_model(make_conv, seed=0):
    """PyG's to_hetero_with_bases of linear, conv, linear, and a heterogeneous probe."""
    gen = torch.Generator().manual_seed(seed)
    x_dict = {"paper": torch.randn(30, 16, generator=gen),
              "author": torch.randn(20, 8, generator=gen)}
    sizes = {"paper": 30, "author": 20}
    edge_index_dict = {
        (s, r, d): torch.stack([torch.randint(0, sizes[s], (60,), generator=gen),
                                torch.randint(0, sizes[d], (60,), generator=gen)])
        for s, r, d in [("paper", "cites", "paper"), ("paper", "written_by", "author"),
                        ("author", "writes", "paper")]}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1, self.conv1 = torch.nn.Linear(16, 16), make_conv()
            self.lin2 = torch.nn.Linear(12, 5)

        def forward(self, x, edge_index):
            return self.lin2(self.conv1(self.lin1(x).relu(), edge_index).relu())

    torch.manual_seed(seed)
    model = pyg.to_hetero_with_bases(Net(), (list(x_dict), list(edge_index_dict)), 3,
                                     in_channels={"x": 16})
    model(x_dict, edge_index_dict)  # (the lazy widths)
    return model, (x_dict, edge_index_dict)


def _outputs_and_basis_gradients(model, example):
    out = model(*example)
    loss = sum((v * torch.linspace(-1, 1, v.numel()).view_as(v)).sum() for v in out.values())
    weights = [conv.edge_type_weight for conv in model.conv1.convs]
    return out, torch.autograd.grad(loss, weights)


@pytest.mark.parametrize("make", [lambda: pyg.SAGEConv(16, 12),
                                  lambda: pyg.GraphConv(16, 12, aggr="mean"),
                                  lambda: pyg.GCNConv(16, 12, add_self_loops=False)])
def test_pygs_basis_decomposition_becomes_graphlocs(make):
    """PyG's to_hetero_with_bases wrapper (each copy weighted in a message hook) becomes
    graphloc's HeteroBasisConv of graphloc's convs, with the same edge-type weights:
    outputs and their gradients are PyG's."""
    from graphloc.nn.conv.hetero_basis import HeteroBasisConv
    model, example = _basis_model(make)
    want, want_grads = _outputs_and_basis_gradients(model, example)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = from_pyg(model, example=example)
    assert isinstance(ours.conv1, HeteroBasisConv)
    assert all(type(conv).__module__.startswith("graphloc") for conv in ours.conv1.convs)
    got, got_grads = _outputs_and_basis_gradients(ours, example)
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # the original keeps PyG's wrapper and hooks
    assert type(model.conv1).__module__.startswith("torch_geometric")
    assert all(conv._message_forward_hooks for conv in model.conv1.convs)


def test_a_basis_wrapper_that_does_not_convert_is_kept_whole_and_still_weighs(monkeypatch):
    """A copy with another message hook, or whose graphloc twin cannot weigh its messages
    per edge (here SAGEConv made so): PyG's wrapper stays as it was (its weighting hook
    and edge-type weights back in place), reported, with PyG's outputs."""
    hooked, example = _basis_model(lambda: pyg.SAGEConv(16, 12))
    hooked.conv1.convs[1].register_message_forward_hook(lambda module, inputs, out: out * 2)
    plain, _ = _basis_model(lambda: pyg.SAGEConv(16, 12))
    for original, reason in [(hooked, "message_forward_hooks"),
                             (plain, "SAGEConv cannot weigh its messages")]:
        want = original(*example)
        with monkeypatch.context() as patch:
            if original is plain:
                patch.setattr(gl_sage.SAGEConv, "explainable", False)
            with pytest.warns(UserWarning, match=f"conv1: .*{reason}"):
                ours = from_pyg(original, example=example)
        assert type(ours.conv1).__module__.startswith("torch_geometric")
        assert all(hasattr(conv, "edge_type_weight") for conv in ours.conv1.convs)
        got = ours(*example)
        for key in want:
            torch.testing.assert_close(got[key], want[key])


def test_gine_built_with_edge_dim_converts_with_it():
    """PyG's GINEConv(nn, edge_dim=4) maps its edges through its own Linear, which names its
    width in_channels: the converter read in_features, failed, and kept PyG's conv."""
    torch.manual_seed(0)
    theirs = pyg.GINEConv(_gin_mlp(), edge_dim=4).eval()
    converted = from_pyg(theirs)
    assert converted.pyg_conversion["converted"] and not converted.pyg_conversion["kept"]
    x, edge_index = _probe()
    edge_attr = torch.randn(edge_index.size(1), 4)
    torch.testing.assert_close(converted(x, edge_index, edge_attr),
                               theirs(x, edge_index, edge_attr), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: pyg.GINConv(_gin_mlp()), lambda: pyg.GINEConv(_gin_mlp()),
    lambda: pyg.GINEConv(_gin_mlp(), edge_dim=3), lambda: pyg.APPNP(3, 0.1),
    lambda: pyg.LGConv(), lambda: pyg.AGNNConv(), lambda: pyg.EdgeConv(torch.nn.Linear(12, 4)),
    lambda: pyg.SimpleConv("mean"), lambda: pyg.NNConv(6, 4, torch.nn.Linear(3, 24)),
    lambda: pyg.GMMConv(6, 4, dim=2, kernel_size=3), lambda: pyg.CGConv(6, dim=3),
    lambda: pyg.FiLMConv(6, 4, num_relations=3),
    lambda: pyg.ClusterGCNConv(6, 4, add_self_loops=False)])
def test_a_conv_is_checked_on_a_probe_of_its_own(make):
    """GIN's width is its network's, APPNP, LGConv and AGNNConv have none (any width
    runs them): they were converted unchecked, with a warning to pass an example. NNConv,
    GMMConv and CGConv read edge features, FiLMConv edge types, and PyG's ClusterGCNConv
    without loops one loop per node: the random probe failed in PyG's conv, and from_pyg
    asked for an example."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = from_pyg(make().eval()).pyg_conversion
    assert report["checked"] and report["converted"] and not report["kept"]
    assert report["max_difference"] <= 1e-5


class _PANNet(torch.nn.Module):
    """PyG's PAN example: PANConv, PANPooling on its path matrix, a readout."""

    def __init__(self, ratio):
        super().__init__()
        self.conv = pyg.PANConv(6, 8, filter_size=2)
        self.pool = pyg.PANPooling(8, ratio=ratio)

    def forward(self, x, edge_index, batch):
        x, m = self.conv(x, edge_index)
        x, _, _, batch, _, _ = self.pool(x, m, batch)
        return pyg.global_mean_pool(x, batch)


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2])
def test_a_pan_model_converts_with_its_pooling(ratio):
    """PyG's PANConv was kept ("no graphloc equivalent", though graphloc has one), and it
    runs only with torch-sparse. PANConv and PANPooling convert together (PyG's pooling
    reads the conv's SparseTensor); PyG's model runs here on the dense formula. A ratio of
    1.0 is PyG's count of one node per graph."""
    from parity import pygs_pan_conv_by_oracle
    torch.manual_seed(0)
    theirs = _PANNet(ratio).double()
    with torch.no_grad():  # distinct scores: PyG's sort does not order equal ones
        theirs.pool.p.copy_(torch.randn(8))
    parts = [random_edge_index(n, 3 * n, seed=n) + offset
             for n, offset in ((7, 0), (5, 7), (9, 12))]
    edge_index = torch.cat(parts, dim=1)
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor([7, 5, 9]))
    x = torch.randn(21, 6, dtype=torch.float64)
    with pygs_pan_conv_by_oracle():
        ours = from_pyg(theirs, example=(x, edge_index, batch))
        want = theirs(x, edge_index, batch)
    assert ours.pyg_conversion["checked"] and ours.pyg_conversion["kept"] == []
    assert type(ours.conv).__module__.startswith("graphloc")
    assert type(ours.pool).__module__.startswith("graphloc")
    torch.testing.assert_close(ours(x, edge_index, batch), want)
    theirs.conv = pyg.PANConv(6, 8, filter_size=2, aggr="mean")  # graphloc's sums: kept
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = from_pyg(theirs)
    assert kept.pyg_conversion["kept"] == [("conv", "aggr='mean' (graphloc's PANConv sums "
                                                    "its messages)")]


def test_strict_refuses_a_string_by_name():
    """strict="False" raised for a kept conv, as strict=True does (2026-12-07)."""
    import torch_geometric.nn as pyg_nn
    with pytest.raises(TypeError, match="from_pyg: strict must be True or False"):
        from_pyg(pyg_nn.GCNConv(3, 4), strict="False")
