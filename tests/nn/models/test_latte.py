"""LATTE: meta-paths by stacking, the filtered join against dense matrix products, the
stacked model against its layers, the proximity loss, bad input."""

import os

import pytest
import torch
import torch.nn.functional as F

from graphloc import Graph
from graphloc.hetero import HeteroGraph
from graphloc.nn.models import latte as latte_module
from graphloc.nn.models.latte import LATTE, join, kept_edges, meta_paths

PA, AP = ("author", "writes", "paper"), ("paper", "by", "author")
SP, PS = ("subject", "has", "paper"), ("paper", "in", "subject")


def _acm_like(seed=0):
    gen = torch.Generator().manual_seed(seed)
    n = {"paper": 30, "author": 20, "subject": 3}
    writes = torch.stack([torch.randint(0, 20, (60,), generator=gen),
                          torch.randint(0, 30, (60,), generator=gen)])
    subject = torch.randint(0, 3, (30,), generator=gen)
    has = torch.stack([subject, torch.arange(30)])
    graph = HeteroGraph(n, {PA: writes, AP: writes.flip(0), SP: has, PS: has.flip(0)})
    x = {t: torch.randn(c, 6, generator=gen) for t, c in n.items()}
    return graph, x, subject


def test_meta_paths_are_the_stacked_compositions():
    assert meta_paths([PA, AP, SP, PS], 1) == [(PA,), (AP,), (SP,), (PS,)]
    second = meta_paths([PA, AP, SP, PS], 2)
    # ACM's PAP, APA, APS... : each joins a relation that ends where the first starts
    # ACM's PAP, APA, APS, SPS, PSP... written head first: each second relation ends
    # where the first starts
    assert sorted(second) == sorted([(PA, AP), (AP, PA), (AP, SP), (SP, PS), (PS, PA),
                                     (PS, SP)])
    # order 3: two relations end at a paper, one at an author, one at a subject
    assert len(meta_paths([PA, AP, SP, PS], 3)) == 2 + 1 + 1 + 2 + 1 + 1


def test_join_is_the_pattern_of_the_kept_product():
    graph, x, _ = _acm_like()
    a, b = graph[PA], graph[AP]  # author -> paper, then paper -> author: A <- P <- A
    gen = torch.Generator().manual_seed(1)
    keep = torch.rand(a.num_edges, generator=gen) > 0.4
    joined = join(a, keep, b, one_node_set=True)
    A = torch.zeros(30, 20)  # [paper (u), author (k)] kept a-edges k -> u
    A[a.edge_index[1][keep], a.edge_index[0][keep]] = 1
    B = torch.zeros(20, 30)  # [author (k), paper (v)] b-edges v -> k
    B[b.edge_index[1], b.edge_index[0]] = 1
    expected = {(v, u) for u, v in ((A @ B) > 0).nonzero().tolist()}
    assert set(map(tuple, joined.edge_index.T.tolist())) == expected
    assert joined.num_edges == len(expected)  # no repeats
    assert (joined.num_src_nodes, joined.num_nodes) == (30, 30) and not joined.is_bipartite


def test_kept_edges_threshold_and_fallback():
    att = torch.tensor([[0.2, 0.6], [0.1, 0.3], [0.5, 0.1]])
    assert kept_edges(att, 0.5).tolist() == [True, False, True]
    assert kept_edges(att, 0.9).tolist() == [True, False, False]  # the largest alone
    assert kept_edges(torch.zeros(0, 2), 0.5).tolist() == []


def test_stacked_layers_use_the_joined_graphs_and_concatenate():
    graph, x, _ = _acm_like()
    torch.manual_seed(0)
    model = LATTE({t: 6 for t in graph.node_types}, 8, 3, 2, graph.metadata(),
                  "paper").eval()
    logits, attention = model(x, graph, return_attention=True)
    # the same numbers from the layers by hand
    h = {t: F.relu(model.project[t](x[t])) for t in graph.node_types}
    graphs1 = {(r,): graph[r] for r in graph.relations}
    h1, att1, _ = model.convs[0](h, graphs1)
    graphs2 = {p: join(graph[p[0]], kept_edges(att1[p[:-1]], 0.5), graph[p[-1]],
                       one_node_set=p[0][2] == p[-1][0])
               for p in model.convs[1].paths}
    h2, att2, beta2 = model.convs[1](h1, graphs2)
    expected = model.classifier(torch.cat([h1["paper"], h2["paper"]], 1))
    torch.testing.assert_close(logits, expected)
    assert set(attention[1].edges) == set(graphs2)
    paths, beta = attention[1].relations["paper"]
    assert paths == model.convs[1].paths_into("paper") + ["self"]
    torch.testing.assert_close(beta, beta2["paper"])
    torch.testing.assert_close(beta.sum(1), torch.ones(30))
    for path, (edge_index, weights) in attention[1].edges.items():
        assert torch.equal(edge_index, graphs2[path].edge_index)
        torch.testing.assert_close(weights, att2[path])
        # a softmax over each head node's edges
        sums = torch.zeros(graphs2[path].num_nodes, weights.size(1)).index_add_(
            0, edge_index[1], weights)
        has = torch.bincount(edge_index[1], minlength=sums.size(0)) > 0
        torch.testing.assert_close(sums[has], torch.ones_like(sums[has]))


def test_proximity_loss_formula(monkeypatch):
    graph, x, _ = _acm_like()
    torch.manual_seed(0)
    model = LATTE({t: 6 for t in graph.node_types}, 8, 3, 1, graph.metadata(), "paper",
                  proximity=True, dropout=0.0, attn_dropout=0.0)
    negatives = {}

    def fixed(g, count):
        src = torch.arange(count) % g.num_src_nodes
        dst = (torch.arange(count) * 7 + 3) % g.num_nodes
        negatives[id(g)] = (src, dst)
        return src, dst
    monkeypatch.setattr(latte_module, "_non_edges", fixed)
    _, attention = model(x, graph, return_attention=True)
    loss = model.auxiliary_loss()
    conv, terms = model.convs[0], []
    h = {t: F.relu(model.project[t](x[t])) for t in graph.node_types}
    for path, (edge_index, att) in attention[0].edges.items():
        g = graph[path[0]]
        src, dst = negatives[id(g)]

        def logit(s, d, path=path):
            left = conv.left[path[0][2]](h[path[0][2]][d]).view(-1, 2, 4)
            right = conv.right[path[-1][0]](h[path[-1][0]][s]).view(-1, 2, 4)
            name = "|".join("-".join(r) for r in path)
            raw = (left * conv.att_left[name]).sum(-1) + (right * conv.att_right[name]).sum(-1)
            return F.leaky_relu(raw.max(1).values, 0.2)  # sharpening is 1 at init
        pos = -(att.max(1).values * F.logsigmoid(logit(edge_index[0], edge_index[1]))).mean()
        neg = -F.logsigmoid(-logit(src, dst)).mean()
        terms.append(pos + neg)
    torch.testing.assert_close(loss, sum(terms) / (2 * len(terms)))
    assert LATTE({t: 6 for t in graph.node_types}, 8, 3, 1, graph.metadata(),
                 "paper").auxiliary_loss() is None


def test_non_edges_are_not_edges():
    g = Graph.bipartite(torch.tensor([[0, 1, 2], [0, 0, 1]]), (3, 2))
    src, dst = latte_module._non_edges(g, 500)
    observed = {(0, 0), (1, 0), (2, 1)}
    assert src.numel() > 100 and not {(s, d) for s, d in zip(src.tolist(), dst.tolist(),
                                                               strict=True)} & observed


def test_bad_input():
    graph, x, _ = _acm_like()
    widths = {t: 6 for t in graph.node_types}
    with pytest.raises(ValueError, match="target must be one of the node types"):
        LATTE(widths, 8, 3, 1, graph.metadata(), "venue")
    with pytest.raises(ValueError, match="in_channels must give a width for each node type"):
        LATTE({"paper": 6}, 8, 3, 1, graph.metadata(), "paper")
    with pytest.raises(ValueError, match="metadata must be"):
        LATTE(widths, 8, 3, 1, None, "paper")
    with pytest.raises(ValueError, match="layer_pooling must be one of"):
        LATTE(widths, 8, 3, 1, graph.metadata(), "paper", layer_pooling="sum")
    with pytest.raises(ValueError, match="no relation arrives at the target type 'subject'"):
        LATTE(widths, 8, 3, 1, (graph.node_types, [PA, AP]), "subject")
    model = LATTE(widths, 8, 3, 1, graph.metadata(), "paper")
    with pytest.raises(ValueError, match=r"x\['author'\] must be dense floating \[20, F\]"):
        model({**x, "author": torch.randn(19, 6)}, graph)
    with pytest.raises(ValueError, match="no features for the node types"):
        model({"paper": x["paper"]}, graph)
    other = HeteroGraph(graph.num_nodes, {PA: graph[PA]})
    with pytest.raises(ValueError, match="differs from the model's"):
        model(x, other)


def test_nan_reaches_exactly_the_nodes_that_read_it_and_empty_relations_give_zero():
    """One author's NaN features: the papers that author writes become NaN (torch's
    propagation), the others stay finite; a relation without edges contributes nothing."""
    graph, x, _ = _acm_like()
    torch.manual_seed(0)
    model = LATTE({t: 6 for t in graph.node_types}, 8, 3, 1, graph.metadata(), "paper").eval()
    x = {**x, "author": x["author"].clone()}
    x["author"][4] = float("nan")
    out = model(x, graph)
    writes = graph[PA].edge_index
    reached = torch.zeros(30, dtype=torch.bool)
    reached[writes[1][writes[0] == 4]] = True
    assert reached.any() and torch.isnan(out[reached]).all(1).all()
    assert torch.isfinite(out[~reached]).all()
    empty = HeteroGraph(graph.num_nodes, {**graph.edges, PA: torch.zeros(2, 0, dtype=torch.long)})
    conv = model.convs[0]
    h = {t: F.relu(model.project[t](v)) for t, v in _acm_like()[1].items()}
    graphs = {(r,): empty[r] for r in empty.relations}
    out_h, attention, beta = conv(h, graphs)
    assert attention[(PA,)].shape == (0, 2)
    # paper: beta_SP * z_SP + beta_self * l (the empty PA term is zero)
    subject = conv.right["subject"](h["subject"]).view(-1, 2, 4)
    alpha = attention[(SP,)]
    z = torch.zeros(30, 2, 4).index_add_(0, graph[SP].edge_index[1],
                                         alpha[:, :, None] * subject[graph[SP].edge_index[0]])
    paths = conv.paths_into("paper")
    expected = F.relu(beta["paper"][:, paths.index((SP,)), None] * z.reshape(30, 8)
                      + beta["paper"][:, -1:] * conv.left["paper"](h["paper"]))
    torch.testing.assert_close(out_h["paper"], expected)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_latte_under_autocast(dtype):
    """Trains under torch.autocast (its sparse ops promote mixed inputs): logits within
    low precision's rounding of the float32 run, and a finite backward."""
    graph, x, _ = _acm_like()
    torch.manual_seed(0)
    model = LATTE({t: 6 for t in graph.node_types}, 8, 3, 2, graph.metadata(), "paper").eval()
    full = model(x, graph)
    with torch.autocast("cpu", dtype=dtype):
        low = model(x, graph)
    low.float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert (low.float() - full).abs().max() <= 0.05 * full.abs().max()


# -- the official code, run (latte_oracle.py) ----------------------------------------------

OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "latte_official.pt")


def _official_negatives(case):
    """graphloc's non-edge draw replaced by the official run's, found by the graph."""
    def non_edges(graph, count):
        key = (graph.num_nodes, graph.num_src_nodes, *graph.edge_index.flatten().tolist())
        src, dst = case["negatives"][key]
        return src, dst
    return non_edges


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=False),
                         ids=lambda c: "layers{}-proximity{}".format(*c["case"][:2]))
def test_latte_equals_the_official_code_run_on_the_same_weights(case, monkeypatch):
    """The official ``conv.LATTE`` and ``DenseClassification`` run from their repository on
    graphloc's weights (PyG 1.7's message-passing semantics, run.py's settings, dropouts
    0): the logits, the proximity loss on the same negatives, and every gradient of the
    cross-entropy plus the proximity loss."""
    layers, proximity, _ = case["case"]
    graph = HeteroGraph({"paper": 14, "author": 9, "subject": 3}, case["edges"])
    model = LATTE(dict.fromkeys(graph.node_types, 5), 8, 3, layers, graph.metadata(),
                  "paper", dropout=0.0, attn_dropout=0.0, classifier_dropout=0.0,
                  proximity=proximity).double()
    model.load_state_dict(case["weights"])
    monkeypatch.setattr(latte_module, "_non_edges", _official_negatives(case))
    logits = model.train()(case["x"], graph)
    torch.testing.assert_close(logits, case["logits"], rtol=1e-10, atol=1e-12)
    loss = F.cross_entropy(logits, case["y"])
    if proximity:  # the official sums it in float32
        torch.testing.assert_close(model.auxiliary_loss(), case["proximity"].double(),
                                   rtol=1e-6, atol=1e-7)
        loss = loss + model.auxiliary_loss()
    loss.backward()
    for name, param in model.named_parameters():
        expected = case["grads"].get(name, torch.zeros_like(param))
        got = torch.zeros_like(param) if param.grad is None else param.grad
        torch.testing.assert_close(got, expected.to(got), rtol=1e-5, atol=1e-7,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_the_classifier_starts_from_the_official_glorot_draw():
    """DenseClassification's weight is PyG's glorot: uniform on +-sqrt(6 / (in + out)),
    wider than torch's default Linear bound 1 / sqrt(in)."""
    graph, _, _ = _acm_like()
    torch.manual_seed(0)
    model = LATTE({t: 6 for t in graph.node_types}, 128, 3, 2, graph.metadata(), "paper")
    weight = model.classifier[1].weight
    bound = (6 / (256 + 3)) ** 0.5
    assert weight.abs().max() <= bound
    assert weight.abs().max() > 0.9 * bound > 2 / 256 ** 0.5
    torch.testing.assert_close(weight.std(), torch.tensor(bound / 3 ** 0.5), rtol=0.1, atol=0)
