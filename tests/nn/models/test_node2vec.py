"""Node2Vec as PyG's: the same initial draw, windows and loss as PyG's own class (run here
with its random walk replaced by graphloc's, since PyG's needs pyg-lib), any p and q."""

import types
from unittest import mock

import pytest
import torch
from helpers import random_edge_index, requires_ext

from graphloc import Graph, ops
from graphloc.nn import Node2Vec

pytestmark = requires_ext


def pygs_node2vec(edge_index, **kwargs):
    """PyG 2.8's Node2Vec built without pyg-lib: its pyg-lib check passed and its walk
    function graphloc's (the windows, negatives and loss stay PyG's code)."""
    pytest.importorskip("torch_geometric")
    import torch_geometric.nn.models.node2vec as pyg_node2vec

    def walk(rowptr, col, start, length, p, q):
        graph = Graph(torch.stack([torch.repeat_interleave(rowptr.diff()), col]),
                      num_nodes=rowptr.numel() - 1)
        return ops.random_walk(graph, start, length, p, q, seed=5, return_edges=False).nodes

    with mock.patch.object(pyg_node2vec, "WITH_PYG_LIB", True), \
            mock.patch.object(torch.ops, "pyg", types.SimpleNamespace(random_walk=walk),
                              create=True):
        return pyg_node2vec.Node2Vec(edge_index, **kwargs)


def test_same_draw_windows_and_loss_as_pygs():
    edge_index = random_edge_index(30, 120, seed=0)
    kwargs = dict(embedding_dim=8, walk_length=6, context_size=3, walks_per_node=2,
                  num_negative_samples=2, p=0.5, q=2.0)
    torch.manual_seed(1)
    ours = Node2Vec(edge_index, **kwargs)
    torch.manual_seed(1)
    theirs = pygs_node2vec(edge_index, **kwargs)
    assert repr(ours) == repr(theirs) == "Node2Vec(30, 8)"
    torch.testing.assert_close(ours(), theirs())
    batch = torch.arange(0, 30, 4)
    pos, _ = ours.sample(batch)
    torch.manual_seed(2)
    neg = ours.neg_sample(batch)
    torch.manual_seed(2)
    assert torch.equal(neg, theirs.neg_sample(batch))  # the same negatives, windowed alike
    walks = ops.random_walk(ours.graph, batch.repeat(2), 5, 0.5, 2.0, seed=9).nodes
    windows = torch.cat([walks[:, j:j + 3] for j in range(4)])
    assert pos.shape == windows.shape
    torch.testing.assert_close(ours.loss(pos, neg), theirs.loss(pos, neg))


def test_positive_windows_are_walks():
    edge_index = random_edge_index(25, 90, seed=3)
    model = Node2Vec(edge_index, embedding_dim=4, walk_length=5, context_size=2, p=4.0,
                     q=0.25)
    edges = set(map(tuple, edge_index.t().tolist()))
    out_degree = torch.bincount(edge_index[0], minlength=25)
    pos, _ = model.sample(list(range(25)))
    assert pos.shape == (25 * 4, 2)
    for a, b in pos.tolist():
        assert (a, b) in edges or (a == b and out_degree[a] == 0)


def test_training_pulls_walk_neighbours_together():
    """Two dense communities joined by one edge: after a few epochs, nodes of one community
    are closer (cosine) to each other than to the other community."""
    torch.manual_seed(0)
    blocks = [torch.cartesian_prod(torch.arange(10) + 10 * b, torch.arange(10) + 10 * b).t()
              for b in range(2)]
    edge_index = torch.cat(blocks + [torch.tensor([[0, 10], [10, 0]])], dim=1)
    model = Node2Vec(edge_index, embedding_dim=8, walk_length=8, context_size=4,
                     walks_per_node=4, p=1.0, q=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(30):
        for pos, neg in model.loader(batch_size=20, shuffle=True):
            optimizer.zero_grad()
            model.loss(pos, neg).backward()
            optimizer.step()
    z = torch.nn.functional.normalize(model().detach(), dim=1)
    sim = z @ z.t()
    same = (sim[:10, :10].mean() + sim[10:, 10:].mean()) / 2
    assert float(same) > float(sim[:10, 10:].mean()) + 0.3


def test_bad_arguments_are_named():
    edge_index = random_edge_index(10, 30, seed=4)
    with pytest.raises(ValueError, match="1 <= context_size <= walk_length"):
        Node2Vec(edge_index, 4, walk_length=2, context_size=3)
    with pytest.raises(ValueError, match="p must be a finite number > 0, got 0"):
        Node2Vec(edge_index, 4, walk_length=3, context_size=2, p=0)
    with pytest.raises(ValueError, match="walks_per_node must be an integer >= 1"):
        Node2Vec(edge_index, 4, walk_length=3, context_size=2, walks_per_node=0)
