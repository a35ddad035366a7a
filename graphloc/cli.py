"""The ``graphloc`` command line. Subcommands join as their features land."""

from __future__ import annotations

import argparse
import sys

import torch

import graphloc


def info(_args) -> int:
    """Prints what this installation runs on: versions, kernels, threads, devices."""
    print(f"graphloc {graphloc.__version__}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    if graphloc.HAS_EXTENSION:
        cuda = torch._C._dispatch_has_kernel_for_dispatch_key("graphloc::spmm", "CUDA")
        print(f"kernels: compiled graphloc._C (CPU{' + CUDA' if cuda else ''})")
    else:
        print("kernels: pure-torch reference ops (graphloc._C not loaded)")
    print(f"CUDA devices: {torch.cuda.device_count() if torch.cuda.is_available() else 0}")
    return 0


def dataset_build(args) -> int:
    """Builds a City-Networks-style dataset from an OSM extract or a GraphML street graph."""
    import time

    from graphloc.datasets.osm import build_city_network
    start = time.perf_counter()
    path = build_city_network(args.source, args.out, name=args.name, hops=args.hops,
                              num_classes=args.classes)
    print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    return 0


def dataset_stats(args) -> int:
    """Road statistics of a dataset: a city name or synthetic:N."""
    from graphloc.datasets import CityNetwork, road_statistics, synthetic_city
    if args.dataset.startswith("synthetic:"):
        dataset = synthetic_city(int(args.dataset.split(":", 1)[1]), seed=args.seed)
    else:
        dataset = CityNetwork(args.root, args.dataset)
    for key, value in road_statistics(dataset.graph).items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    print(f"features: {dataset.num_features}, classes: {dataset.num_classes}")
    return 0


def _add_dataset_commands(commands) -> None:
    dataset = commands.add_parser("dataset", help="build and inspect datasets")
    sub = dataset.add_subparsers(dest="action", required=True)
    build = sub.add_parser("build", help=dataset_build.__doc__)
    build.add_argument("source", help=".osm.pbf, .osm or .graphml file")
    build.add_argument("--out", required=True, help="folder for <name>.tar.gz")
    build.add_argument("--name", help="dataset name (default: from the file name)")
    build.add_argument("--hops", type=int, default=16)
    build.add_argument("--classes", type=int, default=10)
    build.set_defaults(run=dataset_build)
    stats = sub.add_parser("stats", help=dataset_stats.__doc__)
    stats.add_argument("dataset", help="helsinki, paris, shanghai, la, london or synthetic:N")
    stats.add_argument("--root", default="data")
    stats.add_argument("--seed", type=int, default=0)
    stats.set_defaults(run=dataset_stats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphloc", description=graphloc.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help=info.__doc__).set_defaults(run=info)
    _add_dataset_commands(commands)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
