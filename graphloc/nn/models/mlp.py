"""The City-Networks benchmark's MLP baseline (``LeonResearch/City-Networks``,
``benchmark/configs.py``, ``--method mlp``): PyG's ``MLP`` with its defaults, which reads
no edge, so its influence is all at hop 0 (R = 0)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_flags
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import check_dropouts, check_input, check_sizes, graph_of_rows
from graphloc.nn.dropout import Dropout


class _BatchNorm(torch.nn.Module):
    """``BatchNorm1d`` under PyG's ``BatchNorm`` name (``module``), so PyG's saved ``MLP``
    weights and statistics load as they are."""

    def __init__(self, channels: int):
        super().__init__()
        self.module = torch.nn.BatchNorm1d(channels)

    def reset_parameters(self) -> None:
        self.module.reset_parameters()

    def forward(self, x: Tensor) -> Tensor:
        if self.training and x.size(0) == 1:  # torch's words name no argument or model
            raise ValueError("CityNetworksMLP: batch normalisation in training needs more "
                             "than one node (x has 1 row); call model.eval() or pass more "
                             "nodes")
        return self.module(x)


class CityNetworksMLP(ModelCapabilities, torch.nn.Module):
    r"""City-Networks' MLP baseline, i.e. PyG's ``MLP(in_channels, hidden_channels,
    out_channels, num_layers, dropout)`` with PyG's defaults: ``num_layers`` Linear layers,
    each but the last followed by batch normalisation, ReLU and dropout:

    .. math::
        h_0 = x, \quad
        h_l = \mathrm{drop}(\mathrm{ReLU}(\mathrm{BN}(W_l h_{l-1}))), \quad
        \mathrm{out} = W_L h_{L-1}

    The graph is accepted and not read beyond its node count (the benchmark calls every
    model as ``model(x, edge_index)``), so ``graphloc_hops`` is 0 and influence gives R = 0. PyG's
    module names (``lins``, ``norms.<i>.module``), so PyG's saved weights load as they
    are. Returns logits. Not named ``MLP``: PyG's class of that name takes a channel list,
    other activations and norms, which this baseline does not, and a class named as PyG's
    is PyG's here. Listed differences (``docs/models.md``): the dropout masks and
    the initial weights are graphloc's draws, so a seed gives other ones than PyG's (the
    weights have PyG's distribution); a training call on one node raises a ``ValueError``
    (PyG's raises torch's from ``BatchNorm1d``).

    Args:
        in_channels, hidden_channels, out_channels (int): widths.
        num_layers (int, default 2): Linear layers, at least 1 (1: one Linear, no norm).
        dropout (float, default 0.0): after every hidden layer's ReLU, in training (PyG's
            default; the benchmark passes its ``--dropout``).
        batch_norm (bool, default True): PyG's ``norm="batch_norm"``; False is
            ``norm=None``.
    """

    graphloc_hops = 0

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, dropout: float = 0.0, batch_norm: bool = True):
        super().__init__()
        check_sizes("CityNetworksMLP", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers)
        check_dropouts("CityNetworksMLP", upto_one=True, dropout=dropout)
        check_flags("CityNetworksMLP", batch_norm=batch_norm)
        self.in_channels, self.out_channels, self.num_layers = \
            in_channels, out_channels, num_layers
        widths = [in_channels, *[hidden_channels] * (num_layers - 1), out_channels]
        self.lins = torch.nn.ModuleList(torch.nn.Linear(a, b)
                                        for a, b in zip(widths[:-1], widths[1:], strict=True))
        self.norms = torch.nn.ModuleList(_BatchNorm(w) if batch_norm else torch.nn.Identity()
                                         for w in widths[1:-1])
        self.dropout = Dropout(dropout)

    def reset_parameters(self) -> None:
        for module in (*self.lins, *self.norms):
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def forward(self, x: Tensor, graph=None, edge_weight: Tensor | None = None) -> Tensor:
        """``x`` [N, in_channels] -> logits [N, out_channels]. ``edge_weight`` is not read;
        nor is ``graph`` (a Graph or an edge_index), beyond checking that it has the N
        nodes of ``x``: another count means the features are not the graph's."""
        check_input(self, x, self.in_channels)
        if graph is not None:
            graph_of_rows(graph, x)
        for lin, norm in zip(self.lins[:-1], self.norms, strict=True):
            x = self.dropout(F.relu(norm(lin(x))))
        return self.lins[-1](x)
