"""Datasets: City-Networks road graphs, their labels, and synthetic cities."""

from graphloc.datasets.base import NodeDataset, city_split
from graphloc.datasets.city import CityNetwork
from graphloc.datasets.labels import eccentricity_classes, local_eccentricity
from graphloc.datasets.ogb import ogb_node
from graphloc.datasets.stats import road_statistics
from graphloc.datasets.synthetic import synthetic_city

__all__ = ["NodeDataset", "CityNetwork", "city_split", "local_eccentricity",
           "eccentricity_classes", "road_statistics", "synthetic_city", "ogb_node"]
