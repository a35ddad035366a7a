import warnings

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import seeded_twins
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl

DECOMPOSITIONS = [(None, None), (2, None), (None, 2)]  # plain, bases, blocks


def _graph(seed=0, n=10, num_edges=40, num_relations=4):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n, (2, num_edges), generator=gen)
    edge_type = torch.randint(0, num_relations, (num_edges,), generator=gen)
    x = torch.randn(n, 4, dtype=torch.float64, generator=gen)
    return x, edge_index, edge_type


def _assert_same_with_gradients(ours, theirs, run, x=None):
    """Outputs, and the gradients of the parameters (and of x, if it is features)."""
    inputs = [x.clone().requires_grad_(), x.clone().requires_grad_()] if x is not None \
        else [None, None]
    got, want = run(ours, inputs[0]), run(theirs, inputs[1])
    torch.testing.assert_close(got, want)
    upstream = torch.randn(want.shape, dtype=want.dtype,
                           generator=torch.Generator().manual_seed(1))
    ours_wrt = [*ours.parameters(), *([inputs[0]] if x is not None else [])]
    theirs_wrt = [*theirs.parameters(), *([inputs[1]] if x is not None else [])]
    for a, b in zip(torch.autograd.grad(got, ours_wrt, upstream),
                    torch.autograd.grad(want, theirs_wrt, upstream), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("root_weight,bias", [(True, True), (False, False)])
@pytest.mark.parametrize("aggr", ["mean", "sum", "add", "max", "min"])
@pytest.mark.parametrize("num_bases,num_blocks", DECOMPOSITIONS)
def test_matches_pyg_on_features(num_bases, num_blocks, aggr, root_weight, bias):
    x, edge_index, edge_type = _graph()
    ours, theirs = seeded_twins("RGCNConv", 4, 6, 4, num_bases, num_blocks, aggr=aggr,
                          root_weight=root_weight, bias=bias)
    _assert_same_with_gradients(ours, theirs, lambda m, x: m(x, edge_index, edge_type), x)


@pytest.mark.parametrize("cls", ["RGCNConv", "FastRGCNConv"])
@pytest.mark.parametrize("aggr", ["mean", "sum"])
@pytest.mark.parametrize("num_bases", [None, 3])
def test_matches_pyg_on_node_indices(cls, aggr, num_bases):
    """Without features the rows of Theta_r are the messages: None (0 .. in - 1), node
    indices, and a pair (None, destination indices)."""
    _, edge_index, edge_type = _graph(seed=1, n=6)
    ours, theirs = seeded_twins(cls, 6, 5, 4, num_bases, aggr=aggr)
    indices = torch.tensor([5, 0, 3, 3, 1, 2]) if cls == "RGCNConv" else torch.arange(6)
    for x in (None, indices, (None, torch.tensor([1, 1, 0, 4, 2, 5]))):
        _assert_same_with_gradients(
            ours, theirs, lambda m, _, x=x: m(x, edge_index, edge_type))


def test_fast_rgcn_reads_the_source_ids_as_pygs_does():
    """PyG's FastRGCNConv takes node j's own id for its message, not x_j."""
    _, edge_index, edge_type = _graph(seed=2, n=6)
    ours, theirs = seeded_twins("FastRGCNConv", 6, 5, 4)
    x = torch.tensor([5, 0, 3, 3, 1, 2])
    torch.testing.assert_close(ours(x, edge_index, edge_type), theirs(x, edge_index, edge_type))


@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_matches_pyg_on_a_bipartite_pair_and_the_reversed_flow(aggr):
    gen = torch.Generator().manual_seed(3)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 5, (30,), generator=gen)])
    edge_type = torch.randint(0, 3, (30,), generator=gen)
    x_src = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(5, 2, dtype=torch.float64, generator=gen)
    ours, theirs = seeded_twins("RGCNConv", (4, 2), 6, 3, aggr=aggr)
    torch.testing.assert_close(ours((x_src, x_dst), edge_index, edge_type),
                               theirs((x_src, x_dst), edge_index, edge_type))
    x, edge_index, edge_type = _graph(seed=4)
    ours, theirs = seeded_twins("RGCNConv", 4, 6, 4, aggr=aggr, flow="target_to_source")
    torch.testing.assert_close(ours(x, edge_index, edge_type),
                               theirs(x, edge_index, edge_type))


def _dense_rgcn(conv, x, edge_index, edge_type, weight=None):
    """The paper's formula, one relation and one node at a time: root term, bias, and per
    relation the (weighted) mean of the neighbours' features times Theta_r."""
    n, theta = x.size(0), conv.relation_weights()
    if conv.num_blocks is not None:
        theta = torch.stack([torch.block_diag(*blocks) for blocks in theta])
    weight = torch.ones(edge_index.size(1), dtype=x.dtype) if weight is None else weight
    out = x @ conv.root + conv.bias
    for r in range(conv.num_relations):
        for i in range(n):
            into = (edge_index[1] == i) & (edge_type == r)
            if into.any():
                neighbours = weight[into, None] * x[edge_index[0, into]]
                out[i] = out[i] + neighbours.mean(0) @ theta[r]
    return out


@pytest.mark.parametrize("num_bases,num_blocks", DECOMPOSITIONS)
def test_matches_the_formula_with_many_relations_most_absent(num_bases, num_blocks):
    """40 relations on 30 edges: most (relation, node) pairs have no edges, and some
    relations none at all; isolated nodes get the root term and bias only."""
    x, edge_index, edge_type = _graph(seed=5, n=12, num_edges=30, num_relations=40)
    conv = gl.RGCNConv(4, 6, 40, num_bases, num_blocks).double()
    torch.nn.init.normal_(conv.bias)
    torch.testing.assert_close(conv(x, edge_index, edge_type),
                               _dense_rgcn(conv, x, edge_index, edge_type))


@pytest.mark.parametrize("make", [to_torch_coo_tensor, to_torch_csr_tensor])
def test_a_sparse_adjacency_carries_the_types_or_weights_the_edges(make):
    """Without edge_type the adjacency's values are the relations (PyG's reading of a
    SparseTensor; PyG's RGCNConv fails on a torch.sparse one); with it they weight the
    edges, as in every conv."""
    x, edge_index, edge_type = _graph(seed=6)
    edge_index = torch.unique(edge_index, dim=1)  # a matrix holds each edge once
    edge_type = edge_type[:edge_index.size(1)]
    conv = gl.RGCNConv(4, 6, 4).double()
    types_as_values = make(edge_index.flip(0), edge_type, size=(10, 10))
    torch.testing.assert_close(conv(x, types_as_values), conv(x, edge_index, edge_type))
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    weighted = make(edge_index.flip(0), weight, size=(10, 10))
    storage = weighted.to_sparse_coo().coalesce()  # the entries' order in the adjacency
    order = torch.argsort(edge_index[1] * 10 + edge_index[0])
    assert torch.equal(storage.indices().flip(0), edge_index[:, order])
    torch.testing.assert_close(conv(x, weighted, edge_type[order]),
                               _dense_rgcn(conv, x, edge_index, edge_type, weight))


@pytest.mark.parametrize("aggr", ["mean", "sum", "max", "min"])
def test_special_values_hubs_and_isolated_nodes_as_pyg(aggr):
    """NaN, inf and -inf features, a hub of 60 in-edges and two isolated nodes: PyG's
    output (NaN where PyG's is NaN), with the kernels and with their pure-torch twins."""
    edge_index = random_edge_index(40, 200, seed=21, hub_degree=60)
    n = int(edge_index.max()) + 3
    edge_type = torch.arange(edge_index.size(1)) % 4
    x = torch.randn(n, 4, dtype=torch.float64)
    x[0, 1], x[3, 2], x[5, 0] = float("nan"), float("inf"), -float("inf")
    ours, theirs = seeded_twins("RGCNConv", 4, 6, 4, aggr=aggr)
    expected = theirs(x, edge_index, edge_type)
    torch.testing.assert_close(ours(x, edge_index, edge_type), expected, equal_nan=True)
    with reference_ops():
        torch.testing.assert_close(ours(x, edge_index, edge_type), expected, equal_nan=True)


def test_bad_graphs_are_refused_and_an_empty_node_set_gives_an_empty_output():
    conv = gl.RGCNConv(4, 6, 2)
    x, types = torch.randn(3, 4), torch.tensor([0, 1, 0])
    cases = [(torch.tensor([[0, 1, 2], [1, 2, 0]]).float(), TypeError,
              "edge_index must have an integer dtype"),
             (torch.tensor([[0, 1, 5], [1, 2, 0]]), ValueError, r"edge_index\[0\] holds 5"),
             (torch.tensor([[0, 1, 2], [1, -1, 0]]), ValueError, r"edge_index\[1\] holds -1")]
    for edges, error, match in cases:
        with pytest.raises(error, match=match):
            conv(x, edges, types)
    empty = conv(torch.randn(0, 4), torch.empty(2, 0, dtype=torch.long),
                 torch.empty(0, dtype=torch.long))
    assert empty.shape == (0, 6)


def test_an_empty_graph_gives_pygs_outputs_and_zero_weight_gradients():
    """No edges: the root term and bias; the relation weights get zero gradients, as PyG's
    (None would let an optimiser skip the weight decay PyG's applies)."""
    x = torch.randn(5, 4, dtype=torch.float64)
    edge_index = torch.empty(2, 0, dtype=torch.long)
    ours, theirs = seeded_twins("RGCNConv", 4, 6, 3, num_bases=2)
    _assert_same_with_gradients(
        ours, theirs, lambda m, x: m(x, edge_index, torch.empty(0, dtype=torch.long)), x)


def test_the_relation_rows_are_cached_and_follow_edits_to_edge_type():
    x, edge_index, edge_type = _graph(seed=9)
    conv = gl.RGCNConv(4, 6, 4).double()
    first = conv(x, edge_index, edge_type)
    edge_type[:5] = (edge_type[:5] + 1) % 4  # in place: the cached rows are stale
    torch.testing.assert_close(conv(x, edge_index, edge_type),
                               _dense_rgcn(conv, x, edge_index, edge_type))
    assert not torch.allclose(first, conv(x, edge_index, edge_type))


def test_from_pyg_converts_it_inside_a_model():
    x, edge_index, edge_type = _graph(seed=10)
    model = torch.nn.ModuleList([pyg.RGCNConv(4, 8, 4, num_bases=2), pyg.FastRGCNConv(8, 3, 4)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = gl.from_pyg(model.double())
    assert converted.pyg_conversion["converted"] == ["0", "1"]
    assert type(converted[1]) is gl.FastRGCNConv
    h, want = x, x
    for ours, theirs in zip(converted, model, strict=True):
        h, want = ours(h, edge_index, edge_type), theirs(want, edge_index, edge_type)
    torch.testing.assert_close(h, want)
    checked = gl.from_pyg(pyg.RGCNConv(4, 8, 4))  # a random probe with edge types
    assert checked.pyg_conversion["checked"]


def test_bad_arguments_are_named():
    x, edge_index, edge_type = _graph()
    conv = gl.RGCNConv(4, 6, 4)
    x = x.float()
    with pytest.raises(ValueError, match=r"edge_type \(relations 0 .. 3\) holds 4"):
        conv(x, edge_index, torch.full((40,), 4))  # PyG's skips these edges silently
    with pytest.raises(ValueError, match="edge_type .* holds -1"):
        conv(x, edge_index, torch.full((40,), -1))
    with pytest.raises(ValueError, match="needs edge_type"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="edge_type has 39 rows but the graph has 40 edges"):
        conv(x, edge_index, edge_type[:39])
    with pytest.raises(TypeError, match="edge_type must be a 1-D integer tensor, got "
                                        "torch.float32"):
        conv(x, edge_index, edge_type.float())
    with pytest.raises(ValueError, match=r"x \(node indices into 4 rows\) holds 9"):
        conv(torch.arange(10), edge_index, edge_type)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 4\].*static batch"):
        conv(x.expand(2, -1, -1), edge_index, edge_type)
    with pytest.raises(ValueError, match="block-diagonal decomposition needs features"):
        gl.RGCNConv(10, 6, 4, num_blocks=2)(torch.arange(10), edge_index, edge_type)
    with pytest.raises(ValueError, match="give at most one"):
        gl.RGCNConv(4, 6, 4, num_bases=2, num_blocks=2)
    with pytest.raises(ValueError, match="num_blocks=3 must divide"):
        gl.RGCNConv(4, 6, 4, num_blocks=3)
    with pytest.raises(ValueError, match="changes the width"):
        gl.RGCNConv(4, 6, 4, aggr=["mean", "max"])
    with pytest.raises(ValueError, match="FastRGCNConv takes aggr.*aggr='max'"):
        gl.FastRGCNConv(4, 6, 4, aggr="max")
    with pytest.raises(TypeError, match="RGCNConv has torch.float32 parameters, but x is "
                                        "torch.float64"):
        conv(x.double(), edge_index, edge_type)
