"""graphloc's ``summary``: PyG's table, with graphloc's convs as leaves as PyG's are.
Against PyG's summary of the same model built of PyG's convs."""

import pytest
import torch

import graphloc.nn as gl

pyg_nn = pytest.importorskip("torch_geometric.nn")
pytest.importorskip("tabulate")


class _Net(torch.nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.conv1 = lib.GCNConv(6, 8)
        self.convs = torch.nn.ModuleList([lib.GATConv(8, 4, heads=2),
                                          lib.GINConv(torch.nn.Linear(8, 8))])
        self.cheb = lib.ChebConv(8, 5, K=3)
        self.dir = lib.DirGNNConv(lib.SAGEConv(5, 3))

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu()
        for conv in self.convs:
            x = conv(x, edge_index).relu()
        return self.dir(self.cheb(x, edge_index), edge_index)


def _graph():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(20, 6, generator=gen), torch.randint(0, 20, (2, 60), generator=gen)


@pytest.mark.parametrize("max_depth", [1, 2, 3, 5])
def test_a_model_of_graphloc_convs_is_summarised_as_pygs(max_depth):
    """Same rows, shapes and parameter counts; PyG's own summary went into graphloc's
    convs (their maps, aggregation and explain port), and its numbers column turned to
    text."""
    x, edge_index = _graph()
    want = pyg_nn.summary(_Net(pyg_nn), x, edge_index, max_depth=max_depth)
    assert gl.summary(_Net(gl), x, edge_index, max_depth=max_depth) == want
    if max_depth > 1:
        assert pyg_nn.summary(_Net(gl), x, edge_index, max_depth=max_depth) != want


def test_other_leaves_pass_through_and_a_whole_model_shows_its_insides():
    x, edge_index = _graph()
    model = _Net(gl)
    assert gl.summary(model, x, edge_index, leaf_module=None) == \
        pyg_nn.summary(model, x, edge_index, leaf_module=None)
    assert "explain_port" in gl.summary(model, x, edge_index, leaf_module=None)
    dagnn = gl.summary(gl.DAGNN(6, 8, 3, K=2), x, edge_index)
    assert "(lin1)Linear" in dagnn and "(gate)Linear" in dagnn
