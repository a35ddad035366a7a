"""LiftGCN, the whole model: residual blocks of ``nn.conv.lift.LiftConv`` (the Joukowski
recurrence and its energy argument are documented there)."""

from __future__ import annotations

import torch
import torch.utils.checkpoint
from torch import Tensor

from graphloc.checks import check_flags, check_number
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._base import add_hop_ports
from graphloc.nn.conv._utils import (
    as_graph,
    check_ball_sizes,
    check_dropouts,
    check_input,
    check_sizes,
    rows_within,
)
from graphloc.nn.conv.lift import LiftConv
from graphloc.nn.dropout import Dropout


class LiftBlock(torch.nn.Module):
    r"""The local nonlinear residual :math:`H + s\,\mathrm{Dropout}(\mathrm{GELU}(
    \mathrm{LayerNorm}(H) W + b))` with a learnable scalar ``s`` (starts at ``scale_init``).
    No graph aggregation: it mixes channels, the recurrence mixes nodes."""

    def __init__(self, channels: int, dropout: float = 0.0, scale_init: float = 0.1):
        super().__init__()
        check_sizes("LiftBlock", channels=channels)
        check_dropouts("LiftBlock", dropout=dropout)
        check_number("LiftBlock", "scale_init", scale_init)
        self.norm = torch.nn.LayerNorm(channels)
        self.lin = torch.nn.Linear(channels, channels)
        self.dropout = Dropout(dropout)
        self.scale_init = scale_init
        self.scale = torch.nn.Parameter(torch.tensor(float(scale_init)))

    def reset_parameters(self) -> None:
        self.norm.reset_parameters()
        self.lin.reset_parameters()
        torch.nn.init.constant_(self.scale, self.scale_init)

    def forward(self, h: Tensor) -> Tensor:
        return h + self.scale * self.dropout(torch.nn.functional.gelu(self.lin(self.norm(h))))


class LiftGCN(ModelCapabilities, torch.nn.Module):
    r"""LiftGCN: an input embedding :math:`H_0 = \mathrm{Dropout}(\mathrm{GELU}(
    \mathrm{LayerNorm}(X W_{in} + b)))`, ``num_layers`` :class:`LiftConv` steps sharing one
    :math:`\rho`, each followed by its own :class:`LiftBlock` (``residual=True``), and a
    linear readout on :math:`[H_L \Vert H_{L-1}]` (:math:`H_{L-1} = H_0` when L = 1).

    Follows the official code (``ChenZeng001/LiftGCN``); deviations: the normalisation is
    configurable (default as the paper: no self-loops), the residual blocks can be
    switched off to get the exact linear Chebyshev backbone, and the dropout masks come from
    graphloc's counter-based dropout (``graphloc.nn.dropout.Dropout``: the official
    ``nn.Dropout``'s distribution and scaling, another mask for a given seed, several times
    faster on the CPU). On a directed graph a node reads its in-neighbours (PyG's
    direction); the official code only meets symmetric meshes, where the two agree.

    Args:
        in_channels, hidden_channels, out_channels (int): widths.
        num_layers (int): propagation steps L, at least 1 (cost: L sparse products).
        dropout (float, default 0.1, the official): after the embedding and inside each block.
        residual (bool, default True): the nonlinear blocks after each step.
        rho_init, rho_max, add_self_loops: see :class:`LiftConv`.
        checkpoint (bool, default False): recompute each residual block in the backward
            pass instead of keeping its LayerNorm, Linear and GELU activations (less
            memory for deep models on large graphs, one more block forward per layer).
    """

    prunes_layers = True  # forward_within: influence runs each step only where it is read

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, dropout: float = 0.1, residual: bool = True,
                 rho_init: float = 0.9, rho_max: float = 0.99, add_self_loops: bool = False,
                 checkpoint: bool = False):
        super().__init__()
        check_sizes("LiftGCN", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers)
        check_dropouts("LiftGCN", dropout=dropout)
        check_flags("LiftGCN", residual=residual, add_self_loops=add_self_loops,
                    checkpoint=checkpoint)
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.num_layers, self.checkpoint = num_layers, checkpoint
        self.lin_in = torch.nn.Linear(in_channels, hidden_channels)
        self.norm_in = torch.nn.LayerNorm(hidden_channels)
        self.dropout = Dropout(dropout)
        self.conv = LiftConv(hidden_channels, rho_init, rho_max, add_self_loops)
        self.blocks = torch.nn.ModuleList(
            LiftBlock(hidden_channels, dropout) for _ in range(num_layers)) if residual \
            else None
        self.lin_out = torch.nn.Linear(2 * hidden_channels, out_channels)
        add_hop_ports(self)  # one LiftConv, num_layers hops

    def reset_parameters(self) -> None:
        for module in [self.lin_in, self.norm_in, self.conv, self.lin_out,
                       *(self.blocks or [])]:
            module.reset_parameters()

    def embed(self, x: Tensor) -> Tensor:
        check_input(self, x, self.lin_in.in_features)
        return self.dropout(torch.nn.functional.gelu(self.norm_in(self.lin_in(x))))

    def propagate(self, h0: Tensor, graph, ball_sizes=None) -> tuple[Tensor, Tensor]:
        """``(H_L, H_{L-1})`` from ``H_0``: three ``[N, h]`` states alive at a time. With
        ``ball_sizes`` (see ``forward_within``) H_k only on the nodes within L - k hops."""
        prev, h = None, h0
        for k in range(self.num_layers):
            rows = rows_within(ball_sizes, self.num_layers - 1 - k)
            prev, h = h, self.conv(h, graph, prev if k else None, num_dst=rows)
            if self.blocks is not None and self.checkpoint and torch.is_grad_enabled():
                h = torch.utils.checkpoint.checkpoint(self.blocks[k], h, use_reentrant=False)
            elif self.blocks is not None:
                h = self.blocks[k](h)
        return h, prev

    def forward(self, x: Tensor, graph) -> Tensor:
        return self._forward(x, as_graph(graph, x), None)

    def forward_within(self, x: Tensor, graph: Graph, ball_sizes: list[int]) -> Tensor:
        """``forward(x, graph)[:ball_sizes[0]]`` computing H_k only on the nodes within
        L - k hops (nodes ordered by hop distance, as ``GNN.forward_within``)."""
        check_ball_sizes(ball_sizes, x.size(0))
        return self._forward(x, as_graph(graph, x), ball_sizes)

    def _forward(self, x: Tensor, graph: Graph, ball_sizes) -> Tensor:
        h, prev = self.propagate(self.embed(x), graph, ball_sizes)
        return self.lin_out(torch.cat([h, prev[:h.size(0)]], dim=1))

    @property
    def graphloc_hops(self) -> int:
        return self.num_layers

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.lin_in.in_features}, "
                f"{self.lin_out.out_features}, num_layers={self.num_layers})")
