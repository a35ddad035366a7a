"""ForwardGNN for link prediction against the official code's own training run
(``forwardgnn_link_oracle.py``), and its networks' structure."""

import os

import pytest
import torch

from graphloc import Graph
from graphloc.nn.models.forward_link import ForwardLinkGNN
from graphloc.train_link import LinkSplit, train_forward_link_prediction

OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "forwardgnn_link_official.pt")


class _Split:
    """A PyG ``Data`` from ``RandomLinkSplit``, as attributes."""

    def __init__(self, values: dict):
        self.__dict__.update(values)


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "{}-{}-{}layers-patience{}".format(*c["case"][:3],
                                                                          c["case"][6]))
def test_training_equals_the_official_run(case):
    """The official ``GNNForward.forward_train`` (FF and FL) and
    ``GNNTowDownForward.forward_train`` (red-black and Jacobi updates), with GCN, mean
    SAGE and 4-head GAT, early stopping on and off, from the same initial weights on the
    same splits: every layer's trained weights, the epochs run and kept, the test AUC (per
    layer for the greedy procedures) and the final pair scores."""
    procedure, conv, layers, _, epochs, val_every, patience, alternating = case["case"]
    model = ForwardLinkGNN(conv, 6, 8, layers, procedure=procedure,
                           alternating_update=alternating)
    model.load_state_dict(case["initial"])
    train, val, test = (_Split(s) for s in case["splits"])
    result = train_forward_link_prediction(model, train, val, test, epochs=epochs,
                                           val_every=val_every, patience=patience)
    for key, value in case["trained"].items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=1e-4, atol=1e-5)
    assert result.test_auc == pytest.approx(case["test_auc"], abs=1e-9)
    scores = model.pair_scores(test.x, Graph(test.edge_index, num_nodes=test.x.size(0)),
                               test.edge_label_index)  # the official evaluation's values
    torch.testing.assert_close(scores, case["test_scores"], rtol=1e-4, atol=1e-6)
    assert result.epochs == [e + 1 for e in case["last_epochs"]]  # (its last epoch's index)
    assert result.best_epoch == case["best_epochs"]


def test_a_layer_loss_reaches_its_own_weights_only():
    torch.manual_seed(0)
    model = ForwardLinkGNN("gcn", 4, 6, 3)
    graph = Graph(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4)
    x = torch.randn(4, 4)
    with torch.no_grad():
        below = model.layer(0, x, graph)
    loss = model.layer_loss(model.layer(1, below, graph), torch.tensor([[0, 1], [1, 3]]),
                            torch.tensor([1.0, 0.0]))
    loss.backward()
    assert all(p.grad is None for p in model.convs[0].parameters())
    assert all(p.grad is None for p in model.convs[2].parameters())
    assert all(p.grad is not None for p in model.convs[1].parameters())


def _split(n=6):
    graph = Graph(torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]), num_nodes=n)
    return LinkSplit(torch.randn(n, 4), graph, torch.tensor([[0, 2, 1], [1, 5, 4]]),
                     torch.tensor([1.0, 0.0, 1.0]))


def test_the_top_down_networks_widths_and_output():
    """Layer j reads its input state and the state two above it: F + H, H + H, ..., H
    (the top layer reads its input only); the output is the top layer's last state."""
    model = ForwardLinkGNN("gcn", 4, 6, 3, procedure="top-down")
    assert [conv.in_channels for conv in model.convs] == [4 + 6, 6 + 6, 6]
    split = _split()
    out = model(split.x, split.graph)
    assert out.shape == (6, 6) and bool((out >= 0).all())
    scores = model.pair_scores(split.x, split.graph, split.pairs)
    assert scores.shape == (3,) and bool(((scores > 0) & (scores < 1)).all())


@pytest.mark.parametrize("procedure", ["fl", "ff", "top-down"])
def test_the_output_is_a_differentiable_function_of_the_features(procedure):
    """For influence: the output's gradient reaches the features through every layer
    (top-down's sweeps included), equal to finite differences."""
    torch.manual_seed(0)
    model = ForwardLinkGNN("gcn", 4, 6, 2, procedure=procedure).double()
    split = _split()
    x = split.x.double().requires_grad_()
    weights = torch.randn(6, 6, dtype=torch.float64)
    (model(x, split.graph) * weights).sum().backward()
    assert x.grad.abs().sum() > 0
    step = torch.zeros_like(x)
    step[2, 1] = 1e-6
    with torch.no_grad():
        change = ((model(x + step, split.graph) - model(x - step, split.graph)) * weights).sum()
    assert float(change / 2e-6) == pytest.approx(float(x.grad[2, 1]), rel=1e-5, abs=1e-9)
