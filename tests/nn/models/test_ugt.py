"""UGT against dense re-implementations of the official code's formulas (networkx BFS
rings, numpy matrix powers, per-edge loops), on small graphs."""

import itertools
import math
import os

import networkx as nx
import numpy as np
import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph
from graphloc.nn import build_model
from graphloc.nn.conv.ugt import UGTLayer
from graphloc.nn.models.ugt import (
    UGT,
    laplacian_eigenvectors,
    pretrain_ugt,
    structural_vectors,
    transitions,
    ugt_inputs,
    virtual_edges,
)


def small_graph(seed=0, n=30, e=70):
    """Directed random edges with loops and duplicates; UGT reads them undirected."""
    return Graph(random_edge_index(n - 4, e, seed=seed), num_nodes=n)


def networkx_of(graph):
    """The official's graph: networkx's simple undirected graph of the edges, self-loops
    kept (PyG's ``to_networkx(data, to_undirected=True)``); networkx's degree counts a
    loop twice."""
    g = nx.Graph()
    g.add_nodes_from(range(graph.num_nodes))
    g.add_edges_from((int(a), int(b)) for a, b in graph.edge_index.t())
    return g


def official_transition(g, n):
    """``getM_logM``'s ``P`` without its rounding: ``1 / degree`` (networkx's) at every
    edge of the node, its loop included."""
    A = nx.to_numpy_array(g, nodelist=range(n))
    assert all(A[v, v] == 1 for v, _ in nx.selfloop_edges(g))  # a loop once in A
    degree = np.array([g.degree(v) for v in range(n)], dtype=np.float64)
    return np.divide(A, degree[:, None], out=np.zeros_like(A), where=degree[:, None] > 0)


def official_structure(g, k):
    """The official getI: degree, then per ring min, max, mean, std of degrees."""
    out = np.zeros((g.number_of_nodes(), 4 * k + 1))
    for v in g.nodes:
        out[v, 0] = g.degree(v)
        dist = nx.single_source_shortest_path_length(g, v, cutoff=k)
        for r in range(1, k + 1):
            ring = [g.degree(u) for u, d in dist.items() if d == r]
            if ring:
                out[v, 4 * r - 3: 4 * r + 1] = [min(ring), max(ring), np.mean(ring),
                                                np.std(ring)]
    return out


@pytest.mark.parametrize("k", [1, 2])
def test_structural_vectors_are_the_official_ones(k):
    graph = small_graph(1)
    simple = ugt_simple(graph)
    np.testing.assert_allclose(structural_vectors(simple, k).numpy(),
                               official_structure(networkx_of(graph), k), atol=1e-12)


def ugt_simple(graph):
    from graphloc.nn.models.ugt import _simple_undirected
    return _simple_undirected(graph)


def test_transitions_are_dense_matrix_powers():
    graph = small_graph(2)
    P = official_transition(networkx_of(graph), graph.num_nodes)
    assert (P.sum(1) < 1 - 1e-9).any()  # rows of nodes with a loop
    simple = ugt_simple(graph)
    src, dst = simple.edge_index
    probabilities = transitions(simple, src, dst)
    for t in range(8):
        Pt = np.linalg.matrix_power(P, t + 1)
        np.testing.assert_allclose(probabilities[:, t].numpy(), Pt[src, dst], atol=1e-12)


def test_attention_graph_is_every_pair_within_k_hops_plus_virtual_edges():
    graph = small_graph(3)
    for k in (1, 2):
        inputs = ugt_inputs(graph, k_hop=k, virtual_ratio=0.1)
        g = networkx_of(graph)
        g.add_edges_from(inputs.virtual.t().tolist())
        expected = {(u, v) for v in g.nodes for u, d in
                    nx.single_source_shortest_path_length(g, v, cutoff=k).items() if d > 0}
        got = set(map(tuple, inputs.attention.edge_index.t().tolist()))
        assert got == expected
        dst = inputs.attention.edge_index[1]
        assert bool((dst[1:] >= dst[:-1]).all())  # sorted by destination


def test_virtual_edges_are_the_most_similar_non_adjacent_pairs():
    """With a window covering every node, the candidates are all pairs: the result must be
    the brute-force top pairs by the official similarity (ties by node ids)."""
    graph = small_graph(4, n=24, e=40)
    simple = ugt_simple(graph)
    structure = structural_vectors(simple, 1)
    count = 9
    chosen = virtual_edges(simple, structure, count, window=100)
    adjacent = set(map(tuple, simple.edge_index.t().tolist()))
    scored = []
    for i, j in itertools.combinations(range(graph.num_nodes), 2):
        if (i, j) not in adjacent:
            score = float((1 / ((structure[i] - structure[j]) ** 2 + 0.5)).sum())
            scored.append((-score, i, j))
    best = sorted(scored)[:count]
    assert chosen.t().tolist() == [[i, j] for _, i, j in best]


def test_laplacian_eigenvectors_dense_and_sparse():
    for n in (40, 2600):  # the dense solver, then shift-invert
        ring = torch.arange(n)
        graph = Graph(torch.stack([ring, (ring + 1) % n]), num_nodes=n)
        simple = ugt_simple(graph)
        vectors = laplacian_eigenvectors(simple, 4).numpy()
        A = nx.to_scipy_sparse_array(networkx_of(graph), nodelist=range(n)).toarray()
        d = A.sum(1)
        L = np.eye(n) - A / np.sqrt(np.outer(d, d))
        expected = np.sort(np.linalg.eigvalsh(L))[1:5]
        for c in range(4):
            v = vectors[:, c]
            lam = v @ L @ v / (v @ v)
            assert lam == pytest.approx(expected[c], abs=1e-6)
            np.testing.assert_allclose(L @ v, lam * v, atol=1e-6)
    graph = small_graph(5)  # loops and isolated nodes: DGL's lap_pe on to_bidirected's
    simple = ugt_simple(graph)  # graph, a loop once in A and in the in-degrees (clipped at 1)
    A = nx.to_numpy_array(networkx_of(graph), nodelist=range(graph.num_nodes))
    inv_sqrt = A.sum(1).clip(1) ** -0.5
    L = np.eye(graph.num_nodes) - inv_sqrt[:, None] * A * inv_sqrt[None, :]
    expected = np.sort(np.linalg.eigvalsh(L))[1:5]
    for c, v in enumerate(laplacian_eigenvectors(simple, 4).numpy().T):
        assert v @ L @ v / (v @ v) == pytest.approx(expected[c], abs=1e-9)
        np.testing.assert_allclose(L @ v, expected[c] * v, atol=1e-9)
    tiny = laplacian_eigenvectors(ugt_simple(Graph(torch.tensor([[0], [1]]), 3)), 10)
    assert tiny.shape == (3, 10) and tiny[:, 2:].abs().max() == 0  # zero-padded


def official_attention(layer, h, graph, d, m):
    """The official propagate_attention, edge by edge (per-channel biases summed, clamped
    exp, / 2, weighted mean with 1e-6)."""
    H, C = layer.heads, layer.out_channels // layer.heads
    q, k, v = (lin(h).view(-1, H, C) for lin in (layer.Q, layer.K, layer.V))
    pd, pm = layer.proj_d(d).view(-1, H, C), layer.proj_m(m).view(-1, H, C)
    wv = torch.zeros(h.size(0), H, C, dtype=h.dtype)
    z = torch.zeros(h.size(0), H, 1, dtype=h.dtype)
    for e, (j, i) in enumerate(graph.edge_index.t().tolist()):
        qk = (k[j] * q[i]).sum(-1, keepdim=True) / math.sqrt(C)  # [H, 1]
        score = torch.exp((qk + pd[e] + pm[e]).sum(-1, keepdim=True).clamp(-10, 10)) / 2
        wv[i] += v[j] * score
        z[i] += score
    return (wv / (z + 1e-6)).view(-1, H * C)


def test_layer_attention_is_the_official_formula():
    torch.manual_seed(0)
    inputs = ugt_inputs(small_graph(5))
    layer = UGTLayer(8, 8, heads=2, edge_channels=6, structure_channels=5).double()
    n, e = inputs.attention.num_nodes, inputs.attention.num_edges
    h = torch.randn(n, 8, dtype=torch.float64)
    d, m = torch.randn(e, 6, dtype=torch.float64), torch.randn(e, 6, dtype=torch.float64)
    torch.testing.assert_close(layer.aggregate(h, inputs.attention, d, m),
                               official_attention(layer, h, inputs.attention, d, m))
    layer.attention = "softmax"  # the fix: q.k / sqrt(C) plus biases, a true softmax
    H, C = 2, 4
    q, k, v = (lin(h).view(-1, H, C) for lin in (layer.Q, layer.K, layer.V))
    bias = layer.proj_d(d).view(-1, H, C).sum(-1) + layer.proj_m(m).view(-1, H, C).sum(-1)
    src, dst = inputs.attention.edge_index
    score = (k[src] * q[dst]).sum(-1) / math.sqrt(C) + bias
    expected = torch.zeros(n, H, C, dtype=torch.float64)
    for i in range(n):
        rows = dst == i
        if rows.any():
            weight = torch.softmax(score[rows], 0)
            expected[i] = (weight.unsqueeze(-1) * v[src[rows]]).sum(0)
    torch.testing.assert_close(layer.aggregate(h, inputs.attention, d, m),
                               expected.view(n, -1))


def test_model_trains_pretrains_and_is_registered():
    torch.manual_seed(0)
    graph = small_graph(6)
    x = torch.randn(graph.num_nodes, 7)
    model = build_model("ugt", 7, 16, 3, 2)
    assert isinstance(model, UGT) and model.graphloc_global
    assert model(x, graph).shape == (graph.num_nodes, 3)
    losses = pretrain_ugt(model, x, graph, epochs=30, lr=1e-2)
    assert losses[-1] < losses[0] and not model.training


def dense_pretraining_structure_loss(h, graph, steps):
    """The official ``train``'s structure term (``gnnutils_10.py``: ``cosinSim`` over all
    N^2 pairs, ``util.py``'s ``GetProbTranMat`` of the powers of the dense ``P``, without
    its rounding of 1/deg), in torch so that it has gradients."""
    n = graph.num_nodes
    P = official_transition(networkx_of(graph), n)
    norm = h.norm(dim=1)
    cosine = (h @ h.t()) / torch.outer(norm, norm)
    power, loss = np.identity(n), 0
    for _ in range(steps):
        power = power @ P
        with np.errstate(divide="ignore", invalid="ignore"):
            target = np.log(power / power.sum(0, keepdims=True)) - np.log(1.0 / n)
        target[target < 0] = 0
        target[np.isnan(target)] = 0
        loss = loss + ((cosine - torch.from_numpy(target)) ** 2).sum()
    return loss / (steps * n * n)


@pytest.mark.parametrize("steps", [1, 2, 6, 8])
@pytest.mark.parametrize("seed", [0, 3])
def test_pretraining_loss_is_the_official_one_over_all_pairs(steps, seed):
    """The structure term over every pair (far pairs pull their cosine to 0, the diagonal
    counts), its value and its gradient; the reconstruction term is PyTorch's MSE."""
    torch.manual_seed(seed)
    graph = small_graph(seed)  # isolated nodes, loops and repeated edges
    model = UGT(7, 16, 3, heads=4, k_hop=1 + seed % 2).double().eval()
    x = torch.randn(graph.num_nodes, 7, dtype=torch.float64, requires_grad=True)
    structure, reconstruction = model.pretrain_losses(x, graph, steps)
    h, _ = model.embed(x, graph)
    expected = dense_pretraining_structure_loss(h, graph, steps)
    torch.testing.assert_close(structure, expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(reconstruction, ((model.MLP_layer_x(h) - x) ** 2).mean())
    ours = torch.autograd.grad(structure, x)[0]
    torch.testing.assert_close(ours, torch.autograd.grad(expected, x)[0], rtol=1e-8,
                               atol=1e-12)
    loss = model.pretrain_loss(x, graph, steps, alpha=0.3, beta=0.7)
    torch.testing.assert_close(loss, 0.3 * expected + 0.7 * reconstruction)


def test_pretraining_loss_in_float32_stays_close_to_the_float64_value():
    torch.manual_seed(1)
    graph = small_graph(4, n=300, e=900)
    model = UGT(7, 16, 3).eval()
    x = torch.randn(graph.num_nodes, 7)
    structure = model.pretrain_losses(x, graph)[0]
    h, _ = model.embed(x, graph)
    expected = dense_pretraining_structure_loss(h.double(), graph, 6)
    assert structure.dtype == torch.float32
    torch.testing.assert_close(structure.double(), expected, rtol=1e-5, atol=0)


@pytest.mark.parametrize("num_layers,trained", [(2, [2]), (1, [0, 1]), (3, [2, 3])])
def test_freezing_for_fine_tuning_is_the_officials(num_layers, trained):
    """``Transformer_class``: the parameters named ``layers.{num_layers}`` train, and
    ``layers.{num_layers - 1}`` too unless ``num_layers`` is 2; the new head trains."""
    model = UGT(5, 16, 3, num_layers=num_layers)
    names = model.freeze_pretrained()
    expected = {name for name, _ in model.named_parameters()
                if name.startswith("head.") or name.split(".")[:2] in
                [["layers", str(i)] for i in trained]}
    assert set(names) == expected
    assert {n for n, p in model.named_parameters() if p.requires_grad} == expected
    x, graph = torch.randn(30, 5), small_graph(1)
    model(x, graph).sum().backward()
    assert all((p.grad is None) != p.requires_grad for p in model.parameters())


def test_pretraining_stops_as_the_official_200_epochs_after_its_lowest_loss(monkeypatch):
    """``exp_10.py``: best_epoch moves on a strictly lower structure loss, and the loop
    breaks once ``epoch - best_epoch > 200`` (here ``patience=2``)."""
    scripted = iter([5.0, 4.0, 3.0, 3.0, 3.5, 3.75, 1.0, 9.0])
    model = UGT(5, 8, 3, heads=2)

    def losses(x, graph, steps):
        zero = sum(p.sum() for p in model.parameters()) * 0
        return zero + next(scripted), zero

    monkeypatch.setattr(model, "pretrain_losses", losses)
    record = pretrain_ugt(model, torch.randn(30, 5), small_graph(1), epochs=50, patience=2,
                          freeze=False)
    assert record == [5.0, 4.0, 3.0, 3.0, 3.5, 3.75]
    assert not model.training and all(p.requires_grad for p in model.parameters())


def test_positions_are_flipped_in_pretraining_only():
    torch.manual_seed(0)
    graph = small_graph(2)
    model = UGT(5, 8, 3, heads=2, dropout=0.0).train()
    x = torch.randn(graph.num_nodes, 5)
    first = model(x, graph)
    torch.testing.assert_close(model(x, graph), first)  # fine-tuning: no flips
    embeddings = {tuple(model.embed(x, graph, flip_positions=True)[0][0].tolist())
                  for _ in range(20)}
    assert len(embeddings) > 1


def test_pretraining_refuses_a_graph_without_nodes_and_bad_steps():
    model = UGT(3, 8, 2, heads=2)
    empty = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    with pytest.raises(ValueError, match="no nodes"):
        model.pretrain_losses(torch.randn(0, 3), empty)
    with pytest.raises(ValueError, match="steps must be at most 8, got 9"):
        model.pretrain_losses(torch.randn(30, 3), small_graph(0), steps=9)
    with pytest.raises(ValueError, match="patience must be an integer >= 1, got 0"):
        pretrain_ugt(model, torch.randn(30, 3), small_graph(0), patience=0)
    with pytest.raises(TypeError, match="pretrain_ugt: model must be a UGT, got Linear"):
        pretrain_ugt(torch.nn.Linear(3, 2), torch.randn(30, 3), small_graph(0))
    with pytest.raises(TypeError, match="floating-point node features x, got torch.int64"):
        model.pretrain_losses(torch.ones(30, 3, dtype=torch.long), small_graph(0))
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds 30 at column 0"):
        model.pretrain_losses(torch.randn(30, 3), torch.tensor([[0], [30]]))
    with pytest.raises(ValueError, match="x has 29 rows but the graph has 30 nodes"):
        model.pretrain_losses(torch.randn(29, 3), small_graph(0))


def test_a_nan_feature_makes_the_pretraining_loss_nan():
    """torch's semantics: a NaN reaches every embedding through the attention, and the
    loss sums over all pairs."""
    model = UGT(3, 8, 2, heads=2).eval()
    x = torch.randn(30, 3)
    x[4, 0] = float("nan")
    structure, reconstruction = model.pretrain_losses(x, small_graph(0))
    assert structure.isnan() and reconstruction.isnan()


def test_pretraining_a_frozen_model_trains_every_parameter_again():
    torch.manual_seed(0)
    model = UGT(3, 8, 2, heads=2)
    model.freeze_pretrained()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    pretrain_ugt(model, torch.randn(30, 3), small_graph(0), epochs=2, freeze=False)
    assert all(p.requires_grad for p in model.parameters())
    assert not torch.equal(model.embedding_h.weight, before["embedding_h.weight"])
    assert all(p.grad is None for p in model.parameters())  # no step's gradient left over


def test_bad_input_is_named():
    graph = small_graph(7)
    with pytest.raises(ValueError, match="k_hop must be an integer >= 1, got 0"):
        ugt_inputs(graph, k_hop=0)
    with pytest.raises(ValueError, match=r"virtual_ratio must lie in \[0, 1\], got 2"):
        ugt_inputs(graph, virtual_ratio=2)
    with pytest.raises(ValueError, match="bipartite"):
        ugt_inputs(Graph.bipartite(torch.tensor([[0], [1]]), (3, 2)))
    with pytest.raises(ValueError, match="must be a multiple of heads"):
        UGTLayer(6, 6, heads=4)
    with pytest.raises(ValueError, match="attention must be one of"):
        UGTLayer(8, 8, attention="linear")


def test_graphs_without_edges_and_tiny_graphs():
    model = UGT(3, 8, 2, heads=2)
    for n, edges in ((1, torch.empty(2, 0, dtype=torch.long)), (2, torch.tensor([[0], [1]])),
                     (4, torch.empty(2, 0, dtype=torch.long)),
                     (0, torch.empty(2, 0, dtype=torch.long))):  # raised in the eigenvectors
        x = torch.randn(n, 3, requires_grad=True)
        out = model(x, Graph(edges, num_nodes=n))
        assert out.shape == (n, 2) and bool(torch.isfinite(out).all())
        out.sum().backward()
    assert laplacian_eigenvectors(Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=0),
                                  3).shape == (0, 3)


OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "ugt_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "k{}-layers{}".format(*c["case"][:2]))
def test_ugt_equals_the_official_network_run_on_the_same_weights(case):
    """The official ``Transformer`` (``extract_features``, its reconstruction head) and the
    fine-tuning ``MLP`` with ``Transformer_class``'s softmax, run from the repository
    (``ugt_oracle.py``, DGL's calls on a stand-in graph) on graphloc's weights, attention
    graph and encodings; eval mode, float32 as the official."""
    k_hop, layers, _ = case["case"]
    model = UGT(5, 16, 3, num_layers=layers, heads=4, k_hop=k_hop).eval()
    model.load_state_dict(case["weights"])
    graph = Graph(case["edge_index"], num_nodes=case["x"].size(0))
    with torch.no_grad():
        h, _ = model.embed(case["x"], graph)
        torch.testing.assert_close(h, case["embedding"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model.MLP_layer_x(h), case["x_hat"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model(case["x"], graph).softmax(1), case["probabilities"],
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "k{}-layers{}".format(*c["case"][:2]))
def test_structure_and_transitions_equal_the_officials_preprocessing(case):
    """``util.py``'s ``getI`` and ``getM_logM`` (the ``M`` of every pair and step), run by
    ``ugt_oracle.py`` without their roundings on the graph the official builds, self-loops
    included (networkx counts each twice in a degree)."""
    assert case["loops"] > 0
    k_hop = case["case"][0]
    simple = ugt_simple(Graph(case["edge_index"], num_nodes=case["x"].size(0)))
    torch.testing.assert_close(structural_vectors(simple, k_hop), case["structural_vectors"],
                               rtol=1e-12, atol=1e-12)
    n = simple.num_nodes
    src, dst = torch.arange(n).repeat_interleave(n), torch.arange(n).repeat(n)
    torch.testing.assert_close(transitions(simple, src, dst),
                               case["transitions"].reshape(n * n, -1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "k{}-layers{}".format(*c["case"][:2]))
def test_pretraining_loss_and_gradients_equal_the_officials_run(case):
    """One official pre-training step (``gnnutils_10.py``'s ``train`` on ``util.py``'s
    ``getM_logM`` targets, run by ``ugt_oracle.py`` without its dropouts and its rounding
    of 1/deg) on the same weights: its structure loss, and the gradient of its loss on
    every parameter graphloc shares with it (float32, as the official)."""
    k_hop, layers, _ = case["case"]
    model = UGT(5, 16, 3, num_layers=layers, heads=4, k_hop=k_hop).eval()
    model.load_state_dict(case["weights"])
    graph = Graph(case["edge_index"], num_nodes=case["x"].size(0))
    structure, reconstruction = model.pretrain_losses(case["x"], graph)
    torch.testing.assert_close(structure.item(), case["structure_loss"], rtol=1e-5, atol=0)
    (0.5 * structure + 0.5 * reconstruction).backward()
    gradients = case["pretraining_gradients"]
    assert set(gradients) == {n for n, _ in model.named_parameters() if not n.startswith("head.")}
    for name, parameter in model.named_parameters():
        if name in gradients:
            torch.testing.assert_close(parameter.grad, gradients[name], rtol=1e-4, atol=1e-6)
