import math
import os

import pytest
import torch
from helpers import ball_ordered, random_edge_index, train_losses

from graphloc import Graph
from graphloc.nn import GCNConv, LiftConv, LiftGCN, build_model


def _symmetric_graph(num_nodes: int, num_edges: int, seed: int) -> Graph:
    edge_index = random_edge_index(num_nodes, num_edges, seed)
    return Graph(edge_index, num_nodes=num_nodes).remove_self_loops().coalesce() \
        .to_undirected()


def _dense_norm(graph: Graph, loops: bool = False) -> torch.Tensor:
    n = graph.num_nodes
    a = torch.zeros(n, n, dtype=torch.float64)
    a.index_put_((graph.edge_index[1], graph.edge_index[0]), torch.ones(graph.num_edges,
                 dtype=torch.float64), accumulate=True)
    if loops:
        a += torch.eye(n, dtype=torch.float64)
    d = a.sum(1).pow(-0.5).nan_to_num(posinf=0.0)
    return d[:, None] * a * d[None, :]


def _linear_states(model: LiftGCN, h0: torch.Tensor, graph: Graph, steps: int):
    states, prev, h = [h0], None, h0
    for k in range(steps):
        prev, h = h, model.conv(h, graph, prev if k else None)
        states.append(h)
    return states


def test_energy_is_conserved_over_64_layers():
    graph = _symmetric_graph(60, 240, seed=1)
    model = LiftGCN(3, 8, 2, num_layers=64, residual=False).double()
    with torch.no_grad():
        model.conv.r.uniform_(-2.0, 2.0)  # a different rho per channel
    h0 = torch.randn(60, 8, dtype=torch.float64)
    m = _dense_norm(graph)
    rho = model.conv.rho.detach()

    def energy(x, x_prev):  # per channel, M = rho_c * A
        mx = rho * (m @ x_prev)
        return (x * x).sum(0) + (x_prev * x_prev).sum(0) - 2 * (x * mx).sum(0)

    with torch.no_grad():
        states = _linear_states(model, h0, graph, 64)
    e1 = energy(states[1], states[0])
    assert (e1 > 0).all()
    for k in range(2, 65):
        torch.testing.assert_close(energy(states[k], states[k - 1]), e1, rtol=1e-5, atol=0)


def test_output_is_the_chebyshev_polynomial_of_rho_a():
    graph = _symmetric_graph(25, 80, seed=2)
    model = LiftGCN(3, 4, 2, num_layers=7, residual=False).double()
    with torch.no_grad():
        model.conv.r.copy_(torch.tensor([0.3, -0.5, 1.0, 2.5], dtype=torch.float64))
    h0 = torch.randn(25, 4, dtype=torch.float64)
    with torch.no_grad():
        states = _linear_states(model, h0, graph, 7)
    a = _dense_norm(graph)
    for c, rho in enumerate(model.conv.rho.detach()):
        m = rho * a
        t_prev, t = torch.eye(25, dtype=torch.float64), m.clone()  # T_0, T_1
        for k in range(1, 8):
            torch.testing.assert_close(states[k][:, c], t @ h0[:, c])
            t_prev, t = t, 2 * m @ t - t_prev


def test_high_frequency_survives_64_layers_where_gcn_wipes_it_out():
    side = 10  # a 10 x 10 torus: 4-regular and bipartite, checkerboard eigenvalue -1
    idx = torch.arange(side * side).view(side, side)
    right, down = idx.roll(-1, 1), idx.roll(-1, 0)
    src = torch.cat([idx.flatten(), idx.flatten()])
    dst = torch.cat([right.flatten(), down.flatten()])
    graph = Graph(torch.stack([src, dst]), side * side).to_undirected()
    checker = ((idx // side + idx % side) % 2 * 2 - 1).flatten().double()[:, None]
    model = LiftGCN(1, 1, 1, num_layers=64, residual=False).double()
    with torch.no_grad():
        states = _linear_states(model, checker, graph, 64)
    lifted = (states[-1].norm() ** 2 + states[-2].norm() ** 2).sqrt() / checker.norm()
    rho = 0.9  # x_k = cos(k theta) u with cos theta = -rho: the pair keeps >= 1 - rho
    assert lifted >= math.sqrt(1 - rho) - 1e-9
    gcn = GCNConv(1, 1, bias=False).double()  # 64 GCN propagations (weight 1)
    smoothed = checker
    with torch.no_grad():
        gcn.lin.weight.fill_(1.0)
        for _ in range(64):
            smoothed = gcn(smoothed, graph)
    assert smoothed.norm() / checker.norm() < 1e-12  # (-3/5)^64 ~ 6e-15


def test_lift_conv_matches_dense_recurrence_and_gradients():
    graph = _symmetric_graph(15, 40, seed=3)
    conv = LiftConv(3).double()
    a = _dense_norm(graph)
    h1, h0 = torch.randn(15, 3, dtype=torch.float64), torch.randn(15, 3, dtype=torch.float64)
    out = conv(h1, graph, h0)
    torch.testing.assert_close(out, 2 * conv.rho * (a @ h1) - h0)
    torch.testing.assert_close(conv(h1, graph), conv.rho * (a @ h1))
    torch.testing.assert_close(conv.rho, torch.full((3,), 0.9, dtype=torch.float64))
    h1.requires_grad_()
    assert torch.autograd.gradcheck(lambda h, r: LiftConv.forward(conv, h, graph, h0),
                                    (h1, conv.r))


def test_liftgcn_with_self_loops_uses_the_gcn_operator():
    graph = _symmetric_graph(12, 30, seed=4)
    conv = LiftConv(2, add_self_loops=True).double()
    h = torch.randn(12, 2, dtype=torch.float64)
    torch.testing.assert_close(conv(h, graph), conv.rho * (_dense_norm(graph, loops=True) @ h))


def test_liftgcn_model_readout_and_training():
    torch.manual_seed(0)
    graph = _symmetric_graph(80, 300, seed=5)
    x, y = torch.randn(80, 5), torch.randint(0, 3, (80,))
    assert build_model("liftgcn", 5, 16, 3, num_layers=1).dropout.p == 0.1  # the official
    model = build_model("liftgcn", 5, 16, 3, num_layers=1, dropout=0.0)  # the formula
    h0 = model.embed(x)
    h1 = model.blocks[0](model.conv(h0, graph))
    torch.testing.assert_close(model(x, graph), model.lin_out(torch.cat([h1, h0], 1)))
    model = build_model("liftgcn", 5, 16, 3, num_layers=8, dropout=0.1)
    losses = train_losses(model, x, graph, y, steps=40)
    assert losses[-1] < 0.7 * losses[0]
    assert model.conv.r.grad is not None and model.blocks[3].scale.grad is not None


def test_checkpointed_blocks_give_the_same_outputs_and_gradients():
    graph = _symmetric_graph(40, 120, seed=7)
    x = torch.randn(40, 5, dtype=torch.float64)
    torch.manual_seed(3)
    plain = LiftGCN(5, 8, 3, num_layers=6, dropout=0.0).double()
    saved = LiftGCN(5, 8, 3, num_layers=6, checkpoint=True, dropout=0.0).double()
    saved.load_state_dict(plain.state_dict())
    grads = []
    for model in (plain, saved):
        out = model(x, graph)
        grads.append((out, *torch.autograd.grad(out.pow(2).sum(), list(model.parameters()))))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)


def test_lift_bad_input():
    with pytest.raises(ValueError, match="rho_init"):
        LiftConv(4, rho_init=0.995)
    with pytest.raises(ValueError, match="rho_max"):
        LiftConv(4, rho_max=1.0)
    with pytest.raises(ValueError, match="num_layers"):
        LiftGCN(3, 4, 2, num_layers=0)
    graph = _symmetric_graph(10, 20, seed=6)
    conv = LiftConv(4)
    with pytest.raises(ValueError, match=r"shape \[N, 4\]"):
        conv(torch.randn(10, 3), graph)
    with pytest.raises(TypeError, match="floating-point"):
        conv(torch.ones(10, 4, dtype=torch.long), graph)
    with pytest.raises(ValueError, match="h_prev2"):
        conv(torch.randn(10, 4), graph, torch.randn(9, 4))


@pytest.mark.parametrize("num_layers,radius,residual", [(5, 5, True), (5, 8, False),
                                                        (6, 3, True), (1, 2, True)])
def test_forward_within_equals_the_full_forward_on_the_nearest_nodes(num_layers, radius,
                                                                     residual):
    torch.manual_seed(7)
    edge_index = random_edge_index(120, 260, seed=47)
    order, sub_edges, sizes = ball_ordered(edge_index, 120, torch.tensor([1, 8, 90]), radius)
    graph = Graph(sub_edges, num_nodes=len(order))
    x = torch.randn(len(order), 4, dtype=torch.float64)
    for self_loops in (False, True):
        model = LiftGCN(4, 8, 3, num_layers, residual=residual,
                        add_self_loops=self_loops).double().eval()
        assert model.prunes_layers
        torch.testing.assert_close(model.forward_within(x, graph, sizes),
                                   model(x, graph)[:3], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="ball_sizes must grow to the"):
        model.forward_within(x, graph, [])


OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "liftgcn_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: f"layers{c['case'][0]}")
def test_liftgcn_equals_the_official_code_run_on_the_same_weights(case):
    """``StressJoukowskiGCN`` on ``normalized_adjacency`` from the official ``models.py``
    (``liftgcn_oracle.py``), graphloc's weights, eval mode, symmetric graphs."""
    layers, _ = case["case"]
    model = LiftGCN(4, 8, 1, layers).double().eval()
    model.load_state_dict(case["weights"])
    out = model(case["x"], Graph(case["edge_index"], num_nodes=case["x"].size(0)))
    torch.testing.assert_close(out, case["official"], rtol=1e-12, atol=1e-12)
