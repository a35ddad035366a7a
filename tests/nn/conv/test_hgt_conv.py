import copy
import math

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import (
    HETERO_COUNTS,
    HETERO_METADATA,
    HETERO_RELATIONS,
    HETERO_WIDTHS,
    assert_twins_agree,
    hetero_call,
    hetero_inputs,
    seeded_twins,
)
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.hetero import HeteroGraph
from graphloc.nn import from_pyg

OPTIONS = {
    "one head, widths per type": ({"in_channels": HETERO_WIDTHS, "out_channels": 6}, {}),
    "two heads, one width (every type skips)": ({"in_channels": 6, "out_channels": 6,
                                                 "heads": 2}, dict.fromkeys(HETERO_COUNTS, 6)),
    "three heads, lazy widths": ({"in_channels": -1, "out_channels": 9, "heads": 3}, {}),
}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient(option):
    kwargs, widths = OPTIONS[option]
    x, edges = hetero_inputs(widths={**HETERO_WIDTHS, **widths})
    ours, theirs = _twins(kwargs, x)
    out, want = ours(x, edges), theirs(x, edges)
    assert list(out) == list(want) == ["paper", "author", "venue"]
    assert_twins_agree(ours, theirs, list(x.values()), hetero_call(edges))


def _twins(kwargs, x):
    """graphloc's and PyG's HGTConv from one seed in float64 (a lazy pair called once,
    from one seed, to draw its widths' weights), their parameters checked equal."""
    if kwargs["in_channels"] != -1:
        return seeded_twins("HGTConv", metadata=HETERO_METADATA, **kwargs)
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(7)
        conv = module.HGTConv(metadata=HETERO_METADATA, **kwargs)
        torch.manual_seed(8)
        conv({t: v.float() for t, v in x.items()}, hetero_inputs()[1])
        twins.append(conv.double())
    for (key, a), (other, b) in zip(twins[0].state_dict().items(),
                                    twins[1].state_dict().items(), strict=True):
        assert key == other and torch.equal(a, b)
    return twins


def _oracle(conv, x: dict, edges: dict) -> dict:
    """HGT from its formula, destination by destination and edge by edge, with each
    (head, relation) map and prior read from the parameters as PyG's layout holds them."""
    H, C = conv.heads, conv.out_channels
    D = C // H
    kqv = {t: F.linear(x[t], conv.kqv_lin.lins[t].weight, conv.kqv_lin.lins[t].bias)
           for t in x}
    out = {}
    for t in [t for t in x if any(r[2] == t for r in HETERO_RELATIONS)]:
        rows = []
        for i in range(x[t].size(0)):
            heads = []
            for h in range(H):
                q = kqv[t][i, C + h * D:C + (h + 1) * D]
                scores, values = [], []
                for r, index in edges.items():
                    if r[2] != t:
                        continue
                    slot = h * len(HETERO_RELATIONS) + HETERO_RELATIONS.index(r)
                    w_k, w_v = conv.k_rel.weight[slot], conv.v_rel.weight[slot]
                    prior = conv.p_rel["__".join(r)][0, h]
                    for j in index[0][index[1] == i].tolist():
                        k = kqv[r[0]][j, h * D:(h + 1) * D] @ w_k
                        v = kqv[r[0]][j, 2 * C + h * D:2 * C + (h + 1) * D] @ w_v
                        scores.append(q @ k * prior / math.sqrt(D))
                        values.append(v)
                if scores:
                    weights = torch.stack(scores).softmax(0)
                    heads.append((weights[:, None] * torch.stack(values)).sum(0))
                else:
                    heads.append(x[t].new_zeros(D))
            rows.append(torch.cat(heads))
        a = conv.out_lin.lins[t](F.gelu(torch.stack(rows)))
        if a.size(1) == x[t].size(1):
            gate = conv.skip[t].sigmoid()
            a = gate * a + (1 - gate) * x[t]
        out[t] = a
    return out


@pytest.mark.parametrize("heads", [1, 2])
def test_the_formula_node_by_node_with_the_kernels_and_without(heads):
    x, edges = hetero_inputs(seed=1, widths=dict.fromkeys(HETERO_COUNTS, 6))
    conv = gl.HGTConv(6, 6, HETERO_METADATA, heads=heads).double()
    with torch.no_grad():  # priors and gates away from their initial 1
        for p in (*conv.p_rel.values(), *conv.skip.values()):
            p.uniform_(-2, 2)
    want = _oracle(conv, x, edges)
    for context in (torch.enable_grad, reference_ops):
        with context():
            got = conv(x, edges)
        assert list(got) == list(want)
        for t in want:
            torch.testing.assert_close(got[t], want[t])


def test_special_values_give_pygs_numbers():
    x, edges = hetero_inputs(seed=2)
    x["author"][1, 0] = float("nan")
    x["paper"][2, :] = float("inf")
    x["orphan"][0, 3] = -float("inf")
    ours, theirs = seeded_twins("HGTConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    want = theirs(x, edges)
    for context in (torch.enable_grad, reference_ops):
        with context():
            got = ours(x, edges)
        for t in want:
            torch.testing.assert_close(got[t], want[t], equal_nan=True)


def test_missing_relations_empty_types_and_no_edges():
    """A relation left out, one with no edges, a node type with no nodes: PyG's outputs;
    no relations at all: every destination type gets no messages."""
    x, edges = hetero_inputs(seed=3)
    ours, theirs = seeded_twins("HGTConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    cases = [{r: e for r, e in edges.items() if r[1] != "in"},
             {**edges, HETERO_RELATIONS[2]: torch.empty(2, 0, dtype=torch.long)}]
    for case in cases:
        assert_twins_agree(ours, theirs, list(x.values()), hetero_call(case))
    no_venues = {**x, "venue": x["venue"][:0]}
    without = {r: e for r, e in edges.items() if r[2] != "venue"}
    got, want = ours(no_venues, without), theirs(no_venues, without)
    assert got["venue"].shape == (0, 6)
    for t in want:
        torch.testing.assert_close(got[t], want[t])
    got = ours(x, {})
    for t, a in got.items():  # GELU(0) = 0: the output map's bias, then the skip gate
        bias = ours.out_lin.lins[t].bias.expand(HETERO_COUNTS[t], -1)
        gate = ours.skip[t].sigmoid()
        want = gate * bias + (1 - gate) * x[t] if HETERO_WIDTHS[t] == 6 else bias
        torch.testing.assert_close(a, want)


def test_adjacencies_graphs_and_a_hetero_graph_give_the_edge_index_outputs():
    x, edges = hetero_inputs(seed=4)
    edges = {r: e.unique(dim=1) for r, e in edges.items()}  # (an adjacency merges repeats)
    conv = gl.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2).double()
    want = conv(x, edges)
    sizes = {r: (HETERO_COUNTS[r[0]], HETERO_COUNTS[r[2]]) for r in HETERO_RELATIONS}
    forms = [
        {r: to_torch_coo_tensor(e.flip(0), size=(sizes[r][1], sizes[r][0]))
         for r, e in edges.items()},
        {r: to_torch_csr_tensor(e.flip(0), size=(sizes[r][1], sizes[r][0]))
         for r, e in edges.items()},
        {r: Graph.bipartite(e, sizes[r]) for r, e in edges.items()},
        HeteroGraph(HETERO_COUNTS, edges),
    ]
    for form in forms:
        got = conv(x, form)
        for t in want:
            torch.testing.assert_close(got[t], want[t])


def test_edges_changed_in_place_between_calls_are_read_anew():
    x, edges = hetero_inputs(seed=5)
    ours, theirs = seeded_twins("HGTConv", HETERO_WIDTHS, 6, HETERO_METADATA)
    ours(x, edges)
    edges[HETERO_RELATIONS[0]][0, :5] = torch.tensor([6, 5, 4, 3, 2])
    edges[HETERO_RELATIONS[3]][1].fill_(1)
    got, want = ours(x, edges), theirs(x, edges)
    for t in want:
        torch.testing.assert_close(got[t], want[t])


def test_state_dicts_load_both_ways_with_dotted_and_reserved_relation_names():
    metadata = (["a", "b"], [("a", "to.v2", "b"), ("b", "keys", "a"), ("a", "update", "a")])
    gen = torch.Generator().manual_seed(6)
    x = {"a": torch.randn(5, 3, generator=gen), "b": torch.randn(4, 3, generator=gen)}
    edges = {metadata[1][0]: torch.tensor([[0, 4, 2], [3, 0, 0]]),
             metadata[1][1]: torch.tensor([[1, 2], [4, 4]]),
             metadata[1][2]: torch.tensor([[0, 1, 2], [1, 1, 1]])}
    torch.manual_seed(9)
    theirs = pyg.HGTConv(3, 4, metadata, heads=2)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = gl.HGTConv(3, 4, metadata, heads=2)
    ours.load_state_dict(theirs.state_dict())
    want = theirs(x, edges)
    for t, a in ours(x, edges).items():
        torch.testing.assert_close(a, want[t])
    back = pyg.HGTConv(3, 4, metadata, heads=2)
    back.load_state_dict(ours.state_dict())
    for t, a in back(x, edges).items():
        torch.testing.assert_close(a, want[t])


class _PygHGT(torch.nn.Module):
    """PyG's HGT example model (examples/hetero/hgt_dblp.py): a lazy Linear per node
    type, HGTConvs, and a Linear on one type's outputs."""

    def __init__(self, hidden, out, heads, layers):
        super().__init__()
        self.lin_dict = torch.nn.ModuleDict({t: pyg.Linear(-1, hidden) for t in HETERO_COUNTS})
        self.convs = torch.nn.ModuleList([pyg.HGTConv(hidden, hidden, HETERO_METADATA, heads)
                                          for _ in range(layers)])
        self.lin = pyg.Linear(hidden, out)

    def forward(self, x_dict, edge_index_dict):
        x_dict = {t: self.lin_dict[t](x).relu_() for t, x in x_dict.items()}
        for conv in self.convs:
            x_dict = conv(x_dict, edge_index_dict)
        return self.lin(x_dict["author"])


def test_from_pyg_converts_pygs_hgt_model_and_it_trains_as_pygs():
    x, edges = hetero_inputs(seed=7, dtype=torch.float32)
    # (the first layer gives "orphan" no output, so the second has no features to send)
    edges = {r: e for r, e in edges.items() if r[0] != "orphan"}
    torch.manual_seed(10)
    model = _PygHGT(8, 3, 2, 2)
    model(x, edges)  # the lazy Linears take their widths
    converted = from_pyg(model, (x, edges), strict=True)
    assert converted.pyg_conversion["converted"] == ["convs.0", "convs.1"]
    assert all(type(c) is gl.HGTConv for c in converted.convs)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0])
    for net in (model, converted):
        optimiser = torch.optim.SGD(net.parameters(), lr=0.5)
        for _ in range(3):
            optimiser.zero_grad()
            F.cross_entropy(net(x, edges), labels).backward()
            optimiser.step()
    for (key, a), (other, b) in zip(model.state_dict().items(),
                                    converted.state_dict().items(), strict=True):
        assert key == other
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_from_pyg_checks_a_conv_on_a_probe_of_its_own_and_refuses_a_lazy_one():
    conv = from_pyg(pyg.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=3))
    assert type(conv) is gl.HGTConv and conv.pyg_conversion["checked"]
    lazy = pyg.HGTConv(-1, 6, HETERO_METADATA)
    with pytest.warns(UserWarning, match="lazy HGTConv not called yet"):
        kept = from_pyg(lazy)
    assert type(kept) is pyg.HGTConv
    hooked = pyg.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA)  # graphloc's reads kqv_lin as weights
    hooked.kqv_lin.lins["author"].register_forward_hook(lambda module, args, out: 2 * out)
    with pytest.warns(UserWarning, match="hooks on its submodule 'kqv_lin.lins.author'"):
        kept = from_pyg(hooked)
    assert type(kept) is pyg.HGTConv


def test_bad_arguments_are_named():
    x, edges = hetero_inputs(seed=8)
    conv = gl.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA).double()
    bad_index = {**edges, HETERO_RELATIONS[3]: torch.tensor([[0, 1], [0, 3]])}
    with pytest.raises(ValueError, match=r"relation \('paper', 'in', 'venue'\).*holds 3"):
        conv(x, bad_index)
    with pytest.raises(ValueError, match=r"relation \('paper', 'in', 'venue'\).*holds -1"):
        conv(x, {HETERO_RELATIONS[3]: torch.tensor([[0], [-1]])})
    with pytest.raises(ValueError, match=r"\('paper', 'sues', 'author'\).*not in its metadata"):
        conv(x, {("paper", "sues", "author"): torch.tensor([[0], [0]])})
    with pytest.raises(ValueError, match="node type 'venue', which x_dict has no features"):
        conv({t: v for t, v in x.items() if t != "venue"}, edges)
    with pytest.raises(ValueError, match=r"x_dict\['author'\] of shape \[N, 4\]"):
        conv({**x, "author": x["author"][:, :3]}, edges)
    with pytest.raises(TypeError, match="floating-point node features x_dict\\['paper'\\]"):
        conv({**x, "paper": x["paper"].long()}, edges)
    with pytest.raises(ValueError, match=r"adj_t has shape \[3, 10\], not \[N_dst, N_src\] = "
                                         r"\[3, 11\]"):
        conv(x, {HETERO_RELATIONS[3]: torch.zeros(3, 10).to_sparse()})
    with pytest.raises(TypeError, match="edge_index_dict, a dict"):
        conv(x, list(edges.values()))
    with pytest.raises(TypeError, match="x_dict, a dict"):
        conv(list(x.values()), edges)
    with pytest.raises(ValueError, match=r"out_channels \(6\) must be divisible by heads \(4\)"):
        gl.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=4)
    with pytest.raises(ValueError, match="heads must be an integer >= 1, got 0"):
        gl.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=0)
    with pytest.raises(ValueError, match=r"in_channels has no width for the node types "
                                         r"\['orphan'\]"):
        gl.HGTConv({t: w for t, w in HETERO_WIDTHS.items() if t != "orphan"}, 6, HETERO_METADATA)
    with pytest.raises(ValueError, match="relation .*'ghost'.* is not a"):
        gl.HGTConv(4, 6, (["a"], [("a", "to", "ghost")]))
    with pytest.raises(ValueError, match="flow='target_to_source' is not defined"):
        conv.flow = "target_to_source"
        conv(x, edges)


def test_an_infinite_output_gradient_gives_pygs_finite_gradients():
    """One infinite entry of the output's gradient: every gradient entry finite in PyG's is
    finite and equal in graphloc's, and the other way round (heads stay apart)."""
    x, edges = hetero_inputs(seed=9)
    ours, theirs = seeded_twins("HGTConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    grads = []
    for conv in (ours, theirs):
        leaves = {t: v.clone().requires_grad_() for t, v in x.items()}
        out = conv(leaves, edges)
        upstream = {t: torch.ones_like(o) for t, o in out.items()}
        upstream["paper"][3, 0] = float("inf")
        loss = sum((out[t] * upstream[t]).sum() for t in out)
        grads.append(torch.autograd.grad(loss, [*leaves.values(), *conv.parameters()],
                                         allow_unused=True))
    for got, want in zip(*grads, strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            finite = torch.isfinite(want)
            assert torch.equal(torch.isfinite(got), finite)
            torch.testing.assert_close(got[finite], want[finite])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_and_half_precision_stay_near_float32(dtype):
    """Under autocast, and cast with ``.half()``: outputs and input gradients within a few
    per cent of the float32 run's largest value."""
    x, edges = hetero_inputs(seed=10, dtype=torch.float32)
    torch.manual_seed(11)
    conv = gl.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)

    def run(module, features, autocast=False):
        leaves = {t: v.clone().requires_grad_() for t, v in features.items()}
        with torch.autocast("cpu", dtype=dtype, enabled=autocast):
            out = module(leaves, edges)
        stacked = torch.cat([o.float() for o in out.values()])
        return stacked, torch.autograd.grad(stacked.sum(), list(leaves.values()))

    full, full_grads = run(conv, x)
    low_runs = [run(conv, x, autocast=True)]
    if dtype == torch.float16:
        low_runs.append(run(copy.deepcopy(conv).half(), {t: v.half() for t, v in x.items()}))
    for low, low_grads in low_runs:
        for got, want in ((low, full), *zip(low_grads, full_grads, strict=True)):
            assert torch.isfinite(got).all()
            assert (got.float() - want).abs().max() <= 0.06 * want.abs().max()


def test_unread_types_and_non_finite_features_give_pygs_gradients():
    """A type no relation of the call reads gets zero gradients, not None (as PyG's, which
    maps every type: weight decay and momentum then treat it alike); an infinite feature
    reaches the gradients as in PyG's (the relations' priors stay finite: folded into the
    key maps, a key no edge reads made them NaN)."""
    x, edges = hetero_inputs(seed=12)
    x["orphan"][1, 2] = float("inf")  # "orphan" sends only through "likes", left out below
    x["author"][0, 1] = float("nan")  # and author 0 sends nothing
    unread = {r: e[:, e[0] != 0] if r[1] == "writes" else e for r, e in edges.items()
              if r[1] != "likes"}
    ours, theirs = seeded_twins("HGTConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    grads = []
    for conv in (ours, theirs):
        leaves = {t: v.clone().requires_grad_() for t, v in x.items()}
        out = conv(leaves, unread)
        loss = sum(o.nan_to_num(0.0, 0.0, 0.0).sum() for o in out.values())
        grads.append(torch.autograd.grad(loss, [*leaves.values(), *conv.parameters()],
                                         allow_unused=True))
    for got, want in zip(*grads, strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(got, want, equal_nan=True)
