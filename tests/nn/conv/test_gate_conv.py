import inspect

import pytest
import torch
from helpers import reference_ops
from parity import assert_twins_agree, graph_with_edge_features
from torch_geometric.nn.models import AttentiveFP
from torch_geometric.nn.models.attentive_fp import GATEConv as PyGGATEConv
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def seeded_gate_twins(*args, **kwargs):
    """graphloc's GATEConv and PyG's (in torch_geometric.nn.models.attentive_fp) from one
    seed, in float64: the same parameter names and initial values."""
    twins = []
    for cls in (gl.GATEConv, PyGGATEConv):
        torch.manual_seed(7)
        twins.append(cls(*args, **kwargs).double())
    for (key, a), (other, b) in zip(twins[0].state_dict().items(),
                                    twins[1].state_dict().items(), strict=True):
        assert key == other and torch.equal(a, b)
    return twins


def _graph(seed=0):
    return graph_with_edge_features(seed, width=5)


def test_matches_pyg_with_gradients():
    x, edge_index, edge_attr = _graph()
    ours, theirs = seeded_gate_twins(5, 5, 3)
    assert_twins_agree(ours, theirs, [x, edge_attr], lambda conv, x, e: conv(x, edge_index, e))
    assert repr(ours) == repr(theirs)
    assert list(inspect.signature(ours.forward).parameters)[:3] == \
        list(inspect.signature(theirs.forward).parameters)[:3]


def test_dropout_in_training_draws_pygs_mask():
    x, edge_index, edge_attr = _graph(seed=1)
    ours, theirs = seeded_gate_twins(5, 5, 3, dropout=0.4)
    results = []
    for conv in (ours.train(), theirs.train()):
        leaf = x.clone().requires_grad_()
        torch.manual_seed(3)
        out = conv(leaf, edge_index, edge_attr)
        results.append((out, torch.autograd.grad(out.sum(), [leaf, *conv.parameters()])))
    torch.testing.assert_close(results[0], results[1])
    assert not torch.allclose(results[0][0], ours.eval()(x, edge_index, edge_attr))


def _dense_gate(conv, x, edge_index, edge_attr):
    """The paper's layer node by node: a softmax over the in-edges of the scores from
    LeakyReLU(lin1([x_j, e_ji])), weighing lin2(x_j), plus the bias."""
    leaky = torch.nn.functional.leaky_relu
    rows = []
    for i in range(x.size(0)):
        edges = (edge_index[1] == i).nonzero().view(-1).tolist()
        out = conv.bias.clone()
        if edges:
            scores = []
            for e in edges:
                h = leaky(conv.lin1.weight @ torch.cat([x[edge_index[0, e]], edge_attr[e]]))
                scores.append(leaky(conv.att_l[0] @ h + conv.att_r[0] @ x[i]))
            alpha = torch.softmax(torch.stack(scores), 0)
            for a, e in zip(alpha, edges, strict=True):
                out = out + a * (conv.lin2.weight @ x[edge_index[0, e]])
        rows.append(out)
    return torch.stack(rows)


def test_the_formula_node_by_node():
    x, edge_index, edge_attr = _graph(seed=2)
    torch.manual_seed(3)
    conv = gl.GATEConv(5, 5, 3).double()
    torch.nn.init.uniform_(conv.bias)
    want = _dense_gate(conv, x, edge_index, edge_attr)
    torch.testing.assert_close(conv(x, edge_index, edge_attr), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index, edge_attr), want)


def test_special_values_give_pygs_numbers():
    x, edge_index, edge_attr = _graph(seed=4)
    x[3, 1], x[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    edge_attr[2, 0], edge_attr[7, 1] = float("inf"), float("nan")
    ours, theirs = seeded_gate_twins(5, 5, 3)
    torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr),
                               equal_nan=True)
    with reference_ops():
        torch.testing.assert_close(ours(x, edge_index, edge_attr),
                                   theirs(x, edge_index, edge_attr), equal_nan=True)
    empty = torch.empty(2, 0, dtype=torch.long)
    torch.testing.assert_close(ours(x, empty, edge_attr[:0]), theirs(x, empty, edge_attr[:0]),
                               equal_nan=True)


def test_a_destination_whose_scores_are_all_minus_inf_weighs_its_edges_0():
    """x_i = +inf against a negative att_r entry: every score of node i is -inf. graphloc's
    rule for a masked row (weights 0: the output is the bias), where PyG's softmax gives
    NaN; the other nodes as PyG's."""
    x, edge_index, edge_attr = _graph(seed=7)
    ours, theirs = seeded_gate_twins(5, 5, 3)
    with torch.no_grad():
        for conv in (ours, theirs):
            conv.att_r[0, 0] = -1.0
            conv.bias.uniform_(-1, 1, generator=torch.Generator().manual_seed(0))
    # a node with in-edges, none from itself (an infinite source row times weight 0 is
    # NaN, the documented exception)
    hub = next(i for i in edge_index[1].unique().tolist()
               if not ((edge_index[1] == i) & (edge_index[0] == i)).any())
    x[hub, 0] = float("inf")
    got, want = ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr)
    assert want[hub].isnan().all()
    torch.testing.assert_close(got[hub], ours.bias)
    others = torch.arange(x.size(0)) != hub
    torch.testing.assert_close(got[others], want[others], equal_nan=True)


def test_sparse_adjacencies_and_graphs_carry_the_edge_features():
    x, edge_index, edge_attr = _graph(seed=5)
    edge_index = torch.unique(edge_index, dim=1)
    edge_attr = edge_attr[:edge_index.size(1)]
    ours, theirs = seeded_gate_twins(5, 5, 3)
    want = theirs(x, edge_index, edge_attr)
    adj = to_torch_coo_tensor(edge_index.flip(0), edge_attr, size=(14, 14))
    torch.testing.assert_close(ours(x, adj), want)
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=14, edge_attr=edge_attr)),
                               want)
    torch.testing.assert_close(ours(x, edge_index, edge_attr.round().long()),
                               theirs(x, edge_index, edge_attr.round()))


def test_from_pyg_converts_a_whole_attentive_fp():
    """AttentiveFP (PyG's model): its GATEConv, GATConvs and the molecule readout's GATConv
    all become graphloc's; the same outputs."""
    torch.manual_seed(0)
    model = AttentiveFP(8, 16, 1, edge_dim=3, num_layers=3, num_timesteps=2).double().eval()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(30, 8, dtype=torch.float64, generator=gen)
    edge_index = torch.randint(0, 30, (2, 80), generator=gen)
    edge_attr = torch.randn(80, 3, dtype=torch.float64, generator=gen)
    batch = (torch.arange(30) >= 15).long()
    converted = from_pyg(model, example=(x, edge_index, edge_attr, batch))
    assert converted.pyg_conversion["kept"] == []
    assert type(converted.gate_conv) is gl.GATEConv
    torch.testing.assert_close(converted(x, edge_index, edge_attr, batch),
                               model(x, edge_index, edge_attr, batch))


def test_bad_arguments_are_named():
    x, edge_index, edge_attr = _graph(seed=6)
    with pytest.raises(ValueError, match="GATEConv: edge_dim must be an integer >= 1"):
        gl.GATEConv(5, 5, 0)
    with pytest.raises(ValueError, match="GATEConv: dropout must be a probability"):
        gl.GATEConv(5, 5, 3, dropout=1.5)
    conv = gl.GATEConv(5, 5, 3).double()
    with pytest.raises(ValueError, match="GATEConv needs edge features"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match=r"edge_attr has shape \[69, 2\] but the layer takes 3 "
                                         r"features per edge \(edge_dim=3\)"):
        conv(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match="GATEConv: lin2 maps the messages x_j of 4 channels "
                                         "but takes 5"):
        gl.GATEConv(4, 5, 3).double()(x[:, :4], edge_index, edge_attr)
    with pytest.raises(TypeError, match="GATEConv: x must be one tensor"):
        conv((x, x), edge_index, edge_attr)
