"""Bad input to every public op: a clear exception naming the value, never a crash."""

import pytest
import torch
from helpers import csr_fact_cases, requires_ext

from graphloc import Graph, ops

EDGES = torch.tensor([[0, 1, 2], [1, 2, 0]])


@pytest.fixture
def graph():
    return Graph(EDGES, num_nodes=4)


def test_wrong_number_of_rows(graph):
    with pytest.raises(ValueError, match="x has 3 rows but the graph has 4 nodes"):
        ops.spmm(graph, torch.randn(3, 2))
    with pytest.raises(ValueError, match="b has 5 rows"):
        ops.sddmm(graph, torch.randn(4, 2), torch.randn(5, 2))


def test_wrong_dtypes(graph):
    with pytest.raises(TypeError, match="x must be float16, float32, float64 or bfloat16, got "
                                        "torch.int64"):
        ops.spmm(graph, torch.ones(4, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="edge_weight has dtype torch.float64"):
        ops.spmm(graph, torch.randn(4, 2), torch.rand(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="expected a graphloc.Graph"):
        ops.spmm(EDGES, torch.randn(4, 2))


def test_mixed_dtypes_promote_under_autocast(graph):
    """Under torch.autocast the ops take mixed floating inputs in their promoted dtype (as
    autocast's promote policy for torch.cat): the float32 results of the float32 inputs."""
    x = torch.randn(4, 2, 3).bfloat16()
    w, scores = torch.rand(3), torch.randn(3, 2)
    halves, b = (torch.randn(4, 2), torch.randn(4, 2)), torch.randn(4, 6)
    wide = x.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        results = (ops.spmm(graph, x, w), ops.segment_attention(graph, scores, x),
                   ops.additive_attention(graph, *halves, x),
                   ops.sddmm(graph, x.view(4, 6), b, "add"))
    expected = (ops.spmm(graph, wide, w), ops.segment_attention(graph, scores, wide),
                ops.additive_attention(graph, *halves, wide),
                ops.sddmm(graph, wide.view(4, 6), b, "add"))
    for got, want in zip(results, expected, strict=True):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want)


def test_float16_runs_as_float32_under_autocast(graph):
    """No float16 kernels: under autocast (CUDA's default dtype there) float16 inputs run
    in float32 and stay float32; float16 mixed with another dtype is refused outside it."""
    x = torch.randn(4, 3).half()
    with pytest.raises(TypeError, match="x is float16 but another floating input is not"):
        ops.spmm(graph, x, torch.rand(3))
    with pytest.raises(TypeError, match="x is float16 but another floating input is not"):
        ops.segment_attention(graph, torch.randn(3), x)
    with torch.autocast("cpu", dtype=torch.float16):
        out, weights = ops.spmm(graph, x), ops.segment_softmax(graph, torch.randn(3).half())
    torch.testing.assert_close(out, ops.spmm(graph, x.float()))
    assert weights.dtype == torch.float32


def _float16_cases(graph):
    """(op, float16 inputs) for each op that has kernels of its own dtypes only."""
    gen = torch.Generator().manual_seed(0)
    r = lambda *shape: torch.randn(*shape, generator=gen).half()  # noqa: E731
    return [(lambda x, w: ops.spmm(graph, x, w), (r(4, 3), r(3).abs())),
            (lambda x, w: ops.spmm(graph, x, w, reduce="max"), (r(4, 3), r(3))),
            (lambda a, b: ops.sddmm(graph, a, b), (r(4, 6), r(4, 6))),
            (lambda s: ops.segment_softmax(graph, s), (r(3, 2),)),
            (lambda s, x: ops.segment_attention(graph, s, x), (r(3, 2), r(4, 6))),
            (lambda s, x: ops.segment_attention(graph, s, x, return_weights=True)[1],
             (r(3, 2), r(4, 6))),
            (lambda a, b, x: ops.additive_attention(graph, a, b, x), (r(4, 2), r(4, 2),
                                                                     r(4, 6)))]


def test_float16_runs_in_float32_and_rounds_back(graph):
    """A model cast with .half() ran under PyG and raised here. Float16 inputs now give the
    float32 results of the same values rounded to float16, gradients likewise."""
    for op, inputs in _float16_cases(graph):
        leaves = [t.clone().requires_grad_() for t in inputs]
        wide = [t.float().requires_grad_() for t in inputs]
        got, want = op(*leaves), op(*wide)
        assert got.dtype == torch.float16
        assert torch.equal(got, want.half())
        grad = torch.randn(got.shape).half()
        # (materialized: the weights do not depend on x, which the reference ops say)
        for g16, g32 in zip(torch.autograd.grad(got, leaves, grad, materialize_grads=True),
                            torch.autograd.grad(want, wide, grad.float(),
                                                materialize_grads=True), strict=True):
            assert g16.dtype == torch.float16 and torch.equal(g16, g32.half())


def test_edge_value_shapes(graph):
    with pytest.raises(ValueError, match=r"edge_weight must have shape \[E\] or \[E, heads\] "
                                         r"with E = 3, got \[4\]"):
        ops.spmm(graph, torch.randn(4, 2), torch.rand(4))
    with pytest.raises(ValueError, match="not divisible into 3 heads"):
        ops.spmm(graph, torch.randn(4, 2), torch.rand(3, 3))
    with pytest.raises(ValueError, match="scores must have shape"):
        ops.segment_softmax(graph, torch.randn(5))


@requires_ext  # its last check calls the compiled kernel itself
def test_unknown_reduce_and_op(graph):
    with pytest.raises(ValueError, match="reduce must be one of .* got 'median'"):
        ops.spmm(graph, torch.randn(4, 2), reduce="median")
    with pytest.raises(ValueError, match="sddmm op must be one of .* got 'sub'"):
        ops.sddmm(graph, torch.randn(4, 2), torch.randn(4, 2), op="sub")
    with pytest.raises(RuntimeError, match="reduce must be one of"):
        torch.ops.graphloc.spmm(graph.csr.indptr, graph.csr.indices, None, torch.randn(4, 2),
                                "median")


def test_mismatched_devices(graph):
    x = torch.randn(4, 2, device="meta")
    with pytest.raises(ValueError, match="x is on meta but the graph is on cpu"):
        ops.spmm(graph, x)
    with pytest.raises(ValueError, match="edge_weight is on meta"):
        ops.spmm(graph, torch.randn(4, 2), torch.rand(3, device="meta"))


def test_graph_without_edges_gives_zeros():
    graph = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    for reduce in ("sum", "mean", "max", "min"):
        out = ops.spmm(graph, x, reduce=reduce)
        assert torch.equal(out, torch.zeros(3, 4))
        out.sum().backward()
        assert torch.equal(x.grad, torch.zeros(3, 4))
        x.grad = None
    assert ops.sddmm(graph, x, x).shape == (0,)
    assert ops.segment_softmax(graph, torch.randn(0)).shape == (0,)


@requires_ext
def test_raw_kernels_check_csr_consistency(graph):
    with pytest.raises(RuntimeError, match="indptr ends at 3 but indices has 2 rows"):
        torch.ops.graphloc.spmm(graph.csr.indptr, graph.csr.indices[:2], None,
                                torch.randn(4, 2), "sum")
    with pytest.raises(RuntimeError, match="indices .* and indptr .* must share"):
        torch.ops.graphloc.spmm(graph.csr.indptr, graph.csr.indices.long(), None,
                                torch.randn(4, 2), "sum")
    with pytest.raises(RuntimeError, match="must be int32 or int64, got Float"):
        torch.ops.graphloc.segment_reduce(torch.randn(3, 2), torch.tensor([0.0, 3.0]), "sum")


def test_segment_reduce_and_gather_bad_input():
    with pytest.raises(ValueError, match="non-decreasing"):
        ops.segment_reduce(torch.randn(3, 2), torch.tensor([0, 2, 1, 3]))
    with pytest.raises(TypeError, match="int32 or int64"):
        ops.segment_reduce(torch.randn(3, 2), torch.tensor([0.0, 3.0]))
    with pytest.raises(ValueError, match="holds 5 but dim_size is 3"):
        ops.gather(torch.randn(3, 2), torch.tensor([0, 5]))


def test_sddmm_and_softmax_bad_input(graph):
    with pytest.raises(ValueError, match="a is on meta but the graph is on cpu"):
        ops.sddmm(graph, torch.randn(4, 2, device="meta"), torch.randn(4, 2))
    with pytest.raises(ValueError, match="a and b must match"):
        ops.sddmm(graph, torch.randn(4, 2), torch.randn(4, 3))
    with pytest.raises(ValueError, match="scores are on meta"):
        ops.segment_softmax(graph, torch.randn(3, device="meta"))
    with pytest.raises(TypeError, match="scores must be float16, float32, float64 or "
                                        "bfloat16, got torch.int64"):
        ops.segment_softmax(graph, torch.ones(3, dtype=torch.long))


def test_segment_attention_bad_input(graph):
    x = torch.randn(4, 2, 3)
    with pytest.raises(ValueError, match="scores must have shape"):
        ops.segment_attention(graph, torch.randn(5, 2), x)
    with pytest.raises(ValueError, match="x has 3 rows but the graph has 4 nodes"):
        ops.segment_attention(graph, torch.randn(3, 2), torch.randn(3, 6))
    with pytest.raises(TypeError, match="scores has dtype torch.float64"):
        ops.segment_attention(graph, torch.randn(3, 2, dtype=torch.float64), x)
    with pytest.raises(ValueError, match="x has 2 heads .* but scores have 4"):
        ops.segment_attention(graph, torch.randn(3, 4), x)
    with pytest.raises(ValueError, match="not divisible into 4 heads"):
        ops.segment_attention(graph, torch.randn(3, 4), x.view(4, 6))


def test_heads_of_x_and_edge_weight_must_agree(graph):
    with pytest.raises(ValueError, match=r"x has 2 heads \(\[4, 2, 3\]\) but edge_weight has 3"):
        ops.spmm(graph, torch.randn(4, 2, 3), torch.rand(3, 3))
    assert ops.spmm(graph, torch.randn(4, 2, 3), torch.rand(3, 2)).shape == (4, 2, 3)
    with pytest.raises(ValueError, match=r"x has 2 heads \(\[4, 2, 3\]\) but scores have 3"):
        ops.segment_attention(graph, torch.randn(3, 3), torch.randn(4, 2, 3))


def _facts_oracle(indptr, index):
    """csr_facts by Python loops over the entries."""
    ptr = [] if indptr is None else indptr.tolist()
    idx = [] if index is None else index.tolist()
    steps = [b - a for a, b in zip(ptr, ptr[1:], strict=False)]
    return [ptr[0] if ptr else 0, ptr[-1] if ptr else 0, min(steps) if steps else 0,
            min(idx) if idx else 0, max(idx) if idx else -1]


@requires_ext
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_csr_facts_are_the_arrays_extremes(dtype):
    """What the CSR checks read (one pass, one host read) is each array's ends, smallest
    step and index extremes."""
    for indptr, index in csr_fact_cases():
        indptr = None if indptr is None else indptr.to(dtype)
        index = None if index is None else index.to(dtype)
        facts = torch.ops.graphloc.csr_facts(indptr, index)
        assert facts.tolist() == _facts_oracle(indptr, index)
    with pytest.raises(RuntimeError, match="no tensor arguments"):
        torch.ops.graphloc.csr_facts(None, None)


@requires_ext
def test_raw_kernels_see_a_decreasing_step_that_int32_wraps():
    """indptr [0, 2^31 - 1, -2, 5] in int32: its second step, -(2^31 + 1), wraps to a
    positive int32, and a check taking differences in int32 let the kernel read indices[-2]."""
    indptr = torch.tensor([0, 2**31 - 1, -2, 5], dtype=torch.int32)
    indices = torch.zeros(5, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"indptr must be non-decreasing, but indptr\[2\] = -2"):
        torch.ops.graphloc.spmm(indptr, indices, None, torch.randn(1, 2), "sum")


@pytest.mark.parametrize("call,match", [
    (lambda g, x: ops.softmax_sum(g, x, detach_scores="no"),
     "softmax_sum: detach_scores must be True or False"),
    (lambda g, x: ops.segment_attention(g, torch.randn(g.num_edges), x, return_weights=[1]),
     "segment_attention: return_weights must be True or False"),
    (lambda g, x: ops.random_walk(g, torch.tensor([0]), 3, return_edges="False"),
     "random_walk: return_edges must be True or False, got 'False'"),
    (lambda g, x: ops.local_eccentricity(g, torch.ones(g.num_edges), 2, twin="False"),
     "local_eccentricity: twin must be True or False, got 'False'"),
    # torch's own dropout refuses it; ours dropped where the caller said False
    (lambda g, x: ops.dropout(x, 0.5, training="False"),
     "dropout: training must be True or False, got 'False'"),
    *[(lambda g, x, flag=flag: ops.relational_neighbor_sample(
        [(g.csr.indptr, g.csr.indices)], [(0, 0)], [3], [torch.tensor([0])], [[2]],
        **{flag: "False"}), f"relational_neighbor_sample: {flag} must be True or False")
      for flag in ("replace", "disjoint", "induced", "last")],
])
def test_true_false_arguments_of_the_ops_are_checked(call, match):
    """A string read as true; a tensor failed in "Boolean value of Tensor ... ambiguous"."""
    graph = Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 0]]), num_nodes=3)
    with pytest.raises(TypeError, match=match):
        call(graph, torch.randn(3, 4))
