"""GravNet: neighbours found in a learned space, their learned features weighted by their
distance there."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_int
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._inputs import batch_pair, point_pair
from graphloc.nn.conv._utils import check_input, check_sizes, linear


class GravNetConv(ConvModule):
    r"""The GravNet operator of `Qasim et al., "Learning Representations of Irregular
    Particle-detector Geometry with Distance-weighted Graph Networks" (EPJ C 2019)
    <https://arxiv.org/abs/1902.07987>`_: each point is placed in a learned space
    :math:`\mathbf{s} = \mathbf{W}_s \mathbf{x} + \mathbf{b}_s`, takes its ``k`` nearest
    points there (itself included), and aggregates their learned features
    :math:`\mathbf{h} = \mathbf{W}_h \mathbf{x} + \mathbf{b}_h` weighted by
    :math:`e^{-10 \|\mathbf{s}_i - \mathbf{s}_j\|^2}`:

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2 \Big[
        \operatorname{mean}_{j} w_{ij} \mathbf{h}_j \,\Big\Vert\,
        \max_{j} w_{ij} \mathbf{h}_j \Big] + \mathbf{b}.

    A drop-in for PyG's ``GravNetConv`` (same arguments, parameter names ``lin_s``,
    ``lin_h``, ``lin_out1``, ``lin_out2`` and initial draws, and outputs), without pyg-lib:
    the neighbours come from :func:`graphloc.ops.knn` (PyG's KD-tree breaks equal distances
    its own way; graphloc by the lower index), and both aggregations are fused sparse
    products over the weighted edges, no ``[E, F]`` messages. The search itself has no
    gradient, as in PyG; the weights carry one to ``lin_s``. Max sends the gradient to one
    winner per channel (PyG's splits it among equal maxima). Where PyG's search is
    undefined graphloc's is not: a point whose learned position is NaN ranks after every
    other, and an unsorted ``batch``, whose examples PyG's row ranges would mix, is
    refused.

    Args:
        in_channels (int): input width (-1: taken from the first call).
        out_channels (int): output width.
        space_dimensions (int): width of the learned space.
        propagate_dimensions (int): width of the aggregated features.
        k (int): neighbours per point.
        num_workers: deprecated in PyG and unused (a warning, as PyG's).

    Shapes:
        input: ``x [N, F]`` or a pair ``(x_src, x_dst)``, optional sorted example ids
        ``batch [N]`` (or a pair). output: ``[N_dst, out_channels]``.
    """

    pyg_aggr = None  # takes no aggr: PyG's sets its own aggr (mean and max)

    def __init__(self, in_channels: int, out_channels: int, space_dimensions: int,
                 propagate_dimensions: int, k: int, num_workers: int | None = None):
        super().__init__()
        check_sizes("GravNetConv", lazy=True, in_channels=in_channels,
                    out_channels=out_channels, space_dimensions=space_dimensions,
                    propagate_dimensions=propagate_dimensions)
        self.k = check_int(k, "GravNetConv: k", 1)
        if num_workers is not None:
            warnings.warn("GravNetConv: num_workers is deprecated in PyG and unused here",
                          stacklevel=2)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.flow = "source_to_target"  # (PyG's, fixed: its search's edges point to y)
        self.lin_s = linear(in_channels, space_dimensions)
        self.lin_h = linear(in_channels, propagate_dimensions)
        self.lin_out1 = linear(in_channels, out_channels, bias=False)
        self.lin_out2 = linear(2 * propagate_dimensions, out_channels)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for lin in (self.lin_s, self.lin_h, self.lin_out1, self.lin_out2):
            lin.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor],
                batch: Tensor | tuple[Tensor, Tensor] | None = None) -> Tensor:
        x_src, x_dst, bipartite = point_pair(self, x)
        batch_src, batch_dst = batch_pair(self, batch)
        check_input(self, x_src, self.in_channels)
        check_input(self, x_dst, x_src.size(1), "x_dst")
        h = self.lin_h(x_src)
        s_src = self.lin_s(x_src)
        s_dst = self.lin_s(x_dst) if bipartite else s_src
        src, dst = ops.knn(s_src, s_dst, self.k, batch_src, batch_dst).flip(0)
        graph = Graph.bipartite(torch.stack([src, dst]), (x_src.size(0), x_dst.size(0)))
        weight = torch.exp(-10.0 * (s_src.index_select(0, src)
                                    - s_dst.index_select(0, dst)).pow(2).sum(-1))
        aggregated = torch.cat([ops.spmm(graph, h, weight, "mean"),
                                ops.spmm(graph, h, weight, "max")], dim=-1)
        return self.lin_out1(x_dst) + self.lin_out2(aggregated)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"k={self.k})")
