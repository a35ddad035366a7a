"""Feature and label files keyed by node: a first column that names each row's node.

A features or labels file is read by position (line i: node i). Where the graph's nodes
are names (an edge list of names numbers them in order of first appearance; a GraphML's
ids), the user's file in any other order had its rows given to the wrong nodes without a
word. A file whose first column holds the graph's node names (or, under a header such as
"id" or "node", its node ids) is matched to the nodes by that column instead: Gephi's node
table, or ``df.to_csv()`` of a table indexed by node.
"""

from __future__ import annotations

import csv
import itertools
import math
import warnings

import numpy as np
import torch
from torch import Tensor

from graphloc.checks import caller_stacklevel
from graphloc.datasets.readers import (
    MISSING_VALUES,
    CommentedRows,
    decimal_point,
    integer_id,
    open_text,
    sniffed_delimiter,
    uncompressed_name,
)

# a first line's first field that says the column holds nodes
KEY_HEADERS = {"id", "node", "nodes", "node_id", "nodeid", "name", "vertex", "vertex_id"}
_TEXT_SUFFIXES = (".csv", ".tsv", ".txt")


def keyed_values(path: str, what: str, num_nodes: int, names: list | None,
                 first_id: int | None = 0) -> Tensor | None:
    """The rows of a node-keyed ``what`` ("features" or "labels") file in node order, or
    None where the file is not keyed (read by position). ``names``: the graph's node names
    in node order, None where its nodes are integer ids: ``first_id`` .. N - 1 + first_id,
    as the graph's file numbers them (METIS, DIMACS, Pajek, MatrixMarket and KONECT number
    vertices from 1, and vertex v is node v - 1); ``first_id`` None where an id names no
    one node (a bipartite KONECT file), and integer keys are refused.

    Keyed: the first line's first field is one of ``KEY_HEADERS`` or empty under named
    columns (pandas' index; then keys are names, or integer node ids for a graph without
    names), or, for a graph with names, a first field
    of the first or second line is a node name that is not a number. Features: every node
    once, every value a finite number. Labels: one class per node (ids, or names numbered
    in sorted order), -1 for a node the file does not list or gives no class. Rows are
    read one at a time into the result (no list of a large file's lines)."""
    if not uncompressed_name(path).lower().endswith(_TEXT_SUFFIXES):
        return None
    first_rows = list(itertools.islice(_rows(path), 2))
    header = _key_header(first_rows, names)
    if header is None:  # a positional file: nothing more read here
        return None
    nodes = _Nodes(path, num_nodes, names, first_id)
    rows = itertools.islice(_rows(path), header, None)
    if what == "labels":
        return _labels(path, rows, nodes)
    return _features(path, rows, nodes, first_rows[0][1] if header else None)


def column_labels(path: str, column: str, num_nodes: int, names: list | None,
                  first_id: int | None = 0) -> tuple[Tensor, bool]:
    """(the classes, whether the table is keyed by node): the classes in the column
    headed ``column`` of a labels table with a header line (Gephi's node table:
    ``Id,Label,modularity_class``; a spreadsheet's export), one class per node as
    ``keyed_values`` reads a labels file's: keyed by the first column where the table is
    keyed (its header's first field is one of ``KEY_HEADERS`` or empty; or, on a graph
    with names, the first row's first field is a node's name), else by position (one row
    per node, in node order). The header is matched exactly, else ignoring case where
    that finds one column."""
    picked, keyed = _picked_columns(path, [column], names, "label_column")
    if keyed:
        return _labels(path, picked, _Nodes(path, num_nodes, names, first_id)), True
    return _labels(path, _positional(path, picked, num_nodes), _Nodes(path, num_nodes, None)), \
        False


def column_features(path: str, columns: list, num_nodes: int, names: list | None,
                    first_id: int | None = 0) -> tuple[Tensor, bool]:
    """(the features ``[N, len(columns)]``, whether the table is keyed by node): the
    columns headed ``columns``, in that order, of a table with a header line, keyed or by
    position as ``column_labels`` reads a table; every node needs a row, every value a
    finite number (a node table's text columns, such as Gephi's Label, left out)."""
    picked, keyed = _picked_columns(path, columns, names, "feature_columns")
    if keyed:
        return _features(path, picked, _Nodes(path, num_nodes, names, first_id)), True
    rows = _positional(path, picked, num_nodes)
    return _features(path, rows, _Nodes(path, num_nodes, None)), False


def _picked_columns(path: str, columns: list, names: list | None, option: str):
    """((line number, [key, *the columns' values]) of each row under the header, whether
    the table is keyed by node); the key is the row's position where it is not."""
    if not uncompressed_name(path).lower().endswith(_TEXT_SUFFIXES):
        raise ValueError(f"{option} {columns} picks columns of a text table (.csv, .tsv, "
                         f".txt) by its header; {path} is none")
    rows = _rows(path)
    first = next(rows, None)
    if first is None:
        raise ValueError(f"{path} has no lines: {option} needs its header")
    number, header = first
    indices = [_column_index(path, number, header, column, option) for column in columns]
    second = next(rows, None)
    keyed = _key_header([first] + ([second] if second else []), names) is not None
    if keyed and 0 in indices:
        raise ValueError(f"{path}: {option} {header[0]!r} is the column that names each "
                         f"row's node; pick among the others ({header[1:]})")
    rest = itertools.chain([second] if second else [], rows)
    return _picked(path, indices, rest, keyed), keyed


def _column_index(path: str, number: int, header: list, column: str, option: str) -> int:
    if column in header:
        if header.count(column) > 1:
            raise ValueError(f"{path}: line {number} heads {header.count(column)} columns "
                             f"{column!r}")
        return header.index(column)
    alike = [i for i, name in enumerate(header) if name.lower() == column.lower()]
    if len(alike) != 1:
        raise ValueError(f"{path}: no column {column!r} ({option}) in its header, line "
                         f"{number}: {header}")
    return alike[0]


def _picked(path: str, indices: list, rows, keyed: bool):
    """(line number, [key, *values]) of each row: the key from the first column where the
    table is keyed, else the row's position."""
    for position, (number, fields) in enumerate(rows):
        if len(fields) <= max(indices):
            raise ValueError(f"{path}: line {number} has {len(fields)} columns; the picked "
                             f"columns reach column {max(indices) + 1}")
        yield number, [fields[0] if keyed else str(position), *(fields[i] for i in indices)]


def _positional(path: str, rows, num_nodes: int):
    """The rows of a table not keyed by node: one per node, counted."""
    rows = list(rows)
    if len(rows) != num_nodes:
        raise ValueError(f"{path} has {len(rows)} rows under its header, but the graph has "
                         f"{num_nodes} nodes: a table not keyed by node gives a row per node, "
                         "in node order")
    return iter(rows)


def warn_if_positional(path: str, what: str, names: list | None, graph_path: str) -> None:
    """A positional file on a graph whose nodes are names: say which order its rows are
    given to, since nothing checks it."""
    if names is None:
        return
    shown = ", ".join(repr(str(n)) for n in names[:4]) + (", ..." if len(names) > 4 else "")
    warnings.warn(f"{path}: its rows are read as the {what} of the nodes in {graph_path}'s "
                  f"order ({shown}); to match them by name instead, give each line the node's "
                  "name as a first column", stacklevel=caller_stacklevel())


def _rows(path: str):
    """(line number, fields) of each line that is not blank or a comment, one at a time."""
    with open_text(path, newline="", encoding="utf-8-sig") as f:
        sample = f.read(4096)
        f.seek(0)
        delimiter = sniffed_delimiter(sample)
        reader = csv.reader(f, delimiter=delimiter, skipinitialspace=True)
        comments = CommentedRows()
        for row in reader:
            if row and any(row) and not comments.is_comment(reader.line_num, row):
                yield reader.line_num, [decimal_point(field.strip(), delimiter)
                                        for field in row]
        comments.warn(path, "rows")


def _key_header(rows: list, names: list | None) -> int | None:
    """How many header lines precede the keyed rows (0 or 1), or None: not keyed. A file of
    one column is never keyed (a key with no value: "name" heads a column of class names)."""
    if not rows or len(rows[0][1]) < 2:
        return None
    first = rows[0][1]
    if first[0].lower() in KEY_HEADERS or _is_pandas_index_header(first):
        return 1
    if names is None:
        return None
    known = {str(name) for name in names}
    for position, (_, fields) in enumerate(rows[:2]):
        if fields[0] in known and not _is_number(fields[0]):
            return position
    return None


def _is_pandas_index_header(fields: list) -> bool:
    """pandas' ``to_csv`` header: an unnamed index column, then the columns' names. Read by
    position, its index (the node ids) was one more feature column."""
    return fields[0] == "" and any(f and not _is_number(f) for f in fields[1:])


class _Nodes:
    """Each keyed row's node: by name, or by integer id (as the graph's file numbers its
    nodes: from ``first_id``) for a graph without names; an unknown or repeated node is an
    error naming the line."""

    def __init__(self, path: str, num_nodes: int, names: list | None,
                 first_id: int | None = 0):
        if names is None and first_id is None:
            raise ValueError(f"{path} is keyed by node ids, but the graph's file numbers its "
                             "two vertex sets apart (a bipartite KONECT file: left 1 and right "
                             "1 are two nodes), so an id names no one node: give a row per "
                             "node in graphloc's order (the left vertices, then the right), "
                             "without the id column")
        self.path, self.num_nodes, self.names = path, num_nodes, names
        self.first_id = first_id
        self.index = None if names is None else {str(n): i for i, n in enumerate(names)}
        self.seen: dict[int, int] = {}  # node -> the line that gave it

    def of(self, number: int, key: str) -> int:
        node = self.index.get(key) if self.index is not None else \
            _node_id(key, self.num_nodes, self.first_id)
        if node is None:
            ids = "" if self.index is not None else \
                f" (its ids: {self.first_id} .. {self.num_nodes - 1 + self.first_id})"
            raise ValueError(f"{self.path}: line {number} is keyed by {key!r}, which is not a "
                             f"node of the graph{ids}")
        if node in self.seen:
            raise ValueError(f"{self.path}: line {number} gives node {key!r} again (first at "
                             f"line {self.seen[node]})")
        self.seen[node] = number
        return node

    def warn_if_either_count(self) -> None:
        """Ids read as a 1-based file's own (vertex v is node v - 1) that never reach N fit
        ids counted from 0 as well, one node off: said, since nothing tells them apart."""
        if self.index is None and self.first_id == 1 and self.seen and \
                self.num_nodes - 1 not in self.seen:
            warnings.warn(f"{self.path}: its ids are read as the graph file's own vertex "
                          f"numbers, 1 .. {self.num_nodes} (vertex v is node v - 1); they "
                          f"never reach {self.num_nodes}, so ids counted from 0 would fit as "
                          "well, one node off: check which the file means",
                          stacklevel=caller_stacklevel())

    def first_missing(self):
        missing = next(i for i in range(self.num_nodes) if i not in self.seen)
        return self.names[missing] if self.names is not None else missing + self.first_id


def _node_id(key: str, num_nodes: int, first_id: int) -> int | None:
    """The node of an integer id (as ``integer_id`` reads one) within ``first_id`` ..
    N - 1 + first_id, or None."""
    node = integer_id(key)
    return node - first_id if node is not None and 0 <= node - first_id < num_nodes else None


def _labels(path: str, rows, nodes: _Nodes) -> Tensor:
    given: dict[int, str] = {}
    for number, fields in rows:
        if len(fields) > 2:
            raise ValueError(f"{path}: a keyed labels file holds a node and its class per "
                             f"line; line {number} has more columns (keep the node and the one "
                             "class column)")
        value = fields[1] if len(fields) > 1 else ""
        node = nodes.of(number, fields[0])
        if value.lower() not in MISSING_VALUES:
            given[node] = value
    labels = torch.full((nodes.num_nodes,), -1, dtype=torch.long)
    if all(_is_whole(v) for v in given.values()):
        classes = {v: int(float(v)) for v in set(given.values())}
    else:  # names, numbered in sorted order
        classes = {v: i for i, v in enumerate(sorted(set(given.values())))}
    for node, value in given.items():
        labels[node] = classes[value]
    nodes.warn_if_either_count()
    return labels


def _features(path: str, rows, nodes: _Nodes, header: list | None = None) -> Tensor:
    """The rows' features in node order; ``header``: the table's header line, which names
    the node column and as many feature columns as the rows hold (a header of one feature
    over rows of two was a column of decimal commas split in two)."""
    out, width = None, 0
    for number, fields in rows:
        node = nodes.of(number, fields[0])
        if out is None:
            width = len(fields) - 1
            out = np.empty((nodes.num_nodes, width), dtype=np.float64)
            if header is not None and len(header) != len(fields):
                raise ValueError(f"{path}: its header names {len(header)} columns {header[:6]}, "
                                 f"but line {number} holds {len(fields)} fields (decimal "
                                 "commas, \"0,5\"? a table of them separates its columns "
                                 "with ';')")
        if len(fields) - 1 != width:
            raise ValueError(f"{path}: line {number} has {len(fields) - 1} features after its "
                             f"node, the first row {width}")
        values = [_finite(field) for field in fields[1:]]
        if None in values:
            column = values.index(None)
            raise ValueError(f"{path}: line {number}, column {column + 2} holds "
                             f"{fields[column + 1]!r}, not a finite number")
        out[node] = values
    if len(nodes.seen) != nodes.num_nodes:
        raise ValueError(f"{path}: a keyed features file gives every node a row, but node "
                         f"{nodes.first_missing()!r} has none ({len(nodes.seen)} of "
                         f"{nodes.num_nodes} nodes listed)")
    return torch.from_numpy(out)


def _finite(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _is_number(text: str) -> bool:
    return _finite(text) is not None


def _is_whole(text: str) -> bool:
    value = _finite(text)
    return value is not None and value.is_integer()
