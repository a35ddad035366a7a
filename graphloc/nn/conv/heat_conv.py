"""The heterogeneous edge-enhanced graph attention of Mo et al. (HEAT, 2021; PyG's
``HEATConv``): node maps per node type, attention over the incoming edges that reads both
ends, the edge's type embedding and its features, and messages of the source with the
edge's features. The attention's and the message's linear maps split into per-node,
per-type and per-edge parts, so no ``[E, 2C + D]`` concatenation or ``[E, H, C]`` message
is formed: the scores are ``[E, H]`` and the messages one ``spmm`` plus a sum of the
weighted edge features per node."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_index, check_number
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import (
    check_edge_rows,
    check_flow,
    read_inputs,
    required_edge_feature_rows,
)
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_input,
    check_sizes,
    destinations_read,
    read_rows_only,
    sources_read,
)

_LEAKY = torch.nn.functional.leaky_relu


class HEATConv(ConvModule):
    r"""The heterogeneous edge-enhanced graph attention operator of `Mo et al.,
    "Multi-Agent Trajectory Prediction with Heterogeneous Edge-Enhanced Graph Attention
    Network" (IEEE T-ITS 2022) <https://arxiv.org/abs/2106.07161>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{h}_i + \big\Vert_{k=1}^{H} \sum_{j \in \mathcal{N}(i)}
        \alpha^k_{ij} \, \mathbf{\Theta} [\mathbf{h}_j \Vert \mathbf{e}'_{ij}], \qquad
        \alpha^k_{ij} = \mathrm{softmax}_j\big(\sigma(\mathbf{a}_k^\top
        [\mathbf{h}_i \Vert \mathbf{h}_j \Vert \sigma(\mathbf{t}_{ij}) \Vert
        \mathbf{e}'_{ij}])\big)

    with :math:`\mathbf{h} = ` the node's map of its type (``hetero_lin``),
    :math:`\mathbf{t}_{ij}` the edge type's embedding, :math:`\mathbf{e}'_{ij} =
    \sigma(\mathbf{W}_e \mathbf{e}_{ij})` its features' embedding and :math:`\sigma` the
    LeakyReLU (``concat=False``: the heads' mean, then :math:`\mathbf{h}_i`). A drop-in
    for PyG's ``HEATConv`` (same arguments, parameter names, initial draws and outputs).

    The linear maps split by their inputs: the score is :math:`\mathbf{a}_i^\top
    \mathbf{h}_i + \mathbf{a}_j^\top \mathbf{h}_j` (per node, summed per edge by one
    ``sddmm``) plus a term per edge type plus :math:`\mathbf{a}_e^\top \mathbf{e}'_{ij}`;
    the message sum is ``spmm`` of :math:`\mathbf{\Theta}_h \mathbf{h}` with the weights,
    plus :math:`\mathbf{\Theta}_e` times each node's weighted sum of
    :math:`\mathbf{e}'_{ij}` (and the bias times its sum of weights).

    Args:
        in_channels (int): input width.
        out_channels (int): output width per head.
        num_node_types (int): node types (``node_type`` holds 0 .. num_node_types - 1).
        num_edge_types (int): edge types (``edge_type`` holds 0 .. num_edge_types - 1).
        edge_type_emb_dim (int): the edge types' embedding width.
        edge_dim (int): the edge features' width.
        edge_attr_emb_dim (int): the edge features' embedding width.
        heads (int, default 1): attention heads.
        concat (bool, default True): concatenate the heads (else their mean).
        negative_slope (float, default 0.2): the LeakyReLUs' slope.
        dropout (float, default 0): dropout of the attention weights in training.
        root_weight (bool, default True): add each node's own map.
        bias (bool, default True): the node maps' and the message map's biases.
        flow (str, default "source_to_target"): PyG's edge direction.

    Differences from PyG's (docs/models.md): the attention dropout draws another mask
    than PyG's for one seed (its distribution is the same); without ``edge_attr`` the
    call is a ``ValueError`` (PyG's fails inside its message).

    Shapes:
        input: ``x [N, in_channels]``, the graph (``edge_index [2, E]``, a ``Graph`` or a
        ``torch.sparse`` ``adj_t``), ``node_type [N]``, ``edge_type [E]``, ``edge_attr [E,
        edge_dim]``. output: ``[N, heads * out_channels]`` (``[N, out_channels]`` with
        ``concat=False``).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, num_node_types: int,
                 num_edge_types: int, edge_type_emb_dim: int, edge_dim: int,
                 edge_attr_emb_dim: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, root_weight: bool = True,
                 bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        name = type(self).__name__
        check_sizes(name, in_channels=in_channels, out_channels=out_channels,
                    num_node_types=num_node_types, num_edge_types=num_edge_types,
                    edge_type_emb_dim=edge_type_emb_dim, edge_dim=edge_dim,
                    edge_attr_emb_dim=edge_attr_emb_dim, heads=heads)
        check_flags(name, concat=concat, root_weight=root_weight, bias=bias)
        check_dropouts(name, upto_one=True, dropout=dropout)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        check_number("HEATConv", "negative_slope", negative_slope)
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.root_weight = root_weight
        self.flow = check_flow(name, flow)
        self.node_dim = 0  # PyG's
        # PyG's modules in its order: each draws its weights when built, then again below
        self.hetero_lin = _HeteroLinear(in_channels, out_channels, num_node_types, bias)
        self.edge_type_emb = torch.nn.Embedding(num_edge_types, edge_type_emb_dim)
        self.edge_attr_emb = torch.nn.Linear(edge_dim, edge_attr_emb_dim, bias=False)
        self.att = torch.nn.Linear(2 * out_channels + edge_type_emb_dim + edge_attr_emb_dim,
                                   heads, bias=False)
        self.lin = torch.nn.Linear(out_channels + edge_attr_emb_dim, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in (self.hetero_lin, self.edge_type_emb, self.edge_attr_emb, self.att,
                       self.lin):
            module.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index, node_type: Tensor, edge_type: Tensor,
                edge_attr: Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        name = type(self).__name__
        inputs.graph._require_one_node_set(f"{name} (each edge's ends read one x)")
        check_input(self, inputs.x_src, self.in_channels)
        graph, num_nodes = inputs.graph, inputs.x_src.size(0)
        node_type = _checked_types(name, "node_type", node_type, num_nodes,
                                   self.hetero_lin.num_types, "node")
        check_edge_rows(self, "edge_type", edge_type, graph.num_edges)
        edge_type = _checked_types(name, "edge_type", edge_type, graph.num_edges,
                                   self.edge_type_emb.num_embeddings, "edge")
        edge_attr = required_edge_feature_rows(self, inputs, edge_attr,
                                               self.edge_attr_emb.in_features, "edge_dim")
        h = self.hetero_lin(inputs.x_src, node_type)
        edge_emb = _LEAKY(self.edge_attr_emb(edge_attr.to(h.dtype)), self.negative_slope)
        alpha = ops.segment_softmax(graph, self._scores(graph, h, edge_type, edge_emb))
        alpha = torch.nn.functional.dropout(alpha, self.dropout, self.training)
        mask = explain_mask(self, inputs)
        if mask is not None:  # each message is linear in its edge's weights
            alpha = alpha * mask.unsqueeze(-1)
        out = self._messages(graph, h, edge_emb, alpha)  # [N, H, C]
        if self.concat:
            out = out + h.unsqueeze(1) if self.root_weight else out
            return out.reshape(num_nodes, self.heads * self.out_channels)
        out = out.mean(dim=1)
        return out + h if self.root_weight else out

    def _scores(self, graph, h: Tensor, edge_type: Tensor, edge_emb: Tensor) -> Tensor:
        """``LeakyReLU(a^T [h_i, h_j, LeakyReLU(t_ij), e'_ij])`` per edge and head, the
        product split by its four inputs."""
        c, types = self.out_channels, self.edge_type_emb.embedding_dim
        a_dst, a_src, a_type, a_edge = self.att.weight.split(
            [c, c, types, edge_emb.size(1)], dim=1)
        # each map acts per node, on the rows PyG's per-edge products read (read_rows_only)
        at_dst = read_rows_only(h, destinations_read(graph)) @ a_dst.t()
        at_src = read_rows_only(h, sources_read(graph)) @ a_src.t()
        per_type = _LEAKY(self.edge_type_emb.weight, self.negative_slope) @ a_type.t()
        scores = ops.sddmm(graph, at_src, at_dst, "add") + edge_emb @ a_edge.t() + \
            per_type.index_select(0, edge_type)
        return _LEAKY(scores, self.negative_slope)

    def _messages(self, graph, h: Tensor, edge_emb: Tensor, alpha: Tensor) -> Tensor:
        """``sum_j alpha_ij (Theta [h_j, e'_ij] + b)`` per node and head: ``spmm`` of
        ``Theta_h h`` with the weights, plus ``[Theta_e, b]`` times each node's weighted
        sum of ``[e'_ij, 1]`` (``edge_outer_sum`` over the edges-to-destinations graph: no
        ``[E, H, D]`` products)."""
        c, heads, n = self.out_channels, self.heads, h.size(0)
        theta_node, theta_edge = self.lin.weight.split([c, edge_emb.size(1)], dim=1)
        mapped = read_rows_only(h, sources_read(graph)) @ theta_node.t()
        out = ops.spmm(graph, mapped.unsqueeze(1).expand(n, heads, c), alpha)
        edge_part, theta = edge_emb, theta_edge
        if self.lin.bias is not None:  # the bias weighs in by each node's sum of weights
            edge_part = torch.cat([edge_emb, edge_emb.new_ones(edge_emb.size(0), 1)], dim=1)
            theta = torch.cat([theta_edge, self.lin.bias.unsqueeze(1)], dim=1)
        summed = ops.edge_outer_sum(_edges_into_destinations(graph), alpha, edge_part)
        return out + summed @ theta.t()

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, " \
               f"heads={self.heads})"


def _edges_into_destinations(graph):
    """The bipartite graph from each edge of ``graph`` (as a source node, by its id) to the
    edge's destination, built once per graph: sums over a node's incoming edges of per-edge
    rows are its ``spmm`` or ``edge_outer_sum``."""
    def build():
        ids = torch.arange(graph.num_edges, device=graph.device)
        return Graph._derived(torch.stack([ids, graph.edge_index[1]]), graph.num_nodes,
                              graph.num_edges)
    return graph.cached("edges_into_destinations", build)


def _checked_types(owner: str, name: str, types, count: int, num_types: int,
                   what: str) -> Tensor:
    """A 1-D integer tensor of ``count`` types in ``[0, num_types)``."""
    if not isinstance(types, Tensor) or types.is_floating_point() or types.is_complex() \
            or types.dtype == torch.bool or types.dim() != 1 or types.numel() != count:
        got = f"{types.dtype} {list(types.shape)}" if isinstance(types, Tensor) else \
            type(types).__name__
        raise ValueError(f"{owner}: {name} must be a 1-D integer tensor of {count} {what} "
                         f"types, got {got}")
    check_index(types, num_types, f"{owner}: {name} ({what} types 0 .. {num_types - 1})")
    return types.long()


class _HeteroLinear(torch.nn.Module):
    """PyG's ``HeteroLinear``: a map per type, ``weight [types, in, out]`` and ``bias
    [types, out]``, initialised as PyG's (Kaiming-uniform over the inputs); applied per
    node by its type."""

    def __init__(self, in_channels: int, out_channels: int, num_types: int, bias: bool):
        super().__init__()
        self.in_channels, self.out_channels, self.num_types = in_channels, out_channels, \
            num_types
        self.weight = torch.nn.Parameter(torch.empty(num_types, in_channels, out_channels))
        self.bias = torch.nn.Parameter(torch.empty(num_types, out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # PyG's kaiming_uniform(fan=in, a=sqrt(5)) and uniform(in), its rounding kept
        bound = math.sqrt(6 / ((1 + math.sqrt(5) ** 2) * self.in_channels))
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                limit = 1 / math.sqrt(self.in_channels)
                self.bias.uniform_(-limit, limit)

    def forward(self, x: Tensor, node_type: Tensor) -> Tensor:
        out = x.new_empty(x.size(0), self.out_channels)
        for t in range(self.num_types):  # one product per type, as PyG's without pyg-lib
            rows = (node_type == t).nonzero().flatten()
            if rows.numel():  # (in place: every row is one type's, written once)
                out.index_copy_(0, rows, x.index_select(0, rows) @ self.weight[t])
        return out if self.bias is None else out + self.bias.index_select(0, node_type)

    def __repr__(self) -> str:  # PyG's
        return f"HeteroLinear({self.in_channels}, {self.out_channels}, " \
               f"num_types={self.num_types}, bias={self.bias is not None})"
