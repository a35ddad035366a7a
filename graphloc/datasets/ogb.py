"""Open Graph Benchmark node property prediction datasets as a NodeDataset."""

from __future__ import annotations

import torch

from graphloc.checks import check_text
from graphloc.datasets.base import NodeDataset, class_labels, split_ids
from graphloc.graph import Graph


def ogb_node(name: str, root: str = "data/ogb") -> NodeDataset:
    """``ogbn-*`` through the ``ogb`` package (``pip install graphloc[ogb]``), which
    downloads and caches the files under ``root``. Labels become a flat ``[N]`` tensor
    (the first task for multi-task datasets is not supported: they raise)."""
    check_text("ogb_node", "name", name)
    try:
        from ogb.nodeproppred import NodePropPredDataset
    except ImportError as err:
        raise ImportError("ogb_node needs the ogb package: pip install 'graphloc[ogb]'") \
            from err
    try:
        dataset = NodePropPredDataset(name=name, root=root)
    except (OSError, EOFError) as err:  # URLError is an OSError; EOFError: no stdin to confirm
        raise ConnectionError(_offline_message(name, root, err)) from err
    graph, label = dataset[0]
    label = torch.as_tensor(label)
    if label.dim() == 2 and label.size(1) != 1:
        raise ValueError(f"{name} has {label.size(1)} tasks per node; ogb_node supports "
                         "single-task classification")
    split = dataset.get_idx_split()
    num_nodes = int(graph["num_nodes"])
    return NodeDataset(
        name=name, graph=Graph(torch.as_tensor(graph["edge_index"]).long(), num_nodes),
        x=torch.as_tensor(graph["node_feat"]).float(),
        # papers100M-style NaN labels (unlabelled nodes) are named, not cast to -2**63
        y=class_labels(label, name),
        train_index=split_ids(split["train"], "train", num_nodes),
        val_index=split_ids(split["valid"], "valid", num_nodes),
        test_index=split_ids(split["test"], "test", num_nodes))


def _offline_message(name: str, root: str, err: Exception) -> str:
    """What to fetch and where to put it when the ogb package cannot download."""
    import os
    try:
        from ogb.nodeproppred import master
        url = master.loc[name]["url"] if name in master else None
    except Exception:  # an older or newer ogb without the table
        url = None
    folder = os.path.join(root, name.replace("-", "_"))
    source = f"download {url} and unzip it" if url else f"download {name}'s archive from " \
        "the OGB website and unzip it"
    return (f"could not download the OGB dataset {name!r} ({type(err).__name__}: {err}). On a "
            f"machine without internet, {source} so that its files lie under {folder}/ "
            f"(raw/ and split/), then run again")
