import copy

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_twins_agree
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _cloud(seed=0, n=14, m=50):
    """``(x [n, 4], pos [n, 3], edge_index)`` in float64: loops, parallel edges, a hub and
    isolated points."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, 4, dtype=torch.float64, generator=gen),
            torch.randn(n, 3, dtype=torch.float64, generator=gen), edge_index)


def _twins(local=True, glob=False, with_x=True, **kwargs):
    """graphloc's and PyG's PointNetConv on copies of one local (and global) network."""
    torch.manual_seed(3)
    width = 7 if with_x else 3
    local_nn = torch.nn.Sequential(torch.nn.Linear(width, 8), torch.nn.ReLU(),
                                   torch.nn.Linear(8, 5)) if local else None
    global_nn = torch.nn.Sequential(torch.nn.Linear(5 if local else width, 4)) if glob else None
    twins = [module.PointNetConv(copy.deepcopy(local_nn), copy.deepcopy(global_nn), **kwargs)
             .double() for module in (gl, pyg)]
    twins[0].load_state_dict(twins[1].state_dict())
    return twins


@pytest.mark.parametrize("aggr", ["max", "mean", "add"])
@pytest.mark.parametrize("loops", [True, False])
def test_matches_pyg_with_gradients(aggr, loops):
    x, pos, edge_index = _cloud()
    if aggr == "max":  # (tied messages: graphloc's max sends the gradient to one winner)
        edge_index = torch.unique(edge_index, dim=1)
    ours, theirs = _twins(glob=True, aggr=aggr, add_self_loops=loops)
    assert_twins_agree(ours, theirs, [x, pos], lambda conv, x, p: conv(x, p, edge_index))


def test_positions_alone_a_bipartite_pair_and_a_flow_match_pyg():
    x, pos, edge_index = _cloud(seed=1)
    edge_index = torch.unique(edge_index, dim=1)
    ours, theirs = _twins(with_x=False)
    assert_twins_agree(ours, theirs, [pos], lambda conv, p: conv(None, p, edge_index))
    ours, theirs = _twins(local=False, with_x=False, aggr="mean")  # the offsets themselves
    assert_twins_agree(ours, theirs, [pos], lambda conv, p: conv(None, p, edge_index))
    ours, theirs = _twins()
    kept = edge_index[:, edge_index[1] < 6]
    assert_twins_agree(ours, theirs, [x, pos, pos[:6] + 0.5],
                       lambda conv, x, a, b: conv((x, None), (a, b), kept))
    ours, theirs = _twins(flow="target_to_source")
    assert_twins_agree(ours, theirs, [x, pos], lambda conv, x, p: conv(x, p, edge_index))


def _dense_point(conv, x, pos, edge_index, aggr):
    """The layer point by point: each edge's [x_j, p_j - p_i] through the local network,
    aggregated over i's edges (a fresh loop per point), then the global network."""
    keep = edge_index[0] != edge_index[1]
    loops = torch.arange(pos.size(0)).expand(2, -1)
    edge_index = torch.cat([edge_index[:, keep], loops], dim=1)
    rows = []
    for i in range(pos.size(0)):
        sources = edge_index[0, edge_index[1] == i]
        messages = conv.local_nn(torch.cat([x[sources], pos[sources] - pos[i]], dim=1))
        rows.append({"max": messages.max(0).values, "mean": messages.mean(0)}[aggr])
    return conv.global_nn(torch.stack(rows))


@pytest.mark.parametrize("aggr", ["max", "mean"])
def test_the_formula_point_by_point(aggr):
    x, pos, edge_index = _cloud(seed=2)
    ours, _ = _twins(glob=True, aggr=aggr)
    want = _dense_point(ours, x, pos, edge_index, aggr)
    torch.testing.assert_close(ours(x, pos, edge_index), want)
    with reference_ops():
        torch.testing.assert_close(ours(x, pos, edge_index), want)


def test_far_points_keep_the_precision_of_pygs_offsets():
    """Points at 1e4 with a 1e-2 spread, float32: the first product per node in float64
    keeps outputs and gradients within float32 rounding of the exact values, as PyG's
    per-edge offsets do (float32 node products of size 1e4 would not)."""
    x, pos, edge_index = _cloud(seed=3, n=30, m=120)
    pos = (pos * 1e-2 + 1e4).float().double()  # (the exact value of float32 points)
    ours, theirs = _twins(aggr="mean")
    results = []
    for conv, dtype in ((theirs, torch.float64), (ours.float(), torch.float32),
                        (copy.deepcopy(theirs).float(), torch.float32)):
        leaves = [x.to(dtype).requires_grad_(), pos.to(dtype).requires_grad_()]
        out = conv(*leaves, edge_index)
        upstream = torch.linspace(-1, 1, out.numel(), dtype=dtype).view_as(out)
        grads = torch.autograd.grad(out, [*leaves, *conv.parameters()], upstream)
        results.append([t.double() for t in (out, *grads)])
    exact, got, pygs = results
    for want, ours_value, pyg_value in zip(exact, got, pygs, strict=True):
        scale = want.abs().max()
        assert (ours_value - want).abs().max() <= 1e-5 * scale
        assert (ours_value - want).abs().max() <= 4 * (pyg_value - want).abs().max() + \
            1e-6 * scale


def test_special_values_give_pygs_numbers():
    x, pos, edge_index = _cloud(seed=4)
    pos[3, 1], pos[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    ours, theirs = _twins(aggr="mean")
    torch.testing.assert_close(ours(x, pos, edge_index), theirs(x, pos, edge_index),
                               equal_nan=True)
    empty = torch.empty(2, 0, dtype=torch.long)
    for conv in (ours, theirs):
        conv.add_self_loops = False
    torch.testing.assert_close(ours(x, pos, empty), theirs(x, pos, empty))


def test_a_sparse_adjacency_and_a_graph_match_pyg():
    x, pos, edge_index = _cloud(seed=5)
    edge_index = torch.unique(edge_index, dim=1)
    ours, theirs = _twins()
    want = theirs(x, pos, edge_index)
    torch.testing.assert_close(ours(x, pos, to_torch_coo_tensor(edge_index.flip(0),
                                                                 size=(14, 14))), want)
    torch.testing.assert_close(ours(x, pos, Graph(edge_index, num_nodes=14)), want)


def test_a_hook_on_the_first_linear_sees_pygs_per_edge_call():
    x, pos, edge_index = _cloud(seed=6)
    ours, theirs = _twins(add_self_loops=False)
    seen = []
    for conv in (ours, theirs):
        conv.local_nn[0].register_forward_hook(lambda m, args, out: seen.append(args[0].shape))
    torch.testing.assert_close(ours(x, pos, edge_index), theirs(x, pos, edge_index))
    assert seen == [(edge_index.size(1), 7)] * 2


def test_from_pyg_converts_a_pointnet():
    class PointNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.PointNetConv(pyg.MLP([7, 16, 16]), add_self_loops=True)
            self.conv2 = pyg.PointNetConv(torch.nn.Sequential(torch.nn.Linear(19, 8)),
                                          torch.nn.Linear(8, 3), aggr="mean")

        def forward(self, x, pos, edge_index):
            return self.conv2(self.conv1(x, pos, edge_index), pos, edge_index)

    x, pos, edge_index = _cloud(seed=7)
    torch.manual_seed(0)
    model = PointNet().double().eval()
    converted = from_pyg(model, example=(x, pos, edge_index))
    assert type(converted.conv1) is gl.PointNetConv and type(converted.conv2) is gl.PointNetConv
    torch.testing.assert_close(converted(x, pos, edge_index), model(x, pos, edge_index))


def test_bad_arguments_are_named():
    x, pos, edge_index = _cloud(seed=8)
    with pytest.raises(ValueError, match="PointNetConv: aggr"):
        gl.PointNetConv(torch.nn.Linear(7, 4), aggr="lstm")
    with pytest.raises(TypeError, match="PointNetConv: local_nn must be a module"):
        gl.PointNetConv(3)
    conv = gl.PointNetConv(torch.nn.Linear(7, 4)).double()
    with pytest.raises(ValueError, match=r"each edge's \[x_j, pos_j - pos_i\] has 6 features, "
                                         r"but nn's first Linear takes 7"):
        conv(x[:, :3], pos, edge_index)
    with pytest.raises(ValueError, match=r"PointNetConv: x has shape \[5, 4\] but pos has "
                                         r"\[14, 3\]"):
        conv(x[:5], pos, edge_index)
    with pytest.raises(ValueError, match="PointNetConv: the messages read pos_i"):
        conv(x, (pos, None), edge_index)
    with pytest.raises(TypeError, match="PointNetConv expects floating-point node features pos"):
        conv(x, pos.long(), edge_index)
