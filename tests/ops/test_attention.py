"""segment_attention: the fused softmax + weighted sum against the reference and a dense
per-node computation; gradients."""

import pytest
import torch
from helpers import blocked_layout_graph, graphs, random_edge_index, requires_ext, to_int64
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext
kernels = torch.ops.graphloc


@settings(max_examples=40, deadline=None)
@given(graph=graphs(), heads=st.sampled_from([1, 3]), channels=st.sampled_from([1, 3, 64]),
       int64=st.booleans(), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_segment_attention_matches_reference(graph, heads, channels, int64, dtype):
    indptr, indices = to_int64(graph) if int64 else (graph.csr.indptr, graph.csr.indices)
    score = torch.randn(graph.num_edges, heads, dtype=dtype) * 5
    x = torch.randn(graph.num_nodes, heads * channels, dtype=dtype)
    out, lse = kernels.segment_attention(score, indptr, indices, x)
    ref_out, ref_lse = reference.segment_attention(score, indptr, indices, x)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(out, ref_out, rtol=tol, atol=tol)
    torch.testing.assert_close(lse, ref_lse, rtol=tol, atol=tol)


def test_segment_attention_dense_oracle():
    edge_index = random_edge_index(15, 70, seed=50)
    graph = Graph(edge_index, num_nodes=17)  # two isolated nodes
    score = torch.randn(edge_index.size(1), 2, dtype=torch.float64) * 30  # large: stable?
    x = torch.randn(17, 2, 4, dtype=torch.float64)
    out, weights = ops.segment_attention(graph, score, x, return_weights=True)
    for node in range(17):
        into = edge_index[1] == node
        if not into.any():
            assert (out[node] == 0).all()
            continue
        alpha = torch.softmax(score[into], dim=0)  # [deg, H]
        torch.testing.assert_close(weights[into], alpha)
        expected = (alpha.unsqueeze(-1) * x[edge_index[0][into]]).sum(0)
        torch.testing.assert_close(out[node], expected)


def test_segment_attention_gradcheck():
    graph = Graph(random_edge_index(9, 35, seed=51), num_nodes=10)
    score = torch.randn(graph.num_edges, 2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(10, 2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s, x: ops.segment_attention(graph, s, x), (score, x))
    assert torch.autograd.gradcheck(
        lambda s, x: ops.segment_attention(graph, s, x, return_weights=True)[1], (score, x))
    flat = torch.randn(graph.num_edges, dtype=torch.float64, requires_grad=True)
    x1 = torch.randn(10, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s, x: ops.segment_attention(graph, s, x), (flat, x1))


@settings(max_examples=30, deadline=None)
@given(graph=graphs(), heads=st.sampled_from([1, 2]), channels=st.sampled_from([1, 5]),
       with_lse_grad=st.booleans())
def test_fused_backward_matches_composed(graph, heads, channels, with_lse_grad):
    """The CPU's fused backward kernel against the backward composed of graphloc ops (the
    one devices without the fused kernel run)."""
    from graphloc.ops._library import _attention_backward_composed
    csr, csc = graph.csr, graph.csc
    score = torch.randn(graph.num_edges, heads, dtype=torch.float64) * 5
    x = torch.randn(graph.num_nodes, heads * channels, dtype=torch.float64)
    out, lse = kernels.segment_attention(score, csr.indptr, csr.indices, x)
    grad_out = torch.randn_like(out)
    grad_lse = torch.randn_like(lse) if with_lse_grad else None
    args = (score, lse, out, grad_out, grad_lse, csr.indptr, csr.indices, x,
            csc.indptr, csc.indices, csc.perm)
    composed = (score, *args[2:])  # the composed backward takes the softmax, not lse
    torch.testing.assert_close(kernels.segment_attention_backward(*args, True, True),
                               _attention_backward_composed(*composed))
    composed_score, composed_x = _attention_backward_composed(*composed)
    grad_score, grad_x = kernels.segment_attention_backward(*args, False, True)
    assert grad_score.numel() == 0
    torch.testing.assert_close(grad_x, composed_x)
    grad_score, grad_x = kernels.segment_attention_backward(*args, True, False)
    assert grad_x.numel() == 0
    torch.testing.assert_close(grad_score, composed_score)


@pytest.mark.parametrize("op", ["segment_attention", "additive_attention"])
def test_backward_fills_no_zero_gradient_for_the_unused_log_sum_exp(op):
    """The attention ops return the log-sum-exp too, which a layer rarely uses: its gradient
    reaches the backward as None, not as a zero [rows, heads] tensor filled on each call
    (a fill and a read of rows x heads values per layer and step); the gradients still
    match a dense float64 softmax over each destination's edges."""
    from torch.profiler import ProfilerActivity, profile
    graph = Graph(random_edge_index(30, 120, seed=5), num_nodes=30)
    x = torch.randn(30, 12, dtype=torch.float64, requires_grad=True)
    halves = [torch.randn(30, 3, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    score = torch.nn.functional.leaky_relu(ops.sddmm(graph, *halves, "add"), 0.2)
    out = ops.segment_attention(graph, score, x) if op == "segment_attention" else \
        ops.additive_attention(graph, *halves, x, negative_slope=0.2)
    grad = torch.randn_like(out)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        got = torch.autograd.grad(out, [x, *halves], grad)
    zeroed = [e.input_shapes[0] for e in prof.events()
              if e.name == "aten::zero_" and e.input_shapes]
    assert [30, 3] not in zeroed
    exact = [t.detach().requires_grad_() for t in (x, *halves)]
    src, dst = graph.edge_index
    edge_score = torch.nn.functional.leaky_relu(exact[1][src] + exact[2][dst], 0.2)  # [E, 3]
    dense = torch.full((3, 30, graph.num_edges), float("-inf"), dtype=torch.float64)
    dense[:, dst, torch.arange(graph.num_edges)] = edge_score.t()
    weights = dense.softmax(-1).nan_to_num(0.0)  # rows without edges: 0
    want_out = torch.einsum("hne,ehc->nhc", weights, exact[0][src].view(-1, 3, 4))
    want = torch.autograd.grad(want_out.reshape(30, 12), exact, grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_fused_backward_rejects_inconsistent_inputs():
    graph = Graph(random_edge_index(6, 20, seed=52), num_nodes=6)
    csr, csc = graph.csr, graph.csc
    score = torch.randn(graph.num_edges, 2)
    x = torch.randn(6, 4)
    out, lse = kernels.segment_attention(score, csr.indptr, csr.indices, x)
    args = [score, lse, out, out, None, csr.indptr, csr.indices, x, csc.indptr, csc.indices,
            csc.perm, True, True]
    bad_lse = list(args)
    bad_lse[1] = lse[:3]
    with pytest.raises(RuntimeError, match="must be Float with 6 rows"):
        kernels.segment_attention_backward(*bad_lse)
    bad_perm = list(args)
    bad_perm[10] = csc.perm[:-1]
    with pytest.raises(RuntimeError, match=f"the transpose must hold the {graph.num_edges} edges"):
        kernels.segment_attention_backward(*bad_perm)


@pytest.mark.parametrize("heads, channels", [(1, 16), (2, 8), (4, 16), (8, 32), (5, 24),
                                             (4, 64), (3, 3), (8, 8), (2, 48), (6, 16)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_attention_blocks_and_tiles_match_dense_softmax(heads, channels, dtype):
    """Every head count (the compile-time ones and others) and register tile width, over
    rows that span blocks, against a per-node torch.softmax in float64."""
    graph = blocked_layout_graph()
    gen = torch.Generator().manual_seed(heads * 100 + channels)
    score = (torch.randn(graph.num_edges, heads, generator=gen) * 20).to(dtype)
    x = torch.randn(graph.num_nodes, heads, channels, generator=gen).to(dtype)
    out = ops.segment_attention(graph, score, x)
    src, dst = graph.edge_index
    expected = torch.zeros(graph.num_nodes, heads, channels, dtype=torch.float64)
    for node in dst.unique().tolist():
        into = dst == node
        weights = torch.softmax(score[into].double(), dim=0)  # [deg, H]
        expected[node] = (weights.unsqueeze(-1) * x[src[into]].double()).sum(0)
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=tol)
    assert (out[1:301] == 0).all()


def _rows_of_degrees(degrees: list[int], seed: int) -> Graph:
    """A graph whose node i has degrees[i] in-edges from random sources."""
    gen = torch.Generator().manual_seed(seed)
    dst = torch.repeat_interleave(torch.arange(len(degrees)), torch.tensor(degrees))
    src = torch.randint(0, len(degrees), (dst.numel(),), generator=gen)
    return Graph(torch.stack([src, dst]), num_nodes=len(degrees))


@pytest.mark.parametrize("heads, channels", [(4, 16), (1, 8), (3, 5), (8, 8)])
def test_lse_is_float64_log_sum_exp_to_a_few_ulp(heads, channels):
    """The forward's log-sum-exp (the backward's and the returned weights' normaliser)
    against float64: rows of equal scores, whose float32 sums are exact (s = degree), so
    the error is the log's and the final add's alone; and rows of random scores."""
    degrees = [0, *range(1, 300), 1000, 4097, 5000] * 2
    graph = _rows_of_degrees(degrees, seed=heads)
    indptr = graph.csr.indptr
    row_of_edge = torch.repeat_interleave(torch.arange(len(degrees)), indptr.diff())
    gen = torch.Generator().manual_seed(channels)
    level = torch.randn(len(degrees), heads, generator=gen) * 10
    x = torch.randn(graph.num_nodes, heads * channels, generator=gen)
    _, lse = kernels.segment_attention(level[row_of_edge], indptr, graph.csr.indices, x)
    log_degree = indptr.diff().double().clamp(min=1).log().unsqueeze(1)
    want = torch.where(indptr.diff().unsqueeze(1) > 0, level.double() + log_degree, 0.0)
    # float32's rounding of the add (half an ulp of the result) and of the log (an ulp),
    # twice over
    ulp = 2.0 ** -23
    bound = ulp * (want.abs() + 2 * log_degree) + 1e-12
    assert ((lse.double() - want).abs() <= bound).all(), (lse.double() - want).abs().max()

    score = torch.randn(graph.num_edges, heads, generator=gen) * 3
    _, lse = kernels.segment_attention(score, indptr, graph.csr.indices, x)
    _, ref = reference.segment_attention(score.double(), indptr, graph.csr.indices, x.double())
    short = indptr.diff() <= 8
    torch.testing.assert_close(lse[short].double(), ref[short], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(lse.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("heads, channels", [(4, 16), (2, 8), (5, 24), (8, 8), (1, 64),
                                             (3, 3), (2, 48)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("wanted", ["both", "score", "x"])
def test_attention_backward_over_blocks_matches_reference(heads, channels, dtype, wanted):
    """Each gradient alone and both (the transpose pass computes both from one gather),
    every register tile width, against the reference's autograd in float64 (on the same
    values, rounded to the dtype)."""
    graph = blocked_layout_graph()
    gen = torch.Generator().manual_seed(3)

    def rounded(t):
        return t.to(dtype).double()
    score = rounded(torch.randn(graph.num_edges, heads, generator=gen) * 5)
    x = rounded(torch.randn(graph.num_nodes, heads * channels, generator=gen))
    grad = rounded(torch.randn(graph.num_nodes, heads * channels, generator=gen))
    inputs = {"score": score, "x": x} if wanted == "both" else {wanted: {"score": score,
                                                                         "x": x}[wanted]}
    for t in inputs.values():
        t.requires_grad_()
    out = ops.segment_attention(graph, score.to(dtype), x.to(dtype))
    got = torch.autograd.grad(out, list(inputs.values()), grad.to(dtype))
    s = graph.to_csr_order(score)
    ref_out, _ = reference.segment_attention(s, graph.csr.indptr, graph.csr.indices, x)
    want = torch.autograd.grad(ref_out, list(inputs.values()), grad)
    tol = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 5e-2}[dtype]
    # bfloat16: 8 bits of the gradient's scale, less where d score cancels (<g, x_j> - <g, out>)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=tol, atol=tol * max(1.0, w.abs().max()))


def _large_score_case(magnitude, heads=2, channels=4, seed=7):
    """A graph whose rows hold tied and near-tied scores of the given magnitude (float32):
    where the log-sum-exp m + log(s) rounds at m's scale, exp(score - lse) is not the
    softmax (two tied maxima at 1e30 weighed 1 each instead of 0.5)."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = random_edge_index(12, 60, seed=seed)
    graph = Graph(edge_index, num_nodes=14)  # isolated nodes too
    offsets = torch.randint(0, 4, (edge_index.size(1), heads), generator=gen).float()
    score = magnitude - offsets  # ties (offset 0 twice) and neighbours 1, 2, 3 below
    x = torch.randn(14, heads * channels, generator=gen)
    return graph, edge_index, score, x


def _dense_softmax_attention(edge_index, score, x, num_nodes):
    """out and weights (edge order) from torch.softmax per destination, in float64
    (differentiable in score and x)."""
    heads = score.size(1)
    weights = torch.zeros_like(score)
    out = x.new_zeros(num_nodes, x.size(1))
    for node in range(num_nodes):
        into = (edge_index[1] == node).nonzero().flatten()
        if into.numel():
            alpha = torch.softmax(score[into], dim=0)
            weights = weights.index_put((into,), alpha)
            messages = x[edge_index[0][into]].view(len(into), heads, -1) * alpha.unsqueeze(-1)
            out = out.index_put((torch.tensor([node]),), messages.sum(0).view(1, -1))
    return out, weights


@pytest.mark.parametrize("magnitude", [1e4, 1e6, 1e30])
@pytest.mark.parametrize("path", ["kernel", "reference", "composed"])
def test_attention_weights_are_the_softmax_at_any_score_magnitude(magnitude, path):
    graph, edge_index, score, x = _large_score_case(magnitude)
    s64, x64 = (t.double().requires_grad_() for t in (score, x))
    want_out, want_w = _dense_softmax_attention(edge_index, s64, x64, 14)
    g = torch.randn(want_out.shape, generator=torch.Generator().manual_seed(3))
    gw = torch.randn(want_w.shape, generator=torch.Generator().manual_seed(4))
    want_ds, want_dx = torch.autograd.grad((want_out * g).sum() + (want_w * gw).sum(),
                                           (s64, x64))
    s = score.clone().requires_grad_()
    xs = x.clone().requires_grad_()
    if path == "reference":  # the extension-less fallback, in CSR order
        csr_score = graph.to_csr_order(s)
        out, lse = reference.segment_attention(csr_score, graph.csr.indptr, graph.csr.indices, xs)
        weights = graph.from_csr_order(reference.segment_softmax(csr_score, graph.csr.indptr))
    else:
        out, weights = ops.segment_attention(graph, s, xs, return_weights=True)
    loss = (out * g).sum() + (weights * gw).sum()
    ds, dx = torch.autograd.grad(loss, (s, xs), create_graph=path == "composed")
    tol = dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights.double(), want_w, **tol)
    torch.testing.assert_close(out.double(), want_out, **tol)
    torch.testing.assert_close(dx.double(), want_dx, **tol)
    torch.testing.assert_close(ds.double(), want_ds, **tol)


@pytest.mark.parametrize("magnitude", [1e4, 1e6, 1e30])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("heads, channels", [(2, 4), (4, 16)])  # block kernels, register sweeps
def test_additive_attention_gradients_at_any_score_magnitude(magnitude, create_graph, heads,
                                                             channels):
    graph, edge_index, _, x = _large_score_case(magnitude, heads, channels)
    gen = torch.Generator().manual_seed(5)
    a_src = (magnitude - torch.randint(0, 3, (14, heads), generator=gen).float()).requires_grad_()
    a_dst = torch.randint(-2, 2, (14, heads), generator=gen).float().requires_grad_()
    xs = x.clone().requires_grad_()
    out = ops.additive_attention(graph, a_src, a_dst, xs)
    g = torch.randn(out.shape, generator=gen)
    got = torch.autograd.grad((out * g).sum(), (a_src, a_dst, xs), create_graph=create_graph)
    src, dst = edge_index
    a64, d64, x64 = (t.detach().double().requires_grad_() for t in (a_src, a_dst, x))
    score = torch.nn.functional.leaky_relu(a64[src] + d64[dst], 0.2)
    want_out = _dense_softmax_attention(edge_index, score, x64, 14)[0]
    want = torch.autograd.grad((want_out * g.double()).sum(), (a64, d64, x64))
    torch.testing.assert_close(out.double(), want_out.detach(), rtol=1e-5, atol=1e-5)
    for name, mine, theirs in zip(("a_src", "a_dst", "x"), got, want, strict=True):
        torch.testing.assert_close(mine.double(), theirs, rtol=1e-5, atol=1e-4, msg=name)
