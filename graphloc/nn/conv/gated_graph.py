"""The gated graph sequence network's propagation (GGNN): a GRU over each node's state,
fed the aggregate of its neighbours' transformed states, for a number of steps."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import check_input, check_sizes

_AGGREGATIONS = ("add", "sum", "mean", "max", "min")


class GatedGraphConv(ConvModule):
    r"""The gated graph convolution of `Li et al., "Gated Graph Sequence Neural Networks"
    (ICLR 2016) <https://arxiv.org/abs/1511.05493>`_:

    .. math::
        \mathbf{h}_i^{(0)} = \mathbf{x}_i \, \Vert \, \mathbf{0}, \qquad
        \mathbf{m}_i^{(l+1)} = \bigoplus_{j \in \mathcal{N}(i)} e_{j,i} \,
        \mathbf{\Theta}^{(l)\top} \mathbf{h}_j^{(l)}, \qquad
        \mathbf{h}_i^{(l+1)} = \mathrm{GRU}\big(\mathbf{m}_i^{(l+1)}, \mathbf{h}_i^{(l)}\big)

    for ``num_layers`` steps (the features zero-padded to ``out_channels``). A drop-in for
    PyG's ``GatedGraphConv`` (same arguments, parameter names ``weight`` and ``rnn``, and
    outputs): each step one product with ``weight[l]``, one fused sparse aggregation
    (``ops.spmm``: no ``[E, C]`` messages) and torch's ``GRUCell``, which takes most of a
    step's time and memory here as in PyG's layer.

    Differences from PyG's (docs/models.md): ``aggr`` is one of the fused aggregations; PyG's
    others (a list, a module, "mul", ...) are refused by name, and ``from_pyg`` keeps such a
    conv.

    Args:
        out_channels (int): the state width C (the features are at most C wide).
        num_layers (int): the number of steps (0: the padded features).
        aggr (str, default "add"): the aggregation: "add" ("sum"), "mean", "max" or "min".
        bias (bool, default True): biases in the GRU.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: node features ``[N, F]`` with F <= C (or ``[B, N, F]`` on one graph), a
        ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` (its values
        weight the edges), optional ``edge_weight [E]``. output: ``[N, C]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, out_channels: int, num_layers: int, aggr: str = "add", bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("GatedGraphConv", out_channels=out_channels)
        check_int(num_layers, "GatedGraphConv: num_layers", 0)
        if aggr not in _AGGREGATIONS:
            raise ValueError(f"GatedGraphConv: aggr must be one of {_AGGREGATIONS}, got "
                             f"{aggr!r}")
        self.out_channels, self.num_layers, self.aggr = out_channels, num_layers, aggr
        self.flow = check_flow("GatedGraphConv", flow)
        check_flags("GatedGraphConv", bias=bias)
        self.weight = torch.nn.Parameter(torch.empty(num_layers, out_channels, out_channels))
        self.rnn = torch.nn.GRUCell(out_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.out_channels)  # PyG's uniform(out_channels, weight)
        torch.nn.init.uniform_(self.weight, -bound, bound)
        self.rnn.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return self.num_layers

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        inputs.graph._require_one_node_set("GatedGraphConv (a GRU over each node's state)")
        x = inputs.x_src
        check_input(self, x, None)
        if x.size(1) > self.out_channels:
            raise ValueError(f"GatedGraphConv: x has {x.size(1)} channels, more than "
                             f"out_channels={self.out_channels} (the state it is padded to)")
        if x.size(1) < self.out_channels:
            x = torch.cat([x, x.new_zeros(x.size(0), self.out_channels - x.size(1))], dim=1)
        weight = weights_from(self, inputs, edge_weight)
        weight = None if weight is None else weight.to(x.dtype)
        weight = masked_weights(weight, explain_mask(self, inputs))
        reduce = "sum" if self.aggr == "add" else self.aggr
        for step in range(self.num_layers):
            messages = ops.spmm(inputs.graph, x @ self.weight[step], weight, reduce=reduce)
            x = self.rnn(messages, x)
        return inputs.node_output(x)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.out_channels}, num_layers={self.num_layers})"

