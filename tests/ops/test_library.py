"""The op registrations: opcheck (schema, fake kernel, autograd, AOT dispatch), compile."""

import pytest
import torch
from helpers import random_edge_index, requires_ext

import graphloc
from graphloc import Graph, ops

pytestmark = requires_ext
kernels = torch.ops.graphloc


def test_extension_is_loaded_unless_disabled():
    import os

    assert graphloc.HAS_EXTENSION or os.environ.get("GRAPHLOC_DISABLE_EXT") == "1"


def _graph():
    return Graph(random_edge_index(9, 30, seed=12), num_nodes=9)


def _samples():
    g = _graph()
    csr, csc = g.csr, g.csc
    E, N = g.num_edges, g.num_nodes
    f64 = dict(dtype=torch.float64)
    x = torch.randn(N, 4, **f64, requires_grad=True)
    w = torch.rand(E, **f64, requires_grad=True)
    w2 = torch.rand(E, 2, **f64, requires_grad=True)
    transpose = (csc.indptr, csc.indices, csc.perm)
    for reduce in ("sum", "mean", "max", "min"):
        yield kernels.spmm, (csr.indptr, csr.indices, w, x, reduce, *transpose)
        yield kernels.spmm, (csr.indptr, csr.indices, w2, x, reduce)
        yield kernels.spmm, (csr.indptr, csr.indices, None, x, reduce)
        yield kernels.segment_reduce, (torch.randn(E, 3, **f64, requires_grad=True),
                                       csr.indptr, reduce)
    node_values = torch.rand(N, 2, **f64, requires_grad=True)  # read through an index
    yield kernels.spmm, (csr.indptr, csr.indices, node_values, x, "sum", *transpose,
                         csc.indices[:E].clone())
    arg = kernels.spmm(csr.indptr, csr.indices, w, x, "max")[1]
    yield kernels.spmm_arg_backward, (*transpose, w.detach(), x.detach(), arg,
                                      torch.randn(N, 4, **f64), True)
    yield kernels.gather_csr, (torch.randn(N, 3, **f64, requires_grad=True), csr.indptr, E)
    yield kernels.gather_rows, (torch.randn(E, 3, **f64, requires_grad=True), csr.perm)
    yield kernels.gather_rows, (torch.randn(N, 2, **f64, requires_grad=True),
                                csr.indices.long())  # repeats: the backward adds them
    for op in ("dot", "add", "mul"):
        a = torch.randn(N, 4, **f64, requires_grad=True)
        b = torch.randn(N, 4, **f64, requires_grad=True)
        yield kernels.sddmm, (csr.indptr, csr.indices, a, b, op, 2, *transpose)
    score = torch.randn(E, 2, **f64, requires_grad=True)
    yield kernels.segment_softmax, (score, csr.indptr)
    y = kernels.segment_softmax(score.detach(), csr.indptr)
    yield kernels.segment_softmax_backward, (y, torch.randn_like(y), csr.indptr)
    yield kernels.segment_attention, (torch.randn(E, 2, **f64, requires_grad=True), csr.indptr,
                                      csr.indices, x, *transpose)
    out, lse = kernels.segment_attention(score.detach(), csr.indptr, csr.indices, x.detach())
    yield kernels.segment_attention_backward, (score.detach(), lse, out, torch.randn_like(out),
                                               torch.randn_like(lse), csr.indptr, csr.indices,
                                               x.detach(), *transpose, True, True)
    a_src = torch.randn(N, 2, **f64, requires_grad=True)
    a_dst = torch.randn(N, 2, **f64, requires_grad=True)
    yield kernels.additive_attention, (a_src, a_dst, 0.2, csr.indptr, csr.indices, x, *transpose)
    out, norm = kernels.additive_attention(a_src.detach(), a_dst.detach(), 0.2, csr.indptr,
                                           csr.indices, x.detach())
    yield kernels.additive_attention_backward, (a_src.detach(), a_dst.detach(), 0.2, norm, out,
                                                torch.randn_like(out), csr.indptr, csr.indices,
                                                x.detach(), *transpose, True, True)
    src, dst = (torch.randn(N, 6, **f64, requires_grad=True) for _ in range(2))
    att = torch.randn(2, 3, **f64, requires_grad=True)
    yield kernels.gatv2_scores, (csr.indptr, csr.indices, src, dst, att, 0.2, *transpose)
    yield kernels.gatv2_scores_backward, (csr.indptr, csr.indices, src.detach(), dst.detach(),
                                          att.detach(), 0.2, torch.randn(E, 2, **f64),
                                          *transpose, True, False, True)
    rows, vectors = torch.randn(N, 6, **f64, requires_grad=True), \
        torch.randn(2, 3, 2, **f64, requires_grad=True)
    yield kernels.head_dots, (rows, vectors)
    yield kernels.head_dots_backward, (rows.detach(), vectors.detach(), torch.randn(N, 6, **f64),
                                       True, True)
    key, query, value = (torch.randn(N, 4, **f64, requires_grad=True) for _ in range(3))
    yield kernels.gated_sum, (csr.indptr, csr.indices, key, query, value, *transpose)
    yield kernels.gated_sum_backward, (csr.indptr, csr.indices, key.detach(), query.detach(),
                                       value.detach(), torch.randn(N, 4, **f64), *transpose,
                                       True, False, True)
    gamma, beta = (torch.randn(N, 4, **f64, requires_grad=True) for _ in range(2))
    yield kernels.film_sum, (csr.indptr, csr.indices, gamma, beta, value, *transpose)
    yield kernels.film_sum_backward, (csr.indptr, csr.indices, gamma.detach(), beta.detach(),
                                      value.detach(), torch.randn(N, 4, **f64), *transpose,
                                      True, True, False)
    weight = torch.randn(E, 3, **f64, requires_grad=True)
    yield kernels.edge_outer_sum, (csr.indptr, csr.indices, weight, x, *transpose)
    yield kernels.edge_outer_sum_backward, (csr.indptr, csr.indices, weight.detach(), x.detach(),
                                            torch.randn(N, 3 * x.size(1), **f64), True, True)
    t = torch.randn(4, **f64, requires_grad=True)
    for detach in (False, True):
        yield kernels.softmax_sum, (x, t, csr.indptr, csr.indices, detach, *transpose)
    out, norm = kernels.softmax_sum(x.detach(), t.detach(), csr.indptr, csr.indices, False)
    yield kernels.softmax_sum_backward, (x.detach(), t.detach(), out, norm, torch.randn_like(out),
                                         csr.indptr, csr.indices, *transpose, False, True, True)
    yield kernels.coo_to_csr, (g.edge_index[1].int(), N)
    _, perm = kernels.coo_to_csr(g.edge_index[1], N)
    yield kernels.arg_sources, (arg, perm.to(arg.dtype), E)
    yield kernels.arg_sources, (arg.long(), None, E)
    rows = torch.randn(E, 3, **f64, requires_grad=True)
    yield kernels.segment_logsumexp, (rows, csr.indptr, None, 1e-12)
    yield kernels.segment_logsumexp, (x, csr.indptr, csr.indices, 0.0)
    yield kernels.segment_softmax_rows, (rows.detach(), csr.indptr,
                                         torch.randperm(E, dtype=csr.indptr.dtype), 0.5, True)
    yield kernels.segment_softmax_rows, (rows.detach(), csr.indptr, None, 0.0, False)
    yield kernels.logsumexp_edge_grad, (x, csr.indptr, csr.indices, torch.randn(N, 4, **f64),
                                        torch.randn(N, 4, **f64))
    yield kernels.local_eccentricity, (csr.indptr, csr.indices, torch.rand(E, **f64), 3)
    yield kernels.hop2_sample, (csr.indptr, csr.indices, 5, 7)
    points = torch.randn(N, 3, **f64)
    yield kernels.knn, (points, points[:5], torch.tensor([0, N]), torch.tensor([0, 5]), 3,
                        False, float("inf"))
    yield kernels.knn, (points, points, torch.tensor([0, 4, N]), torch.tensor([0, 4, N]), 2,
                        True, 0.5)
    yield kernels.separated_rounds, (csr.indptr, csr.indices, *transpose[:2],
                                     torch.randperm(N)[:N // 2], 2)
    seeds = torch.tensor([0, 3, 5])
    yield kernels.khop_subgraphs, (csr.indptr, csr.indices, seeds, 2)
    yield kernels.walk_counts, (csr.indptr, csr.indices, None, 2, 2**40)
    yield kernels.walk_counts, (csr.indptr, csr.indices,
                                torch.rand(csr.indices.numel(), dtype=torch.float64), 1, 2**40)
    one = ([csr.indptr], [csr.indices], [0], [0], [N], [seeds], [2, -1])
    yield kernels.neighbor_sample, (*one, False, False, False, 4, [], [], None, [], False)
    yield kernels.neighbor_sample, (*one, True, True, False, 4, [], [], None, [], False)
    yield kernels.neighbor_sample, (*one, False, False, True, 4, [], [], None, [], False)
    yield kernels.csr_facts, (csr.indptr, csr.indices)
    yield kernels.graclus, (csr.indptr, csr.indices, torch.randperm(N), None)
    yield kernels.graclus, (csr.indptr, csr.indices, torch.randperm(N),
                            torch.rand(csr.indices.numel(), dtype=torch.float64))
    yield kernels.partition, (csr.indptr, csr.indices, None, None, 3, False, 30, 1)
    yield kernels.partition, (csr.indptr, csr.indices, torch.ones(N, dtype=torch.long),
                              torch.ones(csr.indices.numel(), dtype=torch.long), 2, True, 0, 2)
    yield kernels.random_walk, (csr.indptr, csr.indices, seeds, 4, 0.5, 2.0, 3, None, False)
    yield kernels.random_walk, (csr.indptr, csr.indices, seeds, 4, 1.0, 1.0, 3,
                                torch.arange(csr.indices.numel()), True)
    yield kernels.dropout, (torch.randn(N, 4, **f64, requires_grad=True), 0.3,
                            torch.tensor(11, dtype=torch.int64))
    yield kernels.csr_facts, (None, csr.indices)


@pytest.mark.parametrize("op,args", list(_samples()),
                         ids=lambda v: getattr(v, "__name__", None) if callable(v) else "")
def test_opcheck(op, args):
    torch.library.opcheck(op, args)


def test_every_op_has_a_fake_kernel_and_an_opcheck_sample():
    """torch.compile traces an op through its fake kernel: an op without one breaks any
    compiled model that calls it. Each op must also be run by test_opcheck above."""
    from torch._library.simple_registry import singleton
    names = {n for n in dir(kernels) if isinstance(getattr(kernels, n),
                                                    torch._ops.OpOverloadPacket)}
    assert len(names) > 20
    without_fake = sorted(n for n in names
                          if singleton.find(f"graphloc::{n}").fake_impl.kernel is None)
    assert without_fake == []
    sampled = {op._qualified_op_name.split("::")[1] for op, _ in _samples()}
    assert sorted(names - sampled) == []


@pytest.mark.parametrize("sampler", ["khop_subgraphs", "neighbor_sample"])
def test_sampler_fakes_reject_the_seeds_their_kernels_reject(sampler):
    """Traced (fake tensors), the samplers' fakes refuse int32 seeds as their kernels do."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    csr = _graph().csr
    op = getattr(kernels, sampler)

    def call(indptr, indices, seeds):
        if sampler == "khop_subgraphs":
            return op(indptr, indices, seeds, 2)
        return op([indptr], [indices], [0], [0], [indptr.numel() - 1], [seeds], [2], False,
                  False, False, 0, [], [], None, [], False)

    with pytest.raises(RuntimeError, match="int64"):
        call(csr.indptr, csr.indices, torch.tensor([0, 1], dtype=torch.int32))
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) for t in (csr.indptr, csr.indices)]
        with pytest.raises(RuntimeError, match="int64"):
            call(*fake, mode.from_tensor(torch.tensor([0, 1], dtype=torch.int32)))


class TwoLayer(torch.nn.Module):
    """A GCN-like model made from the ops: mean aggregation, then attention-weighted sum."""

    def __init__(self, channels: int):
        super().__init__()
        self.lin1 = torch.nn.Linear(channels, channels)
        self.lin2 = torch.nn.Linear(channels, channels)
        self.att = torch.nn.Parameter(torch.randn(channels))

    def forward(self, x, graph, edge_weight):
        h = torch.relu(ops.spmm(graph, self.lin1(x), edge_weight, reduce="mean"))
        h = self.lin2(h)
        scores = ops.sddmm(graph, h, h * self.att)
        alpha = ops.segment_softmax(graph, scores)
        return ops.spmm(graph, h, alpha) + ops.spmm(graph, h, reduce="max")


def test_two_layer_model_compiles_fullgraph_and_matches_eager():
    torch._dynamo.reset()
    graph = Graph(random_edge_index(40, 200, seed=13), num_nodes=40)
    _ = graph.csc  # build the cached transpose outside the compiled region
    model = TwoLayer(8)
    x = torch.randn(40, 8, requires_grad=True)
    w = torch.rand(graph.num_edges)
    eager = model(x, graph, w)
    eager_grad = torch.autograd.grad(eager.sum(), (x, model.att))
    explain = torch._dynamo.explain(model)(x, graph, w)
    assert explain.graph_break_count == 0
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x, graph, w)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(out.sum(), (x, model.att))
    for got, expected in zip(grads, eager_grad, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_segment_reduce_compiles_fullgraph_and_matches_a_dense_sum(reduce):
    """Its Python check read indptr's values, which dynamo cannot trace: GINEConv (per-edge
    messages summed by the CSR) broke a fullgraph compile. Traced, the kernel checks them."""
    torch._dynamo.reset()
    graph = Graph(random_edge_index(30, 120, seed=14), num_nodes=30)
    indptr = graph.csr.indptr
    src = torch.randn(graph.num_edges, 5, requires_grad=True)
    compiled = torch.compile(lambda t: ops.segment_reduce(t, indptr, reduce), fullgraph=True)
    rows = [src[indptr[i]:indptr[i + 1]] for i in range(30)]
    pick = {"sum": lambda r: r.sum(0), "mean": lambda r: r.mean(0) if len(r) else r.sum(0),
            "max": lambda r: r.amax(0) if len(r) else r.new_zeros(5)}[reduce]
    torch.testing.assert_close(compiled(src), torch.stack([pick(r) for r in rows]))


@pytest.mark.parametrize("case", ["attention scores", "additive scores", "spmm max weights",
                                  "spmm x"])
def test_backward_reads_the_graphs_transpose_not_a_new_one(monkeypatch, case):
    """A backward that needs the transpose gets the graph's cached one from the forward,
    also when only the per-edge values need a gradient (the scores of an attention, the
    weights of a max product): building it again costs a sort of the edges at every call.
    The gradients are checked against torch's own ops on dense copies."""
    from graphloc.ops import _library
    built = []
    real = _library.csr_transpose
    monkeypatch.setattr(_library, "csr_transpose", lambda *a: built.append(1) or real(*a))
    graph = _graph()
    src, dst = graph.edge_index
    x = torch.randn(graph.num_nodes, 3, dtype=torch.float64)
    values = torch.randn(graph.num_edges, dtype=torch.float64, requires_grad=True)
    if case == "attention scores":
        out = ops.segment_attention(graph, values, x)
        weights = torch.zeros(graph.num_nodes, graph.num_edges, dtype=torch.float64)
        weights[dst, torch.arange(graph.num_edges)] = 1.0
        scores = values.masked_fill(weights == 0, float("-inf"))  # [N, E]: row i's edges
        expected = torch.nan_to_num(scores.softmax(1)) @ x[src]
    elif case == "additive scores":  # the halves of GAT's scores need the transpose too
        values = torch.randn(graph.num_nodes, dtype=torch.float64, requires_grad=True)
        out = ops.additive_attention(graph, values, values.detach() * 0.5, x)
        scores = torch.full((graph.num_nodes, graph.num_edges), float("-inf"), dtype=x.dtype)
        scores[dst, torch.arange(graph.num_edges)] = torch.nn.functional.leaky_relu(
            values[src] + values.detach()[dst] * 0.5, 0.2)
        expected = torch.nan_to_num(scores.softmax(1)) @ x[src]
    elif case == "spmm max weights":
        out = ops.spmm(graph, x, values, reduce="max")
        messages = values.unsqueeze(1) * x[src]
        expected = torch.zeros(graph.num_nodes, 3, dtype=torch.float64).scatter_reduce(
            0, dst.unsqueeze(1).expand(-1, 3), messages, "amax", include_self=False)
    else:
        x.requires_grad_()
        values = values.detach()
        out = ops.spmm(graph, x, values)
        expected = torch.zeros(graph.num_nodes, 3, dtype=torch.float64).index_add(
            0, dst, values.unsqueeze(1) * x[src])
    leaf = x if case == "spmm x" else values
    grad = torch.randn_like(out)
    (got,) = torch.autograd.grad(out, leaf, grad)
    (want,) = torch.autograd.grad(expected, leaf, grad)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(got, want)
    assert built == []
