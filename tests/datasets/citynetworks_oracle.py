"""Writes ``data/citynetworks_helsinki.npz``: the City-Networks release pipeline itself
(its ``generate_network.py`` steps and ``generate_dataset.feature_engineering``, run from a
checkout of github.com/LeonResearch/City-Networks) on osmnx 1.9.4's graph of the bundled
Helsinki extract, which ``test_osm.py`` compares with graphloc's build. Not run by the
tests; two steps, when the extract or the pipeline changes:

    # 1. in graphloc's environment: the extract as the OSM XML osmnx reads
    python tests/datasets/citynetworks_oracle.py extract /tmp/helsinki
    # 2. in an environment with osmnx==1.9.4, torch, torch-geometric and scikit-learn
    python tests/datasets/citynetworks_oracle.py release /tmp/helsinki path/to/City-Networks

Step 1 writes the extract's public road ways (cut where the extract clips them, each
piece numbered way id x 1000 + k, as osmnx needs complete ways) and, for the landuse
features, every element whose references the extract holds. Step 2 sorts the merged
streets' value lists (osmnx keeps them in Python's set order, graphloc sorted) and maps
way pieces back to their ways; everything else is the release's own code.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXTRACT = os.path.join(HERE, "..", "..", "graphloc", "datasets", "samples", "helsinki.osm.pbf")
FIXTURE = os.path.join(HERE, "data", "citynetworks_helsinki.npz")


def _write_roads(osmium, out: str) -> None:
    from xml.sax.saxutils import quoteattr

    from graphloc.datasets.osm import _is_public_road
    coords, ways = {}, []

    class Roads(osmium.SimpleHandler):
        def way(self, w):
            tags = dict(w.tags)
            if "highway" not in tags or not _is_public_road(tags):
                return
            run, piece = [], 0
            for n in [*w.nodes, None]:
                if n is not None and n.location.valid():
                    coords[n.ref] = (n.lon, n.lat)
                    run.append(n.ref)
                    continue
                if run:
                    ways.append((w.id * 1000 + piece, run, tags))
                    piece += 1
                run = []
    Roads().apply_file(EXTRACT, locations=True)
    with open(out, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6">\n')
        for n in sorted(coords):
            f.write(f'<node id="{n}" lat="{coords[n][1]:.7f}" lon="{coords[n][0]:.7f}"/>\n')
        for way, nodes, tags in ways:
            f.write(f'<way id="{way}">' + "".join(f'<nd ref="{n}"/>' for n in nodes))
            f.write("".join(f"<tag k={quoteattr(k)} v={quoteattr(v)}/>" for k, v in tags.items()))
            f.write("</way>\n")
        f.write("</osm>\n")


def _write_complete(osmium, out: str) -> None:
    nodes, ways = set(), set()

    class Nodes(osmium.SimpleHandler):
        def node(self, n):
            nodes.add(n.id)
    Nodes().apply_file(EXTRACT)
    writer = osmium.SimpleWriter(out, overwrite=True)

    class Complete(osmium.SimpleHandler):
        def node(self, n):
            writer.add_node(n)

        def way(self, w):
            if all(r.ref in nodes for r in w.nodes):
                ways.add(w.id)
                writer.add_way(w)

        def relation(self, r):
            if all(m.type == "r" or m.ref in (nodes if m.type == "n" else ways)
                   for m in r.members):
                writer.add_relation(r)
    Complete().apply_file(EXTRACT)
    writer.close()


def extract(folder: str) -> None:
    import osmium
    os.makedirs(folder, exist_ok=True)
    _write_roads(osmium, os.path.join(folder, "roads.osm"))
    _write_complete(osmium, os.path.join(folder, "complete.osm"))


def release(folder: str, citynetworks: str) -> None:
    import types
    import warnings

    import geopandas as gpd
    import networkx as nx
    import numpy as np
    import osmnx as ox
    import torch
    from osmnx import graph, osm_xml, simplification, stats, truncate
    warnings.filterwarnings("ignore")
    assert ox.__version__ == "1.9.4", ox.__version__
    sys.path.insert(0, os.path.join(citynetworks, "dataset_generation"))
    from generate_dataset import feature_engineering
    G = graph._create_graph([osm_xml._overpass_json_from_file(
        os.path.join(folder, "roads.osm"), "utf-8")], retain_all=True)
    simplified = simplification.simplify_graph(G)  # graph_from_polygon's order of steps
    G = truncate.largest_component(simplified)
    nx.set_node_attributes(G, stats.count_streets_per_node(simplified, nodes=G.nodes),
                           "street_count")
    for *_, d in G.edges(data=True):
        ways = d["osmid"] if isinstance(d["osmid"], list) else [d["osmid"]]
        ways = sorted({w // 1000 for w in ways})
        d["osmid"] = ways[0] if len(ways) == 1 else ways
        for key, value in d.items():
            if isinstance(value, list):
                d[key] = sorted(value, key=str)
    land_use = ox.features_from_xml(os.path.join(folder, "complete.osm"),
                                    tags={"landuse": True})
    G = ox.add_edge_speeds(G)
    # generate_network.py from here on
    nodes = ox.graph_to_gdfs(G, nodes=True, edges=False)
    nodes_with_land_use = gpd.sjoin_nearest(nodes, land_use, how="inner")
    nodes = nodes.join(nodes_with_land_use.landuse, how="inner")
    nodes = nodes[~nodes.index.duplicated(keep="first")].drop(columns="geometry")
    edges = ox.graph_to_gdfs(G, nodes=False).drop(columns="geometry")
    edges["highway"] = edges["highway"].astype(str)
    top_k = {"oneway": 4, "lanes": 8, "reversed": 4, "highway": 8, "landuse": 8}
    out = os.path.join(folder, "release") + os.sep
    os.makedirs(out, exist_ok=True)
    feature_engineering(types.SimpleNamespace(augment_node_attr=True), out,
                        nodes.reset_index(), edges.reset_index(), [16], 10, top_k)
    names = ["node_features", "node_features_augmented", "edge_indices",
             "10-chunk_16-hop_node_labels", "train_mask", "valid_mask", "test_mask"]
    np.savez_compressed(FIXTURE, **{name.replace("-", "_"): torch.load(
        f"{out}{name}.pt").numpy() for name in names})


if __name__ == "__main__":
    {"extract": extract, "release": release}[sys.argv[1]](*sys.argv[2:])
