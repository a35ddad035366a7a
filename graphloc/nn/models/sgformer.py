r"""SGFormer (`Wu et al., "SGFormer: Simplifying and Empowering Transformers for
Large-Graph Representations", NeurIPS 2023 <https://arxiv.org/abs/2306.10759>`_): linear
global attention over all nodes plus a GCN branch; every node sees every other node at
O(N d^2) cost.

Two variants, the same modules:

* ``variant="pyg"`` (default): PyG's ``torch_geometric.nn.models.SGFormer`` (parameter names
  and outputs, parity tested): queries and keys normalised per row, bias-free projections,
  ReLU after each attention layer, 2 attention layers, GCN with self-loops, 3 GCN layers,
  graph weight 0.5.
* ``variant="citynetworks"``: the City-Networks paper's transformer baseline, as its
  ``benchmark/sgformer.py`` and ``benchmark/configs.py`` build it: queries and keys each
  divided by one Frobenius norm of the whole ``[N, heads, d]`` tensor (so at city scale the
  attention barely mixes nodes and stays close to ``v``), projections with bias, no
  activation after the attention, 1 attention layer and 1 head, a GCN branch without
  self-loops (``D^-1/2 A D^-1/2`` on in-degrees, isolated nodes 0), graph weight 0.8,
  attention dropout 0.5 and GCN dropout 0.2. Not reproduced: the official run gives the
  attention parameters their own weight decay (1e-2) in a second optimizer group.
  This is the architecture of the official code (``qitianwu/SGFormer``, ``large/ours.py``);
  its ogbn-arxiv run is this variant with ``graph_weight=0.5``, ``gnn_num_layers=3`` and
  ``gnn_dropout=0.5``; its amazon2m and pokec runs add ``gnn_use_init=True`` (either
  variant takes it).

PyG's is the default because this class takes PyG's arguments and parameter names: a PyG
user who changes the import gets PyG's model (docs/models.md compares all three).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import (
    check_batch_vector,
    check_choice,
    check_flags,
    check_int,
    check_number,
)
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import as_graph, check_dropouts, check_input, check_sizes
from graphloc.nn.conv.gcn import GCNConv
from graphloc.nn.conv.sgformer import SGFormerAttention, densify

_VARIANTS = {  # the defaults each variant gives the arguments left at None
    "pyg": dict(trans_num_layers=2, trans_num_heads=1, trans_dropout=0.5, gnn_num_layers=3,
                gnn_dropout=0.5, graph_weight=0.5),
    "citynetworks": dict(trans_num_layers=1, trans_num_heads=1, trans_dropout=0.5,
                         gnn_num_layers=2, gnn_dropout=0.2, graph_weight=0.8),
}


class SGFormer(ModelCapabilities, torch.nn.Module):
    r"""SGFormer for node classification on one graph: a global branch (linear, LayerNorm,
    ReLU, dropout, then ``trans_num_layers`` :class:`SGFormerAttention` layers, each
    averaged with its input, LayerNorm, (ReLU,) dropout) and a GCN branch (linear,
    BatchNorm, ReLU, dropout, then ``gnn_num_layers`` GCN layers with BatchNorm, ReLU,
    dropout and a residual to the first), combined as
    ``graph_weight * gnn + (1 - graph_weight) * global`` (``aggregate="add"``) or
    concatenated (``"cat"``), then a linear classifier.

    ``variant`` picks the defaults and the differences listed in the module docstring:
    ``"pyg"`` is PyG's ``SGFormer`` (same parameter names, same call, same outputs: the
    ``log_softmax`` of the classifier, as PyG returns it), ``"citynetworks"`` the
    City-Networks baseline (logits, as its code returns them). Arguments left at None take
    the variant's defaults.

    ``gnn_use_init`` (the official code's option, used by its amazon2m and pokec runs; off
    in both variants by default): each GCN layer's linear map reads the first GCN-branch
    features beside the propagated ones, ``W [A h, h_0] + b``, held as the conv's weight on
    ``A h`` plus ``inits[i]``, a bias-free linear map of ``h_0`` (the official ``W``
    split by columns).

    Call: ``model(x, edge_index)`` (or a ``Graph``) for one graph, or PyG's
    ``model(x, edge_index, batch)`` for several (a ``NeighborLoader`` batch with
    ``disjoint=True``, a mini-batch of graphs): each node attends to the nodes of its own
    graph. PyG pads the graphs to the largest and lets the padding rows' keys and count
    enter every smaller graph's attention, so a graph's outputs there depend on the other
    graphs of the batch; ``pyg_padding=True`` reproduces those numbers, the default gives
    each graph its own attention (the same numbers as calling the model on it alone). With
    graphs of equal size, or one graph, the two agree.
    """

    #: every node attends to every node: influence is measured one seed at a time
    graphloc_global = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 trans_num_layers: int | None = None, trans_num_heads: int | None = None,
                 trans_dropout: float | None = None, gnn_num_layers: int | None = None,
                 gnn_dropout: float | None = None, graph_weight: float | None = None,
                 aggregate: str = "add", variant: str = "pyg", pyg_padding: bool = False,
                 gnn_use_init: bool = False):
        super().__init__()
        check_choice("SGFormer", "variant", variant, _VARIANTS)
        given = dict(trans_num_layers=trans_num_layers, trans_num_heads=trans_num_heads,
                     trans_dropout=trans_dropout, gnn_num_layers=gnn_num_layers,
                     gnn_dropout=gnn_dropout, graph_weight=graph_weight)
        args = {k: _VARIANTS[variant][k] if v is None else v for k, v in given.items()}
        check_sizes("SGFormer", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, trans_num_heads=args["trans_num_heads"])
        check_dropouts("SGFormer", trans_dropout=args["trans_dropout"],
                       gnn_dropout=args["gnn_dropout"])
        for name in ("trans_num_layers", "gnn_num_layers"):
            check_int(args[name], f"SGFormer: {name}", 0)
        check_number("SGFormer", "graph_weight", args["graph_weight"])
        check_flags("SGFormer", pyg_padding=pyg_padding, gnn_use_init=gnn_use_init)
        if aggregate not in ("add", "cat"):
            raise ValueError(f"aggregate must be 'add' or 'cat', got {aggregate!r}")
        self.in_channels, self.variant, self.pyg_padding = in_channels, variant, pyg_padding
        official = variant == "citynetworks"
        self.trans_conv = _GlobalBranch(in_channels, hidden_channels, args["trans_num_layers"],
                                        args["trans_num_heads"], args["trans_dropout"],
                                        citynetworks=official)
        self.graph_conv = _GCNBranch(in_channels, hidden_channels, args["gnn_num_layers"],
                                     args["gnn_dropout"], self_loops=not official,
                                     use_init=gnn_use_init)
        self.graph_weight, self.aggregate = args["graph_weight"], aggregate
        self.fc = torch.nn.Linear(hidden_channels * (2 if aggregate == "cat" else 1),
                                  out_channels)

    def reset_parameters(self) -> None:
        for module in (self.trans_conv, self.graph_conv, self.fc):
            module.reset_parameters()

    @property
    def params1(self) -> list:
        """The global branch's parameters (PyG's attribute: the official code gives them
        their own optimizer group and weight decay)."""
        return list(self.trans_conv.parameters())

    @property
    def params2(self) -> list:
        """The GCN branch's and the classifier's parameters (PyG's attribute)."""
        return [*self.graph_conv.parameters(), *self.fc.parameters()]

    def forward(self, x: Tensor, graph, batch: Tensor | None = None) -> Tensor:
        check_input(self, x, self.in_channels)
        graph = as_graph(graph, x)
        if batch is not None:  # (also where no attention layer reads it)
            batch = check_batch_vector(batch, x.size(0), "SGFormer")
        global_out = self.trans_conv(x, batch, self.pyg_padding)
        local_out = self.graph_conv(x, graph)
        if self.aggregate == "add":
            out = self.fc(self.graph_weight * local_out + (1 - self.graph_weight) * global_out)
        else:
            out = self.fc(torch.cat([global_out, local_out], dim=1))
        return out if self.variant == "citynetworks" else F.log_softmax(out, dim=-1)


def _reset_all(*module_lists) -> None:
    for modules in module_lists:
        for module in modules:
            module.reset_parameters()


class _GlobalBranch(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, num_layers, heads, dropout,
                 citynetworks=False):
        super().__init__()
        self.attns = torch.nn.ModuleList(  # registration order as PyG's: same parameters()
            SGFormerAttention(hidden_channels, heads, hidden_channels, qkv_bias=citynetworks,
                              norm="tensor" if citynetworks else "row")
            for _ in range(num_layers))
        self.act = torch.nn.Identity() if citynetworks else torch.nn.ReLU()
        self.fcs = torch.nn.ModuleList([torch.nn.Linear(in_channels, hidden_channels)])
        self.bns = torch.nn.ModuleList(
            torch.nn.LayerNorm(hidden_channels) for _ in range(num_layers + 1))
        self.dropout = dropout

    def reset_parameters(self) -> None:
        _reset_all(self.fcs, self.attns, self.bns)

    def forward(self, x: Tensor, batch: Tensor | None, pyg_padding: bool) -> Tensor:
        """One graph (``batch`` None), each graph of ``batch`` on its own, or with
        ``pyg_padding`` PyG's layers on the zero-padded dense batch, padding rows included
        (they are computed alongside and dropped at the end, as in PyG)."""
        if batch is None or not pyg_padding:
            return self._layers(x, lambda attn, h: attn(h, batch=batch))
        dense, real, rows = densify(x, batch, "SGFormer")
        return self._layers(dense, lambda attn, h: attn(h, real))[rows]

    def _layers(self, x: Tensor, attend) -> Tensor:
        x = ops.dropout(F.relu(self.bns[0](self.fcs[0](x))), self.dropout, self.training)
        for attn, norm in zip(self.attns, self.bns[1:], strict=True):
            x = ops.dropout(self.act(norm((attend(attn, x) + x) / 2)), self.dropout,
                            self.training)
        return x


class _GCNBranch(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, num_layers, dropout, self_loops=True,
                 use_init=False):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            GCNConv(hidden_channels, hidden_channels, add_self_loops=self_loops)
            for _ in range(num_layers))
        # gnn_use_init: the map of the first features, the columns of the official W that
        # read them (a module only where used, so the default's state dict is unchanged)
        self.inits = torch.nn.ModuleList(
            torch.nn.Linear(hidden_channels, hidden_channels, bias=False)
            for _ in range(num_layers)) if use_init else None
        self.fcs = torch.nn.ModuleList([torch.nn.Linear(in_channels, hidden_channels)])
        self.bns = torch.nn.ModuleList(
            torch.nn.BatchNorm1d(hidden_channels) for _ in range(num_layers + 1))
        self.dropout = dropout

    def reset_parameters(self) -> None:
        _reset_all(self.fcs, self.convs, self.bns, self.inits or ())

    def forward(self, x: Tensor, graph) -> Tensor:
        x = ops.dropout(F.relu(self.bns[0](self.fcs[0](x))), self.dropout, self.training)
        first = x
        for i, (conv, norm) in enumerate(zip(self.convs, self.bns[1:], strict=True)):
            h = conv(x, graph)
            if self.inits is not None:
                h = h + self.inits[i](first)
            x = ops.dropout(F.relu(norm(h)), self.dropout, self.training) + first
        return x
