"""Graph attention convolution."""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import caller_stacklevel, check_flags
from graphloc.graph import Graph
from graphloc.nn.conv._base import (
    ConvModule,
    attention_hooked,
    explain_mask,
    loop_factors,
    report_attention,
)
from graphloc.nn.conv._inputs import (
    check_edge_rows,
    check_flow,
    edge_features_from,
    mapped_edge_features,
    read_inputs,
)
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_sizes,
    checked_features,
    glorot,
    glorot_linear,
    reset_glorot,
    split_widths,
)


def head_dots(h: Tensor, *atts: Tensor) -> Tensor:
    """PyG's per-head scores ``(h.view(N, H, C) * att).sum(-1)`` for each ``[1, H, C]``
    vector of ``atts``, side by side: ``[N, len(atts) * H]`` (``ops.head_dots``: one pass
    over ``h`` on the CPU, no ``[N, H, C]`` products forward or backward)."""
    return ops.head_dots(h, torch.cat(atts, dim=0))


def _pyg_edge_order(graph: Graph) -> tuple[Tensor, Tensor, Tensor]:
    """PyG's edge list for GAT (the graph's non-loop edges, then one loop per node, or per
    id below both node counts of a bipartite graph), the order that sorts it by destination
    (stable), and the mask of the surviving originals."""
    src, dst = graph.edge_index
    keep = src != dst
    loops = torch.arange(_num_loops(graph), device=graph.device).expand(2, -1)
    pyg_edge_index = torch.cat([graph.edge_index[:, keep], loops], dim=1)
    return pyg_edge_index, torch.sort(pyg_edge_index[1], stable=True).indices, keep


def _with_fresh_self_loops(graph: Graph) -> Graph:
    """The Graph of PyG's GAT edge list sorted by destination, so the kernels need no
    permutation. The edge order that maps it back (``_pyg_edge_order``) is cached
    separately, only once edge features or weights are asked for."""
    pyg_edge_index, order, _ = _pyg_edge_order(graph)
    return graph.with_edges(pyg_edge_index[:, order])


def _with_masked_loops(graph: Graph) -> tuple[Graph, Tensor]:
    """PyG's GAT edge list in a fixed shape, for ``torch.compile`` (no data-dependent
    branch): every edge kept and a fresh loop appended per node, with the mask of the old
    loops, whose scores are set to -inf (weight 0): the same attention as removing them,
    which the eager forward does (``_with_fresh_self_loops``)."""
    src, dst = graph.edge_index
    count = _num_loops(graph)
    loops = torch.arange(count, device=graph.device).expand(2, -1)
    edge_index = torch.cat([graph.edge_index, loops], dim=1)
    stale = torch.cat([src == dst, torch.zeros(count, dtype=torch.bool, device=graph.device)])
    order = torch.sort(edge_index[1], stable=True).indices  # CSR order: no permutation
    derived = Graph._derived(edge_index[:, order], graph.num_nodes,
                             graph.num_src_nodes if graph.is_bipartite else None,
                             dst_sorted=True)
    return derived, stale[order]


def _num_loops(graph: Graph) -> int:
    return min(graph.num_nodes, graph.num_src_nodes)


def loop_edge_attr(graph: Graph, keep: Tensor, edge_attr: Tensor,
                   fill_value: float | Tensor | str | None, reversed: bool = False) -> Tensor:
    """PyG's ``add_self_loops`` on edge features: the kept edges' rows, then one row per
    added loop: ones (None), a constant, a tensor broadcast to each row, or the node's
    "mean" / "sum" / "max" / "min" / "mul" of its kept rows at ``edge_index[1]`` (whatever
    the flow: with ``reversed``, the graph's sources)."""
    kept = edge_attr[keep]
    shape = (_num_loops(graph), *kept.shape[1:])
    if isinstance(fill_value, str):
        ends = graph.edge_index[0 if reversed else 1]
        fill = ops.scatter(kept, ends[keep], 0, dim_size=graph.num_nodes,
                           reduce=fill_value)[:_num_loops(graph)]
    elif isinstance(fill_value, Tensor):
        fill = fill_value.to(kept.device, kept.dtype)
        fill = (fill if fill.dim() == kept.dim() else fill.unsqueeze(0)).expand(shape)
    else:
        fill = kept.new_full(shape, 1.0 if fill_value is None else float(fill_value))
    return torch.cat([kept, fill])


_LOOP_REDUCTIONS = ("mean", "add", "sum", "max", "min", "mul")


def _check_fill_value(owner: str, fill_value) -> None:
    """PyG's forms of ``fill_value``; another (a misspelt reduction, a list) was refused
    only at the first call with edge features, as a ``reduce`` error."""
    if fill_value is None or isinstance(fill_value, Tensor) or (
            isinstance(fill_value, (int, float)) and not isinstance(fill_value, bool)):
        return
    if isinstance(fill_value, str) and fill_value in _LOOP_REDUCTIONS:
        return
    raise ValueError(f"{owner}: fill_value must be a number, a tensor, None (ones) or one of "
                     f"{list(_LOOP_REDUCTIONS)}, got {fill_value!r}")


def set_attention_options(layer: torch.nn.Module, in_channels, out_channels: int, heads: int,
                          concat: bool, negative_slope: float, dropout: float,
                          add_self_loops: bool, edge_dim: int | None,
                          fill_value: float | Tensor | str | None) -> None:
    """A GAT-like layer's shared arguments, checked by name and kept as PyG's attributes."""
    owner = type(layer).__name__
    check_sizes(owner, lazy=True, pair=True, optional=("edge_dim",), in_channels=in_channels,
                out_channels=out_channels, heads=heads, edge_dim=edge_dim)
    _check_fill_value(owner, fill_value)
    check_dropouts(owner, upto_one=True, dropout=dropout)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) \
            or not math.isfinite(negative_slope):  # NaN would make every score NaN
        raise ValueError(f"{owner}: negative_slope must be a finite number, got "
                         f"{negative_slope!r}")
    layer.in_channels, layer.out_channels, layer.heads = in_channels, out_channels, heads
    layer.concat, layer.negative_slope, layer.dropout = concat, negative_slope, dropout
    layer.add_self_loops, layer.edge_dim, layer.fill_value = add_self_loops, edge_dim, fill_value


def attention_edge_features(layer: torch.nn.Module, inputs, edge_attr: Tensor | None):
    """A GAT-like layer's edge features ``[E, D]``: the call's, an adjacency's or the
    Graph's when the layer has ``edge_dim`` (without it, a call's own are still checked,
    and enter no score, as PyG's)."""
    if layer.edge_dim is not None:
        edge_attr = edge_features_from(layer, inputs, edge_attr)
    elif edge_attr is not None:  # PyG's GATConv runs on, ignoring it: said, and dropped
        warnings.warn(f"{type(layer).__name__} was built without edge_dim: the edge_attr "
                      f"of shape {list(edge_attr.shape)} enters no score and is ignored, as "
                      "PyG's ignores it; build the layer with edge_dim to use it",
                      stacklevel=caller_stacklevel())
        return None
    if edge_attr is not None and edge_attr.dim() == 1:
        edge_attr = edge_attr.view(-1, 1)
    if edge_attr is not None:
        check_edge_rows(layer, "edge_attr", edge_attr, inputs.graph.num_edges)
        if not edge_attr.is_floating_point():  # as floats, before a loop's "mean" is taken
            edge_attr = edge_attr.to(inputs.x_src.dtype)
    return edge_attr


def with_pyg_loops(inputs, add_self_loops: bool, edge_attr: Tensor | None,
                   fill_value: float | Tensor | str | None, weights_returned: bool):
    """GAT's graph of a call's ``inputs`` as PyG's builds it: ``(graph, edge_attr, stale,
    pyg_order)``. Eagerly,
    old loops dropped and one loop per node added, the edges sorted by destination
    (``pyg_order``: PyG's edge list and the order mapping it to the graph's, when edge
    features or returned weights need them); under ``torch.compile`` without either, every
    edge kept and the old loops masked (``stale``)."""
    graph = inputs.graph
    if add_self_loops and edge_attr is None and not weights_returned \
            and torch.compiler.is_compiling():
        graph, stale = graph.cached("gat_masked_loops", lambda: _with_masked_loops(graph))
        return graph, None, stale, None
    if not add_self_loops:
        return graph, edge_attr, None, None
    loops = fresh_self_loops(graph)
    pyg_order = None
    if edge_attr is not None or weights_returned:  # cached on first need
        pyg_order = pyg_loop_order(graph)
    if edge_attr is not None:
        pyg_edge_index, order, keep = pyg_order
        edge_attr = loop_edge_attr(graph, keep, edge_attr, fill_value, inputs.reversed)[order]
    return loops, edge_attr, None, pyg_order


def fresh_self_loops(graph: Graph) -> Graph:
    """``graph`` with its self-loops replaced by one per node (PyG's ``remove_self_loops``
    then ``add_self_loops``), sorted by destination; cached on it."""
    return graph.cached("gat_self_loops", lambda: _with_fresh_self_loops(graph))


def pyg_loop_order(graph: Graph) -> tuple[Tensor, Tensor, Tensor]:
    """``_pyg_edge_order`` of ``graph``, cached on it: PyG's edge list with one fresh loop
    per node, as PyG's ``add_self_loops`` after ``remove_self_loops`` and its
    ``add_remaining_self_loops`` build it, and the order sorting it by destination."""
    return graph.cached("gat_pyg_edge_order", lambda: _pyg_edge_order(graph))


def on_attention_graph(edge_mask: Tensor, pyg_order) -> Tensor:
    """An explainer's mask on the caller's edges, on the edges of an attention layer's
    graph: as is without added loops (``pyg_order`` None); else PyG's ``explain_message``
    rule (the non-loop edges keep their entries, every fresh loop gets 1) in the order of
    the graph sorted by destination."""
    if pyg_order is None:
        return edge_mask
    pyg_edge_index, order, keep = pyg_order
    kept = edge_mask[keep]
    loops = loop_factors(kept, pyg_edge_index.size(1) - kept.numel())
    return torch.cat([kept, loops]).index_select(0, order)


def mask_in_csr_order(inputs, edge_mask: Tensor, fresh_loops: bool) -> Tensor:
    """An explainer's mask on the CSR-ordered edges of a layer's graph: the call's graph
    with PyG's fresh loops (``fresh_self_loops``, sorted by destination), or the call's
    own graph in CSR order."""
    if fresh_loops:
        return on_attention_graph(edge_mask, pyg_loop_order(inputs.graph))
    return inputs.graph.to_csr_order(edge_mask)


def attend(layer: torch.nn.Module, graph: Graph, score: Tensor, h: Tensor,
           mask: Tensor | None, pyg_order, weights_needed: bool):
    """``(out, alpha)`` of GAT's and GATv2's attention over ``graph``: the softmax of the
    scores ``[E, H]`` per destination, dropped out in training (``layer.dropout``), each
    edge's weights times an explainer's ``mask`` (caller's edges, ``on_attention_graph``),
    and the weighted sum of ``h``; alpha where ``weights_needed`` or computed anyway."""
    dropping = layer.dropout > 0 and layer.training
    if not dropping and mask is None:
        out = ops.segment_attention(graph, score, h, return_weights=weights_needed)
        return out if weights_needed else (out, None)
    alpha = ops.segment_softmax(graph, score)
    if dropping:
        alpha = ops.dropout(alpha, p=layer.dropout)
    if mask is None:
        return ops.spmm(graph, h, alpha), alpha
    return ops.spmm(graph, h, alpha * on_attention_graph(mask, pyg_order).unsqueeze(-1)), alpha


def attention_result(layer: torch.nn.Module, inputs, graph: Graph, pyg_order, out: Tensor,
                     alpha: Tensor | None, return_attention_weights: bool, reported: bool):
    """An attention conv's return: ``out`` (through the explainers' output hooks), with its
    weights where asked for; the weights also go to the explainers' message hooks where
    ``reported`` (``attention_hooked``)."""
    if reported:
        report_attention(layer, returned_weights(inputs, graph, pyg_order, alpha)[1])
    if not return_attention_weights:
        return out
    return out, returned_weights(inputs, graph, pyg_order, alpha)


def returned_weights(inputs, graph: Graph, pyg_order, alpha: Tensor):
    """``(edge_index, alpha)`` in PyG's edge order (the layer's graph's, without added
    loops), or PyG's sparse adjacency form."""
    if pyg_order is None:
        return inputs.attention_output(graph.edge_index, alpha)
    pyg_edge_index, order, _ = pyg_order
    return inputs.attention_output(pyg_edge_index,
                                   torch.empty_like(alpha).index_copy(0, order, alpha))


class GATConv(ConvModule):
    r"""The graph attention operator of `Veličković et al., "Graph Attention Networks"
    (ICLR 2018) <https://arxiv.org/abs/1710.10903>`_:

    .. math::
        \mathbf{x}'_i = \Big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i) \cup \{i\}}
        \alpha^{h}_{ij} \mathbf{\Theta}^{h} \mathbf{x}_j, \qquad
        \alpha^{h}_{ij} = \mathrm{softmax}_j\Big(\mathrm{LeakyReLU}\big(
        \mathbf{a}^{h\top}_{s} \mathbf{\Theta}^{h} \mathbf{x}_j +
        \mathbf{a}^{h\top}_{t} \mathbf{\Theta}^{h} \mathbf{x}_i +
        \mathbf{a}^{h\top}_{e} \mathbf{\Theta}^{h}_{e} \mathbf{e}_{ji}\big)\Big)

    (heads averaged instead of concatenated when ``concat=False``). A drop-in for PyG's
    ``GATConv`` (same arguments, parameter names, outputs and attention weights). The
    softmax and the weighted sum run fused per node: no ``[E, H, C]`` message tensor and no
    stored ``[E, H]`` weights. Without edge features, attention dropout or returned weights
    the kernel also computes the scores itself (``ops.additive_attention``: no ``[E, H]``
    tensor at all); otherwise they come from ``ops.sddmm`` into ``ops.segment_attention``.
    With attention dropout in training the weights are materialised (``[E, H]``) to be
    dropped, still without messages.

    Args:
        in_channels (int or (int, int)): input feature width; a pair gives sources and
            destinations their own projections ``lin_src`` and ``lin_dst`` (bipartite).
        out_channels (int): width per head, C.
        heads (int, default 1): number of heads, H.
        concat (bool, default True): concatenate heads (``H * C`` outputs), else average.
        negative_slope (float, default 0.2): LeakyReLU slope.
        dropout (float, default 0.0): dropout on the attention weights in training.
        add_self_loops (bool, default True): replace self-loops by one loop per node.
        edge_dim (int, optional): edge feature width; edge features then enter the scores
            (a call without them has no edge term, as in PyG).
        fill_value (float, Tensor, str or None, default "mean"): edge features of the added
            loops: a constant, a tensor broadcast to each loop's row, ones (None), or "mean"
            / "add" / "max" / "min" / "mul" of the node's incoming edge features (PyG's).
        bias (bool, default True): learn an additive bias.
        residual (bool, default False): add a linear projection of the input.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, in_channels]`` or a pair ``(x_src, x_dst)`` (bipartite: output rows
        and residual from ``x_dst``), a ``Graph`` or ``edge_index [2, E]``, optional
        ``edge_attr [E, edge_dim]``. output: ``[N, H * C]`` (``[N, C]`` if not concat);
        with ``return_attention_weights=True`` also ``(edge_index, alpha [E', H])`` over the
        edges used (self-loops included).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: float | Tensor | str | None = "mean", bias: bool = True,
                 residual: bool = False, flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("GATConv", flow)
        check_flags("GATConv", concat=concat, add_self_loops=add_self_loops, bias=bias,
                    residual=residual)
        set_attention_options(self, in_channels, out_channels, heads, concat, negative_slope,
                              dropout, add_self_loops, edge_dim, fill_value)
        H, C = heads, out_channels
        total = H * C if concat else C
        # PyG's layout: one shared projection, or one per side for a pair of widths.
        pair = isinstance(in_channels, (tuple, list))
        self.lin = None if pair else glorot_linear(in_channels, H * C)
        self.lin_src = glorot_linear(in_channels[0], H * C) if pair else None
        self.lin_dst = glorot_linear(in_channels[1], H * C) if pair else None
        self.att_src = torch.nn.Parameter(torch.empty(1, H, C))
        self.att_dst = torch.nn.Parameter(torch.empty(1, H, C))
        self.lin_edge = glorot_linear(edge_dim, H * C) if edge_dim is not None else None
        self.att_edge = torch.nn.Parameter(torch.empty(1, H, C)) if edge_dim is not None \
            else None
        self.res = glorot_linear(split_widths(in_channels)[1], total) \
            if residual else None
        self.bias = torch.nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None:
                reset_glorot(lin)
        for att in (self.att_src, self.att_dst, self.att_edge):
            if att is not None:
                glorot(att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None,
                return_attention_weights: bool | None = None):
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        H, C = self.heads, self.out_channels
        # PyG's rule: the weights are returned whenever the argument is given, even False
        return_attention_weights = return_attention_weights is not None
        mask, reported = explain_mask(self, inputs), attention_hooked(self)
        weights_needed = return_attention_weights or reported
        edge_attr = attention_edge_features(self, inputs, edge_attr)
        graph, edge_attr, stale, pyg_order = with_pyg_loops(
            inputs, self.add_self_loops, edge_attr, self.fill_value,
            weights_needed or mask is not None)
        h, a_src, a_dst = self._project(x_src, x_dst, graph.num_nodes)
        dropping = self.dropout > 0 and self.training
        if stale is None and edge_attr is None and not dropping and not weights_needed \
                and mask is None:
            out = ops.additive_attention(graph, a_src, a_dst, h, self.negative_slope)
            return self._finish(inputs, out, x_dst)
        score = ops.sddmm(graph, a_src, a_dst, "add")
        if self.lin_edge is not None and edge_attr is not None:
            e = mapped_edge_features(self, self.lin_edge, edge_attr).view(-1, H, C)
            score = score + (e * self.att_edge).sum(-1)
        score = F.leaky_relu(score, self.negative_slope)
        if stale is not None:
            score = score.masked_fill(stale.view(-1, *[1] * (score.dim() - 1)), float("-inf"))
        out, alpha = attend(self, graph, score, h, mask, pyg_order, weights_needed)
        out = self._finish(inputs, out, x_dst)
        return attention_result(self, inputs, graph, pyg_order, out, alpha,
                                return_attention_weights, reported)

    def _finish(self, inputs, out: Tensor, x_dst: Tensor | None) -> Tensor:
        """The heads' outputs ``[N, H * C]`` concatenated or averaged, plus the residual
        and the bias, in the caller's layout."""
        out = out if self.concat else out.view(-1, self.heads, self.out_channels).mean(dim=1)
        if self.res is not None and x_dst is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    def _project(self, x_src: Tensor, x_dst: Tensor | None,
                 num_dst: int) -> tuple[Tensor, Tensor, Tensor]:
        """Source messages ``[N_src, H * C]`` (head h in channels h*C to (h+1)*C) and the
        per-node score halves ``[N, H]`` (``ops.head_dots``: no ``[N, H, C]`` products,
        forward or backward).
        Without destination features the destination half is 0, as PyG's. The messages
        stay 2-D: the gradient of a ``view`` is a view, which autograd cannot add the score
        projection's gradient to in place (a fresh [N, H*C] tensor at every step)."""
        H = self.heads
        if x_dst is None:
            h = (self.lin if self.lin is not None else self.lin_src)(x_src)
            return h, head_dots(h, self.att_src), h.new_zeros(num_dst, H)
        if self.lin is not None and x_src is x_dst:  # both halves in one matmul
            h = self.lin(x_src)
            a_src, a_dst = head_dots(h, self.att_src, self.att_dst).split(H, dim=1)
            return h, a_src.contiguous(), a_dst.contiguous()
        lin_src, lin_dst = (self.lin, self.lin) if self.lin is not None \
            else (self.lin_src, self.lin_dst)
        h = lin_src(x_src)
        return h, head_dots(h, self.att_src), head_dots(lin_dst(x_dst), self.att_dst)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")
