"""CUDA kernels against the CPU kernels (run where a GPU and a CUDA build are present)."""

import pytest
import torch
from helpers import csr_fact_cases, random_edge_index

from graphloc import Graph, ops

cuda_built = torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key(
    "graphloc::spmm", "CUDA")
pytestmark = pytest.mark.skipif(not cuda_built, reason="no GPU or graphloc built without CUDA")
REDUCES = ["sum", "mean", "max", "min"]


def _pair(seed=60, hub=2000):
    edge_index = random_edge_index(300, 3000, seed=seed, hub_degree=hub)
    cpu = Graph(edge_index, num_nodes=310)
    return cpu, cpu.to("cuda")


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("channels", [1, 3, 64, 130])
@pytest.mark.parametrize("backend", ["auto", "graphloc"])  # auto: cuSPARSE for sum and mean
def test_spmm_forward_and_backward(reduce, channels, backend):
    previous = ops.set_spmm_backend(backend)
    try:
        _check_spmm_forward_and_backward(reduce, channels)
    finally:
        ops.set_spmm_backend(previous)


def _check_spmm_forward_and_backward(reduce, channels):
    cpu, gpu = _pair()
    x = torch.randn(310, channels, dtype=torch.float64)
    w = torch.rand(cpu.num_edges, dtype=torch.float64)
    g = torch.randn(310, channels, dtype=torch.float64)

    def run(graph, x, w, g):
        x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
        out = ops.spmm(graph, x, w, reduce)
        return (out, *torch.autograd.grad(out, (x, w), g))
    torch.testing.assert_close(
        [t.cpu() for t in run(gpu, x.cuda(), w.cuda(), g.cuda())], list(run(cpu, x, w, g)),
        rtol=1e-9, atol=1e-9)


def test_auto_backend_sends_sum_and_mean_to_cusparse():
    from graphloc.ops.sparse_library import uses_sparse_library
    rows = torch.randn(4, 3, device="cuda")
    assert uses_sparse_library(rows, None, "sum") and uses_sparse_library(rows, None, "mean")
    assert not uses_sparse_library(rows, None, "max")
    assert not uses_sparse_library(rows.cpu(), None, "sum")


@pytest.mark.parametrize("op", ["dot", "add", "mul"])
def test_sddmm(op):
    cpu, gpu = _pair()
    a, b = torch.randn(310, 2, 5, dtype=torch.float64), torch.randn(310, 2, 5, dtype=torch.float64)
    torch.testing.assert_close(ops.sddmm(gpu, a.cuda(), b.cuda(), op).cpu(),
                               ops.sddmm(cpu, a, b, op))


def test_softmax_attention_and_scatter():
    cpu, gpu = _pair()
    s = torch.randn(cpu.num_edges, 2, dtype=torch.float64) * 5
    x = torch.randn(310, 2, 8, dtype=torch.float64)
    torch.testing.assert_close(ops.segment_softmax(gpu, s.cuda()).cpu(),
                               ops.segment_softmax(cpu, s))
    torch.testing.assert_close(ops.segment_attention(gpu, s.cuda(), x.cuda()).cpu(),
                               ops.segment_attention(cpu, s, x))
    src, index = torch.randn(1000, 4, dtype=torch.float64), torch.randint(0, 50, (1000,))
    for reduce in REDUCES:
        torch.testing.assert_close(ops.scatter(src.cuda(), index.cuda(), 0, dim_size=60,
                                               reduce=reduce).cpu(),
                                   ops.scatter(src, index, 0, dim_size=60, reduce=reduce))


def test_bfloat16_spmm():
    cpu, gpu = _pair()
    x = torch.randn(310, 64).bfloat16()
    torch.testing.assert_close(ops.spmm(gpu, x.cuda()).cpu().float(), ops.spmm(cpu, x).float(),
                               rtol=2e-2, atol=2e-2)


def test_attention_and_softmax_backward():
    cpu, gpu = _pair(seed=61)
    s = torch.randn(cpu.num_edges, 2, dtype=torch.float64) * 5
    x = torch.randn(310, 2, 8, dtype=torch.float64)
    g = torch.randn(310, 2, 8, dtype=torch.float64)
    gs = torch.randn(cpu.num_edges, 2, dtype=torch.float64)

    def run(graph, s, x, g, gs):
        s, x = s.clone().requires_grad_(), x.clone().requires_grad_()
        att = ops.segment_attention(graph, s, x)
        soft = ops.segment_softmax(graph, s)
        return (*torch.autograd.grad(att, (s, x), g), *torch.autograd.grad(soft, s, gs))
    torch.testing.assert_close([t.cpu() for t in run(gpu, s.cuda(), x.cuda(), g.cuda(),
                                                     gs.cuda())],
                               list(run(cpu, s, x, g, gs)))


@pytest.mark.parametrize("detach", [False, True])
def test_softmax_sum_composed_on_the_gpu_is_the_cpu_kernels(detach):
    cpu, gpu = _pair(seed=62)
    x = torch.randn(310, 16, dtype=torch.float64) * 3
    t = torch.randn(16, dtype=torch.float64)
    g = torch.randn(310, 16, dtype=torch.float64)

    def run(graph, x, t, g):
        x, t = x.clone().requires_grad_(), t.clone().requires_grad_()
        out = ops.softmax_sum(graph, x, t, detach)
        return out, *torch.autograd.grad(out, (x, t), g, allow_unused=True)
    got = run(gpu, x.cuda(), t.cuda(), g.cuda())
    torch.testing.assert_close([None if v is None else v.cpu() for v in got],
                               list(run(cpu, x, t, g)))


@pytest.mark.parametrize("op", ["edge_outer_sum", "edge_head_sum"])
def test_edge_products_composed_on_the_gpu_are_the_cpu_kernels(op):
    cpu, gpu = _pair(seed=63)
    weight = torch.randn(cpu.num_edges, 5, dtype=torch.float64)
    x = torch.randn(310, 5, 4, dtype=torch.float64) if op == "edge_head_sum" else \
        torch.randn(310, 4, dtype=torch.float64)

    def run(graph, weight, x):
        weight, x = weight.clone().requires_grad_(), x.clone().requires_grad_()
        out = getattr(ops, op)(graph, weight, x)
        return out, *torch.autograd.grad(out, (weight, x), torch.ones_like(out))
    got = run(gpu, weight.cuda(), x.cuda())
    torch.testing.assert_close([v.cpu() for v in got], list(run(cpu, weight, x)))


def test_film_sum_composed_on_the_gpu_is_the_cpu_kernel():
    cpu, gpu = _pair(seed=64)
    gen = torch.Generator().manual_seed(64)
    gamma, beta, value = (torch.randn(310, 6, dtype=torch.float64, generator=gen)
                          for _ in range(3))

    def run(graph, *inputs):
        inputs = [t.clone().requires_grad_() for t in inputs]
        out = ops.film_sum(graph, *inputs)
        return out, *torch.autograd.grad(out, inputs, torch.ones_like(out))
    got = run(gpu, gamma.cuda(), beta.cuda(), value.cuda())
    torch.testing.assert_close([v.cpu() for v in got], list(run(cpu, gamma, beta, value)))


@pytest.mark.parametrize("magnitude", [1e6, 1e30])
def test_attention_backward_at_large_scores_is_the_cpu_softmaxs(magnitude):
    """float32 scores whose log-sum-exp rounds at their scale (tied maxima): the CUDA
    backward divides exp(score - lse) by its row's sum, as the CPU kernel (exp(score - lse)
    alone weighed two tied 1e30 scores 1 each)."""
    cpu, gpu = _pair(seed=62)
    gen = torch.Generator().manual_seed(62)
    s = magnitude - torch.randint(0, 3, (cpu.num_edges, 2), generator=gen).float()
    x = torch.randn(310, 2, 8, generator=gen)
    g = torch.randn(310, 2, 8, generator=gen)

    def run(graph, s, x, g):
        s, x = s.clone().requires_grad_(), x.clone().requires_grad_()
        out, weights = ops.segment_attention(graph, s, x, return_weights=True)
        return (weights, *torch.autograd.grad(out, (s, x), g))
    got = [t.cpu() for t in run(gpu, s.cuda(), x.cuda(), g.cuda())]
    want = list(run(cpu, s, x, g))
    for mine, theirs in zip(got, want, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


def test_arg_sources_agree():
    arg = torch.randint(0, 501, (300, 8))
    perm = torch.randperm(500)
    sources = torch.ops.graphloc.arg_sources
    for p in (perm, None):
        on_gpu = sources(arg.cuda(), None if p is None else p.cuda(), 500)
        assert torch.equal(on_gpu.cpu(), sources(arg, p, 500))
    with pytest.raises(RuntimeError, match=r"\] = 501 is not a CSR position in \[0, 500\]"):
        torch.ops.graphloc.arg_sources(arg.cuda() + 1, perm.cuda(), 500)


def test_coo_to_csr_and_segment_reduce():
    index = torch.randint(0, 70, (5000,))
    indptr, perm = ops.coo_to_csr(index, 80)
    indptr_gpu, perm_gpu = ops.coo_to_csr(index.cuda(), 80)
    assert torch.equal(indptr_gpu.cpu(), indptr) and torch.equal(perm_gpu.cpu(), perm)
    src = torch.randn(5000, 3, dtype=torch.float64)
    for reduce in REDUCES:
        torch.testing.assert_close(ops.segment_reduce(src.cuda(), indptr_gpu, reduce).cpu(),
                                   ops.segment_reduce(src, indptr, reduce))


def test_gather_rows_and_edge_order_agree():
    src = torch.randn(400, 4)
    index = torch.randint(0, 400, (3000,))
    gather = torch.ops.graphloc.gather_rows
    assert torch.equal(gather(src.cuda(), index.cuda()).cpu(), gather(src, index))
    with pytest.raises(RuntimeError, match=r"index\[0\] = 400 is out of range: src has 400"):
        gather(src.cuda(), torch.tensor([400, 1]).cuda())
    cpu, gpu = _pair()
    scores = torch.randn(cpu.num_edges, 4)
    assert torch.equal(gpu.to_csr_order(scores.cuda()).cpu(), cpu.to_csr_order(scores))
    assert torch.equal(gpu.from_csr_order(scores.cuda()).cpu(), cpu.from_csr_order(scores))


def _unaligned(t):
    """``t``'s values in a contiguous tensor starting one element past a 16-byte boundary
    (the kernels' one-element path)."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:]
    return flat.view(t.shape).copy_(t)


LAYOUT_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-5, torch.bfloat16: 3e-2}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("channels", [1, 2, 4, 8, 24, 64, 128, 130, 264])
def test_spmm_kernel_row_layouts(dtype, channels):
    """Every pack width and row-group size of the CUDA spmm kernel (wide rows take several
    sweeps, unaligned rows one element per lane), each reduction, per-head weights, and the
    edge-order reduction, against the CPU kernel."""
    cpu, gpu = _pair(seed=63)
    gen = torch.Generator().manual_seed(channels)
    x = torch.randn(310, channels, generator=gen).to(dtype)
    heads = 2 if channels % 2 == 0 else 1
    w = torch.rand(cpu.num_edges, heads, generator=gen).to(dtype)
    spmm = torch.ops.graphloc.spmm
    tol = LAYOUT_TOLERANCE[dtype]
    for reduce in REDUCES:
        for xs in (x, _unaligned(x)):
            for value in (None, w):
                want = spmm(cpu.csr.indptr, cpu.csr.indices, value, xs, reduce)
                got = spmm(gpu.csr.indptr, gpu.csr.indices, None if value is None else value.cuda(),
                           xs.cuda() if xs is x else _unaligned(xs.cuda()), reduce)
                torch.testing.assert_close(got[0].cpu(), want[0], rtol=tol, atol=tol)
                if reduce in ("max", "min") and dtype == torch.float64:
                    assert torch.equal(got[1].cpu(), want[1])
        src = torch.randn(cpu.num_edges, channels, generator=gen).to(dtype)
        torch.testing.assert_close(
            ops.segment_reduce(src.cuda(), gpu.csr.indptr, reduce).cpu(),
            ops.segment_reduce(src, cpu.csr.indptr, reduce), rtol=tol, atol=tol)


def _attention_inputs(cpu, heads, channels, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    score = torch.randn(cpu.num_edges, heads, generator=gen) * 4
    masked = torch.rand(cpu.num_edges, heads, generator=gen) < 0.2
    score[masked] = -float("inf")  # weight 0; rows whose scores are all masked get 0
    x = torch.randn(cpu.num_nodes, heads * channels, generator=gen)
    grad = torch.randn(cpu.num_nodes, heads * channels, generator=gen)
    grad_lse = torch.randn(cpu.num_nodes, heads, generator=gen)
    return [t.to(dtype) for t in (score, x, grad, grad_lse)]


def _attention_backward(graph, score, lse, out, grad, grad_lse, x, need_score, need_x):
    csr, csc = graph.csr, graph.csc
    return torch.ops.graphloc.segment_attention_backward(
        score, lse, out, grad, grad_lse, csr.indptr, csr.indices, x, csc.indptr, csc.indices,
        csc.perm, need_score, need_x)


# fused on the GPU: (1, 64), (4, 16), (8, 8), (2, 4), (1, 3), (16, 2); composed: (3, 12)
# (a head of 3 packs), (1, 130) and (2, 96) (wider than a warp of packs)
ATTENTION_SHAPES = [(1, 64), (4, 16), (8, 8), (2, 4), (1, 3), (16, 2), (3, 12), (1, 130),
                    (2, 96)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("heads", "channels"), ATTENTION_SHAPES)
def test_attention_kernels_row_layouts(dtype, heads, channels):
    """The attention forward (out and lse) and both gradients, with and without a
    log-sum-exp gradient and each gradient alone, against the CPU kernels, for every row
    layout of the CUDA kernels and the composed fallback, with masked scores."""
    cpu, gpu = _pair(seed=64)
    score, x, grad, grad_lse = _attention_inputs(cpu, heads, channels, dtype, heads * channels)
    tol = LAYOUT_TOLERANCE[dtype]
    attention = torch.ops.graphloc.segment_attention
    out, lse = attention(score, cpu.csr.indptr, cpu.csr.indices, x)
    gpu_inputs = [t.cuda() for t in (score, x, grad, grad_lse)]
    for xs in (gpu_inputs[1], _unaligned(gpu_inputs[1])):
        got = attention(gpu_inputs[0], gpu.csr.indptr, gpu.csr.indices, xs)
        torch.testing.assert_close([t.cpu() for t in got], [out, lse], rtol=tol, atol=tol)
    for lse_grad in (grad_lse, None):
        for need in ((True, True), (True, False), (False, True)):
            want = _attention_backward(cpu, score, lse, out, grad, lse_grad, x, *need)
            got = _attention_backward(gpu, gpu_inputs[0], lse.cuda(), out.cuda(), gpu_inputs[2],
                                      None if lse_grad is None else gpu_inputs[3],
                                      gpu_inputs[1], *need)
            for mine, theirs in zip(got, want, strict=True):
                torch.testing.assert_close(mine.cpu(), theirs, rtol=tol, atol=tol)


def test_attention_special_scores_agree():
    """NaN and +inf scores make their rows NaN (as torch.softmax) on both devices, forward
    and backward; fully masked rows give 0."""
    cpu, gpu = _pair(seed=65)
    score, x, grad, _ = _attention_inputs(cpu, 4, 16, torch.float32, 65)  # in CSR order
    indptr = cpu.csr.indptr
    nan_row, inf_row, masked_row = (indptr[1:] - indptr[:-1]).nonzero().flatten()[:3].tolist()
    score[indptr[nan_row]] = float("nan")
    score[indptr[inf_row]] = float("inf")
    score[indptr[masked_row]:indptr[masked_row + 1]] = -float("inf")
    score = cpu.from_csr_order(score)

    def run(graph, score, x, grad):
        s, xs = score.clone().requires_grad_(), x.clone().requires_grad_()
        out = ops.segment_attention(graph, s, xs.view(-1, 4, 16))
        return (out, *torch.autograd.grad(out, (s, xs), grad.view(-1, 4, 16)))
    want = run(cpu, score, x, grad)
    got = run(gpu, score.cuda(), x.cuda(), grad.cuda())
    for mine, theirs in zip(got, want, strict=True):
        torch.testing.assert_close(mine.cpu(), theirs, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert want[0][nan_row].isnan().all() and want[0][inf_row].isnan().all()
    assert (want[0][masked_row] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16,
                                   torch.int32, torch.int64])
@pytest.mark.parametrize("width", [1, 3, 4, 17])
def test_gather_rows_any_width_and_dtype(dtype, width):
    """The CUDA row gather gives the indexed rows for every dtype and row width, from
    unaligned sources too, with either index dtype; Graph's edge reordering goes through it."""
    src = (torch.randn(500, width) * 100).to(dtype)
    index = torch.randint(0, 500, (2000,))
    gather = torch.ops.graphloc.gather_rows
    for rows in (src.cuda(), _unaligned(src.cuda())):
        for idx in (index.cuda(), index.int().cuda()):
            assert torch.equal(gather(rows, idx).cpu(), src[index])
    cpu, gpu = _pair(seed=66)
    values = torch.randn(cpu.num_edges, width).to(dtype)
    assert torch.equal(gpu.from_csr_order(gpu.to_csr_order(values.cuda())).cpu(), values)
    assert torch.equal(gpu.to_csr_order(values.cuda()).cpu(), cpu.to_csr_order(values))


def test_csr_facts_on_the_gpu_are_the_cpus():
    """The facts behind every CUDA op's CSR and index checks (one read back) equal the
    CPU's, for valid and broken arrays of both index dtypes (so a broken CSR fails)."""
    for dtype in (torch.int32, torch.int64):
        for indptr, index in csr_fact_cases():
            args = [None if t is None else t.to(dtype) for t in (indptr, index)]
            on_gpu = torch.ops.graphloc.csr_facts(*[None if t is None else t.cuda() for t in args])
            assert on_gpu.tolist() == torch.ops.graphloc.csr_facts(*args).tolist()


def test_a_product_that_overflows_is_inf_before_it_is_summed_on_the_gpu():
    """As on the CPU (test_special_values.py): torch rounds each product before the sum, so
    1e30 * 1e30 is inf and inf beside -inf sums to NaN; an FMA keeps the product exact and
    gives -inf. The CUDA kernels are built with --fmad=false (setup.py) for this."""
    graph = Graph(torch.tensor([[0, 1], [0, 0]]), num_nodes=2).to("cuda")
    x = torch.tensor([[float("-inf")], [1e30]], device="cuda")
    weight = torch.tensor([1.0, 1e30], device="cuda")
    previous = ops.set_spmm_backend("graphloc")
    try:
        out = ops.spmm(graph, x, weight)
    finally:
        ops.set_spmm_backend(previous)
    assert (x * weight.unsqueeze(1)).sum(0).isnan().all() and out[0].isnan().all()
    a = torch.tensor([[float("-inf"), 1e30]], device="cuda").expand(2, 2).contiguous()
    b = torch.tensor([[1.0, 1e30]], device="cuda").expand(2, 2).contiguous()
    scores = ops.sddmm(graph, a, b, "dot")
    assert (a[0] * b[0]).sum().isnan() and scores.isnan().all()
