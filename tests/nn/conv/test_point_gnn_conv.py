import pytest
import torch
import torch_geometric.nn as pyg
from helpers import point_cloud, reference_ops
from parity import assert_converts_and_trains_as_pygs, assert_twins_agree

import graphloc.nn as gl

N, F = 12, 5


def _cloud(seed=0):
    return point_cloud(seed, N, F)


def _networks(kind: str):
    """``(mlp_h, mlp_f, mlp_g)``: plain Sequentials (mapped per node and regrouped), PyG's
    MLPs with BatchNorm (per edge, as PyG's), or Linears."""
    if kind == "pyg-mlp":
        return pyg.MLP([F, 8, 3]), pyg.MLP([3 + F, 8, 6]), pyg.MLP([6, 8, F])
    if kind == "linear":
        return torch.nn.Linear(F, 3), torch.nn.Linear(3 + F, 6), torch.nn.Linear(6, F)
    return (torch.nn.Sequential(torch.nn.Linear(F, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)),
            torch.nn.Sequential(torch.nn.Linear(3 + F, 8), torch.nn.ReLU(),
                                torch.nn.Linear(8, 6)),
            torch.nn.Linear(6, F))


def _twins(kind="sequential", **kwargs):
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(2)
        twins.append(module.PointGNNConv(*_networks(kind), **kwargs).double())
    return twins


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("kind, aggr", [("sequential", "max"), ("linear", "mean"),
                                        ("pyg-mlp", "max"), ("sequential", "add")])
def test_matches_pyg_with_every_gradient(kind, aggr, training):
    x, pos, edge_index = _cloud()
    ours, theirs = _twins(kind, aggr=aggr)
    ours.train(training), theirs.train(training)
    assert_twins_agree(ours, theirs, [x, pos], lambda conv, x, p: conv(x, p, edge_index))


def test_far_from_the_origin_as_pygs():
    """A cloud of unit size 10^6 from the origin: the regrouped first product is formed in
    float64 and rounded once, so the offsets keep PyG's precision (in float32, W p_j and W
    p_i of 10^6 lose the offsets' digits)."""
    x, pos, edge_index = _cloud(1)
    pos = pos + 1e6
    ours, theirs = _twins()
    ours.float(), theirs.float()
    torch.testing.assert_close(ours(x.float(), pos.float(), edge_index),
                               theirs(x.float(), pos.float(), edge_index), atol=1e-4, rtol=1e-4)


def test_the_formula_point_by_point_with_the_kernels_and_without():
    """Point-GNN from its definition: each point's alignment offset, per incoming edge the
    corrected offset and the source's features through mlp_f, the max per channel (0 for a
    point without edges), mlp_g, plus the point's features."""
    x, pos, edge_index = _cloud(2)
    ours, _ = _twins()
    rows = []
    for i in range(N):
        delta = ours.mlp_h(x[i])
        messages = [ours.mlp_f(torch.cat([pos[j] - pos[i] + delta, x[j]]))
                    for j in edge_index[0, edge_index[1] == i].tolist()]
        rows.append(torch.stack(messages).max(0).values if messages else
                    torch.zeros(6, dtype=torch.float64))
    want = x + ours.mlp_g(torch.stack(rows))
    torch.testing.assert_close(ours(x, pos, edge_index), want)
    with reference_ops():
        torch.testing.assert_close(ours(x, pos, edge_index), want)


@pytest.mark.parametrize("point", [N - 1, 3])
def test_a_nan_feature_reaches_what_it_reaches_in_pygs(point):
    """The last point has no incoming edge, so PyG's alignment network never reads its
    NaN (its gradient stays finite); mapped per node here, it must not let 0 * NaN in. A
    point with edges: PyG's NaN."""
    x, pos, edge_index = _cloud(3)
    x[point, 1] = float("nan")
    ours, theirs = _twins(aggr="mean")
    _, grads = assert_twins_agree(ours, theirs, [x, pos],
                                  lambda conv, x, p: conv(x, p, edge_index), equal_nan=True)
    mlp_h_first_weight = grads[2]
    assert torch.isfinite(mlp_h_first_weight).all() == (point == N - 1)


def test_a_model_converts_and_trains_as_pygs():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = pyg.PointGNNConv(*_networks("pyg-mlp"))
            self.out = torch.nn.Linear(F, 3)

        def forward(self, x, pos, edge_index):
            return self.out(self.conv(x, pos, edge_index))

    torch.manual_seed(0)
    converted = assert_converts_and_trains_as_pygs(Model().double(), _cloud(4))
    assert isinstance(converted.conv, gl.PointGNNConv)


def test_bad_inputs_are_named():
    conv, _ = _twins()
    x, pos, edge_index = _cloud(5)
    with pytest.raises(ValueError, match="pos has 5 rows but x has 12"):
        conv(x, pos[:5], edge_index)
    with pytest.raises(ValueError, match="first Linear takes 8"):
        conv(x[:, :2], pos, edge_index)
    with pytest.raises(TypeError, match="expects x as one tensor"):
        conv((x, x), pos, edge_index)
    with pytest.raises(TypeError, match="mlp_g must be a module, got None"):
        gl.PointGNNConv(*_networks("linear")[:2], None)


def test_no_edges_and_no_points_as_pygs_and_bad_edges_named():
    """Without edges every point takes mlp_g(0) + x, as PyG's."""
    x, pos, _ = _cloud(6)
    empty = torch.empty(2, 0, dtype=torch.long)
    ours, theirs = _twins()
    torch.testing.assert_close(ours(x, pos, empty), theirs(x, pos, empty))
    assert ours(x[:0], pos[:0], empty).shape == (0, F)
    with pytest.raises(ValueError, match="edge_index\\[0\\] holds -1"):
        ours(x, pos, torch.tensor([[-1], [0]]))
