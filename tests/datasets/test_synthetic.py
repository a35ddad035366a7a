"""Synthetic cities: exact size, road-like statistics, reproducible, labelled like the
release."""

import pytest
import torch
from helpers import requires_ext

from graphloc.datasets import eccentricity_classes, local_eccentricity
from graphloc.datasets.stats import road_statistics
from graphloc.datasets.synthetic import HIGHWAYS, synthetic_city

pytestmark = requires_ext  # labels at 16 hops: the C++ kernel keeps this fast


def test_statistics_are_road_like_and_diameter_grows_like_sqrt_n():
    """The published cities: mean degree 2.66 to 3.20, max degree 10 to 15, hop diameter
    0.36 sqrt(N) (Paris) to 0.54 sqrt(N) (London), clustering 0.03 to 0.04."""
    stats = {n: road_statistics(synthetic_city(n, seed=1, hops=1).graph)
             for n in (8000, 32000)}
    for n, s in stats.items():
        assert s["nodes"] == n
        assert 2.6 <= s["mean_degree"] <= 3.2
        assert 8 <= s["max_degree"] <= 15
        assert 0.02 < s["clustering"] < 0.06
        assert 0.3 < s["hop_diameter"] / n ** 0.5 < 0.7
    ratio = stats[32000]["hop_diameter"] / stats[8000]["hop_diameter"]
    assert 1.5 < ratio < 2.7  # sqrt(4) = 2


def test_graph_is_connected_undirected_without_loops():
    ds = synthetic_city(1500, seed=2)
    src, dst = ds.graph.edge_index
    assert not (src == dst).any() and ds.graph.is_undirected
    import scipy.sparse as sp
    import scipy.sparse.csgraph as csgraph
    adj = sp.coo_matrix((torch.ones(len(src)).numpy(), (src.numpy(), dst.numpy())),
                        shape=(1500, 1500))
    assert csgraph.connected_components(adj, directed=False)[0] == 1


def test_features_labels_and_split():
    ds = synthetic_city(1200, seed=3, hops=8)
    assert ds.x.shape == (1200, 3 + 2 + len(HIGHWAYS)) and ds.pos.shape == (1200, 2)
    torch.testing.assert_close(ds.x[:, 2], ds.graph.in_degree().float())
    torch.testing.assert_close(ds.x[:, 5:].sum(1), torch.ones(1200))  # mean of one-hots
    assert ((ds.x[:, 4] >= 20) & (ds.x[:, 4] <= 80)).all()  # speeds in km/h (motorway 80)
    counts = torch.bincount(ds.y, minlength=10)
    assert counts.max() - counts.min() <= 121  # chunk = 121: near-equal classes
    lengths = (ds.pos[ds.graph.edge_index[0]] - ds.pos[ds.graph.edge_index[1]]).norm(dim=1)
    assert (ds.x[:, 3] >= 0.9 * 80 * 0.4).all()  # mean incident length ~ a block
    motorway = ds.edge_attr[:, 2 + list(HIGHWAYS).index("motorway")] == 1
    assert lengths[~motorway].max() < 80 * 3.5  # a block, or a plaza to its block's neighbours
    assert motorway.any() and (lengths[motorway] > 80 * 2).all()  # links span 4 blocks
    assert (len(ds.train_index), len(ds.val_index), len(ds.test_index)) == (120, 120, 960)
    assert torch.equal(torch.sort(torch.cat([ds.train_index, ds.val_index, ds.test_index]))
                       .values, torch.arange(1200))


def test_labels_come_from_the_pipeline_and_output_is_reproducible():
    a, b, c = synthetic_city(900, seed=4, hops=6), synthetic_city(900, seed=4, hops=6), \
        synthetic_city(900, seed=5, hops=6)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert torch.equal(a.graph.edge_index, b.graph.edge_index)
    assert not torch.equal(a.x, c.x)
    expected = eccentricity_classes(local_eccentricity(a.graph, a.edge_attr[:, 0].double(), 6))
    assert (expected != a.y).float().mean() < 0.01  # float32 lengths: rare rank swaps
    with pytest.raises(ValueError, match="num_nodes must be an integer >= 2, got 1"):
        synthetic_city(1)


def test_node_count_must_be_an_integer():
    from graphloc.datasets import load_dataset
    with pytest.raises(ValueError, match="num_nodes must be an integer >= 2, got 50.5"):
        synthetic_city(50.5)
    with pytest.raises(ValueError, match="synthetic:N needs an integer node count N, got "
                                         "'synthetic:abc'"):
        load_dataset("synthetic:abc")


def test_synthetic_spec_is_cached_under_root(tmp_path):
    from graphloc.datasets import load_dataset
    first = load_dataset("synthetic:300", str(tmp_path), seed=2)
    assert (tmp_path / "synthetic" / "synthetic-300-2.pt").exists()
    again = load_dataset("synthetic:300", str(tmp_path), seed=2)
    for key in ("x", "y", "train_index", "test_index", "pos", "edge_attr"):
        assert torch.equal(getattr(again, key), getattr(first, key)), key
    assert torch.equal(again.graph.edge_index, first.graph.edge_index)
    assert torch.equal(again.x, synthetic_city(300, seed=2).x)  # what the generator gives


@pytest.mark.parametrize("seed", [-1, 1.5, "0", 2**63])
def test_seeds_are_refused_by_name_where_they_are_taken(seed, tmp_path):
    """A negative, fractional or string seed failed inside numpy's SeedSequence or torch's
    manual_seed in words naming no argument (or, for random.Random, was taken as it came):
    every dataset and encoding that takes a seed names it."""
    from graphloc import Graph
    from graphloc.datasets import load_dataset
    from graphloc.datasets.aml import synthetic_transactions
    from graphloc.nn.models.largegt import fastrp_encoding
    graph = Graph(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    message = r"seed must be an integer in \[0, 2\^63\), got "
    calls = [lambda: synthetic_city(200, seed=seed),
             lambda: load_dataset("synthetic:200", str(tmp_path), seed=seed),
             lambda: fastrp_encoding(graph, 4, seed=seed),
             lambda: synthetic_transactions(50, 200, seed=seed, root=str(tmp_path))]
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("spacing, message", [
    (float("nan"), "spacing must be a finite number, got nan"),
    (float("inf"), "spacing must be a finite number, got inf"),
    (0.0, "spacing must be > 0 metres, got 0.0"), (-80.0, "spacing must be > 0 metres")])
def test_a_block_size_that_is_no_length_is_refused_by_name(spacing, message):
    """It failed later on the edge lengths ("lengths must be non-negative, got nan at edge
    0"), naming no argument."""
    with pytest.raises(ValueError, match=f"synthetic_city: {message}"):
        synthetic_city(60, hops=2, spacing=spacing)
