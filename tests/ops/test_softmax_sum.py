"""softmax_sum (DeeperGCN's softmax aggregation in one kernel) against its definition
written node by node with torch.softmax: per node and channel, the softmax of
t * x[j] over the node's in-neighbours j, weighting x[j]; forward and the gradients of x and
t, on random graphs (hubs, empty rows, loops, parallel edges, bipartite), every register
width, detached scores, special values, and the bad inputs the kernel must refuse."""

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


def _definition(graph, x, t, detach_scores=False):
    """Node by node: torch.softmax over the node's incoming edges (edge order), per channel;
    a channel whose scores are all -inf weighs its edges 0 (graphloc's masked rows)."""
    src, dst = graph.edge_index
    rows = []
    for i in range(graph.num_nodes):
        values = x[src[dst == i]]
        if values.size(0) == 0:
            rows.append(x.new_zeros(x.size(1)) + 0 * t)
            continue
        scores = values * t
        scores = scores.detach() if detach_scores else scores
        masked = (scores == float("-inf")).all(0)
        weights = torch.softmax(scores, 0).masked_fill(masked, 0.0)
        rows.append((weights * values).sum(0))
    return torch.stack(rows) if rows else x[:0] * 1.0


def _check(graph, x, t, detach_scores=False, dtype=torch.float64, tol=1e-10):
    if detach_scores:  # t has no gradient then: the definition's t is a constant too
        assert_matches_definition(
            lambda x: ops.softmax_sum(graph, x, t.to(dtype), True),
            lambda x: _definition(graph, x, t, True), (x,), dtype, tol)
        return
    assert_matches_definition(lambda x, t: ops.softmax_sum(graph, x, t),
                              lambda x, t: _definition(graph, x, t), (x, t), dtype, tol)


@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=30, max_edges=120, allow_hub=False),
       channels=st.sampled_from([1, 3, 16, 32, 64, 65]), scale=st.sampled_from([1.0, 30.0]),
       detach=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_softmax_sum_matches_its_definition(graph, channels, scale, detach, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(graph.num_src_nodes, channels, dtype=torch.float64, generator=gen) * scale
    t = torch.randn(channels, dtype=torch.float64, generator=gen)
    _check(graph, x, t, detach)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-10)])
def test_hubs_empty_rows_loops_and_int64_indices(dtype, tol):
    graph = hub_graph()
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(60, 16, dtype=torch.float64, generator=gen)
    t = torch.rand(16, dtype=torch.float64, generator=gen) * 4 - 2
    _check(graph, x, t, dtype=dtype, tol=tol)
    k = torch.ops.graphloc
    args = (x.to(dtype), t.to(dtype))
    narrow = k.softmax_sum(*args, graph.csr.indptr, graph.csr.indices, False)
    wide = k.softmax_sum(*args, *to_int64(graph), False)
    for a, b in zip(narrow, wide, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_number_or_one_temperature_is_every_channels():
    graph = Graph(random_edge_index(20, 80, seed=2), num_nodes=20)
    x = torch.randn(20, 6, dtype=torch.float64)
    want = _definition(graph, x, torch.full((6,), 0.3, dtype=torch.float64))
    torch.testing.assert_close(ops.softmax_sum(graph, x, 0.3), want)
    torch.testing.assert_close(ops.softmax_sum(graph, x, torch.tensor([0.3], dtype=x.dtype)),
                               want)
    one = torch.tensor(0.3, dtype=x.dtype, requires_grad=True)  # its gradient: the sum
    wide = one.detach().expand(6).clone().requires_grad_()
    grad = torch.randn(20, 6, dtype=x.dtype)
    (a,) = torch.autograd.grad(ops.softmax_sum(graph, x, one), one, grad)
    (b,) = torch.autograd.grad(_definition(graph, x, wide), wide, grad)
    torch.testing.assert_close(a, b.sum())


def test_bipartite_graphs_and_nodeless_graphs():
    src_ids = torch.arange(20)
    graph = Graph.bipartite(torch.stack([src_ids, src_ids % 3]), (20, 3))
    gen = torch.Generator().manual_seed(6)
    _check(graph, torch.randn(20, 5, dtype=torch.float64, generator=gen),
           torch.randn(5, dtype=torch.float64, generator=gen))
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    assert ops.softmax_sum(nodeless, torch.zeros(0, 4), 2.0).shape == (0, 4)


def _special_inputs():
    graph = Graph(random_edge_index(12, 60, seed=7), num_nodes=12)
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(12, 6, generator=gen)
    x[3, 1], x[5, 4], x[6, 0], x[2, 2] = float("nan"), float("inf"), float("-inf"), 1e30
    x[:, 5] = -x[:, 5].abs() - 0.1  # with t = inf: a channel of only -inf scores
    t = torch.tensor([1.0, -2.0, 0.0, 0.5, 3.0, float("inf")])  # 0 * inf: a NaN score
    return graph, x, t


def test_kernel_composed_path_and_twin_agree_on_special_values(monkeypatch):
    """NaN and +inf scores make their node's channel NaN (torch.softmax), a channel of only
    -inf scores weighs its edges 0 (0 * -inf = NaN where a value is -inf, as torch's
    product; 0 where the values are finite), on the kernel, on the composed ops (the path of
    other devices) and on the raw-CSR twin alike; the gradients too."""
    import graphloc.ops as ops_module

    graph, x, t = _special_inputs()
    inputs = [x.clone().requires_grad_(), t.clone().requires_grad_()]
    twins = [v.detach().clone().requires_grad_() for v in inputs]
    kernel = ops.softmax_sum(graph, *inputs)
    with monkeypatch.context() as patch:
        patch.setattr(ops_module, "HAS_EXTENSION", False)
        composed = ops.softmax_sum(graph, *twins)
    torch.testing.assert_close(kernel, composed, equal_nan=True)
    twin, _ = reference.softmax_sum(*inputs, graph.csr.indptr, graph.csr.indices, False)
    torch.testing.assert_close(kernel, twin, equal_nan=True)
    assert kernel.isnan().any() and kernel.isfinite().any()
    assert (kernel[:, 5] == 0).all()  # masked: weights 0, whatever the (finite) values
    grad = torch.randn(kernel.shape, generator=torch.Generator().manual_seed(9))
    for a, b in zip(torch.autograd.grad(kernel, inputs, grad),
                    torch.autograd.grad(composed, twins, grad), strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_large_tied_scores_weigh_alike():
    """exp(score - max) / sum, never exp(score - log-sum-exp): two tied scores of 1e30 weigh
    1/2 each (lse = max + log 2 rounds to the max at that scale)."""
    graph = Graph(torch.tensor([[0, 1], [2, 2]]), num_nodes=3)
    x = torch.tensor([[1e30, 1.0], [1e30, 3.0], [0.0, 0.0]], requires_grad=True)
    out = ops.softmax_sum(graph, x, torch.tensor([1.0, 1e-20]))
    torch.testing.assert_close(out[2], torch.tensor([1e30, 2.0]))
    (g,) = torch.autograd.grad(out[2, 0], x)
    torch.testing.assert_close(g[:2, 0], torch.tensor([0.5, 0.5]))


def test_bfloat16_and_float16_follow_float32():
    graph = Graph(random_edge_index(30, 150, seed=12), num_nodes=30)
    x = torch.randn(30, 16)
    want = ops.softmax_sum(graph, x, 0.5)
    for dtype in (torch.bfloat16, torch.float16):
        got = ops.softmax_sum(graph, x.to(dtype), 0.5)
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


def test_second_derivatives_go_through_the_composed_backward():
    graph = Graph(random_edge_index(10, 40, seed=9), num_nodes=10)
    gen = torch.Generator().manual_seed(10)
    x = torch.randn(10, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    t = torch.randn(3, dtype=torch.float64, generator=gen, requires_grad=True)
    torch.autograd.gradcheck(lambda x, t: ops.softmax_sum(graph, x, t), (x, t))
    torch.autograd.gradgradcheck(lambda x, t: ops.softmax_sum(graph, x, t), (x, t))


def test_detached_scores_second_derivatives_are_the_definitions():
    """With detached scores the gradient is not the function's (no finite differences to
    check): its second derivatives against the definition's, the scores detached there."""
    graph = Graph(random_edge_index(10, 40, seed=9), num_nodes=10)
    gen = torch.Generator().manual_seed(10)
    x0 = torch.randn(10, 3, dtype=torch.float64, generator=gen)
    t = torch.randn(3, dtype=torch.float64, generator=gen)

    def penalty_gradient(f):
        x = x0.clone().requires_grad_()
        (g,) = torch.autograd.grad(f(x).pow(2).sum(), x, create_graph=True)
        return torch.autograd.grad((g.pow(2) + g * x.sin()).sum(), x)[0]

    torch.testing.assert_close(
        penalty_gradient(lambda x: ops.softmax_sum(graph, x, t, True)),
        penalty_gradient(lambda x: _definition(graph, x, t, True)))


def test_bad_inputs_are_refused_by_name():
    graph = Graph(random_edge_index(5, 12, seed=11), num_nodes=5)
    x = torch.randn(5, 6)
    with pytest.raises(ValueError, match="x has 4 rows but the graph has 5 nodes"):
        ops.softmax_sum(graph, x[:4])
    with pytest.raises(ValueError, match=r"t has 4 values \(\[4\]\) but x has 6 channels"):
        ops.softmax_sum(graph, x, torch.ones(4))
    with pytest.raises(TypeError, match="t is torch.float64 but x is torch.float32"):
        ops.softmax_sum(graph, x, torch.ones(6, dtype=torch.float64))
    with pytest.raises(TypeError, match="t must be a number or a tensor, got str"):
        ops.softmax_sum(graph, x, "1")
    for t in (float("nan"), float("inf")):  # a number given NaN: every output NaN, quietly
        with pytest.raises(ValueError, match="softmax_sum: t must be a finite number"):
            ops.softmax_sum(graph, x, t)
    nan_t = torch.full((6,), float("nan"))  # a tensor's NaN propagates, as torch's would
    assert ops.softmax_sum(graph, x, nan_t)[graph.in_degree() > 0].isnan().all()
    with pytest.raises(ValueError, match=r"x must be \[N, K\], got shape \[5, 2, 3\]"):
        ops.softmax_sum(graph, x.view(5, 2, 3))
    with pytest.raises(TypeError, match="x must be float16, float32, float64 or bfloat16"):
        ops.softmax_sum(graph, x.long())
    k = torch.ops.graphloc
    L = lambda *v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    x3, t = torch.randn(3, 6), torch.ones(6)
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 9 is out of range"):
        k.softmax_sum(x3, t, L(0, 1, 2, 3), L(0, 9, 1), False)
    with pytest.raises(RuntimeError, match=r"t must be 1-D with one value per channel \(6\)"):
        k.softmax_sum(x3, t[:2], L(0, 1, 2, 3), L(0, 2, 1), False)
    out, norm = k.softmax_sum(x3, t, L(0, 1, 2, 3), L(1, 2, 0), False)
    transpose = (L(0, 1, 2, 3), L(2, 0, 1), L(2, 0, 1))
    with pytest.raises(RuntimeError, match=r"csc_indices\[1\] = 5 is out of range"):
        k.softmax_sum_backward(x3, t, out, norm, out, L(0, 1, 2, 3), L(1, 2, 0), L(0, 1, 2, 3),
                               L(2, 5, 1), L(2, 0, 1), False, True, True)
    with pytest.raises(RuntimeError, match="grad must be Float of shape"):
        k.softmax_sum_backward(x3, t, out, norm, out[:2], L(0, 1, 2, 3), L(1, 2, 0), *transpose,
                               False, True, True)
    with pytest.raises(RuntimeError, match=r"norm must be Float of shape \[2, 3, 6\]"):
        k.softmax_sum_backward(x3, t, out, norm[0], out, L(0, 1, 2, 3), L(1, 2, 0), *transpose,
                               False, True, True)
    with pytest.raises(RuntimeError, match="t has no gradient when the scores are detached"):
        k.softmax_sum_backward(x3, t, out, norm, out, L(0, 1, 2, 3), L(1, 2, 0), *transpose,
                               True, True, True)
