"""AntiSymmetricConv against PyG's AntiSymmetricConv (outputs and gradients, from the same
seed or the same weights, over its options and other phi convs) and against A-DGN's update
written out on dense matrices."""

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import assert_reaches_exactly
from parity import assert_parity, parity_graph

import graphloc.nn as gl


def test_a_seed_draws_pygs_weights_and_state_dict():
    torch.manual_seed(3)
    ours = gl.AntiSymmetricConv(8)
    torch.manual_seed(3)
    theirs = pyg.AntiSymmetricConv(8)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("kwargs", [{}, {"num_iters": 4}, {"act": None}, {"act": "relu"},
                                    {"act": "leaky_relu", "act_kwargs": {"negative_slope": 0.3}},
                                    {"bias": False, "epsilon": 0.5, "gamma": 0.0}])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg(kwargs, weighted):
    edge_index, n = parity_graph(71)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1 if weighted else None
    extra = () if weight is None else (weight,)
    theirs = pyg.AntiSymmetricConv(8, **kwargs)
    with torch.no_grad():  # a non-zero bias, so that its gradient is compared too
        if theirs.bias is not None:
            theirs.bias.normal_()
    assert_parity(gl.AntiSymmetricConv(8, **kwargs), theirs,
                  lambda m, x: m(x, edge_index, *extra), lambda m, x: m(x, edge_index, *extra),
                  torch.randn(n, 8))


def test_another_phi_pyg_or_graphlocs():
    edge_index, n = parity_graph(72)
    theirs = pyg.AntiSymmetricConv(8, phi=pyg.SAGEConv(8, 8), num_iters=2)
    for phi in (gl.SAGEConv(8, 8), pyg.SAGEConv(8, 8)):
        assert_parity(gl.AntiSymmetricConv(8, phi=phi, num_iters=2), theirs,
                      lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                      torch.randn(n, 8))


def test_the_euler_steps_on_dense_matrices():
    """x <- x + eps tanh((W - W^T - gamma I) x + A_hat x V + b), A_hat GCN's D^-1/2 (A + I)
    D^-1/2, three steps."""
    edge_index, n = parity_graph(73)
    conv = gl.AntiSymmetricConv(8, num_iters=3, epsilon=0.2, gamma=0.3).double()
    with torch.no_grad():
        conv.bias.normal_()
    x = torch.randn(n, 8, dtype=torch.float64)
    a = torch.zeros(n, n, dtype=torch.float64).index_put(
        (edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.float64),
        accumulate=True)
    a = a * (1 - torch.eye(n, dtype=torch.float64)) + torch.eye(n, dtype=torch.float64)
    scale = a.sum(1).rsqrt()
    a_hat = scale[:, None] * a * scale[None, :]
    w = conv.W - conv.W.t() - 0.3 * torch.eye(8, dtype=torch.float64)
    v = conv.phi.lin.weight.t()
    want = x
    for _ in range(3):
        want = want + 0.2 * torch.tanh(want @ w.t() + a_hat @ want @ v + conv.bias)
    torch.testing.assert_close(conv(x, edge_index), want)


def test_bad_arguments_are_named():
    for kwargs, match in [({"in_channels": 0}, "in_channels"), ({"num_iters": 0}, "num_iters"),
                          ({"epsilon": float("nan")}, "epsilon"), ({"gamma": "x"}, "gamma"),
                          ({"phi": 3}, "phi"), ({"act": "no-such"}, "unknown activation"),
                          ({"bias": None}, "bias")]:
        with pytest.raises((ValueError, TypeError), match=match):
            gl.AntiSymmetricConv(**{"in_channels": 8, **kwargs})
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 8\]"):
        gl.AntiSymmetricConv(8)(torch.randn(5, 7), torch.tensor([[0], [1]]))


@pytest.mark.parametrize("num_iters", [1, 3])
def test_declared_reach_is_the_steps_times_phis(num_iters):
    conv = gl.AntiSymmetricConv(4, num_iters=num_iters).double()
    assert conv.graphloc_hops == num_iters
    assert_reaches_exactly(conv, num_iters, 4)
    tag = gl.AntiSymmetricConv(4, phi=gl.TAGConv(4, 4, K=2), num_iters=2).double()
    assert tag.graphloc_hops == 4
    assert_reaches_exactly(tag, 4, 4)
    assert gl.AntiSymmetricConv(4, phi=pyg.GCNConv(4, 4)).graphloc_hops is None  # unknown
