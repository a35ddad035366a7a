"""PointCNN's X-convolution: each point's neighbourhood, in nearest-first order, transformed
by a learned matrix before an ordinary convolution."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.nn.conv._utils import check_sizes, reset_like_pyg


class Reshape(torch.nn.Module):
    """``x.view(*shape)``, as PyG's ``Reshape`` (no parameters)."""

    def __init__(self, *shape: int):
        super().__init__()
        self.shape = shape

    def forward(self, x: Tensor) -> Tensor:
        return x.view(*self.shape)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({', '.join(str(s) for s in self.shape)})"


class XConv(torch.nn.Module):
    r"""The X-convolution of `Li et al., "PointCNN: Convolution On X-Transformed Points"
    (NeurIPS 2018) <https://arxiv.org/abs/1801.07791>`_:

    .. math::
        \mathbf{x}'_i = \mathrm{Conv}\left(\mathbf{K}, \gamma(\mathbf{P}_i - \mathbf{p}_i)
        \times \left(h(\mathbf{P}_i - \mathbf{p}_i) \,\Vert\, \mathbf{x}_{P_i}\right)\right),

    :math:`\mathbf{P}_i` the ``kernel_size`` nearest points of point ``i`` (itself first),
    taken every ``dilation``-th from its ``kernel_size * dilation`` nearest.

    A drop-in for PyG's ``XConv`` (same arguments, the networks ``mlp1``, ``mlp2`` and
    ``conv`` with PyG's layers, names and initial draws, and outputs), without pyg-lib,
    which PyG 2.8 needs even to build one: the neighbours come from
    :func:`graphloc.ops.knn`, nearest first. The transform reads them in that order, so
    where two are at exactly the same distance PyG's tree and graphloc (the lower index
    first) can order them differently. Every example needs ``kernel_size * dilation``
    points (PyG's reshape fails otherwise; here a ``ValueError`` names the example); no
    points at all give the empty output.

    Args:
        in_channels (int): input width.
        out_channels (int): output width.
        dim (int): point dimensions.
        kernel_size (int): neighbours per point, itself included.
        hidden_channels (int, optional): width of the lifted offsets (default
            ``in_channels // 4``).
        dilation (int, default 1).
        bias (bool, default True).
        num_workers (int, default 1): accepted for PyG's signature.

    Shapes:
        input: ``x [N, F]`` (or None), ``pos [N, dim]``, optional sorted ``batch [N]``.
        output: ``[N, out_channels]``.
    """

    def __init__(self, in_channels: int, out_channels: int, dim: int, kernel_size: int,
                 hidden_channels: int | None = None, dilation: int = 1, bias: bool = True,
                 num_workers: int = 1):
        super().__init__()
        check_sizes("XConv", in_channels=in_channels, out_channels=out_channels, dim=dim,
                    kernel_size=kernel_size, dilation=dilation)
        check_flags("XConv", bias=bias)
        hidden_channels = in_channels // 4 if hidden_channels is None else hidden_channels
        check_int(hidden_channels, "XConv: hidden_channels (default in_channels // 4)", 1)
        self.in_channels, self.hidden_channels = in_channels, hidden_channels
        self.out_channels, self.dim = out_channels, dim
        self.kernel_size, self.dilation = kernel_size, dilation
        self.num_workers = check_int(num_workers, "XConv: num_workers", 1)
        k, lifted = kernel_size, hidden_channels
        nn = torch.nn
        self.mlp1 = nn.Sequential(
            nn.Linear(dim, lifted), nn.ELU(), nn.BatchNorm1d(lifted),
            nn.Linear(lifted, lifted), nn.ELU(), nn.BatchNorm1d(lifted),
            Reshape(-1, k, lifted))
        self.mlp2 = nn.Sequential(
            nn.Linear(dim * k, k ** 2), nn.ELU(), nn.BatchNorm1d(k ** 2), Reshape(-1, k, k),
            nn.Conv1d(k, k ** 2, k, groups=k), nn.ELU(), nn.BatchNorm1d(k ** 2),
            Reshape(-1, k, k),
            nn.Conv1d(k, k ** 2, k, groups=k), nn.BatchNorm1d(k ** 2), Reshape(-1, k, k))
        channels = in_channels + lifted
        multiplier = math.ceil(out_channels / channels)
        self.conv = nn.Sequential(
            nn.Conv1d(channels, channels * multiplier, k, groups=channels),
            Reshape(-1, channels * multiplier),
            nn.Linear(channels * multiplier, out_channels, bias=bias))
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for network in (self.mlp1, self.mlp2, self.conv):
            reset_like_pyg(network)

    def forward(self, x: Tensor | None, pos: Tensor, batch: Tensor | None = None) -> Tensor:
        pos = pos.unsqueeze(-1) if isinstance(pos, Tensor) and pos.dim() == 1 else pos
        if not isinstance(pos, Tensor) or pos.dim() != 2 or pos.size(1) != self.dim:
            raise ValueError(f"XConv: pos must be [N, {self.dim}] (dim={self.dim}), got "
                             f"{getattr(pos, 'shape', type(pos).__name__)}")
        n, k = pos.size(0), self.kernel_size
        if n == 0:  # (PyG's reshape of no points fails: the empty output, as torch's)
            return pos.new_zeros(0, self.out_channels)
        reach = k * self.dilation
        query, point = ops.knn(pos, pos, reach, batch, batch)
        if query.numel() != n * reach:
            short = int(torch.bincount(query, minlength=n).lt(reach).nonzero()[0])
            raise ValueError(f"XConv: point {short}'s example has fewer than kernel_size * "
                             f"dilation = {reach} points; every point needs that many "
                             "neighbours")
        query, point = query[::self.dilation], point[::self.dilation]
        offsets = pos.index_select(0, point) - pos.index_select(0, query)
        lifted = self.mlp1(offsets)
        if x is not None:
            x = x.unsqueeze(-1) if x.dim() == 1 else x
            if x.dim() != 2 or x.size(0) != n or x.size(1) != self.in_channels:
                raise ValueError(f"XConv: x must be [N, {self.in_channels}] with a row per "
                                 f"point ({n}), got {list(x.shape)}")
            lifted = torch.cat([lifted, x.index_select(0, point).view(n, k, -1)], dim=-1)
        transform = self.mlp2(offsets.view(n, k * self.dim))
        return self.conv(torch.matmul(lifted.transpose(1, 2).contiguous(), transform))

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
