"""The checked wrappers of the graph kernels (graphloc.ops.traversal): values against
brute-force oracles on small graphs, and every bad argument named."""

import networkx as nx
import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph, ops
from graphloc.ops import reference


def graph_and_nx(seed=0, n=40):
    graph = Graph(random_edge_index(n - 5, 120, seed=seed), num_nodes=n)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(graph.edge_index.t().tolist())
    return graph, g


def test_khop_balls_are_the_in_balls():
    graph, g = graph_and_nx(1)
    seeds = torch.tensor([0, 7, 39])
    balls = ops.khop_subgraphs(graph, seeds, 2)
    for s, seed in enumerate(seeds.tolist()):
        nodes = balls.nodes[balls.node_ptr[s]:balls.node_ptr[s + 1]].tolist()
        hops = balls.hops[balls.node_ptr[s]:balls.node_ptr[s + 1]].tolist()
        dist = nx.single_source_shortest_path_length(g.reverse(), seed, cutoff=2)
        assert nodes[0] == seed and dict(zip(nodes, hops, strict=True)) == dist


def test_separated_rounds_have_disjoint_balls():
    graph, g = graph_and_nx(2)
    seeds = torch.arange(0, 40, 3)
    rounds = ops.separated_rounds(graph, seeds, 1)
    ball = {s: set(nx.single_source_shortest_path_length(g.reverse(), s, cutoff=1))
            for s in seeds.tolist()}
    for r in rounds.unique().tolist():
        members = seeds[rounds == r].tolist()
        for a in members:
            for b in members:
                assert a == b or not ball[a] & ball[b]


def test_sampling_and_eccentricity_match_their_twins():
    graph, _ = graph_and_nx(3)
    sample = ops.neighbor_sample(graph, torch.tensor([1, 2]), [-1])
    assert sample.nodes[:2].tolist() == [1, 2]
    full_in = {(int(s), int(d)) for s, d in graph.edge_index.t() if d in (1, 2)}
    got = {(int(sample.nodes[a]), int(sample.nodes[b])) for a, b in
           zip(sample.src, sample.dst, strict=True)}
    assert got == full_in  # fan-out -1: every in-edge of the seeds
    lengths = torch.rand(graph.num_edges, dtype=torch.float64)
    torch.testing.assert_close(ops.local_eccentricity(graph, lengths, 3),
                               ops.local_eccentricity(graph, lengths, 3, twin=True))
    tokens = ops.hop2_sample(graph, 4, seed=5)
    assert tokens.shape == (graph.num_nodes, 4) and tokens[:, 0].tolist() == \
        list(range(graph.num_nodes))


def test_bad_arguments_are_named():
    graph, _ = graph_and_nx(4)
    with pytest.raises(TypeError, match="seeds must be a 1-D integer tensor"):
        ops.khop_subgraphs(graph, torch.tensor([0.5]), 1)
    with pytest.raises(ValueError, match="seed 40 is out of range for 40 nodes"):
        ops.khop_subgraphs(graph, torch.tensor([0, 40]), 1)
    with pytest.raises(ValueError, match="hops must be an integer >= 0, got -1"):
        ops.khop_subgraphs(graph, torch.tensor([0]), -1)
    with pytest.raises(ValueError, match="seed 3 appears twice"):
        ops.separated_rounds(graph, torch.tensor([3, 3]), 1)
    with pytest.raises(ValueError, match="fanouts must be a list of integers"):
        ops.neighbor_sample(graph, torch.tensor([0]), [-2])
    with pytest.raises(ValueError, match="K \\(tokens per node\\) must be an integer >= 1"):
        ops.hop2_sample(graph, 0)
    # [40, 10^12] tokens: 320 TB, beyond any machine (the allocator named only bytes)
    with pytest.raises(ValueError, match=r"K=1000000000000 \(tokens per node\) asks for a "
                                         r"\[40, 1000000000000\] torch.int64 output of"):
        ops.hop2_sample(graph, 10**12)
    with pytest.raises(ValueError, match="lengths must be a tensor of shape"):
        ops.local_eccentricity(graph, torch.rand(3), 2)
    with pytest.raises(ValueError, match="lengths must be non-negative"):
        ops.local_eccentricity(graph, -torch.ones(graph.num_edges), 2)
    with pytest.raises(ValueError, match="bipartite"):
        ops.khop_subgraphs(Graph.bipartite(torch.tensor([[0], [1]]), (3, 2)),
                           torch.tensor([0]), 1)
    with pytest.raises(TypeError, match="expects a graphloc.Graph"):
        ops.hop2_sample(graph.edge_index, 2)
    nodeless = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)  # raised before
    assert ops.hop2_sample(nodeless, 3).shape == (0, 3)
    assert reference.hop2_sample(nodeless.csr.indptr, nodeless.csr.indices, 3, 0).shape == (0, 3)
    empty = ops.khop_subgraphs(graph, torch.tensor([], dtype=torch.long), 2)
    assert empty.node_ptr.tolist() == [0] and empty.nodes.numel() == 0


# --- relational_neighbor_sample: PyG's layer-wise semantics over several relations ----------

def _typed_graph(seed):
    """Two node types (7 and 5 nodes) and three relations (0->0, 1->0, 0->1) with loops,
    parallel edges and empty rows: (edge lists in edge-id order, relations, num_nodes)."""
    gen = torch.Generator().manual_seed(seed)
    relations, num_nodes = [(0, 0), (1, 0), (0, 1)], [7, 5]
    edges = [torch.stack([torch.randint(0, num_nodes[a], (14,), generator=gen),
                          torch.randint(0, num_nodes[b], (14,), generator=gen)])
             for a, b in relations]
    return edges, relations, num_nodes


def _csrs(edges, relations, num_nodes):
    graphs = [Graph.bipartite(e, (num_nodes[a], num_nodes[b]))
              for e, (a, b) in zip(edges, relations, strict=True)]
    return graphs, [(g.csr.indptr, g.csr.indices) for g in graphs]


def _layerwise_oracle(edges, relations, num_nodes, seeds, hops, disjoint, induced):
    """Every in-edge of every reached node (fan-out -1), read from the edge lists: per type
    the (tree, node) list in discovery order; per relation the (source row, destination
    row, edge id) list, a node's in-edges in edge-id order."""
    nodes = [[] for _ in num_nodes]
    tree = 0
    for t, s in enumerate(seeds):
        for v in s.tolist():
            nodes[t].append((tree if disjoint else 0, v))
            tree += disjoint
    first = [{} for _ in num_nodes]
    for t in range(len(num_nodes)):
        for i, key in enumerate(nodes[t]):
            first[t].setdefault(key, i)
    found = [[] for _ in relations]
    begin = [0] * len(num_nodes)
    for _ in range(hops):
        end = [len(n) for n in nodes]
        for r, (a, b) in enumerate(relations):
            for f in range(begin[b], end[b]):
                tr, w = nodes[b][f]
                for eid in (edges[r][1] == w).nonzero().flatten().tolist():
                    key = (tr, int(edges[r][0, eid]))
                    if key not in first[a]:
                        first[a][key] = len(nodes[a])
                        nodes[a].append(key)
                    found[r].append((first[a][key], f, eid))
        begin = end
    if induced:
        found = [[(first[a][(0, int(edges[r][0, eid]))], f, eid)
                  for f, (_, w) in enumerate(nodes[b])
                  for eid in (edges[r][1] == w).nonzero().flatten().tolist()
                  if (0, int(edges[r][0, eid])) in first[a]]
                 for r, (a, b) in enumerate(relations)]
    return nodes, found


@pytest.mark.parametrize("disjoint,induced", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_full_fanouts_take_every_in_edge_layer_by_layer(seed, disjoint, induced):
    edges, relations, num_nodes = _typed_graph(seed)
    graphs, csrs = _csrs(edges, relations, num_nodes)
    seeds = [torch.tensor([3, 0, 3]), torch.tensor([4])]  # a repeated seed keeps its row
    out = ops.relational_neighbor_sample(csrs, relations, num_nodes, seeds, [[-1, -1]] * 3,
                                         disjoint=disjoint, induced=induced, seed=seed)
    nodes, found = _layerwise_oracle(edges, relations, num_nodes, seeds, 2, disjoint, induced)
    for t in range(2):
        assert out.nodes[t].tolist() == [v for _, v in nodes[t]]
        assert out.trees[t].tolist() == ([tr for tr, _ in nodes[t]] if disjoint else [])
    for r, g in enumerate(graphs):
        eid = g.csr.perm[out.pos[r]].tolist() if g.csr.perm is not None else out.pos[r].tolist()
        got = list(zip(out.src[r].tolist(), out.dst[r].tolist(), eid, strict=True))
        assert got == found[r]


def _draw_counts(csrs, relations, num_nodes, k, streams, **rules):
    """How often each CSR position of relation 0 is drawn around seed node 0 of type 0."""
    counts = torch.zeros(csrs[0][1].numel(), dtype=torch.long)
    for stream in range(streams):
        out = ops.relational_neighbor_sample(csrs, relations, num_nodes,
                                             [torch.tensor([0])], [[k]], seed=stream, **rules)
        counts += torch.bincount(out.pos[0], minlength=counts.numel())
    return counts


def _star(weights=None):
    """Node 0 with one in-edge from each of nodes 1..n (CSR position i from node i + 1)."""
    n = 10 if weights is None else len(weights)
    g = Graph(torch.stack([torch.arange(1, n + 1), torch.zeros(n, dtype=torch.long)]),
              num_nodes=n + 1)
    return [(g.csr.indptr, g.csr.indices)], [(0, 0)], [n + 1]


def _chi_square(counts, expected):
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("replace", [False, True])
def test_uniform_draws_are_uniform(replace):
    """3 of 10 in-neighbours, 3,000 times: 900 draws each in expectation; chi-square with 9
    degrees of freedom below 27.9 (p = 0.001); without replacement 3 distinct each time."""
    csrs, relations, num_nodes = _star()
    counts = _draw_counts(csrs, relations, num_nodes, 3, 3000, replace=replace)
    assert int(counts.sum()) == 9000
    assert _chi_square(counts.double(), torch.full((10,), 900.0)) < 27.9
    if not replace:
        out = ops.relational_neighbor_sample(csrs, relations, num_nodes, [torch.tensor([0])],
                                             [[3]], seed=5)
        assert out.pos[0].unique().numel() == 3


@pytest.mark.parametrize("replace", [False, True])
def test_weighted_draws_follow_the_weights(replace):
    """One draw (k = 1) of weights 0, 1, 2, 3, 4 (and 0): picked with probability w / 10
    with or without replacement; weight 0 never; chi-square with 3 degrees of freedom
    below 16.3 (p = 0.001) over 4,000 draws."""
    weights = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 0.0], dtype=torch.float64)
    csrs, relations, num_nodes = _star(weights)
    counts = _draw_counts(csrs, relations, num_nodes, 1, 4000, replace=replace,
                          edge_weights=[weights])
    assert counts[0] == 0 and counts[5] == 0 and int(counts.sum()) == 4000
    assert _chi_square(counts[1:5].double(), 400.0 * weights[1:5]) < 16.3


def test_weighted_draws_without_replacement_take_only_positive_weights():
    weights = torch.tensor([0.0, 5.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    csrs, relations, num_nodes = _star(weights)
    for stream in range(50):
        out = ops.relational_neighbor_sample(csrs, relations, num_nodes, [torch.tensor([0])],
                                             [[3]], seed=stream, edge_weights=[weights])
        assert out.pos[0].tolist() == [1, 3]  # fewer positive weights than k: just those
    whole = ops.relational_neighbor_sample(csrs, relations, num_nodes, [torch.tensor([0])],
                                           [[5]], edge_weights=[weights])
    assert whole.pos[0].tolist() == [0, 1, 2, 3, 4]  # k >= degree: the whole row, as pyg-lib
    none = ops.relational_neighbor_sample(csrs, relations, num_nodes, [torch.tensor([0])],
                                          [[2]], replace=True, edge_weights=[weights * 0])
    assert none.pos[0].numel() == 0  # with replacement, nothing to draw from


@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("level", ["node", "edge"])
def test_temporal_draws_stay_at_or_before_the_seed_time(level, last):
    """Every drawn entry's time is at most its tree's seed time; with last, the k latest of
    those exactly (ties to the later CSR position), at every hop."""
    edges, relations, num_nodes = _typed_graph(4)
    graphs, csrs = _csrs(edges, relations, num_nodes)
    gen = torch.Generator().manual_seed(4)
    node_times = [torch.randint(0, 5, (n,), generator=gen) for n in num_nodes]
    edge_times = [torch.randint(0, 5, (c[1].numel(),), generator=gen) for c in csrs]
    seeds = [torch.tensor([0, 1, 2, 3, 4, 5, 6]), torch.tensor([0, 1])]
    seed_times = torch.randint(0, 5, (9,), generator=gen)
    rules = dict(node_times=node_times) if level == "node" else dict(edge_times=edge_times)
    for stream in range(5):
        out = ops.relational_neighbor_sample(csrs, relations, num_nodes, seeds, [[2, 2]] * 3,
                                             disjoint=True, seed=stream, seed_times=seed_times,
                                             last=last, **rules)
        for r, (a, b) in enumerate(relations):
            indptr, indices = csrs[r]

            def time(e, r=r, a=a, indices=indices):
                return int(node_times[a][indices[e]] if level == "node" else edge_times[r][e])

            for f in out.dst[r].unique().tolist():
                tree = int(out.trees[b][f])
                drawn = sorted(out.pos[r][out.dst[r] == f].tolist())
                w = int(out.nodes[b][f])
                allowed = [e for e in range(int(indptr[w]), int(indptr[w + 1]))
                           if time(e) <= int(seed_times[tree])]
                assert set(drawn) <= set(allowed) and len(drawn) == min(2, len(allowed))
                if last:
                    latest = sorted(sorted(allowed, key=time)[-2:])
                    assert drawn == latest


def test_draws_do_not_depend_on_the_thread_count():
    graph, _ = graph_and_nx(6, n=400)
    csrs = [(graph.csr.indptr, graph.csr.indices)]
    seeds = [torch.arange(0, 400, 3)]
    threads = torch.get_num_threads()
    runs = []
    for count in (1, 2):
        torch.set_num_threads(count)
        runs.append(ops.relational_neighbor_sample(csrs, [(0, 0)], [400], seeds, [[3, 2]],
                                                   seed=9, disjoint=True))
    torch.set_num_threads(threads)
    for a, b in zip(runs[0], runs[1], strict=True):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)


def test_relational_sample_bad_arguments_are_named():
    edges, relations, num_nodes = _typed_graph(0)
    _, csrs = _csrs(edges, relations, num_nodes)
    seeds = [torch.tensor([0]), torch.tensor([], dtype=torch.long)]
    call = ops.relational_neighbor_sample
    with pytest.raises(ValueError, match="one CSR per relation"):
        call(csrs[:2], relations, num_nodes, seeds, [[1]] * 3)
    with pytest.raises(ValueError, match="relation 1 must be a \\(source type, destination"):
        call(csrs, [(0, 0), (2, 0), (0, 1)], num_nodes, seeds, [[1]] * 3)
    with pytest.raises(ValueError, match="one list of fan-outs per relation"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 2)
    with pytest.raises(ValueError, match="the same number of hops"):
        call(csrs, relations, num_nodes, seeds, [[1], [1, 2], [1]])
    with pytest.raises(ValueError, match="seeds must hold one tensor per node type"):
        call(csrs, relations, num_nodes, seeds[:1], [[1]] * 3)
    with pytest.raises(ValueError, match="seed 7 is out of range for 7 nodes"):
        call(csrs, relations, num_nodes, [torch.tensor([7]), seeds[1]], [[1]] * 3)
    with pytest.raises(ValueError, match="not sampled disjointly"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 3, disjoint=True, induced=True)
    times = [torch.zeros(7, dtype=torch.long), None]
    with pytest.raises(ValueError, match="needs disjoint=True"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 3, node_times=times,
             seed_times=torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match="needs seed_times: one time per seed \\(1\\)"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 3, node_times=times, disjoint=True)
    with pytest.raises(ValueError, match="seed_times\\[0\\] must be a 1-D tensor of 1 entries"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 3, node_times=times, disjoint=True,
             seed_times=torch.zeros(2, dtype=torch.long))
    with pytest.raises(TypeError, match="node_times\\[0\\] must hold integer times, got "
                                        "torch.float32"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 3, node_times=[torch.zeros(7), None],
             disjoint=True, seed_times=torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match="node_times\\[1\\] must be a 1-D tensor of 5 entries"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 3, disjoint=True,
             node_times=[None, torch.zeros(4, dtype=torch.long)],
             seed_times=torch.zeros(1, dtype=torch.long))
    weights = [torch.ones(c[1].numel(), dtype=torch.float64) for c in csrs]
    for bad in (float("nan"), -1.0, float("inf")):
        weights[2][3] = bad
        with pytest.raises(ValueError, match=f"edge_weights\\[2\\] must be finite and >= 0, "
                                             f"got {bad} at CSR position 3"):
            call(csrs, relations, num_nodes, seeds, [[1]] * 3, edge_weights=weights)
    with pytest.raises(TypeError, match="edge_weights\\[0\\] must be real numbers"):
        call(csrs, relations, num_nodes, seeds, [[1]] * 3,
             edge_weights=[torch.ones(csrs[0][1].numel(), dtype=torch.bool), None, None])
    counts = [torch.arange(c[1].numel()) % 3 for c in csrs]  # integer weights: as numbers
    as_int = call(csrs, relations, num_nodes, seeds, [[2]] * 3, edge_weights=counts, seed=3)
    as_float = call(csrs, relations, num_nodes, seeds, [[2]] * 3, seed=3,
                    edge_weights=[c.double() for c in counts])
    assert all(torch.equal(a, b) for x, y in zip(as_int, as_float, strict=True)
               for a, b in zip(x, y, strict=True))
    other = torch.int64 if csrs[1][0].dtype == torch.int32 else torch.int32
    mixed = [csrs[0], (csrs[1][0].to(other), csrs[1][1].to(other)), csrs[2]]
    with pytest.raises(TypeError, match="share one index dtype"):
        call(mixed, relations, num_nodes, seeds, [[1]] * 3)
    assert all(part == [] for part in call([], [], [], [], []))  # no types: nothing sampled
    # a CSR whose sources exceed the source type's nodes: the kernel (RuntimeError) or the
    # twin (ValueError) names it
    wide = Graph.bipartite(torch.tensor([[6], [0]]), (7, 7)).csr
    with pytest.raises((RuntimeError, ValueError), match="out of range"):
        call([(wide.indptr, wide.indices)], [(1, 0)], num_nodes, seeds, [[1]])
    # a CSR with fewer rows than its destination type's nodes: reaching a missing row fails
    short = Graph.bipartite(torch.tensor([[0], [0]]), (7, 2)).csr
    with pytest.raises((RuntimeError, ValueError), match="node 4 has no row in a CSR of 2"):
        call([(short.indptr, short.indices)], [(0, 0)], [7, 5],
             [torch.tensor([4]), seeds[1]], [[1]])


# --- random_walk: node2vec's second-order walks --------------------------------------------

def test_walks_follow_edges_and_stay_at_dead_ends():
    graph, _ = graph_and_nx(7)
    start = torch.arange(40)
    walks = ops.random_walk(graph, start, 8, p=0.5, q=2.0, seed=1)
    assert walks.nodes.shape == (40, 9) and torch.equal(walks.nodes[:, 0], start)
    out_degree = torch.bincount(graph.edge_index[0], minlength=40)
    for i in range(40):
        for step in range(8):
            here, there, e = (int(walks.nodes[i, step]), int(walks.nodes[i, step + 1]),
                              int(walks.edges[i, step]))
            if out_degree[here] == 0:
                assert e == -1 and there == here
            else:
                assert graph.edge_index[:, e].tolist() == [here, there]


@pytest.mark.parametrize("p,q", [(0.5, 2.0), (4.0, 0.25), (1.0, 1.0)])
def test_second_steps_follow_node2vecs_weights(p, q):
    """Node 0's only out-edge goes to 1; node 1's entries go back to 0 (twice: parallel
    edges count once each), to 2 and 3 (which have edges back to 0) and to 4 and 5 (which do
    not). The second step from 1 must take each entry with weight 1/p, 1 or 1/q exactly;
    chi-square with 5 degrees of freedom below 20.5 (p = 0.001) over 6,000 walks."""
    src = torch.tensor([0, 1, 1, 1, 1, 1, 1, 2, 3])
    dst = torch.tensor([1, 0, 0, 2, 3, 4, 5, 0, 0])
    graph = Graph(torch.stack([src, dst]), num_nodes=6)
    walks = ops.random_walk(graph, torch.zeros(6000, dtype=torch.long), 2, p=p, q=q, seed=2)
    assert bool((walks.nodes[:, 1] == 1).all())
    counts = torch.bincount(walks.edges[:, 1], minlength=9)[1:7].double()  # edges 1..6
    weight = torch.tensor([1 / p, 1 / p, 1.0, 1.0, 1 / q, 1 / q], dtype=torch.float64)
    expected = 6000 * weight / weight.sum()
    assert float(((counts - expected) ** 2 / expected).sum()) < 20.5


def test_walks_do_not_depend_on_the_thread_count():
    graph, _ = graph_and_nx(8, n=300)
    threads = torch.get_num_threads()
    runs = []
    for count in (1, 2):
        torch.set_num_threads(count)
        runs.append(ops.random_walk(graph, torch.arange(300), 10, p=0.3, q=3.0, seed=4))
    torch.set_num_threads(threads)
    assert torch.equal(runs[0].nodes, runs[1].nodes)
    assert torch.equal(runs[0].edges, runs[1].edges)


def test_random_walk_bad_arguments_are_named():
    graph, _ = graph_and_nx(9)
    for name, kwargs in (("p", dict(p=0.0)), ("q", dict(q=float("nan"))),
                         ("p", dict(p=-1.0)), ("q", dict(q=float("inf")))):
        with pytest.raises(ValueError, match=f"{name} must be a finite number > 0"):
            ops.random_walk(graph, torch.tensor([0]), 3, **kwargs)
    with pytest.raises(ValueError, match="walk_length must be an integer >= 0"):
        ops.random_walk(graph, torch.tensor([0]), -1)
    with pytest.raises(ValueError, match="seed 40 is out of range for 40 nodes"):
        ops.random_walk(graph, torch.tensor([40]), 3)
    with pytest.raises(TypeError, match="seeds must be a 1-D integer tensor"):
        ops.random_walk(graph, torch.tensor([0.0]), 3)
    with pytest.raises(TypeError, match="expects a graphloc.Graph"):
        ops.random_walk(graph.edge_index, torch.tensor([0]), 3)
    with pytest.raises(ValueError, match="walk_length=1000000000000 asks for a"):
        ops.random_walk(graph, torch.tensor([0]), 10**12)
    for bad_seed in (2**63, -1, 1.0):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\^63\)"):
            ops.random_walk(graph, torch.tensor([0]), 3, seed=bad_seed)
    empty = ops.random_walk(graph, torch.zeros(0, dtype=torch.long), 3)
    assert empty.nodes.shape == (0, 4) and empty.edges.shape == (0, 3)
    nodes_only = ops.random_walk(graph, torch.arange(40), 5, p=2.0, seed=8, return_edges=False)
    both = ops.random_walk(graph, torch.arange(40), 5, p=2.0, seed=8)
    assert nodes_only.edges is None and torch.equal(nodes_only.nodes, both.nodes)


def test_source_major_rows_are_sorted_as_random_walk_trusts():
    """random_walk tells its kernel that graph.csc's rows are sorted (it binary-searches
    them for an edge x -> t): the transpose of any graph must keep that true."""
    for seed in range(4):
        graph = Graph(random_edge_index(60, 400, seed=seed, hub_degree=40), num_nodes=60)
        csc = graph.csc
        for j in range(60):
            row = csc.indices[csc.indptr[j]:csc.indptr[j + 1]]
            assert bool((row[1:] >= row[:-1]).all())


def dense_powers(graph: Graph, hops: int, weight=None) -> torch.Tensor:
    """``[N, N, hops + 1]``: A^0..A^hops of the dense A[i, j] = weight of j -> i."""
    n = graph.num_nodes
    a = torch.zeros(n, n, dtype=torch.float64)
    src, dst = graph.edge_index
    ones = torch.ones(graph.num_edges, dtype=torch.float64)
    a.index_put_((dst, src), ones if weight is None else weight.double(), accumulate=True)
    powers, p = [], torch.eye(n, dtype=torch.float64)
    for _ in range(hops + 1):
        powers.append(p)
        p = p @ a
    return torch.stack(powers, dim=-1)


def reach_within(graph: Graph, hops: int) -> set:
    """The pairs (i, j) with a path j -> ... -> i of at most ``hops`` edges (networkx)."""
    _, g = graph, nx.DiGraph()
    g.add_nodes_from(range(graph.num_nodes))
    g.add_edges_from(graph.edge_index.t().tolist())
    return {(i, j) for i in range(graph.num_nodes)
            for j in nx.single_source_shortest_path_length(g.reverse(), i, cutoff=hops)}


@pytest.mark.parametrize("weighted", [False, True])
def test_walk_counts_are_the_adjacency_powers_on_the_reach_pattern(weighted):
    # loops, parallel edges (which add) and isolated nodes in random_edge_index's graphs
    graph = Graph(random_edge_index(30, 90, seed=4), num_nodes=34)
    weight = torch.randn(graph.num_edges, dtype=torch.float64) if weighted else None
    for hops in (0, 1, 2, 4):
        walks = ops.walk_counts(graph, hops, weight)
        rows = torch.repeat_interleave(torch.arange(34), walks.indptr.diff())
        assert set(zip(rows.tolist(), walks.indices.tolist(), strict=True)) == \
            reach_within(graph, hops)
        for r in range(34):  # columns ascending in each row
            cols = walks.indices[walks.indptr[r]:walks.indptr[r + 1]]
            assert torch.equal(cols, cols.sort().values)
        dense = torch.zeros(34, 34, hops + 1, dtype=torch.float64)
        dense[rows, walks.indices] = walks.counts
        torch.testing.assert_close(dense, dense_powers(graph, hops, weight), rtol=1e-12,
                                   atol=1e-9)


def test_walk_counts_keep_pairs_whose_weights_cancel_and_take_float32_weights():
    graph = Graph(torch.tensor([[0, 1, 0], [1, 2, 2]]), num_nodes=3)  # 0 -> 1 -> 2, 0 -> 2
    walks = ops.walk_counts(graph, 2, torch.tensor([1.0, 0.0, -2.0]))
    assert walks.indices.tolist() == [0, 0, 1, 0, 1, 2]
    assert walks.counts[3].tolist() == [0.0, -2.0, 0.0]  # (2, 0): walks 0->2 and 0->1->2
    assert walks.counts.dtype == torch.float64
    empty = ops.walk_counts(Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=0), 3)
    assert empty.indptr.tolist() == [0] and empty.counts.shape == (0, 4)


def test_walk_counts_refuse_bad_arguments_by_name():
    graph = Graph(random_edge_index(10, 20, seed=1), num_nodes=10)
    e = graph.num_edges
    with pytest.raises(ValueError, match="hops"):
        ops.walk_counts(graph, -1)
    with pytest.raises((TypeError, ValueError), match="hops"):
        ops.walk_counts(graph, 1.5)
    for bad in (torch.ones(3), torch.ones(e, 2)):
        with pytest.raises(ValueError, match=rf"edge_weight must be \[E\] = \[{e}\]"):
            ops.walk_counts(graph, 2, bad)
    with pytest.raises(TypeError, match="edge_weight must be a floating-point"):
        ops.walk_counts(graph, 2, torch.ones(e, dtype=torch.long))
    with pytest.raises(ValueError, match="no gradient for edge_weight"):
        ops.walk_counts(graph, 2, torch.ones(e, requires_grad=True))
    with pytest.raises(ValueError, match="bipartite"):
        ops.walk_counts(Graph.bipartite(torch.tensor([[0], [1]]), (3, 2)), 2)
    with pytest.raises(TypeError, match="graphloc.Graph"):
        ops.walk_counts(torch.tensor([[0], [1]]), 2)


def test_walk_counts_refuse_hops_beyond_memory_by_name_before_the_kernel():
    graph = Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    assert ops.walk_counts(graph, 1000).counts.shape == (9, 1001)  # a cycle: every length
    for hops in (2**62, 2**63, 2**70):  # (2^63 does not fit the kernel's int64)
        with pytest.raises(ValueError, match=f"walks of up to {hops} hops join more node "
                                             "pairs than the limit"):
            ops.walk_counts(graph, hops)


def cycle(n: int, copies: int = 1) -> torch.Tensor:
    """The directed cycle 0 -> 1 -> ... -> n - 1 -> 0, each edge ``copies`` times."""
    src = torch.arange(n).repeat(copies)
    return torch.stack([src, (src + 1) % n])


@pytest.mark.parametrize("walk_length,dropped", [(1, lambda p: p),
                                                 (2, lambda p: 1 - (1 - p) ** 2),
                                                 (4, lambda p: 1 - (1 - p) ** 4)])
def test_dropout_path_drops_the_edges_walks_from_drawn_sources_step_along(walk_length,
                                                                          dropped):
    # on a directed cycle each walk is forced: the edge u -> u + 1 is dropped exactly when
    # one of the walk_length edges before it (its own included) was drawn
    n, p = 20_000, 0.3
    torch.manual_seed(0)
    kept, mask = ops.dropout_path(cycle(n), p=p, walk_length=walk_length)
    share = 1 - mask.double().mean().item()
    expected = dropped(p)
    assert abs(share - expected) < 4 * (expected * (1 - expected) / n) ** 0.5
    assert torch.equal(kept, cycle(n)[:, mask])
    # the dropped edges come in runs of at least walk_length (a walk drops its whole path)
    runs = torch.diff(torch.cat([torch.tensor([0]), (~mask).int(), torch.tensor([0])]))
    starts, ends = (runs == 1).nonzero().view(-1), (runs == -1).nonzero().view(-1)
    inner = (starts > 0) & (ends < n)  # (a run across node 0 is cut in two here)
    assert ((ends - starts)[inner] >= walk_length).all()


def test_dropout_path_drops_parallel_copies_together_and_repeats_under_a_seed():
    torch.manual_seed(3)
    _, mask = ops.dropout_path(cycle(500, copies=2), p=0.2)
    assert torch.equal(mask[:500], mask[500:]) and not mask.all()
    torch.manual_seed(3)
    assert torch.equal(ops.dropout_path(cycle(500, copies=2), p=0.2)[1], mask)
    edge_index = cycle(10)
    for call in (dict(training=False), dict(p=0.0)):
        kept, mask = ops.dropout_path(edge_index, **call)
        assert kept is edge_index and mask.all()
    assert ops.dropout_path(cycle(10), p=1.0)[1].sum() == 0  # every source walks


def test_dropout_path_refuses_bad_arguments_by_name():
    edge_index = cycle(5)
    for p in (-0.1, 1.5, "0.2", True):
        with pytest.raises(ValueError, match="p must lie in"):
            ops.dropout_path(edge_index, p=p)
    with pytest.raises(ValueError, match="walks_per_node"):
        ops.dropout_path(edge_index, walks_per_node=0)
    with pytest.raises(ValueError, match="walk_length"):
        ops.dropout_path(edge_index, walk_length=-1)
    with pytest.raises(TypeError, match="training must be True or False"):
        ops.dropout_path(edge_index, training="no")
    with pytest.raises(ValueError, match="edge_index holds 5 but dim_size is 5"):
        ops.dropout_path(torch.tensor([[0, 5], [1, 2]]), num_nodes=5)


def test_dropout_path_on_no_edges_and_a_graph_with_isolated_nodes():
    kept, mask = ops.dropout_path(torch.zeros(2, 0, dtype=torch.long), p=0.5)
    assert kept.shape == (2, 0) and mask.shape == (0,) and mask.dtype == torch.bool
    # node 4 has no edges and node 3 none out: walks stop there, nothing else is dropped
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    kept, mask = ops.dropout_path(edge_index, p=1.0, walk_length=5, num_nodes=5)
    assert not mask.any() and kept.shape == (2, 0)
