"""Outputs past the kernels' streaming threshold (csrc/cpu/stream.h: 16 MiB and more are
written with non-temporal stores): spmm and additive_attention, forward and backward,
against independent float64 implementations on torch's scatter ops."""

import pytest
import torch
import torch.nn.functional as F
from helpers import random_edge_index, requires_ext

from graphloc import Graph, ops

pytestmark = requires_ext
STREAM_BYTES = 16 << 20  # kStreamBytes in csrc/cpu/stream.h
NODES, CHANNELS = 70_000, 64  # a [70000, 64] float32 output is 17.9 MB


@pytest.fixture(scope="module")
def graph():
    return Graph(random_edge_index(NODES, 4 * NODES, seed=3, hub_degree=5_000), num_nodes=NODES)


def _streamed(t: torch.Tensor) -> torch.Tensor:
    assert t.numel() * t.element_size() >= STREAM_BYTES, "below the streaming threshold"
    return t


def _spmm_oracle(graph, x, weight, reduce):
    src, dst = graph.edge_index
    messages = x[src] * (1.0 if weight is None else weight[:, None])
    out = torch.zeros(graph.num_nodes, x.size(1), dtype=x.dtype).index_add(0, dst, messages)
    if reduce == "mean":
        degree = torch.bincount(dst, minlength=graph.num_nodes).clamp(min=1)
        out = out / degree[:, None]
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduce, weighted", [("sum", False), ("sum", True), ("mean", False)])
def test_spmm_forward_and_backward(graph, dtype, reduce, weighted):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(NODES, CHANNELS, generator=gen, dtype=dtype, requires_grad=True)
    weight = torch.rand(graph.num_edges, generator=gen, dtype=dtype) if weighted else None
    out = _streamed(ops.spmm(graph, x, weight, reduce))
    exact = x.detach().double().requires_grad_()
    want = _spmm_oracle(graph, exact, None if weight is None else weight.double(), reduce)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)
    grad = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    (got,) = torch.autograd.grad(out, x, grad.to(dtype))
    (expected,) = torch.autograd.grad(want, exact, grad)
    torch.testing.assert_close(_streamed(got).double(), expected, rtol=tol, atol=tol)


def _attention_oracle(graph, src_scores, dst_scores, x, slope, heads):
    """Per edge: leaky_relu(src[j] + dst[i]), softmax over each destination's edges
    (scatter max, exp, scatter sum), the weighted sum of the source rows."""
    src, dst = graph.edge_index
    score = F.leaky_relu(src_scores[src] + dst_scores[dst], slope)  # [E, H]
    top = torch.full((graph.num_nodes, heads), float("-inf"), dtype=score.dtype)
    top = top.scatter_reduce(0, dst[:, None].expand_as(score), score, "amax")
    p = (score - top[dst]).exp()
    total = torch.zeros(graph.num_nodes, heads, dtype=p.dtype).index_add(0, dst, p)
    alpha = p / total[dst]
    messages = x[src].view(-1, heads, x.size(1) // heads) * alpha[:, :, None]
    out = torch.zeros(graph.num_nodes, *messages.shape[1:], dtype=x.dtype)
    return out.index_add(0, dst, messages).view(graph.num_nodes, -1)


def test_additive_attention_forward_and_backward(graph):
    heads, slope = 4, 0.2
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(NODES, heads, generator=gen) * 2,
              torch.randn(NODES, heads, generator=gen) * 2,
              torch.randn(NODES, CHANNELS, generator=gen)]
    inputs = [t.requires_grad_() for t in inputs]
    exact = [t.detach().double().requires_grad_() for t in inputs]
    out = _streamed(ops.additive_attention(graph, *inputs, negative_slope=slope))
    want = _attention_oracle(graph, *exact, slope, heads)
    torch.testing.assert_close(out.double(), want, rtol=1e-4, atol=1e-4)
    grad = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    got = torch.autograd.grad(out, inputs, grad.float())
    expected = torch.autograd.grad(want, exact, grad)
    _streamed(got[2])
    for g, w in zip(got, expected, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-4 * max(1.0, w.abs().max()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_segment_softmax(dtype):
    """[E, H] weights written block by block from unaligned offsets: the partial lines at
    either end of a block are stored plainly, the whole lines between them streamed."""
    heads, nodes = 4, 100_000
    graph = Graph(random_edge_index(nodes, 1_000_000, seed=4, hub_degree=20_000),
                  num_nodes=nodes)
    gen = torch.Generator().manual_seed(2)
    score = (torch.randn(graph.num_edges, heads, generator=gen, dtype=torch.float64) * 3)
    out = _streamed(ops.segment_softmax(graph, score.to(dtype)))
    dst = graph.edge_index[1]
    top = torch.full((nodes, heads), float("-inf"), dtype=torch.float64).scatter_reduce(
        0, dst[:, None].expand_as(score), score, "amax")
    p = (score - top[dst]).exp()
    want = p / torch.zeros(nodes, heads, dtype=torch.float64).index_add(0, dst, p)[dst]
    tol = 1e-5 if dtype == torch.float32 else 1e-12  # a 20,000-edge row sums in float32
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)
