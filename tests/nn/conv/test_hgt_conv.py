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
    assert_hetero_outputs_agree,
    assert_trains_as_pygs,
    assert_twins_agree,
    hetero_call,
    hetero_inputs,
    seeded_hetero_twins,
    seeded_twins,
)

import graphloc.nn as gl
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
    ours, theirs = seeded_hetero_twins("HGTConv", kwargs, x)
    out, want = ours(x, edges), theirs(x, edges)
    assert list(out) == list(want) == ["paper", "author", "venue"]
    assert_twins_agree(ours, theirs, list(x.values()), hetero_call(edges))


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


def test_no_relations_give_every_destination_type_no_messages():
    """An empty edge_index_dict (PyG's fails on an empty concatenation): GELU(0) = 0, so
    each destination type's output map's bias, then the skip gate."""
    x, _ = hetero_inputs(seed=3)
    conv = gl.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA, heads=2).double()
    got = conv(x, {})
    assert list(got) == ["paper", "author", "venue"]
    for t, a in got.items():
        bias = conv.out_lin.lins[t].bias.expand(HETERO_COUNTS[t], -1)
        gate = conv.skip[t].sigmoid()
        want = gate * bias + (1 - gate) * x[t] if HETERO_WIDTHS[t] == 6 else bias
        torch.testing.assert_close(a, want)


def test_a_relation_named_with_a_dot_loads_both_ways():
    """PyG's ParameterDict stores "." as "#" in the priors' keys; graphloc's the same."""
    metadata = (["a", "b"], [("a", "to.v2", "b"), ("b", "back", "a")])
    gen = torch.Generator().manual_seed(6)
    x = {"a": torch.randn(5, 3, generator=gen), "b": torch.randn(4, 3, generator=gen)}
    edges = {metadata[1][0]: torch.tensor([[0, 4, 2], [3, 0, 0]]),
             metadata[1][1]: torch.tensor([[1, 2], [4, 4]])}
    theirs = pyg.HGTConv(3, 4, metadata, heads=2)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = gl.HGTConv(3, 4, metadata, heads=2)
    ours.load_state_dict(theirs.state_dict())
    assert "p_rel.a__to#v2__b" in ours.state_dict()
    assert_hetero_outputs_agree(ours(x, edges), theirs(x, edges))


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
    assert_trains_as_pygs(model, converted, lambda net: net(x, edges), labels)


def test_from_pyg_keeps_a_conv_with_hooks_on_its_key_query_value_maps():
    hooked = pyg.HGTConv(HETERO_WIDTHS, 6, HETERO_METADATA)  # (graphloc's has its own maps)
    hooked.kqv_lin.lins["author"].register_forward_hook(lambda module, args, out: 2 * out)
    with pytest.warns(UserWarning, match="hooks on its submodule 'kqv_lin.lins.author'"):
        kept = from_pyg(hooked)
    assert type(kept) is pyg.HGTConv


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
