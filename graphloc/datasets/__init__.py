"""Datasets: City-Networks road graphs, their labels, and synthetic cities; transaction
multigraphs (IBM AML format) and their generator; heterogeneous graphs (ACM, DBLP, IMDB of
the GTN release; AML accounts, banks and currencies)."""

import os
from dataclasses import replace

from graphloc.checks import check_seed, check_text
from graphloc.datasets.aml import (
    AMLTransactions,
    EdgeDataset,
    daily_split,
    synthetic_transactions,
    temporal_split,
)
from graphloc.datasets.base import NodeDataset, city_split, with_missing_reverses
from graphloc.datasets.city import CityNetwork, load_built_city
from graphloc.datasets.files import (
    check_label_column,
    is_graph_file,
    load_graph_archive,
    load_graph_file,
)
from graphloc.datasets.hetero import (
    GTN_LAYOUT,
    HeteroNodeDataset,
    aml_accounts,
    gtn_dataset,
    read_gtn,
)
from graphloc.datasets.labels import eccentricity_classes, local_eccentricity
from graphloc.datasets.ogb import ogb_node
from graphloc.datasets.osm import build_city_network
from graphloc.datasets.readers import archive_members, is_archive
from graphloc.datasets.stats import road_statistics
from graphloc.datasets.synthetic import synthetic_city, write_osm_xml

ACCEPTED = ("a City-Networks city (paris, shanghai, la, london) or helsinki; synthetic:N; "
            "ogb:NAME; heterogeneous: acm, dblp, imdb (GTN release), aml-accounts (synthetic "
            "transactions) or aml-accounts:NAME (ROOT/aml/NAME_Trans.csv); a city built by "
            "`graphloc dataset build` (.tar.gz); or your own graph "
            "file: a saved PyG Data or HeteroData (.pt), a NumPy archive (.npz: a SciPy "
            "sparse adjacency, "
            "the gnn-benchmark layout or an edge_index), GraphML, GML, GEXF, node-link "
            "JSON, graph6 (.g6), sparse6 (.s6) or an adjacency list (.adjlist), a "
            "MatrixMarket adjacency (.mtx), an edge list (.csv, .tsv, .txt, .edges, "
            ".edgelist, KONECT's out.NAME), METIS (.graph), DIMACS (.gr, .col), Pajek "
            "(.net) or graph-tool (.gt); text files and .gt also compressed (.gz, .bz2, "
            ".xz, .zst: netzschleuder's .gt.zst), or inside a downloaded "
            "archive (.tar.gz, .tar.bz2, .tar.xz, .tar, .zip: KONECT, SuiteSparse, Network "
            "Repository); with --features / --labels files")


def load_dataset(spec: str, root: str = "data", seed: int = 0, features: str | None = None,
                 labels: str | None = None, undirected: bool | None = None, *,
                 label_column: str | None = None,
                 feature_columns: list | None = None) -> NodeDataset:
    """A dataset named the way the command line names them: a City-Networks city
    ("helsinki", "paris", ...; files under ``root``), ``synthetic:N`` (seeded), ``ogb:NAME``,
    the ``.tar.gz`` of a city built by ``build_city_network``, or a graph file of the
    user's (:func:`graphloc.datasets.files.load_graph_file`, with optional ``features``
    and ``labels`` files; ``undirected``, ``label_column`` and ``feature_columns`` as
    there).
    ``undirected=True`` gives any other homogeneous dataset each edge's missing reverse
    too (OGB's ogbn-arxiv is directed as OGB ships it; OGB's own baselines make it
    undirected). An unknown name lists the accepted forms."""
    check_text("load_dataset", "spec", spec, path=True)
    check_seed(seed)
    spec = os.fspath(spec)
    check_label_column(label_column)
    if (label_column or feature_columns) and not (is_graph_file(spec) or is_archive(spec)):
        raise ValueError(f"--label-column and --feature-columns name columns of --labels "
                         f"and --features files or node attributes of a graph file, not of "
                         f"{spec!r}")
    graph_archive = is_archive(spec) and not _is_city_release(spec)
    if (features or labels) and not (is_graph_file(spec) or graph_archive):
        raise ValueError(f"--features / --labels go with a graph file, not {spec!r}")
    if is_graph_file(spec):
        return load_graph_file(spec, features, labels, undirected, label_column=label_column,
                               feature_columns=feature_columns)
    if graph_archive:
        return load_graph_archive(spec, features, labels, undirected,
                                  label_column=label_column, feature_columns=feature_columns)
    dataset = _named_dataset(spec, root, seed)
    if not undirected:
        return dataset
    if not isinstance(dataset, NodeDataset):
        raise ValueError(f"--undirected takes a homogeneous graph; {spec} is heterogeneous")
    # a directed dataset (OGB's arxiv, as OGB ships it) with each edge's missing reverse
    graph, edge_attr = with_missing_reverses(dataset.graph, dataset.edge_attr)
    return replace(dataset, graph=graph, edge_attr=edge_attr)


def _is_city_release(spec: str) -> bool:
    """A .tar.gz that holds a City-Networks release (``<name>/edge_indices.pt``), as the
    builder writes; an unreadable one too, for the city loader to name its fault."""
    if not spec.lower().endswith(".tar.gz") or not os.path.isfile(spec):
        return spec.lower().endswith(".tar.gz")
    try:
        return any(m.endswith("/edge_indices.pt") for m in archive_members(spec))
    except ValueError:
        return True


def _named_dataset(spec: str, root: str, seed: int):
    if spec.endswith(".tar.gz"):
        return load_built_city(spec)
    if spec.startswith("synthetic:"):
        count = spec.split(":", 1)[1]
        if not count.strip().isdigit():
            raise ValueError(f"synthetic:N needs an integer node count N, got {spec!r}")
        return _cached_synthetic(int(count), seed, root)
    if spec.startswith("ogb:"):
        return ogb_node(spec.split(":", 1)[1], root)
    if spec in GTN_LAYOUT:
        return gtn_dataset(spec, root)
    if spec == "aml-accounts" or spec.startswith("aml-accounts:"):
        return _aml_accounts(spec.partition(":")[2], root, seed)
    from graphloc.datasets.city import REGISTRY
    if spec not in REGISTRY:
        raise ValueError(f"unknown dataset {spec!r}: expected {ACCEPTED}. A street network "
                         "(an .osm.pbf extract or an osmnx GraphML) becomes a City-Networks "
                         "dataset with `graphloc dataset build FILE --out DIR`")
    return CityNetwork(root, spec)


__all__ = ["load_dataset", "NodeDataset", "CityNetwork", "build_city_network", "city_split",
           "local_eccentricity", "eccentricity_classes", "road_statistics", "synthetic_city",
           "ogb_node", "AMLTransactions", "EdgeDataset", "synthetic_transactions",
           "temporal_split", "daily_split", "write_osm_xml", "HeteroNodeDataset",
           "gtn_dataset", "read_gtn", "aml_accounts"]


def _aml_accounts(name: str, root: str, seed: int) -> HeteroNodeDataset:
    """aml-accounts: the IBM file ``root/aml/<name>_Trans.csv``, or (no name) synthetic
    transactions generated there once (seeded)."""
    import os
    folder = os.path.join(root, "aml")
    if not name:
        name = f"Synthetic-{seed}"
        if not os.path.exists(os.path.join(folder, f"{name}_Trans.csv")):
            synthetic_transactions(root=folder, name=name, seed=seed)
    return aml_accounts(AMLTransactions(folder, name), seed=seed)


def _cached_synthetic(num_nodes: int, seed: int, root: str) -> NodeDataset:
    """``synthetic_city(num_nodes, seed)``, kept in ``root/synthetic/`` after the first
    command that asks for it (labels of a large city take minutes)."""
    import os

    from graphloc.graph import Graph
    from graphloc.io import atomic_save, load_file
    path = os.path.join(root, "synthetic", f"synthetic-{num_nodes}-{seed}.pt")
    keys = ("edge_index", "x", "y", "train_index", "val_index", "test_index")
    if os.path.exists(path):
        blob = load_file(path, "synthetic city cache", keys=keys,
                         rebuild="Delete it: it is generated again.")
        extra = {k: blob[k] for k in ("pos", "edge_attr") if k in blob}
        return NodeDataset(f"synthetic-{num_nodes}-{seed}",
                           Graph(blob["edge_index"], blob["x"].size(0)),
                           *(blob[k] for k in keys[1:]), **extra)
    city = synthetic_city(num_nodes, seed=seed)
    blob = {k: getattr(city, k) for k in keys[1:]}
    blob.update(edge_index=city.graph.edge_index, pos=city.pos, edge_attr=city.edge_attr)
    atomic_save({k: v for k, v in blob.items() if v is not None}, path)
    return city
