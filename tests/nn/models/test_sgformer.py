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
    x = torch.randn(40, 5)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1 = ours(x1, Graph(edge_index, 40)).log_softmax(-1)
    out2 = theirs(x2, edge_index, torch.zeros(40, dtype=torch.long))
    torch.testing.assert_close(out1, out2, rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(out1)
    g1 = torch.autograd.grad(out1, [x1, *ours.parameters()], grad)
    g2 = torch.autograd.grad(out2, [x2, *theirs.parameters()], grad)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


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
