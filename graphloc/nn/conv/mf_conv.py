"""The molecular-fingerprint convolution of Duvenaud et al. (PyG's ``MFConv``): one pair of
weight matrices per node degree."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_flags, check_int
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features,
    linear,
    split_widths,
    width_keeping_aggregation,
)


class MFConv(ConvModule):
    r"""The graph convolution of `Duvenaud et al., "Convolutional Networks on Graphs for
    Learning Molecular Fingerprints" (NeurIPS 2015) <https://arxiv.org/abs/1509.09292>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{W}^{(\deg(i))}_1 \sum_{j \in \mathcal{N}(i)} \mathbf{x}_j
        + \mathbf{W}^{(\deg(i))}_2 \mathbf{x}_i

    with the degree clamped at ``max_degree``. A drop-in for PyG's ``MFConv`` (same
    arguments, parameters ``lins_l`` (with the biases) and ``lins_r``, PyG's initialisation
    from one seed, and outputs): the neighbours are summed by one fused sparse product, and
    the nodes of each degree (grouped once per graph) take their degree's weights.

    Args:
        in_channels (int or (int, int)): input width, or the source and destination widths;
            -1 infers them at the first call.
        out_channels (int): output width.
        max_degree (int, default 10): the largest degree with its own weights; nodes of a
            higher degree share its weights.
        bias (bool, default True): the biases of ``lins_l``.
        aggr (str or module, default "add"): the aggregation of the neighbours ("add",
            "mean", "max", "min", or any that keeps the width, as ``SAGEConv``'s).
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, in_channels]``, a static batch ``[B, N, in_channels]`` or a pair
        ``(x_src, x_dst)`` (``x_dst`` may be None: no root term), the graph (a ``Graph``,
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, whose values are not read),
        optional ``size=(N_src, N_dst)``. output: ``[N_dst, out_channels]``.

    The degree of a node is its number of in-edges, each parallel edge counted (PyG's
    ``degree(edge_index[1])``); for a ``torch.sparse`` adjacency, its stored entries in the
    node's row (PyG's ``SparseTensor`` row count; PyG's ``MFConv`` fails on a
    ``torch.sparse`` adjacency). ``max_degree`` is read at each call, as PyG's: lowered
    after building, the first weights serve; above the weights built it is an error (PyG's
    leaves those nodes' output rows uninitialised).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 max_degree: int = 10, bias: bool = True, aggr="add",
                 aggr_kwargs: dict | None = None, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("MFConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels)
        check_int(max_degree, "MFConv: max_degree", 0)
        check_flags("MFConv", bias=bias)
        self.flow = check_flow("MFConv", flow)
        self.in_channels, self.out_channels, self.max_degree = in_channels, out_channels, \
            max_degree
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        src_width, dst_width = split_widths(in_channels)
        self.aggr_module = width_keeping_aggregation(
            "MFConv", aggr, aggr_kwargs, src_width, "the degree weights take the input width")
        self.lins_l = torch.nn.ModuleList(
            linear(src_width, out_channels, bias=bias) for _ in range(max_degree + 1))
        self.lins_r = torch.nn.ModuleList(
            linear(dst_width, out_channels, bias=False) for _ in range(max_degree + 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.aggr_module.reset_parameters()
        for lin in (*self.lins_l, *self.lins_r):
            if not isinstance(lin, torch.nn.LazyLinear):  # (drawn at the first call)
                lin.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                size: tuple[int, int] | None = None) -> Tensor:
        max_degree = self._checked_max_degree()
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        summed = self.aggr_module(inputs.graph, x_src, explain_mask(self, inputs))
        groups = degree_groups(inputs.graph, max_degree)
        order, sizes = torch.cat(groups), [nodes.numel() for nodes in groups]
        # one gather in degree order, then views: a gather per degree wrote, in its
        # backward, a zero tensor of all nodes per degree
        summed_parts = summed.index_select(0, order).split(sizes)
        root_parts = [None] * len(sizes) if x_dst is None else \
            x_dst.index_select(0, order).split(sizes)
        parts = []  # in PyG's call order: a lazy width draws its weights as PyG's
        for lin_l, lin_r, h, root in zip(self.lins_l[:max_degree + 1],
                                         self.lins_r[:max_degree + 1], summed_parts,
                                         root_parts, strict=True):
            parts.append(lin_l(h) if root is None else lin_l(h) + lin_r(root))
        out = summed.new_empty(summed.size(0), self.out_channels)
        return inputs.node_output(out.index_copy(0, order, torch.cat(parts)))

    def _checked_max_degree(self) -> int:
        """``max_degree``, an attribute a caller may lower after building (PyG's then uses
        the first weights only, as here); above the weights built it would leave the
        nodes of the higher degrees without any (PyG's returns uninitialised memory)."""
        built = len(self.lins_l) - 1
        check_int(self.max_degree, "MFConv: max_degree", 0)
        if self.max_degree > built:
            raise ValueError(f"MFConv: max_degree is {self.max_degree}, but the layer was "
                             f"built with weights for degrees 0 .. {built} only")
        return self.max_degree

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def degree_groups(graph: Graph, max_degree: int) -> list[Tensor]:
    """The destination nodes of each in-degree ``0 .. max_degree`` (the last also holding
    every node of a higher degree), as index tensors; built once per graph."""
    def build():
        degree = graph.in_degree().clamp(max=max_degree)
        return [torch.nonzero(degree == d).view(-1) for d in range(max_degree + 1)]
    return graph.cached(("degree_groups", max_degree), build)
