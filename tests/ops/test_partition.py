"""ops.partition (METIS's multilevel scheme): cuts against brute-force optimal bisections,
graphs whose best k-way cut is known, and METIS itself (pymetis); balance limits, weights,
the undirected reading of a directed graph, the kernel against its twin, bad arguments."""

import itertools

import numpy as np
import pymetis
import pytest
import torch
from helpers import requires_ext

from graphloc.ops import partition, reference
from graphloc.ops.cluster import _undirected_csr


def random_graph(num_nodes, num_edges, seed):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    return torch.cat([edge_index, edge_index.flip(0)], dim=1)


def grid(rows, cols):
    ids = torch.arange(rows * cols).view(rows, cols)
    pairs = torch.cat([torch.stack([ids[:, :-1].flatten(), ids[:, 1:].flatten()]),
                       torch.stack([ids[:-1].flatten(), ids[1:].flatten()])], dim=1)
    return torch.cat([pairs, pairs.flip(0)], dim=1)


def geometric(num_nodes, radius, seed):
    pos = torch.rand(num_nodes, 2, generator=torch.Generator().manual_seed(seed))
    near = torch.cdist(pos, pos) < radius
    near.fill_diagonal_(False)
    return near.nonzero().t()


def ring_of_cliques(k, size):
    """k cliques of ``size`` nodes, clique i's last node joined to clique i+1's first: the
    best balanced k-way cut is the k ring edges."""
    edges = [(c * size + a, c * size + b) for c in range(k)
             for a, b in itertools.combinations(range(size), 2)]
    edges += [(c * size + size - 1, ((c + 1) % k) * size) for c in range(k)]
    pairs = torch.tensor(edges).t()
    return torch.cat([pairs, pairs.flip(0)], dim=1)


def cut(edge_index, parts, weight=None):
    crossing = parts[edge_index[0]] != parts[edge_index[1]]
    return int(crossing.sum()) if weight is None else int(weight[crossing].sum())


def limit(total, k, imbalance=0.03):
    return max(-(-total // k), int(total * (1 + imbalance) / k + 1e-9))


def best_bisection(edge_index, n):
    best = None
    for side in itertools.combinations(range(n), n // 2):
        parts = torch.ones(n, dtype=torch.long)
        parts[list(side)] = 0
        best = min(cut(edge_index, parts), best or 10**9)
    return best


@pytest.mark.parametrize("recursive", [False, True])
def test_bisections_against_brute_force(recursive):
    gaps = []
    for seed in range(40):
        edge_index = random_graph(12, 24, seed)
        parts = partition(edge_index, 2, num_nodes=12, recursive=recursive)
        assert torch.bincount(parts, minlength=2).tolist() == [6, 6]
        gaps.append(cut(edge_index, parts) / best_bisection(edge_index, 12))
    assert sum(g == 1 for g in gaps) >= 34 and max(gaps) <= 1.5, gaps


@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("k", [2, 3, 4, 6, 8])
def test_known_best_cuts(k, recursive):
    edge_index = ring_of_cliques(k, 8)
    parts = partition(edge_index, k, recursive=recursive)
    assert cut(edge_index, parts) == 2 * k  # each ring edge counted both ways
    # each clique whole in its own part
    assert parts.view(k, 8).unique(dim=1).size(1) == 1 and parts.unique().numel() == k


def metis_cut(edge_index, n, k, recursive):
    indptr, indices, _ = _undirected_csr(edge_index, None, n)
    options = pymetis.Options(seed=0)
    _, parts = pymetis.part_graph(k, xadj=indptr.tolist(), adjncy=indices.tolist(),
                                  recursive=recursive, options=options)
    return cut(edge_index, torch.tensor(parts))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("name,edge_index,k,random_share", [
    ("grid", grid(40, 40), 8, 0.1),
    ("geometric", geometric(2000, 0.04, 0), 10, 0.2),
    ("random", random_graph(1500, 6000, 1), 4, 0.8),  # an expander: every cut is large
])
def test_cuts_near_metis(name, edge_index, k, random_share, recursive):
    n = int(edge_index.max()) + 1
    parts = partition(edge_index, k, num_nodes=n, recursive=recursive)
    assert cut(edge_index, parts) <= 1.2 * metis_cut(edge_index, n, k, recursive)
    assert int(torch.bincount(parts, minlength=k).max()) <= limit(n, k)
    # against a random balanced split's cut, (k - 1) / k of the edges
    assert cut(edge_index, parts) < random_share * (k - 1) / k * edge_index.size(1)


def road_network(num_nodes, seed):
    """A street-like graph: a Delaunay triangulation of random points with edges dropped at
    random down to mean degree 3.3, which leaves many nodes without neighbours (as maps
    have), and components."""
    from scipy.spatial import Delaunay
    rng = np.random.default_rng(seed)
    tri = Delaunay(rng.random((num_nodes, 2))).simplices
    pairs = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]),
                              axis=1), axis=0)
    pairs = torch.from_numpy(pairs[rng.random(len(pairs)) < 1.65 * num_nodes / len(pairs)]).t()
    return torch.cat([pairs, pairs.flip(0)], dim=1)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_road_network_with_islands_near_metis():
    # coarsening must pair the nodes without neighbours (else it stalls with thousands left
    # and the split of the coarsest graph is poor: a mean 1.13x METIS's cut here)
    n = 50_000
    edge_index = road_network(n, 0)
    assert int((torch.bincount(edge_index[0], minlength=n) == 0).sum()) > 500
    ratios = []
    for k in (2, 4):
        for recursive in (False, True):
            metis = metis_cut(edge_index, n, k, recursive)
            ratios += [cut(edge_index, partition(edge_index, k, num_nodes=n, recursive=recursive,
                                                 seed=seed)) / metis for seed in range(4)]
    assert sum(ratios) / len(ratios) <= 1.06 and max(ratios) <= 1.3, ratios


@pytest.mark.parametrize("recursive", [False, True])
def test_unit_weights_always_balanced_and_no_part_empty(recursive):
    for seed, (n, m, k) in enumerate([(50, 40, 7), (33, 200, 5), (200, 300, 16), (9, 10, 9),
                                      (64, 0, 4), (100, 150, 3), (50, 100, 2), (300, 900, 64),
                                      (12, 30, 3)]):
        edge_index = random_graph(n, m, seed)
        for imbalance in (0.0, 0.03, 0.5, 5.0, 1000.0):  # loose limits must not empty a part
            parts = partition(edge_index, k, num_nodes=n, recursive=recursive,
                              imbalance=imbalance, seed=seed)
            sizes = torch.bincount(parts, minlength=k)
            assert parts.min() >= 0 and parts.max() < k and sizes.min() >= 1
            assert int(sizes.max()) <= limit(n, k, imbalance), (n, k, imbalance, sizes)


def test_node_weights_are_weighed():
    # node 0 weighs as much as the ten others together: at 3% tolerance it is a part alone
    edge_index = random_graph(11, 40, 3)
    weight = torch.tensor([10] + [1] * 10)
    parts = partition(edge_index, 2, node_weight=weight)
    assert (parts == parts[0]).sum() == 1
    # weights of 0 count for nothing: the three heavy nodes split 2 / 1 whatever the rest
    weight = torch.tensor([5, 5, 5] + [0] * 8)
    parts = partition(edge_index, 3, node_weight=weight)
    assert torch.bincount(parts[:3], minlength=3).tolist() == [1, 1, 1]


def test_edge_weights_steer_the_cut():
    # a ring of 8 whose edges 0-1 and 4-5 are light: the best bisection cuts exactly those
    ring = torch.tensor([[i, (i + 1) % 8] for i in range(8)]).t()
    weight = torch.tensor([1, 100, 100, 100, 1, 100, 100, 100])
    parts = partition(ring, 2, edge_weight=weight)
    assert cut(ring, parts, weight) == 2
    assert parts[1:5].unique().numel() == 1 and parts[1] != parts[0]


def test_graph_read_as_undirected():
    edge_index = random_graph(300, 600, 4)
    one_way = edge_index[:, :edge_index.size(1) // 2]
    loops = torch.arange(300).repeat(2, 1)
    both = partition(edge_index, 5)
    # a pair given in one direction weighs half; all halved, the same parts
    assert torch.equal(partition(one_way, 5, num_nodes=300), both)
    assert torch.equal(partition(torch.cat([edge_index, loops], 1), 5), both)
    # the order of the edges does not matter
    perm = torch.randperm(edge_index.size(1), generator=torch.Generator().manual_seed(0))
    assert torch.equal(partition(edge_index[:, perm], 5), both)


def test_seed_and_trivial_cases():
    edge_index = random_graph(200, 500, 5)
    assert torch.equal(partition(edge_index, 4, seed=7), partition(edge_index, 4, seed=7))
    assert not torch.equal(partition(edge_index, 4, seed=7), partition(edge_index, 4, seed=8))
    assert torch.equal(partition(edge_index, 1), torch.zeros(200, dtype=torch.long))
    assert partition(torch.empty(2, 0, dtype=torch.long), 3).numel() == 0
    # more parts than nodes: every node its own part (and no memory per empty part)
    for num_parts in (6, 10**15, 10**30):
        parts = partition(random_graph(4, 6, 0), num_parts, num_nodes=4)
        assert sorted(parts.tolist()) == [0, 1, 2, 3]
    # isolated nodes are placed too
    parts = partition(torch.tensor([[0, 1], [1, 0]]), 2, num_nodes=10)
    assert torch.bincount(parts).tolist() == [5, 5]


@requires_ext
@pytest.mark.parametrize("recursive", [False, True])
def test_kernel_and_twin_agree(recursive):
    from graphloc.ops._library import kernels
    cases = [(grid(12, 9), 4), (random_graph(90, 200, 1), 3), (ring_of_cliques(5, 6), 5),
             (geometric(150, 0.15, 2), 7), (random_graph(20, 12, 3), 2)]
    for i, (edge_index, k) in enumerate(cases):
        n = int(edge_index.max()) + 1 + 40 * (i % 2)  # with nodes without neighbours
        indptr, indices, weight = _undirected_csr(edge_index, None, n)
        gen = torch.Generator().manual_seed(i)
        node_weight = torch.randint(0, 4, (n,), generator=gen) if i % 2 else None
        edge_weight = weight * torch.randint(1, 5, weight.shape, generator=gen)
        for tolerance in (0, 30, 300):
            args = (indptr, indices, node_weight, edge_weight, k, recursive, tolerance, i)
            assert torch.equal(kernels.partition(*args), reference.partition(*args)), (i, tolerance)


@pytest.mark.parametrize("call,error,match", [
    (lambda e: partition(e, 0), ValueError, "num_parts must be an integer >= 1, got 0"),
    (lambda e: partition(e, 2.0), ValueError, "num_parts"),
    (lambda e: partition(e, True), ValueError, "num_parts"),
    (lambda e: partition(e, 2, imbalance=-0.1), ValueError, "imbalance .* got -0.1"),
    (lambda e: partition(e, 2, imbalance=float("nan")), ValueError, "imbalance"),
    (lambda e: partition(e, 2, recursive="yes"), TypeError, "recursive"),
    (lambda e: partition(e, 2, seed=-1), ValueError, "seed"),
    (lambda e: partition(e, 2, seed=2**64), ValueError, r"seed must be an integer in \[0, 2\^63\)"),
    (lambda e: partition(e, 2, num_nodes=3), ValueError, "edge_index holds 5 but dim_size is 3"),
    (lambda e: partition(e - 1, 2), ValueError, "edge_index holds -1"),
    (lambda e: partition(e[0], 2), ValueError, r"edge_index must be a \[2, E\] tensor"),
    (lambda e: partition(e.float(), 2), TypeError, "edge_index must be an integer tensor"),
    (lambda e: partition(e.to(torch.uint64), 2), TypeError,  # (max() raised NotImplemented)
     r"edge_index must be an integer tensor \(int8, int16, int32, int64 or uint8\), got "
     r"torch.uint64"),
    (lambda e: partition(e, 2, node_weight=torch.ones(5)), ValueError,
     r"node_weight must be a 1-D tensor with one entry per node \(6\)"),
    (lambda e: partition(e, 2, node_weight=torch.tensor([1, 1, -2, 1, 1, 1])), ValueError,
     "node_weight must be finite and >= 0, got -2.0 at node 2"),
    (lambda e: partition(e, 2, edge_weight=torch.full((6,), 0.5)), ValueError,
     "edge_weight must hold whole numbers .* got 0.5 at edge 0"),
    (lambda e: partition(e, 2, edge_weight=torch.full((6,), float("inf"))), ValueError,
     "edge_weight must be finite"),
    (lambda e: partition(e, 2, node_weight=torch.tensor([1, 1, float("nan"), 1, 1, 1])),
     ValueError, "node_weight must be finite and >= 0, got nan at node 2"),
    (lambda e: partition(e, 2, node_weight=torch.full((6,), 2.0**51)), ValueError,
     "past 2\\^52"),
])
def test_bad_arguments_named(call, error, match):
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    with pytest.raises(error, match=match):
        call(edge_index)


@requires_ext
def test_kernel_checks_its_own_arguments():
    from graphloc.ops._library import kernels
    indptr, indices = torch.tensor([0, 1, 2]), torch.tensor([1, 0])
    for args, match in [
        ((indptr, torch.tensor([1, 2]), None, None, 2, False, 30, 0), "indices"),
        ((indptr, indices, torch.tensor([1, -1]), None, 2, False, 30, 0),
         "node_weight must be >= 0, got -1 at 1"),
        ((indptr, indices, None, torch.tensor([1]), 2, False, 30, 0), "edge_weight must be"),
        ((indptr, indices, torch.ones(2), None, 2, False, 30, 0), "node_weight must be Long"),
        ((indptr, indices, None, None, 0, False, 30, 0), "num_parts must be >= 1, got 0"),
        ((indptr, indices, None, None, 2, False, -1, 0), "tolerance"),
        ((indptr, indices, torch.tensor([2**62, 2**62]), None, 2, False, 30, 0), "2\\^52"),
    ]:
        with pytest.raises(RuntimeError, match=match):
            kernels.partition(*args)
    # parts beyond the node count are not allocated
    assert kernels.partition(indptr, indices, None, None, 10**15, False, 30, 0).tolist() in (
        [0, 1], [1, 0])
