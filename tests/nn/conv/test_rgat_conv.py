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
           "no bias, slope 0.1": {"bias": False, "negative_slope": 0.1},
           "blocks": {"num_blocks": 2, "heads": 2},
           "within-relation": {"attention_mechanism": "within-relation", "heads": 2},
           "multiplicative, dim 3": {"attention_mode": "multiplicative-self-attention",
                                     "dim": 3, "heads": 2},
           "multiplicative averaged": {"attention_mode": "multiplicative-self-attention",
                                       "dim": 2, "heads": 2, "concat": False},
           "edge features": {"edge_dim": 3, "heads": 2},
           "multiplicative edge features": {"attention_mode": "multiplicative-self-attention",
                                            "edge_dim": 3},
           "mod additive": {"mod": "additive", "heads": 2},
           "mod additive, multiplicative": {"mod": "additive", "dim": 2, "attention_mode":
                                            "multiplicative-self-attention"},
           "mod scaled": {"mod": "scaled", "heads": 2},
           "mod scaled, multiplicative": {"mod": "scaled", "dim": 2, "attention_mode":
                                          "multiplicative-self-attention"},
           "mod f-additive": {"mod": "f-additive", "heads": 2},
           "mod f-scaled, within, blocks": {"mod": "f-scaled", "num_blocks": 2, "heads": 2,
                                            "attention_mechanism": "within-relation"}}


def _edge_features(conv, m=60, seed=0):
    """``[E, edge_dim]`` features for a conv built with edge_dim, else None."""
    if conv.edge_dim is None:
        return None
    return torch.randn(m, conv.edge_dim, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(seed))


def _randomise_unit_parameters(conv):
    """``w``, ``l1``, ``b1``, ``l2``, ``b2`` and the bias away from their initial ones and
    zeros, so that the mods' terms are checked (``l2``, which PyG's reset leaves as
    allocated, becomes finite)."""
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for name in ("w", "l1", "b1", "l2", "b2", "bias"):
            param = getattr(conv, name)
            if param is not None:
                param.copy_(torch.rand(param.shape, generator=gen, dtype=param.dtype) - 0.5)


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient_and_the_attention_weights(option):
    x, edge_index, edge_type = _graph()
    ours, theirs = _twins(**OPTIONS[option])
    _randomise_unit_parameters(theirs)
    ours.load_state_dict(theirs.state_dict())
    edge_attr = _edge_features(ours)
    inputs = [x] if edge_attr is None else [x, edge_attr]
    assert_twins_agree(ours, theirs, inputs,
                       lambda conv, x, *attr: conv(x, edge_index, edge_type, *attr))
    (_, (edges, alpha)), (_, (want_edges, want_alpha)) = (
        conv(x, edge_index, edge_type, edge_attr, return_attention_weights=True)
        for conv in (ours, theirs))
    assert torch.equal(edges, want_edges)
    torch.testing.assert_close(alpha, want_alpha)


def _dense_maps(conv):
    """Each relation's ``[in, H C]`` matrix from the decomposition's definition: its own,
    ``sum_b att[r, b] basis_b``, or its blocks placed on the diagonal."""
    if conv.num_bases is not None:
        return torch.einsum("rb,bio->rio", conv.att, conv.basis)
    if conv.num_blocks is None:
        return conv.weight
    R, B, rows, cols = conv.weight.shape
    dense = torch.zeros(R, B * rows, B * cols, dtype=conv.weight.dtype)
    for b in range(B):
        dense[:, b * rows:(b + 1) * rows, b * cols:(b + 1) * cols] = conv.weight[:, b]
    return dense


def _oracle_weights(conv, scores, types, degree):
    """One destination's message weights ``[e, H D]`` from its edges' scores: the softmax
    over all of them or per relation, then the f-mods."""
    if conv.attention_mechanism == "across-relation":
        alpha = scores.softmax(0)
    else:
        alpha = torch.zeros_like(scores)
        for r in types.unique():
            alpha[types == r] = scores[types == r].softmax(0)
    if conv.mod == "f-additive":
        return torch.where(alpha > 0, alpha + 1, alpha)
    return alpha * degree if conv.mod == "f-scaled" else alpha


def _oracle(conv, x, edge_index, edge_type, edge_attr=None):
    """RGAT from its formula, destination by destination: each edge's ends through its
    relation's dense map, the scores (additive or multiplicative, with the edge term), the
    softmax, the mod, the weighted sum per head and score column."""
    H, D, C = conv.heads, conv.dim, conv.out_channels
    maps = _dense_maps(conv)
    out = torch.zeros(N, H, D, C, dtype=x.dtype)
    for i in range(N):
        edges = (edge_index[1] == i).nonzero().view(-1)
        if not edges.numel():
            continue
        types = edge_type[edges]
        g_i = torch.stack([x[i] @ maps[r] for r in types])
        sources = edge_index[0, edges]
        g_j = torch.stack([x[j] @ maps[r] for j, r in zip(sources, types, strict=True)])
        q, k = g_i @ conv.q, g_j @ conv.k  # [e, H D]
        a = 0.0 if edge_attr is None else edge_attr[edges] @ conv.lin_edge.weight.t() @ conv.e
        if conv.attention_mode == "additive-self-attention":
            scores = F.leaky_relu(q + k + a, conv.negative_slope)
        else:
            scores = q * k * (1.0 if edge_attr is None else a)
        alpha = _oracle_weights(conv, scores, types, float(edges.numel()))
        values = g_j.view(-1, H, 1, C)
        messages = alpha.view(-1, H, D, 1) * values
        if conv.mod == "additive":
            messages = messages + conv.w * values
        if conv.mod == "scaled":
            psi = F.relu(edges.numel() * conv.l1 + conv.b1) @ conv.l2 + conv.b2  # [1, C]
            messages = messages * psi
        out[i] = messages.sum(0)
    out = out.reshape(N, -1) if conv.concat else out.mean(1).reshape(N, -1)
    return out if conv.bias is None else out + conv.bias


@pytest.mark.parametrize("option", ["two heads", "bases", "three heads averaged", "blocks",
                                    "within-relation", "multiplicative averaged",
                                    "multiplicative edge features", "edge features",
                                    "mod additive, multiplicative", "mod scaled",
                                    "mod f-additive", "mod f-scaled, within, blocks"])
def test_the_formula_edge_by_edge_with_the_kernels_and_without(option):
    x, edge_index, edge_type = _graph(seed=1)
    torch.manual_seed(6)
    conv = gl.RGATConv(6, 5, R, **OPTIONS[option]).double()
    _randomise_unit_parameters(conv)
    edge_attr = _edge_features(conv, seed=1)
    with torch.no_grad():
        want = _oracle(conv, x, edge_index, edge_type, edge_attr)
    for context in (torch.no_grad, reference_ops):
        with context():
            torch.testing.assert_close(conv(x, edge_index, edge_type, edge_attr), want)


@pytest.mark.parametrize("option", ["two heads", "blocks", "bases", "within-relation",
                                    "multiplicative, dim 3", "edge features", "mod additive",
                                    "mod scaled"])
def test_a_nan_feature_reaches_what_it_reaches_in_pygs(option):
    """A NaN feature of one node: NaN outputs and gradients exactly where PyG's has them
    (the maps of relations that never read the node keep finite gradients: each relation
    maps only its own edges' ends, as PyG's)."""
    x, edge_index, edge_type = _graph(seed=2)
    ours, theirs = _twins(**OPTIONS[option])
    _randomise_unit_parameters(theirs)
    ours.load_state_dict(theirs.state_dict())
    # the last node (no in-edges) sends to the one before alone, which gets relation 0 alone
    last = edge_index[0] == N - 1
    assert last.any()
    edge_index[1] = torch.where(last, N - 2, edge_index[1])
    edge_type = torch.where(edge_index[1] == N - 2, 0, edge_type)
    x[N - 1, 1] = float("nan")
    edge_attr = _edge_features(ours)
    inputs = [x] if edge_attr is None else [x, edge_attr]
    call = lambda conv, x, *attr: conv(x, edge_index, edge_type, *attr)  # noqa: E731
    for context in (torch.enable_grad, reference_ops):
        with context():
            want, want_grads = assert_twins_agree(ours, theirs, inputs, call, equal_nan=True)
    assert want.isnan().any() and want_grads[0].isnan().any()
    relation_maps = dict(zip([name for name, _ in theirs.named_parameters()],
                             want_grads[len(inputs):], strict=True))
    maps = relation_maps.get("weight", relation_maps.get("att"))
    assert maps[1:].isfinite().all() and maps[1:].abs().sum() > 0  # (untouched by the NaN)


def test_no_edges_and_missing_relations_give_pygs_zero_gradients():
    x, edge_index, edge_type = _graph(seed=2)
    ours, theirs = _twins(heads=2)
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
    with_edges, theirs_with_edges = _twins(heads=2, edge_dim=3)
    order = (edge_index[1] * N + edge_index[0]).argsort()  # the adjacency's storage order
    edges, types = edge_index[:, order], edge_type[order]
    edge_attr = _edge_features(with_edges, m=edges.size(1))
    want_with_edges = theirs_with_edges(x, edges, types, edge_attr)
    features_t = to_torch_coo_tensor(edges.flip(0), edge_attr, size=(N, N))  # [N, N, 3]
    torch.testing.assert_close(with_edges(x, features_t, types), want_with_edges)  # (PyG's)
    torch.testing.assert_close(with_edges(x, Graph(edges, num_nodes=N, edge_attr=edge_attr),
                                          types), want_with_edges)
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


def test_from_pyg_converts_pygs_rgat_model_and_every_form():
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
    for option in OPTIONS.values():  # from_pyg's own probe (edge features for edge_dim)
        theirs = pyg.RGATConv(6, 4, R, **option)
        _randomise_unit_parameters(theirs)
        ours = from_pyg(theirs, strict=True)
        assert type(ours) is gl.RGATConv
        edge_attr = _edge_features(ours)
        edge_attr = None if edge_attr is None else edge_attr.float()
        torch.testing.assert_close(ours(x, edge_index, edge_type, edge_attr),
                                   theirs(x, edge_index, edge_type, edge_attr))


def test_pygs_rules_for_the_options_and_bad_calls_are_named():
    x, edge_index, edge_type = _graph(seed=5)
    conv = gl.RGATConv(6, 5, R).double()
    with pytest.raises(ValueError, match=r"edge_type \(relations 0 .. 3\)"):
        conv(x, edge_index, torch.full_like(edge_type, R))
    with pytest.raises(ValueError, match="needs edge_type"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="built without edge_dim.*edge_dim=2"):
        conv(x, edge_index, edge_type, torch.randn(edge_type.numel(), 2))
    with pytest.raises(TypeError, match="floating-point node features x, got torch.int64"):
        conv(x.long(), edge_index, edge_type)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 6\], got \[16, 5\]"):
        conv(x[:, :5], edge_index, edge_type)
    with pytest.raises(ValueError, match="edge_type has 59 rows but the graph has 60 edges"):
        conv(x, edge_index, edge_type[1:])
    with pytest.raises(TypeError, match="edge_type must be a 1-D integer tensor"):
        conv(x, edge_index, edge_type.double())
    with pytest.raises(ValueError, match=r"a pair \(x_src, None\) has no destination"):
        conv((x, None), edge_index, edge_type)
    with_edges = gl.RGATConv(6, 5, R, edge_dim=3).double()
    with pytest.raises(ValueError, match=r"edge_attr has shape \[60, 2\].*edge_dim=3"):
        with_edges(x, edge_index, edge_type, torch.randn(60, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="edge_attr has 59 rows but the graph has 60 edges"):
        with_edges(x, edge_index, edge_type, torch.randn(59, 3, dtype=torch.float64))
    rules = {"num_relations must be an integer >= 1, got 0": dict(num_relations=0),
             "mod must be one of .*got 'sum'": dict(mod="sum"),
             "attention_mechanism must be one of .*got 'within'":
                 dict(attention_mechanism="within"),
             "attention_mode must be one of .*got 'dot'": dict(attention_mode="dot"),
             "dim=2 needs attention_mode='multiplicative-self-attention'": dict(dim=2),
             "dim must be an integer >= 1, got 0": dict(
                 dim=0, attention_mode="multiplicative-self-attention"),
             "dropout=0.5 is applied only without a mod .*'scaled'":
                 dict(dropout=0.5, mod="scaled"),
             "num_bases=2 and num_blocks=2 cannot both be set": dict(num_bases=2, num_blocks=2),
             "num_blocks=4 must divide in_channels=6": dict(num_blocks=4),
             "edge_dim must be an integer >= 1, got 0": dict(edge_dim=0)}
    for message, kwargs in rules.items():
        kwargs = {"num_relations": R, **kwargs}
        with pytest.raises(ValueError, match=message):
            gl.RGATConv(6, 5, **kwargs)


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


@pytest.mark.parametrize("num_relations", [1, 3])
def test_compiled_forward_maps_the_pairs_of_both_ends(num_relations):
    """Traced, every (relation, node) pair is a row and those no edge takes read zeros: the
    pairs' end of each graph must be the right one (with one relation and as many pairs as
    destinations the two ends had the same size), so a node that only sends keeps its
    values."""
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(N, 6, generator=gen)
    edge_index = torch.stack([torch.arange(N), torch.arange(N).roll(1) % (N // 2)])
    edge_type = torch.arange(N) % num_relations
    conv = gl.RGATConv(6, 5, num_relations, heads=2)
    eager = conv(x, edge_index, edge_type)
    compiled = torch.compile(lambda x: conv(x, edge_index, edge_type), fullgraph=True,
                             backend="aot_eager")
    torch.testing.assert_close(compiled(x), eager)
