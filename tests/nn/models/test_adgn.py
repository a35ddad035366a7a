"""ADGN against the official GraphAntiSymmetricNN's forward (gravins/Anti-SymmetricDGN,
graph_benchmark/models/antisymmetric_dgn.py) written out on dense matrices with the same
weights: embedding, Euler steps with the simple aggregation (or GCN's), readout; shared or
separate step weights; the official initialisation; the reach it declares; the registry."""

import math
import os

import pytest
import torch
from helpers import assert_reaches_exactly, random_edge_index

from graphloc import Graph
from graphloc.nn import ADGN, build_model


def official_forward(model: ADGN, x, edge_index, n, edge_weight=None, gcn_norm=False):
    """The official forward: emb, then per step x + eps tanh(x (W - W^T - gamma I)^T +
    phi(x) + b), phi = A (x V^T) with A[i, j] the summed weights of j -> i (or GCN's
    D^-1/2 (A + I) D^-1/2 (x V^T)), then the readout."""
    weight = torch.ones(edge_index.size(1), dtype=torch.float64) if edge_weight is None \
        else edge_weight
    a = torch.zeros(n, n, dtype=torch.float64).index_put(
        (edge_index[1], edge_index[0]), weight, accumulate=True)
    if gcn_norm:  # PyG's gcn_norm: loops of weight 1 where none, then D^-1/2 A D^-1/2
        a = a + torch.diag((a.diagonal() == 0).double())
        scale = a.sum(1).rsqrt()
        a = scale[:, None] * a * scale[None, :]
    h = model.emb(x)
    for conv in model.convs:
        w = conv.W - conv.W.t() - conv.gamma * torch.eye(conv.in_channels, dtype=torch.float64)
        v = conv.phi.lin.weight
        for _ in range(conv.num_iters):
            h = h + conv.epsilon * torch.tanh(h @ w.t() + a @ (h @ v.t()) + conv.bias)
    return model.readout(h)


@pytest.mark.parametrize("gcn_norm", [False, True])
@pytest.mark.parametrize("weight_sharing", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_the_official_forward(gcn_norm, weight_sharing, weighted):
    edge_index = random_edge_index(20, 60, seed=5)
    model = ADGN(7, 12, 3, num_layers=4, epsilon=0.3, gamma=0.05, gcn_norm=gcn_norm,
                 weight_sharing=weight_sharing).double()
    assert len(model.convs) == (1 if weight_sharing else 4)
    x = torch.randn(20, 7, dtype=torch.float64)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.2 if weighted else None
    extra = () if weight is None else (weight,)
    got = model(x, Graph(edge_index, num_nodes=20), *extra)
    want = official_forward(model, x, edge_index, 20, weight, gcn_norm)
    torch.testing.assert_close(got, want)
    grads = torch.autograd.grad(got.sum(), list(model.parameters()))
    expected = torch.autograd.grad(want.sum(), list(model.parameters()))
    for a, b in zip(grads, expected, strict=True):
        torch.testing.assert_close(a, b)


def test_the_official_initialisation():
    torch.manual_seed(0)
    model = ADGN(5, 64, 2, num_layers=3)
    bias = model.convs[0].bias
    assert bias.abs().max() <= 1 / math.sqrt(64) and bias.std() > 0.05  # uniform, not 0
    assert torch.allclose(model.convs[0].W.abs().max(), torch.tensor(1 / 8), atol=0.02)


def test_reach_registry_and_bad_arguments():
    model = ADGN(4, 6, 2, num_layers=3).double()
    assert model.graphloc_hops == 3
    assert_reaches_exactly(lambda x, e: model(x, e), 3, 4)
    built = build_model("adgn", 4, 6, 2, 5, dropout=0.0)
    assert isinstance(built, ADGN) and built.convs[0].num_iters == 5
    with pytest.raises(ValueError, match="num_layers"):
        ADGN(4, 6, 2, num_layers=0)
    with pytest.raises(ValueError, match="dropout"):
        ADGN(4, 6, 2, 2, dropout=1.5)


def test_features_of_another_width_or_dtype_are_refused_by_name():
    model = ADGN(4, 6, 2, num_layers=2)
    edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"ADGN expects x of shape \[N, 4\]"):
        model(torch.randn(3, 5), edge_index)
    with pytest.raises(TypeError, match="ADGN expects floating-point node features"):
        model(torch.ones(3, 4, dtype=torch.long), edge_index)
    assert model(torch.randn(0, 4), torch.zeros(2, 0, dtype=torch.long)).shape == (0, 2)


OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "adgn_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "share{}-gcn{}-weighted{}".format(*c["case"][:3]))
def test_adgn_equals_the_official_code_run_on_the_same_weights(case):
    """``graph_benchmark``'s GraphAntiSymmetricNN run from its repository
    (``adgn_oracle.py``) on graphloc's weights: with and without weight sharing, the
    simple and the GCN aggregation, with and without edge weights, on a directed graph."""
    share, gcn, weighted, _ = case["case"]
    model = ADGN(4, 6, 3, 3, gcn_norm=gcn, weight_sharing=share).double().eval()
    model.load_state_dict(case["weights"])
    args = (case["edge_weight"],) if weighted else ()
    out = model(case["x"], case["edge_index"], *args)
    torch.testing.assert_close(out, case["official"], rtol=1e-12, atol=1e-12)
