"""Readers of graph file formats beyond edge lists (`graphloc.datasets.files` dispatches to
them): compressed files, NumPy archives (a SciPy sparse adjacency, the gnn-benchmark
layout of Shchur et al. that PyG's Amazon, Coauthor and CitationFull datasets read, or
named arrays), METIS graphs (the DIMACS10 road networks), DIMACS graphs (the 9th
challenge's road networks, PACE and colouring instances), Pajek networks, and the archives
graph collections ship (KONECT, SuiteSparse, Network Repository)."""

from __future__ import annotations

import array
import bz2
import copy
import gzip
import io
import lzma
import os
import re
import shutil
import types
import warnings
import zlib

import numpy as np
import torch
import zstandard
from torch import Tensor

from graphloc.checks import caller_stacklevel, check_fits_in_memory, physical_memory_bytes
from graphloc.datasets.base import pyg_split
from graphloc.graph import Graph

# the most nodes a file may declare or number (2^31 - 1): a count or id past it is a sparse
# numbering or a damaged file, whose graph arrays would not be allocated
MAX_NODES = 2**31 - 1
# the peak memory of a file's dataset per node: its graph, default features, labels and split
# (measured: 6.1 GB for an edge list of 8 edges whose largest id is 49,999,999)
BYTES_PER_NODE = 112


def node_limit() -> tuple[int, str]:
    """The most nodes a file's graph may have on this machine, and why: past it a sparse
    numbering (ids kept from a larger graph, hashed user ids) or a damaged count was read
    as that many nodes, and the process was killed for its memory without a word."""
    memory = physical_memory_bytes()
    if memory is None or memory // BYTES_PER_NODE > MAX_NODES:
        return MAX_NODES, f"graphloc's graphs hold at most {MAX_NODES:,} nodes"
    return memory // BYTES_PER_NODE, (
        f"a dataset needs about {BYTES_PER_NODE} bytes a node, and this machine has "
        f"{memory / 2**30:,.0f} GiB of memory")


class _ZstdReader(io.RawIOBase):
    """A Zstandard file's bytes, decompressed a block at a time (netzschleuder's downloads
    are ``.zst``). zstandard's own ``open`` returned a cut file's bytes so far as the whole
    file, without a word, and could not seek back to its start (which the readers do after
    sniffing a sample); here a frame that never ends raises ``EOFError``, as gzip's does,
    and ``seek(0)`` starts over."""

    def __init__(self, path: str):
        super().__init__()
        self._path = path
        self._file = None
        self.seek(0)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (offset, whence) == (0, io.SEEK_CUR):
            return self._position
        if (offset, whence) != (0, io.SEEK_SET):
            raise io.UnsupportedOperation("a .zst file seeks only to its start")
        if self._file is not None:
            self._file.close()
        self._file = open(self._path, "rb")
        self._context = zstandard.ZstdDecompressor()
        self._frame = self._context.decompressobj()
        self._ready, self._taken, self._in_frame, self._position = b"", 0, False, 0
        return 0

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer) -> int:
        while self._taken == len(self._ready) and self._decompress_more():
            pass
        size = min(len(buffer), len(self._ready) - self._taken)
        # (a view: slicing the rest off each time copied a large block again per read)
        buffer[:size] = memoryview(self._ready)[self._taken:self._taken + size]
        self._taken += size
        self._position += size
        return size

    def _decompress_more(self) -> bool:
        """Decompresses the next block of the file; False at its end."""
        data = self._file.read(1 << 20)
        if not data:
            if self._in_frame:
                raise EOFError("Compressed file ended before the end-of-stream marker was "
                               "reached")
            return False
        out = []
        while data:  # a file may hold several frames, one after the other
            if self._frame.eof:
                self._frame = self._context.decompressobj()
            out.append(self._frame.decompress(data))
            data = self._frame.unused_data if self._frame.eof else b""
        self._in_frame = not self._frame.eof
        self._ready, self._taken = b"".join(out), 0
        return True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        super().close()


def _zstd_open(path: str, mode: str = "rb", **kwargs):
    binary = io.BufferedReader(_ZstdReader(path), buffer_size=1 << 20)
    return binary if "b" in mode else io.TextIOWrapper(binary, **kwargs)


# compressed files are read through these, named by their last suffix
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": _zstd_open}
# what a damaged or mislabelled compressed file raises while it is read
DECOMPRESSION_ERRORS = (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile, OSError,
                        zstandard.ZstdError)


def compression_of(path: str) -> str | None:
    """The compression suffix of ``path`` (".gz", ".bz2", ".xz", ".zst"), or None."""
    lower = path.lower()
    return next((suffix for suffix in _OPENERS if lower.endswith(suffix)), None)


def uncompressed_name(path: str) -> str:
    """``path`` without its compression suffix: its name names its format."""
    suffix = compression_of(path)
    return path[:-len(suffix)] if suffix else path


def open_binary(path: str):
    suffix = compression_of(path)
    return _OPENERS[suffix](path, "rb") if suffix else open(path, "rb")


# what pandas, Python and database exports write for a missing value (not "NA", which
# also names things: Namibia, North America)
MISSING_VALUES = {"", "nan", "null", "none", "<na>"}


def sniffed_delimiter(sample: str) -> str:
    """A table's delimiter, sniffed from its lines with the comment lines left out (a comma
    in a comment is none): a tab; a semicolon where every line holds one (the spreadsheets
    of the locales that write decimal commas: "1;2;0,5" was split at its comma, into
    "1;2;0" and "5"); else a comma, a semicolon, or spaces."""
    lines = sample.splitlines()
    if len(lines) > 1 and not sample.endswith(("\n", "\r")):
        lines.pop()  # a sample's last line may be cut short (a block of a file)
    rows = [line for line in lines if line.strip() and not line.startswith(("#", "%"))]
    if any("\t" in row for row in rows):
        return "\t"
    if rows and all(";" in row for row in rows):
        return ";"
    return next((d for d in (",", ";") if any(d in row for row in rows)), " ")


# a number written with a decimal comma: 0,5 or -1,25e3 (not 1,234,567)
_DECIMAL_COMMA = re.compile(r"[+-]?(?:[0-9]+,[0-9]*|,[0-9]+)(?:[eE][+-]?[0-9]+)?")


#: what starts a comment line in the text formats (SNAP "#", KONECT and MatrixMarket "%")
COMMENT_MARKS = ("#", "%")


class CommentedRows:
    """Counts the comment lines of a delimited text file that look like its data: after
    the first data line, a name glued to the mark, as many fields as the data lines hold.
    Formats put comments in a header block; a line such as ``#python,#datascience`` (a
    hashtag graph) or ``%p,A`` among the edges is data whose first name starts with the
    comment mark, and skipping it lost that edge or row without a word. They stay skipped,
    with a warning naming the lines (``warn``)."""

    def __init__(self):
        self.widths: dict[int, int] = {}  # data fields per line -> lines
        self.suspects: list[tuple[int, int]] = []  # (line, fields) of later comments

    def is_comment(self, number: int, row: list) -> bool:
        if row and row[0].startswith(COMMENT_MARKS):
            # a name glued to the mark ("#python"), not a remark ("# a comment", "#")
            if self.widths and len(row[0]) > 1 and not row[0][1].isspace():
                self.suspects.append((number, len(row)))
            return True
        if row:
            self.widths[len(row)] = self.widths.get(len(row), 0) + 1
        return False

    def warn(self, path: str, what: str) -> None:
        if not self.widths:
            return
        width = max(self.widths, key=self.widths.get)
        lines = [number for number, fields in self.suspects if fields == width]
        if lines:
            shown = ", ".join(map(str, lines[:5])) + (" ..." if len(lines) > 5 else "")
            warnings.warn(f"{path}: {len(lines)} line(s) among the {what} start with "
                          f"'#' or '%' and were skipped as comments, though they hold "
                          f"{width} fields as the {what} do (line {shown}): a name that "
                          f"starts with '#' or '%' cannot begin a line; rename those "
                          f"nodes (say, with a prefix) to read them",
                          stacklevel=caller_stacklevel())


def decimal_point(field: str, delimiter: str) -> str:
    """``field`` with a decimal comma read as a point where the table's delimiter is a
    semicolon (such a table's numbers are written so: "0,5" is one half); any other field
    as it is."""
    if delimiter == ";" and "," in field and _DECIMAL_COMMA.fullmatch(field):
        return field.replace(",", ".")
    return field


def integer_id(text) -> int | None:
    """``text`` as an integer node id: "7", or an integral number written as a float
    ("7.0", as pandas writes an id column that held a NaN), exact below 2^53; else None.
    Read as names, "7.0" ids were numbered in order of appearance, which silently
    misaligned the rows of a feature or label file indexed by id."""
    try:
        return int(text)
    except (TypeError, ValueError):
        pass
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return int(value) if value.is_integer() and abs(value) < 2**53 else None


def open_text(path: str, **kwargs):
    """``path`` as text, decompressed where its name says it is compressed. Asked for
    UTF-8 ("utf-8-sig"), a file that starts with UTF-16's byte-order mark is read as UTF-16:
    Excel's "Unicode Text" and Windows PowerShell's ``Out-File`` write it, and it was
    refused as undecodable UTF-8."""
    if kwargs.get("encoding") == "utf-8-sig" and utf16_marked(path):
        kwargs["encoding"] = "utf-16"
    suffix = compression_of(path)
    return _OPENERS[suffix](path, "rt", **kwargs) if suffix else open(path, **kwargs)


def open_utf8_binary(path: str):
    """``path``'s bytes, decompressed, without a byte-order mark and re-encoded as UTF-8
    where it is UTF-16: for the readers that take bytes (scipy's MatrixMarket, networkx's
    GML), which refused a marked file ("Missing banner", "input is not ASCII-encoded")."""
    if not byte_order_marked(path):
        return open_binary(path)
    with open_text(path, encoding="utf-8-sig") as f:
        return io.BytesIO(f.read().encode("utf-8"))


def utf16_marked(path: str) -> bool:
    with open_binary(path) as f:
        return f.read(2) in (b"\xff\xfe", b"\xfe\xff")


def byte_order_marked(path: str) -> bool:
    """Whether ``path`` starts with UTF-8's or UTF-16's byte-order mark."""
    with open_binary(path) as f:
        start = f.read(3)
    return start == b"\xef\xbb\xbf" or start[:2] in (b"\xff\xfe", b"\xfe\xff")


def warn_of_weights(path: str, values: np.ndarray, what: str) -> None:
    """Edge weights are not read: said where a file holds any other than 1 (a weighted
    adjacency read as bare edges)."""
    if values.size and not np.all(values == 1):
        warn_that_weights_are_not_read(path, what)


def warn_that_weights_are_not_read(path: str, what: str) -> None:
    warnings.warn(f"{path}: {what} (edge weights) are not read: the datasets carry no edge "
                  "attributes; every stored entry is an edge", stacklevel=caller_stacklevel())


# ---- GraphML and GEXF with edges of both directions ------------------------------------

def with_mixed_directions_spelled_out(data: bytes, fmt: str) -> bytes:
    """A GraphML or GEXF document whose edges override its default direction (GraphML's
    ``directed`` on an edge, GEXF's ``type``), rewritten so networkx reads it: a directed
    graph whose undirected edges each get their reverse (GEXF: type "mutual"). networkx
    refuses such files ("directed=false edge found in directed graph"), which both formats
    allow and Gephi writes for a mixed graph."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(data)
    for graph in root.iter():
        if _local(graph.tag) == "graph":
            (_mixed_graphml if fmt == ".graphml" else _mixed_gexf)(graph)
    return ET.tostring(root)


_GRAPH_ELEMENT = re.compile(rb"<(?:[\w.-]+:)?graph[\s>/]")


def with_nested_graphs_hoisted(data: bytes) -> tuple[bytes, int]:
    """A GraphML document whose nodes hold graphs of their own (yEd's groups) with their
    nodes and edges moved up into the top graph, and how many nested graphs there were.
    networkx skips a nested graph's contents without a word: its nodes were missing
    unless an outer edge named them, and its edges were lost. A group's own node stays a
    node. Documents without nested graphs come back as they are."""
    if len(_GRAPH_ELEMENT.findall(data)) < 2:
        return data, 0
    import xml.etree.ElementTree as ET
    root = ET.fromstring(data)
    top = next(e for e in root if _local(e.tag) == "graph")
    nested = 0
    for node in list(top.iter()):  # every depth: a group's own groups come up too
        for inner in [e for e in node if _local(e.tag) == "graph"] \
                if _local(node.tag) == "node" else ():
            node.remove(inner)
            top.extend(list(inner))
            nested += 1
    return ET.tostring(root), nested


def _local(tag: str) -> str:
    """An XML tag without its namespace."""
    return tag.rpartition("}")[2]


def _mixed_graphml(graph) -> None:
    undirected = graph.get("edgedefault") == "undirected"
    graph.set("edgedefault", "directed")
    for edge in [e for e in graph if _local(e.tag) == "edge"]:
        directed = edge.attrib.pop("directed", None)
        if directed == "false" or (directed is None and undirected):
            reverse = copy.deepcopy(edge)
            reverse.set("source", edge.get("target"))
            reverse.set("target", edge.get("source"))
            if "id" in reverse.attrib:  # ids are unique in a document
                reverse.set("id", reverse.get("id") + "-reversed")
            graph.append(reverse)


def _mixed_gexf(graph) -> None:
    undirected = graph.get("defaultedgetype", "undirected") != "directed"
    graph.set("defaultedgetype", "directed")
    for edges in graph:
        for edge in edges:
            if _local(edge.tag) != "edge":
                continue
            kind = edge.get("type", "undirected" if undirected else "directed")
            if kind in ("undirected", "mutual"):
                edge.set("type", "mutual")  # networkx reads it both ways
            else:
                edge.attrib.pop("type", None)


# ---- NumPy archives ----------------------------------------------------------------------

_GNN_BENCHMARK = ("adj_data", "adj_indices", "adj_indptr", "adj_shape")


def read_npz(path: str) -> tuple:
    """(graph, x, y, split, extra, undirected) of a ``.npz``, by its arrays:

    - the gnn-benchmark layout (Shchur et al. 2018; PyG's ``Amazon``, ``Coauthor`` and
      ``CitationFull`` files): ``adj_*`` a CSR adjacency, ``attr_*`` (CSR) or
      ``attr_matrix`` the features, ``labels`` the classes. Read undirected, as PyG's
      ``read_npz`` and the layout's authors read it; unlike PyG's, self-loops are kept and
      features are the stored values (PyG's sets every positive value to 1);
    - ``scipy.sparse.save_npz``'s: entry (i, j) is the edge i -> j (as a MatrixMarket file);
    - named arrays: ``edge_index`` [2, E] (PyG's convention), optional ``x`` [N, F], ``y``
      [N], ``num_nodes`` and a ``train_mask`` / ``val_mask`` / ``test_mask`` split (masks
      or node ids); other arrays are named in a warning.

    Arrays are read without pickle (an archive's object arrays, such as the gnn-benchmark
    node names, are not loaded)."""
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as err:  # ValueError, OSError, zipfile.BadZipFile
        raise ValueError(f"{path}: not a readable NumPy archive ({type(err).__name__}: "
                         f"{err})") from err
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: one array of shape {list(archive.shape)}, not an archive "
                         "of named arrays (np.savez)")
    with archive:
        try:
            return _archive_layout(path, archive)
        except ValueError as err:  # numpy's own, such as an object array refused unpickled
            if str(err).startswith(path):
                raise
            raise ValueError(f"{path}: {err}") from err


def _archive_layout(path: str, archive) -> tuple:
    keys = set(archive.files)
    if set(_GNN_BENCHMARK) <= keys:
        return _gnn_benchmark(path, archive)
    if {"format", "shape"} <= keys:
        return _scipy_adjacency(path), None, None, None, {}, None
    if "edge_index" in keys:
        return _named_arrays(path, archive)
    raise ValueError(f"{path}: an archive of the arrays {sorted(keys)}; graphloc reads "
                     f"the gnn-benchmark layout ({', '.join(_GNN_BENCHMARK)}), "
                     "scipy.sparse.save_npz's, or an 'edge_index' [2, E] with optional "
                     "'x', 'y' and 'num_nodes'")


def _csr(archive, prefix: str):
    import scipy.sparse as sp
    return sp.csr_matrix((archive[f"{prefix}_data"], archive[f"{prefix}_indices"],
                          archive[f"{prefix}_indptr"]), shape=tuple(archive[f"{prefix}_shape"]))


def _edges_of(path: str, matrix) -> Graph:
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{path}: the adjacency must be square, got {matrix.shape[0]} x "
                         f"{matrix.shape[1]}")
    check_vertex_count(path, matrix.shape[0], "the adjacency's")
    coo = matrix.tocoo()
    warn_of_weights(path, coo.data, "the adjacency's values")
    return Graph(torch.stack([torch.from_numpy(coo.row.astype(np.int64)),
                              torch.from_numpy(coo.col.astype(np.int64))]),
                 num_nodes=matrix.shape[0])


def _gnn_benchmark(path: str, archive) -> tuple:
    try:
        graph = _edges_of(path, _csr(archive, "adj"))
        if "attr_matrix" in archive.files:
            x = torch.from_numpy(np.asarray(archive["attr_matrix"]))
        elif "attr_data" in archive.files:
            attributes = _csr(archive, "attr")
            check_fits_in_memory(attributes.shape, torch.float32, f"{path}'s attr_* features")
            x = torch.from_numpy(attributes.toarray())
        else:
            x = None
    except (ValueError, TypeError, KeyError) as err:
        raise ValueError(f"{path}: a damaged gnn-benchmark archive ({err})") from err
    if x is not None and x.size(0) != graph.num_nodes:
        raise ValueError(f"{path}: {x.size(0)} rows of attributes for {graph.num_nodes} "
                         "nodes")
    y = _labels_of(path, archive, "labels", graph.num_nodes)
    return graph, x, y, None, {}, True


def _labels_of(path: str, archive, key: str, num_nodes: int) -> Tensor | None:
    if key not in archive.files:
        if "labels_data" in archive.files:
            warnings.warn(f"{path}: its labels are a sparse matrix (several per node), which "
                          "graphloc's datasets do not hold: read without labels",
                          stacklevel=caller_stacklevel())
        return None
    y = torch.from_numpy(np.asarray(archive[key]))
    if y.dim() == 0 or y.size(0) != num_nodes:
        raise ValueError(f"{path}: '{key}' has shape {list(y.shape)} but the graph has "
                         f"{num_nodes} nodes")
    return y


def _scipy_adjacency(path: str) -> Graph:
    import scipy.sparse as sp
    try:
        matrix = sp.load_npz(path)
    except (ValueError, KeyError) as err:
        raise ValueError(f"{path}: a damaged scipy.sparse archive ({err})") from err
    return _edges_of(path, matrix)


_SPLIT_KEYS = ("train_mask", "val_mask", "test_mask")


def _named_arrays(path: str, archive) -> tuple:
    edge_index = torch.from_numpy(np.asarray(archive["edge_index"]))
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.is_floating_point():
        raise ValueError(f"{path}: 'edge_index' must be integers of shape [2, E] (PyG's "
                         f"layout), got {edge_index.dtype} {list(edge_index.shape)}")
    x = torch.from_numpy(np.asarray(archive["x"])) if "x" in archive.files else None
    num_nodes = None
    if "num_nodes" in archive.files:
        num_nodes = np.asarray(archive["num_nodes"])
        if num_nodes.shape != () or not np.issubdtype(num_nodes.dtype, np.integer):
            raise ValueError(f"{path}: 'num_nodes' must be one integer, got {num_nodes!r}")
        num_nodes = int(num_nodes)
        check_vertex_count(path, num_nodes, "its 'num_nodes' of")
    elif x is not None:
        num_nodes = x.size(0)
    try:
        graph = Graph(edge_index.long(), num_nodes=num_nodes)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    if x is not None and x.size(0) != graph.num_nodes:
        raise ValueError(f"{path}: 'x' has {x.size(0)} rows but the graph has "
                         f"{graph.num_nodes} nodes")
    y = _labels_of(path, archive, "y", graph.num_nodes)
    masks = {key: torch.from_numpy(np.asarray(archive[key]))
             for key in _SPLIT_KEYS if key in archive.files}
    split = pyg_split(types.SimpleNamespace(**masks), graph.num_nodes)
    unread = sorted(set(archive.files) - {"edge_index", "x", "y", "num_nodes", *_SPLIT_KEYS})
    if unread or (masks and split is None):
        warnings.warn(f"{path}: arrays {unread + ([] if split else sorted(masks))} are not "
                      "read: an archive's dataset takes edge_index, x, y, num_nodes and a "
                      "complete train_mask / val_mask / test_mask split",
                      stacklevel=caller_stacklevel())
    return graph, x, y, split, {}, None


# ---- METIS and DIMACS -------------------------------------------------------------------

def parse_integers(lines: list, dtype=np.int64) -> np.ndarray | None:
    """The whitespace-separated integers (or, with a float ``dtype``, numbers) of ``lines``
    in order, parsed by NumPy (a Python loop over millions of fields took seconds), or None
    where a token is not one."""
    text = " ".join(lines)
    if not text.strip():
        return np.empty(0, dtype=dtype)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # older numpy: stops early
            values = np.fromstring(text, dtype=dtype, sep=" ")
    except ValueError:  # numpy 2: "could not be read to its end"
        return None
    return values if values.size == len(text.split()) else None


def _integers(path: str, lines: list, what: str) -> np.ndarray:
    """:func:`parse_integers`, or a ValueError naming the first line with another token."""
    values = parse_integers(lines)
    if values is None:
        line = next(line for line in lines if not all(re.fullmatch(r"[+-]?[0-9]+", token)
                                                          for token in line.split()))
        raise ValueError(f"{path}: {what} must be integers, got the line {line.strip()!r}")
    return values


def check_vertex_count(path: str, count: int | None, whose: str) -> None:
    """A node count a file declares (a header, a matrix's size, a ``num_nodes``), within
    ``node_limit``; an error naming the file, whose count it is, and why."""
    limit, why = node_limit()
    if count is not None and count > limit:
        raise ValueError(f"{path}: {whose} {count:,} vertices are more than a graph can have "
                         f"here ({why})")


def _refuse_out_of_range(path: str, ids: np.ndarray, count: int, what: str) -> None:
    bad = (ids < 1) | (ids > count)
    if bad.any():
        raise ValueError(f"{path}: {what} {int(ids[bad.argmax()])}, but the file numbers its "
                         f"{count} vertices 1 .. {count}")


# characters of text a reader parses at once: a file's lines as Python strings take about
# 15x its size (a 104 MB DIMACS file read whole peaked at 2.4 GB), so text readers hold one
# block of lines at a time
BLOCK_CHARS = 1 << 24


def text_blocks(f):
    """The text of ``f`` in blocks of about ``BLOCK_CHARS`` characters, each ending at a
    line's end (the last at the file's). A block never ends between the two characters of
    a "\\r\\n" (a file opened with ``newline=""``): its lines would gain a blank one."""
    rest = ""
    while chunk := f.read(BLOCK_CHARS):
        text = rest + chunk
        cut = max(text.rfind("\n"), text.rfind("\r", 0, len(text) - 1)) + 1
        text, rest = text[:cut], text[cut:]
        if text:
            yield text
    if rest:
        yield rest


def _line_blocks(path: str):
    """The lines of a text file, a block of them at a time (universal newlines)."""
    with open_text(path, encoding="utf-8-sig") as f:
        for text in text_blocks(f):
            yield text.splitlines()


def read_metis(path: str) -> Graph:
    """A METIS (or Chaco) graph, as DIMACS10's road networks ("*.osm.graph") ship: "%"
    comment lines, a header ``N M [fmt [ncon]]``, then the lines of vertices 1 .. N, each
    listing its neighbours numbered from 1 (a blank line: none), after a size where fmt's
    first digit is 1 and ncon weights where its second is 1, each neighbour followed by
    the edge's weight where its last digit is 1. Every undirected edge is listed at both
    its ends and counted once in M; vertex v is node v - 1. Weights and sizes are not
    read. A list whose entries do not add up to 2 M (a truncated file, or another fmt) is
    refused. Read a block of lines at a time."""
    header, rows, neighbours, done = None, [], [], 0
    for lines in _line_blocks(path):
        lines = [line for line in lines if not line.startswith("%")]
        if header is None and lines:
            header, lines = _metis_header(path, lines[0]), lines[1:]
        if header is None:
            continue
        vertices = lines[:header.n - done]  # trailing isolated vertices' lines may be missing
        if any(line.strip() for line in lines[len(vertices):]):
            raise ValueError(f"{path}: more vertex lines than the header's {header.n} "
                             "vertices")
        if vertices:
            block_rows, block_neighbours = _metis_vertices(path, vertices, done, header)
            rows.append(block_rows)
            neighbours.append(block_neighbours)
            done += len(vertices)
    if header is None:
        raise ValueError(f"{path}: a METIS graph starts with the line 'N M [fmt [ncon]]'")
    listed = sum(block.size for block in neighbours)
    if listed != 2 * header.m:
        raise ValueError(f"{path}: the header says {header.m} edges, listed at both ends "
                         f"({2 * header.m} entries), but the vertex lines hold {listed} (a "
                         f"truncated file, or a header whose fmt does not match its lines)")
    if header.fmt != "000":
        warnings.warn(f"{path}: METIS fmt {header.fmt}: its weights and sizes are not read: "
                      "the datasets carry no edge attributes", stacklevel=caller_stacklevel())
    return Graph(torch.from_numpy(_joined(rows, neighbours)), num_nodes=header.n)


def _joined(sources: list, targets: list) -> np.ndarray:
    """The [2, E] edges of blocks of sources and targets."""
    edges = np.empty((2, sum(block.size for block in sources)), dtype=np.int64)
    joined_blocks(sources, edges[0])
    joined_blocks(targets, edges[1])
    return edges


def joined_blocks(blocks: list, out: np.ndarray) -> np.ndarray:
    """``blocks`` copied into ``out`` one after another along its first axis, each dropped
    from the list once copied: ``out``'s pages are written (and held) only as the blocks
    are freed, so the peak is about one copy of the data, not two."""
    start = 0
    while blocks:
        block = blocks.pop(0)
        out[start:start + len(block)] = block
        start += len(block)
    return out


def _metis_header(path: str, line: str) -> types.SimpleNamespace:
    """The header line's vertex and edge counts, its fmt as three digits and ncon."""
    header = line.split()
    if not header:
        raise ValueError(f"{path}: a METIS graph starts with the line 'N M [fmt [ncon]]'")
    if len(header) < 2 or len(header) > 4 or not all(t.isdigit() for t in header):
        raise ValueError(f"{path}: a METIS header is 'N M [fmt [ncon]]', got {line!r}")
    n, m = int(header[0]), int(header[1])
    check_vertex_count(path, n, "the header's")
    fmt = header[2].zfill(3) if len(header) > 2 else "000"
    if len(fmt) != 3 or set(fmt) - {"0", "1"}:
        raise ValueError(f"{path}: METIS's fmt has up to three digits of 0 or 1, got "
                         f"{header[2]!r}")
    ncon = int(header[3]) if len(header) > 3 else int(fmt[1])
    return types.SimpleNamespace(n=n, m=m, fmt=fmt, ncon=ncon)


def _metis_vertices(path: str, vertices: list, first: int, header) -> tuple:
    """The (vertex, neighbour) pairs, numbered from 0, of the lines of vertices ``first``,
    ``first + 1``, ...; their sizes, weights and edge weights dropped."""
    counts = np.array([len(line.split()) for line in vertices], dtype=np.int64)
    values = _integers(path, vertices, "METIS vertex lines")
    position = np.arange(values.size) - np.repeat(np.cumsum(counts) - counts, counts)
    prefix = int(header.fmt[0]) + header.ncon
    rows = np.repeat(np.arange(first, first + len(vertices)), counts)
    listed = position >= prefix
    if header.fmt[2] == "1":
        listed &= (position - prefix) % 2 == 0
        if ((counts - prefix) % 2).any() or (counts < prefix).any():
            raise ValueError(f"{path}: fmt {header.fmt} pairs each neighbour with a weight; "
                             "a vertex line holds an odd number of them")
    neighbours = values[listed]
    _refuse_out_of_range(path, neighbours, header.n, "a neighbour is")
    return rows[listed], neighbours - 1


def read_dimacs(path: str) -> tuple[Graph, bool]:
    """A DIMACS graph and whether its edges are undirected: "c" comment lines, a problem
    line ``p KIND N M`` ("sp" for the 9th challenge's road networks, "edge" or "col" for
    colouring, "tw" or "ds" for PACE), then one edge per line, numbered from 1: ``a u v
    [w]``, the arc u -> v (directed: the road networks list both directions), ``e u v``
    or a bare ``u v`` (PACE), an undirected edge listed once. Weights (an arc's length)
    are not read; "n" lines (flow problems' sources and sinks) are skipped. Vertex v is
    node v - 1. An edge count other than the problem line's M warns. Read a block of lines
    at a time."""
    seen = types.SimpleNamespace(problem=None, kinds=set(), widths=set(), count=0,
                                 weighted=False)
    sources, targets = [], []
    for lines in _line_blocks(path):
        edges = []
        for line in lines:
            if line.strip() and line.lstrip()[0] not in "cn":
                if line.lstrip().startswith("p"):
                    _dimacs_problem(path, seen, line)
                else:
                    edges.append(line)
        if edges:
            block_sources, block_targets = _dimacs_edges(path, edges, seen)
            sources.append(block_sources)
            targets.append(block_targets)
    if seen.problem is None:
        raise ValueError(f"{path}: a DIMACS graph has one problem line 'p KIND N M', got none")
    n, m = seen.problem
    edges = _joined(sources, targets)
    _refuse_out_of_range(path, edges.reshape(-1), n, "an edge names vertex")
    if seen.count != m:
        warnings.warn(f"{path}: the problem line says {m} edges, the file holds "
                      f"{seen.count}", stacklevel=caller_stacklevel())
    if seen.weighted:
        warn_that_weights_are_not_read(path, "the edge lines' third values")
    edges -= 1
    return Graph(torch.from_numpy(edges), num_nodes=n), seen.kinds != {"a"}


def _dimacs_problem(path: str, seen, line: str) -> None:
    """Reads the problem line ``p KIND N M`` into ``seen``; a second one is refused."""
    fields = line.split()
    if seen.problem is not None or len(fields) < 4 or \
            not all(t.isdigit() for t in fields[2:4]):
        got = [seen.line, line] if seen.problem is not None else [line]
        raise ValueError(f"{path}: a DIMACS graph has one problem line 'p KIND N M', got "
                         f"{got}")
    n, m = int(fields[2]), int(fields[3])
    check_vertex_count(path, n, "the problem line's")
    seen.problem, seen.line = (n, m), line


def _dimacs_edges(path: str, edges: list, seen) -> tuple:
    """The sources' and targets' vertex numbers of a block of edge lines; their kind ("a",
    "e" or bare) and width (with a weight or without) checked against the lines before."""
    seen.kinds |= {line.lstrip()[0] if line.lstrip()[0] in "ae" else "" for line in edges}
    if len(seen.kinds) > 1:
        raise ValueError(f"{path}: mixes arcs ('a') and edges ('e' or bare pairs)")
    bodies = [line.lstrip().lstrip("ae") for line in edges]
    seen.widths |= {len(body.split()) for body in bodies}
    if len(seen.widths) > 1 or not seen.widths <= {2, 3}:
        raise ValueError(f"{path}: every edge line holds u v, and all or none a weight; got "
                         f"{sorted(seen.widths)} values per line")
    width = next(iter(seen.widths))
    values = _integers(path, bodies, "DIMACS edges").reshape(-1, width)
    seen.count += len(edges)
    seen.weighted |= width == 3 and bool((values[:, 2] != 1).any())
    return values[:, 0].copy(), values[:, 1].copy()


# ---- Pajek ------------------------------------------------------------------------------

def read_pajek(path: str) -> tuple[Graph, list | None]:
    """A Pajek network (.net) and its vertices' names in node order (None unless every
    vertex has its own). ``*Vertices N`` (optional vertex lines ``id "name" ...`` or
    ``id name ...``; the ids 1 .. N, not the names, number the nodes: vertex v is node
    v - 1, so two vertices of one name stay two nodes), then any of ``*Arcs`` (u -> v),
    ``*Edges`` (undirected: both directions), ``*Arcslist`` / ``*Edgeslist`` (a vertex and
    its neighbours per line) and ``*Matrix`` (N rows; a nonzero entry (i, j) is the arc
    i -> j). Weights and drawing attributes are not read; "%" lines are comments.
    networkx's ``read_pajek`` names nodes by their names, merging vertices that share
    one, and reads an ``*Edges`` section after ``*Arcs`` as undirected throughout."""
    count, section, row = None, None, 0
    names: dict[int, str] = {}
    sources, targets, weights = array.array("q"), array.array("q"), array.array("d")

    def add(ends: list, both_ways: bool) -> None:
        """The arcs from ends[0] to each later vertex, each followed by its reverse where
        ``both_ways`` (not a loop's: an undirected loop read both ways was two loops, which
        doubled its weight in every normalisation)."""
        for v in ends[1:]:
            sources.append(ends[0])
            targets.append(v)
            if both_ways and v != ends[0]:
                sources.append(v)
                targets.append(ends[0])

    with open_text(path, encoding="utf-8-sig", errors="replace") as f:
        for number, line in enumerate(f, 1):  # line by line: a network's lines are not kept
            line = line.strip()
            if not line or line.startswith("%"):
                continue
            if line.startswith("*"):
                section, count, row = _pajek_section(path, number, line, count)
                continue
            fields = line.split()
            if section in ("arcs", "edges"):
                add(_pajek_ids(path, number, fields[:2], count), section == "edges")
                if len(fields) > 2 and _is_float(fields[2]):
                    weights.append(float(fields[2]))
            elif section in ("arcslist", "edgeslist"):
                add(_pajek_ids(path, number, fields, count), section == "edgeslist")
            elif section == "matrix":
                values = _pajek_matrix_row(path, number, fields, row, count)
                targets.extend(np.flatnonzero(values).tolist())
                sources.extend([row] * (len(targets) - len(sources)))
                weights.extend(values[values != 0].tolist())
                row += 1
            elif section == "vertices":
                vertex, name = _pajek_vertex(path, number, line, count)
                if name is not None:
                    names[vertex] = name
            else:
                raise ValueError(f"{path}: line {number} ({line[:40]!r}) is outside a "
                                 "section ('*Vertices N', '*Arcs', '*Edges', ...)")
    if count is None:
        raise ValueError(f"{path}: a Pajek network starts with '*Vertices N'")
    warn_of_weights(path, np.frombuffer(weights, dtype=np.float64),
                    "the arcs' and edges' values")
    edges = np.stack([np.frombuffer(ends, dtype=np.int64) for ends in (sources, targets)])
    return Graph(torch.from_numpy(edges), num_nodes=count), _pajek_names(names, count)


# a vertex line: its id, then its name in double quotes (which may hold spaces) or bare
_PAJEK_VERTEX = re.compile(r'([0-9]+)(?:\s+(?:"([^"]*)"|(\S+)))?')


def _pajek_vertex(path: str, number: int, line: str, count: int) -> tuple[int, str | None]:
    """(node, name or None) of a ``*Vertices`` line."""
    match = _PAJEK_VERTEX.match(line)
    if match is None or (match.end() < len(line) and not line[match.end()].isspace()):
        raise ValueError(f"{path}: line {number}: a vertex line starts with the vertex "
                         f"number, got {line[:40]!r}")
    vertex = int(match.group(1))
    if not 1 <= vertex <= count:
        raise ValueError(f"{path}: line {number} names vertex {vertex}, but the network "
                         f"numbers its {count} vertices 1 .. {count}")
    name = match.group(2) if match.group(2) is not None else match.group(3)
    return vertex - 1, name


def _pajek_names(names: dict, count: int) -> list | None:
    """The names in node order where every vertex has its own, else None (the nodes are
    then matched by position: two vertices of one name could not be told apart)."""
    if len(names) != count or len(set(names.values())) != count:
        return None
    return [names[v] for v in range(count)]


def _pajek_section(path: str, number: int, line: str, count: int | None) -> tuple:
    """(section, vertex count, matrix row) after a ``*`` line."""
    words = line[1:].split()
    name = words[0].lower() if words else ""
    if name == "vertices":
        limit, why = node_limit()
        if len(words) < 2 or not words[1].isdigit() or int(words[1]) > limit:
            raise ValueError(f"{path}: line {number}: '*Vertices N' needs the vertex count "
                             f"(at most {limit:,}: {why}), got {line!r}")
        return "vertices", int(words[1]), 0
    if name == "network":
        return "network", count, 0
    if name in ("arcs", "edges", "arcslist", "edgeslist", "matrix"):
        if count is None:
            raise ValueError(f"{path}: line {number}: '*{words[0]}' before '*Vertices N'")
        return name, count, 0
    raise ValueError(f"{path}: line {number}: unknown Pajek section {line.split()[0]!r} "
                     "(graphloc reads *Vertices, *Arcs, *Edges, *Arcslist, *Edgeslist, "
                     "*Matrix)")


def _pajek_ids(path: str, number: int, fields: list, count: int) -> list:
    if len(fields) < 2 or not all(f.isdigit() for f in fields):
        raise ValueError(f"{path}: line {number} must hold vertex numbers, got {fields!r}")
    ids = [int(f) for f in fields]
    bad = next((v for v in ids if not 1 <= v <= count), None)
    if bad is not None:
        raise ValueError(f"{path}: line {number} names vertex {bad}, but the network numbers "
                         f"its {count} vertices 1 .. {count}")
    return [v - 1 for v in ids]


def _pajek_matrix_row(path: str, number: int, fields: list, row: int, count: int) -> np.ndarray:
    if row >= count or len(fields) != count or not all(map(_is_float, fields)):
        raise ValueError(f"{path}: line {number}: a '*Matrix' of {count} vertices has {count} "
                         f"rows of {count} numbers; this is row {row + 1} with {fields[:4]!r}")
    return np.array([float(value) for value in fields])


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ---- archives of graph files (KONECT, SuiteSparse, Network Repository downloads) ---------

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".zip")


def is_archive(path: str) -> bool:
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def archive_members(path: str) -> list[str]:
    """The names of the regular files in a tar or zip archive."""
    import tarfile
    import zipfile
    try:
        if path.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                return [info.filename for info in archive.infolist() if not info.is_dir()]
        with tarfile.open(path) as archive:
            return [member.name for member in archive.getmembers() if member.isfile()]
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, zlib.error,
            lzma.LZMAError) as err:
        raise ValueError(f"{path}: not a readable archive ({type(err).__name__}: {err})") \
            from err


def unpack_archive(path: str, folder: str, wanted) -> dict:
    """One pass over a tar or zip archive (a compressed tar is decompressed once): the name
    of every regular file, mapped to where it was written in ``folder`` where
    ``wanted(name)`` (a folder of its own, under its base name: never a path the archive
    chooses), else to None."""
    import tarfile
    import zipfile
    files = {}
    try:
        if path.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        files[info.filename] = _written(folder, len(files), info.filename,
                                                        archive.open, info, wanted)
        else:
            with tarfile.open(path, "r|*") as archive:  # a stream: read front to back
                for member in archive:
                    if member.isfile():
                        files[member.name] = _written(folder, len(files), member.name,
                                                      archive.extractfile, member, wanted)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, zlib.error,
            lzma.LZMAError) as err:
        raise ValueError(f"{path}: not a readable archive ({type(err).__name__}: {err})") \
            from err
    return files


def _written(folder: str, number: int, name: str, open_member, member, wanted) -> str | None:
    if not wanted(name):
        return None
    target = os.path.join(folder, str(number), os.path.basename(name))
    os.makedirs(os.path.dirname(target))
    with open_member(member) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return target
