import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import assert_twins_agree, seeded_twins

import graphloc.nn as gl
from graphloc.nn import from_pyg


def _hypergraph(seed=0, n=12, m=5, nnz=30, width=6):
    """``(x, hyperedge_index, hyperedge_weight, hyperedge_attr)`` in float64: repeated
    incidences, a node in no hyperedge (n - 1) and an empty hyperedge (m - 1)."""
    gen = torch.Generator().manual_seed(seed)
    index = torch.stack([torch.randint(0, n - 1, (nnz,), generator=gen),
                         torch.randint(0, m - 1, (nnz,), generator=gen)])
    x = torch.randn(n, width, dtype=torch.float64, generator=gen)
    weight = torch.rand(m, dtype=torch.float64, generator=gen) + 0.5
    return x, index, weight, torch.randn(m, width, dtype=torch.float64, generator=gen)


ATTENTION_OPTIONS = [{}, {"use_attention": True, "heads": 2},
                     {"use_attention": True, "heads": 3, "concat": False,
                      "attention_mode": "edge"}]


@pytest.mark.parametrize("options", ATTENTION_OPTIONS, ids=["plain", "node", "edge-mean"])
def test_matches_pyg_with_gradients(options):
    x, index, weight, attr = _hypergraph()
    ours, theirs = seeded_twins("HypergraphConv", 6, 4, **options)
    assert_twins_agree(ours, theirs, [x, weight, attr],
                       lambda conv, x, w, a: conv(x, index, w, a, num_edges=5))
    assert_twins_agree(ours, theirs, [x, attr], lambda conv, x, a: conv(x, index, None, a))


def _dense_hypergraph(conv, x, index, weight, attr, num_edges, in_messages=False):
    """The layer as matrices: H the incidence counts, B the hyperedge sizes, D the nodes'
    W-weighted degrees, per head A the attention weights on H's entries (softmax over
    each hyperedge's or node's incidences, one entry per incidence)."""
    n, heads, width = x.size(0), conv.heads, conv.out_channels
    h = (x @ conv.lin.weight.t()).view(n, heads, width)
    incidence = torch.zeros(n, num_edges, dtype=x.dtype).index_put(
        (index[0], index[1]), torch.ones(index.size(1), dtype=x.dtype), accumulate=True)
    sizes, degrees = incidence.sum(0), incidence @ weight
    inverse = lambda d: torch.where(d != 0, 1 / d, torch.zeros_like(d))  # noqa: E731
    outs = []
    for k in range(heads):
        a = torch.ones(index.size(1), dtype=x.dtype)
        if conv.use_attention:
            e = (attr @ conv.lin.weight.t()).view(-1, heads, width)[:, k]
            score = torch.nn.functional.leaky_relu(
                h[index[0], k] @ conv.att[0, k, :width] + e[index[1]] @ conv.att[0, k, width:],
                conv.negative_slope)
            group = index[1] if conv.attention_mode == "node" else index[0]
            a = torch.stack([torch.exp(score[i]) / torch.exp(score[group == group[i]]).sum()
                             for i in range(index.size(1))])
        weighted = torch.zeros(n, num_edges, dtype=x.dtype).index_put(
            (index[0], index[1]), a, accumulate=True)
        w = weight if in_messages else torch.ones_like(weight)
        step = weighted @ torch.diag(w * inverse(sizes)) @ weighted.t() @ h[:, k]
        outs.append(inverse(degrees).unsqueeze(1) * step)
    out = torch.cat(outs, 1) if conv.concat else torch.stack(outs).mean(0)
    return out + conv.bias


@pytest.mark.parametrize("options", ATTENTION_OPTIONS + [{"hyperedge_weight_in_messages": True}],
                         ids=["plain", "node", "edge-mean", "paper-weights"])
def test_the_formula_as_matrices(options):
    x, index, weight, attr = _hypergraph(seed=1)
    torch.manual_seed(2)
    conv = gl.HypergraphConv(6, 3, **options).double()
    torch.nn.init.uniform_(conv.bias)  # (a zero bias would not be seen)
    want = _dense_hypergraph(conv, x, index, weight, attr, 5,
                             options.get("hyperedge_weight_in_messages", False))
    torch.testing.assert_close(conv(x, index, weight, attr, 5), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, index, weight, attr, 5), want)


def test_pygs_hyperedge_weights_enter_only_the_degrees():
    """PyG's code (the default) weighs D by W but not the messages; the paper's formula
    weighs both, which ``hyperedge_weight_in_messages`` gives; without weights they agree."""
    x, index, weight, attr = _hypergraph(seed=3)
    torch.manual_seed(4)
    pygs = gl.HypergraphConv(6, 3).double()
    paper = gl.HypergraphConv(6, 3, hyperedge_weight_in_messages=True).double()
    paper.load_state_dict(pygs.state_dict())
    torch.testing.assert_close(paper(x, index), pygs(x, index))
    assert not torch.allclose(paper(x, index, weight), pygs(x, index, weight))


def test_special_values_and_zero_degrees():
    x, index, weight, attr = _hypergraph(seed=5)
    x[3, 1], x[5, 0] = float("nan"), float("inf")
    for options in ATTENTION_OPTIONS:
        ours, theirs = seeded_twins("HypergraphConv", 6, 4, **options)
        torch.testing.assert_close(ours(x, index, weight, attr), theirs(x, index, weight, attr),
                                   equal_nan=True)
    x = _hypergraph(seed=5)[0]
    lone = x.clone()
    lone[11, 2] = float("nan")  # node 11 is in no hyperedge: att's gradient stays finite
    ours, theirs = seeded_twins("HypergraphConv", 6, 4, use_attention=True, heads=2)
    grads = []
    for conv in (ours, theirs):
        leaf = lone.clone().requires_grad_()
        out = conv(leaf, index, weight, attr)[:11]
        grads.append(torch.autograd.grad(out.sum(), [leaf, *conv.parameters()]))
    for a, b in zip(*grads, strict=True):  # (lin's is NaN in both: 0 * NaN)
        torch.testing.assert_close(a, b, equal_nan=True)
    assert torch.isfinite(grads[0][1]).all()  # att's
    signed = torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    cancelling = torch.tensor([[0, 0, 1], [0, 1, 2]])  # node 0's weights sum to 0
    out = gl.HypergraphConv(6, 4).double()(x[:3], cancelling, signed)
    grad, = torch.autograd.grad(out.sum(), signed)
    assert torch.isfinite(grad).all() and (out[0] == 0).all()  # (the bias is 0)
    empty = torch.empty(2, 0, dtype=torch.long)
    ours, theirs = seeded_twins("HypergraphConv", 6, 4)
    torch.testing.assert_close(ours(x, empty), theirs(x, empty))


def test_dropout_draws_pygs_mask():
    x, index, weight, attr = _hypergraph(seed=6)
    ours, theirs = seeded_twins("HypergraphConv", 6, 4, use_attention=True, heads=2,
                                dropout=0.4)
    outs = []
    for conv in (ours.train(), theirs.train()):
        torch.manual_seed(9)
        outs.append(conv(x, index, weight, attr))
    torch.testing.assert_close(*outs)


def test_from_pyg_converts_it():
    class HyperNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.HypergraphConv(6, 8, use_attention=True, heads=2)
            self.conv2 = pyg.HypergraphConv(16, 3)

        def forward(self, x, index, attr):
            h = torch.relu(self.conv1(x, index, hyperedge_attr=attr))
            return self.conv2(h, index)

    x, index, weight, attr = _hypergraph(seed=7)
    torch.manual_seed(0)
    model = HyperNet().double().eval()
    converted = from_pyg(model, example=(x, index, attr))
    assert type(converted.conv1) is gl.HypergraphConv and \
        type(converted.conv2) is gl.HypergraphConv
    torch.testing.assert_close(converted(x, index, attr), model(x, index, attr))


def test_bad_arguments_are_named():
    x, index, weight, attr = _hypergraph(seed=8)
    for kwargs, match in (({"heads": 2}, "heads=2 needs use_attention=True"),
                          ({"attention_mode": "both"}, "HypergraphConv: attention_mode"),
                          ({"dropout": 2.0}, "HypergraphConv: dropout"),
                          ({"out_channels": 0}, "HypergraphConv: out_channels")):
        with pytest.raises(ValueError, match=match):
            gl.HypergraphConv(**{"in_channels": 6, "out_channels": 3, **kwargs})
    conv = gl.HypergraphConv(6, 3, use_attention=True).double()
    with pytest.raises(ValueError, match="needs hyperedge_attr"):
        conv(x, index)
    with pytest.raises(ValueError, match=r"hyperedge_attr must have shape \[num_edges, "
                                         r"in_channels\] with num_edges = 4, got \[5, 6\]"):
        conv(x, index, None, attr, num_edges=4)
    with pytest.raises(ValueError, match=r"hyperedge_weight must have shape \[num_edges\] "
                                         r"with num_edges = 5, got \[3\]"):
        conv(x, index, weight[:3], attr)
    with pytest.raises(ValueError, match=r"HypergraphConv: hyperedge_index \(row 0 nodes < "
                                         r"12, row 1 hyperedges < num_edges = 2\)"):
        conv(x, index, None, attr[:2], num_edges=2)
    with pytest.raises(ValueError, match=r"hyperedge_index must have shape \[2, nnz\]"):
        conv(x, index[0], None, attr)
    with pytest.raises(TypeError, match="HypergraphConv expects floating-point node features"):
        conv(x.long(), index, None, attr)
    with pytest.raises(ValueError, match=r"HypergraphConv expects x of shape \[N, 6\]"):
        conv(x[:, :3], index, None, attr)
