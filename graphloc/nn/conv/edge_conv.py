"""DGCNN's edge convolution: a network on each edge's ``[x_i, x_j - x_i]``, aggregated at
the destination."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice, check_int
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_messages
from graphloc.nn.conv._inputs import (
    batch_pair,
    check_flow,
    point_pair,
    read_inputs,
    require_destination,
)
from graphloc.nn.conv._utils import (
    PYG_REDUCTIONS,
    check_first_linear,
    check_input,
    first_linear,
    may_regroup_first_linear,
    reset_like_pyg,
)


class EdgeConv(ConvModule):
    r"""The edge convolution of `Wang et al., "Dynamic Graph CNN for Learning on Point
    Clouds" (ACM TOG 2019) <https://arxiv.org/abs/1801.07829>`_:

    .. math::
        \mathbf{x}'_i = \square_{j \in \mathcal{N}(i)} h_{\mathbf{\Theta}}(\mathbf{x}_i
        \, \Vert \, \mathbf{x}_j - \mathbf{x}_i),

    :math:`\square` the aggregation (max by default). A drop-in for PyG's ``EdgeConv`` (same
    arguments, the network as ``nn``, and outputs). Where the network starts with a
    ``torch.nn.Linear`` (alone or first in a ``torch.nn.Sequential``), its first product is
    taken per node: :math:`W [\mathbf{x}_i, \mathbf{x}_j - \mathbf{x}_i] + b =
    (W_1 - W_2) \mathbf{x}_i + b + W_2 \mathbf{x}_j`, two ``[N, F]`` products and a sum per
    edge instead of an ``[E, 2F]`` one. The two are formed and added in float64 and rounded
    once (for near points regrouped float32 sums would carry errors of the scale of
    :math:`\mathbf{x}` where PyG's carry those of :math:`\mathbf{x}_j - \mathbf{x}_i`):
    as close to the exact value as PyG's product, or closer. The network runs on each
    edge's ``[x_i, x_j - x_i]``, as PyG's, where the features are not finite, under
    ``torch.autocast``, ``torch.compile`` or ``torch.func``, or where that Linear has hooks.
    The rest of the network runs per edge (on the edges in destination order), and the
    messages are reduced per destination row.

    Args:
        nn (torch.nn.Module): the network, ``[*, 2 F] -> [*, C]``.
        aggr (str, default "max"): "max", "min", "mean", "add" or "sum" (nodes without
            incoming edges get 0; max and min send the gradient to one winner per channel).
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, F]`` or a pair ``(x_src, x_dst)`` (or ``[B, N, F]`` on one graph), a
        ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` (its pattern).
        output: ``[N_dst, C]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, nn: torch.nn.Module, aggr: str = "max",
                 flow: str = "source_to_target"):
        super().__init__()
        if not callable(nn):
            raise TypeError(f"EdgeConv: nn must be a module (the edge network), got "
                            f"{type(nn).__name__}")
        check_choice("EdgeConv", "aggr", aggr, tuple(PYG_REDUCTIONS))
        self.nn, self.aggr = nn, aggr
        self.flow = check_flow("EdgeConv", flow)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        reset_like_pyg(self.nn)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = inputs.x_src, inputs.x_dst
        require_destination(self, x_dst, "its messages read x_i")
        check_input(self, x_src, None)
        check_input(self, x_dst, x_src.size(1), "x_dst")
        graph = inputs.graph
        src, dst = graph.in_csr_order().edge_index
        width = x_src.size(1)
        check_first_linear(self, self.nn, 2 * width, f"x has {width} features, so each "
                           f"edge's [x_i, x_j - x_i] has {2 * width}")
        first, rest = first_linear(self.nn)
        if first is not None and may_regroup_first_linear(first, x_src, x_dst):
            messages = rest(_first_product(first, x_src, x_dst, src, dst))
        else:
            x_i = x_dst.index_select(0, dst)
            messages = self.nn(torch.cat([x_i, x_src.index_select(0, src) - x_i], dim=-1))
        messages = masked_messages(messages, graph, explain_mask(self, inputs))
        out = ops.segment_reduce(messages, graph.csr.indptr, PYG_REDUCTIONS[self.aggr])
        return inputs.node_output(out)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"


class DynamicEdgeConv(EdgeConv):
    r"""DGCNN's dynamic edge convolution (`Wang et al., ACM TOG 2019
    <https://arxiv.org/abs/1801.07829>`_): :class:`EdgeConv` over the graph of each
    point's ``k`` nearest points in feature space (itself included), rebuilt at every call.

    A drop-in for PyG's ``DynamicEdgeConv`` (same arguments, the network as ``nn``, and
    outputs), without pyg-lib: the neighbours come from :func:`graphloc.ops.knn` (PyG's
    KD-tree breaks equal distances its own way; graphloc by the lower index), then the
    edge convolution runs as :class:`EdgeConv`'s. The search has no gradient, as in PyG.
    Where PyG's search is undefined graphloc's is not: a point with a NaN feature ranks
    after every other (its own output is NaN either way), and an unsorted ``batch``, whose
    examples PyG's row ranges would mix, is refused.

    Args:
        nn (torch.nn.Module): the network, ``[*, 2 F] -> [*, C]``.
        k (int): neighbours per point.
        aggr (str, default "max"): as :class:`EdgeConv`'s.
        num_workers (int, default 1): accepted for PyG's signature; the search runs on
            torch's threads.

    Shapes:
        input: ``x [N, F]`` or a pair ``(x_src, x_dst)``, optional sorted example ids
        ``batch [N]`` (or a pair). output: ``[N_dst, C]``.
    """

    explainable = False  # its edges are its own k-nearest points, not the caller's

    def __init__(self, nn: torch.nn.Module, k: int, aggr: str = "max", num_workers: int = 1):
        super().__init__(nn, aggr=aggr)
        self.k = check_int(k, "DynamicEdgeConv: k", 1)
        self.num_workers = check_int(num_workers, "DynamicEdgeConv: num_workers", 1)

    @property
    def graphloc_hops(self) -> None:
        """None: the output reads the nearest points in feature space, anywhere in the
        example, not a fixed number of hops of a given graph (EdgeConv's 1 would be a false
        locality for the influence tool)."""
        return None

    def forward(self, x: Tensor | tuple[Tensor, Tensor],
                batch: Tensor | tuple[Tensor, Tensor] | None = None) -> Tensor:
        x_src, x_dst, bipartite = point_pair(self, x)
        batch_src, batch_dst = batch_pair(self, batch)
        edge_index = ops.knn(x_src, x_dst, self.k, batch_src, batch_dst).flip(0)
        return super().forward((x_src, x_dst) if bipartite else x_src, edge_index)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}(nn={self.nn}, k={self.k})"


def _first_product(first: torch.nn.Linear, x_src: Tensor, x_dst: Tensor, src: Tensor,
                   dst: Tensor) -> Tensor:
    """``W [x_i, x_j - x_i] + b`` per edge (in ``src``, ``dst`` order) as ``(W_1 - W_2) x_i
    + b + W_2 x_j``, the node products and their sum in float64, rounded once."""
    wide = torch.float64
    width = x_src.size(1)
    weight = first.weight.to(wide)
    w_dst, w_src = weight[:, :width], weight[:, width:]
    at_dst = x_dst.to(wide) @ (w_dst - w_src).t()
    if first.bias is not None:
        at_dst = at_dst + first.bias.to(wide)
    at_src = x_src.to(wide) @ w_src.t()
    out = at_dst.index_select(0, dst) + at_src.index_select(0, src)
    return out.to(torch.promote_types(x_src.dtype, first.weight.dtype))
