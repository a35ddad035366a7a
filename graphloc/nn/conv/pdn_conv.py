"""The pathfinder discovery network convolution of Rozemberczki et al. (PyG's ``PDNConv``):
a network on each edge's features gives its weight, then GCN's normalised sum."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow, edge_feature_rows, read_inputs
from graphloc.nn.conv._utils import check_input, check_sizes, glorot
from graphloc.nn.conv.gcn import normalized_call_graph


class PDNConv(ConvModule):
    r"""The pathfinder discovery network convolution of `Rozemberczki et al.,
    "Pathfinder Discovery Networks for Neural Message Passing" (WWW 2021)
    <https://arxiv.org/abs/2010.12878>`_:

    .. math::
        \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i) \cup \{i\}}
        \frac{w_{ji}}{\sqrt{d_i d_j}} \mathbf{\Theta} \mathbf{x}_j + \mathbf{b}, \qquad
        w_{ji} = \sigma\big(\mathbf{W}_2 \, \mathrm{ReLU}(\mathbf{W}_1 \mathbf{e}_{ji} +
        \mathbf{b}_1) + b_2\big)

    with ``d`` the weighted degrees (the loops' weight 1, as ``gcn_norm``). A drop-in for
    PyG's ``PDNConv`` (same arguments, parameters ``lin``, ``mlp`` and ``bias``, PyG's
    initialisation from one seed, and outputs): the edge network runs on the ``[E, D]``
    features as PyG's, then the product ``lin x`` is propagated by one weighted ``spmm``
    (PyG's scatters ``[E, out]`` messages).

    Args:
        in_channels (int): input width.
        out_channels (int): output width.
        edge_dim (int): the edge features' width ``D``.
        hidden_channels (int): the edge network's hidden width.
        add_self_loops (bool, default True): add the missing self-loops (weight 1) before
            normalising.
        normalize (bool, default True): normalise the weights as GCN's; else their plain
            weighted sum.
        bias (bool, default True): add a bias.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, in_channels]`` (dense or ``torch.sparse``) or a static batch
        ``[B, N, in_channels]``; the graph (a ``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t``); ``edge_attr [E, edge_dim]`` (``[E]`` for
        ``edge_dim = 1``), else a sparse adjacency's ``[E, edge_dim]`` values or the
        Graph's own; without any, every edge weighs 1 (PyG's). output:
        ``[N, out_channels]``.

    Differences from PyG's: a ``torch.sparse`` adjacency's ``[E, edge_dim]`` values are the
    edge features (PyG's reads a ``SparseTensor``'s values so; a ``torch.sparse`` one's
    reach its ``gcn_norm`` as weights), and its self-loops are added as for graphloc's
    ``GCNConv`` (an existing loop gains weight 1); integer or other-float edge features
    are taken in the edge network's dtype (PyG's fails in its product); edge features of
    another width than ``edge_dim`` are a ``ValueError`` naming it. docs/models.md lists
    these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int,
                 hidden_channels: int, add_self_loops: bool = True, normalize: bool = True,
                 bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("PDNConv", in_channels=in_channels, out_channels=out_channels,
                    edge_dim=edge_dim, hidden_channels=hidden_channels)
        check_flags("PDNConv", add_self_loops=add_self_loops, normalize=normalize, bias=bias)
        self.flow = check_flow("PDNConv", flow)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.edge_dim, self.hidden_channels = edge_dim, hidden_channels
        self.add_self_loops, self.normalize = add_self_loops, normalize
        # PyG's modules in its order (each draws torch's initial weights, then reset's)
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(edge_dim, hidden_channels), torch.nn.ReLU(inplace=True),
            torch.nn.Linear(hidden_channels, 1), torch.nn.Sigmoid())
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        for param in (self.lin.weight, self.mlp[0].weight, self.mlp[2].weight):
            glorot(param)
        for param in (self.mlp[0].bias, self.mlp[2].bias, self.bias):
            if param is not None:
                torch.nn.init.zeros_(param)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index, edge_attr: Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        if self.normalize:
            inputs.graph._require_one_node_set("PDNConv (D^-1/2 (A + I) D^-1/2 of one node set)")
        x = inputs.x_src
        check_input(self, x, self.in_channels)
        features = edge_feature_rows(self, inputs, edge_attr, self.edge_dim, "edge_dim")
        weight = None
        if features is not None:
            if not features.is_floating_point() or not ops.autocast_enabled(x.device.type):
                features = features.to(self.mlp[0].weight.dtype)
            weight = self.mlp(features).squeeze(-1)
        graph, mask = inputs.graph, explain_mask(self, inputs)
        if self.normalize:
            if weight is None and inputs.adj_layout is not None:  # (the loops' fill needs them)
                weight = torch.ones(graph.num_edges, dtype=x.dtype, device=x.device)
            graph, weight = normalized_call_graph(inputs, weight, self.add_self_loops, x.dtype,
                                                  mask)
        else:
            weight = masked_weights(weight, mask)
        h = torch.sparse.mm(x, self.lin.weight.t()) if x.layout != torch.strided else self.lin(x)
        out = ops.spmm(graph, h, weight)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
