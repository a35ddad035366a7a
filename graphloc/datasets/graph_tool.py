"""graph-tool's binary format (``.gt``; netzschleuder's downloads are ``.gt.zst``), read
without graph-tool, as its documentation lays the format out: a header (magic bytes,
version 1, byte order), a comment, the direction, the vertex count N, each vertex's
out-neighbours (indices of 1, 2, 4 or 8 bytes as N is below 2^8, 2^16, 2^32 or not), then
the property maps (graph, vertex or edge; a type byte; the values). An undirected graph
lists each edge once, in one endpoint's list. Python-object properties (pickles) are
skipped, never unpickled.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np
import torch

from graphloc.datasets.readers import check_vertex_count, open_binary
from graphloc.graph import Graph

MAGIC = b"\xe2\x9b\xbe gt"
_KEYS = {0: "graph", 1: "vertex", 2: "edge"}
# value type -> bytes per value, for the fixed-size scalars and the vectors' elements
# (bool, int16, int32, int64, double, long double)
_SCALAR_SIZES = {0: 1, 1: 2, 2: 4, 3: 8, 4: 8, 5: 16}
_VECTOR_SIZES = {7: 1, 8: 2, 9: 4, 10: 8, 11: 8, 12: 16}
_STRING, _STRINGS, _PYTHON_OBJECT = 6, 13, 14
_SCALAR_KINDS = {0: "u1", 1: "i2", 2: "i4", 3: "i8", 4: "f8"}
_NAME_TYPES = (1, 2, 3, _STRING)  # names are strings or integers
_VECTOR_KINDS = {7: "u1", 8: "i2", 9: "i4", 10: "i8", 11: "f8"}
# a vertex property the datasets take: the names (graph-tool's and netzschleuder's
# convention); "_pos" is a drawing's layout, like GEXF's viz
NAME_PROPERTY, LAYOUT_PROPERTY = "name", "_pos"


class GraphToolRead(NamedTuple):
    graph: Graph  # each undirected edge once, as listed
    directed: bool
    names: list | None  # the "name" vertex property, where every vertex has its own
    vertex_properties: list[str]  # the others' names (the one of the labels among them)
    edge_properties: list[str]
    values: dict | None = None  # the vertex properties asked for: name -> values


class _Cursor:
    """The file's bytes read front to back; running past their end is an error naming what
    was being read (a cut file)."""

    def __init__(self, path: str, data: bytes):
        self.path, self.data, self.at, self.order = path, memoryview(data), 0, "<"

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            raise ValueError(f"{self.path}: the file ends inside {what} (byte {self.at:,} of "
                             f"{len(self.data):,}, {size:,} more bytes needed): a cut or "
                             "damaged graph-tool file")
        piece = self.data[self.at:self.at + size]
        self.at += size
        return piece

    def uint64(self, what: str) -> int:
        return int(np.frombuffer(self.take(8, what), dtype=self.order + "u8")[0])

    def byte(self, what: str) -> int:
        return self.take(1, what)[0]

    def text(self, what: str) -> str:
        return bytes(self.take(self.uint64(what), what)).decode("utf-8", errors="replace")


def read_graph_tool(path: str, kept: tuple = ()) -> GraphToolRead:
    """The graph, and the values of the vertex properties named in ``kept`` that the file
    has (strings, numbers or booleans, a list per vertex for a vector property; None for
    an object or long-double property)."""
    with open_binary(path) as f:
        cursor = _Cursor(path, f.read())
    _header(cursor)
    cursor.text("the comment")
    directed = bool(cursor.byte("the direction byte"))
    count = cursor.uint64("the vertex count")
    check_vertex_count(path, count, "its header's")
    if count == 0:
        raise ValueError(f"{path} has no vertices")
    sources, targets = _adjacency(cursor, count)
    names, values, vertex_properties, edge_properties = _properties(
        cursor, count, len(sources), kept)
    edge_index = torch.from_numpy(np.stack([sources, targets]))
    return GraphToolRead(Graph(edge_index, num_nodes=count), directed, names,
                         vertex_properties, edge_properties, values)


def _header(cursor: _Cursor) -> None:
    magic = bytes(cursor.take(len(MAGIC), "the header"))
    if magic != MAGIC:
        raise ValueError(f"{cursor.path}: not a graph-tool file (it starts with {magic!r}, "
                         f"not graph-tool's {MAGIC!r})")
    version, big_endian = cursor.byte("the header"), cursor.byte("the header")
    if version != 1 or big_endian not in (0, 1):
        raise ValueError(f"{cursor.path}: graph-tool format version {version}, byte order "
                         f"{big_endian}; graphloc reads version 1")
    cursor.order = ">" if big_endian else "<"


def _index_kind(count: int) -> str:
    return next(kind for kind, bound in (("u1", 2**8), ("u2", 2**16), ("u4", 2**32))
                if count < bound) if count < 2**32 else "u8"


def _adjacency(cursor: _Cursor, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each vertex's out-neighbours, as (sources, targets) in the file's edge order. The
    lists are walked with one ``unpack_from`` per vertex, then their bytes gathered at once
    (a NumPy call per vertex took 6 s for a million vertices)."""
    kind = _index_kind(count)
    width, data = np.dtype(kind).itemsize, cursor.data
    if cursor.at + 8 * count > len(data):  # each vertex's count takes 8 bytes
        cursor.take(8 * count, f"the {count:,} vertices' neighbour counts")  # raises
    counts = struct.Struct(cursor.order + "Q")
    starts, degrees = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
    at, end = cursor.at, len(data)
    for vertex in range(count):
        if at + 8 > end:
            cursor.at = at
            cursor.take(8, f"vertex {vertex}'s neighbour count")  # raises, naming it
        degree = counts.unpack_from(data, at)[0]
        if at + 8 + degree * width > end:  # (a damaged count may pass 2^63)
            cursor.at = at + 8
            cursor.take(degree * width, f"vertex {vertex}'s neighbours")
        starts[vertex], degrees[vertex] = at + 8, degree
        at += 8 + degree * width
    cursor.at = at
    targets = _gathered(data, starts, degrees, width).view(cursor.order + kind).astype(np.int64)
    if targets.size and int(targets.max()) >= count:
        at = int(targets.argmax())
        vertex = int(np.searchsorted(np.cumsum(degrees), at, side="right"))
        raise ValueError(f"{cursor.path}: vertex {vertex} lists the neighbour "
                         f"{int(targets[at])}, but the file has {count} vertices "
                         f"(0 .. {count - 1})")
    return np.repeat(np.arange(count, dtype=np.int64), degrees), targets


def _gathered(data, starts: np.ndarray, degrees: np.ndarray, width: int) -> np.ndarray:
    """The bytes of every list, back to back: list v's ``degrees[v] * width`` bytes from
    ``starts[v]``."""
    sizes = degrees * width
    first = np.cumsum(sizes) - sizes  # each list's place in the result
    positions = np.repeat(starts - first, sizes) + np.arange(int(sizes.sum()))
    return np.frombuffer(data, dtype=np.uint8)[positions]


def _properties(cursor: _Cursor, count: int, edges: int, kept: tuple) -> tuple:
    """(the vertices' names or None, the values of the vertex properties in ``kept``, the
    other vertex properties' names, the edge properties' names); every map is read past,
    its values kept only for the names and ``kept``."""
    names, values_of, vertex_properties, edge_properties = None, {}, [], []
    for _ in range(cursor.uint64("the property map count")):
        key = cursor.byte("a property map's kind")
        if key not in _KEYS:
            raise ValueError(f"{cursor.path}: a property map of kind {key} (graph-tool has 0: "
                             f"graph, 1: vertex, 2: edge), at byte {cursor.at - 1:,}")
        name = cursor.text("a property map's name")
        value_type = cursor.byte(f"property {name!r}'s type")
        size = {"graph": 1, "vertex": count, "edge": edges}[_KEYS[key]]
        vertex = _KEYS[key] == "vertex"
        wanted = vertex and (name == NAME_PROPERTY or name in kept)
        values = _values(cursor, value_type, size, f"{_KEYS[key]} property {name!r}", wanted)
        if vertex and name in kept:
            values_of[name] = values
        if vertex and name == NAME_PROPERTY and value_type in _NAME_TYPES and \
                len(set(values)) == count:
            names = [str(v) for v in values]
        elif _KEYS[key] == "vertex" and name != LAYOUT_PROPERTY:
            vertex_properties.append(name)
        elif _KEYS[key] == "edge":
            edge_properties.append(name)
    return names, values_of, vertex_properties, edge_properties


def _values(cursor: _Cursor, value_type: int, size: int, what: str, keep: bool) -> list | None:
    """``size`` values of ``value_type`` where ``keep`` and they are strings, numbers,
    booleans or vectors of numbers or booleans (lists), else read past (None)."""
    if value_type in _SCALAR_SIZES:
        raw = cursor.take(size * _SCALAR_SIZES[value_type], what)
        if keep and value_type in _SCALAR_KINDS:
            values = np.frombuffer(raw, cursor.order + _SCALAR_KINDS[value_type]).tolist()
            return [bool(v) for v in values] if value_type == 0 else values
        return None
    if value_type == _STRING and keep:
        return [cursor.text(what) for _ in range(size)]
    if value_type in _VECTOR_KINDS and keep:
        kind = cursor.order + _VECTOR_KINDS[value_type]
        return [np.frombuffer(cursor.take(cursor.uint64(what) * np.dtype(kind).itemsize, what),
                              kind).tolist() for _ in range(size)]
    if value_type in (_STRING, _PYTHON_OBJECT):  # a pickle is a string of bytes, skipped
        _skip_sized(cursor, size, 1, what)
    elif value_type in _VECTOR_SIZES:
        _skip_sized(cursor, size, _VECTOR_SIZES[value_type], what)
    elif value_type == _STRINGS:
        for _ in range(size):
            _skip_sized(cursor, cursor.uint64(what), 1, what)
    else:
        raise ValueError(f"{cursor.path}: {what} has the value type {value_type}, which "
                         "graph-tool does not define (0 .. 14)")
    return None


def _skip_sized(cursor: _Cursor, count: int, element_size: int, what: str) -> None:
    """Reads past ``count`` sized values (a length, then that many elements): strings,
    vectors; one ``unpack_from`` each, as in ``_adjacency``."""
    lengths = struct.Struct(cursor.order + "Q")
    data, at, end = cursor.data, cursor.at, len(cursor.data)
    for _ in range(count):
        if at + 8 > end:
            cursor.at = at
            cursor.take(8, what)  # raises, naming it
        length = lengths.unpack_from(data, at)[0]
        if at + 8 + length * element_size > end:
            cursor.at = at + 8
            cursor.take(length * element_size, what)  # raises, naming it
        at += 8 + length * element_size
    cursor.at = at
