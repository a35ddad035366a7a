import copy

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
    "one head, widths per type": {"in_channels": HETERO_WIDTHS, "out_channels": 6},
    "two heads, one width, slope 0.1": {"in_channels": 6, "out_channels": 6, "heads": 2,
                                        "negative_slope": 0.1},
    "three heads, lazy widths": {"in_channels": -1, "out_channels": 9, "heads": 3},
}


def _twins(kwargs, x):
    """graphloc's and PyG's HANConv from one seed in float64 (a lazy pair called once, from
    one seed), their parameters checked equal."""
    if kwargs["in_channels"] != -1:
        return seeded_twins("HANConv", metadata=HETERO_METADATA, **kwargs)
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(7)
        conv = module.HANConv(metadata=HETERO_METADATA, **kwargs)
        conv({t: v.float() for t, v in x.items()}, hetero_inputs()[1])
        twins.append(conv.double())
    for (key, a), (other, b) in zip(twins[0].state_dict().items(),
                                    twins[1].state_dict().items(), strict=True):
        assert key == other and torch.equal(a, b)
    return twins


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient_and_the_semantic_weights(option):
    kwargs = OPTIONS[option]
    widths = HETERO_WIDTHS if isinstance(kwargs["in_channels"], dict) else \
        dict.fromkeys(HETERO_COUNTS, 6 if kwargs["in_channels"] == 6 else 5)
    x, edges = hetero_inputs(widths=widths)
    ours, theirs = _twins(kwargs, x)
    (out, beta), (want, want_beta) = ours(x, edges, True), theirs(x, edges, True)
    assert list(out) == list(want) == list(HETERO_COUNTS)
    assert out["orphan"] is None and want["orphan"] is None
    for t in want_beta:
        torch.testing.assert_close(beta[t], want_beta[t])
    assert_twins_agree(ours, theirs, list(x.values()), hetero_call(edges))


def _oracle(conv, x: dict, edges: dict) -> dict:
    """HAN from its formula: per relation, node by node, GAT's softmax over the in-neighbours
    of each head, the ReLU; per type, the semantic weights of the relations into it."""
    H, C = conv.heads, conv.out_channels
    D = C // H
    h = {t: conv.proj[t](v) for t, v in x.items()}
    per_type = {t: [] for t in x}
    for r, index in edges.items():
        key = "__".join(r)
        z = torch.zeros(x[r[2]].size(0), C, dtype=x[r[2]].dtype)
        for i in range(z.size(0)):
            sources = index[0][index[1] == i].tolist()
            for head in range(H):
                cols = slice(head * D, (head + 1) * D)
                if not sources:
                    continue
                scores = torch.stack([
                    F.leaky_relu(h[r[0]][j, cols] @ conv.lin_src[key][0, head]
                                 + h[r[2]][i, cols] @ conv.lin_dst[key][0, head],
                                 conv.negative_slope) for j in sources])
                weights = scores.softmax(0)
                z[i, cols] = sum(w * h[r[0]][j, cols] for w, j in zip(weights, sources,
                                                                      strict=True))
        per_type[r[2]].append(z.relu())
    out = {}
    for t, zs in per_type.items():
        if not zs:
            out[t] = None
            continue
        scores = torch.stack([(conv.q[0] * torch.tanh(conv.k_lin(z)).mean(0)).sum()
                              for z in zs])
        beta = scores.softmax(0)
        out[t] = sum(b * z for b, z in zip(beta, zs, strict=True))
    return out


@pytest.mark.parametrize("heads", [1, 2])
def test_the_formula_node_by_node_with_the_kernels_and_without(heads):
    x, edges = hetero_inputs(seed=1)
    conv = gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=heads,
                      negative_slope=0.3).double()
    want = _oracle(conv, x, edges)
    for context in (torch.enable_grad, reference_ops):
        with context():
            got = conv(x, edges)
        assert list(got) == list(want)
        for t in want:
            if want[t] is None:
                assert got[t] is None
            else:
                torch.testing.assert_close(got[t], want[t])


def test_special_values_give_pygs_numbers():
    x, edges = hetero_inputs(seed=2)
    x["author"][1, 0] = float("nan")
    x["paper"][2, :] = float("inf")
    x["venue"][0, 3] = -float("inf")
    ours, theirs = seeded_twins("HANConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    want = theirs(x, edges)
    for context in (torch.enable_grad, reference_ops):
        with context():
            got = ours(x, edges)
        for t in want:
            if want[t] is not None:
                torch.testing.assert_close(got[t], want[t], equal_nan=True)


def test_missing_relations_empty_types_and_no_edges_give_pygs_outputs():
    x, edges = hetero_inputs(seed=3)
    ours, theirs = seeded_twins("HANConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    cases = [{r: e for r, e in edges.items() if r[1] != "in"},
             {**edges, HETERO_RELATIONS[2]: torch.empty(2, 0, dtype=torch.long)},
             {}]
    # no venues, and a relation into them without edges
    no_venues = ({**x, "venue": x["venue"][:0]},
                 {**edges, HETERO_RELATIONS[3]: torch.empty(2, 0, dtype=torch.long)})
    for features, case in [(x, c) for c in cases] + [no_venues]:
        got, want = ours(features, case), theirs(features, case)
        assert list(got) == list(want)
        for t in want:
            if want[t] is None:
                assert got[t] is None
            else:
                torch.testing.assert_close(got[t], want[t])
    assert ours(*no_venues)["venue"].shape == (0, 6)


def test_adjacencies_graphs_and_a_hetero_graph_give_the_edge_index_outputs():
    x, edges = hetero_inputs(seed=4)
    edges = {r: e.unique(dim=1) for r, e in edges.items()}  # (an adjacency merges repeats)
    conv = gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2).double()
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
            if want[t] is not None:
                torch.testing.assert_close(got[t], want[t])


def test_attention_dropout_in_training():
    """A vanishing rate keeps every weight (the materialised path gives the fused path's
    outputs); a rate of 1 drops every weight, so every relation sends 0; a rate between
    draws other masks at each call; in eval mode nothing is dropped."""
    x, edges = hetero_inputs(seed=5)
    torch.manual_seed(12)
    conv = gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2).double()
    want = conv.eval()(x, edges)
    conv.train()
    for rate, check in ((1e-12, lambda t, got: torch.testing.assert_close(got, want[t])),
                        (1.0, lambda t, got: torch.testing.assert_close(
                            got, torch.zeros_like(got)))):
        conv.dropout = rate
        for t, got in conv(x, edges).items():
            if got is not None:
                check(t, got)
    conv.dropout = 0.5
    first, second = conv(x, edges)["paper"], conv(x, edges)["paper"]
    assert not torch.equal(first, second)
    conv.eval()
    torch.testing.assert_close(conv(x, edges)["paper"], want["paper"])


def test_state_dicts_load_both_ways():
    metadata = (["a", "b"], [("a", "to", "b"), ("b", "keys", "a"), ("a", "update", "a")])
    gen = torch.Generator().manual_seed(6)
    x = {"a": torch.randn(5, 3, generator=gen), "b": torch.randn(4, 3, generator=gen)}
    edges = {metadata[1][0]: torch.tensor([[0, 4, 2], [3, 0, 0]]),
             metadata[1][1]: torch.tensor([[1, 2], [4, 4]]),
             metadata[1][2]: torch.tensor([[0, 1, 2], [1, 1, 1]])}
    theirs = pyg.HANConv(3, 4, metadata, heads=2)
    ours = gl.HANConv(3, 4, metadata, heads=2)
    ours.load_state_dict(theirs.state_dict())
    want = theirs(x, edges)
    for t, a in ours(x, edges).items():
        torch.testing.assert_close(a, want[t])
    back = pyg.HANConv(3, 4, metadata, heads=2)
    back.load_state_dict(ours.state_dict())
    for t, a in back(x, edges).items():
        torch.testing.assert_close(a, want[t])
    # a relation named with a "." (torch's ParameterDict, which PyG's HANConv uses, refuses
    # it): stored as PyG's own ParameterDict stores it (HGTConv's p_rel)
    dotted = gl.HANConv(3, 4, (["a"], [("a", "to.v2", "a")]))
    assert "lin_src.a__to#v2__a" in dotted.state_dict()
    assert dotted({"a": x["a"]}, {("a", "to.v2", "a"): edges[metadata[1][2]]})["a"].shape \
        == (5, 4)


class _PygHAN(torch.nn.Module):
    """PyG's HAN example model (examples/hetero/han_imdb.py): a HANConv, then a Linear on
    one type's outputs."""

    def __init__(self, hidden, out, heads):
        super().__init__()
        self.han_conv = pyg.HANConv(-1, hidden, HETERO_METADATA, heads=heads)
        self.lin = torch.nn.Linear(hidden, out)

    def forward(self, x_dict, edge_index_dict):
        return self.lin(self.han_conv(x_dict, edge_index_dict)["paper"])


def test_from_pyg_converts_pygs_han_model_and_it_trains_as_pygs():
    x, edges = hetero_inputs(seed=7, dtype=torch.float32)
    torch.manual_seed(10)
    model = _PygHAN(8, 3, 2)
    model(x, edges)  # the lazy projections take their widths
    converted = from_pyg(model, (x, edges), strict=True)
    assert converted.pyg_conversion["converted"] == ["han_conv"]
    assert type(converted.han_conv) is gl.HANConv
    labels = torch.arange(HETERO_COUNTS["paper"]) % 3
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
    conv = from_pyg(pyg.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=3, dropout=0.2,
                                negative_slope=0.1))
    assert type(conv) is gl.HANConv and conv.pyg_conversion["checked"]
    assert (conv.dropout, conv.negative_slope) == (0.2, 0.1)
    with pytest.warns(UserWarning, match="lazy HANConv not called yet"):
        kept = from_pyg(pyg.HANConv(-1, 6, HETERO_METADATA))
    assert type(kept) is pyg.HANConv


def test_an_infinite_output_gradient_gives_pygs_finite_gradients():
    x, edges = hetero_inputs(seed=9)
    ours, theirs = seeded_twins("HANConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    grads = []
    for conv in (ours, theirs):
        leaves = {t: v.clone().requires_grad_() for t, v in x.items()}
        out = {t: o for t, o in conv(leaves, edges).items() if o is not None}
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
    x, edges = hetero_inputs(seed=10, dtype=torch.float32)
    torch.manual_seed(11)
    conv = gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)

    def run(module, features, autocast=False):
        leaves = {t: v.clone().requires_grad_() for t, v in features.items()}
        with torch.autocast("cpu", dtype=dtype, enabled=autocast):
            out = module(leaves, edges)
        stacked = torch.cat([o.float() for o in out.values() if o is not None])
        return stacked, torch.autograd.grad(stacked.sum(), list(leaves.values()),
                                            allow_unused=True)

    full, full_grads = run(conv, x)
    low_runs = [run(conv, x, autocast=True)]
    if dtype == torch.float16:
        low_runs.append(run(copy.deepcopy(conv).half(), {t: v.half() for t, v in x.items()}))
    for low, low_grads in low_runs:
        pairs = [(low, full)] + [(g, w) for g, w in zip(low_grads, full_grads, strict=True)
                                 if w is not None]
        for got, want in pairs:
            assert torch.isfinite(got).all()
            assert (got.float() - want).abs().max() <= 0.06 * want.abs().max()


def test_bad_arguments_are_named():
    x, edges = hetero_inputs(seed=8)
    conv = gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA).double()
    with pytest.raises(ValueError, match=r"relation \('paper', 'in', 'venue'\).*holds 3"):
        conv(x, {**edges, HETERO_RELATIONS[3]: torch.tensor([[0, 1], [0, 3]])})
    with pytest.raises(ValueError, match=r"\('paper', 'sues', 'author'\).*not in its metadata"):
        conv(x, {("paper", "sues", "author"): torch.tensor([[0], [0]])})
    with pytest.raises(ValueError, match="node type 'venue', which x_dict has no features"):
        conv({t: v for t, v in x.items() if t != "venue"}, edges)
    with pytest.raises(ValueError, match=r"node types \['ghost'\], which have no projection"):
        conv({**x, "ghost": x["venue"]}, edges)
    with pytest.raises(ValueError, match=r"x_dict\['author'\] of shape \[N, 4\]"):
        conv({**x, "author": x["author"][:, :3]}, edges)
    with pytest.raises(TypeError, match="return_semantic_attention_weights"):
        conv(x, edges, "yes")
    with pytest.raises(ValueError, match=r"out_channels \(6\) must be divisible by heads \(4\)"):
        gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=4)
    with pytest.raises(ValueError, match="dropout"):
        gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, dropout=1.5)
    with pytest.raises(ValueError, match="flow='target_to_source' is not defined"):
        conv.flow = "target_to_source"
        conv(x, edges)


def test_unread_types_and_types_without_nodes_give_pygs_gradients():
    """A type without nodes still reads every relation into it (PyG's stacks them): its
    sources get zero gradients, not None, as in PyG's (weight decay and momentum then treat
    them alike); so does a type whose relations carry no edges."""
    x, edges = hetero_inputs(seed=13)
    # no papers: the three relations into them ("likes" the only one "orphan" sends
    # through), and the two out of them, carry no edges
    no_papers = {**x, "paper": x["paper"][:0]}
    empty = {r: e[:, :0] if "paper" in (r[0], r[2]) else e for r, e in edges.items()}
    ours, theirs = seeded_twins("HANConv", HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)
    grads = []
    for conv in (ours, theirs):
        leaves = {t: v.clone().requires_grad_() for t, v in no_papers.items()}
        out = conv(leaves, empty)
        loss = sum(o.sum() for o in out.values() if o is not None)
        grads.append(torch.autograd.grad(loss, [*leaves.values(), *conv.parameters()],
                                         allow_unused=True))
    for got, want in zip(*grads, strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(got, want)
