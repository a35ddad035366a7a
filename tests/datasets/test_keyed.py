"""Feature and label files keyed by node (``graphloc.datasets.keyed``): rows matched to
the graph's nodes by a first column of names or ids, against the mapping written out here."""

import gzip
import warnings

import networkx as nx
import numpy as np
import pytest
import torch

from graphloc.datasets.files import load_graph_file

# an edge list of names: its nodes are numbered as they first appear
EDGES = "alice,bob\nbob,carol\ncarol,dave\ndave,alice\nerin,alice\n"
ORDER = ["alice", "bob", "carol", "dave", "erin"]


def _load(tmp_path, **files):
    (tmp_path / "people.csv").write_text(EDGES)
    paths = {}
    for what, (name, text) in files.items():
        (tmp_path / name).write_text(text)
        paths[what] = str(tmp_path / name)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has its reverse")
        return load_graph_file(str(tmp_path / "people.csv"), **paths)


def test_labels_keyed_by_name_reach_their_nodes_in_any_order(tmp_path):
    """A labels file of "name,class" lines in another order than the graph's: read by
    position it gave alice bob's class without a word."""
    classes = {"dave": 2, "alice": 0, "erin": 1, "carol": 2, "bob": 1}
    text = "".join(f"{name},{c}\n" for name, c in classes.items())
    ds = _load(tmp_path, labels=("y.csv", text))
    assert ds.y.tolist() == [classes[name] for name in ORDER] and ds.labelled


@pytest.mark.parametrize("header", ["", "name,class\n", ",class\n", "Id,class\n"])
def test_a_header_over_the_keyed_rows_is_skipped(tmp_path, header):
    """No header, a header of other words, pandas' to_csv header (its index column has an
    empty name) or Gephi's "Id"."""
    text = header + "carol,b\nalice,a\nbob,b\n"
    ds = _load(tmp_path, labels=("y.csv", text))
    # class names numbered in sorted order (a: 0, b: 1); dave and erin have none: -1
    assert ds.y.tolist() == [0, 1, 1, -1, -1]


def test_features_keyed_by_name_are_the_nodes_rows(tmp_path):
    rows = {name: [float(i), i * 0.5 - 1] for i, name in enumerate(reversed(ORDER))}
    text = "node,f1,f2\n" + "".join(f"{n},{a},{b}\n" for n, (a, b) in rows.items())
    ds = _load(tmp_path, features=("x.csv", text))
    expected = torch.tensor([rows[name] for name in ORDER], dtype=torch.float32)
    assert torch.equal(ds.x, expected)


def test_a_positional_file_on_a_graph_of_names_says_whose_order_it_takes(tmp_path):
    with pytest.warns(UserWarning, match=r"y.csv: its rows are read as the labels of the nodes "
                                         r"in .*people.csv's order \('alice', 'bob', 'carol', "
                                         r"'dave', \.\.\.\); to match them by name"):
        ds = _load(tmp_path, labels=("y.csv", "0\n1\n2\n0\n1\n"))
    assert ds.y.tolist() == [0, 1, 2, 0, 1]


def test_a_positional_file_on_a_graph_of_ids_reads_quietly(tmp_path):
    (tmp_path / "g.csv").write_text("0,1\n1,2\n2,0\n1,0\n")
    (tmp_path / "y.csv").write_text("2\n0\n1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_graph_file(str(tmp_path / "g.csv"), labels=str(tmp_path / "y.csv")
                               ).y.tolist() == [2, 0, 1]


def test_rows_keyed_by_id_under_an_id_header(tmp_path):
    """A graph of integer ids: a file whose first line says its first column holds nodes
    ("id", "node", ...) is matched by id; an id outside 0 .. N-1 is refused by line."""
    (tmp_path / "g.csv").write_text("0,1\n1,2\n2,3\n3,0\n")
    (tmp_path / "x.csv").write_text("id,a\n3,30\n1.0,10\n0,0\n2,20\n")  # (pandas' 1.0)
    (tmp_path / "y.csv").write_text("node,label\n2,1\n0,0\n")
    ds = load_graph_file(str(tmp_path / "g.csv"), features=str(tmp_path / "x.csv"),
                         labels=str(tmp_path / "y.csv"))
    assert ds.x.view(-1).tolist() == [0.0, 10.0, 20.0, 30.0]
    assert ds.y.tolist() == [0, -1, 1, -1]
    (tmp_path / "far.csv").write_text("id,a\n0,1\n4,2\n")
    with pytest.raises(ValueError, match=r"far.csv: line 3 is keyed by '4', which is not a "
                                         r"node of the graph"):
        load_graph_file(str(tmp_path / "g.csv"), labels=str(tmp_path / "far.csv"))


@pytest.mark.parametrize("what, text, message", [
    ("labels", "alice,1\nmallory,0\n", r"line 2 is keyed by 'mallory', which is not a node"),
    ("labels", "alice,1\nbob,0\nalice,1\n", r"line 3 gives node 'alice' again \(first at "
                                            r"line 1\)"),
    ("labels", "alice,1,7\nbob,0,7\n", r"a keyed labels file holds a node and its class per "
                                       r"line; line 1 has more columns"),
    ("features", "alice,1\nbob,2\ncarol,3\ndave,4\n", r"gives every node a row, but node "
                                                      r"'erin' has none \(4 of 5"),
    ("features", "alice,1\nbob,2\ncarol,x\ndave,4\nerin,5\n", r"line 3, column 2 holds 'x', "
                                                              r"not a finite number"),
    ("features", "alice,1\nbob,inf\ncarol,3\ndave,4\nerin,5\n", r"line 2, column 2 holds "
                                                                r"'inf'"),
    ("features", "alice,1,2\nbob,2\ncarol,3,1\ndave,4,1\nerin,5,1\n", r"line 2 has 1 "
                                                                      r"features after"),
])
def test_bad_keyed_rows_are_named_by_line(tmp_path, what, text, message):
    with pytest.raises(ValueError, match=message):
        _load(tmp_path, **{what: ("f.csv", text)})


def test_a_graphml_of_named_nodes_takes_a_pandas_table_indexed_by_node(tmp_path):
    """Les Misérables as GraphML (nodes named by character) with features as pandas'
    ``DataFrame.to_csv`` writes a table indexed by name (its header's first field empty),
    gzipped, in sorted order."""
    g = nx.les_miserables_graph()
    nx.write_graphml(g, tmp_path / "lesmis.graphml")
    degree = dict(g.degree())
    with gzip.open(tmp_path / "x.csv.gz", "wt") as f:
        f.write(",degree,initial\n")
        f.writelines(f"{n},{degree[n]},{ord(n[0])}\n" for n in sorted(g))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*are not read")
        ds = load_graph_file(str(tmp_path / "lesmis.graphml"),
                             features=str(tmp_path / "x.csv.gz"))
    expected = np.array([[degree[n], ord(n[0])] for n in g.nodes], dtype=np.float32)
    assert np.array_equal(ds.x.numpy(), expected)


def test_a_dataset_of_a_graph_of_names_keeps_them_in_row_order(tmp_path):
    ds = _load(tmp_path)
    assert ds.node_names == ORDER
    (tmp_path / "ids.csv").write_text("0,1\n1,2\n2,0\n1,0\n")
    assert load_graph_file(str(tmp_path / "ids.csv")).node_names is None
    g = nx.les_miserables_graph()
    nx.write_graphml(g, tmp_path / "lesmis.graphml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert load_graph_file(str(tmp_path / "lesmis.graphml")).node_names == list(g.nodes)


def test_a_file_of_one_column_is_read_by_position_whatever_its_header(tmp_path):
    """A labels file of class names headed "name" is no node table: one column, no key."""
    (tmp_path / "g.csv").write_text("0,1\n1,2\n2,0\n1,0\n")
    (tmp_path / "y.csv").write_text("name\ncat\ndog\ncat\n")
    ds = load_graph_file(str(tmp_path / "g.csv"), labels=str(tmp_path / "y.csv"))
    assert ds.y.tolist() == [0, 1, 0]


def test_pandas_index_column_keys_the_rows_of_a_graph_of_ids(tmp_path):
    """``DataFrame.to_csv`` writes the index first under an empty name. Read by position on
    a graph of integer ids, the index (the node ids) became one more feature column
    without a word; it keys the rows now, in any order."""
    (tmp_path / "g.csv").write_text("0,1\n1,2\n2,3\n3,0\n")
    rows = {2: (0.5, 7), 0: (1.5, 8), 3: (2.5, 9), 1: (3.5, 10)}
    (tmp_path / "x.csv").write_text(",a,b\n" + "".join(f"{n},{a},{b}\n"
                                                       for n, (a, b) in rows.items()))
    (tmp_path / "y.csv").write_text(",label\n3,1\n0,0\n")  # a Series: two nodes labelled
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has its reverse")
        ds = load_graph_file(str(tmp_path / "g.csv"), features=str(tmp_path / "x.csv"),
                             labels=str(tmp_path / "y.csv"))
    assert ds.x.tolist() == [list(rows[n]) for n in range(4)]
    assert ds.y.tolist() == [0, -1, -1, 1]


def _one_based_files(g) -> dict:
    """The undirected graph ``g`` (nodes 0 .. N-1) in each format that numbers vertices
    from 1, the vertex v + 1 being node v."""
    edges = sorted((min(u, v), max(u, v)) for u, v in g.edges)
    n, m = g.number_of_nodes(), len(edges)
    return {
        "g.mtx": f"%%MatrixMarket matrix coordinate pattern symmetric\n{n} {n} {m}\n" +
                 "".join(f"{v + 1} {u + 1}\n" for u, v in edges),
        "g.graph": f"{n} {m}\n" + "".join(" ".join(str(w + 1) for w in sorted(g[v])) + "\n"
                                          for v in range(n)),
        "g.gr": f"p sp {n} {m}\n" + "".join(f"e {u + 1} {v + 1}\n" for u, v in edges),
        "g.net": f"*Vertices {n}\n*Edges\n" + "".join(f"{u + 1} {v + 1}\n" for u, v in edges),
        "out.g": f"% sym unweighted\n% {m} {n} {n}\n" +
                 "".join(f"{u + 1} {v + 1}\n" for u, v in edges),
    }


@pytest.mark.parametrize("name", list(_one_based_files(nx.path_graph(2))))
def test_ids_key_a_one_based_graph_as_its_file_numbers_its_vertices(tmp_path, name):
    """METIS, DIMACS, Pajek, MatrixMarket and KONECT number vertices from 1 (vertex v is
    node v - 1). A file keyed by id was read against the 0-based rows: a label for vertex
    3 went to vertex 4 without a word. Keys are the graph file's own ids now, and 0 is
    refused by line."""
    g = nx.karate_club_graph()
    (tmp_path / name).write_text(_one_based_files(g)[name])
    club = [int(g.nodes[v]["club"] == "Officer") for v in g]
    order = np.random.default_rng(3).permutation(34)
    (tmp_path / "y.csv").write_text("id,club\n" + "".join(f"{v + 1},{club[v]}\n"
                                                           for v in order[:20]))
    (tmp_path / "x.csv").write_text("node,degree\n" + "".join(f"{v + 1},{g.degree(v)}\n"
                                                               for v in order))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load_graph_file(str(tmp_path / name), features=str(tmp_path / "x.csv"),
                             labels=str(tmp_path / "y.csv"))
    assert ds.y.tolist() == [club[v] if v in order[:20] else -1 for v in range(34)]
    assert ds.x.view(-1).tolist() == [g.degree(v) for v in range(34)]
    (tmp_path / "zero.csv").write_text("id,club\n1,0\n0,1\n")
    with pytest.raises(ValueError, match=r"zero.csv: line 3 is keyed by '0', which is not a "
                                         r"node of the graph \(its ids: 1 \.\. 34\)"):
        load_graph_file(str(tmp_path / name), labels=str(tmp_path / "zero.csv"))


def test_labels_keyed_by_pajek_vertex_name(tmp_path):
    (tmp_path / "g.net").write_text('*Vertices 3\n1 "New York"\n2 Boston\n3 "Los Angeles"\n'
                                    '*Edges\n1 2\n2 3\n')
    (tmp_path / "y.csv").write_text("Los Angeles,1\nNew York,0\nBoston,1\n")
    ds = load_graph_file(str(tmp_path / "g.net"), labels=str(tmp_path / "y.csv"))
    assert ds.y.tolist() == [0, 1, 1]
    assert ds.node_names == ["New York", "Boston", "Los Angeles"]


# Gephi's export of a graph of names: its edge table, and a node table of several columns
GEPHI_NODES = ("Id,Label,timeset,modularity_class\n"
               "dave,Dave,,1\nalice,Alice,,0\nerin,Erin,,2\ncarol,Carol,,1\nbob,Bob,,0\n")


@pytest.mark.parametrize("column, classes", [
    ("modularity_class", {"alice": 0, "bob": 0, "carol": 1, "dave": 1, "erin": 2}),
    ("MODULARITY_CLASS", {"alice": 0, "bob": 0, "carol": 1, "dave": 1, "erin": 2}),
    # class names, numbered in sorted order
    ("Label", {"alice": 0, "bob": 1, "carol": 2, "dave": 3, "erin": 4})])
def test_a_label_column_of_a_node_table_keyed_by_id(tmp_path, column, classes):
    """A node table of several columns was refused as a labels file; ``label_column``
    picks one, each row matched to its node by the table's Id column."""
    (tmp_path / "nodes.csv").write_text(GEPHI_NODES)
    (tmp_path / "people.csv").write_text(EDGES)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has its reverse")
        ds = load_graph_file(str(tmp_path / "people.csv"), labels=str(tmp_path / "nodes.csv"),
                             label_column=column)
    assert ds.y.tolist() == [classes[name] for name in ds.node_names]


def test_a_label_column_of_a_table_by_position(tmp_path):
    """A table whose first column is no node key is read a row per node, in node order."""
    (tmp_path / "g.csv").write_text("0,1\n1,2\n2,3\n3,0\n")
    (tmp_path / "y.tsv").write_text("score\tclass\n0.5\t2\n0.1\t\n0.7\t1\n0.2\t2\n")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has its reverse")
        ds = load_graph_file(str(tmp_path / "g.csv"), labels=str(tmp_path / "y.tsv"),
                             label_column="class")
        assert ds.y.tolist() == [2, -1, 1, 2]
        (tmp_path / "short.tsv").write_text("score\tclass\n0.5\t2\n")
        with pytest.raises(ValueError, match=r"short.tsv has 1 rows under its header, but "
                                             r"the graph has 4 nodes"):
            load_graph_file(str(tmp_path / "g.csv"), labels=str(tmp_path / "short.tsv"),
                            label_column="class")


@pytest.mark.parametrize("column, labels, text, match", [
    ("nope", "nodes.csv", GEPHI_NODES, r"nodes.csv: no column 'nope' \(label_column\) in its "
                                       r"header, line 1: \['Id', 'Label'"),
    ("Id", "nodes.csv", GEPHI_NODES, r"label_column 'Id' is the column that names each row's "
                                     r"node"),
    ("a", "nodes.csv", "a,b,a\n1,2,3\n", r"line 1 heads 2 columns 'a'"),
    ("c", "nodes.csv", "id,a,c\nalice,1,2\nbob,1\n", r"line 3 has 2 columns; the picked "
                                                     r"columns reach column 3"),
    ("c", "nodes.npy", None, r"label_column \['c'\] picks columns of a text table"),
    ("c", None, None, r"label_column 'c' names a node attribute, and a \.csv file has none"),
    ("", "nodes.csv", GEPHI_NODES, r"label_column must be a column's name, got ''"),
    ("c", "nodes.csv", "", r"nodes.csv has no lines"),
])
def test_bad_label_columns_are_refused_by_name(tmp_path, column, labels, text, match):
    (tmp_path / "people.csv").write_text(EDGES)
    if labels == "nodes.npy":
        np.save(tmp_path / labels, np.zeros(5))
    elif labels:
        (tmp_path / labels).write_text(text)
    with pytest.raises((ValueError, TypeError), match=match), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has its reverse")
        load_graph_file(str(tmp_path / "people.csv"), label_column=column,
                        labels=str(tmp_path / labels) if labels else None)


def test_feature_columns_of_a_node_table(tmp_path):
    """Gephi's node table holds a text Label column beside numeric ones: read whole as
    features it was refused ("not a finite number"); feature_columns picks the numeric
    ones, in the order asked, keyed by Id."""
    (tmp_path / "people.csv").write_text(EDGES)
    (tmp_path / "nodes.csv").write_text(
        "Id,Label,age,height\ndave,Dave,40,1.8\nalice,Alice,30,1.6\nerin,Erin,50,1.7\n"
        "carol,Carol,20,1.5\nbob,Bob,10,1.9\n")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has its reverse")
        ds = load_graph_file(str(tmp_path / "people.csv"), features=str(tmp_path / "nodes.csv"),
                             feature_columns=["height", "age"])
        table = {"alice": (1.6, 30), "bob": (1.9, 10), "carol": (1.5, 20), "dave": (1.8, 40),
                 "erin": (1.7, 50)}
        expected = np.array([table[n] for n in ds.node_names], dtype=np.float32)
        assert np.array_equal(ds.x.numpy(), expected)
        with pytest.raises(ValueError, match=r"line 2, column 2 holds 'Dave', not a finite"):
            load_graph_file(str(tmp_path / "people.csv"), features=str(tmp_path / "nodes.csv"),
                            feature_columns=["Label"])
        with pytest.raises(ValueError, match=r"no column 'weight' \(feature_columns\)"):
            load_graph_file(str(tmp_path / "people.csv"), features=str(tmp_path / "nodes.csv"),
                            feature_columns=["age", "weight"])
        for bad in ("age", [], ["age", "age"], [""]):
            with pytest.raises((TypeError, ValueError), match="feature_columns"):
                load_graph_file(str(tmp_path / "people.csv"),
                                features=str(tmp_path / "nodes.csv"), feature_columns=bad)


def test_ids_cannot_key_a_bipartite_konect_graph(tmp_path):
    """KONECT's "bip" files number their left and right vertices each from 1: the id 1 is
    two vertices. A file keyed by id was read against graphloc's node numbers without a
    word; it is refused, and a positional file (left vertices first) is read."""
    (tmp_path / "out.bip").write_text("% bip unweighted\n% 3 2 2\n1 1\n1 2\n2 2\n")
    (tmp_path / "y.csv").write_text("id,y\n1,0\n2,1\n")
    with pytest.raises(ValueError, match=r"y.csv is keyed by node ids, but the graph's file "
                                         r"numbers its two vertex sets apart"):
        load_graph_file(str(tmp_path / "out.bip"), labels=str(tmp_path / "y.csv"))
    (tmp_path / "rows.csv").write_text("0\n1\n1\n0\n")
    ds = load_graph_file(str(tmp_path / "out.bip"), labels=str(tmp_path / "rows.csv"))
    assert ds.y.tolist() == [0, 1, 1, 0]


def test_a_keyed_semicolon_table_with_decimal_commas_and_names_with_commas(tmp_path):
    """A node named "Smith, J." keeps its comma; its numbers' decimal commas are points."""
    (tmp_path / "g.csv").write_text("Smith, J.;Doe, A.\nDoe, A.;Roe, B.\nRoe, B.;Smith, J.\n")
    (tmp_path / "x.csv").write_text("id;a;b\nRoe, B.;0,5;-1,25e2\nSmith, J.;1;2,5\n"
                                    "Doe, A.;3,0;,5\n")
    ds = load_graph_file(str(tmp_path / "g.csv"), features=str(tmp_path / "x.csv"))
    assert ds.node_names == ["Smith, J.", "Doe, A.", "Roe, B."]
    assert ds.x.tolist() == [[1.0, 2.5], [3.0, 0.5], [0.5, -125.0]]


def test_a_keyed_header_naming_fewer_columns_than_the_rows_is_refused(tmp_path):
    """Every row "alice,0,5" under "id,score" (decimal commas in a comma table) was read as
    two features, 0 and 5, without a word."""
    (tmp_path / "x.csv").write_text("id,score\n" + "".join(
        f"{name},{i},{i + 5}\n" for i, name in enumerate(ORDER)))
    with pytest.raises(ValueError, match=r"x.csv: its header names 2 columns \['id', 'score'\], "
                                         r"but line 2 holds 3 fields"):
        _load(tmp_path, features=("x.csv", (tmp_path / "x.csv").read_text()))


def test_a_long_keyed_semicolon_table_is_sniffed_past_its_first_block(tmp_path):
    """The delimiter is sniffed from the first 4,096 characters, whose last line is cut
    short: a cut line without a semicolon made a semicolon table a comma one."""
    n = 400
    (tmp_path / "g.csv").write_text("".join(f"n{i:04d},n{(i + 1) % n:04d}\n" for i in range(n)))
    # 17 characters a line after a header of 13: the 4,096th character falls 3 characters
    # into a line, before its semicolon
    text = "id;aaaaaaaaa\n" + "".join(f"n{i:04d};{i:04d},50000\n" for i in range(n))
    assert ";" not in text[:4096].splitlines()[-1]
    (tmp_path / "x.csv").write_text(text)
    ds = load_graph_file(str(tmp_path / "g.csv"), features=str(tmp_path / "x.csv"))
    rows = [ds.node_names.index(f"n{i:04d}") for i in range(n)]
    assert ds.x[rows, 0].tolist() == [i + 0.5 for i in range(n)]


def test_ids_that_fit_both_counts_on_a_one_based_graph_are_said(tmp_path):
    """Labels keyed 1 .. 3 on a 4-vertex METIS graph fit its own numbers and ids from 0
    alike (one node apart): read as the file's, with a warning; one that reaches 4 is not
    ambiguous and reads quietly."""
    (tmp_path / "g.graph").write_text("4 3\n2\n1 3\n2 4\n3\n")
    (tmp_path / "y.csv").write_text("id,y\n1,0\n3,1\n")
    with pytest.warns(UserWarning, match=r"ids counted from 0 would fit as well"):
        ds = load_graph_file(str(tmp_path / "g.graph"), labels=str(tmp_path / "y.csv"))
    assert ds.y.tolist() == [0, -1, 1, -1]
    (tmp_path / "z.csv").write_text("id,y\n4,0\n3,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_graph_file(str(tmp_path / "g.graph"),
                               labels=str(tmp_path / "z.csv")).y.tolist() == [-1, -1, 1, 0]


def test_keyed_rows_that_read_as_comments_are_named(tmp_path):
    """A labels table keyed by names, one of which starts with '#': its row read as a
    comment, and the node lost its class silently (-1, unlabelled)."""
    (tmp_path / "g.csv").write_text("a,#b\n#b,c\nc,a\n")
    (tmp_path / "y.csv").write_text("id,label\na,0\n#b,1\nc,2\n")
    with pytest.warns(UserWarning, match=r"y.csv: 1 line\(s\) among the rows start with "
                                         r"'#' or '%' .* \(line 3\)"):
        ds = load_graph_file(str(tmp_path / "g.csv"), labels=str(tmp_path / "y.csv"))
    assert dict(zip(ds.node_names, ds.y.tolist(), strict=True)) == {"a": 0, "#b": -1, "c": 2}
