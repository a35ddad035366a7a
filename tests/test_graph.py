"""Graph: validation, cached layouts, structural methods (against PyG), conversions."""

import networkx as nx
import pytest
import scipy.sparse as sp
import torch
from helpers import CONV_LAYERS, random_edge_index
from parity import parity_graph

from graphloc import Graph, ops

pyg_utils = pytest.importorskip("torch_geometric.utils")


def test_validation_names_the_offending_value():
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds 1203 at column 1 but the "
                                         r"graph has 1200 nodes"):
        Graph(torch.tensor([[0, 1], [5, 1203]]), num_nodes=1200)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds -3 at column 1"):
        Graph(torch.tensor([[0, -3], [1, 2]]))
    with pytest.raises(TypeError, match="integer dtype, got torch.float32"):
        Graph(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match=r"shape \[2, E\], got \[3, 2\]"):
        Graph(torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="at least one node, got num_nodes=0"):
        Graph(torch.empty(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="num_nodes must be >= 0, got num_nodes=-1"):
        Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=-1)  # (0 is the empty graph)
    with pytest.raises(ValueError, match="edge_attr has 3 rows but edge_index has 2 edges"):
        Graph(torch.tensor([[0, 1], [1, 0]]), edge_attr=torch.randn(3, 2))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        Graph([[0, 1], [1, 0]])


def test_a_sparse_or_meta_edge_index_is_refused_by_name():
    """A torch.sparse adjacency passed as edge_index failed in aten::aminmax without
    naming the argument; the message's recipe gives the adjacency's edges."""
    adj = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [1.0, 0.0, 0.0]])
    for sparse in (adj.to_sparse(), adj.to_sparse_csr()):
        with pytest.raises(TypeError, match=r"edge_index must be a dense \[2, E\] tensor"):
            Graph(sparse, num_nodes=3)
        recipe = Graph(sparse.to_sparse_coo().coalesce().indices(), num_nodes=3)
        assert recipe.edge_index.tolist() == [list(r) for r in adj.nonzero().t().tolist()]
    with pytest.raises(ValueError, match="edge_index is on the meta device"):
        Graph(torch.empty(2, 3, dtype=torch.long, device="meta"), num_nodes=3)


def test_csr_and_csc_describe_the_edges():
    edge_index = random_edge_index(30, 200, seed=20)
    g = Graph(edge_index, num_nodes=30)
    assert g.csr.indptr.dtype == torch.int32
    rows = torch.repeat_interleave(torch.arange(30), g.csr.degree().long())
    perm = g.csr.perm.long()
    assert torch.equal(rows, edge_index[1][perm])
    assert torch.equal(g.csr.indices.long(), edge_index[0][perm])
    assert torch.equal(perm, torch.sort(edge_index[1], stable=True).indices)
    # The transpose: row j lists the edges out of j; perm points at CSR positions.
    src_rows = torch.repeat_interleave(torch.arange(30), g.csc.degree().long())
    assert torch.equal(g.csr.indices.long()[g.csc.perm.long()], src_rows)
    assert torch.equal(rows[g.csc.perm.long()], g.csc.indices.long())
    assert g.csc is g.csc  # cached
    assert torch.equal(g.in_degree(), torch.bincount(edge_index[1], minlength=30))
    assert torch.equal(g.out_degree(), torch.bincount(edge_index[0], minlength=30))


def test_sorted_input_needs_no_permutation():
    g = Graph(torch.tensor([[2, 0, 1], [0, 1, 1]]))
    assert g.csr.perm is None
    w = torch.tensor([1.0, 2.0, 3.0])
    assert g.to_csr_order(w) is w


def test_immutable_and_to_moves_caches():
    g = Graph(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(AttributeError, match="immutable"):
        g.num_nodes = 5
    _ = g.csc
    g.gcn_norm()
    moved = g.to("meta")
    assert moved.csr.indptr.device.type == "meta"
    assert moved._cache["csc"].value.indptr.device.type == "meta"
    graph_with_loops, weight = moved._cache[("gcn_norm", True, False, torch.float32)].value
    assert weight.device.type == "meta" and graph_with_loops.device.type == "meta"
    assert g.to("cpu") is g
    with pytest.raises(TypeError, match="Graph.to takes a device, got the dtype torch.float64"):
        g.to(torch.float64)  # torch.device's error named no argument


@pytest.mark.parametrize("copy_of", ["deepcopy", "torch.save"])
def test_a_copied_graph_works_and_keeps_what_was_refused(copy_of, tmp_path):
    """A copy rebuilds each tensor at version 1 where the Graph recorded 0: every op on a
    deep-copied, pickled or saved Graph (a dataset copied for early stopping, a Graph
    sent to another process) raised "edge_index was modified in place"."""
    import copy
    edge_index = random_edge_index(20, 70, seed=12)
    graph = Graph(edge_index, num_nodes=20)
    graph.gcn_norm()  # caches copied along: a normalised graph with its transposed weights
    x = torch.randn(20, 4, requires_grad=True)

    def copied(g):
        if copy_of == "deepcopy":
            return copy.deepcopy(g)
        torch.save(g, tmp_path / "graph.pt")
        return torch.load(tmp_path / "graph.pt", weights_only=False)
    twin = copied(graph)
    dense = torch.zeros(20, 20).index_put_((edge_index[1], edge_index[0]),
                                           torch.ones(graph.num_edges), accumulate=True)
    torch.testing.assert_close(ops.spmm(twin, x), dense @ x)
    looped, weight = twin.gcn_norm()
    d = _brute_inverse_sqrt_degrees(edge_index, 20)
    torch.testing.assert_close(weight, d[looped.edge_index[1]] * d[looped.edge_index[0]])
    out = ops.spmm(looped, x, weight)
    grad, = torch.autograd.grad(out.sum(), x)  # the backward reads the transposed copy
    src, dst = looped.edge_index
    a = torch.zeros(20, 20).index_put_((dst, src), weight.detach(), accumulate=True)
    torch.testing.assert_close(grad, a.t() @ torch.ones(20, 4))
    weight.mul_(3)  # a copy's cache is guarded as the original's
    torch.testing.assert_close(twin.gcn_norm()[1], weight / 3)
    edge_index[0, 0] = (edge_index[0, 0] + 1) % 20  # the original goes stale: so do copies
    with pytest.raises(RuntimeError, match="modified in place"):
        ops.spmm(copied(graph), x)


def test_an_edge_index_changed_in_place_after_the_build_is_refused():
    """The Graph keeps the caller's edge_index tensor (no copy): changed in place, the
    Graph showed the new edges while its CSR (and every op) still used the old ones."""
    edge_index = torch.tensor([[0, 1], [1, 2]])
    graph = Graph(edge_index, num_nodes=3)
    before = ops.spmm(graph, torch.eye(3))
    edge_index[0, 0] = 2
    with pytest.raises(RuntimeError, match="edge_index was modified in place after the Graph"):
        ops.spmm(graph, torch.eye(3))
    rebuilt = Graph(edge_index, num_nodes=3)
    assert not torch.equal(ops.spmm(rebuilt, torch.eye(3)), before)
    copied = Graph(edge_index.clone(), num_nodes=3)
    edge_index.zero_()  # the copy is the Graph's own
    torch.testing.assert_close(ops.spmm(copied, torch.eye(3)), ops.spmm(Graph(
        torch.tensor([[2, 1], [1, 2]]), num_nodes=3), torch.eye(3)))


def _brute_inverse_sqrt_degrees(edge_index, n):
    """D^-1/2 of A + I (old loops dropped, one per node), from a dense matrix."""
    a = torch.zeros(n, n)
    keep = edge_index[0] != edge_index[1]
    a.index_put_((edge_index[1][keep], edge_index[0][keep]), torch.ones(int(keep.sum())),
                 accumulate=True)
    return (a + torch.eye(n)).sum(1).rsqrt()


@pytest.mark.parametrize("handed_out", ["in_degree", "out_degree", "gcn_norm", "csc"])
def test_a_cached_value_changed_by_its_caller_is_not_served_again(handed_out):
    """Graph methods hand out the tensors they cache. A caller who changed one in place
    (``deg += 1``, ``weight *= 2``) changed it for every later call and every layer on the
    graph: GCNConv then used the scaled weights without a word."""
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    edge_index = random_edge_index(20, 70, seed=11)
    graph = Graph(edge_index, num_nodes=20)
    if handed_out == "gcn_norm":
        looped, weight = graph.gcn_norm()
        weight.mul_(2)
        x = torch.randn(20, 4)
        ours, theirs = gl.GCNConv(4, 3), pyg.GCNConv(4, 3)
        ours.load_state_dict(theirs.state_dict())
        torch.testing.assert_close(ours(x, graph), theirs(x, edge_index))
        looped, weight = graph.gcn_norm()
        d = _brute_inverse_sqrt_degrees(edge_index, 20)
        src, dst = looped.edge_index  # each edge (parallel ones too) weighs 1 / sqrt(d_i d_j)
        torch.testing.assert_close(weight, d[dst] * d[src])
        return
    if handed_out == "csc":
        graph.csc.indices.zero_()
        src, dst = edge_index
        csc = graph.csc
        rows = torch.repeat_interleave(torch.arange(20), csc.indptr.diff())
        assert sorted(zip(rows.tolist(), csc.indices.tolist(), strict=True)) == \
            sorted(zip(src.tolist(), dst.tolist(), strict=True))
        return
    getattr(graph, handed_out)().add_(1)
    ends = edge_index[1] if handed_out == "in_degree" else edge_index[0]
    assert torch.equal(getattr(graph, handed_out)(), torch.bincount(ends, minlength=20))


@pytest.mark.parametrize("conv", ["GCNConv", "ChebConv", "GATConv", "SAGEConv"])
def test_layers_reading_only_cached_structures_refuse_a_changed_edge_index(conv):
    """GCNConv (and the other layers that keep a derived graph in ``Graph.cached``) read
    only that cache on their second call, never ``csr``: after an in-place change of the
    edge list they returned the old graph's outputs without a word."""
    import graphloc.nn as gl
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    graph = Graph(edge_index, num_nodes=4)
    layer = {"GCNConv": lambda: gl.GCNConv(3, 2), "ChebConv": lambda: gl.ChebConv(3, 2, K=2),
             "GATConv": lambda: gl.GATConv(3, 2), "SAGEConv": lambda: gl.SAGEConv(3, 2)}[conv]()
    x = torch.randn(4, 3)
    layer(x, graph)  # builds the cached structures
    edge_index[1, 0] = 3
    with pytest.raises(RuntimeError, match="edge_index was modified in place after the Graph"):
        layer(x, graph)
    with pytest.raises(RuntimeError, match="edge_index was modified in place"):
        graph.cached("anything", lambda: 0)


@pytest.mark.parametrize("largest", [2**40, 2**62, 2**63 - 2])
def test_raw_ids_too_large_for_memory_are_named(largest):
    """Raw ids (OpenStreetMap's reach 10^10) make num_nodes the largest id plus one; the
    row pointer's allocation failed with torch's bare out-of-memory or size-overflow
    message, which named neither the argument nor the fix."""
    with pytest.raises(ValueError, match=rf"num_nodes={largest + 1} needs .* GB for its row "
                                         r"pointer and the sort's counts.*relabel raw ids"):
        Graph(torch.tensor([[0, largest], [1, 0]]))
    with pytest.raises(ValueError, match=r"num_nodes=1000000000000000 needs 1.6e\+07 GB"):
        Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=10**15)


def test_node_counts_whose_sort_outgrows_memory_are_refused(monkeypatch):
    """Building the CSR holds the row pointer and an int64 count per row at once (12 bytes
    per node with int32 ids, 16 past 2^31 nodes). Counting only the row pointer let 2^31
    nodes through on a 24 GiB machine, and the kernel killed the process. Here the machine
    has 1 MB: 83,333 nodes (int32 ids) need 1,000,008 bytes, 83,332 fit."""
    import graphloc.graph as graph_module
    monkeypatch.setattr(graph_module, "_physical_memory", lambda: 1e6)
    edges = torch.tensor([[0, 1], [1, 0]])
    assert Graph(edges, num_nodes=83_332).num_nodes == 83_332
    with pytest.raises(ValueError, match=r"num_nodes=83333 needs 0.001 GB.*\(0.001 GB\)"):
        Graph(edges, num_nodes=83_333)


def _edges(graph, labels):
    """The graph's edges as (label, label) pairs, row r being node labels[r]."""
    return sorted((labels[u], labels[v]) for u, v in graph.edge_index.t().tolist())


def test_networkx_nodes_labelled_out_of_order_warn_and_nodes_chooses_the_rows():
    """networkx lists an edge list's nodes as they first appear: labels 0..N-1 in another
    order became rows in that order, so node 3 was row 0 and features indexed by label
    described other nodes, without a word."""
    g = nx.DiGraph([(3, 1), (1, 0), (0, 2), (2, 3)])  # g.nodes: [3, 1, 0, 2]
    expected = sorted(g.edges)
    with pytest.warns(UserWarning, match=r"row 0 is node 3\): rows follow g.nodes. Pass "
                                         r"nodes=sorted\(g.nodes\)") as record:
        graph = Graph.from_networkx(g)
    assert record[0].filename == __file__
    assert _edges(graph, list(g.nodes)) == expected  # rows in g.nodes order
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_label = Graph.from_networkx(g, nodes=sorted(g.nodes))
        assert sorted(map(tuple, by_label.edge_index.t().tolist())) == expected  # row i: node i
        Graph.from_networkx(nx.path_graph(4))  # labels in order: quiet
        Graph.from_networkx(nx.relabel_nodes(g, {0: "a", 1: "b", 2: "c", 3: "d"}))  # not ids
    with pytest.raises(ValueError, match="nodes must list each of the graph's 4 nodes once; "
                                         "it lacks node 2"):
        Graph.from_networkx(g, nodes=[0, 1, 3, 3])
    with pytest.raises(ValueError, match="it holds 7, not a node of the graph"):
        Graph.from_networkx(g, nodes=[0, 1, 2, 3, 7])


def test_networkx_whole_number_attributes_float32_rounds_are_said():
    """Edge attributes become float32 edge_attr: a timestamp of 1700000123 became 1700000128
    without a word. A column of whole numbers that float32 does not hold is said, naming the
    attribute and the rounding (numpy's float32, the oracle); fractions and small whole
    numbers are quiet, and the values are the float32 roundings either way."""
    import warnings

    import numpy as np
    g = nx.DiGraph()
    g.add_edge(0, 1, time=1_700_000_123, count=3, share=0.1)
    g.add_edge(1, 2, time=1_700_000_000, count=16_777_216, share=0.7)
    with pytest.warns(UserWarning, match=r"edge attribute 'time' holds whole numbers that "
                                         r"float32 edge_attr rounds \(1700000123 becomes "
                                         rf"{int(np.float32(1_700_000_123))}\)") as record:
        graph = Graph.from_networkx(g, edge_attrs=["time", "count", "share"])
    assert len(record) == 1 and record[0].filename == __file__
    expected = np.array([[d[k] for k in ("time", "count", "share")]
                         for _, _, d in g.edges(data=True)], dtype=np.float32)
    torch.testing.assert_close(graph.edge_attr, torch.from_numpy(expected), rtol=0, atol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Graph.from_networkx(g, edge_attrs=["count", "share"])


def test_undirected_and_structure_match_pyg():
    edge_index = random_edge_index(20, 60, seed=21)
    attr = torch.randn(edge_index.size(1), 3)
    g = Graph(edge_index, num_nodes=20, edge_attr=attr)
    assert not g.is_undirected
    for reduce in ("sum", "mean", "max", "min"):
        und = g.to_undirected(reduce=reduce)
        ref_index, ref_attr = pyg_utils.to_undirected(edge_index, attr, 20, reduce=reduce)
        assert und.is_undirected
        assert _same_edge_set(und.edge_index, und.edge_attr, ref_index, ref_attr)
    co = g.coalesce()
    ref_index, ref_attr = pyg_utils.coalesce(edge_index, attr, 20)
    assert _same_edge_set(co.edge_index, co.edge_attr, ref_index, ref_attr)
    no_loops = g.remove_self_loops()
    assert _same_edge_set(no_loops.edge_index, no_loops.edge_attr,
                          *pyg_utils.remove_self_loops(edge_index, attr))
    loops = g.add_self_loops(fill_value=2.0)
    ref_index, ref_attr = pyg_utils.add_self_loops(edge_index, attr, fill_value=2.0, num_nodes=20)
    assert torch.equal(loops.edge_index, ref_index) and torch.equal(loops.edge_attr, ref_attr)


def _same_edge_set(index_a, attr_a, index_b, attr_b):
    order_a = torch.argsort(index_a[0] * 10_000 + index_a[1])
    order_b = torch.argsort(index_b[0] * 10_000 + index_b[1])
    same_index = torch.equal(index_a[:, order_a], index_b[:, order_b])
    return same_index and torch.allclose(attr_a[order_a], attr_b[order_b])


def test_edge_groups_mark_parallel_edges():
    g = Graph(torch.tensor([[0, 1, 0, 2, 0], [1, 2, 1, 1, 1]]))
    group, count = g.edge_groups()
    assert count == 3
    assert group[0] == group[2] == group[4]
    assert len({int(group[1]), int(group[3]), int(group[0])}) == 3


@pytest.mark.parametrize("improved", [False, True])
def test_gcn_norm_matches_pyg(improved):
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    edge_index = random_edge_index(25, 90, seed=22)  # has self-loops and parallel edges
    g = Graph(edge_index, num_nodes=25)
    loops, weight = g.gcn_norm(improved=improved)
    # PyG ignores `improved` when edge_weight is None (its new loops get weight 1); with
    # explicit unit weights it adds A + 2I as the paper says, which is what we do always.
    ones = torch.ones(edge_index.size(1))
    ref_index, ref_weight = gcn_norm(edge_index, ones, 25, improved=improved)

    def dense(index, values):  # the operator, whatever zero-weight edges the list keeps
        return torch.zeros(25, 25).index_put_((index[1], index[0]), values, accumulate=True)
    torch.testing.assert_close(dense(loops.edge_index, weight), dense(ref_index, ref_weight))
    duplicated = torch.cat([edge_index, torch.tensor([[3, 3], [3, 3]])], 1)  # two more loops
    w = torch.rand(duplicated.size(1))  # PyG keeps only the last loop of a node
    ours = Graph(duplicated, num_nodes=25).gcn_norm(improved=improved, edge_weight=w)
    torch.testing.assert_close(dense(ours[0].edge_index, ours[1]),
                               dense(*gcn_norm(duplicated, w, 25, improved=improved)))
    assert g.gcn_norm(improved=improved)[1] is weight  # cached
    w = torch.rand(edge_index.size(1))
    ref_index, ref_weight = gcn_norm(edge_index, w, 25, improved=improved,
                                     add_self_loops=False)
    torch.testing.assert_close(g.gcn_norm(False, improved, w)[1], ref_weight)


@pytest.mark.parametrize("method", ["rcm", "degree"])
def test_reorder_is_a_relabelling(method):
    edge_index = random_edge_index(50, 200, seed=23)
    g = Graph(edge_index, num_nodes=50)
    reordered, perm = g.reorder(method)
    assert torch.equal(torch.sort(perm).values, torch.arange(50))
    x = torch.randn(50, 4)
    # Aggregating in the new numbering, then reading back, equals the original result.
    torch.testing.assert_close(ops.spmm(reordered, x[perm]), ops.spmm(g, x)[perm])
    if method == "degree":
        assert (reordered.in_degree()[:-1] >= reordered.in_degree()[1:]).all()


def test_rcm_shrinks_the_bandwidth():
    side = 30  # a grid in random order
    grid = Graph.from_networkx(nx.convert_node_labels_to_integers(nx.grid_2d_graph(side, side)))
    new_id = torch.randperm(side * side)
    g = Graph(new_id[grid.edge_index], num_nodes=side * side)
    bandwidth = lambda gr: int((gr.edge_index[0] - gr.edge_index[1]).abs().max())  # noqa: E731
    assert bandwidth(g.reorder("rcm")[0]) < bandwidth(g) / 5


def test_conversions():
    nxg = nx.Graph()
    nxg.add_edge("a", "b", length=2.0)
    nxg.add_edge("b", "c", length=3.0)
    g = Graph.from_networkx(nxg, edge_attrs=["length"])
    assert g.num_nodes == 3 and g.num_edges == 4 and g.is_undirected
    assert sorted(g.edge_attr.view(-1).tolist()) == [2.0, 2.0, 3.0, 3.0]
    a = sp.random(10, 10, density=0.3, format="csr", random_state=0)
    gs = Graph.from_scipy(a)
    dense = torch.zeros(10, 10, dtype=torch.float64)
    dense[gs.edge_index[0], gs.edge_index[1]] = gs.edge_attr
    torch.testing.assert_close(dense, torch.from_numpy(a.toarray()))
    data = g.to_pyg()
    back = Graph.from_pyg(data)
    assert torch.equal(back.edge_index, g.edge_index) and back.num_nodes == 3
    with pytest.raises(ValueError, match="square"):
        Graph.from_scipy(sp.random(3, 4, density=0.5))
    with pytest.raises(ValueError, match="no nodes"):
        Graph.from_networkx(nx.Graph())


def test_dst_prefix_holds_the_in_edges_of_the_first_destinations():
    edge_index = random_edge_index(30, 90, seed=45)
    graph = Graph(edge_index, num_nodes=30)
    weight = torch.rand(graph.num_edges)
    prefix = graph.dst_prefix(12, 30)
    assert prefix.is_bipartite and (prefix.num_src_nodes, prefix.num_nodes) == (30, 12)
    into = edge_index[1] < 12
    expected = sorted(zip(*edge_index[:, into].tolist(), weight[into].tolist(), strict=True))
    got = sorted(zip(*prefix.edge_index.tolist(),
                     graph.to_csr_order(weight)[:prefix.num_edges].tolist(), strict=True))
    assert got == expected
    sources = int(edge_index[0][into].max()) + 1
    with pytest.raises(ValueError, match=f"holds {sources - 1} at column"):
        graph.dst_prefix(12, sources - 1)  # a source beyond the allowed ones
    for bad in ((0, 30), (31, 30), (12, 31)):
        with pytest.raises(ValueError, match=r"dst_prefix\(.*\) is out of range"):
            graph.dst_prefix(*bad)


def test_node_counts_must_be_integers():
    edges = torch.tensor([[0, 1], [1, 2]])
    for bad in (3.9, True, "3", torch.tensor(3.0)):
        with pytest.raises(TypeError, match="num_nodes must be an integer"):
            Graph(edges, num_nodes=bad)
    assert Graph(edges, num_nodes=torch.tensor(4)).num_nodes == 4
    import numpy as np
    assert Graph(edges, num_nodes=np.int64(3)).num_nodes == 3
    with pytest.raises(TypeError, match="size must be an integer"):
        Graph.bipartite(edges, (3.5, 3))
    with pytest.raises(TypeError, match="edge_weight must be a floating-point tensor, got "
                                        "torch.int64"):
        Graph(edges, num_nodes=3).gcn_norm(edge_weight=torch.ones(2, dtype=torch.long))


def test_networkx_edge_attributes_that_are_not_numbers_name_the_edge():
    g = nx.Graph([(0, 1, {"w": 2.0}), (1, 2, {"w": "heavy"})])
    with pytest.raises(ValueError, match=r"edge 1 -> 2 has a non-numeric 'w': 'heavy'"):
        Graph.from_networkx(g, edge_attrs=["w"])
    with pytest.raises(ValueError, match=r"edge 0 -> 1 has no attribute 'length'"):
        Graph.from_networkx(g, edge_attrs=["length"])


def _inference_made_graphs(edge_index, n, edge_attr):
    """The ways a graph can come out of ``torch.inference_mode``: built there from inputs
    made there, built there from normal inputs, built outside from inputs made there, and
    derived there (loops added) from a normal graph."""
    with torch.inference_mode():
        inner_edges, inner_attr = edge_index.clone(), edge_attr.clone()
        built_inside = Graph(inner_edges, num_nodes=n, edge_attr=inner_attr)
        built_from_normal = Graph(edge_index, num_nodes=n, edge_attr=edge_attr)
    built_outside = Graph(inner_edges, num_nodes=n, edge_attr=inner_attr)
    plain = Graph(edge_index, num_nodes=n, edge_attr=edge_attr)
    with torch.inference_mode():
        derived = plain.add_self_loops()
    return {"built inside": built_inside, "built inside from normal inputs": built_from_normal,
            "built from inference inputs": built_outside}, derived


@pytest.mark.parametrize("name", sorted(CONV_LAYERS))
def test_graphs_and_caches_made_under_inference_mode_serve_training(name):
    """A graph built, or first evaluated, under torch.inference_mode before its first
    training step: its arrays and the caches the layers build on it (normalised weights,
    transposes, loops) hold normal tensors, so the backward runs, with the gradients it has
    on a fresh graph. (Inference tensors cannot be saved for backward: SAGEConv's backward
    failed on a graph built under inference mode.)"""
    edge_index, n = parity_graph(14)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64)
    conv = CONV_LAYERS[name]().double()
    x = torch.randn(n, 5, dtype=torch.float64)
    graphs, _ = _inference_made_graphs(edge_index, n, edge_attr)
    evaluated = Graph(edge_index, num_nodes=n, edge_attr=edge_attr)
    with torch.inference_mode():
        conv(x, evaluated)
        conv(x, graphs["built inside"])
    graphs["evaluated inside"] = evaluated

    def gradients(graph):
        xg = x.clone().requires_grad_()
        out = conv(xg, graph)
        return torch.autograd.grad(out, [xg, *conv.parameters()], torch.ones_like(out))

    fresh = gradients(Graph(edge_index, num_nodes=n, edge_attr=edge_attr))
    for how, graph in graphs.items():
        for ours, expected in zip(gradients(graph), fresh, strict=True):
            torch.testing.assert_close(ours, expected, msg=lambda m, how=how: f"{how}: {m}")


def test_a_graph_derived_under_inference_mode_holds_normal_tensors():
    edge_index, n = parity_graph(14)
    graphs, derived = _inference_made_graphs(edge_index, n, torch.randn(edge_index.size(1), 3))
    for graph in (*graphs.values(), derived):
        tensors = (graph.edge_index, graph.edge_attr, graph.csr.indptr, graph.csr.indices)
        assert not any(t.is_inference() for t in tensors)
    loops = derived.edge_index[:, derived.edge_index[0] == derived.edge_index[1]]
    assert set(loops[0].tolist()) == set(range(n))


def test_a_transposed_edge_index_gives_contiguous_csr_arrays():
    """A row of ``edges.t()`` is a strided view, and with the edges already sorted by
    destination the CSR kept it as its indices. The kernels read index arrays through their
    data pointer and so refuse a strided one; the graph hands them contiguous arrays, and
    every sparse op, forward and backward, agrees with the contiguous graph's."""
    edges = torch.tensor([[1, 0], [2, 0], [0, 1], [2, 1], [0, 2], [1, 2], [1, 3]])
    strided, plain = Graph(edges.t(), num_nodes=4), Graph(edges.t().contiguous(), num_nodes=4)
    assert strided.csr.indices.is_contiguous() and strided.csr.indptr.is_contiguous()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    s = torch.randn(7, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    half = torch.randn(4, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    for op in (lambda g: ops.spmm(g, x), lambda g: ops.spmm(g, x, reduce="max"),
               lambda g: ops.sddmm(g, x, x), lambda g: ops.segment_softmax(g, s),
               lambda g: ops.segment_attention(g, s, x),
               lambda g: ops.additive_attention(g, half, half, x)):
        outs = [op(g) for g in (strided, plain)]
        torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
        grads = [torch.autograd.grad(out.sum(), (x, s, half), allow_unused=True) for out in outs]
        for a, b in zip(*grads, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("bipartite", [False, True])
def test_in_csr_order_lists_the_edges_sorted_by_destination(bipartite):
    """The same edges (and edge features) stably sorted by destination, the same CSR
    arrays with no permutation, and the transpose shared once built; a graph listed so
    already is its own."""
    edge_index = random_edge_index(15, 70, seed=33)
    attr = torch.randn(edge_index.size(1), 2)
    graph = Graph.bipartite(edge_index, (15, 15), attr) if bipartite \
        else Graph(edge_index, num_nodes=15, edge_attr=attr)
    _ = graph.csc
    ordered = graph.in_csr_order()
    order = torch.sort(edge_index[1], stable=True).indices
    assert torch.equal(ordered.edge_index, edge_index[:, order])
    assert torch.equal(ordered.edge_attr, attr[order])
    assert ordered.csr.perm is None and ordered.is_bipartite == bipartite
    assert ordered.csr.indices is graph.csr.indices and ordered.csc is graph.csc
    assert graph.in_csr_order() is ordered and ordered.in_csr_order() is ordered
    values = torch.randn(edge_index.size(1), 3)
    assert torch.equal(ordered.to_csr_order(graph.to_csr_order(values)),
                       graph.to_csr_order(values))
    x = torch.randn(15, 3)
    torch.testing.assert_close(ops.spmm(ordered, x, graph.to_csr_order(values[:, 0])),
                               ops.spmm(graph, x, values[:, 0]))


def test_in_csr_order_of_a_graph_without_edges_or_already_sorted():
    empty = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=4)
    assert empty.in_csr_order().num_edges == 0
    assert torch.equal(ops.spmm(empty.in_csr_order(), torch.ones(4, 2)), torch.zeros(4, 2))
    sorted_graph = Graph(torch.tensor([[2, 0, 1], [0, 1, 1]]))
    assert sorted_graph.in_csr_order() is sorted_graph


def _dense_of_entries(rows, cols, values, shape):
    """The matrix that a list of entries describes, duplicates added (torch's reading)."""
    return torch.zeros(*shape, *values.shape[1:], dtype=values.dtype).index_put(
        (rows, cols), values, accumulate=True)


@pytest.mark.parametrize("value_shape", [(), (3,)])
@pytest.mark.parametrize("kind", ["coo", "coo flagged coalesced", "csr", "csc"])
def test_adjacency_entries_lists_each_matrix_position_once(kind, value_shape):
    """Duplicated positions (and positions out of order) come back once, values summed,
    whatever the layout claims: PyG's GATConv marks a caller's uncoalesced COO coalesced in
    place, and torch does not check a compressed layout's columns."""
    from graphloc.graph import adjacency_entries
    rows = torch.tensor([0, 0, 0, 2, 2, 3, 3, 3])  # row-major, with repeats and disorder
    cols = torch.tensor([3, 1, 3, 0, 0, 4, 2, 4])
    values = torch.rand(8, *value_shape, dtype=torch.float64) + 0.5
    shape = (4, 5)
    full = (*shape, *value_shape)
    if kind.startswith("coo"):
        adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, full)
        if kind == "coo flagged coalesced":
            adj._coalesced_(True)
    elif kind == "csr":
        adj = torch.sparse_csr_tensor(torch.tensor([0, 3, 3, 5, 8]), cols, values, full)
    else:  # the same entries column-major
        order = torch.argsort(cols * 4 + rows, stable=True)
        adj = torch.sparse_csc_tensor(torch.tensor([0, 2, 3, 4, 6, 8]), rows[order],
                                      values[order], full)
        rows, cols, values = rows[order], cols[order], values[order]
    r, c, v = adjacency_entries(adj)
    assert len(set(zip(r.tolist(), c.tolist(), strict=True))) == r.numel() == 5
    torch.testing.assert_close(_dense_of_entries(r, c, v, shape),
                               _dense_of_entries(rows, cols, values, shape))


def test_adjacency_entries_keep_the_values_gradient():
    """Learnable values of a COO adjacency, repeated entries included, get the gradient of
    the matrix they describe (a first version read them with _values(), which autograd
    does not follow: no gradient at all)."""
    from graphloc.graph import adjacency_entries
    rows, cols = torch.tensor([0, 0, 2, 2, 3]), torch.tensor([1, 1, 0, 3, 3])
    values = (torch.rand(5, dtype=torch.float64) + 0.5).requires_grad_()
    adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, (4, 4))
    weight = torch.randn(4, 4, dtype=torch.float64)
    r, c, v = adjacency_entries(adj)
    got, = torch.autograd.grad((_dense_of_entries(r, c, v, (4, 4)) * weight).sum(), values)
    want, = torch.autograd.grad(
        (_dense_of_entries(rows, cols, values, (4, 4)) * weight).sum(), values)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc])
def test_adjacency_entries_keep_the_order_of_unique_entries(layout):
    edge_index = torch.unique(random_edge_index(20, 60, seed=3), dim=1)
    values = torch.rand(edge_index.size(1))
    adj = torch.sparse_coo_tensor(edge_index, values, (20, 20)).coalesce()
    adj = {torch.sparse_coo: adj, torch.sparse_csr: adj.to_sparse_csr(),
           torch.sparse_csc: adj.to_sparse_csc()}[layout]
    from graphloc.graph import adjacency_entries
    r, c, v = adjacency_entries(adj)
    stored = adj.values()
    assert torch.equal(v, stored)  # storage order, no copy through a coalesce
    torch.testing.assert_close(_dense_of_entries(r, c, v, (20, 20)), adj.to_dense())


def _unique_entries_out_of_order(layout):
    """A 6 x 7 matrix of unique entries stored out of row-major order, and those entries
    (rows, cols, values) in storage order."""
    rows = torch.tensor([3, 0, 5, 0, 2, 3, 1])
    cols = torch.tensor([1, 4, 0, 2, 6, 0, 3])
    values = torch.rand(7, dtype=torch.float64) + 0.5
    if layout == "coo":
        adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, (6, 7))
    elif layout == "coo flagged coalesced":
        adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, (6, 7))._coalesced_(True)
    else:  # CSR whose columns are out of order within rows (torch checks no order)
        order = torch.argsort(rows, stable=True)
        rows, cols, values = rows[order], cols[order], values[order]
        adj = torch.sparse_csr_tensor(torch.tensor([0, 2, 3, 4, 6, 6, 7]), cols, values, (6, 7))
    return adj, (rows, cols, values)


@pytest.mark.parametrize("layout", ["coo", "coo flagged coalesced", "csr"])
def test_adjacency_entries_keep_the_storage_order_of_unique_entries_out_of_order(layout):
    """A caller's per-edge tensors (a conv's edge_attr) follow the adjacency's storage
    order: unique entries out of order were sorted (an uncoalesced COO by its coalesce),
    so edge_attr's rows met other edges."""
    from graphloc.graph import adjacency_entries
    adj, (rows, cols, values) = _unique_entries_out_of_order(layout)
    r, c, v = adjacency_entries(adj)
    assert torch.equal(r, rows) and torch.equal(c, cols)
    assert torch.equal(v, values)
    torch.testing.assert_close(_dense_of_entries(r, c, v, (6, 7)), adj.to_dense())


def test_adjacency_entries_out_of_order_keep_the_values_gradient():
    from graphloc.graph import adjacency_entries
    _, (rows, cols, values) = _unique_entries_out_of_order("coo")
    values.requires_grad_()
    adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), values * 2, (6, 7))
    weight = torch.randn(7, dtype=torch.float64)
    _, _, v = adjacency_entries(adj)
    got, = torch.autograd.grad((v * weight).sum(), values)
    torch.testing.assert_close(got, 2 * weight)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_norm_in_half_precision_sums_a_hubs_degree_exactly(dtype, weighted):
    """Degrees were summed in the weights' dtype: bfloat16 stops counting at 256, so a node
    with 3,000 in-edges got weights 3.4x too large (float16 stops at 2,048)."""
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.cat([torch.randint(0, 50, (2, 400), generator=gen),
                            torch.stack([torch.randint(0, 50, (3000,), generator=gen),
                                         torch.zeros(3000, dtype=torch.long)])], dim=1)
    graph = Graph(edge_index, num_nodes=50)
    weight = (torch.rand(edge_index.size(1), generator=gen) + 0.5).to(dtype) if weighted \
        else None
    _, low = graph.gcn_norm(edge_weight=weight, dtype=dtype)
    _, exact = graph.gcn_norm(edge_weight=None if weight is None else weight.double(),
                              dtype=torch.float64)
    assert low.dtype == dtype
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(low.double(), exact, rtol=2 * eps, atol=0)


def test_graph_of_edges_is_built_once_per_unchanged_tensor():
    """A layer called as PyG's (conv(x, edge_index)) rebuilt, re-validated and re-normalised
    its graph at every call; the Graph is now reused, but only for the same tensor, unchanged
    since, with the same node counts and flow."""
    from graphloc.graph import graph_of_edges
    edge_index = random_edge_index(30, 90, seed=5)
    first = graph_of_edges(edge_index, 30)
    assert graph_of_edges(edge_index, 30) is first
    assert torch.equal(first.edge_index, edge_index) and first.edge_index is not edge_index
    other = edge_index.clone()
    other[1, 3] = (other[1, 3] + 1) % 30
    assert graph_of_edges(other, 30) is not first  # other edges
    other_count = graph_of_edges(edge_index, 31)
    assert other_count is not first and other_count.num_nodes == 31
    bipartite = graph_of_edges(edge_index, 30, 30)
    assert bipartite.is_bipartite and bipartite is not first
    flipped = graph_of_edges(edge_index, 30, flip=True)
    assert torch.equal(flipped.edge_index, edge_index.flip(0))
    edge_index[0, 0] = (edge_index[0, 0] + 1) % 30  # in place: a new Graph of the new edges
    changed = graph_of_edges(edge_index, 30)
    assert changed is not first and torch.equal(changed.edge_index, edge_index)
    swapped = edge_index.clone()
    swapped.data = random_edge_index(30, 90, seed=6)  # .data swaps storage, not the version
    assert torch.equal(graph_of_edges(swapped, 30).edge_index, swapped)
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds 40"):
        graph_of_edges(torch.tensor([[0, 1], [2, 40]]), 30)


def test_graph_of_edges_reuses_the_graph_of_an_equal_tensor():
    """A model that makes its edges anew at every call (PyG's DirGNNConv flips edge_index
    in each forward; add_self_loops or to_undirected inside a forward) validated, sorted
    and normalised a new Graph each time; an equal tensor now gets the Graph built once,
    and a change to either tensor afterwards still builds from its own values."""
    from graphloc.graph import graph_of_edges
    edge_index = random_edge_index(30, 90, seed=11)
    first = graph_of_edges(edge_index.flip(0), 30)
    again = edge_index.flip(0)
    assert graph_of_edges(again, 30) is first
    assert graph_of_edges(edge_index.flip(0), 31) is not first  # another node count
    assert graph_of_edges(edge_index.flip(0), 30, flip=True) is not first  # another flow
    assert graph_of_edges(again.t().contiguous().t(), 30) is first  # strides aside
    again[0, 0] = (again[0, 0] + 1) % 30
    changed = graph_of_edges(again, 30)
    assert changed is not first and torch.equal(changed.edge_index, again)
    assert torch.equal(first.edge_index, edge_index.flip(0))


def test_the_graphs_of_dead_tensors_kept_are_few_and_small():
    """Entries outlive their tensor for an equal one to come, but only the last few, and
    none of a graph above the size limit (a dropped large graph is released)."""
    import gc

    from graphloc.graph import Graph, _EdgeGraphs
    cache = _EdgeGraphs(capacity=8, kept_after_death=2, largest_kept=200)
    graphs = [cache.get(random_edge_index(20, 60, seed=s), (20,),
                        lambda e: Graph(e, num_nodes=20)) for s in range(4)]
    gc.collect()
    assert [entry[2] for entry in cache.dead.values()] == graphs[2:]
    big = random_edge_index(20, 150, seed=9)  # 300 values: above the limit
    cache.get(big, (20,), lambda e: Graph(e, num_nodes=20))
    del big
    gc.collect()
    assert [entry[2] for entry in cache.dead.values()] == graphs[2:] and not cache.entries


def test_dir_gnn_conv_builds_its_flipped_graph_once(monkeypatch):
    import torch_geometric.nn as pyg

    import graphloc.graph as graph_module
    import graphloc.nn as gl
    edge_index = random_edge_index(40, 160, seed=12)
    x = torch.randn(40, 5)
    theirs = pyg.DirGNNConv(pyg.GCNConv(5, 4))
    ours = gl.from_pyg(theirs, example=(x, edge_index))
    builds = []
    original = graph_module.Graph._init
    monkeypatch.setattr(graph_module.Graph, "_init",
                        lambda self, *a, **k: builds.append(1) or original(self, *a, **k))
    for _ in range(3):
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    assert len(builds) == 0  # both directions' Graphs came from the conversion's probe


@pytest.mark.parametrize("write", ["data", "numpy"])
def test_graph_of_edges_sees_writes_that_bypass_the_version_counter(write):
    """A write through ``.data`` or a NumPy view changes the edges but not the tensor's
    version, so the cache reused the old Graph: the conv returned the old graph's output,
    where PyG's reads the tensor afresh at every call."""
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    edge_index = random_edge_index(30, 90, seed=10)
    x = torch.randn(30, 5)
    ours, theirs = gl.GCNConv(5, 4), pyg.GCNConv(5, 4)
    ours.load_state_dict(theirs.state_dict())
    ours(x, edge_index)  # cached
    version = edge_index._version
    rows = edge_index.data if write == "data" else edge_index.numpy()
    rows[1, :45] = (rows[1, :45] + 7) % 30
    assert edge_index._version == version  # the stamp alone cannot see it
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_graph_of_edges_keeps_no_tensor_alive_and_few_entries():
    import gc
    import weakref

    from graphloc.graph import _EDGE_GRAPHS, graph_of_edges
    edge_index = random_edge_index(30, 90, seed=7)
    graph_of_edges(edge_index, 30)
    ref = weakref.ref(edge_index)
    del edge_index
    gc.collect()
    assert ref() is None
    kept = [random_edge_index(10, 20, seed=s) for s in range(20)]
    for t in kept:
        graph_of_edges(t, 10)
    assert len(_EDGE_GRAPHS.entries) <= _EDGE_GRAPHS.capacity


def test_graph_of_edges_serves_a_heterogeneous_models_many_relations_from_the_cache():
    """A model reading a graph per relation at every call (30 here, as the larger
    heterogeneous benchmarks have): the second call's graphs are the first call's. With 8
    entries a model of 9 relations rebuilt every graph at every call."""
    from graphloc.graph import graph_of_edges
    relations = [random_edge_index(10, 20, seed=100 + s) for s in range(30)]
    first = [graph_of_edges(t, 10) for t in relations]
    again = [graph_of_edges(t, 10) for t in relations]
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_graph_of_edges_under_inference_mode_builds_each_time():
    from graphloc.graph import graph_of_edges
    with torch.inference_mode():
        edge_index = random_edge_index(30, 90, seed=8)
        graph = graph_of_edges(edge_index, 30)
    assert torch.equal(graph.edge_index, edge_index)
    assert graph_of_edges(edge_index, 30) is not graph


def test_from_pyg_takes_the_adj_t_of_to_sparse_tensor():
    """ToSparseTensor leaves adj_t and no edge_index; Graph.from_pyg raised "edge_index
    must be a torch.Tensor, got NoneType"."""
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    edge_index = torch.unique(random_edge_index(12, 40, seed=9), dim=1)
    weight = torch.rand(edge_index.size(1)) + 0.5
    data = Data(x=torch.randn(12, 3), edge_index=edge_index, edge_weight=weight)
    graph = Graph.from_pyg(T.ToSparseTensor()(data.clone()))
    assert graph.num_nodes == 12
    assert sorted(map(tuple, graph.edge_index.t().tolist())) == \
        sorted(map(tuple, edge_index.t().tolist()))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_edge_indices_build_the_int64_graph_and_name_their_own_values(dtype):
    """An unsigned edge_index builds the graph of its values; an id out of range is named
    as passed. A uint64 id of 2^63 or more was wrapped by int64 and reported as a negative
    id the caller never passed (edge_index[0] holds -9223372036854775803)."""
    edges = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 3]])
    graph = Graph(edges.to(dtype), num_nodes=4)
    assert graph.edge_index.dtype == torch.long
    assert torch.equal(graph.edge_index, Graph(edges, num_nodes=4).edge_index)
    big = torch.iinfo(dtype).max if dtype != torch.uint64 else 2**63 + 5
    bad = torch.tensor([[0, big], [1, 0]], dtype=dtype)
    message = rf"edge_index\[0\] holds {big} at column 1"
    with pytest.raises(ValueError, match=message):
        Graph(bad, num_nodes=3)
    if dtype == torch.uint64:
        with pytest.raises(ValueError, match=message + ", beyond any node count"):
            Graph(bad)
        with pytest.raises(ValueError, match=rf"edge_index\[1\] holds {2**64 - 1} at "
                                             r"column 0"):
            Graph(torch.tensor([[0], [2**64 - 1]], dtype=dtype), num_nodes=3)


def test_edge_index_of_the_wrong_shape_is_refused_with_a_hint_for_pairs():
    """A [E, 2] list of pairs (as np.argwhere or a CSV read gives) is the likeliest wrong
    shape: the error says to transpose it; other shapes get no hint."""
    pairs = torch.tensor([[0, 1], [1, 2], [2, 0]])
    with pytest.raises(ValueError, match=r"got \[3, 2\] \(an \[E, 2\] list of pairs: pass "
                                         r"edge_index.t\(\)\)"):
        Graph(pairs)
    assert Graph(pairs.t()).edge_index.tolist() == [[0, 1, 2], [1, 2, 0]]
    with pytest.raises(ValueError, match=r"must have shape \[2, E\], got \[3, 4\]$"):
        Graph(torch.zeros(3, 4, dtype=torch.long))


@pytest.mark.parametrize("call,match", [
    (lambda g: Graph.from_networkx([(0, 1)]), "from_networkx: g must be a networkx graph"),
    (lambda g: Graph.from_scipy(torch.ones(3, 3)), "from_scipy: a must be a scipy sparse"),
    (lambda g: g.gcn_norm([1]), "gcn_norm: add_self_loops must be True or False"),
    (lambda g: g.gcn_norm(True, "no"), "gcn_norm: improved must be True or False"),
    (lambda g: g.dst_prefix(1, {}), "dst_prefix\\(1, \\{\\}\\) is out of range"),
    (lambda g: g.dst_prefix(torch.tensor([1, 2]), 3), "is out of range"),
])
def test_graph_methods_name_a_bad_argument(call, match):
    """Junk values that failed in AttributeError ("'list' object has no attribute
    'number_of_nodes'"), "unhashable type" or "Boolean value of Tensor ... ambiguous"."""
    graph = Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    with pytest.raises((TypeError, ValueError), match=match):
        call(graph)


def test_by_relation_gives_one_row_per_relation_and_destination_with_edges():
    """Against a brute force: each (relation, node) pair with in-edges is one row, sorted
    by relation then node, and each edge goes from its source to its pair's row."""
    edge_index = random_edge_index(9, 50, seed=11)
    edge_type = torch.randint(0, 5, (edge_index.size(1),),
                              generator=torch.Generator().manual_seed(0))
    graph, rows = Graph(edge_index, num_nodes=9).by_relation(edge_type, 5)
    pairs = sorted({(int(r), int(i)) for r, i in zip(edge_type, edge_index[1], strict=True)})
    assert rows.tolist() == [r * 9 + i for r, i in pairs]
    assert (graph.num_src_nodes, graph.num_nodes) == (9, len(pairs))
    want = [(int(j), pairs.index((int(r), int(i))))
            for j, i, r in zip(edge_index[0], edge_index[1], edge_type, strict=True)]
    assert list(zip(*graph.edge_index.tolist(), strict=True)) == want


def test_by_source_relation_gives_one_row_per_relation_and_source_with_edges():
    """Against a brute force, bipartite: each (relation, source) pair with out-edges is one
    row, sorted by relation then source, and each edge goes from its pair's row to its
    destination, in the graph's edge order."""
    gen = torch.Generator().manual_seed(1)
    edge_index = torch.stack([torch.randint(0, 7, (40,), generator=gen),
                              torch.randint(0, 4, (40,), generator=gen)])
    edge_type = torch.randint(0, 3, (40,), generator=gen)
    graph, rows = Graph.bipartite(edge_index, (7, 4)).by_source_relation(edge_type, 3)
    pairs = sorted({(int(r), int(j)) for r, j in zip(edge_type, edge_index[0], strict=True)})
    assert rows.tolist() == [r * 7 + j for r, j in pairs]
    assert (graph.num_src_nodes, graph.num_nodes) == (len(pairs), 4)
    want = [(pairs.index((int(r), int(j))), int(i))
            for j, i, r in zip(edge_index[0], edge_index[1], edge_type, strict=True)]
    assert list(zip(*graph.edge_index.tolist(), strict=True)) == want
    with pytest.raises(ValueError, match="edge_type holds 3 but dim_size is 3"):
        graph.by_source_relation(torch.full((40,), 3), 3)
    with pytest.raises(TypeError, match=r"edge_type must be an integer tensor \(int8, int16, "
                                        r"int32, int64 or uint8\), got torch.float32"):
        graph.by_source_relation(torch.zeros(40), 3)
    with pytest.raises(ValueError, match=r"one relation per edge, \[40\], got \[39\]"):
        graph.by_source_relation(torch.zeros(39, dtype=torch.long), 3)
    empty, rows = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=3).by_source_relation(
        torch.empty(0, dtype=torch.long), 5)
    assert (empty.num_edges, empty.num_src_nodes, empty.num_nodes, rows.numel()) == (0, 0, 3, 0)


def test_the_relation_graphs_of_one_edge_type_are_built_once_each():
    """A layer reading two kinds (RGATConv: by_relation and by_source_relation), or a model
    whose layers read different kinds, of one edge_type tensor: each is built once, not
    once per call (each kind has its own cache: a cache holds one entry per tensor)."""
    graph = Graph(random_edge_index(9, 50, seed=12), num_nodes=9)
    edge_type = torch.arange(graph.num_edges) % 3
    kinds = (graph.by_relation, graph.by_source_relation, graph.relation_subgraphs)
    first = [kind(edge_type, 3)[0] for kind in kinds]
    assert all(kind(edge_type, 3)[0] is built for kind, built in zip(kinds, first, strict=True))


def test_by_relation_refuses_types_out_of_range_or_of_another_length():
    graph = Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    with pytest.raises(ValueError, match="edge_type holds 5 but dim_size is 5"):
        graph.by_relation(torch.tensor([0, 5, 1]), 5)
    with pytest.raises(ValueError, match=r"one relation per edge, \[3\], got \[2\]"):
        graph.by_relation(torch.zeros(2, dtype=torch.long), 5)
    with pytest.raises(TypeError, match=r"edge_type must be an integer tensor \(int8, int16, "
                                        r"int32, int64 or uint8\), got torch.float32"):
        graph.by_relation(torch.tensor([0.0, 1.0, 1.0]), 5)
    empty, rows = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=3).by_relation(
        torch.empty(0, dtype=torch.long), 5)
    assert (empty.num_edges, empty.num_nodes, rows.numel()) == (0, 0, 0)


def _dense_masked_gcn(edge_index, n, mask, add_self_loops):
    """D^-1/2 (A o M + I) D^-1/2 with the unmasked degrees: each caller edge's entry times
    its mask, the loops (a node's caller loops replaced by one, or added) times 1."""
    adjacency = torch.zeros(n, n, dtype=torch.float64)
    masked = torch.zeros(n, n, dtype=torch.float64)
    for (src, dst), m in zip(edge_index.t().tolist(), mask, strict=True):
        if add_self_loops and src == dst:
            continue
        adjacency[dst, src] += 1
        masked[dst, src] = masked[dst, src] + m
    if add_self_loops:
        adjacency += torch.eye(n, dtype=torch.float64)
        masked = masked + torch.eye(n, dtype=torch.float64)
    inv_sqrt = adjacency.sum(1).pow(-0.5).nan_to_num(posinf=0.0)
    return inv_sqrt[:, None] * masked * inv_sqrt[None, :]


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_gcn_norm_with_an_edge_mask_is_the_dense_masked_normalisation(add_self_loops):
    """Caller loops (one node with two), parallel edges and an isolated node: the masked
    weights and the mask's gradient against the dense formula; a masked call leaves the
    cached unmasked weights as they were."""
    # loops on 1 (twice), 2 and 3; (1, 2) twice; node 5 has no edges
    edge_index = torch.tensor([[0, 1, 2, 2, 3, 1, 1, 4, 1],
                               [1, 2, 2, 0, 3, 2, 1, 0, 1]])
    n = 6
    graph = Graph(edge_index, num_nodes=n)
    plain = graph.gcn_norm(add_self_loops, dtype=torch.float64)[1].clone()
    gen = torch.Generator().manual_seed(0)
    mask = torch.rand(edge_index.size(1), dtype=torch.float64, generator=gen).requires_grad_()
    normed, weight = graph.gcn_norm(add_self_loops, dtype=torch.float64, edge_mask=mask)
    got = torch.zeros(n, n, dtype=torch.float64).index_put(
        (normed.edge_index[1], normed.edge_index[0]), weight, accumulate=True)
    dense_mask = mask.detach().clone().requires_grad_()
    want = _dense_masked_gcn(edge_index, n, dense_mask, add_self_loops)
    torch.testing.assert_close(got, want)
    probe = torch.randn(n, n, dtype=torch.float64, generator=gen)
    (grad,) = torch.autograd.grad((got * probe).sum(), mask)
    (want_grad,) = torch.autograd.grad((want * probe).sum(), dense_mask)
    torch.testing.assert_close(grad, want_grad)
    torch.testing.assert_close(graph.gcn_norm(add_self_loops, dtype=torch.float64)[1], plain)
    with pytest.raises(ValueError, match=r"edge_mask must have shape \[9\], got \[8\]"):
        graph.gcn_norm(add_self_loops, edge_mask=mask[:8])


def test_reversed_flips_every_edge_in_order_and_refuses_a_bipartite_graph():
    graph = Graph(torch.tensor([[0, 0, 2, 3], [1, 1, 0, 3]]), num_nodes=5)
    flipped = graph.reversed()
    assert torch.equal(flipped.edge_index, torch.tensor([[1, 1, 0, 3], [0, 0, 2, 3]]))
    assert flipped.num_nodes == 5 and graph.reversed() is flipped  # cached
    assert torch.equal(flipped.in_degree(), graph.out_degree())
    with pytest.raises(ValueError, match="reversed"):
        Graph.bipartite(torch.tensor([[0], [1]]), (3, 2)).reversed()
