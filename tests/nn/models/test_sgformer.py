import os

import pytest
import torch
from helpers import random_edge_index, train_losses
from torch_geometric.nn.models import SGFormer as PyGSGFormer

from graphloc import Graph
from graphloc.nn import SGFormer, SGFormerAttention, build_model


def test_attention_equals_the_dense_formula():
    attn = SGFormerAttention(6, heads=2, head_channels=4).double()
    x = torch.randn(30, 6, dtype=torch.float64)
    q = torch.nn.functional.normalize(attn.q(x).view(30, 2, 4), dim=-1)
    k = torch.nn.functional.normalize(attn.k(x).view(30, 2, 4), dim=-1)
    v = attn.v(x).view(30, 2, 4)
    scores = torch.einsum("nhm,lhm->hnl", q, k) + torch.eye(30, dtype=torch.float64) * 30
    expected = torch.einsum("hnl,lhd->nhd", scores, v) / scores.sum(-1).T.unsqueeze(-1)
    torch.testing.assert_close(attn(x), expected.mean(1))


@pytest.mark.parametrize("aggregate", ["add", "cat"])
def test_sgformer_matches_pyg(aggregate):
    edge_index = random_edge_index(40, 160, seed=30)
    kwargs = dict(trans_num_layers=2, trans_num_heads=2, gnn_num_layers=2,
                  aggregate=aggregate)
    ours, theirs = SGFormer(5, 8, 3, **kwargs), PyGSGFormer(5, 8, 3, **kwargs)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    ours, theirs = ours.eval(), theirs.eval()  # float32: PyG's attention fails in float64
    _assert_same_function(  # PyG's log_softmax outputs, as they are
        ours, theirs, torch.randn(40, 5), lambda x: ours(x, Graph(edge_index, 40)),
        lambda x: theirs(x, edge_index, torch.zeros(40, dtype=torch.long)))


def _assert_same_function(ours, theirs, x, run_ours, run_theirs):
    """The same outputs and the same gradients (x and every parameter) to 1e-4."""
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = run_ours(x1), run_theirs(x2)
    torch.testing.assert_close(out1, out2, rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(out1)
    g1 = torch.autograd.grad(out1, [x1, *ours.parameters()], grad)
    g2 = torch.autograd.grad(out2, [x2, *theirs.parameters()], grad)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def _pyg_twins(seed=0, **kwargs):
    torch.manual_seed(seed)
    kwargs = dict(trans_num_layers=2, trans_num_heads=2, gnn_num_layers=2) | kwargs
    theirs = PyGSGFormer(5, 8, 3, **{k: v for k, v in kwargs.items() if k != "pyg_padding"})
    ours = SGFormer(5, 8, 3, **kwargs)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    for module in theirs.modules():  # non-trivial norms, so every term is exercised
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return ours.eval(), theirs.eval()  # float32: PyG's attention fails in float64


def _graphs(sizes, seed=0):
    """Disjoint random graphs of ``sizes`` nodes as one edge_index, and a batch vector
    listing the nodes graph by graph, then shuffled (PyG's call takes any order)."""
    parts, start = [], 0
    for i, n in enumerate(sizes):
        parts.append(random_edge_index(n, 3 * n, seed=seed + i) + start)
        start += n
    batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    perm = torch.randperm(start, generator=torch.Generator().manual_seed(seed))
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(start)
    return inverse[torch.cat(parts, 1)], batch[perm], perm


def test_a_batch_of_graphs_is_pygs_call_and_each_graph_attends_to_itself():
    ours, theirs = _pyg_twins()
    sizes = [7, 12, 1, 9]
    edge_index, batch, perm = _graphs(sizes)
    x = torch.randn(sum(sizes), 5)
    out = ours(x, edge_index, batch)
    # the oracle: PyG's model on each graph alone (one graph: no padding in PyG either)
    for g in range(len(sizes)):
        nodes = (batch == g).nonzero().view(-1)
        keep = (batch[edge_index[0]] == g)
        local = torch.full((x.size(0),), -1, dtype=torch.long)
        local[nodes] = torch.arange(nodes.numel())
        alone = theirs(x[nodes], local[edge_index[:, keep]],
                       torch.zeros(nodes.numel(), dtype=torch.long))
        torch.testing.assert_close(out[nodes], alone, rtol=1e-4, atol=1e-5)
    for group in ("params1", "params2"):  # PyG's optimizer groups, in its order
        pairs = zip(getattr(ours, group), getattr(theirs, group), strict=True)
        assert all(torch.equal(a, b) for a, b in pairs)  # the same weights, in PyG's order
    # graphs of one size: PyG's padding is empty, so its batched call agrees too
    edge_index, batch, _ = _graphs([6, 6, 6], seed=5)
    x = torch.randn(18, 5)
    torch.testing.assert_close(ours(x, edge_index, batch), theirs(x, edge_index, batch),
                               rtol=1e-4, atol=1e-5)


def test_pyg_padding_gives_pygs_numbers_for_graphs_of_different_sizes():
    ours, theirs = _pyg_twins(pyg_padding=True)
    sizes = [7, 12, 1, 9]
    edge_index, batch, _ = _graphs(sizes, seed=2)
    x = torch.randn(sum(sizes), 5)
    _assert_same_function(ours, theirs, x, lambda x: ours(x, edge_index, batch),
                          lambda x: theirs(x, edge_index, batch))
    # and the padding matters there: each graph on its own gives other numbers
    expected = theirs(x, edge_index, batch)
    ours.pyg_padding = False
    assert not torch.allclose(ours(x, edge_index, batch), expected, atol=1e-3)


def test_attention_takes_pygs_dense_call_with_zero_rows_and_a_mask():
    from torch_geometric.nn.attention import SGFormerAttention as PyGAttention
    torch.manual_seed(0)
    theirs = PyGAttention(6, heads=2, head_channels=4)
    ours = SGFormerAttention(6, heads=2, head_channels=4)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 5, 6)
    x[0, 2] = 0  # a zero row: bias-free projections make its q and k exactly 0
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    for m in (None, mask):
        torch.testing.assert_close(ours(x, m), theirs(x.clone(), m), rtol=1e-5, atol=1e-6)
    # [N, channels] with a batch vector: each graph alone, whatever the order of its rows
    flat, batch = x[mask], torch.arange(3).repeat_interleave(mask.sum(1))
    perm = torch.randperm(flat.size(0))
    out = ours(flat[perm], batch=batch[perm])
    alone = torch.cat([ours(x[g, mask[g]]) for g in range(3)])
    torch.testing.assert_close(out, alone[perm])
    torch.testing.assert_close(ours(x[0, :4]), theirs(x[:1, :4].clone())[0])


@pytest.mark.parametrize("call, message", [
    (lambda a: a(torch.randn(5, 6), batch=torch.zeros(4, dtype=torch.long)),
     r"batch must be \[N\] = \[5\]"),
    (lambda a: a(torch.randn(5, 6), batch=torch.tensor([0, 0, -1, 1, 1])),
     "batch holds -1"),
    (lambda a: a(torch.randn(5, 6), batch=torch.zeros(5)), "batch must be an integer"),
    (lambda a: a(torch.randn(2, 5, 6), torch.ones(2, 4, dtype=torch.bool)),
     r"mask must be \[B, N\] = \[2, 5\]"),
    (lambda a: a(torch.randn(5, 6), torch.ones(5, dtype=torch.bool)), "mask goes with"),
    (lambda a: a(torch.randn(2, 5, 6), batch=torch.zeros(10, dtype=torch.long)),
     "batch goes with"),
    (lambda a: a(torch.randn(5, 7)), r"x must be \[N, 6\] or \[B, N, 6\], got \[5, 7\]"),
])
def test_attention_bad_input_is_named(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call(SGFormerAttention(6, heads=2, head_channels=4))


@pytest.mark.parametrize("special", [float("nan"), float("-inf")])
def test_a_non_finite_feature_stays_in_its_own_graph(special):
    """NaN or -inf in one node of one graph: torch's arithmetic within that graph's
    attention (the same as the graph run alone), and the other graphs of the batch keep
    their own finite outputs (each as run alone); the padding never carries it."""
    attn = SGFormerAttention(6, heads=2, head_channels=4)
    x, batch = torch.randn(9, 6), torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    x[1, 3] = special
    out = attn(x, batch=batch)
    for g in range(3):
        rows = batch == g
        torch.testing.assert_close(out[rows], attn(x[rows]), equal_nan=True)
    assert torch.isfinite(out[batch != 0]).all() and not torch.isfinite(out[batch == 0]).all()


def test_the_models_batch_is_checked_even_without_attention_layers():
    model = SGFormer(5, 8, 3, trans_num_layers=0)
    edge_index = random_edge_index(6, 12, seed=1)
    with pytest.raises(ValueError, match=r"SGFormer: batch must be \[N\] = \[6\]"):
        model(torch.randn(6, 5), edge_index, torch.zeros(5, dtype=torch.long))


def test_empty_graph_ids_and_empty_inputs():
    attn = SGFormerAttention(6, heads=1, head_channels=4)
    x = torch.randn(6, 6, requires_grad=True)
    gaps = torch.tensor([0, 0, 5, 5, 5, 9])  # ids 1 to 4 and 6 to 8 hold no node
    out = attn(x, batch=gaps)
    torch.testing.assert_close(out, attn(x, batch=torch.tensor([0, 0, 1, 1, 1, 2])))
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert attn(torch.randn(0, 6), batch=torch.zeros(0, dtype=torch.long)).shape == (0, 4)
    assert attn(torch.randn(0, 6)).shape == (0, 4)


def test_sgformer_registered_trains_and_bad_input():
    torch.manual_seed(0)
    graph = Graph(random_edge_index(100, 400, seed=31), 100).to_undirected()
    x, y = torch.randn(100, 4), torch.randint(0, 3, (100,))
    model = build_model("sgformer", 4, 16, 3, num_layers=2, dropout=0.1)
    assert len(model.graph_conv.convs) == 2
    losses = train_losses(model, x, graph, y, steps=30)
    assert losses[-1] < 0.7 * losses[0]
    with pytest.raises(ValueError, match="aggregate"):
        SGFormer(4, 8, 2, aggregate="max")
    with pytest.raises(TypeError, match="gnn_use_init must be True or False, got 'yes'"):
        SGFormer(4, 8, 2, gnn_use_init="yes")
    with pytest.raises(ValueError, match=r"shape \[N, 4\]"):
        model(torch.randn(100, 3), graph)


def _official_citynetworks_forward(model: SGFormer, x: torch.Tensor, edge_index) -> torch.Tensor:
    """The City-Networks baseline's eval-mode forward written from its benchmark/sgformer.py
    and configs.py (trans_num_layers=1, trans_use_act=False, graph_weight=0.8), with a
    dense adjacency; only the weights are taken from ``model``."""
    n = x.size(0)
    t, g = model.trans_conv, model.graph_conv
    h = torch.relu(t.bns[0](t.fcs[0](x)))
    attn = t.attns[0]
    heads, m = attn.heads, attn.head_channels
    qs, ks = attn.q(h).reshape(n, heads, m), attn.k(h).reshape(n, heads, m)
    vs = attn.v(h).reshape(n, heads, m)
    qs, ks = qs / torch.norm(qs, p=2), ks / torch.norm(ks, p=2)  # one norm per tensor
    numerator = torch.einsum("nhm,hmd->nhd", qs, torch.einsum("lhm,lhd->hmd", ks, vs)) + n * vs
    normaliser = torch.einsum("nhm,hm->nh", qs, ks.sum(0)).unsqueeze(-1) + n
    x1 = t.bns[1]((((numerator / normaliser).mean(1)) + h) / 2)  # no activation after it
    row, col = edge_index
    d = torch.bincount(col, minlength=n).to(x.dtype)  # in-degree, no self-loops
    value = torch.nan_to_num(d[col].rsqrt() * d[row].rsqrt(), nan=0.0, posinf=0.0)
    adj = torch.zeros(n, n, dtype=x.dtype).index_put_((col, row), value, accumulate=True)
    first = y = torch.relu(g.bns[0](g.fcs[0](x)))
    for conv, norm in zip(g.convs, g.bns[1:], strict=True):
        w = (adj @ y) @ conv.lin.weight.T + conv.bias  # GraphConvLayer: propagate, then W
        y = torch.relu(norm(w)) + first
    return model.fc(0.8 * y + 0.2 * x1)


def test_citynetworks_variant_equals_the_official_formula():
    edge_index = random_edge_index(50, 150, seed=3)
    edge_index = torch.cat([edge_index, edge_index.flip(0)], 1)  # road graphs are undirected
    torch.manual_seed(0)
    model = build_model("sgformer-citynetworks", 5, 8, 3, num_layers=3).double().eval()
    for module in model.modules():  # non-trivial norms, so every term is exercised
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    x = torch.randn(50, 5, dtype=torch.float64)
    expected = _official_citynetworks_forward(model, x, edge_index)
    torch.testing.assert_close(model(x, Graph(edge_index, 50)), expected)
    assert len(model.trans_conv.attns) == 1 and len(model.graph_conv.convs) == 3
    assert model.graph_weight == 0.8 and model.trans_conv.dropout == 0.5
    assert model.graph_conv.dropout == 0.2
    # the two variants differ on the same weights (the review measured 6.5% on 500 nodes)
    pyg_style = SGFormer(5, 8, 3, trans_num_layers=1, gnn_num_layers=3, graph_weight=0.8)
    assert set(pyg_style.state_dict()) < set(model.state_dict())  # + attention biases
    with pytest.raises(ValueError, match="variant must be one of"):
        SGFormer(5, 8, 3, variant="official")


OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "sgformer_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: "layers{}-directed{}-init{}".format(*c["case"][1:]))
def test_citynetworks_variant_equals_the_official_code_run_on_the_same_weights(case):
    """City-Networks' ``benchmark/sgformer.py`` run from its repository
    (``sgformer_oracle.py``; its configs' arguments, and ``gnn_use_init`` in two cases) on
    the weights and batch-norm statistics of ``variant="citynetworks"``, eval mode, float32
    as the official."""
    _, layers, _, use_init = case["case"]
    model = SGFormer(5, 8, 3, variant="citynetworks", gnn_num_layers=layers,
                     gnn_use_init=use_init).eval()
    model.load_state_dict(case["state"])
    out = model(case["x"], Graph(case["edge_index"], num_nodes=case["x"].size(0)))
    torch.testing.assert_close(out, case["official"], rtol=1e-5, atol=1e-6)
