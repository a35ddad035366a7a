"""Pooling on a learned node score: PAN's pooling over its path matrix."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_batch_vector, check_number
from graphloc.nn.conv._utils import resolve_activation
from graphloc.ops.scatter import scatter_softmax


class PANPooling(torch.nn.Module):
    r"""The path integral based pooling of `Ma et al., "Path Integral Based Convolution and
    Pooling for Graph Neural Networks" (NeurIPS 2020) <https://arxiv.org/abs/2006.16811>`_,
    as PyG's ``PANPooling``: top-k pooling on the node score

    .. math::
        s = \beta_1 \mathbf{X} \mathbf{p} + \beta_2 \sum_i \mathbf{M}_{i, \cdot},

    the features of a node plus the column sums of the path matrix ``M`` that
    :class:`~graphloc.nn.conv.PANConv` returns. Then, as PyG's ``SelectTopK`` with one input
    channel: ``y = nonlinearity(s * q / |q|)`` (``q`` the one learned weight
    ``select.weight``) and the ``ceil(ratio * N)`` highest ``y`` of each graph kept, or with
    ``min_score`` ``y = softmax(s q)`` per graph and the nodes with ``y`` above
    ``min(min_score, max_graph y - 1e-7)`` kept. The kept nodes' features are multiplied
    by their ``y`` (and ``multiplier``), and the entries of ``M`` between kept nodes become
    the pooled graph's weighted edges ``j -> i``.

    A drop-in for PyG's, which needs torch-sparse: same arguments, parameters (``p``,
    ``beta``, ``select.weight``, drawn as PyG draws them) and outputs ``(x, edge_index,
    edge_weight, batch, perm, score)``, ``M`` a ``torch.sparse`` matrix (any layout) or
    torch-sparse's ``SparseTensor``. Kept nodes come graph by graph, by falling score,
    equal scores in node order (PyG's sort is not stable). Where PyG's differs: a float
    ``ratio`` of 1.0 keeps every node (PyG's reads any ``ratio >= 1`` as a count, so 1.0
    keeps one node per graph); an int ``ratio`` is a count, as in PyG's.

    PAN's official pooling (``YuGuangWang/PAN``) differs from PyG's: it builds its own path
    matrix with separate weights (``panpool_filter_weight``) and scores with it.

    Args:
        in_channels (int): the width of ``x``.
        ratio (float or int, default 0.5): the share of each graph's nodes kept (a float in
            ``(0, 1]``) or their number (an int ``>= 1``); not read with ``min_score``.
        min_score (float, optional): keep the nodes whose softmax score exceeds it instead.
        multiplier (float, default 1.0): scales the pooled features.
        nonlinearity (str or callable, default "tanh"): applied to the score.
    """

    def __init__(self, in_channels: int, ratio: float | int = 0.5,
                 min_score: float | None = None, multiplier: float = 1.0,
                 nonlinearity="tanh"):
        super().__init__()
        if isinstance(in_channels, bool) or not isinstance(in_channels, int) or in_channels < 1:
            raise ValueError(f"PANPooling: in_channels must be an integer >= 1, got "
                             f"{in_channels!r}")
        _check_ratio(ratio, min_score)
        check_number("PANPooling", "multiplier", multiplier)
        self.in_channels, self.ratio, self.min_score = in_channels, ratio, min_score
        self.multiplier = multiplier
        self.p = torch.nn.Parameter(torch.empty(in_channels))
        self.beta = torch.nn.Parameter(torch.empty(2))
        self.select = _ScoreWeight(resolve_activation("PANPooling", nonlinearity))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.p.fill_(1.0)
            self.beta.fill_(0.5)
        self.select.reset_parameters()

    def forward(self, x: Tensor, M, batch: Tensor | None = None) -> tuple:
        if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) != self.in_channels:
            got = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"PANPooling: x must be [N, {self.in_channels}], got {got}")
        n = x.size(0)
        rows, cols, values = _matrix_entries(M, n)
        batch = check_batch_vector(batch, n, "PANPooling", x.device)
        column_sums = values.new_zeros(n).index_add_(0, cols, values)
        score = self.beta[0] * (x * self.p).sum(-1) + self.beta[1] * column_sums
        y = self.select(score, batch, self.min_score)
        perm = _kept_nodes(y, batch, self.ratio, self.min_score)
        kept_score = y[perm]
        out = x[perm] * kept_score.unsqueeze(-1)
        if self.multiplier != 1:
            out = self.multiplier * out
        new_id = torch.full((n,), -1, dtype=torch.long, device=x.device)
        new_id[perm] = torch.arange(perm.numel(), device=x.device)
        src, dst = new_id[cols], new_id[rows]
        kept = (src >= 0) & (dst >= 0)
        edge_index = torch.stack([src[kept], dst[kept]])
        return out, edge_index, values[kept], batch[perm], perm, kept_score

    def __repr__(self) -> str:  # PyG's
        ratio = f"ratio={self.ratio}" if self.min_score is None else \
            f"min_score={self.min_score}"
        return f"{self.__class__.__name__}({self.in_channels}, {ratio}, " \
               f"multiplier={self.multiplier})"


class _ScoreWeight(torch.nn.Module):
    """PyG's ``SelectTopK`` on one channel: its weight ``[1, 1]`` and the score's map."""

    def __init__(self, act: torch.nn.Module):
        super().__init__()
        self.act = act
        self.weight = torch.nn.Parameter(torch.empty(1, 1))
        self.reset_parameters()  # PyG's SelectTopK draws here too: a seed gives its weights

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.weight.uniform_(-1.0, 1.0)  # PyG's uniform(size=1)

    def forward(self, score: Tensor, batch: Tensor, min_score: float | None) -> Tensor:
        score = score * self.weight.view(())
        if min_score is None:
            return self.act(score / self.weight.norm(p=2))
        return scatter_softmax(score, batch, 0)  # per graph


def _kept_nodes(y: Tensor, batch: Tensor, ratio, min_score: float | None) -> Tensor:
    """The kept nodes: graph by graph, by falling score (equal scores in node order), or
    with ``min_score`` every node above the threshold, in node order (PyG's ``topk``)."""
    graphs = int(batch.max()) + 1 if batch.numel() else 0
    if min_score is not None:
        peak = ops.scatter(y, batch, 0, dim_size=graphs, reduce="max")
        threshold = (peak[batch] - 1e-7).clamp(max=min_score)
        return (y > threshold).nonzero().view(-1)
    sizes = torch.bincount(batch, minlength=graphs)
    if isinstance(ratio, int):
        k = torch.full_like(sizes, ratio)
    else:
        k = (float(ratio) * sizes.to(torch.float64)).ceil().long()
    order = torch.sort(y.detach(), descending=True, stable=True).indices
    order = order[torch.sort(batch[order], stable=True).indices]
    starts = torch.cumsum(sizes, 0) - sizes
    rank = torch.arange(y.numel(), device=y.device) - starts[batch[order]]
    return order[rank < k[batch[order]]]


def _matrix_entries(M, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(rows, cols, values)`` of an ``[n, n]`` path matrix: a ``torch.sparse`` tensor of
    any layout (repeated entries added) or a torch-sparse ``SparseTensor`` (its ``coo()``)."""
    if isinstance(M, Tensor) and M.layout != torch.strided:
        if M.dim() != 2 or tuple(M.shape) != (n, n):
            raise ValueError(f"PANPooling: M must be [{n}, {n}] (x's nodes), got "
                             f"{list(M.shape)}")
        m = M.to_sparse_coo().coalesce()
        (rows, cols), values = m.indices(), m.values()
    elif hasattr(M, "coo") and hasattr(M, "sparse_sizes"):
        if tuple(M.sparse_sizes()) != (n, n):
            raise ValueError(f"PANPooling: M must be [{n}, {n}] (x's nodes), got "
                             f"{list(M.sparse_sizes())}")
        rows, cols, values = M.coo()
        if values is None:
            raise ValueError("PANPooling: M has no values; pass the path matrix PANConv "
                             "returns")
    else:
        raise TypeError(f"PANPooling: M must be a sparse matrix (PANConv's path matrix), "
                        f"got {type(M).__name__}")
    if values.dim() != 1:
        raise ValueError(f"PANPooling: M must hold one value per entry, got values of shape "
                         f"{list(values.shape)}")
    return rows, cols, values


def _check_ratio(ratio, min_score) -> None:
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or \
                not math.isfinite(min_score):
            raise ValueError(f"PANPooling: min_score must be a finite number, got "
                             f"{min_score!r}")
        return
    if isinstance(ratio, bool) or not (
            (isinstance(ratio, int) and ratio >= 1) or
            (isinstance(ratio, float) and 0.0 < ratio <= 1.0)):
        raise ValueError(f"PANPooling: ratio must be a float in (0, 1] (the share of nodes "
                         f"kept) or an int >= 1 (their number), got {ratio!r}")
