"""A user's own graph from a file, as a NodeDataset: a saved PyG ``Data`` (.pt), a NumPy
archive (.npz), GraphML, GML, GEXF, node-link JSON, graph6, sparse6 or an adjacency list
(.adjlist) of any graph, a MatrixMarket adjacency
(.mtx), an edge list (.csv, .tsv, .txt, .edges, .edgelist, KONECT's out.NAME; "#" and "%"
comment lines), a METIS, DIMACS or Pajek graph (`graphloc.datasets.readers`), a graph-tool
file (.gt, `graphloc.datasets.graph_tool`), text formats and .gt
also compressed (.gz, .bz2, .xz, .zst), with optional feature and label files (.npy, .pt, .csv).
What the command line takes wherever it takes a dataset.

Without features every node gets ``[1, log(1 + in-degree), log(1 + out-degree)]``, so
influence can be measured on the structure alone; without labels the dataset is marked
``labelled = False`` (influence works, training refuses it).
"""

from __future__ import annotations

import _compat_pickle
import array
import collections
import csv
import io
import itertools
import json
import math
import os
import pickle
import re
import tempfile
import types
import warnings
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from graphloc.checks import caller_stacklevel
from graphloc.datasets.base import (
    NodeDataset,
    class_labels,
    float32_features,
    float_features,
    has_reverse,
    kept_extras,
    labelled_split,
    one_hot_classes,
    pyg_split,
    warn_of_unread_keys,
    with_missing_reverses,
)
from graphloc.datasets.graph_tool import read_graph_tool
from graphloc.datasets.hetero import HeteroNodeDataset
from graphloc.datasets.keyed import (
    column_features,
    column_labels,
    keyed_values,
    warn_if_positional,
)
from graphloc.datasets.readers import (
    DECOMPRESSION_ERRORS,
    MISSING_VALUES,
    CommentedRows,
    byte_order_marked,
    check_vertex_count,
    compression_of,
    decimal_point,
    integer_id,
    joined_blocks,
    node_limit,
    open_binary,
    open_text,
    open_utf8_binary,
    parse_integers,
    read_dimacs,
    read_metis,
    read_npz,
    read_pajek,
    sniffed_delimiter,
    text_blocks,
    uncompressed_name,
    unpack_archive,
    warn_of_weights,
    with_mixed_directions_spelled_out,
    with_nested_graphs_hoisted,
)
from graphloc.graph import Graph, networkx_node_order, pyg_data_with_edges

# files of bare edges, which say nothing of their direction (MatrixMarket, edge lists)
EDGE_FILE_SUFFIXES = (".mtx", ".csv", ".tsv", ".txt", ".edges", ".edgelist")
# read through networkx, which keeps each file's own direction (graph6 and sparse6 hold
# undirected graphs; an adjacency list's line "u v w" is the edges u -> v and u -> w)
NETWORKX_SUFFIXES = (".graphml", ".gml", ".gexf", ".json", ".g6", ".graph6", ".s6",
                     ".sparse6", ".adjlist")
# adjacency lists with a size line: METIS (DIMACS10), DIMACS and Pajek
SIZED_SUFFIXES = (".graph", ".metis", ".gr", ".col", ".dimacs", ".net")
GRAPH_SUFFIXES = (".pt", ".npz", ".gt", *NETWORKX_SUFFIXES, *EDGE_FILE_SUFFIXES,
                  *SIZED_SUFFIXES)
# formats whose nodes carry attributes (a class among them: label_column)
_ATTRIBUTE_SUFFIXES = (".gt", ".graphml", ".gml", ".gexf", ".json")
# NumPy and torch archives are compressed archives already
_UNCOMPRESSED_ONLY = (".pt", ".npz")


def is_graph_file(spec: str) -> bool:
    return _format_of(spec) is not None


def _format_of(path: str) -> str | None:
    """The format suffix of ``path`` (past a ".gz", ".bz2", ".xz" or ".zst"), ".edges" for
    KONECT's "out.NAME" files, ".graphml" for ".xml" (graph-tool's GraphML), or None."""
    name = os.path.basename(uncompressed_name(path)).lower()
    if name.endswith(".xml"):  # graph-tool's and netzschleuder's name for GraphML
        return ".graphml"
    suffix = next((suffix for suffix in GRAPH_SUFFIXES if name.endswith(suffix)), None)
    return suffix or (".edges" if name.startswith("out.") else None)


class _Read(NamedTuple):
    """What a reader takes from a file: the graph, features, labels and split where the
    format holds them, a saved Data's extras, and what the file says of its direction
    (None: nothing, or it needs no reverse edges added)."""
    graph: Graph
    x: Tensor | None = None
    y: Tensor | None = None
    split: tuple | None = None
    extra: dict | None = None
    undirected: bool | Tensor | None = None  # a Tensor: per edge, as Gephi's "Type" column
    names: list | None = None  # the nodes' names in row order, where they are not 0 .. N-1
    first_id: int | None = 0  # the file's id of node 0: 1 where vertex v is node v - 1
    hetero: object | None = None  # a saved PyG HeteroData (graph None then)


def load_graph_file(path: str, features: str | None = None, labels: str | None = None,
                    undirected: bool | None = None, *,
                    label_column: str | None = None,
                    feature_columns: list | None = None) -> NodeDataset | HeteroNodeDataset:
    """The graph in ``path`` with optional ``features`` [N, F] and ``labels`` [N] files
    (rows in the graph's node order: the node ids where a GraphML's or GML's ids are
    exactly 0 .. N-1 and for an edge list's integer ids, else the order of the file; or,
    for a text file whose first column names each row's node, matched by it:
    ``graphloc.datasets.keyed``).

    Formats, by suffix: a saved PyG ``Data`` (.pt; a saved ``HeteroData`` is a
    ``HeteroNodeDataset``, as ``HeteroNodeDataset.from_pyg`` reads it); a NumPy archive
    (.npz) of a SciPy sparse adjacency, of the gnn-benchmark layout (``adj_*``, ``attr_*``,
    ``labels``) or of named arrays (``edge_index``, ``x``, ``y``, ``num_nodes``); GraphML,
    GML, GEXF,
    node-link JSON (.json; a link listed twice is two edges, said so where the file claims
    no multigraph), graph6 (.g6, .graph6), sparse6 (.s6, .sparse6; one graph per
    file, undirected) or networkx's adjacency list (.adjlist: a line ``u v w`` is the edges
    u -> v and u -> w; a neighbour written twice is two parallel edges, as networkx writes
    a multigraph) through networkx; a MatrixMarket adjacency (.mtx); an edge list
    (.csv, .tsv, .txt, .edges, .edgelist, KONECT's out.NAME); METIS (.graph, .metis),
    DIMACS (.gr, .col, .dimacs) and Pajek (.net) graphs; graph-tool's binary format (.gt:
    netzschleuder's downloads; an undirected one lists each edge once, read both ways; a
    ``name`` vertex property names the nodes). Text formats and .gt may be compressed
    (.gz, .bz2, .xz, .zst).

    An edge list's or MatrixMarket file's line ``u v`` is the edge u -> v.
    ``undirected=True`` gives every edge u -> v whose file has no v -> u that reverse edge
    (an undirected graph written one line per pair: networkx's ``write_edgelist``); edges
    that have their reverse stay as they are. ``None`` (default) takes the file's own
    word for it: KONECT's "% sym" and "% bip" and SNAP's "# Undirected graph" first lines,
    DIMACS "e" lines and the gnn-benchmark layout declare one line per undirected pair,
    KONECT's "% asym" and DIMACS "a" lines directed edges; an undeclared edge file of
    which no edge has its reverse warns (messages would flow one way only).
    An edge table with a "Type" column of "Directed" and "Undirected" (Gephi's export)
    declares each edge's direction: an undirected one gets its reverse.
    ``False`` reads every file as written.

    ``label_column`` names the column of ``labels`` that holds the classes, in a table with
    a header line and more columns (Gephi's node table ``Id,Label,modularity_class``),
    keyed by node or a row per node (``graphloc.datasets.keyed.column_labels``). Without a
    labels file it names the graph file's node attribute that does (GraphML, GML, GEXF and
    JSON node attributes, graph-tool vertex properties: karate's ``club``, polblogs'
    ``value``): class ids as they are, names numbered in sorted order, -1 for a node
    without it. ``feature_columns`` (a list of names) picks the columns of ``features``
    the same way, in that order (a node table's numeric columns), or without a features
    file the graph file's numeric node attributes, which every node must have."""
    if undirected is not None and not isinstance(undirected, bool):
        raise TypeError(f"undirected must be True, False or None, got {undirected!r}")
    check_label_column(label_column)
    feature_columns = checked_feature_columns(feature_columns)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no graph file at {path}")
    wanted = NodeAttributes(label_column if not labels else None,
                            feature_columns if not features else ())
    read = _read_checked(path, not features and not labels, wanted)
    if read.hetero is not None:
        return _hetero_dataset(read.hetero, path, features or labels or label_column or
                               feature_columns or undirected)
    graph, extra = read.graph, read.extra or {}
    # (PyG's read_npz symmetrises: the gnn-benchmark layout declares nothing per line)
    declared_once = undirected is None and read.undirected is True and \
        _format_of(path) != ".npz"
    undirected = read.undirected if undirected is None else undirected
    if isinstance(undirected, Tensor) or undirected:
        among = undirected if isinstance(undirected, Tensor) else None
        listed = graph
        graph, edge_attr = with_missing_reverses(graph, extra.get("edge_attr"), among)
        extra = {**extra, "edge_attr": edge_attr} if edge_attr is not None else extra
        if declared_once:
            _warn_of_pairs_listed_both_ways(path, listed, graph.num_edges - listed.num_edges)
    elif undirected is None and _format_of(path) in EDGE_FILE_SUFFIXES + (".npz", ".adjlist"):
        _warn_if_one_way(path, graph, _format_of(path) == ".adjlist")
    keys = _NodeKeys(graph.num_nodes, read.names, path, read.first_id)
    x = read.x if not features else _feature_columns(features, feature_columns, keys) \
        if feature_columns else _matrix(features, graph.num_nodes, "features", keys)
    y = read.y if not labels else _column(labels, label_column, keys) if label_column else \
        _matrix(labels, graph.num_nodes, "labels", keys).view(-1).long()
    name = os.path.abspath(path)
    if x is None:
        x = default_features(graph)
    labelled = y is not None
    y = class_labels(y, name) if labelled else torch.zeros(graph.num_nodes, dtype=torch.long)
    # the files given override the file's own x and y; a Data's masks are kept
    names = None if read.names is None else [str(n) for n in read.names]
    return NodeDataset(name, graph, float32_features(float_features(x)), y,
                       *(read.split or labelled_split(y)), labelled=labelled,
                       node_names=names, **extra)


def load_graph_archive(path: str, features: str | None = None, labels: str | None = None,
                       undirected: bool | None = None, *,
                       label_column: str | None = None,
                       feature_columns: list | None = None) -> NodeDataset:
    """The graph file inside a downloaded archive (.tar.gz, .tar.bz2, .tar.xz, .tar, .zip),
    read as :func:`load_graph_file` reads it: KONECT's (its ``out.NAME``), SuiteSparse's
    (``NAME/NAME.mtx``, beside auxiliary matrices), Network Repository's, or any archive
    that holds one graph file. An archive of several is refused, naming them."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no graph archive at {path}")
    with tempfile.TemporaryDirectory() as folder:
        files = unpack_archive(path, folder, lambda name: _format_of(name) is not None)
        member = _graph_member(path, list(files))
        file = files[member]
        named = f"{path} ({member})"  # what errors and warnings name, not the copy
        try:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                dataset = load_graph_file(file, features, labels, undirected,
                                          label_column=label_column,
                                          feature_columns=feature_columns)
        except ValueError as err:
            raise ValueError(str(err).replace(file, named)) from err
        finally:
            for warning in said:
                warnings.warn(str(warning.message).replace(file, named), warning.category,
                              stacklevel=caller_stacklevel())
    dataset.name = os.path.abspath(path)
    return dataset


# text tables, which an archive may hold beside its graph file (node tables, notes)
_TEXT_TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".edges", ".edgelist")
# the names of an archive's documents (README.txt, LICENSE.txt), which no graph is
_DOCUMENT_NAMES = ("readme", "license", "licence", "notice", "changelog", "citation")


def _graph_member(path: str, members: list[str]) -> str:
    # a zip made on macOS holds a "__MACOSX/._NAME" resource fork beside each file
    members = [m for m in members if not m.startswith("__MACOSX/") and
               not os.path.basename(m).startswith("._")]
    # a README.txt or LICENSE.txt beside the graph is no edge list
    graphs = [m for m in members if _format_of(m) is not None and
              not os.path.basename(m).lower().startswith(_DOCUMENT_NAMES)]
    konect = [m for m in graphs if os.path.basename(m).lower().startswith("out.")]
    suitesparse = [m for m in graphs if m.lower().endswith(".mtx") and
                   os.path.basename(m)[:-4] == os.path.basename(os.path.dirname(m))]
    # one file of a graph format beside text files (notes, node tables) is the graph
    formatted = [m for m in graphs if _format_of(m) not in _TEXT_TABLE_SUFFIXES]
    for found in (konect, suitesparse, graphs, formatted):
        if len(found) == 1:
            return found[0]
    if not graphs:
        raise ValueError(f"{path}: holds no graph file graphloc reads (its files: "
                         f"{members[:8]}{' ...' if len(members) > 8 else ''})")
    raise ValueError(f"{path}: holds {len(graphs)} graph files ({graphs[:8]}"
                     f"{' ...' if len(graphs) > 8 else ''}); extract the one to read")


class NodeAttributes(NamedTuple):
    """The graph file's node attributes asked for: the classes' and the features'."""
    label: str | None = None
    features: tuple = ()


_NO_ATTRIBUTES = NodeAttributes()


def _read_checked(path: str, warn_unused: bool, wanted: NodeAttributes = _NO_ATTRIBUTES
                  ) -> _Read:
    """The file's contents; a compressed file that cannot be decompressed is a ValueError
    naming it."""
    fmt = _format_of(path)
    if fmt is None:
        raise ValueError(f"{path}: not a graph file graphloc reads (by its suffix: "
                         f"{', '.join(GRAPH_SUFFIXES)}, text ones optionally compressed as "
                         f".gz, .bz2, .xz, .zst)")
    compression = compression_of(path)
    if compression and fmt in _UNCOMPRESSED_ONLY:
        raise ValueError(f"{path}: a compressed {fmt} file is not read; a {fmt} file is "
                         f"compressed itself, so decompress it ({compression})")
    try:
        return _read(path, fmt, warn_unused, wanted)
    except (ValueError, OverflowError) as err:  # every error names the file
        if path in str(err):
            raise
        raise ValueError(f"{path}: {err}") from err
    except DECOMPRESSION_ERRORS as err:
        if not compression:
            raise
        raise ValueError(f"{path}: not a readable {compression} file "
                         f"({type(err).__name__}: {err})") from err


def _read(path: str, fmt: str, warn_unused: bool, wanted: NodeAttributes) -> _Read:
    """The file's contents, its classes and features from the node attributes ``wanted``
    names (formats without node attributes refuse them)."""
    if wanted.label is not None and fmt not in _ATTRIBUTE_SUFFIXES:
        raise ValueError(f"label_column {wanted.label!r} names a node attribute, and a "
                         f"{fmt} file has none: give the classes in a labels file")
    if wanted.features and fmt not in _ATTRIBUTE_SUFFIXES:
        raise ValueError(f"feature_columns {list(wanted.features)} name node attributes, "
                         f"and a {fmt} file has none: give the features in a features file")
    if fmt == ".pt":
        return _saved_data(path)
    if fmt == ".npz":
        return _Read(*read_npz(path))
    if fmt in NETWORKX_SUFFIXES:
        return _networkx_file(path, fmt, wanted)
    # these formats number vertices from 1 (vertex v is node v - 1)
    if fmt == ".mtx":
        return _Read(_matrix_market(path), first_id=1)
    if fmt in (".graph", ".metis"):
        return _Read(read_metis(path), first_id=1)
    if fmt == ".gt":
        return _graph_tool_file(path, wanted)
    if fmt == ".net":
        graph, names = read_pajek(path)
        return _Read(graph, names=names, first_id=1)
    if fmt in SIZED_SUFFIXES:
        graph, declared = read_dimacs(path)
        return _Read(graph, undirected=declared, first_id=1)
    comments = _leading_comments(path)
    konect = _konect_layout(comments)
    graph, directions, names = _edge_list(path, konect, comments)
    if warn_unused and konect is None:  # KONECT's size line counts its vertices
        _warn_of_unused_ids(path, graph)
    declared = _declared_undirected(comments)
    return _Read(graph, undirected=directions if declared is None else declared, names=names,
                 first_id=_KONECT_FIRST_IDS.get(konect, 0))


def _saved_data(path: str) -> _Read:
    data = _torch_file(path)
    if _is_hetero_data(data):
        return _Read(None, hetero=data)
    check_vertex_count(path, data.num_nodes, "its Data's")
    graph = Graph(data.edge_index, num_nodes=data.num_nodes)
    split = pyg_split(data, graph.num_nodes)
    warn_of_unread_keys(data, path, split is not None, stacklevel=caller_stacklevel() + 1)
    return _Read(graph, getattr(data, "x", None), getattr(data, "y", None), split,
                 kept_extras(data))  # as NodeDataset.from_pyg


def _is_hetero_data(data) -> bool:
    return hasattr(data, "node_types") and hasattr(data, "edge_types")  # PyG's HeteroData


def _hetero_dataset(data, path: str, options) -> HeteroNodeDataset:
    """A saved HeteroData as a HeteroNodeDataset (one labelled node type with its masks:
    ``HeteroNodeDataset.from_pyg``), for the heterogeneous models (LATTE, HGT, HAN, RGCN);
    features, labels and direction come from the HeteroData itself, so files or options
    that would change them are refused."""
    if options:
        raise ValueError(f"{path} holds a HeteroData: its features, labels and relations come "
                         "from it, so features, labels, their columns and undirected are "
                         "not taken")
    for node_type in data.node_types:
        check_vertex_count(path, data[node_type].num_nodes, f"node type {node_type!r}'s")
    return HeteroNodeDataset.from_pyg(data, os.path.abspath(path))


def default_features(graph: Graph) -> Tensor:
    """``[1, log(1 + in-degree), log(1 + out-degree)]`` per node."""
    return torch.stack([torch.ones(graph.num_nodes), graph.in_degree().float().log1p(),
                        graph.out_degree().float().log1p()], dim=1)


def _torch_file(path: str):
    """The PyG ``Data`` saved in ``path``. A .pt file is a pickle, and unpickling runs any
    function the file names, so only the names a saved Data needs are found: torch's own
    weights-only set, the globals registered with ``torch.serialization.add_safe_globals``
    (PyG registers its own), and PyG's data containers. Anything else is refused, with its
    names. (Not torch's ``weights_only=True`` itself: it refuses the defaultdict that PyG's
    sparse layouts keep. Under TORCH_FORCE_WEIGHTS_ONLY_LOAD it is used, as the user asked.)
    Until 2026-12-04 every .pt was unpickled in full, including one the command line was
    pointed at from elsewhere."""
    try:
        if _weights_only_forced():
            with torch.serialization.safe_globals(_pyg_data_classes()):
                data = torch.load(path, map_location="cpu", weights_only=True)
        else:
            data = torch.load(path, map_location="cpu", weights_only=False,
                              pickle_module=_data_pickle(_loadable_globals()))
    except _RefusedGlobal as err:
        raise ValueError(
            f"{path} names {err}, which graphloc does not unpickle: only tensors, plain "
            f"containers and PyG's data classes load here, since unpickling runs what a file "
            f"names. If you trust this file, load it yourself and pass the Data on: "
            f"NodeDataset.from_pyg(torch.load(path, weights_only=False))") from None
    except Exception as err:
        raise ValueError(f"{path} is not a readable torch file ({type(err).__name__}: "
                         f"{err})") from err
    if isinstance(data, (tuple, list)) and data and (
            hasattr(data[0], "edge_index") or _is_hetero_data(data[0])):
        data = data[0]  # a (data, slices) pair as PyG's InMemoryDataset saves it
    if _is_hetero_data(data):
        return data
    if not hasattr(data, "edge_index"):
        raise ValueError(f"{path} holds a {type(data).__name__}, not a PyG Data with an "
                         "edge_index")
    return pyg_data_with_edges(data, path)


class _RefusedGlobal(pickle.UnpicklingError):
    """A name outside the set a saved Data may use."""


def _data_pickle(allowed: set[str]) -> types.SimpleNamespace:
    """A pickle module for torch.load whose Unpickler finds only the names in ``allowed``;
    its ``load`` too, through which the legacy format reads its header records."""

    class DataUnpickler(pickle.Unpickler):
        def find_class(self, module, name):
            # the names a Python 2 protocol writes (__builtin__.set), as pickle maps them
            where = _compat_pickle.NAME_MAPPING.get((module, name)) or \
                (_compat_pickle.IMPORT_MAPPING.get(module, module), name)
            if ".".join(where) not in allowed:
                raise _RefusedGlobal(f"{module}.{name}")
            return super().find_class(module, name)

    return types.SimpleNamespace(__name__="graphloc_data_pickle", Unpickler=DataUnpickler,
                                 load=lambda file, **kw: DataUnpickler(file, **kw).load())


def _pyg_data_classes() -> list:
    """PyG's data containers and the containers its storages use (only the latter where
    PyG is not installed: a saved Data cannot be read without it anyway)."""
    classes = [collections.OrderedDict, collections.defaultdict]
    try:
        from torch_geometric.data import Data, HeteroData
        from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
        from torch_geometric.data.feature_store import TensorAttr
        from torch_geometric.data.graph_store import EdgeAttr
        from torch_geometric.data.storage import (
            AttrType,
            BaseStorage,
            EdgeStorage,
            GlobalStorage,
            NodeStorage,
        )
    except ImportError:
        return classes
    # (a saved HeteroData names BaseStorage, TensorAttr and EdgeAttr, where a Data names
    # its own subclasses of the last two)
    return classes + [Data, HeteroData, DataEdgeAttr, DataTensorAttr, TensorAttr, EdgeAttr,
                      GlobalStorage, BaseStorage, NodeStorage, EdgeStorage, AttrType]


def _loadable_globals() -> set[str]:
    """Names a saved Data or HeteroData may use: torch's weights-only set, the registered
    safe globals, and PyG's data containers."""
    names = {f"{g.__module__}.{g.__qualname__}" for g in _pyg_data_classes()}
    for g in torch.serialization.get_safe_globals():
        names.add(g[1] if isinstance(g, tuple) else f"{g.__module__}.{g.__qualname__}")
    weights_only = getattr(torch._weights_only_unpickler, "_get_allowed_globals", dict)
    return names | set(weights_only())


def _weights_only_forced() -> bool:
    """torch's TORCH_FORCE_WEIGHTS_ONLY_LOAD is set: torch.load then refuses any pickle
    module of its own, and the user asked for its weights-only unpickler."""
    return os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in ("1", "y", "yes", "true")


_NETWORKX_KINDS = {".graphml": "GraphML", ".gml": "GML", ".gexf": "GEXF",
                   ".json": "node-link JSON", ".g6": "graph6", ".graph6": "graph6",
                   ".s6": "sparse6", ".sparse6": "sparse6", ".adjlist": "adjacency list"}


def _networkx_file(path: str, fmt: str, wanted: NodeAttributes = _NO_ATTRIBUTES) -> _Read:
    kind = _NETWORKX_KINDS[fmt]
    try:
        g = _networkx_graph(path, fmt)
    except DECOMPRESSION_ERRORS:
        raise
    except Exception as err:  # ParseError, NetworkXError, JSONDecodeError, KeyError
        raise ValueError(f"{path} is not a readable {kind} file ({type(err).__name__}: "
                         f"{err})") from err
    if g.number_of_nodes() == 0:
        raise ValueError(f"{path} has no nodes")
    # GML's and GEXF's label is each node's name (GraphML's and JSON's may be a class)
    named = fmt in (".gml", ".gexf")
    g = _integer_ids(_named_by_gml_label(g) if named else g)
    _warn_of_unread_attributes(g, path, named, {wanted.label, *wanted.features})
    # row i is node i where the file's ids are 0 .. N-1 (in any order in the file), as a
    # features or labels file reads them ("line i: node i"); else the file's node order
    order, moved = networkx_node_order(g, None)
    order = sorted(order) if moved else order
    graph = Graph.from_networkx(g, nodes=order)
    names = None if moved or order == list(range(len(order))) else order
    if wanted == _NO_ATTRIBUTES:
        return _Read(graph, y=_node_labels(g, order, path, named), names=names)
    attributes = sorted({str(key) for _, data in g.nodes(data=True) for key in data})
    values = {key: [g.nodes[node].get(key) for node in order]
              for key in (wanted.label, *wanted.features) if key is not None}
    y = _node_labels(g, order, path, named) if wanted.label is None else \
        _attribute_classes(values[wanted.label], path, wanted.label, attributes)
    x = _attribute_features(values, wanted.features, path, attributes, order)
    return _Read(graph, x=x, y=y, names=names)


def _graph_tool_file(path: str, wanted: NodeAttributes) -> _Read:
    """A graph-tool file. An undirected one lists each edge exactly once (graph-tool writes
    it so), so every edge but a loop gets its reverse: two parallel edges listed u -> v and
    v -> u are two undirected edges (``with_missing_reverses``, for files that may list an
    edge both ways, took them for one)."""
    read = read_graph_tool(path, (wanted.label, *wanted.features))
    graph = read.graph
    if not read.directed:
        edges = graph.edge_index
        edges = torch.cat([edges, edges[:, edges[0] != edges[1]].flip(0)], dim=1)
        graph = Graph(edges, num_nodes=graph.num_nodes)
    _warn_of_unread(path, sorted(read.edge_properties),
                    sorted(p for p in read.vertex_properties
                           if p not in (wanted.label, *wanted.features)))
    for key, values in read.values.items():
        if values is None:
            raise ValueError(f"{path}: vertex property {key!r} holds objects or long doubles, "
                             "which graphloc does not read")
    values = {key: read.values.get(key, [None] * read.graph.num_nodes)
              for key in (wanted.label, *wanted.features) if key is not None}
    y = None if wanted.label is None else \
        _attribute_classes(values[wanted.label], path, wanted.label, read.vertex_properties)
    x = _attribute_features(values, wanted.features, path, read.vertex_properties,
                            list(range(read.graph.num_nodes)))
    return _Read(graph, x=x, y=y, names=read.names)


def _networkx_graph(path: str, fmt: str):
    import networkx as nx
    if fmt == ".json":
        with open_text(path, encoding="utf-8-sig") as f:
            data = json.load(f)
        if not isinstance(data, dict) or "nodes" not in data:
            raise ValueError("not networkx's node-link layout: a JSON object with 'nodes' "
                             "and 'links' (or 'edges')")
        key = "edges" if "edges" in data else "links"
        data = _repeated_links_kept(_links_by_id(data, key, path), key, path)
        return nx.node_link_graph(data, edges=key)
    if fmt == ".gml":  # XML's parser reads UTF-16 by itself, networkx's GML reader not
        with open_utf8_binary(path) as f:
            return nx.read_gml(f, label="id")
    if fmt == ".adjlist":  # as text: a byte-order mark was read as a node's name
        # a multigraph: networkx writes a neighbour once per parallel edge ("0 1 1"), and a
        # DiGraph kept one of them without a word, where edge lists keep every line
        with open_text(path, encoding="utf-8-sig") as f:
            return nx.parse_adjlist(f.read().splitlines(), create_using=nx.MultiDiGraph)
    with open_binary(path) as f:
        if fmt in (".g6", ".graph6"):
            return _one_graph(nx.read_graph6(f))
        if fmt in (".s6", ".sparse6"):
            return _one_graph(nx.read_sparse6(f))
        data = f.read()
    if fmt == ".graphml":
        data = _hoisted(path, data)
    read = nx.read_graphml if fmt == ".graphml" else nx.read_gexf
    try:
        g = read(io.BytesIO(data))
    except nx.NetworkXError as err:
        if "found in" not in str(err):  # not its refusal of an edge's own direction
            raise
        g = read(io.BytesIO(with_mixed_directions_spelled_out(data, fmt)))
    _warn_of_undeclared_nodes(path, g, sum(1 for _ in _NODE_ELEMENT.finditer(data)))
    return g


_NODE_ELEMENT = re.compile(rb"<(?:[\w.-]+:)?node[\s>/]")


def _warn_of_undeclared_nodes(path: str, g, declared: int) -> None:
    """An edge naming a node the file does not declare (a typo, a node left out): networkx
    adds the node, and the graph gained it without a word."""
    extra = g.number_of_nodes() - declared
    if extra > 0:
        warnings.warn(f"{path}: {extra} node(s) appear only in edges, not among the file's "
                      f"{declared} nodes (a misspelt id?); they are read as nodes of the "
                      "graph", stacklevel=caller_stacklevel())


def _hoisted(path: str, data: bytes) -> bytes:
    """A GraphML's nested graphs (yEd's groups) as part of the one graph, said so."""
    data, nested = with_nested_graphs_hoisted(data)
    if nested:
        warnings.warn(f"{path}: {nested} node(s) hold a graph of their own (yEd's groups); "
                      "their nodes and edges are read as part of the one graph, and each "
                      "group stays a node", stacklevel=caller_stacklevel())
    return data


def _links_by_id(data: dict, key: str, path: str) -> dict:
    """Node-link data whose links name their nodes by id. d3's force layout names them by
    their position in "nodes" (its default without ``.id()``): networkx read those
    positions as more ids, so a graph of named nodes became those nodes, isolated, and
    as many new ones holding the edges, without a word. Positions are read as such (said
    so) where every endpoint is one and not every endpoint is an id; an endpoint that is
    neither an id nor a position is an error naming it."""
    nodes, links = data["nodes"], data.get(key) or []
    if not isinstance(nodes, list) or not isinstance(links, list) or \
            not all(isinstance(n, dict) and "id" in n for n in nodes):
        return data  # nodes without ids are numbered by position, as the links read them
    ids = [n["id"] for n in nodes]
    declared = {_hashable(i) for i in ids}
    ends = [link.get(side) for link in links if isinstance(link, dict)
            for side in ("source", "target")]
    if all(_hashable(e) in declared for e in ends):
        return data
    positions = all(isinstance(e, int) and not isinstance(e, bool) and 0 <= e < len(ids)
                    for e in ends)
    if not positions:
        odd = next(e for e in ends if _hashable(e) not in declared)
        raise ValueError(f"a link names the node {odd!r}, which 'nodes' does not list (by id, "
                         f"nor by position)")
    warnings.warn(f"{path}: its links name their nodes by position in 'nodes' (d3's "
                  "default), not by id; read so", stacklevel=caller_stacklevel())
    renamed = [{**link, "source": ids[link["source"]], "target": ids[link["target"]]}
               for link in links]
    return {**data, key: renamed}


def _repeated_links_kept(data: dict, key: str, path: str) -> dict:
    """Node-link data that lists a pair more than once while saying ``"multigraph": false``
    read as a multigraph, said so: networkx kept one link of each pair without a word,
    where GraphML, GEXF and the text formats keep every edge they list."""
    links = data.get(key)
    if data.get("multigraph") or not isinstance(links, list):
        return data
    directed = data.get("directed", False)
    pairs = collections.Counter(
        (_hashable(link.get("source")), _hashable(link.get("target"))) if directed else
        frozenset((_hashable(link.get("source")), _hashable(link.get("target"))))
        for link in links if isinstance(link, dict))
    repeated = sum(count - 1 for count in pairs.values())
    if not repeated:
        return data
    warnings.warn(f"{path}: says \"multigraph\": false but lists {repeated} link(s) again "
                  "for a pair it already links; every link is read as an edge (parallel "
                  "edges), as the other formats read them", stacklevel=caller_stacklevel())
    return {**data, "multigraph": True}


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def _one_graph(read):
    """A graph6 or sparse6 file holds one graph per line (nauty's and House of Graphs'
    collections): one is a dataset, several are refused by count."""
    if isinstance(read, list):
        raise ValueError(f"the file holds {len(read)} graphs, one per line; a dataset is one "
                         "graph: write each line to its own file")
    return read


def _named_by_gml_label(g):
    """A GML or GEXF graph's nodes named by their ``label`` where every node has its own
    (the formats' name field: networkx writes each node's name there and numbers GML's ids
    0, 1, ... in its node order, and reads the labels back as the names; Gephi's ids are
    "n0", "n1", ...), else by their ids. By the ids,
    an integer-named graph written in another order than its names had its rows shuffled
    against a features file by name."""
    import networkx as nx
    labels = [g.nodes[v].get("label") for v in g.nodes]
    if any(label is None for label in labels) or len(set(labels)) != len(labels):
        return g
    named = nx.relabel_nodes(g, dict(zip(g.nodes, labels, strict=True)), copy=True)
    for v in named.nodes:
        del named.nodes[v]["label"]
    return named


def _integer_ids(g):
    """A graph whose ids are all integers written out ("0", "17", as GraphML holds an
    integer-named graph's ids and GML its labels) relabelled with those integers, so that
    they number the rows. Kept as strings they were numbered in file order: node "0"
    listed second became row 1, and a features file by node id was read against the wrong
    nodes without a word."""
    import networkx as nx
    ids = list(g.nodes)
    if all(isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v) and v == str(int(v))
           for v in ids):
        return nx.relabel_nodes(g, {v: int(v) for v in ids}, copy=True)
    return g


def _warn_of_unread_attributes(g, path: str, named: bool, read: set = frozenset()) -> None:
    """Names the node and edge attributes the dataset leaves out, as the edge list does for
    its extra columns: a street graph's lengths or a graph's weights were dropped
    without a word. (A GML or GEXF ``label`` left here (``named``) is not every node's own
    name, and no class; GEXF's ``viz`` is a drawing's position, colour and size.)"""
    # an edge's id (GEXF's, GraphML's: yEd and Gephi number every edge) names it, and
    # holds nothing a dataset would carry
    edge_keys = sorted({str(key) for *_, data in g.edges(data=True) for key in data} - {"id"})
    node_keys = sorted({str(key) for _, data in g.nodes(data=True) for key in data}
                       - ({"y", "viz"} if named else {"y", "label", "viz"}) - read)
    _warn_of_unread(path, edge_keys, node_keys)


def _warn_of_unread(path: str, edge_keys: list, node_keys: list) -> None:
    unread = ([f"edge attributes {edge_keys}"] if edge_keys else []) + \
        ([f"node attributes {node_keys}"] if node_keys else [])
    if unread:
        warnings.warn(f"{path}: {' and '.join(unread)} are not read: the datasets carry no "
                      "edge attributes, and node features come from a features file "
                      "(default: degree features); label_column (--label-column) reads a "
                      "node attribute as the classes", stacklevel=caller_stacklevel())


def _node_labels(g, order: list, path: str, named: bool) -> Tensor | None:
    """Class ids from a ``y`` node attribute, or in GraphML and JSON a ``label`` one
    (strings are numbered in sorted order), for the nodes in ``order``; -1 (no label) where
    a node lacks it. A GML's or GEXF's ``label`` (``named``) is the node's name (the
    format's own field, which networkx writes for every node), not a class: read as one,
    every node was its own class. A GraphML
    ``label`` that differs on every node holding one (yEd's names, which networkx reads as
    ``label``) is taken as names too, with a warning."""
    for key in ("y",) if named else ("y", "label"):
        values = [g.nodes[node].get(key) for node in order]
        present = [v for v in values if not _missing(v)]
        if not present:
            continue
        if key == "label" and len(present) > 1 and len(set(map(str, present))) == len(present):
            warnings.warn(f"{path}: node attribute 'label' differs on every node that has one "
                          "(no class would hold two nodes), so it is read as names, not "
                          "classes: store classes as a 'y' attribute",
                          stacklevel=caller_stacklevel())
            return None
        if key == "y" and all(_is_number(v) for v in present) and \
                _coordinates(g, order, values):
            warnings.warn(f"{path}: node attributes 'x' and 'y' are coordinates (not "
                          "whole numbers), as in a street graph: 'y' is not read as "
                          "classes (give a labels file; for a City-Networks dataset of a "
                          "street graph: graphloc dataset build)",
                          stacklevel=caller_stacklevel())
            return None
        return _attribute_classes(values, path, key, [key])
    return None


def _missing(value) -> bool:
    return value is None or isinstance(value, str) and value.strip().lower() in MISSING_VALUES


def _attribute_features(values: dict, keys: tuple, path: str, attributes: list,
                        order: list) -> Tensor | None:
    """The features from the numeric node attributes ``keys`` (booleans as 0 and 1), which
    every node must have: a column each, or as many as its lists hold where an attribute
    is a list per node (a feature vector: PyG's ``to_networkx`` keeps ``x`` so, and
    graph-tool's vector properties); None where none are asked for."""
    if not keys:
        return None
    blocks = []
    for key in keys:
        missing = next((i for i, v in enumerate(values[key]) if v is None), None)
        if missing is not None:
            raise ValueError(f"{path}: node {order[missing]!r} has no attribute {key!r} "
                             f"(feature_columns: every node needs each); the node attributes: "
                             f"{attributes}")
        rows = [v if isinstance(v, (list, tuple)) else [v] for v in values[key]]
        odd = next((i for i, row in enumerate(rows) if not all(map(_is_feature, row))), None)
        if odd is not None:
            raise ValueError(f"{path}: node {order[odd]!r} has {key!r} = "
                             f"{values[key][odd]!r}, not a finite number (feature_columns)")
        odd = next((i for i, row in enumerate(rows) if len(row) != len(rows[0])), None)
        if odd is not None:
            raise ValueError(f"{path}: node {order[odd]!r} has {len(rows[odd])} values of "
                             f"{key!r} and node {order[0]!r} {len(rows[0])} (feature_columns "
                             "reads as many for every node)")
        blocks.append(torch.tensor([[float(v) for v in row] for row in rows],
                                   dtype=torch.float64).view(len(rows), -1))
    return torch.cat(blocks, dim=1)


def _is_feature(value) -> bool:
    return isinstance(value, (bool, np.bool_)) or (_is_number(value) and
                                                   math.isfinite(float(value)))


def _attribute_classes(values: list, path: str, key: str, attributes: list) -> Tensor:
    """Class ids from the values of the node attribute ``key`` (None where a node lacks
    it: -1): numbers as class ids (2.7 refused), booleans as 0 and 1, other values names
    numbered in sorted order; an attribute no node has is an error naming those there.
    A missing value written out ("", "nan", "null", as in a labels file) is no class: read
    as a name, it was a class of its own."""
    values = [None if _missing(v) else v for v in values]
    present = [v for v in values if v is not None]
    if not present:
        raise ValueError(f"{path}: no node has the attribute {key!r} (label_column); its "
                         f"node attributes: {attributes}")
    if any(isinstance(v, (list, tuple)) for v in present):
        raise ValueError(f"{path}: node attribute {key!r} holds several values per node (a "
                         "list), not one class")
    if all(isinstance(v, (bool, np.bool_)) for v in present):
        return torch.tensor([-1 if v is None else int(v) for v in values])
    if all(_is_number(v) for v in present):
        numbers = torch.tensor([-1.0 if v is None else float(v) for v in values],
                               dtype=torch.float64)
        return class_labels(numbers, f"{path} (node attribute {key!r})")
    classes = {v: i for i, v in enumerate(sorted(set(map(str, present))))}
    return torch.tensor([-1 if v is None else classes[str(v)] for v in values])


def _coordinates(g, order: list, y_values: list) -> bool:
    """Whether numeric ``x`` and ``y`` node attributes are positions (an osmnx street
    graph's longitude and latitude), not features and classes: every node has both and
    some ``y`` is not a whole number, which no class id is."""
    x_values = [g.nodes[node].get("x") for node in order]
    if any(v is None or not _is_number(v) for v in x_values + y_values):
        return False
    return any(not float(v).is_integer() for v in y_values)


def _edge_list(path: str, konect: str | None = None, comments: tuple = ()
               ) -> tuple[Graph, Tensor | None, list | None]:
    """Two columns (source, destination) per line, tab, comma, semicolon or space
    separated (UTF-8, a byte-order mark allowed); a header line is skipped; ids that are
    all integers (also written as "7.0") are used as they are, others are numbered in
    order of appearance. Further columns (edge weights, timestamps) are ignored with a
    warning: the datasets carry no edge attributes; but a header's "Type" column of
    "Directed" and "Undirected" (Gephi's edge table) is each edge's direction, returned
    as a bool per edge (None without one). Returns (graph, directions, the names in node
    order where the ids are names). A KONECT file (``konect``, its format line's word)
    numbers its vertices from 1: see :func:`_konect_numbering`."""
    columns = _integer_edge_columns(path)
    low = 1 if konect else 0
    if columns is None or int(columns.edge_index.min()) < low or \
            int(columns.edge_index.max()) >= node_limit()[0]:
        return _general_edge_list(path, konect, comments)  # names the line of any error
    if columns.width > 2:
        _warn_of_extra_columns(path, columns.first_line, columns.width)
    edge_index = columns.edge_index
    if konect:
        return _konect_numbering(edge_index, konect, comments), None, None
    return Graph(_without_size_line(path, edge_index, columns.first_line)), None, None


def _without_size_line(path: str, edge_index: Tensor, first_line: int) -> Tensor:
    """An integer edge list without a first line "N M" that counts its nodes and edges
    (Network Repository's and some course files' header): read as an edge, it joined two
    unrelated nodes and added M - N isolated ones. Taken for one, with a warning, where M
    is the number of lines after it and N the count of the ids they hold: their largest
    plus one (numbered from 0) or their largest (from 1)."""
    if edge_index.size(1) < 3:
        return edge_index
    nodes, edges = (int(v) for v in edge_index[:, 0])
    rest = edge_index[:, 1:]
    if edges != rest.size(1) or int(rest.min()) < 0 or \
            nodes not in (int(rest.max()), int(rest.max()) + 1):
        return edge_index
    warnings.warn(f"{path}: line {first_line} ('{nodes} {edges}') counts the nodes and edges "
                  f"(the {edges} lines after it), so it is read as a size line, not as an "
                  "edge; remove it if it is an edge", stacklevel=caller_stacklevel())
    return rest


class _Columns(NamedTuple):
    edge_index: Tensor
    width: int  # fields per line
    first_line: int  # the first edge's line number


def _integer_edge_columns(path: str) -> _Columns | None:
    """The edges of a file whose every line (comments and blank lines aside) holds the
    same number of fields, the first two integer ids and any others numbers (weights,
    timestamps), as SNAP's, KONECT's and Network Repository's files are, parsed by NumPy a
    block of lines at a time; None for any other file, which the general reader takes (6x
    to 7.5x slower on 3.3 million edges, parsing each field in Python:
    benchmarks/bench_graph_files.py; a weighted or timestamped file went there until
    2026-12-05). Blocks bound the memory of the lines as Python strings (a 55 MB file's
    peak resident set fell from 1.27 GB to 0.88 to 1.02 GB)."""
    blocks, delimiter, width, first_line, lines_before = [], None, None, None, 0
    try:
        with open_text(path, newline="", encoding="utf-8-sig") as f:
            for text in text_blocks(f):
                raw = text.splitlines()
                lines = [line for line in raw if line and not line.startswith(("#", "%"))]
                if not lines:
                    lines_before += len(raw)
                    continue
                if first_line is None:
                    first_line = lines_before + 1 + raw.index(lines[0])
                delimiter = delimiter or sniffed_delimiter("\n".join(lines[:64]))
                block = _leading_integer_pairs(lines, delimiter)
                if block is None or block[1] != (width or block[1]):
                    return None
                blocks.append(block[0])
                width = block[1]
    except UnicodeDecodeError:
        return None  # the general reader names it
    if not blocks:
        return None
    edges = torch.from_numpy(np.concatenate(blocks).reshape(-1, 2).T.copy())
    return _Columns(edges, width, first_line)


def _leading_integer_pairs(lines: list, delimiter: str) -> tuple | None:
    """``(the first two fields of each line as integers, in order; the fields per line)``
    for lines that each hold the same number (two or more) of non-empty number fields,
    the first two integers; None otherwise."""
    split = str.split if delimiter == " " else lambda line: line.split(delimiter)
    width = len(split(lines[0]))
    # each line split and dropped in turn (a block's split lines held as lists took about
    # 100 MB more at 16 million characters)
    if width < 2 or any(len(fields) != width or not all(field.strip() for field in fields)
                        for fields in map(split, lines)):
        return None  # an empty field ("1,,2"), a ragged line, a one-column line
    if delimiter != " ":
        lines = [line.replace(delimiter, " ") for line in lines]
    if width == 2:
        pairs = parse_integers(lines)
        return None if pairs is None else (pairs, 2)
    values = parse_integers(lines, np.float64)  # weights and times need not be integers
    if values is None:
        return None
    ids = values.reshape(-1, width)[:, :2]
    # "7.0" ids are ids, as the general reader takes them; exact below 2^53
    if not (np.all(ids == np.round(ids)) and np.all(np.abs(ids) < 2.0**53)):
        return None
    return ids.astype(np.int64).reshape(-1), width


def _warn_of_extra_columns(path: str, number: int, count: int, typed: bool = False) -> None:
    read = "source and destination columns" + (" and the Type" if typed else "")
    warnings.warn(f"{path}: line {number} has {count} columns; only the {read} are read, "
                  "the others (edge weights?) are ignored: graphloc's datasets carry no edge "
                  "attributes", stacklevel=caller_stacklevel())


def _general_edge_list(path: str, konect: str | None, comments: tuple
                       ) -> tuple[Graph, Tensor | None, list | None]:
    """:func:`_edge_list` of any file, field by field in Python: headers, names, ids written
    as "7.0", further columns, and errors naming their line."""
    lines = _edge_list_rows(path)
    header = None
    if lines and _is_header([row for _, row in lines[:2]]):
        header, lines = _endpoints_first(lines[0][1], lines[1:])
    if not lines:
        raise ValueError(f"{path}: the edge list holds no edges (no line but blank lines, "
                         "comments or a header); an edgeless graph has no node count to read")
    bad = next(((number, row) for number, row in lines if len(row) < 2), None)
    if bad is not None:
        raise ValueError(f"{path}: an edge list needs two columns (source, destination) per "
                         f"line; line {bad[0]} has {len(bad[1])}")
    directions, typed = _type_column(path, header, lines)
    wide = next(((number, row) for number, row in lines
                 if any(row[i].strip() for i in range(2, len(row)) if i not in typed)), None)
    if wide is not None:
        _warn_of_extra_columns(path, wide[0], len(wide[1]), typed=bool(typed))
    _refuse_missing_ids(path, lines)
    ends = [(row[0].strip(), row[1].strip()) for _, row in lines]
    numbers = [[integer_id(a), integer_id(b)] for a, b in ends]  # each id parsed once
    if konect is not None:
        return _konect_graph(path, lines, numbers, konect, comments), directions, None
    if all(None not in pair for pair in numbers):
        edge_index = _integer_edge_index(path, lines, numbers)
        if header is None:
            edge_index = _without_size_line(path, edge_index, lines[0][0])
        return Graph(edge_index), directions, None
    _warn_if_mixed_ids(path, lines, numbers)
    ids: dict[str, int] = {}
    pairs = [[ids.setdefault(a, len(ids)), ids.setdefault(b, len(ids))] for a, b in ends]
    return Graph(torch.tensor(pairs).t(), num_nodes=len(ids)), directions, list(ids)


def _endpoints_first(header: list, lines: list) -> tuple[list, list]:
    """``header`` and ``lines`` with the columns the header names source and target moved
    first: read by position, "id,source,target" took the edge ids for sources and
    "target,source" turned every edge round, without a word. As they are where the header
    does not name both."""
    names = [name.strip().lower() for name in header]
    source = next((i for i, name in enumerate(names) if name in _SOURCE_COLUMNS), None)
    target = next((i for i, name in enumerate(names) if name in _TARGET_COLUMNS), None)
    if source is None or target is None or source == target or (source, target) == (0, 1):
        return header, lines
    order = [source, target] + [i for i in range(len(header)) if i not in (source, target)]

    def moved(row: list) -> list:
        return [row[i] for i in order if i < len(row)]
    return moved(header), [(number, moved(row)) for number, row in lines]


_DIRECTIONS = {"directed": False, "undirected": True}


def _type_column(path: str, header: list | None, lines: list) -> tuple[Tensor | None, set]:
    """Gephi's edge table ("Source,Target,Type,...") gives each edge's direction in its
    "Type" column, "Directed" or "Undirected": read as one more ignored column, an
    undirected edge carried its messages one way only. Returns (True per undirected edge,
    or None; the column's index, so it is not called an ignored column). A "Type" column
    of other values (a relation's name) is no direction, and ignored with the others."""
    column = next((i for i, name in enumerate(header or ())
                   if i >= 2 and name.strip().lower() == "type"), None)
    if column is None:
        return None, set()
    values = [row[column].strip().lower() if column < len(row) else "" for _, row in lines]
    if not values or not set(values) <= set(_DIRECTIONS):
        odd = next((i for i, v in enumerate(values) if v not in _DIRECTIONS), None)
        if odd is not None and set(values) & set(_DIRECTIONS):
            number, row = lines[odd]
            value = row[column].strip() if column < len(row) else ""
            raise ValueError(f"{path}: line {number} has the Type {value!r}, where the "
                             f"other lines' Type gives the edge's direction ('Directed' or "
                             f"'Undirected')")
        return None, set()
    return torch.tensor([_DIRECTIONS[v] for v in values], dtype=torch.bool), {column}


def _leading_comments(path: str) -> tuple[str, ...]:
    """The lines before a file's first edge that are comments ("#", "%"), stripped and in
    lower case: where KONECT and SNAP say what the file holds."""
    comments = []
    with open_text(path, encoding="utf-8-sig", errors="replace") as f:
        for line in f:
            text = line.strip().lower()
            if not text.startswith(("#", "%")):
                break
            comments.append(text)
    return tuple(comments)


# KONECT numbers vertices from 1; a bipartite file numbers its two sides apart, so an id
# names no one node (None: an integer-keyed features or labels file is refused)
_KONECT_FIRST_IDS = {"sym": 1, "asym": 1, "bip": None}


def _konect_layout(comments: tuple) -> str | None:
    """KONECT's format word from its first line ("% sym unweighted"): "sym" (undirected,
    each edge listed once), "asym" (directed) or "bip" (bipartite: undirected edges from a
    left to a right vertex set), or None for a file that is not KONECT's."""
    match = re.match(r"%\s*(sym|asym|bip)\b", comments[0]) if comments else None
    return match.group(1) if match else None


def _konect_graph(path: str, lines: list, numbers: list, layout: str, comments: tuple) -> Graph:
    """A KONECT edge list's graph, its ids checked line by line. KONECT numbers vertices
    from 1, so vertex v is node v - 1 (read as given, every file gained an isolated node
    0, counted in each average over nodes); its size line ("% edges left right") gives
    the vertex count, isolated vertices included. A bipartite ("bip") file numbers its
    left and right vertices separately, both from 1: right vertex v is node left + v - 1.
    Read in one numbering, left vertex 1 and right vertex 1 were one node, joining
    unrelated vertices without a word."""
    missing = next((i for i, pair in enumerate(numbers) if None in pair), None)
    if missing is not None:
        number, fields = lines[missing]
        raise ValueError(f"{path}: a KONECT file ('% {layout}') numbers its vertices from 1, "
                         f"but line {number} has {fields[0].strip()!r} -> "
                         f"{fields[1].strip()!r}")
    edge_index = _integer_edge_index(path, lines, numbers)
    if int(edge_index.min()) < 1:
        row = next(i for i, pair in enumerate(numbers) if min(pair) < 1)
        raise ValueError(f"{path}: line {lines[row][0]} has the vertex id 0, but a KONECT file "
                         f"('% {layout}') numbers its vertices from 1")
    return _konect_numbering(edge_index, layout, comments)


def _konect_numbering(edge_index: Tensor, layout: str, comments: tuple) -> Graph:
    """KONECT's vertex ids (from 1; a bipartite file's two sides each from 1) as nodes."""
    edge_index = edge_index - 1
    sizes = _konect_sizes(comments)
    left = max(sizes[0], int(edge_index[0].max()) + 1)
    right = max(sizes[1], int(edge_index[1].max()) + 1)
    if layout == "bip":
        edge_index[1] += left
        return Graph(edge_index, num_nodes=left + right)
    return Graph(edge_index, num_nodes=max(left, right))


def _konect_sizes(comments: tuple) -> tuple[int, int]:
    """The left and right vertex counts of KONECT's size line ("% 58595 4893 6000": edges,
    left, right; a unipartite file gives its count twice), (0, 0) where it has none."""
    for text in comments[1:2]:
        fields = text.lstrip("%").split()
        if len(fields) >= 3 and all(field.isdigit() for field in fields[:3]):
            return int(fields[1]), int(fields[2])
    return 0, 0


def _declared_undirected(comments: tuple) -> bool | None:
    """What an edge list's leading comment lines say of its direction: KONECT's format line
    ("% sym": undirected, each edge listed once; "% bip": bipartite, whose edges KONECT
    takes as undirected, each listed once; "% asym": directed) or SNAP's "# Undirected
    graph: ..." (each pair once); None where they say nothing. (SNAP's "# Directed graph
    (each unordered pair of nodes is saved once)" heads files that hold both directions,
    so it is not read as a declaration.)"""
    konect = _konect_layout(comments)
    if konect is not None:
        return konect != "asym"
    if any(re.match(r"#\s*undirected graph\b", text) for text in comments):
        return True
    return None


def _warn_of_pairs_listed_both_ways(path: str, listed: Graph, added: int) -> None:
    """A file that declares each undirected edge once (KONECT's "sym", SNAP's "Undirected
    graph", DIMACS "e" lines) and yet lists some pairs both ways: each such pair is read as
    one undirected edge, which is right for a pair listed twice by mistake and wrong for
    two parallel edges written in opposite directions (a multigraph's), which the file
    cannot tell apart; said, as the count of edges would differ. ``added``: the reverses
    given to the ``listed`` edges, one per edge without its reverse (a loop is its own)."""
    edges = int((listed.edge_index[0] != listed.edge_index[1]).sum())
    count = edges - added  # the edges listed with their reverse
    if 0 < count < edges:
        warnings.warn(f"{path}: the file declares each undirected edge once, yet {count} of "
                      f"its {edges} edges have their reverse listed too: each such pair is "
                      "read as one undirected edge (were they parallel edges, written in "
                      "opposite directions, they would be two)", stacklevel=caller_stacklevel())


def _warn_if_one_way(path: str, graph: Graph, adjacency_list: bool = False) -> None:
    """A file of edges none of which has its reverse: most often an undirected graph
    written one line per pair, read here as one-way edges (every message flows from the
    first column to the second), which changes what a model computes and its influence."""
    src, dst = graph.edge_index
    between = src != dst
    if not bool(between.any()) or bool((has_reverse(graph) & between).any()):
        return
    way = "from a line's first node to the others" if adjacency_list else \
        "from the first column to the second"
    writers = "write_adjlist" if adjacency_list else "write_edgelist and SNAP's 'ungraph' files"
    warnings.warn(f"{path}: none of its {int(between.sum()):,} edges (loops aside) has its "
                  f"reverse, so every edge is one-way, {way}. If the graph is undirected "
                  f"(each pair written once, as networkx's {writers} write it), load it with "
                  "undirected=True (command line: --undirected)", stacklevel=caller_stacklevel())


def _matrix_market(path: str) -> Graph:
    """A MatrixMarket adjacency (SuiteSparse, network repositories): entry (i, j) is the
    edge i -> j, a symmetric file both directions (scipy expands it), ids 1-based in the
    file. Read as an edge list, its size line became an edge and its ids were off by one."""
    import scipy.io
    if compression_of(path) or byte_order_marked(path):  # decoded here: Python's errors
        with open_utf8_binary(path) as f:
            source = io.BytesIO(f.read())
    else:
        # the path, not an open file: scipy's reader aborted the process (pybind11's
        # terminate) on an open file that is not MatrixMarket, and raises for a path
        source = path
    try:
        matrix = scipy.io.mmread(source)
    except (ValueError, OSError) as err:
        raise ValueError(f"{path}: not a MatrixMarket file ({err})") from err
    if not hasattr(matrix, "tocoo"):
        raise ValueError(f"{path}: a dense MatrixMarket array, not a sparse adjacency")
    coo = matrix.tocoo()
    if coo.shape[0] != coo.shape[1]:
        raise ValueError(f"{path}: the adjacency must be square, got {coo.shape[0]} x "
                         f"{coo.shape[1]}")
    check_vertex_count(path, coo.shape[0], "the matrix's")
    warn_of_weights(path, coo.data, "the entries' values")
    return Graph(torch.stack([torch.from_numpy(coo.row).long(),
                              torch.from_numpy(coo.col).long()]), num_nodes=coo.shape[0])


def _edge_list_rows(path: str) -> list:
    """(line number in the file, fields) of each line that is not blank or a comment:
    errors name the file's own line."""
    try:
        # utf-8-sig: a spreadsheet's byte-order mark otherwise glued itself to the first
        # id, which made the first edge read as a header and dropped it
        with open_text(path, newline="", encoding="utf-8-sig") as f:
            delimiter = sniffed_delimiter(f.read(4096))
            f.seek(0)
            reader = csv.reader(f, delimiter=delimiter, skipinitialspace=True)
            # "#" (SNAP) and "%" (KONECT, MatrixMarket) start comment lines
            comments = CommentedRows()
            rows = [(reader.line_num, row) for row in reader
                    if row and not comments.is_comment(reader.line_num, row)]
    except (UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path}: not a text edge list ({type(err).__name__}: {err})") \
            from err
    comments.warn(path, "edges")
    return _space_separated_lines_split(rows) if delimiter == "\t" else rows


def _space_separated_lines_split(rows: list) -> list:
    """A tab-separated file's lines that hold no tab, split at spaces: files edited by hand
    or joined from several sources mix the two, and such a line was one field: the error
    "line N has 1" column, or, as the first line, a header, and that edge was dropped
    without a word. Unless some tab-separated field holds a space (names such as "New
    York"), where a line without a tab is not told apart from one name."""
    if any(" " in field.strip() for _, row in rows if len(row) > 1 for field in row):
        return rows
    return [(number, next(csv.reader([row[0].strip()], delimiter=" ",
                                        skipinitialspace=True)))
            if len(row) == 1 and " " in row[0].strip() else (number, row)
            for number, row in rows]




def _refuse_missing_ids(path: str, lines: list) -> None:
    """A missing source or destination (an empty field, "nan", "None") is an error naming the
    line: read as a name it became one node that every incomplete line pointed at, and it
    turned integer ids into names numbered by appearance (misaligning feature files)."""
    for number, row in lines:
        for column, field in ((0, row[0]), (1, row[1])):
            if field.strip().lower() in MISSING_VALUES:
                side = ("source", "destination")[column]
                raise ValueError(f"{path}: line {number} has no {side} node id "
                                 f"({field!r})")


def _integer_edge_index(path: str, lines: list, numbers: list) -> Tensor:
    # Python's ints first: an id past int64 overflowed torch.tensor without naming a line.
    # Ids are node numbers, so the largest sets the node count (``node_limit``)
    low, high = min(min(pair) for pair in numbers), max(max(pair) for pair in numbers)
    limit, why = node_limit()
    if low < 0 or high >= limit:
        bad = low if low < 0 else high
        row = next(i for i, pair in enumerate(numbers) if bad in pair)
        why = "node ids must be >= 0" if low < 0 else (
            f"node ids are node numbers, so a graph of {bad + 1:,} nodes "
            f"({len({v for pair in numbers for v in pair}):,} of them in edges), more than a "
            f"graph can have here ({why}); renumber them 0 .. N-1, or write them as names")
        raise ValueError(f"{path}: line {lines[row][0]} has the node id {bad}: {why}")
    return torch.tensor(numbers).t()


def _warn_of_unused_ids(path: str, graph: Graph) -> None:
    """Integer ids are node numbers, so an id below the largest that no edge names is an
    isolated node: a 1-based file gains node 0, a sparse numbering (ids kept from a larger
    graph a file was cut from) gains one per gap. They count in every average
    over nodes (an influence R, a split's accuracy) without a word; with features or labels
    given in id order they are the user's own nodes, and nothing is said."""
    unused = (graph.in_degree() + graph.out_degree()) == 0
    count = int(unused.sum())
    if count:
        warnings.warn(f"{path}: node ids are node numbers 0 .. {graph.num_nodes - 1}, and "
                      f"{count:,} of those ids are in no edge (the first: "
                      f"{int(unused.nonzero()[0])}); they are isolated nodes of the graph, "
                      "counted in averages over nodes. A 1-based or sparse numbering: "
                      "renumber the ids 0 .. N-1", stacklevel=caller_stacklevel())


def _warn_if_mixed_ids(path: str, lines: list, numbers: list) -> None:
    """Ids read as names because some are not integers: say which, when others are (a
    stray token in an integer column renumbers every node by appearance)."""
    if not any(a is not None or b is not None for a, b in numbers):
        return
    row = next(i for i, pair in enumerate(numbers) if None in pair)
    number, fields = lines[row]
    name = fields[0] if numbers[row][0] is None else fields[1]
    warnings.warn(f"{path}: line {number} has the node id {name!r}, not an integer, so all "
                  "ids are read as names and numbered in order of appearance (integer ids "
                  "elsewhere in the file do not keep their value)", stacklevel=caller_stacklevel())


# column names of the first and of the second column; only words unlikely as node names
# (a header of names above names is told apart by them alone)
_HEADER_WORDS = ({"source", "src", "from", "u", "node1", "id1", "head", "sender", "origin",
                  "source_id", "src_id", "from_id", "node_1"},
                 {"target", "tgt", "dst", "destination", "node2", "id2", "receiver",
                  "target_id", "dst_id", "to_id", "node_2"})


# a header's names for the source and the target column, wherever they stand (an edge id
# first, "id,source,target", or "target,source"); "to" and "v" only once a header is known
# ("head", the arc's end in graph theory, is no source here)
_SOURCE_COLUMNS = _HEADER_WORDS[0] - {"head"} | {":start_id", "start_id"}
_TARGET_COLUMNS = _HEADER_WORDS[1] | {"to", "v", ":end_id", "end_id"}


def _is_header(rows: list) -> bool:
    """A first line of column names: a known word in either column, a source and a target
    column named anywhere ("edge_id,from,to", whose first two fields were read as an
    edge), or text above integer ids (names above names are only told apart by the
    words)."""
    first = rows[0][:2]
    named = zip(first, _HEADER_WORDS, strict=False)  # a line may hold one column
    if any(word.strip().lower() in words for word, words in named):
        return True
    names = [name.strip().lower() for name in rows[0]]
    if any(n in _SOURCE_COLUMNS for n in names) and any(n in _TARGET_COLUMNS for n in names):
        return True
    return not _all_ints(first) and len(rows) > 1 and _all_ints(rows[1][:2])


def _all_ints(values) -> bool:
    return all(integer_id(v) is not None for v in values)


class _NodeKeys(NamedTuple):
    """What a features or labels file's rows are matched against: the graph's node count,
    its nodes' names (None: integer ids), the graph file's path, and the id its file gives
    node 0 (1 for the formats that number vertices from 1)."""
    num_nodes: int
    names: list | None = None
    graph_path: str = ""
    first_id: int | None = 0


def checked_feature_columns(columns) -> tuple:
    """``feature_columns`` as a tuple of distinct names (() for None)."""
    if columns is None:
        return ()
    if isinstance(columns, str) or not isinstance(columns, (list, tuple)) or not columns or \
            not all(isinstance(c, str) and c.strip() for c in columns):
        raise TypeError(f"feature_columns must be a non-empty list of column names, got "
                        f"{columns!r}")
    if len(set(columns)) != len(columns):
        raise ValueError(f"feature_columns names a column twice: {list(columns)}")
    return tuple(columns)


def _feature_columns(path: str, columns: tuple, keys: _NodeKeys) -> Tensor:
    """The features in the columns ``columns`` of the features table ``path``."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no features file at {path}")
    try:
        x, keyed = column_features(path, list(columns), keys.num_nodes, keys.names,
                                   keys.first_id)
    except (UnicodeDecodeError, csv.Error, *DECOMPRESSION_ERRORS) as err:
        raise ValueError(f"{path}: not a readable features file ({type(err).__name__}: "
                         f"{err})") from err
    if not keyed:
        warn_if_positional(path, "features", keys.names, keys.graph_path)
    return _checked_matrix(x, path, "features", keys.num_nodes)


def check_label_column(label_column) -> None:
    """``label_column`` is None or a column's name."""
    if label_column is not None and (not isinstance(label_column, str) or
                                     not label_column.strip()):
        raise TypeError(f"label_column must be a column's name, got {label_column!r}")


def _column(path: str, column: str, keys: _NodeKeys) -> Tensor:
    """The classes in the column headed ``column`` of the labels table ``path``."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no labels file at {path}")
    try:
        labels, keyed = column_labels(path, column, keys.num_nodes, keys.names, keys.first_id)
    except (UnicodeDecodeError, csv.Error, *DECOMPRESSION_ERRORS) as err:
        raise ValueError(f"{path}: not a readable labels file ({type(err).__name__}: "
                         f"{err})") from err
    if not keyed:
        warn_if_positional(path, "labels", keys.names, keys.graph_path)
    return labels


def _matrix(path: str, rows: int, what: str, keys: _NodeKeys | None = None) -> Tensor:
    """A .npy, .pt or .csv (no header, or a header of names) matrix with ``rows`` rows,
    also compressed (.gz, .bz2, .xz, .zst); a text file keyed by node (a first column of node
    names, or ids under an "id" header) in node order (``graphloc.datasets.keyed``)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no {what} file at {path}")
    lower = uncompressed_name(path).lower()
    keys = keys or _NodeKeys(rows)
    try:
        keyed = keyed_values(path, what, rows, keys.names, keys.first_id)
    except (UnicodeDecodeError, csv.Error, *DECOMPRESSION_ERRORS) as err:
        raise ValueError(f"{path}: not a readable {what} file ({type(err).__name__}: "
                         f"{err})") from err
    if keyed is not None:
        return keyed if what == "labels" else _checked_matrix(keyed, path, what, rows)
    warn_if_positional(path, what, keys.names, keys.graph_path)
    try:
        if lower.endswith(".npy"):
            with open_binary(path) as f:
                value = torch.from_numpy(np.load(f))
        elif lower.endswith(".pt"):
            with open_binary(path) as f:
                value = torch.as_tensor(torch.load(f, map_location="cpu", weights_only=True))
        elif what == "labels" and (names := _class_names(path, rows)) is not None:
            return names
        else:
            value = torch.from_numpy(_text_matrix(path, what, rows))
    except _TextError as err:
        raise ValueError(str(err)) from None
    except Exception as err:
        raise ValueError(f"{path}: not a readable {what} file ({type(err).__name__}: "
                         f"{err})") from err
    return _checked_matrix(value, path, what, rows)


def _checked_matrix(value: Tensor, path: str, what: str, rows: int) -> Tensor:
    """A file's ``what`` with a row per node and finite values, features as integers where
    they are whole numbers (``float_features`` says where float32 rounds them)."""
    if what == "labels" and value.dim() > 1 and value[0].numel() > 1:
        value = _one_hot_classes(value, path)
    value = value if value.dim() > 1 or what == "labels" else value.view(-1, 1)
    if value.size(0) != rows:
        raise ValueError(f"{path} has {value.size(0)} rows of {what} but the graph has "
                         f"{rows} nodes")
    if what == "features" and value.dim() > 2:
        raise ValueError(f"{path}: features must be [N, F], a row per node, got shape "
                         f"{list(value.shape)}")
    if value.is_floating_point() and not _every_chunk(value, lambda t: torch.isfinite(t).all()):
        at = (~torch.isfinite(value)).nonzero()[0].tolist()
        raise ValueError(f"{path}: {what} hold non-finite values (the first, "
                         f"{value[tuple(at)].item()}, at row {at[0]}"
                         f"{f', column {at[1]}' if len(at) > 1 else ''}, counted from 0)")
    if what == "labels" and value.is_floating_point() and not _every_chunk(value, _whole):
        raise ValueError(f"{path}: labels must be integer class ids")
    if what == "labels":
        return value
    # whole numbers (a text file's are float64) go to float_features as integers, which
    # says where float32 rounds them; fractions are cast here, as every float is
    whole = value.is_floating_point() and _every_chunk(
        value, lambda t: _whole(t) and (t.numel() == 0 or float(t.abs().max()) < 2.0**63))
    return value.long() if whole else value.float() if value.is_floating_point() else value


def _one_hot_classes(value: Tensor, path: str) -> Tensor:
    """The classes of a one-hot labels matrix (``one_hot_classes``); anything else is
    refused, naming its first row that is not one-hot."""
    classes = one_hot_classes(value)
    if classes is not None:
        return classes
    flat = value.reshape(value.size(0), -1)
    binary = bool(((flat == 0) | (flat == 1)).all())
    row = int((flat.sum(1) > 1).nonzero()[0]) if binary else \
        int(((flat != 0) & (flat != 1)).any(1).nonzero()[0])
    why = "several 1s: multi-label targets, which graphloc's datasets do not hold" \
        if binary else "values other than 0 and 1"
    raise ValueError(f"{path}: a labels file holds one class id per line, in node order "
                     f"(line i: node i), or a one-hot row per node; it has {flat.size(1)} "
                     f"columns, and row {row} (from 0) is not one-hot ({why})")


def _whole(t: Tensor) -> bool:
    return bool((t == t.round()).all())


def _every_chunk(value: Tensor, test) -> bool:
    """``test`` true of every chunk of about a million entries of ``value``'s rows: the
    checks' temporaries (a rounded copy, a mask) stay that small, where whole-tensor ones
    took twice a large features file's memory."""
    step = max(1, (1 << 20) // max(1, math.prod(value.shape[1:])))
    return all(bool(test(value[i:i + step])) for i in range(0, value.size(0), step))


# a labels file's header, where the labels are class names (a header of numbers' files is
# told apart by not being a number)
_LABEL_HEADERS = {"label", "labels", "class", "classes", "y", "target", "category"}


def _class_names(path: str, rows: int) -> Tensor | None:
    """Labels written as class names ("cat", "dog"; one per line, in node order) as class
    ids in sorted order of the names, as a GraphML's string labels; a missing one (an
    empty line, "nan", "None") is -1. A first line more than the nodes, or one of
    ``_LABEL_HEADERS`` (where the last node's label is a blank line, the count alone
    took the header for the first node's class, and every label shifted by one), is a
    header. None
    where every label is a number (the numeric reader takes those). Names were read as a
    header and then as NaN, and the file refused with a wrong count."""
    if _numbers_or_columns(path):
        return None
    with open_text(path, encoding="utf-8-sig") as f:
        lines = [line.strip() for line in f.read().splitlines()]
    if any("," in line or "\t" in line for line in lines):
        return None  # the numeric reader names the columns
    named_header = bool(lines) and lines[0].lower() in _LABEL_HEADERS
    # blank lines past the nodes' are the file's end; before, a blank line is a missing label
    while len(lines) > rows + named_header and not lines[-1]:
        lines.pop()
    if named_header or len(lines) == rows + 1:
        lines = lines[1:]
    given = [line for line in lines if line.lower() not in MISSING_VALUES]
    if all(_is_number(v) for v in given[len(given) > 1:]) and not (
            len(given) == 1 and not _is_number(given[0])):
        return None  # numbers, with or without a header
    if len(lines) != rows:
        raise ValueError(f"{path} has {len(lines)} labels (class names, one per line) but "
                         f"the graph has {rows} nodes")
    classes = {name: i for i, name in enumerate(sorted(set(given)))}
    return torch.tensor([classes.get(line, -1) for line in lines])


def _numbers_or_columns(path: str) -> bool:
    """Whether a labels file is the numeric reader's, read a block of lines at a time and
    not kept: a line holds columns (a comma or a tab), or every label but the first given
    is a number (where :func:`_class_names` reads the whole file, a header or not)."""
    first, names = True, False
    with open_text(path, encoding="utf-8-sig") as f:
        for text in text_blocks(f):
            for line in text.splitlines():
                if "," in line or "\t" in line:
                    return True
                label = line.strip()
                if label.lower() in MISSING_VALUES:
                    continue
                names |= not first and not _is_number(label)
                first = False
    return not names


class _TextError(ValueError):
    """A text matrix's own error, naming the file, line and column: raised as it is."""


def _text_matrix(path: str, what: str, rows: int) -> np.ndarray:
    """A text file of numbers, one row per line: tab, comma, semicolon or space separated
    (sniffed as an edge list's delimiter: a semicolon file, as spreadsheets in many locales
    write it, was read as one column of NaN), a first line of names skipped as a header,
    ``#`` and ``%`` lines comments. Features: blank lines skipped, every value a finite
    number. Labels: a blank line or a missing value (``nan``, ``None``) is -1, no label, as
    documented (a blank line was skipped, which shifted every later label by a row, and
    the file was refused with a wrong count), up to ``rows`` lines. Any other value that
    is not a number is an error naming the file's line and column. Read a block of lines
    at a time (a file's lines as Python strings took several times its size)."""
    blocks = _numbered_blocks(path)
    head = []  # the blocks that hold the first 64 lines, which the delimiter is sniffed from
    for block in blocks:
        head.append(block)
        if sum(map(len, head)) >= 64:
            break
    sample = [line for _, line in [pair for block in head for pair in block][:64]]
    delimiter = sniffed_delimiter("\n".join(sample))
    delimiter = None if delimiter == " " else delimiter
    split = (lambda line: line.split()) if delimiter is None else \
        (lambda line: [decimal_point(field.strip(), delimiter)  # noqa: E731
                       for field in line.split(delimiter)])
    header = []  # the header's names, where the file has one
    blocks = _without_header(itertools.chain(head, blocks), split, header)
    if what == "labels" and not _several_columns(head, split):
        return _label_column(path, blocks, split, rows)
    parts, first = [], None
    for block in blocks:
        data = [(n, line) for n, line in block if line.strip()]
        if data:
            if first is None:
                first = (data[0][0], len(split(data[0][1])))
                _check_header_width(path, header, first, delimiter)
            parts.append(_number_rows(path, data, delimiter, split, first))
    matrix = _stacked(parts) if parts else np.empty((0, 0))
    if what == "labels" and delimiter == "," and matrix.shape[1] == 2 and \
            not matrix[:, 1].any():
        raise _TextError(f"{path}: every line holds a number, a comma and 0 (\"1,0\"): class "
                         "ids written with decimal commas, or one-hot rows of which no node is "
                         "in the second class? Write class ids as integers, one per line")
    return matrix


def _check_header_width(path: str, header: list, first: tuple, delimiter) -> None:
    """A header that names another number of columns than the rows hold: the columns were
    split where the file did not mean them (a one-column file of decimal commas, "0,5",
    read as two columns 0 and 5), so the file is refused."""
    if header and len(header) != first[1]:
        hint = " (decimal commas, \"0,5\"? a table of them separates its columns with ';')" \
            if delimiter == "," else ""
        raise _TextError(f"{path}: its header names {len(header)} column(s) {header[:6]}, "
                         f"but line {first[0]} holds {first[1]} values{hint}")


def _several_columns(head: list, split) -> bool:
    """Whether the first rows (past a header of names) hold several numbers: a one-hot
    labels matrix, read as a matrix (a class id per line is the labels' own reader's)."""
    rows = [split(line) for block in head for _, line in block if line.strip()][:2]
    return bool(rows) and len(rows[-1]) > 1 and all(map(_is_number, rows[-1]))


def _stacked(parts: list) -> np.ndarray:
    """The blocks' rows in one array (``joined_blocks``: about one copy at the peak)."""
    return joined_blocks(parts, np.empty((sum(len(part) for part in parts), parts[0].shape[1])))


def _numbered_blocks(path: str):
    """(line number, line) of each line of a text file that is not a comment ("#", "%"), a
    block of lines at a time."""
    number = 0
    with open_text(path, newline="", encoding="utf-8-sig") as f:
        for text in text_blocks(f):
            lines = text.splitlines()
            yield [(number + i, line) for i, line in enumerate(lines, 1)
                   if not line.lstrip().startswith(("#", "%"))]
            number += len(lines)


def _without_header(blocks, split, header: list):
    """The blocks without the first non-blank line where it is not all numbers (names,
    put in ``header``)."""
    looking = True
    for block in blocks:
        if looking:
            first = next((i for i, (_, line) in enumerate(block) if line.strip()), None)
            if first is not None:
                looking = False
                names = split(block[first][1])
                # (a missing value, "None" or "nan", is data: a first node without a label
                # was taken for a header and every label given to the node before)
                if not all(_is_number(v) or v.lower() in MISSING_VALUES for v in names):
                    header.extend(names)
                    block = block[:first] + block[first + 1:]
        yield block


def _label_column(path: str, blocks, split, rows: int) -> np.ndarray:
    """One class id per line (-1 for a blank or missing one); blank lines past ``rows`` at
    the file's end (its trailing newlines) dropped."""
    labels, trailing_blanks = array.array("d"), 0
    for block in blocks:
        for number, line in block:
            labels.append(_label(path, number, split(line)))
            trailing_blanks = 0 if line.strip() else trailing_blanks + 1
    labels = np.frombuffer(labels, dtype=np.float64)
    return labels[:len(labels) - min(max(len(labels) - rows, 0), trailing_blanks)]


def _number_rows(path: str, data: list, delimiter: str | None, split, first: tuple):
    """The rows of numbers of one block of non-blank lines, each as wide as the file's
    first row ``first`` (its line number and width)."""
    # a semicolon table's numbers take decimal commas (its other fields are refused below)
    lines = [line.replace(",", ".") if delimiter == ";" else line for _, line in data]
    try:  # numpy's parser first; the lines again one by one only to name what is wrong
        values = np.loadtxt(lines, delimiter=delimiter, comments=None, ndmin=2)
        if values.shape[1] == first[1] and np.isfinite(values).all():
            return values
    except ValueError:
        pass
    _refuse_bad_row(path, data, split, first)
    raise _TextError(f"{path}: not a readable matrix of numbers")


def _refuse_bad_row(path: str, rows: list, split, first: tuple) -> None:
    """Raises naming the first line with another column count than the file's first row
    ``first`` (its line number and width), or the first value that is not a finite
    number."""
    for number, line in rows:
        fields = split(line)
        if len(fields) != first[1]:
            raise _TextError(f"{path}: line {number} has {len(fields)} columns, line "
                             f"{first[0]} has {first[1]}")
        for column, field in enumerate(fields, 1):
            if not _is_number(field) or not math.isfinite(float(field)):
                raise _TextError(f"{path}: line {number}, column {column} holds {field!r}, "
                                 "not a finite number")


def _label(path: str, number: int, fields: list) -> float:
    """One line's class id: -1 where it is blank or missing."""
    fields = [f for f in fields if f != ""]
    if not fields or (len(fields) == 1 and fields[0].lower() in MISSING_VALUES):
        return -1.0
    if len(fields) > 1:
        raise _TextError(f"{path}: line {number} holds {len(fields)} values; a labels file "
                         "holds one class id per line, in node order (line i: node i)")
    if not _is_number(fields[0]) or not math.isfinite(float(fields[0])):
        raise _TextError(f"{path}: line {number} holds {fields[0]!r}, not a class id")
    return float(fields[0])


def _is_number(text) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True
