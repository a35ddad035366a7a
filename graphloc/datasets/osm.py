"""Build a City-Networks-style dataset offline from an OpenStreetMap extract (.osm.pbf,
.osm, .osm.bz2, .osm.gz, .o5m, read with pyosmium) or an osmnx-style networkx graph.

The published pipeline (osmnx 1.x's ``graph_from_place``, ``network_type="all"``, default
options), reproduced step by step and checked against osmnx 1.9.4 itself on random
extracts (``tests/datasets/osmnx_oracle.py``):

1. public road ways: ``highway`` set, not an area, not abandoned / construction / no /
   planned / platform / proposed / raceway / razed, no ``service=private`` nor
   ``access=private`` (osmnx 1.x's Overpass filter, regular expressions matched anywhere
   in the value, ``NOT_LOADED``; a street graph's edges that it matches are dropped too,
   with a warning: osmnx 2's network_type="all" keeps private ways); a node listed twice
   in a row read once; one directed edge per consecutive node pair, both directions
   unless the way is one-way (``oneway=yes|true|1|F``, against the nodes for
   ``-1|reverse|T``, roundabouts), the reverse direction marked ``reversed``; lengths
   great-circle, rounded to the millimetre; a way is cut at nodes missing from the file
   (an extract clipped without complete ways), while a node written off the globe
   (lat="91", or lat="1e99", which libosmium would read as 0) is refused as a damaged
   file;
2. osmnx's default (strict) simplification, over every component: a node goes when it
   has exactly two neighbours, 2 or 4 edges and no loop, wherever one OSM way ends and
   the next begins, so nodes are intersections, dead ends and the points where a one-way
   street meets a two-way one, and an edge is a street (lengths summed, each other value
   over the edges that have it, distinct ones kept as a list); components without an
   endpoint (lone rings) are removed;
3. the largest weakly connected component; ``street_count`` as osmnx counts it on the
   simplified graph (parallel streets each, a loop street twice); nodes numbered by OSM
   id (osmnx's order, which Overpass returns) or in a street graph's own order;
4. speeds as osmnx 1.x's ``add_edge_speeds``: ``maxspeed`` read by osmnx's pattern (km/h;
   mph converted; "|" lane values averaged; a merged street's list as the integer part of
   its mean), missing ones imputed with the mean of their highway type, else the mean of
   the type means; rounded to 0.1 km/h;
5. features: nodes ``[x, y, street_count, landuse one-hot (9)]``; edges ``[length,
   speed_kph, oneway (2), lanes (9), reversed (3), highway (9)]``, values stringified,
   the 8 most frequent values and "others" as columns ordered by their counts (the
   release's ``one_hot_top_k``; ties by name); the graph made undirected as PyG's
   ``to_undirected(reduce="mean")`` makes it (edges sorted by source then destination,
   the encoded float32 features of parallel and reverse edges averaged in float32),
   self-loops removed after the encoding; augmented features = node features and the
   float32 mean of incoming edge features: 37;
6. labels: 16-hop local eccentricity cut into 10 quantile classes; split 10/10/80 from
   ``RandomState(0)``.

Landuse, as the release's nearest ``sjoin_nearest`` in degrees: the value of the nearest
``landuse=*`` feature (areas from closed ways and multipolygon relations, which hold the
nodes inside them at distance 0, and tagged points); ties, as inside overlapping areas, go
as the release's join ordered them (the first match of geopandas' STRtree over the
features in osmnx's order). Checked against the release's own code on osmnx 1.9.4's graph
of the bundled extract (``tests/datasets/citynetworks_oracle.py``): the same node
features, edges, labels and split, the augmented features equal in float32 but for one
node of parallel streets. Deviations: fixed one-hot widths so every city has 37 features
(the release's widths came out of its data; columns a city leaves empty are zero, at the
end of their block); coordinates stay in degrees as in the release; ties between equally
frequent values, and between equal eccentricities, go by name and node id (the release:
pandas' and an unstable sort's order), as does the summing order of parallel streets;
where osmnx leaves an order to Python's string hashing (a merged street's list of values,
whose first highway type picks the speed imputed to it) the values are sorted; a graph
without any maxspeed, which osmnx refuses, gets 30 km/h everywhere; the extract stands for
the place's polygon, so osmnx's 500 m buffer (which adds the streets just outside to the
border nodes' street counts) does not apply.
"""

from __future__ import annotations

import ast
import bz2
import gzip
import io
import math
import os
import re
import tarfile
import warnings
from collections import Counter, defaultdict

import numpy as np
import torch
from torch import Tensor

from graphloc.checks import check_flags, check_int
from graphloc.datasets.base import city_split
from graphloc.datasets.labels import eccentricity_classes, local_eccentricity
from graphloc.graph import Graph
from graphloc.io import atomic_file

#: raised whenever the builder's output changes, so cities built by an older one are rebuilt
#: (1: landuse from closed-way centroids; 2: the nearest landuse area or point; 3: ways cut
#: at nodes missing from a clipped extract instead of joined across them, and osmnx's
#: oneway values "T" and "F"; 4: osmnx 1.x's way filter as Overpass matched it, anywhere in
#: a value, and street graphs filtered too; 5: osmnx 1.x's default simplification (a node
#: where two ways meet goes; lone rings removed; before the largest component), a node
#: listed twice in a row read once, street_count, lengths, speeds and node order as osmnx;
#: the release's one-hot column order, landuse ties, float32 means and edge order)
BUILDER_VERSION = 5
# osmnx 1.x's Overpass filter for network_type="all": a way is loaded unless one of these
# unanchored, case-sensitive regular expressions matches its tag (Overpass's `!~`), so
# "private;delivery" is private and highway "construction;residential" is excluded
NOT_LOADED = {"area": "yes", "access": "private", "service": "private",
              "highway": "abandoned|construction|no|planned|platform|proposed|raceway|razed"}
# osmnx 1.x's oneway values, "F" (forward) and "T" (against the node order) included
ONEWAY_FORWARD, ONEWAY_REVERSE = {"yes", "true", "1", "F"}, {"-1", "reverse", "T"}
# fixed vocabularies and widths (top-k then "others") so every city has 37 features
WIDTHS = {"landuse": 9, "lanes": 9, "highway": 9}
FIXED = {"oneway": ["False", "True"], "reversed": ["False", "True", "[False, True]"]}


def _extra(module: str):
    """An optional dependency of the builder, or an ImportError naming the extra."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"building a city from OpenStreetMap needs {module}: pip install "
                          "'graphloc[osm]'") from None


# what pyosmium reads, by name: Geofabrik's and BBBike's extracts come as .osm.pbf, .osm.bz2
# and .osm.gz (a compressed one was taken for a GraphML street graph and refused as such)
OSM_SUFFIXES = (".pbf", ".osm", ".osm.bz2", ".osm.gz", ".o5m")


class OsmRoads:
    """Directed road edges and node coordinates of an OSM file (step 1)."""

    def __init__(self, path: str):
        osmium = _extra("osmium")
        if not os.path.exists(path):
            raise FileNotFoundError(f"no OSM file at {path}")
        self.coords: dict[int, tuple[float, float]] = {}
        self.edges: list[tuple[int, int, dict]] = []
        found: list = []  # the landuse features as read: (rank, id, hex WKB, value)
        roads = self

        class Handler(_landuse_handler(osmium, found, path)):
            def way(self, w):
                if "highway" not in w.tags:  # most ways: skip before copying their tags
                    return
                tags = dict(w.tags)
                if not _is_public_road(tags):
                    return
                # A node missing from the file (a way leaving a clipped extract) ends the
                # run: joining its neighbours would invent a straight road across the gap.
                run: list[int] = []
                for n in w.nodes:
                    if n.location.valid():
                        roads.coords[n.ref] = (n.lon, n.lat)
                        run.append(n.ref)
                    else:
                        roads._add_way(w.id, run, tags)
                        run = []
                roads._add_way(w.id, run, tags)
        _check_exponent_coordinates(path)
        try:
            Handler().apply_file(path, locations=True)
        except _reading_errors(osmium) as err:
            raise ValueError(f"{path} is not a readable OSM file: {err}") from err
        if not self.edges:
            raise ValueError(f"{path} holds no public road ways")
        self.landuse = _in_osmnx_order(found)  # (hex WKB geometry in degrees, value)
        # the release numbers nodes as Overpass returns them, by OSM id (an extract's order)
        self.order = sorted(self.coords)

    def _add_way(self, way_id: int, refs: list[int], tags: dict) -> None:
        # a node listed twice in a row (an OSM digitising slip) is one node, as osmnx
        # reads it: kept, it made a zero-length self-loop that turned the node into an
        # endpoint of the simplification
        refs = [n for k, n in enumerate(refs) if k == 0 or n != refs[k - 1]]
        oneway = tags.get("oneway", "no") in ONEWAY_FORWARD | ONEWAY_REVERSE or \
            tags.get("junction") == "roundabout"
        if tags.get("oneway") in ONEWAY_REVERSE:
            refs = refs[::-1]
        attrs = {"osmid": way_id, "highway": tags["highway"], "oneway": oneway,
                 "lanes": tags.get("lanes"), "maxspeed": tags.get("maxspeed")}
        forward, backward = {**attrs, "reversed": False}, {**attrs, "reversed": True}
        for u, v in zip(refs[:-1], refs[1:], strict=True):  # a way's edges share two dicts
            self.edges.append((u, v, forward))
            if not oneway:
                self.edges.append((v, u, backward))


# a coordinate written with an exponent, in an OSM XML attribute (lat="1e99")
_EXPONENT_COORDINATE = re.compile(rb"\b(lat|lon)\s*=\s*[\"']([^\"']*[eE][^\"']*)[\"']")
_GLOBE = {b"lat": 90.0, b"lon": 180.0}


def _open_xml(path: str):
    """The decompressed bytes of an OSM XML file, or None for the binary formats, which
    store coordinates as integers."""
    lower = path.lower()
    if lower.endswith(".osm.gz"):
        return gzip.open(path, "rb")
    if lower.endswith(".osm.bz2"):
        return bz2.open(path, "rb")
    return open(path, "rb") if lower.endswith(".osm") else None


def _check_exponent_coordinates(path: str) -> None:
    """Refuses a coordinate written with an exponent that lies off the globe. libosmium
    reads lat="1e99" as 0.0, a valid latitude (its integer overflows), so such a node
    would sit silently on the equator; in-range exponents (6.02e1) it reads right."""
    stream = _open_xml(path)
    if stream is None:
        return
    line, carry = 1, b""
    with stream:
        while chunk := stream.read(1 << 24):
            text = carry + chunk
            cut = text.rfind(b"\n") + 1  # an attribute never spans a line break here
            text, carry = text[:cut], text[cut:]
            _check_exponents_in(text, path, line)
            line += text.count(b"\n")
        _check_exponents_in(carry, path, line)


def _check_exponents_in(text: bytes, path: str, first_line: int) -> None:
    for match in _EXPONENT_COORDINATE.finditer(text):
        name, value = match.group(1), match.group(2)
        try:
            number = float(value)
        except ValueError:
            continue  # pyosmium refuses it by itself, naming the value
        if not abs(number) <= _GLOBE[name]:
            line = first_line + text.count(b"\n", 0, match.start())
            raise ValueError(f"{path}, line {line}: {name.decode()}=\"{value.decode()}\" lies "
                             f"off the globe (|{name.decode()}| <= {_GLOBE[name]:g})")


_UNPLACED = 2147483647  # libosmium's undefined coordinate: a deleted node has none


def _refuse_if_placed(node, path: str) -> None:
    """Refuses a node whose location libosmium marks invalid though the file writes one
    (lat="91"): it was taken as missing from the file, and a road through it cut there
    silently. A node without coordinates (deleted, visible="false") passes."""
    location = node.location
    if location.x != _UNPLACED or location.y != _UNPLACED:
        raise ValueError(f"{path}: node {node.id} lies off the globe: lon "
                         f"{location.lon_without_check()}, lat "
                         f"{location.lat_without_check()} (|lon| <= 180, |lat| <= 90)")


def _reading_errors(osmium) -> tuple:
    """What pyosmium raises on a file it cannot read: RuntimeError (a damaged or truncated
    file) or its InvalidLocationError (a coordinate such as lat="nan"), which is neither a
    RuntimeError nor a ValueError and left the builder unnamed."""
    return RuntimeError, osmium.InvalidLocationError


def _landuse_handler(osmium, sink: list, path: str):
    """A pyosmium handler class that appends ``(rank, OSM id, hex WKB in degrees, value)``
    to ``sink`` for every ``landuse=*`` point (rank 0) and area (closed ways 1,
    multipolygon relations 2), as read. With its area() method pyosmium reads the file
    twice and builds the multipolygons. Every node of the file is checked to lie on the
    globe."""
    wkb = osmium.geom.WKBFactory()

    class LanduseHandler(osmium.SimpleHandler):
        def node(self, n):
            if not n.location.valid():  # (the one call most nodes cost)
                _refuse_if_placed(n, path)
            elif "landuse" in n.tags:
                sink.append((0, n.id, wkb.create_point(n), n.tags["landuse"]))

        def area(self, a):
            if "landuse" in a.tags:
                try:
                    sink.append((1 if a.from_way() else 2, a.orig_id(),
                                 wkb.create_multipolygon(a), a.tags["landuse"]))
                except RuntimeError:  # broken ring at the extract's edge: no geometry
                    pass
    return LanduseHandler


def _in_osmnx_order(found: list) -> list[tuple[str, str]]:
    """``(hex WKB, value)`` in the order of osmnx's features table, which decides the
    release's ties (nodes inside overlapping areas go to the feature first in it): points
    and ways as the file lists them, then the relations by id (pyosmium builds a
    relation's area when its last way is read, between the ways')."""
    ordered = sorted(found, key=lambda f: (f[0], f[1] if f[0] == 2 else 0))  # stable
    return [(geometry, value) for _, _, geometry, value in ordered]


def _osm_landuse(path: str) -> list[tuple[str, str]]:
    """The landuse points and areas of an OSM file, as the extract's own are read."""
    osmium = _extra("osmium")
    if not os.path.exists(path):
        raise FileNotFoundError(f"landuse: no OSM file at {path}")
    found: list = []
    _check_exponent_coordinates(path)
    try:
        _landuse_handler(osmium, found, path)().apply_file(path, locations=True)
    except _reading_errors(osmium) as err:
        raise ValueError(f"landuse: {path} is not a readable OSM file: {err}") from err
    return _in_osmnx_order(found)


def _landuse_features(landuse) -> list[tuple[str, str]]:
    """``(hex WKB in degrees, value)`` pairs from what ``build_city_network`` takes as
    ``landuse``: an OSM file, a GeoDataFrame with a ``landuse`` column (osmnx's
    ``features_from_*(..., tags={"landuse": True})``; rows without a value skipped), or
    ``(shapely geometry, value)`` pairs. Geometries must be in longitude/latitude degrees,
    as the release's join; a GeoDataFrame in another CRS is converted."""
    if isinstance(landuse, (str, os.PathLike)):
        return _osm_landuse(str(landuse))
    shapely = _extra("shapely")
    if hasattr(landuse, "geometry") and hasattr(landuse, "columns"):  # a GeoDataFrame
        if "landuse" not in landuse.columns:
            raise ValueError("landuse: the GeoDataFrame has no 'landuse' column (osmnx: "
                             "features_from_place(place, tags={'landuse': True}))")
        crs = getattr(landuse, "crs", None)
        if crs is not None and not crs.is_geographic:
            landuse = landuse.to_crs("EPSG:4326")
        landuse = [(g, v) for g, v in zip(landuse.geometry, landuse["landuse"], strict=True)
                   if isinstance(v, str)]  # NaN: a feature without landuse
    pairs = []
    for k, pair in enumerate(landuse):
        geometry, value = pair if isinstance(pair, (tuple, list)) and len(pair) == 2 \
            else (pair, None)
        if not isinstance(geometry, shapely.Geometry) or geometry.is_empty:
            raise TypeError(f"landuse[{k}]: expected a (shapely geometry, value) pair, got "
                            f"{pair!r:.80}")
        if not isinstance(value, str) or not value:
            raise ValueError(f"landuse[{k}]: the landuse value must be a non-empty string, "
                             f"got {value!r}")
        x0, y0, x1, y1 = geometry.bounds
        if min(x0, x1) < -180 or max(x0, x1) > 180 or min(y0, y1) < -90 or max(y0, y1) > 90:
            raise ValueError(f"landuse[{k}] ({value!r}) has bounds {geometry.bounds}, outside "
                             "longitude and latitude degrees: give the geometries in "
                             "EPSG:4326, as the street graph")
        pairs.append((shapely.to_wkb(geometry, hex=True), value))
    return pairs


def _is_public_road(tags: dict) -> bool:
    """A way osmnx 1.x loads for network_type="all": a highway that no ``NOT_LOADED``
    expression matches (on any of its values, where a street graph's edge lists several)."""
    return "highway" in tags and not _matches_not_loaded(tags)


def _matches_not_loaded(tags: dict) -> bool:
    for key, pattern in NOT_LOADED.items():
        values = tags.get(key)
        for value in values if isinstance(values, list) else [values]:
            if value is not None and re.search(pattern, str(value)):
                return True
    return False


def _street_network(roads) -> tuple[list, list, dict]:
    """Steps 2 and 3 in the published order (osmnx 1.x's ``graph_from_polygon``): the
    streets simplified over every component, lone rings removed, then the largest weakly
    connected component; osmnx's ``street_count`` of each kept node. Returns the streets
    ``(u, v, attrs with length)``, the kept nodes in ``roads.order`` and their counts."""
    edges = [(u, v, {**a, "length": length}) for (u, v, a), length
             in zip(roads.edges, _unsimplified_lengths(roads), strict=True)]
    if not getattr(roads, "simplified", False):
        edges = _simplify(edges, roads.order)
    nodes = _nodes_left(edges, roads.order)
    edges, nodes = _largest_component(edges, nodes)
    return edges, nodes, _street_counts(edges, nodes)


def _unsimplified_lengths(roads) -> list[float]:
    """Each edge's ``length``: the street graph's own where it has one, else the
    great-circle length rounded to the millimetre, as osmnx 1.x's add_edge_lengths
    (precision 3) wrote it before the simplification summed a street's edges."""
    computed = np.round(_edge_lengths(roads.edges, roads.coords), 3).tolist()
    return [a.get("length", c) for (_, _, a), c in zip(roads.edges, computed, strict=True)]


def _adjacency(edges) -> tuple[dict, dict]:
    """Each node's successors and predecessors, as a networkx MultiDiGraph orders them
    (by their first edge), with the positions of the pair's edges in ``edges``."""
    succ: dict = defaultdict(dict)
    pred: dict = defaultdict(dict)
    for i, (u, v, _) in enumerate(edges):
        succ[u].setdefault(v, []).append(i)
        pred[v].setdefault(u, []).append(i)
    return succ, pred


def _is_endpoint(node, succ: dict, pred: dict) -> bool:
    """osmnx 1.x's strict rule (its default, and osmnx 2's): a node stays if it loops
    to itself, has no way in or no way out, or has not exactly two neighbours with 2 or 4
    edges. Where two OSM ways meet end to end in a plain street, the node goes."""
    neighbours = succ[node].keys() | pred[node].keys()
    out_degree = sum(map(len, succ[node].values()))
    in_degree = sum(map(len, pred[node].values()))
    if node in neighbours or not out_degree or not in_degree:
        return True
    return not (len(neighbours) == 2 and out_degree + in_degree in (2, 4))


def _path(start, first, succ: dict, endpoints: set) -> list:
    """osmnx's path from an endpoint through its interstitial successor ``first`` to the
    next endpoint, its digitising quirks included (a path may end early)."""
    path, seen = [start, first], {start, first}
    for successor in succ[first]:
        if successor in seen:
            continue
        path.append(successor)
        seen.add(successor)
        while successor not in endpoints:
            onward = [n for n in succ[successor] if n not in seen]  # at most one
            if not onward:  # a loop back to the start closes; a one-way dead end stops
                return path + [start] if start in succ[successor] else path
            successor = onward[0]
            path.append(successor)
            seen.add(successor)
        return path
    return path


def _simplify(edges, order: list) -> list:
    """osmnx 1.x's ``simplify_graph`` (strict, rings removed): every path through
    interstitial nodes becomes one street from endpoint to endpoint, each step's
    attributes those of the pair's first edge, lengths summed; its interstitial nodes go
    with their edges; then components without an endpoint (lone rings) go."""
    succ, pred = _adjacency(edges)
    endpoints = {n for n in order if _is_endpoint(n, succ, pred)}
    paths = [_path(n, first, succ, endpoints) for n in order if n in endpoints
             for first in succ[n] if first not in endpoints]
    gone = {n for path in paths for n in path[1:-1]}
    merged = [(path[0], path[-1], _merge_attrs(
        [edges[succ[a][b][0]][2] for a, b in zip(path[:-1], path[1:], strict=True)]))
        for path in paths]
    streets = [e for e in edges + merged if e[0] not in gone and e[1] not in gone]
    return _without_rings(streets, [n for n in order if n not in gone])


def _without_rings(edges, nodes: list) -> list:
    """osmnx's remove_rings: a component none of whose nodes is an endpoint (a ring
    road alone) is dropped."""
    succ, pred = _adjacency(edges)
    comp = _components(edges, nodes)
    has_endpoint = np.zeros(len(nodes), dtype=bool)
    np.logical_or.at(has_endpoint, comp, [_is_endpoint(n, succ, pred) for n in nodes])
    keep = {n for n, c in zip(nodes, comp, strict=True) if has_endpoint[c]}
    return [e for e in edges if e[0] in keep]


def _nodes_left(edges, order: list) -> list:
    ends = {u for u, _, _ in edges} | {v for _, v, _ in edges}
    return [n for n in order if n in ends]


def _components(edges, nodes: list) -> np.ndarray:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    u, v = _endpoints(edges, nodes)
    adj = coo_matrix((np.ones(len(u)), (u, v)), shape=(len(nodes), len(nodes)))
    return connected_components(adj, directed=True, connection="weak")[1]


def _largest_component(edges, nodes: list) -> tuple[list, list]:
    """The edges and nodes of the largest weakly connected component (step 2); between
    components of one size, the one met first in node order, as networkx's max()."""
    if not edges:
        raise ValueError("no streets are left after the simplification: the road network "
                         "is made of lone rings only, which osmnx removes")
    comp = _components(edges, nodes)
    largest = np.bincount(comp).argmax()  # the first maximum: labels follow node order
    u, _ = _endpoints(edges, nodes)
    return ([e for e, c in zip(edges, comp[u], strict=True) if c == largest],
            [n for n, c in zip(nodes, comp, strict=True) if c == largest])


def _merge_attrs(chain: list[dict]) -> dict:
    """One street's attributes, as osmnx merges them: each key's value over the edges that
    have it (a missing lanes or maxspeed is left out), one value or the sorted list of the
    distinct ones (osmnx: an unordered set); the lengths summed."""
    length = sum(a["length"] for a in chain)
    attrs = {}
    for key in ("osmid", "highway", "oneway", "lanes", "maxspeed", "reversed"):
        values = []  # distinct by ==, as a set, but lists (streets simplified before) too
        for a in chain:
            if a.get(key) is not None and a[key] not in values:
                values.append(a[key])
        values.sort(key=str)
        attrs[key] = None if not values else values[0] if len(values) == 1 else values
    return {**attrs, "length": length}


def haversine_m(lon1, lat1, lon2, lat2):
    lon1, lat1, lon2, lat2 = map(np.radians, (lon1, lat1, lon2, lat2))
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * \
        np.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6_371_009 * np.arcsin(np.sqrt(np.minimum(a, 1.0)))  # osmnx's earth radius


def _edge_lengths(edges, coords) -> np.ndarray:
    """Great-circle length of every edge, in metres."""
    ends = np.array([(*coords[u], *coords[v]) for u, v, _ in edges]).reshape(-1, 4)
    return haversine_m(*ends.T)


# osmnx 1.x's maxspeed pattern: a number of two characters or more ("5" is not read), a
# decimal point or comma, an optional unit; "|" separates the speeds of several lanes
_MAXSPEED = re.compile(r"^([0-9][\.,0-9]+?)(?:[ ]?(?:km/h|kmh|kph|mph|knots))?$")
_MPH = 1.60934  # osmnx's factor


def _clean_maxspeed(text: str):
    """One maxspeed text in km/h as osmnx 1.x's _clean_maxspeed reads it, or None."""
    speeds = []
    for part in text.split("|"):
        match = _MAXSPEED.match(part)
        if match is None:
            return None
        try:
            speed = float(match.group(1).replace(",", "."))
        except ValueError:  # "1,5,0"
            return None
        speeds.append(speed * _MPH if "mph" in text.lower() else speed)
    return float(np.mean(speeds))


def _speed_kph(maxspeed):
    """A street's ``maxspeed`` in km/h as osmnx 1.x's add_edge_speeds reads it, or None.
    A merged street's list is the integer part of its readable values' mean, read again
    as text (so a mean under 10 km/h is not read)."""
    if maxspeed is None:
        return None
    if not isinstance(maxspeed, list):
        return _clean_maxspeed(str(maxspeed))
    speeds = [s for s in (_clean_maxspeed(str(v)) for v in _flat(maxspeed)) if s is not None]
    return _clean_maxspeed(str(int(np.mean(speeds)))) if speeds else None


def _speed_type(highway) -> str | None:
    """The highway type a street's speed is imputed by: osmnx takes a merged street's
    first listed type (of an unordered set, so the published choice varies with Python's
    string hashing); here the alphabetically first."""
    if not isinstance(highway, list) or not highway:
        return highway
    return min(_flat(highway), key=str)  # a street graph's lists come in osmnx's set order


def _flat(values: list) -> list:
    """A merged street's values, streets merged before (lists in the list) flattened."""
    return [v for value in values for v in (_flat(value) if isinstance(value, list)
                                            else [value])]


def _impute_speeds(edges) -> np.ndarray:
    """Step 4, osmnx 1.x's add_edge_speeds: a street's own speed, else the mean of its
    highway type's known speeds, else the mean of those type means; rounded to 0.1 km/h.
    Without any maxspeed (osmnx refuses the graph) every street gets 30 km/h."""
    known = [_speed_kph(a.get("maxspeed")) for _, _, a in edges]
    by_type = defaultdict(list)
    for (_, _, a), speed in zip(edges, known, strict=True):
        if speed is not None:
            by_type[_speed_type(a.get("highway"))].append(speed)
    type_means = {t: float(np.mean(s)) for t, s in by_type.items()}
    overall = float(np.mean(list(type_means.values()))) if type_means else 30.0
    speeds = [s if s is not None else type_means.get(_speed_type(a.get("highway")), overall)
              for (_, _, a), s in zip(edges, known, strict=True)]
    return np.round(np.array(speeds, dtype=np.float64), 1)


def _vocabulary(values: list[str], key: str) -> list[str]:
    """The release's one-hot columns (its ``one_hot_top_k``): the most frequent values
    (ties by name), every other value relabelled "others", then all ordered by their
    counts, so "others" stands where its count puts it (before, always last: Helsinki's
    366 other highway types came after 8 types, 158 of them the fewest)."""
    counts = Counter(values)
    if key in FIXED:  # a fixed set of values, ordered by count as the release orders them
        return sorted(FIXED[key], key=lambda v: -counts[v])  # (stable: ties keep FIXED's)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept = Counter(dict(ranked[:WIDTHS[key] - 1]))
    others = sum(n for _, n in ranked[WIDTHS[key] - 1:])
    if others:
        kept["others"] += others
    return [v for v, _ in sorted(kept.items(), key=lambda kv: (-kv[1], kv[0]))]


def _one_hot(values: list[str], vocab: list[str], width: int) -> np.ndarray:
    """Columns for ``vocab`` in order, a value outside it in the "others" column (the
    last where the vocabulary has none), zero columns up to ``width``."""
    out = np.zeros((len(values), width))
    column = {v: i for i, v in enumerate(vocab)}
    others = column.get("others", width - 1)
    for row, value in enumerate(values):
        out[row, column.get(value, others)] = 1.0
    return out


def _stringified(value) -> str:
    if value is None:
        return "nan"
    return str(sorted(value, key=str)) if isinstance(value, list) else str(value)


class _NetworkxRoads:
    """The same inputs from an osmnx-style networkx (Multi)(Di)Graph or a GraphML file."""

    def __init__(self, graph):
        where = f"{graph}: " if isinstance(graph, (str, os.PathLike)) else ""
        graph = _read_graphml(graph) if where else graph
        if not graph.is_directed():
            graph = graph.to_directed()
        missing = [n for n, d in graph.nodes(data=True) if "x" not in d or "y" not in d]
        if missing:
            raise ValueError(f"{where}node {missing[0]!r} has no 'x'/'y' coordinates")
        self.coords = _lonlat(graph, where)
        self.order = list(self.coords)  # the graph's own node order, as osmnx numbers it
        self.landuse = []
        self.simplified = _as_bool(graph.graph.get("simplified", False))  # "True" in GraphML
        self.edges = []
        dropped = 0
        for i, (u, v, d) in enumerate(graph.edges(data=True)):
            d = {key: _listed(value) for key, value in d.items()}
            if _matches_not_loaded(d):
                dropped += 1
                continue
            attrs = {"osmid": d.get("osmid", i), "highway": d.get("highway"),
                     "oneway": _as_bool(d.get("oneway", False)), "lanes": d.get("lanes"),
                     "maxspeed": d.get("maxspeed"),
                     "reversed": _as_bool(d.get("reversed", False))}
            if "length" in d:
                attrs["length"] = _number(d["length"], f"{where}edge {u!r} -> {v!r}",
                                          "length", low=0.0)
            self.edges.append((u, v, attrs))
        if dropped:
            warnings.warn(f"{where}{dropped} of {graph.number_of_edges()} street edges are "
                          "private (access or service), areas or abandoned / construction / "
                          "proposed ... highways, which the published pipeline (osmnx 1.x, "
                          "network_type='all') does not load (osmnx 2's 'all' does): they "
                          "were dropped", stacklevel=3)
        if not self.edges:
            raise ValueError(f"{where}the street graph has no edges"
                             + (" left after dropping those" if dropped else ""))


def _read_graphml(path):
    import networkx as nx
    if not os.path.exists(path):
        raise FileNotFoundError(f"no GraphML file at {path}")
    try:
        return nx.read_graphml(path)
    except Exception as err:  # ElementTree's ParseError, networkx's errors, bad types
        raise ValueError(f"{path} is not a readable GraphML file ({type(err).__name__}: "
                         f"{err})") from err


def _number(value, what: str, key: str, low: float | None = None) -> float:
    """``value`` as a finite float (>= ``low``), or a ValueError naming node/edge and key."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} has a non-numeric {key!r}: {value!r}") from None
    if not math.isfinite(number) or (low is not None and number < low):
        bound = "finite" if low is None else f"finite and >= {low:g}"
        raise ValueError(f"{what} has {key!r} = {value!r}; it must be {bound}")
    return number


# What a GraphML ``crs`` may say for longitude/latitude degrees (osmnx writes "epsg:4326").
_GEOGRAPHIC = ("epsg:4326", "wgs84", "wgs 84", "+proj=longlat", "crs84", "ogc:crs84")


def _lonlat(graph, where: str) -> dict:
    """Node -> (longitude, latitude) in degrees. osmnx saves a projected graph (UTM metres,
    its sample street graphs) with ``crs`` in the graph attributes: those coordinates are
    converted with pyproj. Metres are never read as degrees: without a ``crs``, values
    outside longitude/latitude ranges are refused, as is a projected graph without pyproj."""
    coords = {n: (_number(d["x"], f"{where}node {n!r}", "x"),
                  _number(d["y"], f"{where}node {n!r}", "y"))
              for n, d in graph.nodes(data=True)}
    crs = str(graph.graph.get("crs", "")).strip()
    if not crs or crs.lower() in _GEOGRAPHIC:
        bad = next((n for n, (x, y) in coords.items() if abs(x) > 180 or abs(y) > 90), None)
        if bad is not None:
            raise ValueError(f"{where}node {bad!r} has x, y = {coords[bad]}, outside longitude "
                             f"and latitude degrees: a projected graph needs its 'crs' graph "
                             f"attribute (osmnx saves it), or project it back with "
                             f"osmnx.project_graph(G, to_latlong=True)")
        return coords
    try:
        from pyproj import Transformer
    except ImportError:
        raise ImportError(f"{where}the street graph is in the projected CRS {crs!r}; "
                          "converting it to longitude/latitude needs pyproj (pip install "
                          "'graphloc[osm]'), or project it back with "
                          "osmnx.project_graph(G, to_latlong=True)") from None
    to_degrees = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    nodes = list(coords)
    xs, ys = to_degrees.transform([coords[n][0] for n in nodes], [coords[n][1] for n in nodes])
    degrees = {n: (float(x), float(y)) for n, x, y in zip(nodes, xs, ys, strict=True)}
    # pyproj gives inf for a point outside its CRS's domain: infinite road lengths after
    bad = next((n for n, (x, y) in degrees.items() if not (abs(x) <= 180 and abs(y) <= 90)),
               None)
    if bad is not None:
        raise ValueError(f"{where}node {bad!r} has x, y = {coords[bad]}, which the graph's "
                         f"crs {crs!r} does not place on the globe (pyproj gives "
                         f"{degrees[bad]})")
    return degrees


def _as_bool(value):
    if isinstance(value, list):  # a simplified street's values, as osmnx merges them
        return [_as_bool(v) for v in value]
    return value if isinstance(value, bool) else str(value).lower() == "true"


def _listed(value):
    """A list that GraphML holds as its text (osmnx's save_graphml writes a simplified
    street's merged values as ``str(list)``: "[False, True]", "['30', '50']"), back as the
    list; anything else as it is. Read as text, such values became one odd category, a
    "reversed" of False and an unparsed speed."""
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
        if isinstance(parsed, list):
            return parsed
    return value


def _street_counts(edges, nodes: list) -> dict:
    """osmnx's street_count on the simplified streets: at each node, for every other end
    the streets to and from it (a two-way street once, parallel streets each; as osmnx's
    undirected view of its keys, the larger of the two directions' counts), and 2 for
    any loop street."""
    u, v = _endpoints(edges, nodes)
    loop = u == v
    u, v = u[~loop], v[~loop]
    pair = np.minimum(u, v) * len(nodes) + np.maximum(u, v)
    keys, count = np.unique(pair * 2 + (u < v), return_counts=True)
    pairs, first = np.unique(keys // 2, return_index=True)
    # the larger direction of each pair
    most = np.maximum.reduceat(count, first) if len(count) else count
    streets = np.bincount(np.concatenate([pairs // len(nodes), pairs % len(nodes)]),
                          weights=np.concatenate([most, most]), minlength=len(nodes))
    streets[np.unique(_endpoints(edges, nodes)[0][loop])] += 2
    return dict(zip(nodes, streets.astype(np.int64).tolist(), strict=True))


def _endpoints(edges, nodes: list) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``nodes`` of every edge's source and destination."""
    index = {n: i for i, n in enumerate(nodes)}
    ends = np.array([(index[u], index[v]) for u, v, _ in edges], dtype=np.int64)
    return ends.reshape(-1, 2).T


def build_city_network(source, out_dir: str, name: str | None = None, hops: int = 16,
                       num_classes: int = 10, progress: bool = False, landuse=None) -> str:
    """Builds a dataset from ``source`` (an OSM path: .osm.pbf, .osm, .osm.bz2, .osm.gz or
    .o5m; a networkx street graph or a GraphML path) and writes it as
    ``out_dir/<name>.tar.gz`` in the City-Networks release layout (readable by
    :class:`CityNetwork` and by PyG's loader). Returns the
    archive path. See the module docstring for the pipeline; ``progress`` shows a bar
    over its stages.

    ``landuse``: where the nodes' landuse comes from, in place of the source's own: an
    .osm.pbf / .osm file, a GeoDataFrame with a ``landuse`` column (osmnx's
    ``features_from_place(place, tags={"landuse": True})``), or ``(shapely geometry,
    value)`` pairs in longitude/latitude degrees. A street graph carries none, so without
    it the 9 landuse columns are the same for every node (with a warning)."""
    from tqdm.auto import tqdm
    check_int(hops, "hops", 1)  # at 0 every eccentricity is 0: classes by node id alone
    check_int(num_classes, "num_classes", 1)
    check_flags("build_city_network", progress=progress)
    if name is not None:
        _check_plain_name(name)
    bar = tqdm(total=5, disable=not progress, desc="build")

    def stage(text):
        bar.set_postfix_str(text)
        bar.update()
    bar.set_postfix_str("reading")
    if isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(OSM_SUFFIXES):
        roads = OsmRoads(str(source))
        name = name or os.path.basename(str(source)).split(".")[0]
    else:
        roads = _NetworkxRoads(source)
        named = isinstance(source, (str, os.PathLike))
        name = name or (os.path.basename(str(source)).split(".")[0] if named else "city")
    if landuse is not None:
        roads.landuse = _landuse_features(landuse)
    if not roads.landuse:
        where = ("in the given landuse" if landuse is not None else "in the OSM file"
                 if isinstance(roads, OsmRoads) else "(a street graph carries none; pass "
                 "landuse=, an OSM file or osmnx's landuse features)")
        warnings.warn(f"{name}: no landuse points or areas {where}: the 9 landuse columns "
                      "are the same for every node", stacklevel=2)
    stage("simplifying")
    merged, order, streets = _street_network(roads)
    stage("features")
    if len(order) < 10:  # labels and features are still right; training will refuse it
        warnings.warn(f"the largest connected street network of {name} has {len(order)} "
                      "intersections: the City-Networks split (10% train, 10% validation) "
                      "leaves no training or validation nodes", stacklevel=2)
    index = {n: i for i, n in enumerate(order)}
    arrays = _encode(merged, order, index, roads, streets)
    lengths = arrays.pop("lengths")
    stage(f"{hops}-hop labels")
    graph = Graph(arrays["edge_indices"], num_nodes=len(order))
    # the release ranks float32 eccentricities (its list of floats made a tensor)
    labels = eccentricity_classes(local_eccentricity(graph, lengths, hops).float(),
                                  num_classes, stacklevel=3)
    train, val, test = city_split(len(order))
    arrays.update({f"{num_classes}-chunk_{hops}-hop_node_labels.pt": labels,
                   "train_mask.pt": train, "valid_mask.pt": val, "test_mask.pt": test})
    stage("writing")
    bar.close()
    return _write_release(arrays, out_dir, name)


def _check_plain_name(name) -> None:
    """The archive is ``out_dir/<name>.tar.gz``: a name with a folder in it ("../x") wrote
    it elsewhere."""
    if not isinstance(name, str) or not name or name in (".", "..") or \
            os.path.basename(name) != name or (os.altsep and os.altsep in name):
        raise ValueError(f"name must be a plain file name (the archive is "
                         f"<out_dir>/<name>.tar.gz), got {name!r}")


def _encode(merged, order, index, roads, streets) -> dict:
    """Step 5: the release's tensors, in its float32 arithmetic and order: each street's
    features encoded (speeds and vocabularies counting self-loops, as the release removes
    them only after), made undirected by PyG's to_undirected (edges sorted by source then
    destination, each pair's directed features averaged in float32), self-loops removed,
    and the augmented node features the float32 mean of the incoming edges' features."""
    speeds = _impute_speeds(merged)
    columns = [np.array([[a["length"]] for _, _, a in merged]), speeds[:, None]]
    for key in ("oneway", "lanes", "reversed", "highway"):
        values = [_stringified(a.get(key)) for _, _, a in merged]
        vocab = _vocabulary(values, key)
        width = len(FIXED[key]) if key in FIXED else WIDTHS[key]
        columns.append(_one_hot(values, vocab, width))
    directed = torch.from_numpy(np.concatenate(columns, axis=1)).float()  # [E_directed, 25]
    ends = torch.tensor([[index[u], index[v]] for u, v, _ in merged]).reshape(-1, 2).t()
    edge_index, edge_feats = _undirected_mean(ends, directed, len(order))
    node = torch.from_numpy(np.concatenate(
        [np.array([[*roads.coords[n], streets[n]] for n in order]),
         _landuse_one_hot(roads, order)], axis=1)).float()  # [N, 12]
    incident = torch.zeros(len(order), edge_feats.size(1)).index_add_(0, edge_index[1],
                                                                       edge_feats)
    count = torch.zeros(len(order), 1).index_add_(0, edge_index[1],
                                                  torch.ones(edge_index.size(1), 1))
    incident /= torch.where(count == 0, 1.0, count)
    return {"node_features.pt": node,
            "node_features_augmented.pt": torch.cat([node, incident], dim=1),
            "edge_indices": edge_index, "lengths": edge_feats[:, 0].double()}


def _undirected_mean(edge_index: Tensor, feats: Tensor, num_nodes: int):
    """PyG's ``to_undirected(edge_index, feats, reduce="mean")`` then
    ``remove_self_loops``, as the release ran them: both directions of every edge,
    sorted by ``source * N + destination``, each pair's rows summed in float32 in that
    order and divided by their count."""
    both = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    feats = torch.cat([feats, feats])
    key, perm = torch.sort(both[0] * num_nodes + both[1], stable=True)
    pairs, group = torch.unique_consecutive(key, return_inverse=True)
    sums = torch.zeros(pairs.numel(), feats.size(1)).scatter_add_(
        0, group[:, None].expand(-1, feats.size(1)), feats[perm])
    count = torch.zeros(pairs.numel()).scatter_add_(0, group, torch.ones(group.numel()))
    mean = sums / count.clamp(min=1)[:, None]
    edge_index = torch.stack([pairs // num_nodes, pairs % num_nodes])
    loop = edge_index[0] == edge_index[1]
    return edge_index[:, ~loop], mean[~loop]


def _landuse_one_hot(roads, order) -> np.ndarray:
    width = WIDTHS["landuse"]
    if not roads.landuse:
        return _one_hot(["nan"] * len(order), ["nan"], width)
    values = [roads.landuse[i][1] for i in _nearest_feature(
        [geometry for geometry, _ in roads.landuse], np.array([roads.coords[n] for n in order]))]
    return _one_hot(values, _vocabulary(values, "landuse"), width)


def _nearest_feature(wkbs: list, points: np.ndarray) -> np.ndarray:
    """Index of the nearest geometry (planar distance in degrees, 0 inside an area) to
    each point. Ties go as in the release's ``sjoin_nearest`` then ``keep="first"``: to the
    first match of the same STRtree's query (geopandas' spatial index, node capacity 10,
    its matches kept in the tree's order), not to the lowest index."""
    shapely = _extra("shapely")
    tree = shapely.STRtree(shapely.from_wkb(wkbs), node_capacity=10)
    (point, geometry) = tree.query_nearest(shapely.points(points), all_matches=True)
    order = np.argsort(point, kind="stable")  # grouped by point, the tree's order kept
    point, geometry = point[order], geometry[order]
    _, first = np.unique(point, return_index=True)
    return geometry[first]


def _write_release(arrays: dict, out_dir: str, name: str) -> str:
    arrays["edge_indices.pt"] = arrays.pop("edge_indices")
    path = os.path.join(out_dir, f"{name}.tar.gz")
    # mtime 0 in the gzip header and every entry: the same city gives the same bytes
    with atomic_file(path) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0, compresslevel=6) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for file in sorted(arrays):
            data = io.BytesIO()
            torch.save(arrays[file], data)
            info = tarfile.TarInfo(f"{name}/{file}")
            info.size, info.mtime = data.tell(), 0
            data.seek(0)
            tar.addfile(info, data)
    return path
