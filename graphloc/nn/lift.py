r"""LiftGCN: Joukowski spectral lifting, a deep propagation that neither smooths nor explodes.

Without its residual blocks the recurrence is :math:`H_k = T_k(\rho \hat A) H_0` channel
by channel (:math:`T_k` the Chebyshev polynomials of the first kind), and the energy
:math:`E_k = \|H_k\|^2 + \|H_{k-1}\|^2 - 2\langle H_k, \rho\hat A H_{k-1}\rangle` is the
same at every depth: high graph frequencies survive any number of layers.
"""

from __future__ import annotations

import math

import torch
import torch.utils.checkpoint
from torch import Tensor

from graphloc.graph import Graph
from graphloc.nn.conv._utils import (
    as_graph,
    check_ball_sizes,
    check_dropouts,
    check_input,
    check_sizes,
    propagate_prefix,
    rows_within,
)


class LiftConv(torch.nn.Module):
    r"""One step of the Joukowski recurrence, with a per-channel coefficient
    :math:`\rho = \rho_{max} \tanh(r) \in (-\rho_{max}, \rho_{max})`:

    .. math::
        H_1 = \rho \odot \hat A H_0, \qquad
        H_k = 2 \rho \odot \hat A H_{k-1} - H_{k-2} \quad (k \ge 2)

    with :math:`\hat A = D^{-1/2} A D^{-1/2}` (no self-loops by default: the energy identity
    needs a symmetric operator with spectrum in [-1, 1]; self-loops keep it symmetric but
    change the operator). One sparse product per call; no channel mixing (a weight matrix
    inside the recurrence would break the Chebyshev property).

    Args:
        channels (int): feature width h (one coefficient per channel).
        rho_init (float, default 0.9): initial :math:`\rho` of every channel.
        rho_max (float, default 0.99): bound that keeps :math:`|\rho \lambda| < 1`, so the
            two characteristic roots stay distinct on the unit circle.
        add_self_loops (bool, default False): use :math:`D^{-1/2}(A + I)D^{-1/2}`.

    Shapes: ``forward(h_prev [N, h], graph, h_prev2 [N, h] or None) -> [N, h]``; pass
    ``h_prev2=None`` for the first step. With ``num_dst``, only the first ``num_dst``
    outputs, ``h_prev`` holding the first rows of the graph's nodes (all those outputs
    read, nodes ordered by hop distance: see ``Graph.dst_prefix``).
    """

    def __init__(self, channels: int, rho_init: float = 0.9, rho_max: float = 0.99,
                 add_self_loops: bool = False):
        super().__init__()
        check_sizes("LiftConv", channels=channels)
        if not 0 < rho_max < 1:
            raise ValueError(f"rho_max must lie in (0, 1), got {rho_max}")
        if not -rho_max < rho_init < rho_max:
            raise ValueError(f"rho_init must lie in (-rho_max, rho_max) = ({-rho_max}, "
                             f"{rho_max}), got {rho_init}")
        self.channels, self.rho_init, self.rho_max = channels, rho_init, rho_max
        self.add_self_loops = add_self_loops
        self.r = torch.nn.Parameter(torch.empty(channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        torch.nn.init.constant_(self.r, math.atanh(self.rho_init / self.rho_max))

    @property
    def rho(self) -> Tensor:
        return self.rho_max * torch.tanh(self.r)

    def forward(self, h_prev: Tensor, graph, h_prev2: Tensor | None = None,
                num_dst: int | None = None) -> Tensor:
        check_input(self, h_prev, self.channels)
        graph = as_graph(graph, h_prev)
        norm_graph, weight = graph.gcn_norm(add_self_loops=self.add_self_loops,
                                            dtype=h_prev.dtype)
        propagated = propagate_prefix(norm_graph, weight, h_prev, num_dst)
        if h_prev2 is None:
            return self.rho * propagated
        if h_prev2.shape[1:] != h_prev.shape[1:] or h_prev2.size(0) < propagated.size(0):
            raise ValueError(f"h_prev2 has shape {list(h_prev2.shape)} but h_prev has "
                             f"{list(h_prev.shape)}")
        return torch.addcmul(-h_prev2[:propagated.size(0)], propagated, self.rho, value=2.0)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels})"


class LiftBlock(torch.nn.Module):
    r"""The local nonlinear residual :math:`H + s\,\mathrm{Dropout}(\mathrm{GELU}(
    \mathrm{LayerNorm}(H) W + b))` with a learnable scalar ``s`` (starts at ``scale_init``).
    No graph aggregation: it mixes channels, the recurrence mixes nodes."""

    def __init__(self, channels: int, dropout: float = 0.0, scale_init: float = 0.1):
        super().__init__()
        check_sizes("LiftBlock", channels=channels)
        check_dropouts("LiftBlock", dropout=dropout)
        self.norm = torch.nn.LayerNorm(channels)
        self.lin = torch.nn.Linear(channels, channels)
        self.dropout = torch.nn.Dropout(dropout)
        self.scale_init = scale_init
        self.scale = torch.nn.Parameter(torch.tensor(float(scale_init)))

    def reset_parameters(self) -> None:
        self.norm.reset_parameters()
        self.lin.reset_parameters()
        torch.nn.init.constant_(self.scale, self.scale_init)

    def forward(self, h: Tensor) -> Tensor:
        return h + self.scale * self.dropout(torch.nn.functional.gelu(self.lin(self.norm(h))))


class LiftGCN(torch.nn.Module):
    r"""LiftGCN: an input embedding :math:`H_0 = \mathrm{Dropout}(\mathrm{GELU}(
    \mathrm{LayerNorm}(X W_{in} + b)))`, ``num_layers`` :class:`LiftConv` steps sharing one
    :math:`\rho`, each followed by its own :class:`LiftBlock` (``residual=True``), and a
    linear readout on :math:`[H_L \Vert H_{L-1}]` (:math:`H_{L-1} = H_0` when L = 1).

    Follows the official code (``ChenZeng001/LiftGCN``); deviations: the normalisation is
    configurable (default as the paper: no self-loops), and the residual blocks can be
    switched off to get the exact linear Chebyshev backbone.

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
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.num_layers, self.checkpoint = num_layers, checkpoint
        self.lin_in = torch.nn.Linear(in_channels, hidden_channels)
        self.norm_in = torch.nn.LayerNorm(hidden_channels)
        self.dropout = torch.nn.Dropout(dropout)
        self.conv = LiftConv(hidden_channels, rho_init, rho_max, add_self_loops)
        self.blocks = torch.nn.ModuleList(
            LiftBlock(hidden_channels, dropout) for _ in range(num_layers)) if residual \
            else None
        self.lin_out = torch.nn.Linear(2 * hidden_channels, out_channels)

    def reset_parameters(self) -> None:
        for module in [self.lin_in, self.norm_in, self.conv, self.lin_out,
                       *(self.blocks or [])]:
            module.reset_parameters()

    def embed(self, x: Tensor) -> Tensor:
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
