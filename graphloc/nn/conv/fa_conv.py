"""FAGCN's frequency adaptive convolution: signed attention coefficients, tanh of a score
per edge, on Kipf & Welling's normalised adjacency, plus a share of the initial features."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_number
from graphloc.nn.conv._base import (
    ConvModule,
    attention_hooked,
    explain_mask,
    masked_weights,
    report_attention,
)
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_dropouts, check_input, check_sizes, linear
from graphloc.nn.conv.gat import pyg_loop_order
from graphloc.nn.conv.gcn import (
    cached_normalisation,
    clear_normalisation_cache,
    read_weighted_call,
)


class FAConv(ConvModule):
    r"""The frequency adaptive graph convolution of `Bo et al., "Beyond Low-frequency
    Information in Graph Convolutional Networks" (AAAI 2021)
    <https://arxiv.org/abs/2101.00797>`_:

    .. math::
        \mathbf{x}'_i = \epsilon\, \mathbf{x}^{(0)}_i + \sum_{j \in \mathcal{N}(i)}
        \frac{\alpha_{ij}}{\sqrt{d_i d_j}} \mathbf{x}_j, \qquad
        \alpha_{ij} = \tanh\big(\mathbf{a}_l^\top \mathbf{x}_j + \mathbf{a}_r^\top
        \mathbf{x}_i\big),

    the coefficients signed (a low-pass or a high-pass filter per edge). A drop-in for
    PyG's ``FAConv`` (same arguments, parameter names ``att_l`` and ``att_r``, outputs and
    attention weights): one score per node and side, their sums per edge (``ops.sddmm``),
    one sparse product; no ``[E, F]`` messages.

    Args:
        channels (int): feature width, in and out (-1: inferred at the first call).
        eps (float, default 0.1): the share :math:`\epsilon` of the initial features.
        dropout (float, default 0): dropout on the coefficients in training, as PyG's
            (graphloc's dropout: another mask than torch's for a seed).
        cached (bool, default False): as PyG's, the first call's normalised graph is kept
            (``_cached_edge_index``) and reused by every later call (on another graph: a
            warning, or an error for another node count).
        add_self_loops (bool, default True): add the self-loops of the normalisation.
        normalize (bool, default True): :math:`1 / \sqrt{d_i d_j}` from the graph (then no
            ``edge_weight`` is taken, as PyG's); else the call's ``edge_weight`` in its place.
        flow (str, default "source_to_target"): PyG's edge direction.

    ``forward(x, x_0, edge_index, edge_weight=None, return_attention_weights=None)``: with
    ``return_attention_weights`` given (PyG's rule: even False) also ``(edge_index, alpha)``,
    the coefficients before dropout over PyG's edge list (self-loops added), or PyG's
    sparse form for a sparse ``adj_t``.

    Shapes:
        input: ``x [N, channels]`` (or ``[B, N, channels]`` on one graph), the initial
        features ``x_0`` of x's shape, a ``Graph``, an ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t``, ``edge_weight [E]`` with ``normalize=False``.
        output: ``[N, channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    # PyG keeps the coefficients there between calls; graphloc never stores them.
    _alpha = None

    def __init__(self, channels: int, eps: float = 0.1, dropout: float = 0.0,
                 cached: bool = False, add_self_loops: bool = True, normalize: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("FAConv", lazy=True, channels=channels)
        check_number("FAConv", "eps", eps)
        check_dropouts("FAConv", dropout=dropout)
        check_flags("FAConv", cached=cached, add_self_loops=add_self_loops,
                    normalize=normalize)
        self.channels, self.eps, self.dropout = channels, eps, dropout
        self.cached, self.add_self_loops, self.normalize = cached, add_self_loops, normalize
        self.flow = check_flow("FAConv", flow)
        self.att_l = linear(channels, 1, bias=False)  # torch's init, as PyG's Linear
        self.att_r = linear(channels, 1, bias=False)
        self.reset_parameters()  # PyG's draws (and the empty cache): a seed gives its weights

    def reset_parameters(self) -> None:
        clear_normalisation_cache(self)
        for lin in (self.att_l, self.att_r):
            if not isinstance(lin, torch.nn.LazyLinear) or not lin.has_uninitialized_params():
                lin.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, x_0: Tensor, edge_index, edge_weight: Tensor | None = None,
                return_attention_weights: bool | None = None):
        given = edge_weight is not None
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.channels)
        if self.normalize and given:
            raise ValueError("FAConv(normalize=True) weighs the edges by the graph's degrees "
                             "and takes no edge_weight (as PyG's); build it with "
                             "normalize=False to pass your own")
        x_0 = self._initial_features(inputs, x, x_0)
        mask = explain_mask(self, inputs)
        if self.normalize:
            graph, weight = cached_normalisation(self, inputs, edge_weight, x.dtype, mask)
        elif edge_weight is None:
            raise ValueError("FAConv(normalize=False) needs edge_weight (or a sparse "
                             "adjacency's values) in place of the normalisation, as PyG's")
        else:
            graph, weight = inputs.graph, masked_weights(edge_weight.to(x.dtype), mask)
        scores = self.att_l(x).view(-1), self.att_r(x).view(-1)  # source and destination
        alpha = torch.tanh(ops.sddmm(graph, *scores, "add"))
        kept = ops.dropout(alpha, p=self.dropout) if self.dropout > 0 and self.training \
            else alpha
        out = ops.spmm(graph, x, kept * weight)
        if self.eps != 0.0:  # as PyG's: no 0 * x_0 (NaN where x_0 is infinite)
            out = out.add_(x_0, alpha=self.eps)
        out = inputs.node_output(out)
        if attention_hooked(self):
            report_attention(self, self._weights(inputs, graph, alpha, scores)[1])
        if return_attention_weights is None:
            return out
        return out, self._weights(inputs, graph, alpha, scores)

    def _initial_features(self, inputs, x: Tensor, x_0) -> Tensor:
        if isinstance(x_0, Tensor) and inputs.batch is not None and x_0.dim() == 3:
            x_0 = x_0.transpose(0, 1) if inputs.nodes_first else x_0
            x_0 = x_0.reshape(-1, x_0.size(-1))  # the static batch, folded as x is
        check_input(self, x_0, x.size(1), "x_0")
        if x_0.size(0) != x.size(0):
            raise ValueError(f"FAConv: x_0 has {x_0.size(0)} rows but x has {x.size(0)}: "
                             "the initial features need a row per node")
        return x_0

    def _weights(self, inputs, graph, alpha: Tensor, scores: tuple[Tensor, Tensor]):
        """The coefficients over PyG's edge list: the call's edges without their loops, then
        one loop per node, where the normalisation added loops (the layer's graph keeps an
        old loop where it stood); the call's own edges otherwise. For a sparse adjacency,
        one entry per node pair, as PyG's (a node's old and added loops are one)."""
        if inputs.batch is not None:
            return inputs.attention_output(graph.edge_index, alpha)  # refuses, named
        source = self._cached_input[0] if self.cached and self._cached_input[0] is not None \
            else inputs.graph
        if graph is source:
            return inputs.attention_output(graph.edge_index, alpha)
        edge_index = torch.unique(graph.edge_index, dim=1) if inputs.adj_layout is not None \
            else pyg_loop_order(source)[0]
        src, dst = edge_index  # each pair's coefficient from the node scores
        return inputs.attention_output(
            edge_index, torch.tanh(scores[0].index_select(0, src)
                                   + scores[1].index_select(0, dst)))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels}, eps={self.eps})"
