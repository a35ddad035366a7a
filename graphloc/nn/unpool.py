"""Unpooling: features of a coarse point set carried to a finer one (PointNet++'s
feature propagation)."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_int
from graphloc.graph import Graph


def knn_interpolate(x: Tensor, pos_x: Tensor, pos_y: Tensor, batch_x: Tensor | None = None,
                    batch_y: Tensor | None = None, k: int = 3, num_workers: int = 1) -> Tensor:
    r"""PyG's ``knn_interpolate`` (Qi et al., PointNet++, NeurIPS 2017), without pyg-lib:
    each point of ``pos_y`` takes the inverse squared distance weighted mean of the
    features of its ``k`` nearest points of ``pos_x`` in its example,

    .. math::
        \mathbf{y}_i = \frac{\sum_j w_{ij} \mathbf{x}_j}{\sum_j w_{ij}}, \quad
        w_{ij} = 1 / \max(\|\mathbf{p}_j - \mathbf{p}_i\|^2, 10^{-16}),

    the neighbours from :func:`graphloc.ops.knn` (equal distances to the lower index), the
    weights without gradient (as PyG's), the two sums as sparse products with no
    ``[E, F]`` messages. A point whose example has no points in ``pos_x`` gets NaN (0 / 0,
    as PyG's).

    Args:
        x: ``[N, F]`` features of the points of ``pos_x``.
        pos_x: ``[N, d]`` their positions; ``pos_y``: ``[M, d]`` the points to fill.
        batch_x, batch_y: sorted example ids (None: one example).
        k: neighbours per point (default 3).
        num_workers: accepted for PyG's signature.
    """
    check_int(k, "knn_interpolate: k", 1)
    if not isinstance(x, Tensor) or not isinstance(pos_x, Tensor) or x.dim() != 2 or \
            x.size(0) != pos_x.size(0):
        raise ValueError(f"knn_interpolate: x must be [N, F] with a row per point of pos_x "
                         f"({getattr(pos_x, 'shape', None)}), got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    with torch.no_grad():
        target, source = ops.knn(pos_x, pos_y, k, batch_x, batch_y, num_workers=num_workers)
        offset = pos_x.index_select(0, source) - pos_y.index_select(0, target)
        weight = 1.0 / (offset * offset).sum(-1).clamp(min=1e-16)
    graph = Graph.bipartite(torch.stack([source, target]), (x.size(0), pos_y.size(0)))
    weight = weight.to(x.dtype)
    total = ops.spmm(graph, weight.new_ones(x.size(0), 1), weight).squeeze(1)
    return ops.spmm(graph, x, weight) / total.unsqueeze(1)
