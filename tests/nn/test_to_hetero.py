"""graphloc's ``to_hetero``: PyG's transform with graphloc's convs counted as message
passing. Against PyG's ``to_hetero`` of the same model built of PyG's convs, same weights."""

import pytest
import torch

import graphloc.nn as gl
from graphloc.nn.to_hetero import is_graphloc_conv

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
