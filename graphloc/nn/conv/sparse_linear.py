"""LINKX's adjacency layer (PyG's ``torch_geometric.nn.models.linkx.SparseLinear``): a
Linear whose input is each node's row of the adjacency matrix."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_sizes
from graphloc.nn.conv.gcn import read_weighted_call


class SparseLinear(ConvModule):
    r"""The adjacency Linear of `Lim et al., "Large Scale Learning on Non-Homophilous
    Graphs: New Benchmarks and Strong Simple Methods" (NeurIPS 2021)
    <https://arxiv.org/abs/2110.14446>`_ (LINKX's :math:`\mathrm{MLP}_A` input layer):

    .. math::
        \mathbf{h}_i = \sum_{j \in \mathcal{N}(i)} e_{j,i} \mathbf{W}_j + \mathbf{b},

    the product of node i's adjacency row (its in-neighbours, weighted) with
    :math:`\mathbf{W} \in \mathbb{R}^{N \times C}`: a weight row per node. A drop-in for
    PyG's ``SparseLinear`` (same arguments, parameters ``weight`` ``[N, C]`` and ``bias``
    with PyG's initial draws, and outputs), called ``layer(edge_index, edge_weight)``. PyG's
    gathers an ``[E, C]`` message per edge from ``W``; here one ``spmm`` of the graph's
    cached CSR with ``W``.

    Args:
        in_channels (int): the number of nodes N (a row of ``W`` each).
        out_channels (int): output width C.
        bias (bool, default True): add a learnt bias.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: the graph (``edge_index [2, E]`` on the N nodes, a ``Graph`` or a
        ``torch.sparse`` ``adj_t``, whose values are the edge weights); ``edge_weight [E]``
        (optional). output: ``[N, C]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("SparseLinear", in_channels=in_channels, out_channels=out_channels)
        check_flags("SparseLinear", bias=bias)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.flow = check_flow("SparseLinear", flow)
        self.weight = torch.nn.Parameter(torch.empty(in_channels, out_channels))
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # PyG's kaiming_uniform with fan = in_channels and a = sqrt(5), then uniform for the
        # bias: both bounds 1 / sqrt(in_channels) (torch's kaiming_uniform_ would read the
        # fan of an [N, C] weight as C)
        bound = 1.0 / math.sqrt(self.in_channels)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, weight, edge_weight = read_weighted_call(self, self.weight, edge_index,
                                                         edge_weight, self.out_channels)
        if edge_weight is not None:
            edge_weight = edge_weight.to(weight.dtype)
        edge_weight = masked_weights(edge_weight, explain_mask(self, inputs))
        out = ops.spmm(inputs.graph, weight, edge_weight)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
