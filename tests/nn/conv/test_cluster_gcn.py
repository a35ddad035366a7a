"""ClusterGCNConv against PyG's ClusterGCNConv (values and gradients under each option)
and Cluster-GCN's formula on a dense adjacency, with the loop cases PyG cannot run."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, parity_graph
from torch_geometric.utils import to_torch_coo_tensor

from graphloc import Graph
from graphloc.nn import ClusterGCNConv, from_pyg

OPTIONS = [{}, {"diag_lambda": 0.5}, {"diag_lambda": -0.3, "bias": False},
           {"flow": "target_to_source", "diag_lambda": 0.7}]


@pytest.fixture
def float64_default():
    """PyG's degree() counts in the default dtype, so its 1 / degree is float32 even for
    float64 features; with float64 as the default both sides are exact."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(saved)


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_matches_pyg(options, float64_default):
    """On a graph with loops (replaced by one per node), parallel edges and isolated nodes."""
    edge_index, n = parity_graph(81)
    graph_input = edge_index if "flow" in options else Graph(edge_index, num_nodes=n)
    assert_parity(ClusterGCNConv(8, 6, **options), pyg.ClusterGCNConv(8, 6, **options),
                  lambda m, x: m(x, graph_input), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


def test_without_added_loops_matches_pyg_where_it_runs(float64_default):
    """PyG's runs without add_self_loops only on a graph holding one loop per node, in
    node order (its diagonal values are added to the loops in edge order)."""
    edge_index, n = parity_graph(82)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    edge_index = torch.cat([edge_index, torch.arange(n).repeat(2, 1)], dim=1)
    options = {"add_self_loops": False, "diag_lambda": 0.4}
    assert_parity(ClusterGCNConv(8, 6, **options), pyg.ClusterGCNConv(8, 6, **options),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_cluster_gcn_formula_on_a_dense_adjacency(add_self_loops):
    """((D + I)^-1 (A + I) + lambda diag) X W_1 + X W_2, counts with multiplicity; without
    added loops, each of the graph's own loops weighted 1 + lambda by its node's degree
    (two loops at node 3, none at node 5: cases PyG's cannot run)."""
    torch.manual_seed(0)
    n, lam = 10, 0.6
    edge_index = torch.cat([torch.randint(0, n, (2, 40)), torch.tensor([[3, 3, 1], [3, 3, 1]])],
                           dim=1)
    conv = ClusterGCNConv(4, 3, diag_lambda=lam, add_self_loops=add_self_loops).double()
    x = torch.randn(n, 4, dtype=torch.float64)
    src, dst = edge_index
    if add_self_loops:
        keep = src != dst
        src = torch.cat([src[keep], torch.arange(n)])
        dst = torch.cat([dst[keep], torch.arange(n)])
    A = torch.zeros(n, n, dtype=torch.float64).index_put_((dst, src), torch.ones(len(src),
                                                          dtype=torch.float64), accumulate=True)
    deg = A.sum(1).clamp(min=1)
    P = A / deg[:, None] + lam * torch.diag(A.diagonal() / deg)
    want = conv.lin_out(P @ x) + conv.lin_root(x)
    torch.testing.assert_close(conv(x, edge_index), want)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_a_sparse_adjacency_is_its_pattern(layout):
    """Its values are not weights (PyG overwrites them too); on a loop-free pattern PyG's
    result."""
    edge_index, n = parity_graph(83)
    edge_index = torch.unique(edge_index[:, edge_index[0] != edge_index[1]], dim=1)
    adj = to_torch_coo_tensor(edge_index.flip(0), torch.rand(edge_index.size(1)), (n, n))
    adj = adj if layout == torch.sparse_coo else adj.to_sparse_csr()
    ours, theirs = ClusterGCNConv(8, 6, diag_lambda=0.2), pyg.ClusterGCNConv(8, 6, diag_lambda=0.2)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 8)
    torch.testing.assert_close(ours(x, adj), theirs(x, adj))
    torch.testing.assert_close(ours(x, adj), theirs(x, edge_index))


def test_a_static_batch_is_each_feature_set_on_its_own():
    edge_index, n = parity_graph(84)
    conv = ClusterGCNConv(8, 6, diag_lambda=0.3)
    x = torch.randn(3, n, 8)
    torch.testing.assert_close(conv(x, edge_index),
                               torch.stack([conv(x[b], edge_index) for b in range(3)]))


def test_bad_arguments_are_named():
    edge_index, n = parity_graph(85)
    x = torch.randn(n, 8)
    with pytest.raises(TypeError, match="x must be one tensor"):
        ClusterGCNConv(8, 6)((x, x), edge_index)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 8\]"):
        ClusterGCNConv(8, 6)(x[:, :5], edge_index)
    with pytest.raises(ValueError, match="diag_lambda must be a finite number"):
        ClusterGCNConv(8, 6, diag_lambda=float("nan"))
    with pytest.raises(TypeError, match="diag_lambda must be a number"):
        ClusterGCNConv(8, 6, diag_lambda=None)
    with pytest.raises(ValueError, match="out_channels must be an integer >= 1"):
        ClusterGCNConv(8, 0)
    with pytest.raises(ValueError, match="one node set"):
        ClusterGCNConv(8, 6)(x, Graph.bipartite(edge_index, (n, n + 2)))


def test_lazy_width_repr_and_from_pyg():
    edge_index, n = parity_graph(86)
    conv = ClusterGCNConv(-1, 6, diag_lambda=1.0)
    assert str(conv) == str(pyg.ClusterGCNConv(-1, 6, diag_lambda=1.0))
    assert conv(torch.randn(n, 5), edge_index).shape == (n, 6)
    theirs = pyg.ClusterGCNConv(8, 6, diag_lambda=0.25)
    ours = from_pyg(theirs)
    assert type(ours) is ClusterGCNConv and ours.pyg_conversion["checked"]
    x = torch.randn(n, 8)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
