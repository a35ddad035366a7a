"""What the per-edge function ops (gated_sum, film_sum: one kernel forms each edge's message
from its two ends where it sums it) share: each against its definition written with a Python
loop over the edges (``helpers.EDGE_FUNCTIONS``), forward and the three gradients, on random
graphs (hubs, empty rows, loops, parallel edges, bipartite, no nodes), every register width,
int64 indices, and second derivatives (each op's own cases in its test file)."""

import pytest
import torch
from helpers import (
    EDGE_FUNCTIONS,
    assert_matches_definition,
    edge_function_inputs,
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

NAMES = sorted(EDGE_FUNCTIONS)


def _check(name, graph, inputs, dtype=torch.float64, tol=1e-10):
    definition = EDGE_FUNCTIONS[name][0]
    assert_matches_definition(lambda *t: getattr(ops, name)(graph, *t),
                              lambda *t: definition(graph, *t), inputs, dtype, tol)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(graph=graphs(max_nodes=30, max_edges=120, allow_hub=False),
       channels=st.sampled_from([1, 3, 8, 16, 32, 64, 65]), scale=st.sampled_from([1.0, 30.0]),
       seed=st.integers(0, 2**31 - 1))
def test_matches_its_definition(name, graph, channels, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    _check(name, graph, edge_function_inputs(name, graph, channels, gen, scale))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-10)])
def test_hubs_empty_rows_loops_and_int64_indices(name, dtype, tol):
    graph = hub_graph()
    gen = torch.Generator().manual_seed(5)
    inputs = edge_function_inputs(name, graph, 16, gen)
    _check(name, graph, inputs, dtype=dtype, tol=tol)
    kernel = getattr(torch.ops.graphloc, name)
    narrow = kernel(graph.csr.indptr, graph.csr.indices, *inputs)
    torch.testing.assert_close(kernel(*to_int64(graph), *inputs), narrow, rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_bipartite_graphs_and_nodeless_graphs(name):
    src_ids = torch.arange(20)
    graph = Graph.bipartite(torch.stack([src_ids, src_ids % 3]), (20, 3))
    gen = torch.Generator().manual_seed(6)
    _check(name, graph, edge_function_inputs(name, graph, 5, gen))
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    empty = torch.zeros(0, 4)
    assert getattr(ops, name)(nodeless, empty, empty, empty).shape == (0, 4)


@pytest.mark.parametrize("name", NAMES)
def test_second_derivatives_go_through_the_composed_backward(name):
    graph = Graph(random_edge_index(10, 40, seed=9), num_nodes=10)
    gen = torch.Generator().manual_seed(10)
    inputs = [t.requires_grad_() for t in edge_function_inputs(name, graph, 3, gen)]
    torch.autograd.gradcheck(lambda *t: getattr(ops, name)(graph, *t), inputs)
    torch.autograd.gradgradcheck(lambda *t: getattr(ops, name)(graph, *t), inputs)
