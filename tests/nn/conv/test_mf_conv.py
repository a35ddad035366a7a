import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_special_values_agree, assert_twins_agree, seeded_twins
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl


def _graph(seed=0, n=14, m=50):
    """Parallel edges, loops, a hub above every max_degree tested and isolated nodes."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    edge_index = torch.cat([edge_index, edge_index[:, :4]], 1)  # parallel edges count twice
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5, dtype=torch.float64, generator=gen), edge_index


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("max_degree,bias", [(10, True), (2, False), (0, True)])
def test_matches_pyg_with_gradients(max_degree, bias, aggr):
    x, edge_index = _graph()
    ours, theirs = seeded_twins("MFConv", 5, 4, max_degree=max_degree, bias=bias, aggr=aggr)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))


def test_a_bipartite_pair_and_a_missing_root_match_pyg():
    gen = torch.Generator().manual_seed(1)
    x_src = torch.randn(9, 5, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 6, (30,), generator=gen)])
    ours, theirs = seeded_twins("MFConv", (5, 3), 4, max_degree=3)
    assert_twins_agree(ours, theirs, [x_src, x_dst],
                       lambda conv, a, b: conv((a, b), edge_index))
    torch.testing.assert_close(ours((x_src, None), edge_index, (9, 6)),
                               theirs((x_src, None), edge_index, (9, 6)))


def _dense_mf(conv, x, edge_index, aggr):
    """The paper's layer node by node: each node's degree (in-edges, parallel ones
    counted) picks its weights."""
    rows = []
    for i in range(x.size(0)):
        neighbours = x[edge_index[0, edge_index[1] == i]]
        degree = min(neighbours.size(0), conv.max_degree)
        if neighbours.size(0) == 0:
            h = torch.zeros(x.size(1), dtype=x.dtype)
        else:
            h = {"add": neighbours.sum(0), "mean": neighbours.mean(0),
                 "max": neighbours.max(0).values}[aggr]
        lin_l, lin_r = conv.lins_l[degree], conv.lins_r[degree]
        rows.append(lin_l.weight @ h + lin_l.bias + lin_r.weight @ x[i])
    return torch.stack(rows)


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_the_formula_node_by_node(aggr):
    x, edge_index = _graph(seed=2)
    conv = gl.MFConv(5, 4, max_degree=3, aggr=aggr).double()
    torch.testing.assert_close(conv(x, edge_index), _dense_mf(conv, x, edge_index, aggr))
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index), _dense_mf(conv, x, edge_index, aggr))


@pytest.mark.parametrize("make", [to_torch_coo_tensor, to_torch_csr_tensor])
def test_a_sparse_adjacency_counts_its_entries(make):
    """PyG's MFConv fails on a torch.sparse adjacency (its degree indexes the matrix):
    graphloc's reads a node's degree as its row's entries (PyG's SparseTensor row count)
    and ignores the values, as PyG's SparseTensor path does."""
    x, edge_index = _graph(seed=3)
    edge_index = torch.unique(edge_index, dim=1)
    conv = gl.MFConv(5, 4, max_degree=3).double()
    weights = torch.rand(edge_index.size(1), dtype=torch.float64) + 2.0
    adj = make(edge_index.flip(0), weights, size=(14, 14))
    torch.testing.assert_close(conv(x, adj), _dense_mf(conv, x, edge_index, "add"))


def test_the_degrees_follow_a_new_graph_and_the_flow():
    """The degree groups are kept per graph: a second graph on the same layer takes its
    own; flow="target_to_source" counts edge_index[0]."""
    ours, theirs = seeded_twins("MFConv", 5, 4, max_degree=3)
    for seed in (4, 5):
        x, edge_index = _graph(seed=seed)
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    ours.flow = theirs.flow = "target_to_source"
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    torch.testing.assert_close(ours(x, edge_index),
                               _dense_mf(ours, x, edge_index.flip(0), "add"))


def test_a_max_degree_lowered_after_building_uses_the_first_weights():
    """PyG's forward reads max_degree at each call: lowered, the first weights serve (as
    here); raised above the weights built, PyG's leaves the higher-degree nodes'
    outputs uninitialised, and graphloc's says so."""
    x, edge_index = _graph(seed=9)
    ours, theirs = seeded_twins("MFConv", 5, 4, max_degree=6)
    ours.max_degree = theirs.max_degree = 2
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    torch.testing.assert_close(ours(x, edge_index), _dense_mf(ours, x, edge_index, "add"))
    ours.max_degree = 7
    with pytest.raises(ValueError, match=r"max_degree is 7, but the layer was built with "
                                         r"weights for degrees 0 \.\. 6 only"):
        ours(x, edge_index)


def test_a_lazy_width_and_a_static_batch_match_pyg():
    x, edge_index = _graph(seed=6)
    outputs = []
    for library in (gl, pyg):  # the weights drawn at the first call, from one seed
        torch.manual_seed(5)
        conv = library.MFConv(-1, 4, max_degree=2)
        torch.manual_seed(6)
        outputs.append(conv(x.float(), edge_index))
        assert conv.lins_l[2].weight.shape == (4, 5)
    torch.testing.assert_close(outputs[0], outputs[1])
    assert repr(gl.MFConv(-1, 4)) == repr(pyg.MFConv(-1, 4))
    ours, theirs = seeded_twins("MFConv", 5, 4, max_degree=3)
    batch = torch.randn(3, 14, 5, dtype=torch.float64)
    torch.testing.assert_close(ours(batch, edge_index), theirs(batch, edge_index))


def test_special_values_and_empty_graphs():
    """NaN and -inf features on hubs and isolated nodes: PyG's output, with the kernels
    and with their pure-torch twins; no nodes or no edges give PyG's shapes."""
    x, edge_index = _graph(seed=7)
    x[3, 1], x[7, 2] = float("nan"), float("-inf")
    ours, theirs = seeded_twins("MFConv", 5, 4, max_degree=4)
    assert_special_values_agree(ours, theirs, x, edge_index)

def test_from_pyg_converts_it_inside_a_model():
    x, edge_index = _graph(seed=8)
    torch.manual_seed(0)
    theirs = torch.nn.ModuleDict({"conv": pyg.MFConv(5, 4, max_degree=5, aggr="mean")}).double()

    class Model(torch.nn.Module):
        def __init__(self, convs):
            super().__init__()
            self.convs = convs

        def forward(self, x, edge_index):
            return self.convs["conv"](x, edge_index).relu()

    model = Model(theirs)
    converted = gl.from_pyg(model, example=(x, edge_index))
    assert type(converted.convs["conv"]) is gl.MFConv
    assert converted.pyg_conversion["converted"] == ["convs.conv"]
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))


def test_bad_arguments_are_named():
    x, edge_index = _graph()
    with pytest.raises(ValueError, match="max_degree must be an integer >= 0, got -1"):
        gl.MFConv(5, 4, max_degree=-1)
    with pytest.raises(ValueError, match="max_degree must be an integer >= 0, got '3'"):
        gl.MFConv(5, 4, max_degree="3")
    with pytest.raises(ValueError, match="out_channels must be an integer >= 1, got 0"):
        gl.MFConv(5, 0)
    with pytest.raises(TypeError, match="bias must be True or False"):
        gl.MFConv(5, 4, bias="no")
    with pytest.raises(ValueError, match="changes the width"):
        gl.MFConv(5, 4, aggr=["mean", "max"])
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 5\]"):
        gl.MFConv(5, 4)(x[:, :3].float(), edge_index)
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds 20"):
        gl.MFConv(5, 4)(x.float(), torch.tensor([[0, 1], [2, 20]]))
