"""ForwardGNN for link prediction (Park et al., "Forward Learning of Graph Neural
Networks", ICLR 2024; official ``forward_learning/linkpred``): a stack of any registered
conv whose layers learn from their own losses over the training pairs (no error crosses
a layer), a pair scored by the product of its two nodes' outputs ``z_u * z_v``:

- ``"fl"`` (forward learning, ``GNNForward`` as ``train_forward.py`` builds it for
  ``GNN_FL-<gnn>``, the paper's runs: ``exp/linkpred/linkpred-fl.sh``): layers
  ``ReLU(conv(n(x)))`` with n the L2 row normalisation, trained one after another; a
  binary cross-entropy of ``sum(z_u z_v)`` against the pair's label; a pair's score is
  its sigmoid.
- ``"ff"`` (forward-forward, ``GNN_FL-FF-<gnn>``): the same layers and schedule; goodness
  ``sum((z_u z_v)^2) - theta`` pushed up on the positive pairs and down on the negative
  ones (a binary cross-entropy on each set, the two means summed); the score is the
  sigmoid of the goodness.
- ``"top-down"`` (``GNNTowDownForward``, ``GNN_FL-CE-TopDown-<gnn>``,
  ``linkpred-fl-topdown.sh``): layer j reads ``[n(S_j), n(S_{j+2})]``, its input state
  and the state of the layer above it (the top layer its input only), all layers trained
  at every step on the ``"fl"`` loss, in red-black order (even layers, then odd ones
  reading their fresh states) with ``alternating_update``; the states start from one
  bottom-up pass. A pair's score: the mean sigmoid over the layers and the test-time
  steps 2 .. 9 of 10 such sweeps from a bottom-up pass.

The schedules are in ``graphloc.train_link``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_flags, check_number
from graphloc.graph import Graph
from graphloc.nn.conv._utils import as_graph
from graphloc.nn.conv.registry import CONVS, check_stack
from graphloc.nn.models.forward import unit_rows

LINK_PROCEDURES = ("fl", "ff", "top-down")
GREEDY_LINK_PROCEDURES = ("fl", "ff")
#: the official evaluation of the top-down network: 10 sweeps, the scores of sweeps 2..9
TEST_TIME_STEPS, FIRST_STORED_STEP = 10, 2


class ForwardLinkGNN(torch.nn.Module):
    """The official ForwardGNN networks for link prediction (module docstring).

    Args:
        conv (str): a name in ``CONVS`` ("gcn", "sage", "gat", ...): the official's are
            PyG's GCNConv, mean SAGEConv and GATConv of 4 heads concatenated to
            ``hidden_channels``, which "gcn", "sage" and "gat" build by default.
        in_channels, hidden_channels (int): input and hidden widths (every layer outputs
            ``hidden_channels``; the paper's runs: 128).
        num_layers (int): L, at least 1 (the paper's greedy runs: 4; top-down: 1 to 4).
        procedure (str, default "fl"): one of ``LINK_PROCEDURES``.
        theta (float, default 2.0): the forward-forward goodness threshold.
        alternating_update (bool, default True): top-down's red-black order (the
            official script passes ``--alternating-update``); False updates every layer
            from the previous step's states.
        **conv_kwargs: passed to every conv.

    ``forward(x, graph)`` returns the last layer's node outputs (greedy procedures) or
    the top layer's state after the evaluation's sweeps (top-down); ``pair_scores(x,
    graph, pairs)`` the official evaluation's score of each pair.
    """

    def __init__(self, conv: str, in_channels: int, hidden_channels: int, num_layers: int,
                 procedure: str = "fl", theta: float = 2.0, alternating_update: bool = True,
                 **conv_kwargs):
        super().__init__()
        check_stack("ForwardLinkGNN", conv, 0.0, in_channels=in_channels,
                    hidden_channels=hidden_channels, num_layers=num_layers)
        if procedure not in LINK_PROCEDURES:
            raise ValueError(f"ForwardLinkGNN: procedure must be one of {LINK_PROCEDURES}, "
                             f"got {procedure!r}")
        check_number("ForwardLinkGNN", "theta", theta)
        check_flags("ForwardLinkGNN", alternating_update=alternating_update)
        self.procedure, self.theta, self.in_channels = procedure, float(theta), in_channels
        self.alternating_update = alternating_update
        sizes = [in_channels] + [hidden_channels] * num_layers + [0]
        widths = sizes[:-2] if procedure in GREEDY_LINK_PROCEDURES else \
            [sizes[j] + sizes[j + 2] for j in range(num_layers)]
        self.convs = torch.nn.ModuleList(CONVS[conv](w, hidden_channels, **conv_kwargs)
                                         for w in widths)

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    # -- the greedy procedures ---------------------------------------------------------

    def layer(self, j: int, x: Tensor, graph: Graph) -> Tensor:
        """ReLU(conv_j(n(x))): the official normalisation layer and GNN layer j."""
        return F.relu(self.convs[j](unit_rows(x), graph))

    def forward(self, x: Tensor, graph) -> Tensor:
        graph = as_graph(graph, x)
        if self.procedure == "top-down":
            return self._evaluation_sweeps(x, graph)[0][-2]
        for j in range(self.num_layers):
            x = self.layer(j, x, graph)
        return x

    def layer_loss(self, z: Tensor, pairs: Tensor, labels: Tensor) -> Tensor:
        """A layer's local loss from its outputs ``z`` on the training pairs."""
        out = z[pairs[0]] * z[pairs[1]]
        if self.procedure != "ff":
            return F.binary_cross_entropy_with_logits(out.sum(1), labels)
        goodness = out.pow(2).sum(1) - self.theta
        loss = z.new_zeros(())
        for chosen, target in ((labels == 1, 1.0), (labels == 0, 0.0)):
            loss = loss + F.binary_cross_entropy_with_logits(
                goodness[chosen], torch.full_like(goodness[chosen], target))
        return loss

    def layer_scores(self, z: Tensor, pairs: Tensor) -> Tensor:
        """The official score of each pair from a layer's outputs ``z``."""
        out = z[pairs[0]] * z[pairs[1]]
        if self.procedure != "ff":
            return out.sum(1).sigmoid()
        return torch.nan_to_num(out.pow(2).sum(1) - self.theta).sigmoid()

    @torch.no_grad()
    def pair_scores(self, x: Tensor, graph, pairs: Tensor, depth: int | None = None) -> Tensor:
        """The official evaluation's score of each pair (``eval_model``). Greedy: the mean
        over the first ``depth`` layers (all by default) of their scores, with the
        official normalisation layers' zeros counted among them (each layer's score
        halved: the ranking and so the AUC are those of the plain mean). Top-down: the
        mean sigmoid over every layer and the sweeps 2 .. 9 (``depth`` unused)."""
        graph = as_graph(graph, x)
        if self.procedure == "top-down":
            return self._evaluation_sweeps(x, graph, pairs)[1]
        depth = self.num_layers if depth is None else depth
        total = x.new_zeros(pairs.size(1))
        for j in range(depth):
            x = self.layer(j, x, graph)
            total = total + self.layer_scores(x, pairs)
        return total / (2 * depth)

    # -- the top-down procedure --------------------------------------------------------

    def top_down_layer(self, j: int, below: Tensor, above: Tensor | None,
                       graph: Graph) -> Tensor:
        """ReLU(conv_j([n(below), n(above)])), or of n(below) alone where nothing is above
        (the top layer). (The official detaches the inputs; training passes detached
        states, so ``forward`` stays a differentiable function of x for influence.)"""
        inputs = unit_rows(below) if above is None else \
            torch.cat([unit_rows(below), unit_rows(above)], dim=1)
        return F.relu(self.convs[j](inputs, graph))

    def bottom_up(self, x: Tensor, graph: Graph) -> list:
        """The states ``[x, S_1, .., S_L, None]`` of one bottom-up pass, each layer reading
        zeros where its upper state goes (the official ``bottom_up``)."""
        states = [x]
        for j, conv in enumerate(self.convs):
            zeros = x.new_zeros(x.size(0), conv.in_channels - states[-1].size(1))
            states.append(self.top_down_layer(j, states[-1], zeros, graph))
        return states + [None]

    def sweep_order(self) -> list[list[int]]:
        """The layers of one step: even then odd ones (red-black), or all at once."""
        layers = list(range(self.num_layers))
        return [layers[0::2], layers[1::2]] if self.alternating_update else [layers]

    def sweep_inputs(self, j: int, states: list, fresh: list) -> tuple:
        """Layer j's (below, above) in a step: this step's fresh states where the red-black
        order has made them, else the previous step's (the official's choice)."""
        def pick(k):
            return fresh[k] if self.alternating_update and fresh[k] is not None else states[k]
        return pick(j), pick(j + 2)

    def _evaluation_sweeps(self, x: Tensor, graph: Graph, pairs: Tensor | None = None):
        """The official top-down ``eval_model``: a bottom-up pass, then 10 sweeps; returns
        the last states and, given ``pairs``, the mean sigmoid score over every layer of
        the sweeps 2 .. 9."""
        states, scores = self.bottom_up(x, graph), []
        for step in range(TEST_TIME_STEPS):
            fresh = [x] + [None] * (len(states) - 1)
            for group in self.sweep_order():
                for j in group:
                    fresh[j + 1] = self.top_down_layer(j, *self.sweep_inputs(j, states, fresh),
                                                       graph)
                    if pairs is not None and step >= FIRST_STORED_STEP:
                        scores.append(self.layer_scores(fresh[j + 1], pairs))
            fresh[-1] = states[-1]
            states = fresh
        return states, (torch.stack(scores).mean(0) if scores else None)

