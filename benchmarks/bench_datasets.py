"""Dataset benchmark: the bundled Helsinki city and synthetic cities (build time, road
statistics), and the 16-hop local eccentricity labels on a London-sized (570,000-node) road
graph.

    python benchmarks/bench_datasets.py [--sizes 100000 1000000] [--write benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402

from graphloc.datasets import (  # noqa: E402
    CityNetwork,
    build_city_network,
    local_eccentricity,
    road_statistics,
    synthetic_city,
    write_osm_xml,
)

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "graphloc", "datasets", "samples",
                      "helsinki.osm.pbf")
PUBLISHED = [  # City-Networks paper / PyG docstring / authors' notebook
    ("paris", 114_127, 182_511, 3.20, 15, 121),
    ("shanghai", 183_917, 262_092, 2.85, 8, 123),
    ("la", 240_587, 341_523, 2.84, 9, 171),
    ("london", 568_795, 756_502, 2.66, 10, 404),
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--label-nodes", type=int, default=570_000)
    parser.add_argument("--osm-nodes", type=int, default=200_000,
                        help="intersections of the OSM file the builder is timed on")
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()  # the build itself (CityNetwork copies the shipped one)
        build_city_network(SAMPLE, tmp)
        total = time.perf_counter() - start
        helsinki = CityNetwork(tmp, "helsinki")
    rows.append(("helsinki (bundled OSM extract)", road_statistics(helsinki.graph),
                 f"{total:.1f} s (OSM to labelled archive)"))
    print(f"  {rows[-1]}", flush=True)
    for n in args.sizes:
        start = time.perf_counter()
        ds = synthetic_city(n, seed=0)
        total = time.perf_counter() - start
        stats = road_statistics(ds.graph)
        rows.append((f"synthetic {n:,}", stats, f"{total:.1f} s (incl. 16-hop labels)"))
        print(f"  {rows[-1]}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "city.osm")
        streets = write_osm_xml(synthetic_city(args.osm_nodes, seed=2, hops=1), path)
        start = time.perf_counter()
        build_city_network(path, tmp)
        build_s = time.perf_counter() - start
    print(f"  builder, {args.osm_nodes:,}-intersection OSM file: {build_s:.1f} s", flush=True)
    ds = synthetic_city(args.label_nodes, seed=1, hops=1)  # labels timed separately below
    lengths = ds.edge_attr[:, 0].double()
    start = time.perf_counter()
    local_eccentricity(ds.graph, lengths, hops=16)
    label_s = time.perf_counter() - start
    print(f"  16-hop labels, {args.label_nodes:,} nodes: {label_s:.1f} s", flush=True)

    lines = ["| graph | nodes | edges (undirected) | mean degree | max degree | "
             "hop diameter | clustering | build time |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, n, e, deg, maxdeg, diam in PUBLISHED:
        lines.append(f"| {name} (published) | {n:,} | {e:,} | {deg:.2f} | {maxdeg} | {diam} | "
                     "0.03-0.04 | |")
    for name, s, build in rows:
        lines.append(f"| {name} | {s['nodes']:,} | {s['edges']:,} | {s['mean_degree']:.2f} | "
                     f"{s['max_degree']} | {s['hop_diameter']} | {s['clustering']:.3f} | "
                     f"{build} |")
    header = f"{datetime.date.today().isoformat()}, {machine()}"
    text = (f"\n## Datasets (`benchmarks/bench_datasets.py`), {header}\n\n" + "\n".join(lines) +
            f"\n\n16-hop local eccentricity of a {args.label_nodes:,}-node synthetic city "
            f"({ds.graph.num_edges // 2:,} streets), C++ kernel, "
            f"{torch.get_num_threads()} threads: {label_s:.1f} s.\n\n"
            f"Builder (`build_city_network`, OSM file to labelled archive, 16-hop labels) on "
            f"an OSM XML file of a {args.osm_nodes:,}-intersection synthetic city, its "
            f"{streets:,} streets each a two-way way of 3 segments ({6 * streets:,} "
            f"directed segments): {build_s:.1f} s.\n")
    publish(text, args.write)


if __name__ == "__main__":
    main()
