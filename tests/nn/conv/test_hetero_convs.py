"""What the heterogeneous convs (HGTConv, HANConv) share: PyG's inputs and outputs, their
graphs in every form, state dicts, from_pyg, special values and named errors (each conv's
formula, options and models in its own test file)."""

import copy

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import (
    HETERO_COUNTS,
    HETERO_METADATA,
    HETERO_RELATIONS,
    HETERO_WIDTHS,
    assert_hetero_outputs_agree,
    hetero_inputs,
    seeded_twins,
)
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.hetero import HeteroGraph
from graphloc.nn import from_pyg

NAMES = ["HGTConv", "HANConv"]


def _twins(name, heads=2):
    return seeded_twins(name, HETERO_WIDTHS, 6, HETERO_METADATA, heads=heads)


@pytest.mark.parametrize("name", NAMES)
def test_special_values_give_pygs_numbers(name):
    x, edges = hetero_inputs(seed=2)
    x["author"][1, 0] = float("nan")
    x["paper"][2, :] = float("inf")
    x["orphan"][0, 3] = -float("inf")
    ours, theirs = _twins(name)
    want = theirs(x, edges)
    for context in (torch.enable_grad, reference_ops):
        with context():
            assert_hetero_outputs_agree(ours(x, edges), want, equal_nan=True)


@pytest.mark.parametrize("name", NAMES)
def test_missing_relations_empty_types_and_relations_without_edges(name):
    """A relation left out, one without edges, a node type without nodes (and a relation
    into it without edges): PyG's outputs."""
    x, edges = hetero_inputs(seed=3)
    ours, theirs = _twins(name)
    no_venues = ({**x, "venue": x["venue"][:0]},
                 {**edges, HETERO_RELATIONS[3]: torch.empty(2, 0, dtype=torch.long)})
    cases = [(x, {r: e for r, e in edges.items() if r[1] != "in"}),
             (x, {**edges, HETERO_RELATIONS[2]: torch.empty(2, 0, dtype=torch.long)}),
             no_venues]
    for features, case in cases:
        assert_hetero_outputs_agree(ours(features, case), theirs(features, case))
    assert ours(*no_venues)["venue"].shape == (0, 6)


def _adjacency_forms(edges: dict) -> list:
    """``edges`` as torch.sparse COO and CSR adjacencies, as Graphs and as a HeteroGraph."""
    sizes = {r: (HETERO_COUNTS[r[0]], HETERO_COUNTS[r[2]]) for r in edges}
    return [{r: to_torch_coo_tensor(e.flip(0), size=sizes[r][::-1]) for r, e in edges.items()},
            {r: to_torch_csr_tensor(e.flip(0), size=sizes[r][::-1]) for r, e in edges.items()},
            {r: Graph.bipartite(e, sizes[r]) for r, e in edges.items()},
            HeteroGraph(HETERO_COUNTS, edges)]


@pytest.mark.parametrize("name", NAMES)
def test_adjacencies_graphs_and_a_hetero_graph_give_the_edge_index_outputs(name):
    x, edges = hetero_inputs(seed=4)
    edges = {r: e.unique(dim=1) for r, e in edges.items()}  # (an adjacency merges repeats)
    conv = getattr(gl, name)(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2).double()
    want = conv(x, edges)
    for form in _adjacency_forms(edges):
        assert_hetero_outputs_agree(conv(x, form), want)


@pytest.mark.parametrize("name", NAMES)
def test_edges_changed_in_place_between_calls_are_read_anew(name):
    x, edges = hetero_inputs(seed=5)
    ours, theirs = _twins(name, heads=1)
    ours(x, edges)
    edges[HETERO_RELATIONS[0]][0, :5] = torch.tensor([6, 5, 4, 3, 2])
    edges[HETERO_RELATIONS[3]][1].fill_(1)
    assert_hetero_outputs_agree(ours(x, edges), theirs(x, edges))


@pytest.mark.parametrize("name", NAMES)
def test_state_dicts_load_both_ways(name):
    """Relations named as torch's own ParameterDict's attributes included."""
    metadata = (["a", "b"], [("a", "to", "b"), ("b", "keys", "a"), ("a", "update", "a")])
    gen = torch.Generator().manual_seed(6)
    x = {"a": torch.randn(5, 3, generator=gen), "b": torch.randn(4, 3, generator=gen)}
    edges = {metadata[1][0]: torch.tensor([[0, 4, 2], [3, 0, 0]]),
             metadata[1][1]: torch.tensor([[1, 2], [4, 4]]),
             metadata[1][2]: torch.tensor([[0, 1, 2], [1, 1, 1]])}
    theirs = getattr(pyg, name)(3, 4, metadata, heads=2)
    with torch.no_grad():  # (HGT's priors and gates start at 1)
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = getattr(gl, name)(3, 4, metadata, heads=2)
    ours.load_state_dict(theirs.state_dict())
    want = theirs(x, edges)
    assert_hetero_outputs_agree(ours(x, edges), want)
    back = getattr(pyg, name)(3, 4, metadata, heads=2)
    back.load_state_dict(ours.state_dict())
    assert_hetero_outputs_agree(back(x, edges), want)


@pytest.mark.parametrize("name", NAMES)
def test_from_pyg_checks_a_conv_on_a_probe_of_its_own_and_refuses_a_lazy_one(name):
    conv = from_pyg(getattr(pyg, name)(HETERO_WIDTHS, 6, HETERO_METADATA, heads=3))
    assert type(conv) is getattr(gl, name) and conv.pyg_conversion["checked"]
    with pytest.warns(UserWarning, match=f"lazy {name} not called yet"):
        kept = from_pyg(getattr(pyg, name)(-1, 6, HETERO_METADATA))
    assert type(kept) is getattr(pyg, name)


@pytest.mark.parametrize("name", NAMES)
def test_an_infinite_output_gradient_gives_pygs_finite_gradients(name):
    """One infinite entry of the output's gradient: every gradient entry finite in PyG's is
    finite and equal in graphloc's, and the other way round (heads stay apart)."""
    x, edges = hetero_inputs(seed=9)
    ours, theirs = _twins(name)
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
@pytest.mark.parametrize("name", NAMES)
def test_autocast_and_half_precision_stay_near_float32(name, dtype):
    """Under autocast, and cast with ``.half()``: outputs and input gradients within a few
    per cent of the float32 run's largest value."""
    x, edges = hetero_inputs(seed=10, dtype=torch.float32)
    torch.manual_seed(11)
    conv = getattr(gl, name)(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2)

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


@pytest.mark.parametrize("name", NAMES)
def test_bad_arguments_are_named(name):
    x, edges = hetero_inputs(seed=8)
    cls = getattr(gl, name)
    conv = cls(HETERO_WIDTHS, 6, HETERO_METADATA).double()
    with pytest.raises(ValueError, match=r"relation \('paper', 'in', 'venue'\).*holds 3"):
        conv(x, {**edges, HETERO_RELATIONS[3]: torch.tensor([[0, 1], [0, 3]])})
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
        cls(HETERO_WIDTHS, 6, HETERO_METADATA, heads=4)
    with pytest.raises(ValueError, match="heads must be an integer >= 1, got 0"):
        cls(HETERO_WIDTHS, 6, HETERO_METADATA, heads=0)
    with pytest.raises(ValueError, match=r"in_channels has no width for the node types "
                                         r"\['orphan'\]"):
        cls({t: w for t, w in HETERO_WIDTHS.items() if t != "orphan"}, 6, HETERO_METADATA)
    with pytest.raises(ValueError, match="relation .*'ghost'.* is not a"):
        cls(4, 6, (["a"], [("a", "to", "ghost")]))
    with pytest.raises(ValueError, match="flow='target_to_source' is not defined"):
        conv.flow = "target_to_source"
        conv(x, edges)
