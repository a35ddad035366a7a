"""ogb_node's conversion, with a stand-in for the ogb package (no network here)."""

import sys
import types

import numpy as np
import pytest
import torch

from graphloc.datasets.ogb import ogb_node


def fake_ogb(monkeypatch, label):
    class NodePropPredDataset:
        def __init__(self, name, root):
            self.name, self.root = name, root

        def __getitem__(self, i):
            graph = {"num_nodes": 5, "edge_index": np.array([[0, 1, 3], [1, 2, 4]]),
                     "node_feat": np.arange(10, dtype=np.float32).reshape(5, 2)}
            return graph, label

        def get_idx_split(self):
            return {"train": np.array([0, 1]), "valid": np.array([2]),
                    "test": np.array([3, 4])}
    module = types.ModuleType("ogb.nodeproppred")
    module.NodePropPredDataset = NodePropPredDataset
    monkeypatch.setitem(sys.modules, "ogb", types.ModuleType("ogb"))
    monkeypatch.setitem(sys.modules, "ogb.nodeproppred", module)


def test_converts_graph_features_labels_and_split(monkeypatch):
    fake_ogb(monkeypatch, np.array([[1], [0], [2], [1], [0]]))
    ds = ogb_node("ogbn-fake", "/tmp")
    assert ds.graph.num_nodes == 5 and ds.graph.edge_index.tolist() == [[0, 1, 3], [1, 2, 4]]
    assert ds.y.tolist() == [1, 0, 2, 1, 0] and ds.num_classes == 3
    torch.testing.assert_close(ds.x[4], torch.tensor([8.0, 9.0]))
    assert ds.train_index.tolist() == [0, 1] and ds.test_mask.tolist() == [0, 0, 0, 1, 1]


def test_multitask_labels_are_rejected(monkeypatch):
    fake_ogb(monkeypatch, np.zeros((5, 3)))
    with pytest.raises(ValueError, match="3 tasks per node"):
        ogb_node("ogbn-proteins", "/tmp")


def test_offline_says_what_to_fetch_and_where(monkeypatch, tmp_path):
    import urllib.error
    fake_ogb(monkeypatch, np.zeros((5, 1)))

    def offline(name, root):
        raise urllib.error.URLError("no route to host")
    sys.modules["ogb.nodeproppred"].NodePropPredDataset = offline
    with pytest.raises(ConnectionError, match=r"could not download the OGB dataset "
                                              r"'ogbn-arxiv' \(URLError.* files lie under "
                                              r".*ogbn_arxiv/ \(raw/ and split/\)"):
        ogb_node("ogbn-arxiv", str(tmp_path))


def test_nan_labels_are_named_not_cast(monkeypatch):
    """papers100M marks unlabelled nodes with NaN: .long() made them -2**63."""
    fake_ogb(monkeypatch, np.array([[1.0], [np.nan], [2.0], [1.0], [0.0]]))
    with pytest.raises(ValueError, match="ogbn-fake: y must hold whole numbers .* entry 1 is nan"):
        ogb_node("ogbn-fake", "/tmp")


def test_undirected_gives_an_ogb_graph_its_missing_reverses(monkeypatch, tmp_path):
    """ogbn-arxiv is directed as OGB ships it (OGB's own baselines make it undirected):
    load_dataset(..., undirected=True) and --undirected add each edge's missing reverse,
    as for a graph file. Checked against networkx's undirected view of the edges."""
    import networkx as nx

    from graphloc.datasets import load_dataset
    fake_ogb(monkeypatch, np.array([[1], [0], [2], [1], [0]]))
    directed = load_dataset("ogb:ogbn-fake", str(tmp_path))
    both = load_dataset("ogb:ogbn-fake", str(tmp_path), undirected=True)
    truth = nx.DiGraph(directed.graph.edge_index.t().tolist()).to_undirected().to_directed()
    assert sorted(map(tuple, both.graph.edge_index.t().tolist())) == sorted(truth.edges)
    assert torch.equal(both.x, directed.x) and torch.equal(both.y, directed.y)
    assert torch.equal(both.train_index, directed.train_index)


def test_a_name_that_is_not_a_string_is_named():
    with pytest.raises(TypeError, match="ogb_node: name must be a name \\(str\\), got int"):
        ogb_node(5)
