"""ARMA graph convolution: parallel stacks of recursive propagations over the normalised
adjacency (an auto-regressive moving-average filter), averaged."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_dropouts, check_sizes, glorot
from graphloc.nn.conv.gcn import normalized_call_graph, read_weighted_call

_RELU = torch.nn.ReLU()  # PyG's default act, an instance (stateless: shared safely)


class ARMAConv(ConvModule):
    r"""The ARMA graph convolution of `Bianchi et al., "Graph Neural Networks with
    Convolutional ARMA Filters" (TPAMI 2021) <https://arxiv.org/abs/1901.01343>`_:

    .. math::
        \mathbf{X}' = \frac{1}{K} \sum_{k=1}^K \mathbf{X}_k^{(T)}, \qquad
        \mathbf{X}_k^{(t+1)} = \sigma\left(\hat{\mathbf{L}} \mathbf{X}_k^{(t)}
        \mathbf{W}_k^{(t)} + \mathrm{Dropout}(\mathbf{X}) \mathbf{V}_k^{(t)} +
        \mathbf{b}_k^{(t)}\right)

    with :math:`\hat{\mathbf{L}} = \mathbf{D}^{-1/2} \mathbf{A} \mathbf{D}^{-1/2}` (no
    self-loops) and :math:`\mathbf{X}_k^{(0)} = \mathbf{X}`. A drop-in for PyG's
    ``ARMAConv`` (same arguments, parameters ``init_weight``, ``weight``, ``root_weight``,
    ``bias`` with PyG's initialisation, and outputs): the K stacks are kept side by side as
    ``[N, K * F]``, so each step's propagation is one fused sparse product for all of them
    (PyG gathers ``[K, E, F]`` messages).

    Args:
        in_channels (int): input width (-1: inferred at the first call).
        out_channels (int): output width.
        num_stacks (int, default 1): K, parallel stacks.
        num_layers (int, default 1): T, steps per stack.
        shared_weights (bool, default False): one ``W`` and ``V`` for every step after the
            first (the first step's ``V`` is shared too), as PyG's.
        act (callable or None, default ReLU()): :math:`\sigma`.
        dropout (float, default 0): dropout of the skip input ``X`` at each step (torch's,
            drawn in PyG's order, so a seed gives PyG's masks).
        bias (bool, default True).
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, in_channels]``, the graph (``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t`` whose values are the edge weights), optional
        ``edge_weight [E]``. output: ``[N, out_channels]``.

    Differences from PyG's (docs/models.md): a ``torch.sparse`` adjacency is taken (PyG's
    raises a RuntimeError there, and its own test asks for it).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, num_stacks: int = 1,
                 num_layers: int = 1, shared_weights: bool = False,
                 act=_RELU, dropout: float = 0.0, bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("ARMAConv", lazy=True, in_channels=in_channels, out_channels=out_channels,
                    num_stacks=num_stacks, num_layers=num_layers)
        check_flags("ARMAConv", shared_weights=shared_weights, bias=bias)
        check_dropouts("ARMAConv", dropout=dropout)
        if act is not None and not callable(act):
            raise TypeError(f"ARMAConv: act must be callable or None, got {act!r}")
        self.flow = check_flow("ARMAConv", flow)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_stacks, self.num_layers = num_stacks, num_layers
        self.shared_weights, self.act, self.dropout = shared_weights, act, dropout
        steps = 1 if shared_weights else num_layers
        self.weight = torch.nn.Parameter(
            torch.empty(max(1, steps - 1), num_stacks, out_channels, out_channels))
        if in_channels > 0:
            self.init_weight = torch.nn.Parameter(torch.empty(num_stacks, in_channels,
                                                              out_channels))
            self.root_weight = torch.nn.Parameter(torch.empty(steps, num_stacks, in_channels,
                                                              out_channels))
        else:  # PyG's lazy width: materialised at the first call
            self.init_weight = torch.nn.parameter.UninitializedParameter()
            self.root_weight = torch.nn.parameter.UninitializedParameter()
        self.bias = torch.nn.Parameter(torch.empty(steps, num_stacks, 1, out_channels)) \
            if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        glorot(self.weight)
        if not isinstance(self.init_weight, torch.nn.parameter.UninitializedParameter):
            glorot(self.init_weight)
            glorot(self.root_weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int:
        return self.num_layers

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        self._materialise(x)
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.in_channels)
        graph, weight = normalized_call_graph(inputs, edge_weight, False, x.dtype,
                                              explain_mask(self, inputs))
        stacks, width = self.num_stacks, self.out_channels
        out = x @ _side_by_side(self.init_weight)  # [N, K * F]: the stacks side by side
        for t in range(self.num_layers):
            if t > 0:  # each stack's own W: [N, K, F] x [K, F, F]
                step_weight = self.weight[0 if self.shared_weights else t - 1]
                out = torch.einsum("nkf,kfo->nko", out.view(-1, stacks, width), step_weight)
                out = out.reshape(-1, stacks * width)
            out = ops.spmm(graph, out, weight)
            root = F.dropout(x, p=self.dropout, training=self.training)
            out = out + root @ _side_by_side(self.root_weight[0 if self.shared_weights else t])
            if self.bias is not None:
                out = out + self.bias[0 if self.shared_weights else t].reshape(-1)
            if self.act is not None:  # on PyG's [K, N, F] (a view: an act along a dim
                # sees PyG's axes; an elementwise one keeps the layout, so no copy)
                stacked = out.view(-1, stacks, width).transpose(0, 1)
                out = self.act(stacked).transpose(0, 1).reshape(-1, stacks * width)
        return inputs.node_output(out.view(-1, stacks, width).mean(dim=1))

    def _materialise(self, x) -> None:
        """PyG's lazy ``in_channels=-1``: the weights take x's width at the first call."""
        if not isinstance(self.init_weight, torch.nn.parameter.UninitializedParameter):
            return
        if not isinstance(x, Tensor) or x.dim() < 2:
            return  # read_weighted_call names what is wrong with x
        steps = self.root_weight_steps
        with torch.no_grad():
            self.init_weight.materialize((self.num_stacks, x.size(-1), self.out_channels))
            self.root_weight.materialize((steps, self.num_stacks, x.size(-1),
                                          self.out_channels))
            glorot(self.init_weight)
            glorot(self.root_weight)

    @property
    def root_weight_steps(self) -> int:
        return 1 if self.shared_weights else self.num_layers

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_stacks={self.num_stacks}, num_layers={self.num_layers})")


def _side_by_side(weight: Tensor) -> Tensor:
    """``[K, F_in, F_out]`` as one ``[F_in, K * F_out]`` map: ``x @`` it is every stack's
    ``x @ W_k`` side by side."""
    return weight.permute(1, 0, 2).reshape(weight.size(1), -1)
