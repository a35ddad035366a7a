"""additive_attention (GAT's attention, scores computed inside the kernel) against its
definition run on torch's own ops: leaky_relu(src[j] + dst[i]) per edge, a softmax per
destination, the weighted sum; forward and all three gradients."""

import pytest
import torch
import torch.nn.functional as F
from helpers import blocked_layout_graph, graphs, random_edge_index, requires_ext
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops

pytestmark = requires_ext
kernels = torch.ops.graphloc


def _definition(graph, src, dst, x, slope):
    """The op on torch's ops alone: a dense [N, E] score matrix, masked off the edges,
    softmax over each row (an empty or fully masked row gives 0), then the products."""
    s, d = graph.edge_index
    heads = 1 if src.dim() == 1 else src.size(1)
    edge_scores = F.leaky_relu(src[s] + dst[d], slope).reshape(-1, heads)  # [E, H]
    rows = torch.full((heads, graph.num_nodes, graph.num_edges), float("-inf"),
                      dtype=x.dtype)
    rows[:, d, torch.arange(graph.num_edges)] = edge_scores.t()
    weights = rows.softmax(-1)  # [H, N, E]
    masked = (rows == float("-inf")).all(-1, keepdim=True)
    weights = torch.where(masked, torch.zeros_like(weights), weights)
    messages = x[s].reshape(graph.num_edges, heads, x[0].numel() // heads)  # [E, H, C]
    return torch.einsum("hne,ehc->nhc", weights, messages).reshape(-1, *x.shape[1:])


def _inputs(graph, heads, channels, dtype, gen, scale=3.0):
    src = torch.randn(graph.num_src_nodes, heads, generator=gen, dtype=torch.float64) * scale
    dst = torch.randn(graph.num_nodes, heads, generator=gen, dtype=torch.float64) * scale
    x = torch.randn(graph.num_src_nodes, heads * channels, generator=gen, dtype=torch.float64)
    return [t.to(dtype) for t in (src, dst, x)]


def _check(graph, src, dst, x, slope, tol, wanted=(0, 1, 2)):
    """Forward and the gradients of the inputs in ``wanted`` against the definition in
    float64 on the same (rounded) values."""
    inputs = [t.detach().clone().requires_grad_(k in wanted) for k, t in enumerate((src, dst, x))]
    exact = [t.detach().double().requires_grad_(k in wanted) for k, t in enumerate(inputs)]
    out = ops.additive_attention(graph, *inputs, negative_slope=slope)
    want = _definition(graph, *exact, slope)
    scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol * scale)
    grad = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    leaves = [inputs[k] for k in wanted]
    got = torch.autograd.grad(out, leaves, grad.to(out.dtype))
    expected = torch.autograd.grad(want, [exact[k] for k in wanted], grad)
    for g, w in zip(got, expected, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=tol, atol=tol * max(1.0, w.abs().max()))


@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=30, max_edges=120, allow_hub=False),
       heads=st.sampled_from([1, 2, 3, 4, 8]), channels=st.sampled_from([1, 3, 16]),
       slope=st.sampled_from([0.0, 0.2, 1.0, 3.0]), seed=st.integers(0, 2**31 - 1))
def test_matches_the_definition(graph, heads, channels, slope, seed):
    gen = torch.Generator().manual_seed(seed)
    _check(graph, *_inputs(graph, heads, channels, torch.float64, gen), slope, 1e-10)


@pytest.mark.parametrize("heads, channels", [(4, 16), (2, 8), (5, 24), (8, 8), (1, 64),
                                             (3, 3), (2, 48), (4, 8), (2, 16), (2, 32)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("wanted", [(0, 1, 2), (0, 1), (2,), (0,)])
def test_blocks_tiles_and_each_gradient(heads, channels, dtype, wanted):
    """Rows that span the kernels' blocks (a 600-edge row, 300 empty rows, short rows),
    every register tile width, each gradient alone and all of them; every group of heads
    that the backward sums jointly (2, 4 or 8 heads of 8, 16 or 32 channels)."""
    graph = blocked_layout_graph()
    gen = torch.Generator().manual_seed(heads * 10 + channels)
    tol = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 5e-2}[dtype]
    _check(graph, *_inputs(graph, heads, channels, dtype, gen), 0.2, tol, wanted)


def test_bipartite_graph_with_one_dimensional_scores():
    edge_index = torch.tensor([[0, 1, 2, 4, 4, 3], [0, 0, 1, 1, 2, 1]])
    graph = Graph.bipartite(edge_index, (5, 4))  # node 3: no incoming edges
    gen = torch.Generator().manual_seed(5)
    src = torch.randn(5, generator=gen, dtype=torch.float64)
    dst = torch.randn(4, generator=gen, dtype=torch.float64)
    x = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    _check(graph, src, dst, x, 0.2, 1e-10)
    assert ops.additive_attention(graph, src, dst, x)[3].eq(0).all()


@pytest.mark.parametrize("heads, channels", [(4, 16), (8, 8), (2, 32)])
@pytest.mark.parametrize("sizes", [(30, 20), (20, 30)])
def test_register_layouts_on_bipartite_graphs(heads, channels, sizes):
    """The register sweeps (1, 2, 4 or 8 heads filling one sweep) on graphs with more sources
    than destinations and fewer, some destinations without edges: forward and all three
    gradients against the float64 definition."""
    num_src, num_dst = sizes
    gen = torch.Generator().manual_seed(num_src + heads)
    edge_index = torch.stack([torch.randint(0, num_src, (150,), generator=gen),
                              torch.randint(0, num_dst - 3, (150,), generator=gen)])
    graph = Graph.bipartite(edge_index, (num_src, num_dst))
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-5)):
        _check(graph, *_inputs(graph, heads, channels, dtype, gen), 0.2, tol)
    assert ops.additive_attention(graph, *_inputs(graph, heads, channels, torch.float32,
                                                  gen))[-3:].eq(0).all()


@pytest.mark.parametrize("heads, channels", [(4, 16), (3, 5)])
def test_int64_indices_give_the_int32_results(heads, channels):
    """The kernels on int64 CSR and transpose arrays: bit for bit the int32 results, forward
    and backward, in the register sweeps (4 heads of 16) and the block kernels."""
    graph = Graph(random_edge_index(50, 400, seed=8), num_nodes=50)
    gen = torch.Generator().manual_seed(heads)
    src, dst, x = _inputs(graph, heads, channels, torch.float32, gen)
    csr, csc = graph.csr, graph.csc
    grad = torch.randn(50, heads * channels, generator=gen)
    results = []
    for cast in (lambda t: t, lambda t: t.long()):
        ptr, idx = cast(csr.indptr), cast(csr.indices)
        transpose = [cast(t) for t in (csc.indptr, csc.indices, csc.perm)]
        out, norm = kernels.additive_attention(src, dst, 0.2, ptr, idx, x, *transpose)
        results.append([out, norm, *kernels.additive_attention_backward(
            src, dst, 0.2, norm, out, grad, ptr, idx, x, *transpose, True, True)])
    for narrow, wide in zip(*results, strict=True):
        assert torch.equal(narrow, wide)


def test_backward_rejects_a_norm_of_the_wrong_shape_or_dtype():
    """The backward kernel names its row statistics when they do not fit the graph."""
    graph = Graph(random_edge_index(6, 20, seed=4), num_nodes=6)
    gen = torch.Generator().manual_seed(4)
    src, dst, x = _inputs(graph, 4, 16, torch.float32, gen)
    csr, csc = graph.csr, graph.csc
    out, norm = kernels.additive_attention(src, dst, 0.2, csr.indptr, csr.indices, x)
    for bad, message in ((norm[0], r"norm must be \[2, rows, heads\] = \[2, 6, 4\]"),
                         (norm[:, :5], r"got shape \[2, 5, 4\]"),
                         (norm.double(), "norm must have x's dtype")):
        with pytest.raises(RuntimeError, match=message):
            kernels.additive_attention_backward(src, dst, 0.2, bad, out, torch.ones_like(out),
                                                csr.indptr, csr.indices, x, csc.indptr,
                                                csc.indices, csc.perm, True, True)


@pytest.mark.parametrize("heads, channels", [(4, 16), (1, 8), (3, 5)])
def test_a_hub_row_of_thousands_of_edges(heads, channels):
    """One destination with 3,000 incoming edges beside rows of a few: the per-row score
    buffer grows past its first size, in the register sweeps and the block kernels, forward
    and every gradient against the float64 definition."""
    gen = torch.Generator().manual_seed(heads)
    hub = torch.stack([torch.randint(0, 40, (3000,), generator=gen), torch.zeros(3000).long()])
    rest = random_edge_index(40, 200, seed=heads)
    graph = Graph(torch.cat([hub, rest], dim=1), num_nodes=40)
    _check(graph, *_inputs(graph, heads, channels, torch.float64, gen), 0.2, 1e-10)
    _check(graph, *_inputs(graph, heads, channels, torch.float32, gen), 0.2, 1e-5)


def test_three_dimensional_features_keep_their_shape():
    graph = Graph(random_edge_index(8, 30, seed=3), num_nodes=8)
    gen = torch.Generator().manual_seed(6)
    src, dst, x = _inputs(graph, 2, 4, torch.float64, gen)
    out = ops.additive_attention(graph, src, dst, x.view(8, 2, 4))
    assert out.shape == (8, 2, 4)
    torch.testing.assert_close(out.view(8, 8), _definition(graph, src, dst, x, 0.2))


@pytest.mark.parametrize("heads, channels", [(4, 16), (8, 8), (3, 5), (1, 16)])
def test_scores_far_beyond_exps_range_are_shifted_by_their_row_max(heads, channels):
    """Score halves of a few hundred, whose exp overflows float32 unless each row is
    shifted by its own max first (the forward takes the maxima inside its score loop on
    the vector path, 4 and 8 heads; elsewhere in a pass of its own): forward and every
    gradient against the float64 definition, over rows that span the kernels' blocks."""
    graph = blocked_layout_graph()
    gen = torch.Generator().manual_seed(heads + channels)
    src, dst, x = _inputs(graph, heads, channels, torch.float32, gen, scale=200.0)
    assert (F.leaky_relu(src[graph.edge_index[0]] + dst[graph.edge_index[1]]) > 89).any()
    _check(graph, src, dst, x, 0.2, 1e-4)


@pytest.mark.parametrize("heads, channels", [(1, 3), (4, 3), (1, 16), (4, 16), (8, 8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masks_and_special_values_follow_the_composed_ops(heads, channels, dtype):
    """-inf halves mask their edges (weight 0, a fully masked row gives 0), NaN and +inf
    make their rows NaN: the same as sddmm + leaky_relu + segment_attention, forward and
    backward, in the block kernels (3 channels) and the register sweeps (1 head of 16, 4
    of 16, 8 of 8)."""
    graph = Graph(random_edge_index(12, 60, seed=9), num_nodes=12)
    gen = torch.Generator().manual_seed(heads)
    src, dst, x = _inputs(graph, heads, channels, dtype, gen)
    src[1], src[2, 0], dst[3] = float("-inf"), float("nan"), float("-inf")  # node 3: all masked
    src[4, -1] = float("inf")
    inputs = [t.clone().requires_grad_() for t in (src, dst, x)]
    composed = [t.clone().requires_grad_() for t in (src, dst, x)]
    out = ops.additive_attention(graph, *inputs)
    want = ops.segment_attention(
        graph, F.leaky_relu(ops.sddmm(graph, composed[0], composed[1], "add"), 0.2), composed[2])
    torch.testing.assert_close(out, want, equal_nan=True)
    assert out[3].eq(0).all() and out.isnan().any()
    grad = torch.randn_like(out)
    for g, w in zip(torch.autograd.grad(out, inputs, grad),
                    torch.autograd.grad(want, composed, grad), strict=True):
        torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("slope", [0.0, 0.2, 3.0])
def test_scores_at_the_kink_take_torchs_side(heads, dtype, slope):
    """Scores of exactly +0, -0 and tiny values of both signs, mixed at random per edge and
    head: the LeakyReLU and its gradient take the side torch takes (1 only where the score
    is > 0, the slope at 0), through both the per-head vectors (4 heads, float32/64) and the
    scalar path (1 head, bfloat16), as the composed ops do."""
    graph = Graph(random_edge_index(40, 300, seed=heads), num_nodes=40)
    gen = torch.Generator().manual_seed(int(slope * 10) + heads)
    values = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5], dtype=torch.float64)
    src = values[torch.randint(0, 6, (40, heads), generator=gen)].to(dtype)
    dst = values[torch.randint(0, 6, (40, heads), generator=gen)].to(dtype)
    x = torch.randn(40, heads * 8, generator=gen, dtype=torch.float64).to(dtype)
    inputs = [t.clone().requires_grad_() for t in (src, dst, x)]
    composed = [t.clone().requires_grad_() for t in (src, dst, x)]
    out = ops.additive_attention(graph, *inputs, negative_slope=slope)
    want = ops.segment_attention(graph, F.leaky_relu(
        ops.sddmm(graph, composed[0], composed[1], "add"), slope), composed[2])
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)
    grad = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(dtype)
    for g, w in zip(torch.autograd.grad(out, inputs, grad),
                    torch.autograd.grad(want, composed, grad), strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("heads", [2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_short_rows_beside_nan_rows_keep_their_own_dst_gradient(heads, dtype):
    """Rows of 1 to 9 edges in turn, every other one NaN through its destination half:
    d dst of each finite row is its own edges' sum alone (the pass that sums a short row
    over a fixed window of the edges after it must not let the next row's NaN in), and
    matches the float64 definition; the NaN rows' gradients are NaN there too."""
    degrees = torch.arange(40) % 9 + 1
    dst_of_edge = torch.arange(40).repeat_interleave(degrees)
    src_of_edge = torch.randint(0, 40, (dst_of_edge.numel(),),
                                generator=torch.Generator().manual_seed(heads))
    graph = Graph(torch.stack([src_of_edge, dst_of_edge]), num_nodes=40)
    gen = torch.Generator().manual_seed(heads + 1)
    src, dst, x = _inputs(graph, heads, 8, dtype, gen, scale=1.0)
    nan_rows = torch.arange(1, 40, 2)
    dst[nan_rows] = float("nan")
    inputs = [t.clone().requires_grad_() for t in (src, dst, x)]
    exact = [t.detach().double().requires_grad_() for t in inputs]
    out = ops.additive_attention(graph, *inputs)
    grad = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    got = torch.autograd.grad(out, inputs[1], grad.to(dtype))[0].double()
    want = torch.autograd.grad(_definition(graph, *exact, 0.2), exact[1], grad)[0]
    finite_rows = torch.arange(0, 40, 2)
    assert got[finite_rows].isfinite().all() and got[nan_rows].isnan().all()
    tol = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 5e-2}[dtype]
    torch.testing.assert_close(got[finite_rows], want[finite_rows], rtol=tol,
                               atol=tol * max(1.0, want[finite_rows].abs().max()))


def test_gradcheck():
    graph = Graph(random_edge_index(9, 35, seed=51), num_nodes=10)
    gen = torch.Generator().manual_seed(2)
    inputs = [t.requires_grad_() for t in _inputs(graph, 2, 3, torch.float64, gen, scale=1.0)]
    assert torch.autograd.gradcheck(
        lambda s, d, x: ops.additive_attention(graph, s, d, x, negative_slope=0.3), inputs)


def test_negative_slope_runs_composed_and_the_kernel_refuses_it():
    """The kernels read the LeakyReLU's side off the sign of its output, which a negative
    slope breaks: the op composes it from sddmm and segment_attention instead, and the raw
    kernel refuses it."""
    graph = Graph(random_edge_index(10, 40, seed=4), num_nodes=10)
    gen = torch.Generator().manual_seed(4)
    src, dst, x = _inputs(graph, 2, 3, torch.float64, gen)
    _check(graph, src, dst, x, -0.5, 1e-10)
    csr = graph.csr
    with pytest.raises(RuntimeError, match="negative_slope must be >= 0, got -0.5"):
        kernels.additive_attention(src, dst, -0.5, csr.indptr, csr.indices, x)


def test_bad_inputs_name_the_argument():
    graph = Graph(random_edge_index(6, 20, seed=8), num_nodes=6)
    src, dst, x = torch.randn(6, 2), torch.randn(6, 2), torch.randn(6, 4)
    cases = [
        ((torch.randn(5, 2), dst, x), ValueError, "src_scores has 5 rows but the graph has 6"),
        ((src, torch.randn(7, 2), x), ValueError, "dst_scores has 7 rows"),
        ((src, torch.randn(6, 3), x), ValueError, r"the same heads, got \[6, 2\] and \[6, 3\]"),
        ((src.double(), dst.double(), x), TypeError, "must have x's dtype torch.float32"),
        ((src, dst, torch.randn(6, 5)), ValueError, "5 channels, not divisible into 2 heads"),
        ((src, dst, torch.randn(6, 3, 2)), ValueError, "x has 3 heads"),
        ((src, dst, [[1.0]]), TypeError, "x must be a torch.Tensor"),
        ((torch.randn(6, 2, 1), dst, x), ValueError, "must be \\[N\\] or \\[N, heads\\]"),
    ]
    for args, error, message in cases:
        for slope in (0.2, -0.2):  # the kernel's path and the composed one
            with pytest.raises(error, match=message):
                ops.additive_attention(graph, *args, negative_slope=slope)
    with pytest.raises(ValueError, match="0 heads"):
        ops.additive_attention(graph, torch.randn(6, 0), torch.randn(6, 0), x)
    with pytest.raises(TypeError, match="negative_slope must be a number, got str"):
        ops.additive_attention(graph, src, dst, x, negative_slope="0.2")
    for slope in (float("nan"), -float("inf")):  # every score NaN, quietly
        with pytest.raises(ValueError, match="additive_attention: negative_slope must be a "
                                             "finite number"):
            ops.additive_attention(graph, src, dst, x, negative_slope=slope)
    csr = graph.csr
    with pytest.raises(RuntimeError, match="a_dst has 5 rows but the graph has 6"):
        kernels.additive_attention(src, dst[:5], 0.2, csr.indptr, csr.indices, x)
    with pytest.raises(RuntimeError, match="a_src has 2 heads and a_dst 1"):
        kernels.additive_attention(src, dst[:, :1], 0.2, csr.indptr, csr.indices, x)
