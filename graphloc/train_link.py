"""Link prediction with forward learning: ``train_forward_link_prediction`` trains a
:class:`~graphloc.nn.models.forward_link.ForwardLinkGNN` as the official ForwardGNN code
trains it (``forward_learning/linkpred``; the settings of its ``exp/linkpred`` scripts):

- ``"fl"`` and ``"ff"`` (``GNNForward.forward_train``): the layers one after another;
  layer j gets its own Adam (lr 1e-3, weight decay 5e-4) and up to ``epochs`` (1000)
  full-batch steps on its loss over the training pairs, with the outputs of the trained
  layers below as its input (no gradient crosses a layer); every ``val_every`` (2)
  epochs past epoch ``val_from`` (0), the validation AUC of the network up to layer j;
  the layer's weights of the best one are kept, and the layer stops after ``patience``
  (100) checks without a better one (a negative patience: no validation, the last
  weights); after each layer, the test AUC of the network up to it.
- ``"top-down"`` (``GNNTowDownForward.forward_train``): from a bottom-up pass, ``epochs``
  steps that each update every layer once (red-black with ``alternating_update``), each
  layer with its own Adam (lr 1e-3, no weight decay: the official builds this one
  without); the validation AUC of the whole network every ``val_every`` steps, the whole
  network's weights of the best kept, ``patience`` checks; the test AUC at the end.

The splits are PyG's ``RandomLinkSplit`` outputs (``x``, ``edge_index``, the pairs
``edge_label_index`` and their 0/1 ``edge_label``; the official takes
``RandomLinkSplit(is_undirected=True, num_val=0.16, num_test=0.2)``) or
:class:`LinkSplit` tuples.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor

from graphloc.checks import check_int, check_number
from graphloc.graph import Graph
from graphloc.nn.models.forward_link import ForwardLinkGNN


class LinkSplit(NamedTuple):
    """One split of a link prediction problem: the node features, the graph messages
    pass over, and the pairs scored with their labels (1 an edge, 0 a non-edge)."""
    x: Tensor
    graph: Graph
    pairs: Tensor  # [2, P]
    labels: Tensor  # [P]


@dataclass
class LinkResult:
    """Per layer: the test AUC of the network up to it, the best validation AUC (NaN
    without validation), the epochs it ran and the epoch whose weights it kept (-1: the
    last)."""
    test_auc: list[float] = field(default_factory=list)
    val_auc: list[float] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    best_epoch: list[int] = field(default_factory=list)


def train_forward_link_prediction(model: ForwardLinkGNN, train, val, test, *,
                                  epochs: int = 1000, lr: float = 1e-3,
                                  weight_decay: float | None = None, val_every: int = 2,
                                  val_from: int = 0, patience: int = 100) -> LinkResult:
    """Trains ``model`` on the ``train`` split's pairs (module docstring) and returns
    the AUCs: per layer for the greedy procedures, one entry for top-down.
    ``weight_decay`` None is the official's: 5e-4 for "fl" and "ff", 0 for "top-down".

    Example::

        from torch_geometric.transforms import RandomLinkSplit
        train, val, test = RandomLinkSplit(is_undirected=True, num_val=0.16,
                                           num_test=0.2)(data)
        model = ForwardLinkGNN("gcn", data.num_features, 128, 4)
        result = train_forward_link_prediction(model, train, val, test)
        result.test_auc[-1]
    """
    if not isinstance(model, ForwardLinkGNN):
        raise TypeError(f"train_forward_link_prediction trains a ForwardLinkGNN, got "
                        f"{type(model).__name__}")
    if weight_decay is None:
        weight_decay = 0.0 if model.procedure == "top-down" else 5e-4
    _check_schedule(epochs, lr, weight_decay, val_every, val_from, patience)
    train, val, test = (as_link_split(s, name, model)
                        for s, name in ((train, "train"), (val, "val"), (test, "test")))
    # a loss over an empty set of pairs is NaN, and an AUC needs both kinds
    _check_both_kinds(train, "train",
                      "forward-forward (a loss on each kind)" if model.procedure == "ff" else None)
    if patience >= 0:
        _check_both_kinds(val, "val", "a validation AUC")
    _check_both_kinds(test, "test", "a test AUC")
    schedule = _Schedule(epochs, lr, weight_decay, val_every, val_from, patience)
    if model.procedure == "top-down":
        return _record(LinkResult(), *_train_top_down(model, train, val, schedule),
                       split_auc(model, test))
    result, x = LinkResult(), train.x
    for j in range(model.num_layers):
        _record(result, *_train_layer(model, j, x, train, val, schedule),
                split_auc(model, test, j + 1))
        with torch.no_grad():
            x = model.layer(j, x, train.graph)
    return result


class _Schedule(NamedTuple):
    epochs: int
    lr: float
    weight_decay: float
    val_every: int
    val_from: int
    patience: int

    def validates(self, epoch: int) -> bool:
        """Whether the official checks the validation AUC after ``epoch`` (0-based)."""
        return self.patience >= 0 and (epoch + 1) % self.val_every == 0 and \
            epoch > self.val_from


def _record(result: LinkResult, ran: int, best: tuple | None, test_auc: float) -> LinkResult:
    result.epochs.append(ran)
    result.val_auc.append(float("nan") if best is None else best[0])
    result.best_epoch.append(-1 if best is None else best[1])
    result.test_auc.append(test_auc)
    return result


class _Best:
    """The official early stopping: the best validation AUC (strictly better replaces
    it) with the weights of ``module`` then, and the checks since."""

    def __init__(self, module: torch.nn.Module, patience: int):
        self.module, self.patience = module, patience
        self.score, self.state, self.since = None, None, 0

    def stops(self, auc: float, epoch: int) -> bool:
        if self.score is None or auc > self.score[0]:
            self.score, self.since = (auc, epoch), 0
            self.state = copy.deepcopy(self.module.state_dict())
            return False
        self.since += 1
        return self.since >= self.patience

    def restore(self) -> tuple | None:
        if self.state is not None:
            self.module.load_state_dict(self.state)
        return self.score


def _train_layer(model: ForwardLinkGNN, j: int, x: Tensor, train: LinkSplit, val: LinkSplit,
                 schedule: _Schedule) -> tuple[int, tuple | None]:
    """Layer j's steps; returns the epochs run and (best validation AUC, its epoch), the
    layer left with that epoch's weights."""
    conv = model.convs[j]
    optimizer = torch.optim.Adam(conv.parameters(), lr=schedule.lr,
                                 weight_decay=schedule.weight_decay)
    best, ran = _Best(conv, schedule.patience), 0
    for epoch in range(schedule.epochs):
        model.train()
        optimizer.zero_grad()
        model.layer_loss(model.layer(j, x, train.graph), train.pairs, train.labels).backward()
        optimizer.step()
        ran = epoch + 1
        if schedule.validates(epoch) and best.stops(split_auc(model, val, j + 1), epoch):
            break
    return ran, best.restore()


def _train_top_down(model: ForwardLinkGNN, train: LinkSplit, val: LinkSplit,
                    schedule: _Schedule) -> tuple[int, tuple | None]:
    """The top-down steps; returns the steps run and (best validation AUC, its step), the
    model left with that step's weights."""
    optimizers = [torch.optim.Adam(conv.parameters(), lr=schedule.lr,
                                   weight_decay=schedule.weight_decay) for conv in model.convs]
    with torch.no_grad():
        states = model.bottom_up(train.x, train.graph)
    best, ran = _Best(model, schedule.patience), 0
    for step in range(schedule.epochs):
        model.train()
        fresh = [train.x] + [None] * (len(states) - 1)
        for group in model.sweep_order():
            for j in group:
                optimizers[j].zero_grad()
                z = model.top_down_layer(j, *model.sweep_inputs(j, states, fresh),
                                         train.graph)  # (its inputs: detached states)
                model.layer_loss(z, train.pairs, train.labels).backward()
                optimizers[j].step()
                fresh[j + 1] = z.detach()
        fresh[-1] = states[-1]
        states, ran = fresh, step + 1
        if schedule.validates(step) and best.stops(split_auc(model, val), step):
            break
    return ran, best.restore()


def split_auc(model: ForwardLinkGNN, split: LinkSplit, depth: int | None = None) -> float:
    """The ROC AUC of the network (its first ``depth`` layers, greedy procedures) on
    ``split``'s pairs (the official evaluation), in eval mode."""
    model.eval()
    scores = model.pair_scores(split.x, split.graph, split.pairs, depth)
    return roc_auc(split.labels, scores)


def roc_auc(labels: Tensor, scores: Tensor) -> float:
    """The area under the ROC curve: the chance that a random positive scores above a
    random negative, ties counting one half (scikit-learn's ``roc_auc_score``)."""
    labels = labels.flatten().bool()
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if positives == 0 or negatives == 0:
        raise ValueError(f"roc_auc needs positive and negative pairs, got {positives} and "
                         f"{negatives}")
    if bool(torch.isnan(scores).any()):
        raise ValueError("roc_auc: the scores hold NaN")
    ranks = _average_ranks(scores.flatten().double())
    rank_sum = float(ranks[labels].sum())
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def _average_ranks(values: Tensor) -> Tensor:
    """1-based ranks, ties given the mean of the ranks they span."""
    order = torch.argsort(values, stable=True)
    ordered = values[order]
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    group = torch.cumsum(starts, 0) - 1
    first = torch.nonzero(starts).flatten().double() + 1
    size = torch.bincount(group).double()
    ranks = torch.empty_like(values)
    ranks[order] = (first + (size - 1) / 2)[group]
    return ranks


def as_link_split(split, name: str, model: ForwardLinkGNN | None = None) -> LinkSplit:
    """A :class:`LinkSplit` of ``split`` (one, or a PyG ``Data`` with ``x``,
    ``edge_index``, ``edge_label_index`` and ``edge_label``), checked by name."""
    if not isinstance(split, LinkSplit):
        missing = [key for key in ("x", "edge_index", "edge_label_index", "edge_label")
                   if getattr(split, key, None) is None]
        if missing:
            raise ValueError(f"{name}: a LinkSplit or a PyG Data from RandomLinkSplit "
                             f"(split_labels=False) is needed; it has no {', '.join(missing)}")
        split = LinkSplit(split.x, Graph(split.edge_index, num_nodes=split.x.size(0)),
                          split.edge_label_index, split.edge_label)
    x, graph, pairs, labels = split
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.dim() != 2:
        raise ValueError(f"{name}: x must be a float [N, F] tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {list(getattr(x, 'shape', []))}")
    if not isinstance(graph, Graph) or graph.num_nodes != x.size(0):
        raise ValueError(f"{name}: graph must be a Graph of {x.size(0)} nodes (x's rows)")
    _check_pairs(name, pairs, labels, x.size(0))
    if model is not None and x.size(1) != model.in_channels:
        raise ValueError(f"{name}: x has {x.size(1)} features, the model takes "
                         f"{model.in_channels}")
    return LinkSplit(x, graph, pairs.long(), labels.to(x.dtype))


def _check_pairs(name: str, pairs, labels, num_nodes: int) -> None:
    if not isinstance(pairs, Tensor) or pairs.dim() != 2 or pairs.size(0) != 2 or \
            pairs.is_floating_point():
        raise ValueError(f"{name}: pairs (edge_label_index) must be an integer [2, P] "
                         f"tensor, got {list(getattr(pairs, 'shape', []))}")
    if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= num_nodes):
        bad = pairs[(pairs < 0) | (pairs >= num_nodes)][0]
        raise ValueError(f"{name}: pairs hold node {int(bad)}, outside [0, {num_nodes})")
    if not isinstance(labels, Tensor) or labels.shape != (pairs.size(1),):
        raise ValueError(f"{name}: labels (edge_label) must have shape [{pairs.size(1)}], got "
                         f"{list(getattr(labels, 'shape', []))}")
    if not bool(((labels == 0) | (labels == 1)).all()):
        bad = labels[(labels != 0) & (labels != 1)][0]
        raise ValueError(f"{name}: labels must be 0 or 1, got {float(bad)!r}")


def _check_both_kinds(split: LinkSplit, name: str, needed_by: str | None) -> None:
    """Refuses a split without pairs, or without positive or negative ones where
    ``needed_by`` needs both (forward-forward's two losses, an AUC)."""
    positives = int((split.labels == 1).sum())
    negatives = split.labels.numel() - positives
    if split.labels.numel() == 0 or (needed_by and not (positives and negatives)):
        raise ValueError(f"{name}: {positives} positive and {negatives} negative pairs; "
                         f"{needed_by or 'training'} needs "
                         f"{'both' if needed_by else 'some'}")


def _check_schedule(epochs, lr, weight_decay, val_every, val_from, patience) -> None:
    check_int(epochs, "train_forward_link_prediction: epochs", 1)
    check_int(val_every, "train_forward_link_prediction: val_every", 1)
    check_int(val_from, "train_forward_link_prediction: val_from", -1)
    if isinstance(patience, bool) or not isinstance(patience, int):
        raise ValueError(f"train_forward_link_prediction: patience must be an integer "
                         f"(negative: no validation), got {patience!r}")
    for name, value in (("lr", lr), ("weight_decay", weight_decay)):
        check_number("train_forward_link_prediction", name, value)
        if value < 0:
            raise ValueError(f"train_forward_link_prediction: {name} must be >= 0, got "
                             f"{value!r}")
