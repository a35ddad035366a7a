import pytest
import torch
import torch_geometric.nn as pyg
from helpers import transpose_products
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import ChebConv


@pytest.mark.parametrize("K", [1, 2, 4])
@pytest.mark.parametrize("normalization,lambda_max", [("sym", None), ("rw", 2.0),
                                                      (None, 7.0), ("rw", None), (None, None)])
@pytest.mark.parametrize("weighted", [False, True])
def test_cheb_matches_pyg(K, normalization, lambda_max, weighted):
    edge_index, n = parity_graph(8)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) if weighted else None
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(ChebConv(8, 6, K, normalization), pyg.ChebConv(8, 6, K, normalization),
                  lambda m, x: m(x, graph, weight, lambda_max=lambda_max),
                  lambda m, x: m(x, edge_index, weight, lambda_max=lambda_max),
                  torch.randn(n, 8))


def test_cheb_is_a_chebyshev_polynomial_of_the_dense_laplacian():
    edge_index = Graph(torch.randint(0, 12, (2, 40))).to_undirected().remove_self_loops()
    n = edge_index.num_nodes
    conv = ChebConv(3, 3, K=3, bias=False).double()
    x = torch.randn(n, 3, dtype=torch.float64)
    a = torch.zeros(n, n, dtype=torch.float64)
    a[edge_index.edge_index[1], edge_index.edge_index[0]] = 1.0
    d = a.sum(1).pow(-0.5).masked_fill(a.sum(1) == 0, 0)
    lap_hat = -(d[:, None] * a * d[None, :])  # 2L/2 - I with L = I - D^-1/2 A D^-1/2
    t = [x, lap_hat @ x]
    t.append(2 * lap_hat @ t[1] - t[0])
    expected = sum(lin(tk) for lin, tk in zip(conv.lins, t, strict=True))
    torch.testing.assert_close(conv(x, edge_index), expected)


def test_cheb_bad_input():
    with pytest.raises(ValueError, match="K must be an integer >= 1"):
        ChebConv(2, 2, K=0)
    with pytest.raises(ValueError, match="D - A has no positive weight .* pass lambda_max"):
        ChebConv(2, 2, K=2, normalization=None)(torch.randn(3, 2),
                                                torch.zeros(2, 0, dtype=torch.long))
    assert repr(ChebConv(2, 3, 4)) == "ChebConv(2, 3, K=4, normalization=sym)"


def test_cheb_backward_reads_its_weights_in_transpose_order():
    """The Laplacian's weights cached on the graph (and their doubles) are kept in the
    transpose's order too: every backward product reads them in order, not through
    value_index, and the gradients are still PyG's."""
    edge_index, n = parity_graph(8)
    graph = Graph(edge_index, num_nodes=n)
    for _ in range(2):
        with transpose_products() as through_index:
            assert_parity(ChebConv(8, 6, 3), pyg.ChebConv(8, 6, 3),
                          lambda m, x: m(x, graph), lambda m, x: m(x, edge_index),
                          torch.randn(n, 8))
        assert through_index == [False, False]


@pytest.mark.parametrize("normalization", ["sym", "rw", None])
@pytest.mark.parametrize("edges", [[[], []], [[0, 1, 1], [0, 1, 1]]], ids=["no edges", "loops"])
def test_k1_needs_no_laplacian(normalization, edges):
    """K = 1 is x Theta_0 + b, which reads no Laplacian: on graphs where PyG's default
    lambda_max of D - A is 0 (no edges, or only self-loops) it is still PyG's output, not
    the refusal that K >= 2 gets there."""
    edge_index = torch.tensor(edges, dtype=torch.long).view(2, -1)
    assert_parity(ChebConv(3, 2, K=1, normalization=normalization),
                  pyg.ChebConv(3, 2, K=1, normalization=normalization),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(4, 3))
    if normalization is None:
        with pytest.raises(ValueError, match="D - A has no positive weight"):
            ChebConv(3, 2, K=2, normalization=None)(torch.randn(4, 3), edge_index)
