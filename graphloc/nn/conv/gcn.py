"""Graph convolution of Kipf & Welling."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from graphloc.checks import caller_stacklevel, check_flags
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights, refuse_added_loops
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import (
    check_input,
    check_sizes,
    glorot_linear,
    propagate_prefix,
    reset_glorot,
)


class GCNConv(ConvModule):
    r"""The graph convolution of `Kipf & Welling, "Semi-Supervised Classification with Graph
    Convolutional Networks" (ICLR 2017) <https://arxiv.org/abs/1609.02907>`_:

    .. math::
        \mathbf{X}' = \hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}} \hat{\mathbf{D}}^{-1/2}
        \mathbf{X} \mathbf{\Theta} + \mathbf{b},

    with :math:`\hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}` (or :math:`+ 2\mathbf{I}` when
    ``improved``) and :math:`\hat{D}_{ii} = \sum_j \hat{A}_{ij}`, degrees at the destination.
    A drop-in for PyG's ``GCNConv`` (same arguments, parameter names and outputs), computed
    as one fused sparse product over the graph's cached normalisation.

    Args:
        in_channels (int): input feature width.
        out_channels (int): output feature width.
        improved (bool, default False): self-loops of weight 2. Unlike PyG, this also holds
            without edge weights (PyG then silently uses weight 1).
        cached (bool, default False): keep the normalised adjacency of the first graph seen
            and reuse it (transductive training on one graph). With a ``Graph`` input the
            normalisation is cached on the graph anyway.
        add_self_loops (bool, default: ``normalize``): add the self-loops of
            :math:`\hat{\mathbf{A}}`. As in PyG, a loop already in an ``edge_index`` or
            ``Graph`` keeps its weight, while a ``torch.sparse`` adjacency gets
            :math:`\mathbf{A} + \mathbf{I}` (its loops gain 1, or 2 if ``improved``).
        normalize (bool, default True): apply the symmetric normalisation.
        bias (bool, default True): learn the additive bias :math:`\mathbf{b}`.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.
        pyg_improved_loops (bool, default False): with ``improved``, the loops added to an
            ``edge_index`` or ``Graph`` called without ``edge_weight`` weigh 1, as PyG
            2.8's ``gcn_norm`` makes them (``from_pyg`` sets it, so a converted improved
            GCNConv gives PyG's numbers); with weights, or on a ``torch.sparse``
            adjacency, they weigh 2 either way.

    Shapes:
        input: node features ``[N, in_channels]`` (dense or ``torch.sparse``; or a static
        batch ``[B, N, in_channels]`` on one graph), the graph (a ``Graph``, an
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` whose values are the edge
        weights), optional ``edge_weight [E]``. output: ``[N, out_channels]``
        (``[B, N, out_channels]``). ``in_channels=-1`` infers the width at the first call.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False,
                 cached: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True, bias: bool = True, flow: str = "source_to_target",
                 pyg_improved_loops: bool = False):
        super().__init__()
        check_sizes("GCNConv", lazy=True, in_channels=in_channels, out_channels=out_channels)
        check_flags("GCNConv", improved=improved, cached=cached, normalize=normalize, bias=bias,
                    add_self_loops=normalize if add_self_loops is None else add_self_loops,
                    pyg_improved_loops=pyg_improved_loops)
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv does not support adding self-loops without normalize=True "
                             "(the loops belong to the normalised adjacency)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = improved, cached
        self.pyg_improved_loops = pyg_improved_loops
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.flow = check_flow("GCNConv", flow)
        self.lin = glorot_linear(in_channels, out_channels)
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        clear_normalisation_cache(self)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_glorot(self.lin)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        clear_normalisation_cache(self)

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.in_channels)
        graph, add_loops = inputs.graph, self.add_self_loops
        reused = self.cached and self._cached_edge_index is not None
        if reused and self.normalize:
            check_cached_input(self, graph, edge_weight)
        elif self.cached and self.normalize:
            self._cached_input = (graph, edge_weight)
        if inputs.adj_layout is not None and self.normalize and self.add_self_loops \
                and not reused:
            graph, edge_weight = with_sparse_adjacency_loops(
                graph, edge_weight, 2.0 if self.improved else 1.0)
            add_loops = False
        graph, edge_weight = self._normalized(graph, edge_weight, x.dtype, add_loops,
                                              explain_mask(self, inputs))
        return inputs.node_output(self._propagate(x, graph, edge_weight, None))

    def forward_prefix(self, x: Tensor, graph: Graph, num_dst: int) -> Tensor:
        """``forward(x_all, graph)[:num_dst]`` where ``x`` holds the first rows of
        ``x_all``, all that those outputs read (see ``Graph.dst_prefix``); the degrees
        are the whole graph's. Not while an explainer's mask is set (it follows the
        caller's edges, which this call does not take)."""
        if self.explain:
            raise ValueError("GCNConv.forward_prefix: the layer is being explained (an edge "
                             "mask is set); call it on the whole graph")
        check_input(self, x, self.in_channels)
        graph, edge_weight = self._normalized(graph, None, x.dtype)
        return self._propagate(x, graph, edge_weight, num_dst)

    def _normalized(self, graph: Graph, edge_weight: Tensor | None, dtype,
                    add_loops: bool | None = None, edge_mask: Tensor | None = None):
        """Kipf & Welling's weights (``add_loops``: ``gcn_norm``'s remaining self-loops,
        by default ``add_self_loops``), from the cache where ``cached``; each edge's
        weight times an explainer's ``edge_mask`` where one is set (computed afresh)."""
        if self.normalize:
            if self.cached and self._cached_edge_index is not None and edge_mask is None:
                return self._cached_edge_index
            add_loops = self.add_self_loops if add_loops is None else add_loops
            # PyG's gcn_norm forgets the fill value of 2 when there are no weights
            improved = self.improved and not (self.pyg_improved_loops and edge_weight is None)
            graph, edge_weight = masked_gcn_norm(graph, add_loops, improved, edge_weight, dtype,
                                                 edge_mask)
            if self.cached and edge_mask is None:
                self._cached_edge_index = (graph, edge_weight)
            return graph, edge_weight
        return graph, masked_weights(edge_weight, edge_mask)

    def _propagate(self, x: Tensor, graph: Graph, edge_weight: Tensor | None,
                   num_dst: int | None) -> Tensor:
        if edge_weight is not None:
            edge_weight = edge_weight.to(x.dtype)
        h = torch.sparse.mm(x, self.lin.weight.t()) if x.layout != torch.strided else self.lin(x)
        out = propagate_prefix(graph, edge_weight, h, num_dst)
        # In place: spmm's backward does not read its output, and a second N x F buffer
        # would cost as much as the product itself.
        return out if self.bias is None else out.add_(self.bias)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def with_sparse_adjacency_loops(graph: Graph, edge_weight: Tensor,
                                fill: float) -> tuple[Graph, Tensor]:
    """A + fill I for a ``torch.sparse`` adjacency, as PyG rebuilds it (``gcn_norm``,
    ``SimpleConv``'s self_loop): a loop already in the adjacency gains the fill, one entry
    per matrix position (so a mean counts it once), and every other node gets a loop of
    weight fill; an ``edge_index`` input keeps its loops beside the new ones instead."""
    src, dst = graph.edge_index
    on_diagonal = src == dst
    has_loop = torch.zeros(graph.num_nodes, dtype=torch.bool, device=graph.device)
    has_loop[dst[on_diagonal]] = True
    missing = (~has_loop).nonzero().flatten()
    edge_index = torch.cat([graph.edge_index, missing.expand(2, -1)], dim=1)
    weight = torch.cat([edge_weight + fill * on_diagonal.to(edge_weight.dtype),
                        edge_weight.new_full((missing.numel(),), fill)])
    return Graph._derived(edge_index, graph.num_nodes), weight


def read_weighted_call(layer: torch.nn.Module, x, edge_index, edge_weight: Tensor | None,
                       width: int | None) -> tuple:
    """``(inputs, x, edge_weight)`` of a call on one node set with optional edge weights
    (``read_inputs`` in the layer's flow; x checked against ``width``, None: any)."""
    inputs = read_inputs(layer, x, edge_index)
    if getattr(layer, "normalize", True):  # gcn_norm's error named no layer
        inputs.graph._require_one_node_set(
            f"{type(layer).__name__} (D^-1/2 (A + I) D^-1/2 of one node set)")
    check_input(layer, inputs.x_src, width)
    return inputs, inputs.x_src, weights_from(layer, inputs, edge_weight)


def normalized_call_graph(inputs, edge_weight: Tensor | None, add_self_loops: bool,
                          dtype, edge_mask: Tensor | None = None) -> tuple[Graph, Tensor]:
    """``D^-1/2 (A + I) D^-1/2`` of a call's graph (``read_inputs``), as PyG's ``gcn_norm``
    without ``improved``: the propagation of SGConv, APPNP and GCN2Conv; each edge's weight
    times an explainer's ``edge_mask`` where one is set (``Graph.gcn_norm``)."""
    graph = inputs.graph
    if inputs.adj_layout is not None and add_self_loops:
        graph, edge_weight = with_sparse_adjacency_loops(graph, edge_weight, 1.0)
        add_self_loops = False
    graph, weight = masked_gcn_norm(graph, add_self_loops, False, edge_weight, dtype,
                                    edge_mask)
    return graph, weight.to(dtype)


def masked_gcn_norm(graph: Graph, add_self_loops: bool, improved: bool,
                    edge_weight: Tensor | None, dtype,
                    edge_mask: Tensor | None) -> tuple[Graph, Tensor]:
    """``graph.gcn_norm`` with an explainer's ``edge_mask`` (or ``message_weights``) where
    one is set: the loops it adds weigh 1, and under message weights they are refused
    (their messages have no edge type)."""
    if edge_mask is not None and add_self_loops:
        refuse_added_loops(graph.num_nodes)
    return graph.gcn_norm(add_self_loops, improved, edge_weight, dtype=dtype,
                          edge_mask=edge_mask)


def clear_normalisation_cache(layer: torch.nn.Module) -> None:
    """PyG's cache attributes, emptied: ``_cached_edge_index`` (the first call's
    normalised graph and weights, with ``cached=True``; models clear it by setting it to
    None) and ``_cached_adj_t`` (PyG's torch_sparse cache; graphloc keeps none)."""
    layer._cached_edge_index = None
    layer._cached_adj_t = None
    layer._cached_input = (None, None)  # the graph and weights it was built from


def cached_normalisation(layer: torch.nn.Module, inputs, edge_weight: Tensor | None,
                         dtype, edge_mask: Tensor | None = None) -> tuple[Graph, Tensor]:
    """``normalized_call_graph`` of a call, or with ``cached=True`` the first call's, which
    PyG keeps in ``_cached_edge_index`` and reuses for any later graph (said here:
    ``check_cached_input``). With an explainer's ``edge_mask``, this call's, masked (the
    cache neither read nor filled)."""
    if edge_mask is not None:
        return normalized_call_graph(inputs, edge_weight, layer.add_self_loops, dtype,
                                     edge_mask)
    if layer.cached and layer._cached_edge_index is not None:
        check_cached_input(layer, inputs.graph, edge_weight)
        graph, weight = layer._cached_edge_index
        return graph, weight.to(dtype)
    graph, weight = normalized_call_graph(inputs, edge_weight, layer.add_self_loops, dtype)
    if layer.cached:
        layer._cached_edge_index = (graph, weight)
        layer._cached_input = (inputs.graph, edge_weight)
    return graph, weight


def check_cached_input(layer: torch.nn.Module, graph: Graph,
                       edge_weight: Tensor | None) -> None:
    """``cached=True`` reuses the first graph's normalisation, as PyG's: on another
    graph of the same size that gives the first graph's output, which PyG returns
    without a word. Said here: a warning (PyG's numbers kept), or an error when the
    node counts differ (the cached adjacency cannot take these features)."""
    name = type(layer).__name__
    source, weight = getattr(layer, "_cached_input", (None, None))
    if source is None or (graph is source and edge_weight is weight):
        return  # cache set by hand, or the very same input
    if graph.num_nodes != source.num_nodes:
        raise ValueError(f"{name}(cached=True) normalised a graph of {source.num_nodes} "
                         f"nodes on its first call and reuses it, but this call's graph "
                         f"has {graph.num_nodes}: build it with cached=False to run on "
                         f"several graphs, or clear conv._cached_edge_index")
    if not (_same_tensor(graph.edge_index, source.edge_index)
            and _same_tensor(edge_weight, weight)):
        warnings.warn(f"{name}(cached=True) reuses the normalised adjacency of the first "
                      f"graph it saw ({source.num_edges} edges), but this call's graph or "
                      f"edge weights differ ({graph.num_edges} edges): the output is the "
                      f"first graph's, as PyG's. Build it with cached=False to run on "
                      f"several graphs (a Graph input caches its own normalisation)",
                      stacklevel=caller_stacklevel())


def _same_tensor(a: Tensor | None, b: Tensor | None) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
                      and bool(torch.equal(a, b)))
