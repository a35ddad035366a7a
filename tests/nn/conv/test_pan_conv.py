"""PANConv against the paper's formula on dense matrices (PyG's PANConv needs torch-sparse,
which does not install here): M = Z^-1/2 (sum_n c_n A^n) Z^-1/2 with c_n the running
products of the filter weights and Z the entries per row; outputs, M and gradients, for
directed graphs with loops and parallel edges, weighted or not, in every adjacency layout."""

import pytest
import torch
from helpers import assert_reaches_exactly, random_edge_index
from parity import dense_pan
from torch_geometric.utils import to_torch_coo_tensor

from graphloc import Graph
from graphloc.nn import PANConv


def graph_case(seed, n=14, e=40):
    return random_edge_index(n, e, seed=seed), n  # loops, parallel edges, isolated nodes


@pytest.mark.parametrize("filter_size", [0, 1, 2, 4])
@pytest.mark.parametrize("weighted", [False, True])
def test_output_m_and_gradients_match_the_dense_formula(filter_size, weighted):
    edge_index, n = graph_case(filter_size + 10 * weighted)
    torch.manual_seed(filter_size)
    conv = PANConv(6, 5, filter_size=filter_size).double()
    with torch.no_grad():
        conv.weight.copy_(torch.rand(filter_size + 1, dtype=torch.float64) + 0.3)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5 if weighted else None
    x = torch.randn(n, 6, dtype=torch.float64, requires_grad=True)
    out, m = conv(x, edge_index, weight)
    want, want_m = dense_pan(conv, x, edge_index, n, weight)
    torch.testing.assert_close(out, want)
    assert m.layout == torch.sparse_coo and m.is_coalesced() and tuple(m.shape) == (n, n)
    torch.testing.assert_close(m.to_dense(), want_m)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, [x, conv.weight, conv.lin.weight], grad)
    expected = torch.autograd.grad(want, [x, conv.weight, conv.lin.weight], grad)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)


def test_pyg_defaults_and_a_pair_only_joined_by_long_walks():
    # PyG's initial filter weights (all 0.5, so c = 0.5, 0.25, 0.125); on a path
    # 0 -> 1 -> 2 -> 3 with L = 2, node 3 reads nodes 1 and 2 but not 0; the rows hold 1, 2,
    # 3 and 3 entries, and M[i, j] = c_(i-j) / sqrt(Z_i Z_j)
    conv = PANConv(3, 2, filter_size=2).double()
    assert conv.weight.tolist() == [0.5, 0.5, 0.5]
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    _, m = conv(torch.randn(4, 3, dtype=torch.float64), edge_index)
    r2, r3, r6 = 2**0.5, 3**0.5, 6**0.5
    expected = torch.tensor([[0.5, 0, 0, 0],
                             [0.25 / r2, 0.5 / 2, 0, 0],
                             [0.125 / r3, 0.25 / r6, 0.5 / 3, 0],
                             [0, 0.125 / r6, 0.25 / 3, 0.5 / 3]], dtype=torch.float64)
    torch.testing.assert_close(m.to_dense(), expected)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc])
def test_a_sparse_adjacency_or_graph_gives_what_its_edges_give(layout):
    edge_index, n = graph_case(7)
    weight = torch.rand(edge_index.size(1)) + 0.5
    conv = PANConv(6, 5, filter_size=3)
    x = torch.randn(n, 6)
    want, want_m = conv(x, edge_index, weight)
    adj = to_torch_coo_tensor(edge_index.flip(0), weight, size=(n, n))
    adj = {torch.sparse_coo: adj, torch.sparse_csr: adj.to_sparse_csr(),
           torch.sparse_csc: adj.to_sparse_csc()}[layout]
    for graph in (adj, Graph(edge_index, num_nodes=n)):
        got, got_m = conv(x, graph, None if graph is adj else weight)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_m.to_dense(), want_m.to_dense())


def test_target_to_source_reads_the_edges_reversed():
    edge_index, n = graph_case(8)
    conv = PANConv(6, 5, filter_size=2)
    x = torch.randn(n, 6)
    reversed_conv = PANConv(6, 5, filter_size=2, flow="target_to_source")
    reversed_conv.load_state_dict(conv.state_dict())
    torch.testing.assert_close(reversed_conv(x, edge_index)[0], conv(x, edge_index.flip(0))[0])


def test_lazy_width_empty_graph_and_repr():
    conv = PANConv(-1, 4, filter_size=2)
    out, m = conv(torch.randn(5, 3), torch.zeros(2, 0, dtype=torch.long))
    assert out.shape == (5, 4) and torch.equal(m.to_dense(), 0.5 * torch.eye(5))
    empty, m = PANConv(3, 4, 1)(torch.randn(0, 3), torch.zeros(2, 0, dtype=torch.long))
    assert empty.shape == (0, 4) and tuple(m.shape) == (0, 0)
    assert str(PANConv(16, 32, filter_size=2)) == "PANConv(16, 32, filter_size=2)"


def test_bad_arguments_are_named():
    edge_index, n = graph_case(9)
    conv = PANConv(6, 5, filter_size=2)
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="filter_size must be an integer >= 0"):
            PANConv(6, 5, filter_size=bad)
    with pytest.raises(ValueError, match="filter_size asks for a .* output of"):
        PANConv(6, 5, filter_size=10**13)  # its weights alone would not fit in memory
    with pytest.raises(ValueError, match="static batch"):
        conv(torch.randn(2, n, 6), edge_index)
    with pytest.raises(ValueError, match="edge weights require grad"):
        conv(torch.randn(n, 6), edge_index, torch.rand(edge_index.size(1), requires_grad=True))
    with pytest.raises(TypeError, match="x must be one tensor"):
        conv((torch.randn(n, 6), torch.randn(n, 6)), edge_index)
    with pytest.raises(ValueError, match="x"):
        conv(torch.randn(n, 7), edge_index)


def test_walks_kept_per_graph_serve_new_filter_weights_and_not_weighted_calls():
    edge_index, n = graph_case(11)
    graph = Graph(edge_index, num_nodes=n)
    conv = PANConv(6, 5, filter_size=3).double()
    x = torch.randn(n, 6, dtype=torch.float64)
    conv(x, graph)  # counts the walks and keeps them on the graph
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([0.9, 0.1, 0.7, 0.3], dtype=torch.float64))
    torch.testing.assert_close(conv(x, graph)[0], dense_pan(conv, x, edge_index, n)[0])
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    torch.testing.assert_close(conv(x, graph, weight)[0],
                               dense_pan(conv, x, edge_index, n, weight)[0])
    shorter = PANConv(6, 5, filter_size=1).double()  # other walks on the same graph
    torch.testing.assert_close(shorter(x, graph)[0], dense_pan(shorter, x, edge_index, n)[0])


def test_compiles_with_graph_breaks_and_runs_under_autocast():
    edge_index, n = graph_case(12)
    conv = PANConv(6, 5, filter_size=2)
    x = torch.randn(n, 6)
    want, want_m = conv(x, Graph(edge_index, num_nodes=n))
    got, got_m = torch.compile(conv)(x, Graph(edge_index, num_nodes=n))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_m.to_dense(), want_m.to_dense())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = conv(x, edge_index)[0]
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), want, rtol=0.02, atol=0.02)


@pytest.mark.parametrize("filter_size", [1, 3])
def test_declared_reach_is_the_filter_size(filter_size):
    conv = PANConv(4, 3, filter_size=filter_size).double()
    assert conv.graphloc_hops == filter_size
    assert_reaches_exactly(lambda x, e: conv(x, e)[0], filter_size, 4)


def test_integer_features_are_refused_and_nan_reaches_the_rows_that_read_it():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])  # a path: node 3 reads 1 and 2 (L = 2)
    conv = PANConv(2, 3, filter_size=2).double()
    with pytest.raises(TypeError, match="floating-point node features"):
        conv(torch.ones(4, 2, dtype=torch.long), edge_index)
    x = torch.randn(4, 2, dtype=torch.float64)
    x[0, 0] = float("nan")
    out, _ = conv(x, edge_index)
    want, _ = dense_pan(conv, torch.nan_to_num(x), edge_index, 4)
    assert torch.isnan(out[:3]).all(dim=1).tolist() == [True, True, True]  # 0 within 2 hops
    torch.testing.assert_close(out[3], want[3])  # node 3 does not read node 0
