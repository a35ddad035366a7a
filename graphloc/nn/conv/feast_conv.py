"""The feature-steered convolution of Verma et al. (FeaStNet; PyG's ``FeaStConv``): each
edge weighs H maps of its source by a softmax over the heads of u (x_j - x_i) + c."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs, require_destination
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features,
    has_call_hooks,
    mean_of_sums,
    uniform_linear,
    width_keeping_aggregation,
)
from graphloc.nn.conv.gat import fresh_self_loops, mask_in_csr_order
from graphloc.ops.values import all_finite, can_branch_on_values

# the aggregations edge_head_sum serves (linear in the messages)
_LINEAR_AGGREGATIONS = ("add", "sum", "mean")


class FeaStConv(ConvModule):
    r"""The feature-steered graph convolution of `Verma et al., "FeaStNet: Feature-Steered
    Graph Convolutions for 3D Shape Analysis" (CVPR 2018)
    <https://arxiv.org/abs/1706.05206>`_:

    .. math::
        \mathbf{x}'_i = \frac{1}{|\mathcal{N}(i)|} \sum_{j \in \mathcal{N}(i)}
        \sum_{h=1}^H q_h(\mathbf{x}_i, \mathbf{x}_j) \mathbf{W}_h \mathbf{x}_j + \mathbf{b},
        \qquad q_h(\mathbf{x}_i, \mathbf{x}_j) = \mathrm{softmax}_h\big(\mathbf{u}_h^{\top}
        (\mathbf{x}_j - \mathbf{x}_i) + c_h\big)

    with a self-loop per node (``add_self_loops``). A drop-in for PyG's ``FeaStConv`` (same
    arguments, parameters ``lin``, ``u``, ``c`` and ``bias``, PyG's initialisation from one
    seed, and outputs).

    PyG maps every edge's source ``x_j`` by ``lin`` (an ``[E, H * out]`` product and tensor)
    and weighs its H blocks. Here ``lin`` maps each node once and ``ops.edge_head_sum``
    weighs and sums the source's ``[H, out]`` blocks per destination (on the CPU over the
    transpose: no ``[E, H, out]`` tensor forward or backward). The head scores
    ``u (x_j - x_i)`` are taken per node, ``u x_j - u x_i``, formed and subtracted in
    float64 and rounded once: as close to the exact value as PyG's per-edge product, or
    closer (float32 sums regrouped so would carry errors of the scale of ``x`` where PyG's
    carry those of ``x_j - x_i``, and FeaSt is meant to be translation invariant); float64
    features and ``torch.autocast`` keep PyG's per-edge difference. PyG's per-edge products
    (``lin`` and ``u`` on each edge's features) where the features are not finite, under
    ``torch.compile`` or ``torch.func``, and where ``lin`` or ``u`` has call hooks.

    Args:
        in_channels (int): input width (-1 infers it at the first call).
        out_channels (int): output width.
        heads (int, default 1): the number of maps H.
        add_self_loops (bool, default True): replace self-loops by one loop per node.
        bias (bool, default True): add a bias.
        aggr (str or module, default "mean"): the aggregation of the messages ("add",
            "mean", "max", "min", or any that keeps the width).
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, in_channels]``, a static batch ``[B, N, in_channels]`` or a pair
        ``(x_src, x_dst)`` of one width; the graph (a ``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t``, its pattern). output: ``[N_dst, out_channels]``.

    Differences from PyG's: a pair ``(x_src, None)`` is a ``ValueError`` (the scores read
    ``x_i``; PyG's fails in a subtraction); with ``aggr="max"`` or ``"min"``, tied messages
    send the gradient to one winner per channel (PyG's shares it). docs/models.md lists
    these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1,
                 add_self_loops: bool = True, bias: bool = True, aggr="mean",
                 aggr_kwargs: dict | None = None, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("FeaStConv", lazy=True, in_channels=in_channels,
                    out_channels=out_channels, heads=heads)
        check_flags("FeaStConv", add_self_loops=add_self_loops, bias=bias)
        self.flow = check_flow("FeaStConv", flow)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.add_self_loops = add_self_loops
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.aggr_module = width_keeping_aggregation(
            "FeaStConv", aggr, aggr_kwargs, out_channels, "the output adds the bias")
        self.lin = uniform_linear(in_channels, heads * out_channels)
        self.u = uniform_linear(in_channels, heads)
        self.c = torch.nn.Parameter(torch.empty(heads))
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.aggr_module.reset_parameters()
        self.lin.reset_parameters()
        self.u.reset_parameters()
        torch.nn.init.normal_(self.c, mean=0.0, std=0.1)
        if self.bias is not None:
            torch.nn.init.normal_(self.bias, mean=0.0, std=0.1)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        require_destination(self, x_dst, "its head scores read x_j - x_i")
        self._materialize(x_src)
        graph = fresh_self_loops(inputs.graph) if self.add_self_loops else inputs.graph
        graph = graph.in_csr_order()
        regroup = self._may_regroup(x_src, x_dst)
        weights = torch.softmax(self._head_scores(graph, x_src, x_dst, regroup), dim=1)
        mask = explain_mask(self, inputs)
        if mask is not None:  # a message is linear in its edge's head weights
            weights = weights * mask_in_csr_order(inputs, mask, self.add_self_loops).unsqueeze(-1)
        out = self._aggregate(graph, x_src, weights, regroup)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    @torch.no_grad()
    def _materialize(self, x_src: Tensor) -> None:
        """A lazy layer's ``u`` then ``lin`` from the first call's width: PyG's order (its
        message applies ``u`` first), so a seed draws PyG's values."""
        for lin in (self.u, self.lin):
            if isinstance(lin.weight, torch.nn.parameter.UninitializedParameter):
                lin(x_src[:0])

    def _may_regroup(self, x_src: Tensor, x_dst: Tensor) -> bool:
        """Whether ``lin`` and ``u`` may act per node: the same numbers as PyG's per-edge
        products only on finite features (inf - inf is NaN per edge, and a NaN row of a
        node that sends no message would reach ``lin``'s gradient), and only where the
        forward may branch on values and no hook waits for either Linear's own call."""
        if has_call_hooks(self.lin) or has_call_hooks(self.u) or not can_branch_on_values():
            return False
        return all_finite(x_src) and all_finite(x_dst)

    def _head_scores(self, graph, x_src: Tensor, x_dst: Tensor, regroup: bool) -> Tensor:
        """``u (x_j - x_i) + c`` per edge in CSR order, ``[E, H]``: per node in float64 where
        that is exact enough (narrower floats, autocast off: PyG's product runs in its
        dtype), else PyG's per-edge difference."""
        src, dst = graph.csr.indices.long(), graph.edge_index[1]
        if regroup and x_src.dtype != torch.float64 and \
                not ops.autocast_enabled(x_src.device.type):
            wide = self.u.weight.to(torch.float64).t()
            at_src = x_src.to(torch.float64) @ wide
            at_dst = at_src if x_dst is x_src else x_dst.to(torch.float64) @ wide
            differences = at_src.index_select(0, src) - at_dst.index_select(0, dst)
            scores = differences.to(torch.promote_types(x_src.dtype, self.u.weight.dtype))
        else:
            scores = self.u(x_src.index_select(0, src) - x_dst.index_select(0, dst))
        return scores + self.c

    def _aggregate(self, graph, x_src: Tensor, weights: Tensor, regroup: bool) -> Tensor:
        """``aggr_j sum_h q_h (lin x_j)_h`` per destination: each node's ``[H, out]`` blocks
        of ``lin x`` weighed per edge and summed (a mean divides by the in-degree); else
        PyG's ``lin`` on each edge's source features."""
        H, M = self.heads, self.out_channels
        src = graph.csr.indices.long()
        if not regroup:
            blocks = self.lin(x_src.index_select(0, src)).view(-1, H, M)
            messages = (blocks * weights.unsqueeze(-1)).sum(dim=1)
            return self.aggr_module(aggregations.per_edge(graph), messages)
        blocks = self.lin(x_src).view(-1, H, M)
        if isinstance(self.aggr, str) and self.aggr in _LINEAR_AGGREGATIONS:
            out = ops.edge_head_sum(graph, weights, blocks)
            return mean_of_sums(graph, out) if self.aggr == "mean" else out
        messages = (blocks.index_select(0, src) * weights.unsqueeze(-1)).sum(dim=1)
        return self.aggr_module(aggregations.per_edge(graph), messages)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")
