"""Readers of graph file formats beyond edge lists (`graphloc.datasets.files` dispatches to
them): compressed files, NumPy archives (a SciPy sparse adjacency, the gnn-benchmark
layout of Shchur et al. that PyG's Amazon, Coauthor and CitationFull datasets read, or
named arrays), METIS graphs (the DIMACS10 road networks), DIMACS graphs (the 9th
challenge's road networks, PACE and colouring instances), Pajek networks, and the archives
graph collections ship (KONECT, SuiteSparse, Network Repository)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import shutil
import types
import warnings
import zlib

import numpy as np
import torch
from torch import Tensor

from graphloc.checks import caller_stacklevel, check_fits_in_memory
from graphloc.datasets.base import pyg_split
from graphloc.graph import Graph

# the most nodes a file may declare or number (2^31 - 1): a count or id past it is a sparse
# numbering or a damaged file, whose graph arrays would not be allocated
MAX_NODES = 2**31 - 1

# compressed files are read through these, named by their last suffix
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
# what a damaged or mislabelled compressed file raises while it is read
DECOMPRESSION_ERRORS = (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile, OSError)


def compression_of(path: str) -> str | None:
    """The compression suffix of ``path`` (".gz", ".bz2", ".xz"), or None."""
    lower = path.lower()
    return next((suffix for suffix in _OPENERS if lower.endswith(suffix)), None)


def uncompressed_name(path: str) -> str:
    """``path`` without its compression suffix: its name names its format."""
    suffix = compression_of(path)
    return path[:-len(suffix)] if suffix else path


def open_binary(path: str):
    suffix = compression_of(path)
    return _OPENERS[suffix](path, "rb") if suffix else open(path, "rb")


def open_text(path: str, **kwargs):
    """``path`` as text, decompressed where its name says it is compressed."""
    suffix = compression_of(path)
    return _OPENERS[suffix](path, "rt", **kwargs) if suffix else open(path, **kwargs)


def warn_of_weights(path: str, values: np.ndarray, what: str) -> None:
    """Edge weights are not read: said where a file holds any other than 1 (a weighted
    adjacency read as bare edges)."""
    if values.size and not np.all(values == 1):
        warnings.warn(f"{path}: {what} (edge weights) are not read: the datasets carry no "
                      "edge attributes; every stored entry is an edge",
                      stacklevel=caller_stacklevel())


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

def parse_integers(lines: list) -> np.ndarray | None:
    """The whitespace-separated integers of ``lines`` in order, parsed by NumPy (a Python
    loop over millions of fields took seconds), or None where a token is not an integer."""
    text = " ".join(lines)
    if not text.strip():
        return np.empty(0, dtype=np.int64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # older numpy: stops early
            values = np.fromstring(text, dtype=np.int64, sep=" ")
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


def _check_vertex_count(path: str, count: int, whose: str) -> None:
    if count > MAX_NODES:
        raise ValueError(f"{path}: {whose} {count} vertices are more than graphloc's graphs "
                         f"hold ({MAX_NODES})")


def _refuse_out_of_range(path: str, ids: np.ndarray, count: int, what: str) -> None:
    bad = (ids < 1) | (ids > count)
    if bad.any():
        raise ValueError(f"{path}: {what} {int(ids[bad.argmax()])}, but the file numbers its "
                         f"{count} vertices 1 .. {count}")


def read_metis(path: str) -> Graph:
    """A METIS (or Chaco) graph, as DIMACS10's road networks ("*.osm.graph") ship: "%"
    comment lines, a header ``N M [fmt [ncon]]``, then the lines of vertices 1 .. N, each
    listing its neighbours numbered from 1 (a blank line: none), after a size where fmt's
    first digit is 1 and ncon weights where its second is 1, each neighbour followed by
    the edge's weight where its last digit is 1. Every undirected edge is listed at both
    its ends and counted once in M; vertex v is node v - 1. Weights and sizes are not
    read. A list whose entries do not add up to 2 M (a truncated file, or another fmt) is
    refused."""
    with open_text(path, encoding="utf-8-sig") as f:
        lines = [line for line in f.read().splitlines() if not line.startswith("%")]
    if not lines or not lines[0].strip():
        raise ValueError(f"{path}: a METIS graph starts with the line 'N M [fmt [ncon]]'")
    header = lines[0].split()
    if len(header) < 2 or len(header) > 4 or not all(t.isdigit() for t in header):
        raise ValueError(f"{path}: a METIS header is 'N M [fmt [ncon]]', got {lines[0]!r}")
    n, m = int(header[0]), int(header[1])
    _check_vertex_count(path, n, "the header's")
    fmt = header[2].zfill(3) if len(header) > 2 else "000"
    if len(fmt) != 3 or set(fmt) - {"0", "1"}:
        raise ValueError(f"{path}: METIS's fmt has up to three digits of 0 or 1, got "
                         f"{header[2]!r}")
    ncon = int(header[3]) if len(header) > 3 else int(fmt[1])
    vertices = lines[1:n + 1]  # the lines of trailing isolated vertices may be missing
    if any(line.strip() for line in lines[n + 1:]):
        raise ValueError(f"{path}: more vertex lines than the header's {n} vertices")
    counts = np.zeros(n, dtype=np.int64)
    counts[:len(vertices)] = [len(line.split()) for line in vertices]
    values = _integers(path, vertices, "METIS vertex lines")
    position = np.arange(values.size) - np.repeat(np.cumsum(counts) - counts, counts)
    prefix = int(fmt[0]) + ncon
    rows = np.repeat(np.arange(n), counts)
    listed = position >= prefix
    if fmt[2] == "1":
        listed &= (position - prefix) % 2 == 0
        if ((counts - prefix) % 2).any() or (counts < prefix).any():
            raise ValueError(f"{path}: fmt {header[2]} pairs each neighbour with a weight; "
                             "a vertex line holds an odd number of them")
    neighbours, rows = values[listed], rows[listed]
    _refuse_out_of_range(path, neighbours, n, "a neighbour is")
    if neighbours.size != 2 * m:
        raise ValueError(f"{path}: the header says {m} edges, listed at both ends ({2 * m} "
                         f"entries), but the vertex lines hold {neighbours.size} (a truncated "
                         f"file, or a header whose fmt does not match its lines)")
    if fmt != "000":
        warnings.warn(f"{path}: METIS fmt {fmt}: its weights and sizes are not read: the "
                      "datasets carry no edge attributes", stacklevel=caller_stacklevel())
    return Graph(torch.stack([torch.from_numpy(rows), torch.from_numpy(neighbours - 1)]),
                 num_nodes=n)


def read_dimacs(path: str) -> tuple[Graph, bool]:
    """A DIMACS graph and whether its edges are undirected: "c" comment lines, a problem
    line ``p KIND N M`` ("sp" for the 9th challenge's road networks, "edge" or "col" for
    colouring, "tw" or "ds" for PACE), then one edge per line, numbered from 1: ``a u v
    [w]``, the arc u -> v (directed: the road networks list both directions), ``e u v``
    or a bare ``u v`` (PACE), an undirected edge listed once. Weights (an arc's length)
    are not read; "n" lines (flow problems' sources and sinks) are skipped. Vertex v is
    node v - 1. An edge count other than the problem line's M warns."""
    with open_text(path, encoding="utf-8-sig") as f:
        lines = [line for line in f.read().splitlines()
                 if line.strip() and line.lstrip()[0] not in "cn"]
    problem = [line for line in lines if line.lstrip().startswith("p")]
    if len(problem) != 1 or len(problem[0].split()) < 4 or \
            not all(t.isdigit() for t in problem[0].split()[2:4]):
        raise ValueError(f"{path}: a DIMACS graph has one problem line 'p KIND N M', got "
                         f"{problem[:2] or 'none'}")
    n, m = (int(t) for t in problem[0].split()[2:4])
    _check_vertex_count(path, n, "the problem line's")
    edges = [line for line in lines if not line.lstrip().startswith("p")]
    kinds = {line.lstrip()[0] if line.lstrip()[0] in "ae" else "" for line in edges}
    if len(kinds) > 1:
        raise ValueError(f"{path}: mixes arcs ('a') and edges ('e' or bare pairs)")
    kind = kinds.pop() if kinds else ""
    bodies = [line.lstrip().lstrip("ae") for line in edges]
    widths = {len(body.split()) for body in bodies} or {2}
    if len(widths) > 1 or not widths <= {2, 3}:
        raise ValueError(f"{path}: every edge line holds u v, and all or none a weight; got "
                         f"{sorted(widths)} values per line")
    width = widths.pop()
    values = _integers(path, bodies, "DIMACS edges")
    pairs = values.reshape(-1, width)[:, :2].T
    _refuse_out_of_range(path, pairs.reshape(-1), n, "an edge names vertex")
    if len(edges) != m:
        warnings.warn(f"{path}: the problem line says {m} edges, the file holds "
                      f"{len(edges)}", stacklevel=caller_stacklevel())
    if width == 3:
        warn_of_weights(path, values.reshape(-1, 3)[:, 2], "the edge lines' third values")
    return Graph(torch.from_numpy(np.ascontiguousarray(pairs) - 1), num_nodes=n), kind != "a"


# ---- Pajek ------------------------------------------------------------------------------

def read_pajek(path: str) -> Graph:
    """A Pajek network (.net): ``*Vertices N`` (optional vertex lines ``id "name" ...``;
    the ids 1 .. N, not the names, number the nodes: vertex v is node v - 1, so two
    vertices of one name stay two nodes), then any of ``*Arcs`` (u -> v), ``*Edges``
    (undirected: both directions), ``*Arcslist`` / ``*Edgeslist`` (a vertex and its
    neighbours per line) and ``*Matrix`` (N rows; a nonzero entry (i, j) is the arc
    i -> j). Weights and drawing attributes are not read; "%" lines are comments.
    networkx's ``read_pajek`` names nodes by their names, merging vertices that share
    one, and reads an ``*Edges`` section after ``*Arcs`` as undirected throughout."""
    with open_text(path, encoding="utf-8-sig", errors="replace") as f:
        lines = [(number, line.strip()) for number, line in enumerate(f, 1)
                 if line.strip() and not line.lstrip().startswith("%")]
    count, section, pairs, weights, row = None, None, [], [], 0
    for number, line in lines:
        if line.startswith("*"):
            section, count, row = _pajek_section(path, number, line, count)
            continue
        fields = line.split()
        if section in ("arcs", "edges"):
            ends = _pajek_ids(path, number, fields[:2], count)
            weights += [float(fields[2])] if len(fields) > 2 and _is_float(fields[2]) else []
            pairs += [tuple(ends)] + ([tuple(ends[::-1])] if section == "edges" else [])
        elif section in ("arcslist", "edgeslist"):
            ends = _pajek_ids(path, number, fields, count)
            for v in ends[1:]:
                pairs += [(ends[0], v)] + ([(v, ends[0])] if section == "edgeslist" else [])
        elif section == "matrix":
            values = _pajek_matrix_row(path, number, fields, row, count)
            pairs += [(row, j) for j in np.flatnonzero(values).tolist()]
            weights += values[values != 0].tolist()
            row += 1
        elif section != "vertices":
            raise ValueError(f"{path}: line {number} ({line[:40]!r}) is outside a section "
                             "('*Vertices N', '*Arcs', '*Edges', ...)")
    if count is None:
        raise ValueError(f"{path}: a Pajek network starts with '*Vertices N'")
    warn_of_weights(path, np.array(weights), "the arcs' and edges' values")
    edges = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T
    return Graph(edges.contiguous(), num_nodes=count)


def _pajek_section(path: str, number: int, line: str, count: int | None) -> tuple:
    """(section, vertex count, matrix row) after a ``*`` line."""
    words = line[1:].split()
    name = words[0].lower() if words else ""
    if name == "vertices":
        if len(words) < 2 or not words[1].isdigit() or int(words[1]) > MAX_NODES:
            raise ValueError(f"{path}: line {number}: '*Vertices N' needs the vertex count "
                             f"(at most {MAX_NODES}), got {line!r}")
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


def extract_member(path: str, member: str, folder: str) -> str:
    """``member`` of the archive written to ``folder`` under its base name (never a path
    the archive chooses); returns where."""
    import tarfile
    import zipfile
    target = os.path.join(folder, os.path.basename(member))
    if path.lower().endswith(".zip"):
        with zipfile.ZipFile(path) as archive, archive.open(member) as src, \
                open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        with tarfile.open(path) as archive, archive.extractfile(member) as src, \
                open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return target
