"""The residual gated graph conv (Bresson and Laurent, 2017), PyG's ``ResGatedGraphConv``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import (
    check_flow,
    edge_features_from,
    read_inputs,
    refuse_edge_attr_without_edge_dim,
)
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features,
    linear,
    root_map,
    split_widths,
)

#: the default gate, one instance shared by the layers that take it (as PyG's default)
_SIGMOID = torch.nn.Sigmoid()


class ResGatedGraphConv(ConvModule):
    r"""The residual gated graph convolution of `Bresson and Laurent, "Residual Gated Graph
    ConvNets" (2017) <https://arxiv.org/abs/1711.07553>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \sum_{j \in \mathcal{N}(i)}
        \eta_{i,j} \odot \mathbf{W}_2 \mathbf{x}_j, \qquad
        \eta_{i,j} = \sigma(\mathbf{W}_3 \mathbf{x}_i + \mathbf{W}_4 \mathbf{x}_j)

    (each linear map with its bias, as PyG's; with ``edge_dim`` each of ``W_2``, ``W_3`` and
    ``W_4`` reads the edge's features as well). A drop-in for PyG's ``ResGatedGraphConv``
    (same arguments, parameter names ``lin_key`` (``W_3``), ``lin_query`` (``W_4``),
    ``lin_value`` (``W_2``), ``lin_skip`` (``W_1``), ``bias``, and outputs).

    With the default sigmoid gate, ``ops.gated_sum`` forms the gates where it needs them,
    forward and backward (one CPU kernel: no ``[E, C]`` tensor), where PyG's keeps the
    gathered keys, queries and values, the gates and the messages per edge. Another ``act``
    runs on ``[E, C]`` gates (``ops.sddmm``, then a weighted ``ops.spmm``). With edge
    features, each linear map is split into its node part (applied per node) and its edge
    part (applied per edge): the same sums as PyG's per-edge maps of the concatenation, in
    another order.

    Differences from PyG's (docs/models.md): the gated messages are summed (PyG's
    ``MessagePassing`` keywords such as ``aggr`` are not taken; ``from_pyg`` keeps such a
    conv), and ``act=None`` is refused at construction (PyG's fails at the first call).

    Args:
        in_channels (int or (int, int)): input width, -1 to take it from the first call; a
            pair gives sources and destinations their own widths.
        out_channels (int): output width, C.
        act (callable, default ``torch.nn.Sigmoid()``): the gate function.
        edge_dim (int, optional): edge feature width; edge features then enter the keys,
            queries and values.
        root_weight (bool, default True): add ``W_1 x_i`` (``lin_skip``, no bias).
        bias (bool, default True): learn an additive bias on the output.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, in_channels]`` or a pair ``(x_src, x_dst)``, a ``Graph``, an
        ``edge_index [2, E]`` or a ``torch.sparse`` adjacency, optional
        ``edge_attr [E, edge_dim]``. output: ``[N_dst, out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 act=_SIGMOID, edge_dim: int | None = None, root_weight: bool = True,
                 bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("ResGatedGraphConv", flow)
        check_flags("ResGatedGraphConv", root_weight=root_weight, bias=bias)
        if not callable(act):
            raise TypeError(f"ResGatedGraphConv: act must be a callable gate function, got "
                            f"{act!r}")
        # widths checked by name (a width of 1.5, None or -2 failed inside torch.empty)
        check_sizes("ResGatedGraphConv", lazy=True, pair=True, optional=("edge_dim",),
                    in_channels=in_channels, out_channels=out_channels, edge_dim=edge_dim)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.act = act  # before the linear maps: PyG's parameter order
        self.edge_dim, self.root_weight = edge_dim, root_weight
        src_width, dst_width = split_widths(in_channels)
        self.lin_key = linear(_with_edges(dst_width, edge_dim), out_channels)
        self.lin_query = linear(_with_edges(src_width, edge_dim), out_channels)
        self.lin_value = linear(_with_edges(src_width, edge_dim), out_channels)
        self.lin_skip = linear(dst_width, out_channels, bias=False) if root_weight else None
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_skip):
            if lin is not None:  # (a lazy one waits for its width)
                lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index,
                edge_attr: Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        if x_dst is None:
            raise ValueError("ResGatedGraphConv needs destination features: its keys and "
                             "root term read them (got a pair (x_src, None))")
        refuse_edge_attr_without_edge_dim(self, edge_attr)
        graph, mask = inputs.graph, explain_mask(self, inputs)
        if self.edge_dim is None:
            out = self._gated(graph, self.lin_key(x_dst), self.lin_query(x_src),
                              self.lin_value(x_src), mask)
        else:
            out = self._gated_with_edges(graph, x_src, x_dst,
                                         self._edge_features(inputs, edge_attr), mask)
        root = self._root(x_dst)
        return inputs.node_output(out if root is None else out + root)

    def _root(self, x_dst: Tensor) -> Tensor | None:
        """The root term plus the bias, as one product where there are both (None without
        either)."""
        if root_map(self, "lin_skip") is None:
            return self.bias
        if self.bias is None or isinstance(self.lin_skip, torch.nn.LazyLinear):
            root = self.lin_skip(x_dst)  # (a lazy map takes its width here)
            return root if self.bias is None else root + self.bias
        return F.linear(x_dst, self.lin_skip.weight, self.bias)

    def _gated(self, graph: Graph, key: Tensor, query: Tensor, value: Tensor,
               mask: Tensor | None) -> Tensor:
        """The sum over each node's edges of act(key_i + query_j) * value_j (times an
        explainer's ``mask`` of the edge)."""
        if _is_sigmoid(self.act) and mask is None:  # one kernel: no [E, C] gates
            return ops.gated_sum(graph, key, query, value)
        gate = _masked(self.act(ops.sddmm(graph, query, key, "add")), mask)
        return ops.spmm(graph, value.unsqueeze(-1), gate).squeeze(-1)

    def _gated_with_edges(self, graph: Graph, x_src: Tensor, x_dst: Tensor,
                          edge_attr: Tensor, mask: Tensor | None) -> Tensor:
        """PyG's per-edge maps of [x, e], each split into a node part and an edge part: the
        gate's edge part (key's and query's) is added to each edge's pre-activation, the
        value's to each message."""
        key, key_edge = self._split_map(self.lin_key, x_dst, edge_attr)
        query, query_edge = self._split_map(self.lin_query, x_src, edge_attr)
        value, value_edge = self._split_map(self.lin_value, x_src, edge_attr)
        gate = self.act(ops.sddmm(graph, query, key, "add") + key_edge + query_edge)
        gate = _masked(gate, mask)
        out = ops.spmm(graph, value.unsqueeze(-1), gate).squeeze(-1)
        return out + ops.scatter(gate * value_edge, graph.edge_index[1], dim=0,
                                 dim_size=graph.num_nodes)

    def _split_map(self, lin: torch.nn.Module, x: Tensor,
                   edge_attr: Tensor) -> tuple[Tensor, Tensor]:
        """A map of [x, e] as its node part (with the bias, per node) and its edge part (per
        edge)."""
        node_width = x.size(1)
        if isinstance(lin, torch.nn.LazyLinear) and lin.has_uninitialized_params():
            lin(torch.zeros(1, node_width + self.edge_dim, dtype=lin.weight.dtype,
                            device=lin.weight.device))  # the width from this call
        if lin.in_features != node_width + self.edge_dim:
            raise ValueError(f"ResGatedGraphConv: the features are {node_width} wide and the "
                             f"edge features {self.edge_dim}, but the layer was built for "
                             f"{lin.in_features} together")
        return (F.linear(x, lin.weight[:, :node_width], lin.bias),
                F.linear(edge_attr, lin.weight[:, node_width:]))

    def _edge_features(self, inputs, edge_attr: Tensor | None) -> Tensor:
        edge_attr = edge_features_from(self, inputs, edge_attr)
        if edge_attr is None:
            raise ValueError(f"ResGatedGraphConv was built with edge_dim={self.edge_dim} but "
                             "the call has no edge_attr (nor a Graph or adjacency with edge "
                             "features)")
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.view(-1, 1)
        if edge_attr.dim() != 2 or edge_attr.size(1) != self.edge_dim:
            raise ValueError(f"ResGatedGraphConv: edge_attr has shape {list(edge_attr.shape)} "
                             f"but edge_dim is {self.edge_dim}")
        return edge_attr.to(inputs.x_src.dtype)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def _with_edges(width: int, edge_dim: int | None) -> int:
    """A map's input width when it also reads the edge features (lazy stays lazy)."""
    return width if width == -1 or edge_dim is None else width + edge_dim


def _masked(gate: Tensor, mask: Tensor | None) -> Tensor:
    """Each edge's gates ``[E, C]`` times its explainer's mask entry, where one is set."""
    return gate if mask is None else gate * mask.unsqueeze(-1)


def _is_sigmoid(act) -> bool:
    return isinstance(act, torch.nn.Sigmoid) or act is torch.sigmoid or act is F.sigmoid
