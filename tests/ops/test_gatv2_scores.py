"""gatv2_scores (GATv2's scores in one kernel) against their definition written with a
Python loop over the edges: att . leaky_relu(src[j] + dst[i]) per edge and head; forward
and the three gradients, on random graphs (hubs, empty rows, loops, parallel edges,
bipartite), special values, and the bad inputs the kernel must refuse."""

import pytest
import torch
import torch.nn.functional as F
from helpers import (
    assert_matches_definition,
    graphs,
    hub_graph,
    random_edge_index,
    requires_ext,
    to_int64,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops

pytestmark = requires_ext


def _definition(graph, src, dst, att, slope):
    """Edge by edge, in the graph's edge order, on torch's scalar-free ops."""
    H, C = att.shape
    rows = []
    for j, i in graph.edge_index.t().tolist():
        pre = src[j].reshape(H, C) + dst[i].reshape(H, C)
        rows.append((F.leaky_relu(pre, slope) * att).sum(-1))
    return torch.stack(rows) if rows else att.sum() * src.new_zeros(0, H)  # with a grad_fn


def _inputs(graph, heads, channels, gen, scale=1.0):
    f64 = dict(dtype=torch.float64, generator=gen)
    return (torch.randn(graph.num_src_nodes, heads * channels, **f64) * scale,
            torch.randn(graph.num_nodes, heads * channels, **f64) * scale,
            torch.randn(heads, channels, **f64))


def _check(graph, src, dst, att, slope, dtype=torch.float64, tol=1e-10):
    assert_matches_definition(lambda *t: ops.gatv2_scores(graph, *t, negative_slope=slope),
                              lambda *t: _definition(graph, *t, slope), (src, dst, att), dtype,
                              tol)


@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=30, max_edges=120, allow_hub=False),
       heads=st.sampled_from([1, 2, 4]), channels=st.sampled_from([1, 3, 16]),
       slope=st.sampled_from([0.2, 0.0, 1.5, -0.3]), seed=st.integers(0, 2**31 - 1))
def test_gatv2_scores_match_their_definition(graph, heads, channels, slope, seed):
    gen = torch.Generator().manual_seed(seed)
    _check(graph, *_inputs(graph, heads, channels, gen), slope)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-10)])
def test_hubs_empty_rows_loops_and_int64_indices(dtype, tol):
    graph = hub_graph()
    gen = torch.Generator().manual_seed(5)
    inputs = _inputs(graph, 4, 16, gen)
    _check(graph, *inputs, 0.2, dtype, tol)
    k = torch.ops.graphloc
    narrow = k.gatv2_scores(graph.csr.indptr, graph.csr.indices, *inputs, 0.2)
    torch.testing.assert_close(k.gatv2_scores(*to_int64(graph), *inputs, 0.2), narrow,
                               rtol=0, atol=0)


def test_bipartite_graphs_and_three_dimensional_rows():
    src_ids = torch.arange(20)
    graph = Graph.bipartite(torch.stack([src_ids, src_ids % 3]), (20, 3))
    gen = torch.Generator().manual_seed(6)
    src, dst, att = _inputs(graph, 2, 5, gen)
    _check(graph, src, dst, att, 0.2)
    flat = ops.gatv2_scores(graph, src, dst, att)
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    assert ops.gatv2_scores(nodeless, src[:0], dst[:0], att).shape == (0, 2)
    torch.testing.assert_close(ops.gatv2_scores(graph, src.view(20, 2, 5), dst.view(3, 2, 5),
                                                att.unsqueeze(0)), flat)


def test_kernel_and_composed_path_agree_on_special_values():
    """NaN propagates to the edge's scores and gradients, +-inf as IEEE arithmetic does, on
    the kernel and on the composed ops (the pure-torch path of other devices) alike."""
    graph = Graph(random_edge_index(12, 60, seed=7), num_nodes=12)
    gen = torch.Generator().manual_seed(8)
    src, dst, att = _inputs(graph, 2, 3, gen)
    src[3, 1], dst[5, 4], src[6, 0] = float("nan"), float("inf"), float("-inf")
    kernel = ops.gatv2_scores(graph, src, dst, att)
    composed = (F.leaky_relu(ops.sddmm(graph, src, dst, "add").view(-1, 2, 3), 0.2)
                * att).sum(-1)
    torch.testing.assert_close(kernel, composed, equal_nan=True)
    _check(graph, src.nan_to_num(0.0), dst.nan_to_num(0.0, 0.0, 0.0), att, 0.2)


def test_second_derivatives_go_through_the_composed_backward():
    graph = Graph(random_edge_index(10, 40, seed=9), num_nodes=10)
    gen = torch.Generator().manual_seed(10)
    inputs = [t.requires_grad_() for t in _inputs(graph, 2, 3, gen)]
    torch.autograd.gradcheck(lambda *t: ops.gatv2_scores(graph, *t), inputs)
    torch.autograd.gradgradcheck(lambda *t: ops.gatv2_scores(graph, *t), inputs)


def test_bad_inputs_are_refused_by_name():
    graph = Graph(random_edge_index(5, 12, seed=11), num_nodes=5)
    src, dst, att = torch.randn(5, 6), torch.randn(5, 6), torch.randn(2, 3)
    with pytest.raises(ValueError, match=r"att must be \[heads, C\] or \[1, heads, C\]"):
        ops.gatv2_scores(graph, src, dst, torch.randn(6))
    with pytest.raises(ValueError, match=r"dst must be \[N, 2, 3\] or \[N, 6\] for att"):
        ops.gatv2_scores(graph, src, torch.randn(5, 4), att)
    with pytest.raises(ValueError, match="src has 4 rows but the graph has 5 nodes"):
        ops.gatv2_scores(graph, torch.randn(4, 6), dst, att)
    with pytest.raises(TypeError, match="must have one dtype"):
        ops.gatv2_scores(graph, src, dst, att.double())
    for slope in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="gatv2_scores: negative_slope must be a finite "
                                             "number"):
            ops.gatv2_scores(graph, src, dst, att, slope)
    k = torch.ops.graphloc
    L = lambda *v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 9 is out of range"):
        k.gatv2_scores(L(0, 1, 2, 3), L(0, 9, 1), torch.randn(3, 6), torch.randn(3, 6), att, 0.2)
    with pytest.raises(RuntimeError, match="src and dst have 6 channels but att holds 3 heads"):
        k.gatv2_scores(L(0, 1, 2, 3), L(0, 2, 1), torch.randn(3, 6), torch.randn(3, 6),
                       torch.randn(3, 3), 0.2)
    with pytest.raises(RuntimeError, match=r"csc_perm\[2\] = 7 is out of range"):
        k.gatv2_scores_backward(L(0, 1, 2, 3), L(1, 2, 0), torch.randn(3, 6), torch.randn(3, 6),
                                att, 0.2, torch.randn(3, 2), L(0, 1, 2, 3), L(1, 2, 0),
                                L(0, 1, 7), True, True, True)
