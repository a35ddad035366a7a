r"""SGFormer (`Wu et al., "SGFormer: Simplifying and Empowering Transformers for
Large-Graph Representations", NeurIPS 2023 <https://arxiv.org/abs/2306.10759>`_): one-layer
linear global attention over all nodes plus a GCN branch. The City-Networks paper's
transformer baseline: every node sees every other node at O(N d^2) cost.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.nn.conv._utils import as_graph, check_dropouts, check_input, check_sizes
from graphloc.nn.conv.gcn import GCNConv


class SGFormerAttention(torch.nn.Module):
    r"""Linear all-pair attention over the N nodes of one graph, per head:

    .. math::
        \mathbf{z}_n = \frac{N \mathbf{v}_n + \sum_l (\hat{\mathbf{q}}_n \cdot
        \hat{\mathbf{k}}_l)\, \mathbf{v}_l}{N + \hat{\mathbf{q}}_n \cdot \sum_l
        \hat{\mathbf{k}}_l}

    with row-normalised queries and keys (as PyG's ``SGFormerAttention``), computed as
    :math:`\hat Q (\hat K^\top V)`: no N x N matrix. Heads are averaged.

    Shapes: ``[N, channels] -> [N, head_channels]``.
    """

    def __init__(self, channels: int, heads: int = 1, head_channels: int = 64,
                 qkv_bias: bool = False):
        super().__init__()
        check_sizes("SGFormerAttention", channels=channels, heads=heads,
                    head_channels=head_channels)
        self.heads, self.head_channels = heads, head_channels
        inner = heads * head_channels
        self.q = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.k = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.v = torch.nn.Linear(channels, inner, bias=qkv_bias)

    def reset_parameters(self) -> None:
        for lin in (self.q, self.k, self.v):
            lin.reset_parameters()

    def forward(self, x: Tensor) -> Tensor:
        n = x.size(0)
        q, k, v = (lin(x).view(n, self.heads, self.head_channels)
                   for lin in (self.q, self.k, self.v))
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        kv = torch.einsum("lhm,lhd->hmd", k, v)
        numerator = torch.einsum("nhm,hmd->nhd", q, kv) + n * v
        normaliser = torch.einsum("nhm,hm->nh", q, k.sum(0)).unsqueeze(-1) + n
        return (numerator / normaliser).mean(dim=1)


class SGFormer(torch.nn.Module):
    r"""SGFormer for node classification on one graph: a global branch (linear, LayerNorm,
    ReLU, dropout, then ``trans_num_layers`` :class:`SGFormerAttention` layers, each
    averaged with its input) and a GCN branch (linear, BatchNorm, then ``gnn_num_layers``
    residual GCN layers), combined as ``graph_weight * gnn + (1 - graph_weight) * global``
    (``aggregate="add"``) or concatenated (``"cat"``), then a linear classifier.

    Same modules, parameter names and outputs as PyG's ``SGFormer`` (whose output is our
    ``log_softmax``; we return logits like the other models), on graphloc's GCN. Only one
    graph at a time: no ``batch`` vector.
    """

    #: every node attends to every node: influence is measured one seed at a time
    graphloc_global = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 trans_num_layers: int = 2, trans_num_heads: int = 1,
                 trans_dropout: float = 0.5, gnn_num_layers: int = 3,
                 gnn_dropout: float = 0.5, graph_weight: float = 0.5, aggregate: str = "add"):
        super().__init__()
        check_sizes("SGFormer", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, trans_num_heads=trans_num_heads)
        check_dropouts("SGFormer", trans_dropout=trans_dropout, gnn_dropout=gnn_dropout)
        if aggregate not in ("add", "cat"):
            raise ValueError(f"aggregate must be 'add' or 'cat', got {aggregate!r}")
        self.in_channels = in_channels
        self.trans_conv = _GlobalBranch(in_channels, hidden_channels, trans_num_layers,
                                        trans_num_heads, trans_dropout)
        self.graph_conv = _GCNBranch(in_channels, hidden_channels, gnn_num_layers,
                                     gnn_dropout)
        self.graph_weight, self.aggregate = graph_weight, aggregate
        self.fc = torch.nn.Linear(hidden_channels * (2 if aggregate == "cat" else 1),
                                  out_channels)

    def reset_parameters(self) -> None:
        for module in (self.trans_conv, self.graph_conv, self.fc):
            module.reset_parameters()

    def forward(self, x: Tensor, graph) -> Tensor:
        check_input(self, x, self.in_channels)
        graph = as_graph(graph, x)
        global_out, local_out = self.trans_conv(x), self.graph_conv(x, graph)
        if self.aggregate == "add":
            return self.fc(self.graph_weight * local_out + (1 - self.graph_weight) * global_out)
        return self.fc(torch.cat([global_out, local_out], dim=1))


def _reset_all(*module_lists) -> None:
    for modules in module_lists:
        for module in modules:
            module.reset_parameters()


class _GlobalBranch(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, num_layers, heads, dropout):
        super().__init__()
        self.attns = torch.nn.ModuleList(  # registration order as PyG's: same parameters()
            SGFormerAttention(hidden_channels, heads, hidden_channels)
            for _ in range(num_layers))
        self.fcs = torch.nn.ModuleList([torch.nn.Linear(in_channels, hidden_channels)])
        self.bns = torch.nn.ModuleList(
            torch.nn.LayerNorm(hidden_channels) for _ in range(num_layers + 1))
        self.dropout = dropout

    def reset_parameters(self) -> None:
        _reset_all(self.fcs, self.attns, self.bns)

    def forward(self, x: Tensor) -> Tensor:
        x = F.dropout(F.relu(self.bns[0](self.fcs[0](x))), self.dropout, self.training)
        for attn, norm in zip(self.attns, self.bns[1:], strict=True):
            x = F.dropout(F.relu(norm((attn(x) + x) / 2)), self.dropout, self.training)
        return x


class _GCNBranch(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, num_layers, dropout):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            GCNConv(hidden_channels, hidden_channels) for _ in range(num_layers))
        self.fcs = torch.nn.ModuleList([torch.nn.Linear(in_channels, hidden_channels)])
        self.bns = torch.nn.ModuleList(
            torch.nn.BatchNorm1d(hidden_channels) for _ in range(num_layers + 1))
        self.dropout = dropout

    def reset_parameters(self) -> None:
        _reset_all(self.fcs, self.convs, self.bns)

    def forward(self, x: Tensor, graph) -> Tensor:
        x = F.dropout(F.relu(self.bns[0](self.fcs[0](x))), self.dropout, self.training)
        first = x
        for conv, norm in zip(self.convs, self.bns[1:], strict=True):
            x = F.dropout(F.relu(norm(conv(x, graph))), self.dropout, self.training) + first
        return x
