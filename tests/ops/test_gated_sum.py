"""gated_sum (the residual gated conv's aggregation in one kernel) against its definition
written with a Python loop over the edges: sigmoid(key[i] + query[j]) * value[j] summed into
row i; forward and the three gradients, on random graphs (hubs, empty rows, loops, parallel
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
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext


def _definition(graph, key, query, value):
    """Edge by edge, in the graph's edge order."""
    out = [key.new_zeros(key.size(1)) for _ in range(graph.num_nodes)]
    for j, i in graph.edge_index.t().tolist():
        out[i] = out[i] + torch.sigmoid(key[i] + query[j]) * value[j]
    return torch.stack(out) if out else key[:0] * 1.0


def _inputs(graph, channels, gen, scale=1.0):
    f64 = dict(dtype=torch.float64, generator=gen)
    return (torch.randn(graph.num_nodes, channels, **f64) * scale,
            torch.randn(graph.num_src_nodes, channels, **f64) * scale,
            torch.randn(graph.num_src_nodes, channels, **f64))


def _check(graph, key, query, value, dtype=torch.float64, tol=1e-10):
    assert_matches_definition(lambda *t: ops.gated_sum(graph, *t),
                              lambda *t: _definition(graph, *t), (key, query, value), dtype, tol)


@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=30, max_edges=120, allow_hub=False),
       channels=st.sampled_from([1, 3, 8, 16, 32, 64, 65]), scale=st.sampled_from([1.0, 30.0]),
       seed=st.integers(0, 2**31 - 1))
def test_gated_sum_matches_its_definition(graph, channels, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    _check(graph, *_inputs(graph, channels, gen, scale))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-10)])
def test_hubs_empty_rows_loops_and_int64_indices(dtype, tol):
    graph = hub_graph()
    gen = torch.Generator().manual_seed(5)
    inputs = _inputs(graph, 16, gen)
    _check(graph, *inputs, dtype=dtype, tol=tol)
    k = torch.ops.graphloc
    narrow = k.gated_sum(graph.csr.indptr, graph.csr.indices, *inputs)
    torch.testing.assert_close(k.gated_sum(*to_int64(graph), *inputs), narrow, rtol=0, atol=0)


def test_bipartite_graphs_and_nodeless_graphs():
    src_ids = torch.arange(20)
    graph = Graph.bipartite(torch.stack([src_ids, src_ids % 3]), (20, 3))
    gen = torch.Generator().manual_seed(6)
    _check(graph, *_inputs(graph, 5, gen))
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    empty = torch.zeros(0, 4)
    assert ops.gated_sum(nodeless, empty, empty, empty).shape == (0, 4)


def test_kernel_and_composed_path_agree_on_special_values():
    """NaN propagates to its rows and their gradients, and +-inf as IEEE arithmetic does
    (a gate of 0 times an infinite value is NaN, as torch's product), on the kernel and on
    the composed ops (the pure-torch path of other devices) alike."""
    graph = Graph(random_edge_index(12, 60, seed=7), num_nodes=12)
    gen = torch.Generator().manual_seed(8)
    key, query, value = _inputs(graph, 6, gen)
    key[3, 1], query[5, 4], query[6, 0] = float("nan"), float("inf"), float("-inf")
    value[2, 2], key[4, 3] = float("inf"), -1e4  # a saturated gate: exactly 0
    inputs = [t.clone().float().requires_grad_() for t in (key, query, value)]
    twins = [t.detach().clone().requires_grad_() for t in inputs]
    kernel = ops.gated_sum(graph, *inputs)
    gate = torch.sigmoid(ops.sddmm(graph, twins[1], twins[0], "add"))
    composed = ops.spmm(graph, twins[2].unsqueeze(-1), gate).squeeze(-1)
    torch.testing.assert_close(kernel, composed, equal_nan=True)
    twin = reference.gated_sum(graph.csr.indptr, graph.csr.indices, *twins)  # the raw-CSR twin
    torch.testing.assert_close(kernel, twin, equal_nan=True)
    grad = torch.randn(kernel.shape, generator=gen, dtype=torch.float64).float()
    for a, b in zip(torch.autograd.grad(kernel, inputs, grad),
                    torch.autograd.grad(composed, twins, grad), strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_second_derivatives_go_through_the_composed_backward():
    graph = Graph(random_edge_index(10, 40, seed=9), num_nodes=10)
    gen = torch.Generator().manual_seed(10)
    inputs = [t.requires_grad_() for t in _inputs(graph, 3, gen)]
    torch.autograd.gradcheck(lambda *t: ops.gated_sum(graph, *t), inputs)
    torch.autograd.gradgradcheck(lambda *t: ops.gated_sum(graph, *t), inputs)


def test_bad_inputs_are_refused_by_name():
    graph = Graph(random_edge_index(5, 12, seed=11), num_nodes=5)
    key, query, value = torch.randn(5, 6), torch.randn(5, 6), torch.randn(5, 6)
    with pytest.raises(ValueError, match="key has 4 rows but the graph has 5 nodes"):
        ops.gated_sum(graph, key[:4], query, value)
    with pytest.raises(ValueError, match=r"must share C, got \[5, 6\], \[5, 6\] and \[5, 4\]"):
        ops.gated_sum(graph, key, query, value[:, :4])
    with pytest.raises(TypeError, match="must have one dtype"):
        ops.gated_sum(graph, key, query, value.double())
    with pytest.raises(TypeError, match="value must be float16, float32, float64 or bfloat16"):
        ops.gated_sum(graph, key, query, value.long())
    k = torch.ops.graphloc
    L = lambda *v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    x = torch.randn(3, 6)
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 9 is out of range"):
        k.gated_sum(L(0, 1, 2, 3), L(0, 9, 1), x, x, x)
    with pytest.raises(RuntimeError, match=r"value has shape \[3, 4\] but query has shape"):
        k.gated_sum(L(0, 1, 2, 3), L(0, 2, 1), x, x, torch.randn(3, 4))
    with pytest.raises(RuntimeError, match=r"csc_indices\[1\] = 5 is out of range"):
        k.gated_sum_backward(L(0, 1, 2, 3), L(1, 2, 0), x, x, x, x, L(0, 1, 2, 3), L(1, 5, 0),
                             L(0, 1, 2), True, True, True)
    with pytest.raises(RuntimeError, match="grad must be Float of shape"):
        k.gated_sum_backward(L(0, 1, 2, 3), L(1, 2, 0), x, x, x, x[:2], L(0, 1, 2, 3),
                             L(1, 2, 0), L(0, 1, 2), True, True, True)
