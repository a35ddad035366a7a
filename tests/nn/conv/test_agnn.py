"""AGNNConv against PyG's AGNNConv (values and gradients, beta's included, special values)
and AGNN's formula on a dense adjacency."""

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import AGNNConv, from_pyg

OPTIONS = [{}, {"requires_grad": False}, {"add_self_loops": False},
           {"flow": "target_to_source"}]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_matches_pyg(options):
    edge_index, n = parity_graph(91)
    theirs = pyg.AGNNConv(**options)
    if options.get("requires_grad", True):
        theirs.beta.data.fill_(0.6)  # not the initial 1: beta's gradient is checked
    graph_input = edge_index if "flow" in options else Graph(edge_index, num_nodes=n)
    assert_parity(AGNNConv(**options), theirs, lambda m, x: m(x, graph_input),
                  lambda m, x: m(x, edge_index), torch.randn(n, 8))


def test_special_values_give_pygs_outputs():
    """NaN and -inf features (NaN cosines: the node's row of weights is NaN), a zero row
    (cosine 0, as F.normalize's eps gives), a hub; the kernels and their pure-torch twins."""
    edge_index = random_edge_index(40, 200, seed=22, hub_degree=60)
    n = int(edge_index.max()) + 3
    x = torch.randn(n, 4, dtype=torch.float64)
    x[3, 1], x[7, 2], x[9] = float("nan"), float("-inf"), 0.0
    theirs, ours = pyg.AGNNConv().double(), AGNNConv().double()
    expected = theirs(x, edge_index)
    torch.testing.assert_close(ours(x, edge_index), expected, equal_nan=True)
    with reference_ops():
        torch.testing.assert_close(ours(x, edge_index), expected, equal_nan=True)


def test_agnn_formula_on_a_dense_adjacency():
    """softmax over {j -> i} and i of beta cos(x_i, x_j), counting a parallel edge twice."""
    torch.manual_seed(0)
    n = 9
    edge_index = torch.randint(0, n, (2, 30))
    conv = AGNNConv().double()
    with torch.no_grad():
        conv.beta.fill_(1.7)
    x = torch.randn(n, 5, dtype=torch.float64)
    keep = edge_index[0] != edge_index[1]
    count = torch.zeros(n, n, dtype=torch.float64).index_put_(
        (edge_index[1][keep], edge_index[0][keep]), torch.ones(int(keep.sum()),
                                                               dtype=torch.float64),
        accumulate=True) + torch.eye(n, dtype=torch.float64)
    unit = x / x.norm(dim=1, keepdim=True)
    weights = count * torch.exp(1.7 * unit @ unit.t())
    torch.testing.assert_close(conv(x, edge_index), (weights / weights.sum(1, keepdim=True)) @ x)


def test_a_static_batch_and_a_sparse_adjacency():
    edge_index, n = parity_graph(92)
    conv = AGNNConv()
    x = torch.randn(3, n, 8)
    torch.testing.assert_close(conv(x, edge_index),
                               torch.stack([conv(x[b], edge_index) for b in range(3)]))
    pattern = torch.unique(edge_index, dim=1)
    adj = torch.sparse_coo_tensor(pattern.flip(0), torch.ones(pattern.size(1)), (n, n))
    torch.testing.assert_close(conv(x[0], adj.to_sparse_csr()), pyg.AGNNConv()(x[0], pattern))


def test_bad_arguments_are_named():
    edge_index, n = parity_graph(93)
    x = torch.randn(n, 8)
    with pytest.raises(TypeError, match="x must be one tensor"):
        AGNNConv()((x, x), edge_index)
    with pytest.raises(TypeError, match="requires_grad"):
        AGNNConv(requires_grad="no")
    with pytest.raises(TypeError, match="floating-point node features"):
        AGNNConv()(x.long(), edge_index)
    with pytest.raises(ValueError, match="one node set"):
        AGNNConv()(x, Graph.bipartite(edge_index, (n, n + 1)))


def test_from_pyg_and_repr():
    edge_index, n = parity_graph(94)
    theirs = pyg.AGNNConv(requires_grad=False)
    ours = from_pyg(torch.nn.ModuleList([theirs]), example=None)[0]
    assert type(ours) is AGNNConv and str(ours) == str(theirs) == "AGNNConv()"
    x = torch.randn(n, 8)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
