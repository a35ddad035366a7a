import math

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import point_cloud, reference_ops
from parity import assert_converts_and_trains_as_pygs, assert_twins_agree

import graphloc.nn as gl

N, F = 12, 5


def _cloud(seed=0):
    return point_cloud(seed, N, F, normals=True)


def _networks(kind: str, width: int = F + 4):
    local = {"none": None, "linear": torch.nn.Linear(width, 6),
             "mlp": torch.nn.Sequential(torch.nn.Linear(width, 8), torch.nn.ReLU(),
                                        torch.nn.Linear(8, 6))}[kind]
    return local, torch.nn.Linear(width if local is None else 6, 3)


def _twins(kind="mlp", width=F + 4, **kwargs):
    """graphloc's and PyG's PPFConv on one seed's networks, in float64."""
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(2)
        twins.append(module.PPFConv(*_networks(kind, width), **kwargs).double())
    return twins


OPTIONS = {"mlp": {}, "linear, mean": {"kind": "linear", "aggr": "mean"},
           "no network, no loops": {"kind": "none", "add_self_loops": False},
           "mlp, add": {"aggr": "add"}, "linear, min, no loops":
               {"kind": "linear", "aggr": "min", "add_self_loops": False}}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient(option):
    x, pos, normal, edge_index = _cloud()
    ours, theirs = _twins(**OPTIONS[option])
    assert_twins_agree(ours, theirs, [x, pos, normal],
                       lambda conv, x, p, n: conv(x, p, n, edge_index))


def test_without_features_as_pygs():
    _, pos, normal, edge_index = _cloud(1)
    ours, theirs = _twins(width=4)
    assert_twins_agree(ours, theirs, [pos, normal],
                       lambda conv, p, n: conv(None, p, n, edge_index))


def _angle(a, b):
    """The angle between two 3-vectors from their cosine (the textbook formula, not
    atan2); 0 against the zero vector (a loop's offset), as atan2(0, 0) is."""
    if float(a.norm()) * float(b.norm()) == 0:
        return 0.0
    cos = float(a @ b) / (float(a.norm()) * float(b.norm()))
    return math.acos(max(-1.0, min(1.0, cos)))


def test_the_formula_point_by_point_with_the_kernels_and_without():
    """PPFNet from its definition: the old loops dropped and one per point added, per
    neighbour [x_j, |d|, angle(n_i, d), angle(n_j, d), angle(n_i, n_j)] through the local
    network, the max per channel, the global network."""
    x, pos, normal, edge_index = _cloud(2)
    ours, _ = _twins("linear")
    edges = edge_index[:, edge_index[0] != edge_index[1]]
    edges = torch.cat([edges, torch.arange(N).repeat(2, 1)], dim=1)
    rows = []
    for i in range(N):
        messages = []
        for j in edges[0, edges[1] == i].tolist():
            d = pos[j] - pos[i]
            pair = torch.tensor([float(d.norm()), _angle(normal[i], d), _angle(normal[j], d),
                                 _angle(normal[i], normal[j])], dtype=torch.float64)
            messages.append(ours.local_nn(torch.cat([x[j], pair])))
        rows.append(torch.stack(messages).max(0).values)
    want = ours.global_nn(torch.stack(rows))
    torch.testing.assert_close(ours(x, pos, normal, edge_index), want)
    with reference_ops():
        torch.testing.assert_close(ours(x, pos, normal, edge_index), want)


@pytest.mark.parametrize("point", [N - 1, 3])
def test_a_nan_feature_reaches_what_it_reaches_in_pygs(point):
    """Without loops the last point has no edges: PyG's per-edge maps never read its NaN,
    so the first Linear's gradient stays finite; graphloc maps each point once and must
    not let 0 * NaN in. A point with edges: PyG's NaN."""
    x, pos, normal, edge_index = _cloud(3)
    x[point, 2] = float("nan")
    ours, theirs = _twins("mlp", aggr="mean", add_self_loops=False)
    _, grads = assert_twins_agree(ours, theirs, [x, pos, normal],
                                  lambda conv, x, p, n: conv(x, p, n, edge_index),
                                  equal_nan=True)
    first_weight = grads[3]
    assert torch.isfinite(first_weight).all() == (point == N - 1)


def test_a_bipartite_pair_as_pygs():
    ours, theirs = _twins()
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(9, F, dtype=torch.float64, generator=gen)
    pos = (torch.randn(9, 3, dtype=torch.float64, generator=gen),
           torch.randn(4, 3, dtype=torch.float64, generator=gen))
    normal = (torch.randn(9, 3, dtype=torch.float64, generator=gen),
              torch.randn(4, 3, dtype=torch.float64, generator=gen))
    edge_index = torch.tensor([[0, 8, 2, 5, 5, 3], [0, 1, 3, 3, 0, 3]])
    torch.testing.assert_close(ours((x, None), pos, normal, edge_index),
                               theirs((x, None), pos, normal, edge_index))


def test_a_model_converts_and_trains_as_pygs():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = pyg.PPFConv(*_networks("mlp"))

        def forward(self, x, pos, normal, edge_index):
            return self.conv(x, pos, normal, edge_index)

    torch.manual_seed(0)
    converted = assert_converts_and_trains_as_pygs(Model().double(), _cloud(5))
    assert isinstance(converted.conv, gl.PPFConv)


def test_bad_inputs_are_named():
    conv, _ = _twins()
    x, pos, normal, edge_index = _cloud(6)
    with pytest.raises(ValueError, match=r"expects normal of shape \[N, 3\]"):
        conv(x, pos, normal[:, :2], edge_index)
    with pytest.raises(ValueError, match="normal has 5 rows"):
        conv(x, pos, normal[:5], edge_index)
    with pytest.raises(ValueError, match="x has shape"):
        conv(x[:4], pos, normal, edge_index)
    with pytest.raises(ValueError, match="first Linear takes 9"):
        conv(x[:, :2], pos, normal, edge_index)
    with pytest.raises(ValueError, match="no destination positions"):
        conv(x, (pos, None), normal, edge_index)


def test_no_edges_and_no_points_as_pygs_and_bad_edges_named():
    x, pos, normal, _ = _cloud(7)
    empty = torch.empty(2, 0, dtype=torch.long)
    for loops in (True, False):
        ours, theirs = _twins(add_self_loops=loops)
        torch.testing.assert_close(ours(x, pos, normal, empty), theirs(x, pos, normal, empty))
        assert ours(x[:0], pos[:0], normal[:0], empty).shape == (0, 3)
    with pytest.raises(ValueError, match="edge_index\\[1\\] holds 12"):
        ours(x, pos, normal, torch.tensor([[0], [N]]))
