"""Graph files beyond edge lists: compressed text, NumPy archives, METIS, DIMACS, GEXF and
node-link JSON. Each is checked against networkx's graph (or PyG's reader) of the same
data, not against graphloc's own parsing."""

import bz2
import gzip
import json
import lzma
import os
import pickle
import warnings

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch
import zstandard

from graphloc.datasets import load_dataset
from graphloc.datasets.files import is_graph_file, load_graph_file

COMPRESSORS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": zstandard.open}


def _edges(graph) -> list:
    return sorted(map(tuple, graph.edge_index.t().tolist()))


def _both_ways(g) -> list:
    return sorted({(u, v) for u, v in g.edges} | {(v, u) for u, v in g.edges})


def _quiet_load(path, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = load_graph_file(str(path), **kwargs)
    return dataset, [str(w.message) for w in caught]


@pytest.fixture
def karate():
    return nx.karate_club_graph()


def _compressed(path, suffix):
    target = f"{path}{suffix}"
    with open(path, "rb") as src, COMPRESSORS[suffix](target, "wb") as dst:
        dst.write(src.read())
    return target


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
@pytest.mark.parametrize("writer", ["edgelist", "graphml", "gml", "gexf", "mtx"])
def test_compressed_files_give_the_graph_of_the_plain_file(tmp_path, karate, writer, suffix):
    """SNAP ships its graphs as .txt.gz and SuiteSparse as .mtx.gz: they were refused as
    unknown datasets."""
    path = str(tmp_path / f"karate.{writer}")
    if writer == "mtx":
        import scipy.io
        scipy.io.mmwrite(path, nx.to_scipy_sparse_array(karate, weight=None))
    else:
        getattr(nx, f"write_{writer}")(karate, path, **({"data": False}
                                                         if writer == "edgelist" else {}))
    undirected = True if writer == "edgelist" else None
    plain, _ = _quiet_load(path, undirected=undirected)
    packed, _ = _quiet_load(_compressed(path, suffix), undirected=undirected)
    assert _edges(packed.graph) == _edges(plain.graph) == _both_ways(karate)
    assert packed.graph.num_nodes == 34


def test_graph_tools_xml_is_graphml(tmp_path, karate):
    """netzschleuder ships GraphML as NAME.xml.zst (graph-tool's name for the format)."""
    nx.write_graphml(karate, tmp_path / "karate.xml")
    packed, _ = _quiet_load(_compressed(str(tmp_path / "karate.xml"), ".zst"))
    assert _edges(packed.graph) == _both_ways(karate)


def test_a_damaged_compressed_file_is_an_error_naming_it(tmp_path):
    for suffix in COMPRESSORS:
        path = tmp_path / f"edges.txt{suffix}"
        path.write_text("0 1\n1 2\n")  # not compressed at all
        with pytest.raises(ValueError, match=rf"edges.txt\{suffix}: not a readable "
                                             rf"\{suffix} file"):
            load_graph_file(str(path))
        cut = tmp_path / f"cut.txt{suffix}"
        with COMPRESSORS[suffix](cut, "wb") as f:
            f.write(b"".join(f"{i} {i + 1}\n".encode() for i in range(20000)))
        data = cut.read_bytes()
        cut.write_bytes(data[:len(data) // 2])  # a cut download
        # (zstandard's own reader gave the bytes before the cut as the whole file)
        with pytest.raises(ValueError, match=rf"cut.txt\{suffix}: not a readable "
                                             rf"\{suffix} file"):
            load_graph_file(str(cut))


def test_archives_that_compress_themselves_are_not_taken_compressed(tmp_path):
    (tmp_path / "g.pt.gz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"g.pt.gz: a compressed \.pt file is not read"):
        load_graph_file(str(tmp_path / "g.pt.gz"))


def test_names_of_graph_files():
    assert is_graph_file("roadNet-CA.txt.gz") and is_graph_file("g.graphml.bz2")
    assert is_graph_file("data/out.ego-facebook")  # KONECT's own file name
    assert is_graph_file("USA-road-d.NY.gr.gz") and is_graph_file("luxembourg.osm.graph")
    assert is_graph_file("g.edgelist") and is_graph_file("g.npz") and is_graph_file("g.json")
    assert not is_graph_file("city.tar.gz") and not is_graph_file("notes.md")


def test_konect_out_files_load_by_their_name(tmp_path, karate):
    path = tmp_path / "out.karate"
    path.write_text(f"% sym unweighted\n% {karate.number_of_edges()} 34 34\n"
                    + "".join(f"{u + 1} {v + 1}\n" for u, v in karate.edges))
    dataset = load_dataset(str(path))
    assert _edges(dataset.graph) == _both_ways(karate) and dataset.graph.num_nodes == 34


# ---- NumPy archives ---------------------------------------------------------------------

def _gnn_benchmark_arrays(adjacency, features, labels) -> dict:
    adjacency, features = sp.csr_matrix(adjacency), sp.csr_matrix(features)
    return dict(adj_data=adjacency.data, adj_indices=adjacency.indices,
                adj_indptr=adjacency.indptr, adj_shape=adjacency.shape,
                attr_data=features.data, attr_indices=features.indices,
                attr_indptr=features.indptr, attr_shape=features.shape, labels=labels)


def test_the_gnn_benchmark_layout_reads_as_pygs_read_npz(tmp_path):
    """The layout of PyG's Amazon, Coauthor and CitationFull files, against PyG's own
    reader: the same undirected edges, features and labels (a file without self-loops and
    with 0/1 features, where PyG changes nothing)."""
    from torch_geometric.io import read_npz
    rng = np.random.default_rng(0)
    n = 40
    adjacency = (rng.random((n, n)) < 0.08).astype(np.float32)
    np.fill_diagonal(adjacency, 0)  # one-way citations: PyG makes them undirected
    features = (rng.random((n, 12)) < 0.3).astype(np.float32)
    labels = rng.integers(0, 4, n)
    path = tmp_path / "cora.npz"
    np.savez(path, **_gnn_benchmark_arrays(adjacency, features, labels))
    ours, said = _quiet_load(path)
    pyg = read_npz(str(path))
    assert said == []
    assert _edges(ours.graph) == sorted(map(tuple, pyg.edge_index.t().tolist()))
    assert torch.equal(ours.x, pyg.x) and torch.equal(ours.y, pyg.y)
    assert ours.labelled and ours.num_classes == int(labels.max()) + 1


def test_gnn_benchmark_features_are_the_stored_values_and_loops_stay(tmp_path):
    """Unlike PyG's reader, the stored feature values (counts) and the file's self-loops
    are kept: both are the file's data."""
    adjacency = np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=np.float32)
    features = np.array([[0, 3], [2, 0], [0, 0]], dtype=np.float32)
    np.savez(tmp_path / "g.npz", **_gnn_benchmark_arrays(adjacency, features,
                                                         np.array([0, 1, 1])))
    dataset, _ = _quiet_load(tmp_path / "g.npz")
    assert _edges(dataset.graph) == [(0, 0), (0, 1), (1, 0), (1, 2), (2, 1)]
    assert dataset.x.tolist() == features.tolist()
    # a dense attr_matrix, and no labels
    np.savez(tmp_path / "d.npz", adj_data=np.ones(1), adj_indices=np.array([1]),
             adj_indptr=np.array([0, 1, 1]), adj_shape=np.array([2, 2]),
             attr_matrix=np.array([[0.5], [1.5]]))
    dataset, _ = _quiet_load(tmp_path / "d.npz")
    assert dataset.x.view(-1).tolist() == [0.5, 1.5] and not dataset.labelled


def test_a_scipy_sparse_archive_is_an_adjacency(tmp_path, karate):
    directed = nx.gn_graph(30, seed=1)  # every edge one way
    sp.save_npz(tmp_path / "d.npz", nx.to_scipy_sparse_array(directed, format="coo"))
    dataset, said = _quiet_load(tmp_path / "d.npz")
    assert _edges(dataset.graph) == sorted(directed.edges)
    assert any("has its reverse" in message for message in said)
    sp.save_npz(tmp_path / "k.npz", nx.to_scipy_sparse_array(karate, format="csc"))
    dataset, said = _quiet_load(tmp_path / "k.npz")
    assert _edges(dataset.graph) == _both_ways(karate)
    assert any("edge weights" in message for message in said)  # karate's weights


def test_named_arrays_in_an_archive(tmp_path):
    edge_index = np.array([[0, 1, 2], [1, 2, 0]])
    np.savez(tmp_path / "g.npz", edge_index=edge_index, x=np.ones((4, 2)), y=np.arange(4))
    dataset, _ = _quiet_load(tmp_path / "g.npz", undirected=False)
    assert dataset.graph.num_nodes == 4  # from x: node 3 has no edge
    assert _edges(dataset.graph) == [(0, 1), (1, 2), (2, 0)]
    assert dataset.y.tolist() == [0, 1, 2, 3]
    np.savez(tmp_path / "n.npz", edge_index=edge_index, num_nodes=np.array(6))
    assert load_graph_file(str(tmp_path / "n.npz"), undirected=False).graph.num_nodes == 6


@pytest.mark.parametrize("arrays, match", [
    (dict(edges=np.zeros((2, 3))), r"archive of the arrays \['edges'\]"),
    (dict(edge_index=np.zeros((3, 2), dtype=np.int64)), r"'edge_index' must be integers "
                                                        r"of shape \[2, E\]"),
    (dict(edge_index=np.array([[0], [1]]), x=np.ones((1, 2))), r"g.npz: .*edge_index"),
    (dict(edge_index=np.array([[0], [1]]), y=np.arange(3)), r"'y' has shape \[3\] but the "
                                                            r"graph has 2 nodes"),
    (dict(edge_index=np.array([[0], [1]]), num_nodes=np.array([2, 3])), r"'num_nodes' must "
                                                                        r"be one integer"),
])
def test_bad_archives_name_the_file_and_the_array(tmp_path, arrays, match):
    np.savez(tmp_path / "g.npz", **arrays)
    with pytest.raises(ValueError, match=match):
        load_graph_file(str(tmp_path / "g.npz"))


def test_archives_are_read_without_unpickling(tmp_path):
    """An archive's object arrays are pickles, which run code when loaded: never loaded."""
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    np.savez(tmp_path / "g.npz", edge_index=np.array([Payload()], dtype=object))
    with pytest.raises(ValueError, match=r"g.npz: not a readable NumPy archive|g.npz:"):
        load_graph_file(str(tmp_path / "g.npz"))
    assert not marker.exists()
    np.save(tmp_path / "one.npy", np.zeros(3))
    os.rename(tmp_path / "one.npy", tmp_path / "one.npz")
    with pytest.raises(ValueError, match=r"one.npz: one array of shape \[3\]"):
        load_graph_file(str(tmp_path / "one.npz"))
    (tmp_path / "junk.npz").write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(ValueError, match=r"junk.npz: not a readable NumPy archive"):
        load_graph_file(str(tmp_path / "junk.npz"))


# ---- METIS ------------------------------------------------------------------------------

def _metis(g, fmt="", vertex_weights=0, sizes=False) -> str:
    """g in METIS's format, written from its adjacency: edge weights 1 + u + v."""
    header = f"{g.number_of_nodes()} {g.number_of_edges()}"
    header += f" {fmt}" if fmt else ""
    header += f" {vertex_weights}" if vertex_weights > 1 else ""
    lines = ["% written by the test", header]
    for v in sorted(g):
        fields = (["9"] if sizes else []) + ["7"] * vertex_weights
        for u in sorted(g[v]):
            fields += [str(u + 1)] + ([str(1 + u + v)] if fmt.endswith("1") else [])
        lines.append(" ".join(fields))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("fmt, vertex_weights, sizes", [
    ("", 0, False), ("0", 0, False), ("1", 0, False), ("001", 0, False), ("10", 1, False),
    ("11", 1, False), ("11", 3, False), ("111", 2, True), ("100", 0, True)])
def test_metis_graphs_match_networkx(tmp_path, blocks, fmt, vertex_weights, sizes):
    g = nx.convert_node_labels_to_integers(nx.les_miserables_graph())
    g.add_node(g.number_of_nodes())  # an isolated last vertex: an empty last line
    path = tmp_path / "g.graph"
    path.write_text(_metis(g, fmt, vertex_weights, sizes))
    dataset, said = _quiet_load(path)
    assert dataset.graph.num_nodes == g.number_of_nodes()
    assert _edges(dataset.graph) == _both_ways(g)
    assert any("weights and sizes are not read" in m for m in said) == (fmt.strip("0") != "")


@pytest.mark.parametrize("fmt", ["", "1", "10", "11", "111"])
def test_metis_trailing_isolated_vertices_may_lack_their_lines(tmp_path, blocks, fmt):
    """Trailing isolated vertices' lines may be missing, whatever the fmt (a file with
    weights and vertex weights was refused as holding 'an odd number' of values)."""
    g = nx.convert_node_labels_to_integers(nx.les_miserables_graph())
    g.add_nodes_from([g.number_of_nodes(), g.number_of_nodes() + 1])
    text = _metis(g, fmt, vertex_weights=int(fmt[-2:-1] or 0), sizes=len(fmt) == 3)
    cut = "\n".join(text.splitlines()[:-2]) + "\n"  # the two isolated vertices' lines
    (tmp_path / "g.graph").write_text(cut)
    dataset, _ = _quiet_load(tmp_path / "g.graph")
    assert dataset.graph.num_nodes == g.number_of_nodes()
    assert _edges(dataset.graph) == _both_ways(g)


def test_metis_files_that_do_not_add_up_are_refused(tmp_path, blocks, karate):
    """A cut download, or a header whose fmt does not match its lines, is refused by the
    count the header gives."""
    text = _metis(karate)
    (tmp_path / "cut.graph").write_text("\n".join(text.splitlines()[:20]) + "\n")
    with pytest.raises(ValueError, match=r"cut.graph: the header says 78 edges, listed at "
                                         r"both ends \(156 entries\)"):
        load_graph_file(str(tmp_path / "cut.graph"))
    (tmp_path / "fmt.graph").write_text(text.replace("34 78", "34 78 1", 1))
    with pytest.raises(ValueError, match=r"fmt.graph: .*(odd number|header says)"):
        load_graph_file(str(tmp_path / "fmt.graph"))


# ---- DIMACS -----------------------------------------------------------------------------

def test_dimacs_road_arcs_are_directed_as_listed(tmp_path, blocks):
    """The 9th challenge's road networks ("p sp", "a u v length"): each arc one way, as
    listed (a one-way street has one arc), vertices from 1."""
    g = nx.gnp_random_graph(25, 0.15, seed=3, directed=True)
    path = tmp_path / "road.gr"
    path.write_text(f"c test\np sp 25 {g.number_of_edges()}\n"
                    + "".join(f"a {u + 1} {v + 1} {10 + u}\n" for u, v in g.edges))
    dataset, said = _quiet_load(path)
    assert dataset.graph.num_nodes == 25 and _edges(dataset.graph) == sorted(g.edges)
    assert any("edge weights" in message for message in said)
    assert not any("has its reverse" in message for message in said)


@pytest.mark.parametrize("kind, form", [("edge", "e {} {}"), ("tw", "{} {}"),
                                        ("col", "e  {}  {}")])
def test_dimacs_edges_are_undirected_and_listed_once(tmp_path, blocks, kind, form):
    g = nx.gnm_random_graph(30, 60, seed=4)
    path = tmp_path / "g.col"
    path.write_text(f"c test\np {kind} 30 60\n"
                    + "".join(form.format(u + 1, v + 1) + "\n" for u, v in g.edges))
    dataset, said = _quiet_load(path)
    assert _edges(dataset.graph) == _both_ways(g) and said == []
    assert load_graph_file(str(path), undirected=False).graph.num_edges == 60


def test_a_dimacs_edge_count_other_than_the_problem_lines_warns(tmp_path, blocks):
    (tmp_path / "g.gr").write_text("p sp 3 5\na 1 2\na 2 3\n")
    _, said = _quiet_load(tmp_path / "g.gr")
    assert any("says 5 edges, the file holds 2" in message for message in said)


# ---- GEXF and node-link JSON ------------------------------------------------------------

def test_gephi_gexf_names_nodes_by_label_and_keeps_direction(tmp_path):
    """Gephi writes ids "n0", "n1", ... and each node's name as its label; a directed
    graph's edges stay one way."""
    text = """<?xml version="1.0" encoding="UTF-8"?>
<gexf xmlns="http://gexf.net/1.3" version="1.3"><graph defaultedgetype="directed">
<nodes><node id="n0" label="2"/><node id="n1" label="0"/><node id="n2" label="1"/></nodes>
<edges><edge id="e0" source="n0" target="n1" weight="2.5"/>
<edge id="e1" source="n1" target="n2"/></edges></graph></gexf>"""
    (tmp_path / "g.gexf").write_text(text)
    dataset, said = _quiet_load(tmp_path / "g.gexf")
    # nodes named 0, 1, 2 by their labels: rows in that order
    assert _edges(dataset.graph) == [(0, 1), (2, 0)]
    assert any("['weight']" in message for message in said)  # not the edge ids


def test_node_link_json_keeps_direction_and_reads_classes(tmp_path):
    g = nx.gn_graph(20, seed=2)
    for v in g:
        g.nodes[v]["y"] = v % 3
    for key in ("links", "edges"):
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(nx.node_link_data(g, edges=key)))
        dataset, _ = _quiet_load(path)
        assert _edges(dataset.graph) == sorted(g.edges)
        assert dataset.y.tolist() == [v % 3 for v in range(20)]
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"list.json is not a readable node-link JSON file"):
        load_graph_file(str(tmp_path / "list.json"))


# ---- Pajek ------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [nx.karate_club_graph, lambda: nx.gn_graph(25, seed=5)])
def test_pajek_files_networkx_writes(tmp_path, make):
    g = make()
    nx.write_pajek(g, tmp_path / "g.net")
    dataset, _ = _quiet_load(tmp_path / "g.net")
    assert dataset.graph.num_nodes == g.number_of_nodes()
    assert _edges(dataset.graph) == (sorted(g.edges) if g.is_directed() else _both_ways(g))


def test_pajek_sections_and_vertices_of_one_name(tmp_path):
    """Every section kind in one file, and two vertices named alike (networkx's reader
    merges them into one node and reads the arcs as undirected after an *Edges section)."""
    (tmp_path / "g.net").write_text(
        "% a comment\n*Network test\n*Vertices 6\n1 \"Smith\" 0.1 0.2 0.5\n2 \"Smith\"\n"
        "3 \"Jones\"\n*Arcs\n1 2 1\n2 3\n*Edges\n3 4 1.0\n*Arcslist\n5 1 2\n*Edgeslist\n"
        "6 5\n")
    truth = nx.MultiDiGraph()
    truth.add_nodes_from(range(6))
    truth.add_edges_from([(0, 1), (1, 2), (2, 3), (3, 2), (4, 0), (4, 1), (5, 4), (4, 5)])
    dataset, said = _quiet_load(tmp_path / "g.net")
    assert dataset.graph.num_nodes == 6 and _edges(dataset.graph) == sorted(truth.edges())
    assert said == []  # weights of 1 only
    (tmp_path / "m.net").write_text("*Vertices 3\n*Matrix\n0 1 0\n0 0 2\n1 0 0\n")
    dataset, said = _quiet_load(tmp_path / "m.net")
    assert _edges(dataset.graph) == [(0, 1), (1, 2), (2, 0)]
    assert any("edge weights" in message for message in said)


def test_pajek_vertex_names_are_the_nodes_names(tmp_path):
    """networkx writes each node's name on its vertex line (quoted where it holds a space):
    the dataset keeps them in row order, so the edges read back between the same names."""
    g = nx.les_miserables_graph()
    g = nx.relabel_nodes(g, {n: f"{n} (Hugo)" if n[0] < "M" else n for n in g})
    nx.write_pajek(g, tmp_path / "lesmis.net")
    dataset, _ = _quiet_load(tmp_path / "lesmis.net")
    names = dataset.node_names
    assert sorted(names) == sorted(g.nodes) and "Valjean" in names and "Cosette (Hugo)" in names
    src, dst = dataset.graph.edge_index.tolist()
    assert sorted((names[u], names[v]) for u, v in zip(src, dst, strict=True)) == \
        sorted([(u, v) for u, v in g.edges] + [(v, u) for u, v in g.edges])


@pytest.mark.parametrize("vertices", [
    '1 "a"\n2 "b"\n',  # vertex 3 has no line
    '1 "a"\n2 "b"\n3 "a"\n',  # two vertices of one name
    ''])
def test_pajek_names_only_where_every_vertex_has_its_own(tmp_path, vertices):
    (tmp_path / "g.net").write_text(f"*Vertices 3\n{vertices}*Arcs\n1 2\n2 3\n")
    dataset, _ = _quiet_load(tmp_path / "g.net")
    assert dataset.node_names is None and _edges(dataset.graph) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("line, match", [
    ('4 "d"', r"line 3 names vertex 4, but the network numbers its 3 vertices 1 \.\. 3"),
    ('0 "d"', r"line 3 names vertex 0"),
    ('x "d"', r"line 3: a vertex line starts with the vertex number, got 'x \"d\"'"),
    ('2x "d"', r"line 3: a vertex line starts with the vertex number")])
def test_bad_pajek_vertex_lines_are_named_by_line(tmp_path, line, match):
    (tmp_path / "g.net").write_text(f'*Vertices 3\n1 "a"\n{line}\n*Arcs\n1 2\n')
    with pytest.raises(ValueError, match=match):
        load_graph_file(str(tmp_path / "g.net"))


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_compressed_features_and_labels_files(tmp_path, karate, suffix):
    nx.write_graphml(karate, tmp_path / "k.graphml")
    x = np.random.default_rng(0).normal(size=(34, 3))
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "x.csv", x, delimiter=",")
    (tmp_path / "y.csv").write_text("".join(f"{v % 3}\n" for v in range(34)))
    for name in ("x.npy", "x.csv", "y.csv"):
        _compressed(str(tmp_path / name), suffix)
    for features in ("x.npy", "x.csv"):
        dataset, _ = _quiet_load(tmp_path / "k.graphml",
                                 features=str(tmp_path / f"{features}{suffix}"),
                                 labels=str(tmp_path / f"y.csv{suffix}"))
        assert torch.equal(dataset.x, torch.from_numpy(x).float())
        assert dataset.y.tolist() == [v % 3 for v in range(34)]
    (tmp_path / f"bad.csv{suffix}").write_text("1\n2\n")
    with pytest.raises(ValueError, match=rf"bad.csv\{suffix}: not a readable features file"):
        load_graph_file(str(tmp_path / "k.graphml"), features=str(tmp_path / f"bad.csv{suffix}"))


@pytest.mark.parametrize("suffix", ["", *COMPRESSORS])
def test_a_mtx_file_that_is_not_matrix_market_is_an_error_not_an_abort(tmp_path, suffix):
    """scipy's reader, handed an open file that is not MatrixMarket, ended the process
    (pybind11's terminate): the reader gets the path, or the decompressed bytes."""
    path = tmp_path / "g.mtx"
    path.write_text("*Vertices 3\n1 \"a\"\n2 \"b\"\n")
    name = _compressed(str(path), suffix) if suffix else str(path)
    with pytest.raises(ValueError, match=r"g.mtx.*: not a MatrixMarket file"):
        load_graph_file(name)


@pytest.mark.parametrize("name, text, match", [
    # METIS
    ("g.graph", "2 1\n2\n3\n", r"a neighbour is 3, but the file numbers its 2 vertices "
                                r"1 \.\. 2"),
    ("g.graph", "2 1\n2\n1 x\n", r"METIS vertex lines must be integers, got the line '1 x'"),
    ("g.graph", "two 1\n2\n1\n", r"a METIS header is"),
    # DIMACS
    ("g.gr", "p sp 3 1\na 1 4\n", r"an edge names vertex 4, but the file numbers its 3 "
                                   r"vertices"),
    ("g.gr", "p sp 3 1\na 0 2\n", r"an edge names vertex 0"),
    ("g.gr", "a 1 2\n", r"one problem line 'p KIND N M', got none"),
    ("g.gr", "p sp 3 2\na 1 2\ne 2 3\n", r"mixes arcs"),
    ("g.gr", "p sp 3 2\na 1 2 5\na 2 3\n", r"all or none a weight"),
    # the same, lines apart (in other blocks of lines)
    ("g.gr", "p sp 3 4\na 1 2\na 2 3\na 1 3\ne 2 3\n", r"mixes arcs"),
    ("g.gr", "p sp 3 4\na 1 2\na 2 3\na 1 3\na 2 3 5\n", r"all or none a weight"),
    ("g.gr", "p sp 3 1\na 1 2\nc\np sp 3 1\n", r"one problem line 'p KIND N M', got "
                                                 r"\['p sp 3 1', 'p sp 3 1'\]"),
    ("g.graph", "3 1\n2\n1\n\n\n1\n", r"more vertex lines than the header's 3"),
    ("g.gr", "p sp 3 1\na 1 2.5\n", r"must be integers, got the line"),
    # Pajek
    ("g.net", "*Vertices 3\n*Arcs\n1 4\n", r"line 3 names vertex 4, but the network numbers "
                                           r"its 3"),
    ("g.net", "*Arcs\n1 2\n", r"line 1: '\*Arcs' before '\*Vertices N'"),
    ("g.net", "*Vertices 3\n*Hyperedges\n1 2 3\n", r"line 2: unknown Pajek section "
                                                   r"'\*Hyperedges'"),
    ("g.net", "1 2\n", r"line 1 \('1 2'\) is outside a section"),
    ("g.net", "*Vertices 2\n*Matrix\n0 1\n1\n", r"line 4: a '\*Matrix' of 2 vertices"),
    ("g.net", "*Vertices two\n", r"line 1: '\*Vertices N' needs the vertex count"),
    # counts and ids past what a graph holds: an OverflowError, or an error naming no file
    ("g.graph", "99999999999999999999 1\n", r"the header's 99,999,999,999,999,999,999 "
                                            r"vertices are more than a graph can have here"),
    ("g.net", "*Vertices 99999999999999999999\n", r"line 1: '\*Vertices N' needs the vertex "
                                                  r"count \(at most [0-9,]+: "),
    ("g.txt", "1 2\n2 99999999999999999999\n", r"line 2 has the node id 99999999999999999999"),
    ("out.g", "% sym unweighted\n1 2\n2 99999999999999999999\n", r"line 3 has the node id"),
    ("g.gr", "p sp 99999999999999999999 1\na 1 2\n",
     r"the problem line's 99,999,999,999,999,999,999 vertices are more"),
])
def test_bad_files_name_the_file_and_the_problem(tmp_path, blocks, name, text, match):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=rf"{name}: (.*)?{match}"):
        load_graph_file(str(tmp_path / name))


def test_named_arrays_carry_their_split_and_name_what_is_not_read(tmp_path):
    train, val, test = np.zeros(6, bool), np.zeros(6, bool), np.zeros(6, bool)
    train[:2], val[2:4], test[4:] = True, True, True
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]),
             y=np.arange(6) % 2, train_mask=train, val_mask=np.array([2, 3]), test_mask=test,
             edge_attr=np.ones((5, 2)))
    dataset, said = _quiet_load(tmp_path / "g.npz", undirected=True)
    assert dataset.train_index.tolist() == [0, 1] and dataset.val_index.tolist() == [2, 3]
    assert dataset.test_index.tolist() == [4, 5]
    assert [m for m in said if "are not read" in m] == [
        f"{tmp_path / 'g.npz'}: arrays ['edge_attr'] are not read: an archive's dataset takes "
        "edge_index, x, y, num_nodes and a complete train_mask / val_mask / test_mask split"]
    np.savez(tmp_path / "half.npz", edge_index=np.array([[0], [1]]), train_mask=train[:2])
    _, said = _quiet_load(tmp_path / "half.npz", undirected=True)
    assert any("arrays ['train_mask'] are not read" in m for m in said)


# ---- archives ---------------------------------------------------------------------------

def _tar(path, files: dict, mode: str) -> None:
    import io
    import tarfile
    with tarfile.open(path, mode) as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_konect_download_loads_from_its_archive(tmp_path, karate):
    """KONECT ships download.tsv.NAME.tar.bz2: NAME/out.NAME beside README and meta files."""
    edges = "".join(f"{u + 1} {v + 1}\n" for u, v in karate.edges)
    _tar(tmp_path / "download.tsv.karate.tar.bz2",
         {"karate/README.karate": "Zachary", "karate/meta.karate": "name: karate",
          "karate/out.karate": f"% sym unweighted\n% 78 34 34\n{edges}"}, "w:bz2")
    dataset = load_dataset(str(tmp_path / "download.tsv.karate.tar.bz2"))
    assert _edges(dataset.graph) == _both_ways(karate) and dataset.graph.num_nodes == 34
    assert dataset.name == str(tmp_path / "download.tsv.karate.tar.bz2")


def test_a_suitesparse_archive_reads_its_main_matrix(tmp_path, karate):
    """SuiteSparse's NAME.tar.gz holds NAME/NAME.mtx and auxiliary NAME_*.mtx matrices;
    a .tar.gz that is no City-Networks release is a graph archive."""
    import io

    import scipy.io
    main, aux = io.BytesIO(), io.BytesIO()
    scipy.io.mmwrite(main, nx.to_scipy_sparse_array(karate, weight=None))
    scipy.io.mmwrite(aux, np.ones((34, 2)))
    _tar(tmp_path / "karate.tar.gz", {"karate/karate.mtx": main.getvalue().decode(),
                                      "karate/karate_coord.mtx": aux.getvalue().decode()},
         "w:gz")
    dataset = load_dataset(str(tmp_path / "karate.tar.gz"))
    assert _edges(dataset.graph) == _both_ways(karate)


def test_a_zip_of_one_edge_list_and_archives_of_several(tmp_path, karate):
    import zipfile
    with zipfile.ZipFile(tmp_path / "karate.zip", "w") as z:
        z.writestr("karate/karate.edges", "".join(f"{u} {v}\n{v} {u}\n" for u, v in karate.edges))
        z.writestr("karate/readme.html", "<p>karate</p>")
        z.writestr("__MACOSX/karate/._karate.edges", "\x00\x05\x16\x07")  # macOS's zip
    assert _edges(load_dataset(str(tmp_path / "karate.zip")).graph) == _both_ways(karate)
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as z:
        z.writestr("a.txt", "0 1\n")
        z.writestr("b.txt", "1 2\n")
    with pytest.raises(ValueError, match=r"two.zip: holds 2 graph files \(\['a.txt', "
                                         r"'b.txt'\]\); extract the one to read"):
        load_dataset(str(tmp_path / "two.zip"))
    with zipfile.ZipFile(tmp_path / "none.zip", "w") as z:
        z.writestr("notes.md", "nothing")
    with pytest.raises(ValueError, match=r"none.zip: holds no graph file .*\['notes.md'\]"):
        load_dataset(str(tmp_path / "none.zip"))
    (tmp_path / "junk.tar.bz2").write_bytes(b"junk")
    with pytest.raises(ValueError, match=r"junk.tar.bz2: not a readable archive"):
        load_dataset(str(tmp_path / "junk.tar.bz2"))


@pytest.mark.parametrize("beside", [["README.txt", "LICENSE.txt"], ["nodes.csv"],
                                    ["readme.txt", "karate/nodes.tsv"]])
def test_an_archive_of_a_graph_file_beside_documents_and_tables(tmp_path, karate, beside):
    """A README.txt (or a node table) beside the graph counted as a second edge list, and
    the archive was refused as one of several graphs."""
    import zipfile
    with zipfile.ZipFile(tmp_path / "karate.zip", "w") as z:
        z.writestr("karate/karate.graphml", "\n".join(nx.generate_graphml(karate)))
        for name in beside:
            z.writestr(name, "id,club\n0,1\n")
    dataset, _ = _quiet_load_dataset(tmp_path / "karate.zip")
    assert _edges(dataset.graph) == _both_ways(karate)


def test_archive_members_are_written_under_their_base_name_and_errors_name_the_archive(
        tmp_path):
    """A member named ../../x is extracted inside the temporary folder, never beside it;
    an error in it names the archive and the member."""
    _tar(tmp_path / "evil.tar", {"../../escaped.txt": "0 1\n1\n"}, "w")
    with pytest.raises(ValueError, match=r"evil.tar \(../../escaped.txt\): an edge list needs "
                                         r"two columns .* line 2 has 1"):
        load_dataset(str(tmp_path / "evil.tar"))
    assert not (tmp_path.parent.parent / "escaped.txt").exists()
    _tar(tmp_path / "one-way.tar", {"g/edges.txt": "0 1\n1 2\n"}, "w")
    _, said = _quiet_load_dataset(tmp_path / "one-way.tar")
    assert [m.split(":")[0] for m in said] == [f"{tmp_path / 'one-way.tar'} (g/edges.txt)"]


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz", "zip"])
def test_an_archive_is_read_in_one_pass_and_a_cut_one_is_named(tmp_path, karate, mode):
    """The archive is decompressed once, front to back (a tar's member list took a pass of
    its own: a KONECT .tar.bz2 of 3.3 million edges spent 2.0 of its 11.5 s there); members
    of one base name in two folders stay apart (the one named as SuiteSparse names its
    matrix is read); a cut archive is an error naming it."""
    import io
    import zipfile

    import scipy.io
    main = io.BytesIO()
    scipy.io.mmwrite(main, nx.to_scipy_sparse_array(karate, weight=None))
    files = {"other/karate.mtx": "%%MatrixMarket matrix coordinate pattern general\n"
                                 "2 2 1\n1 2\n",
             "karate/karate.mtx": main.getvalue().decode()}
    name = tmp_path / ("karate.zip" if mode == "zip" else f"karate.tar.{mode[2:]}")
    if mode == "zip":
        with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as z:
            for member, text in files.items():
                z.writestr(member, text)
    else:
        _tar(name, files, mode)
    assert _edges(load_dataset(str(name)).graph) == _both_ways(karate)
    data = name.read_bytes()
    (tmp_path / f"cut-{name.name}").write_bytes(data[:len(data) // 2])
    # (a .tar.gz the City-Networks loader may hold: its own words, naming the file too)
    with pytest.raises(ValueError, match=rf"cut-{name.name}(: not a readable archive| is not "
                                         r"a readable \.tar\.gz archive)"):
        load_dataset(str(tmp_path / f"cut-{name.name}"))


def _quiet_load_dataset(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = load_dataset(str(path))
    return dataset, [str(w.message) for w in caught]


@pytest.mark.parametrize("name, match", [
    ("e.graph", r"a METIS graph starts with"), ("e.gr", r"one problem line 'p KIND N M'"),
    ("e.net", r"starts with '\*Vertices N'"), ("e.json", r"not a readable node-link JSON"),
    ("e.gexf", r"not a readable GEXF"), ("e.npz", r"not a readable NumPy archive"),
    ("e.edgelist", r"holds no edges")])
def test_empty_files_of_every_format_are_errors_naming_them(tmp_path, blocks, name, match):
    (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=rf"{name}.*{match}|{match}"):
        load_graph_file(str(tmp_path / name))


def test_a_missing_archive_is_named():
    from graphloc.datasets.files import load_graph_archive
    with pytest.raises(FileNotFoundError, match="no graph archive at nowhere.tar.bz2"):
        load_graph_archive("nowhere.tar.bz2")
