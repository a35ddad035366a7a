"""``Graph``: an edge list validated once, with the sparse layouts the kernels read.

Edges follow PyG's convention: ``edge_index[0]`` holds sources, ``edge_index[1]``
destinations, and messages flow source -> destination. The kernels pull over a
destination-major CSR (row ``i`` lists the edges into ``i``); ``csr_perm`` maps each CSR
position back to the user's edge id, so edge tensors stay in the user's order everywhere in
the public API. The transpose (source-major, for backward passes), degrees and GCN
normalisation are built on first use and cached. A Graph is immutable: methods that change
structure return a new Graph.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_index, check_int, is_int_at_least, long_edge_index
from graphloc.ops import scatter

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class _TransposedKey:
    """The cache key of ``Graph.keep_transposed``'s values: the id of their tensor."""

    tensor_id: int


@dataclass
class _Transposed:
    """Values kept by ``Graph.keep_transposed``: the tensor (held, so that its id is not
    reused while the entry lives), and its copy in the transpose's order once made, with the
    tensor's version at that time."""

    values: Tensor
    copy: Tensor | None = None
    version: int = -1


@dataclass
class _Cached:
    """A ``Graph.cached`` value and the versions of the tensors it holds when it was built
    (``_versions_of``)."""

    value: object
    versions: tuple


def _versions_of(value) -> tuple:
    """The ``_version`` of every tensor in ``value``: itself, or held in a tuple or list, a
    dataclass's fields (CSR, a model's precomputed inputs) or a Graph's edges, in a fixed
    order. Dicts are not looked into (a model's own mutable holder)."""
    if isinstance(value, Tensor):
        return (value._version,)
    if isinstance(value, (tuple, list)):
        return sum((_versions_of(item) for item in value), ())
    if isinstance(value, CSR):  # common cases first: a hit took 0.8-1.8 us (0.35-0.5 before)
        return (value.indptr._version, value.indices._version,
                -1 if value.perm is None else value.perm._version)
    if isinstance(value, Graph):
        return (value.edge_index._version, *_versions_of(value._csr))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(v for field in dataclasses.fields(value)
                     for v in _versions_of(getattr(value, field.name)))
    return ()


@dataclass(frozen=True)
class CSR:
    """A compressed sparse row layout: row ``r`` owns positions ``indptr[r]:indptr[r+1]``.

    ``indices[p]`` is the column at position ``p``; ``perm[p]`` the position's id in the
    layout it was built from (the user's edge id for ``Graph.csr``, the CSR position for
    ``Graph.csc``), or None when that is ``p`` itself.
    """

    indptr: Tensor
    indices: Tensor
    perm: Tensor | None

    def to(self, device) -> CSR:
        move = (lambda t: None if t is None else t.to(device))  # noqa: E731
        return CSR(move(self.indptr), move(self.indices), move(self.perm))

    def degree(self) -> Tensor:
        return self.indptr[1:] - self.indptr[:-1]


def _outside_inference_mode():
    """A context that makes tensors outside ``torch.inference_mode`` even when entered inside
    it: a graph's arrays and caches outlive the call that made them, and an inference tensor
    among them breaks every later backward that saves it (a graph built or first evaluated
    under inference mode, then trained on). (Not traced: torch.compile runs no inference
    mode, and breaks on the query.)"""
    if not torch.compiler.is_compiling() and torch.is_inference_mode_enabled():
        return torch.inference_mode(False)
    return contextlib.nullcontext()


def _outside_functorch():
    """A context without torch.func's transforms: a graph's caches hold structure only
    (nothing of the features being differentiated), and built inside ``grad`` or ``vmap``
    they would hold the transform's wrapper tensors, unusable after it (and unreadable by
    the NumPy preprocessing of some models)."""
    if not torch.compiler.is_compiling() and torch._C._are_functorch_transforms_active():
        return torch._C._DisableFuncTorch()
    return contextlib.nullcontext()


def _normal_tensor(t: Tensor | None) -> Tensor | None:
    """``t``, or a normal copy of an inference tensor (one made under inference mode) that a
    graph would keep; called outside inference mode."""
    if t is None or torch.compiler.is_compiling() or not t.is_inference():
        return t
    return t.clone()


def degree_power(deg: Tensor, exponent: float) -> Tensor:
    """``deg ** exponent`` (a negative exponent), 0 where the degree is 0, as PyG's
    normalisations. The power is taken of 1 there, not of 0: ``pow(0, -0.5)`` is inf, whose
    gradient, masked to 0, became 0 * inf = NaN for learnable edge weights summing to 0 at
    a node (PyG's ``gcn_norm`` has that trap)."""
    empty = deg == 0
    return deg.masked_fill(empty, 1.0).pow(exponent).masked_fill(empty, 0.0)


def _node_count(value, name: str) -> int:
    """An integer node count (a 0-d integer tensor or numpy integer too); a float such as
    3.9 or a bool is refused rather than truncated."""
    if isinstance(value, Tensor):
        if value.dim() == 0 and not value.is_floating_point() and not value.is_complex() \
                and value.dtype != torch.bool:
            return int(value)
    elif not isinstance(value, bool) and hasattr(value, "__index__"):
        return int(value.__index__())
    raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")


def _edge_number(attrs: dict, key: str, u, v) -> float:
    """A numeric edge attribute of a networkx edge, or an error naming the edge and key."""
    if key not in attrs:
        raise ValueError(f"edge {u!r} -> {v!r} has no attribute {key!r}")
    try:
        return float(attrs[key])
    except (TypeError, ValueError):
        raise ValueError(f"edge {u!r} -> {v!r} has a non-numeric {key!r}: "
                         f"{attrs[key]!r}") from None


def _warn_of_rounded_whole_numbers(exact: Tensor, stored: Tensor, keys: list) -> None:
    """A column of whole numbers (timestamps, ids, counts) that float32 ``edge_attr`` does
    not hold exactly, said by name: 1700000123 became 1700000128 without a word. Fractions
    round as any float32 feature does and are not said."""
    for column, key in enumerate(keys):
        values = exact[:, column]
        if not bool((values == values.round()).all()):
            continue
        moved = (stored[:, column].double() != values).nonzero()
        if moved.numel():
            first = values[moved[0, 0]].item()
            warnings.warn(f"edge attribute {key!r} holds whole numbers that float32 edge_attr "
                          f"rounds ({first:.0f} becomes "
                          f"{stored[moved[0, 0], column].item():.0f}); shift or scale them "
                          "first (a timestamp minus the first one, say) to keep them exact",
                          stacklevel=3)


def _check_traced_edge_index(edge_index) -> None:
    """The checks of ``_validated_edge_index`` that read no values (dtype and shape)."""
    if not isinstance(edge_index, Tensor) or edge_index.dtype.is_floating_point or \
            edge_index.dtype.is_complex or edge_index.dtype == torch.bool:
        got = edge_index.dtype if isinstance(edge_index, Tensor) else type(edge_index).__name__
        raise TypeError(f"edge_index must be an integer tensor, got {got}")
    _check_edge_index_shape(edge_index)


def _check_edge_index_shape(edge_index: Tensor) -> None:
    if edge_index.dim() == 2 and edge_index.size(0) == 2:
        return
    pairs = edge_index.dim() == 2 and edge_index.size(1) == 2
    hint = " (an [E, 2] list of pairs: pass edge_index.t())" if pairs else ""
    raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}{hint}")


def check_edge_index(edge_index, num_nodes: int, num_src_nodes: int | None = None) -> None:
    """Raises, naming the column, unless ``edge_index`` is an integer ``[2, E]`` tensor of
    source ids below ``num_src_nodes`` (``num_nodes`` when None) and destination ids below
    ``num_nodes``."""
    _validated_edge_index(edge_index, num_nodes, num_src_nodes)


def _validated_edge_index(edge_index, num_nodes, num_src_nodes=None):
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"edge_index must be a torch.Tensor, got {type(edge_index).__name__}")
    if edge_index.layout != torch.strided:  # (torch's own error named aten::aminmax)
        raise TypeError(f"edge_index must be a dense [2, E] tensor of edges, got a "
                        f"{edge_index.layout} tensor of shape {list(edge_index.shape)}; for a "
                        f"sparse adjacency matrix adj, Graph(adj.to_sparse_coo().coalesce()"
                        f".indices(), num_nodes) has its edges row -> column")
    if edge_index.device.type == "meta":
        raise ValueError("edge_index is on the meta device (shapes without values): a Graph "
                         "reads its edges' values")
    if edge_index.dtype.is_floating_point or edge_index.dtype.is_complex \
            or edge_index.dtype == torch.bool:
        raise TypeError(f"edge_index must have an integer dtype, got {edge_index.dtype}")
    _check_edge_index_shape(edge_index)
    edge_index = long_edge_index(edge_index)
    inferred = num_nodes is None
    if inferred:
        num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
    num_nodes = _node_count(num_nodes, "num_nodes")
    if num_nodes < 0:  # (0 given explicitly is the empty graph)
        raise ValueError(f"num_nodes must be >= 0, got num_nodes={num_nodes}")
    if num_nodes == 0 and inferred:
        raise ValueError("a graph needs at least one node, got num_nodes=0 (edge_index is "
                         "empty: pass num_nodes=0 for an empty graph)")
    sizes = (num_nodes if num_src_nodes is None else num_src_nodes, num_nodes)
    if edge_index.numel():
        low, high = torch.aminmax(edge_index, dim=1)
        for side, what in ((0, "source"), (1, "destination")):
            if low[side] < 0:
                col = int((edge_index[side] < 0).nonzero()[0])
                raise ValueError(f"edge_index[{side}] holds {int(low[side])} at column {col}; "
                                 "indices must be >= 0")
            if high[side] >= sizes[side]:
                col = int((edge_index[side] >= sizes[side]).nonzero()[0])
                nodes = f"{sizes[side]} nodes" if num_src_nodes is None \
                    else f"{sizes[side]} {what} nodes"
                raise ValueError(f"edge_index[{side}] holds {int(high[side])} at column {col} "
                                 f"but the graph has {nodes}")
    return edge_index, num_nodes


def _csr_of(dst: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """``ops.coo_to_csr`` of validated destinations. Its row pointer has num_nodes + 1
    entries: raw ids (OpenStreetMap's node ids reach 10^10) make num_nodes the largest id
    plus one, and building it failed with torch's bare out-of-memory or size-overflow
    message. Refused first where the row pointer and the sort's int64 count per row outgrow
    the machine's memory: counting the row pointer alone let 2^31 nodes through on a 24 GiB
    machine, whose process the kernel then killed."""
    need = (dst.element_size() + 8) * (num_nodes + 1)
    if need > _physical_memory():
        raise ValueError(
            f"a graph of num_nodes={num_nodes} needs {need / 1e9:.3g} GB for its row pointer "
            f"and the sort's counts alone, more than this machine's memory "
            f"({_physical_memory() / 1e9:.3g} GB). Node ids must be 0 .. N-1: relabel raw "
            f"ids first (ids, edge_index = torch.unique(edge_index, return_inverse=True))")
    return ops.coo_to_csr(dst, num_nodes, validated=True)


@functools.cache
def _physical_memory() -> float:
    """Bytes of physical memory (infinite where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return math.inf


def networkx_node_order(g, nodes) -> tuple[list, tuple[int, object] | None]:
    """``(order, moved)``: ``nodes`` as a list, checked to hold each of ``g``'s nodes once,
    or ``g.nodes`` order when None. ``moved``: for ``g.nodes`` order (nodes None), the
    (row, node) of the first node that is not its own row where the nodes are exactly the
    integer labels 0 .. N-1; None otherwise (given, in order, or labels of another kind)."""
    if nodes is None:
        order = list(g.nodes)
        return order, _first_label_out_of_place(order)
    order = list(nodes)
    listed = set(order)
    if len(order) != g.number_of_nodes() or listed != set(g.nodes):
        missing = [n for n in g.nodes if n not in listed]
        extra = [n for n in order if n not in g]
        what = f"lacks node {missing[0]!r}" if missing else f"holds {extra[0]!r}, not a node " \
            "of the graph" if extra else "holds a node more than once"
        raise ValueError(f"nodes must list each of the graph's {g.number_of_nodes()} nodes "
                         f"once; it {what}")
    return order, None


def adjacency_entries(adj: Tensor, what: str = "the sparse adjacency"
                      ) -> tuple[Tensor, Tensor, Tensor]:
    """``(rows, cols, values)`` of a 2-D torch.sparse matrix (COO, CSR or CSC; values may
    have dense dimensions), one entry per matrix position: duplicate positions summed, as
    torch's own ``to_dense`` and ``@`` read them. Neither the COO's coalesced flag nor a
    compressed layout's order is taken on trust, since neither is checked by torch (PyG's
    GATConv marks a caller's uncoalesced adjacency coalesced in place, duplicates and all),
    and a duplicate read as two edges changes what attention and max aggregations compute.
    Entries already unique keep their storage order, sorted or not (an uncoalesced COO's
    included): a caller's per-edge tensor (a conv's ``edge_attr``) follows that order.
    Values that require grad keep their gradient (every step here is differentiable in
    them). ``what`` names ``adj`` in the error for anything but a matrix (a batched CSR, a
    1-D sparse tensor)."""
    if adj.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc) and (
            adj.sparse_dim() != 2 or adj.dim() - adj.dense_dim() != 2):  # batch dims of a CSR
        raise ValueError(f"{what} must be a matrix [N_dst, N_src] (with optional dense value "
                         f"dimensions), got shape {list(adj.shape)} with {adj.sparse_dim()} "
                         f"sparse dimensions")
    if adj.layout == torch.sparse_coo and not adj.is_coalesced():
        # values() refuses an uncoalesced tensor and _values() has no gradient: the
        # coalesced values, read back in storage order where the entries are unique
        (rows, cols), merged = adj._indices(), adj.coalesce()
        return _storage_order_entries(rows.long(), cols.long(), merged, adj.size(1))
    if adj.layout == torch.sparse_coo:
        (rows, cols), values = adj.indices(), adj.values()
    elif adj.layout == torch.sparse_csr:
        ptr, cols, values = adj.crow_indices(), adj.col_indices(), adj.values()
        rows = torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device),
                                       ptr.diff())
    elif adj.layout == torch.sparse_csc:
        ptr, rows, values = adj.ccol_indices(), adj.row_indices(), adj.values()
        cols = torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device),
                                       ptr.diff())
    else:
        raise TypeError(f"expected a torch.sparse COO, CSR or CSC matrix, got layout "
                        f"{adj.layout}")
    rows, cols = rows.long(), cols.long()
    major, minor, span = (cols, rows, adj.size(0)) if adj.layout == torch.sparse_csc \
        else (rows, cols, adj.size(1))
    key = major * span + minor
    if key.numel() < 2 or bool((key[1:] > key[:-1]).all()):
        return rows, cols, values
    merged = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, adj.shape).coalesce()
    return _storage_order_entries(rows, cols, merged, adj.size(1))


def _storage_order_entries(rows: Tensor, cols: Tensor, merged: Tensor,
                           num_cols: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(rows, cols, values)`` of a matrix from its entries in storage order and its
    coalesced COO ``merged``: in storage order when no position repeats, else ``merged``'s
    (a repeated position is one entry, its values summed)."""
    merged_rows, merged_cols = merged.indices()
    if merged_rows.numel() != rows.numel():
        return merged_rows, merged_cols, merged.values()
    where = torch.searchsorted(merged_rows * num_cols + merged_cols, rows * num_cols + cols)
    return rows, cols, merged.values()[where]


def sparse_edges_key(data) -> str | None:
    """The attribute of a PyG Data whose torch.sparse matrix holds its edges: a sparse
    ``edge_index`` or ``adj_t`` (entry (i, j) the edge j -> i, as PyG's layers read them),
    else ``adj`` (entry (i, j) the edge i -> j); None where none is a sparse matrix."""
    for key in ("edge_index", "adj_t", "adj"):
        value = getattr(data, key, None)
        if isinstance(value, Tensor) and value.layout != torch.strided:
            return key
    return None


def pyg_data_with_edges(data, where: str = "the PyG Data"):
    """``data`` itself where it has an ``edge_index``; a Data whose edges are a sparse
    ``adj_t`` (PyG's ``ToSparseTensor``: entry (i, j) is the edge j -> i) or ``adj`` (entry
    (i, j) the edge i -> j), as torch sparse tensors, as a copy with the edge_index of their
    entries (``adjacency_entries``: a repeated entry is one edge). The values go back where
    ``ToSparseTensor`` took them from: one per edge to ``edge_weight`` (unless all 1, its
    fill where the Data had none), rows of several to ``edge_attr``. An ``edge_index`` that
    is itself a torch.sparse matrix is read as PyG's layers read it, as an ``adj_t``."""
    edge_index = getattr(data, "edge_index", None)
    if isinstance(edge_index, Tensor) and edge_index.layout == torch.strided:
        return data
    key = sparse_edges_key(data)
    if key is not None:
        rows, cols, values = adjacency_entries(data[key], f"{where}: {key}")
        data = data.clone()
        del data[key]  # (first: the key may be edge_index itself)
        data.edge_index = torch.stack([rows, cols] if key == "adj" else [cols, rows])
        if values.dim() > 1:
            data.edge_attr = values
        elif not bool((values == 1).all()):
            data.edge_weight = values
        return data
    raise ValueError(f"{where} holds a Data without edges: no edge_index, and no sparse adj_t "
                     f"or adj (a torch.sparse tensor) to take them from")


def _first_label_out_of_place(order: list) -> tuple[int, object] | None:
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in order) or \
            set(order) != set(range(len(order))):
        return None
    return next(((row, n) for row, n in enumerate(order) if n != row), None)


class _EdgeGraphs:
    """The Graphs built for raw ``edge_index`` tensors that layers are called with, so that
    a model called as PyG's (``conv(x, edge_index)``) validates, sorts and normalises its
    graph once, not at every call (a GCNConv forward on the 200,000-node road graph took
    3.5x the time of one on a Graph). An entry serves a call only for the same tensor object
    (a weak reference, so the entry goes with the tensor), unchanged since (its version,
    storage, shape, strides, dtype and device) and the same node counts and flow, or for
    another tensor of equal values (``_same_edges``); any other call builds anew. A Graph
    is built from a copy, so the cache never keeps a caller's tensor alive; the
    ``capacity`` most recent entries are kept.

    An entry whose tensor died stays for an equal tensor to come (``_same_edges``): the
    last ``kept_after_death`` of them, of at most ``largest_kept`` values each (about 4
    million edges: a dropped graph of more is not held on to).

    A hit also compares the tensor with that copy, value by value: writes that bypass
    torch's version counter (``edge_index.data[...] = ...``, a NumPy view of it, another
    process's writes to shared memory) change the edges without changing the stamp, and a
    PyG layer reads the tensor afresh at every call. The comparison reads the edges once
    more (0.4 ms for the road graph's 660,000 edges, 1.8 ms for 2.3 million, against the
    rebuild's validation, sort and normalisation)."""

    def __init__(self, capacity: int, kept_after_death: int = 2,
                 largest_kept: int = 2**23):
        self.capacity = capacity
        self.entries: OrderedDict[int, tuple] = OrderedDict()  # id -> (ref, stamp, graph, copy)
        # the entries of tensors that died, for a later equal tensor (a forward's
        # edge_index.flip(0) dies at the forward's end): the last few of at most
        # ``largest_kept`` values each, so a dropped large graph is not held on to
        self.dead: OrderedDict[int, tuple] = OrderedDict()  # id(graph) -> entry
        self.kept_after_death, self.largest_kept = kept_after_death, largest_kept

    def get(self, edge_index: Tensor, key: tuple, build) -> Graph:
        """``build(edge_index)``'s Graph, reused while the stamp holds; ``key``: the rest of
        what the Graph depends on (node counts, flow)."""
        stamp = self._stamp(edge_index, key)
        if stamp is None:  # traced, an inference tensor, a transform's wrapper: no version
            return build(edge_index)
        ident = id(edge_index)
        entry = self.entries.get(ident)
        if entry is not None and entry[0]() is edge_index and entry[1] == stamp and \
                torch.equal(edge_index, entry[3]):
            self.entries.move_to_end(ident)
            return entry[2]
        twin = self._same_edges(edge_index, stamp)
        copy, graph = (edge_index.clone(), None) if twin is None else twin
        if graph is None:
            graph = build(copy)
        ref = weakref.ref(edge_index, functools.partial(self._forget, ident))
        self.entries[ident] = (ref, stamp, graph, copy)
        self.entries.move_to_end(ident)
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)
        return graph

    def _same_edges(self, edge_index: Tensor, stamp: tuple) -> tuple | None:
        """``(copy, graph)`` of an entry built from a tensor equal to ``edge_index`` value
        by value, with the same shape, dtype, device and key: a model that makes its
        edges anew at every call (``edge_index.flip(0)`` in PyG's DirGNNConv, an
        ``add_self_loops`` or ``to_undirected`` inside its forward) then builds its Graph
        once. A differing tensor is told apart at its first differing value."""
        # (snapshots: a weak reference's callback may change the dicts meanwhile)
        for _, other, graph, copy in [*reversed(self.entries.values()),
                                      *reversed(self.dead.values())]:
            if other[2] == stamp[2] and other[4:] == stamp[4:] and \
                    torch.equal(edge_index, copy):  # (strides aside: the copy is its own)
                return copy, graph
        return None

    def _forget(self, ident: int, ref) -> None:
        entry = self.entries.get(ident)
        if entry is not None and entry[0] is ref:
            del self.entries[ident]
            if entry[3].numel() <= self.largest_kept:
                self.dead[id(entry[2])] = entry
                self.dead.move_to_end(id(entry[2]))
                while len(self.dead) > self.kept_after_death:
                    self.dead.popitem(last=False)

    @staticmethod
    def _stamp(edge_index: Tensor, key: tuple) -> tuple | None:
        if torch.compiler.is_compiling() or not isinstance(edge_index, Tensor) or \
                edge_index.layout != torch.strided or edge_index.is_inference():
            return None
        try:
            return (edge_index._version, edge_index.data_ptr(), tuple(edge_index.shape),
                    edge_index.stride(), edge_index.dtype, edge_index.device, key)
        except RuntimeError:  # a tensor without storage or version (functorch, fake)
            return None


# 64: a heterogeneous model reads a graph per relation at every call (HGTConv's, HANConv's,
# a HeteroConv's per-relation convs), and with 8 a model of 9 relations evicted each graph
# before its next call and rebuilt them all at every step. An entry lives only as long as
# its caller's tensor (then as one of the few dead ones), so the bound is on live graphs.
_EDGE_GRAPHS = _EdgeGraphs(capacity=64)
# Graph.by_relation's, by_source_relation's and relation_subgraphs' graphs, by edge_type
# tensor: one cache each, since an entry is kept per tensor (a layer reading two of them from
# one edge_type, or two layers one each, would rebuild them at every call from one cache)
_RELATION_GRAPHS = _EdgeGraphs(capacity=8)
_SOURCE_RELATION_GRAPHS = _EdgeGraphs(capacity=8)
_RELATION_SUBGRAPHS = _EdgeGraphs(capacity=8)


def _relation_pairs(types: Tensor, nodes: Tensor, num_nodes: int,
                    num_relations: int) -> tuple[Tensor, Tensor]:
    """``(rows, row_of_edge)``: the sorted distinct (relation, node) codes ``r N + i`` of
    each edge's type and node, and each edge's index among them; while ``torch.compile``
    traces, every pair is a row (a count that does not depend on the data)."""
    pairs = types.long() * num_nodes + nodes
    if torch.compiler.is_compiling():
        return torch.arange(num_relations * num_nodes, device=nodes.device), pairs
    return torch.unique(pairs, sorted=True, return_inverse=True)


def graph_of_edges(edge_index, num_nodes: int, num_src_nodes: int | None = None,
                   flip: bool = False) -> Graph:
    """The Graph of a raw ``edge_index`` a layer is called with: ``Graph(edge_index,
    num_nodes)``, or bipartite with ``num_src_nodes``; ``flip``: ``edge_index[0]`` holds
    the destinations (PyG's ``flow="target_to_source"``). Built once per unchanged tensor
    (``_EdgeGraphs``)."""
    def build(edges):
        if flip and edges.dim() == 2 and edges.size(0) == 2:
            edges = edges.flip(0)
        if num_src_nodes is None:
            return Graph(edges, num_nodes=num_nodes)
        return Graph.bipartite(edges, (num_src_nodes, num_nodes))
    if not isinstance(edge_index, Tensor):
        return build(edge_index)  # the constructor names what is wrong
    return _EDGE_GRAPHS.get(edge_index, (num_nodes, num_src_nodes, flip), build)


def _kept_transposed(graph: Graph, weight: Tensor) -> tuple[Graph, Tensor]:
    """(graph, weight), the weights marked for ``graph.keep_transposed`` where they are in
    its CSR order (spmm then reads the very tensor)."""
    if graph.csr.perm is None:
        graph.keep_transposed(weight)
    return graph, weight


def _validated_edge_attr(edge_attr, num_edges, device):
    if edge_attr is None:
        return None
    if not isinstance(edge_attr, Tensor):
        raise TypeError(f"edge_attr must be a torch.Tensor, got {type(edge_attr).__name__}")
    if edge_attr.dim() == 0 or edge_attr.size(0) != num_edges:
        raise ValueError(f"edge_attr has {edge_attr.size(0) if edge_attr.dim() else 0} rows "
                         f"but edge_index has {num_edges} edges")
    if edge_attr.device != device:
        raise ValueError(f"edge_attr is on {edge_attr.device} but edge_index is on {device}")
    return edge_attr


class Graph:
    """A directed graph on ``num_nodes`` nodes, validated once, with cached sparse layouts.

    Args:
        edge_index: integer tensor of shape ``[2, E]``, sources in row 0, destinations in row 1.
            Self-loops and parallel edges are allowed.
        num_nodes: number of nodes; defaults to ``edge_index.max() + 1``.
        edge_attr: optional tensor with ``E`` rows, kept in the same order as ``edge_index``.

    Raises ``TypeError``/``ValueError`` naming the offending value for a non-integer or
    misshapen ``edge_index``, an index outside ``[0, num_nodes)``, a negative ``num_nodes`` (0
    only when given: an empty graph, as PyG's) or a mismatched ``edge_attr``. The Graph keeps
    ``edge_index`` itself, not a copy: changing that tensor in place afterwards makes every
    op on the Graph raise (its CSR would describe the old edges); build a new Graph instead.
    Writes that bypass torch's version counter (``edge_index.data[...]``, a NumPy view) are
    not seen, as autograd does not see them in its saved tensors; pass a copy,
    ``Graph(edge_index.clone())``, where other code may write to the tensor that way. (A
    layer called with a raw ``edge_index`` checks its values instead: ``graph_of_edges``.)

    A bipartite graph (messages from one node set to another, as PyG's ``size=(num_src,
    num_dst)``) comes from :meth:`bipartite`; there ``num_nodes`` is the number of
    destination nodes (the rows of every aggregation) and ``num_src_nodes`` the number of
    source nodes. Structure methods that need one node set (normalisation, reversal,
    reordering) raise on it; ``add_self_loops`` adds loops for the ids below both counts.
    """

    def __init__(self, edge_index: Tensor, num_nodes: int | None = None,
                 edge_attr: Tensor | None = None):
        self._build(edge_index, num_nodes, None, edge_attr)

    @classmethod
    def bipartite(cls, edge_index: Tensor, size: tuple[int, int],
                  edge_attr: Tensor | None = None) -> Graph:
        """Edges ``edge_index[0] -> edge_index[1]`` from ``size[0]`` source nodes to
        ``size[1]`` destination nodes."""
        if not isinstance(size, (tuple, list)) or len(size) != 2:
            raise ValueError(f"size must be (num_src_nodes, num_dst_nodes), got {size!r}")
        num_src, num_dst = (_node_count(n, "size") for n in size)
        if num_src < 0 or num_dst < 0:
            raise ValueError(f"size must be (num_src_nodes, num_dst_nodes) >= 0, got {size}")
        graph = cls.__new__(cls)
        graph._build(edge_index, num_dst, num_src, edge_attr)
        return graph

    @classmethod
    def _derived(cls, edge_index: Tensor, num_nodes: int, num_src_nodes: int | None = None,
                 edge_attr: Tensor | None = None, dst_sorted: bool = False) -> Graph:
        """A graph made from a validated one (loops added, edges kept or dropped), whose
        indices are in range by construction: no validation and no sortedness test, so no
        data-dependent branch, and it traces under ``torch.compile(fullgraph=True)``.
        ``dst_sorted``: the caller sorted the edges by destination (stable), so the CSR
        needs no permutation."""
        graph = cls.__new__(cls)
        with _outside_inference_mode():
            edge_index, edge_attr = _normal_tensor(edge_index), _normal_tensor(edge_attr)
            largest = max(num_nodes, num_src_nodes or 0, edge_index.size(1))
            index_dtype = torch.int32 if largest <= _INT32_MAX else torch.int64
            src, dst = edge_index.to(index_dtype)
            indptr, perm = ops.coo_to_csr(dst, num_nodes, validated=True)
            # contiguous: a row of a transposed edge_index is a strided view, and the kernels
            # read the indices through their data pointer (they refuse a view)
            csr = CSR(indptr, src.contiguous(), None) if dst_sorted else \
                CSR(indptr, src.index_select(0, perm.long()), perm)
            graph._init(edge_index.long(), num_nodes, edge_attr, csr, {}, num_src_nodes)
        return graph

    def _build(self, edge_index, num_nodes, num_src_nodes, edge_attr):
        if torch.compiler.is_compiling() and num_nodes is not None:
            # Traced by torch.compile: the data-dependent checks would break the graph. The
            # kernels check every index they read at run time, so nothing goes unchecked.
            _check_traced_edge_index(edge_index)
            derived = Graph._derived(edge_index, _node_count(num_nodes, "num_nodes"),
                                     num_src_nodes, edge_attr)
            self._init(derived.edge_index, derived.num_nodes, derived.edge_attr, derived.csr,
                       {}, num_src_nodes)
            return
        with _outside_inference_mode():
            self._build_checked(edge_index, num_nodes, num_src_nodes, edge_attr)

    def _build_checked(self, edge_index, num_nodes, num_src_nodes, edge_attr):
        edge_index, num_nodes = _validated_edge_index(edge_index, num_nodes, num_src_nodes)
        edge_attr = _validated_edge_attr(edge_attr, edge_index.size(1), edge_index.device)
        edge_index, edge_attr = _normal_tensor(edge_index), _normal_tensor(edge_attr)
        largest = max(num_nodes, num_src_nodes or 0, edge_index.size(1))
        index_dtype = torch.int32 if largest <= _INT32_MAX else torch.int64
        src, dst = edge_index.to(index_dtype)
        indptr, perm = _csr_of(dst, num_nodes)
        already_sorted = bool((dst[1:] >= dst[:-1]).all()) if dst.numel() > 1 else True
        csr = CSR(indptr, src.contiguous() if already_sorted else  # (see _derived)
                  src.index_select(0, perm.long()), None if already_sorted else perm)
        self._init(edge_index, num_nodes, edge_attr, csr, {}, num_src_nodes)

    def _init(self, edge_index, num_nodes, edge_attr, csr, cache, num_src_nodes=None):
        object.__setattr__(self, "edge_index", edge_index)
        object.__setattr__(self, "num_nodes", num_nodes)
        object.__setattr__(self, "edge_attr", edge_attr)
        object.__setattr__(self, "_csr", csr)
        # the caller's tensor is kept, not copied: an in-place change to it afterwards would
        # leave the CSR and the caches describing other edges (see ``csr``)
        object.__setattr__(self, "_edge_version", edge_index._version)
        object.__setattr__(self, "_cache", cache)
        object.__setattr__(self, "is_bipartite", num_src_nodes is not None)
        object.__setattr__(self, "num_src_nodes",
                           num_nodes if num_src_nodes is None else num_src_nodes)

    @property
    def csr(self) -> CSR:
        """The edges by destination (``indptr``, ``indices``, ``perm``), built once.
        Raises if ``edge_index`` was modified in place since (not checked under
        ``torch.compile``, which cannot read a tensor's version)."""
        self._check_edges_unchanged()
        return self._csr

    def _check_edges_unchanged(self) -> None:
        """Raises if ``edge_index`` was modified in place since the Graph was built (not
        checked under ``torch.compile``, which cannot read a tensor's version)."""
        if not torch.compiler.is_compiling() and \
                self.edge_index._version != self._edge_version:
            raise RuntimeError(
                "this Graph's edge_index was modified in place after the Graph was built: "
                "its CSR and cached layouts still describe the old edges. Build a new "
                "Graph from the modified tensor (or pass a copy: Graph(edge_index.clone()))")

    def _require_one_node_set(self, what: str) -> None:
        if self.is_bipartite:
            raise ValueError(f"{what} needs a graph on one node set; this one is bipartite "
                             f"({self.num_src_nodes} source, {self.num_nodes} destination "
                             f"nodes)")

    def __setattr__(self, name, value):
        raise AttributeError(f"Graph is immutable; cannot set {name!r}")

    # A copy (copy.deepcopy, pickle: torch.save, a DataLoader worker, a spawned process)
    # rebuilds each tensor with a version of its own (1, not the 0 recorded): the copy
    # refused every op as if its edges had been changed in place. The versions recorded
    # are those of the copy's tensors, read when it is made; what was stale stays stale.
    # A dict in the cache is a model's memo keyed by the identity of a tensor (LargeGT's
    # propagated features, with a weak reference that pickle refuses): left out of copies.
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_edge_version"] = self.edge_index._version != self._edge_version  # changed?
        state["_cache"] = {key: entry for key, entry in self._cache.items()
                           if isinstance(key, _TransposedKey)
                           or (not isinstance(entry.value, dict)
                               and _versions_of(entry.value) == entry.versions)}
        return state

    def __setstate__(self, state: dict) -> None:
        changed = state.pop("_edge_version")
        self.__dict__.update(state)
        object.__setattr__(self, "_edge_version", -1 if changed else self.edge_index._version)
        cache = {}
        for key, entry in self._cache.items():
            if isinstance(key, _TransposedKey):  # found by the id of the copied tensor
                cache[_TransposedKey(id(entry.values))] = _Transposed(entry.values)
            else:
                cache[key] = _Cached(entry.value, _versions_of(entry.value))
        object.__setattr__(self, "_cache", cache)

    # --- constructors ------------------------------------------------------------------

    @classmethod
    def from_pyg(cls, data) -> Graph:
        """From a PyG ``Data``: its ``edge_index`` (or ``ToSparseTensor``'s ``adj_t``,
        ``pyg_data_with_edges``), ``num_nodes`` and ``edge_attr``."""
        data = pyg_data_with_edges(data)
        return cls(data.edge_index, num_nodes=data.num_nodes,
                   edge_attr=getattr(data, "edge_attr", None))

    @classmethod
    def from_networkx(cls, g, edge_attrs: list[str] | None = None, nodes=None) -> Graph:
        """From a networkx graph: node i is ``nodes[i]`` (default: ``g.nodes`` order, as
        PyG's ``from_networkx``). Undirected graphs get both directions of every edge.
        ``edge_attrs`` names numeric edge attributes to stack into ``edge_attr``
        ``[E, len(edge_attrs)]`` (float32; an attribute of whole numbers that float32 rounds,
        such as timestamps, is warned of by name).

        Nodes labelled 0 .. N-1 that ``g.nodes`` lists in another order (networkx lists the
        nodes of an edge list as they first appear) are numbered in that order, so node 3
        may be row 0 and features indexed by label would not match: without ``nodes`` this
        warns. ``nodes=sorted(g.nodes)`` numbers each node by its label, and
        ``nodes=list(g.nodes)`` keeps ``g.nodes`` order without the warning."""
        if not callable(getattr(g, "number_of_nodes", None)) or not hasattr(g, "edges"):
            raise TypeError(f"Graph.from_networkx: g must be a networkx graph, got "
                            f"{type(g).__name__}")
        if g.number_of_nodes() == 0:
            raise ValueError("the networkx graph has no nodes")
        order, moved = networkx_node_order(g, nodes)
        if moved is not None:
            warnings.warn(f"the networkx graph's nodes are the labels 0 .. {len(order) - 1}, "
                          f"but g.nodes lists them in another order (row {moved[0]} is node "
                          f"{moved[1]!r}): rows follow g.nodes. Pass nodes=sorted(g.nodes) to "
                          f"number each node by its label, or nodes=list(g.nodes) to keep "
                          f"this order", stacklevel=2)
        ids = {node: i for i, node in enumerate(order)}
        keys = edge_attrs or []
        rows = [(ids[u], ids[v], [_edge_number(d, k, u, v) for k in keys])
                for u, v, d in g.edges(data=True)]
        if not g.is_directed():
            rows += [(v, u, attrs) for u, v, attrs in rows if u != v]
        edge_index = torch.tensor([[r[0] for r in rows], [r[1] for r in rows]],
                                  dtype=torch.long).view(2, -1)
        edge_attr = None
        if edge_attrs:
            exact = torch.tensor([r[2] for r in rows], dtype=torch.float64).view(
                len(rows), len(edge_attrs))
            edge_attr = exact.float()
            _warn_of_rounded_whole_numbers(exact, edge_attr, keys)
        return cls(edge_index, num_nodes=len(ids), edge_attr=edge_attr)

    @classmethod
    def from_scipy(cls, a) -> Graph:
        """From a square scipy sparse matrix: entry ``a[i, j]`` is the edge ``i -> j`` (PyG's
        ``from_scipy_sparse_matrix``), its value becomes ``edge_attr``."""
        if not callable(getattr(a, "tocoo", None)):
            raise TypeError(f"Graph.from_scipy: a must be a scipy sparse matrix or array, got "
                            f"{type(a).__name__}")
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"the adjacency matrix must be square, got shape {a.shape}")
        coo = a.tocoo()
        edge_index = torch.stack([torch.from_numpy(coo.row).long(),
                                  torch.from_numpy(coo.col).long()])
        return cls(edge_index, num_nodes=a.shape[0], edge_attr=torch.from_numpy(coo.data))

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` with ``edge_index``, ``edge_attr`` and ``num_nodes``."""
        from torch_geometric.data import Data

        return Data(edge_index=self.edge_index, edge_attr=self.edge_attr,
                    num_nodes=self.num_nodes)

    # --- basic properties --------------------------------------------------------------

    @property
    def num_edges(self) -> int:
        return self.edge_index.size(1)

    @property
    def device(self) -> torch.device:
        return self.edge_index.device

    def __repr__(self) -> str:
        attr = "" if self.edge_attr is None else f", edge_attr={list(self.edge_attr.shape)}"
        nodes = (f"size=({self.num_src_nodes}, {self.num_nodes})" if self.is_bipartite
                 else f"num_nodes={self.num_nodes}")
        return (f"Graph({nodes}, num_edges={self.num_edges}{attr}, "
                f"device={self.device})")

    def cached(self, key, build):
        """Memoises ``build()`` on this graph under ``key``: layers keep structures derived
        from the graph (normalised weights, Laplacians) here, built once per graph. Built
        outside ``torch.inference_mode`` even when called inside it: an inference tensor in
        the cache would break every later backward that saves it (a graph evaluated under
        inference mode before its first training step). Raises, as ``csr`` does, once
        ``edge_index`` was modified in place: a structure built before would describe the
        old edges (a layer reading only its cached normalised graph went on silently).

        Public methods hand these values out (``in_degree()``, ``gcn_norm()``'s weights),
        and a caller may change them in place (``deg += 1``): a value whose tensors' versions
        moved since it was built is built again, so the caller's change stays the caller's
        (it had reached every later layer on the graph)."""
        self._check_edges_unchanged()
        entry = self._cache.get(key)
        if entry is None or (not torch.compiler.is_compiling()
                             and _versions_of(entry.value) != entry.versions):
            with _outside_inference_mode(), _outside_functorch():
                value = build()
            entry = self._cache[key] = _Cached(value, () if torch.compiler.is_compiling()
                                               else _versions_of(value))
        return entry.value

    def keep_transposed(self, values: Tensor) -> Tensor:
        """Marks per-edge ``values`` in CSR order that this graph's layers reuse (normalised
        weights cached on the graph) for a copy in the transpose's order, made by the first
        spmm whose backward will read them: that backward then reads them in order instead
        of through the transpose's permutation (0.85x the time of the product on the
        power-law benchmark graph, 2026-12-03). The copy holds ``values`` and is made again
        after they are modified in place. Values that require grad are not copied (the
        backward would not reach them through a copy). Returns ``values``."""
        self._check_edge_values(values)
        if not torch.compiler.is_compiling():
            self._cache[_TransposedKey(id(values))] = _Transposed(values)
        return values

    def _check_edge_values(self, values) -> None:
        """``values`` is a floating tensor with a row per edge, on this graph's device."""
        if not isinstance(values, Tensor) or not values.is_floating_point():
            got = values.dtype if isinstance(values, Tensor) else type(values).__name__
            raise TypeError(f"values must be a floating-point tensor, got {got}")
        if values.dim() == 0 or values.size(0) != self.num_edges:
            raise ValueError(f"values must have one row per edge ([{self.num_edges}, ...]), "
                             f"got shape {list(values.shape)}")
        if values.device != self.device:
            raise ValueError(f"values are on {values.device} but the graph is on {self.device}")

    def transposed_values(self, values: Tensor) -> Tensor | None:
        """``values[csc.perm]`` where ``values`` were marked by ``keep_transposed`` and do not
        require grad, else None."""
        self._check_edge_values(values)
        if torch.compiler.is_compiling() or values.requires_grad:
            return None
        kept = self._cache.get(_TransposedKey(id(values)))
        if kept is None or kept.values is not values:
            return None
        if kept.copy is None or kept.version != values._version:  # new, or values changed
            with torch.no_grad():
                kept.copy = values.index_select(0, self.csc.perm.long())
            kept.version = values._version
        return kept.copy

    @property
    def csc(self) -> CSR:
        """The source-major transpose: row ``j`` lists the edges out of ``j`` by destination;
        ``perm`` maps each entry to its position in ``csr`` (not the user's edge id)."""
        return self.cached("csc", lambda: CSR(*ops.csr_transpose(
            self.csr.indptr, self.csr.indices, self.num_src_nodes)))

    def in_degree(self) -> Tensor:
        return self.cached("in_degree", lambda: self.csr.degree().long())

    def weighted_in_degree(self, edge_weight: Tensor) -> Tensor:
        """Per destination, the sum of its edges' ``edge_weight`` (in this graph's edge
        order), in float32 at least: index_add adds in the weights' own dtype, and a
        bfloat16 sum of ones stops growing at 256 (a hub of 2,000 edges weighed 2.8x)."""
        wide = edge_weight.to(torch.promote_types(edge_weight.dtype, torch.float32))
        # the destinations are in range by construction: no checked scatter needed
        return wide.new_zeros(self.num_nodes).index_add(0, self.edge_index[1], wide)

    def out_degree(self) -> Tensor:
        return self.cached("out_degree", lambda: torch.bincount(
            self.edge_index[0], minlength=self.num_src_nodes))

    def to(self, device) -> Graph:
        """A copy on ``device``, with every cache moved along."""
        if isinstance(device, torch.dtype):  # torch.device's own error names no argument
            raise TypeError(f"Graph.to takes a device, got the dtype {device}: a graph's "
                            f"indices stay integers (cast edge_attr or the features instead)")
        device = torch.device(device)
        if device == self.device:
            return self
        move = (lambda v: v.to(device) if isinstance(v, (Tensor, CSR, Graph)) else  # noqa: E731
                tuple(move(t) for t in v) if isinstance(v, tuple) else v)
        out = Graph.__new__(Graph)
        # kept transposed values are found by their tensor, which a move replaces
        # (and a value changed in place since it was built is left to be built again)
        cache = {k: _Cached(moved, _versions_of(moved))
                 for k, entry in self._cache.items() if not isinstance(k, _TransposedKey)
                 and _versions_of(entry.value) == entry.versions
                 for moved in [move(entry.value)]}
        out._init(self.edge_index.to(device), self.num_nodes,
                  None if self.edge_attr is None else self.edge_attr.to(device),
                  self.csr.to(device), cache,
                  self.num_src_nodes if self.is_bipartite else None)
        return out

    # --- edge order helpers used by the ops --------------------------------------------

    def to_csr_order(self, edge_values: Tensor) -> Tensor:
        """Reorders a per-edge tensor from the user's edge order into CSR order."""
        perm = self.csr.perm
        if perm is None:
            return edge_values
        return ops.permute_rows(edge_values, perm, self._csr_inverse_perm(), validated=True)

    def from_csr_order(self, edge_values: Tensor) -> Tensor:
        """Reorders a per-edge tensor from CSR order back into the user's edge order."""
        perm = self.csr.perm
        if perm is None:
            return edge_values
        return ops.permute_rows(edge_values, self._csr_inverse_perm(), perm, validated=True)

    def _csr_inverse_perm(self) -> Tensor:
        """The user's edge e's position in CSR order: from_csr_order gathers through it."""
        def build():
            perm = self.csr.perm
            positions = torch.arange(perm.numel(), dtype=perm.dtype, device=perm.device)
            return torch.empty_like(perm).scatter_(0, perm.long(), positions)
        return self.cached("csr_inverse_perm", build)

    def in_csr_order(self) -> Graph:
        """This graph with its edges listed in CSR order (by destination, stably), cached;
        itself when they are listed so already. Per-edge values that one op makes and
        another consumes (an attention's scores from ``sddmm`` into ``segment_attention``)
        then stay in the kernels' order, where on this graph each op would move them into
        the user's edge order and back (``to_csr_order`` / ``from_csr_order``). Shares this
        graph's CSR arrays and, once built, its transpose."""
        perm = self.csr.perm
        if perm is None:
            return self

        def build():
            index = perm.long()
            graph = Graph.__new__(Graph)
            cache = {"csc": self._cache["csc"]} if "csc" in self._cache else {}
            graph._init(self.edge_index.index_select(1, index), self.num_nodes,
                        None if self.edge_attr is None else self.edge_attr.index_select(0, index),
                        CSR(self.csr.indptr, self.csr.indices, None), cache,
                        self.num_src_nodes if self.is_bipartite else None)
            return graph
        return self.cached("in_csr_order", build)

    # --- structure: each returns a new Graph -------------------------------------------

    def with_edges(self, edge_index: Tensor, edge_attr: Tensor | None = None) -> Graph:
        """A Graph on the same node set(s) with other edges (validated: the edges come from
        the caller)."""
        if self.is_bipartite:
            return Graph.bipartite(edge_index, (self.num_src_nodes, self.num_nodes), edge_attr)
        return Graph(edge_index, num_nodes=self.num_nodes, edge_attr=edge_attr)

    def dst_prefix(self, num_dst: int, num_src: int) -> Graph:
        """The in-edges of destinations ``0 .. num_dst - 1`` as a bipartite graph from
        sources ``0 .. num_src - 1`` (raises if one of those edges comes from beyond), in
        CSR order: a per-edge tensor ``w`` of this graph goes with it as
        ``to_csr_order(w)[:num_edges]``. On nodes ordered by hop distance, a layer's
        output for the nearest nodes reads only the next shell (influence's pruning)."""
        if not is_int_at_least(num_dst, 1) or not is_int_at_least(num_src, 1) or \
                num_dst > self.num_nodes or num_src > self.num_src_nodes:
            raise ValueError(f"dst_prefix({num_dst}, {num_src}) is out of range for "
                             f"{self.num_src_nodes} source and {self.num_nodes} destination "
                             "nodes")
        end = int(self.csr.indptr[num_dst])
        dst = torch.repeat_interleave(torch.arange(num_dst, device=self.device),
                                      self.csr.degree()[:num_dst].long(), output_size=end)
        return Graph.bipartite(torch.stack([self.csr.indices[:end].long(), dst]),
                               (num_src, num_dst))

    def _pair_keys(self, flip: bool = False) -> Tensor:
        src, dst = self.edge_index
        return (src * self.num_nodes + dst) if flip else (dst * self.num_src_nodes + src)

    @property
    def is_undirected(self) -> bool:
        """Whether every edge ``u -> v`` has a reverse ``v -> u`` (multiplicities ignored)."""
        self._require_one_node_set("is_undirected")
        return self.cached("is_undirected", lambda: torch.equal(
            torch.unique(self._pair_keys()), torch.unique(self._pair_keys(flip=True))))

    def edge_groups(self) -> tuple[Tensor, int]:
        """For each edge, the id of its ordered ``(src, dst)`` pair, and the number of pairs.

        Parallel edges share an id; ids follow the pairs sorted by (destination, source).
        Multigraph layers aggregate parallel edges by these ids first.
        """
        def build():
            uniq, inverse = torch.unique(self._pair_keys(), return_inverse=True)
            return inverse, uniq.numel()
        return self.cached("edge_groups", build)

    def coalesce(self, reduce: str = "sum") -> Graph:
        """Merges parallel edges into one (their ``edge_attr`` rows reduced with ``reduce``)
        and sorts edges by (destination, source)."""
        group, num_groups = self.edge_groups()
        first = torch.full((num_groups,), self.num_edges, dtype=torch.long, device=self.device)
        first = first.scatter_reduce(0, group, torch.arange(self.num_edges, device=self.device),
                                     "amin")
        edge_index = self.edge_index.index_select(1, first)
        edge_attr = None if self.edge_attr is None else scatter(
            self.edge_attr, group, dim=0, dim_size=num_groups, reduce=reduce)
        return self.with_edges(edge_index, edge_attr)

    def to_undirected(self, reduce: str = "sum") -> Graph:
        """Adds every reverse edge, then coalesces (merging ``edge_attr`` with ``reduce``)."""
        self._require_one_node_set("to_undirected")
        edge_index = torch.cat([self.edge_index, self.edge_index.flip(0)], dim=1)
        edge_attr = None if self.edge_attr is None else torch.cat([self.edge_attr] * 2)
        return self.with_edges(edge_index, edge_attr).coalesce(reduce)

    def reversed(self) -> Graph:
        """Every edge flipped (a node's in-neighbours become its out-neighbours), edge
        order kept; cached, one node set."""
        self._require_one_node_set("reversed")
        return self.cached("reversed", lambda: Graph(self.edge_index.flip(0),
                                                     num_nodes=self.num_nodes))

    def remove_self_loops(self) -> Graph:
        keep = self.edge_index[0] != self.edge_index[1]
        edge_attr = None if self.edge_attr is None else self.edge_attr[keep]
        return self.with_edges(self.edge_index[:, keep], edge_attr)

    def add_self_loops(self, fill_value: float = 1.0) -> Graph:
        """Appends a loop ``i -> i`` for every node (bipartite: for the ids below both node
        counts, as PyG's GAT); their ``edge_attr`` rows are ``fill_value``."""
        count = min(self.num_nodes, self.num_src_nodes)
        loops = torch.arange(count, device=self.device).expand(2, -1)
        edge_attr = self.edge_attr
        if edge_attr is not None:
            fill = edge_attr.new_full((count, *edge_attr.shape[1:]), fill_value)
            edge_attr = torch.cat([edge_attr, fill])
        return Graph._derived(torch.cat([self.edge_index, loops], dim=1), self.num_nodes,
                              self.num_src_nodes if self.is_bipartite else None, edge_attr)

    def by_relation(self, edge_type: Tensor, num_relations: int) -> tuple[Graph, Tensor]:
        """``(graph, rows)``: one row per (relation, destination) pair that has in-edges,
        ``rows[k] = r * num_nodes + i`` (sorted: by relation, then node), and the bipartite
        graph from this graph's sources to those rows, edge e going to the row of
        ``(edge_type[e], dst_e)``. An aggregation over it reduces each node's in-edges of
        each relation apart (R-GCN's mean per relation) into ``[K, F]``, K at most the edge
        count, where ``[N, R, F]`` would be mostly empty rows on a graph of many relations.
        ``edge_type``: an integer in ``[0, num_relations)`` per edge, in ``edge_index``'s
        order. Built once per unchanged ``edge_type`` tensor and graph, as the layers'
        graphs of a raw ``edge_index`` are. While ``torch.compile`` traces, every pair is a
        row (K = N R, a count that does not depend on the data)."""
        self._check_relations(edge_type, num_relations)

        def build(types: Tensor) -> tuple[Graph, Tensor]:
            rows, row_of_edge = _relation_pairs(types, self.edge_index[1], self.num_nodes,
                                                num_relations)
            graph = Graph._derived(torch.stack([self.edge_index[0], row_of_edge]),
                                   rows.numel(), self.num_src_nodes)
            return graph, rows
        return _RELATION_GRAPHS.get(edge_type, (weakref.ref(self), num_relations), build)

    def by_source_relation(self, edge_type: Tensor, num_relations: int) -> tuple[Graph, Tensor]:
        """``(graph, rows)``, ``by_relation`` from the other end: one row per (relation,
        source) pair that has out-edges, ``rows[k] = r * num_src_nodes + j`` (sorted), and
        the bipartite graph from those rows to this graph's destinations, edge e leaving the
        row of ``(edge_type[e], src_e)``, in this graph's edge order. For layers whose
        messages map each source by its edge's relation (RGAT's ``x_j W_r``): each pair is
        mapped once (``[K, F]``, K at most the edge count), and a node's features reach only
        the relations it sends on. Cached and traced as ``by_relation``."""
        self._check_relations(edge_type, num_relations)

        def build(types: Tensor) -> tuple[Graph, Tensor]:
            rows, row_of_edge = _relation_pairs(types, self.edge_index[0], self.num_src_nodes,
                                                num_relations)
            graph = Graph._derived(torch.stack([row_of_edge, self.edge_index[1]]),
                                   self.num_nodes, rows.numel())
            return graph, rows
        return _SOURCE_RELATION_GRAPHS.get(edge_type, (weakref.ref(self), num_relations), build)

    def relation_subgraphs(self, edge_type: Tensor, num_relations: int) -> tuple[Graph, ...]:
        """One graph per relation r, on this graph's nodes, holding the edges of type r in
        their order here: for layers whose messages depend on the relation at both ends
        (FiLM's per-relation source maps and destination modulations), each relation's
        aggregation then runs on its own edges, as PyG's masked ``edge_index[:, type ==
        r]``. ``edge_type`` as for ``by_relation``; built once per unchanged ``edge_type``
        tensor and graph. While ``torch.compile`` traces, each subgraph keeps every edge
        and sends those of the other relations to one extra destination, node
        ``num_nodes`` (an edge count that does not depend on the data), whose row the
        caller drops."""
        self._check_relations(edge_type, num_relations)
        num_src = self.num_src_nodes if self.is_bipartite else None
        src, dst = self.edge_index

        def build(types: Tensor) -> tuple[Graph, ...]:
            if torch.compiler.is_compiling():
                return tuple(Graph._derived(
                    torch.stack([src, torch.where(types == r, dst, self.num_nodes)]),
                    self.num_nodes + 1, self.num_src_nodes) for r in range(num_relations))
            return tuple(Graph._derived(self.edge_index[:, types == r], self.num_nodes, num_src)
                         for r in range(num_relations))
        return _RELATION_SUBGRAPHS.get(edge_type, (weakref.ref(self), num_relations), build)

    def _check_relations(self, edge_type: Tensor, num_relations: int) -> None:
        """``edge_type``: one relation in ``[0, num_relations)`` per edge, on the graph's
        device."""
        self._check_edges_unchanged()
        check_int(num_relations, "num_relations", 1)
        if not isinstance(edge_type, Tensor) or edge_type.dim() != 1 or \
                edge_type.numel() != self.num_edges:
            shape = list(edge_type.shape) if isinstance(edge_type, Tensor) else \
                type(edge_type).__name__
            raise ValueError(f"edge_type must hold one relation per edge, [{self.num_edges}], "
                             f"got {shape}")
        check_index(edge_type, num_relations, "edge_type")
        if edge_type.device != self.device:
            raise ValueError(f"edge_type is on {edge_type.device} but the graph is on "
                             f"{self.device}")

    def gcn_norm(self, add_self_loops: bool = True, improved: bool = False,
                 edge_weight: Tensor | None = None,
                 dtype: torch.dtype = torch.float32,
                 edge_mask: Tensor | None = None) -> tuple[Graph, Tensor]:
        """Kipf & Welling's symmetric normalisation, as PyG's ``gcn_norm``.

        With ``add_self_loops``, a node keeps its existing loop (the last, if several, as
        PyG) and every node without one gets a loop of weight 1 (2 if ``improved``). Returns
        a graph and ``D^-1/2 (A + I) D^-1/2`` edge weights in its edge order, degrees taken
        at the destination: PyG's edges and weights, sorted by destination (stable; the
        kernels then read the weights without a permutation). Under ``torch.compile`` the
        edge list keeps every edge and appends one loop per node, with weight 0 where PyG
        drops a loop (a shape that does not depend on the data).
        Without ``add_self_loops`` the graph is this one, weights in its edge order. Weights have
        ``edge_weight``'s dtype, else ``dtype``. Cached when
        ``edge_weight`` is None (with a copy in the transpose's order for the backward:
        ``keep_transposed``). Unlike PyG, ``improved`` also applies without edge weights
        (PyG then gives the new loops weight 1, not 2).

        ``edge_mask`` (one factor per edge, an explainer's): each weight is multiplied by
        its edge's factor after the normalisation (the degrees are the unmasked ones), as
        PyG's explain mode scales the messages; with ``add_self_loops`` every loop, old or
        new, keeps factor 1, as PyG's mask gives the loops it adds. The unmasked weights
        come from the cache and the mask is carried along a cached map of the edges, so
        an explainer's epochs do not rebuild the graph.
        """
        check_flags("gcn_norm", add_self_loops=add_self_loops, improved=improved)
        if edge_mask is not None:  # the unmasked weights (cached), times the mask carried
            graph, weight = self.gcn_norm(add_self_loops, improved, edge_weight, dtype)
            factors = self._normalised_edge_factors(add_self_loops, edge_mask)
            return graph, (weight * factors).to(weight.dtype)
        if edge_weight is None:
            return self.cached(("gcn_norm", add_self_loops, improved, dtype),
                               lambda: _kept_transposed(*self._gcn_norm(add_self_loops,
                                                                        improved, None, dtype)))
        return self._gcn_norm(add_self_loops, improved, edge_weight, dtype)

    def _normalised_edge_factors(self, add_self_loops: bool, edge_mask: Tensor) -> Tensor:
        """``edge_mask`` (one factor per edge) on the edges of ``gcn_norm``'s graph, in its
        order: each edge carries its own factor, every loop (old or new, with
        ``add_self_loops``) factor 1."""
        self._require_one_node_set("gcn_norm")
        if edge_mask.shape != (self.num_edges,):
            raise ValueError(f"edge_mask must have shape [{self.num_edges}], "
                             f"got {list(edge_mask.shape)}")
        if not add_self_loops:
            return edge_mask
        carried = self.cached("gcn_norm_carried_edges", self._carried_edges)
        return torch.cat([edge_mask.new_ones(1), edge_mask]).index_select(0, carried)

    def _carried_edges(self) -> Tensor:
        """For each edge of ``gcn_norm``'s graph with ``add_self_loops`` (in its order):
        1 + the index of the edge of this graph it carries, 0 for a loop."""
        positions = torch.arange(1, self.num_edges + 1, dtype=torch.float64, device=self.device)
        is_loop = self.edge_index[0] == self.edge_index[1]
        graph, carried = self._with_remaining_loops(positions.masked_fill(is_loop, 0.0), 0.0)
        if graph.csr.perm is not None:  # gcn_norm's graph is sorted by destination
            carried = carried.index_select(0, graph.csr.perm.long())
        return carried.long()

    def _gcn_norm(self, add_self_loops, improved, edge_weight, dtype):
        self._require_one_node_set("gcn_norm")
        if edge_weight is None:
            edge_weight = torch.ones(self.num_edges, dtype=dtype, device=self.device)
        if not isinstance(edge_weight, Tensor) or not edge_weight.is_floating_point():
            got = edge_weight.dtype if isinstance(edge_weight, Tensor) else \
                type(edge_weight).__name__
            raise TypeError(f"edge_weight must be a floating-point tensor, got {got}")
        if edge_weight.shape != (self.num_edges,):
            raise ValueError(f"edge_weight must have shape [{self.num_edges}], "
                             f"got {list(edge_weight.shape)}")
        graph = self
        if add_self_loops:
            graph, edge_weight = self._with_remaining_loops(edge_weight, 2.0 if improved else 1.0)
        src, dst = graph.edge_index
        wide = edge_weight.to(torch.promote_types(edge_weight.dtype, torch.float32))
        inv_sqrt = degree_power(graph.weighted_in_degree(wide), -0.5)
        weight = (inv_sqrt[src] * wide * inv_sqrt[dst]).to(edge_weight.dtype)
        if graph is self or graph.csr.perm is None:  # the caller's own edge order stays
            return graph, weight
        # the new graph sorted by destination, so that every spmm reads the weights in place
        # instead of permuting them into CSR order at each call: its CSR's own stable order
        # (a torch.sort and a second CSR build took a third of the normalisation's time)
        return graph.in_csr_order(), weight.index_select(0, graph.csr.perm.long())

    def _with_remaining_loops(self, edge_weight: Tensor, fill: float) -> tuple[Graph, Tensor]:
        """PyG's ``add_remaining_self_loops``: a node that had loops keeps the last one
        (with its weight), a node without one gets a loop of weight ``fill``. Under
        ``torch.compile`` in a fixed shape instead: every edge stays and a loop is appended
        for every node, the loops PyG drops weighing 0 (the same operator, except that
        such a loop's 0 times a source feature of +-inf is NaN where PyG has none)."""
        n, positions = self.num_nodes, torch.arange(self.num_edges, device=self.device)
        src, dst = self.edge_index
        is_loop = src == dst
        last = positions.new_full((n,), -1).scatter_reduce(  # each node's last loop, or -1
            0, dst, torch.where(is_loop, positions, -1), "amax", include_self=True)
        dropped = is_loop & (positions != last[dst])
        kept = torch.where(dropped, 0.0, edge_weight)
        loop_weight = torch.where(last >= 0, 0.0, edge_weight.new_full((n,), fill))
        loops = torch.arange(n, device=self.device).expand(2, -1)
        edge_index = torch.cat([self.edge_index, loops], dim=1)
        weight = torch.cat([kept.to(edge_weight.dtype), loop_weight])
        if not torch.compiler.is_compiling():  # a data-dependent shape is fine eagerly
            keep = torch.cat([~dropped, last < 0])
            edge_index, weight = edge_index[:, keep], weight[keep]
        return Graph._derived(edge_index, n), weight

    def reorder(self, method: str = "rcm") -> tuple[Graph, Tensor]:
        """Renumbers nodes for memory locality; returns ``(graph, perm)`` with
        ``perm[new_id] = old_id`` (so ``x[perm]`` are the features in the new order).

        ``rcm``: reverse Cuthill-McKee on the symmetrised pattern (neighbours get nearby
        ids, so gathers hit cache). ``degree``: by decreasing in-degree (hubs first).
        Edge order and ``edge_attr`` are kept.
        """
        self._require_one_node_set("reorder")
        if method == "rcm":
            import scipy.sparse as sp
            from scipy.sparse.csgraph import reverse_cuthill_mckee

            src, dst = self.edge_index.cpu().numpy()
            n = self.num_nodes
            a = sp.coo_matrix((torch.ones(len(src)).numpy(), (src, dst)), shape=(n, n)).tocsr()
            perm = torch.from_numpy(reverse_cuthill_mckee(
                (a + a.T).tocsr(), symmetric_mode=True).astype("int64")).to(self.device)
        elif method == "degree":
            perm = torch.argsort(self.in_degree(), descending=True, stable=True)
        else:
            raise ValueError(f"reorder method must be 'rcm' or 'degree', got {method!r}")
        new_id = torch.empty_like(perm)
        new_id[perm] = torch.arange(self.num_nodes, device=self.device)
        return self.with_edges(new_id[self.edge_index], self.edge_attr), perm
