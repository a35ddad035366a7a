"""Cluster-GCN's convolution: the mean over the neighbours and the node itself, its own
row weighted up by ``diag_lambda``, plus a root map."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_number
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_one_node_set
from graphloc.nn.conv._utils import check_input, check_sizes, linear
from graphloc.nn.conv.gat import fresh_self_loops, on_attention_graph, pyg_loop_order


class ClusterGCNConv(ConvModule):
    r"""The convolution of `Chiang et al., "Cluster-GCN: An Efficient Algorithm for Training
    Deep and Large Graph Convolutional Networks" (KDD 2019)
    <https://arxiv.org/abs/1905.07953>`_:

    .. math::
        \mathbf{X}' = \left(\hat{\mathbf{A}} + \lambda \cdot
        \textrm{diag}(\hat{\mathbf{A}})\right) \mathbf{X} \mathbf{W}_1 +
        \mathbf{X} \mathbf{W}_2, \qquad \hat{\mathbf{A}} = (\mathbf{D} + \mathbf{I})^{-1}
        (\mathbf{A} + \mathbf{I}).

    A drop-in for PyG's ``ClusterGCNConv`` (same arguments, parameter names ``lin_out`` and
    ``lin_root``, and outputs): the edge weights (each destination's ``1 / degree``, loops
    counted, times ``1 + lambda`` on the loops) cached on the graph, one sparse product.

    Args:
        in_channels (int): input width (-1: inferred at the first call).
        out_channels (int): output width.
        diag_lambda (float, default 0): :math:`\lambda`, the extra weight of a node's own
            row.
        add_self_loops (bool, default True): replace the graph's loops by one per node.
        bias (bool, default True): learn ``lin_out``'s bias.
        flow (str, default "source_to_target"): PyG's edge direction (as PyG's, the degrees
            are counted at ``edge_index[1]`` under either flow).

    Differences from PyG's (docs/models.md): without ``add_self_loops``, each of the
    graph's own loops gets its node's ``lambda / degree``, where PyG's adds the values of
    nodes 0, 1, 2, ... to the loops in edge order: right only when the graph holds exactly
    one loop per node, in node order; any other loop count, none included, is a shape
    error there (even with ``diag_lambda = 0``). A sparse
    adjacency is read as its pattern, its loops replaced as an edge_index's are (PyG's
    keeps the old loops there and fails on their count).

    Shapes:
        input: ``x [N, in_channels]`` (or ``[B, N, in_channels]`` on one graph), a
        ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``.
        output: ``[N, out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, diag_lambda: float = 0.0,
                 add_self_loops: bool = True, bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("ClusterGCNConv", lazy=True, in_channels=in_channels,
                    out_channels=out_channels)
        check_number("ClusterGCNConv", "diag_lambda", diag_lambda)
        check_flags("ClusterGCNConv", add_self_loops=add_self_loops, bias=bias)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.diag_lambda, self.add_self_loops = diag_lambda, add_self_loops
        self.flow = check_flow("ClusterGCNConv", flow)
        self.lin_out = linear(in_channels, out_channels, bias=bias, glorot=True,
                              uniform_bias=True)
        self.lin_root = linear(in_channels, out_channels, bias=False, glorot=True)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for lin in (self.lin_out, self.lin_root):
            lin.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index) -> Tensor:
        inputs = read_one_node_set(self, x, edge_index, "its mean includes the node itself")
        x = inputs.x_src
        check_input(self, x, self.in_channels)
        graph = fresh_self_loops(inputs.graph) if self.add_self_loops else inputs.graph
        key = ("cluster_gcn_weights", self.diag_lambda, inputs.reversed, x.dtype)
        weight = graph.cached(key, lambda: _mean_weights(graph, self.diag_lambda,
                                                         inputs.reversed, x.dtype))
        mask = explain_mask(self, inputs)
        if mask is not None:
            loops = pyg_loop_order(inputs.graph) if self.add_self_loops else None
            weight = weight * on_attention_graph(mask, loops)
        out = self.lin_out(ops.spmm(graph, x, weight)).add_(self.lin_root(x))
        return inputs.node_output(out)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"diag_lambda={self.diag_lambda})")


def _mean_weights(graph: Graph, diag_lambda: float, reversed: bool, dtype) -> Tensor:
    """Per edge ``1 / max(degree, 1)`` of the node at the caller's ``edge_index[1]`` (the
    destination, or under ``target_to_source`` the source of the reversed graph), counted
    over the edges, loops included, times ``1 + diag_lambda`` on a loop."""
    src, dst = graph.edge_index
    at = src if reversed else dst
    degree = torch.bincount(at, minlength=graph.num_nodes).clamp_(min=1)
    weight = degree.to(dtype).reciprocal_().index_select(0, at)
    if diag_lambda != 0.0:
        weight = weight * torch.where(src == dst, 1.0 + diag_lambda, 1.0).to(dtype)
    return weight
