"""segment_softmax: against the reference and a per-node dense softmax; gradients."""

import pytest
import torch
from helpers import blocked_layout_graph, graphs, random_edge_index, requires_ext
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext
kernels = torch.ops.graphloc


@settings(max_examples=40, deadline=None)
@given(graph=graphs(), heads=st.sampled_from([1, 2, 3, 4, 8]),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_segment_softmax_matches_reference(graph, heads, dtype):
    score = torch.randn(graph.num_edges, heads, dtype=dtype) * 10
    out = kernels.segment_softmax(score, graph.csr.indptr)
    torch.testing.assert_close(out, reference.segment_softmax(score, graph.csr.indptr))
    g = torch.randn_like(score)
    torch.testing.assert_close(kernels.segment_softmax_backward(out, g, graph.csr.indptr),
                               reference.segment_softmax_backward(out, g, graph.csr.indptr))


def test_segment_softmax_per_node_in_user_order():
    edge_index = random_edge_index(15, 80, seed=10)
    graph = Graph(edge_index, num_nodes=15)
    score = torch.randn(edge_index.size(1), 2) * 50  # large scores: must not overflow
    out = ops.segment_softmax(graph, score)
    for node in range(15):
        into = edge_index[1] == node
        if into.any():
            torch.testing.assert_close(out[into], torch.softmax(score[into], dim=0))
    assert torch.isfinite(out).all()


def test_segment_softmax_gradcheck():
    graph = Graph(random_edge_index(8, 30, seed=11), num_nodes=8)
    score = torch.randn(graph.num_edges, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: ops.segment_softmax(graph, s), (score,))
    flat = torch.randn(graph.num_edges, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: ops.segment_softmax(graph, s), (flat,))


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_softmax_over_blocks_matches_per_node_softmax(heads, dtype):
    """Rows that span the kernel's blocks (a 600-edge row, 300 empty rows, short rows), every
    head count, against torch.softmax per node in float64."""
    graph = blocked_layout_graph()
    gen = torch.Generator().manual_seed(heads)
    scores = (torch.randn(graph.num_edges, heads, generator=gen) * 20).to(dtype)
    out = ops.segment_softmax(graph, scores)
    dst = graph.edge_index[1]
    expected = torch.empty(graph.num_edges, heads, dtype=torch.float64)
    for node in dst.unique().tolist():
        into = dst == node
        expected[into] = torch.softmax(scores[into].double(), dim=0)
    tol = {torch.float32: 1e-6, torch.float64: 1e-12, torch.bfloat16: 1e-2}[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("heads", [2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_rows_around_the_short_row_length(heads, dtype):
    """Row i has i + 1 edges (1 to 24), so with 2, 4 or 8 heads rows fall on both sides of
    the kernels' short-row path (32 values per row), with masked (-inf), NaN and +inf
    scores; against torch.softmax per node, a fully masked head giving 0."""
    gen = torch.Generator().manual_seed(heads)
    dst = torch.arange(24).repeat_interleave(torch.arange(1, 25))
    src = torch.randint(0, 24, (dst.numel(),), generator=gen)
    graph = Graph(torch.stack([src, dst]), num_nodes=24)
    scores = torch.randn(graph.num_edges, heads, generator=gen, dtype=dtype) * 10
    special = torch.rand(graph.num_edges, heads, generator=gen)
    scores[special < 0.2] = float("-inf")
    scores[dst == 3] = float("-inf")  # a fully masked row
    scores[(special > 0.99) & (dst != 3).unsqueeze(1)] = float("nan")
    scores[(special > 0.98) & (special <= 0.99) & (dst != 3).unsqueeze(1)] = float("inf")
    expected = torch.empty_like(scores)
    for node in range(24):
        into = dst == node
        block = scores[into]
        masked = (block == float("-inf")).all(0)
        expected[into] = torch.where(masked, 0.0, torch.softmax(block, dim=0))
    torch.testing.assert_close(ops.segment_softmax(graph, scores), expected, equal_nan=True)
    x = torch.randn(24, heads, 3, generator=gen, dtype=dtype)
    oracle = torch.zeros(24, heads, 3, dtype=dtype).index_add(
        0, dst, x[src] * expected.unsqueeze(-1))
    torch.testing.assert_close(ops.segment_attention(graph, scores, x), oracle, equal_nan=True)
