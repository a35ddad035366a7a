"""A-DGN, the anti-symmetric deep graph network, as its official code builds it."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc.checks import check_flags
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv import AntiSymmetricConv, GCNConv, SimpleConv
from graphloc.nn.conv._base import add_hop_ports
from graphloc.nn.conv._utils import check_dropouts, check_input, check_sizes
from graphloc.nn.dropout import Dropout


class ADGN(ModelCapabilities, torch.nn.Module):
    r"""The anti-symmetric deep graph network of `Gravina et al., "Anti-Symmetric DGN: a
    stable architecture for Deep Graph Networks" (ICLR 2023)
    <https://openreview.net/forum?id=J3Y7cgZOOS>`_, as the official ``GraphAntiSymmetricNN``
    (``gravins/Anti-SymmetricDGN``, ``graph_benchmark/models/antisymmetric_dgn.py``): a
    linear embedding, ``num_layers`` Euler steps of

    .. math::
        \mathbf{x}_i \leftarrow \mathbf{x}_i + \epsilon \tanh\big(
        (\mathbf{W} - \mathbf{W}^\top - \gamma \mathbf{I}) \mathbf{x}_i
        + \Phi(\mathbf{X}, \mathcal{N}_i) + \mathbf{b}\big),

    then a linear readout. :math:`\Phi` is the official "simple aggregation"
    :math:`\sum_{j \to i} e_{ji} \mathbf{V} \mathbf{x}_j` (``V`` a bias-free Linear, ``e`` the
    edge weights or 1), or with ``gcn_norm`` a bias-free ``GCNConv``. With
    ``weight_sharing`` (the official default) one :class:`~graphloc.nn.conv.AntiSymmetricConv`
    takes all the steps with one ``W``, ``V`` and ``b``; without, each step has its own. The
    official initialisation: ``W`` Kaiming-uniform, the bias uniform in
    :math:`\pm 1/\sqrt{F}`, the Linear maps torch's default.

    Option not in the official model: ``dropout`` on the embedding (0, the official model,
    by default; ``graphloc train`` passes its ``--dropout``).

    Args:
        in_channels, hidden_channels, out_channels (int): widths (the steps run at
            ``hidden_channels``).
        num_layers (int): the Euler steps (the paper's depth; each reads one hop).
        epsilon (float, default 0.1), gamma (float, default 0.1): the step size and the
            diffusion.
        act (str, default "tanh"): the activation of each step.
        gcn_norm (bool, default False): GCN's normalised sum as :math:`\Phi`.
        bias (bool, default True), weight_sharing (bool, default True): as the official.
        dropout (float, default 0.0): on the embedding.

    Shapes:
        input: ``x [N, in_channels]``, a ``Graph`` or ``edge_index``, optional
        ``edge_weight [E]``. output: ``[N, out_channels]``.
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, epsilon: float = 0.1, gamma: float = 0.1, act: str = "tanh",
                 gcn_norm: bool = False, bias: bool = True, weight_sharing: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        check_sizes("ADGN", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers)
        check_flags("ADGN", gcn_norm=gcn_norm, bias=bias, weight_sharing=weight_sharing)
        check_dropouts("ADGN", dropout=dropout)
        self.num_layers = num_layers
        self.emb = torch.nn.Linear(in_channels, hidden_channels)
        self.dropout = Dropout(dropout)
        steps = [num_layers] if weight_sharing else [1] * num_layers
        self.convs = torch.nn.ModuleList(
            AntiSymmetricConv(hidden_channels, _phi(hidden_channels, gcn_norm), num_iters=n,
                              epsilon=epsilon, gamma=gamma, act=act, bias=bias)
            for n in steps)
        for conv in self.convs:  # the official bias: uniform, where PyG's layer has zeros
            if conv.bias is not None:
                bound = 1 / math.sqrt(hidden_channels)
                torch.nn.init.uniform_(conv.bias, -bound, bound)
        self.readout = torch.nn.Linear(hidden_channels, out_channels)
        add_hop_ports(self)  # (one shared conv, num_layers Euler steps)

    @property
    def graphloc_hops(self) -> int:
        return self.num_layers

    def forward(self, x: Tensor, graph, edge_weight: Tensor | None = None) -> Tensor:
        check_input(self, x, self.emb.in_features)
        x = self.dropout(self.emb(x))
        extra = () if edge_weight is None else (edge_weight,)
        for conv in self.convs:
            x = conv(x, graph, *extra)
        return self.readout(x)


class _MappedSum(torch.nn.Module):
    """The official A-DGN's simple aggregation: ``sum_{j -> i} e_ji V x_j``."""

    def __init__(self, channels: int):
        super().__init__()
        self.lin = torch.nn.Linear(channels, channels, bias=False)
        self.sum = SimpleConv("sum")

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()

    def forward(self, x: Tensor, graph, edge_weight: Tensor | None = None) -> Tensor:
        return self.sum(self.lin(x), graph, edge_weight)

    @property
    def graphloc_hops(self) -> int:
        return 1


def _phi(channels: int, gcn_norm: bool) -> torch.nn.Module:
    return GCNConv(channels, channels, bias=False) if gcn_norm else _MappedSum(channels)
