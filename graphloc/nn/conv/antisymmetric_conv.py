"""A-DGN's anti-symmetric convolution: a stable Euler step of a graph ODE, for deep and
long-range propagation."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc.checks import check_flags
from graphloc.nn.conv._utils import (
    check_input,
    check_networks,
    check_sizes,
    conv_hops,
    resolve_activation,
)
from graphloc.nn.conv.gcn import GCNConv


class AntiSymmetricConv(torch.nn.Module):
    r"""The anti-symmetric deep graph network layer of `Gravina et al., "Anti-Symmetric DGN:
    a stable architecture for Deep Graph Networks" (ICLR 2023)
    <https://openreview.net/forum?id=J3Y7cgZOOS>`_, as PyG's ``AntiSymmetricConv``:
    ``num_iters`` forward Euler steps of

    .. math::
        \mathbf{x}_i \leftarrow \mathbf{x}_i + \epsilon \, \sigma\big(
        (\mathbf{W} - \mathbf{W}^\top - \gamma \mathbf{I}) \mathbf{x}_i
        + \Phi(\mathbf{X}, \mathcal{N}_i) + \mathbf{b}\big).

    The anti-symmetric weight keeps the Jacobian's eigenvalues near the imaginary axis, so
    information neither explodes nor vanishes over many steps: the paper's answer to
    long-range propagation. ``phi`` is the neighbourhood term, graphloc's
    :class:`~graphloc.nn.conv.GCNConv` ``(in, in, bias=False)`` by default (any conv taking
    ``(x, edge_index, ...)`` with ``in -> in`` widths works, PyG's included).

    A drop-in for PyG's: same arguments, parameters (``W``, ``bias``, ``phi``, the buffer
    ``eye``) and initial draws from one seed. Where the official code
    (``gravins/Anti-SymmetricDGN``) differs, PyG's choices are kept: its default ``phi`` is
    the plain sum :math:`\sum_j e_{ji} \mathbf{V} \mathbf{x}_j` (``V`` a bias-free Linear;
    GCN's normalisation only with its ``gcn_conv=True``), and its bias starts uniform in
    :math:`\pm 1/\sqrt{F}` (PyG's and this one's at 0). Pass that sum as ``phi`` for the
    official model.

    Args:
        in_channels (int): width of ``x`` (the output has the same).
        phi (module, optional): the neighbourhood term.
        num_iters (int, default 1): Euler steps, each calling ``phi`` again.
        epsilon (float, default 0.1): the step size.
        gamma (float, default 0.1): the diffusion strength subtracted on the diagonal.
        act (str or callable or None, default "tanh"): :math:`\sigma` (None: none).
        act_kwargs (dict, optional): arguments of a named activation.
        bias (bool, default True): learn :math:`\mathbf{b}`.

    Shapes:
        input: ``x [N, F]``, the graph as ``phi`` takes it, and ``phi``'s further arguments
        (an ``edge_weight [E]`` for the default). output: ``[N, F]``.
    """

    def __init__(self, in_channels: int, phi: torch.nn.Module | None = None,
                 num_iters: int = 1, epsilon: float = 0.1, gamma: float = 0.1,
                 act="tanh", act_kwargs: dict | None = None, bias: bool = True):
        super().__init__()
        check_sizes("AntiSymmetricConv", in_channels=in_channels, num_iters=num_iters)
        check_networks("AntiSymmetricConv", phi=phi)
        check_flags("AntiSymmetricConv", bias=bias)
        for name, value in (("epsilon", epsilon), ("gamma", gamma)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value):
                raise ValueError(f"AntiSymmetricConv: {name} must be a finite number, got "
                                 f"{value!r}")
        self.in_channels, self.num_iters = in_channels, num_iters
        self.epsilon, self.gamma = epsilon, gamma
        self.act = None if act is None else resolve_activation("AntiSymmetricConv", act,
                                                               act_kwargs)
        if phi is None:
            phi = GCNConv(in_channels, in_channels, bias=False)
        self.W = torch.nn.Parameter(torch.empty(in_channels, in_channels))
        self.register_buffer("eye", torch.eye(in_channels))
        self.phi = phi
        self.bias = torch.nn.Parameter(torch.empty(in_channels)) if bias else None
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        torch.nn.init.kaiming_uniform_(self.W, a=math.sqrt(5))
        self.phi.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int | None:
        """``num_iters`` times ``phi``'s reach (None where ``phi`` declares none)."""
        hops = conv_hops(self.phi)
        return None if hops is None else self.num_iters * hops

    def forward(self, x: Tensor, edge_index, *args, **kwargs) -> Tensor:
        check_input(self, x, self.in_channels)
        weight = self.W - self.W.t() - self.gamma * self.eye
        for _ in range(self.num_iters):
            h = torch.addmm(self.phi(x, edge_index, *args, **kwargs), x, weight.t())
            if self.bias is not None:
                h.add_(self.bias)  # in place on addmm's fresh output (its backward reads none)
            if self.act is not None:
                h = self.act(h)
            x = torch.add(x, h, alpha=self.epsilon)
        return x

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, phi={self.phi}, "
                f"num_iters={self.num_iters}, epsilon={self.epsilon}, gamma={self.gamma})")
