"""CUDA kernels against the CPU kernels (run where a GPU and a CUDA build are present)."""

import pytest
import torch
from helpers import random_edge_index

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


@pytest.mark.parametrize("magnitude", [1e6, 1e30])
def test_attention_backward_at_large_scores_is_the_cpu_softmaxs(magnitude):
    """float32 scores whose log-sum-exp rounds at their scale (tied maxima): the composed
    CUDA backward takes the softmax itself, as the CPU kernel renormalises its rows
    (exp(score - lse) weighed two tied 1e30 scores 1 each)."""
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
