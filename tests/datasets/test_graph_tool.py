"""graph-tool's binary format (``graphloc.datasets.graph_tool``) against files written here
by a writer of the documented layout (graph-tool itself is not installable here): the
graph, each value type's property map read past, the byte orders and index widths, and
damaged files refused by name."""

import pickle
import struct
import warnings

import networkx as nx
import pytest
import zstandard

from graphloc.datasets.files import load_graph_file

# value type -> struct code of a scalar or a vector's element (5, 12: long double, 16 bytes)
SCALAR_CODES = {0: "?", 1: "h", 2: "i", 3: "q", 4: "d"}
VECTOR_CODES = {7: "?", 8: "h", 9: "i", 10: "q", 11: "d"}


def _encode(value_type, value, order):
    def text(s):
        data = s if isinstance(s, bytes) else s.encode()
        return struct.pack(order + "Q", len(data)) + data
    if value_type in SCALAR_CODES:
        return struct.pack(order + SCALAR_CODES[value_type], value)
    if value_type == 5:
        return bytes(16)
    if value_type == 6:
        return text(value)
    if value_type in VECTOR_CODES:
        return struct.pack(order + "Q", len(value)) + b"".join(
            struct.pack(order + VECTOR_CODES[value_type], v) for v in value)
    if value_type == 12:
        return struct.pack(order + "Q", len(value)) + bytes(16 * len(value))
    if value_type == 13:
        return struct.pack(order + "Q", len(value)) + b"".join(text(v) for v in value)
    return text(pickle.dumps(value))  # 14: a Python object


def gt_bytes(n, adjacency, directed, properties=(), big_endian=False):
    """A .gt file: ``adjacency[v]`` lists v's out-neighbours (an undirected edge in one
    endpoint's list); ``properties``: (key 0/1/2, name, value type, values)."""
    order = ">" if big_endian else "<"
    width = "B" if n < 2**8 else "H" if n < 2**16 else "I"
    comment = b"written by graphloc's tests"
    out = [b"\xe2\x9b\xbe gt", bytes([1, int(big_endian)]),
           struct.pack(order + "Q", len(comment)), comment, bytes([int(directed)]),
           struct.pack(order + "Q", n)]
    for v in range(n):
        out.append(struct.pack(order + "Q", len(adjacency[v])))
        out += [struct.pack(order + width, w) for w in adjacency[v]]
    out.append(struct.pack(order + "Q", len(properties)))
    for key, name, value_type, values in properties:
        out += [bytes([key]), struct.pack(order + "Q", len(name)), name.encode(),
                bytes([value_type])]
        out += [_encode(value_type, v, order) for v in values]
    return b"".join(out)


def _adjacency(g):
    """g's edges in the file's layout: each in its first endpoint's list, in g's order."""
    adjacency = [[] for _ in g]
    for u, v in g.edges():
        adjacency[u].append(v)
    return adjacency


def _load(path, **kwargs):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        dataset = load_graph_file(str(path), **kwargs)
    return dataset, [str(w.message) for w in said]


def _edges(dataset):
    return sorted(map(tuple, dataset.graph.edge_index.t().tolist()))


def test_an_undirected_graph_with_names_reads_both_ways(tmp_path):
    """netzschleuder's layout: vertex names, a drawing's positions, a class and edge
    weights; the names name the nodes, the other properties are named as unread."""
    g = nx.karate_club_graph()
    properties = [
        (0, "description", 6, ["Zachary's karate club"]),
        (1, "_pos", 11, [[float(v), 2.0 * v] for v in g]),
        (1, "club", 6, [g.nodes[v]["club"] for v in g]),
        (2, "weight", 2, [g.edges[e]["weight"] for e in g.edges()]),
        (1, "name", 6, [f"member {v}" for v in g])]
    (tmp_path / "karate.gt").write_bytes(gt_bytes(34, _adjacency(g), False, properties))
    dataset, said = _load(tmp_path / "karate.gt")
    assert _edges(dataset) == sorted([*g.edges(), *((v, u) for u, v in g.edges())])
    assert dataset.node_names == [f"member {v}" for v in g]
    assert said == [f"{tmp_path / 'karate.gt'}: edge attributes ['weight'] and node "
                    "attributes ['club'] are not read: the datasets carry no edge "
                    "attributes, and node features come from a features file (default: "
                    "degree features); label_column (--label-column) reads a node attribute "
                    "as the classes"]


@pytest.mark.parametrize("n", [20, 255, 256, 300])
@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("suffix", ["", ".zst"])
def test_a_directed_graph_in_either_byte_order_and_index_width(tmp_path, n, big_endian,
                                                               suffix):
    """Indices are 1 byte below 256 vertices and 2 from 256; netzschleuder ships .gt.zst."""
    g = nx.gnm_random_graph(n, 3 * n, seed=n, directed=True)
    g.add_edge(5, 5)  # a loop
    data = gt_bytes(n, _adjacency(g), True, big_endian=big_endian)
    path = tmp_path / f"g.gt{suffix}"
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if suffix else data)
    dataset, said = _load(path)
    assert dataset.graph.num_nodes == n and _edges(dataset) == sorted(g.edges())
    assert dataset.node_names is None and said == []


def test_every_value_type_is_read_past(tmp_path):
    """A map of each of graph-tool's 15 value types, on the graph, the vertices and the
    edges, before the names: a wrong size for any type would misread the names."""
    g = nx.path_graph(4)
    edges = len(g.edges())
    samples = {0: True, 1: -3, 2: 70000, 3: 2**40, 4: 0.5, 5: None, 6: "héllo",
               7: [True, False], 8: [1, -2], 9: [3], 10: [2**40, 1], 11: [0.25, 1.5],
               12: [None, None], 13: ["a", "bc"], 14: {"python": [1, 2]}}
    properties = [(key, f"p{key}_{t}", t, [value] * size)
                  for key, size in ((0, 1), (1, 4), (2, edges))
                  for t, value in samples.items()]
    properties.append((1, "name", 3, [10, 20, 30, 40]))  # integer names
    for big_endian in (False, True):
        path = tmp_path / f"types{int(big_endian)}.gt"
        path.write_bytes(gt_bytes(4, _adjacency(g), False, properties, big_endian))
        dataset, said = _load(path)
        assert dataset.node_names == ["10", "20", "30", "40"]
        assert _edges(dataset) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]
        assert "p2_14" in said[0] and "p1_0" in said[0]


@pytest.mark.parametrize("names", [["a", "b", "a"], None])
def test_names_only_where_every_vertex_has_its_own(tmp_path, names):
    properties = [(1, "name", 6, names)] if names else [(1, "name", 4, [0.5, 1.5, 2.5])]
    (tmp_path / "g.gt").write_bytes(gt_bytes(3, [[1], [2], []], True, properties))
    dataset, said = _load(tmp_path / "g.gt")
    assert dataset.node_names is None and "node attributes ['name']" in said[0]


def test_labels_keyed_by_a_gt_graphs_names(tmp_path):
    properties = [(1, "name", 6, ["x", "y", "z"])]
    (tmp_path / "g.gt").write_bytes(gt_bytes(3, [[1], [2], []], False, properties))
    (tmp_path / "y.csv").write_text("z,1\nx,0\n")
    dataset, _ = _load(tmp_path / "g.gt", labels=str(tmp_path / "y.csv"))
    assert dataset.y.tolist() == [0, -1, 1]


def _damaged(data):
    good = gt_bytes(3, [[1, 2], [2], []], True, [(1, "w", 4, [1.0, 2.0, 3.0])])
    degree_at = good.index(struct.pack("<QQ", 3, 2)) + 8  # past the count, vertex 0's
    return {
        "magic": (b"GT" + good[2:], r"not a graph-tool file \(it starts with b'GT"),
        "version": (good[:6] + b"\x02" + good[7:], r"graph-tool format version 2"),
        "cut": (good[:-5], r"the file ends inside vertex property 'w'"),
        "cut adjacency": (good[:60], r"the file ends inside the 3 vertices' neighbour counts"),
        # vertex 0 says it has 2**40 neighbours (a damaged count)
        "degree": (good[:degree_at] + struct.pack("<Q", 2**40) + good[degree_at + 8:],
                   r"the file ends inside vertex 0's neighbours"),
        "neighbour": (gt_bytes(3, [[1], [7], []], True),
                      r"vertex 1 lists the neighbour 7, but the file has 3 vertices"),
        "value type": (gt_bytes(2, [[], []], True, [(1, "q", 15, [])]),
                       r"vertex property 'q' has the value type 15"),
        "key": (gt_bytes(2, [[], []], True, [(3, "q", 2, [])]),
                r"a property map of kind 3"),
        "vertices": (gt_bytes(0, [], True)[:-8 - 8] + struct.pack("<Q", 10**15) +
                     struct.pack("<Q", 0), r"its header's 1,000,000,000,000,000 vertices "
                                           r"are more than"),
    }[data]


@pytest.mark.parametrize("case", ["magic", "version", "cut", "cut adjacency", "degree",
                                  "neighbour",
                                  "value type", "key", "vertices"])
def test_a_damaged_file_is_refused_by_name(tmp_path, case):
    data, match = _damaged(case)
    (tmp_path / "bad.gt").write_bytes(data)
    with pytest.raises(ValueError, match=r"bad.gt: " + match if case != "vertices" else match):
        load_graph_file(str(tmp_path / "bad.gt"))


def test_an_empty_gt_graph_has_no_nodes(tmp_path):
    (tmp_path / "e.gt").write_bytes(gt_bytes(0, [], False))
    with pytest.raises(ValueError, match=r"e.gt has no vertices"):
        load_graph_file(str(tmp_path / "e.gt"))


@pytest.mark.parametrize("value_type, values, expected", [
    (2, [1, 0, 1], [1, 0, 1]),  # polblogs' "value": class ids
    (0, [True, False, True], [1, 0, 1]),
    (4, [2.0, 0.0, 2.0], [2, 0, 2]),
    (6, ["right", "left", "right"], [1, 0, 1])])
def test_a_vertex_property_as_the_classes(tmp_path, value_type, values, expected):
    properties = [(1, "value", value_type, values), (1, "w", 4, [0.5] * 3)]
    (tmp_path / "g.gt").write_bytes(gt_bytes(3, [[1], [2], []], True, properties))
    dataset, said = _load(tmp_path / "g.gt", label_column="value")
    assert dataset.y.tolist() == expected
    assert "['w']" in said[0] and "'value'" not in said[0]
    with pytest.raises(ValueError, match=r"no node has the attribute 'klass' \(label_column\); "
                                         r"its node attributes: \['value', 'w'\]"):
        load_graph_file(str(tmp_path / "g.gt"), label_column="klass")
    with pytest.raises(ValueError, match=r"node attribute 'pos' holds several values per "
                                         r"node \(a list\), not one class"):
        (tmp_path / "v.gt").write_bytes(gt_bytes(3, [[1], [2], []], True,
                                                 [(1, "pos", 11, [[1.0]] * 3)]))
        load_graph_file(str(tmp_path / "v.gt"), label_column="pos")


def test_vertex_properties_as_the_features(tmp_path):
    """Scalar properties a column each, a vector property (a feature vector per vertex) as
    many columns as its vectors hold, big-endian too."""
    properties = [(1, "a", 4, [0.5, 1.5, 2.5]), (1, "b", 2, [7, 8, 9]), (1, "c", 0, [True] * 3),
                  (1, "v", 11, [[1.0, -1.0], [2.0, -2.0], [3.0, -3.0]]),
                  (1, "w", 9, [[1], [2, 3], [4]]), (1, "o", 14, [{}] * 3)]
    for big_endian in (False, True):
        (tmp_path / "g.gt").write_bytes(gt_bytes(3, [[1], [2], []], True, properties,
                                                 big_endian))
        dataset, said = _load(tmp_path / "g.gt", feature_columns=["b", "v", "a", "c"])
        assert dataset.x.tolist() == [[7, 1, -1, 0.5, 1], [8, 2, -2, 1.5, 1],
                                      [9, 3, -3, 2.5, 1]]
        assert "['o', 'w']" in said[0]
    with pytest.raises(ValueError, match=r"node 1 has 2 values of 'w' and node 0 1"):
        load_graph_file(str(tmp_path / "g.gt"), feature_columns=["w"])
    with pytest.raises(ValueError, match=r"vertex property 'o' holds objects"):
        load_graph_file(str(tmp_path / "g.gt"), feature_columns=["o"])
    with pytest.raises(ValueError, match=r"node 0 has no attribute 'z'"):
        load_graph_file(str(tmp_path / "g.gt"), feature_columns=["z"])


@pytest.mark.parametrize("seed", range(20))
def test_random_multigraphs_with_loops_read_as_listed(tmp_path, seed):
    """Random edges with repeats, loops and parallel edges listed either way: a directed
    graph as listed; an undirected one every edge both ways, a loop once. Two parallel
    undirected edges listed u -> v and v -> u were read as one (each taken for the other's
    reverse)."""
    import random
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    for directed in (False, True):
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 15))]
        adjacency = [[v for u, v in edges if u == w] for w in range(n)]
        (tmp_path / "g.gt").write_bytes(gt_bytes(n, adjacency, directed))
        listed = [(u, v) for w in range(n) for u, v in edges if u == w]  # the file's order
        want = listed + ([] if directed else [(v, u) for u, v in listed if u != v])
        dataset, _ = _load(tmp_path / "g.gt")
        assert dataset.graph.edge_index.t().tolist() == [list(e) for e in want]
