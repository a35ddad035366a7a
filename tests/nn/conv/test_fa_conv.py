"""FAConv against PyG's FAConv (values and gradients under each option, attention weights
on edge lists and sparse adjacencies) and FAGCN's formula on a dense adjacency."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, one_loop_per_node, parity_graph
from torch_geometric.utils import to_torch_coo_tensor

from graphloc import Graph
from graphloc.nn import FAConv, from_pyg

OPTIONS = [{}, {"eps": 0.0}, {"eps": 0.7}, {"add_self_loops": False}, {"cached": True},
           {"flow": "target_to_source"}, {"normalize": False},
           {"normalize": False, "flow": "target_to_source"}]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_matches_pyg(options):
    """Outputs and gradients (x, x_0, att_l, att_r and, without the normalisation, the edge
    weights) on a graph with loops, parallel edges and isolated nodes."""
    edge_index, n = one_loop_per_node(*parity_graph(71))
    x_0 = torch.randn(n, 8, dtype=torch.float64, requires_grad=True)
    weights = () if options.get("normalize", True) else \
        (torch.rand(edge_index.size(1), dtype=torch.float64).sub_(0.3).requires_grad_(),)
    graph_input = Graph(edge_index, num_nodes=n) if "flow" not in options else edge_index
    assert_parity(FAConv(8, **options), pyg.FAConv(8, **options),
                  lambda m, x: m(x, x_0, graph_input, *weights),
                  lambda m, x: m(x, x_0, edge_index, *weights),
                  torch.randn(n, 8), extra=(x_0, *weights))


def test_fagcn_formula_on_a_dense_adjacency():
    """x'_i = eps x0_i + sum_j tanh(a_l.x_j + a_r.x_i) x_j / sqrt(d_i d_j), d the in-degrees
    with one self-loop per node, on a graph without loops or parallel edges."""
    torch.manual_seed(0)
    n = 12
    A = (torch.rand(n, n) < 0.3).double().fill_diagonal_(0)  # A[i, j]: the edge j -> i
    edge_index = A.nonzero().flip(1).t()
    conv = FAConv(5, eps=0.25).double()
    x, x_0 = torch.randn(n, 5, dtype=torch.float64), torch.randn(n, 5, dtype=torch.float64)
    A_hat = A + torch.eye(n, dtype=torch.float64)
    d = A_hat.sum(1)
    a_l, a_r = conv.att_l.weight.view(-1), conv.att_r.weight.view(-1)
    coef = torch.tanh((x @ a_l)[None, :] + (x @ a_r)[:, None]) * A_hat / torch.sqrt(
        d[:, None] * d[None, :])
    torch.testing.assert_close(conv(x, x_0, edge_index), 0.25 * x_0 + coef @ x)


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
@pytest.mark.parametrize("options", [{}, {"add_self_loops": False}, {"cached": True}],
                         ids=str)
def test_attention_weights_match_pyg(options, flow):
    """PyG's edge list (the loops of the normalisation appended, an old loop's place
    dropped) and the coefficients before dropout on it."""
    edge_index, n = parity_graph(72)
    x, x_0 = torch.randn(n, 8), torch.randn(n, 8)
    ours, theirs = FAConv(8, flow=flow, **options), pyg.FAConv(8, flow=flow, **options)
    ours.load_state_dict(theirs.state_dict())
    for _ in range(2):  # the second call reads the cache where there is one
        out, (index, alpha) = ours(x, x_0, edge_index, return_attention_weights=True)
        ref, (ref_index, ref_alpha) = theirs(x, x_0, edge_index, return_attention_weights=True)
        torch.testing.assert_close(out, ref)
        assert torch.equal(index, ref_index)
        torch.testing.assert_close(alpha, ref_alpha)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_a_sparse_adjacency_gives_pygs_outputs_and_weighted_adjacency(layout):
    """PyG normalises a sparse adjacency with add_self_loops (a node's old loop and the new
    one add up), an edge_index with add_remaining_self_loops: each is followed, and the
    weighted adjacency holds one entry per node pair."""
    edge_index, n = parity_graph(73)
    edge_index = torch.unique(edge_index, dim=1)
    adj = to_torch_coo_tensor(edge_index.flip(0), size=(n, n))
    adj = adj if layout == torch.sparse_coo else adj.to_sparse_csr()
    x, x_0 = torch.randn(n, 8), torch.randn(n, 8)
    ours, theirs = FAConv(8), pyg.FAConv(8)
    ours.load_state_dict(theirs.state_dict())
    out, (weighted, alpha) = ours(x, x_0, adj, return_attention_weights=True)
    ref, (ref_weighted, ref_alpha) = theirs(x, x_0, adj, return_attention_weights=True)
    torch.testing.assert_close(out, ref)
    assert weighted.layout == ref_weighted.layout == layout
    torch.testing.assert_close(weighted.to_dense(), ref_weighted.to_dense())


def test_a_static_batch_is_each_feature_set_on_its_own():
    edge_index, n = parity_graph(74)
    conv = FAConv(8, eps=0.4)
    x, x_0 = torch.randn(3, n, 8), torch.randn(3, n, 8)
    expected = torch.stack([conv(x[b], x_0[b], edge_index) for b in range(3)])
    torch.testing.assert_close(conv(x, x_0, edge_index), expected)


def test_dropout_drops_coefficients_in_training_only():
    edge_index, n = parity_graph(75)
    x, x_0 = torch.randn(n, 8), torch.randn(n, 8)
    conv = FAConv(8, dropout=0.5)
    evaluated = conv.eval()(x, x_0, edge_index)
    torch.testing.assert_close(evaluated, FAConv(8).eval().load_state_dict(
        conv.state_dict()) and evaluated)
    conv.train()
    torch.manual_seed(1)
    first = conv(x, x_0, edge_index)
    torch.manual_seed(1)
    assert torch.equal(first, conv(x, x_0, edge_index))  # a seeded mask
    assert not torch.allclose(first, evaluated)
    plain = FAConv(8).train()  # no dropout: training changes nothing
    plain.load_state_dict(conv.state_dict())
    torch.testing.assert_close(plain(x, x_0, edge_index), evaluated)


def test_bad_arguments_are_named():
    edge_index, n = parity_graph(76)
    x = torch.randn(n, 8)
    weight = torch.rand(edge_index.size(1))
    with pytest.raises(ValueError, match="takes no edge_weight"):
        FAConv(8)(x, x, edge_index, weight)
    with pytest.raises(ValueError, match=r"normalize=False\) needs edge_weight"):
        FAConv(8, normalize=False)(x, x, edge_index)
    with pytest.raises(ValueError, match="x_0 has 5 rows but x has 30"):
        FAConv(8)(x, x[:5], edge_index)
    with pytest.raises(ValueError, match=r"expects x_0 of shape \[N, 8\]"):
        FAConv(8)(x, x[:, :4], edge_index)
    with pytest.raises(ValueError, match="eps must be a finite number"):
        FAConv(8, eps=float("inf"))
    with pytest.raises(TypeError, match="eps must be a number"):
        FAConv(8, eps="0.1")
    with pytest.raises(ValueError, match="dropout"):
        FAConv(8, dropout=1.5)
    with pytest.raises(TypeError, match="cached"):
        FAConv(8, cached="yes")


def test_lazy_width_and_pygs_repr():
    edge_index, n = parity_graph(77)
    conv = FAConv(-1, eps=1.0)
    assert str(conv) == str(pyg.FAConv(-1, eps=1.0)) == "FAConv(-1, eps=1.0)"
    assert conv(torch.randn(n, 6), torch.randn(n, 6), edge_index).shape == (n, 6)


def test_from_pyg_converts_and_checks_it():
    theirs = pyg.FAConv(8, eps=0.2, add_self_loops=False)
    ours = from_pyg(theirs)
    assert type(ours) is FAConv and ours.pyg_conversion["checked"]
    edge_index, n = parity_graph(78)
    x, x_0 = torch.randn(n, 8), torch.randn(n, 8)
    torch.testing.assert_close(ours(x, x_0, edge_index), theirs(x, x_0, edge_index))
