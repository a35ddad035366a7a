import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_special_values_agree, assert_twins_agree
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _graph(seed=0, n=14, m=50):
    """``(x, edge_index, edge_weight)`` in float64: loops, parallel edges, a hub, isolated
    nodes, and positive weights."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, dtype=torch.float64, generator=gen)
    return x, edge_index, torch.rand(edge_index.size(1), dtype=torch.float64, generator=gen) + 0.1


def test_matches_pyg_with_gradients():
    x, edge_index, weight = _graph()
    ours, theirs = gl.WLConvContinuous(), pyg.WLConvContinuous()
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))
    assert_twins_agree(ours, theirs, [x, weight],
                       lambda conv, x, w: conv(x, edge_index, w))


def test_a_bipartite_pair_and_missing_destination_features_match_pyg():
    gen = torch.Generator().manual_seed(1)
    x_src = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(6, 4, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 5, (30,), generator=gen)])  # node 5: none
    weight = torch.randn(30, dtype=torch.float64, generator=gen)  # (signed, as PyG's takes)
    ours, theirs = gl.WLConvContinuous(), pyg.WLConvContinuous()
    assert_twins_agree(ours, theirs, [x_src, x_dst, weight],
                       lambda conv, a, b, w: conv((a, b), edge_index, w))
    assert_twins_agree(ours, theirs, [x_src, weight],
                       lambda conv, a, w: conv((a, None), edge_index, w, size=(9, 6)))


def test_the_formula_node_by_node():
    x, edge_index, weight = _graph(seed=2)
    conv = gl.WLConvContinuous()
    for w in (None, weight):
        rows = []
        for i in range(x.size(0)):
            into = (edge_index[1] == i).nonzero().view(-1)
            weights = torch.ones(into.numel(), dtype=x.dtype) if w is None else w[into]
            total = weights.sum()
            mean = (weights.unsqueeze(1) * x[edge_index[0, into]]).sum(0) / total \
                if total != 0 else torch.zeros(4, dtype=x.dtype)
            rows.append(0.5 * (x[i] + mean))
        want = torch.stack(rows)
        torch.testing.assert_close(conv(x, edge_index, w), want)
        with reference_ops():
            torch.testing.assert_close(conv(x, edge_index, w), want)


def test_weights_summing_to_zero_give_a_finite_gradient_where_pygs_is_nan():
    x = torch.randn(3, 2, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1, 2], [2, 2, 0]])
    for conv in (gl.WLConvContinuous(), pyg.WLConvContinuous()):
        weight = torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
        out = conv(x, edge_index, weight)
        torch.testing.assert_close(out[2], 0.5 * x[2])  # the mean of node 2 taken as 0
        grad, = torch.autograd.grad(out.sum(), weight)
        finite = torch.isfinite(grad)
        assert finite.all() if isinstance(conv, gl.WLConvContinuous) else not finite.all()


def test_special_values_give_pygs_numbers():
    x, edge_index, _ = _graph(seed=3)
    x[3, 1], x[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    assert_special_values_agree(gl.WLConvContinuous(), pyg.WLConvContinuous(), x, edge_index)


def test_target_to_source_divides_by_each_nodes_own_weights():
    """With flow="target_to_source" a node averages the nodes its edges point to, weighed
    by those edges: PyG's default flow on the reversed edges. PyG's own target_to_source
    divides by the weights summed at edge_index[1] instead (docs/models.md)."""
    x, edge_index, weight = _graph(seed=4)
    ours = gl.WLConvContinuous(flow="target_to_source")
    torch.testing.assert_close(ours(x, edge_index, weight),
                               pyg.WLConvContinuous()(x, edge_index.flip(0), weight))


def test_sparse_adjacencies_graphs_and_static_batches():
    x, edge_index, weight = _graph(seed=5)
    edge_index, inverse = torch.unique(edge_index, dim=1, return_inverse=True)
    weight = torch.zeros(edge_index.size(1), dtype=torch.float64).index_add(0, inverse, weight)
    conv = gl.WLConvContinuous()
    want = pyg.WLConvContinuous()(x, edge_index, weight)
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor):
        adj = to_sparse(edge_index.flip(0), weight, size=(14, 14))
        torch.testing.assert_close(conv(x, adj), want)
    torch.testing.assert_close(conv(x, Graph(edge_index, num_nodes=14), weight), want)
    torch.testing.assert_close(conv(torch.stack([x, 3 * x]), edge_index, weight),
                               torch.stack([want, 3 * want]))


def test_from_pyg_converts_it():
    x, edge_index, weight = _graph(seed=6)
    model = torch.nn.ModuleList([pyg.WLConvContinuous()])
    converted = from_pyg(model)
    assert type(converted[0]) is gl.WLConvContinuous
    torch.testing.assert_close(converted[0](x, edge_index, weight),
                               model[0](x, edge_index, weight))


def test_bad_arguments_are_named():
    x, edge_index, weight = _graph(seed=7)
    with pytest.raises(ValueError, match="WLConvContinuous: flow"):
        gl.WLConvContinuous(flow="up")
    conv = gl.WLConvContinuous()
    with pytest.raises(ValueError, match="WLConvContinuous: edge_weight has 3 rows"):
        conv(x, edge_index, weight[:3])
    with pytest.raises(ValueError, match="x_dst"):
        conv((x, x[:, :2]), edge_index)
    with pytest.raises(ValueError, match="edge_index"):
        conv(x, edge_index + 100)
    with pytest.raises(TypeError, match="WLConvContinuous expects floating-point node features"):
        conv(x.long(), edge_index)
