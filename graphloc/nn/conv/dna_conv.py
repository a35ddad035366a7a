"""The dynamic neighbourhood aggregation of Fey ("Just Jump", 2019; PyG's ``DNAConv``):
each edge's destination queries the source's representations at every earlier layer with
multi-head dot-product attention, and the answers are summed over GCN's normalised
adjacency. The projections run once per node and layer (PyG's run once per edge), the
scores are one sampled product and the answers one weighted sparse product."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_sizes,
    destinations_read,
    read_rows_only,
    sources_read,
)
from graphloc.nn.conv.gcn import cached_normalisation, clear_normalisation_cache


class DNAConv(ConvModule):
    r"""The dynamic neighbourhood aggregation operator of `Fey, "Just Jump: Dynamic
    Neighborhood Aggregation in Graph Neural Networks" (ICLR 2019 workshop)
    <https://arxiv.org/abs/1904.04849>`_:

    .. math::
        \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i) \cup \{i\}} \hat{a}_{ij}\,
        \mathrm{Attention}\big(\mathbf{x}_i^{(L)} \Theta_Q,\,
        [\mathbf{x}_j^{(1)}, \ldots, \mathbf{x}_j^{(L)}] \Theta_K,\,
        [\mathbf{x}_j^{(1)}, \ldots, \mathbf{x}_j^{(L)}] \Theta_V\big)

    with :math:`\hat{a}_{ij}` GCN's :math:`\hat{D}^{-1/2} \hat{A} \hat{D}^{-1/2}`, and the
    attention multi-head, scaled by :math:`1/\sqrt{d}` per head of width d, and
    normalised by PyG's restricted softmax: :math:`e^{s_l - m} / (\sum_l e^{s_l - m} +
    e^{-m})` with :math:`m = \max(0, \max_l s_l)` (the weights sum to less than 1). A
    drop-in for PyG's ``DNAConv`` (same arguments, parameter names, initial draws and
    outputs).

    The queries, keys and values are projected once per node (PyG projects each edge's
    copies of the endpoints' rows); the scores of every layer and head are one sampled
    product over the edges, and the answers one weighted sparse product of the values.

    Args:
        channels (int): the width of each layer's representation, in and out.
        heads (int, default 1): attention heads (``channels`` divides into them).
        groups (int, default 1): groups of the block-diagonal projections (``channels``
            divides into them; heads and groups divide one another).
        dropout (float, default 0): dropout of the attention weights in training.
        cached (bool, default False): keep the first graph's normalisation, as PyG's (a
            later call on another graph is said: a warning, or an error where the node
            count differs).
        normalize (bool, default True): GCN's normalisation (with ``add_self_loops``);
            False weighs the answers by ``edge_weight`` as given, or by 1 without it
            (PyG's then fails).
        add_self_loops (bool, default True): add the loops of :math:`\hat{A}`.
        bias (bool, default True): the projections' biases.
        flow (str, default "source_to_target"): PyG's edge direction.

    Differences from PyG's (docs/models.md): the attention dropout draws another mask
    than PyG's for one seed (its distribution is the same); ``normalize=False`` without
    ``edge_weight`` weighs each edge by 1 (PyG's fails); a ``node_dim`` other than 0, x of
    0 layers and heads or groups that do not split the channels are a ``ValueError``.

    Shapes:
        input: ``x [N, L, channels]`` (each node's representation at L layers; the last
        one makes the query), a ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse``
        ``adj_t``, optional ``edge_weight [E]``. output: ``[N, channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, channels: int, heads: int = 1, groups: int = 1, dropout: float = 0.0,
                 cached: bool = False, normalize: bool = True, add_self_loops: bool = True,
                 bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        name = type(self).__name__
        check_sizes(name, channels=channels, heads=heads, groups=groups)
        _check_divisions(channels, heads, groups)
        check_dropouts(name, upto_one=True, dropout=dropout)
        check_flags(name, cached=cached, normalize=normalize, add_self_loops=add_self_loops,
                    bias=bias)
        self.bias, self.cached, self.normalize = bias, cached, normalize
        self.add_self_loops = add_self_loops
        self.flow = check_flow(name, flow)
        self.node_dim = 0  # PyG's: x is [N, L, channels], nodes first
        self.multi_head = _MultiHead(channels, heads, groups, dropout, bias)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        self.multi_head.reset_parameters()
        clear_normalisation_cache(self)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        layers = self._checked_layers(x)
        # the graph is read on x as [N, L * channels] (a 3-D x would read as a static batch)
        inputs = read_inputs(self, layers.flatten(1), edge_index)
        inputs.graph._require_one_node_set(
            f"{type(self).__name__} (each edge's ends read one x [N, L, channels])")
        edge_weight = weights_from(self, inputs, edge_weight)
        mask = explain_mask(self, inputs)
        if self.normalize:
            graph, weight = cached_normalisation(self, inputs, edge_weight, layers.dtype, mask)
        else:
            graph = inputs.graph
            weight = edge_weight if edge_weight is not None else \
                layers.new_ones(graph.num_edges)
            weight = masked_weights(weight, mask)
        return self.multi_head.aggregate(graph, weight.to(layers.dtype), layers)

    def _checked_layers(self, x) -> Tensor:
        """``x`` as PyG's DNAConv reads it: floating ``[N, L, channels]``, L >= 1."""
        name, channels = type(self).__name__, self.multi_head.in_channels
        if isinstance(self.node_dim, bool) or self.node_dim not in (0, -3):
            # PyG's would gather the layers (or channels) as nodes
            raise ValueError(f"{name}: node_dim={self.node_dim!r}, but x is [num_nodes, "
                             "num_layers, channels], its nodes on axis 0 (node_dim=0)")
        if not isinstance(x, Tensor) or not x.is_floating_point():
            got = x.dtype if isinstance(x, Tensor) else type(x).__name__
            raise TypeError(f"{name} expects floating-point node features x "
                            f"[num_nodes, num_layers, channels], got {got}")
        if x.dim() != 3 or x.size(1) == 0 or x.size(2) != channels:
            raise ValueError(f"{name} expects x of shape [num_nodes, num_layers >= 1, "
                             f"{channels}], got {list(x.shape)}")
        weight = self.multi_head.lin_q.weight
        if weight.dtype != x.dtype and not torch.is_autocast_enabled(x.device.type):
            raise TypeError(f"{name} has {weight.dtype} parameters, but x is {x.dtype}: "
                            f"convert one to the other (x.to({weight.dtype}) or "
                            f"layer.to({x.dtype}))")
        return x

    def __repr__(self) -> str:  # PyG's
        mh = self.multi_head
        return f"{self.__class__.__name__}({mh.in_channels}, heads={mh.heads}, " \
               f"groups={mh.groups})"


def _check_divisions(channels: int, heads: int, groups: int) -> None:
    """PyG's asserts, as named errors: the heads and the groups split the channels, and one
    of heads and groups divides the other."""
    for what, count in (("heads", heads), ("groups", groups)):
        if channels % count:
            raise ValueError(f"DNAConv: channels={channels} does not divide into "
                             f"{what}={count}")
    if max(heads, groups) % min(heads, groups):
        raise ValueError(f"DNAConv: heads={heads} and groups={groups}: one must divide the "
                         "other")


class _GroupedLinear(torch.nn.Module):
    """PyG's DNA ``Linear``: ``groups`` block-diagonal maps, ``weight [groups, in / groups,
    out / groups]`` and one bias ``[out]``, initialised as PyG's (Kaiming-uniform over
    each block's inputs)."""

    def __init__(self, in_channels: int, out_channels: int, groups: int, bias: bool):
        super().__init__()
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.weight = torch.nn.Parameter(
            torch.empty(groups, in_channels // groups, out_channels // groups))
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan = self.weight.size(1)
        # PyG's kaiming_uniform(fan, a=sqrt(5)) (its rounding of a ** 2 kept: the same
        # draws) and uniform(fan): both bounds 1/sqrt(fan)
        bound = math.sqrt(6 / ((1 + math.sqrt(5) ** 2) * fan))
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-1 / math.sqrt(fan), 1 / math.sqrt(fan))

    def forward(self, x: Tensor) -> Tensor:
        if self.groups == 1:
            out = x @ self.weight[0]
        elif self.in_channels <= 256:
            # one dense product with the block-diagonal matrix: the per-group batched
            # products of narrow blocks ran at a fraction of a GEMM's rate (600,000 rows, 64
            # channels in 16 groups: 160 ms against 65 ms forward, 394 against 244 with the
            # backward; at 512 channels the dense one's 16x work made it slower, 2026-12-05)
            out = x @ torch.block_diag(*self.weight.unbind(0))
        else:
            blocks = x.reshape(*x.shape[:-1], self.groups, self.in_channels // self.groups)
            out = torch.einsum("...gi,gio->...go", blocks, self.weight).flatten(-2)
        return out if self.bias is None else out + self.bias

    def __repr__(self) -> str:  # PyG's
        return f"Linear({self.in_channels}, {self.out_channels}, groups={self.groups})"


class _MultiHead(torch.nn.Module):
    """PyG's DNA ``MultiHead``'s projections (``lin_q``, ``lin_k``, ``lin_v``), and the
    attention of every edge computed over the graph."""

    def __init__(self, channels: int, heads: int, groups: int, dropout: float, bias: bool):
        super().__init__()
        self.in_channels = self.out_channels = channels
        self.heads, self.groups, self.dropout, self.bias = heads, groups, dropout, bias
        self.lin_q = _GroupedLinear(channels, channels, groups, bias)
        self.lin_k = _GroupedLinear(channels, channels, groups, bias)
        self.lin_v = _GroupedLinear(channels, channels, groups, bias)
        self.reset_parameters()  # PyG's order of draws (each map's own, then these)

    def reset_parameters(self) -> None:
        for lin in (self.lin_q, self.lin_k, self.lin_v):
            lin.reset_parameters()

    def aggregate(self, graph, weight: Tensor, x: Tensor) -> Tensor:
        """``sum_{(j -> i)} weight_ji * Attention(x_i^(L) Q, x_j K, x_j V)`` per node."""
        n, layers, channels = x.shape
        heads, width = self.heads, channels // self.heads
        # each map acts per node, on the rows PyG's per-edge maps read (read_rows_only)
        sources = read_rows_only(x, sources_read(graph))
        # the destinations' last layer asks
        query = self.lin_q(read_rows_only(x[:, -1], destinations_read(graph)))
        keys = self.lin_k(sources).view(n, layers * heads, width)
        values = self.lin_v(sources).view(n, layers * heads, width)
        queries = query.view(n, 1, heads, width).expand(n, layers, heads, width)
        scores = ops.sddmm(graph, keys, queries.reshape(n, layers * heads, width))
        scores = scores.view(-1, layers, heads) / math.sqrt(width)
        alpha = _restricted_softmax(scores)
        alpha = torch.nn.functional.dropout(alpha, self.dropout, self.training)
        alpha = alpha * weight.view(-1, 1, 1)
        out = ops.spmm(graph, values, alpha.view(-1, layers * heads))
        return out.view(out.size(0), layers, channels).sum(1)

    def __repr__(self) -> str:  # PyG's
        return (f"MultiHead({self.in_channels}, {self.out_channels}, heads={self.heads}, "
                f"groups={self.groups}, dropout={self.dropout}, bias={self.bias})")


def _restricted_softmax(scores: Tensor) -> Tensor:
    """PyG's ``restricted_softmax`` over the layers (dim 1) of ``[E, L, H]`` scores: a
    softmax with an extra zero score, ``exp(s - m) / (sum exp(s - m) + exp(-m))``,
    ``m = max(0, max s)``."""
    top = scores.max(dim=1, keepdim=True).values.clamp(min=0)
    shifted = (scores - top).exp()
    return shifted / (shifted.sum(dim=1, keepdim=True) + (-top).exp())
