"""spmm through torch.sparse (cuSPARSE on CUDA, MKL here): the same numbers and gradients
as graphloc's kernels and the reference, and the backend choice."""

import pytest
import torch
from helpers import random_edge_index, requires_ext

from graphloc import Graph, ops
from graphloc.ops import reference, sparse_library

pytestmark = requires_ext


@pytest.fixture
def backend():
    """Sets a backend for one test and restores the previous one."""
    previous = ops.set_spmm_backend("auto")
    yield ops.set_spmm_backend
    ops.set_spmm_backend(previous)


def _graph(bipartite=False, num_edges=400):
    edge_index = random_edge_index(30, num_edges, seed=7, hub_degree=50)
    if bipartite:  # 35 sources, 32 destinations (ids >= 30 are isolated)
        return Graph.bipartite(edge_index, (35, 32))
    return Graph(edge_index, num_nodes=34)


def _run(graph, x, w, reduce, grad):
    x = x.clone().requires_grad_()
    w = None if w is None else w.clone().requires_grad_()
    out = ops.spmm(graph, x, w, reduce)
    inputs = [x] if w is None else [x, w]
    return [out, *torch.autograd.grad(out, inputs, grad)]


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("weight", [None, "edge", "edge x 1"])
@pytest.mark.parametrize("bipartite", [False, True])
@pytest.mark.parametrize("shape", [(5,), (), (2, 3)])
def test_library_spmm_matches_kernels_and_reference(backend, reduce, weight, bipartite, shape):
    if weight == "edge x 1" and len(shape) == 2:
        shape = (1, 3)  # [E, 1] weights scale one head
    graph = _graph(bipartite)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(graph.num_src_nodes, *shape, generator=gen, dtype=torch.float64)
    w = None if weight is None else torch.rand(
        graph.num_edges, *((1,) if weight == "edge x 1" else ()), generator=gen,
        dtype=torch.float64)
    grad = torch.randn(graph.num_nodes, *shape, generator=gen, dtype=torch.float64)
    backend("sparse")
    assert sparse_library.uses_sparse_library(reference.as_rows(x), w, reduce)
    got = _run(graph, x, w, reduce, grad)
    backend("graphloc")
    want = _run(graph, x, w, reduce, grad)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    # and the reference's own product, independent of both
    value = None if w is None else graph.to_csr_order(w).reshape(-1)
    ref, _ = reference.spmm(graph.csr.indptr, graph.csr.indices, value,
                            reference.as_rows(x), reduce)
    torch.testing.assert_close(got[0], ref.view_as(got[0]), rtol=1e-12, atol=1e-12)


def test_library_spmm_dense_oracle(backend):
    """Against a dense adjacency matrix: A[i, j] = sum of the weights of edges j -> i."""
    graph = _graph()
    x = torch.randn(34, 4, dtype=torch.float64)
    w = torch.rand(graph.num_edges, dtype=torch.float64)
    dense = torch.zeros(34, 34, dtype=torch.float64)
    dense.index_put_((graph.edge_index[1], graph.edge_index[0]), w, accumulate=True)
    backend("sparse")
    torch.testing.assert_close(ops.spmm(graph, x, w), dense @ x)
    degree = torch.bincount(graph.edge_index[1], minlength=34).clamp(min=1).unsqueeze(1)
    torch.testing.assert_close(ops.spmm(graph, x, w, "mean"), (dense @ x) / degree)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_library_spmm_second_order_gradients(backend, reduce):
    graph = Graph(random_edge_index(8, 30, seed=3), num_nodes=9)
    x = torch.randn(9, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(graph.num_edges, dtype=torch.float64, requires_grad=True)
    backend("sparse")

    def product(x, w):
        return ops.spmm(graph, x, w, reduce)
    assert torch.autograd.gradcheck(product, (x, w))
    assert torch.autograd.gradgradcheck(product, (x, w))


def test_library_spmm_without_edges_and_with_special_values(backend):
    backend("sparse")
    empty = Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=5)
    x = torch.randn(5, 3)
    assert torch.equal(ops.spmm(empty, x), torch.zeros(5, 3))
    assert torch.equal(ops.spmm(empty, x, reduce="mean"), torch.zeros(5, 3))
    graph = Graph(torch.tensor([[0, 1, 2], [1, 1, 0]]), num_nodes=4)
    x = torch.tensor([[1.0], [float("nan")], [float("inf")], [2.0]])
    got = ops.spmm(graph, x)
    backend("graphloc")
    torch.testing.assert_close(got, ops.spmm(graph, x), equal_nan=True)
    assert torch.isnan(got[1]).all() and torch.isinf(got[0]).all() and (got[2:] == 0).all()


def test_backend_choice(backend):
    rows = torch.randn(4, 2)
    weights = torch.rand(6, 3)
    assert not sparse_library.uses_sparse_library(rows, None, "sum")  # auto, CPU: kernels
    backend("sparse")
    assert sparse_library.uses_sparse_library(rows, None, "mean")
    assert sparse_library.uses_sparse_library(rows, weights[:, :1], "sum")
    assert not sparse_library.uses_sparse_library(rows, weights, "sum")  # 3 heads
    assert not sparse_library.uses_sparse_library(rows, None, "max")
    assert not sparse_library.uses_sparse_library(rows.bfloat16(), None, "sum")
    backend("graphloc")
    assert not sparse_library.uses_sparse_library(rows, None, "sum")
    with pytest.raises(ValueError, match="spmm backend must be one of .* got 'cusparse'"):
        ops.set_spmm_backend("cusparse")


def test_compiled_spmm_takes_the_kernel(backend):
    """Sparse tensors do not trace: under torch.compile the kernels run, same numbers."""
    backend("sparse")
    graph = _graph()
    x = torch.randn(34, 4)
    compiled = torch.compile(lambda x: ops.spmm(graph, x, reduce="mean"), fullgraph=True)
    torch.testing.assert_close(compiled(x), ops.spmm(graph, x, reduce="mean"))


def test_bad_input_gets_the_same_errors_on_the_library_path(backend):
    """spmm checks its arguments before choosing a backend: torch.sparse never sees them."""
    backend("sparse")
    graph = Graph(torch.tensor([[0, 1, 2], [1, 2, 3]]), num_nodes=4)
    with pytest.raises(ValueError, match="x has 3 rows but the graph has 4 nodes"):
        ops.spmm(graph, torch.randn(3, 2))
    with pytest.raises(TypeError, match="edge_weight has dtype torch.float64"):
        ops.spmm(graph, torch.randn(4, 2), torch.rand(3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"edge_weight must have shape \[E\] or \[E, heads\]"):
        ops.spmm(graph, torch.randn(4, 2), torch.rand(5))
    with pytest.raises(ValueError, match="reduce must be one of .* got 'median'"):
        ops.spmm(graph, torch.randn(4, 2), reduce="median")
