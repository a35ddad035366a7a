import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import assert_trains_as_pygs, assert_twins_agree
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg

N, R = 16, 4


def _graph(seed=0, m=60):
    """``(x, edge_index, edge_type)`` in float64, loops and parallel edges included, the
    last node without in-edges, relation 3 without edges."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, 6, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, N, (m,), generator=gen),
                              torch.randint(0, N - 1, (m,), generator=gen)])
    return x, edge_index, torch.randint(0, R - 1, (m,), generator=gen)


def _twins(**kwargs):
    """graphloc's and PyG's RGATConv from one seed in float64, their parameters equal (PyG's
    draws; ``l2``, which PyG's reset leaves as allocated, copied over)."""
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(5)
        twins.append(module.RGATConv(6, 5, R, **kwargs).double())
    ours, theirs = twins
    for (key, a), (other, b) in zip(ours.state_dict().items(), theirs.state_dict().items(),
                                    strict=True):
        assert key == other and (key == "l2" or torch.equal(a, b))
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


OPTIONS = {"default": {}, "two heads": {"heads": 2},
           "three heads averaged": {"heads": 3, "concat": False},
           "bases": {"num_bases": 2, "heads": 2},
           "no bias, slope 0.1": {"bias": False, "negative_slope": 0.1}}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient_and_the_attention_weights(option):
    x, edge_index, edge_type = _graph()
    ours, theirs = _twins(**OPTIONS[option])
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index, edge_type))
    (_, (edges, alpha)), (_, (want_edges, want_alpha)) = (
        conv(x, edge_index, edge_type, return_attention_weights=True)
        for conv in (ours, theirs))
    assert torch.equal(edges, want_edges)
    torch.testing.assert_close(alpha, want_alpha)


def _oracle(conv, x, edge_index, edge_type):
    """RGAT from its formula, edge by edge: each edge's ends through its relation's map,
    the scores, one softmax per destination over all its edges, the weighted sum."""
    H, C = conv.heads, conv.out_channels
    weight = conv.relation_weights()
    out = torch.zeros(N, H, C, dtype=x.dtype)
    for i in range(N):
        edges = (edge_index[1] == i).nonzero().view(-1).tolist()
        if not edges:
            continue
        g_i = torch.stack([x[i] @ weight[edge_type[e]] for e in edges])
        g_j = torch.stack([x[edge_index[0, e]] @ weight[edge_type[e]] for e in edges])
        scores = F.leaky_relu(g_i @ conv.q + g_j @ conv.k, conv.negative_slope)  # [e, H]
        alpha = scores.softmax(0)
        out[i] = (alpha.unsqueeze(-1) * g_j.view(-1, H, C)).sum(0)
    out = out.reshape(N, H * C) if conv.concat else out.mean(1)
    return out if conv.bias is None else out + conv.bias


@pytest.mark.parametrize("option", ["two heads", "bases", "three heads averaged"])
def test_the_formula_edge_by_edge_with_the_kernels_and_without(option):
    x, edge_index, edge_type = _graph(seed=1)
    torch.manual_seed(6)
    conv = gl.RGATConv(6, 5, R, **OPTIONS[option]).double()
    with torch.no_grad():
        conv.bias.uniform_(-1, 1)
    want = _oracle(conv, x, edge_index, edge_type)
    for context in (torch.enable_grad, reference_ops):
        with context():
            torch.testing.assert_close(conv(x, edge_index, edge_type), want)


def test_special_values_no_edges_and_missing_relations_as_pygs():
    x, edge_index, edge_type = _graph(seed=2)
    ours, theirs = _twins(heads=2)
    nan = x.clone()
    nan[3, 1] = float("nan")
    for context in (torch.enable_grad, reference_ops):
        with context():
            torch.testing.assert_close(ours(nan, edge_index, edge_type),
                                       theirs(nan, edge_index, edge_type), equal_nan=True)
    empty = (torch.empty(2, 0, dtype=torch.long), torch.empty(0, dtype=torch.long))
    one_relation = (edge_index[:, edge_type == 1], edge_type[edge_type == 1])
    for edges, types in (empty, one_relation):  # zero gradients, not None, as PyG's
        assert_twins_agree(ours, theirs, [x],
                           lambda conv, x, edges=edges, types=types: conv(x, edges, types))


def test_adjacencies_graphs_flow_and_dropout():
    x, edge_index, edge_type = _graph(seed=3)
    edge_index, inverse = edge_index.unique(dim=1, return_inverse=True)
    edge_type = torch.zeros(edge_index.size(1), dtype=torch.long).scatter_(
        0, inverse, _graph(seed=3)[2])  # (one type per remaining edge)
    ours, theirs = _twins(heads=2)
    want = theirs(x, edge_index, edge_type)
    adj_t = to_torch_coo_tensor(edge_index.flip(0), edge_type, size=(N, N))
    torch.testing.assert_close(ours(x, adj_t), want)
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=N), edge_type), want)
    ours.flow = theirs.flow = "target_to_source"
    torch.testing.assert_close(ours(x, edge_index, edge_type), theirs(x, edge_index, edge_type))
    ours.flow = "source_to_target"
    ours.train()
    ours.dropout = 1e-12  # every weight kept: the dropout path gives the same outputs
    torch.testing.assert_close(ours(x, edge_index, edge_type), want)
    ours.dropout = 1.0  # every weight dropped: the bias alone
    torch.testing.assert_close(ours(x, edge_index, edge_type), ours.bias.expand(N, -1))
    ours.dropout = 0.5
    assert not torch.equal(ours(x, edge_index, edge_type), ours(x, edge_index, edge_type))


class _PygRGAT(torch.nn.Module):
    """PyG's examples/rgat.py model: two RGATConvs, a ReLU between, then a Linear."""

    def __init__(self, hidden, out):
        super().__init__()
        self.conv1 = pyg.RGATConv(6, hidden, R)
        self.conv2 = pyg.RGATConv(hidden, hidden, R)
        self.lin = torch.nn.Linear(hidden, out)

    def forward(self, x, edge_index, edge_type):
        x = self.conv1(x, edge_index, edge_type).relu()
        return self.lin(self.conv2(x, edge_index, edge_type))


def test_from_pyg_converts_pygs_rgat_model_and_keeps_other_forms():
    x, edge_index, edge_type = _graph(seed=4)
    x = x.float()
    torch.manual_seed(7)
    model = _PygRGAT(8, 3)
    with torch.no_grad():  # PyG's reset leaves l2 (unused in this form) as allocated: NaN at times
        for conv in (model.conv1, model.conv2):
            conv.l2.zero_()
    converted = from_pyg(model, (x, edge_index, edge_type), strict=True)
    assert converted.pyg_conversion["converted"] == ["conv1", "conv2"]
    labels = torch.arange(N) % 3
    assert_trains_as_pygs(model, converted, lambda net: net(x, edge_index, edge_type), labels)
    for form in ({"mod": "scaled"}, {"attention_mechanism": "within-relation"},
                 {"attention_mode": "multiplicative-self-attention", "dim": 2},
                 {"edge_dim": 3}, {"num_blocks": 2}):
        with pytest.warns(UserWarning, match=f"{next(iter(form))}="):
            kept = from_pyg(pyg.RGATConv(6, 4, R, **form))
        assert type(kept) is pyg.RGATConv


def test_bad_arguments_are_named():
    x, edge_index, edge_type = _graph(seed=5)
    conv = gl.RGATConv(6, 5, R).double()
    with pytest.raises(ValueError, match=r"edge_type \(relations 0 .. 3\)"):
        conv(x, edge_index, torch.full_like(edge_type, R))
    with pytest.raises(ValueError, match="needs edge_type"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="edge_attr"):
        conv(x, edge_index, edge_type, torch.randn(edge_type.numel(), 2))
    with pytest.raises(TypeError, match="floating-point node features x, got torch.int64"):
        conv(x.long(), edge_index, edge_type)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 6\], got \[16, 5\]"):
        conv(x[:, :5], edge_index, edge_type)
    with pytest.raises(ValueError, match="edge_type has 59 rows but the graph has 60 edges"):
        conv(x, edge_index, edge_type[1:])
    with pytest.raises(TypeError, match="edge_type must be a 1-D integer tensor"):
        conv(x, edge_index, edge_type.double())
    with pytest.raises(ValueError, match="mod='additive' is not computed"):
        gl.RGATConv(6, 5, R, mod="additive")
    with pytest.raises(ValueError, match="num_relations must be an integer >= 1, got 0"):
        gl.RGATConv(6, 5, 0)


def test_a_bipartite_pair_and_a_hub_as_pygs():
    ours, theirs = _twins(heads=2)
    gen = torch.Generator().manual_seed(8)
    x_src, x_dst = (torch.randn(n, 6, dtype=torch.float64, generator=gen) for n in (9, 4))
    edge_index = torch.tensor([[0, 8, 2, 5, 5], [0, 1, 3, 3, 0]])
    edge_type = torch.tensor([0, 2, 1, 1, 3])
    torch.testing.assert_close(ours((x_src, x_dst), edge_index, edge_type),
                               theirs((x_src, x_dst), edge_index, edge_type))
    hub = torch.stack([torch.arange(300) % N, torch.zeros(300, dtype=torch.long)])
    x = torch.randn(N, 6, dtype=torch.float64, generator=gen)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, hub, torch.arange(300) % R))
