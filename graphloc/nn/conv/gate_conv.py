"""AttentiveFP's first layer (PyG's ``GATEConv``): attention over messages made of the source
node's and the edge's features."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_one_node_set, required_edge_feature_rows
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_input,
    check_sizes,
    destinations_read,
    glorot,
    read_rows_only,
    sources_read,
)

# F.leaky_relu's default, which PyG's GATEConv uses for both of its activations
_SLOPE = 0.01


class GATEConv(ConvModule):
    r"""The graph attention layer with edge features of `Xiong et al., "Pushing the
    Boundaries of Molecular Representation for Drug Discovery with the Graph Attention
    Mechanism" (J. Med. Chem. 2020) <https://pubs.acs.org/doi/10.1021/acs.jmedchem.9b00959>`_
    (AttentiveFP's first layer):

    .. math::
        \mathbf{h}_{j,i} = \mathrm{LeakyReLU}(\mathbf{W}_1 [\mathbf{x}_j, \mathbf{e}_{j,i}]),
        \quad \alpha_{j,i} = \mathrm{softmax}_i\left(\mathrm{LeakyReLU}(
        \mathbf{a}_l^\top \mathbf{h}_{j,i} + \mathbf{a}_r^\top \mathbf{x}_i)\right),
        \quad \mathbf{x}'_i = \sum_{j} \alpha_{j,i} \mathbf{W}_2 \mathbf{x}_j + \mathbf{b}

    (LeakyReLU slope 0.01, dropout on the weights). A drop-in for PyG's ``GATEConv`` in
    ``torch_geometric.nn.models.attentive_fp`` (same arguments, parameters ``att_l``,
    ``att_r``, ``lin1``, ``lin2``, ``bias`` with PyG's initialisation from one seed, and
    outputs), so ``from_pyg`` converts a whole AttentiveFP.

    (``h`` scores the edge; the message is ``W_2 x_j``, so ``in_channels`` must equal
    ``out_channels``, as in AttentiveFP.) PyG applies ``lin1`` to each edge's ``[x_j,
    e_ji]`` and ``lin2`` to each edge's gathered ``x_j``. Here ``lin1``'s node block acts
    once per node and its edge block per edge, ``lin2`` acts once per node, and the
    softmax and the weighted sum are one fused pass per node (``ops.segment_attention``;
    with dropout in training, the weights, dropped in the caller's edge order as PyG's
    mask, then a weighted ``spmm``).

    Args:
        in_channels (int): input width.
        out_channels (int): output width.
        edge_dim (int): the edge feature width.
        dropout (float, default 0): dropout probability on the attention weights.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, in_channels]``; the graph (a ``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t`` whose values ``[E, edge_dim]`` are the edge features);
        ``edge_attr [E, edge_dim]``, else the sparse adjacency's or the Graph's own.
        output: ``[N, out_channels]``.

    Differences from PyG's: a call without edge features, or of another width than
    ``edge_dim``, is a ``ValueError`` naming ``edge_dim`` (PyG's fails in a ``cat`` or a
    matrix product), and so is a layer of ``in_channels != out_channels`` (PyG's builds it,
    then fails in ``lin2``); integer edge features are taken in the layer's dtype (PyG's
    fails in the ``cat``); a destination whose scores are all -inf (an infinite ``x_i``
    against a negative entry of ``att_r``) gets weights 0, as a masked row (PyG's softmax
    gives NaN).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int,
                 dropout: float = 0.0, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("GATEConv", in_channels=in_channels, out_channels=out_channels,
                    edge_dim=edge_dim)
        check_dropouts("GATEConv", upto_one=True, dropout=dropout)
        self.flow = check_flow("GATEConv", flow)
        self.node_dim = 0  # PyG's
        self.in_channels, self.out_channels, self.edge_dim = in_channels, out_channels, \
            edge_dim
        self.dropout = dropout
        self.att_l = torch.nn.Parameter(torch.empty(1, out_channels))
        self.att_r = torch.nn.Parameter(torch.empty(1, in_channels))
        # torch's Linear draws its initial weights as PyG's Linear does, so the glorot
        # draws below come from PyG's point in the random stream
        self.lin1 = torch.nn.Linear(in_channels + edge_dim, out_channels, bias=False)
        self.lin2 = torch.nn.Linear(out_channels, out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        for param in (self.att_l, self.att_r, self.lin1.weight, self.lin2.weight):
            glorot(param)
        torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index, edge_attr: Tensor | None = None) -> Tensor:
        inputs = read_one_node_set(self, x, edge_index, "its scores read x_i and x_j")
        x = inputs.x_src
        check_input(self, x, self.in_channels, "x")
        edge_attr = required_edge_feature_rows(self, inputs, edge_attr, self.edge_dim,
                                               "edge_dim")
        if self.in_channels != self.out_channels:
            raise ValueError(f"GATEConv: lin2 maps the messages x_j of {self.in_channels} "
                             f"channels but takes {self.out_channels}: build it with "
                             "in_channels == out_channels (as AttentiveFP does)")
        graph = inputs.graph.in_csr_order()
        edge_attr = inputs.graph.to_csr_order(edge_attr).to(self.lin1.weight.dtype)
        # each map acts per node, on the rows PyG's per-edge maps read (read_rows_only)
        x_src = read_rows_only(x, sources_read(graph))
        scores = self._scores(graph, x_src, read_rows_only(x, destinations_read(graph)),
                              edge_attr)
        values = self.lin2(x_src)
        dropping, mask = self.training and self.dropout > 0, explain_mask(self, inputs)
        if dropping or mask is not None:
            alpha = inputs.graph.from_csr_order(ops.segment_softmax(graph, scores))
            if dropping:  # PyG's mask: drawn in the caller's order
                alpha = F.dropout(alpha, self.dropout, True)
            if mask is not None:
                alpha = alpha * mask
            out = ops.spmm(graph, values, inputs.graph.to_csr_order(alpha))
        else:
            out = ops.segment_attention(graph, scores, values)
        return inputs.node_output(out + self.bias)

    def _scores(self, graph, x_src: Tensor, x_dst: Tensor, edge_attr: Tensor) -> Tensor:
        """``LeakyReLU(a_l h_ji + a_r x_i)`` per edge in CSR order, ``h_ji =
        LeakyReLU(lin1([x_j, e_ji]))`` with ``lin1``'s node block taken once per node."""
        node_block, edge_block = self.lin1.weight.split([self.in_channels, self.edge_dim],
                                                        dim=1)
        # in place on the gathered rows: one [E, out] tensor kept, not three
        h = F.linear(x_src, node_block).index_select(0, graph.csr.indices.long())
        h = F.leaky_relu(h.add_(F.linear(edge_attr, edge_block)), _SLOPE, inplace=True)
        # graph is in CSR order: edge_index[1] is each edge's destination, in that order
        at_dst = (x_dst @ self.att_r.t()).squeeze(-1).index_select(0, graph.edge_index[1])
        return F.leaky_relu((h @ self.att_l.t()).squeeze(-1) + at_dst, _SLOPE)

    def __repr__(self) -> str:  # PyG's (MessagePassing's, which finds no in_channels there)
        return f"{self.__class__.__name__}()"
