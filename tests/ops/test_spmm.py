"""spmm and segment_reduce: kernels against the pure-torch reference, gradients, determinism."""

import pytest
import torch
from helpers import (
    graphs,
    out_of_place_gradient_sums,
    random_edge_index,
    requires_ext,
    to_int64,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext
REDUCES = ["sum", "mean", "max", "min"]
kernels = torch.ops.graphloc


@settings(max_examples=40, deadline=None)
@given(graph=graphs(), channels=st.sampled_from([1, 2, 3, 4, 64, 130]),
       reduce=st.sampled_from(REDUCES), weighted=st.booleans(), int64=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_spmm_matches_reference(graph, channels, reduce, weighted, int64, dtype):
    indptr, indices = to_int64(graph) if int64 else (graph.csr.indptr, graph.csr.indices)
    x = torch.randn(graph.num_nodes, channels, dtype=dtype)
    value = torch.rand(graph.num_edges, dtype=dtype) + 0.5 if weighted else None
    out, arg = kernels.spmm(indptr, indices, value, x, reduce)
    ref_out, ref_arg = reference.spmm(indptr, indices, value, x, reduce)
    tol = 1e-4 if dtype == torch.float32 else 1e-10  # sums of 10^4 terms in another order
    torch.testing.assert_close(out, ref_out, rtol=tol, atol=tol)
    torch.testing.assert_close(arg, ref_arg)


@pytest.mark.parametrize("channels", [1, 2, 4, 8])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_narrow_rows_with_ties_match_reference(channels, reduce, dtype):
    """Rows of 1, 2 and 4 channels take a register tile of the whole row: against the
    reference, with many ties (the first edge in CSR order wins), a hub, empty rows."""
    graph = Graph(random_edge_index(40, 400, seed=9, hub_degree=300), num_nodes=45)
    gen = torch.Generator().manual_seed(channels)
    x = torch.randint(-3, 4, (45, channels), generator=gen).to(dtype)
    value = torch.randint(1, 3, (graph.num_edges,), generator=gen).to(dtype)
    for weights in (None, value):
        out, arg = kernels.spmm(graph.csr.indptr, graph.csr.indices, weights, x, reduce)
        ref_out, ref_arg = reference.spmm(graph.csr.indptr, graph.csr.indices,
                                          None if weights is None else weights.double(),
                                          x.double(), reduce)
        torch.testing.assert_close(out.double(), ref_out, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(arg, ref_arg.to(arg.dtype))


@settings(max_examples=25, deadline=None)
@given(graph=graphs(max_edges=80), heads=st.sampled_from([2, 4]),
       reduce=st.sampled_from(REDUCES))
def test_spmm_multi_head_weights(graph, heads, reduce):
    x = torch.randn(graph.num_nodes, heads, 5, dtype=torch.float64)
    w = torch.rand(graph.num_edges, heads, dtype=torch.float64)
    out = ops.spmm(graph, x, w, reduce)
    expected = torch.stack([ops.spmm(graph, x[:, h].contiguous(), w[:, h].contiguous(), reduce)
                            for h in range(heads)], dim=1)
    torch.testing.assert_close(out, expected)


def test_spmm_dense_oracle():
    # Brute force: A[i, j] = summed weight of the edges j -> i, out = A @ x.
    edge_index = random_edge_index(30, 200, seed=1)
    graph = Graph(edge_index, num_nodes=30)
    w = torch.rand(edge_index.size(1), dtype=torch.float64)
    dense = torch.zeros(30, 30, dtype=torch.float64).index_put_(
        (edge_index[1], edge_index[0]), w, accumulate=True)
    x = torch.randn(30, 7, dtype=torch.float64)
    torch.testing.assert_close(ops.spmm(graph, x, w), dense @ x)
    count = torch.bincount(edge_index[1], minlength=30).clamp(min=1).unsqueeze(1)
    torch.testing.assert_close(ops.spmm(graph, x, w, "mean"), dense @ x / count)


def test_spmm_max_brute_force_and_empty_rows():
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 1, 1, 3]])
    graph = Graph(edge_index, num_nodes=5)
    x = torch.tensor([[1.0, -4.0], [3.0, 2.0], [2.0, 5.0], [0.0, 0.0], [9.0, 9.0]])
    out = ops.spmm(graph, x, reduce="max")
    expected = torch.tensor([[0.0, 0.0], [3.0, 5.0], [0.0, 0.0], [2.0, 5.0], [0.0, 0.0]])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(ops.spmm(graph, x, reduce="min")[1], torch.tensor([1.0, -4.0]))


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("weighted", [False, True])
def test_spmm_gradcheck(reduce, weighted):
    graph = Graph(random_edge_index(12, 40, seed=2), num_nodes=12)
    x = torch.randn(12, 3, dtype=torch.float64, requires_grad=True)
    w = (torch.rand(graph.num_edges, dtype=torch.float64) + 0.5).requires_grad_(weighted)
    assert torch.autograd.gradcheck(lambda x, w: ops.spmm(graph, x, w, reduce), (x, w))


@pytest.mark.parametrize("reduce", REDUCES)
def test_spmm_gradcheck_multi_head(reduce):
    graph = Graph(random_edge_index(10, 30, seed=3), num_nodes=10)
    x = torch.randn(10, 2, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(graph.num_edges, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: ops.spmm(graph, x, w, reduce), (x, w))


@pytest.mark.parametrize("reduce", REDUCES)
def test_spmm_gradients_match_reference(reduce):
    graph = Graph(random_edge_index(50, 300, seed=4, hub_degree=100), num_nodes=50)
    x = torch.randn(50, 16, requires_grad=True)
    w = torch.rand(graph.num_edges, requires_grad=True)
    g = torch.randn(50, 16)
    grads = torch.autograd.grad(ops.spmm(graph, x, w, reduce), (x, w), g)
    v = graph.to_csr_order(w)
    ref = reference.spmm(graph.csr.indptr, graph.csr.indices, v, x, reduce)[0]
    ref_grads = torch.autograd.grad(ref, (x, w), g)
    for got, expected in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_spmm_bfloat16_accumulates_in_float32():
    graph = Graph(random_edge_index(40, 400, seed=5, hub_degree=2000), num_nodes=40)
    x = torch.randn(40, 64)
    out = ops.spmm(graph, x.bfloat16())
    expected = ops.spmm(graph, x.bfloat16().float())  # same inputs, float32 all the way
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("reduce", REDUCES)
def test_results_do_not_depend_on_thread_count(reduce):
    graph = Graph(random_edge_index(5000, 200_000, seed=6, hub_degree=10_000), num_nodes=5000)
    x = torch.randn(5000, 33)
    w = torch.rand(graph.num_edges)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.spmm(graph, x, w, reduce)
        torch.set_num_threads(2)
        two = ops.spmm(graph, x, w, reduce)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)  # bitwise: one thread owns each row


@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_weighted_backward_second_order(op):
    """The backward of a weighted spmm (and of sddmm's dot) is itself a weighted spmm over
    the transpose: its gradients (double backward) against finite differences."""
    graph = Graph(random_edge_index(9, 30, seed=22), num_nodes=9)
    x = torch.randn(9, 4, dtype=torch.float64, requires_grad=True)
    if op == "spmm":
        w = torch.rand(graph.num_edges, 2, dtype=torch.float64, requires_grad=True)
        inputs, fn = (x, w), lambda x, w: ops.spmm(graph, x, w)
    else:
        b = torch.randn(9, 4, dtype=torch.float64, requires_grad=True)
        inputs, fn = (x, b), lambda a, b: ops.sddmm(graph, a, b)
    assert torch.autograd.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("op", ["spmm", "sddmm", "segment_attention", "spmm 3-D"])
def test_gradients_of_a_shared_input_sum_in_place(op):
    """x feeds a matmul and a graph op: the graph op's gradient for x must not be a view
    of another tensor (as a reshape of x would make it), so that autograd adds the two
    gradients in place. Oracle: the same graph with torch's own ops in place of the graph
    op, which sums in place; and the gradient itself against that graph's."""
    graph = Graph(random_edge_index(60, 400, seed=23), num_nodes=60)
    x = torch.randn(60, 8, requires_grad=True)
    w = torch.randn(8, 8)
    src, dst = graph.edge_index.long()
    graph_ops = {
        "spmm": lambda x: ops.spmm(graph, x),
        "sddmm": lambda x: ops.segment_reduce(ops.sddmm(graph, x, x, "mul"),
                                              graph.csr.indptr),
        "segment_attention": lambda x: ops.segment_attention(
            graph, torch.zeros(graph.num_edges), x),
        "spmm 3-D": lambda x: ops.spmm(graph, x.view(60, 2, 4)).view(60, 8),
    }
    dense_ops = {
        "spmm": lambda x: torch.zeros_like(x).index_add(0, dst, x[src]),
        "sddmm": None,
        "segment_attention": None,
        "spmm 3-D": None,
    }
    out = x @ w + graph_ops[op](x)
    # a 3-D input is a view of x by construction: there the sum cannot be in place
    assert out_of_place_gradient_sums(out, [x], (60, 8)) == (1 if op == "spmm 3-D" else 0)
    if dense_ops[op] is not None:
        got = torch.autograd.grad(x @ w + graph_ops[op](x), x, torch.ones(60, 8))[0]
        reference_out = x @ w + dense_ops[op](x)
        assert out_of_place_gradient_sums(reference_out, [x], (60, 8)) == 0
        expected = torch.autograd.grad(x @ w + dense_ops[op](x), x, torch.ones(60, 8))[0]
        torch.testing.assert_close(got, expected)


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(0, 6), min_size=1, max_size=30),
       channels=st.sampled_from([1, 2, 3, 4, 64, 130]), reduce=st.sampled_from(REDUCES))
def test_segment_reduce_matches_reference(lengths, channels, reduce):
    indptr = torch.tensor([0, *lengths]).cumsum(0)
    src = torch.randn(int(indptr[-1]), channels, dtype=torch.float64)
    out, arg = kernels.segment_reduce(src, indptr, reduce)
    ref_out, ref_arg = reference.segment_reduce(src, indptr, reduce)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(arg, ref_arg)
    torch.testing.assert_close(ops.segment_reduce(src, indptr, reduce), ref_out)


@pytest.mark.parametrize("reduce", REDUCES)
def test_segment_reduce_and_gather_csr_gradcheck(reduce):
    indptr = torch.tensor([0, 2, 2, 5, 9])
    src = torch.randn(9, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: ops.segment_reduce(s, indptr, reduce), (src,))
    rows = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda r: kernels.gather_csr(r, indptr, 9), (rows,))
    torch.testing.assert_close(kernels.gather_csr(rows, indptr, 9),
                               reference.gather_csr(rows, indptr, 9))
