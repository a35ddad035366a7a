"""Datasets: City-Networks road graphs and their labels."""

from graphloc.datasets.labels import eccentricity_classes, local_eccentricity

__all__ = ["local_eccentricity", "eccentricity_classes"]
