"""graphloc's ``to_hetero``: PyG's transform with graphloc's convs counted as message
passing. Against PyG's ``to_hetero`` of the same model built of PyG's convs, same weights."""

import pytest
import torch
from helpers import TwoLayers

import graphloc.nn as gl
from graphloc.nn.fx import is_graphloc_conv

pyg_nn = pytest.importorskip("torch_geometric.nn")
from torch_geometric.data import HeteroData  # noqa: E402


def _data():
    gen = torch.Generator().manual_seed(0)
    data = HeteroData()
    data["paper"].x = torch.randn(30, 8, generator=gen)
    data["author"].x = torch.randn(20, 6, generator=gen)
    writes = torch.stack([torch.randint(0, 20, (60,), generator=gen),
                          torch.randint(0, 30, (60,), generator=gen)])
    data["author", "writes", "paper"].edge_index = writes
    data["paper", "rev", "author"].edge_index = writes.flip(0)
    data["paper", "cites", "paper"].edge_index = torch.randint(0, 30, (2, 50), generator=gen)
    return data


class _Net(torch.nn.Module):
    def __init__(self, make):
        super().__init__()
        self.first, self.second = make(16), make(4)

    def forward(self, x, edge_index):
        return self.second(self.first(x, edge_index).relu(), edge_index)


@pytest.mark.parametrize("name,make", [
    ("SAGEConv", lambda lib, out: lib.SAGEConv((-1, -1), out)),
    ("GATConv", lambda lib, out: lib.GATConv((-1, -1), out, heads=2, concat=False,
                                             add_self_loops=False)),
    ("GraphConv", lambda lib, out: lib.GraphConv((-1, -1), out)),
])
@pytest.mark.parametrize("aggr", ["sum", "mean"])
def test_a_model_of_graphloc_convs_becomes_pygs_heterogeneous_model(name, make, aggr):
    """Each conv copied per edge type and its results aggregated per destination type, as
    PyG's to_hetero does with PyG's convs; PyG's own to_hetero failed on graphloc's."""
    data = _data()
    torch.manual_seed(0)
    theirs = pyg_nn.to_hetero(_Net(lambda out: make(pyg_nn, out)), data.metadata(), aggr=aggr)
    ours = gl.to_hetero(_Net(lambda out: make(gl, out)), data.metadata(), aggr=aggr)
    want = theirs(data.x_dict, data.edge_index_dict)  # (the lazy widths)
    ours(data.x_dict, data.edge_index_dict)
    ours.load_state_dict(theirs.state_dict())
    got = ours(data.x_dict, data.edge_index_dict)
    assert set(got) == set(want)
    for node_type in want:
        torch.testing.assert_close(got[node_type], want[node_type], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="edge_index"):  # PyG's to_hetero: node-level copies
        pyg_nn.to_hetero(_Net(lambda out: make(gl, out)), data.metadata())(
            data.x_dict, data.edge_index_dict)


def test_which_modules_count_as_graphloc_convs():
    class Mine(gl.SAGEConv):
        pass

    assert is_graphloc_conv(gl.SAGEConv(4, 4)) and is_graphloc_conv(Mine(4, 4))
    assert is_graphloc_conv(gl.GCNConv(4, 4))
    assert not is_graphloc_conv(torch.nn.Linear(4, 4))
    assert not is_graphloc_conv(pyg_nn.SAGEConv(4, 4))  # (PyG's own: PyG's check)
    assert not is_graphloc_conv(gl.LiftGCN(4, 8, 2, 2))


def test_pygs_check_is_restored_after_the_transform(monkeypatch):
    import torch_geometric.nn.fx as fx
    before = fx.is_message_passing_op
    gl.to_hetero(_Net(lambda out: gl.SAGEConv((-1, -1), out)), _data().metadata())
    assert fx.is_message_passing_op is before

    def failing(*args, **kwargs):
        assert fx.is_message_passing_op is not before  # (extended while it runs)
        raise RuntimeError("the transform failed")

    monkeypatch.setattr(pyg_nn, "to_hetero", failing)
    with pytest.raises(RuntimeError, match="the transform failed"):
        gl.to_hetero(_Net(lambda out: gl.SAGEConv((-1, -1), out)), _data().metadata())
    assert fx.is_message_passing_op is before


@pytest.mark.parametrize("args,match", [
    ((_Net(lambda out: gl.SAGEConv((-1, -1), out)), "meta"), "metadata must be"),
    ((_Net(lambda out: gl.SAGEConv((-1, -1), out)), (["paper"], [])), "metadata must be"),
    ((_Net(lambda out: gl.SAGEConv((-1, -1), out)), (["paper"], [("paper", "cites")])),
     "each edge type a \\(source, relation, destination\\) triple"),
    (("not a module", (["paper"], [("paper", "cites", "paper")])),
     "module must be a torch.nn.Module, got str"),
])
def test_bad_arguments_are_named(args, match):
    """PyG's transform asserted them without a message (or failed unpacking a pair)."""
    with pytest.raises((TypeError, ValueError), match=match):
        gl.to_hetero(*args)
    with pytest.raises(ValueError, match="aggr must be one of .*'sum'.*, got 'median'"):
        gl.to_hetero(_Net(lambda out: gl.SAGEConv((-1, -1), out)), _data().metadata(),
                     aggr="median")


# ---- to_hetero_with_bases ----------------------------------------------------------------

def _bases_data():
    gen = torch.Generator().manual_seed(1)
    x_dict = {"paper": torch.randn(40, 16, generator=gen),
              "author": torch.randn(30, 8, generator=gen)}
    sizes = {"paper": 40, "author": 30}
    edge_types = [("paper", "cites", "paper"), ("paper", "written_by", "author"),
                  ("author", "writes", "paper")]
    edge_index_dict = {
        (s, r, d): torch.stack([torch.randint(0, sizes[s], (90,), generator=gen),
                                torch.randint(0, sizes[d], (90,), generator=gen)])
        for s, r, d in edge_types}
    edge_attr_dict = {key: torch.randn(90, 4, generator=gen) for key in edge_types}
    return x_dict, edge_index_dict, edge_attr_dict, (list(x_dict), edge_types)


class _BasesNet(torch.nn.Module):
    """PyG's Net2 of its to_hetero_with_bases tests: linear, conv, linear."""

    def __init__(self, conv):
        super().__init__()
        self.lin1, self.conv1, self.lin2 = torch.nn.Linear(16, 16), conv, torch.nn.Linear(12, 6)

    def forward(self, x, edge_index):
        x = self.conv1(self.lin1(x).relu(), edge_index).relu()
        return self.lin2(x)


class _EdgeFeatureNet(torch.nn.Module):
    def __init__(self, conv):
        super().__init__()
        self.conv1 = conv

    def forward(self, x, edge_index, edge_attr):
        return self.conv1(x, edge_index, edge_attr)


def _twin_bases_models(make, net=_BasesNet, num_bases=3, in_channels=None):
    """PyG's to_hetero_with_bases of a model of PyG's convs, and graphloc's of the same
    model of graphloc's convs with PyG's weights."""
    data = _bases_data()
    in_channels = in_channels or {"x": 16}
    torch.manual_seed(0)
    theirs = pyg_nn.to_hetero_with_bases(net(make(pyg_nn)), data[3], num_bases,
                                         in_channels=in_channels)
    ours = gl.to_hetero_with_bases(net(make(gl)), data[3], num_bases,
                                   in_channels=in_channels)
    return theirs, ours, data


def _outputs_and_gradients(model, args):
    out = model(*args)
    loss = sum((value * torch.linspace(-1, 1, value.numel()).view_as(value)).sum()
               for value in out.values())
    names, params = zip(*[(n, p) for n, p in model.named_parameters()], strict=True)
    return out, dict(zip(names, torch.autograd.grad(loss, params), strict=True))


def _assert_same_model(theirs, ours, args):
    want, want_grads = _outputs_and_gradients(theirs, args)  # (the lazy widths)
    ours(*args)
    ours.load_state_dict(theirs.state_dict())
    got, got_grads = _outputs_and_gradients(ours, args)
    assert set(got) == set(want)
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6)
    assert set(got_grads) == set(want_grads)
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("name,make", [
    ("SAGEConv", lambda lib: lib.SAGEConv(16, 12)),
    ("SAGEConv-max", lambda lib: lib.SAGEConv(16, 12, aggr="max")),
    ("GraphConv-mean", lambda lib: lib.GraphConv(16, 12, aggr="mean")),
    ("GCNConv-no-loops", lambda lib: lib.GCNConv(16, 12, add_self_loops=False)),
    ("GINConv", lambda lib: lib.GINConv(torch.nn.Linear(16, 12), train_eps=True)),
    ("LEConv", lambda lib: lib.LEConv(16, 12)),
    ("ResGatedGraphConv", lambda lib: lib.ResGatedGraphConv(16, 12)),
])
def test_basis_decomposition_of_graphloc_convs_is_pygs(name, make):
    """Outputs and every parameter's gradient (the convs' and the edge-type weights)
    against PyG's to_hetero_with_bases of the same model of PyG's convs, same weights."""
    theirs, ours, (x_dict, edge_index_dict, _, _) = _twin_bases_models(make)
    _assert_same_model(theirs, ours, (x_dict, edge_index_dict))
    assert sum(1 for n, _ in ours.named_parameters() if n.endswith("edge_type_weight")) == 3


def test_basis_decomposition_with_edge_features_is_pygs():
    """GINEConv with per-type edge features aligned to one width (PyG's Net3)."""
    theirs, ours, (x_dict, edge_index_dict, edge_attr_dict, _) = _twin_bases_models(
        lambda lib: lib.GINEConv(torch.nn.Linear(16, 12), edge_dim=5),
        net=_EdgeFeatureNet, in_channels={"x": 16, "edge_attr": 5})
    _assert_same_model(theirs, ours, (x_dict, edge_index_dict, edge_attr_dict))


def test_a_mixed_model_wraps_pygs_convs_and_graphloc_convs_alike():
    data = _bases_data()
    torch.manual_seed(0)
    theirs = pyg_nn.to_hetero_with_bases(
        TwoLayers(pyg_nn.SAGEConv(16, 8), pyg_nn.GraphConv(8, 4)), data[3], 2,
        in_channels={"x": 16})
    ours = gl.to_hetero_with_bases(TwoLayers(pyg_nn.SAGEConv(16, 8), gl.GraphConv(8, 4)),
                                   data[3], 2, in_channels={"x": 16})
    _assert_same_model(theirs, ours, data[:2])


@pytest.mark.parametrize("make", [
    lambda lib: lib.GATConv(16, 6, heads=2, add_self_loops=False),
    lambda lib: lib.TransformerConv(16, 6, heads=2),
    lambda lib: lib.GATv2Conv(16, 12, heads=3, concat=False, add_self_loops=False),
])
def test_messages_with_heads_are_weighed_per_edge(make, monkeypatch):
    """PyG's hook reads an [E, H, C] message's heads as its edges and fails ("Number of
    messages (E) does not match ... (E)"); graphloc weighs each edge's message, against
    PyG's transform with its hook reading the edges along the conv's node_dim."""
    import torch_geometric.nn.to_hetero_with_bases_transformer as bases

    data = _bases_data()
    torch.manual_seed(0)
    with pytest.raises(ValueError, match="Number of messages"):
        pyg_nn.to_hetero_with_bases(_BasesNet(make(pyg_nn)), data[3], 2,
                                    in_channels={"x": 16})(*data[:2])

    def edge_wise(module, inputs, output):
        weight = module.edge_type_weight.view(-1)[module._edge_type]
        dim = module.node_dim % output.dim()
        return output * weight.view([-1 if d == dim else 1 for d in range(output.dim())])

    monkeypatch.setattr(bases, "hook", edge_wise)
    theirs, ours, data = _twin_bases_models(make, num_bases=2)
    _assert_same_model(theirs, ours, data[:2])


def test_basis_decomposition_is_rgcns():
    """Math: R-GCN with basis decomposition (PyG's RGCNConv, num_bases=4) is a linear
    root term plus num_bases copies of sum_j W_b x_j, each message along a relation-r edge
    times a[r, b]: graphloc's GraphConv with no root and no bias, transformed."""
    torch.manual_seed(1234)
    x = torch.randn(10, 16)
    adj = torch.rand(10, 10) > 0.5
    adj[6:, 6:] = False
    edge_index = adj.nonzero().t()
    row, col = edge_index
    edge_type = torch.where(col < 6, torch.where(row < 6, 0, 2), 1)
    rgcn = pyg_nn.RGCNConv(16, 32, num_relations=3, num_bases=4, aggr="add")
    want = rgcn(x, edge_index, edge_type)

    class RGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = gl.GraphConv(16, 32)
            self.lin = torch.nn.Linear(16, 32)

        def forward(self, x, edge_index):
            return self.lin(x) + self.conv(x, edge_index)

    offsets = {"paper": 0, "author": 6}
    edge_index_dict = {}
    for r, (s, d) in enumerate([("paper", "paper"), ("paper", "author"), ("author", "paper")]):
        kept = edge_index[:, edge_type == r]
        edge_index_dict[(s, "_", d)] = kept - torch.tensor([[offsets[s]], [offsets[d]]])
    model = gl.to_hetero_with_bases(RGCN(), (["paper", "author"], list(edge_index_dict)), 4)
    with torch.no_grad():
        for b, conv in enumerate(model.conv.convs):
            conv.lin_rel.weight.copy_(rgcn.weight[b].t())
            conv.lin_rel.bias.zero_()
            conv.lin_root.weight.zero_()
            conv.edge_type_weight.copy_(rgcn.comp[:, b].view(1, -1))
        model.lin.weight.copy_(rgcn.root.t())
        model.lin.bias.copy_(rgcn.bias)
    got = model({"paper": x[:6], "author": x[6:]}, edge_index_dict)
    torch.testing.assert_close(torch.cat([got["paper"], got["author"]]), want, atol=1e-5,
                               rtol=1e-5)


def test_one_basis_keeps_the_convs_weights_and_draws_its_edge_type_weights():
    """PyG leaves the edge-type weights of a single basis as torch.empty (whatever the
    memory held); graphloc draws them as for several bases."""
    conv = gl.SAGEConv(16, 12)
    data = _bases_data()
    model = gl.to_hetero_with_bases(_BasesNet(conv), data[3], 1, in_channels={"x": 16})
    (copy,) = model.conv1.convs
    for name, param in conv.state_dict().items():
        torch.testing.assert_close(copy.state_dict()[name], param)
    weight = copy.edge_type_weight
    bound = (6 / (1 + 3)) ** 0.5  # xavier_uniform of [1, 3]
    assert weight.shape == (1, 3) and bool((weight.abs() <= bound).all()) and \
        bool((weight != 0).any())


def test_a_conv_that_adds_loops_or_cannot_weigh_messages_is_refused_by_name():
    data = _bases_data()
    model = gl.to_hetero_with_bases(_BasesNet(gl.GCNConv(16, 12)), data[3], 2,
                                    in_channels={"x": 16})
    with pytest.raises(ValueError, match="GCNConv adds self-loops.*add_self_loops=False"):
        model(*data[:2])
    with pytest.raises(ValueError, match="SignedConv cannot weigh its messages edge by edge; "
                                         "the graphloc convs that can: .*GATConv"):
        gl.to_hetero_with_bases(_BasesNet(gl.SignedConv(16, 6, first_aggr=True)), data[3], 2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_bases=0), "num_bases must be an integer >= 1, got 0"),
    (dict(num_bases=2, in_channels={"X": 16}), r"in_channels names 'X', which is not an "
                                               r"argument of _BasesNet.forward \['x', "
                                               r"'edge_index'\]"),
    (dict(num_bases=2, in_channels={"x": 0}), r"in_channels\['x'\] must be"),
    (dict(num_bases=2, in_channels=[16]), "in_channels must be a dict"),
])
def test_bad_bases_arguments_are_named(kwargs, match):
    data = _bases_data()
    with pytest.raises((TypeError, ValueError), match=match):
        gl.to_hetero_with_bases(_BasesNet(gl.SAGEConv(16, 12)), data[3], **kwargs)
    with pytest.raises(ValueError, match="to_hetero_with_bases: metadata must be"):
        gl.to_hetero_with_bases(_BasesNet(gl.SAGEConv(16, 12)), (["paper"], []), 2)


def test_a_transformed_model_saves_and_its_state_loads(tmp_path):
    """As PyG's: the whole model saves (its test_to_hetero_with_bases_save), and its
    weights load into a fresh transform. (Loading the whole pickle re-traces PyG's helper
    functions and fails, for PyG's own convs as well.)"""
    data = _bases_data()

    def transformed():
        return gl.to_hetero_with_bases(_BasesNet(gl.SAGEConv(16, 12)), data[3], 2,
                                       in_channels={"x": 16})

    model = transformed()
    want = model(*data[:2])
    torch.save(model, tmp_path / "model.pt")
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    fresh = transformed()
    fresh(*data[:2])  # (the lazy widths)
    fresh.load_state_dict(torch.load(tmp_path / "weights.pt"))
    got = fresh(*data[:2])
    for key in want:
        torch.testing.assert_close(got[key], want[key])


def test_static_graphs_an_empty_relation_and_an_unreached_type_are_pygs():
    """Features with a leading batch dimension (a static graph per example), a relation
    without edges, and a node type that no edge type reaches, as PyG's transform does."""
    data = _bases_data()
    x_dict = {key: value.unsqueeze(0).expand(3, -1, -1) * torch.tensor([1.0, -0.5, 2.0])
              .view(3, 1, 1) for key, value in data[0].items()}
    x_dict["venue"] = torch.randn(3, 7, 16)
    edge_index_dict = dict(data[1])
    edge_index_dict[("paper", "cites", "paper")] = torch.empty(2, 0, dtype=torch.long)
    metadata = (list(x_dict), list(edge_index_dict))
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="venue"):
        theirs = pyg_nn.to_hetero_with_bases(_BasesNet(pyg_nn.SAGEConv(16, 12)), metadata, 2,
                                             in_channels={"x": 16})
    with pytest.warns(UserWarning, match="venue"):
        ours = gl.to_hetero_with_bases(_BasesNet(gl.SAGEConv(16, 12)), metadata, 2,
                                       in_channels={"x": 16})
    _assert_same_model(theirs, ours, (x_dict, edge_index_dict))


# ---- global pooling: to_fixed_size, and to_hetero's pooling over node types ----------

class _Pooled(torch.nn.Module):
    """A conv, global pooling by graph, a linear map (PyG's GraphLevelGNN of its
    to_hetero tests)."""

    def __init__(self, lib, aggr):
        super().__init__()
        self.conv = lib.SAGEConv((-1, -1), 8)
        self.pool = getattr(lib.aggr, aggr)()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x, edge_index, batch):
        return self.lin(self.pool(self.conv(x, edge_index).relu(), batch, dim=0))


@pytest.mark.parametrize("aggr", ["SumAggregation", "MeanAggregation", "MaxAggregation"])
def test_to_fixed_size_pads_graphloc_pooling_to_the_batch_size(aggr):
    """Two graphs pooled into 5 rows (the last 3 pooled from no node), as PyG's
    to_fixed_size does with PyG's aggregations; PyG's transform left graphloc's unfixed
    (2 rows, without a word)."""
    gen = torch.Generator().manual_seed(0)
    x, edge_index = torch.randn(12, 6, generator=gen), torch.randint(0, 12, (2, 30), generator=gen)
    batch = torch.tensor([0] * 7 + [1] * 5)
    torch.manual_seed(0)
    theirs = _Pooled(pyg_nn, aggr)
    theirs(x, edge_index, batch)  # (the lazy widths)
    ours = _Pooled(gl, aggr)
    ours(x, edge_index, batch)
    ours.load_state_dict(theirs.state_dict())
    want = pyg_nn.to_fixed_size(theirs, batch_size=5)(x, edge_index, batch)
    assert want.shape == (5, 4)
    torch.testing.assert_close(gl.to_fixed_size(ours, batch_size=5)(x, edge_index, batch), want)
    assert pyg_nn.to_fixed_size(ours, batch_size=5)(x, edge_index, batch).shape == (2, 4)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        gl.to_fixed_size(ours, batch_size=0)


def test_to_hetero_pools_graphloc_aggregations_over_the_node_types_as_pygs():
    """A global pooling in a heterogeneous model: each node type pooled by graph, then the
    types summed, as PyG's to_hetero does with PyG's aggregations."""
    data = _data()
    gen = torch.Generator().manual_seed(1)
    batch_dict = {"paper": torch.randint(0, 3, (30,), generator=gen).sort().values,
                  "author": torch.randint(0, 3, (20,), generator=gen).sort().values}
    torch.manual_seed(0)
    theirs = pyg_nn.to_hetero(_Pooled(pyg_nn, "MeanAggregation"), data.metadata())
    ours = gl.to_hetero(_Pooled(gl, "MeanAggregation"), data.metadata())
    want = theirs(data.x_dict, data.edge_index_dict, batch_dict)
    ours(data.x_dict, data.edge_index_dict, batch_dict)
    ours.load_state_dict(theirs.state_dict())
    got = ours(data.x_dict, data.edge_index_dict, batch_dict)
    assert isinstance(want, torch.Tensor) and want.shape == (3, 4)
    torch.testing.assert_close(got, want)


def test_to_fixed_size_names_a_bad_module():
    with pytest.raises(TypeError, match="to_fixed_size: module must be a torch.nn.Module, "
                                        "got str"):
        gl.to_fixed_size("model", batch_size=4)
