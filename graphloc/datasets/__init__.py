"""Datasets: City-Networks road graphs, their labels, and synthetic cities; transaction
multigraphs (IBM AML format) and their generator."""

from graphloc.datasets.aml import (
    AMLTransactions,
    EdgeDataset,
    synthetic_transactions,
    temporal_split,
)
from graphloc.datasets.base import NodeDataset, city_split
from graphloc.datasets.city import CityNetwork, load_built_city
from graphloc.datasets.labels import eccentricity_classes, local_eccentricity
from graphloc.datasets.ogb import ogb_node
from graphloc.datasets.osm import build_city_network
from graphloc.datasets.stats import road_statistics
from graphloc.datasets.synthetic import synthetic_city, write_osm_xml


def load_dataset(spec: str, root: str = "data", seed: int = 0) -> NodeDataset:
    """A dataset named the way the command line names them: a City-Networks city
    ("helsinki", "paris", ...; files under ``root``), ``synthetic:N`` (seeded), ``ogb:NAME``
    or the ``.tar.gz`` of a city built by ``build_city_network``."""
    if spec.endswith(".tar.gz"):
        return load_built_city(spec)
    if spec.startswith("synthetic:"):
        count = spec.split(":", 1)[1]
        if not count.strip().isdigit():
            raise ValueError(f"synthetic:N needs an integer node count N, got {spec!r}")
        return synthetic_city(int(count), seed=seed)
    if spec.startswith("ogb:"):
        return ogb_node(spec.split(":", 1)[1], root)
    return CityNetwork(root, spec)


__all__ = ["load_dataset", "NodeDataset", "CityNetwork", "build_city_network", "city_split",
           "local_eccentricity", "eccentricity_classes", "road_statistics", "synthetic_city",
           "ogb_node", "AMLTransactions", "EdgeDataset", "synthetic_transactions",
           "temporal_split", "write_osm_xml"]
