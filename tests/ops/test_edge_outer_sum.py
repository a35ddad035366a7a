"""edge_outer_sum (NNConv's regrouped aggregation in one kernel) against its definition
written with a Python loop over the edges: the outer product weight[e] (x) x[j] summed into
row i; forward and both gradients, on random graphs (hubs, empty rows, loops, parallel
edges, bipartite), every register width, special values, and the bad inputs the kernel must
refuse."""

import pytest
import torch
from helpers import (
    assert_matches_definition,
    graphs,
    hub_graph,
    random_edge_index,
    requires_ext,
    to_int64,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext


def _definition(graph, weight, x):
    """Edge by edge, in the graph's edge order."""
    out = [x.new_zeros(weight.size(1), x.size(1)) for _ in range(graph.num_nodes)]
    for e, (j, i) in enumerate(graph.edge_index.t().tolist()):
        out[i] = out[i] + torch.outer(weight[e], x[j])
    return torch.stack(out) if out else x.new_zeros(0, weight.size(1), x.size(1))


def _inputs(graph, heads, channels, gen, scale=1.0):
    f64 = dict(dtype=torch.float64, generator=gen)
    return (torch.randn(graph.num_edges, heads, **f64) * scale,
            torch.randn(graph.num_src_nodes, channels, **f64))


def _check(graph, weight, x, dtype=torch.float64, tol=1e-10):
    assert_matches_definition(lambda *t: ops.edge_outer_sum(graph, *t),
                              lambda *t: _definition(graph, *t), (weight, x), dtype, tol)


@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=30, max_edges=120, allow_hub=False),
       heads=st.sampled_from([1, 2, 5, 33]), channels=st.sampled_from([1, 3, 8, 16, 32, 64, 65]),
       scale=st.sampled_from([1.0, 30.0]), seed=st.integers(0, 2**31 - 1))
def test_edge_outer_sum_matches_its_definition(graph, heads, channels, scale, seed):
    assume(graph.num_edges > 0)  # (edgeless graphs: their own test below)
    gen = torch.Generator().manual_seed(seed)
    _check(graph, *_inputs(graph, heads, channels, gen, scale))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-10),
                                       (torch.bfloat16, 0.05)])
def test_hubs_empty_rows_loops_and_int64_indices(dtype, tol):
    graph = hub_graph()
    gen = torch.Generator().manual_seed(5)
    weight, x = _inputs(graph, 3, 16, gen)
    _check(graph, weight, x, dtype=dtype, tol=tol)
    k = torch.ops.graphloc
    w, xc = graph.to_csr_order(weight), x
    narrow = k.edge_outer_sum(graph.csr.indptr, graph.csr.indices, w, xc)
    torch.testing.assert_close(k.edge_outer_sum(*to_int64(graph), w, xc), narrow, rtol=0, atol=0)


def test_one_weight_per_edge_bipartite_graphs_and_nodeless_graphs():
    src_ids = torch.arange(20)
    graph = Graph.bipartite(torch.stack([src_ids, src_ids % 3]), (20, 3))
    gen = torch.Generator().manual_seed(6)
    _check(graph, *_inputs(graph, 2, 5, gen))
    weight, x = _inputs(graph, 1, 5, gen)
    torch.testing.assert_close(ops.edge_outer_sum(graph, weight.view(-1), x),
                               _definition(graph, weight, x))
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    assert ops.edge_outer_sum(nodeless, torch.zeros(0, 3), torch.zeros(0, 4)).shape == (0, 3, 4)
    edgeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=4)
    x = torch.randn(4, 2, requires_grad=True)
    weight = torch.zeros(0, 3, requires_grad=True)
    out = ops.edge_outer_sum(edgeless, weight, x)
    assert torch.equal(out, torch.zeros(4, 3, 2))
    grads = torch.autograd.grad(out.sum(), [weight, x])
    assert grads[0].shape == (0, 3) and torch.equal(grads[1], torch.zeros(4, 2))


def test_kernel_and_composed_path_agree_on_special_values():
    """NaN propagates to its rows and their gradients, and +-inf as IEEE arithmetic does
    (a 0 weight times an infinite feature is NaN, as torch's product), on the kernel and on
    the per-edge products of the pure-torch path alike."""
    graph = Graph(random_edge_index(12, 60, seed=7), num_nodes=12)
    gen = torch.Generator().manual_seed(8)
    weight, x = _inputs(graph, 4, 6, gen)
    weight[3, 1], weight[5, 0], weight[7, 2] = float("nan"), float("inf"), 0.0
    x[2, 2], x[5, 4], x[6, 0] = float("inf"), float("-inf"), float("nan")
    inputs = [t.clone().float().requires_grad_() for t in (weight, x)]
    twins = [t.detach().clone().requires_grad_() for t in inputs]
    kernel = ops.edge_outer_sum(graph, *inputs)
    composed = reference.edge_outer_sum(graph.csr.indptr, graph.csr.indices,
                                        graph.to_csr_order(twins[0]), twins[1])
    torch.testing.assert_close(kernel, composed.view_as(kernel), equal_nan=True)
    torch.testing.assert_close(kernel, _definition(graph, *twins), equal_nan=True)
    grad = torch.randn(kernel.shape, generator=gen, dtype=torch.float64).float()
    grad[1, 2, 3] = float("inf")
    for a, b in zip(torch.autograd.grad(kernel, inputs, grad),
                    torch.autograd.grad(composed.view_as(kernel), twins, grad), strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_second_derivatives_go_through_the_composed_backward():
    graph = Graph(random_edge_index(10, 40, seed=9), num_nodes=10)
    gen = torch.Generator().manual_seed(10)
    inputs = [t.requires_grad_() for t in _inputs(graph, 3, 4, gen)]
    torch.autograd.gradcheck(lambda *t: ops.edge_outer_sum(graph, *t), inputs)
    torch.autograd.gradgradcheck(lambda *t: ops.edge_outer_sum(graph, *t), inputs)


def test_bad_inputs_are_refused_by_name():
    graph = Graph(random_edge_index(5, 12, seed=11), num_nodes=5)
    weight, x = torch.randn(graph.num_edges, 3), torch.randn(5, 6)
    with pytest.raises(ValueError, match="x has 4 rows but the graph has 5 nodes"):
        ops.edge_outer_sum(graph, weight, x[:4])
    with pytest.raises(ValueError, match=r"weight must have shape \[E\] or \[E, heads\] with "
                                         rf"E = {graph.num_edges}, got \[11, 3\]"):
        ops.edge_outer_sum(graph, weight[:11], x)
    with pytest.raises(ValueError, match=rf"weight has shape \[{graph.num_edges}, 0\]: 0 heads"):
        ops.edge_outer_sum(graph, weight[:, :0], x)
    with pytest.raises(ValueError, match=r"x must be \[N_src, C\], got shape \[5, 2, 3\]"):
        ops.edge_outer_sum(graph, weight, x.view(5, 2, 3))
    with pytest.raises(TypeError, match="weight has dtype torch.float64 but the features"):
        ops.edge_outer_sum(graph, weight.double(), x)
    with pytest.raises(TypeError, match="x must be float16, float32, float64 or bfloat16"):
        ops.edge_outer_sum(graph, weight, x.long())
    k = torch.ops.graphloc
    L = lambda *v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    x, w = torch.randn(3, 4), torch.randn(3, 2)
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 9 is out of range"):
        k.edge_outer_sum(L(0, 1, 2, 3), L(0, 9, 1), w, x)
    with pytest.raises(RuntimeError, match="weight has 2 rows but the graph has 3 edges"):
        k.edge_outer_sum(L(0, 1, 2, 3), L(0, 2, 1), w[:2], x)
    with pytest.raises(RuntimeError, match="weight is Double but x is Float"):
        k.edge_outer_sum(L(0, 1, 2, 3), L(0, 2, 1), w.double(), x)
    with pytest.raises(RuntimeError, match=r"grad must be Float of shape \[3, 8\]"):
        k.edge_outer_sum_backward(L(0, 1, 2, 3), L(1, 2, 0), w, x, torch.randn(3, 4), True,
                                  True)
    with pytest.raises(RuntimeError, match=r"indices\[2\] = -1 is out of range"):
        k.edge_outer_sum_backward(L(0, 1, 2, 3), L(1, 2, -1), w, x, torch.randn(3, 8), True,
                                  True)


# --- edge_head_sum, its adjoint -------------------------------------------------------------

def _head_definition(graph, weight, x):
    """Edge by edge: the source's K blocks weighted by the edge's K values, summed."""
    out = [x.new_zeros(x.size(2)) for _ in range(graph.num_nodes)]
    for e, (j, i) in enumerate(graph.edge_index.t().tolist()):
        out[i] = out[i] + (weight[e].unsqueeze(1) * x[j]).sum(0)
    return torch.stack(out) if out else x.new_zeros(0, x.size(2))


def _head_inputs(graph, heads, channels, gen, scale=1.0):
    f64 = dict(dtype=torch.float64, generator=gen)
    return (torch.randn(graph.num_edges, heads, **f64) * scale,
            torch.randn(graph.num_src_nodes, heads, channels, **f64))


@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=30, max_edges=120, allow_hub=False),
       heads=st.sampled_from([1, 2, 5, 33]), channels=st.sampled_from([1, 3, 4, 16, 65]),
       scale=st.sampled_from([1.0, 30.0]), seed=st.integers(0, 2**31 - 1))
def test_edge_head_sum_matches_its_definition(graph, heads, channels, scale, seed):
    assume(graph.num_edges > 0)
    gen = torch.Generator().manual_seed(seed)
    assert_matches_definition(lambda *t: ops.edge_head_sum(graph, *t),
                              lambda *t: _head_definition(graph, *t),
                              _head_inputs(graph, heads, channels, gen, scale))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-10),
                                       (torch.bfloat16, 0.05)])
def test_edge_head_sum_on_hubs_bipartite_and_empty_graphs(dtype, tol):
    gen = torch.Generator().manual_seed(12)
    src_ids = torch.arange(20)
    for graph in (hub_graph(), Graph.bipartite(torch.stack([src_ids, src_ids % 3]), (20, 3))):
        assert_matches_definition(lambda *t, g=graph: ops.edge_head_sum(g, *t),
                                  lambda *t, g=graph: _head_definition(g, *t),
                                  _head_inputs(graph, 3, 4, gen), dtype, tol)
    edgeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=4)
    x = torch.randn(4, 3, 2, requires_grad=True)
    weight = torch.zeros(0, 3, requires_grad=True)
    out = ops.edge_head_sum(edgeless, weight, x)
    assert torch.equal(out, torch.zeros(4, 2))
    grads = torch.autograd.grad(out.sum(), [weight, x])
    assert grads[0].shape == (0, 3) and torch.equal(grads[1], torch.zeros(4, 3, 2))
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    assert ops.edge_head_sum(nodeless, torch.zeros(0, 2), torch.zeros(0, 2, 5)).shape == (0, 5)


def test_edge_head_sum_is_the_adjoint_of_edge_outer_sum():
    """<edge_outer_sum(w, y), x> = <y, edge_head_sum on the reversed graph...>: checked
    as <edge_head_sum(w, p), g> = <p, edge_outer_sum^T>, i.e. both are one bilinear form."""
    graph = Graph(random_edge_index(9, 50, seed=13), num_nodes=9)
    gen = torch.Generator().manual_seed(14)
    weight, p = _head_inputs(graph, 3, 4, gen)
    g = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    reversed_graph = Graph(graph.edge_index.flip(0), num_nodes=9)
    left = (ops.edge_head_sum(graph, weight, p) * g).sum()
    right = (ops.edge_outer_sum(reversed_graph, weight, g) * p).sum()
    torch.testing.assert_close(left, right)


def test_edge_head_sum_kernels_and_composed_path_agree_on_special_values():
    graph = Graph(random_edge_index(12, 60, seed=15), num_nodes=12)
    gen = torch.Generator().manual_seed(16)
    weight, x = _head_inputs(graph, 4, 3, gen)
    weight[3, 1], weight[5, 0], weight[7, 2] = float("nan"), float("inf"), 0.0
    x[2, 1, 2], x[5, 3, 0], x[6, 0, 1] = float("inf"), float("-inf"), float("nan")
    inputs = [t.clone().float().requires_grad_() for t in (weight, x)]
    twins = [t.detach().clone().requires_grad_() for t in inputs]
    fused = ops.edge_head_sum(graph, *inputs)
    composed = ops.spmm(graph, twins[1], twins[0]).sum(1)  # (its path off the CPU)
    torch.testing.assert_close(fused, composed, equal_nan=True)
    grad = torch.randn(fused.shape, generator=gen, dtype=torch.float64).float()
    grad[4, 1] = float("inf")
    for a, b in zip(torch.autograd.grad(fused, inputs, grad),
                    torch.autograd.grad(composed, twins, grad), strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_edge_head_sum_second_derivatives_and_bad_inputs():
    graph = Graph(random_edge_index(8, 30, seed=17), num_nodes=8)
    gen = torch.Generator().manual_seed(18)
    inputs = [t.requires_grad_() for t in _head_inputs(graph, 3, 2, gen)]
    torch.autograd.gradcheck(lambda *t: ops.edge_head_sum(graph, *t), inputs)
    torch.autograd.gradgradcheck(lambda *t: ops.edge_head_sum(graph, *t), inputs)
    weight, x = torch.randn(graph.num_edges, 3), torch.randn(8, 3, 2)
    with pytest.raises(ValueError, match=r"x must be \[N_src, K, C\] with K = 3 \(weight's "
                                         r"columns\), got shape \[8, 2, 3\]"):
        ops.edge_head_sum(graph, weight, x.view(8, 2, 3))
    with pytest.raises(ValueError, match=r"x must be \[N_src, K, C\] with K = 3"):
        ops.edge_head_sum(graph, weight, x.view(8, 6))
    with pytest.raises(ValueError, match="x has 7 rows but the graph has 8 nodes"):
        ops.edge_head_sum(graph, weight, x[:7])
    with pytest.raises(TypeError, match="weight has dtype torch.float64"):
        ops.edge_head_sum(graph, weight.double(), x)


def test_both_ops_trace_under_compile_with_their_gradients():
    graph = Graph(random_edge_index(20, 80, seed=19), num_nodes=20)
    gen = torch.Generator().manual_seed(20)
    weight, blocks = _head_inputs(graph, 3, 4, gen)
    rows = torch.randn(20, 4, dtype=torch.float64, generator=gen)

    def both(weight, blocks, rows):
        return ops.edge_head_sum(graph, weight, blocks).sum() + \
            ops.edge_outer_sum(graph, weight, rows).pow(2).sum()

    compiled = torch.compile(both, fullgraph=True, backend="aot_eager")
    eager_inputs = [t.clone().requires_grad_() for t in (weight, blocks, rows)]
    traced_inputs = [t.clone().requires_grad_() for t in (weight, blocks, rows)]
    want, got = both(*eager_inputs), compiled(*traced_inputs)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got, traced_inputs),
                    torch.autograd.grad(want, eager_inputs), strict=True):
        torch.testing.assert_close(a, b)
