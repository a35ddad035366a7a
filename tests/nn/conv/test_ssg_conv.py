"""SSGConv against PyG's SSGConv (values and gradients, edge weights, its cache) and the
paper's formula on a dense normalised adjacency; from_pyg."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, one_loop_per_node, parity_graph

from graphloc import Graph
from graphloc.nn import SSGConv, from_pyg


@pytest.mark.parametrize("K", [1, 4])
@pytest.mark.parametrize("alpha", [0.0, 0.15, 1.0])
@pytest.mark.parametrize("add_self_loops,bias", [(True, True), (False, False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg(K, alpha, add_self_loops, bias, weighted):
    edge_index, n = one_loop_per_node(*parity_graph(81))
    kwargs = dict(K=K, add_self_loops=add_self_loops, bias=bias)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64, requires_grad=True) \
        if weighted else None
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(SSGConv(8, 6, alpha, **kwargs), pyg.SSGConv(8, 6, alpha, **kwargs),
                  lambda m, x: m(x, graph, weight), lambda m, x: m(x, edge_index, weight),
                  torch.randn(n, 8), extra=(weight,) if weighted and alpha < 1 else ())


def test_the_papers_formula_on_a_dense_adjacency():
    """(alpha X + (1 - alpha) / K sum_k S^k X) W + b, S = D^-1/2 (A + I) D^-1/2 with A_ij
    the summed weights of the edges j -> i (no loops in this graph) and D its row sums."""
    edge_index, n = parity_graph(82)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1
    conv = SSGConv(8, 5, alpha=0.2, K=3).double()
    x = torch.randn(n, 8, dtype=torch.float64)
    A = torch.zeros(n, n, dtype=torch.float64).index_put_((edge_index[1], edge_index[0]),
                                                          weight, accumulate=True)
    A += torch.eye(n, dtype=torch.float64)
    inv_sqrt = A.sum(1).pow(-0.5)
    S = inv_sqrt[:, None] * A * inv_sqrt[None, :]
    mixed = 0.2 * x + 0.8 / 3 * sum(torch.linalg.matrix_power(S, k) @ x for k in (1, 2, 3))
    torch.testing.assert_close(conv(x, edge_index, weight), conv.lin(mixed))


def test_cache_as_pyg_and_said_when_the_input_differs():
    edge_index, n = parity_graph(83)
    x = torch.randn(n, 8)
    ours, theirs = SSGConv(8, 6, 0.1, K=2, cached=True), pyg.SSGConv(8, 6, 0.1, K=2, cached=True)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    assert ours._cached_h is not None
    with pytest.warns(UserWarning, match="features, graph or edge weights differ"):
        got = ours(x + 1, edge_index)
    torch.testing.assert_close(got, theirs(x + 1, edge_index))  # PyG's: the first call's
    with pytest.raises(ValueError, match="SSGConv\\(cached=True\\) propagated 30 nodes"):
        ours(torch.randn(n + 2, 8), edge_index)
    ours._cached_h = None  # PyG's way to clear it
    theirs._cached_h = None
    torch.testing.assert_close(ours(x + 1, edge_index), theirs(x + 1, edge_index))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="SSGConv: K must be an integer >= 1, got 0"):
        SSGConv(8, 6, 0.1, K=0)  # PyG's divides by K
    with pytest.raises(ValueError, match="SSGConv: alpha must be a finite number, got nan"):
        SSGConv(8, 6, float("nan"))
    with pytest.raises(ValueError, match="SSGConv: alpha must be a finite number"):
        SSGConv(8, 6, "0.1")


def test_converts():
    edge_index, n = parity_graph(84)
    x = torch.randn(n, 8)
    theirs = pyg.SSGConv(8, 6, 0.3, K=3, add_self_loops=False).eval()
    ours = from_pyg(theirs, example=(x, edge_index))
    assert type(ours) is SSGConv and ours.K == 3 and not ours.add_self_loops
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
