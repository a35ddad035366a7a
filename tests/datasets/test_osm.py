"""The offline builder on the bundled Helsinki extract and on networkx street graphs."""

import gzip
import hashlib
import io
import json
import os
import re
import tarfile

import networkx as nx
import pytest
import torch
from helpers import requires_ext
from osm_extracts import SEEDS, random_extract, street_row
from test_city import server  # noqa: F401 (fixture)

from graphloc.datasets import (
    CityNetwork,
    build_city_network,  # the README's import
    road_statistics,
)
from graphloc.datasets.osm import (
    OsmRoads,
    _impute_speeds,
    _NetworkxRoads,
    _simplify,
    _street_network,
)

HELSINKI = os.path.join(os.path.dirname(__file__), "..", "..", "graphloc", "datasets", "samples",
                        "helsinki.osm.pbf")
pytest.importorskip("osmium")
pytestmark = requires_ext


def read_release(path):
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: torch.load(io.BytesIO(tar.extractfile(m).read()))
                for m in tar.getmembers()}


@pytest.fixture(scope="module")
def helsinki(tmp_path_factory):
    return build_city_network(HELSINKI, str(tmp_path_factory.mktemp("built")))


def test_helsinki_is_a_connected_simplified_street_graph(helsinki):
    arrays = read_release(helsinki)
    x, edge_index = arrays["node_features_augmented.pt"], arrays["edge_indices.pt"]
    n = x.size(0)
    assert x.shape[1] == 37 and arrays["node_features.pt"].shape == (n, 12)
    assert not (edge_index[0] == edge_index[1]).any()
    from graphloc import Graph
    stats = road_statistics(Graph(edge_index, num_nodes=n))
    assert 2.3 <= stats["mean_degree"] <= 3.3 and stats["hop_diameter"] > 20
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    adj = sp.coo_matrix((torch.ones(edge_index.size(1)).numpy(), edge_index.numpy()),
                        shape=(n, n))
    assert connected_components(adj, directed=False)[0] == 1
    degree = torch.bincount(edge_index[0], minlength=n)
    # simplified: a node with two neighbours stays only where a one-way street meets a
    # two-way one (or a loop street): few of them
    assert (degree == 2).float().mean() < 0.2
    counts = torch.bincount(arrays["10-chunk_16-hop_node_labels.pt"])
    assert len(counts) == 10 and counts.max() - counts.min() <= n // 10 + 1
    assert (x[:, 0].min() > 24.5) and (x[:, 0].max() < 25.3) and (x[:, 1].min() > 60.0)
    onehots = x[:, 3:12].sum(1)  # landuse one-hot
    torch.testing.assert_close(onehots, torch.ones(n))


def test_helsinki_is_what_the_release_pipeline_makes_of_the_extract(helsinki):
    """Against the City-Networks release's own code (generate_network.py and
    feature_engineering on osmnx 1.9.4's graph of the extract; its tensors stored by
    ``citynetworks_oracle.py``): the same node features (street counts, landuse with the
    release's tie order), edges in the same order, labels and split, and the augmented
    features to the bit in float32 but for one node, where two parallel two-way streets
    are averaged in the order of the release's unstable sort. Its one-hot widths come
    from its data (Helsinki's lanes fill 7 columns); graphloc pads to fixed widths."""
    import numpy as np
    release = np.load(os.path.join(os.path.dirname(__file__), "data",
                                   "citynetworks_helsinki.npz"))
    built = read_release(helsinki)
    for ours, theirs in [("node_features.pt", "node_features"),
                         ("edge_indices.pt", "edge_indices"),
                         ("10-chunk_16-hop_node_labels.pt", "10_chunk_16_hop_node_labels"),
                         ("train_mask.pt", "train_mask"), ("valid_mask.pt", "valid_mask"),
                         ("test_mask.pt", "test_mask")]:
        assert np.array_equal(built[ours].numpy(), release[theirs]), ours
    x = built["node_features_augmented.pt"]
    padded = [12 + 4 + 7, 12 + 4 + 8]  # after length, speed, oneway (2): lanes 8 and 9
    assert (x[:, padded] == 0).all()
    kept = [c for c in range(x.size(1)) if c not in padded]
    differ = (x[:, kept] != torch.from_numpy(release["node_features_augmented"])).any(1)
    assert int(differ.sum()) <= 1


def test_build_is_byte_reproducible(helsinki, tmp_path):
    again = build_city_network(HELSINKI, str(tmp_path))
    digest = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in (helsinki, again)]
    assert digest[0] == digest[1]


def test_shipped_helsinki_build_is_the_builders_output(helsinki):
    """CityNetwork copies the shipped build instead of building (no osmium needed after a
    plain pip install): it must be what the current builder writes, byte for byte. A
    builder change that moves it must bump BUILDER_VERSION and ship the new build."""
    from graphloc.datasets.city import SAMPLES
    from graphloc.datasets.osm import BUILDER_VERSION
    shipped = os.path.join(SAMPLES, f"helsinki-built-v{BUILDER_VERSION}.tar.gz")
    digest = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in (shipped, helsinki)]
    assert digest[0] == digest[1]


def test_helsinki_loads_offline_through_citynetwork(tmp_path):
    from graphloc.datasets.osm import BUILDER_VERSION
    # what an older builder left (here unreadable): named without the version, not read
    for stale in ("raw/helsinki.tar.gz", "processed/helsinki_augmented_features_16-hop_"
                  "10-class.pt"):
        (tmp_path / "helsinki" / stale).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "helsinki" / stale).write_bytes(b"built by builder 1")
    ds = CityNetwork(str(tmp_path), "helsinki")
    assert ds.x.shape[1] == 37 and ds.num_classes == 10
    built = f"built-v{BUILDER_VERSION}"
    assert os.path.exists(tmp_path / "helsinki" / "raw" / built / "helsinki.tar.gz")
    assert f"helsinki_augmented_features_16-hop_10-class_{built}.pt" in os.listdir(
        tmp_path / "helsinki" / "processed")
    small = CityNetwork(str(tmp_path), "helsinki", augmented=False)
    assert small.x.shape[1] == 12 and torch.equal(small.y, ds.y)


def test_a_built_city_loads_with_pygs_loader(helsinki, server, tmp_path,  # noqa: F811
                                             monkeypatch):
    pyg_city = pytest.importorskip("torch_geometric.datasets.city")
    served, url, _ = server
    arrays = read_release(helsinki)
    n = arrays["node_features.pt"].size(0)
    monkeypatch.setitem(__import__("graphloc.datasets.city").datasets.city.REGISTRY, "paris",
                        {"nodes": n, "edges": arrays["edge_indices.pt"].size(1) // 2})
    build_city_network(HELSINKI, str(served), name="paris")
    monkeypatch.setattr(pyg_city.CityNetwork, "url", url + "/")
    theirs = pyg_city.CityNetwork(str(tmp_path / "pyg"), "paris")[0]
    assert torch.equal(theirs.x, arrays["node_features_augmented.pt"])
    assert torch.equal(theirs.y, arrays["10-chunk_16-hop_node_labels.pt"])


def _way(osmid, length=55.6, **attrs):
    return {"osmid": osmid, "highway": "residential", "oneway": False, "lanes": None,
            "maxspeed": None, "reversed": False, "length": length, **attrs}


def test_simplification_merges_chains_across_way_junctions():
    """osmnx 1.x's default (strict) simplification: a plain street continues through the
    node where one OSM way ends and the next begins (3 here); only its ends stay."""
    chain = [(0, 1, _way(7)), (1, 2, _way(7)), (2, 3, _way(7)), (3, 4, _way(8, lanes="2")),
             (4, 5, _way(8, lanes="2"))]
    edges = chain + [(v, u, {**a, "reversed": True}) for u, v, a in chain]
    merged = _simplify(edges, list(range(6)))
    streets = {(u, v): a for u, v, a in merged}
    assert set(streets) == {(0, 5), (5, 0)}
    assert streets[(0, 5)]["length"] == pytest.approx(5 * 55.6)
    assert streets[(0, 5)]["osmid"] == [7, 8] and streets[(5, 0)]["reversed"] is True
    # a value some of the ways lack is merged over those that have it, as osmnx does
    assert streets[(0, 5)]["lanes"] == "2" and streets[(0, 5)]["maxspeed"] is None


def test_one_hot_columns_follow_the_releases_counts_others_included():
    """The release's one_hot_top_k keeps the 8 most frequent values, relabels the rest
    "others", and orders the columns by count: "others" (24 here) comes third, between
    v1 (25) and the values of 10; values tied at 10 by name."""
    from graphloc.datasets.osm import _one_hot, _vocabulary
    counts = {"v0": 30, "v1": 25, **{f"v{i}": 10 for i in range(2, 8)}, "v8": 9, "v9": 8,
              "w": 7}
    values = [v for v, n in counts.items() for _ in range(n)]
    vocab = _vocabulary(values, "lanes")
    assert vocab == ["v0", "v1", "others", "v2", "v3", "v4", "v5", "v6", "v7"]
    columns = _one_hot(values, vocab, 9)
    assert columns.sum(0).tolist() == [30, 25, 24, 10, 10, 10, 10, 10, 10]
    assert columns[values.index("w")].tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 0]
    # a fixed vocabulary (oneway, reversed) keeps its values, ordered by count too
    assert _vocabulary(["True", "True", "False"], "oneway") == ["True", "False"]
    assert _vocabulary(["False", "True"], "oneway") == ["False", "True"]
    # fewer values than columns: no "others", the spare columns stay zero
    assert _one_hot(["b", "a", "b"], _vocabulary(["b", "a", "b"], "lanes"), 9
                    ).sum(0).tolist() == [2, 1, 0, 0, 0, 0, 0, 0, 0]


def _osmnx_answers() -> dict:
    path = os.path.join(os.path.dirname(__file__), "data", "osmnx_1_9_4_streets.json.gz")
    with gzip.open(path, "rt") as f:
        return json.load(f)["extracts"]


def _as_street_graph(roads) -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    for n in roads.order:
        g.add_node(n, x=roads.coords[n][0], y=roads.coords[n][1])
    for u, v, attrs in roads.edges:
        g.add_edge(u, v, **{k: value for k, value in attrs.items() if value is not None})
    return g


@pytest.mark.parametrize("source", ["osm file", "street graph"])
def test_streets_are_osmnx_1x_streets_on_random_extracts(tmp_path, source):
    """Steps 1 to 4 against osmnx 1.9.4 itself (the published pipeline's code; its answers
    stored by ``osmnx_oracle.py``) on 300 random extracts: the same streets (ends,
    merged attributes, lengths, speeds), the same nodes and street counts. Before,
    graphloc kept nodes where two ways meet (osmnx's non-default rule), a node listed twice
    in a row as a loop, lone rings, and read speeds otherwise: almost every extract
    differed."""
    answers, compared = _osmnx_answers(), 0
    for seed in SEEDS:
        path = tmp_path / f"{seed}.osm"
        path.write_text(random_extract(seed))
        expected = answers[str(seed)]
        if not expected["streets"]:  # osmnx: an empty graph
            with pytest.raises(ValueError, match="no public road ways|lone rings only"):
                _street_network(OsmRoads(str(path)))
            continue
        roads = OsmRoads(str(path))
        if source == "street graph":
            roads = _NetworkxRoads(_as_street_graph(roads))
        streets, nodes, counts = _street_network(roads)
        speeds = _impute_speeds(streets)
        got = [street_row(u, v, a, a["length"], speed)
               for (u, v, a), speed in zip(streets, speeds, strict=True)]
        assert sorted(got, key=str) == sorted(expected["streets"], key=str), seed
        # as a mapping: osmnx orders the nodes of a largest component under half the
        # graph by its set of ids (networkx's subgraph), which a city's never is
        assert {str(n): counts[n] for n in nodes} == dict(expected["nodes"]), seed
        compared += 1
    assert compared > 250


def test_networkx_input_and_bad_input(tmp_path):
    g = nx.MultiDiGraph(simplified=True)
    grid = nx.grid_2d_graph(6, 6)
    for (r, c) in grid.nodes:
        g.add_node((r, c), x=24.9 + 0.001 * c, y=60.1 + 0.0005 * r)
    for u, v in grid.edges:
        for a, b, rev in ((u, v, False), (v, u, True)):
            g.add_edge(a, b, length=55.0, highway="residential", oneway=False, reversed=rev)
    arrays = read_release(build_city_network(g, str(tmp_path), name="grid", hops=4))
    assert arrays["node_features_augmented.pt"].shape == (36, 37)
    assert arrays["edge_indices.pt"].shape == (2, 2 * 60)
    # the same graph saved as osmnx saves GraphML (every attribute a string) builds the same
    saved = nx.relabel_nodes(g, {n: f"{n[0]}-{n[1]}" for n in g.nodes})
    saved.graph = {k: str(v) for k, v in saved.graph.items()}
    for _, d in saved.nodes(data=True):
        d.update({k: str(v) for k, v in d.items()})
    for _, _, d in saved.edges(data=True):
        d.update({k: str(v) for k, v in d.items()})
    nx.write_graphml(saved, tmp_path / "grid.graphml")
    from_file = read_release(build_city_network(str(tmp_path / "grid.graphml"),
                                                str(tmp_path / "from_file"), name="grid",
                                                hops=4))
    assert from_file.keys() == arrays.keys()
    for key, value in arrays.items():
        assert torch.equal(from_file[key], value), key
    with pytest.raises(FileNotFoundError, match="no GraphML file at"):
        build_city_network(str(tmp_path / "missing.graphml"), str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no OSM file at"):
        build_city_network(str(tmp_path / "missing.osm.pbf"), str(tmp_path))
    bad = tmp_path / "bad.osm.pbf"
    bad.write_bytes(b"this is not protobuf")
    with pytest.raises(ValueError, match="not a readable OSM file"):
        build_city_network(str(bad), str(tmp_path))
    g.add_node("nowhere")
    with pytest.raises(ValueError, match="node 'nowhere' has no 'x'/'y'"):
        build_city_network(g, str(tmp_path))


def _osm_xml(nodes: dict, ways: list, relations: list) -> str:
    """A tiny OSM XML file: nodes {id: (x, y, tags)} in 0.001-degree units, ways
    [(id, refs, tags)], relations [(id, [(way, role)], tags)]."""
    tag = lambda tags: "".join(f'<tag k="{k}" v="{v}"/>' for k, v in tags.items())  # noqa
    out = ['<?xml version="1.0"?><osm version="0.6">']
    out += [f'<node id="{i}" version="1" lon="{24.9 + 0.001 * x:.6f}" '
            f'lat="{60.1 + 0.001 * y:.6f}">{tag(t)}</node>' for i, (x, y, t) in nodes.items()]
    out += [f'<way id="{i}" version="1">' + "".join(f'<nd ref="{r}"/>' for r in refs) +
            f"{tag(t)}</way>" for i, refs, t in ways]
    out += [f'<relation id="{i}" version="1">' + "".join(
        f'<member type="way" ref="{w}" role="{role}"/>' for w, role in members) +
        f"{tag(t)}</relation>" for i, members, t in relations]
    return "".join(out) + "</osm>"


def test_a_way_leaving_a_clipped_extract_is_split_at_the_missing_nodes(tmp_path):
    """Extracts clipped without complete ways reference nodes they do not hold. Those
    nodes were dropped and their neighbours joined: a straight road 2 <-> 4 across the
    gap. Now the way is cut there (oneway reversal kept per piece)."""
    from graphloc.datasets.osm import OsmRoads
    nodes = {1: (0, 0, {}), 2: (1, 0, {}), 4: (3, 0, {}), 5: (4, 0, {}), 6: (0, 2, {}),
             7: (1, 2, {}), 9: (5, 5, {})}
    ways = [(100, [1, 2, 3, 4, 5], {"highway": "residential"}),
            (101, [6, 7, 8, 9, 10], {"highway": "residential", "oneway": "-1"})]
    path = tmp_path / "clipped.osm"
    path.write_text(_osm_xml(nodes, ways, []))
    edges = sorted((u, v) for u, v, _ in OsmRoads(str(path)).edges)
    assert edges == [(1, 2), (2, 1), (4, 5), (5, 4), (7, 6)]


@pytest.mark.parametrize("coordinate", ["nan", "-nan", "inf", "abc", ""])
def test_a_coordinate_pyosmium_cannot_read_names_the_file(tmp_path, coordinate):
    """lat="nan" raised pyosmium's InvalidLocationError (neither a RuntimeError nor a
    ValueError) out of the builder, with no file named; the extract's and the landuse
    file's readers both name it now."""
    from graphloc.datasets.osm import OsmRoads, _osm_landuse
    text = _osm_xml({1: (0, 0, {}), 2: (1, 0, {})}, [(100, [1, 2], {"highway": "primary"})],
                    []).replace('lat="60.100000"', f'lat="{coordinate}"', 1)
    path = tmp_path / "damaged.osm"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"damaged.osm is not a readable OSM file: wrong "
                                         f"format for coordinate: '{coordinate}'"):
        OsmRoads(str(path))
    with pytest.raises(ValueError, match="landuse: .*damaged.osm is not a readable OSM file"):
        _osm_landuse(str(path))


def _write_osm(path, text: str) -> str:
    """``text`` written as an OSM file of ``path``'s format."""
    import bz2
    import gzip
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
    with opener(path, "wt") as f:
        f.write(text)
    return str(path)


def _three_node_road(**written) -> str:
    """A primary road 1 - 2 - 3 whose node 2 has the given attribute text (lat="91")."""
    text = _osm_xml({1: (0, 0, {}), 2: (1, 0, {}), 3: (2, 0, {})},
                    [(100, [1, 2, 3], {"highway": "primary"})], [])
    for key, value in written.items():
        node_2 = text.index('<node id="2"')
        start = text.index(f'{key}="', node_2)
        end = text.index('"', start + len(key) + 2)
        text = text[:start] + f'{key}="{value}"' + text[end + 1:]
    return text


@pytest.mark.parametrize("suffix", [".osm", ".osm.gz", ".osm.bz2"])
@pytest.mark.parametrize("written", [{"lat": "1e99"}, {"lat": "-1e56"}, {"lon": "1e300"},
                                     {"lon": "-2e2"}, {"lat": "9.1e1"}])
def test_an_exponent_coordinate_off_the_globe_is_refused_with_its_line(tmp_path, suffix,
                                                                        written):
    """libosmium reads lat="1e99" as 0.0 (its integer overflows to zero): the node sat on the
    equator and the road crossed the globe to it, with no word. Such a coordinate is now
    refused with the file and line, in plain and compressed XML alike."""
    from graphloc.datasets.osm import OsmRoads, _osm_landuse
    (key, value), = written.items()
    path = _write_osm(tmp_path / f"far{suffix}", _three_node_road(**written))
    message = rf'far{re.escape(suffix)}, line 1: {key}="{re.escape(value)}" lies off the globe'
    with pytest.raises(ValueError, match=message):
        OsmRoads(path)
    with pytest.raises(ValueError, match=message):
        _osm_landuse(path)


def test_an_exponent_coordinate_on_the_globe_reads_as_its_value(tmp_path):
    """6.01e1 is 60.1 degrees: the exponent alone is no reason to refuse a file."""
    from graphloc.datasets.osm import OsmRoads
    plain = OsmRoads(_write_osm(tmp_path / "plain.osm", _three_node_road(lat="60.1")))
    exponent = OsmRoads(_write_osm(tmp_path / "exp.osm", _three_node_road(lat="6.01e1")))
    assert exponent.coords == plain.coords and exponent.coords[2] == (24.901, 60.1)
    assert [e[:2] for e in exponent.edges] == [e[:2] for e in plain.edges]


@pytest.mark.parametrize("written, shown", [({"lat": "91"}, "lon 24.901, lat 91.0"),
                                            ({"lat": "-90.5"}, "lon 24.901, lat -90.5"),
                                            ({"lon": "180.01"}, "lon 180.01, lat 60.1"),
                                            ({"lon": "-200"}, "lon -200.0, lat 60.1")])
def test_a_node_written_off_the_globe_is_refused_not_cut_out(tmp_path, written, shown):
    """libosmium marks lat="91" invalid, as it marks a node missing from a clipped extract,
    so the road was cut at it and its two halves kept with no word. A written coordinate
    off the globe is a damaged file, and refused naming the node; a missing node still
    cuts the road (test above), and a road whose nodes are all on the globe is kept."""
    from graphloc.datasets.osm import OsmRoads, _osm_landuse
    path = _write_osm(tmp_path / "off.osm", _three_node_road(**written))
    message = rf"off.osm: node 2 lies off the globe: {re.escape(shown)} "
    with pytest.raises(ValueError, match=message):
        OsmRoads(path)
    with pytest.raises(ValueError, match=message):
        _osm_landuse(path)
    edge = _write_osm(tmp_path / "edge.osm", _three_node_road(lat="90", lon="-180"))
    assert len(OsmRoads(edge).edges) == 4


def test_a_node_without_a_location_is_not_off_the_globe(tmp_path):
    """A deleted node (visible="false", as history extracts hold) has no coordinates at
    all; it is not refused, and a road through it is cut as at a missing node."""
    from graphloc.datasets.osm import OsmRoads
    text = _osm_xml({1: (0, 0, {}), 2: (1, 0, {}), 3: (2, 0, {}), 4: (3, 0, {})},
                    [(100, [1, 2, 3, 4], {"highway": "primary"})], [])
    node_2 = text[text.index('<node id="2"'):]
    text = text.replace(node_2[:node_2.index("</node>")], '<node id="2" visible="false">')
    roads = OsmRoads(_write_osm(tmp_path / "deleted.osm", text))
    assert sorted(e[:2] for e in roads.edges) == [(3, 4), (4, 3)]


def test_oneway_values_are_osmnx_ones(tmp_path):
    """osmnx 1.x (the published pipeline) reads oneway "F" as one-way along the nodes and
    "T" as one-way against them; both were two-way here."""
    from graphloc.datasets.osm import OsmRoads
    nodes = {i: (i, 0, {}) for i in range(1, 7)}
    street = {"highway": "residential"}
    ways = [(100, [1, 2], {**street, "oneway": "F"}), (101, [3, 4], {**street, "oneway": "T"}),
            (102, [5, 6], {**street, "oneway": "reversible"})]
    path = tmp_path / "oneway.osm"
    path.write_text(_osm_xml(nodes, ways, []))
    edges = sorted((u, v) for u, v, _ in OsmRoads(str(path)).edges)
    assert edges == [(1, 2), (4, 3), (5, 6), (6, 5)]


def test_landuse_is_the_nearest_area_or_point_as_in_the_release(tmp_path):
    # a plus of two streets: ends W, E, N, S around the junction C; a third from E to F
    roads = {1: (-3, 0, {}), 2: (0, 0, {}), 3: (3, 0, {}), 4: (0, 3, {}), 5: (0, -3, {}),
             6: (3.8, 0.5, {})}
    square = lambda first, x0, y0, x1, y1: {  # noqa: E731 (closed ring of 4 corners)
        first + i: (x, y, {}) for i, (x, y) in enumerate(((x0, y0), (x1, y0), (x1, y1),
                                                           (x0, y1)))}
    ring = lambda first: [first, first + 1, first + 2, first + 3, first]  # noqa: E731
    nodes = {**roads, **square(10, -4, -1, -2, 1), **square(20, 2.5, -1, 4, 1),
             **square(30, 2.8, -0.2, 3.2, 0.2), **square(40, -0.5, 3.5, 0.5, 4.5),
             **square(50, -1, -4, 1, -2), **square(60, -1, -4, 1, -2),
             70: (3.1, 0, {"landuse": "farmland"})}
    street = {"highway": "residential"}
    # the third street one-way, so E stays a junction (a two-way street continuing into
    # another at a node of two neighbours is one street, as osmnx simplifies it)
    ways = [(100, [1, 2, 3], street), (101, [4, 2, 5], street),
            (102, [3, 6], {**street, "oneway": "yes"}),
            (110, ring(10), {"landuse": "park"}),  # holds W; nearest to C (2 vs 2.5)
            (120, ring(20), {}), (130, ring(30), {}),  # forest with a hole around E
            (140, ring(40), {"landuse": "retail"}),  # 0.5 north of N
            (150, ring(50), {"landuse": "grass"}), (160, ring(60), {"landuse": "meadow"})]
    forest = [(200, [(120, "outer"), (130, "inner")],
               {"type": "multipolygon", "landuse": "forest"})]
    path = tmp_path / "plus.osm"
    path.write_text(_osm_xml(nodes, ways, forest))
    with pytest.warns(UserWarning) as record:  # 6 intersections: 6 classes, not 10
        archive = build_city_network(str(path), str(tmp_path), hops=2)
    made = [w for w in record if "make 6 classes, not 10" in str(w.message)]
    assert len(made) == 1 and made[0].filename == __file__  # at the builder's caller
    x = read_release(archive)["node_features.pt"]
    # E in the forest's hole: the farmland point (0.1) beats the inner ring (0.2); F in
    # the forest; S inside grass and meadow (both 0): the first read wins
    expected = {1: "park", 2: "park", 3: "farmland", 4: "retail", 5: "grass", 6: "forest"}
    vocabulary = ["park", "farmland", "forest", "grass", "retail"]  # by frequency, then name
    assert x.shape == (6, 12)
    for row, node in enumerate(sorted(roads, key=str)):
        assert torch.equal(x[row, 3:12].nonzero().flatten(),
                           torch.tensor([vocabulary.index(expected[node])])), node
        assert x[row, 0].item() == pytest.approx(24.9 + 0.001 * roads[node][0], abs=1e-5)


def test_a_synthetic_city_written_as_osm_builds_back_into_the_same_streets(tmp_path):
    from graphloc.datasets import synthetic_city, write_osm_xml
    city = synthetic_city(1500, seed=4, hops=1)
    streets = write_osm_xml(city, str(tmp_path / "city.osm"), segments=3)
    assert streets == city.graph.num_edges // 2
    arrays = read_release(build_city_network(str(tmp_path / "city.osm"), str(tmp_path), hops=2))
    x, edge_index = arrays["node_features.pt"].double(), arrays["edge_indices.pt"]
    # every node the written ways add merged away, and so is every city node with two
    # neighbours (a bend: one street runs through it); the rest keep their streets
    junctions, streets_between = _streets_through_bends(city)
    assert x.size(0) == len(junctions) < 1500
    # match the built nodes to the city's by coordinates (float32 features: ~1e-6 degrees)
    from scipy.spatial import cKDTree
    expected_xy = torch.tensor([24.0, 60.0], dtype=torch.float64) + city.pos.double() * 1e-5
    distance, to_city = cKDTree(expected_xy.numpy()).query(x[:, :2].numpy())
    assert distance.max() < 1e-5 and set(to_city.tolist()) == junctions
    to_city = torch.from_numpy(to_city)
    assert {tuple(e) for e in to_city[edge_index].t().tolist()} == streets_between
    degree = city.graph.in_degree().float()
    torch.testing.assert_close(x[:, 2].float(), degree[to_city])  # osmnx's street_count
    with pytest.raises(ValueError, match="segments must be an int >= 1, got 0"):
        write_osm_xml(city, str(tmp_path / "bad.osm"), segments=0)
    from graphloc.datasets import NodeDataset
    plain = NodeDataset(name="plain", graph=city.graph, x=city.x, y=city.y,
                        train_index=city.train_index, val_index=city.val_index,
                        test_index=city.test_index)
    with pytest.raises(ValueError, match=r"needs a synthetic_city: pos \[1500, 2\]"):
        write_osm_xml(plain, str(tmp_path / "bad.osm"))
    assert not (tmp_path / "bad.osm").exists()


def _streets_through_bends(city) -> tuple[set, set]:
    """The city's nodes without exactly two neighbours, and the pairs of them joined by a
    run of edges through two-neighbour nodes (both directions; no loops)."""
    neighbours = {n: set() for n in range(city.num_nodes)}
    for u, v in city.graph.edge_index.t().tolist():
        neighbours[u].add(v)
    junctions = {n for n, around in neighbours.items() if len(around) != 2}
    pairs = set()
    for start in junctions:
        for step in neighbours[start]:
            previous, node = start, step
            while node not in junctions:
                previous, node = node, next(iter(neighbours[node] - {previous}))
            if node != start:
                pairs |= {(start, node), (node, start)}
    return junctions, pairs


def _grid_street_graph(size=6, length=None):
    """A simplified osmnx-style street graph in longitude/latitude: a grid with jittered
    intersections (so no two eccentricities tie)."""
    g = nx.MultiDiGraph(simplified=True)
    grid = nx.grid_2d_graph(size, size)
    jitter = torch.rand(size, size, 2, generator=torch.Generator().manual_seed(0)) * 3e-4
    for (r, c) in grid.nodes:
        g.add_node(f"{r}-{c}", x=24.9 + 0.001 * c + float(jitter[r, c, 0]),
                   y=60.1 + 0.0005 * r + float(jitter[r, c, 1]))
    for u, v in grid.edges:
        for a, b, rev in ((u, v, False), (v, u, True)):
            attrs = {"highway": "residential", "oneway": False, "reversed": rev}
            if length is not None:
                attrs["length"] = length
            g.add_edge(f"{a[0]}-{a[1]}", f"{b[0]}-{b[1]}", **attrs)
    return g


def test_a_projected_graphml_is_converted_not_read_as_degrees(tmp_path):
    """osmnx saves projected graphs (UTM metres) with their crs: the built city equals the
    one built from the same streets in degrees (pyproj as the reference projection)."""
    pyproj = pytest.importorskip("pyproj")
    degrees = _grid_street_graph()
    expected = read_release(build_city_network(degrees, str(tmp_path / "deg"), name="g",
                                               hops=3))
    to_utm = pyproj.Transformer.from_crs("EPSG:4326", "EPSG:32635", always_xy=True)
    projected = degrees.copy()
    projected.graph["crs"] = "EPSG:32635"
    for _, d in projected.nodes(data=True):
        d["x"], d["y"] = to_utm.transform(d["x"], d["y"])
    nx.write_graphml(projected, tmp_path / "utm.graphml")
    got = read_release(build_city_network(str(tmp_path / "utm.graphml"), str(tmp_path / "utm"),
                                          name="g", hops=3))
    for key, value in expected.items():
        if key.endswith("node_labels.pt"):  # mutually farthest nodes tie exactly, so a
            differ = got[key] != value  # 1e-4 m round trip may swap a tied pair's classes
            assert differ.sum() <= 2 and (got[key] - value).abs().max() <= 1
        elif value.is_floating_point():
            torch.testing.assert_close(got[key], value, rtol=1e-6, atol=1e-7)
        else:
            assert torch.equal(got[key], value), key
    del projected.graph["crs"]  # metres without a crs: refused, never read as degrees
    with pytest.raises(ValueError, match=r"outside longitude and latitude degrees: a projected "
                                         r"graph needs its 'crs'"):
        build_city_network(projected, str(tmp_path / "x"))


def test_a_projected_point_outside_its_crs_is_refused(tmp_path):
    """pyproj turns a point outside a CRS's domain into (inf, inf) degrees, which gave
    infinite road lengths; the node is named instead."""
    pytest.importorskip("pyproj")
    projected = _grid_street_graph(length=55.0)
    projected.graph["crs"] = "EPSG:32635"
    for i, (_, d) in enumerate(projected.nodes(data=True)):
        d["x"], d["y"] = 385000.0 + 50 * i, 6670000.0
    projected.nodes["0-0"]["x"] = 1e30
    with pytest.raises(ValueError, match=r"node '0-0' has x, y = \(1e\+30, 6670000.0\), which "
                                         r"the graph's crs 'EPSG:32635' does not place on the "
                                         r"globe \(pyproj gives \(inf, inf\)\)"):
        build_city_network(projected, str(tmp_path))


def test_bad_graphml_values_name_the_node_edge_or_file(tmp_path):
    g = _grid_street_graph(length=55.0)
    g.nodes["0-0"]["x"] = "east"
    with pytest.raises(ValueError, match=r"node '0-0' has a non-numeric 'x': 'east'"):
        build_city_network(g, str(tmp_path))
    g = _grid_street_graph(length=55.0)
    g.edges["0-0", "0-1", 0]["length"] = -3.0
    nx.write_graphml(g, tmp_path / "neg.graphml")
    with pytest.raises(ValueError, match=r"neg.graphml: edge '0-0' -> '0-1' has 'length' = "
                                         r"-3.0; it must be finite and >= 0"):
        build_city_network(str(tmp_path / "neg.graphml"), str(tmp_path))
    (tmp_path / "broken.graphml").write_text("<graphml><node id='a'")
    with pytest.raises(ValueError, match=r"broken.graphml is not a readable GraphML file "
                                         r"\(ParseError"):
        build_city_network(str(tmp_path / "broken.graphml"), str(tmp_path))


def test_lone_rings_are_removed_as_osmnx_removes_them():
    """osmnx's remove_rings: a ring of interstitial nodes alone (no endpoint) is dropped;
    a network of nothing else is refused by name."""
    ring = [(i, (i + 1) % 8, _way(1)) for i in range(8)]
    ring += [(v, u, {**a, "reversed": True}) for u, v, a in ring]
    street = [(10, 11, _way(2)), (11, 12, _way(2)), (11, 13, _way(3))]
    assert _simplify(ring, list(range(8))) == []
    kept = _simplify(ring + street, [*range(8), 10, 11, 12, 13])
    assert {(u, v) for u, v, _ in kept} == {(10, 11), (11, 12), (11, 13)}
    roads = type("Roads", (), {"edges": ring, "order": list(range(8)),
                               "coords": {i: (24.9 + 0.001 * i, 60.1) for i in range(8)}})
    with pytest.raises(ValueError, match="made of lone rings only, which osmnx removes"):
        _street_network(roads)


def test_a_missing_extra_is_named(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "osmium", None)
    with pytest.raises(ImportError, match=r"needs osmium: pip install 'graphloc\[osm\]'"):
        build_city_network(HELSINKI, str(tmp_path))


@pytest.mark.parametrize("kwargs, message", [
    ({"hops": 0}, "hops must be an integer >= 1"),  # 0 hops: classes by node id alone
    ({"num_classes": 0}, "num_classes must be"),
    ({"name": "../elsewhere"}, r"name must be a plain file name .* got '\.\./elsewhere'"),
    ({"name": "a/b"}, "name must be a plain file name"),
    ({"name": ".."}, "name must be a plain file name"),
])
def test_build_arguments_are_checked_before_any_work(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_city_network(HELSINKI, str(tmp_path), **kwargs)
    with pytest.raises(TypeError, match="build_city_network: progress must be True or False"):
        build_city_network(HELSINKI, str(tmp_path), progress="no")


def _street_graph_of(path, **graph_attrs):
    """The extract's public road edges, unsimplified, as an osmnx-style networkx graph."""
    g = _as_street_graph(OsmRoads(path))
    g.graph.update(graph_attrs)
    return g


def test_a_street_graph_with_the_extracts_landuse_builds_the_extracts_dataset(helsinki,
                                                                              tmp_path):
    expected = read_release(helsinki)
    street_graph = _street_graph_of(HELSINKI)
    got = read_release(build_city_network(street_graph, str(tmp_path), name="helsinki",
                                          landuse=HELSINKI))
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        if value.is_floating_point():  # speeds are means over another edge order
            torch.testing.assert_close(got[key], value, rtol=1e-6, atol=1e-6, msg=key)
        else:
            assert torch.equal(got[key], value), key
    landuse = expected["node_features.pt"][:, 3:12]
    assert (landuse.sum(0) > 0).sum() > 1  # the check is not of a constant column
    # without it: the same streets, a landuse column constant over the nodes, and a warning
    with pytest.warns(UserWarning, match="no landuse points or areas .*pass landuse=") as rec:
        bare = read_release(build_city_network(street_graph, str(tmp_path / "bare")))
    assert [w.filename for w in rec if "landuse" in str(w.message)] == [__file__]
    assert torch.equal(bare["edge_indices.pt"], expected["edge_indices.pt"])
    assert (bare["node_features.pt"][:, 3:12].sum(0) > 0).sum() == 1


def test_a_street_graph_loses_the_edges_the_published_pipeline_never_loads(helsinki,
                                                                           tmp_path):
    """osmnx 2's network_type="all" keeps private ways, which osmnx 1.x (the published
    pipeline) did not load: a street graph's private, area and disused-highway edges went
    into the dataset. They are dropped with a warning, and the build is the extract's."""
    street_graph = _street_graph_of(HELSINKI)
    nodes = list(street_graph.nodes)
    extra = [({"access": "private"}, nodes[0], nodes[500]),
             ({"service": ["driveway", "private"]}, nodes[10], nodes[700]),
             ({"highway": "construction"}, nodes[20], "new"),
             ({"area": "yes"}, nodes[30], nodes[900])]
    street_graph.add_node("new", x=24.95, y=60.17)
    for tags, u, v in extra:
        for a, b in ((u, v), (v, u)):
            street_graph.add_edge(a, b, **{"highway": "service", "oneway": False, **tags})
    with pytest.warns(UserWarning, match="8 of .* street edges are private") as rec:
        got = read_release(build_city_network(street_graph, str(tmp_path), name="helsinki",
                                              landuse=HELSINKI))
    assert [w.filename for w in rec if "private" in str(w.message)] == [__file__]
    expected = read_release(helsinki)
    assert torch.equal(got["edge_indices.pt"], expected["edge_indices.pt"])
    torch.testing.assert_close(got["node_features.pt"], expected["node_features.pt"])


def test_the_way_filter_matches_anywhere_in_a_value_as_overpass_does(tmp_path):
    """osmnx 1.x asked Overpass for ways whose tags do not match ``"private"`` (access,
    service), ``"yes"`` (area) or the disused highway kinds, as unanchored regular
    expressions: ``access=private;delivery`` was not loaded; an exact comparison loaded it."""
    from graphloc.datasets.osm import OsmRoads
    nodes = {i: (i, 0, {}) for i in range(1, 21)}
    kinds = [({}, True), ({"access": "private;delivery"}, False),
             ({"access": "permissive"}, True), ({"service": "private_drive"}, False),
             ({"service": "driveway"}, True), ({"area": "yes;no"}, False),
             ({"area": "no"}, True), ({"highway": "construction;residential"}, False),
             ({"highway": "razed:residential"}, False), ({"highway": "living_street"}, True)]
    ways = [(100 + k, [2 * k + 1, 2 * k + 2], {"highway": "residential", **tags})
            for k, (tags, _) in enumerate(kinds)]
    path = tmp_path / "filters.osm"
    path.write_text(_osm_xml(nodes, ways, []))
    loaded = {a["osmid"] for _, _, a in OsmRoads(str(path)).edges}
    assert loaded == {100 + k for k, (_, kept) in enumerate(kinds) if kept}


def test_landuse_pairs_give_each_node_the_nearest_feature(tmp_path):
    shapely = pytest.importorskip("shapely")
    g = nx.MultiDiGraph()
    grid = nx.grid_2d_graph(5, 5)
    xy = {(r, c): (24.9 + 0.001 * c, 60.1 + 0.001 * r) for r, c in grid.nodes}
    for n, (x, y) in xy.items():
        g.add_node(n, x=x, y=y)
    for u, v in grid.edges:
        for a, b, rev in ((u, v, False), (v, u, True)):
            g.add_edge(a, b, highway="residential", oneway=False, reversed=rev, osmid=(a, b))
    features = [(shapely.box(24.8995, 60.0995, 24.9015, 60.1015), "park"),  # holds 9 nodes
                (shapely.Point(24.9042, 60.1041), "retail"),
                (shapely.box(24.9025, 60.0990, 24.9050, 60.1005), "industrial"),
                (shapely.box(24.9025, 60.0990, 24.9050, 60.1005), "farmland")]  # a tie: first
    with pytest.warns(UserWarning, match="classes"):
        x = read_release(build_city_network(g, str(tmp_path), name="grid", hops=2,
                                            landuse=features))["node_features.pt"]
    # the oracle: shapely's distance from every node to every feature, ties to the first
    nodes = [n for n in g if len(set(g.successors(n))) != 2]  # the corners are bends
    values = []
    for n in nodes:
        point = shapely.Point(*xy[n])
        distances = [point.distance(geometry) for geometry, _ in features]
        values.append(features[distances.index(min(distances))][1])
    counts = {v: values.count(v) for v in set(values)}
    vocabulary = sorted(counts, key=lambda v: (-counts[v], v))
    assert set(values) == {"park", "retail", "industrial"}
    for row, value in enumerate(values):
        assert torch.equal(x[row, 3:12].nonzero().flatten(),
                           torch.tensor([vocabulary.index(value)])), nodes[row]


def test_bad_landuse_names_the_entry(tmp_path):
    shapely = pytest.importorskip("shapely")
    g = _street_graph_of(HELSINKI)
    with pytest.raises(TypeError, match=r"landuse\[1\]: expected a \(shapely geometry, value\)"):
        build_city_network(g, str(tmp_path), landuse=[(shapely.Point(24.9, 60.1), "park"),
                                                      ("POINT (1 2)", "park")])
    with pytest.raises(ValueError, match=r"landuse\[0\]: the landuse value must be a "
                                         r"non-empty string, got None"):
        build_city_network(g, str(tmp_path), landuse=[(shapely.Point(24.9, 60.1), None)])
    with pytest.raises(ValueError, match=r"landuse\[0\] \('park'\) has bounds .* outside "
                                         r"longitude and latitude degrees"):
        build_city_network(g, str(tmp_path), landuse=[(shapely.Point(385000, 6672000),
                                                       "park")])
    with pytest.raises(FileNotFoundError, match="landuse: no OSM file at"):
        build_city_network(g, str(tmp_path), landuse=str(tmp_path / "missing.osm.pbf"))
    corrupt = tmp_path / "corrupt.osm.pbf"
    corrupt.write_bytes(b"not protobuf at all")
    with pytest.raises(ValueError, match=r"landuse: .*corrupt.osm.pbf is not a readable OSM"):
        build_city_network(g, str(tmp_path / "out"), landuse=str(corrupt))
    corrupt.unlink()
    assert not list(tmp_path.iterdir())  # nothing written


def test_landuse_from_a_geodataframe_in_any_crs(helsinki, tmp_path):
    geopandas = pytest.importorskip("geopandas")
    import shapely

    from graphloc.datasets.osm import _landuse_features, _osm_landuse
    found = _osm_landuse(HELSINKI)
    frame = geopandas.GeoDataFrame(
        {"landuse": [v for _, v in found] + [float("nan")]},  # a feature without a value
        geometry=[shapely.from_wkb(w) for w, _ in found] + [shapely.Point(24.94, 60.17)],
        crs="EPSG:4326")
    got = read_release(build_city_network(_street_graph_of(HELSINKI), str(tmp_path),
                                          name="helsinki", landuse=frame))
    assert torch.equal(got["node_features.pt"], read_release(helsinki)["node_features.pt"])
    # in metres (Finland's EPSG:3067): converted back to degrees
    back = _landuse_features(frame.to_crs("EPSG:3067"))
    assert [v for _, v in back] == [v for _, v in found]
    assert max(shapely.hausdorff_distance(shapely.from_wkb(a), shapely.from_wkb(b))
               for (a, _), (b, _) in zip(back, found, strict=True)) < 1e-7


def _simplified_street_graph():
    """A grid of simplified streets as osmnx 1.x leaves them: some streets merged from
    several ways, their differing values as lists."""
    g = nx.MultiDiGraph(simplified=True, created_with="OSMnx 1.9.4")
    grid = nx.grid_2d_graph(6, 6)
    for r, c in grid.nodes:
        g.add_node(f"{r}-{c}", x=24.9 + 0.001 * c, y=60.1 + 0.0005 * r)
    for k, (u, v) in enumerate(grid.edges):
        merged = k % 3 == 0
        attrs = {"osmid": [k, k + 100] if merged else k, "length": 50.0 + k,
                 "highway": ["residential", "tertiary"] if merged else "residential",
                 "maxspeed": ["30", "60"] if merged else ("40" if k % 3 == 1 else None),
                 "lanes": ["1", "2"] if k % 5 == 0 else "2"}
        ends = (f"{u[0]}-{u[1]}", f"{v[0]}-{v[1]}")
        if k % 4 == 0:  # one way, from both directions' pieces: reversed is a list
            g.add_edge(*ends, **attrs, oneway=True, reversed=[False, True])
        else:
            g.add_edge(*ends, **attrs, oneway=False, reversed=False)
            g.add_edge(*ends[::-1], **attrs, oneway=False, reversed=True)
    return g


def test_a_graphml_that_osmnx_saved_builds_as_the_graph_in_memory(tmp_path):
    g = _simplified_street_graph()
    expected = read_release(build_city_network(g, str(tmp_path / "memory"), name="grid",
                                               hops=4, landuse=[]))
    saved = g.copy()  # as osmnx's save_graphml: every value its str(), lists included
    saved.graph = {k: str(v) for k, v in saved.graph.items()}
    for _, d in saved.nodes(data=True):
        d.update({k: str(v) for k, v in d.items()})
    for _, _, d in saved.edges(data=True):
        for k in [k for k, v in d.items() if v is None]:  # osmnx writes no missing value
            del d[k]
        d.update({k: str(v) for k, v in d.items()})
    nx.write_graphml(saved, tmp_path / "grid.graphml")
    got = read_release(build_city_network(str(tmp_path / "grid.graphml"), str(tmp_path / "file"),
                                          name="grid", hops=4, landuse=[]))
    x = expected["node_features_augmented.pt"]
    assert (x[:, 12 + 15] > 0).any() and (x[:, 12 + 1] != x[0, 12 + 1]).any()  # "[False,
    for key, value in expected.items():  # True]" reversed streets, and speeds that differ
        assert torch.equal(got[key], value), key


def test_a_simplified_graphs_lists_in_any_order_build_the_same(tmp_path):
    """osmnx keeps a merged street's values as an unordered set, so the same street comes
    as ['tertiary', 'residential'] from one run and the reverse from another; the speed
    imputed by its first highway type depended on that order (an osmnx-simplified GraphML
    of the Helsinki extract differed from the extract in 966 speeds)."""
    g = _simplified_street_graph()
    for k, (_, _, d) in enumerate(g.edges(data=True)):
        if isinstance(d["highway"], list) and k % 2:
            d["maxspeed"] = None  # a merged street without a speed: imputed by its type
    flipped = g.copy()
    for _, _, d in flipped.edges(data=True):
        for key, value in d.items():
            if isinstance(value, list):
                d[key] = value[::-1]
    assert any(d["maxspeed"] is None and isinstance(d["highway"], list)
               for _, _, d in flipped.edges(data=True))  # imputed by a listed type
    a = read_release(build_city_network(g, str(tmp_path / "a"), hops=4, landuse=[]))
    b = read_release(build_city_network(flipped, str(tmp_path / "b"), hops=4, landuse=[]))
    assert all(torch.equal(a[key], b[key]) for key in a)


def test_streets_simplified_before_simplify_again_as_streets(tmp_path):
    """A simplified graph that lost its flag is simplified again: its list values (lists
    of ways) merge without a crash, and only the grid's corners between two-way streets,
    plain bends, go."""
    g = _simplified_street_graph()
    flagged = read_release(build_city_network(g, str(tmp_path / "a"), hops=4, landuse=[]))
    g.graph.pop("simplified")
    again = read_release(build_city_network(g, str(tmp_path / "b"), hops=4, landuse=[]))
    bends = [n for n in g if len(set(g.successors(n)) | set(g.predecessors(n))) == 2
             and g.degree(n) == 4]  # corners between two two-way streets
    assert flagged["node_features.pt"].size(0) == 36 and len(bends) == 2
    assert again["node_features.pt"].size(0) == 36 - len(bends)
    assert again["edge_indices.pt"].size(1) == flagged["edge_indices.pt"].size(1) - 2 * len(
        bends)  # two streets become one at each bend


@pytest.mark.parametrize("suffix", [".bz2", ".gz"])
def test_compressed_osm_extracts_build_as_the_plain_file(tmp_path, suffix):
    """Geofabrik and BBBike ship .osm.bz2 and .osm.gz extracts: they were taken for GraphML
    street graphs and refused ("not a readable GraphML file")."""
    import bz2
    import gzip

    from graphloc.datasets import synthetic_city, write_osm_xml
    write_osm_xml(synthetic_city(400, seed=2, hops=1), str(tmp_path / "city.osm"))
    packed = tmp_path / f"packed.osm{suffix}"
    with open(tmp_path / "city.osm", "rb") as src, \
            {".bz2": bz2.open, ".gz": gzip.open}[suffix](packed, "wb") as dst:
        dst.write(src.read())
    plain = read_release(build_city_network(str(tmp_path / "city.osm"), str(tmp_path / "a"),
                                            hops=2))
    built = read_release(build_city_network(str(packed), str(tmp_path / "b"), hops=2))
    assert built.keys() == plain.keys()
    assert all(torch.equal(built[key], plain[key]) for key in plain)
