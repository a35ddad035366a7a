"""Reading a user's graph file: the road-like graph (``graphs.road_like``) written in each
format graphloc reads, and ``load_graph_file``'s time per format, median of ``--turns``
reads in turns in one process. For an edge list of two integer columns the NumPy path and
the field-by-field reader (which every other edge list takes) are both timed, and their
ratio is the median of the per-turn ratios.

``--memory``: each format's peak resident memory instead, and a features file
(``--features`` columns of floats) and a labels file beside the edge list, one fresh
process per read, and one that only imports. ``--compare-with DIR`` also
reads each file with the graphloc found in DIR (an older checkout), in turns.

    python benchmarks/bench_graph_files.py [--nodes 1000000] [--turns 3] [--write FILE]
    python benchmarks/bench_graph_files.py --memory [--features 64] [--compare-with DIR]
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import zstandard

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine, publish  # noqa: E402
from graphs import road_like  # noqa: E402

from graphloc.datasets import files  # noqa: E402


def write_formats(edges: np.ndarray, num_nodes: int, folder: str) -> dict:
    """The graph's edges (both directions of each pair) in each format; path by name."""
    text = "".join(f"{u} {v}\n" for u, v in edges.T.tolist())
    paths = {"edge list (.txt)": os.path.join(folder, "g.txt")}
    with open(paths["edge list (.txt)"], "w") as f:
        f.write(text)
    paths["edge list, gzip (.txt.gz)"] = paths["edge list (.txt)"] + ".gz"
    with open(paths["edge list (.txt)"], "rb") as src, \
            gzip.open(paths["edge list, gzip (.txt.gz)"], "wb") as dst:
        shutil.copyfileobj(src, dst)
    paths["edge list with weights (.txt, 3 columns)"] = os.path.join(folder, "w.txt")
    with open(paths["edge list with weights (.txt, 3 columns)"], "w") as f:
        f.write("".join(f"{u} {v} {(u * 7 + v) % 100 / 8}\n" for u, v in edges.T.tolist()))
    paths["DIMACS arcs (.gr)"] = os.path.join(folder, "g.gr")
    with open(paths["DIMACS arcs (.gr)"], "w") as f:
        f.write(f"p sp {num_nodes} {edges.shape[1]}\n")
        f.write("".join(f"a {u + 1} {v + 1} 1\n" for u, v in edges.T.tolist()))
    paths["METIS (.graph)"] = os.path.join(folder, "g.graph")
    order = np.lexsort((edges[1], edges[0]))
    starts = np.searchsorted(edges[0][order], np.arange(num_nodes + 1))
    neighbours = (edges[1][order] + 1).tolist()
    with open(paths["METIS (.graph)"], "w") as f:
        f.write(f"{num_nodes} {edges.shape[1] // 2}\n")
        f.write("\n".join(" ".join(map(str, neighbours[starts[i]:starts[i + 1]]))
                          for i in range(num_nodes)) + "\n")
    paths["NumPy archive (.npz)"] = os.path.join(folder, "g.npz")
    np.savez(paths["NumPy archive (.npz)"], edge_index=edges)
    paths["graph-tool (.gt)"] = os.path.join(folder, "g.gt")
    data = graph_tool_bytes(num_nodes, edges[0][order], edges[1][order], starts)
    with open(paths["graph-tool (.gt)"], "wb") as f:
        f.write(data)
    paths["graph-tool, zstd (.gt.zst)"] = paths["graph-tool (.gt)"] + ".zst"
    with open(paths["graph-tool, zstd (.gt.zst)"], "wb") as f:
        f.write(zstandard.ZstdCompressor().compress(data))
    return paths


def graph_tool_bytes(num_nodes: int, sources, targets, starts) -> bytes:
    """A directed graph-tool file of the edges (grouped by source, ``starts`` the groups'
    bounds), with a "name" vertex property of strings (netzschleuder's layout)."""
    kind = "<u1" if num_nodes < 2**8 else "<u2" if num_nodes < 2**16 else "<u4"
    comment = b"bench_graph_files"
    parts = [b"\xe2\x9b\xbe gt\x01\x00", struct.pack("<Q", len(comment)), comment, b"\x01",
             struct.pack("<Q", num_nodes)]
    neighbours = targets.astype(kind)
    for v in range(num_nodes):
        parts += [struct.pack("<Q", starts[v + 1] - starts[v]),
                  neighbours[starts[v]:starts[v + 1]].tobytes()]
    names = [f"v{v}".encode() for v in range(num_nodes)]
    parts += [struct.pack("<Q", 1), b"\x01", struct.pack("<Q", 4), b"name", b"\x06"]
    parts += [struct.pack("<Q", len(name)) + name for name in names]
    return b"".join(parts)


def timed(path: str) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files.load_graph_file(path)
    return time.perf_counter() - start


def timed_general(path: str) -> float:
    """The field-by-field reader alone: the NumPy path turned off."""
    fast = files._integer_edge_columns
    files._integer_edge_columns = lambda p: None
    try:
        return timed(path)
    finally:
        files._integer_edge_columns = fast


# one read in a fresh process (none without a graph file): the process's peak resident
# memory, in MiB (the imports' own peak is the row without a read). VmHWM, not ru_maxrss,
# which a child keeps from the parent it was forked from (this benchmark holds the graph)
_PEAK_OF_ONE_READ = """
import sys, warnings
warnings.simplefilter("ignore")
from graphloc.datasets import files
graph, features, labels = (arg or None for arg in sys.argv[1:4])
if graph:
    files.load_graph_file(graph, features, labels)
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(int(peak.split()[1]) / 1024)
"""


def peak_mb(graph: str = "", features: str = "", labels: str = "",
            tree: str | None = None) -> float:
    # run in the tree: the working directory comes first on the path of `python -c`
    env = dict(os.environ, PYTHONPATH=tree) if tree else None
    out = subprocess.run([sys.executable, "-c", _PEAK_OF_ONE_READ, graph, features, labels],
                         check=True, capture_output=True, text=True, env=env, cwd=tree)
    return float(out.stdout.split()[-1])


def write_node_files(num_nodes: int, width: int, folder: str) -> tuple[str, str]:
    """A features file (``width`` floats per line, comma separated, six significant
    digits) and a labels file (a class id per line)."""
    rng = np.random.default_rng(0)
    features, labels = os.path.join(folder, "x.csv"), os.path.join(folder, "y.txt")
    np.savetxt(features, rng.standard_normal((num_nodes, width)), fmt="%.6g", delimiter=",")
    np.savetxt(labels, rng.integers(0, 10, num_nodes), fmt="%d")
    return features, labels


def memory(args, graph) -> str:
    trees = {"this checkout": None, **({args.compare_with: args.compare_with}
                                       if args.compare_with else {})}
    with tempfile.TemporaryDirectory() as folder:
        paths = write_formats(graph.edge_index.numpy(), graph.num_nodes, folder)
        features, labels = write_node_files(graph.num_nodes, args.features, folder)
        reads = {"none (the imports alone)": ("", "", "")}
        reads.update({name: (path, "", "") for name, path in paths.items()})
        reads[f"edge list (.txt) with {args.features} features (.csv) and labels (.txt)"] = \
            (paths["edge list (.txt)"], features, labels)
        sizes = {name: sum(os.path.getsize(p) for p in read if p)
                 for name, read in reads.items()}
        peaks = {(name, tree): [] for name in reads for tree in trees}
        for _ in range(args.turns):
            for name, read in reads.items():
                for tree in trees:
                    peaks[name, tree].append(peak_mb(*read, tree=trees[tree]))
    header = " | ".join(f"peak MiB, {tree}" for tree in trees)
    lines = [f"## Reading graph files: peak memory (`benchmarks/bench_graph_files.py --memory "
             f"--nodes {args.nodes} --features {args.features} --turns {args.turns}`), "
             f"{datetime.date.today()}, {machine()}", "",
             f"The road-like graph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges. "
             "Median over the turns of the peak resident memory of a fresh process that "
             "imports graphloc and reads the file with `load_graph_file`.", "",
             f"| file | MB on disk | {header} |", "|---|---:|" + "---:|" * len(trees)]
    lines += [f"| {name} | {sizes[name] / 1e6:.1f} | " + " | ".join(
        f"{statistics.median(peaks[name, tree]):.0f}" for tree in trees) + " |"
        for name in reads]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--write", help="append the table to this file (RESULTS.md)")
    parser.add_argument("--memory", action="store_true", help="peak memory, not time")
    parser.add_argument("--features", type=int, default=64, help="--memory's feature width")
    parser.add_argument("--compare-with", metavar="DIR", help="--memory: also graphloc in DIR")
    args = parser.parse_args(argv)
    graph = road_like(args.nodes)
    if args.memory:
        publish(memory(args, graph), args.write)
        return
    edges = graph.edge_index.numpy()
    plain, weighted = "edge list (.txt)", "edge list with weights (.txt, 3 columns)"
    with tempfile.TemporaryDirectory() as folder:
        paths = write_formats(edges, graph.num_nodes, folder)
        times = {name: [] for name in paths}
        general = {plain: [], weighted: []}
        for _ in range(args.turns):
            for name, path in paths.items():
                times[name].append(timed(path))
            for name in general:
                general[name].append(timed_general(paths[name]))
    lines = [f"## Reading graph files (`benchmarks/bench_graph_files.py --nodes {args.nodes} "
             f"--turns {args.turns}`), {datetime.date.today()}, {machine()}", "",
             f"The road-like graph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges "
             "(both directions of each pair). Median seconds of `load_graph_file`.", "",
             "| file | seconds |", "|---|---:|"]
    lines += [f"| {name} | {statistics.median(t):.2f} |" for name, t in times.items()]
    lines += [f"| {name}, field by field (the general reader) | {statistics.median(t):.2f} |"
              for name, t in general.items()]
    lines.append("")
    for name, slow in general.items():
        ratios = [g / t for g, t in zip(slow, times[name], strict=True)]
        lines.append(f"The NumPy path reads the {name} {statistics.median(ratios):.1f}x "
                     "faster than the general reader (median of the per-turn ratios).")
    lines.append("")
    publish("\n".join(lines), args.write)


if __name__ == "__main__":
    main()
