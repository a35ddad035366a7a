import itertools

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_special_values_agree, assert_twins_agree, seeded_twins
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl

# (directed_msg, attention, attention_type): the fused paths (directed, no edge features)
# and the per-edge ones
MODES = [(True, False, "additive"), (True, True, "additive"), (True, True, "dot_product"),
         (False, False, "additive"), (False, True, "additive"), (False, True, "dot_product")]



def _graph(seed=0, n=14, m=50):
    """Parallel edges, loops, a hub and isolated nodes; edge features [E, 3]."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    edge_index = torch.cat([edge_index, edge_index[:, :4]], 1)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, dtype=torch.float64, generator=gen)
    return x, edge_index, torch.randn(edge_index.size(1), 3, dtype=torch.float64,
                                      generator=gen)


@pytest.mark.parametrize("edges", [False, True])
@pytest.mark.parametrize("directed,attention,kind", MODES)
def test_matches_pyg_with_gradients(directed, attention, kind, edges):
    x, edge_index, edge_attr = _graph()
    ours, theirs = seeded_twins("GeneralConv", 5, 4, 3 if edges else None,
                                directed_msg=directed, heads=2, attention=attention,
                                attention_type=kind)
    if edges:
        assert_twins_agree(ours, theirs, [x, edge_attr],
                            lambda conv, x, e: conv(x, edge_index, e))
    else:
        assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))


@pytest.mark.parametrize("aggr,l2,skip", itertools.product(["mean", "max"], [False, True],
                                                           [False, True]))
def test_other_aggregations_norms_and_skips_match_pyg(aggr, l2, skip):
    x, edge_index, _ = _graph(seed=1)
    for attention in (False, True):
        ours, theirs = seeded_twins("GeneralConv", 5, 5, aggr=aggr, l2_normalize=l2,
                                    skip_linear=skip, attention=attention, heads=3)
        assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))


def test_a_bipartite_pair_matches_pyg():
    gen = torch.Generator().manual_seed(2)
    x_src = torch.randn(9, 5, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 6, (30,), generator=gen)])
    ours, theirs = seeded_twins("GeneralConv", (5, 3), 4, heads=2, attention=True)
    assert_twins_agree(ours, theirs, [x_src, x_dst],
                        lambda conv, a, b: conv((a, b), edge_index, size=(9, 6)))


def _dense_general(conv, x, edge_index, edge_attr):
    """The layer node by node from its formula: each in-edge's message per head, the
    attention's softmax over them, the heads averaged, the root added."""
    H, C = conv.heads, conv.out_channels

    def message(a, b, e):  # PyG's message_basic(x_i=a, x_j=b)
        m = conv.lin_msg(b) + (0 if conv.directed_msg else conv.lin_msg_i(a))
        return (m + (conv.lin_edge(e) if e is not None else 0)).view(-1, H, C)

    rows = []
    for i in range(x.size(0)):
        into = (edge_index[1] == i).nonzero().view(-1)
        e = None if edge_attr is None else edge_attr[into]
        x_i, x_j = x[i].expand(into.numel(), -1), x[edge_index[0, into]]
        m = message(x_i, x_j, e)
        if conv.attention and conv.attention_type == "additive":
            alpha = (m * conv.att_msg).sum(-1)
        elif conv.attention:
            alpha = (message(x_j, x_i, e) * m).sum(-1) / C ** 0.5
        if conv.attention:
            m = m * torch.softmax(F.leaky_relu(alpha, 0.2), dim=0).unsqueeze(-1)
        rows.append(m.sum(0).mean(0))
    return torch.stack(rows) + conv.lin_self(x)


@pytest.mark.parametrize("directed,attention,kind", MODES)
def test_the_formula_node_by_node(directed, attention, kind):
    x, edge_index, edge_attr = _graph(seed=3)
    for edges in (None, edge_attr):
        conv = gl.GeneralConv(5, 4, None if edges is None else 3, directed_msg=directed,
                              heads=2, attention=attention, attention_type=kind).double()
        want = _dense_general(conv, x, edge_index, edges)
        torch.testing.assert_close(conv(x, edge_index, edges), want)
        with reference_ops():
            torch.testing.assert_close(conv(x, edge_index, edges), want)


def test_sparse_adjacency_values_are_edge_features_or_weights_as_pygs():
    """Values [E, D] of a torch.sparse adjacency are the edge features (PyG's reading);
    values [E] are weights, which GeneralConv does not read; an edge_attr given with it
    follows the adjacency's storage order."""
    x, edge_index, edge_attr = _graph(seed=4)
    key = edge_index[1] * 100 + edge_index[0]
    _, inverse = torch.unique(key, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), key.numel()).scatter_reduce(
        0, inverse, torch.arange(key.numel()), "amin")
    edge_index, edge_attr = edge_index[:, first], edge_attr[first]  # unique, in CSR order
    ours, theirs = seeded_twins("GeneralConv", 5, 4, 3, heads=2, attention=True, directed_msg=False)
    want = theirs(x, edge_index, edge_attr)
    hybrid = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (14, 14, 3)).coalesce()
    torch.testing.assert_close(ours(x, hybrid), want)
    weighted = to_torch_coo_tensor(edge_index.flip(0), torch.rand(edge_index.size(1)) + 2,
                                   size=(14, 14)).double()
    torch.testing.assert_close(ours(x, weighted, edge_attr), want)
    torch.testing.assert_close(ours(x, weighted), theirs(x, edge_index))


def test_a_static_batch_is_read_nodes_first_as_pyg_s_node_dim():
    """PyG's GeneralConv sets node_dim = 0 (a static batch [N, B, F]) and then fails on one
    (its [E, B, H C] messages viewed as [E B, H, C]); graphloc's computes each set."""
    x, edge_index, edge_attr = _graph(seed=5)
    ours, _ = seeded_twins("GeneralConv", 5, 4, 3, heads=2, attention=True,
                           attention_type="dot_product")
    batch = torch.randn(14, 3, 5, dtype=torch.float64)
    want = torch.stack([ours(batch[:, b], edge_index, edge_attr) for b in range(3)], dim=1)
    torch.testing.assert_close(ours(batch, edge_index, edge_attr), want)


@pytest.mark.parametrize("directed,attention,kind", MODES)
def test_special_values_and_empty_graphs(directed, attention, kind):
    """NaN and -inf features beside a hub and isolated nodes: PyG's output (NaN where
    PyG's is), with the kernels and with their pure-torch twins; no edges gives PyG's."""
    x, edge_index, _ = _graph(seed=6)
    x[3, 1], x[7, 2] = float("nan"), float("-inf")
    ours, theirs = seeded_twins("GeneralConv", 5, 4, directed_msg=directed, heads=2,
                                attention=attention, attention_type=kind)
    assert_special_values_agree(ours, theirs, x, edge_index)

def test_from_pyg_converts_a_graphgym_style_stack():
    x, edge_index, edge_attr = _graph(seed=7)
    torch.manual_seed(0)

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([
                pyg.GeneralConv(5, 8, 3, heads=2, attention=True),
                pyg.GeneralConv(8, 8, 3, directed_msg=False, l2_normalize=True)])

        def forward(self, x, edge_index, edge_attr):
            for layer in self.layers:
                x = layer(x, edge_index, edge_attr).relu()
            return x

    model = Stack().double()
    converted = gl.from_pyg(model, example=(x, edge_index, edge_attr))
    assert converted.pyg_conversion["converted"] == ["layers.0", "layers.1"]
    assert all(type(layer) is gl.GeneralConv for layer in converted.layers)
    torch.testing.assert_close(converted(x, edge_index, edge_attr),
                               model(x, edge_index, edge_attr))


def test_reset_parameters_also_draws_lin_msg_i():
    conv = gl.GeneralConv(5, 4, directed_msg=False)
    before = conv.lin_msg_i.weight.detach().clone()
    conv.reset_parameters()
    assert not torch.equal(conv.lin_msg_i.weight, before)


def test_bad_arguments_are_named():
    x, edge_index, edge_attr = _graph()
    x, edge_attr = x.float(), edge_attr.float()
    with pytest.raises(ValueError, match="attention_type must be one of"):
        gl.GeneralConv(5, 4, attention=True, attention_type="dot")
    with pytest.raises(ValueError, match="heads must be an integer >= 1, got 0"):
        gl.GeneralConv(5, 4, heads=0)
    with pytest.raises(TypeError, match="directed_msg must be True or False"):
        gl.GeneralConv(5, 4, directed_msg="no")
    with pytest.raises(ValueError, match="changes the width"):
        gl.GeneralConv(5, 4, aggr=["mean", "max"])
    with pytest.raises(ValueError, match="built without in_edge_channels, so the edge_attr"):
        gl.GeneralConv(5, 4)(x, edge_index, edge_attr)
    with pytest.raises(ValueError, match=r"edge_attr has shape \[69, 2\] but the layer takes 3 "
                                         r"features per edge \(in_edge_channels=3\)"):
        gl.GeneralConv(5, 4, 3)(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match="edge_attr has 3 rows"):
        gl.GeneralConv(5, 4, 3)(x, edge_index, edge_attr[:3])
    with pytest.raises(ValueError, match=r"pair \(x_src, None\) has nothing to add"):
        gl.GeneralConv(5, 4)((x, None), edge_index)
    with pytest.raises(ValueError, match="x_dst has 3 features, but its messages map the "
                                         "source width 5 at both ends"):
        gl.GeneralConv((5, 3), 4, directed_msg=False)((x, x[:, :3]), edge_index)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 5\]"):
        gl.GeneralConv(5, 4)(x[:, :3], edge_index)
