"""MixHop: the input's products with powers of Kipf & Welling's normalised adjacency, each
mapped by its own linear layer, side by side."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, is_int_at_least
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_sizes, linear
from graphloc.nn.conv.gcn import normalized_call_graph, read_weighted_call


class MixHopConv(ConvModule):
    r"""The mix-hop graph convolution of `Abu-El-Haija et al., "MixHop: Higher-Order Graph
    Convolutional Architectures via Sparsified Neighborhood Mixing" (ICML 2019)
    <https://arxiv.org/abs/1905.00067>`_:

    .. math::
        \mathbf{X}' = \Big\Vert_{p \in P} \big(\hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}}
        \hat{\mathbf{D}}^{-1/2}\big)^p \mathbf{X} \mathbf{\Theta}_p + \mathbf{b},
        \qquad \hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}.

    A drop-in for PyG's ``MixHopConv`` (same arguments, parameter names ``lins`` and
    ``bias``, and outputs): ``max(powers)`` sparse products of the input over the graph's
    cached normalisation, each power's map applied as it is reached.

    Args:
        in_channels (int): input feature width (-1: inferred at the first call).
        out_channels (int): output width per power.
        powers (list of int, default [0, 1, 2]): the powers P, each >= 0 (in this order in
            the output; one may repeat, as PyG's).
        add_self_loops (bool, default True): add the self-loops of :math:`\hat{\mathbf{A}}`.
        bias (bool, default True): learn the additive bias (``len(powers) * out_channels``).
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Differences from PyG's (docs/models.md): with two or more self-loops at a node and
    learnable ``edge_weight``, the gradient reaches only the loop whose weight is used
    (PyG's reaches every one), as for ``SGConv``.

    Shapes:
        input: node features ``[N, in_channels]`` (or ``[B, N, in_channels]`` on one graph),
        a ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, optional
        ``edge_weight [E]``. output: ``[N, len(powers) * out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, powers: list[int] | None = None,
                 add_self_loops: bool = True, bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("MixHopConv", lazy=True, in_channels=in_channels,
                    out_channels=out_channels)
        powers = [0, 1, 2] if powers is None else powers
        if not isinstance(powers, (list, tuple)) or not powers or \
                not all(is_int_at_least(p, 0) for p in powers):
            raise ValueError(f"MixHopConv: powers must be a non-empty list of integers >= 0, "
                             f"got {powers!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.powers, self.add_self_loops = list(powers), add_self_loops
        self.flow = check_flow("MixHopConv", flow)
        check_flags("MixHopConv", add_self_loops=add_self_loops, bias=bias)
        # PyG's layout: one map per power up to the largest, Identity where unused
        self.lins = torch.nn.ModuleList([
            linear(in_channels, out_channels, bias=False) if p in self.powers
            else torch.nn.Identity() for p in range(max(self.powers) + 1)])
        self.bias = torch.nn.Parameter(torch.empty(len(self.powers) * out_channels)) \
            if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins:
            if hasattr(lin, "reset_parameters"):
                lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int:
        return max(self.powers)

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.in_channels)
        graph, weight = normalized_call_graph(inputs, edge_weight, self.add_self_loops, x.dtype,
                                              explain_mask(self, inputs))
        outs = {0: self.lins[0](x)} if 0 in self.powers else {}
        for power, lin in enumerate(self.lins[1:], start=1):
            x = ops.spmm(graph, x, weight)
            if power in self.powers:
                outs[power] = lin(x)
        out = torch.cat([outs[p] for p in self.powers], dim=-1)
        # in place on the concatenation's fresh output: its backward does not read it
        return inputs.node_output(out if self.bias is None else out.add_(self.bias))

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"powers={self.powers})")
