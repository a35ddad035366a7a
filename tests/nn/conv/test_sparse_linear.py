import pytest
import torch
from helpers import reference_ops
from parity import assert_trains_as_pygs, assert_twins_agree
from torch_geometric.nn.models import LINKX
from torch_geometric.nn.models.linkx import SparseLinear as PygSparseLinear
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg

N = 25


def _graph(seed=0, m=90):
    """``(edge_index, edge_weight)`` on N nodes, loops and parallel edges included, the
    last node without in-neighbours."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.stack([torch.randint(0, N, (m,), generator=gen),
                              torch.randint(0, N - 1, (m,), generator=gen)])
    return edge_index, torch.rand(m, dtype=torch.float64, generator=gen)


def _twins(bias=True):
    twins = []
    for cls in (gl.SparseLinear, PygSparseLinear):
        torch.manual_seed(3)
        twins.append(cls(N, 5, bias=bias).double())
    for (key, a), (other, b) in zip(twins[0].state_dict().items(),
                                    twins[1].state_dict().items(), strict=True):
        assert key == other and torch.equal(a, b)  # PyG's initial draws
    return twins


@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg_with_every_gradient(bias):
    edge_index, edge_weight = _graph()
    ours, theirs = _twins(bias)
    assert_twins_agree(ours, theirs, [edge_weight],
                       lambda layer, w: layer(edge_index, w))
    torch.testing.assert_close(ours(edge_index), theirs(edge_index))


def test_the_adjacency_rows_times_the_weight():
    """Against the dense product: row i of A (A[i, j] the summed weights of the edges j ->
    i) times W, plus b; with the kernels and without."""
    edge_index, edge_weight = _graph(seed=1)
    layer = gl.SparseLinear(N, 5).double()
    dense = torch.zeros(N, N, dtype=torch.float64).index_put_(
        (edge_index[1], edge_index[0]), edge_weight, accumulate=True)
    want = dense @ layer.weight + layer.bias
    for context in (torch.enable_grad, reference_ops):
        with context():
            torch.testing.assert_close(layer(edge_index, edge_weight), want)
    assert torch.equal(layer(edge_index)[N - 1], layer.bias)  # no in-neighbours


def test_adjacencies_graphs_flow_and_special_weights_as_pygs():
    edge_index, edge_weight = _graph(seed=2)
    ours, theirs = _twins()
    adj_t = to_torch_coo_tensor(edge_index.flip(0), edge_weight, size=(N, N))
    want = theirs(edge_index, edge_weight)
    torch.testing.assert_close(ours(adj_t), want)
    torch.testing.assert_close(ours(Graph(edge_index, num_nodes=N), edge_weight), want)
    ours.flow = theirs.flow = "target_to_source"
    torch.testing.assert_close(ours(edge_index, edge_weight), theirs(edge_index, edge_weight))
    ours.flow = theirs.flow = "source_to_target"
    special = edge_weight.clone()
    special[[0, 5, 9]] = torch.tensor([float("nan"), float("inf"), -float("inf")],
                                      dtype=special.dtype)
    for context in (torch.enable_grad, reference_ops):
        with context():
            torch.testing.assert_close(ours(edge_index, special), theirs(edge_index, special),
                                       equal_nan=True)


@pytest.mark.parametrize("options", [{}, {"num_edge_layers": 2},
                                     {"num_edge_layers": 3, "num_node_layers": 2}])
def test_from_pyg_converts_linkx_whole_and_it_trains_as_pygs(options):
    """LINKX kept its SparseLinear as PyG's until 2026-12-05."""
    edge_index, _ = _graph(seed=3)
    x = torch.randn(N, 7)
    torch.manual_seed(4)
    model = LINKX(N, 7, 16, 3, 2, **options)
    converted = from_pyg(model, (x, edge_index), strict=True)
    assert type(converted.edge_lin) is gl.SparseLinear
    assert converted.pyg_conversion["converted"] == ["edge_lin"]
    labels = torch.arange(N) % 3
    assert_trains_as_pygs(model, converted, lambda net: net(x, edge_index), labels)


def test_bad_arguments_are_named():
    layer = gl.SparseLinear(N, 5)
    with pytest.raises(ValueError, match=f"edge_index\\[0\\] holds {N} .* {N} nodes"):
        layer(torch.tensor([[N], [0]]))
    with pytest.raises(ValueError, match="edge_weight"):
        layer(torch.tensor([[0, 1], [1, 2]]), torch.rand(3))
    with pytest.raises(TypeError, match="edge_index must have an integer dtype"):
        layer(torch.tensor([[0.0, 1.0], [1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"edge_index must have shape \[2, E\]"):
        layer(torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="in_channels must be an integer >= 1, got 0"):
        gl.SparseLinear(0, 5)
    # no edges: every row is the bias (PyG's)
    torch.testing.assert_close(layer(torch.empty(2, 0, dtype=torch.long)),
                               layer.bias.expand(N, -1))
