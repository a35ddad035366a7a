"""graphloc.loader.ShaDowKHopSampler: PyG's ShaDow sampler on graphloc's draw, against a
brute-force oracle (k-hop in-balls and their induced edges when every neighbour is taken),
the sampling distribution, and PyG's own batch conventions."""

import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402

from graphloc.loader import ShaDowKHopSampler  # noqa: E402


def random_data(num_nodes=40, num_edges=160, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    return Data(x=torch.randn(num_nodes, 3, generator=gen), edge_index=edge_index,
                edge_weight=torch.arange(num_edges).float(),
                y=torch.randint(0, 4, (num_nodes,), generator=gen))


def in_ball(edge_index, root, depth):
    ball, frontier = {root}, {root}
    for _ in range(depth):
        frontier = {int(s) for s, d in edge_index.t().tolist() if d in frontier} - ball
        ball |= frontier
    return sorted(ball)


def expected_subgraph(data, nodes):
    """Edges among ``nodes`` (sorted ids) in local ids, by source then destination, with
    their ids (in edge order for parallel edges)."""
    local = {v: i for i, v in enumerate(nodes)}
    edges = [(local[s], local[d], e) for e, (s, d) in enumerate(data.edge_index.t().tolist())
             if s in local and d in local]
    edges.sort(key=lambda t: (t[0], t[1]))
    return edges


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_full_neighbourhoods_are_the_in_balls_and_their_edges(depth):
    data = random_data()
    roots = torch.tensor([3, 17, 3, 0, 39])  # a root twice: its own subgraph each time
    loader = ShaDowKHopSampler(data, depth=depth, num_neighbors=-1, node_idx=roots,
                               batch_size=5)
    batch = next(iter(loader))
    offset, edges = 0, []
    for i, root in enumerate(roots.tolist()):
        nodes = in_ball(data.edge_index, root, depth)
        lo, hi = int(batch.ptr[i]), int(batch.ptr[i + 1])
        assert hi - lo == len(nodes)
        assert torch.equal(batch.x[lo:hi], data.x[nodes])
        assert (batch.batch[lo:hi] == i).all()
        assert int(batch.root_n_id[i]) == lo + nodes.index(root)
        edges += [(s + offset, d + offset, e) for s, d, e in expected_subgraph(data, nodes)]
        offset += len(nodes)
    assert batch.edge_index.t().tolist() == [[s, d] for s, d, _ in edges]
    assert batch.edge_weight.tolist() == [float(e) for _, _, e in edges]
    assert torch.equal(batch.y, data.y[roots])


def test_sampled_subgraphs_are_induced_and_bounded():
    data = random_data(60, 600, 1)
    ids = Data(x=torch.arange(60).view(-1, 1), edge_index=data.edge_index)  # x: the node id
    torch.manual_seed(0)
    batch = next(iter(ShaDowKHopSampler(ids, depth=2, num_neighbors=3, batch_size=60)))
    assert batch.ptr.diff().max() <= 1 + 3 + 9
    for i in range(60):
        lo, hi = int(batch.ptr[i]), int(batch.ptr[i + 1])
        nodes = batch.x[lo:hi, 0].tolist()
        assert nodes == sorted(set(nodes)) and i in nodes
        assert set(nodes) <= set(in_ball(data.edge_index, i, 2))
        inside = (batch.edge_index[0] >= lo) & (batch.edge_index[0] < hi)
        got = (batch.edge_index[:, inside] - lo).t().tolist()
        assert got == [[s, d] for s, d, _ in expected_subgraph(data, nodes)]


def test_draws_are_uniform_without_replacement():
    # node 0 has ten in-neighbours; depth 1, 3 neighbours: each is in with probability 3/10
    edge_index = torch.stack([torch.arange(1, 11), torch.zeros(10, dtype=torch.long)])
    data = Data(x=torch.arange(11).view(-1, 1), edge_index=edge_index)
    torch.manual_seed(0)
    loader = ShaDowKHopSampler(data, depth=1, num_neighbors=3,
                               node_idx=torch.zeros(3000, dtype=torch.long), batch_size=3000)
    batch = next(iter(loader))
    assert batch.ptr.diff().eq(4).all()
    counts = torch.bincount(batch.x.view(-1), minlength=11)[1:].double()
    expected = 3000 * 0.3
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 27.9  # 9 degrees of freedom, p = 0.001


def test_depth_beyond_the_node_count_is_the_whole_ball():
    data = random_data()
    roots = torch.tensor([5, 6])
    deep = next(iter(ShaDowKHopSampler(data, depth=10**9, num_neighbors=-1, node_idx=roots,
                                       batch_size=2)))
    full = next(iter(ShaDowKHopSampler(data, depth=40, num_neighbors=-1, node_idx=roots,
                                       batch_size=2)))
    assert torch.equal(deep.x, full.x) and torch.equal(deep.edge_index, full.edge_index)


def test_refusals():
    data = random_data()
    with pytest.raises(ValueError, match="depth must be >= 0, got -1"):
        ShaDowKHopSampler(data, depth=-1, num_neighbors=2)
    with pytest.raises(ValueError, match="num_neighbors must be an integer"):
        ShaDowKHopSampler(data, depth=1, num_neighbors=2.5)
    with pytest.raises(TypeError, match="replace must be True or False"):
        ShaDowKHopSampler(data, depth=1, num_neighbors=2, replace="no")
    bad = data.clone()
    bad.edge_index = bad.edge_index.clone()
    bad.edge_index[0, 3] = 40
    with pytest.raises(ValueError, match="40"):
        ShaDowKHopSampler(bad, depth=1, num_neighbors=2)
    with pytest.raises(ValueError, match="node_idx holds 40 but dim_size is 40"):
        ShaDowKHopSampler(data, depth=1, num_neighbors=2, node_idx=torch.tensor([0, 40]))
    with pytest.raises(ValueError, match="one entry per node"):
        ShaDowKHopSampler(data, depth=1, num_neighbors=2, node_idx=torch.ones(3, dtype=bool))
    with pytest.raises(TypeError, match="node_idx must be an integer tensor"):
        ShaDowKHopSampler(data, depth=1, num_neighbors=2, node_idx=torch.tensor([0.5]))
    with pytest.raises(TypeError, match="edge_index must have an integer dtype"):
        ShaDowKHopSampler(Data(x=data.x, edge_index=data.edge_index.float()), depth=1,
                          num_neighbors=2)
    assert len(ShaDowKHopSampler(data, depth=1, num_neighbors=2,
                                 node_idx=torch.zeros(0, dtype=torch.long))) == 0
    with pytest.raises(TypeError, match="node_idx must be a tensor"):
        ShaDowKHopSampler(data, depth=1, num_neighbors=2, node_idx=[0, 1])
    with pytest.raises(TypeError, match="adj_t"):
        ShaDowKHopSampler(Data(x=data.x, adj_t=None, num_nodes=40), depth=1, num_neighbors=2)
