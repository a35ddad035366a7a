"""The edge-conditioned convolution of Gilmer et al. and Simonovsky and Komodakis (PyG's
``NNConv``): a network maps each edge's features to the matrix its message is multiplied
by."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs, required_edge_feature_rows
from graphloc.nn.conv._utils import (
    check_first_linear,
    check_sizes,
    checked_features,
    has_call_hooks,
    mean_of_sums,
    reset_like_pyg,
    root_map,
    split_widths,
    uniform_linear,
    width_keeping_aggregation,
)
from graphloc.ops.values import all_finite, can_branch_on_values

# the aggregations the regrouped sum serves (linear in the messages)
_LINEAR_AGGREGATIONS = ("add", "sum", "mean")


class NNConv(ConvModule):
    r"""The edge-conditioned convolution of `Gilmer et al., "Neural Message Passing for
    Quantum Chemistry" (ICML 2017) <https://arxiv.org/abs/1704.01212>`_ and `Simonovsky and
    Komodakis, "Dynamic Edge-Conditioned Filters in Convolutional Neural Networks on
    Graphs" (CVPR 2017) <https://arxiv.org/abs/1704.02901>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{\Theta} \mathbf{x}_i + \mathrm{aggr}_{j \in \mathcal{N}(i)}
        \mathbf{x}_j \cdot h_{\mathbf{\Theta}}(\mathbf{e}_{j,i})

    where the network ``nn`` maps each edge's features to a ``[in_channels, out_channels]``
    matrix. A drop-in for PyG's ``NNConv`` (same arguments, parameters ``nn``, ``lin``
    and ``bias``, PyG's initialisation from one seed, and outputs).

    PyG builds the ``[E, in_channels * out_channels]`` matrices and multiplies each edge's
    source by its own. Where ``nn`` ends in a ``torch.nn.Linear`` (a ``Sequential`` whose
    last module is one, or a Linear alone) and the aggregation is a sum or a mean, each
    matrix is an affine map ``A h + b`` of the ``K`` values ``h`` before that Linear, so the
    messages into a node are regrouped on the narrower side: for ``in_channels <=
    out_channels`` the node's ``[K + 1, in_channels]`` sum of outer products (edge values by
    source features, ``ops.edge_outer_sum``) multiplied once by the Linear's weights; for
    ``out_channels < in_channels`` the per-node products ``x_j A_k`` summed with the edge
    values as weights (``ops.edge_head_sum``). No matrix is built per edge, and the Linear's
    work is done per node instead of per edge. The rounding of that regrouped sum differs
    from PyG's in the last bits. PyG's per-edge products are kept where the regrouping would
    change a number or cannot run: features, edge values or the Linear's parameters that are
    not finite (an infinite feature times a 0 edge value is NaN regrouped, where PyG's
    matrix is finite), another aggregation, hooks on ``nn`` or its last Linear,
    ``torch.compile``, ``torch.func``, ``torch.autocast``, devices other than the CPU and
    dtypes other than float32 and float64.

    Args:
        in_channels (int or (int, int)): input width, or the source and destination widths.
        out_channels (int): output width.
        nn (torch.nn.Module): the network from edge features ``[E, D]`` to
            ``[E, in_channels * out_channels]`` (its parameters are reset at construction,
            as PyG's, so one seed gives PyG's values).
        aggr (str or module, default "add"): the aggregation of the messages ("add",
            "mean", "max", "min", or any that keeps the width, as ``SAGEConv``'s).
        root_weight (bool, default True): add ``lin(x_dst)``.
        bias (bool, default True): add a bias.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, in_channels]``, a static batch ``[B, N, in_channels]`` or a pair
        ``(x_src, x_dst)`` (``x_dst`` may be None: no root term); the graph (a ``Graph``,
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` whose values ``[E, D]`` are
        the edge features); ``edge_attr [E, D]`` (``[E]`` is one feature per edge),
        else the sparse adjacency's or the Graph's own; optional ``size=(N_src, N_dst)``.
        output: ``[N_dst, out_channels]``.

    Differences from PyG's: a call without edge features, or whose ``nn`` output is not
    ``[E, in_channels * out_channels]``, is a ``ValueError`` naming them (PyG's fails in
    ``nn`` or a ``view``); ``edge_attr [E]`` is read as ``[E, 1]`` (PyG's hands the 1-D
    tensor to ``nn``); integer edge features, and those of another float dtype, are taken
    in the dtype of ``nn``'s parameters (PyG's fails in ``nn``'s first product); lazy
    widths (-1) are refused when the layer is built (PyG's
    builds, then fails in its first ``view``); with ``aggr="max"`` or ``"min"``, tied
    messages send the gradient to one winner per channel (PyG's shares it among the ties;
    the outputs are equal). docs/models.md lists these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 nn: torch.nn.Module, aggr="add", root_weight: bool = True, bias: bool = True,
                 aggr_kwargs: dict | None = None, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("NNConv", pair=True, in_channels=in_channels, out_channels=out_channels)
        if not isinstance(nn, torch.nn.Module):
            raise TypeError(f"NNConv: nn must be a torch.nn.Module, got {type(nn).__name__}")
        check_flags("NNConv", root_weight=root_weight, bias=bias)
        self.flow = check_flow("NNConv", flow)
        self.in_channels, self.out_channels, self.root_weight = in_channels, out_channels, \
            root_weight
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.aggr_module = width_keeping_aggregation(
            "NNConv", aggr, aggr_kwargs, out_channels, "the output adds lin(x_dst) and the bias")
        self.nn = nn
        self.in_channels_l, dst_width = split_widths(in_channels)
        self.lin = uniform_linear(dst_width, out_channels) if root_weight else None
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.aggr_module.reset_parameters()
        reset_like_pyg(self.nn)
        if self.lin is not None:
            self.lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        edge_attr = required_edge_feature_rows(self, inputs, edge_attr, 0, "nn")
        check_first_linear(self, self.nn, edge_attr.size(1),
                           f"edge_attr has {edge_attr.size(1)} features per edge")
        graph = inputs.graph.in_csr_order()
        edge_attr = self._in_network_dtype(inputs.graph.to_csr_order(edge_attr))
        mask = explain_mask(self, inputs)
        out = self._aggregate(graph, x_src, edge_attr,
                              None if mask is None else inputs.graph.to_csr_order(mask))
        if x_dst is not None and root_map(self, "lin") is not None:
            out = out + self.lin(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    def _in_network_dtype(self, edge_attr: Tensor) -> Tensor:
        """Integer edge features (bond types, say) and those of another float dtype in the
        dtype of ``nn``'s parameters, as the attention convs take them (PyG's fails in
        ``nn``'s first product); under autocast the floats as given (autocast casts them)."""
        weight = next((p for p in self.nn.parameters() if p.is_floating_point()), None)
        if weight is None or edge_attr.dtype == weight.dtype or (
                edge_attr.is_floating_point() and ops.autocast_enabled(edge_attr.device.type)):
            return edge_attr
        return edge_attr.to(weight.dtype)

    def _aggregate(self, graph, x_src: Tensor, edge_attr: Tensor,
                   mask: Tensor | None) -> Tensor:
        """The aggregated messages ``[N_dst, out_channels]``, edges in CSR order: regrouped
        where that gives PyG's numbers, else PyG's per-edge products; each message times
        an explainer's ``mask`` entry (CSR order) where one is set."""
        split = _split_last_linear(self.nn)
        if split is not None and self._may_regroup(split[1], x_src):
            hidden = split[0](edge_attr)
            if hidden.dim() == 2 and all_finite(hidden):
                return self._regrouped(graph, x_src, hidden, split[1], mask)
            weight = split[1](hidden)
        else:
            weight = self.nn(edge_attr)
        messages = self._edge_messages(graph, x_src, weight)
        if mask is not None:
            messages = messages * mask.unsqueeze(-1)
        return self.aggr_module(aggregations.per_edge(graph), messages)

    def _may_regroup(self, last: torch.nn.Linear, x_src: Tensor) -> bool:
        """Whether the regrouped sum can serve this call (before the edge values are seen):
        a linear aggregation, the CPU kernel's device and dtypes, a branch on values
        allowed, no hooks the split would skip, and finite features and parameters."""
        if not isinstance(self.aggr, str) or self.aggr not in _LINEAR_AGGREGATIONS:
            return False
        if not ops.HAS_EXTENSION or x_src.device.type != "cpu" or \
                x_src.dtype not in (torch.float32, torch.float64) or \
                last.weight.dtype != x_src.dtype or not can_branch_on_values() or \
                ops.autocast_enabled(x_src.device.type):
            return False
        if _has_hooks(self.nn) or _has_hooks(last) or \
                last.out_features != self.in_channels_l * self.out_channels:
            return False
        return all_finite(x_src) and all_finite(last.weight) and \
            (last.bias is None or all_finite(last.bias))

    def _regrouped(self, graph, x_src: Tensor, hidden: Tensor, last: torch.nn.Linear,
                   mask: Tensor | None) -> Tensor:
        """``sum_j x_j (A h_ji + b)``, with a column of ones in ``h`` carrying the bias,
        grouped on the narrower side of the matrices: for ``in <= out`` the sums of outer
        products ``sum_j h_ji (x) x_j`` per node, then one product with the Linear's
        weights as ``[(K + 1) in, out]``; for ``out < in`` the products ``x_j A_k`` per
        node first (``[N_src, K + 1, out]``), each edge's blocks weighted by its ``h_ji``
        and summed (``ops.edge_head_sum``). A message is linear in its row of ``h`` (with
        the ones column), so an explainer's ``mask`` scales that row."""
        width_in, width_out, K = self.in_channels_l, self.out_channels, hidden.size(1)
        maps = last.weight.view(width_in, width_out, K).permute(2, 0, 1)  # [K, in, out]
        if last.bias is not None:
            hidden = torch.cat([hidden, hidden.new_ones(hidden.size(0), 1)], dim=1)
            maps = torch.cat([maps, last.bias.view(1, width_in, width_out)])
        if mask is not None:
            hidden = hidden * mask.unsqueeze(-1)
        blocks = maps.size(0)
        # hidden is in CSR order and graph is in_csr_order(): its edge order is that one
        if width_in <= width_out:
            summed = ops.edge_outer_sum(graph, hidden, x_src)  # [N_dst, blocks, in]
            out = summed.reshape(summed.size(0), blocks * width_in) @ \
                maps.reshape(blocks * width_in, width_out)
        else:
            products = x_src @ maps.permute(1, 0, 2).reshape(width_in, blocks * width_out)
            out = ops.edge_head_sum(graph, hidden, products.view(-1, blocks, width_out))
        if self.aggr == "mean":
            out = mean_of_sums(graph, out)
        return out

    def _edge_messages(self, graph, x_src: Tensor, weight: Tensor) -> Tensor:
        """PyG's messages ``x_j @ nn(e_ji).view(in, out)``, ``[E, out]`` in CSR order."""
        expected = self.in_channels_l * self.out_channels
        if weight.dim() != 2 or weight.size(0) != graph.num_edges or \
                weight.size(1) != expected:
            raise ValueError(f"NNConv: nn maps the edge features to shape "
                             f"{list(weight.shape)}, but the layer needs [E, in_channels * "
                             f"out_channels] = [{graph.num_edges}, {expected}]")
        x_j = x_src.index_select(0, graph.csr.indices.long())
        return torch.matmul(x_j.unsqueeze(1),
                            weight.view(-1, self.in_channels_l, self.out_channels)).squeeze(1)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"aggr={self.aggr}, nn={self.nn})")


def _split_last_linear(nn: torch.nn.Module):
    """``(the network before its last Linear, that Linear)``, or None where ``nn`` does not
    end in a ``torch.nn.Linear`` graphloc can take apart."""
    if type(nn) is torch.nn.Linear:
        return torch.nn.Identity(), nn
    if type(nn) is torch.nn.Sequential and len(nn) and type(nn[-1]) is torch.nn.Linear:
        return nn[:-1], nn[-1]
    return None


def _has_hooks(module: torch.nn.Module) -> bool:
    """Hooks on the module's call, or global ones (which every call would run)."""
    return has_call_hooks(module) or \
        bool(torch.nn.modules.module._global_forward_hooks or
             torch.nn.modules.module._global_forward_pre_hooks)
