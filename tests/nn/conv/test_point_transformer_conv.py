import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import assert_twins_agree

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg

N = 12


def _cloud(seed=0, m=40):
    """``(x, pos, edge_index)`` in float64: loops and parallel edges included, the last
    point without edges."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, 6, dtype=torch.float64, generator=gen)
    pos = torch.rand(N, 3, dtype=torch.float64, generator=gen)
    return x, pos, torch.randint(0, N - 1, (2, m), generator=gen)


def _networks(kind: str):
    """``(pos_nn, attn_nn)``: PyG's defaults, or the Point Transformer's MLPs."""
    if kind == "default":
        return None, None
    return (torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)),
            torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)))


def _twins(kind="default", in_channels=6, **kwargs):
    """graphloc's and PyG's PointTransformerConv from one seed in float64 (PyG's draws,
    checked equal)."""
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(2)
        twins.append(module.PointTransformerConv(in_channels, 4, *_networks(kind),
                                                 **kwargs).double())
    ours, theirs = twins
    for (key, a), (other, b) in zip(ours.state_dict().items(), theirs.state_dict().items(),
                                    strict=True):
        assert key == other and torch.equal(a, b)
    return ours, theirs


OPTIONS = {"default": {}, "networks": {"kind": "networks"},
           "no loops": {"add_self_loops": False},
           "networks, no loops": {"kind": "networks", "add_self_loops": False}}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient(option):
    x, pos, edge_index = _cloud()
    ours, theirs = _twins(**OPTIONS[option])
    assert_twins_agree(ours, theirs, [x, pos],
                       lambda conv, x, pos: conv(x, pos, edge_index))


def test_a_bipartite_pair_as_pygs():
    ours, theirs = _twins(in_channels=(6, 5))
    gen = torch.Generator().manual_seed(3)
    x_src, pos_src = torch.randn(9, 6, dtype=torch.float64, generator=gen), \
        torch.rand(9, 3, dtype=torch.float64, generator=gen)
    x_dst, pos_dst = torch.randn(4, 5, dtype=torch.float64, generator=gen), \
        torch.rand(4, 3, dtype=torch.float64, generator=gen)
    edge_index = torch.tensor([[0, 8, 2, 5, 5, 3], [0, 1, 3, 3, 0, 3]])
    assert_twins_agree(ours, theirs, [x_src, x_dst, pos_src, pos_dst],
                       lambda conv, a, b, p, q: conv((a, b), (p, q), edge_index))


def _oracle(conv, x, pos, edge_index):
    """The Point Transformer from its formula, point by point: the old loops dropped and
    one per point added, per neighbour the offset encoding and the score, a softmax over
    the neighbours for each channel, the sum of the weighted values plus encodings."""
    edges = edge_index[:, edge_index[0] != edge_index[1]] if conv.add_self_loops else edge_index
    if conv.add_self_loops:
        edges = torch.cat([edges, torch.arange(N).repeat(2, 1)], dim=1)
    out = torch.zeros(N, conv.out_channels, dtype=x.dtype)
    for i in range(N):
        sources = edges[0, edges[1] == i]
        if not sources.numel():
            continue
        delta = conv.pos_nn(pos[i] - pos[sources])
        score = conv.lin_dst(x[i]) - conv.lin_src(x[sources]) + delta
        if conv.attn_nn is not None:
            score = conv.attn_nn(score)
        alpha = score.softmax(dim=0)  # over the neighbours, each channel apart
        out[i] = (alpha * (conv.lin(x[sources]) + delta)).sum(0)
    return out


@pytest.mark.parametrize("option", OPTIONS)
def test_the_formula_point_by_point_with_the_kernels_and_without(option):
    x, pos, edge_index = _cloud(seed=1)
    ours, _ = _twins(**OPTIONS[option])
    with torch.no_grad():
        want = _oracle(ours, x, pos, edge_index)
        for context in (torch.no_grad, reference_ops):
            with context():
                torch.testing.assert_close(ours(x, pos, edge_index), want)


def test_special_values_as_pygs_outside_the_all_minus_inf_rule():
    """NaN features, positions and an infinite position: PyG's outputs and gradients. (An
    infinite feature can make a point's scores in a channel all -inf: weights 0 there,
    PyG's NaN, as documented for every attention conv.)"""
    x, pos, edge_index = _cloud(seed=2)
    x[3, 1] = float("nan")
    pos[5, 0] = float("nan")
    pos[7, 2] = float("inf")
    for option in ("default", "networks, no loops"):
        ours, theirs = _twins(**OPTIONS[option])
        for context in (torch.enable_grad, reference_ops):
            with context():
                want, _ = assert_twins_agree(ours, theirs, [x, pos],
                                             lambda conv, x, pos: conv(x, pos, edge_index),
                                             equal_nan=True)
        assert want.isnan().any()


def test_inputs_conversion_and_named_errors():
    x, pos, edge_index = _cloud(seed=4)
    ours, theirs = _twins("networks")
    want = theirs(x, pos, edge_index)
    torch.testing.assert_close(ours(x, pos, Graph(edge_index, num_nodes=N)), want)
    distinct = edge_index.unique(dim=1)  # (an adjacency holds each edge once)
    adj_t = torch.sparse_coo_tensor(distinct.flip(0), torch.ones(distinct.size(1)),
                                    (N, N)).coalesce()
    torch.testing.assert_close(ours(x, pos, adj_t), theirs(x, pos, distinct))
    ours.flow = theirs.flow = "target_to_source"
    torch.testing.assert_close(ours(x, pos, edge_index), theirs(x, pos, edge_index))
    converted = from_pyg(theirs, strict=True)  # (probed with positions of pos_nn's width)
    assert type(converted) is gl.PointTransformerConv
    torch.testing.assert_close(converted(x, pos, edge_index), theirs(x, pos, edge_index))
    ours.flow = "source_to_target"
    planar = pyg.PointTransformerConv(6, 4, pos_nn=pyg.MLP([2, 8, 4]))  # (2-D positions)
    assert type(from_pyg(planar, strict=True)) is gl.PointTransformerConv
    with pytest.raises(ValueError, match=r"a pair \(x_src, None\) has no destination"):
        ours((x, None), pos, edge_index)
    with pytest.raises(ValueError, match="pos has 11 rows but x has 12 points"):
        ours(x, pos[1:], edge_index)
    with pytest.raises(TypeError, match="floating-point node features pos, got torch.int64"):
        ours(x, pos.long(), edge_index)
    with pytest.raises(ValueError, match="2 coordinates at the sources but 3"):
        ours((x, x), (pos[:, :2], pos), edge_index)
    with pytest.raises(TypeError, match="pos_nn must be a module, got int"):
        gl.PointTransformerConv(6, 4, pos_nn=3)
    with pytest.raises(ValueError, match="out_channels must be an integer >= 1, got 0"):
        gl.PointTransformerConv(6, 0)


def test_no_points_and_no_edges_as_pygs():
    no_edges = torch.empty(2, 0, dtype=torch.long)
    for option in ("default", "no loops"):
        ours, theirs = _twins(**OPTIONS[option])
        for n in (0, 4):
            x, pos = torch.randn(n, 6, dtype=torch.float64), torch.rand(n, 3, dtype=torch.float64)
            assert_twins_agree(ours, theirs, [x, pos],
                               lambda conv, x, pos: conv(x, pos, no_edges))


def test_a_hub_of_300_edges_as_pygs():
    ours, theirs = _twins("networks")
    hub = torch.stack([torch.arange(300) % N, torch.zeros(300, dtype=torch.long)])
    x, pos, _ = _cloud(seed=5)
    for context in (torch.enable_grad, reference_ops):
        with context():
            assert_twins_agree(ours, theirs, [x, pos],
                               lambda conv, x, pos: conv(x, pos, hub))
