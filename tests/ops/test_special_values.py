"""NaN, +-inf, empty rows and hubs: the compiled kernels, their pure-torch twins and a
per-row oracle built from torch's own reductions agree on every input.

The semantics (README, "Special values"): max/min propagate NaN and point their arg at the
first NaN; a row of -inf (max) still names its first edge; a softmax row of only -inf
(fully masked) gives weights 0, as an empty row; NaN or +inf in a row make it NaN, as
torch.softmax.
"""

from __future__ import annotations

import pytest
import torch
from helpers import graphs
from hypothesis import given, settings
from hypothesis import strategies as st

import graphloc
from graphloc import ops
from graphloc.ops import reference
from graphloc.scatter import scatter_max, scatter_min, scatter_softmax

SPECIALS = torch.tensor([float("nan"), float("inf"), float("-inf")])
IMPLEMENTATIONS = ["reference"] + (["kernel"] if graphloc.HAS_EXTENSION else [])


def _raw(name):
    return reference if name == "reference" else torch.ops.graphloc


def _with_specials(shape, seed: int, share: float = 0.3, only=SPECIALS) -> torch.Tensor:
    """Random values with a share of them replaced by NaN / +inf / -inf."""
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, generator=gen, dtype=torch.float64)
    hit = torch.rand(shape, generator=gen) < share
    pick = torch.randint(0, len(only), shape, generator=gen)
    return torch.where(hit, only[pick].to(values.dtype), values)


def _rows(graph):
    indptr = graph.csr.indptr.tolist()
    return [range(indptr[r], indptr[r + 1]) for r in range(graph.num_nodes)]


def _oracle_extreme(messages: torch.Tensor, rows, reduce: str):
    """Per row: torch.amax / amin (NaN propagates), 0 for an empty row; arg: the first
    position holding the result (NaN matching NaN), E for an empty row."""
    E, K = messages.shape
    out = torch.zeros(len(rows), K, dtype=messages.dtype)
    arg = torch.full((len(rows), K), E, dtype=torch.long)
    for r, positions in enumerate(rows):
        if not positions:
            continue
        block = messages[positions.start:positions.stop]
        best = block.amax(0) if reduce == "max" else block.amin(0)
        out[r] = best
        same = (block == best) | (block.isnan() & best.isnan())
        arg[r] = positions.start + same.to(torch.int8).argmax(0)
    return out, arg


def _oracle_softmax(scores: torch.Tensor, rows) -> torch.Tensor:
    out = torch.zeros_like(scores)
    for positions in rows:
        block = scores[positions.start:positions.stop]
        if not positions:
            continue
        masked = (block == float("-inf")).all(0)
        out[positions.start:positions.stop] = torch.where(masked, 0.0, block.softmax(0))
    return out


def _assert_same(a, b):
    torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("reduce", ["max", "min"])
@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=25, max_edges=80), channels=st.sampled_from([1, 3, 16]),
       seed=st.integers(0, 2**31 - 1))
def test_max_min_propagate_nan_like_torch(impl, reduce, graph, channels, seed):
    x = _with_specials((graph.num_nodes, channels), seed)
    csr = graph.csr
    out, arg = _raw(impl).spmm(csr.indptr, csr.indices, None, x, reduce)
    expected, expected_arg = _oracle_extreme(x[csr.indices.long()], _rows(graph), reduce)
    _assert_same(out, expected)
    assert torch.equal(arg.long(), expected_arg)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=25, max_edges=80), heads=st.sampled_from([1, 2, 3, 4, 8]),
       seed=st.integers(0, 2**31 - 1))
def test_softmax_backward_propagates_nan_and_inf(impl, graph, heads, seed):
    """The softmax's backward with NaN and infinite gradients and masked (all-zero) rows:
    per row and head, y * (g - sum(g * y)) in float64, NaN wherever torch's would be."""
    csr = graph.csr
    scores = _with_specials((graph.num_edges, heads), seed, share=0.4,
                            only=torch.tensor([float("-inf")] * 4))
    y = _oracle_softmax(graph.to_csr_order(scores), _rows(graph))
    grad = _with_specials((graph.num_edges, heads), seed + 1, share=0.2)
    expected = torch.empty_like(y)
    for rows in _rows(graph):
        block_y, block_g = y[rows], grad[rows]
        expected[rows] = block_y * (block_g - (block_g * block_y).sum(0))
    _assert_same(_raw(impl).segment_softmax_backward(y, grad, csr.indptr), expected)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=25, max_edges=80), heads=st.sampled_from([1, 2, 4, 8]),
       seed=st.integers(0, 2**31 - 1))
def test_softmax_and_attention_mask_and_propagate(impl, graph, heads, seed):
    # scores: mostly -inf in some rows (masks), with NaN and +inf now and then
    scores = _with_specials((graph.num_edges, heads), seed, share=0.5,
                            only=torch.tensor([float("-inf")] * 6 + [float("nan"),
                                                                     float("inf")]))
    csr = graph.csr
    s = graph.to_csr_order(scores)
    expected = _oracle_softmax(s, _rows(graph))
    _assert_same(_raw(impl).segment_softmax(s, csr.indptr), expected)
    x = torch.randn(graph.num_nodes, heads * 3, dtype=torch.float64)
    out, _ = _raw(impl).segment_attention(s, csr.indptr, csr.indices, x)
    messages = x[csr.indices.long()].view(-1, heads, 3) * expected.unsqueeze(-1)
    rows = torch.repeat_interleave(torch.arange(graph.num_nodes), csr.degree().long())
    oracle = torch.zeros(graph.num_nodes, heads, 3, dtype=x.dtype).index_add(0, rows, messages)
    _assert_same(out, oracle.view(graph.num_nodes, -1))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_attention_of_nan_features_under_a_full_mask_is_nan(impl):
    """A head whose scores are all -inf gives its edges weight 0; a NaN source row then
    contributes 0 * NaN = NaN (torch's product), and only to that head's channels. A row
    without edges stays 0."""
    indptr, indices = torch.tensor([0, 2, 3, 3]), torch.tensor([0, 1, 1])
    x = torch.tensor([[float("nan"), 1.0], [2.0, 3.0]]).repeat_interleave(2, dim=1)  # 2 heads
    scores = torch.tensor([[float("-inf"), 0.0], [float("-inf"), 0.0], [0.5, 0.5]])
    out, _ = _raw(impl).segment_attention(scores, indptr, indices, x)
    assert out[0, :2].isnan().all()  # head 0 masked: 0 * NaN
    torch.testing.assert_close(out[0, 2:], torch.tensor([2.0, 2.0]))  # head 1: mean of 1, 3
    torch.testing.assert_close(out[1], torch.tensor([2.0, 2.0, 3.0, 3.0]))
    assert out[2].eq(0).all()


def test_masked_first_edge_gives_weight_zero_in_any_order():
    graph = graphloc.Graph(torch.tensor([[0, 1], [2, 2]]), num_nodes=3)
    for scores, expected in ((torch.tensor([float("-inf"), 1.0]), [0.0, 1.0]),
                             (torch.tensor([1.0, float("-inf")]), [1.0, 0.0]),
                             (torch.tensor([float("-inf"), float("-inf")]), [0.0, 0.0])):
        assert ops.segment_softmax(graph, scores).tolist() == expected


def test_public_ops_follow_torch_on_a_nan_row():
    graph = graphloc.Graph(torch.tensor([[0, 1, 2, 3], [4, 4, 5, 5]]), num_nodes=6)
    x = torch.tensor([float("nan"), 0.5, float("nan"), float("nan"), 0, 0]).view(6, 1)
    out = ops.spmm(graph, x, reduce="max").flatten()
    assert out[4].isnan() and out[5].isnan() and out[:4].eq(0).all()
    values, arg = scatter_max(torch.tensor([float("nan"), 0.5, 1.0]), torch.tensor([0, 0, 1]))
    assert values[0].isnan() and values[1] == 1.0 and arg.tolist() == [0, 2]
    values, arg = scatter_min(torch.tensor([0.5, float("nan")]), torch.tensor([0, 0]))
    assert values[0].isnan() and arg.tolist() == [1]


def test_scatter_out_keeps_nan_and_softmax_masks_groups():
    out = torch.tensor([0.0, 5.0])
    scatter_max(torch.tensor([float("nan"), 1.0]), torch.tensor([0, 1]), dim=0, out=out)
    assert out[0].isnan() and out[1] == 5.0
    weights = scatter_softmax(torch.tensor([float("-inf"), float("-inf"), 2.0, float("-inf")]),
                              torch.tensor([0, 0, 1, 1]))
    assert weights.tolist() == [0.0, 0.0, 1.0, 0.0]


@pytest.mark.skipif(not graphloc.HAS_EXTENSION, reason="graphloc._C is not built")
def test_max_gradient_reaches_an_all_minus_inf_row():
    graph = graphloc.Graph(torch.tensor([[0, 1], [2, 2]]), num_nodes=3)
    x = torch.tensor([[float("-inf")], [float("-inf")], [0.0]], requires_grad=True)
    ops.spmm(graph, x, reduce="max").sum().backward()
    assert x.grad.flatten().tolist() == [1.0, 0.0, 0.0]  # the first edge wins (torch.max(dim))


@pytest.mark.parametrize("shape", [(0,), (2, 0)])
def test_features_without_channels_keep_their_shape(shape):
    """Zero-width features (x [N, 0] or [N, H, 0]) give zero-width outputs, as torch's
    index_add would, and zero gradients for the edge values (a sum over no channels);
    reshaping such outputs by view(-1, ...) used to raise."""
    graph = graphloc.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    x = torch.randn(3, *shape, requires_grad=True)
    heads = shape[0] if len(shape) == 2 else 1
    scores = torch.randn(4, heads, requires_grad=True)
    half = torch.randn(3, heads, requires_grad=True)
    outs = {
        "spmm": ops.spmm(graph, x),
        "sddmm add": ops.sddmm(graph, x, x.detach(), "add"),
        "segment_attention": ops.segment_attention(graph, scores, x),
        "additive_attention": ops.additive_attention(graph, half, half.detach(), x),
    }
    for name, out in outs.items():
        rows = 4 if name.startswith("sddmm") else 3
        assert out.shape == (rows, *shape), name
        grads = torch.autograd.grad(out.sum(), [x, scores, half], allow_unused=True)
        assert grads[0].shape == x.shape, name
        for g in grads[1:]:
            assert g is None or g.eq(0).all(), name
    dot = ops.sddmm(graph, x, x.detach())  # a dot over no channels is 0
    assert dot.shape == ((4, heads) if len(shape) == 2 else (4,)) and dot.eq(0).all()


def test_float32_weights_in_exps_subnormal_range_keep_infinite_features_infinite():
    """A float32 softmax weight between exp(-103.9) and exp(-87.3) is a subnormal in
    torch (exp(-95) = 5.5e-42), not 0: an edge of that weight whose feature is +-inf makes
    the sum +-inf, as torch's product, where a weight flushed to 0 gave 0 * inf = NaN.
    Every attention path against torch's own float32 softmax and products."""
    graph = graphloc.Graph(torch.tensor([[0, 1, 2], [2, 2, 2]]), num_nodes=3)
    x = torch.tensor([[1.0, 2.0, 3.0], [float("inf"), float("-inf"), 5.0], [0.5, 0.5, 0.5]])
    scores = torch.tensor([0.0, -95.0, -200.0])  # weights 1, 5.5e-42 (subnormal) and 0
    weights = scores.softmax(0)
    assert 0 < weights[1] < torch.finfo(torch.float32).tiny and weights[2] == 0
    expected = (weights.unsqueeze(1) * x).sum(0)
    assert expected[:2].tolist() == [float("inf"), float("-inf")]

    def third_row(out):
        return out.view(3, -1)[2]
    _assert_same(ops.segment_softmax(graph, scores), weights)
    _assert_same(third_row(ops.segment_attention(graph, scores.view(-1, 1), x)), expected)
    # leaky_relu(a_src[j] + 0) with slope 0.2: the same three scores
    src = torch.tensor([0.0, -475.0, -1000.0]).view(-1, 1)
    _assert_same(third_row(ops.additive_attention(graph, src, torch.zeros(3, 1), x, 0.2)),
                 expected)


def _oracle_softmax_grad(scores: torch.Tensor, rows, upstream: torch.Tensor) -> torch.Tensor:
    """d <softmax(scores), upstream> / d scores per row and head: torch.softmax's own
    autograd on each row that keeps a finite score, 0 on a fully masked row (its weights are
    the constant 0)."""
    grad = torch.zeros_like(scores)
    for positions in rows:
        block = scores[positions.start:positions.stop].clone().requires_grad_()
        if not positions:
            continue
        weights = block.softmax(0)
        masked = (block == float("-inf")).all(0)
        weights = torch.where(masked, 0.0, weights)
        (g,) = torch.autograd.grad((weights * upstream[positions.start:positions.stop]).sum(),
                                   block)
        grad[positions.start:positions.stop] = torch.where(masked, 0.0, g)
    return grad


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=30, deadline=None)
@given(graph=graphs(max_nodes=12, max_edges=40, allow_hub=False),
       heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**31 - 1))
def test_fully_masked_rows_give_their_scores_gradient_zero(impl, graph, heads, seed):
    """Mostly -inf scores, so that rows and heads without a finite score occur: the
    softmax's and the attention's score gradients match torch's autograd row by row, and
    are 0 on the fully masked ones in the compiled kernels and the pure-torch twins alike
    (the twins' where() over log(0) and 0 / 0 once made them NaN there)."""
    csr = graph.csr
    scores = _with_specials((graph.num_edges, heads), seed, share=0.7,
                            only=torch.tensor([float("-inf")]))
    upstream = torch.randn(graph.num_edges, heads, dtype=torch.float64,
                           generator=torch.Generator().manual_seed(seed))
    expected = _oracle_softmax_grad(scores, _rows(graph), upstream)
    s = scores.clone().requires_grad_()
    (got,) = torch.autograd.grad((_raw(impl).segment_softmax(s, csr.indptr) * upstream).sum(),
                                 s)
    _assert_same(got, expected)
    # the attention's output is sum_e w_e x_e: its gradient is the softmax's with the
    # upstream <grad_out_i, x_e> per edge and head
    x = torch.randn(graph.num_nodes, heads * 3, dtype=torch.float64)
    grad_out = torch.randn(graph.num_nodes, heads * 3, dtype=torch.float64)
    rows = torch.repeat_interleave(torch.arange(graph.num_nodes), csr.degree().long())
    per_edge = (x[csr.indices.long()] * grad_out[rows]).view(-1, heads, 3).sum(-1)
    s = scores.clone().requires_grad_()
    out, _ = _raw(impl).segment_attention(s, csr.indptr, csr.indices, x)
    (got,) = torch.autograd.grad(out, s, grad_out)
    _assert_same(got, _oracle_softmax_grad(scores, _rows(graph), per_edge))


@pytest.mark.parametrize("public", [True, False], ids=["graphloc.scatter", "ops"])
def test_masked_group_gradient_is_zero_through_the_public_softmaxes(public):
    """scatter_softmax and ops.segment_softmax / additive_attention: a group or row of only
    -inf has weights 0 and score gradient 0, its neighbours torch's softmax gradient."""
    scores = torch.tensor([float("-inf"), float("-inf"), 0.3, 1.0], dtype=torch.float64)
    upstream = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    s = scores.clone().requires_grad_()
    if public:
        weights = scatter_softmax(s, torch.tensor([0, 0, 1, 1]))
    else:
        graph = graphloc.Graph(torch.tensor([[0, 1, 2, 3], [4, 4, 5, 5]]), num_nodes=6)
        weights = ops.segment_softmax(graph, s)
    (got,) = torch.autograd.grad((weights * upstream).sum(), s)
    tail = scores[2:].clone().requires_grad_()
    (want,) = torch.autograd.grad((tail.softmax(0) * upstream[2:]).sum(), tail)
    _assert_same(got, torch.cat([torch.zeros(2, dtype=torch.float64), want]))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("reduce", ["max", "min"])
@settings(max_examples=30, deadline=None)
@given(graph=graphs(max_nodes=12, max_edges=50, allow_hub=False),
       channels=st.sampled_from([1, 3]), seed=st.integers(0, 2**31 - 1))
def test_max_min_gradient_reaches_the_first_winner_alone(impl, reduce, graph, channels, seed):
    """Features drawn from {0, 1, -1, NaN, +-inf}, so that ties, rows of one edge valued 0
    and NaN rows abound: d x and d w go to the first winner of each row and channel only,
    as torch's autograd of ``out[i] = messages[arg[i]]`` (the other edges' d w is
    0 * x, NaN where x is not finite). The pure-torch twin's scatter_reduce once split the
    gradient among ties and gave a lone edge valued 0 half of it."""
    gen = torch.Generator().manual_seed(seed)
    palette = torch.tensor([0.0, 1.0, -1.0, float("nan"), float("inf"), float("-inf")],
                           dtype=torch.float64)
    x = palette[torch.randint(0, 6, (graph.num_nodes, channels), generator=gen)]
    w = torch.rand(graph.num_edges, generator=gen, dtype=torch.float64) + 0.5
    grad_out = torch.randn(graph.num_nodes, channels, generator=gen, dtype=torch.float64)
    csr = graph.csr
    src = csr.indices.long()
    messages = x[src] * w.unsqueeze(1)
    _, arg = _oracle_extreme(messages, _rows(graph), reduce)
    rows = torch.repeat_interleave(torch.arange(graph.num_nodes), csr.degree().long())
    routed = grad_out[rows] * (arg[rows] == torch.arange(graph.num_edges).unsqueeze(1))
    want_x = torch.zeros_like(x).index_add(0, src, routed * w.unsqueeze(1))
    want_w = (routed * x[src]).sum(1)

    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    out, _ = _raw(impl).spmm(csr.indptr, csr.indices, wg, xg, reduce)
    got_x, got_w = torch.autograd.grad(out, [xg, wg], grad_out)
    _assert_same(got_x, want_x)
    _assert_same(got_w, want_w)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_masked_edge_of_an_infinite_feature_makes_its_rows_score_gradients_nan(impl):
    """Weight 0 on a source row holding inf makes the output 0 * inf = NaN, and the score
    gradients of that row NaN: in a partly masked row as torch.softmax's own backward
    (w * (d w - <g, out>), the sum NaN), and in a fully masked row the same way (every
    score's 0 * NaN), in the kernels and the pure-torch twins alike. Rows without such a
    feature keep their gradients."""
    indptr, indices = torch.tensor([0, 2, 4, 6]), torch.tensor([0, 1, 0, 1, 0, 2])
    x = torch.tensor([[1.0], [float("inf")], [2.0]], dtype=torch.float64)
    inf = float("-inf")
    scores = torch.tensor([[inf], [inf], [0.5], [inf], [0.5], [1.5]], dtype=torch.float64)
    s = scores.clone().requires_grad_()
    out, _ = _raw(impl).segment_attention(s, indptr, indices, x)
    (got,) = torch.autograd.grad(out, s, torch.ones(3, 1, dtype=torch.float64))
    assert out[:2].isnan().all() and got[:4].isnan().all()
    # the third row: torch's softmax gradient of its two finite scores
    tail = scores[4:].clone().requires_grad_()
    (want,) = torch.autograd.grad((tail.softmax(0) * x[[0, 2]]).sum(), tail)
    _assert_same(got[4:], want)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=30, deadline=None)
@given(graph=graphs(max_nodes=10, max_edges=40, allow_hub=False),
       channels=st.sampled_from([1, 2]), seed=st.integers(0, 2**31 - 1))
def test_row_product_gradient_is_the_product_of_the_others(impl, graph, channels, seed):
    """segment_reduce and spmm with reduce "mul" on values from {0, +-1, 2, NaN, +-inf}:
    each entry's gradient is its row's upstream gradient times torch.prod of the row's
    other entries (order-free for these values), in the kernels and the twins alike. The
    twin's scatter_reduce("prod") backward divided by the entry (inf / inf = NaN)."""
    gen = torch.Generator().manual_seed(seed)
    palette = torch.tensor([0.0, 1.0, -1.0, 2.0, float("nan"), float("inf"), float("-inf")],
                           dtype=torch.float64)
    x = palette[torch.randint(0, 7, (graph.num_nodes, channels), generator=gen)]
    grad_out = torch.randn(graph.num_nodes, channels, generator=gen, dtype=torch.float64)
    csr = graph.csr
    messages = x[csr.indices.long()]
    others = torch.empty_like(messages)
    upstream = torch.empty_like(messages)
    for r, positions in enumerate(_rows(graph)):
        for e in positions:
            rest = [p for p in positions if p != e]
            others[e] = messages[rest].prod(0)
            upstream[e] = grad_out[r]
    want_messages = upstream * others

    m = messages.clone().requires_grad_()
    out, _ = _raw(impl).segment_reduce(m, csr.indptr, "mul")
    _assert_same(torch.autograd.grad(out, m, grad_out)[0], want_messages)
    xg = x.clone().requires_grad_()
    out, _ = _raw(impl).spmm(csr.indptr, csr.indices, None, xg, "mul")
    want_x = torch.zeros_like(x).index_add(0, csr.indices.long(), want_messages)
    _assert_same(torch.autograd.grad(out, xg, grad_out)[0], want_x)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_product_that_overflows_is_inf_before_it_is_summed(impl):
    """torch multiplies, rounds, then adds: a float32 product past the range is inf, and inf
    beside -inf sums to NaN. A fused multiply-add keeps the product exact (1e60) and gave
    -inf: the compiled kernels differed from their twins and from torch on such rows until
    the extension was built without FP contraction (setup.py, -ffp-contract=off)."""
    ptr, idx = torch.tensor([0, 2]), torch.tensor([0, 1])
    x = torch.tensor([[float("-inf")], [1e30]])
    weight = torch.tensor([1.0, 1e30])
    want = (x * weight.unsqueeze(1)).sum(0, keepdim=True)  # -inf + inf
    assert want.isnan().all()
    out = _raw(impl).spmm(ptr, idx, weight, x, "sum")[0]
    assert out.isnan().all()
    # GATv2's score: sum over channels of att * LeakyReLU(src + dst), the same overflow
    src, dst = torch.tensor([[float("-inf"), -1e30]]), torch.zeros(1, 2)
    att = torch.tensor([[2.0, -1e30]])
    score = _raw(impl).gatv2_scores(torch.tensor([0, 1]), torch.tensor([0]), src, dst, att, 0.2)
    assert score.isnan().all() and (att * torch.nn.functional.leaky_relu(src, 0.2)).sum().isnan()


def _hub_near_the_largest_value(dtype, width: int, degree: int = 45):
    """One destination fed by ``degree`` edges from 3 sources whose features lie within a
    factor of 10 of the dtype's largest value, with both signs."""
    big = torch.finfo(dtype).max / 10
    src = torch.arange(degree) % 3
    graph = graphloc.Graph.bipartite(torch.stack([src, torch.zeros_like(src)]), (3, 1))
    signs = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64).repeat_interleave(width)
    x = (signs.view(3, width) * big * torch.linspace(0.5, 1.0, width,
                                                     dtype=torch.float64)).to(dtype)
    return graph, x, src


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("heads,channels", [(1, 16), (2, 16), (4, 16), (8, 8), (3, 5), (1, 3)])
def test_attention_near_the_largest_value_does_not_overflow(dtype, heads, channels):
    """out_i = sum_j softmax(s)_j x_j lies within x's range, but the kernels summed
    exp(s_j - max) x_j first and divided by the weights' sum after: 45 tied edges into a
    hub of values near the largest overflowed to inf (the pure-torch twin and PyG stay
    finite). Every layout (the register sweeps of 1, 2, 4 and 8 heads, the block kernel's
    tiles, a width with no tile), segment_attention and GAT's additive_attention."""
    graph, x, src = _hub_near_the_largest_value(dtype, heads * channels)
    scores = torch.zeros(graph.num_edges, heads, dtype=dtype)
    halves = torch.zeros(3, heads, dtype=dtype), torch.zeros(1, heads, dtype=dtype)
    weights = torch.bincount(src, minlength=3).to(torch.float64) / graph.num_edges
    expected = (weights[:, None] * x.double()).sum(0, keepdim=True)  # equal scores
    for out in (ops.segment_attention(graph, scores, x),
                ops.additive_attention(graph, *halves, x)):
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_aggregation_near_the_largest_value_does_not_overflow(dtype):
    graph, x, src = _hub_near_the_largest_value(dtype, 4)
    t = torch.zeros(4, dtype=dtype)  # equal weights per channel
    weights = torch.bincount(src, minlength=3).to(torch.float64) / graph.num_edges
    out = ops.softmax_sum(graph, x, t)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), (weights[:, None] * x.double()).sum(0, keepdim=True),
                               rtol=1e-5, atol=0)
