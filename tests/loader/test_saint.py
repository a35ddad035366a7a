"""graphloc.loader's GraphSAINT samplers: every batch against PyG's own ``Data.subgraph``,
the node and edge draws against their probabilities (chi-square), the node normalisation
against the exact inclusion probabilities, and bad arguments."""

import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402

from graphloc.loader import (  # noqa: E402
    GraphSAINTEdgeSampler,
    GraphSAINTNodeSampler,
    GraphSAINTRandomWalkSampler,
)


def random_data(num_nodes=30, num_edges=120, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    return Data(x=torch.randn(num_nodes, 3, generator=gen), edge_index=edge_index,
                edge_id=torch.arange(num_edges), n_id=torch.arange(num_nodes))


@pytest.mark.parametrize("make", [
    lambda d: GraphSAINTNodeSampler(d, batch_size=8, num_steps=5, sample_coverage=3, log=False),
    lambda d: GraphSAINTEdgeSampler(d, batch_size=6, num_steps=5, sample_coverage=3, log=False),
    lambda d: GraphSAINTRandomWalkSampler(d, batch_size=4, walk_length=3, num_steps=5,
                                          sample_coverage=3, log=False),
])
def test_batches_are_pyg_induced_subgraphs(make):
    data = random_data()
    torch.manual_seed(0)
    loader = make(data)
    assert len(loader) == 5
    for batch in loader:
        expected = data.subgraph(batch.n_id)
        # by source, then destination, parallel edges in edge order
        row, col = expected.edge_index
        order = (row * 10**6 + col * 10**3 + expected.edge_id).argsort()
        assert torch.equal(batch.edge_index, expected.edge_index[:, order])
        assert torch.equal(batch.edge_id, expected.edge_id[order])
        assert torch.equal(batch.x, data.x[batch.n_id])
        assert torch.equal(batch.node_norm, loader.node_norm[batch.n_id])
        assert torch.equal(batch.edge_norm, loader.edge_norm[batch.edge_id])


def test_random_walk_nodes_are_walks():
    # a directed ring: a walk from r of length 3 holds r..r+3, so a batch is unions of runs
    n = 20
    ring = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
    data = Data(n_id=torch.arange(n), edge_index=ring)
    torch.manual_seed(1)
    for batch in GraphSAINTRandomWalkSampler(data, batch_size=1, walk_length=3, num_steps=4,
                                             log=False):
        ids = set(batch.n_id.tolist())
        assert any(ids == {(r + i) % n for i in range(4)} for r in ids)
        assert batch.edge_index.size(1) == 3  # the three walked edges


def test_edge_draws_follow_inverse_degrees():
    # edge u -> v weighs 1 / in-degree(u) + 1 / out-degree(v), degrees of 0 read as 1
    gen = torch.Generator().manual_seed(2)
    pairs = torch.randint(0, 8, (2, 30), generator=gen)
    pairs = pairs[:, pairs[0] != pairs[1]].unique(dim=1)  # no parallel edges
    data = Data(edge_index=pairs, num_nodes=8)
    edges = [tuple(e) for e in pairs.t().tolist()]
    indeg = {v: sum(1 for _, d in edges if d == v) for v in range(8)}
    outdeg = {v: sum(1 for s, _ in edges if s == v) for v in range(8)}
    weight = torch.tensor([1 / max(indeg[u], 1) + 1 / max(outdeg[v], 1) for u, v in edges])
    loader = GraphSAINTEdgeSampler(data, batch_size=1, log=False)
    torch.manual_seed(0)
    draws = [tuple(loader._sample_nodes(1).tolist()[::-1]) for _ in range(6000)]
    counts = torch.tensor([draws.count(e) for e in edges], dtype=torch.double)
    expected = 6000 * weight / weight.sum()
    dof = len(edges) - 1
    assert ((counts - expected) ** 2 / expected).sum() < dof + 4 * dof**0.5
    # PyG's inverted weights (in-degree(u) + out-degree(v)) would never draw 10 -> 11 here
    data = Data(edge_index=torch.tensor([[1, 2, 3, 4, 0, 10], [0, 0, 0, 0, 9, 11]]),
                num_nodes=12)
    loader = GraphSAINTEdgeSampler(data, batch_size=1, log=False)
    draws = torch.stack([loader._sample_nodes(1) for _ in range(4000)])
    hub, plain = (draws[:, 1] == 0).sum(), (draws[:, 1] == 10).sum()
    assert 0.5 < hub / plain < 0.78  # (1/4 + 1) / (1 + 1)


def test_node_norm_inverts_inclusion_probabilities():
    # node sampler: v is in a sample when one of the B edge draws has source v, with
    # probability 1 - (1 - outdeg(v) / E)^B; node_norm estimates 1 / (N * p_v)
    data = random_data(12, 40, 3)
    torch.manual_seed(0)
    loader = GraphSAINTNodeSampler(data, batch_size=5, num_steps=10, sample_coverage=3000,
                                   log=False)
    out = torch.bincount(data.edge_index[0], minlength=12).double()
    p = 1 - (1 - out / 40) ** 5
    seen = p > 0
    ratio = loader.node_norm.double()[seen] * 12 * p[seen]
    assert ((ratio - 1).abs() < 0.1).all(), ratio


def test_refusals():
    data = random_data()
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        GraphSAINTNodeSampler(data, batch_size=0, log=False)
    with pytest.raises(ValueError, match="walk_length"):
        GraphSAINTRandomWalkSampler(data, batch_size=2, walk_length=-1, log=False)
    normed = data.clone()
    normed.node_norm = torch.ones(30)
    with pytest.raises(ValueError, match="node_norm"):
        GraphSAINTNodeSampler(normed, batch_size=2, log=False)
    with pytest.raises(TypeError, match="edge_index must have an integer dtype"):
        GraphSAINTNodeSampler(Data(edge_index=data.edge_index.float(), num_nodes=30),
                              batch_size=2, log=False)
    with pytest.raises(ValueError, match="needs a graph with nodes to draw from, got 0 nodes"):
        GraphSAINTRandomWalkSampler(Data(edge_index=torch.empty(2, 0, dtype=torch.long),
                                         num_nodes=0), batch_size=2, walk_length=2, log=False)
    empty = Data(edge_index=torch.empty(2, 0, dtype=torch.long), num_nodes=5)
    for sampler in (GraphSAINTNodeSampler, GraphSAINTEdgeSampler):
        with pytest.raises(ValueError, match="needs a graph with nodes and edges"):
            sampler(empty, batch_size=2, log=False)
    walks = GraphSAINTRandomWalkSampler(empty, batch_size=2, walk_length=2, log=False)
    assert next(iter(walks)).edge_index.size(1) == 0  # walks without edges stay in place
    bad = data.clone()
    bad.edge_index = bad.edge_index.clone()
    bad.edge_index[1, 0] = 30
    with pytest.raises(ValueError, match="30"):
        GraphSAINTEdgeSampler(bad, batch_size=2, log=False)


@pytest.mark.parametrize("sampler,extra", [(GraphSAINTNodeSampler, {}),
                                           (GraphSAINTEdgeSampler, {}),
                                           (GraphSAINTRandomWalkSampler, {"walk_length": 2})])
def test_log_refuses_a_string_by_name(sampler, extra):
    with pytest.raises(TypeError, match=f"{sampler.__name__}: log must be True or False"):
        sampler(random_data(), batch_size=4, log="False", **extra)
    with pytest.raises(TypeError, match=f"{sampler.__name__}: shuffle must be True or False"):
        sampler(random_data(), batch_size=4, log=False, shuffle="False", **extra)
