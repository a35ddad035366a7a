"""Open Graph Benchmark node property prediction datasets as a NodeDataset."""

from __future__ import annotations

import torch

from graphloc.datasets.base import NodeDataset
from graphloc.graph import Graph


def ogb_node(name: str, root: str = "data/ogb") -> NodeDataset:
    """``ogbn-*`` through the ``ogb`` package (``pip install graphloc[ogb]``), which
    downloads and caches the files under ``root``. Labels become a flat ``[N]`` tensor
    (the first task for multi-task datasets is not supported: they raise)."""
    try:
        from ogb.nodeproppred import NodePropPredDataset
    except ImportError as err:
        raise ImportError("ogb_node needs the ogb package: pip install 'graphloc[ogb]'") \
            from err
    dataset = NodePropPredDataset(name=name, root=root)
    graph, label = dataset[0]
    label = torch.as_tensor(label)
    if label.dim() == 2 and label.size(1) != 1:
        raise ValueError(f"{name} has {label.size(1)} tasks per node; ogb_node supports "
                         "single-task classification")
    split = dataset.get_idx_split()
    num_nodes = int(graph["num_nodes"])
    return NodeDataset(
        name=name, graph=Graph(torch.as_tensor(graph["edge_index"]).long(), num_nodes),
        x=torch.as_tensor(graph["node_feat"]).float(), y=label.view(-1).long(),
        train_index=torch.as_tensor(split["train"]).long(),
        val_index=torch.as_tensor(split["valid"]).long(),
        test_index=torch.as_tensor(split["test"]).long())
