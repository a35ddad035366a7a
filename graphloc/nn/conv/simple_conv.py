"""PyG's SimpleConv: message passing without parameters, the (weighted) neighbours
aggregated and optionally combined with the node's own features."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import keyword_arguments
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask, loop_factors, masked_weights
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import checked_features
from graphloc.nn.conv.gcn import with_sparse_adjacency_loops

_COMBINATIONS = ("sum", "cat", "self_loop", None)


class SimpleConv(ConvModule):
    r"""Parameter-free propagation, as PyG's ``SimpleConv``:

    .. math::
        \mathbf{x}'_i = \bigoplus_{j \in \mathcal{N}(i)} e_{j,i} \cdot \mathbf{x}_j

    then, with ``combine_root``, ``"sum"``: :math:`\mathbf{x}'_i + \mathbf{x}_i`;
    ``"cat"``: :math:`[\mathbf{x}_i \,\|\, \mathbf{x}'_i]`; ``"self_loop"``: a loop of
    weight 1 added to every node before aggregating. A drop-in for PyG's (same arguments
    and outputs): "sum", "mean", "max" and "min" are one fused sparse product with the
    weights inside (no ``[E, F]`` messages); other aggregations are PyG's, on the weighted
    messages.

    Args:
        aggr (str, list or module, default "sum"): the aggregation, as ``SAGEConv``'s
            ("sum" or "add", "mean", "max", "min", "mul", "var", "std", "softmax", ...; a
            list concatenates them).
        combine_root (str or None, default None): "sum", "cat", "self_loop" or None.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, F]``, a static batch ``[B, N, F]`` or a pair ``(x_src, x_dst)``
        (``x_dst`` may be None: nothing to combine; ``"self_loop"`` takes one node set), the
        graph (a ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` whose
        values are the edge weights), optional ``edge_weight [E]`` and ``size``. output:
        ``[N, F']`` with ``F'`` the aggregation's width (plus F with ``"cat"``).

    As PyG's, a loop already in the graph stays: with ``"self_loop"`` such a node has two
    (for a ``torch.sparse`` adjacency, one whose weight grows by 1, as PyG sums the
    entries of the adjacency it rebuilds; "mean" then counts it once).

    Differences from PyG's (docs/models.md): ``"self_loop"`` on a static batch ``[B, N, F]``
    gives every node of every copy its loop (PyG's loops nodes ``0 .. B - 1`` only); a
    ``"sum"`` root with an aggregation that widens is a ``ValueError`` naming both widths.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, aggr="sum", combine_root: str | None = None,
                 aggr_kwargs: dict | None = None, flow: str = "source_to_target"):
        super().__init__()
        self.combine_root = _checked_combination(combine_root)
        self.flow = check_flow("SimpleConv", flow)
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.aggr_module = aggregations.resolve(
            aggr, **keyword_arguments("SimpleConv", "aggr_kwargs", aggr_kwargs))

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_weight: Tensor | None = None, size: tuple[int, int] | None = None
                ) -> Tensor:
        _checked_combination(self.combine_root)  # an attribute, so also checked when set later
        if self.combine_root == "self_loop" and not isinstance(x, Tensor):
            raise ValueError("SimpleConv: combine_root='self_loop' needs one node set, got "
                             "a pair (x_src, x_dst)")
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, None)
        graph, weight = inputs.graph, weights_from(self, inputs, edge_weight)
        weight = masked_weights(weight, explain_mask(self, inputs))
        if self.combine_root == "self_loop":
            graph._require_one_node_set("SimpleConv (combine_root='self_loop')")
            if inputs.adj_layout is not None:  # PyG rebuilds the matrix: A + I
                graph, weight = with_sparse_adjacency_loops(graph, weight, 1.0)
            else:  # PyG's add_self_loops: after the loops already there
                weight = None if weight is None else \
                    torch.cat([weight, loop_factors(weight, graph.num_nodes)])
                graph = graph.add_self_loops()
        if weight is not None:
            weight = weight.to(x_src.dtype)
        out = self.aggr_module(graph, x_src, weight)
        if x_dst is not None and self.combine_root == "sum":
            if out.size(-1) != x_dst.size(-1):
                raise ValueError(f"SimpleConv: combine_root='sum' adds x_dst of width "
                                 f"{x_dst.size(-1)} to the aggregate of width {out.size(-1)} "
                                 f"(aggr={self.aggr!r}); use combine_root='cat'")
            out = out + x_dst
        elif x_dst is not None and self.combine_root == "cat":
            out = torch.cat([x_dst, out], dim=-1)
        return inputs.node_output(out)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}()"


def _checked_combination(combine_root):
    if not (combine_root is None or isinstance(combine_root, str)) \
            or combine_root not in _COMBINATIONS:
        raise ValueError(f"SimpleConv: combine_root must be one of {_COMBINATIONS}, got "
                         f"{combine_root!r}")
    return combine_root
