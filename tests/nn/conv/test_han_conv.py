
import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import (
    HETERO_COUNTS,
    HETERO_METADATA,
    HETERO_WIDTHS,
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
    "one head, widths per type": {"in_channels": HETERO_WIDTHS, "out_channels": 6},
    "two heads, one width, slope 0.1": {"in_channels": 6, "out_channels": 6, "heads": 2,
                                        "negative_slope": 0.1},
    "three heads, lazy widths": {"in_channels": -1, "out_channels": 9, "heads": 3},
}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient_and_the_semantic_weights(option):
    kwargs = OPTIONS[option]
    widths = HETERO_WIDTHS if isinstance(kwargs["in_channels"], dict) else \
        dict.fromkeys(HETERO_COUNTS, 6 if kwargs["in_channels"] == 6 else 5)
    x, edges = hetero_inputs(widths=widths)
    ours, theirs = seeded_hetero_twins("HANConv", kwargs, x)
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
    assert_trains_as_pygs(model, converted, lambda net: net(x, edges), labels)


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


def test_han_specific_arguments_are_named():
    """(The errors HANConv shares with HGTConv: test_hetero_convs.py.)"""
    x, edges = hetero_inputs(seed=8)
    conv = gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA).double()
    with pytest.raises(ValueError, match=r"node types \['ghost'\], which have no projection"):
        conv({**x, "ghost": x["venue"]}, edges)
    with pytest.raises(TypeError, match="return_semantic_attention_weights"):
        conv(x, edges, "yes")
    with pytest.raises(ValueError, match="dropout"):
        gl.HANConv(HETERO_WIDTHS, 6, HETERO_METADATA, dropout=1.5)


def test_a_relation_named_with_a_dot_is_taken():
    """torch's ParameterDict, which PyG's HANConv uses, refuses the name; graphloc's stores
    it as PyG's own ParameterDict does (HGTConv's priors)."""
    dotted = gl.HANConv(3, 4, (["a"], [("a", "to.v2", "a")]))
    assert "lin_src.a__to#v2__a" in dotted.state_dict()
    out = dotted({"a": torch.randn(5, 3)}, {("a", "to.v2", "a"): torch.tensor([[0, 1], [1, 1]])})
    assert out["a"].shape == (5, 4)
