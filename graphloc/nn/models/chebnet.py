"""ChebNet as the City-Networks benchmark builds it (``LeonResearch/City-Networks``,
``benchmark/gnn.py``): the paper's Chebyshev baseline, which is not a stack of ``ChebConv``
alone, so ``GNN("cheb")`` is not it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import as_graph, check_dropouts, check_input, check_sizes
from graphloc.nn.conv.cheb import ChebConv
from graphloc.nn.dropout import Dropout


class ChebNet(ModelCapabilities, torch.nn.Module):
    r"""City-Networks' ChebNet: a linear input projection, ``num_layers`` Chebyshev
    convolutions of order ``K`` at the hidden width, and a linear output projection, with
    SiLU and dropout after the input projection and after every convolution:

    .. math::
        h_0 = \mathrm{drop}(\mathrm{SiLU}(W_{in} x)), \quad
        h_{l} = \mathrm{drop}(\mathrm{SiLU}(\mathrm{Cheb}_K(h_{l-1}))), \quad
        \mathrm{out} = W_{out} h_L

    The official module's names (``input_proj``, ``convs``, ``output_proj``; each conv in
    PyG's ``ChebConv`` layout), so its saved weights load as they are. Defaults are the
    official class's (2 layers, dropout 0.5, K = 2); its benchmark passes 64 hidden
    channels, dropout 0.2 and 2 to 16 layers. Returns logits. Listed difference: the
    dropout masks are graphloc's draws, so a seed gives other masks than the official
    ``F.dropout`` with that seed (``docs/models.md``).

    Args:
        in_channels, hidden_channels, out_channels (int): widths.
        num_layers (int, default 2): Chebyshev convolutions, at least 1.
        dropout (float, default 0.5): after every activation, in training.
        K (int, default 2): the order of each convolution (K - 1 hops each).
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, dropout: float = 0.5, K: int = 2):
        super().__init__()
        check_sizes("ChebNet", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers, K=K)
        check_dropouts("ChebNet", dropout=dropout)
        self.in_channels, self.num_layers, self.K = in_channels, num_layers, K
        self.input_proj = torch.nn.Linear(in_channels, hidden_channels)
        self.convs = torch.nn.ModuleList(ChebConv(hidden_channels, hidden_channels, K=K)
                                         for _ in range(num_layers))
        self.output_proj = torch.nn.Linear(hidden_channels, out_channels)
        self.dropout = Dropout(dropout)

    @property
    def graphloc_hops(self) -> int:
        return self.num_layers * (self.K - 1)

    def reset_parameters(self) -> None:
        for module in (self.input_proj, *self.convs, self.output_proj):
            module.reset_parameters()

    def forward(self, x: Tensor, graph, edge_weight: Tensor | None = None) -> Tensor:
        check_input(self, x, self.in_channels)
        graph = as_graph(graph, x)
        h = self.dropout(F.silu(self.input_proj(x)))
        for conv in self.convs:
            h = self.dropout(F.silu(conv(h, graph, edge_weight)))
        return self.output_proj(h)
