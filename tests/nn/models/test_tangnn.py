import os
import warnings

import pytest
import torch
import torch.nn.functional as F
from helpers import random_edge_index, train_losses

from graphloc import Graph
from graphloc.nn import (
    TANGNN,
    TANGNNReleased,
    TANGNNReleasedFLC,
    TANGNNReleasedPooled,
    TopMAttention,
    build_model,
)
from graphloc.nn.conv import tangnn as tangnn_module
from graphloc.nn.conv.tangnn import sample_edges_per_node, sample_in_edges, top_m_similar


def _brute_force(z, m, exclude_self=True):
    sims = F.normalize(z, dim=1) @ F.normalize(z, dim=1).T
    if exclude_self:
        sims.fill_diagonal_(float("-inf"))
    return sims.topk(m, dim=1)


def _cosines_of(z, index):
    """The cosine of each row of ``z`` with the rows ``index`` [N, m] names."""
    unit = F.normalize(z, dim=1)
    return (unit.unsqueeze(1) * unit[index]).sum(-1)


def _clustered(n, d, clusters, seed):
    gen = torch.Generator().manual_seed(seed)
    centers = torch.randn(clusters, d, generator=gen)
    label = torch.randint(0, clusters, (n,), generator=gen)
    return centers[label] + 0.3 * torch.randn(n, d, generator=gen)


@pytest.mark.parametrize("exclude_self", [True, False])
def test_exact_top_m_equals_brute_force(exclude_self, monkeypatch):
    z = torch.randn(300, 12, dtype=torch.float64)
    monkeypatch.setattr(tangnn_module, "_EXACT_BLOCK_ENTRIES", 300 * 7)  # 7-row blocks
    index, sims = top_m_similar(z, 10, mode="exact", exclude_self=exclude_self)
    ref = _brute_force(z, 10, exclude_self)
    torch.testing.assert_close(sims, ref.values)
    assert torch.equal(index, ref.indices)
    if exclude_self:
        assert not (index == torch.arange(300)[:, None]).any()


def test_top_m_caps_m_and_handles_one_node():
    index, sims = top_m_similar(torch.randn(5, 3), 10)
    assert index.shape == (5, 4) and sims.shape == (5, 4)
    assert sorted(index[0].tolist()) == [1, 2, 3, 4]
    index, _ = top_m_similar(torch.randn(1, 3), 4)
    assert index.shape == (1, 0)


def test_approximate_top_m_recall_and_exact_similarities(monkeypatch):
    z = _clustered(6000, 16, clusters=40, seed=1)
    exact, exact_sims = top_m_similar(z, 16, mode="exact")
    monkeypatch.setattr(tangnn_module, "_EXACT_BLOCK_ENTRIES", 6000 * 5)  # blocked clusters
    recall = {}
    for probes in (1, 3):
        approx, approx_sims = top_m_similar(z, 16, mode="approx", probes=probes)
        recall[probes] = (approx.unsqueeze(2) == exact.unsqueeze(1)).any(2).float().mean()
        torch.testing.assert_close(approx_sims, _cosines_of(z, approx), rtol=1e-5, atol=1e-5)
        assert not (approx == torch.arange(6000)[:, None]).any()
        assert (approx.sort(1).values.diff(dim=1) != 0).all()  # no node twice in a row
        assert (approx_sims <= exact_sims + 1e-6).all()  # the k-th found never beats the k-th
    assert recall[3] > 0.9 and recall[3] >= recall[1], recall
    again, _ = top_m_similar(z, 16, mode="approx", probes=3)
    assert torch.equal(again, approx)  # same seed, same candidates


def test_approximate_rows_short_of_candidates_fall_back_to_exact():
    z = torch.randn(100, 8, dtype=torch.float64)  # 10 clusters: no row has 99 candidates
    index, sims = top_m_similar(z, 99, mode="approx", probes=1)
    exact, exact_sims = top_m_similar(z, 99, mode="exact")
    torch.testing.assert_close(sims, exact_sims)
    assert torch.equal(index.sort(1).values, exact.sort(1).values)


@pytest.mark.parametrize("heads", [1, 3])
def test_top_m_attention_equals_dense_attention_truncated_to_top_m(heads):
    torch.manual_seed(0)
    layer = TopMAttention(6, 4, heads=heads, m=5).double()
    x = torch.randn(40, 6, dtype=torch.float64)
    z = F.normalize(layer.lin_z(x).view(40, heads, 4), dim=-1)
    value = layer.lin_value(x).view(40, heads, 4)
    logits = torch.einsum("vhc,uhc->hvu", z, z) * layer.log_scale.exp()
    mean_cos = logits.mean(0)
    mean_cos.fill_diagonal_(float("-inf"))
    keep = torch.zeros(40, 40, dtype=torch.bool).scatter_(1, mean_cos.topk(5, 1).indices, True)
    alpha = logits.masked_fill(~keep, float("-inf")).softmax(-1)  # [H, N, N]
    expected = torch.einsum("hvu,uhc->vhc", alpha, value).reshape(40, heads * 4)
    torch.testing.assert_close(layer(x), expected)


def test_gradients_reach_projection_values_and_temperature():
    layer = TopMAttention(5, 3, heads=2, m=4).double()
    x = torch.randn(30, 5, dtype=torch.float64, requires_grad=True)
    layer(x).pow(2).sum().backward()
    for param in (layer.lin_z.weight, layer.lin_value.weight, layer.log_scale):
        assert param.grad is not None and param.grad.abs().sum() > 0
    # the selection is fixed near x, so the attention is smooth there: gradcheck it
    assert torch.autograd.gradcheck(lambda inp: layer(inp), (x,))


def test_sample_in_edges_is_uniform_without_replacement():
    edge_index = torch.stack([torch.arange(10), torch.zeros(10, dtype=torch.long)])
    edge_index = torch.cat([edge_index, torch.tensor([[3, 4], [1, 1]])], 1)
    graph = Graph(edge_index, num_nodes=11)
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(10)
    for _ in range(2000):
        sample = sample_in_edges(graph, 4, gen)
        into_zero = sample.edge_index[0][sample.edge_index[1] == 0]
        assert into_zero.numel() == 4 and into_zero.unique().numel() == 4
        assert sorted(sample.edge_index[0][sample.edge_index[1] == 1].tolist()) == [3, 4]
        counts[into_zero] += 1
    torch.testing.assert_close(counts / 2000, torch.full((10,), 0.4), atol=0.04, rtol=0)


@pytest.mark.parametrize("variant", ["base", "lc"])
def test_tangnn_trains_and_is_deterministic_under_a_seed(variant):
    graph = Graph(random_edge_index(120, 500, seed=3), num_nodes=120).to_undirected()
    x, y = torch.randn(120, 6), torch.randint(0, 3, (120,))
    torch.manual_seed(7)
    assert build_model("tangnn", 6, 16, 3, num_layers=2).layers[0].attention.m == 20
    model = build_model("tangnn", 6, 16, 3, num_layers=2, m=8, variant=variant, dropout=0.0)
    assert isinstance(model, TANGNN)
    losses = train_losses(model, x, graph, y, steps=40)
    assert losses[-1] < 0.6 * losses[0]
    model.eval()
    torch.testing.assert_close(model(x, graph), model(x, graph))


def test_tangnn_bad_input():
    with pytest.raises(ValueError, match="mode must be"):
        top_m_similar(torch.randn(5, 2), 2, mode="lsh")
    with pytest.raises(ValueError, match="m must be an integer >= 1, got 0"):
        top_m_similar(torch.randn(5, 2), 0)
    with pytest.raises(ValueError, match="floating-point"):
        top_m_similar(torch.ones(5, 2, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="variant"):
        TANGNN(3, 4, 2, variant="flc")
    with pytest.raises(ValueError, match="m must be"):
        TopMAttention(3, 4, m=0)
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        TopMAttention(3, 4)(torch.randn(5, 2))


@pytest.mark.parametrize("kwargs, error, message", [
    # a string read as true: the node was excluded where the caller said False
    (dict(exclude_self="False"), TypeError, "top_m_similar: exclude_self must be True or False"),
    (dict(m=2.5), ValueError, "m must be an integer >= 1, got 2.5"),
    (dict(m=True), ValueError, "m must be an integer >= 1, got True"),
    (dict(mode="approx", probes=1.5), ValueError, "probes must be an integer >= 1, got 1.5"),
    (dict(mode="approx", seed=-1), ValueError, r"seed must be an integer in \[0, 2\^63\)"),
    (dict(exact_max_nodes="10"), ValueError, "exact_max_nodes must be an integer >= 0"),
])
def test_top_m_similar_refuses_bad_options_by_name(kwargs, error, message):
    """Before, a float m or probes failed inside torch.topk naming no argument, a negative
    seed was taken, and exclude_self="False" excluded each node from its own list."""
    z = torch.randn(30, 4, generator=torch.Generator().manual_seed(0))
    options = dict(m=3) | kwargs
    with pytest.raises(error, match=message):
        top_m_similar(z, **options)


def test_a_non_finite_row_comes_back_as_nan_in_either_mode(monkeypatch):
    """A NaN row has NaN cosine with every node: exact mode ranks it as torch.topk orders
    NaN (above every number, so first in each row, as the brute force), approximate mode
    returns it where its cluster is probed; its similarity is NaN wherever it comes back,
    and the finite pairs keep their exact cosines."""
    z = _clustered(400, 8, 6, seed=3).double()
    z[7] = float("nan")
    others = torch.arange(400) != 7
    monkeypatch.setattr(tangnn_module, "_EXACT_BLOCK_ENTRIES", 400 * 7)  # 7-row blocks
    index, sims = top_m_similar(z, 5, mode="exact")
    ref = _brute_force(z, 5)
    assert torch.equal(index[others], ref.indices[others])
    assert (index[others, 0] == 7).all() and sims[others, 0].isnan().all()
    torch.testing.assert_close(sims[others, 1:], ref.values[others, 1:])
    assert sims[7].isnan().all()

    index, sims = top_m_similar(z, 5, mode="approx")
    returned = index == 7
    assert returned.any() and sims[returned].isnan().all() and sims[7].isnan().all()
    finite = ~returned & others[:, None]
    torch.testing.assert_close(sims[finite], _cosines_of(z, index)[finite])
    assert not sims[finite].isnan().any()


RELEASED = os.path.join(os.path.dirname(__file__), "data", "tangnn_official.pt")


@pytest.mark.parametrize("case", torch.load(RELEASED, weights_only=True),
                         ids=lambda c: "{}-layers{}-in{}-m{}".format(*c["case"][:4]))
def test_tangnn_released_equals_the_released_code_run_on_the_same_weights(case):
    """``CustomGNN`` of the released ``TANGNN/TANGNN`` and ``TANGNN/TANGNN-LC`` files
    (``tangnn_oracle.py``) on graphloc's weights, loaded under the same names: its
    log-probabilities, and the gradients of the features and of every parameter (None
    where the released code leaves one unused), in eval mode, on graphs with loops,
    parallel edges and an isolated node; m below and above N, the learned ``a`` used where
    the features are hidden wide."""
    variant, layers, width, m, _ = case["case"]
    model = TANGNNReleased(width, 8, 3, num_layers=layers, m=m, variant=variant)
    _assert_equals_the_released_run(model, case)


def _assert_equals_the_released_run(model, case) -> set:
    """``model`` with the case's weights against the released run: log-probabilities and
    the gradients of the features and of every parameter; returns the names that get one."""
    model = model.double()
    model.load_state_dict(case["weights"])
    x = case["x"].clone().requires_grad_()
    out = F.log_softmax(model.eval()(x, case["edge_index"]), dim=1)
    torch.testing.assert_close(out, case["official"], rtol=1e-10, atol=1e-12)
    names, params = zip(*model.named_parameters(), strict=True)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    grads = torch.autograd.grad((out * weights).sum(), [x, *params], allow_unused=True)
    torch.testing.assert_close(grads[0], case["grad_x"], rtol=1e-10, atol=1e-12)
    used = {name: grad for name, grad in zip(names, grads[1:], strict=True)
            if grad is not None}
    assert used.keys() == case["grads"].keys()
    for name, grad in used.items():
        torch.testing.assert_close(grad, case["grads"][name], rtol=1e-10, atol=1e-12)
    return set(used)


RELEASED_VARIANTS = os.path.join(os.path.dirname(__file__), "data",
                                 "tangnn_official_variants.pt")


def _released_variant(variant, layers, width, m):
    if variant == "flc":
        return TANGNNReleasedFLC(width, 8, 3, num_layers=layers)
    return TANGNNReleasedPooled(width, 8, 3, num_layers=layers, m=m, variant=variant)


@pytest.mark.parametrize("case", torch.load(RELEASED_VARIANTS, weights_only=True),
                         ids=lambda c: "{}-layers{}-in{}-m{}".format(*c["case"][:4]))
def test_released_nai_tai_and_flc_equal_the_released_code_run_on_the_same_weights(case):
    """``CustomGNN`` of the released ``TANGNN-NAI``, ``TANGNN-TAI`` and ``TANGNN-FLC``
    files (``tangnn_oracle.py``) on graphloc's weights, loaded under the same names: the
    log-probabilities and the gradients of the features and of every parameter (None where
    the released code leaves one unused, ``a`` among them), in eval mode; m below and above
    N; FLC's selection is vertex 0, as the released code's."""
    variant, layers, width, m, _ = case["case"]
    assert "a" not in _assert_equals_the_released_run(
        _released_variant(variant, layers, width, m), case)


def test_released_flc_reads_vertex_0_and_nai_reads_topks_order_for_equal_scores():
    """What the released selections come to: FLC's global vector is a function of vertex
    0 alone; NAI's scores are all 0 (a ReLU of log-probabilities), so its vertices are
    the ones torch.topk returns for a vector of zeros."""
    torch.manual_seed(0)
    graph = Graph(random_edge_index(30, 90, seed=2), num_nodes=30)
    x = torch.randn(30, 6)
    flc = TANGNNReleasedFLC(6, 8, 3).eval()
    changed = x.clone()
    changed[1:, :] += torch.randn(29, 6)  # every vertex but 0, on a graph without edges
    empty = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=30)
    torch.testing.assert_close(flc(changed, empty)[0], flc(x, empty)[0])
    changed = x.clone()
    changed[0] += 1.0
    assert not torch.allclose(flc(changed, empty)[5], flc(x, empty)[5])
    nai = TANGNNReleasedPooled(6, 8, 3, num_layers=1, m=4).eval()
    s = nai.graphsage_layers[0](x, graph)
    expected = torch.zeros(30).topk(4).indices
    pooled = nai.transformer_layers[0](s[expected].unsqueeze(0)).mean(1)
    out = nai.mlp(torch.cat([s, pooled.expand(30, -1)], 1))
    torch.testing.assert_close(nai(x, graph), out)


def test_released_variants_registered_with_the_released_scripts_defaults():
    nai, tai = (build_model(f"tangnn-released-{v}", 6, 8, 3, 2) for v in ("nai", "tai"))
    assert isinstance(nai, TANGNNReleasedPooled) and (nai.variant, nai.m) == ("nai", 25)
    assert (tai.variant, tai.m) == ("tai", 25) and not hasattr(tai, "mlp")
    assert nai.graphsage_layers[0].dropout.p == 0.3
    flc = build_model("tangnn-released-flc", 6, 8, 3, 3)
    assert isinstance(flc, TANGNNReleasedFLC) and len(flc.transformer.layers) == 3
    for model in (nai, tai, flc):
        assert model.graphloc_global
        assert model.eval()(torch.randn(12, 6), random_edge_index(12, 30, seed=1)).shape == \
            (12, 3)
        no_nodes = Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=0)
        assert model(torch.randn(0, 6), no_nodes).shape == (0, 3)
        assert model(torch.randn(1, 6), Graph(torch.zeros(2, 0, dtype=torch.long),
                                              num_nodes=1)).shape == (1, 3)


def test_released_flc_through_build_model_says_a_dropout_goes_unused():
    """``fit`` passes its dropout to every model; FLC has none, as released."""
    with pytest.warns(UserWarning, match=r"tangnn-released-flc has no dropout \(as released\): "
                                         r"dropout=0.2 is not used"):
        build_model("tangnn-released-flc", 6, 8, 3, 3, dropout=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        build_model("tangnn-released-flc", 6, 8, 3, 3, dropout=0.0)
    with pytest.raises(ValueError, match="dropout must be a probability in"):
        build_model("tangnn-released-flc", 6, 8, 3, 3, dropout=1.5)


@pytest.mark.parametrize("cls, kwargs, match", [
    (TANGNNReleased, {"variant": "flc"}, "TANGNNReleased: variant must be 'base' or 'lc', "
                                         "got 'flc'"),
    (TANGNNReleased, {"heads": 3}, r"hidden_channels \(8\) must be a multiple of heads \(3\)"),
    (TANGNNReleased, {"m": 0}, "TANGNNReleased: m must be an integer >= 1, got 0"),
    (TANGNNReleasedPooled, {"variant": "lc"}, "TANGNNReleasedPooled: variant must be 'nai' or "
                                              "'tai', got 'lc'"),
    (TANGNNReleasedPooled, {"m": 0}, "TANGNNReleasedPooled: m must be an integer >= 1"),
    (TANGNNReleasedFLC, {"heads": 3}, r"TANGNNReleasedFLC: hidden_channels \(8\) must be a "
                                      r"multiple of heads \(3\)"),
    (TANGNNReleasedFLC, {"num_layers": 0}, "TANGNNReleasedFLC: num_layers must be an integer"),
])
def test_released_networks_refuse_bad_settings_by_name(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(6, 8, 3, **kwargs)


def test_sample_edges_per_node_out_keeps_at_most_k_out_edges_uniformly():
    """The released sampler's rule: each source keeps min(k, out-degree) of its out-edges,
    each with probability k / out-degree, directions kept; in-degrees are not bounded."""
    hub_out = torch.stack([torch.zeros(10, dtype=torch.long), torch.arange(1, 11)])
    into_hub = torch.stack([torch.arange(1, 11), torch.zeros(10, dtype=torch.long)])
    graph = Graph(torch.cat([hub_out, into_hub, torch.tensor([[3, 3], [5, 5]])], 1),
                  num_nodes=11)
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(11)
    for _ in range(2000):
        src, dst = sample_edges_per_node(graph, 4, "out", gen).edge_index
        from_hub = dst[src == 0]
        assert from_hub.numel() == 4 and from_hub.unique().numel() == 4
        assert (dst == 0).sum() == 10  # every node's one edge into the hub stays
        assert sorted(dst[src == 3].tolist()) == [0, 5, 5]  # 3 <= k: all kept, repeats too
        counts[from_hub] += 1
    torch.testing.assert_close(counts[1:] / 2000, torch.full((10,), 0.4), atol=0.04, rtol=0)
    assert sample_edges_per_node(graph, 0, "out").num_edges == 0
    with pytest.raises(ValueError, match="side must be 'in' or 'out', got 'src'"):
        sample_edges_per_node(graph, 4, "src")  # read as "out" before it was checked
    with pytest.raises(ValueError, match="k must be an integer >= 0, got -1"):
        sample_edges_per_node(graph, -1)


def test_sampled_edges_keep_the_graphs_node_sets_and_edge_rows():
    """A bipartite graph's sample was rebuilt as one node set of the destinations' count, so
    TANGNNReleased ran on it with x of the destinations' rows; now the sample stays
    bipartite (and keeps each kept edge's edge_attr row), and the model's SAGEConv refuses
    the single x as it refuses it on the whole graph."""
    edge_index = torch.tensor([[0, 0, 0, 1, 1], [0, 1, 2, 2, 0]])
    graph = Graph.bipartite(edge_index, (2, 3), edge_attr=torch.arange(5.0).view(5, 1))
    gen = torch.Generator().manual_seed(0)
    for side, k in (("out", 2), ("in", 1)):
        sample = sample_edges_per_node(graph, k, side, gen)
        assert sample.is_bipartite and (sample.num_src_nodes, sample.num_nodes) == (2, 3)
        for (src, dst), attr in zip(sample.edge_index.t().tolist(),
                                    sample.edge_attr.view(-1).tolist(), strict=True):
            assert [src, dst] == edge_index[:, int(attr)].tolist()  # the edge's own row
    with pytest.raises(ValueError, match="x has 3 rows but the graph has 2 source nodes"):
        TANGNNReleased(4, 8, 3).eval()(torch.randn(3, 4), graph)


def test_tangnn_released_draws_its_edges_in_evaluation_too():
    """As released, the sample is redrawn at every call, evaluation included: on a graph
    whose sources have more out-edges than the sample size, two eval calls differ, and
    with the sampling off (None) they are equal. The draw bounds out-edges per source: a
    star of 39 edges into one node, one out of each, is kept whole."""
    graph = Graph(random_edge_index(40, 400, seed=5), num_nodes=40)
    x = torch.randn(40, 6)
    torch.manual_seed(0)
    model = TANGNNReleased(6, 8, 3).eval()
    assert not torch.equal(model(x, graph), model(x, graph))
    fixed = TANGNNReleased(6, 8, 3, sample_size=None, later_sample_size=None).eval()
    assert torch.equal(fixed(x, graph), fixed(x, graph))
    # 39 edges into node 0, one out of each node: the per-source draw keeps them all
    star = Graph(torch.stack([torch.arange(1, 40), torch.zeros(39, dtype=torch.long)]),
                 num_nodes=40)
    assert torch.equal(model(x, star), model(x, star))


def test_tangnn_released_registered_with_the_released_scripts_defaults():
    base, lc = build_model("tangnn-released", 6, 8, 3, 2), build_model("tangnn-released-lc",
                                                                      6, 8, 3, 2)
    assert isinstance(base, TANGNNReleased) and (base.variant, base.m) == ("base", 20)
    assert (lc.variant, lc.m) == ("lc", 30)
    assert [b.sample_size for b in base.graphsage_layers] == [5, 10]
    assert base.graphsage_layers[0].dropout.p == 0.3
    # LC with 3 layers (the released readout takes 2 x hidden, so it runs with 2 only)
    three = build_model("tangnn-released-lc", 6, 8, 3, 3).eval()
    assert three.mlp[0].in_features == 24
    assert three(torch.randn(12, 6), random_edge_index(12, 30, seed=1)).shape == (12, 3)


@pytest.mark.parametrize("cls", [TANGNNReleased, TANGNNReleasedPooled, TANGNNReleasedFLC])
def test_released_networks_refuse_bad_inputs_by_name(cls):
    model = cls(6, 8, 3).eval()
    name = cls.__name__
    edges = random_edge_index(10, 20, seed=0)
    with pytest.raises(ValueError, match=fr"{name} expects x of shape \[N, 6\]"):
        model(torch.randn(10, 5), edges)
    with pytest.raises(ValueError, match="x has 9 rows but the graph has 10 nodes"):
        model(torch.randn(9, 6), Graph(edges, num_nodes=10))
    with pytest.raises(TypeError, match=f"{name} expects floating-point node features "
                                        "x, got torch.int64"):
        model(torch.ones(10, 6, dtype=torch.long), edges)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds 10 at column 0 but the "
                                         "graph has 10 nodes"):
        model(torch.randn(10, 6), torch.tensor([[10], [0]]))
    no_edges = Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=0)
    assert model(torch.randn(0, 6), no_edges).shape == (0, 3)


RELEASED_NAN = os.path.join(os.path.dirname(__file__), "data", "tangnn_official_nan.pt")


@pytest.mark.parametrize("case", torch.load(RELEASED_NAN, weights_only=True),
                         ids=lambda c: "{}-in{}-nan-at-{}".format(c["case"][0], c["case"][2],
                                                                 c["case"][5]))
def test_tangnn_released_carries_a_nan_feature_where_the_released_code_does(case):
    """One NaN feature (at a node with edges, or the isolated one): the released code's
    outputs (``tangnn_oracle.py``) are NaN wherever torch's semantics carry it, here
    everywhere (the global vertex set and its tiling reach every node); graphloc's are the
    same, value for value where finite."""
    variant, layers, width, m, _, _ = case["case"]
    model = TANGNNReleased(width, 8, 3, num_layers=layers, m=m, variant=variant).double()
    model.load_state_dict(case["weights"])
    with torch.no_grad():
        out = F.log_softmax(model.eval()(case["x"], case["edge_index"]), dim=1)
    torch.testing.assert_close(out, case["official"], rtol=1e-10, atol=1e-12, equal_nan=True)
