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

from graphloc.checks import check_flags, check_number
from graphloc.nn.conv._base import ConvModule, graph_explain_mask
from graphloc.nn.conv._utils import (
    as_graph,
    check_input,
    check_sizes,
    propagate_prefix,
)
from graphloc.nn.conv.gcn import masked_gcn_norm


class LiftConv(ConvModule):
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

    pyg_aggr = None  # takes no aggr: no PyG twin

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, channels: int, rho_init: float = 0.9, rho_max: float = 0.99,
                 add_self_loops: bool = False):
        super().__init__()
        check_sizes("LiftConv", channels=channels)
        check_flags("LiftConv", add_self_loops=add_self_loops)
        check_number("LiftConv", "rho_max", rho_max)
        check_number("LiftConv", "rho_init", rho_init)
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
        mask = graph_explain_mask(self, graph)
        norm_graph, weight = masked_gcn_norm(graph, self.add_self_loops, False, None,
                                             h_prev.dtype, mask)
        propagated = propagate_prefix(norm_graph, weight, h_prev, num_dst)
        if h_prev2 is None:
            return self.rho * propagated
        if h_prev2.shape[1:] != h_prev.shape[1:] or h_prev2.size(0) < propagated.size(0):
            raise ValueError(f"h_prev2 has shape {list(h_prev2.shape)} but h_prev has "
                             f"{list(h_prev.shape)}")
        return torch.addcmul(-h_prev2[:propagated.size(0)], propagated, self.rho, value=2.0)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels})"
