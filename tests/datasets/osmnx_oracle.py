"""Writes ``data/osmnx_1_9_4_streets.json.gz``: osmnx 1.9.4's street network of every
``osm_extracts`` extract, by the steps of the published City-Networks pipeline
(``graph_from_polygon``: the graph of all ways, simplified, lone rings removed, then the
largest weakly connected component, ``street_count`` on the simplified graph and
``add_edge_speeds``). Not run by the tests (osmnx 1.9 pins numpy < 1.27): run it in its
own environment when the extracts change::

    python -m venv /tmp/oxenv && /tmp/oxenv/bin/pip install osmnx==1.9.4
    /tmp/oxenv/bin/python tests/datasets/osmnx_oracle.py

Two choices osmnx leaves to Python's string hashing are fixed as graphloc fixes them: a
merged street's list of values is sorted, so the speed imputation takes the
alphabetically first of its highway types.
"""

import gzip
import json
import os
import sys
import tempfile
import warnings

import osmnx as ox
from osmnx import graph, osm_xml, simplification, stats, truncate

sys.path.insert(0, os.path.dirname(__file__))
from osm_extracts import SEEDS, random_extract, street_row  # noqa: E402


def _streets(path: str) -> dict:
    G = graph._create_graph([osm_xml._overpass_json_from_file(path, "utf-8")],
                            retain_all=True)
    simplified = simplification.simplify_graph(G)
    if len(simplified) == 0:
        return {"nodes": [], "streets": []}
    G = truncate.largest_component(simplified)
    counts = stats.count_streets_per_node(simplified, nodes=G.nodes)
    for *_, d in G.edges(data=True):
        for key, value in d.items():
            if isinstance(value, list):
                d[key] = sorted(value, key=str)
    try:
        G = ox.add_edge_speeds(G)
    except ValueError:  # no maxspeed at all: osmnx refuses, graphloc gives 30 km/h
        for *_, d in G.edges(data=True):
            d["speed_kph"] = 30.0
    return {"nodes": [[str(n), counts[n]] for n in G.nodes],
            "streets": [street_row(u, v, d, d["length"], d["speed_kph"])
                        for u, v, d in G.edges(data=True)]}


def main() -> None:
    warnings.filterwarnings("ignore")
    assert ox.__version__ == "1.9.4", ox.__version__
    answers = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in SEEDS:
            path = os.path.join(tmp, f"{seed}.osm")
            with open(path, "w") as f:
                f.write(random_extract(seed))
            answers[seed] = _streets(path)
    out = os.path.join(os.path.dirname(__file__), "data", "osmnx_1_9_4_streets.json.gz")
    text = json.dumps({"osmnx": ox.__version__, "extracts": answers}, separators=(",", ":"))
    with open(out, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(text.encode())


if __name__ == "__main__":
    main()
