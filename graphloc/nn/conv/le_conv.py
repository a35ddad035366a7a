"""The local extremum convolution of ASAP: each neighbour's difference to the node, summed."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features,
    linear,
    split_widths,
)
from graphloc.ops.values import all_finite, can_branch_on_values


class LEConv(ConvModule):
    r"""The local extremum graph convolution of `Ranjan et al., "ASAP: Adaptive Structure
    Aware Pooling for Learning Hierarchical Graph Representations" (AAAI 2020)
    <https://arxiv.org/abs/1911.07979>`_:

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i)} e_{j,i}
        (\mathbf{\Theta}_1 \mathbf{x}_j - \mathbf{\Theta}_2 \mathbf{x}_i)
        + \mathbf{\Theta}_3 \mathbf{x}_i.

    A drop-in for PyG's ``LEConv`` (same arguments, parameter names ``lin1``, ``lin2``,
    ``lin3`` and outputs). The sum is regrouped as
    :math:`\sum_j e_{j,i} \mathbf{\Theta}_1 \mathbf{x}_j - (\sum_j e_{j,i})
    \mathbf{\Theta}_2 \mathbf{x}_i`: one sparse product and a weighted in-degree, no
    ``[E, F]`` messages. The two sums nearly cancel where the projections do, so they are
    taken in float64 (closer to the exact result than PyG's float32 per-edge sum, at one
    float64 product's cost); where ``lin2``'s output or an edge weight is not finite it
    forms PyG's per-edge differences instead, so that infinities and NaN meet as in PyG's.

    Args:
        in_channels (int or (int, int)): input width (-1: taken from the first call), or
            the source and destination widths of a bipartite graph.
        out_channels (int): output width.
        bias (bool, default True): biases of ``lin1`` and ``lin3``.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``x [N, F]`` (or ``[B, N, F]`` on one graph) or a pair ``(x_src, x_dst)``,
        a ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` whose values are
        the edge weights, optional ``edge_weight [E]``. output: ``[N, out_channels]``
        (``[N_dst, out_channels]``).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("LEConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels)
        self.flow = check_flow("LEConv", flow)
        check_flags("LEConv", bias=bias)
        self.in_channels, self.out_channels = in_channels, out_channels
        src_width, dst_width = split_widths(in_channels)
        self.lin1 = linear(src_width, out_channels, bias=bias)
        self.lin2 = linear(dst_width, out_channels, bias=False)
        self.lin3 = linear(dst_width, out_channels, bias=bias)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for lin in (self.lin1, self.lin2, self.lin3):
            lin.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index,
                edge_weight: Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        if x_dst is None:
            raise ValueError("LEConv needs destination features: each message reads "
                             "lin2(x_i) (got a pair (x_src, None))")
        weight = weights_from(self, inputs, edge_weight)
        a, b = self.lin1(x_src), self.lin2(x_dst)
        weight = None if weight is None else weight.to(a.dtype)
        weight = masked_weights(weight, explain_mask(self, inputs))
        out = neighbour_differences(inputs.graph, a, b, weight)
        # in place on the fresh output (a cast of the float64 sums): nothing reads it
        return inputs.node_output(out.add_(self.lin3(x_dst)))

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def neighbour_differences(graph: Graph, a: Tensor, b: Tensor, weight: Tensor | None) -> Tensor:
    r""":math:`\sum_{j \to i} w_{ji} (a_j - b_i)` for every destination ``i`` (0 without
    edges): one float64 product and a weighted in-degree while ``b`` and ``w`` are finite, else
    the per-edge differences, where an infinite ``b_i`` meets each edge as in PyG's (and
    under ``torch.compile`` or ``torch.func``, which cannot branch on values)."""
    src, dst = graph.edge_index
    if not can_branch_on_values() or not all_finite(b) or (
            weight is not None and not all_finite(weight)):
        messages = a.index_select(0, src) - b.index_select(0, dst)
        if weight is not None:
            messages = messages * weight.unsqueeze(-1)
        # torch's index_add_ on the graph's checked indices: ops.scatter checks them again
        # by reading their values, which torch.compile cannot trace
        return messages.new_zeros(graph.num_nodes, messages.size(-1)).index_add_(
            0, dst, messages)
    # In float64: the two sums nearly cancel where a_j is close to b_i, and each is the
    # degree times larger than the result; exact products of the float32 values summed in
    # float64 lose less than PyG's float32 sum of per-edge differences.
    wide = torch.float64
    weight = None if weight is None else weight.to(wide)
    if weight is None:
        degree = graph.in_degree().to(wide)
    else:
        degree = weight.new_zeros(graph.num_nodes).index_add_(0, dst, weight)
    # in place on the product's fresh output: its backward does not read it
    out = ops.spmm(graph, a.to(wide), weight).addcmul_(b.to(wide), degree.unsqueeze(-1),
                                                      value=-1)
    return out.to(a.dtype)
