"""A user's graph files as NodeDatasets: edge lists, GraphML/GML, saved PyG Data."""

import warnings

import networkx as nx
import numpy as np
import pytest
import torch

from graphloc.datasets.files import default_features, load_graph_file


def test_edge_lists_with_ids_names_headers_and_delimiters(tmp_path):
    (tmp_path / "ints.tsv").write_text("0\t1\n1\t2\n# a comment\n2\t0\n")
    ds = load_graph_file(str(tmp_path / "ints.tsv"))
    assert ds.graph.edge_index.tolist() == [[0, 1, 2], [1, 2, 0]] and not ds.labelled
    (tmp_path / "names.csv").write_text("src,dst\nb,a\na,c\n")
    ds = load_graph_file(str(tmp_path / "names.csv"))  # numbered by first appearance
    assert ds.graph.edge_index.tolist() == [[0, 1], [1, 2]] and ds.num_nodes == 3
    (tmp_path / "spaces.txt").write_text("from to\n3 1\n")
    assert load_graph_file(str(tmp_path / "spaces.txt")).num_nodes == 4
    (tmp_path / "bad.csv").write_text("0,1\n2\n")
    with pytest.raises(ValueError, match="two columns .* line 2 has 1"):
        load_graph_file(str(tmp_path / "bad.csv"))


def test_edge_list_errors_name_the_files_own_line(tmp_path):
    """Comments, blank lines and the header are skipped, but the message counts them."""
    (tmp_path / "bad.csv").write_text("source,target\n# comment\n\n0,1\n2\n")
    with pytest.raises(ValueError, match=r"bad.csv.* line 5 has 1"):
        load_graph_file(str(tmp_path / "bad.csv"))


def test_extra_edge_list_columns_are_ignored_with_a_warning(tmp_path):
    """A weight column cannot be used (the datasets carry no edge attributes): the graph is
    its first two columns, and the warning names the file, the line and its width."""
    (tmp_path / "weighted.tsv").write_text("src\tdst\tweight\n0\t1\t0.5\n1\t2\t2.0\n")
    with pytest.warns(UserWarning, match=r"weighted.tsv: line 2 has 3 columns.*ignored"):
        ds = load_graph_file(str(tmp_path / "weighted.tsv"))
    assert ds.graph.edge_index.tolist() == [[0, 1], [1, 2]]
    # empty trailing fields: quiet (with a reverse edge, as the one-way files warn)
    (tmp_path / "trailing.csv").write_text("0,1,\n1,2,\n2,1,\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_graph_file(str(tmp_path / "trailing.csv")).num_nodes == 3


def test_integral_ids_written_as_floats_keep_their_value(tmp_path):
    """pandas writes an id column that held a NaN as "3.0": those ids are the integers,
    so that a label file indexed by id lines up, not names numbered by appearance (which
    made "3.0" node 0). Non-integral ids stay names."""
    (tmp_path / "floats.csv").write_text("source,target\n3.0,1.0\n1.0,0.0\n2.0,3e0\n")
    (tmp_path / "y.csv").write_text("0\n1\n2\n3\n")
    ds = load_graph_file(str(tmp_path / "floats.csv"), labels=str(tmp_path / "y.csv"))
    assert ds.graph.edge_index.tolist() == [[3, 1, 2], [1, 0, 3]]
    assert ds.y.tolist() == [0, 1, 2, 3]
    (tmp_path / "halves.csv").write_text("0.5,1.5\n1.5,2\n")
    with pytest.warns(UserWarning, match="line 1 has the node id '0.5', not an integer"):
        halves = load_graph_file(str(tmp_path / "halves.csv"))
    assert halves.graph.edge_index.tolist() == [[0, 1], [1, 2]]


def test_a_header_of_names_above_names_is_known_by_either_column(tmp_path):
    (tmp_path / "names.csv").write_text("origin,destination\nb,a\na,c\n")
    ds = load_graph_file(str(tmp_path / "names.csv"))
    assert ds.num_nodes == 3 and ds.graph.edge_index.tolist() == [[0, 1], [1, 2]]
    (tmp_path / "first.csv").write_text("alice,bob\nbob,carol\n")  # no header: kept
    assert load_graph_file(str(tmp_path / "first.csv")).graph.num_edges == 2


def test_default_features_are_one_and_log_degrees(tmp_path):
    (tmp_path / "e.csv").write_text("0,1\n0,2\n1,2\n")
    ds = load_graph_file(str(tmp_path / "e.csv"))
    expected = torch.tensor([[1, 0, np.log(3)], [1, np.log(2), np.log(2)],
                             [1, np.log(3), 0]], dtype=torch.float32)
    torch.testing.assert_close(ds.x, expected)
    torch.testing.assert_close(default_features(ds.graph), expected)


def test_feature_and_label_files_are_checked(tmp_path, blocks):
    (tmp_path / "e.csv").write_text("0,1\n1,2\n")
    np.save(tmp_path / "x.npy", np.ones((3, 4)))
    (tmp_path / "y.csv").write_text("label\n0\n1\n1\n")
    ds = load_graph_file(str(tmp_path / "e.csv"), str(tmp_path / "x.npy"),
                         str(tmp_path / "y.csv"))
    assert ds.x.shape == (3, 4) and ds.y.tolist() == [0, 1, 1] and ds.labelled
    np.save(tmp_path / "short.npy", np.ones((2, 4)))
    with pytest.raises(ValueError, match="short.npy has 2 rows of features but the graph has 3"):
        load_graph_file(str(tmp_path / "e.csv"), str(tmp_path / "short.npy"))
    (tmp_path / "frac.csv").write_text("0.5\n1\n1\n")
    with pytest.raises(ValueError, match="labels must be integer class ids"):
        load_graph_file(str(tmp_path / "e.csv"), labels=str(tmp_path / "frac.csv"))
    (tmp_path / "pairs.csv").write_text("label,node\n0,1\n1,0\n2,1\n")  # no node column
    with pytest.raises(ValueError, match=r"pairs.csv: a labels file holds one class id per "
                       r"line, in node order \(line i: node i\), or a one-hot row per node; "
                       r"it has 2 columns, and row 2 \(from 0\) is not one-hot \(values "
                       r"other than 0 and 1\)"):
        load_graph_file(str(tmp_path / "e.csv"), labels=str(tmp_path / "pairs.csv"))
    with pytest.raises(FileNotFoundError, match="no graph file at"):
        load_graph_file(str(tmp_path / "missing.csv"))


def test_graphml_gml_and_a_saved_pyg_data(tmp_path):
    from torch_geometric.data import Data
    g = nx.path_graph(5)
    for v in g.nodes:
        g.nodes[v]["y"] = "odd" if v % 2 else "even"  # "label" is GML's own key
    nx.write_gml(g, tmp_path / "p.gml")
    ds = load_graph_file(str(tmp_path / "p.gml"))
    assert ds.y.tolist() == [0, 1, 0, 1, 0] and ds.graph.num_edges == 8
    (tmp_path / "broken.graphml").write_text("<graphml><node")
    with pytest.raises(ValueError, match="broken.graphml is not a readable GraphML file"):
        load_graph_file(str(tmp_path / "broken.graphml"))
    ids = torch.arange(10)
    torch.save(Data(x=torch.randn(10, 2), edge_index=torch.tensor([[0, 1], [1, 2]]),
                    y=torch.arange(10) % 2, train_mask=ids < 4, val_mask=(ids >= 4) & (ids < 7),
                    test_mask=ids >= 7), tmp_path / "d.pt")
    ds = load_graph_file(str(tmp_path / "d.pt"))
    assert ds.train_index.tolist() == [0, 1, 2, 3] and ds.labelled  # its own masks
    torch.save({"not": "data"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="holds a dict, not a PyG Data"):
        load_graph_file(str(tmp_path / "other.pt"))


def test_a_gml_file_with_ids_out_of_order_numbers_node_i_as_row_i(tmp_path):
    """A features or labels file is read as "line i: node i"; a GML file listing the ids
    0..N-1 in another order made its rows follow the file's order, so line i described
    another node. Its own labels follow the same rows."""
    nodes = "".join(f"  node [ id {v} y {10 * v} ]\n" for v in (2, 0, 3, 1))
    edges = "".join(f"  edge [ source {u} target {v} ]\n" for u, v in ((2, 0), (0, 3), (3, 1)))
    (tmp_path / "shuffled.gml").write_text(f"graph [\n  directed 1\n{nodes}{edges}]\n")
    (tmp_path / "x.csv").write_text("0\n1\n2\n3\n")  # line i: node i's feature, i
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_graph_file(str(tmp_path / "shuffled.gml"), features=str(tmp_path / "x.csv"))
    assert sorted(map(tuple, ds.graph.edge_index.t().tolist())) == [(0, 3), (2, 0), (3, 1)]
    assert ds.x.view(-1).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert ds.y.tolist() == [0, 10, 20, 30]


def test_label_and_feature_files_override_a_saved_data_and_its_masks_stay(tmp_path):
    """--labels with a .pt that has masks used to be ignored (the Data's own y was kept)."""
    from torch_geometric.data import Data
    ids = torch.arange(5)
    torch.save(Data(x=torch.randn(5, 2), edge_index=torch.tensor([[0, 1], [1, 2]]),
                    y=torch.zeros(5, dtype=torch.long), train_mask=ids < 2, val_mask=ids == 2,
                    test_mask=ids > 2), tmp_path / "d.pt")
    (tmp_path / "y.csv").write_text("1\n0\n1\n2\n0\n")
    np.save(tmp_path / "x.npy", np.arange(15.0).reshape(5, 3))
    ds = load_graph_file(str(tmp_path / "d.pt"), str(tmp_path / "x.npy"),
                         str(tmp_path / "y.csv"))
    assert ds.y.tolist() == [1, 0, 1, 2, 0]
    assert torch.equal(ds.x, torch.arange(15.0).view(5, 3))
    assert ds.train_index.tolist() == [0, 1] and ds.val_index.tolist() == [2]


def test_fractional_node_labels_in_graphml_are_refused(tmp_path):
    g = nx.path_graph(3)
    for v, label in zip(g.nodes, (0.0, 2.7, 1.0), strict=True):
        g.nodes[v]["y"] = label
    nx.write_graphml(g, tmp_path / "frac.graphml")
    with pytest.raises(ValueError, match=r"frac.graphml \(node attribute 'y'\): y must hold "
                                         "whole numbers .* entry 1 is 2.7"):
        load_graph_file(str(tmp_path / "frac.graphml"))
    g.nodes[1]["y"] = 2.0  # whole floats are class ids
    nx.write_graphml(g, tmp_path / "whole.graphml")
    assert load_graph_file(str(tmp_path / "whole.graphml")).y.tolist() == [0, 2, 1]


def test_a_street_graphmls_coordinates_are_not_classes(tmp_path):
    g = nx.MultiDiGraph(nx.path_graph(4))  # as osmnx saves one: x, y in degrees
    for v in g.nodes:
        g.nodes[v].update(x=24.9 + 0.001 * v, y=60.17 + 0.0005 * v, street_count=2)
    nx.write_graphml(g, tmp_path / "streets.graphml")
    with pytest.warns(UserWarning, match="'x' and 'y' are coordinates .* not read as "
                                         "classes") as record:
        data = load_graph_file(str(tmp_path / "streets.graphml"))
    assert not data.labelled and data.graph.num_nodes == 4
    assert [w.filename for w in record if "coordinates" in str(w.message)] == [__file__]
    # whole-number y beside a numeric x stays the classes; so does y without x
    for v in g.nodes:
        g.nodes[v]["y"] = v % 2
    nx.write_graphml(g, tmp_path / "classes.graphml")
    assert load_graph_file(str(tmp_path / "classes.graphml")).y.tolist() == [0, 1, 0, 1]


def test_edge_list_missing_ids_are_errors_naming_the_line(tmp_path):
    """An empty field, "nan" or "None" where a node id belongs is refused: read as a name it
    was one node that every incomplete line pointed at, and it turned the file's integer
    ids into names numbered by appearance (a label file indexed by id then misaligned)."""
    for text, line, side, token in (("src,dst\n0,1\n2,nan\n", 3, "destination", "nan"),
                                     ("0,1\n,2\n", 2, "source", ""),
                                     ("a\tb\nNone\tc\n", 2, "source", "None")):
        (tmp_path / "missing.csv").write_text(text)
        with pytest.raises(ValueError, match=rf"missing.csv: line {line} has no {side} node "
                                             rf"id \('{token}'\)"):
            load_graph_file(str(tmp_path / "missing.csv"))


def test_edge_list_ids_too_large_for_node_numbers_are_errors(tmp_path):
    """Integer ids are node numbers, so an id of 10^12 asked for a graph of 10^12 nodes
    and failed in the allocator without naming the file; now the line is named."""
    (tmp_path / "osm.txt").write_text("0 1\n1 1000000000000\n")
    with pytest.raises(ValueError, match=r"osm.txt: line 2 has the node id 1000000000000: "
                                         r"node ids are node numbers, so a graph of "
                                         r"1,000,000,000,001 nodes \(3 of them in edges\).* "
                                         r"renumber"):
        load_graph_file(str(tmp_path / "osm.txt"))
    (tmp_path / "negative.txt").write_text("0 1\n\n-3 1\n")
    with pytest.raises(ValueError, match=r"negative.txt: line 3 has the node id -3: node ids "
                                         r"must be >= 0"):
        load_graph_file(str(tmp_path / "negative.txt"))


@pytest.mark.parametrize("name, text, what", [
    ("ids.txt", "0 1\n1 {big}\n", r"line 2 has the node id {big}: node ids are node numbers, "
                                   r"so a graph of {nodes} nodes \(3 of them in edges\)"),
    ("ids.csv", "a,b\n0,1\n1,{big}\n", r"line 3 has the node id {big}"),  # the general path
    ("out.ids", "% sym unweighted\n1 2\n2 {big}\n", r"line 3 has the node id {big}"),
    ("ids.graph", "{big} 1\n", r"the header's {nodes} vertices are more than a graph can "
                                r"have here"),
    ("ids.gr", "p sp {big} 1\na 1 2\n", r"the problem line's {nodes} vertices"),
    ("ids.net", "*Vertices {big}\n", r"'\*Vertices N' needs the vertex count \(at most "
                                      r"9,586,980: "),
])
def test_a_node_count_past_the_machines_memory_is_named_before_it_is_allocated(
        tmp_path, monkeypatch, name, text, what):
    """Ids are node numbers and headers declare counts, so a sparse numbering (hashed user
    ids, ids kept from a larger graph) asked for a graph of that many nodes: an edge list
    of 4 edges with the id 10^9 had the process killed for its memory (24 GiB here), without
    a word. With 1 GiB of memory, 9,586,980 nodes at 112 bytes a node are the most."""
    from graphloc.datasets import readers
    monkeypatch.setattr(readers, "physical_memory_bytes", lambda: 2**30)
    big = 10_000_000
    (tmp_path / name).write_text(text.format(big=big))
    nodes = f"{big:,}" if name.endswith((".graph", ".gr")) else f"{big + 1:,}"
    with pytest.raises(ValueError, match=what.format(big=big, nodes=nodes) +
                       r".*112 bytes a node, and this machine has 1 GiB of memory"):
        load_graph_file(str(tmp_path / name))


def _write_mtx(path, n):
    path.write_text(f"%%MatrixMarket matrix coordinate pattern general\n{n} {n} 1\n1 2\n")


def _write_npz(path, n):
    import numpy as np
    np.savez(path, edge_index=np.array([[0], [1]]), num_nodes=np.array(n))


def _write_scipy_npz(path, n):
    import scipy.sparse as sp
    sp.save_npz(path, sp.coo_matrix(([1.0], ([0], [1])), shape=(n, n)).tocsr())


def _write_pt(path, n):
    from torch_geometric.data import Data
    torch.save(Data(edge_index=torch.tensor([[0], [1]]), num_nodes=n), path)


@pytest.mark.parametrize("name, write, whose", [
    ("big.mtx", _write_mtx, "the matrix's"), ("big.npz", _write_npz, "its 'num_nodes' of"),
    ("adjacency.npz", _write_scipy_npz, "the adjacency's"), ("big.pt", _write_pt, "its Data's"),
])
def test_a_declared_node_count_past_the_machines_memory_is_named(tmp_path, monkeypatch, name,
                                                                 write, whose):
    """A matrix's size, an archive's num_nodes and a saved Data's num_nodes of 10^7 with one
    edge (10^9 had the process killed at 24 GiB), with 1 GiB of memory."""
    from graphloc.datasets import readers
    monkeypatch.setattr(readers, "physical_memory_bytes", lambda: 2**30)
    write(tmp_path / name, 10_000_000)
    with pytest.raises(ValueError, match=f"{name}: {whose} 10,000,000 vertices are more than "
                       r"a graph can have here \(a dataset needs about 112 bytes a node"):
        load_graph_file(str(tmp_path / name))


def test_the_largest_id_that_fits_the_memory_is_read(tmp_path, monkeypatch):
    """256 MiB at 112 bytes a node: ids up to 2,396,744 (its unused ids warned of), not
    one more."""
    from graphloc.datasets import readers
    monkeypatch.setattr(readers, "physical_memory_bytes", lambda: 2**28)
    for largest in (2_396_744, 2_396_745):
        (tmp_path / "ids.txt").write_text(f"0 1\n1 {largest}\n")
        if largest == 2_396_745:
            with pytest.raises(ValueError, match="a graph of 2,396,746 nodes"):
                load_graph_file(str(tmp_path / "ids.txt"))
            continue
        with pytest.warns(UserWarning, match="ids are in no edge"):
            assert load_graph_file(str(tmp_path / "ids.txt")).num_nodes == largest + 1


def test_edge_list_of_mixed_ids_warns_that_all_are_names(tmp_path):
    """One non-integer id makes every id a name, numbered by appearance: the warning says
    which id did it, and the graph is the names' (here 7 is node 0, 3 node 1, x node 2)."""
    (tmp_path / "mixed.csv").write_text("7,3\n3,x\n")
    with pytest.warns(UserWarning, match=r"mixed.csv: line 2 has the node id 'x', not an "
                                         r"integer"):
        ds = load_graph_file(str(tmp_path / "mixed.csv"))
    assert ds.graph.edge_index.tolist() == [[0, 1], [1, 2]]


def test_binary_files_are_not_edge_lists(tmp_path):
    (tmp_path / "graph.txt").write_bytes(b"\xff\xfe\x00\x01 2\n")
    with pytest.raises(ValueError, match=r"graph.txt: not a text edge list \(UnicodeDecode"):
        load_graph_file(str(tmp_path / "graph.txt"))


def test_a_labels_file_with_unlabelled_nodes_splits_the_labelled_ones(tmp_path):
    """-1 in a labels file marks a node without a label: the default split (City-Networks'
    RandomState(0) permutation, tenths) is drawn over the labelled nodes only, so that
    training runs (the split over all nodes put unlabelled nodes in it)."""
    edges = "\n".join(f"{i} {(i + 1) % 50}" for i in range(50))
    (tmp_path / "ring.txt").write_text(edges + "\n")
    labels = [i % 3 if i % 5 else -1 for i in range(50)]
    (tmp_path / "y.csv").write_text("\n".join(map(str, labels)) + "\n")
    ds = load_graph_file(str(tmp_path / "ring.txt"), labels=str(tmp_path / "y.csv"))
    labelled = [i for i, label in enumerate(labels) if label >= 0]
    perm = np.random.RandomState(0).permutation(len(labelled))
    expected = [labelled[j] for j in perm]
    tenth = len(labelled) // 10
    assert ds.train_index.tolist() == expected[:tenth]
    assert ds.val_index.tolist() == expected[tenth:2 * tenth]
    assert ds.test_index.tolist() == expected[2 * tenth:]
    assert ds.num_classes == 3 and ds.labelled


def test_percent_comment_lines_are_comments(tmp_path):
    """Files with "%" comment lines (MatrixMarket-style notes) were read as edges between
    nodes named "%" and the words, renumbering every id by appearance."""
    path = tmp_path / "edges.tsv"
    path.write_text("% exported by hand\n% nodes 0 .. 4\n1\t2\n2\t3\n3\t4\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = load_graph_file(str(path), undirected=False).graph
    assert graph.num_nodes == 5 and graph.edge_index.tolist() == [[1, 2, 3], [2, 3, 4]]
    # no "ids read as names" warning; integer ids are node numbers, so node 0 is in no edge
    assert [str(w.message).split(": ", 1)[1] for w in caught] == [
        "node ids are node numbers 0 .. 4, and 1 of those ids are in no edge (the first: 0); "
        "they are isolated nodes of the graph, counted in averages over nodes. A 1-based or "
        "sparse numbering: renumber the ids 0 .. N-1"]


def test_konect_vertices_count_from_one_and_the_size_line_counts_them(tmp_path):
    """KONECT numbers vertices from 1 (its handbook): vertex v is node v - 1, and the size
    line's count keeps isolated vertices. Read as 0-based ids, every KONECT graph gained an
    isolated node 0, counted in each average over nodes."""
    path = tmp_path / "out.konect"
    path.write_text("% asym unweighted\n% 3 5 5\n1\t2\n2\t3\n3\t4\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = load_graph_file(str(path)).graph
    assert graph.num_nodes == 5 and graph.edge_index.tolist() == [[0, 1, 2], [1, 2, 3]]
    assert caught == []  # node 4 is KONECT's isolated vertex 5, as its size line says
    path.write_text("% asym unweighted\n1 2\n0 1\n")
    with pytest.raises(ValueError, match=r"line 3 has the vertex id 0.*from 1"):
        load_graph_file(str(path))
    path.write_text("% sym unweighted\n1 2\nx 1\n")
    with pytest.raises(ValueError, match=r"numbers its vertices from 1, but line 3 has 'x'"):
        load_graph_file(str(path))


def test_konect_bipartite_files_number_each_side_from_one(tmp_path):
    """A KONECT "bip" file numbers its left and right vertices separately: left 1 and right
    1 are two vertices, joined by the edge "1 1". Read in one numbering they were one node
    (with a loop), merging unrelated vertices without a word; and its edges, which KONECT
    takes as undirected, were one-way. Checked against networkx's bipartite graph."""
    import networkx as nx
    edges = [(1, 1), (1, 3), (2, 1), (4, 2)]  # (left, right)
    path = tmp_path / "out.bip"
    path.write_text("% bip unweighted\n% 4 4 3\n" + "".join(f"{u} {v}\n" for u, v in edges))
    graph = load_graph_file(str(path)).graph
    truth = nx.Graph()
    truth.add_nodes_from(range(7))
    truth.add_edges_from((u - 1, 4 + v - 1) for u, v in edges)  # 4 left vertices first
    assert graph.num_nodes == 7
    assert _edge_set(graph) == sorted(truth.to_directed().edges)


@pytest.mark.parametrize("given", [None, "features", "labels"])
def test_ids_that_no_edge_names_are_counted_and_said(tmp_path, given):
    """Integer ids are node numbers: a sparse numbering made an isolated node of every
    unused id below the largest, each counted in an influence R or a split, without a word.
    Said now, unless features or labels in id order make them the user's own nodes."""
    path = tmp_path / "sparse.txt"
    path.write_text("0 10\n10 20\n20 0\n")
    files = {}
    if given:
        files[given] = str(tmp_path / "rows.txt")
        (tmp_path / "rows.txt").write_text("".join(f"{i % 2}\n" for i in range(21)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = load_graph_file(str(path), **files)
    assert dataset.num_nodes == 21
    unused = [w for w in caught if "in no edge" in str(w.message)]
    if given:
        assert unused == []
        return
    assert len(unused) == 1 and unused[0].filename == __file__
    assert "18 of those ids are in no edge (the first: 1)" in str(unused[0].message)


def test_matrix_market_adjacency(tmp_path):
    """.mtx: entry (i, j) is the edge i -> j, 1-based in the file; a symmetric file gives
    both directions. Read as an edge list before, the size line was an edge."""
    import scipy.io
    import scipy.sparse as sp
    a = sp.coo_matrix((np.ones(3), ([0, 1, 3], [1, 2, 0])), shape=(5, 5))
    scipy.io.mmwrite(str(tmp_path / "g.mtx"), a)
    scipy.io.mmwrite(str(tmp_path / "s.mtx"), (a + a.T).tocoo(), symmetry="symmetric")
    graph = load_graph_file(str(tmp_path / "g.mtx")).graph
    assert graph.num_nodes == 5
    assert sorted(map(tuple, graph.edge_index.t().tolist())) == [(0, 1), (1, 2), (3, 0)]
    both = load_graph_file(str(tmp_path / "s.mtx")).graph
    assert sorted(map(tuple, both.edge_index.t().tolist())) == sorted(
        [(0, 1), (1, 0), (1, 2), (2, 1), (3, 0), (0, 3)])
    (tmp_path / "bad.mtx").write_text("not a matrix\n")
    with pytest.raises(ValueError, match="bad.mtx: not a MatrixMarket file"):
        load_graph_file(str(tmp_path / "bad.mtx"))
    scipy.io.mmwrite(str(tmp_path / "wide.mtx"), sp.coo_matrix(np.ones((2, 3))))
    with pytest.raises(ValueError, match="the adjacency must be square, got 2 x 3"):
        load_graph_file(str(tmp_path / "wide.mtx"))


def test_matrix_market_weights_left_out_are_named(tmp_path):
    """A weighted .mtx lost its entries' values without a word; a pattern or 0/1 file
    stays quiet."""
    import scipy.io
    import scipy.sparse as sp
    weighted = sp.coo_matrix((np.array([0.5, 2.0]), ([0, 1], [1, 2])), shape=(3, 3))
    scipy.io.mmwrite(str(tmp_path / "w.mtx"), weighted)
    with pytest.warns(UserWarning, match=r"w.mtx: the entries' values \(edge weights\) are "
                                         r"not read") as record:
        graph = load_graph_file(str(tmp_path / "w.mtx")).graph
    assert record[0].filename == __file__
    assert graph.edge_index.tolist() == [[0, 1], [1, 2]]
    (tmp_path / "p.mtx").write_text("%%MatrixMarket matrix coordinate pattern general\n"
                                    "3 3 2\n1 2\n2 3\n")
    scipy.io.mmwrite(str(tmp_path / "ones.mtx"), sp.coo_matrix(
        (np.ones(2), ([0, 1], [1, 2])), shape=(3, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("p.mtx", "ones.mtx"):  # directed as written: no one-way warning
            assert load_graph_file(str(tmp_path / name), undirected=False).graph.num_edges == 2


def test_a_saved_data_with_a_sparse_adjacency_instead_of_edge_index(tmp_path):
    """PyG's ToSparseTensor stores adj_t (entry (i, j): the edge j -> i) and drops
    edge_index; such a file raised "edge_index must be a torch.Tensor, got NoneType"."""
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    edge_index = torch.tensor([[0, 1, 3, 3], [1, 2, 0, 2]])
    data = Data(x=torch.randn(5, 2), edge_index=edge_index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "sparse CSR is in beta"
        torch.save(T.ToSparseTensor(layout=torch.sparse_csr)(data.clone()), tmp_path / "t.pt")
    torch.save(Data(x=torch.randn(5, 2), adj=torch.sparse_coo_tensor(
        edge_index, torch.ones(4), (5, 5))), tmp_path / "a.pt")
    for name in ("t.pt", "a.pt"):
        graph = load_graph_file(str(tmp_path / name)).graph
        assert graph.num_nodes == 5
        assert sorted(map(tuple, graph.edge_index.t().tolist())) == \
            sorted(map(tuple, edge_index.t().tolist()))
    torch.save(Data(x=torch.randn(3, 2)), tmp_path / "none.pt")
    with pytest.raises(ValueError, match="none.pt holds a Data without edges"):
        load_graph_file(str(tmp_path / "none.pt"))


def test_a_byte_order_mark_keeps_the_first_edge_and_row(tmp_path):
    """Spreadsheets save UTF-8 with a byte-order mark; glued to the first id it made the
    first edge look like a header, which was dropped."""
    edges, x, y = tmp_path / "e.csv", tmp_path / "x.csv", tmp_path / "y.csv"
    bom = "\ufeff"
    edges.write_text(bom + "0,1\n1,2\n2,3\n", encoding="utf-8")
    x.write_text(bom + "0.5,1\n1,2\n0,0\n1,1\n", encoding="utf-8")
    y.write_text(bom + "2\n1\n0\n1\n", encoding="utf-8")
    data = load_graph_file(str(edges), features=str(x), labels=str(y))
    assert data.graph.edge_index.tolist() == [[0, 1, 2], [1, 2, 3]]
    assert data.x.tolist() == [[0.5, 1.0], [1.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
    assert data.y.tolist() == [2, 1, 0, 1]
    edges.write_text(bom + "source,target\n0,1\n1,2\n", encoding="utf-8")
    assert load_graph_file(str(edges)).graph.edge_index.tolist() == [[0, 1], [1, 2]]


def test_semicolon_separated_edge_lists(tmp_path):
    """What spreadsheets write where the decimal separator is a comma."""
    path = tmp_path / "e.csv"
    path.write_text("source;target\na;b\nb;c\n")
    assert load_graph_file(str(path)).graph.edge_index.tolist() == [[0, 1], [1, 2]]


def test_graphml_attributes_left_out_are_named(tmp_path):
    g = nx.Graph()
    g.add_edge(0, 1, weight=2.5, length=10.0)
    g.add_edge(1, 2, weight=1.0)
    g.nodes[0]["population"] = 3
    g.nodes[1]["label"] = "a"
    nx.write_graphml(g, tmp_path / "w.graphml")
    with pytest.warns(UserWarning, match=r"edge attributes \['length', 'weight'\] and node "
                                         r"attributes \['population'\] are not read"):
        ds = load_graph_file(str(tmp_path / "w.graphml"))
    assert ds.graph.num_edges == 4
    nx.write_graphml(nx.path_graph(3), tmp_path / "plain.graphml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_graph_file(str(tmp_path / "plain.graphml"))


def test_saved_data_attributes_left_out_are_named(tmp_path):
    """A PyG Data's edge weights were dropped without a word, and an incomplete split's
    masks (the default split is used then). Its positions and edge features are kept, as
    NodeDataset.from_pyg keeps them."""
    from torch_geometric.data import Data
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    torch.save(Data(x=torch.randn(4, 2), edge_index=edge_index, y=torch.tensor([0, 1, 0, 1]),
                    edge_weight=torch.rand(3), edge_attr=torch.randn(3, 2),
                    pos=torch.randn(4, 2), train_mask=torch.ones(4, dtype=torch.bool)),
               tmp_path / "w.pt")
    with pytest.warns(UserWarning, match=r"w.pt: Data attributes \['edge_weight', "
                                         r"'train_mask'\] are not read"):
        ds = load_graph_file(str(tmp_path / "w.pt"))
    saved = torch.load(tmp_path / "w.pt", weights_only=False)
    assert ds.graph.edge_index.tolist() == edge_index.tolist()
    assert torch.equal(ds.edge_attr, saved.edge_attr) and torch.equal(ds.pos, saved.pos)
    ids = torch.arange(4)
    torch.save(Data(x=torch.randn(4, 2), edge_index=edge_index, y=ids % 2, num_nodes=4,
                    train_mask=ids < 2, val_mask=ids == 2, test_mask=ids == 3),
               tmp_path / "plain.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_graph_file(str(tmp_path / "plain.pt"))


def test_the_delimiter_is_read_from_the_edges_not_the_comments(tmp_path):
    path = tmp_path / "snap.txt"
    path.write_text("# Citations, 1993-2003; from arXiv\n% another, comment\n0 1\n1 2\n")
    assert load_graph_file(str(path)).graph.edge_index.tolist() == [[0, 1], [1, 2]]


def test_tab_separated_lines_mixed_with_space_separated_ones(tmp_path):
    """A line without a tab in a tab-separated file was one field: as the first line a
    header (its edge dropped without a word), elsewhere an error."""
    path = tmp_path / "mixed.txt"
    path.write_text("0  1\n1\t2\n 2 3\n3 \t0\n")
    assert load_graph_file(str(path)).graph.edge_index.tolist() == [[0, 1, 2, 3], [1, 2, 3, 0]]
    path.write_text("source target\n0\t1\n1\t2\n")
    assert load_graph_file(str(path)).graph.edge_index.tolist() == [[0, 1], [1, 2]]
    # names holding spaces: a line without a tab is one name, not an edge
    path.write_text("0\tNew York\nNew York\tBoston\nBoston 0\n")
    with pytest.raises(ValueError, match="line 3 has 1"):
        load_graph_file(str(path))


class _MakesADirectory:
    """A pickled object that runs os.mkdir when unpickled: what a .pt from elsewhere can do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import os
        return os.mkdir, (self.path,)


@pytest.mark.parametrize("zipped", [True, False], ids=["zip format", "legacy format"])
def test_a_torch_file_that_names_other_code_is_refused_before_it_runs(tmp_path, zipped):
    """Every .pt was unpickled with weights_only=False, so a file the command line was
    pointed at could run any function it named. Now only tensors, containers and PyG's
    data classes load; the payload does not run, and the error names what it asked for."""
    from torch_geometric.data import Data
    target = tmp_path / "made_by_the_file"
    payload = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), note=_MakesADirectory(str(target)))
    torch.save(payload, tmp_path / "bad.pt", _use_new_zipfile_serialization=zipped)
    with pytest.raises(ValueError, match=r"bad.pt names (posix|nt).mkdir, which graphloc "
                                         r"does not unpickle.*NodeDataset.from_pyg"):
        load_graph_file(str(tmp_path / "bad.pt"))
    assert not target.exists()
    torch.save({"edge_index": _MakesADirectory(str(target))}, tmp_path / "dict.pt",
               _use_new_zipfile_serialization=zipped)
    with pytest.raises(ValueError, match=r"(posix|nt).mkdir"):
        load_graph_file(str(tmp_path / "dict.pt"))
    assert not target.exists()


@pytest.mark.parametrize("zipped", [True, False], ids=["zip format", "legacy format"])
def test_saved_pyg_data_of_every_kind_still_loads(tmp_path, zipped):
    """The restricted unpickler finds what PyG's own files name: a Data with tensors,
    strings and numbers, an InMemoryDataset's (data, slices) pair, and ToSparseTensor's
    CSR layout (whose defaultdict torch's weights_only=True refuses)."""
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    from torch_geometric.datasets import FakeDataset
    edge_index = torch.tensor([[0, 1, 3, 3], [1, 2, 0, 2]])
    x = torch.randn(5, 2)
    data = Data(x=x, edge_index=edge_index, y=torch.tensor([0, 1, 0, 1, 1]), name="five",
                scale=2.5, sizes=[1, 2], flags={"a": True})
    torch.save(data, tmp_path / "d.pt", _use_new_zipfile_serialization=zipped)
    ds = load_graph_file(str(tmp_path / "d.pt"))
    assert torch.equal(ds.x, x) and torch.equal(ds.graph.edge_index, edge_index)
    pair = FakeDataset(num_graphs=1, avg_num_nodes=12, num_channels=3)
    torch.save((pair._data, pair.slices), tmp_path / "pair.pt",
               _use_new_zipfile_serialization=zipped)
    assert load_graph_file(str(tmp_path / "pair.pt")).graph.num_nodes == pair._data.num_nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "sparse CSR is in beta"
        torch.save(T.ToSparseTensor(layout=torch.sparse_csr)(data.clone()), tmp_path / "t.pt",
                   _use_new_zipfile_serialization=zipped)
    graph = load_graph_file(str(tmp_path / "t.pt")).graph
    assert sorted(map(tuple, graph.edge_index.t().tolist())) == \
        sorted(map(tuple, edge_index.t().tolist()))


def test_torch_files_under_torch_s_forced_weights_only_mode(tmp_path, monkeypatch):
    """TORCH_FORCE_WEIGHTS_ONLY_LOAD makes torch.load refuse graphloc's own pickle module
    ("Can not safely load weights when explicit pickle_module is specified", reported as an
    unreadable file): then torch's weights-only unpickler reads the file, PyG's data
    classes allowed, and a payload is still refused without running."""
    from torch_geometric.data import Data
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    x, edge_index = torch.randn(3, 2), torch.tensor([[0, 1], [1, 2]])
    torch.save(Data(x=x, edge_index=edge_index), tmp_path / "d.pt")
    ds = load_graph_file(str(tmp_path / "d.pt"))
    assert torch.equal(ds.x, x) and torch.equal(ds.graph.edge_index, edge_index)
    target = tmp_path / "made_by_the_file"
    torch.save(Data(edge_index=edge_index, note=_MakesADirectory(str(target))),
               tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=r"(?s)bad.pt is not a readable torch file.*mkdir"):
        load_graph_file(str(tmp_path / "bad.pt"))
    assert not target.exists()


@pytest.mark.parametrize("zipped", [True, False], ids=["zip format", "legacy format"])
def test_a_truncated_or_empty_torch_file_is_named_as_unreadable(tmp_path, zipped):
    """Through the restricted unpickler too, a damaged file is a ValueError naming it."""
    from torch_geometric.data import Data
    torch.save(Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]])),
               tmp_path / "full.pt", _use_new_zipfile_serialization=zipped)
    whole = (tmp_path / "full.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "empty.pt").write_bytes(b"")
    for name in ("cut.pt", "empty.pt"):
        with pytest.raises(ValueError, match=rf"{name} is not a readable torch file"):
            load_graph_file(str(tmp_path / name))


def test_the_values_of_a_saved_sparse_adjacency_are_kept(tmp_path):
    """ToSparseTensor moves edge_weight (or edge_attr) into adj_t's values; they were
    dropped on loading without a word. Rows of several values come back as edge_attr (kept,
    in the loaded graph's edge order), one value per edge as edge_weight (which a NodeDataset
    names as left out), each repeated entry of the matrix as one edge."""
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    edge_index = torch.tensor([[0, 1, 3, 3], [1, 2, 0, 2]])
    attr = torch.rand(4, 3)
    data = Data(x=torch.randn(5, 2), edge_index=edge_index, edge_attr=attr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "sparse CSR is in beta"
        torch.save(T.ToSparseTensor(attr="edge_attr", layout=torch.sparse_csr)(data.clone()),
                   tmp_path / "attr.pt")
    loaded = load_graph_file(str(tmp_path / "attr.pt"))
    by_edge = dict(zip(map(tuple, edge_index.t().tolist()), attr, strict=True))
    got = loaded.graph.edge_index.t().tolist()
    assert sorted(map(tuple, got)) == sorted(by_edge)
    torch.testing.assert_close(loaded.edge_attr, torch.stack([by_edge[tuple(e)] for e in got]))

    repeated = torch.sparse_coo_tensor(torch.tensor([[1, 1, 2], [0, 0, 1]]),
                                       torch.tensor([0.5, 0.25, 2.0]), (3, 3))
    torch.save(Data(x=torch.randn(3, 2), adj_t=repeated), tmp_path / "w.pt")
    with pytest.warns(UserWarning, match="edge_weight"):
        loaded = load_graph_file(str(tmp_path / "w.pt"))
    assert loaded.graph.edge_index.tolist() == [[0, 1], [1, 2]]


def test_graphml_integer_ids_number_the_rows_as_gml_ids_do(tmp_path):
    """networkx writes an integer-labelled graph's ids as "0", "1", ... in its node order
    (the order of first appearance, for a graph read from an edge list); the ids were
    numbered in file order, so line i of a features file went to another node than i."""
    import networkx as nx
    g = nx.DiGraph([(2, 0), (0, 1), (1, 3), (3, 2)])  # nodes listed 2, 0, 1, 3
    g.nodes[2]["y"] = 1
    for v in (0, 1, 3):
        g.nodes[v]["y"] = 0
    nx.write_graphml(g, tmp_path / "g.graphml")
    nx.write_gml(g, tmp_path / "g.gml")
    features = tmp_path / "x.csv"
    features.write_text("".join(f"{v},{10 * v}\n" for v in range(4)))  # line v: node v
    for name in ("g.graphml", "g.gml"):
        data = load_graph_file(str(tmp_path / name), features=str(features))
        assert sorted(map(tuple, data.graph.edge_index.t().tolist())) == sorted(g.edges)
        assert data.x[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert data.y.tolist() == [0, 0, 1, 0]


def test_a_gml_label_is_the_node_name_not_a_class(tmp_path):
    """networkx writes every GML node's name as its ``label`` (GML's own field): the karate
    club read as 34 classes, one per node, and trained on them."""
    g = nx.karate_club_graph()
    nx.write_gml(g, tmp_path / "k.gml")
    with pytest.warns(UserWarning, match=r"node attributes \['club'\] are not read"):
        assert not load_graph_file(str(tmp_path / "k.gml")).labelled
    for v in g.nodes:
        g.nodes[v]["y"] = g.nodes[v]["club"]
    nx.write_gml(g, tmp_path / "ky.gml")
    data = load_graph_file(str(tmp_path / "ky.gml"))
    clubs = sorted({g.nodes[v]["club"] for v in g})
    assert data.y.tolist() == [clubs.index(g.nodes[v]["club"]) for v in range(34)]


def test_graphml_labels_that_name_each_node_are_names(tmp_path):
    g = nx.path_graph(4)
    for v in g.nodes:
        g.nodes[v]["label"] = f"station {v}"
    nx.write_graphml(g, tmp_path / "names.graphml")
    with pytest.warns(UserWarning, match="'label' differs on every node that has one"):
        assert not load_graph_file(str(tmp_path / "names.graphml")).labelled
    g.nodes[3]["label"] = "station 0"  # two nodes share a class: classes
    nx.write_graphml(g, tmp_path / "classes.graphml")
    assert load_graph_file(str(tmp_path / "classes.graphml")).y.tolist() == [0, 1, 2, 0]


def test_a_class_attribute_on_some_nodes_marks_the_others_unlabelled(tmp_path):
    """A y on some nodes only was dropped whole (the graph read as unlabelled)."""
    g = nx.path_graph(5)
    g.nodes[0]["y"], g.nodes[3]["y"], g.nodes[4]["y"] = 2, 0, 2
    nx.write_graphml(g, tmp_path / "some.graphml")
    nx.write_gml(g, tmp_path / "some.gml")
    for name in ("some.graphml", "some.gml"):
        data = load_graph_file(str(tmp_path / name))
        assert data.labelled and data.y.tolist() == [2, -1, -1, 0, 2]


def test_gml_nodes_take_their_labels_as_names_where_each_has_its_own(tmp_path):
    """networkx numbers GML ids in its node order and writes each node's name as the label,
    so an integer-named graph came back with its rows in file order, not by name. A label
    shared by nodes names none of them: the ids stay, and the label is named as unread."""
    g = nx.DiGraph([(2, 0), (0, 1), (1, 3), (3, 2)])  # nodes listed 2, 0, 1, 3
    nx.write_gml(g, tmp_path / "g.gml")
    (tmp_path / "x.csv").write_text("0\n1\n2\n3\n")  # line v: node v
    data = load_graph_file(str(tmp_path / "g.gml"), features=str(tmp_path / "x.csv"))
    assert sorted(map(tuple, data.graph.edge_index.t().tolist())) == sorted(g.edges)
    assert data.x.view(-1).tolist() == [0.0, 1.0, 2.0, 3.0]
    nodes = "".join(f'  node [ id {v} label "{"ab"[v % 2]}" ]\n' for v in range(3))
    (tmp_path / "shared.gml").write_text(
        f"graph [\n  directed 1\n{nodes}  edge [ source 2 target 0 ]\n]\n")
    with pytest.warns(UserWarning, match=r"node attributes \['label'\] are not read"):
        data = load_graph_file(str(tmp_path / "shared.gml"))
    assert data.graph.edge_index.tolist() == [[2], [0]] and not data.labelled


def test_a_labels_file_of_class_names(tmp_path, blocks):
    """Names were taken for a header, then read as NaN: the file was refused with a wrong
    row count. They are classes numbered in sorted order (as GraphML's string labels), a
    missing one -1, and a line more than the nodes a header."""
    edges = tmp_path / "e.csv"
    edges.write_text("0,1\n1,2\n2,3\n")
    for text in ("dog\ncat\n\ndog\n", "species\ndog\ncat\nnan\ndog\n"):
        (tmp_path / "y.csv").write_text(text)
        data = load_graph_file(str(edges), labels=str(tmp_path / "y.csv"))
        assert data.y.tolist() == [1, 0, -1, 1]
    (tmp_path / "y.csv").write_text("dog\ncat\n")
    with pytest.raises(ValueError, match=r"has 2 labels \(class names, one per line\) but the "
                                         "graph has 4 nodes"):
        load_graph_file(str(edges), labels=str(tmp_path / "y.csv"))


@pytest.mark.parametrize("largest, warned", [(2**24, False), (2**24 + 1, True),
                                             (1_700_000_001, True)])
def test_integer_features_that_float32_rounds_are_said(tmp_path, largest, warned):
    """Integer features (a timestamp, an id) were cast to float32 without a word, which
    rounds every odd integer above 2^24 (1,700,000,001 to a multiple of 128)."""
    from torch_geometric.data import Data

    from graphloc.datasets import NodeDataset
    (tmp_path / "g.txt").write_text("0 1\n1 2\n2 0\n")
    (tmp_path / "x.txt").write_text(f"3\n{-largest}\n5\n")
    data = Data(x=torch.tensor([[3], [-largest], [5]]), edge_index=torch.tensor([[0, 1, 2],
                                                                                 [1, 2, 0]]),
                y=torch.tensor([0, 1, 0]))
    for load in (lambda: load_graph_file(str(tmp_path / "g.txt"), features=str(tmp_path /
                                                                                  "x.txt")),
                 lambda: NodeDataset.from_pyg(data)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dataset = load()
        said = [w for w in caught if "not exact in float32" in str(w.message)]
        assert dataset.x[1, 0].item() == float(torch.tensor(-largest).float())
        assert len(said) == int(warned)
        if warned:
            spacing = 2 ** (largest.bit_length() - 24)
            assert said[0].filename == __file__
            assert f"as large as {largest:,}" in str(said[0].message)
            assert f"multiple of {spacing:,}" in str(said[0].message)
            assert float(torch.tensor(-largest).float()) % spacing == 0


def test_text_matrices_name_the_line_and_read_semicolons_and_blank_labels(tmp_path, blocks):
    """Features: a semicolon-separated file (spreadsheets in many locales) was read as one
    column of NaN and refused with a wrong row count; a word or a NaN was refused as
    "non-finite values" with no line. Labels: the documented blank line for a node without
    a label was skipped, which moved every later label up a row."""
    (tmp_path / "g.txt").write_text("0 1\n1 2\n2 3\n")
    (tmp_path / "semi.csv").write_text("a;b\n1;2\n3;4.5\n5;6\n7;8\n")
    x = load_graph_file(str(tmp_path / "g.txt"), features=str(tmp_path / "semi.csv")).x
    assert x.tolist() == [[1, 2], [3, 4.5], [5, 6], [7, 8]]
    for text, where in (("1,2\n# note\n3,x\n5,6\n7,8\n", "line 3, column 2 holds 'x'"),
                        ("1 2\n3 nan\n5 6\n7 8\n", "line 2, column 2 holds 'nan'"),
                        ("1\t2\n3\t4\n5\n7\t8\n", "line 3 has 1 columns, line 1 has 2")):
        (tmp_path / "bad.txt").write_text(text)
        with pytest.raises(ValueError, match=f"bad.txt: {where}"):
            load_graph_file(str(tmp_path / "g.txt"), features=str(tmp_path / "bad.txt"))
    for text, labels in (("0\n\n1\n2\n", [0, -1, 1, 2]), ("0\nnan\n1\n\n", [0, -1, 1, -1]),
                         ("label\n3\n\n\n1\n\n\n", [3, -1, -1, 1])):
        (tmp_path / "y.txt").write_text(text)
        y = load_graph_file(str(tmp_path / "g.txt"), labels=str(tmp_path / "y.txt")).y
        assert y.tolist() == labels


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_text_matrices_read_in_blocks_keep_each_row_and_line_number(tmp_path, blocks, newline):
    """Features and labels read a block of lines at a time, against the rows written: a
    Windows line end cut between its two characters would make a blank line (a label -1,
    every later one a row down), and a line number counted per block would name the wrong
    line."""
    rng = np.random.default_rng(5)
    rows = 40
    (tmp_path / "g.txt").write_text("".join(f"{i} {i + 1}\n" for i in range(rows - 1)))
    x = rng.integers(-50, 50, (rows, 3)) / 4
    y = rng.integers(0, 4, rows)
    missing = [3, 17, 29]
    lines = ["a,b,c", "# a comment"] + [",".join(map(str, row)) for row in x.tolist()]
    (tmp_path / "x.csv").write_bytes(newline.join(lines).encode() + newline.encode())
    labels = ["" if i in missing else str(v) for i, v in enumerate(y.tolist())]
    (tmp_path / "y.txt").write_bytes((newline.join(labels) + newline * 3).encode())
    data = load_graph_file(str(tmp_path / "g.txt"), str(tmp_path / "x.csv"),
                           str(tmp_path / "y.txt"))
    assert data.x.tolist() == x.astype(np.float32).tolist()
    assert data.y.tolist() == [-1 if i in missing else v for i, v in enumerate(y.tolist())]
    lines[30] = lines[30].replace(",", ",x", 1)  # line 31 of the file
    (tmp_path / "bad.csv").write_bytes(newline.join(lines).encode())
    with pytest.raises(ValueError, match=r"bad.csv: line 31, column 2 holds 'x"):
        load_graph_file(str(tmp_path / "g.txt"), str(tmp_path / "bad.csv"))
    lines[30] = "1,2"
    (tmp_path / "bad.csv").write_bytes(newline.join(lines).encode())
    with pytest.raises(ValueError, match=r"bad.csv: line 31 has 2 columns, line 3 has 3"):
        load_graph_file(str(tmp_path / "g.txt"), str(tmp_path / "bad.csv"))


def test_feature_and_label_checks_reach_the_last_row_of_a_large_file(tmp_path):
    """The checks run over chunks of about a million entries (whole-tensor checks took
    twice a large file's memory): a non-finite value, a fraction among whole numbers and a
    fractional label in the last row, past the first chunk, are each seen."""
    n = 300_000  # 1.2 million features: two chunks
    (tmp_path / "g.txt").write_text(f"0 1\n{n - 2} {n - 1}\n")
    whole = np.arange(4 * n, dtype=np.float64).reshape(n, 4) % 97
    np.save(tmp_path / "x.npy", whole)
    x = load_graph_file(str(tmp_path / "g.txt"), str(tmp_path / "x.npy")).x
    assert torch.equal(x, torch.from_numpy(whole).float())
    bad = whole.copy()
    bad[-1, 2] = np.inf
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(ValueError, match=rf"non-finite values \(the first, inf, at row "
                                         rf"{n - 1}, column 2"):
        load_graph_file(str(tmp_path / "g.txt"), str(tmp_path / "bad.npy"))
    fractional = whole.copy()
    fractional[-1, 3] = 0.5  # a fraction: the features are floats, not whole numbers
    np.save(tmp_path / "frac.npy", fractional)
    x = load_graph_file(str(tmp_path / "g.txt"), str(tmp_path / "frac.npy")).x
    assert x[-1, 3].item() == 0.5
    labels = np.zeros(n)
    labels[-1] = 0.5
    np.save(tmp_path / "y.npy", labels)
    with pytest.raises(ValueError, match="labels must be integer class ids"):
        load_graph_file(str(tmp_path / "g.txt"), labels=str(tmp_path / "y.npy"))


def test_binary_feature_files_name_themselves_and_the_bad_entry(tmp_path):
    """A 3-D .npy was refused naming the graph file; a NaN in a .npy named no entry."""
    (tmp_path / "g.txt").write_text("0 1\n1 2\n")
    np.save(tmp_path / "cube.npy", np.ones((3, 2, 2)))
    with pytest.raises(ValueError, match=r"cube.npy: features must be \[N, F\].*\[3, 2, 2\]"):
        load_graph_file(str(tmp_path / "g.txt"), features=str(tmp_path / "cube.npy"))
    holes = np.ones((3, 2))
    holes[2, 1] = -np.inf
    np.save(tmp_path / "holes.npy", holes)
    with pytest.raises(ValueError, match="holes.npy: features hold non-finite values "
                                         r"\(the first, -inf, at row 2, column 1"):
        load_graph_file(str(tmp_path / "g.txt"), features=str(tmp_path / "holes.npy"))


def _edge_set(graph):
    return sorted(map(tuple, graph.edge_index.t().tolist()))


def test_an_undirected_graph_written_one_line_per_pair_warns_and_reads_with_undirected(
        tmp_path):
    """networkx's write_edgelist writes each pair of an undirected graph once. Read as it
    is, every edge is one-way (silently, before: karate's R read 0.83 against 1.61 from its
    GraphML). It warns now, and undirected=True gives the graph networkx holds."""
    g = nx.karate_club_graph()
    nx.write_edgelist(g, tmp_path / "karate.txt", data=False)
    with pytest.warns(UserWarning, match=r"none of its 78 edges \(loops aside\) has its "
                                         r"reverse.*undirected=True"):
        one_way = load_graph_file(str(tmp_path / "karate.txt")).graph
    assert one_way.num_edges == 78
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = load_graph_file(str(tmp_path / "karate.txt"), undirected=True).graph
    from graphloc import Graph
    assert _edge_set(both) == _edge_set(Graph.from_networkx(g, nodes=sorted(g.nodes)))


def test_undirected_adds_only_the_missing_reverses(tmp_path):
    """A pair given both ways stays as given; a pair written twice one way gets two
    reverses (an undirected multigraph); a loop is its own reverse."""
    (tmp_path / "mixed.csv").write_text("0,1\n1,0\n1,2\n1,2\n3,3\n2,3\n")
    graph = load_graph_file(str(tmp_path / "mixed.csv"), undirected=True).graph
    assert _edge_set(graph) == sorted([(0, 1), (1, 0), (1, 2), (1, 2), (2, 1), (2, 1),
                                       (3, 3), (2, 3), (3, 2)])
    with warnings.catch_warnings():  # some edges have their reverse: no warning
        warnings.simplefilter("error")
        assert load_graph_file(str(tmp_path / "mixed.csv")).graph.num_edges == 6
    (tmp_path / "loops.csv").write_text("0,0\n1,1\n")  # nothing one-way to speak of
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_graph_file(str(tmp_path / "loops.csv"))
    with pytest.raises(TypeError, match="undirected must be True, False or None, got 'yes'"):
        load_graph_file(str(tmp_path / "mixed.csv"), undirected="yes")


def test_a_one_way_matrix_market_file_warns_and_reads_undirected(tmp_path):
    import scipy.io
    import scipy.sparse as sp
    a = sp.coo_matrix((np.ones(3), ([0, 1, 3], [1, 2, 0])), shape=(4, 4))
    scipy.io.mmwrite(str(tmp_path / "g.mtx"), a)
    with pytest.warns(UserWarning, match="none of its 3 edges"):
        load_graph_file(str(tmp_path / "g.mtx"))
    graph = load_graph_file(str(tmp_path / "g.mtx"), undirected=True).graph
    assert _edge_set(graph) == sorted([(0, 1), (1, 0), (1, 2), (2, 1), (3, 0), (0, 3)])


@pytest.mark.parametrize("header, undirected", [
    ("% sym unweighted", True), ("% sym positive", True), ("% asym unweighted", False),
    ("# Undirected graph: ../../data/output/amazon.ungraph.txt", True),
    ("# Directed graph: web.txt", None)])
def test_konect_and_snap_headers_say_whether_each_pair_is_written_once(tmp_path, header,
                                                                       undirected):
    """KONECT's "sym" files and SNAP's "Undirected graph" files list each undirected pair
    once: they were read as one-way edges without a word. "asym" is directed as written; a
    file that says nothing of it warns when no edge has its reverse. (KONECT's vertices
    count from 1.)"""
    path = tmp_path / "out.net.tsv"
    one_way = [(0, 1), (1, 2), (2, 3), (0, 3)]
    first = 1 if header.startswith("%") else 0
    path.write_text(f"{header}\n% 4 3\n" + "".join(f"{u + first}\t{v + first}\n"
                                                  for u, v in one_way))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = load_graph_file(str(path)).graph
    one_way_warnings = [w for w in caught if "has its reverse" in str(w.message)]
    if undirected:
        assert _edge_set(graph) == sorted(one_way + [(b, a) for a, b in one_way])
    else:
        assert _edge_set(graph) == sorted(one_way)
    assert len(one_way_warnings) == (1 if undirected is None else 0)
    # the caller's word overrides the file's
    assert load_graph_file(str(path), undirected=False).graph.num_edges == 4
    assert load_graph_file(str(path), undirected=True).graph.num_edges == 8


def test_undirected_gives_a_saved_datas_added_edges_the_attributes_they_reverse(tmp_path):
    from torch_geometric.data import Data
    data = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[0, 1, 2], [1, 2, 1]]),
                edge_attr=torch.tensor([[1.0], [2.0], [3.0]]), y=torch.tensor([0, 1, 0, 1]))
    torch.save(data, tmp_path / "d.pt")
    ds = load_graph_file(str(tmp_path / "d.pt"), undirected=True)
    assert ds.graph.edge_index.tolist() == [[0, 1, 2, 1], [1, 2, 1, 0]]
    assert ds.edge_attr.view(-1).tolist() == [1.0, 2.0, 3.0, 1.0]


@pytest.mark.parametrize("delimiter", [" ", "\t", ",", ";", "  ", ", "])
@pytest.mark.parametrize("header", ["", "# SNAP: Nodes: 9\n", "% sym unweighted\n% 30 9 9\n",
                                    "% bip unweighted\n", "\ufeff"])
@pytest.mark.parametrize("extra", [0, 1, 2], ids=["two columns", "a weight",
                                                  "a weight and a time"])
@pytest.mark.parametrize("block", [1 << 24, 40])  # 40 characters: a block of a few lines
def test_integer_edge_lists_read_by_numpy_as_by_the_general_reader(tmp_path, monkeypatch,
                                                                   delimiter, header, block,
                                                                   extra):
    """Files of integer ids, with or without further number columns (SNAP's, KONECT's,
    Network Repository's weights and times), are parsed by NumPy, a block of lines at a
    time: the same graph and the same warnings (the first line of more columns) as the
    field-by-field reader gives, which reads every file."""
    from graphloc.datasets import files, readers
    monkeypatch.setattr(readers, "BLOCK_CHARS", block)
    rng = torch.Generator().manual_seed(len(delimiter) + len(header))
    ends = torch.randint(1, 10, (30, 2), generator=rng).tolist()
    more = ["0.25", "1700000000"][:extra]
    body = "".join(delimiter.join([str(u), str(v), *more]) + "\n" +
                   ("\n# a comment\n" if i % 7 == 3 else "") for i, (u, v) in enumerate(ends))
    path = tmp_path / "edges.txt"
    path.write_text(header + body, encoding="utf-8")
    fast = files._integer_edge_columns
    results = []
    for reader in (fast, lambda p: None):
        monkeypatch.setattr(files, "_integer_edge_columns", reader)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph = load_graph_file(str(path), undirected=False).graph
        results.append((graph, sorted(str(w.message) for w in caught)))
    assert fast(str(path)) is not None  # the NumPy path read it
    (quick, quick_said), (general, general_said) = results
    assert quick.num_nodes == general.num_nodes
    assert torch.equal(quick.edge_index, general.edge_index)
    assert quick_said == general_said
    assert any(f"has {2 + extra} columns" in m for m in quick_said) == (extra > 0)


@pytest.mark.parametrize("text", ["1 2\n2 3.5\n", "1 2 3\n4 5\n", "a b\n1 2\n",
                                  "1 2\n-1 3\n", "1\t2 x\n", "1,,2\n", "1 2 friend\n",
                                  "1.5 2 3\n", "1 2 nan\n2 3 1\n3 nan 1\n",
                                  "1 2\n" * 30 + "3 x\n",  # past the first block
                                  "1 2 0.5\n" * 30 + "3 4\n"])
def test_what_numpy_does_not_read_goes_to_the_general_reader(tmp_path, monkeypatch, text):
    from graphloc.datasets import files, readers
    monkeypatch.setattr(readers, "BLOCK_CHARS", 40)
    path = tmp_path / "edges.txt"
    path.write_text(text)
    columns = files._integer_edge_columns(str(path))
    # a negative id: refused by line below
    assert columns is None or int(columns.edge_index.min()) < 0


def _gephi_edge_table(edges: list) -> str:
    """Gephi's "Export table" of edges: Source, Target, Type, Id, Label, Weight."""
    rows = [f"{u},{v},{kind},{i},,1.0" for i, (u, v, kind) in enumerate(edges)]
    return "Source,Target,Type,Id,Label,Weight\n" + "\n".join(rows) + "\n"


def test_a_gephi_edge_tables_type_column_says_each_edges_direction(tmp_path):
    """Gephi's edge table gives each edge's direction in its "Type" column. It was one more
    ignored column, so an "Undirected" edge carried messages one way only (and, where some
    edge had its reverse, without even the one-way warning). The oracle: the graph networkx
    holds for the same edges, undirected ones both ways."""
    g = nx.karate_club_graph()
    kinds = ["Undirected" if i % 3 else "Directed" for i in range(g.number_of_edges())]
    edges = [(u, v, kind) for (u, v), kind in zip(g.edges, kinds, strict=True)]
    (tmp_path / "karate_edges.csv").write_text(_gephi_edge_table(edges))
    with pytest.warns(UserWarning, match=r"line 2 has 6 columns; only the source and "
                                         r"destination columns and the Type are read"):
        graph = load_graph_file(str(tmp_path / "karate_edges.csv")).graph
    oracle = nx.MultiDiGraph()
    for u, v, kind in edges:
        oracle.add_edge(u, v)
        if kind == "Undirected":
            oracle.add_edge(v, u)
    assert _edge_set(graph) == sorted(oracle.edges())
    # every edge undirected: the undirected graph, as its GraphML reads
    undirected = [(u, v, "Undirected") for u, v in g.edges]
    (tmp_path / "all.csv").write_text(_gephi_edge_table(undirected))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = load_graph_file(str(tmp_path / "all.csv")).graph
    assert not [w for w in caught if "has its reverse" in str(w.message)]
    nx.write_graphml(g, tmp_path / "karate.graphml")
    assert _edge_set(graph) == _edge_set(load_graph_file(str(tmp_path / "karate.graphml")).graph)
    # the caller's word overrides the file's
    as_written = load_graph_file(str(tmp_path / "all.csv"), undirected=False).graph
    assert _edge_set(as_written) == sorted((u, v) for u, v in g.edges)


def test_a_type_column_of_other_values_is_no_direction(tmp_path):
    """A "Type" column of relation names (a knowledge graph's) says nothing of direction:
    it is ignored with the other columns. One of Gephi's values mixed with others is a
    damaged table, refused naming the line."""
    (tmp_path / "relations.csv").write_text("source,target,type\n0,1,friend\n1,2,colleague\n")
    with pytest.warns(UserWarning, match=r"only the source and destination columns are "):
        graph = load_graph_file(str(tmp_path / "relations.csv"), undirected=False).graph
    assert _edge_set(graph) == [(0, 1), (1, 2)]
    (tmp_path / "damaged.csv").write_text("Source,Target,Type\n0,1,Directed\n1,2,Undirected\n"
                                          "2,3,Undirectd\n")
    with pytest.raises(ValueError, match=r"damaged.csv: line 4 has the Type 'Undirectd', where "
                                         r"the other lines' Type gives the edge's direction"):
        load_graph_file(str(tmp_path / "damaged.csv"))
    (tmp_path / "short.csv").write_text("Source,Target,Type\n0,1,Directed\n1,2\n")
    with pytest.raises(ValueError, match=r"short.csv: line 3 has the Type ''"):
        load_graph_file(str(tmp_path / "short.csv"))


def _karate_texts() -> dict:
    """Zachary's karate club written in each text format graphloc reads."""
    import json
    g = nx.karate_club_graph()
    edges = list(g.edges)
    return {
        "edges.csv": "source,target\n" + "".join(f"{u},{v}\n" for u, v in edges),
        "weighted.tsv": "".join(f"{u}\t{v}\t1.5\n" for u, v in edges),
        "out.karate": "% sym unweighted\n% 78 34 34\n" + "".join(f"{u + 1} {v + 1}\n"
                                                               for u, v in edges),
        "karate.mtx": "%%MatrixMarket matrix coordinate pattern symmetric\n34 34 78\n" +
                      "".join(f"{max(u, v) + 1} {min(u, v) + 1}\n" for u, v in edges),
        "karate.graph": "34 78\n" + "".join(" ".join(str(w + 1) for w in sorted(g[v])) + "\n"
                                            for v in range(34)),
        "karate.gr": "p sp 34 78\n" + "".join(f"a {u + 1} {v + 1} 1\n" for u, v in edges),
        "karate.net": "*Vertices 34\n" + "".join(f'{v + 1} "n{v}"\n' for v in range(34)) +
                      "*Edges\n" + "".join(f"{u + 1} {v + 1}\n" for u, v in edges),
        "karate.gml": "\n".join(nx.generate_gml(g)),
        "karate.json": json.dumps(nx.node_link_data(g, edges="links")),
    }


@pytest.mark.parametrize("name", list(_karate_texts()))
@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("encoding, mark", [("utf-16", (b"\xff\xfe", b"\xfe\xff")),
                                            ("utf-8-sig", (b"\xef\xbb",))])
def test_a_marked_file_reads_as_its_plain_utf8_twin(tmp_path, name, compressed, encoding,
                                                    mark):
    """Excel's "Unicode Text" and Windows PowerShell's Out-File write UTF-16 with a
    byte-order mark, and spreadsheets UTF-8 with one; such a file was refused ("'utf-8'
    codec can't decode byte 0xff", networkx's "input is not ASCII-encoded" for GML,
    scipy's "Missing banner" for MatrixMarket). It reads as the same file in plain UTF-8,
    compressed or not."""
    import gzip
    text = _karate_texts()[name]
    suffix = ".gz" if compressed else ""
    opener = gzip.open if compressed else open
    for folder, written in (("plain", "utf-8"), ("marked", encoding)):
        (tmp_path / folder).mkdir()
        with opener(tmp_path / folder / (name + suffix), "wt", encoding=written) as f:
            f.write(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the weights column's, said of both
        plain = load_graph_file(str(tmp_path / "plain" / (name + suffix)))
        marked = load_graph_file(str(tmp_path / "marked" / (name + suffix)))
    if not compressed:
        assert (tmp_path / "marked" / name).read_bytes()[:2] in mark
    assert marked.num_nodes == plain.num_nodes == 34
    assert torch.equal(marked.graph.edge_index, plain.graph.edge_index)
    assert plain.graph.num_edges in (78, 156)


def test_utf16_feature_and_label_files_read_as_utf8(tmp_path):
    (tmp_path / "e.csv").write_text("0,1\n1,2\n2,0\n")
    for encoding in ("utf-8", "utf-16"):
        (tmp_path / f"x-{encoding}.csv").write_text("0.5,1\n2,3.25\n-1,0\n", encoding=encoding)
        (tmp_path / f"y-{encoding}.csv").write_text("2\n0\n1\n", encoding=encoding)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load_graph_file(str(tmp_path / "e.csv"), features=str(tmp_path / "x-utf-16.csv"),
                             labels=str(tmp_path / "y-utf-16.csv"))
    assert ds.x.tolist() == [[0.5, 1.0], [2.0, 3.25], [-1.0, 0.0]]
    assert ds.y.tolist() == [2, 0, 1]


@pytest.mark.parametrize("writer, suffix", [(nx.write_graph6, ".g6"),
                                            (nx.write_sparse6, ".s6"),
                                            (nx.write_graph6, ".graph6.gz")])
def test_graph6_and_sparse6_files_read_as_the_undirected_graph_written(tmp_path, writer,
                                                                       suffix):
    """nauty's and House of Graphs' formats, not read before ("not a graph file graphloc
    reads"). The oracle: networkx's graph, each edge both ways."""
    from graphloc import Graph
    g = nx.les_miserables_graph()
    g = nx.convert_node_labels_to_integers(g)
    path = tmp_path / f"lesmis{suffix}"
    if suffix.endswith(".gz"):
        import gzip
        with gzip.open(path, "wb") as f:
            writer(g, f)
    else:
        writer(g, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # undirected by the format: no one-way warning
        ds = load_graph_file(str(path))
    assert ds.num_nodes == g.number_of_nodes() and not ds.labelled
    assert _edge_set(ds.graph) == _edge_set(Graph.from_networkx(g, nodes=sorted(g)))
    assert ds.graph.num_edges == 2 * g.number_of_edges()


def test_sparse6_keeps_parallel_edges_and_loops_and_several_graphs_are_refused(tmp_path):
    multigraph = nx.MultiGraph([(0, 1), (0, 1), (2, 2), (1, 3)])
    nx.write_sparse6(multigraph, tmp_path / "multi.s6")
    graph = load_graph_file(str(tmp_path / "multi.s6")).graph
    assert _edge_set(graph) == sorted([(0, 1), (0, 1), (1, 0), (1, 0), (2, 2), (1, 3),
                                       (3, 1)])
    (tmp_path / "two.g6").write_bytes(nx.to_graph6_bytes(nx.path_graph(3), header=False) +
                                      nx.to_graph6_bytes(nx.cycle_graph(4), header=False))
    with pytest.raises(ValueError, match=r"two.g6 is not a readable graph6 file .*the file "
                                         r"holds 2 graphs, one per line"):
        load_graph_file(str(tmp_path / "two.g6"))
    (tmp_path / "bad.g6").write_bytes(b"\x7f\x7f\n")
    with pytest.raises(ValueError, match=r"bad.g6 is not a readable graph6 file"):
        load_graph_file(str(tmp_path / "bad.g6"))


def test_an_adjacency_list_is_each_lines_edges_from_its_first_node(tmp_path):
    """networkx's adjacency list: "u v w" is u -> v and u -> w; a directed graph reads back
    as itself, an undirected one (each pair written once) warns and reads whole with
    undirected=True; a line of one node is an isolated node."""
    from graphloc import Graph
    directed = nx.gnp_random_graph(30, 0.1, seed=3, directed=True)
    directed.add_node(30)  # isolated, on a line of its own
    nx.write_adjlist(directed, tmp_path / "directed.adjlist")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_graph_file(str(tmp_path / "directed.adjlist"))
    assert not [w for w in caught if "has its reverse" in str(w.message)]
    assert ds.num_nodes == 31
    assert _edge_set(ds.graph) == _edge_set(Graph.from_networkx(directed, nodes=range(31)))
    karate = nx.karate_club_graph()
    nx.write_adjlist(karate, tmp_path / "karate.adjlist")
    with pytest.warns(UserWarning, match=r"none of its 78 edges .* one-way, from a line's "
                                         r"first node to the others.*write_adjlist"):
        assert load_graph_file(str(tmp_path / "karate.adjlist")).graph.num_edges == 78
    both = load_graph_file(str(tmp_path / "karate.adjlist"), undirected=True).graph
    assert _edge_set(both) == _edge_set(Graph.from_networkx(karate, nodes=range(34)))
    (tmp_path / "names.adjlist").write_text("# a comment\nb a c\nc\na b\n")
    named = load_graph_file(str(tmp_path / "names.adjlist"), undirected=False).graph
    assert named.num_nodes == 3 and _edge_set(named) == [(0, 1), (0, 2), (1, 0)]
    # a spreadsheet's byte-order mark is no part of the first node's name
    (tmp_path / "bom.adjlist").write_text("\ufeffb a c\nc\na b\n", encoding="utf-8")
    marked = load_graph_file(str(tmp_path / "bom.adjlist"), undirected=False)
    assert marked.node_names == ["b", "a", "c"] and _edge_set(marked.graph) == _edge_set(named)


def test_an_adjacency_list_keeps_parallel_edges_as_networkx_writes_them(tmp_path):
    """networkx writes a multigraph's adjacency list with a neighbour once per parallel edge
    ("0 1 1"); each is an edge, as every line of an edge list is (a DiGraph reader kept one
    of them without a word, which changed every degree-normalised layer's numbers)."""
    multi = nx.MultiDiGraph()
    multi.add_nodes_from(range(6))
    multi.add_edges_from([(0, 1), (0, 1), (0, 1), (2, 2), (2, 2), (3, 4), (4, 3), (4, 3)])
    nx.write_adjlist(multi, tmp_path / "multi.adjlist")
    read = load_graph_file(str(tmp_path / "multi.adjlist"), undirected=False).graph
    assert read.num_nodes == 6
    assert _edge_set(read) == sorted(multi.edges())
    undirected = nx.MultiGraph([(0, 1), (0, 1), (1, 2), (3, 3)])
    nx.write_adjlist(undirected, tmp_path / "undirected.adjlist")
    both = load_graph_file(str(tmp_path / "undirected.adjlist"), undirected=True).graph
    assert _edge_set(both) == sorted([*undirected.edges(), *((v, u) for u, v in
                                                               undirected.edges() if u != v)])


def test_an_edge_list_without_edges_says_so(tmp_path):
    """Comments, blank lines or a header alone: the file holds no edges, which the error
    says (it spoke of two columns per line, as for a line of one field)."""
    (tmp_path / "comments.txt").write_text("# only a comment\n\n% another\n")
    with pytest.raises(ValueError, match=r"comments.txt: the edge list holds no edges"):
        load_graph_file(str(tmp_path / "comments.txt"))
    (tmp_path / "short.txt").write_text("0 1\n2\n")
    with pytest.raises(ValueError, match=r"short.txt: an edge list needs two columns .* "
                                         r"line 2 has 1"):
        load_graph_file(str(tmp_path / "short.txt"))


def _edge_elements(edges: list, direction: str, prefix: str = "") -> str:
    """``<edge>`` elements of ``(source, target, value of the direction attribute or
    None)``, as GraphML and GEXF both write them."""
    return "".join(f'<edge id="{prefix}{i}" source="{u}" target="{v}"' +
                   ("" if d is None else f' {direction}="{d}"') + "/>"
                   for i, (u, v, d) in enumerate(edges))


def _graphml(default: str, edges: list) -> str:
    """A GraphML document of nodes a, b, c, d and ``(source, target, directed or None)``."""
    return ('<?xml version="1.0" encoding="UTF-8"?><graphml xmlns="http://graphml.graphdrawing.'
            f'org/xmlns"><graph edgedefault="{default}">' +
            "".join(f'<node id="{n}"/>' for n in "abcd") +
            _edge_elements(edges, "directed", "e") + "</graph></graphml>")


def _gexf(default: str, edges: list) -> str:
    """A GEXF 1.3 document of nodes 0 .. 3 and ``(source, target, type or None)``."""
    return ('<?xml version="1.0" encoding="UTF-8"?><gexf xmlns="http://gexf.net/1.3" '
            f'version="1.3"><graph defaultedgetype="{default}" mode="static"><nodes>' +
            "".join(f'<node id="{n}" label="{n}"/>' for n in range(4)) +
            f"</nodes><edges>{_edge_elements(edges, 'type')}</edges></graph></gexf>")


def _both_ways(pairs):
    return sorted(pairs + [(v, u) for u, v in pairs])


@pytest.mark.parametrize("suffix, document, expected", [
    (".graphml", _graphml("directed", [("a", "b", None), ("b", "c", "false"),
                                       ("c", "d", "true")]),
     sorted([(0, 1), (2, 3)] + _both_ways([(1, 2)]))),
    (".graphml", _graphml("undirected", [("a", "b", None), ("b", "c", "true"),
                                         ("d", "a", "false")]),
     sorted([(1, 2)] + _both_ways([(0, 1), (3, 0)]))),
    (".gexf", _gexf("directed", [(0, 1, None), (1, 2, "undirected"), (2, 3, "mutual"),
                                 (3, 0, "directed")]),
     sorted([(0, 1), (3, 0)] + _both_ways([(1, 2), (2, 3)]))),
    (".gexf", _gexf("undirected", [(0, 1, None), (1, 2, "directed"), (3, 2, None)]),
     sorted([(1, 2)] + _both_ways([(0, 1), (3, 2)]))),
])
def test_graphml_and_gexf_edges_that_override_the_default_direction(tmp_path, suffix,
                                                                     document, expected):
    """Both formats let an edge say its own direction (GraphML's directed="false" in a
    directed graph, GEXF's type="undirected"), and Gephi writes a mixed graph so; networkx
    refuses such files ("directed=false edge found in directed graph"), and so did
    graphloc. Read now as the graph the file describes: each undirected edge both ways,
    each directed one as written."""
    path = tmp_path / f"mixed{suffix}"
    path.write_text(document)
    graph = load_graph_file(str(path)).graph
    assert _edge_set(graph) == expected


def test_a_graph_of_one_direction_reads_as_before(tmp_path):
    """The rewriting is for the mixed files only: a plain directed GraphML keeps its one-way
    edges, an undirected GEXF gets both directions, as networkx reads them. (GraphML's edge
    ids, which yEd and Gephi write for every edge, are not named as unread attributes.)"""
    (tmp_path / "one_way.graphml").write_text(_graphml("directed", [("a", "b", None),
                                                                    ("b", "c", "true")]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _edge_set(load_graph_file(str(tmp_path / "one_way.graphml")).graph) == \
            [(0, 1), (1, 2)]
    (tmp_path / "plain.gexf").write_text(_gexf("undirected", [(0, 1, None), (2, 3, None)]))
    assert _edge_set(load_graph_file(str(tmp_path / "plain.gexf")).graph) == \
        _both_ways([(0, 1), (2, 3)])


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("separator", [" ", "\t", ", "])
def test_a_first_line_that_counts_nodes_and_edges_is_no_edge(tmp_path, first, separator):
    """Network Repository's and many course files' edge lists open with "N M". Read as an
    edge it joined node N to node M and added M - N isolated nodes (karate: 79 nodes, an
    edge 34 -> 78). It is now read as the size line it is, with a warning; the oracle is
    the same file without it."""
    g = nx.karate_club_graph()
    lines = "".join(f"{u + first}{separator}{v + first}\n" for u, v in g.edges)
    (tmp_path / "sized.txt").write_text(f"34{separator}78\n" + lines)
    (tmp_path / "bare.txt").write_text(lines)
    with pytest.warns(UserWarning, match=r"sized.txt: line 1 \('34 78'\) counts the nodes and "
                                         r"edges \(the 78 lines after it\)"):
        sized = load_graph_file(str(tmp_path / "sized.txt"), undirected=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a 1-based file's isolated node 0, said of both)
        bare = load_graph_file(str(tmp_path / "bare.txt"), undirected=True)
    assert sized.num_nodes == bare.num_nodes == 34 + first
    assert _edge_set(sized.graph) == _edge_set(bare.graph)


def test_a_first_edge_that_only_resembles_a_size_line_stays_an_edge(tmp_path):
    """"5 3" before three edges among nodes 0 .. 3: 5 is not the count of those ids (4, or
    3 numbered from 1), so it is an edge; a file of two lines keeps both."""
    (tmp_path / "edges.txt").write_text("5 3\n0 1\n1 2\n2 3\n")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*size line")
        warnings.filterwarnings("ignore", message=".*(reverse|isolated)")
        graph = load_graph_file(str(tmp_path / "edges.txt")).graph
    assert _edge_set(graph) == [(0, 1), (1, 2), (2, 3), (5, 3)]
    (tmp_path / "two.txt").write_text("2 1\n0 1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert load_graph_file(str(tmp_path / "two.txt")).graph.num_edges == 2


def test_a_graphmls_nested_graphs_are_part_of_the_one_graph(tmp_path):
    """yEd saves a group as a node holding a graph of its own. networkx skips a nested
    graph's contents: its nodes were missing unless an outer edge named them, and its
    edges were lost without a word. They are hoisted into the one graph now (the group
    stays a node), two levels deep here; the oracle is the flat graph written out."""
    ns = 'xmlns="http://graphml.graphdrawing.org/xmlns"'
    nested = (f'<?xml version="1.0"?><graphml {ns}><graph edgedefault="undirected">'
              '<node id="a"/><node id="g"><graph id="g:" edgedefault="undirected">'
              '<node id="g::x"/><node id="g::h"><graph id="g::h:" edgedefault="undirected">'
              '<node id="g::h::y"/><node id="g::h::z"/>'
              '<edge source="g::h::y" target="g::h::z"/></graph></node>'
              '<edge source="g::x" target="g::h::y"/></graph></node>'
              '<edge source="a" target="g::x"/></graph></graphml>')
    flat = (f'<?xml version="1.0"?><graphml {ns}><graph edgedefault="undirected">' +
            "".join(f'<node id="{n}"/>' for n in ("a", "g", "g::x", "g::h", "g::h::y",
                                                  "g::h::z")) +
            '<edge source="g::h::y" target="g::h::z"/><edge source="g::x" target="g::h::y"/>'
            '<edge source="a" target="g::x"/></graph></graphml>')
    (tmp_path / "nested.graphml").write_text(nested)
    (tmp_path / "flat.graphml").write_text(flat)
    with pytest.warns(UserWarning, match=r"nested.graphml: 2 node\(s\) hold a graph of their "
                                         r"own \(yEd's groups\)"):
        got = load_graph_file(str(tmp_path / "nested.graphml"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no nested graph: nothing said
        expected = load_graph_file(str(tmp_path / "flat.graphml"))
    names = dict(zip(got.node_names, range(got.num_nodes), strict=True))
    assert sorted(got.node_names) == sorted(expected.node_names)
    relabel = [names[n] for n in expected.node_names]
    assert _edge_set(got.graph) == sorted((relabel[u], relabel[v])
                                          for u, v in _edge_set(expected.graph))


def test_node_link_json_whose_links_name_nodes_by_position(tmp_path):
    """d3's force layout names a link's nodes by their position in "nodes" unless told
    otherwise; networkx read those positions as more node ids, so Les Misérables became
    its 77 named nodes, isolated, and 77 numbered ones holding the edges. The oracle:
    networkx's graph, from the same file with its links named by id."""
    import json
    g = nx.les_miserables_graph()
    order = list(g.nodes)
    position = {name: i for i, name in enumerate(order)}
    nodes = [{"id": name, "group": len(name) % 3} for name in order]
    by_position = [{"source": position[u], "target": position[v]} for u, v in g.edges]
    by_id = [{"source": u, "target": v} for u, v in g.edges]
    (tmp_path / "d3.json").write_text(json.dumps({"nodes": nodes, "links": by_position}))
    (tmp_path / "ids.json").write_text(json.dumps({"nodes": nodes, "links": by_id}))
    with pytest.warns(UserWarning, match=r"d3.json: its links name their nodes by position"):
        got = load_graph_file(str(tmp_path / "d3.json"))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*are not read")
        expected = load_graph_file(str(tmp_path / "ids.json"))
    assert got.num_nodes == expected.num_nodes == 77 and got.node_names == order
    assert _edge_set(got.graph) == _edge_set(expected.graph)
    bad = {"nodes": nodes[:3], "links": [{"source": order[0], "target": "Nobody"}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=r"bad.json is not a readable node-link JSON file .*a "
                                         r"link names the node 'Nobody', which 'nodes' does "
                                         r"not list"):
        load_graph_file(str(tmp_path / "bad.json"))


@pytest.mark.parametrize("directed", [True, False])
def test_node_link_json_keeps_a_link_listed_twice(tmp_path, directed):
    """A node-link file that says "multigraph": false but lists a pair again: networkx kept
    one link of the pair without a word. Each link is an edge, as a GraphML's each <edge>
    is (the oracle: the same links in a GraphML file, networkx's reading), and it is said.
    networkx's own multigraph files (parallel links, "multigraph": true) say nothing."""
    import json
    links = [(0, 1), (0, 1), (1, 2), (2, 0)] if directed else [(0, 1), (1, 0), (1, 2)]
    nodes = [{"id": i} for i in range(4)]
    (tmp_path / "twice.json").write_text(json.dumps({
        "directed": directed, "multigraph": False, "nodes": nodes,
        "links": [{"source": u, "target": v} for u, v in links]}))
    kind = "directed" if directed else "undirected"
    (tmp_path / "twice.graphml").write_text(
        '<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        f'<graph edgedefault="{kind}">' + "".join(f'<node id="{i}"/>' for i in range(4)) +
        "".join(f'<edge source="{u}" target="{v}"/>' for u, v in links) + "</graph></graphml>")
    with pytest.warns(UserWarning, match=r'twice.json: says "multigraph": false but lists 1 '
                                         r"link\(s\) again .*\(parallel edges\)"):
        got = load_graph_file(str(tmp_path / "twice.json")).graph
    expected = load_graph_file(str(tmp_path / "twice.graphml")).graph
    assert got.num_nodes == 4
    assert _edge_set(got) == _edge_set(expected)
    assert got.num_edges == (len(links) if directed else 2 * len(links))
    multi = nx.MultiDiGraph([(0, 1), (0, 1), (1, 2)])
    (tmp_path / "multi.json").write_text(json.dumps(nx.node_link_data(multi, edges="links")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _edge_set(load_graph_file(str(tmp_path / "multi.json")).graph) == \
            sorted(multi.edges())


@pytest.mark.parametrize("suffix", [".graphml", ".gexf"])
def test_a_node_named_only_by_an_edge_is_said(tmp_path, suffix):
    """networkx adds a node that an edge names but the file never declares (a misspelt
    id): the graph gained it without a word. It is still read, and said; a file networkx
    wrote says nothing."""
    make = _graphml if suffix == ".graphml" else _gexf
    named = ("a", "b", "zz") if suffix == ".graphml" else (0, 1, 9)
    (tmp_path / f"typo{suffix}").write_text(make("undirected", [(named[0], named[1], None),
                                                                (named[1], named[2], None)]))
    with pytest.warns(UserWarning, match=rf"typo{suffix}: 1 node\(s\) appear only in edges, "
                                         r"not among the file's 4 nodes"):
        assert load_graph_file(str(tmp_path / f"typo{suffix}")).num_nodes == 5
    g = nx.les_miserables_graph()
    (nx.write_graphml if suffix == ".graphml" else nx.write_gexf)(g, tmp_path / f"ok{suffix}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_graph_file(str(tmp_path / f"ok{suffix}"))
    assert not [w for w in caught if "appear only in edges" in str(w.message)]


@pytest.mark.parametrize("header, row", [
    ("id,source,target,weight", "{i},{u},{v},1.5"),  # an edge id first
    ("target,source", "{v},{u}"),  # the columns the other way round
    ("edge_id;from;to", "{i};{u};{v}"),  # named only past the first column
    (":START_ID,:END_ID,:TYPE", "{u},{v},KNOWS"),  # Neo4j's export
])
def test_a_header_names_the_source_and_target_columns_wherever_they_stand(tmp_path, header,
                                                                          row):
    """Read by position, an edge table with an id column first took the ids for sources,
    "target,source" turned every edge round, and "edge_id;from;to" was not even known for
    a header (its first line read as an edge), all without a word. The oracle: the same
    edges written as "source,target"."""
    g = nx.gnm_random_graph(12, 30, seed=4, directed=True)
    edges = [(u + 100, v + 100) for u, v in g.edges]  # ids unlike any edge id
    lines = "".join(row.format(i=i, u=u, v=v) + "\n" for i, (u, v) in enumerate(edges))
    (tmp_path / "table.csv").write_text(header + "\n" + lines)
    (tmp_path / "plain.csv").write_text("source,target\n" +
                                        "".join(f"{u},{v}\n" for u, v in edges))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the extra columns' and unused ids'
        got = load_graph_file(str(tmp_path / "table.csv"), undirected=False)
        expected = load_graph_file(str(tmp_path / "plain.csv"), undirected=False)
    assert got.num_nodes == expected.num_nodes
    assert _edge_set(got.graph) == _edge_set(expected.graph)


def _karate_with_attributes():
    g = nx.karate_club_graph()
    for v in g:
        g.nodes[v]["officer"] = g.nodes[v]["club"] == "Officer"
        g.nodes[v]["faction"] = int(g.nodes[v]["club"] == "Officer") + 3
        if v % 5 == 0:
            g.nodes[v]["partial"] = "ab"[v % 2]
    return g


@pytest.mark.parametrize("writer", ["graphml", "gml", "gexf", "json"])
@pytest.mark.parametrize("column, expected", [
    ("club", lambda g, v: ["Mr. Hi", "Officer"].index(g.nodes[v]["club"])),  # names, sorted
    ("officer", lambda g, v: int(g.nodes[v]["officer"])),
    ("faction", lambda g, v: g.nodes[v]["faction"]),  # class ids as they are
    ("partial", lambda g, v: "ab".index(g.nodes[v]["partial"]) if v % 5 == 0 else -1)])
def test_a_node_attribute_as_the_classes(tmp_path, writer, column, expected):
    """Without a labels file, label_column names the graph file's node attribute that
    holds the classes (karate's "club"); it was named among the unread attributes."""
    g = _karate_with_attributes()
    path = tmp_path / f"karate.{writer}"
    _writers(named=True)[writer](g, path)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        dataset = load_graph_file(str(path), label_column=column)
    assert dataset.labelled and dataset.y.tolist() == [expected(g, v) for v in g]
    assert not any(f"'{column}'" in str(w.message) for w in said)  # not named as unread


def test_a_missing_or_unusable_node_attribute_is_refused_by_name(tmp_path):
    g = nx.path_graph(3)
    nx.set_node_attributes(g, {0: 0.5, 1: 1.0, 2: 2.0}, "score")
    nx.write_graphml(g, tmp_path / "g.graphml")
    with pytest.raises(ValueError, match=r"g.graphml: no node has the attribute 'klass' "
                                         r"\(label_column\); its node attributes: \['score'\]"):
        load_graph_file(str(tmp_path / "g.graphml"), label_column="klass")
    with pytest.raises(ValueError, match=r"node attribute 'score'.*whole numbers"):
        load_graph_file(str(tmp_path / "g.graphml"), label_column="score")
    (tmp_path / "g.graph").write_text("3 2\n2\n1 3\n2\n")
    with pytest.raises(ValueError, match=r"label_column 'score' names a node attribute, and a "
                                         r"\.graph file has none"):
        load_graph_file(str(tmp_path / "g.graph"), label_column="score")


@pytest.mark.parametrize("writer", ["graphml", "gml", "gexf", "json"])
def test_numeric_node_attributes_as_the_features(tmp_path, writer):
    """feature_columns without a features file: the graph file's numeric node attributes,
    in the order asked (PyG's from_networkx(group_node_attrs=...))."""
    g = _karate_with_attributes()
    for v in g:
        g.nodes[v]["score"] = v / 4
    path = tmp_path / f"karate.{writer}"
    _writers(named=True)[writer](g, path)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        dataset = load_graph_file(str(path), feature_columns=["score", "officer", "faction"],
                                  label_column="club")
    expected = [[v / 4, float(g.nodes[v]["officer"]), g.nodes[v]["faction"]] for v in g]
    assert dataset.x.tolist() == expected and dataset.y.sum() == 17
    assert not any("'score'" in str(w.message) for w in said)
    with pytest.raises(ValueError, match=r"node 1 has no attribute 'partial' \(feature_columns"):
        load_graph_file(str(path), feature_columns=["partial"])
    with pytest.raises(ValueError, match=r"node 0 has 'club' = 'Mr. Hi', not a finite number"):
        load_graph_file(str(path), feature_columns=["club"])


@pytest.mark.parametrize("label_column", [None, "y"])
def test_a_blank_class_attribute_is_no_class(tmp_path, label_column):
    """An empty or "nan" string class (a spreadsheet's blank cell exported to GraphML) was
    a class of its own; it is no label (-1), as in a labels file."""
    g = nx.path_graph(5)
    nx.set_node_attributes(g, {0: "cat", 1: "", 2: "dog", 3: "NaN", 4: "cat"}, "y")
    nx.write_graphml(g, tmp_path / "g.graphml")
    dataset = load_graph_file(str(tmp_path / "g.graphml"), label_column=label_column)
    assert dataset.y.tolist() == [0, -1, 1, -1, 0]


def test_a_feature_vector_attribute_of_pygs_to_networkx(tmp_path):
    """PyG's to_networkx keeps x as a list per node; written as node-link JSON, that list
    is the node's features (PyG's from_networkx stacks it so)."""
    import json

    from torch_geometric.data import Data
    from torch_geometric.utils import from_networkx, to_networkx
    data = Data(x=torch.randn(6, 3, dtype=torch.float64),
                edge_index=torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]))
    g = to_networkx(data, node_attrs=["x"])
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(g, edges="links")))
    dataset = load_graph_file(str(tmp_path / "g.json"), feature_columns=["x"])
    theirs = from_networkx(g, group_node_attrs=["x"])
    assert torch.equal(dataset.x, theirs.x.float()) and torch.equal(dataset.x,
                                                                   data.x.float())


def test_a_semicolon_table_with_decimal_commas(tmp_path):
    """The spreadsheets of the locales that write 0,5 for one half separate columns with
    semicolons. An edge list "1;2;0,5" was split at its comma ("an edge list needs two
    columns; line 1 has 1"), and features "1,5;2" were refused; both read now, the decimal
    comma as a point (a feature file of such a spreadsheet against numpy's parse of the
    same numbers written with points)."""
    (tmp_path / "edges.csv").write_text("Source;Target;Weight\n0;1;0,5\n1;2;1,25\n2;0;2\n")
    rng = np.random.default_rng(4)
    x = np.round(rng.normal(size=(3, 4)), 3)
    x[1, 2] = 1500.0  # a whole number, no comma
    (tmp_path / "x.csv").write_text("a;b;c;d\n" + "".join(
        ";".join(f"{v:g}".replace(".", ",") for v in row) + "\n" for row in x))
    (tmp_path / "y.csv").write_text("2\n0\n1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load_graph_file(str(tmp_path / "edges.csv"), features=str(tmp_path / "x.csv"),
                             labels=str(tmp_path / "y.csv"))
    assert ds.graph.edge_index.tolist() == [[0, 1, 2], [1, 2, 0]]
    assert np.array_equal(ds.x.numpy(), x.astype(np.float32)) and ds.y.tolist() == [2, 0, 1]
    (tmp_path / "bad.csv").write_text("1;2,5\n1;1,234,5\n3;4\n")
    with pytest.raises(ValueError, match=r"line 2, column 2 holds '1,234,5', not a finite"):
        load_graph_file(str(tmp_path / "edges.csv"), features=str(tmp_path / "bad.csv"))


@pytest.mark.parametrize("suffix", [".npy", ".csv", ".pt"])
def test_one_hot_labels_are_read_as_classes(tmp_path, suffix):
    """Kipf's Planetoid arrays and a Keras pipeline's targets are one-hot rows: refused as
    "3 columns", they read as the column of each row's 1 now, an all-zero row unlabelled
    (against the ids they were made from); a multi-hot row is refused by row."""
    (tmp_path / "e.csv").write_text("0,1\n1,2\n2,3\n3,0\n")
    ids = np.array([2, -1, 0, 1])
    one_hot = np.zeros((4, 3), dtype=np.int64)
    one_hot[ids >= 0, ids[ids >= 0]] = 1
    path = tmp_path / f"y{suffix}"
    for matrix, name in ((one_hot, "y"), (one_hot + np.eye(4, 3, dtype=np.int64), "multi")):
        path = tmp_path / f"{name}{suffix}"
        if suffix == ".npy":
            np.save(path, matrix)
        elif suffix == ".pt":
            torch.save(torch.from_numpy(matrix).bool(), path)
        else:
            np.savetxt(path, matrix, fmt="%d", delimiter=",", header="a,b,c", comments="")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load_graph_file(str(tmp_path / "e.csv"), labels=str(tmp_path / f"y{suffix}"))
        assert ds.y.tolist() == ids.tolist()
        with pytest.raises(ValueError, match=r"row 0 \(from 0\) is not one-hot \(several 1s"):
            load_graph_file(str(tmp_path / "e.csv"), labels=str(tmp_path / f"multi{suffix}"))


_NAMES = ["a", "b c", "ü", "x,y", "1", "07", "-3", "n;m", 'q"r', "日本", "z"]


def _random_graph(seed: int, directed: bool, named: bool):
    """Up to 9 nodes (isolated ones, names with spaces, commas, quotes, digits and other
    scripts) and up to 15 edges drawn with repeats and loops."""
    import random
    rng = random.Random(seed)
    g = nx.DiGraph() if directed else nx.Graph()
    count = rng.randint(1, 9)
    nodes = rng.sample(_NAMES, count) if named else list(range(count))
    g.add_nodes_from(nodes)
    g.add_edges_from((rng.choice(nodes), rng.choice(nodes)) for _ in range(rng.randint(0, 15)))
    return g


def _writers(named: bool) -> dict:
    import json
    """networkx's writers by format (``writer(graph, path)``); Pajek's only for graphs of
    integer nodes."""
    writers = {"graphml": nx.write_graphml, "gexf": nx.write_gexf,
               "gml": lambda g, p: nx.write_gml(g, p, stringizer=str),
               "json": lambda g, p: p.write_text(json.dumps(nx.node_link_data(g, edges="links")))}
    if not named:  # (networkx's Pajek writer quotes names its reader cannot read back)
        writers["net"] = nx.write_pajek
    return writers


@pytest.mark.parametrize("seed", range(25))
def test_random_graphs_read_back_in_every_format(tmp_path, seed):
    """Each format networkx writes, read back: the same nodes and edges (an undirected edge
    both ways, a loop once), by name where the file names its nodes. Pajek's undirected
    loops were read twice (a loop doubled in every degree normalisation)."""
    for directed in (False, True):
        for named in (False, True):
            g = _random_graph(seed, directed, named)
            want = [(str(u), str(v)) for u, v in g.edges()]
            want += [] if directed else [(str(v), str(u)) for u, v in g.edges() if u != v]
            for fmt, write in _writers(named).items():
                path = tmp_path / f"g{int(directed)}{int(named)}.{fmt}"
                write(g, path)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ds = load_graph_file(str(path))
                names = ds.node_names or [str(v) for v in range(ds.graph.num_nodes)]
                got = [(names[u], names[v]) for u, v in ds.graph.edge_index.t().tolist()]
                assert ds.graph.num_nodes == g.number_of_nodes(), fmt
                assert sorted(got) == sorted(want), fmt


def test_a_header_naming_other_columns_than_the_rows_is_refused(tmp_path):
    """A one-column features file of decimal commas under a header ("score", then "0,5")
    was split at its commas into two columns, 0 and 5, without a word; a header that names
    another number of columns than the rows hold is refused."""
    (tmp_path / "e.csv").write_text("0,1\n1,2\n2,0\n")
    (tmp_path / "x.csv").write_text("score\n-0,117\n0,133\n0,5\n")
    with pytest.raises(ValueError, match=r"x.csv: its header names 1 column\(s\) \['score'\], "
                                         r"but line 2 holds 2 values \(decimal commas"):
        load_graph_file(str(tmp_path / "e.csv"), features=str(tmp_path / "x.csv"))
    (tmp_path / "ok.csv").write_text("a,b\n-0,117\n0,133\n0,5\n")
    assert load_graph_file(str(tmp_path / "e.csv"), features=str(tmp_path / "ok.csv")) \
        .x.tolist() == [[0, 117], [0, 133], [0, 5]]


@pytest.mark.parametrize("missing", ["", "nan", "None", "null"])
@pytest.mark.parametrize("header", [None, "label", "class"])
@pytest.mark.parametrize("names", [True, False])
def test_positional_labels_with_missing_first_and_last(tmp_path, missing, header, names):
    """A labels file, one per line, whose first and last nodes have none: "None" first was
    taken for a header (every label then went to the node before), and under a header a
    blank last line was taken for the file's end, so the header became the first node's
    class (shifted by one, without a word)."""
    (tmp_path / "e.csv").write_text("".join(f"{i},{(i + 1) % 6}\n" for i in range(6)))
    given = ["cat", "dog", "cat", "emu"] if names else ["2", "0", "2", "5"]
    lines = ([header] if header else []) + [missing, *given, missing]
    (tmp_path / "y.csv").write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load_graph_file(str(tmp_path / "e.csv"), labels=str(tmp_path / "y.csv"))
    want = [0, 1, 0, 2] if names else [2, 0, 2, 5]
    assert ds.y.tolist() == [-1, *want, -1]


@pytest.mark.parametrize("name, text", [
    ("out.multi", "% sym unweighted\n% 3 3 3\n1 2\n2 1\n2 3\n"),
    ("g.gr", "p edge 3 3\ne 1 2\ne 2 1\ne 2 3\n"),
    ("snap.txt", "# Undirected graph: test\n0\t1\n1\t0\n1\t2\n")])
def test_a_pair_listed_both_ways_where_each_edge_is_declared_once_is_said(tmp_path, name,
                                                                           text):
    """KONECT's "sym", DIMACS "e" lines and SNAP's undirected files list each edge once; a
    pair listed both ways (a mistake, or two parallel edges written in opposite
    directions) is read as one undirected edge, and said: the edge count would differ."""
    (tmp_path / name).write_text(text)
    with pytest.warns(UserWarning, match=r"declares each undirected edge once, yet 2 of its 3 "
                                         r"edges have their reverse listed too"):
        ds = load_graph_file(str(tmp_path / name))
    assert sorted(map(tuple, ds.graph.edge_index.t().tolist())) == [(0, 1), (1, 0), (1, 2),
                                                                     (2, 1)]


def test_labels_of_decimal_commas_are_not_taken_for_one_hot_rows(tmp_path):
    """"1,0" / "0,0" lines are class ids 1 and 0 written with decimal commas as much as
    one-hot rows (class 0, no label): refused, not guessed."""
    (tmp_path / "e.csv").write_text("0,1\n1,2\n2,0\n")
    (tmp_path / "y.csv").write_text("1,0\n0,0\n1,0\n")
    with pytest.raises(ValueError, match=r"y.csv: every line holds a number, a comma and 0"):
        load_graph_file(str(tmp_path / "e.csv"), labels=str(tmp_path / "y.csv"))
    (tmp_path / "hot.csv").write_text("1,0\n0,1\n1,0\n")  # both classes used: one-hot
    assert load_graph_file(str(tmp_path / "e.csv"), labels=str(tmp_path / "hot.csv")) \
        .y.tolist() == [0, 1, 0]


def test_a_saved_heterodata_is_a_heterogeneous_dataset(tmp_path):
    """A HeteroData saved with torch.save was refused ("names ...BaseStorage, which graphloc
    does not unpickle"); it loads as HeteroNodeDataset.from_pyg reads the object itself,
    for the heterogeneous models, and options that would change it are refused."""
    from torch_geometric.data import HeteroData

    from graphloc.datasets import load_dataset
    from graphloc.datasets.hetero import HeteroNodeDataset
    gen = torch.Generator().manual_seed(0)
    data = HeteroData()
    data["paper"].x = torch.randn(6, 3, generator=gen)
    data["paper"].y = torch.tensor([0, 1, 0, 1, 1, 0])
    for split, rows in (("train_mask", [0, 1]), ("val_mask", [2, 3]), ("test_mask", [4, 5])):
        data["paper"][split] = torch.zeros(6, dtype=torch.bool).index_fill(0,
                                                                           torch.tensor(rows),
                                                                           True)
    data["author"].x = torch.randn(4, 2, generator=gen)
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 2, 3], [0, 2, 4, 5]])
    data["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1, 5], [1, 2, 0]])
    torch.save(data, tmp_path / "h.pt")
    ours, want = load_dataset(str(tmp_path / "h.pt")), HeteroNodeDataset.from_pyg(data)
    assert isinstance(ours, HeteroNodeDataset) and ours.target == "paper"
    assert ours.y.tolist() == want.y.tolist()
    assert all(torch.equal(ours.x[t], want.x[t]) for t in want.x)
    for split in ("train_index", "val_index", "test_index"):
        assert torch.equal(getattr(ours, split), getattr(want, split))
    for relation in data.edge_types:
        assert torch.equal(ours.graph[relation].edge_index, data[relation].edge_index)
    with pytest.raises(ValueError, match=r"h.pt holds a HeteroData: its features, labels and "
                                         r"relations come from it"):
        load_graph_file(str(tmp_path / "h.pt"), undirected=True)


def test_commented_out_edges_among_the_edges_are_named(tmp_path):
    """A hashtag graph: lines whose first name starts with '#' read as comments and their
    edges were lost without a word. Such lines after the first edge, with the edges'
    number of fields, are named in a warning; a SNAP-style comment header is not."""
    path = tmp_path / "tags.csv"
    path.write_text("alice,#python\n#python,#datascience\nbob,#python\n%p,bob\n")
    with pytest.warns(UserWarning, match=r"tags.csv: 2 line\(s\) among the edges start with "
                                         r"'#' or '%' .* \(line 2, 4\)") as record:
        ds = load_graph_file(str(path), undirected=True)
    assert ds.node_names == ["alice", "#python", "bob"]  # the other two lines skipped
    assert ds.graph.num_edges == 4
    assert all(w.filename == __file__ for w in record if "'#' or '%'" in str(w.message))
    snap = tmp_path / "snap.txt"
    snap.write_text("# Directed graph: snap.txt\n# FromNodeId\tToNodeId\na\tb\nb\tc\n")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*'#' or '%'")
        assert load_graph_file(str(snap)).graph.num_edges == 2
