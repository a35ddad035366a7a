"""NeighborLoader: sampled edges exist, fan-outs hold, draws are uniform and reproducible."""

import pytest
import torch
from helpers import random_edge_index, requires_ext

from graphloc import Graph
from graphloc.loader import NeighborLoader

pytestmark = requires_ext


def graph_and_data(num_nodes=300, num_edges=2500, seed=0):
    edge_index = random_edge_index(num_nodes, num_edges, seed=seed, hub_degree=60)
    graph = Graph(edge_index, num_nodes=num_nodes)
    return graph, torch.randn(num_nodes, 4), torch.randint(0, 3, (num_nodes,))


def test_sampled_edges_exist_and_fanouts_hold():
    graph, x, y = graph_and_data()
    loader = NeighborLoader(graph, x, y, [5, 3], batch_size=32, shuffle=True, seed=1)
    in_degree = graph.in_degree()
    edges = set(map(tuple, graph.edge_index.t().tolist()))
    seen = 0
    for batch in loader:
        src, dst = batch.graph.edge_index
        g_src, g_dst = batch.n_id[src], batch.n_id[dst]
        assert set(zip(g_src.tolist(), g_dst.tolist(), strict=True)) <= edges
        assert torch.equal(graph.edge_index[:, batch.e_id], torch.stack([g_src, g_dst]))
        torch.testing.assert_close(batch.x, x[batch.n_id])
        assert torch.equal(batch.y, y[batch.n_id])
        # hop 1: every seed gets min(deg, 5) edges; hop 2: frontier nodes min(deg, 3)
        first = batch.num_sampled_edges[0]
        per_seed = torch.bincount(dst[:first], minlength=batch.batch_size)
        assert torch.equal(per_seed, in_degree[batch.n_id[:batch.batch_size]].clamp(max=5))
        frontier_end = batch.batch_size + batch.num_sampled_nodes[1]
        per_node = torch.bincount(dst[first:], minlength=frontier_end)[batch.batch_size:]
        assert torch.equal(per_node, in_degree[batch.n_id[batch.batch_size:frontier_end]]
                           .clamp(max=3))
        assert len(set(batch.n_id.tolist())) == batch.n_id.numel()  # no duplicates
        seen += batch.batch_size
    assert seen == 300 and len(loader) == 10


def test_full_neighbourhood_mode_takes_every_in_edge():
    graph, x, y = graph_and_data()
    batch = NeighborLoader(graph, x, y, [-1, -1], batch_size=10).sample(torch.arange(10))
    first = batch.num_sampled_edges[0]
    assert first == int(graph.in_degree()[:10].sum())
    expected = graph.edge_index[:, torch.isin(graph.edge_index[1], torch.arange(10))]
    got = batch.n_id[batch.graph.edge_index[:, :first]]
    assert sorted(map(tuple, got.t().tolist())) == sorted(map(tuple, expected.t().tolist()))


def test_draws_are_uniform():
    """A node with 10 in-neighbours sampled 3 at a time, 3,000 times: each neighbour is
    picked 900 times in expectation; chi-square with 9 degrees of freedom."""
    src = torch.arange(1, 11)
    graph = Graph(torch.stack([src, torch.zeros(10, dtype=torch.long)]), num_nodes=11)
    loader = NeighborLoader(graph, None, None, [3], batch_size=1, input_nodes=torch.tensor([0]))
    counts = torch.zeros(11)
    for seed in range(3000):
        batch = loader.sample(torch.tensor([0]), seed=seed)
        assert batch.graph.num_edges == 3
        counts.index_add_(0, batch.n_id[batch.graph.edge_index[0]], torch.ones(3))
    chi2 = ((counts[1:] - 900) ** 2 / 900).sum().item()
    assert chi2 < 27.9  # p = 0.001 critical value for 9 degrees of freedom


def test_same_seed_same_batches_whatever_the_threads():
    graph, x, y = graph_and_data()

    def batches(seed, threads):
        old = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            loader = NeighborLoader(graph, x, y, [4, 4], batch_size=50, shuffle=True, seed=seed)
            return [(b.n_id, b.graph.edge_index) for b in loader]
        finally:
            torch.set_num_threads(old)
    a, b, c = batches(7, 1), batches(7, 2), batches(8, 2)
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1])
               for p, q in zip(a, b, strict=True))
    assert not all(torch.equal(p[0], q[0]) for p, q in zip(a, c, strict=True))
    loader = NeighborLoader(graph, x, y, [4], batch_size=300, seed=3)
    first, second = next(iter(loader)), next(iter(loader))  # a new epoch draws anew
    assert not torch.equal(first.graph.edge_index, second.graph.edge_index)


def test_bad_input():
    graph, x, y = graph_and_data()
    with pytest.raises(ValueError, match="fan-outs >= 0"):
        NeighborLoader(graph, x, y, [5, -2])
    with pytest.raises(ValueError, match="features has 3 rows but the graph has 300"):
        NeighborLoader(graph, x[:3], y, [5])
    with pytest.raises(ValueError, match=r"input_nodes holds 300; node ids must lie in \[0, 300\)"):
        NeighborLoader(graph, x, y, [5], input_nodes=torch.tensor([0, 300]))
    with pytest.raises(TypeError, match="input_nodes must be node ids or a boolean mask"):
        NeighborLoader(graph, x, y, [5], input_nodes=torch.tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match="must be a graphloc.Graph"):
        NeighborLoader(graph.edge_index, x, y, [5])
    loader = NeighborLoader(graph, x, y, [5])
    with pytest.raises(ValueError, match="seed 1 appears twice"):
        loader.sample(torch.tensor([1, 1]))
    # repeats in different batches: each batch alone has distinct seeds
    with pytest.raises(ValueError, match="input_nodes holds node 7 more than once"):
        NeighborLoader(graph, x, y, [5], batch_size=1, input_nodes=torch.tensor([7, 3, 7]))
    mask = (torch.arange(300) % 3 == 0).long()  # as ids: nodes 0 and 1, 300 times
    with pytest.raises(ValueError, match="input_nodes holds only 0s and 1s, one per node of "
                                         "the 300: a mask stored as torch.int64"):
        NeighborLoader(graph, x, y, [5], input_nodes=mask)
    seeds = torch.cat([b.n_id[:b.batch_size] for b in NeighborLoader(
        graph, x, y, [5], batch_size=64, input_nodes=mask.bool())])
    assert seeds.tolist() == list(range(0, 300, 3))  # the fix the message names


def test_sample_refuses_float_seeds():
    from graphloc import Graph
    from graphloc.loader import NeighborLoader
    graph = Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]))
    loader = NeighborLoader(graph, None, None, [2])
    with pytest.raises(TypeError, match="seeds must be a 1-D tensor of integer node ids"):
        loader.sample(torch.tensor([1.0]))


def test_a_sampled_graph_carries_its_edges_features():
    """The parent's edge_attr rows of the sampled edges, so a conv reading edge features
    computes on the batch what it computes on the parent graph (until 2026-12-05 the
    batches had none: a GATConv with edge_dim trained without its edge term, quietly)."""
    import graphloc.nn as gl
    edge_index = random_edge_index(200, 1500, seed=3)
    edge_attr = torch.randn(edge_index.size(1), 3)
    graph = Graph(edge_index, num_nodes=200, edge_attr=edge_attr)
    x = torch.randn(200, 4)
    loader = NeighborLoader(graph, x, None, [-1], batch_size=16, seed=2)
    torch.manual_seed(0)
    conv = gl.GATConv(4, 5, edge_dim=3)
    full = conv(x, graph)
    for batch in loader:
        assert torch.equal(batch.graph.edge_attr, edge_attr[batch.e_id])
        # one hop with every neighbour: the seeds' outputs are the full graph's
        torch.testing.assert_close(conv(batch.x, batch.graph)[:batch.batch_size],
                                   full[batch.n_id[:batch.batch_size]])
    plain = NeighborLoader(Graph(edge_index, num_nodes=200), x, None, [2], batch_size=16)
    assert next(iter(plain)).graph.edge_attr is None


def test_shuffle_refuses_a_string_by_name():
    """shuffle="False" shuffled, quietly (2026-12-07)."""
    graph, x, y = graph_and_data()
    with pytest.raises(TypeError, match="NeighborLoader: shuffle must be True or False"):
        NeighborLoader(graph, x, y, [2], batch_size=8, shuffle="False")
