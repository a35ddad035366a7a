"""The Point-GNN layer of Shi and Rajkumar (PyG's ``PointGNNConv``): each edge's message
is a network on the source's offset, corrected by the destination's learnt alignment
offset, and the source's features; the messages' maximum goes through a last network and
is added to the node's features."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_messages
from graphloc.nn.conv._inputs import check_flow, read_inputs
from graphloc.nn.conv._utils import (
    PYG_REDUCTIONS,
    check_first_linear,
    check_input,
    check_networks,
    destinations_read,
    first_linear,
    has_call_hooks,
    may_regroup_first_linear,
    read_rows_only,
    reset_like_pyg,
)
from graphloc.ops.values import all_finite

# modules that map each row on its own, whatever the mode: a network of only these gives
# the same rows applied per node and gathered as applied to each edge's gathered rows
_ROW_WISE = (torch.nn.Linear, torch.nn.Identity, torch.nn.ReLU, torch.nn.LeakyReLU,
             torch.nn.ELU, torch.nn.GELU, torch.nn.SiLU, torch.nn.Tanh, torch.nn.Sigmoid,
             torch.nn.Softplus, torch.nn.LayerNorm, torch.nn.Sequential)


class PointGNNConv(ConvModule):
    r"""The Point-GNN operator of `Shi and Rajkumar, "Point-GNN: Graph Neural Network for
    3D Object Detection in a Point Cloud" (CVPR 2020) <https://arxiv.org/abs/2003.01251>`_:

    .. math::
        \Delta \mathbf{p}_i = h_{\mathbf{\Theta}}(\mathbf{x}_i), \qquad
        \mathbf{e}_{ji} = f_{\mathbf{\Theta}}(\mathbf{p}_j - \mathbf{p}_i + \Delta
        \mathbf{p}_i, \mathbf{x}_j), \qquad
        \mathbf{x}'_i = g_{\mathbf{\Theta}}\big(\max_{j \in \mathcal{N}(i)}
        \mathbf{e}_{ji}\big) + \mathbf{x}_i

    (the aggregation max by default; nodes without messages take 0 before ``mlp_g``). A
    drop-in for PyG's ``PointGNNConv`` (same arguments and outputs). ``mlp_h`` runs per
    destination node and is gathered per edge where it maps rows independently (Linear
    layers, elementwise activations, LayerNorm, no hooks), else per edge as PyG's (a
    BatchNorm or Dropout, as in PyG's ``MLP``, is batch- or draw-dependent). Where
    ``mlp_f`` starts with a ``torch.nn.Linear`` (alone or first in a
    ``torch.nn.Sequential``) and the inputs are finite, its product is taken per node:
    ``W [p_j - p_i + d_i, x_j] + b = (W_p p_j + W_x x_j) - (W_p (p_i - d_i) - b)``. The
    rest runs per edge, as PyG's.

    Args:
        mlp_h (torch.nn.Module): the alignment offsets' network (``F -> 3``).
        mlp_f (torch.nn.Module): the edge network (``3 + F -> C``).
        mlp_g (torch.nn.Module): the network on each aggregated node (``C -> F``).
        aggr (str, default "max"): "max", "min", "mean", "add" or "sum".
        flow (str, default "source_to_target"): PyG's edge direction.

    Differences from PyG's: with ``aggr="max"`` or ``"min"``, tied messages send the
    gradient to one winner per channel (PyG's shares it); positions of another row count
    than ``x``, or an ``mlp_f`` whose first Linear takes another width than ``3 + F``,
    are a ``ValueError`` naming them. docs/models.md lists these.

    Shapes:
        input: ``x [N, F]``, ``pos [N, 3]``, the graph (a ``Graph``, ``edge_index [2,
        E]`` or a ``torch.sparse`` ``adj_t``, its pattern). output: ``[N, F]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, mlp_h: torch.nn.Module, mlp_f: torch.nn.Module,
                 mlp_g: torch.nn.Module, aggr: str = "max", flow: str = "source_to_target"):
        super().__init__()
        name = type(self).__name__
        for label, network in (("mlp_h", mlp_h), ("mlp_f", mlp_f), ("mlp_g", mlp_g)):
            if network is None:
                raise TypeError(f"{name}: {label} must be a module, got None")
        check_networks(name, mlp_h=mlp_h, mlp_f=mlp_f, mlp_g=mlp_g)
        check_choice(name, "aggr", aggr, tuple(PYG_REDUCTIONS))
        self.mlp_h, self.mlp_f, self.mlp_g, self.aggr = mlp_h, mlp_f, mlp_g, aggr
        self.flow = check_flow(name, flow)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for network in (self.mlp_h, self.mlp_f, self.mlp_g):
            reset_like_pyg(network)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, pos: Tensor, edge_index) -> Tensor:
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} expects x as one tensor [N, F] (its output adds x), got "
                            f"{type(x).__name__}")
        inputs = read_inputs(self, x, edge_index)
        inputs.graph._require_one_node_set(f"{name} (the output adds each node's x)")
        check_input(self, x, None)
        check_input(self, pos, None, "pos")
        if pos.size(0) != x.size(0):
            raise ValueError(f"{name}: pos has {pos.size(0)} rows but x has {x.size(0)}")
        graph = inputs.graph.in_csr_order()
        src, dst = graph.csr.indices.long(), graph.edge_index[1]
        messages = self._messages(graph, x, pos, src, dst)
        messages = masked_messages(messages, inputs.graph, explain_mask(self, inputs))
        out = ops.segment_reduce(messages, graph.csr.indptr, PYG_REDUCTIONS[self.aggr])
        return x + self.mlp_g(out)

    def _messages(self, graph, x: Tensor, pos: Tensor, src: Tensor, dst: Tensor) -> Tensor:
        """``mlp_f([p_j - p_i + d_i, x_j])`` per edge (CSR order): the first Linear's
        product per node where ``mlp_h`` maps rows apart and every input is finite, formed
        in float64 and rounded once (positions far from the origin keep the precision of
        PyG's per-edge offsets), else PyG's per-edge inputs."""
        width = pos.size(1) + x.size(1)
        check_first_linear(self, self.mlp_f, width,
                           f"each edge's [pos_j - pos_i + delta_i, x_j] has {width} features")
        first, rest = first_linear(self.mlp_f)
        per_node = _maps_rows_apart(self.mlp_h)
        if first is None or not per_node or not may_regroup_first_linear(first, x, pos):
            return self._per_edge(graph, x, pos, src, dst, per_node)
        delta = self.mlp_h(x)
        if not all_finite(delta):  # (inf - inf per edge: PyG's path)
            return self._per_edge(graph, x, pos, src, dst, per_node)
        wide = torch.float64
        w_p, w_x = first.weight.to(wide).split([pos.size(1), x.size(1)], dim=1)
        at_src = pos.to(wide) @ w_p.t() + x.to(wide) @ w_x.t()
        at_dst = (pos.to(wide) - delta.to(wide)) @ w_p.t()
        if first.bias is not None:
            at_dst = at_dst - first.bias.to(wide)
        out = at_src.index_select(0, src) - at_dst.index_select(0, dst)
        return rest(out.to(torch.promote_types(x.dtype, first.weight.dtype)))

    def _per_edge(self, graph, x: Tensor, pos: Tensor, src: Tensor, dst: Tensor,
                  per_node: bool) -> Tensor:
        """PyG's messages: ``mlp_f`` on each edge's concatenated inputs; ``mlp_h`` per
        destination node and gathered where it maps rows apart (on the rows an edge reads:
        read_rows_only), else on each edge's gathered row."""
        if per_node:
            delta = self.mlp_h(read_rows_only(x, destinations_read(graph))).index_select(0, dst)
        else:
            delta = self.mlp_h(x.index_select(0, dst))
        offsets = pos.index_select(0, src) - pos.index_select(0, dst) + delta
        return self.mlp_f(torch.cat([offsets, x.index_select(0, src)], dim=1))

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}(\n  mlp_h={self.mlp_h},\n  mlp_f={self.mlp_f},\n"
                f"  mlp_g={self.mlp_g},\n)")


def _maps_rows_apart(network: torch.nn.Module) -> bool:
    """Whether ``network`` maps each row on its own whatever the batch (its modules all
    of ``_ROW_WISE``, no hooks waiting for their calls): then per node and gathered is
    each edge's gathered row mapped."""
    return all(type(m) in _ROW_WISE and not has_call_hooks(m) for m in network.modules())

