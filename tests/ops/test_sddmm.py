"""sddmm: kernels against the reference and brute force, gradients, edge order."""

import pytest
import torch
from helpers import graphs, random_edge_index, requires_ext, to_int64
from hypothesis import given, settings
from hypothesis import strategies as st

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext
kernels = torch.ops.graphloc


@settings(max_examples=40, deadline=None)
@given(graph=graphs(allow_hub=False), op=st.sampled_from(["dot", "add", "mul"]),
       heads=st.sampled_from([1, 2]), channels=st.sampled_from([1, 3, 64, 130]),
       int64=st.booleans())
def test_sddmm_matches_reference(graph, op, heads, channels, int64):
    indptr, indices = to_int64(graph) if int64 else (graph.csr.indptr, graph.csr.indices)
    a = torch.randn(graph.num_nodes, heads * channels, dtype=torch.float64)
    b = torch.randn(graph.num_nodes, heads * channels, dtype=torch.float64)
    torch.testing.assert_close(kernels.sddmm(indptr, indices, a, b, op, heads),
                               reference.sddmm(indptr, indices, a, b, op, heads))


def test_sddmm_brute_force_in_user_edge_order():
    edge_index = random_edge_index(20, 90, seed=7)
    graph = Graph(edge_index, num_nodes=20)
    a, b = torch.randn(20, 3, 4), torch.randn(20, 3, 4)
    src, dst = edge_index
    torch.testing.assert_close(ops.sddmm(graph, a, b, "dot"), (a[src] * b[dst]).sum(-1))
    torch.testing.assert_close(ops.sddmm(graph, a, b, "add"), a[src] + b[dst])
    torch.testing.assert_close(ops.sddmm(graph, a, b, "mul"), a[src] * b[dst])
    a1, b1 = torch.randn(20, 5), torch.randn(20, 5)
    torch.testing.assert_close(ops.sddmm(graph, a1, b1), (a1[src] * b1[dst]).sum(-1))


@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("channels", [8, 16, 24, 64, 128])
def test_float_dot_products_of_every_tile_match_brute_force(heads, channels):
    """float32 dot products in register lanes (one register of partial sums, or several heads
    summed together) against float64 brute force; a NaN and an infinity in the inputs reach
    exactly the edges that read them (inf * 0 is NaN, as in torch)."""
    edge_index = random_edge_index(30, 400, seed=channels, hub_degree=300)
    graph = Graph(edge_index, num_nodes=30)
    gen = torch.Generator().manual_seed(heads)
    a = torch.randn(30, heads, channels, generator=gen)
    b = torch.randn(30, heads, channels, generator=gen)
    a[3, 0, 1], b[5, -1, 0], a[7, -1, -1], b[7, -1, -1] = float("nan"), float("inf"), 0.0, 0.0
    b[9, 0, 2] = float("inf")
    a[9, 0, 2] = 0.0
    src, dst = edge_index
    expected = (a.double()[src] * b.double()[dst]).sum(-1).float()
    out = ops.sddmm(graph, a, b)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-4, equal_nan=True)
    assert torch.equal(out.isnan(), expected.isnan()) and out.isnan().any()
    assert torch.equal(out.isinf(), expected.isinf()) and out.isinf().any()


@pytest.mark.parametrize("heads", [64, 5])
def test_dots_of_heads_of_one_channel_are_the_products(heads):
    """Heads of width 1 (the gradient of spmm's per-channel edge values) take the product
    loop: each dot is its one product, special values included."""
    edge_index = random_edge_index(30, 400, seed=heads, hub_degree=300)
    graph = Graph(edge_index, num_nodes=30)
    gen = torch.Generator().manual_seed(heads)
    a, b = torch.randn(30, heads, 1, generator=gen), torch.randn(30, heads, 1, generator=gen)
    a[3, 0, 0], b[5, -1, 0], b[9, 1, 0], a[9, 1, 0] = float("nan"), float("inf"), float("inf"), 0
    src, dst = edge_index
    torch.testing.assert_close(ops.sddmm(graph, a, b), (a[src] * b[dst]).squeeze(-1),
                               rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("op", ["dot", "add", "mul"])
@pytest.mark.parametrize("heads", [1, 2])
def test_sddmm_gradcheck(op, heads):
    graph = Graph(random_edge_index(10, 35, seed=8), num_nodes=10)
    a = torch.randn(10, heads, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(10, heads, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ops.sddmm(graph, a, b, op), (a, b))


def test_sddmm_bfloat16():
    graph = Graph(random_edge_index(30, 200, seed=9), num_nodes=30)
    a, b = torch.randn(30, 64), torch.randn(30, 64)
    out = ops.sddmm(graph, a.bfloat16(), b.bfloat16())
    expected = ops.sddmm(graph, a.bfloat16().float(), b.bfloat16().float())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=5e-2)
