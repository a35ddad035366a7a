"""ForwardGNN against a dense re-implementation of the official networks (GCN backbone,
dense normalised adjacency), gradient isolation between layers, and bad input."""

import os

import pytest
import torch
import torch.nn.functional as F

from graphloc import Graph
from graphloc import train as train_module
from graphloc.nn.models.forward import PROCEDURES, ForwardGNN
from graphloc.train import TrainConfig, fit, load_checkpoint

N, C, FEAT, H = 12, 3, 5, 8


def _problem(seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, N, (30,), generator=gen)
    dst = torch.randint(0, N, (30,), generator=gen)
    src, dst = src[src != dst], dst[src != dst]  # GCN adds a self-loop to every node
    graph = Graph(torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]), N)
    x = torch.randn(N, FEAT, generator=gen)
    y = torch.randint(0, C, (N,), generator=gen)
    train = torch.tensor([0, 2, 3, 5, 7, 9])
    return x, graph, y, train


def _model(procedure, layers=2, **kw):
    torch.manual_seed(0)
    x, graph, y, train = _problem()
    model = ForwardGNN("gcn", FEAT, H, C, layers, procedure=procedure, **kw)
    model.set_context(N, train, y[train])
    return model, x, graph, y, train


# -- the dense twin ----------------------------------------------------------------------

def _dense_adj(edge_index, n):
    """GCN's D^-1/2 (A + I) D^-1/2 with A[dst, src] counting edges."""
    a = torch.zeros(n, n)
    a.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.size(1)), accumulate=True)
    a = a + torch.eye(n)
    d = a.sum(1).rsqrt()
    return d[:, None] * a * d[None, :]


def _unit(x):
    return x / (x.norm(dim=1, keepdim=True) + 1e-8)


def _dense_conv(conv, x, adj):
    return torch.relu(adj @ x @ conv.lin.weight.T + conv.bias)


def _dense_layer(conv, x, adj):
    return _dense_conv(conv, _unit(x), adj)


def _links_edges(edge_index, links, n):
    """Edges i <-> n + links[i] for labelled i, appended (the paper's class nodes)."""
    nodes = [i for i in range(n) if links[i] >= 0]
    extra = [(i, n + int(links[i])) for i in nodes] + [(n + int(links[i]), i) for i in nodes]
    return torch.cat([edge_index, torch.tensor(extra, dtype=torch.long).T.reshape(2, -1)], 1)


def _context(y, train):
    context = torch.full((N,), -1)
    context[train] = y[train]
    return context


def test_sf_scores_match_the_dense_twin():
    model, x, graph, y, train = _model("sf")
    adj = _dense_adj(_links_edges(graph.edge_index, _context(y, train), N), N + C)
    h, expected = torch.cat([x, model.class_x]), 0
    for conv in model.convs:
        h = _dense_layer(conv, h, adj)
        expected = expected + (h[:N] @ h[N:].T).softmax(1)
    torch.testing.assert_close(model.eval()(x, graph), expected)


def test_ff_scores_match_the_dense_twin():
    model, x, graph, y, train = _model("ff", theta=0.7)
    adj = _dense_adj(graph.edge_index, N)
    context = _context(y, train)
    expected = torch.zeros(N, C)
    for c in range(C):
        block = torch.full((N, C), 1 / C)
        block[:] = F.one_hot(torch.full((N,), c), C).float()  # every unlabelled node claims c
        block[train] = F.one_hot(context[train], C).float()
        h = torch.cat([x, block], 1)
        for conv in model.convs:
            h = _dense_layer(conv, h, adj)
            expected[:, c] += h.pow(2).mean(1) - 0.7
    torch.testing.assert_close(model.eval()(x, graph), expected)


def test_ff_vn_evaluated_nodes_claim_and_the_rest_stay_uniform():
    """Scoring the training nodes: they link to the candidate's class node, and nodes
    without a label link to none (the official evaluation of one split)."""
    model, x, graph, y, train = _model("ff-vn")
    expected = torch.zeros(N, C)
    for c in range(C):
        links = torch.full((N,), -1)
        links[train] = c
        adj = _dense_adj(_links_edges(graph.edge_index, links, N), N + C)
        h = torch.cat([x, model.class_x])
        for conv in model.convs:
            h = _dense_layer(conv, h, adj)
            expected[:, c] += h[:N].pow(2).mean(1) - model.theta
    torch.testing.assert_close(model.eval()(x, graph, evaluated=train), expected)


def test_ff_loss_is_the_official_bce_of_the_goodness():
    model, x, graph, y, train = _model("ff")
    adj = _dense_adj(graph.edge_index, N)
    wrong = model.wrong_classes()
    assert wrong.shape == (N, C - 1)
    assert (wrong[train] != y[train, None]).all()  # negatives are wrong classes
    assert (wrong[train].sort(1).values == torch.tensor(  # all of them, once each
        [sorted(set(range(C)) - {int(t)}) for t in y[train]])).all()
    assert (wrong[[1, 4]] == -1).all()
    expected = 0
    for k, labels in enumerate([_context(y, train)] + [wrong[:, i] for i in range(C - 1)]):
        block = torch.full((N, C), 1 / C)
        known = labels >= 0
        block[known] = F.one_hot(labels[known], C).float()
        g = _dense_layer(model.convs[0], torch.cat([x, block], 1), adj)[train].pow(2).sum(1) - 2
        term = F.binary_cross_entropy_with_logits(g, torch.full_like(g, float(k == 0)))
        expected = expected + (term if k == 0 else term / (C - 1))
    torch.testing.assert_close(model.greedy_loss(0, model.streams(x, graph)), expected)


def test_top2input_scores_match_the_dense_twin():
    model, x, graph, y, train = _model("sf-top2input", layers=3, test_time_steps=4)
    adj = _dense_adj(_links_edges(graph.edge_index, _context(y, train), N), N + C)
    top = torch.full((N + C, C), 1 / C)
    top[train] = F.one_hot(y[train], C).float()
    top[N:] = torch.eye(C)
    states = [torch.cat([x, model.class_x])]
    for j, conv in enumerate(model.convs):  # bottom-up, zero top-down input
        zero = torch.zeros(N + C, C if j == 2 else H)
        states.append(_dense_conv(conv, torch.cat([_unit(states[-1]), zero], 1), adj))
    states.append(top)
    expected = 0
    for step in range(4):
        for j in (0, 2, 1):
            pair = torch.cat([_unit(states[j]), _unit(states[j + 2])], 1)
            states[j + 1] = _dense_conv(model.convs[j], pair, adj)
        if step >= 2:
            expected = expected + sum((s[:N] @ s[N:].T).softmax(1) for s in states[1:4])
    torch.testing.assert_close(model.eval()(x, graph), expected)


def test_top2loss_loss_averages_the_output_with_the_states_above():
    model, x, graph, y, train = _model("sf-top2loss", layers=3)
    adj = _dense_adj(_links_edges(graph.edge_index, _context(y, train), N), N + C)
    # the official bottom_up: each layer reads the raw output below, the states are normed
    h = torch.cat([x, model.class_x])
    states = [_unit(h)]
    for conv in model.convs:
        h = _dense_conv(conv, h, adj)
        states.append(_unit(h))
    out = _dense_conv(model.convs[0], states[0], adj)
    mixed = (out + states[2] + states[3]) / 3
    expected = F.cross_entropy((mixed[:N] @ mixed[N:].T)[train], y[train])
    got_states, aug = model.top_states(x, graph)
    loss, new_state = model.top_loss(0, got_states, aug)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(new_state, _unit(out))


# -- no gradient crosses a layer ---------------------------------------------------------

def _layer_losses(model, x, graph):
    """Each layer's training loss, its inputs built as the training schedules build them."""
    if model.procedure in ("ff", "ff-vn", "sf"):
        streams, losses = model.streams(x, graph), []
        for j in range(model.num_layers):
            losses.append(model.greedy_loss(j, streams))
            streams = model.advance(j, streams)
        return losses
    with torch.no_grad():
        states, aug = model.top_states(x, graph)
    return [model.top_loss(j, states, aug)[0] for j in range(model.num_layers)]


def _crossing_gradients(model, losses, x=None):
    """(loss j, layer k != j) pairs where loss j has a gradient on layer k's parameters or
    on the input features."""
    crossing = []
    for j, loss in enumerate(losses):
        for k, conv in enumerate(model.convs):
            grads = torch.autograd.grad(loss, list(conv.parameters()), retain_graph=True,
                                        allow_unused=True)
            reached = any(g is not None and g.abs().sum() > 0 for g in grads)
            if reached != (k == j):
                crossing.append((j, k))
        if x is not None and loss.requires_grad:
            (gx,) = torch.autograd.grad(loss, x, retain_graph=True, allow_unused=True)
            if gx is not None:
                crossing.append((j, "x"))
    return crossing


@pytest.mark.parametrize("procedure", PROCEDURES)
def test_each_layer_loss_reaches_only_its_own_layer(procedure):
    model, x, graph, y, train = _model(procedure, layers=3)
    x = x.clone().requires_grad_()
    assert _crossing_gradients(model, _layer_losses(model, x, graph), x) == []


def test_the_isolation_check_sees_a_crossing_gradient():
    """The check above can fail: a loss on layer 2 of layer 1's undetached output is
    reported as crossing into layer 1."""
    model, x, graph, y, train = _model("sf")
    (h, aug), = model.streams(x, graph)
    first = model.layer(0, h, aug)
    leaky = model.sf_loss(model.layer(1, first, aug), train, y[train], N)
    own = model.greedy_loss(0, [(h, aug)])
    assert _crossing_gradients(model, [own, leaky]) == [(1, 0)]


def test_a_layers_saved_activations_do_not_grow_with_depth():
    """The bytes autograd keeps for layer j's loss are the same at depth 2 and 8."""
    def saved_bytes(layers):
        model, x, graph, y, train = _model("sf", layers=layers)
        streams = model.streams(x, graph)
        for j in range(layers - 1):
            streams = model.advance(j, streams)
        total = [0]

        def pack(t):
            total[0] += t.numel() * t.element_size()
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model.greedy_loss(layers - 1, streams)
        return total[0]
    assert saved_bytes(2) == saved_bytes(8) > 0


# -- state and bad input -----------------------------------------------------------------

def test_context_travels_with_the_state_dict():
    model, x, graph, y, train = _model("sf")
    twin = ForwardGNN("gcn", FEAT, H, C, 2, procedure="sf")
    twin.load_state_dict(model.state_dict())
    torch.testing.assert_close(twin.eval()(x, graph), model.eval()(x, graph))


@pytest.mark.parametrize("kwargs,match", [
    ({"procedure": "bp"}, "procedure must be one of"),
    ({"conv": "nope"}, "unknown conv 'nope'"),
    ({"out_channels": 1}, "classes"),
    ({"temperature": 0.0}, "temperature must be > 0"),
    ({"num_negs": 0}, "num_negs must be an integer >= 1"),
    ({"num_negs": [3]}, "num_negs must be an integer >= 1"),
    ({"temperature": "1"}, "temperature must be a number"),
    ({"seed": None}, "seed must be an integer >= 0"),
])
def test_bad_arguments(kwargs, match):
    args = {"conv": "gcn", "in_channels": FEAT, "hidden_channels": H, "out_channels": C,
            "num_layers": 2, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        ForwardGNN(**args)


def test_empty_relations_and_graphs_without_labels_are_handled():
    """A graph whose labelled nodes are none still predicts (uniform labels, no class
    links): a score per class, finite."""
    model, x, graph, y, train = _model("sf")
    model.set_context(N, torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long))
    out = model.eval()(x, graph)
    assert out.shape == (N, C) and torch.isfinite(out).all()


def test_bad_context_and_graphs():
    model, x, graph, y, train = _model("sf")
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\), got values in \[7, 7\]"):
        model.set_context(N, train, torch.full_like(train, 7))
    with pytest.raises(ValueError, match=r"index must lie in \[0, 12\)"):
        model.set_context(N, torch.tensor([12]), torch.tensor([0]))
    with pytest.raises(ValueError, match="same length"):
        model.set_context(N, train, y)
    small = Graph(torch.tensor([[0], [1]]), 4)
    with pytest.raises(ValueError, match="labels for 12 nodes but the graph has 4"):
        model(torch.randn(4, FEAT), small)
    with pytest.raises(ValueError, match="x has 5 rows but the graph has 12"):
        model(torch.randn(5, FEAT), graph)
    with pytest.raises(ValueError, match="evaluated= applies to the forward-forward"):
        model(x, graph, evaluated=train)
    ff = _model("ff")[0]
    with pytest.raises(ValueError, match=r"evaluated holds node 12, outside \[0, 12\)"):
        ff(x, graph, evaluated=torch.tensor([0, 12]))
    # fractional ids and labels were cast with .long(): 2.5 became node 2, 1.5 class 1
    with pytest.raises(ValueError, match="labels must hold whole numbers .* entry 0 is 1.5"):
        model.set_context(N, train, torch.full(train.shape, 1.5))
    with pytest.raises(ValueError, match="index must hold whole numbers .* entry 1 is 2.5"):
        model.set_context(N, torch.tensor([0.0, 2.5]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="evaluated must hold whole numbers .* entry 0 is 0.5"):
        ff(x, graph, evaluated=torch.tensor([0.5]))


@pytest.mark.parametrize("procedure", ["sf", "ff"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_layer_losses_under_autocast(procedure, dtype):
    """A layer's local loss and step under torch.autocast: within low precision's rounding
    of the float32 loss, with finite gradients."""
    model, x, graph, _, _ = _model(procedure)
    full = model.greedy_loss(0, model.streams(x, graph))
    with torch.autocast("cpu", dtype=dtype):
        streams = model.streams(x, graph)
        low = model.greedy_loss(0, streams)
        model.advance(0, streams)
    low.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    torch.testing.assert_close(low.float(), full, rtol=1e-2, atol=1e-3)


def test_a_graphs_edge_features_are_said_to_stay_off_the_class_node_graph():
    """The virtual-node procedures compute on a graph with class nodes, which carries no
    edge features (the official code reads none): a Graph that has some is warned, and the
    scores are those of the graph without them."""
    model, x, graph, y, train = _model("ff-vn")
    with_features = Graph(graph.edge_index, N, edge_attr=torch.randn(graph.num_edges, 2))
    with pytest.warns(UserWarning, match="edge_attr is not carried onto the graph with class "
                                         "nodes"):
        scores = model.eval()(x, with_features, evaluated=train)
    torch.testing.assert_close(scores, model(x, graph, evaluated=train))


# -- the official code, run (forwardgnn_oracle.py) -----------------------------------------

OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "forwardgnn_official.pt")


def _official_problem(case):
    data = case["data"]
    split = [m.nonzero().flatten() for m in (data["train_mask"], data["val_mask"],
                                              data["test_mask"])]
    return data["x"], Graph(data["edge_index"], data["x"].size(0)), data["y"], split


def _train_like_the_official(case, tmp_path, monkeypatch):
    """graphloc's ``fit`` for the official run's steps (one evaluation at the end, so the
    kept weights are the last ones), from the weights the official run started with."""
    procedure, conv, layers, seed = case["case"]
    build = train_module._build

    def from_the_fixture(*args, **kwargs):
        model = build(*args, **kwargs)
        model.load_state_dict(case["initial"])
        return model

    monkeypatch.setattr(train_module, "_build", from_the_fixture)
    if case["negatives"] is not None:  # the official draw of wrong classes
        monkeypatch.setattr(ForwardGNN, "wrong_classes", lambda self: case["negatives"])
    steps = case["steps"]  # per layer (greedy) or for the whole model (top-down)
    config = TrainConfig(model=conv, layers=layers, hidden=8, dropout=0.0, lr=1e-3,
                         weight_decay=5e-4, epochs=steps, eval_every=steps,
                         standardize=False, procedure=procedure, seed=seed)
    x, graph, y, split = _official_problem(case)
    history = fit((x, graph, y, split), config, out_dir=str(tmp_path), progress=False)
    model, _ = load_checkpoint(os.path.join(tmp_path, "best.pt"))
    return model, history


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "-".join(map(str, c["case"][:3])))
def test_forwardgnn_trains_and_predicts_as_the_official_code(case, tmp_path, monkeypatch):
    """The official node-classification classes run from their repository with the same
    initial weights, class-node features and negatives: after the same Adam steps (lr
    1e-3, weight decay 5e-4, the top2loss clip) every layer's weights, and then the
    official evaluation's scores on the validation nodes (training labels as context)."""
    model, _ = _train_like_the_official(case, tmp_path, monkeypatch)
    for conv, official in zip(model.convs, case["trained"], strict=True):
        for name, value in conv.state_dict().items():
            torch.testing.assert_close(value, official[name], rtol=2e-5, atol=2e-6,
                                       msg=lambda m, name=name: f"{name}: {m}")
    x, graph, _, (train, val, _) = _official_problem(case)
    model.eval()
    with torch.no_grad():
        if model.procedure in ("ff", "ff-vn"):
            scores = model(x, graph, evaluated=val)
        else:
            scores = model(x, graph)[val]
    torch.testing.assert_close(scores, case["scores"], rtol=2e-5, atol=2e-5)
