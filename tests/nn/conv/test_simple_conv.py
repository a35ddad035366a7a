import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl

AGGREGATIONS = ["sum", "add", "mean", "max", "min", "mul", ["mean", "max"], "std", "softmax"]
COMBINATIONS = [None, "sum", "cat", "self_loop"]


def _graph(seed=0, n=12, num_edges=40):
    edge_index = random_edge_index(n, num_edges, seed=seed, hub_degree=8)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, dtype=torch.float64, generator=gen)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64, generator=gen) + 0.5
    return x, edge_index, weight


def _both(aggr, combine_root):
    if isinstance(aggr, list) and combine_root == "sum":
        pytest.skip("a list's aggregate is wider than x: no sum with the root")
    return gl.SimpleConv(aggr, combine_root), pyg.SimpleConv(aggr, combine_root)


def _assert_same_with_gradient(run_ours, run_theirs, x):
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = run_ours(xa), run_theirs(xb)
    torch.testing.assert_close(got, want)
    upstream = torch.randn(want.shape, dtype=want.dtype,
                           generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(torch.autograd.grad(got, xa, upstream)[0],
                               torch.autograd.grad(want, xb, upstream)[0])


@pytest.mark.parametrize("combine_root", COMBINATIONS)
@pytest.mark.parametrize("aggr", AGGREGATIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg_on_an_edge_index(aggr, combine_root, weighted):
    ours, theirs = _both(aggr, combine_root)
    x, edge_index, weight = _graph()
    weight = weight if weighted else None
    _assert_same_with_gradient(lambda x: ours(x, edge_index, weight),
                               lambda x: theirs(x, edge_index, weight), x)


@pytest.mark.parametrize("combine_root", COMBINATIONS)
@pytest.mark.parametrize("aggr", ["sum", "mean", "max", "mul", ["min", "sum"]])
@pytest.mark.parametrize("make", [to_torch_coo_tensor, to_torch_csr_tensor])
def test_matches_pyg_on_a_weighted_sparse_adjacency(aggr, combine_root, make):
    """PyG's self_loop adds the identity onto the adjacency (a loop it holds gains 1, and
    "mean" counts it once); the graph here has loops to add it to."""
    ours, theirs = _both(aggr, combine_root)
    x, edge_index, weight = _graph(seed=2)
    edge_index, weight = torch.unique(edge_index, dim=1), None
    edge_index = torch.cat([edge_index, torch.tensor([[3, 5], [3, 5]])], dim=1).unique(dim=1)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    adj = make(edge_index.flip(0), weight, size=(12, 12))
    _assert_same_with_gradient(lambda x: ours(x, adj), lambda x: theirs(x, adj), x)


@pytest.mark.parametrize("combine_root", [None, "sum", "cat"])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max", "var"])
def test_matches_pyg_on_a_bipartite_pair(aggr, combine_root):
    ours, theirs = _both(aggr, combine_root)
    gen = torch.Generator().manual_seed(3)
    edge_index = torch.stack([torch.randint(0, 7, (20,), generator=gen),
                              torch.randint(0, 4, (20,), generator=gen)])
    x_src = torch.randn(7, 5, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(4, 5, dtype=torch.float64, generator=gen)
    for pair in ((x_src, x_dst), (x_src, None)):
        torch.testing.assert_close(ours(pair, edge_index, size=(7, 4)),
                                   theirs(pair, edge_index, size=(7, 4)))


@pytest.mark.parametrize("combine_root", COMBINATIONS)
def test_matches_pyg_on_a_static_batch_and_the_reversed_flow(combine_root):
    x, edge_index, weight = _graph(seed=4)
    batch = torch.randn(3, *x.shape, dtype=torch.float64)
    ours, theirs = _both("mean", combine_root)
    if combine_root == "self_loop":  # PyG loops nodes 0 .. B - 1 only (num_nodes=x.size(0))
        theirs = lambda x, edge_index: torch.stack(  # noqa: E731
            [pyg.SimpleConv("mean", "self_loop")(copy, edge_index) for copy in x])
    torch.testing.assert_close(ours(batch, edge_index), theirs(batch, edge_index))
    ours = gl.SimpleConv("max", combine_root, flow="target_to_source")
    theirs = pyg.SimpleConv("max", combine_root, flow="target_to_source")
    torch.testing.assert_close(ours(x, edge_index, weight), theirs(x, edge_index, weight))


def test_self_loop_on_a_graph_with_loops_adds_one_more_as_pyg():
    """A node with a loop gets a second (PyG's add_self_loops): its mean counts both."""
    x = torch.tensor([[1.0], [2.0], [4.0]])
    edge_index = torch.tensor([[0, 1, 2], [1, 1, 1]])
    out = gl.SimpleConv("mean", "self_loop")(x, edge_index)
    torch.testing.assert_close(out, torch.tensor([[1.0], [(1 + 2 + 4 + 2) / 4], [4.0]]))


def test_from_pyg_converts_it_inside_a_model():
    torch.manual_seed(0)
    model = torch.nn.ModuleList([pyg.SimpleConv("max", "cat"), pyg.SimpleConv()])
    x, edge_index, _ = _graph(seed=5)
    converted = gl.from_pyg(model)
    assert converted.pyg_conversion["converted"] == ["0", "1"]
    for ours, theirs in zip(converted, model, strict=True):
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_bad_arguments_are_named():
    x, edge_index, _ = _graph()
    with pytest.raises(ValueError, match="combine_root must be one of.*'mean'"):
        gl.SimpleConv(combine_root="mean")
    conv = gl.SimpleConv()
    conv.combine_root = "sums"  # set later: read at each call (PyG's ignores it silently)
    with pytest.raises(ValueError, match="combine_root must be one of.*'sums'"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="self_loop' needs one node set"):
        gl.SimpleConv(combine_root="self_loop")((x, x[:4]), edge_index)
    with pytest.raises(ValueError, match="size.* gives 4 destination nodes but x gives 12"):
        gl.SimpleConv(combine_root="self_loop")(x, edge_index % 4, size=(12, 4))
    with pytest.raises(ValueError, match=r"combine_root='sum' adds x_dst of width 5 to the "
                                         r"aggregate of width 10"):
        gl.SimpleConv(["mean", "max"], "sum")(x, edge_index)
    with pytest.raises(ValueError, match="unknown aggregation 'median-ish'"):
        gl.SimpleConv("median-ish")
    with pytest.raises(ValueError, match="edge_weight has 3 rows but the graph has 53 edges"):
        gl.SimpleConv()(x, edge_index, torch.ones(3))
    with pytest.raises(TypeError, match="floating-point node features"):
        gl.SimpleConv()(x.long(), edge_index)
