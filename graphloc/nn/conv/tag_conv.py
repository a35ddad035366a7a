"""The topology adaptive graph convolution (TAGCN): a linear map of each of the first K
powers of the normalised adjacency applied to the features, summed."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_sizes, linear
from graphloc.nn.conv.gcn import normalized_call_graph, read_weighted_call


class TAGConv(ConvModule):
    r"""The topology adaptive graph convolution of `Du et al., "Topology Adaptive Graph
    Convolutional Networks" (2017) <https://arxiv.org/abs/1710.10370>`_:

    .. math::
        \mathbf{X}' = \sum_{k=0}^{K} \left(\mathbf{D}^{-1/2} \mathbf{A}
        \mathbf{D}^{-1/2}\right)^k \mathbf{X} \mathbf{W}_{k} + \mathbf{b}

    (no self-loops added; with ``normalize=False`` the powers of the weighted adjacency
    itself). A drop-in for PyG's ``TAGConv`` (same arguments, parameter names ``lins``
    and ``bias``, and outputs): K sparse products over the graph's cached normalisation,
    each followed by its linear map.

    Differences from PyG's (docs/models.md): ``in_channels=-1`` takes its width at the first
    call for any K (PyG's fails there for K >= 1).

    Args:
        in_channels (int): input feature width (-1: inferred at the first call).
        out_channels (int): output feature width.
        K (int, default 3): number of hops (0: the linear map of the features alone).
        bias (bool, default True): learn the additive bias :math:`\mathbf{b}`.
        normalize (bool, default True): the symmetric normalisation of the adjacency
            (degrees at the destinations, as PyG's ``gcn_norm`` without self-loops).
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: node features ``[N, in_channels]`` (or ``[B, N, in_channels]`` on one graph),
        a ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, optional
        ``edge_weight [E]``. output: ``[N, out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, K: int = 3, bias: bool = True,
                 normalize: bool = True, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("TAGConv", lazy=True, in_channels=in_channels, out_channels=out_channels)
        check_int(K, "TAGConv: K", 0)  # 0, as PyG's: the linear map alone
        self.in_channels, self.out_channels, self.K = in_channels, out_channels, K
        self.normalize = normalize
        self.flow = check_flow("TAGConv", flow)
        check_flags("TAGConv", bias=bias, normalize=normalize)
        self.lins = torch.nn.ModuleList(
            [linear(in_channels, out_channels, bias=False) for _ in range(K + 1)])
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins:
            lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int:
        return self.K

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.in_channels)
        mask = explain_mask(self, inputs)
        if self.normalize:
            graph, weight = normalized_call_graph(inputs, edge_weight, False, x.dtype, mask)
        else:
            graph = inputs.graph
            weight = None if edge_weight is None else edge_weight.to(x.dtype)
            weight = masked_weights(weight, mask)
        out = self.lins[0](x)  # each term added in place (a product's backward reads no output)
        for lin in self.lins[1:]:
            x = ops.spmm(graph, x, weight)
            out = out.add_(lin(x))
        if self.bias is not None:
            out = out.add_(self.bias)
        return inputs.node_output(out)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, K={self.K})"
