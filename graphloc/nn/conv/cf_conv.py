"""SchNet's continuous-filter convolution (Schütt et al.; PyG's ``CFConv`` in
``torch_geometric.nn.models.schnet``): each edge's filter, a network of its distance
expansion with a cosine cutoff, multiplies its source's features channel by channel."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_edge_rows, check_flow, read_inputs
from graphloc.nn.conv._utils import check_input, check_sizes


class CFConv(ConvModule):
    r"""The continuous-filter convolution of `Schütt et al., "SchNet: A Continuous-filter
    Convolutional Neural Network for Modeling Quantum Interactions" (NeurIPS 2017)
    <https://arxiv.org/abs/1706.08566>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{W}_2 \sum_{j \in \mathcal{N}(i)} \mathbf{W}_1 \mathbf{x}_j
        \odot h(\mathbf{e}_{j,i}) \, C(d_{j,i}) + \mathbf{b}_2, \qquad
        C(d) = \tfrac{1}{2} \left( \cos \frac{\pi d}{c} + 1 \right)

    (``h`` the filter network ``nn`` on the edge's features, ``d`` its distance, ``c`` the
    cutoff). A drop-in for PyG's ``CFConv`` (same arguments, parameters ``lin1``, ``lin2``
    and ``nn`` with PyG's initialisation, which leaves ``nn`` to its owner, and outputs), so
    ``from_pyg`` converts the convs of a PyG ``SchNet``.

    PyG gathers ``W_1 x_j`` per edge and multiplies it by the edge's filter, two ``[E, F]``
    tensors forward and more backward; here one ``ops.spmm`` sums the sources' rows weighted
    channel by channel (edge values ``[E, F]`` on ``[N, F, 1]`` rows), and its backward
    gives the filters' gradient as the channels' products. The products are PyG's; only
    the order of their sum differs.

    Args:
        in_channels (int): input width.
        out_channels (int): output width.
        num_filters (int): F, the filters' width.
        nn (torch.nn.Module): the filter network, from ``edge_attr`` to ``[E, F]``.
        cutoff (float): the distance at which the cosine cutoff reaches 0.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, in_channels]`` or a static batch ``[B, N, in_channels]``; the graph
        (``edge_index [2, E]``, a ``Graph`` or a ``torch.sparse`` ``adj_t``, its pattern);
        ``edge_weight [E]`` the distances and ``edge_attr [E, D]`` the filter network's
        input, in the graph's edge order (an adjacency's storage order). output:
        ``[N, out_channels]``.

    Differences from PyG's: ``edge_weight`` or ``edge_attr`` of another length than the
    edge count, or a filter network whose output is not ``[E, num_filters]``, is a
    ``ValueError`` naming it (PyG's fails in a broadcast, or broadcasts one row to every
    edge).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, num_filters: int,
                 nn: torch.nn.Module, cutoff: float, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("CFConv", in_channels=in_channels, out_channels=out_channels,
                    num_filters=num_filters)
        if not callable(nn):
            raise TypeError(f"CFConv: nn must be a module, got {type(nn).__name__}")
        if isinstance(cutoff, bool) or not isinstance(cutoff, (int, float)) or \
                not math.isfinite(cutoff) or cutoff <= 0:
            raise ValueError(f"CFConv: cutoff must be a positive number, got {cutoff!r}")
        self.flow = check_flow("CFConv", flow)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_filters = num_filters
        self.lin1 = torch.nn.Linear(in_channels, num_filters, bias=False)
        self.lin2 = torch.nn.Linear(num_filters, out_channels)
        self.nn = nn
        self.cutoff = cutoff
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's: nn is left to the block that owns it
        torch.nn.init.xavier_uniform_(self.lin1.weight)
        torch.nn.init.xavier_uniform_(self.lin2.weight)
        torch.nn.init.zeros_(self.lin2.bias)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor, edge_attr: Tensor) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        if inputs.x_dst is not inputs.x_src:
            raise ValueError("CFConv takes one node set: x as [N, F] (or a static batch), "
                             "not a pair")
        check_input(self, inputs.x_src, self.in_channels)
        num_edges = inputs.graph.num_edges // (inputs.batch or 1)
        check_edge_rows(self, "edge_weight", edge_weight, num_edges)
        check_edge_rows(self, "edge_attr", edge_attr, num_edges)
        filters = inputs.edge_input(self._filters(edge_weight, edge_attr))
        mask = explain_mask(self, inputs)
        if mask is not None:
            filters = filters * mask.unsqueeze(-1)
        h = self.lin1(inputs.x_src)
        out = ops.spmm(inputs.graph, h.unsqueeze(-1), filters)
        return inputs.node_output(self.lin2(out.squeeze(-1)))

    def _filters(self, edge_weight: Tensor, edge_attr: Tensor) -> Tensor:
        """``nn(edge_attr)`` times each edge's cosine cutoff, ``[E, num_filters]``."""
        cutoff = 0.5 * (torch.cos(edge_weight * math.pi / self.cutoff) + 1.0)
        filters = self.nn(edge_attr)
        if filters.dim() != 2 or filters.shape != (edge_attr.size(0), self.num_filters):
            raise ValueError(f"CFConv: nn must map edge_attr to [E, num_filters] = "
                             f"[{edge_attr.size(0)}, {self.num_filters}], got "
                             f"{list(filters.shape)}")
        return filters * cutoff.view(-1, 1)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_filters={self.num_filters})")
