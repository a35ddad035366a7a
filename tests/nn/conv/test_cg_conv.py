import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_special_values_agree, assert_twins_agree, seeded_twins
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph


def _graph(seed=0, n=14, m=50, dim=3):
    """Parallel edges, loops, a hub and isolated nodes; edge features [E, dim]."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    edge_index = torch.cat([edge_index, edge_index[:, :4]], 1)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, dtype=torch.float64, generator=gen)
    return x, edge_index, torch.randn(edge_index.size(1), dim, dtype=torch.float64,
                                      generator=gen)


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("dim,batch_norm,bias", [(0, False, True), (3, True, False),
                                                 (3, False, True)])
def test_matches_pyg_with_gradients(dim, batch_norm, bias, aggr):
    x, edge_index, edge_attr = _graph(dim=dim)
    ours, theirs = seeded_twins("CGConv", 5, dim=dim, aggr=aggr, batch_norm=batch_norm, bias=bias)
    if dim:
        assert_twins_agree(ours, theirs, [x, edge_attr],
                            lambda conv, x, e: conv(x, edge_index, e))
    else:
        assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))


def test_a_bipartite_pair_matches_pyg():
    gen = torch.Generator().manual_seed(1)
    x_src = torch.randn(9, 5, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 6, (30,), generator=gen)])
    edge_attr = torch.randn(30, 2, dtype=torch.float64, generator=gen)
    ours, theirs = seeded_twins("CGConv", (5, 3), dim=2)
    assert_twins_agree(ours, theirs, [x_src, x_dst, edge_attr],
                        lambda conv, a, b, e: conv((a, b), edge_index, e))


def _dense_cg(conv, x, edge_index, edge_attr, aggr):
    """The paper's layer edge by edge: each edge's [x_i, x_j, e_ji] through both maps,
    the gated messages reduced per node."""
    out = x.clone()
    for i in range(x.size(0)):
        into = (edge_index[1] == i).nonzero().view(-1)
        if into.numel() == 0:
            continue
        z = torch.cat([x[i].expand(into.numel(), -1), x[edge_index[0, into]], edge_attr[into]],
                      dim=1)
        messages = torch.sigmoid(conv.lin_f(z)) * torch.nn.functional.softplus(conv.lin_s(z))
        out[i] += {"add": messages.sum(0), "mean": messages.mean(0),
                   "max": messages.max(0).values}[aggr]
    return out


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_the_formula_edge_by_edge(aggr):
    x, edge_index, edge_attr = _graph(seed=2, dim=2)
    conv = gl.CGConv(5, dim=2, aggr=aggr).double()
    want = _dense_cg(conv, x, edge_index, edge_attr, aggr)
    torch.testing.assert_close(conv(x, edge_index, edge_attr), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index, edge_attr), want)


def test_sparse_adjacency_values_are_edge_features_or_weights_as_pygs():
    """A torch.sparse adjacency with values [E, D] carries the edge features (PyG's
    reading); values [E] are weights, which CGConv does not read; an edge_attr given with
    it follows the adjacency's storage order."""
    x, edge_index, edge_attr = _graph(seed=3)
    keep = torch.unique(edge_index[1] * 100 + edge_index[0], return_inverse=True)[1]
    first = torch.full((int(keep.max()) + 1,), edge_index.size(1)).scatter_reduce(
        0, keep, torch.arange(edge_index.size(1)), "amin")
    edge_index, edge_attr = edge_index[:, first], edge_attr[first]  # unique, in CSR order
    ours, theirs = seeded_twins("CGConv", 5, dim=3)
    hybrid = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (14, 14, 3)).coalesce()
    want = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(theirs(x, hybrid), want)
    torch.testing.assert_close(ours(x, hybrid), want)
    weighted = to_torch_coo_tensor(edge_index.flip(0), torch.rand(edge_index.size(1)) + 2,
                                   size=(14, 14)).double()
    torch.testing.assert_close(ours(x, weighted, edge_attr), want)
    plain, plain_theirs = seeded_twins("CGConv", 5)
    torch.testing.assert_close(plain(x, weighted), plain_theirs(x, edge_index))


def test_a_static_batch_and_a_graph_s_own_edge_features():
    """A static batch [B, N, F] is B feature sets on one graph with its edge features
    (PyG's CGConv takes one without edge features, and fails with them: its [B, E, F]
    ends meet [E, D] features)."""
    x, edge_index, edge_attr = _graph(seed=4)
    ours, theirs = seeded_twins("CGConv", 5, dim=3)
    batch = torch.randn(3, 14, 5, dtype=torch.float64)
    torch.testing.assert_close(ours(batch, edge_index, edge_attr),
                               torch.stack([theirs(b, edge_index, edge_attr) for b in batch]))
    plain, plain_theirs = seeded_twins("CGConv", 5)
    torch.testing.assert_close(plain(batch, edge_index), plain_theirs(batch, edge_index))
    graph = Graph(edge_index, num_nodes=14, edge_attr=edge_attr)
    torch.testing.assert_close(ours(x, graph), theirs(x, edge_index, edge_attr))


def test_special_values_and_empty_graphs():
    """NaN and -inf features next to a hub and isolated nodes: PyG's output, with the
    kernels and with their pure-torch twins; no edges or no nodes give PyG's shapes."""
    x, edge_index, edge_attr = _graph(seed=5)
    x[3, 1], x[7, 2], edge_attr[5, 0] = float("nan"), float("-inf"), float("inf")
    ours, theirs = seeded_twins("CGConv", 5, dim=3, aggr="max")
    assert_special_values_agree(ours, theirs, x, edge_index, lambda layer, x, edges: layer(
        x, edges, edge_attr[:edges.size(1)]))

def test_from_pyg_converts_it():
    x, edge_index, edge_attr = _graph(seed=6)
    torch.manual_seed(0)
    theirs = pyg.CGConv(5, dim=3, batch_norm=True).double().eval()
    ours = gl.from_pyg(theirs, example=(x, edge_index, edge_attr))
    assert type(ours) is gl.CGConv and ours.pyg_conversion["checked"]
    torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr))


def test_bad_arguments_are_named():
    x, edge_index, edge_attr = _graph()
    x = x.float()
    with pytest.raises(ValueError, match="dim must be an integer >= 0, got -1"):
        gl.CGConv(5, dim=-1)
    with pytest.raises(ValueError, match="channels must be an integer >= 1, got 0"):
        gl.CGConv(0)
    with pytest.raises(TypeError, match="batch_norm must be True or False"):
        gl.CGConv(5, batch_norm="yes")
    with pytest.raises(ValueError, match="changes the width"):
        gl.CGConv(5, aggr=["mean", "max"])
    with pytest.raises(ValueError, match="built with dim=0, so the edge_attr"):
        gl.CGConv(5)(x, edge_index, edge_attr.float())
    with pytest.raises(ValueError, match=r"built with dim=3: it needs edge_attr \[E, 3\]"):
        gl.CGConv(5, dim=3)(x, edge_index)
    with pytest.raises(ValueError, match=r"edge_attr has shape \[69, 2\] but the layer takes "
                                         r"3 features per edge \(dim=3\)"):
        gl.CGConv(5, dim=3)(x, edge_index, edge_attr[:, :2].float())
    with pytest.raises(ValueError, match="edge_attr has 3 rows"):
        gl.CGConv(5, dim=3)(x, edge_index, edge_attr[:3].float())
    with pytest.raises(ValueError, match=r"pair \(x_src, None\) has nothing to add"):
        gl.CGConv(5)((x, None), edge_index)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 5\]"):
        gl.CGConv(5)(x[:, :3], edge_index)
