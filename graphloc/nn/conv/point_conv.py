"""The PointNet set layer of Qi et al. (PointNet++; PyG's ``PointNetConv``): a network on
each edge's ``[x_j, pos_j - pos_i]``, aggregated at the destination, then a global
network."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice, check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs
from graphloc.nn.conv._utils import (
    PYG_REDUCTIONS,
    check_first_linear,
    check_input,
    check_networks,
    first_linear,
    may_regroup_first_linear,
    reset_like_pyg,
)
from graphloc.nn.conv.gat import fresh_self_loops, mask_in_csr_order


class PointNetConv(ConvModule):
    r"""The PointNet set layer of `Qi et al., "PointNet++: Deep Hierarchical Feature
    Learning on Point Sets in a Metric Space" (NeurIPS 2017)
    <https://arxiv.org/abs/1706.02413>`_ (and PointNet, CVPR 2017):

    .. math::
        \mathbf{x}'_i = \gamma_{\mathbf{\Theta}} \Big( \square_{j \in \mathcal{N}(i) \cup
        \{i\}} h_{\mathbf{\Theta}} ( \mathbf{x}_j \, \Vert \, \mathbf{p}_j - \mathbf{p}_i)
        \Big)

    (``local_nn`` h, ``global_nn`` gamma, the aggregation max by default; without
    features ``x`` the messages read the offsets alone). A drop-in for PyG's
    ``PointNetConv`` (same arguments and outputs). Where ``local_nn`` starts with a
    ``torch.nn.Linear`` (alone or first in a ``torch.nn.Sequential``, as PyG's PointNet++
    example builds it), its first product is taken per node:
    :math:`W [\mathbf{x}_j, \mathbf{p}_j - \mathbf{p}_i] + b = (W_x \mathbf{x}_j + W_p
    \mathbf{p}_j) - (W_p \mathbf{p}_i - b)`, formed and subtracted in float64 and rounded
    once (points far from the origin keep the precision of PyG's per-edge offsets), instead
    of an ``[E, F + D]`` concatenation and product. PyG's per-edge inputs where the features
    or positions are not finite, under ``torch.autocast``, ``torch.compile`` or
    ``torch.func``, and where that Linear has hooks. The rest of ``local_nn`` runs per edge,
    as PyG's.

    Args:
        local_nn (torch.nn.Module, optional): the network on each edge's input.
        global_nn (torch.nn.Module, optional): the network on each aggregated node.
        add_self_loops (bool, default True): replace self-loops by one loop per node.
        aggr (str, default "max"): "max", "min", "mean", "add" or "sum" (nodes without
            messages get 0).
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, F]`` or None, or a pair ``(x_src, x_dst)`` (only ``x_src`` is
        read); ``pos [N, D]`` or a pair ``(pos_src, pos_dst)``; the graph (a ``Graph``,
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, its pattern). output:
        ``[N_dst, C]``.

    Differences from PyG's: with ``aggr="max"`` or ``"min"``, tied messages send the
    gradient to one winner per channel (PyG's shares it); positions or features of
    another row count than the graph's nodes, or a first Linear of another width than
    ``F + D``, are a ``ValueError`` naming them. docs/models.md lists these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, local_nn: torch.nn.Module | None = None,
                 global_nn: torch.nn.Module | None = None, add_self_loops: bool = True,
                 aggr: str = "max", flow: str = "source_to_target"):
        super().__init__()
        name = type(self).__name__  # (and PPFConv's, which shares this)
        check_networks(name, local_nn=local_nn, global_nn=global_nn)
        check_flags(name, add_self_loops=add_self_loops)
        check_choice(name, "aggr", aggr, tuple(PYG_REDUCTIONS))
        self.local_nn, self.global_nn = local_nn, global_nn
        self.add_self_loops, self.aggr = add_self_loops, aggr
        self.flow = check_flow(name, flow)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for nn in (self.local_nn, self.global_nn):
            if nn is not None:
                reset_like_pyg(nn)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple | None, pos: Tensor | tuple[Tensor, Tensor],
                edge_index) -> Tensor:
        inputs = read_inputs(self, pos, edge_index)
        pos_src, pos_dst = inputs.x_src, inputs.x_dst
        if pos_dst is None:
            raise ValueError("PointNetConv: the messages read pos_i, so a pair (pos_src, "
                             "None) has no destination positions; pass (pos_src, pos_dst)")
        check_input(self, pos_src, None, "pos")
        check_input(self, pos_dst, pos_src.size(1), "pos_dst")
        x_src = self._features(x, inputs)
        graph = fresh_self_loops(inputs.graph) if self.add_self_loops else inputs.graph
        graph = graph.in_csr_order()
        src, dst = graph.csr.indices.long(), graph.edge_index[1]
        messages = self._messages(x_src, pos_src, pos_dst, src, dst)
        return inputs.node_output(self._reduce(inputs, graph, messages))

    def _reduce(self, inputs, graph, messages: Tensor) -> Tensor:
        """The messages (in the CSR order of ``graph``, the call's graph with PyG's fresh
        loops where added) times an explainer's mask where one is set, reduced per
        destination, then ``global_nn``."""
        mask = explain_mask(self, inputs)
        if mask is not None:
            messages = messages * mask_in_csr_order(inputs, mask,
                                                    self.add_self_loops).unsqueeze(-1)
        out = ops.segment_reduce(messages, graph.csr.indptr, PYG_REDUCTIONS[self.aggr])
        return out if self.global_nn is None else self.global_nn(out)

    def _features(self, x, inputs) -> Tensor | None:
        """The sources' features (PyG reads ``x[0]`` of a pair), checked against the
        positions' rows, or None."""
        x_src = x[0] if isinstance(x, (tuple, list)) else x
        if x_src is None:
            return None
        check_input(self, x_src, None)
        if inputs.batch is not None or x_src.size(0) != inputs.x_src.size(0):
            raise ValueError(f"{type(self).__name__}: x has shape {list(x_src.shape)} but pos has "
                             f"{list(inputs.x_src.shape)}: one row per source point (a static "
                             "batch of points is not taken: call the layer per set)")
        return x_src

    def _messages(self, x_src: Tensor | None, pos_src: Tensor, pos_dst: Tensor, src: Tensor,
                  dst: Tensor) -> Tensor:
        """``local_nn([x_j, pos_j - pos_i])`` per edge, the first Linear per node where it
        may be."""
        width = pos_src.size(1) + (0 if x_src is None else x_src.size(1))
        if self.local_nn is not None:
            check_first_linear(self, self.local_nn, width, f"each edge's [x_j, pos_j - pos_i] "
                               f"has {width} features")
        first, rest = first_linear(self.local_nn) if self.local_nn is not None else (None, None)
        given = [t for t in (x_src, pos_src, pos_dst) if t is not None]
        if first is not None and may_regroup_first_linear(first, *given):
            return rest(_first_product(first, x_src, pos_src, pos_dst, src, dst))
        offsets = pos_src.index_select(0, src) - pos_dst.index_select(0, dst)
        inputs = offsets if x_src is None else torch.cat([x_src.index_select(0, src), offsets],
                                                         dim=1)
        return inputs if self.local_nn is None else self.local_nn(inputs)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}(local_nn={self.local_nn}, "
                f"global_nn={self.global_nn})")


def _first_product(first: torch.nn.Linear, x_src: Tensor | None, pos_src: Tensor,
                   pos_dst: Tensor, src: Tensor, dst: Tensor) -> Tensor:
    """``W [x_j, pos_j - pos_i] + b`` per edge (in ``src``, ``dst`` order) as ``(W_x x_j +
    W_p pos_j) - (W_p pos_i - b)``, the node products and their difference in float64,
    rounded once."""
    wide = torch.float64
    weight = first.weight.to(wide)
    w_pos = weight[:, weight.size(1) - pos_src.size(1):]
    at_src = pos_src.to(wide) @ w_pos.t()
    if x_src is not None:
        at_src = at_src + x_src.to(wide) @ weight[:, :x_src.size(1)].t()
    at_dst = pos_dst.to(wide) @ w_pos.t()
    if first.bias is not None:
        at_dst = at_dst - first.bias.to(wide)
    out = at_src.index_select(0, src) - at_dst.index_select(0, dst)
    dtype = torch.promote_types(pos_src.dtype, first.weight.dtype)
    return out.to(dtype)
