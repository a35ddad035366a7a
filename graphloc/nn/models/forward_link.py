"""ForwardGNN for link prediction (Park et al., "Forward Learning of Graph Neural
Networks", ICLR 2024; official ``forward_learning/linkpred/gnn_forward.py``,
``GNNForward``): a stack of any registered conv, each layer ``ReLU(conv(n(x)))`` with n
the L2 row normalisation, trained one layer after another on its own loss over the
training pairs (no error crosses a layer), scored by the product of the two nodes'
outputs ``z_u * z_v``:

- ``"ff"`` (forward-forward, the official ``GNN_FL-FF``): goodness ``sum((z_u z_v)^2) -
  theta`` pushed up on the positive pairs and down on the negative ones (a binary
  cross-entropy on each set, the two means summed); a pair's score is the sigmoid of its
  goodness.
- ``"fl"`` (forward learning, ``GNN_FL``): a binary cross-entropy of ``sum(z_u z_v)``
  against the pair's label; a pair's score is its sigmoid.

The schedule (``graphloc.train_link.train_forward_link_prediction``) is the official one.
The top-down variant (``GNNTowDownForward``) is not built.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_number
from graphloc.graph import Graph
from graphloc.nn.conv._utils import as_graph
from graphloc.nn.conv.registry import CONVS, check_stack
from graphloc.nn.models.forward import unit_rows

LINK_PROCEDURES = ("ff", "fl")


class ForwardLinkGNN(torch.nn.Module):
    """The official ``GNNForward`` network for link prediction.

    Args:
        conv (str): a name in ``CONVS`` ("gcn", "sage", "gat", ...): the official's are
            PyG's GCNConv, mean SAGEConv and GATConv of 4 heads concatenated to
            ``hidden_channels``, which "gcn", "sage" and "gat" build by default.
        in_channels, hidden_channels (int): input and hidden widths (every layer outputs
            ``hidden_channels``; official: 128).
        num_layers (int): L, at least 1 (official: 2).
        procedure (str, default "ff"): ``"ff"`` or ``"fl"`` (module docstring).
        theta (float, default 2.0): the forward-forward goodness threshold.
        **conv_kwargs: passed to every conv.

    ``forward(x, graph)`` returns the last layer's node outputs; ``pair_scores(x, graph,
    pairs)`` the official evaluation's score of each pair.
    """

    def __init__(self, conv: str, in_channels: int, hidden_channels: int, num_layers: int,
                 procedure: str = "ff", theta: float = 2.0, **conv_kwargs):
        super().__init__()
        check_stack("ForwardLinkGNN", conv, 0.0, in_channels=in_channels,
                    hidden_channels=hidden_channels, num_layers=num_layers)
        if procedure not in LINK_PROCEDURES:
            raise ValueError(f"ForwardLinkGNN: procedure must be one of {LINK_PROCEDURES}, "
                             f"got {procedure!r}")
        check_number("ForwardLinkGNN", "theta", theta)
        self.procedure, self.theta = procedure, float(theta)
        widths = [in_channels] + [hidden_channels] * (num_layers - 1)
        self.convs = torch.nn.ModuleList(CONVS[conv](w, hidden_channels, **conv_kwargs)
                                         for w in widths)

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def layer(self, j: int, x: Tensor, graph: Graph) -> Tensor:
        """ReLU(conv_j(n(x))): the official normalisation layer and GNN layer j."""
        return F.relu(self.convs[j](unit_rows(x), graph))

    def forward(self, x: Tensor, graph) -> Tensor:
        graph = as_graph(graph, x)
        for j in range(self.num_layers):
            x = self.layer(j, x, graph)
        return x

    def layer_loss(self, z: Tensor, pairs: Tensor, labels: Tensor) -> Tensor:
        """Layer j's local loss from its outputs ``z`` on the training pairs."""
        out = z[pairs[0]] * z[pairs[1]]
        if self.procedure == "fl":
            return F.binary_cross_entropy_with_logits(out.sum(1), labels)
        goodness = out.pow(2).sum(1) - self.theta
        positive = labels == 1
        loss = z.new_zeros(())
        for chosen, target in ((positive, 1.0), (labels == 0, 0.0)):
            loss = loss + F.binary_cross_entropy_with_logits(
                goodness[chosen], torch.full_like(goodness[chosen], target))
        return loss

    def layer_scores(self, z: Tensor, pairs: Tensor) -> Tensor:
        """The official ``forward_predict`` score of each pair from layer outputs ``z``."""
        out = z[pairs[0]] * z[pairs[1]]
        if self.procedure == "fl":
            return out.sum(1).sigmoid()
        return torch.nan_to_num(out.pow(2).sum(1) - self.theta).sigmoid()

    @torch.no_grad()
    def pair_scores(self, x: Tensor, graph, pairs: Tensor, depth: int | None = None) -> Tensor:
        """The official evaluation's score of each pair (``eval_model``): the mean over
        the first ``depth`` layers (all by default) of their scores, with the official
        normalisation layers' zeros counted among them (each layer's score halved: the
        ranking and so the AUC are those of the plain mean)."""
        graph = as_graph(graph, x)
        depth = self.num_layers if depth is None else depth
        total = x.new_zeros(pairs.size(1))
        for j in range(depth):
            x = self.layer(j, x, graph)
            total = total + self.layer_scores(x, pairs)
        return total / (2 * depth)
