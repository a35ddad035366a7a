"""graphloc.train_link's pieces: the ROC AUC against counting, and the splits, models and
schedules it refuses by name."""

import itertools

import pytest
import torch

from graphloc import Graph
from graphloc.nn.models.forward_link import ForwardLinkGNN
from graphloc.train_link import (
    LinkSplit,
    as_link_split,
    roc_auc,
    train_forward_link_prediction,
)


class _Split:
    """A PyG ``Data`` from ``RandomLinkSplit``, as attributes."""

    def __init__(self, values: dict):
        self.__dict__.update(values)


def test_the_auc_is_the_share_of_positive_negative_pairs_ranked_right():
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        n = int(torch.randint(2, 30, (1,), generator=gen))
        labels = torch.randint(0, 2, (n,), generator=gen)
        labels[0], labels[1] = 0, 1
        scores = torch.randint(0, 5, (n,), generator=gen).double()  # many ties
        positives, negatives = scores[labels == 1], scores[labels == 0]
        wins = sum(float(p > q) + 0.5 * float(p == q)
                   for p, q in itertools.product(positives, negatives))
        assert roc_auc(labels, scores) == pytest.approx(wins / (len(positives) *
                                                                len(negatives)), abs=1e-12)


def _split(n=6):
    graph = Graph(torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]), num_nodes=n)
    return LinkSplit(torch.randn(n, 4), graph, torch.tensor([[0, 2, 1], [1, 5, 4]]),
                     torch.tensor([1.0, 0.0, 1.0]))


@pytest.mark.parametrize("change, message", [
    (lambda s: s._replace(x=s.x.long()), r"train: x must be a float \[N, F\] tensor"),
    (lambda s: s._replace(pairs=torch.tensor([[0, 9], [1, 2]])),
     r"train: pairs hold node 9, outside \[0, 6\)"),
    (lambda s: s._replace(pairs=s.pairs.double()), r"must be an integer \[2, P\] tensor"),
    (lambda s: s._replace(labels=torch.tensor([1.0, 2.0, 0.0])),
     r"train: labels must be 0 or 1, got 2.0"),
    (lambda s: s._replace(labels=torch.ones(2)), r"labels \(edge_label\) must have shape \[3\]"),
    (lambda s: s._replace(x=torch.randn(5, 4)), r"graph must be a Graph of 5 nodes"),
    (lambda s: s._replace(x=torch.randn(6, 3)), r"x has 3 features, the model takes 4"),
])
def test_bad_splits_are_refused_by_name(change, message):
    model = ForwardLinkGNN("gcn", 4, 6, 1)
    with pytest.raises(ValueError, match=message):
        as_link_split(change(_split()), "train", model)


def test_bad_models_schedules_and_empty_classes_are_refused():
    split = _split()
    model = ForwardLinkGNN("sage", 4, 6, 1)
    with pytest.raises(TypeError, match="trains a ForwardLinkGNN, got Linear"):
        train_forward_link_prediction(torch.nn.Linear(2, 2), split, split, split)
    with pytest.raises(ValueError, match="epochs must be an integer >= 1, got 0"):
        train_forward_link_prediction(model, split, split, split, epochs=0)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        train_forward_link_prediction(model, split, split, split, lr=-1.0)
    with pytest.raises(ValueError, match="procedure must be one of"):
        ForwardLinkGNN("gcn", 4, 6, 1, procedure="sf")
    with pytest.raises((TypeError, ValueError), match="alternating_update"):
        ForwardLinkGNN("gcn", 4, 6, 1, procedure="top-down", alternating_update="yes")
    with pytest.raises(ValueError, match="patience must be an integer"):
        train_forward_link_prediction(model, split, split, split, patience=1.5)
    with pytest.raises(ValueError, match=r"no edge_label_index, edge_label"):
        as_link_split(_Split({"x": split.x, "edge_index": split.graph.edge_index}), "val")
    with pytest.raises(ValueError, match="needs positive and negative pairs, got 2 and 0"):
        roc_auc(torch.ones(2), torch.rand(2))
    with pytest.raises(ValueError, match="scores hold NaN"):
        roc_auc(torch.tensor([0, 1]), torch.tensor([0.5, float("nan")]))




@pytest.mark.parametrize("labels, name, message", [
    (torch.tensor([]), "train", r"train: 0 positive and 0 negative pairs; training needs some"),
    (torch.tensor([1.0, 1.0, 1.0]), "val", r"val: 3 positive and 0 negative pairs; a "
                                           r"validation AUC needs both"),
    (torch.tensor([0.0, 0.0, 0.0]), "test", r"test: 0 positive and 3 negative pairs; a "
                                            r"test AUC needs both"),
])
def test_splits_without_the_pairs_a_loss_or_an_auc_needs_are_refused(labels, name, message):
    split = _split()
    pairs = split.pairs[:, :labels.numel()]
    bad = split._replace(pairs=pairs, labels=labels)
    splits = {"train": split, "val": split, "test": split, name: bad}
    with pytest.raises(ValueError, match=message):
        train_forward_link_prediction(ForwardLinkGNN("gcn", 4, 6, 1), **splits, epochs=1)
    if name == "val":  # without validation it is not read
        train_forward_link_prediction(ForwardLinkGNN("gcn", 4, 6, 1), **splits, epochs=1,
                                      patience=-1)
    positives_only = split._replace(labels=torch.ones(3))
    with pytest.raises(ValueError, match=r"forward-forward \(a loss on each kind\) needs both"):
        train_forward_link_prediction(ForwardLinkGNN("gcn", 4, 6, 1, procedure="ff"),
                                      positives_only, split, split, epochs=1)
