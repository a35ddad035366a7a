"""graphloc.loader as a drop-in for torch_geometric.loader: PyG's own batches, drawn by
graphloc's kernel with pyg-lib's semantics, checked against brute-force oracles on the
original graph (PyG 2.8 cannot sample here: it needs pyg-lib or torch-sparse)."""

import pytest
import torch
from helpers import random_edge_index, requires_ext

pytest.importorskip("torch_geometric")
import torch_geometric  # noqa: E402
from torch_geometric.data import Data, HeteroData  # noqa: E402

from graphloc.loader import LinkNeighborLoader, NeighborLoader  # noqa: E402

pytestmark = requires_ext


def homo_data(num_nodes=60, num_edges=300, seed=0):
    edge_index = random_edge_index(num_nodes, num_edges, seed=seed, hub_degree=20)
    gen = torch.Generator().manual_seed(seed)
    return Data(x=torch.randn(num_nodes, 3, generator=gen), edge_index=edge_index,
                edge_attr=torch.arange(edge_index.size(1)), y=torch.arange(num_nodes),
                time=torch.randint(0, 10, (num_nodes,), generator=gen),
                edge_time=torch.randint(0, 10, (edge_index.size(1),), generator=gen))


def hetero_data(seed=0):
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data["paper"].x = torch.randn(40, 3, generator=gen)
    data["author"].x = torch.randn(25, 3, generator=gen)
    for (src, rel, dst), count in ((("paper", "cites", "paper"), 120),
                                   (("author", "writes", "paper"), 90),
                                   (("paper", "written_by", "author"), 90)):
        data[src, rel, dst].edge_index = torch.stack([
            torch.randint(0, data[src].num_nodes, (count,), generator=gen),
            torch.randint(0, data[dst].num_nodes, (count,), generator=gen)])
        data[src, rel, dst].edge_attr = torch.arange(count)
    return data


def global_edges(batch, store=None, src=None, dst=None):
    """A batch's edges in the parent graph's ids, one (src, dst, edge id) per edge."""
    store = batch if store is None else store
    s_ids = batch.n_id if src is None else batch[src].n_id
    d_ids = batch.n_id if dst is None else batch[dst].n_id
    s, d = store.edge_index.long()
    return list(zip(s_ids[s].tolist(), d_ids[d].tolist(), store.e_id.tolist(), strict=True))


def test_the_import_swap_gives_pygs_loader_and_batches():
    data = homo_data()
    loader = NeighborLoader(data, num_neighbors=[4, 3], batch_size=16, shuffle=True)
    assert isinstance(loader, torch_geometric.loader.NeighborLoader)
    assert str(loader) == "NeighborLoader()" and len(loader) == 4
    seen = []
    for batch in loader:
        size = batch.batch_size
        assert isinstance(batch, Data) and size == batch.input_id.numel() == min(16, 60 - len(seen))
        assert torch.equal(batch.n_id[:size], batch.input_id)  # seeds first, in order
        torch.testing.assert_close(batch.x, data.x[batch.n_id])
        assert torch.equal(batch.y, batch.n_id) and torch.equal(batch.edge_attr, batch.e_id)
        for s, d, e in global_edges(batch):  # every edge is the parent's edge e
            assert data.edge_index[:, e].tolist() == [s, d]
        assert batch.n_id.unique().numel() == batch.num_nodes
        assert sum(batch.num_sampled_nodes) == batch.num_nodes
        assert sum(batch.num_sampled_edges) == batch.num_edges
        seen += batch.input_id.tolist()
    assert sorted(seen) == list(range(60))


def _in_edges(edge_index, dst_nodes):
    keep = torch.isin(edge_index[1], torch.tensor(sorted(dst_nodes), dtype=torch.long))
    ids = keep.nonzero().flatten().tolist()
    return {(int(s), int(d), e)
            for e, (s, d) in zip(ids, edge_index[:, keep].t().tolist(), strict=True)}


def test_full_fanouts_take_every_in_edge_of_the_first_hops():
    data = homo_data(seed=1)
    batch = NeighborLoader(data, num_neighbors=[-1, -1], batch_size=5)(torch.tensor([3, 9]))
    seeds, hop1 = batch.n_id[:2].tolist(), batch.n_id[2:2 + batch.num_sampled_nodes[1]].tolist()
    assert set(global_edges(batch)) == _in_edges(data.edge_index, seeds + hop1)
    expected_hop1 = {s for s, _, _ in _in_edges(data.edge_index, seeds)} - set(seeds)
    assert set(hop1) == expected_hop1


def test_induced_subgraphs_hold_every_edge_between_sampled_nodes():
    data = homo_data(seed=2)
    loader = NeighborLoader(data, num_neighbors=[3, 2], batch_size=8, subgraph_type="induced")
    for batch in loader:
        inside = set(batch.n_id.tolist())
        expected = {(s, d, e) for e, (s, d) in enumerate(data.edge_index.t().tolist())
                    if s in inside and d in inside}
        assert set(global_edges(batch)) == expected and batch.num_edges == len(expected)


def test_hetero_fanouts_hold_per_edge_type():
    data = hetero_data()
    fanouts = {("paper", "cites", "paper"): [2, 1], ("author", "writes", "paper"): [3, 2],
               ("paper", "written_by", "author"): [1, 1]}
    loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes="paper", batch_size=6)
    for batch in loader:
        assert batch["paper"].batch_size <= 6
        for (src, rel, dst), k in fanouts.items():
            store = batch[src, rel, dst]
            edges = global_edges(batch, store, src, dst)
            for s, d, e in edges:
                assert data[src, rel, dst].edge_index[:, e].tolist() == [s, d]
            degree = torch.bincount(data[src, rel, dst].edge_index[1],
                                    minlength=data[dst].num_nodes)
            start = 0
            for hop in range(2):  # each node reached at hop `hop` draws min(k, degree)
                count = batch[dst].num_sampled_nodes[hop]
                expected = sum(min(k[hop], int(degree[batch[dst].n_id[i]]))
                               for i in range(start, start + count))
                assert store.num_sampled_edges[hop] == expected
                start += count
            assert sum(store.num_sampled_edges) == store.num_edges == len(edges)


def test_hetero_full_fanouts_against_the_reached_nodes():
    data = hetero_data(seed=3)
    loader = NeighborLoader(data, num_neighbors=[-1, -1], input_nodes="author", batch_size=4)
    batch = next(iter(loader))
    for (src, rel, dst) in data.edge_types:
        reached = batch[dst].n_id[:sum(batch[dst].num_sampled_nodes[:2])].tolist()
        expected = _in_edges(data[src, rel, dst].edge_index, reached)
        assert set(global_edges(batch, batch[src, rel, dst], src, dst)) == expected


def test_disjoint_trees_stay_in_their_tree():
    data = homo_data(seed=4)
    batch = NeighborLoader(data, num_neighbors=[3, 3], batch_size=7, disjoint=True)(
        torch.tensor([5, 5, 8]))  # a seed twice: two trees
    assert batch.batch[:3].tolist() == [0, 1, 2]
    src, dst = batch.edge_index
    assert torch.equal(batch.batch[src], batch.batch[dst])
    pairs = list(zip(batch.batch.tolist(), batch.n_id.tolist(), strict=True))
    assert len(set(pairs)) == len(pairs)  # a node once per tree


def test_node_times_bound_every_tree():
    data = homo_data(seed=5)
    for strategy in ("uniform", "last"):
        loader = NeighborLoader(data, num_neighbors=[3, 2], batch_size=10, time_attr="time",
                                temporal_strategy=strategy)
        for batch in loader:
            seed_time = data.time[batch.n_id[:batch.batch_size]]
            assert bool((data.time[batch.n_id] <= seed_time[batch.batch]).all())


def test_edge_times_bound_every_tree_and_last_takes_the_latest():
    data = homo_data(seed=6)
    input_time = torch.randint(0, 10, (60,))
    loader = NeighborLoader(data, num_neighbors=[2, 2], batch_size=60, time_attr="edge_time",
                            input_time=input_time, temporal_strategy="last")
    batch = next(iter(loader))
    tree_time = input_time[batch.batch[batch.edge_index[1]]]
    assert bool((data.edge_time[batch.e_id] <= tree_time).all())
    first = batch.num_sampled_edges[0]
    for seed in range(60):  # hop 1: the seed's two latest allowed in-edges
        allowed = [e for e in (data.edge_index[1] == seed).nonzero().flatten().tolist()
                   if data.edge_time[e] <= input_time[seed]]
        times = sorted(int(data.edge_time[e]) for e in allowed)[-2:]
        mine = batch.e_id[:first][batch.edge_index[1, :first] == seed]
        assert sorted(data.edge_time[mine].tolist()) == times


def test_floating_times_draw_as_their_ranks():
    data = homo_data(seed=7)
    as_float = data.clone()
    as_float.time = data.time.double() * 0.37 - 1.5  # the same order
    batches = []
    for d in (data, as_float):
        torch.manual_seed(3)
        batches.append(next(iter(NeighborLoader(d, num_neighbors=[3, 3], batch_size=20,
                                                time_attr="time"))))
    assert torch.equal(batches[0].n_id, batches[1].n_id)
    assert torch.equal(batches[0].edge_index, batches[1].edge_index)
    as_float.time[4] = float("nan")
    with pytest.raises(ValueError, match="NaN, which has no order"):
        NeighborLoader(as_float, num_neighbors=[3], batch_size=20, time_attr="time")


def test_weights_never_draw_a_zero_weight_edge_from_a_larger_row():
    data = homo_data(seed=8)
    data.weight = (torch.arange(data.num_edges) % 3 != 0).double()
    loader = NeighborLoader(data, num_neighbors=[2, 2], batch_size=12, weight_attr="weight")
    degree = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
    zero_drawn = 0
    for batch in loader:
        zero = data.weight[batch.e_id] == 0  # only where the whole row (<= 2 edges) is taken
        assert bool((degree[data.edge_index[1, batch.e_id[zero]]] <= 2).all())
        zero_drawn += int(zero.sum())
    assert zero_drawn > 0  # such rows exist, so the check above is not vacuous
    data.weight[5] = -1.0
    with pytest.raises(ValueError, match="must be finite and >= 0, got -1.0"):
        next(iter(NeighborLoader(data, num_neighbors=[2], batch_size=12, weight_attr="weight")))


def test_a_full_fanout_batch_gives_the_full_graphs_output_at_its_seeds():
    """A 2-layer PyG GraphSAGE on a batch with every in-edge of two hops computes, at the
    seeds, what it computes on the whole graph."""
    from torch_geometric.nn import GraphSAGE
    data = homo_data(seed=9)
    model = GraphSAGE(3, 8, num_layers=2).eval()
    full = model(data.x, data.edge_index)
    loader = NeighborLoader(data, num_neighbors=[-1, -1], batch_size=13)
    for batch in loader:
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        torch.testing.assert_close(out, full[batch.input_id])


def test_same_torch_seed_same_batches():
    data = homo_data(seed=10)
    runs = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        runs.append([b.n_id for b in NeighborLoader(data, num_neighbors=[3], batch_size=20,
                                                    shuffle=True)])
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(runs[0], runs[2], strict=True))


def test_link_loader_batches_hold_their_labelled_edges():
    data = homo_data(seed=11)
    label_index = data.edge_index[:, :40]
    loader = LinkNeighborLoader(data, num_neighbors=[3, 2], edge_label_index=label_index,
                                batch_size=10, neg_sampling_ratio=1.0)
    for batch in loader:
        pos = batch.edge_label == 1
        got = batch.n_id[batch.edge_label_index[:, pos]]
        assert torch.equal(got, label_index[:, batch.input_id])
        for s, d, e in global_edges(batch):
            assert data.edge_index[:, e].tolist() == [s, d]


def test_index_dtype_follows_the_graph():
    data = homo_data(seed=12)
    data.edge_index = data.edge_index.int()
    batch = next(iter(NeighborLoader(data, num_neighbors=[2], batch_size=8)))
    assert batch.edge_index.dtype == torch.int32


def test_bad_options_are_named():
    data = homo_data()
    with pytest.raises(ValueError, match="temporal_strategy must be 'uniform' or 'last', got "
                                         "'latest'"):
        NeighborLoader(data, num_neighbors=[2], time_attr="time", temporal_strategy="latest")
    with pytest.raises(ValueError, match="cannot be combined with subgraph_type='induced'"):
        NeighborLoader(data, num_neighbors=[2], disjoint=True, subgraph_type="induced")
    with pytest.raises(ValueError, match="edge-level temporal sampling needs a time for each"):
        next(iter(NeighborLoader(data, num_neighbors=[2], time_attr="edge_time")))


def test_edges_outside_the_node_counts_are_refused_before_pyg_converts_them():
    """PyG's CSC conversion writes past its buffer for a destination id >= num_nodes (a
    heap corruption, then a crash); the drop-in names the edge first."""
    data = Data(x=torch.randn(10, 2), edge_index=torch.tensor([[0, 1], [1, 12]]))
    data.num_nodes = 10
    with pytest.raises(ValueError, match="edge_index\\[1\\] holds 12 at column 1 but the "
                                         "graph has 10 nodes"):
        NeighborLoader(data, num_neighbors=[2], batch_size=4)
    hetero = hetero_data()
    hetero["author", "writes", "paper"].edge_index[0, 5] = 25
    with pytest.raises(ValueError, match="edge type \\('author', 'writes', 'paper'\\): "
                                         "edge_index\\[0\\] holds 25 at column 5"):
        LinkNeighborLoader(hetero, num_neighbors=[2], batch_size=4,
                           edge_label_index=(("paper", "cites", "paper"),
                                             hetero["paper", "cites", "paper"].edge_index))


def test_hetero_edge_types_of_mixed_index_dtypes():
    data = hetero_data(seed=13)
    store = data["paper", "cites", "paper"]
    store.edge_index = store.edge_index.int()
    batch = next(iter(NeighborLoader(data, num_neighbors=[2, 2], input_nodes="paper",
                                     batch_size=5)))
    for edge_type in data.edge_types:
        for s, d, e in global_edges(batch, batch[edge_type], edge_type[0], edge_type[2]):
            assert data[edge_type].edge_index[:, e].tolist() == [s, d]


def test_a_graph_stores_coo_edges_outside_its_size_are_refused():
    from torch_geometric.data import EdgeAttr
    from torch_geometric.testing import MyFeatureStore, MyGraphStore
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    feature_store.put_tensor(torch.randn(10, 2), group_name=None, attr_name="x", index=None)
    graph_store.put_edge_index((torch.tensor([0, 1]), torch.tensor([1, 12])),
                               EdgeAttr(None, "coo", size=(10, 10)))
    with pytest.raises(ValueError, match="edge_index\\[1\\] holds 12 at column 1"):
        NeighborLoader((feature_store, graph_store), num_neighbors=[2], batch_size=4,
                       input_nodes=torch.arange(10))


def test_worker_processes_draw_valid_and_repeatable_batches():
    data = homo_data(seed=14)
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        loader = NeighborLoader(data, num_neighbors=[3, 2], batch_size=20, num_workers=2)
        runs.append([b for b in loader])
    for a, b in zip(runs[0], runs[1], strict=True):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
        for s, d, e in global_edges(a):
            assert data.edge_index[:, e].tolist() == [s, d]


@pytest.mark.parametrize("option", ["shuffle", "drop_last", "replace", "disjoint", "directed",
                                    "is_sorted"])
def test_true_false_options_refuse_a_string_by_name(option):
    """torch's DataLoader and PyG's sampler read any truthy value: shuffle="False" shuffled
    and replace="False" sampled with replacement, quietly (2026-12-07)."""
    with pytest.raises(TypeError, match=f"{option} must be True or False, got 'False'"):
        NeighborLoader(homo_data(), [2], batch_size=8, **{option: "False"})
