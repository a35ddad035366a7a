"""segment_softmax: against the reference and a per-node dense softmax; gradients."""

import torch
from helpers import graphs, random_edge_index, requires_ext
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext
kernels = torch.ops.graphloc


@settings(max_examples=40, deadline=None)
@given(graph=graphs(), heads=st.sampled_from([1, 3]),
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
