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


@pytest.mark.parametrize("channels,heads", [(24, 1), (40, 5), (16, 1), (64, 1), (128, 1),
                                            (128, 2), (192, 3), (256, 1), (64, 64), (40, 40),
                                            (128, 128), (3, 3), (192, 24), (64, 8), (96, 6),
                                            (48, 2)])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sum_rows_of_several_blocks_match_reference(channels, heads, reduce, dtype):
    """Rows of one register block (16 and 64 channels, and 128 float channels of one head:
    the width known at compile time), rows wider than one block (the later blocks skip the
    prefetch), per-head weights (narrow heads of 8, 16 or 24 channels sharing a block, each
    vector weighed by its own head), one weight per channel (heads of width 1, loaded as
    lanes; 3 channels: the scalar loop), a hub longer than the longest prefetch distance (256 edges)
    and empty rows, against the reference."""
    graph = Graph(random_edge_index(40, 600, seed=3, hub_degree=300), num_nodes=45)
    gen = torch.Generator().manual_seed(channels)
    x = torch.randn(45, channels, generator=gen, dtype=dtype)
    per_head = torch.rand(graph.num_edges, heads, generator=gen, dtype=dtype) + 0.5
    for weights in (None, per_head):
        out, _ = kernels.spmm(graph.csr.indptr, graph.csr.indices, weights, x, reduce)
        ref_out, _ = reference.spmm(graph.csr.indptr, graph.csr.indices, weights, x, reduce)
        torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels", [8, 64, 3])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_one_weight_per_channel_gives_the_per_edge_products(channels, reduce):
    """Edge values [E, C] on x [N, C, 1] (a continuous filter per edge, as SchNet's): the
    forward and both gradients (x's over the transpose, reading the values through their
    index; the values' from the channels' products) against the per-edge products summed by
    torch, with a NaN and infinities that reach exactly the rows that read them."""
    graph = Graph(random_edge_index(40, 600, seed=4, hub_degree=300), num_nodes=45)
    gen = torch.Generator().manual_seed(channels)
    x = torch.randn(45, channels, 1, generator=gen, dtype=torch.float64)
    w = torch.randn(graph.num_edges, channels, generator=gen, dtype=torch.float64)
    x[3, 0, 0], w[5, -1], w[7, 0] = float("nan"), float("inf"), float("-inf")
    upstream = torch.randn(45, channels, 1, generator=gen, dtype=torch.float64)
    src, dst = graph.edge_index
    degree = torch.bincount(dst, minlength=45).clamp(min=1).view(-1, 1, 1).double()

    def per_edge(x, w):
        total = torch.zeros(45, channels, 1, dtype=torch.float64).index_add(
            0, dst, x[src] * w.unsqueeze(-1))
        return total / degree if reduce == "mean" else total
    results = []
    for run in (lambda x, w: ops.spmm(graph, x, w, reduce), per_edge):
        leaves = [t.clone().requires_grad_() for t in (x, w)]
        out = run(*leaves)
        results.append((out, *torch.autograd.grad(out, leaves, upstream)))
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("channels", [16, 64, 128, 256])
@pytest.mark.parametrize("weighted", [False, True])
def test_sum_gradients_of_one_and_several_blocks_match_reference(channels, weighted):
    """The backward's transposed product takes the same block paths as the forward: x's and
    the weights' gradients against the reference's autograd, a hub of 300 edges."""
    graph = Graph(random_edge_index(40, 600, seed=5, hub_degree=300), num_nodes=45)
    gen = torch.Generator().manual_seed(channels)
    x = torch.randn(45, channels, generator=gen, requires_grad=True)
    w = (torch.rand(graph.num_edges, generator=gen) + 0.5).requires_grad_(weighted)
    grad_out = torch.randn(45, channels, generator=gen)
    ours = torch.autograd.grad(ops.spmm(graph, x, w), [x, w][:1 + weighted], grad_out)
    csr_w = graph.to_csr_order(w)
    ref = reference.spmm(graph.csr.indptr, graph.csr.indices, csr_w, x, "sum")[0]
    theirs = torch.autograd.grad(ref, [x, w][:1 + weighted], grad_out)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


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


# --- value_index: the edge values read through an index (the backward's transpose) -------

def _value_index_case(graph, rows, heads, dtype, int64, seed=0):
    indptr, indices = to_int64(graph) if int64 else (graph.csr.indptr, graph.csr.indices)
    gen = torch.Generator().manual_seed(seed)
    value = torch.rand(rows, *([heads] if heads else []), generator=gen).to(dtype) + 0.5
    index = torch.randint(0, rows, (graph.num_edges,), generator=gen, dtype=indptr.dtype)
    x = torch.randn(graph.num_nodes, 4 * max(heads, 1), generator=gen).to(dtype)
    return indptr, indices, value, index, x


@settings(max_examples=40, deadline=None)
@given(graph=graphs(), rows=st.integers(1, 30), heads=st.sampled_from([0, 1, 2, 4]),
       int64=st.booleans(), dtype=st.sampled_from([torch.float32, torch.float64,
                                                     torch.bfloat16]))
def test_value_index_reads_each_edge_value_through_the_index(graph, rows, heads, int64, dtype):
    """Entry e weighs value[value_index[e]] (indices repeat): against the reference on the
    values gathered into edge order beforehand, in float64."""
    indptr, indices, value, index, x = _value_index_case(graph, rows, heads, dtype, int64)
    out = kernels.spmm(indptr, indices, value, x, "sum", value_index=index)[0]
    edge_values = value.double().index_select(0, index.long())
    expected = reference.spmm(indptr, indices, edge_values, x.double(), "sum")[0]
    # sums of up to 10^4 terms in another order
    tol = {torch.float32: 1e-3, torch.float64: 1e-10, torch.bfloat16: 3e-2}[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=tol)
    fallback = reference.spmm(indptr, indices, value.double(), x.double(), "sum",
                              value_index=index)[0]
    torch.testing.assert_close(fallback, expected)


@pytest.mark.parametrize("heads", [0, 2])
def test_value_index_gradients(heads):
    """Gradients through value_index, first and second order, against finite differences:
    a value read by several edges sums their gradients."""
    graph = Graph(random_edge_index(10, 40, seed=31), num_nodes=10)
    indptr, indices, value, index, x = _value_index_case(graph, 6, heads, torch.float64, False)
    value.requires_grad_()
    x.requires_grad_()
    assert torch.unique(index).numel() < index.numel()  # repeated reads

    def product(value, x):
        return kernels.spmm(indptr, indices, value, x, "sum", value_index=index)[0]
    assert torch.autograd.gradcheck(product, (value, x))
    assert torch.autograd.gradgradcheck(product, (value, x))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("heads", [0, 2])
def test_backward_reads_the_weights_in_place(reduce, weighted, heads):
    """The backward's product over the transpose takes the weights (and a mean's 1 / degree)
    through value_index: no gather of a per-edge tensor, whose copy cost a third of the
    product. Its gradient against the dense definition."""
    from torch.utils._python_dispatch import TorchDispatchMode

    graph = Graph(random_edge_index(30, 200, seed=32, hub_degree=40), num_nodes=30)
    x = torch.randn(30, 2, 3, dtype=torch.float64, requires_grad=True)
    shape = (graph.num_edges, heads) if heads else (graph.num_edges,)
    w = torch.rand(*shape, dtype=torch.float64) + 0.5 if weighted else None
    g = torch.randn(30, 2, 3, dtype=torch.float64)
    out = ops.spmm(graph, x, w, reduce)

    class Gathers(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.sizes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.aten.index_select.default, torch.ops.aten.index.Tensor):
                self.sizes.append(out.size(0))  # rows gathered
            return out

    with Gathers() as gathers:
        (grad_x,) = torch.autograd.grad(out, x, g)
    assert graph.num_edges not in gathers.sizes
    src, dst = graph.edge_index
    per_head = weighted and heads
    weights = w if weighted else torch.ones(graph.num_edges, dtype=torch.float64)
    dense = torch.zeros(30, 30, *([heads] if per_head else []), dtype=torch.float64)
    dense.index_put_((dst, src), weights, accumulate=True)
    if reduce == "mean":
        degree = torch.bincount(dst, minlength=30).clamp(min=1).double()
        dense = dense / degree.view(30, 1, *[1] * (dense.dim() - 2))
    scale = dense if per_head else dense.unsqueeze(-1).expand(30, 30, 2)
    expected = torch.einsum("ijh,ihc->jhc", scale, g)
    torch.testing.assert_close(grad_x, expected)


@pytest.mark.parametrize("impl", ["kernel", "reference"])
def test_value_index_bad_arguments(impl):
    graph = Graph(random_edge_index(8, 20, seed=33), num_nodes=8)
    indptr, indices, value, index, x = _value_index_case(graph, 5, 0, torch.float32, False)
    spmm = kernels.spmm if impl == "kernel" else reference.spmm
    bad = index.clone()
    bad[3] = 5
    cases = {
        "value_index takes reduce 'sum', got 'mean'": (value, x, "mean", index),
        "value_index needs edge values": (None, x, "sum", index),
        rf"value_index must be \[{graph.num_edges}\]": (value, x, "sum", index[:-1]),
        "value_index": (value, x, "sum", bad),  # out of range: the name, then the value
    }
    for message, (v, features, reduce, vi) in cases.items():
        with pytest.raises((RuntimeError, ValueError), match=message) as info:
            spmm(indptr, indices, v, features, reduce, value_index=vi)
        if vi is bad:
            assert "5" in str(info.value)


@pytest.mark.parametrize("impl", ["kernel", "reference"])
def test_value_index_wrong_index_dtype(impl):
    graph = Graph(random_edge_index(8, 20, seed=34), num_nodes=8)
    indptr, indices, value, index, x = _value_index_case(graph, 5, 0, torch.float32, False)
    spmm = kernels.spmm if impl == "kernel" else reference.spmm
    with pytest.raises((RuntimeError, TypeError), match="value_index must be"):
        spmm(indptr, indices, value, x, "sum", value_index=index.float())
    if impl == "kernel":  # the fallback indexes with either integer dtype
        with pytest.raises(RuntimeError, match="value_index .* must share one index dtype"):
            spmm(indptr, indices, value, x, "sum", value_index=index.long())


@pytest.mark.parametrize("impl", ["kernel", "reference"])
def test_value_index_special_values_and_empty_graphs(impl):
    """NaN and infinite values propagate as through the values gathered beforehand; a graph
    without edges (and rows without edges) sums to 0."""
    spmm = kernels.spmm if impl == "kernel" else reference.spmm
    graph = Graph(random_edge_index(12, 40, seed=35), num_nodes=15)  # 3 nodes without edges
    indptr, indices, value, index, x = _value_index_case(graph, 6, 2, torch.float64, False)
    value[1, 0], value[2, 1], value[4] = float("nan"), float("inf"), float("-inf")
    out = spmm(indptr, indices, value, x, "sum", value_index=index)[0]
    expected = reference.spmm(indptr, indices, value.index_select(0, index.long()), x, "sum")[0]
    torch.testing.assert_close(out, expected, equal_nan=True)
    assert out.isnan().any() and torch.equal(out[12:], torch.zeros(3, x.size(1),
                                                                   dtype=torch.float64))
    empty = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=4)
    e_ptr, e_idx = empty.csr.indptr, empty.csr.indices
    out = spmm(e_ptr, e_idx, torch.ones(3), torch.randn(4, 2), "sum",
               value_index=torch.empty(0, dtype=e_ptr.dtype))[0]
    assert torch.equal(out, torch.zeros(4, 2))


# --- csc_value: the edge values kept in the transpose's order for the backward ----------

def _dst_sorted_graph(num_nodes, num_edges, seed):
    """A graph whose edges are sorted by destination: its CSR order is its edge order, so
    spmm receives the very weight tensor the graph keeps."""
    edge_index = random_edge_index(num_nodes, num_edges, seed=seed, hub_degree=15)
    edge_index = edge_index[:, torch.sort(edge_index[1], stable=True).indices]
    graph = Graph(edge_index, num_nodes=num_nodes)
    assert graph.csr.perm is None
    return graph


def _dense_transpose_product(graph, w, g):
    """A^T g for A[i, j] = the sum of w over the edges j -> i (heads as in spmm)."""
    src, dst = graph.edge_index
    n = graph.num_nodes
    dense = torch.zeros(n, n, *w.shape[1:], dtype=w.dtype).index_put_((dst, src), w,
                                                                      accumulate=True)
    if w.dim() == 1:
        return dense.t() @ g
    return torch.einsum("ijh,ihc->jhc", dense, g)


@pytest.mark.parametrize("heads", [0, 2])
def test_kept_transposed_values_give_the_dense_gradient(heads):
    """With the weights kept (Graph.keep_transposed) the backward reads their copy in the
    transpose's order: the gradient against the dense definition, and once the weights
    change in place, against the new ones (the copy is made again)."""
    graph = _dst_sorted_graph(25, 160, seed=34)
    shape = (graph.num_edges, heads) if heads else (graph.num_edges,)
    w = graph.keep_transposed(torch.rand(*shape, dtype=torch.float64) + 0.5)
    x = torch.randn(25, *([heads] if heads else []), 3, dtype=torch.float64, requires_grad=True)
    g = torch.randn(25, *([heads] if heads else []), 3, dtype=torch.float64)
    for scale in (1.0, 2.0):
        if scale != 1.0:
            w.mul_(scale)  # in place: the kept copy no longer matches
        (grad_x,) = torch.autograd.grad(ops.spmm(graph, x, w), x, g)
        torch.testing.assert_close(grad_x, _dense_transpose_product(graph, w, g))
        copy = graph.transposed_values(w)
        torch.testing.assert_close(copy, w.index_select(0, graph.csc.perm.long()), rtol=0,
                                   atol=0)


def test_transposed_values_only_for_kept_unchanged_tensors():
    graph = _dst_sorted_graph(10, 40, seed=35)
    kept, other = torch.rand(graph.num_edges), torch.rand(graph.num_edges)
    graph.keep_transposed(kept)
    assert graph.transposed_values(other) is None
    copy = graph.transposed_values(kept)
    assert copy is not None and graph.transposed_values(kept) is copy  # made once
    kept.add_(1.0)  # in place: copied again
    torch.testing.assert_close(graph.transposed_values(kept),
                               kept.index_select(0, graph.csc.perm.long()), rtol=0, atol=0)
    assert graph.transposed_values(kept.clone()) is None
    learned = graph.keep_transposed(torch.rand(graph.num_edges, requires_grad=True))
    assert graph.transposed_values(learned) is None  # its gradient would bypass a copy


def test_kept_values_that_require_grad_keep_second_order_gradients():
    """Weights that require grad are read through value_index, not a copy, so that d x
    stays differentiable in them: the mixed second derivative d/dw <d x, v> = <g_i, v_j>
    per edge j -> i, and gradients of both against finite differences; the backward
    through a kept copy is itself differentiable."""
    graph = _dst_sorted_graph(10, 40, seed=37)
    w = graph.keep_transposed(torch.rand(graph.num_edges, dtype=torch.float64,
                                         requires_grad=True))
    x = torch.randn(10, 3, dtype=torch.float64, requires_grad=True)
    g, v = torch.randn(10, 3, dtype=torch.float64), torch.randn(10, 3, dtype=torch.float64)
    (grad_x,) = torch.autograd.grad(ops.spmm(graph, x, w), x, g, create_graph=True)
    (mixed,) = torch.autograd.grad((grad_x * v).sum(), w)
    src, dst = graph.edge_index
    torch.testing.assert_close(mixed, (g[dst] * v[src]).sum(1))
    assert torch.autograd.gradgradcheck(lambda w, x: ops.spmm(graph, x, w), (w, x))
    fixed = graph.keep_transposed(torch.rand(graph.num_edges, dtype=torch.float64))
    assert torch.autograd.gradgradcheck(lambda x: ops.spmm(graph, x, fixed), (x,))
    assert graph.transposed_values(fixed) is not None  # the copy served that backward


def test_keep_transposed_bad_values():
    graph = _dst_sorted_graph(10, 40, seed=38)
    cases = {
        "values must be a floating-point tensor, got torch.int64":
            torch.ones(graph.num_edges, dtype=torch.long),
        "values must be a floating-point tensor, got list": [1.0] * graph.num_edges,
        rf"one row per edge \(\[{graph.num_edges}, \.\.\.\]\), got shape "
        rf"\[{graph.num_edges - 1}\]": torch.rand(graph.num_edges - 1),
        r"got shape \[\]": torch.tensor(1.0),
        "values are on meta but the graph is on cpu": torch.rand(graph.num_edges, device="meta"),
    }
    for message, values in cases.items():
        for method in (graph.keep_transposed, graph.transposed_values):
            with pytest.raises((TypeError, ValueError), match=message):
                method(values)
    empty = Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=3)
    kept = empty.keep_transposed(torch.zeros(0))
    assert empty.transposed_values(kept).shape == (0,)


@pytest.mark.parametrize("impl", ["kernel", "reference"])
def test_csc_value_bad_arguments(impl):
    graph = Graph(random_edge_index(8, 20, seed=36), num_nodes=8)
    csc = graph.csc
    value = torch.rand(graph.num_edges)
    x = torch.randn(8, 3)
    spmm = kernels.spmm if impl == "kernel" else reference.spmm
    transpose = (csc.indptr, csc.indices, csc.perm)
    cases = {
        "csc_value takes reduce 'sum', got 'mean'": (value, "mean", transpose, value),
        "csc_value needs edge values": (None, "sum", transpose, value),
        "csc_value needs the transpose": (value, "sum", (None, None, None), value),
        "csc_value must have the shape and dtype": (value, "sum", transpose, value[:-1]),
        rf"csc_value must have the shape and dtype of the edge values \[{graph.num_edges}\] "
        r"(torch\.)?(Float|float32)": (value, "sum", transpose, value.double()),
    }
    for message, (v, reduce, (t_indptr, t_indices, t_perm), t_value) in cases.items():
        with pytest.raises((RuntimeError, ValueError), match=message):
            spmm(graph.csr.indptr, graph.csr.indices, v, x, reduce, t_indptr, t_indices, t_perm,
                 None, t_value)
