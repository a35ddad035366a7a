"""ForwardGNN (Park et al., "Forward Learning of Graph Neural Networks", ICLR 2024): a
stack of any registered conv trained layer by layer with local losses, so no error is
backpropagated across layers. The schedules (greedy layer after layer, or all layers at
every step) live in ``graphloc.train``; this module holds the networks, their local losses
and their predictions, one procedure per official class:

- ``"ff"`` (``GNNLabelAppendingFF``): forward-forward, the label appended to the input;
  positive input with the true label, one negative per wrong class (drawn once), goodness
  sum(h^2) - theta pushed up on positives and down on negatives.
- ``"ff-vn"`` (``GNNVirtualNodeLabelAppendingFF``): forward-forward with one virtual node
  per class; positives link each training node to its class's node, negatives to a wrong
  class's node.
- ``"sf"`` (``GNNSingleForward``): one pass, no negatives; the loss is a softmax over the
  dot products of a node's output with the class nodes' outputs.
- ``"sf-top2input"`` (``GNNTop2InputSF``): layer j reads its input and the state of layer
  j + 2 (the top layer reads the label block); layers update in red-black order.
- ``"sf-top2loss"`` (``GNNTop2LossSF``): layer j's loss reads the mean of its output and
  the (normalised, detached) states of the layers above it.

Each layer is ``ReLU(conv(n(input)))`` with n the L2 row normalisation; the input of every
layer is detached, so each layer's loss reaches only its own parameters (tested).
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import caller_stacklevel, check_int, check_number, whole_numbers
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import graph_of_rows
from graphloc.nn.conv.registry import CONVS, check_stack
from graphloc.nn.dropout import Dropout

PROCEDURES = ("ff", "ff-vn", "sf", "sf-top2input", "sf-top2loss")
GREEDY = ("ff", "ff-vn", "sf")  # trained one layer after another; the others all at once
_VIRTUAL = ("ff-vn", "sf", "sf-top2input", "sf-top2loss")  # class nodes added to the graph


def unit_rows(x: Tensor) -> Tensor:
    """x / (||x||_2 + 1e-8) row by row: the official "layer normalisation", which keeps a
    layer from passing its goodness (its norm) on to the next one."""
    return x / (x.norm(dim=-1, keepdim=True) + 1e-8)


def with_class_nodes(graph: Graph, links: Tensor, num_classes: int) -> Graph:
    """``graph`` with ``num_classes`` virtual nodes appended (ids N..N+C-1) and, for each
    node i with ``links[i] >= 0``, edges i -> N + links[i] and back. Edge weights and
    features of ``graph`` are not carried (the official backbones ignore them too), and a
    Graph that has some is told so: a conv that reads them (built with ``edge_dim``, say)
    would otherwise compute without them on these procedures only, quietly."""
    if graph.edge_attr is not None:
        warnings.warn("ForwardGNN: the graph's edge_attr is not carried onto the graph with "
                      "class nodes (the official ForwardGNN ignores edge features): the convs "
                      "compute without them", stacklevel=caller_stacklevel())
    n = graph.num_nodes
    nodes = (links >= 0).nonzero().flatten()
    virtual = n + links[nodes]
    extra = torch.stack([torch.cat([nodes, virtual]), torch.cat([virtual, nodes])])
    return Graph(torch.cat([graph.edge_index, extra.to(graph.edge_index)], 1), n + num_classes)


class ForwardGNN(ModelCapabilities, torch.nn.Module):
    """A stack of ``num_layers`` convs of one registered kind for forward learning.

    Args:
        conv (str): a name in ``CONVS`` ("gcn", "sage", "gat", ...).
        in_channels, hidden_channels (int): input and hidden widths (every layer outputs
            ``hidden_channels``, as in the paper; there is no classifier layer).
        out_channels (int): the number of classes C.
        num_layers (int): L, at least 1.
        procedure (str, default "sf"): one of ``PROCEDURES`` (module docstring).
        theta (float, default 2.0): the forward-forward goodness threshold.
        temperature (float, default 1.0): the single-forward softmax temperature.
        num_negs (int, default 100): forward-forward negatives per node, at most C - 1.
        test_time_steps (int, default 10): sf-top2input's iterations at prediction; the
            class scores sum those from the third on (the official default 2..T-1).
        dropout (float, default 0.0): dropout on each layer's output while training (the
            official code has none; ``graphloc train`` passes its ``--dropout``).
        seed (int, default 0): draws the class nodes' fixed N(0, 1) features and the
            negatives' wrong classes.
        **conv_kwargs: passed to every conv.

    ``set_context(num_nodes, index, labels)`` gives the labelled nodes (training nodes):
    their labels are the input's label block or their class-node links, in training and
    prediction alike. ``forward(x, graph)`` returns ``[N, C]`` class scores from the first
    ``depth`` layers (all by default): forward-forward's summed goodness per candidate
    class, single-forward's summed per-layer class probabilities.

    Differences from the official code (also in docs/models.md): at prediction every
    unlabelled node is evaluated in the same pass (the official code evaluates one split
    while the other unlabelled nodes keep the uniform label), and forward-forward's context
    is the training labels only (the official test pass adds the validation labels).
    """

    def __init__(self, conv: str, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, procedure: str = "sf", theta: float = 2.0,
                 temperature: float = 1.0, num_negs: int = 100, test_time_steps: int = 10,
                 dropout: float = 0.0, seed: int = 0, **conv_kwargs):
        super().__init__()
        check_stack("ForwardGNN", conv, dropout, in_channels=in_channels,
                    hidden_channels=hidden_channels, out_channels=out_channels,
                    num_layers=num_layers)
        if procedure not in PROCEDURES:
            raise ValueError(f"procedure must be one of {PROCEDURES}, got {procedure!r}")
        if out_channels < 2:
            raise ValueError(f"ForwardGNN needs out_channels (classes) >= 2, got {out_channels}")
        check_number("ForwardGNN", "theta", theta)
        check_number("ForwardGNN", "temperature", temperature)
        if not temperature > 0:
            raise ValueError(f"ForwardGNN: temperature must be > 0, got {temperature!r}")
        check_int(num_negs, "ForwardGNN: num_negs", 1)
        check_int(test_time_steps, "ForwardGNN: test_time_steps", 1)
        check_int(seed, "ForwardGNN: seed", 0)
        self.procedure, self.num_classes, self.theta = procedure, out_channels, theta
        self.temperature, self.test_time_steps = temperature, int(test_time_steps)
        self.num_negs = min(int(num_negs), out_channels - 1)
        self.depth, self.hidden_channels = num_layers, hidden_channels
        self.seed = seed
        widths = self._input_widths(in_channels, hidden_channels, out_channels, num_layers)
        self.convs = torch.nn.ModuleList(CONVS[conv](w, hidden_channels, **conv_kwargs)
                                         for w in widths)
        self.dropout = Dropout(dropout)
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("class_x", torch.randn(out_channels, in_channels, generator=gen)
                             if procedure in _VIRTUAL else torch.zeros(0, in_channels))
        self.register_buffer("context", torch.zeros(0, dtype=torch.long))  # label or -1

    def _input_widths(self, f: int, h: int, c: int, layers: int) -> list[int]:
        if self.procedure == "ff":
            return [f + c] + [h] * (layers - 1)
        if self.procedure == "sf-top2input":  # state j beside state j + 2 (labels on top)
            states = [f] + [h] * layers + [c]
            return [states[j] + states[j + 2] for j in range(layers)]
        return [f] + [h] * (layers - 1)

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    # Predictions read the whole graph's labelled nodes (their labels, and class nodes
    # that join them all), so a subgraph cannot stand in for the graph: influence scores
    # seeds on the whole graph (``index=``) and asks ``reads`` which inputs each reads.
    node_batched = True

    def reads(self, graph: Graph, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """``(ptr [S + 1], ids)``: the nodes whose features each output in ``nodes`` reads.
        ff: the ``depth``-hop in-ball; with class nodes, which link every labelled node,
        every node (two hops through a class node reach all labelled nodes)."""
        if self.procedure == "ff":
            ptr, members, *_ = ops.khop_subgraphs(graph, nodes, self.depth)
            return ptr, members
        n = graph.num_nodes
        return torch.arange(nodes.numel() + 1) * n, torch.arange(n).repeat(nodes.numel())

    # -- the labelled nodes -------------------------------------------------------------

    def set_context(self, num_nodes: int, index: Tensor, labels: Tensor) -> None:
        """The labelled nodes ``index`` of a graph of ``num_nodes`` nodes and their labels."""
        index = whole_numbers(torch.as_tensor(index), "index")
        labels = whole_numbers(torch.as_tensor(labels), "labels")
        if index.shape != labels.shape or index.dim() != 1:
            raise ValueError(f"index and labels must be 1-D and the same length, got "
                             f"{list(index.shape)} and {list(labels.shape)}")
        if labels.numel() and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise ValueError(f"labels must lie in [0, {self.num_classes}), got values in "
                             f"[{int(labels.min())}, {int(labels.max())}]")
        if index.numel() and (index.min() < 0 or index.max() >= num_nodes):
            raise ValueError(f"index must lie in [0, {num_nodes}), got values in "
                             f"[{int(index.min())}, {int(index.max())}]")
        context = torch.full((num_nodes,), -1, dtype=torch.long, device=self.class_x.device)
        context[index.to(context.device)] = labels.to(context.device)
        self.context = context

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # the context's length is the graph's node count, known only from the checkpoint
        key = prefix + "context"
        if key in state_dict:
            self.context = torch.empty_like(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _labelled(self, num_nodes: int) -> Tensor:
        if self.context.numel() != num_nodes:
            raise ValueError(f"ForwardGNN has labels for {self.context.numel()} nodes but the "
                             f"graph has {num_nodes}: call set_context(num_nodes, index, "
                             "labels) for this graph first")
        return self.context

    def wrong_classes(self) -> Tensor:
        """[N, num_negs]: each labelled node's negative classes, a seeded random order of
        its wrong classes drawn once (as the official code), -1 on unlabelled nodes."""
        context, c = self.context, self.num_classes
        gen = torch.Generator().manual_seed(self.seed + 1)
        order = torch.rand(context.numel(), c, generator=gen).to(context.device)
        order[torch.arange(context.numel()), context.clamp(min=0)] = 2.0  # true class last
        wrong = order.argsort(1)[:, :self.num_negs]
        return wrong.masked_fill(context[:, None] < 0, -1)

    # -- one layer ----------------------------------------------------------------------

    def conv_relu(self, j: int, x: Tensor, graph: Graph) -> Tensor:
        """ReLU(conv_j(x)), then dropout while training: every procedure's layer."""
        return self.dropout(F.relu(self.convs[j](x, graph)))

    def layer(self, j: int, x: Tensor, graph: Graph) -> Tensor:
        """ReLU(conv_j(n(x))), then dropout while training."""
        return self.conv_relu(j, unit_rows(x), graph)

    def goodness(self, h: Tensor) -> Tensor:
        """Forward-forward goodness sum(h^2) - theta per row (training)."""
        return h.pow(2).sum(1) - self.theta

    def class_logits(self, h: Tensor, num_nodes: int) -> Tensor:
        """[N, C] dot products of the real rows with the class nodes' rows, / temperature."""
        return h[:num_nodes] @ h[num_nodes:].T / self.temperature

    # -- inputs ---------------------------------------------------------------------------

    def label_block(self, labels: Tensor) -> Tensor:
        """[N, C]: one-hot rows where ``labels >= 0``, uniform 1/C elsewhere."""
        block = torch.full((labels.numel(), self.num_classes), 1.0 / self.num_classes,
                           device=labels.device)
        known = labels >= 0
        block[known] = F.one_hot(labels[known], self.num_classes).float()
        return block

    def streams(self, x: Tensor, graph: Graph) -> list[tuple[Tensor, Graph]]:
        """The first layer's inputs, positive first: (features, graph) pairs. ff: the label
        block of the truth, then of each negative class; ff-vn: class-node links to the
        truth, then to each negative; sf and the top-down variants: one augmented graph."""
        context = self._labelled(x.size(0))
        if self.procedure == "ff":
            wrong = self.wrong_classes()
            labels = [context] + [wrong[:, k] for k in range(self.num_negs)]
            return [(torch.cat([x, self.label_block(lab)], 1), graph) for lab in labels]
        x_aug = torch.cat([x, self.class_x.to(x)])
        if self.procedure == "ff-vn":
            wrong = self.wrong_classes()
            links = [context] + [wrong[:, k] for k in range(self.num_negs)]
            return [(x_aug, with_class_nodes(graph, lab, self.num_classes)) for lab in links]
        return [(x_aug, with_class_nodes(graph, context, self.num_classes))]

    # -- local losses -------------------------------------------------------------------

    def ff_loss(self, outputs: list[Tensor], nodes: Tensor) -> Tensor:
        """BCE of the goodness: positive (outputs[0]) towards 1, negatives towards 0 (their
        mean), on the labelled ``nodes``."""
        pos = self.goodness(outputs[0][nodes])
        loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos))
        negs = [self.goodness(h[nodes]) for h in outputs[1:]]
        return loss + torch.stack([F.binary_cross_entropy_with_logits(
            g, torch.zeros_like(g)) for g in negs]).mean()

    def sf_loss(self, h: Tensor, nodes: Tensor, labels: Tensor, num_nodes: int) -> Tensor:
        """Cross-entropy of the class-node dot products on the labelled ``nodes``."""
        return F.cross_entropy(self.class_logits(h, num_nodes)[nodes], labels)

    def greedy_loss(self, j: int, streams) -> Tensor:
        """Layer j's loss on its (detached) inputs ``streams``: ff, ff-vn or sf."""
        n = self.context.numel()
        nodes = (self.context >= 0).nonzero().flatten()
        outputs = [self.layer(j, x.detach(), g) for x, g in streams]  # nothing leaves j
        if self.procedure == "sf":
            return self.sf_loss(outputs[0], nodes, self.context[nodes], n)
        return self.ff_loss(outputs, nodes)

    @torch.no_grad()
    def advance(self, j: int, streams) -> list[tuple[Tensor, Graph]]:
        """The next layer's inputs after layer j (frozen): each stream through it; in ff-vn
        every graph then carries the positive graph's output, as the official code."""
        outputs = [self.layer(j, x, g) for x, g in streams]
        if self.procedure == "ff-vn":
            return [(outputs[0], g) for _, g in streams]
        return [(h, g) for h, (_, g) in zip(outputs, streams, strict=True)]

    # -- the top-down variants' states ---------------------------------------------------

    def top_states(self, x: Tensor, graph: Graph) -> tuple[list[Tensor], Graph]:
        """The states after one bottom-up pass, and the augmented graph. sf-top2input:
        [S_0 = X_aug, S_1..S_L, S_L+1 = the label block] with a zero top-down input in the
        pass; sf-top2loss: [n(X_aug), n(S_1)..n(S_L)] with S_j+1 = ReLU(conv_j(S_j)) on
        the raw S_j (S_0 = X_aug), as the official ``bottom_up``, while training and
        prediction feed layer j the normalised state. Differentiable in x (prediction and
        influence); training takes them under no_grad."""
        (x_aug, aug), = self.streams(x, graph)
        if self.procedure == "sf-top2input":
            labels = torch.cat([self.context, torch.arange(self.num_classes,
                                                           device=x.device)])
            top = self.label_block(labels).to(x)
            states = [x_aug]
            for j in range(self.num_layers):
                above = torch.zeros_like(top) if j + 2 > self.num_layers else \
                    x_aug.new_zeros(x_aug.size(0), self.hidden_channels)
                states.append(self.top2input_output(j, states[-1], above, aug))
            return [*states, top], aug
        # the official bottom-up pass feeds each layer the previous one's raw output (the
        # features themselves into the first), not the normalised states it stores
        h, states = x_aug, [unit_rows(x_aug)]
        for j in range(self.depth):
            h = self.conv_relu(j, h, aug)
            states.append(unit_rows(h))
        return states, aug

    def top2input_output(self, j: int, below: Tensor, above: Tensor, graph: Graph) -> Tensor:
        """Layer j of sf-top2input on n(S_j) beside n(S_j+2)."""
        inputs = torch.cat([unit_rows(below), unit_rows(above)], 1)
        return self.conv_relu(j, inputs, graph)

    def top2loss_outputs(self, j: int, states: list[Tensor], graph: Graph):
        """Layer j of sf-top2loss: its output O_j on S_j (already normalised) and the mean
        E_j of O_j with the states of the layers above it, on which its loss is taken."""
        out = self.conv_relu(j, states[j], graph)
        above = states[j + 2:self.depth + 1]
        if not above:
            return out, out
        total = above[0].clone()  # summed in place: no [L, N, F] stack of the states
        for state in above[1:]:
            total += state
        return out, (out + total) / (len(above) + 1)

    def top_loss(self, j: int, states: list[Tensor], graph: Graph) -> tuple[Tensor, Tensor]:
        """(layer j's loss, its new state) for the top-down variants; every state is read
        detached, so the loss reaches layer j's parameters only."""
        n = self.context.numel()
        nodes = (self.context >= 0).nonzero().flatten()
        states = [s.detach() for s in states]
        if self.procedure == "sf-top2input":
            out = self.top2input_output(j, states[j], states[j + 2], graph)
            return self.sf_loss(out, nodes, self.context[nodes], n), out.detach()
        out, mixed = self.top2loss_outputs(j, states, graph)
        return self.sf_loss(mixed, nodes, self.context[nodes], n), unit_rows(out).detach()

    # -- prediction ---------------------------------------------------------------------

    def forward(self, x: Tensor, graph, evaluated: Tensor | None = None,
                index: Tensor | None = None) -> Tensor:
        """[N, C] class scores (the rows ``index`` only, when given). ``evaluated`` (ff and
        ff-vn): the nodes that claim each candidate class in turn (default: every node
        without a label); labelled nodes outside it keep their label, the rest the
        uniform label or no class link."""
        scores = self._scores(x, graph, evaluated)
        return scores if index is None else scores[index]

    def _scores(self, x: Tensor, graph, evaluated: Tensor | None) -> Tensor:
        graph = graph_of_rows(graph, x)
        if evaluated is not None and self.procedure not in ("ff", "ff-vn"):
            raise ValueError(f"evaluated= applies to the forward-forward procedures, not "
                             f"{self.procedure!r} (which predicts from one pass)")
        if self.procedure in ("ff", "ff-vn"):
            return self._ff_scores(x, graph, evaluated)
        if self.procedure == "sf":
            return self._sf_scores(x, graph)
        return self._top_scores(x, graph)

    def _claims(self, num_nodes: int, evaluated: Tensor | None) -> Tensor:
        """Per node: 1 if it claims the candidate class, 0 if it keeps its context."""
        context = self._labelled(num_nodes)
        if evaluated is None:
            return context < 0
        evaluated = whole_numbers(torch.as_tensor(evaluated, device=context.device), "evaluated")
        if evaluated.numel() and (evaluated.min() < 0 or evaluated.max() >= num_nodes):
            bad = int(evaluated.min()) if evaluated.min() < 0 else int(evaluated.max())
            raise ValueError(f"evaluated holds node {bad}, outside [0, {num_nodes})")
        claims = torch.zeros(num_nodes, dtype=torch.bool, device=context.device)
        claims[evaluated] = True
        return claims

    def _candidate_streams(self, x: Tensor, graph: Graph, claims: Tensor, c: int):
        """The input in which the claiming nodes carry class c (label block or link)."""
        context = self._labelled(x.size(0))
        labels = torch.where(claims, torch.full_like(context, c),
                             context.masked_fill(claims, -1))
        if self.procedure == "ff":
            return torch.cat([x, self.label_block(labels)], 1), graph
        x_aug = torch.cat([x, self.class_x.to(x)])
        return x_aug, with_class_nodes(graph, labels, self.num_classes)

    def _ff_scores(self, x: Tensor, graph: Graph, evaluated: Tensor | None) -> Tensor:
        """Per candidate class: the goodness mean(h^2) - theta summed over the layers (the
        official evaluation's mean; training uses the sum, equal widths keep the argmax)."""
        n, scores = x.size(0), []
        claims = self._claims(n, evaluated)
        for c in range(self.num_classes):
            h, g = self._candidate_streams(x, graph, claims, c)
            total = x.new_zeros(n)
            for j in range(self.depth):
                h = self.layer(j, h, g)
                total = total + h[:n].pow(2).mean(1) - self.theta
            scores.append(total)
        return torch.stack(scores, 1)

    def _sf_scores(self, x: Tensor, graph: Graph) -> Tensor:
        (h, aug), = self.streams(x, graph)
        n, total = x.size(0), 0
        for j in range(self.depth):
            h = self.layer(j, h, aug)
            total = total + self.class_logits(h, n).softmax(1)
        return total

    def _top_scores(self, x: Tensor, graph: Graph) -> Tensor:
        n = x.size(0)
        states, aug = self.top_states(x, graph)
        total = x.new_zeros(n, self.num_classes)
        if self.procedure == "sf-top2loss":
            for j in range(self.depth):
                mixed = self.top2loss_outputs(j, states, aug)[1]
                total = total + self.class_logits(mixed, n).softmax(1)
            return total
        for step in range(self.test_time_steps):  # the red-black dynamics, no learning
            for parity in (0, 1):
                for j in range(parity, self.num_layers, 2):
                    states[j + 1] = self.top2input_output(j, states[j], states[j + 2], aug)
            if step >= 2:  # the official accumulated steps, 2..T-1
                for j in range(self.num_layers):
                    total = total + self.class_logits(states[j + 1], n).softmax(1)
        return total
