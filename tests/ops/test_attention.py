"""segment_attention: the fused softmax + weighted sum against the reference and a dense
per-node computation; gradients."""

import pytest
import torch
from helpers import graphs, random_edge_index, requires_ext, to_int64
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
    torch.testing.assert_close(kernels.segment_attention_backward(*args, True, True),
                               _attention_backward_composed(*args))
    grad_score, grad_x = kernels.segment_attention_backward(*args, False, True)
    assert grad_score.numel() == 0 and grad_x.shape == x.shape


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
