"""PyG's calling conventions for the conv layers, read once into a ``ConvInputs``.

A PyG model calls a conv as ``conv(x, edge_index, ..., size=None)`` where

- the graph argument is an ``edge_index [2, E]``, a ``graphloc.Graph``, or a ``torch.sparse``
  adjacency ``adj_t`` of shape ``[N_dst, N_src]`` (COO, CSR or CSC; entry ``(i, j)`` is the
  edge ``j -> i`` and its value the edge weight),
- ``x`` is ``[N, F]``, a pair ``(x_src, x_dst)`` whose ``x_dst`` may be None, or a *static*
  batch ``[B, N, F]`` of feature sets on one graph,
- ``size=(N_src, N_dst)`` fixes the node counts, and ``flow="target_to_source"`` reads
  ``edge_index[0]`` as the destinations,
- a layer's ``node_dim`` attribute, where set (``from_pyg`` copies PyG's), names x's node
  axis: ``-2`` (the default) or ``0``, which are one axis for ``[N, F]`` and for a static
  batch read ``[N, B, F]`` as PyG's ``MessagePassing`` reads it.

``read_inputs`` validates all of it and returns the node features and one ``Graph``: a static
batch becomes ``B`` disjoint copies of the graph over ``B * N`` nodes (so every layer handles
it with its ordinary code), undone by ``ConvInputs.node_output``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from graphloc.checks import check_index, long_edge_index, whole_numbers
from graphloc.graph import Graph, adjacency_entries, graph_of_edges

_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc)
_FLOWS = ("source_to_target", "target_to_source")


@dataclass
class ConvInputs:
    """What a conv computes on: the features and one validated ``Graph``."""

    x_src: Tensor
    x_dst: Tensor | None  # None: a pair (x_src, None), no destination features
    graph: Graph
    adj_values: Tensor | None  # a sparse adjacency's values, in the graph's edge order
    adj_layout: torch.layout | None  # that adjacency's layout (attention is returned in it)
    batch: int | None  # B of a static [B, N, F] input, folded into the nodes
    # flow="target_to_source": the graph is the caller's edge_index reversed
    reversed: bool = False
    # node_dim=0 on a static batch: the caller's x is [N, B, F], computed on as [B, N, F]
    nodes_first: bool = False

    def edge_input(self, t: Tensor | None) -> Tensor | None:
        """A per-edge tensor of the user's graph, repeated for each static copy."""
        if t is None or self.batch is None:
            return t
        return t.repeat(self.batch, *[1] * (t.dim() - 1))

    def node_output(self, out: Tensor) -> Tensor:
        """``[B * N, F]`` back to the static batch's ``[B, N, F]`` (``[N, B, F]`` for
        ``node_dim=0``)."""
        if self.batch is None:
            return out
        out = out.view(self.batch, -1, *out.shape[1:])
        return out.transpose(0, 1) if self.nodes_first else out

    def attention_output(self, edge_index: Tensor, alpha: Tensor):
        """``(edge_index, alpha)``, or for a sparse adjacency input PyG's ``(adj, alpha)``: the
        weights as a sparse ``[N_dst, N_src, H]`` tensor in the input's layout, and alpha in
        that tensor's storage order. The edge_index is the caller's own copy: the graph's
        (cached across calls for the same input) must not change when the caller edits it."""
        if self.batch is not None:
            raise ValueError("attention weights are not returned for a static [B, N, F] "
                             "input; call the layer on each feature set")
        if self.adj_layout is None:  # in the caller's direction (flip copies)
            return (edge_index.flip(0) if self.reversed else edge_index.clone()), alpha
        size = (self.graph.num_nodes, self.graph.num_src_nodes, *alpha.shape[1:])
        adj = torch.sparse_coo_tensor(edge_index.flip(0), alpha, size).coalesce()
        if self.adj_layout == torch.sparse_csr:
            adj = adj.to_sparse_csr()
        elif self.adj_layout == torch.sparse_csc:
            adj = adj.to_sparse_csc()
        return adj, adj.values()


def weights_from(layer: torch.nn.Module, inputs: ConvInputs,
                 edge_weight: Tensor | None) -> Tensor | None:
    """The edge weights of a call: ``edge_weight`` or a sparse adjacency's values (not both,
    which would leave one silently unused), repeated for static copies."""
    if inputs.adj_values is not None:
        if edge_weight is not None:
            raise ValueError(f"{layer.__class__.__name__}: the sparse adjacency carries the "
                             "edge weights as its values; do not pass edge_weight as well")
        if inputs.adj_values.dim() != 1:
            raise ValueError(f"{layer.__class__.__name__} takes one weight per edge, but the "
                             "sparse adjacency has values of shape "
                             f"{list(inputs.adj_values.shape)}")
        return inputs.adj_values
    if edge_weight is not None:
        check_edge_rows(layer, "edge_weight", edge_weight,
                         inputs.graph.num_edges // (inputs.batch or 1))
        # one weight per edge; [E, 1] as PyG reads it (edge_attr passed as the weight). A
        # wider one was read as weights per channel group, a number PyG refuses to give
        if edge_weight.dim() > 1 and math.prod(edge_weight.shape[1:]) == 1:
            edge_weight = edge_weight.reshape(-1)
        if edge_weight.dim() != 1:
            raise ValueError(f"{layer.__class__.__name__}: edge_weight must hold one weight per "
                             f"edge, [E] or [E, 1], got shape {list(edge_weight.shape)}")
    return inputs.edge_input(edge_weight)


def check_edge_rows(layer: torch.nn.Module, name: str, t, num_edges: int) -> None:
    """A per-edge tensor of a call: a tensor with one row per edge (checked as soon as the
    call is read, so that no path of the layer reads a mismatched one, even a path that
    needs no weights, as ChebConv's K = 1)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{layer.__class__.__name__}: {name} must be a torch.Tensor, got "
                        f"{type(t).__name__}")
    rows = t.size(0) if t.dim() else 0
    if t.dim() == 0 or rows != num_edges:
        raise ValueError(f"{layer.__class__.__name__}: {name} has {rows} rows but the graph "
                         f"has {num_edges} edges ({name} has shape {list(t.shape)})")


def refuse_edge_attr_without_edge_dim(layer: torch.nn.Module, edge_attr) -> None:
    """A call's ``edge_attr`` to a layer built without ``edge_dim`` would enter no score:
    an error naming ``edge_dim`` (PyG's GATv2Conv fails an assert there, its
    TransformerConv on shapes). A Graph's own edge features are not the call's."""
    if edge_attr is not None and layer.edge_dim is None:
        shape = list(getattr(edge_attr, "shape", ()))
        raise ValueError(f"{type(layer).__name__} was built without edge_dim, so the "
                         f"edge_attr of shape {shape} would be ignored; build it with "
                         f"edge_dim={shape[-1] if len(shape) > 1 else 1}")


def edge_features_from(layer: torch.nn.Module, inputs: ConvInputs,
                       edge_attr: Tensor | None) -> Tensor | None:
    """A call's edge features: ``edge_attr`` (rows in the edge order of the graph argument:
    a sparse adjacency's storage order), else a sparse adjacency's values ([E] or [E, D]),
    else the Graph's own; repeated for static copies."""
    if edge_attr is not None:
        check_edge_rows(layer, "edge_attr", edge_attr,
                         inputs.graph.num_edges // (inputs.batch or 1))
        return inputs.edge_input(edge_attr)
    if inputs.adj_values is not None:
        return inputs.adj_values
    return inputs.graph.edge_attr


def edge_feature_rows(layer: torch.nn.Module, inputs: ConvInputs, edge_attr: Tensor | None,
                      width: int, option: str) -> Tensor | None:
    """A call's edge features as ``[E, D]`` rows in the graph's edge order, or None where
    there are none: ``edge_attr`` (rows checked), else a sparse adjacency's values when
    they are ``[E, D]`` (PyG's reading: values ``[E]`` are weights, which the layer does
    not take), else the Graph's own. ``[E]`` features are one column; ``D`` is checked
    against ``width`` (0: any, a lazy map), the error naming the layer's ``option``."""
    if edge_attr is not None:
        check_edge_rows(layer, "edge_attr", edge_attr,
                        inputs.graph.num_edges // (inputs.batch or 1))
        edge_attr = inputs.edge_input(edge_attr)
    elif inputs.adj_values is not None:
        edge_attr = inputs.adj_values if inputs.adj_values.dim() > 1 else None
    else:
        edge_attr = inputs.graph.edge_attr
    if edge_attr is None:
        return None
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.unsqueeze(-1)
    if edge_attr.dim() != 2 or (width and edge_attr.size(1) != width):
        raise ValueError(f"{type(layer).__name__}: edge_attr has shape "
                         f"{list(edge_attr.shape)} but the layer takes {width} features per "
                         f"edge ({option}={width})")
    return edge_attr


def required_edge_feature_rows(layer: torch.nn.Module, inputs: ConvInputs,
                               edge_attr: Tensor | None, width: int, option: str,
                               what: str = "edge features") -> Tensor:
    """``edge_feature_rows`` for a layer that cannot run without them: none is a
    ``ValueError`` naming ``what`` the layer needs (its ``width``, 0 for any)."""
    rows = edge_feature_rows(layer, inputs, edge_attr, width, option)
    if rows is None:
        shape = f"[E, {width}]" if width else "[E, D]"
        raise ValueError(f"{type(layer).__name__} needs {what}: pass edge_attr {shape} (or a "
                         "Graph or sparse adjacency that carries them)")
    return rows


def mapped_edge_features(layer: torch.nn.Module, lin: torch.nn.Module,
                         edge_attr: Tensor) -> Tensor:
    """``lin(edge_attr)`` for edge features ``[E, D]``: ``D`` checked against the map's
    input width (a mismatch failed in torch's matmul, naming no argument), integer features
    (bond types, say) and those of another float dtype taken in the map's, as the
    attention convs take them."""
    width = getattr(lin, "in_features", 0)  # 0: a lazy map, its width set by this call
    if width and edge_attr.size(-1) != width:
        raise ValueError(f"{type(layer).__name__}: edge_attr has {edge_attr.size(-1)} "
                         f"features per edge but the layer maps {width} (its edge_dim)")
    if not edge_attr.is_floating_point() or not torch.is_autocast_enabled(
            edge_attr.device.type):  # (autocast casts floats for the map itself)
        edge_attr = edge_attr.to(lin.weight.dtype)
    return lin(edge_attr)


def relu_edge_messages(layer: torch.nn.Module, graph: Graph, x_src: Tensor,
                       edge_attr: Tensor, lin: torch.nn.Module | None) -> Tensor:
    """``ReLU(x_j + lin(e_ji))`` per edge, ``[E, C]`` in the graph's CSR order (GINE's and
    GENConv's messages): edge features ``[E]`` or ``[E, D]``, their rows checked, mapped by
    ``lin`` where given, else of ``x_src``'s width."""
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.unsqueeze(-1)
    check_edge_rows(layer, "edge_attr", edge_attr, graph.num_edges)
    if lin is not None:
        edge_attr = mapped_edge_features(layer, lin, edge_attr)
    if edge_attr.size(-1) != x_src.size(-1):
        hint = "set edge_dim to map them" if lin is None else "the edge map's output width"
        raise ValueError(f"{type(layer).__name__}: edge_attr has {edge_attr.size(-1)} "
                         f"features but x has {x_src.size(-1)} ({hint})")
    return torch.relu(x_src.index_select(0, graph.csr.indices.long())
                      + graph.to_csr_order(edge_attr))


def relation_types(layer: torch.nn.Module, inputs, edge_type: Tensor | None,
                   num_relations: int) -> Tensor:
    """A call's relation per edge: ``edge_type`` (one per edge of the graph argument, in an
    adjacency's storage order), or without it a sparse adjacency's values (PyG's reading of
    a ``SparseTensor``), checked to lie in ``[0, num_relations)``."""
    owner = type(layer).__name__
    if edge_type is None:
        if inputs.adj_values is None:
            raise ValueError(f"{owner} needs edge_type, one relation per edge (or a "
                             "torch.sparse adjacency whose values are the relations)")
        if inputs.adj_values.dim() != 1:
            raise ValueError(f"{owner} reads a sparse adjacency's values as the edge types, "
                             f"one per entry; got values of shape "
                             f"{list(inputs.adj_values.shape)}")
        edge_type = whole_numbers(inputs.adj_values.detach(),
                                  f"{owner}: the adjacency's values (the edge types)")
    else:
        check_edge_rows(layer, "edge_type", edge_type,
                        inputs.graph.num_edges // (inputs.batch or 1))
        edge_type = inputs.edge_input(edge_type)
    if edge_type.dim() != 1 or edge_type.is_floating_point() or \
            edge_type.dtype == torch.bool or edge_type.is_complex():
        raise TypeError(f"{owner}: edge_type must be a 1-D integer tensor, got "
                        f"{edge_type.dtype} {list(edge_type.shape)}")
    check_index(edge_type, num_relations,
                f"{owner}: edge_type (relations 0 .. {num_relations - 1})")
    return edge_type


def require_destination(layer: torch.nn.Module, x_dst: Tensor | None, why: str) -> Tensor:
    """``x_dst`` of a layer whose messages or scores read the destination's features
    (``why`` says how): a pair ``(x_src, None)`` is refused by name (PyG's fails on None
    deep in a product, or the layer read the sources' rows in their place)."""
    if x_dst is None:
        raise ValueError(f"{type(layer).__name__}: {why}, so a pair (x_src, None) has no "
                         "destination features; pass (x_src, x_dst)")
    return x_dst


def check_flow(owner: str, flow) -> str:
    """``flow`` checked when a layer is built, as PyG's ``MessagePassing`` checks it."""
    if not isinstance(flow, str) or flow not in _FLOWS:
        raise ValueError(f"{owner}: flow must be one of {_FLOWS}, got {flow!r}")
    return flow


def read_inputs(layer: torch.nn.Module, x, edge_index, size=None) -> ConvInputs:
    """Reads one call of ``layer`` in PyG's conventions (module docstring) and in the
    layer's ``flow``; errors name the layer and the offending argument."""
    name = layer.__class__.__name__
    flow = check_flow(name, layer.flow)  # an attribute, so also checked when set later
    x_src, x_dst, pair = _features(name, x)
    nodes_first = _nodes_first(name, getattr(layer, "node_dim", -2), x_src.dim())
    if nodes_first:  # [N, B, F] -> [B, N, F]
        x_src = x_src.transpose(0, 1)
        x_dst = x_dst if x_dst is None else x_dst.transpose(0, 1)
    if pair and flow != "source_to_target":
        # PyG then reads messages from x[1] by edge_index[1] but still adds a root term
        # from x[1] to outputs sized by x[0]: defined only for equal sizes, so refused.
        raise ValueError(f"{name}: flow={flow!r} is not defined for a bipartite pair "
                         "(x_src, x_dst); pass edge_index.flip(0) with the default flow")
    batch = None
    if x_src.dim() == 3:  # static graph: [B, N, F] feature sets on one graph
        batch, node_axis = x_src.size(0), 0 if nodes_first else 1
        x_src = x_src.reshape(-1, x_src.size(-1))
        if x_dst is not None:
            x_dst = x_src if not pair else _fold_static(name, x_dst, batch)
    if isinstance(edge_index, Graph):
        graph, values, layout = _given_graph(name, edge_index, flow, size), None, None
        if batch is not None:
            graph = _static_copies(name, graph.edge_index, batch, graph.num_src_nodes,
                                   graph.num_nodes, graph.is_bipartite, graph.edge_attr,
                                   node_axis)
        _check_rows(name, graph, x_src, x_dst, batch)
        return ConvInputs(x_src, x_dst, graph, None, None, batch, nodes_first=nodes_first)
    edges, values, layout, adj_size = _edges(name, edge_index, flow)
    n_src = x_src.size(0) // (batch or 1)
    n_dst = _num_destinations(name, edges, n_src, x_dst, pair, size, adj_size, batch)
    if batch is not None:
        graph = _static_copies(name, edges, batch, n_src, n_dst, pair, None, node_axis)
        values = None if values is None else values.repeat(batch)
    elif layout is not None:  # the entries of a sparse adjacency, read at each call
        graph = Graph.bipartite(edges, (n_src, n_dst)) if pair else Graph(edges, num_nodes=n_src)
    else:  # the caller's edge_index: its Graph built once while it stays unchanged
        graph = graph_of_edges(edge_index, n_dst if pair else n_src, n_src if pair else None,
                               flip=flow == "target_to_source")
    return ConvInputs(x_src, x_dst, graph, values, layout, batch,
                      reversed=flow == "target_to_source", nodes_first=nodes_first)


def _nodes_first(name: str, node_dim, x_dims: int) -> bool:
    """Whether ``node_dim`` puts the nodes first in a static batch (``[N, B, F]``); any
    axis but the two that can hold x's nodes is refused by name (PyG would gather
    features or batch entries as though they were nodes)."""
    axes = {2: (0, -2), 3: (1, -2, 0, -3)}[x_dims]
    if isinstance(node_dim, bool) or not isinstance(node_dim, int) or node_dim not in axes:
        raise ValueError(f"{name}: node_dim={node_dim!r} does not name the node axis of x "
                         f"with {x_dims} dimensions (one of {axes})")
    return x_dims == 3 and node_dim in (0, -3)


def read_one_node_set(layer: torch.nn.Module, x, edge_index, why: str) -> ConvInputs:
    """``read_inputs`` for a layer whose messages read ``x_i`` and ``x_j`` of one node set
    (``why`` says how): a pair ``(x_src, x_dst)`` and a bipartite graph are refused by name."""
    name = layer.__class__.__name__
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: x must be one tensor [N, F] ({why}), got {type(x).__name__}")
    inputs = read_inputs(layer, x, edge_index)
    inputs.graph._require_one_node_set(f"{name} ({why})")
    return inputs


def _features(name: str, x) -> tuple[Tensor, Tensor | None, bool]:
    if isinstance(x, (tuple, list)):
        if len(x) != 2 or not isinstance(x[0], Tensor) or not (
                x[1] is None or isinstance(x[1], Tensor)):
            raise TypeError(f"{name} expects x as a tensor or a pair (x_src, x_dst) of "
                            f"tensors (x_dst may be None), got "
                            f"{[type(t).__name__ for t in x]}")
        x_src, x_dst = x
        if x_dst is not None and x_dst.dim() != x_src.dim():
            raise ValueError(f"{name}: x_src has shape {list(x_src.shape)} but x_dst has "
                             f"{list(x_dst.shape)}")
        pair = True
    elif isinstance(x, Tensor):
        x_src = x_dst = x
        pair = False
    else:
        raise TypeError(f"{name} expects node features x as a tensor, got {type(x).__name__}")
    if x_src.dim() not in (2, 3):
        raise ValueError(f"{name} expects x of shape [N, F] (or a static batch [B, N, F]), "
                         f"got {list(x_src.shape)}")
    return x_src, x_dst, pair


def _fold_static(name: str, x: Tensor, batch: int) -> Tensor:
    if x.dim() != 3 or x.size(0) != batch:
        raise ValueError(f"{name}: static inputs need x_src and x_dst of shape [B, N, F] with "
                         f"one B, got B = {batch} and {list(x.shape)}")
    return x.reshape(-1, x.size(-1))


def _given_graph(name: str, graph: Graph, flow: str, size) -> Graph:
    if flow != "source_to_target":
        raise ValueError(f"{name}: flow={flow!r} applies to an edge_index; a Graph has its "
                         "direction already (reverse it with Graph.reverse())")
    if size is not None and tuple(size) != (graph.num_src_nodes, graph.num_nodes):
        raise ValueError(f"{name}: size={tuple(size)} but the Graph has "
                         f"{graph.num_src_nodes} source and {graph.num_nodes} destination "
                         "nodes")
    return graph


def _check_rows(name: str, graph: Graph, x_src: Tensor, x_dst: Tensor | None, batch) -> None:
    copies = "" if batch is None else f" ({batch} static copies)"
    if x_src.size(0) != graph.num_src_nodes:
        raise ValueError(f"{name}: x has {x_src.size(0)} rows but the graph{copies} has "
                         f"{graph.num_src_nodes} source nodes")
    if x_dst is not None and x_dst is not x_src and x_dst.size(0) != graph.num_nodes:
        raise ValueError(f"{name}: x_dst has {x_dst.size(0)} rows but the graph{copies} has "
                         f"{graph.num_nodes} destination nodes")


def _edges(name: str, edge_index, flow: str):
    """(edge_index [2, E] source -> destination, sparse values or None, sparse layout or
    None, the adjacency's (N_src, N_dst) or None)."""
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"{name} expects the graph as an edge_index tensor, a graphloc.Graph "
                        f"or a torch.sparse adjacency, got {type(edge_index).__name__}")
    if edge_index.layout in _SPARSE_LAYOUTS:
        if flow != "source_to_target":
            raise ValueError(f"{name}: flow={flow!r} is not defined for a sparse adjacency "
                             "(adj_t's rows are the destinations)")
        dst, src, values = adjacency_entries(edge_index, f"{name}: a sparse adjacency")
        n_dst, n_src = edge_index.shape[:2]
        return torch.stack([src, dst]), values, edge_index.layout, (n_src, n_dst)
    if edge_index.layout != torch.strided:
        raise TypeError(f"{name}: unsupported graph layout {edge_index.layout}")
    if flow == "target_to_source" and edge_index.dim() == 2 and edge_index.size(0) == 2:
        edge_index = edge_index.flip(0)
    return edge_index, None, None, None


def _num_destinations(name, edges, n_src, x_dst, pair, size, adj_size, batch) -> int:
    """The destination count from x_dst, size= or the adjacency, checked for agreement; for
    a pair without x_dst and no size, PyG's largest destination index + 1."""
    if size is not None:
        if not isinstance(size, (tuple, list)) or len(size) != 2:
            raise ValueError(f"{name}: size must be (num_src_nodes, num_dst_nodes), got "
                             f"{size!r}")
        if size[0] is not None and size[0] != n_src:
            raise ValueError(f"{name}: size[0] = {size[0]} but x has {n_src} source rows")
    known = []  # (where it comes from, count)
    if adj_size is not None:
        if adj_size[0] != n_src:
            raise ValueError(f"{name}: the sparse adjacency has {adj_size[0]} columns (source "
                             f"nodes) but x has {n_src} rows")
        known.append(("the sparse adjacency", adj_size[1]))
    if size is not None and size[1] is not None:
        known.append(("size[1]", size[1]))
    if x_dst is not None:
        known.append(("x_dst" if pair else "x", x_dst.size(0) // (batch or 1)))
    for (where, n), (other, m) in zip(known, known[1:], strict=False):
        if n != m:
            raise ValueError(f"{name}: {where} gives {n} destination nodes but {other} "
                             f"gives {m}")
    if known:
        return known[0][1]
    # (x_src, None) without a size: as PyG, up to the largest destination index
    return int(edges[1].max()) + 1 if edges.numel() else 0


def _static_copies(name: str, edges: Tensor, batch: int, n_src: int, n_dst: int,
                   bipartite: bool, edge_attr: Tensor | None, node_axis: int) -> Graph:
    """``batch`` disjoint copies of a graph: copy b's nodes are offset by ``b * n``."""
    if not isinstance(edges, Tensor) or edges.dim() != 2 or edges.size(0) != 2:
        shape = list(edges.shape) if isinstance(edges, Tensor) else type(edges).__name__
        raise ValueError(f"edge_index must have shape [2, E], got {shape}")
    _check_copy_edges(name, edges, (n_src, n_dst), node_axis)
    step = torch.tensor([[n_src], [n_dst]], device=edges.device)
    copies = torch.cat([edges.long() + b * step for b in range(batch)], dim=1)
    attr = None if edge_attr is None else edge_attr.repeat(batch, *[1] * (edge_attr.dim() - 1))
    # in range by construction from the checked copy: not validated again
    return Graph._derived(copies, batch * n_dst, batch * n_src if bipartite else None, attr)


def _check_copy_edges(name: str, edges: Tensor, counts: tuple[int, int], node_axis: int):
    """The edges of one static copy: integers within its node counts, checked before the
    copies are offset (``long()`` truncated float indices, and an out-of-range index in
    the copies named no index the caller passed)."""
    if edges.dtype.is_floating_point or edges.dtype.is_complex or edges.dtype == torch.bool:
        raise TypeError(f"{name}: edge_index must have an integer dtype, got {edges.dtype}")
    if not edges.numel() or torch.compiler.is_compiling():  # traced: the kernels check them
        return
    edges = long_edge_index(edges, f"{name}: edge_index")  # aminmax takes no unsigned ints
    low, high = torch.aminmax(edges, dim=1)
    for side in (0, 1):
        if low[side] < 0:
            col = int((edges[side] < 0).nonzero()[0])
            raise ValueError(f"{name}: edge_index[{side}] holds {int(low[side])} at column "
                             f"{col}; indices must be >= 0")
        if high[side] >= counts[side]:
            col = int((edges[side] >= counts[side]).nonzero()[0])
            raise ValueError(f"{name}: edge_index[{side}] holds {int(high[side])} at column "
                             f"{col}, but each feature set of the static batch has "
                             f"{counts[side]} nodes on x's axis {node_axis}")


def point_pair(layer: torch.nn.Module, x) -> tuple[Tensor, Tensor, bool]:
    """``(x_src, x_dst, bipartite)`` of a conv that builds its own graph from its points:
    ``x`` or a pair, each ``[N, F]``."""
    name = type(layer).__name__
    bipartite = isinstance(x, (tuple, list))
    if bipartite and len(x) != 2:
        raise ValueError(f"{name}: x must be a tensor or a pair (x_src, x_dst), got "
                         f"{len(x)} entries")
    x_src, x_dst = x if bipartite else (x, x)
    for side, t in (("x", x_src), ("x_dst", x_dst)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {side} must be a tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name}: {side} must be [num_points, features] (static graphs "
                             f"are not supported, as in PyG), got shape {list(t.shape)}")
    return x_src, x_dst, bipartite


def batch_pair(layer: torch.nn.Module, batch) -> tuple:
    """The example ids of the source and destination points: ``batch`` for both, or a
    pair."""
    if batch is None or isinstance(batch, Tensor):
        return batch, batch
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    raise TypeError(f"{type(layer).__name__}: batch must be a tensor of example ids, a pair "
                    f"of them or None, got {type(batch).__name__}")
