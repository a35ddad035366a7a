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
