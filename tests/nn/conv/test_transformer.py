import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import TransformerConv


@pytest.mark.parametrize("heads,concat", [(1, True), (3, True), (3, False)])
@pytest.mark.parametrize("beta,root_weight", [(False, True), (True, True), (False, False)])
@pytest.mark.parametrize("bias", [True, False])
def test_transformer_conv_matches_pyg(heads, concat, beta, root_weight, bias):
    edge_index, n = parity_graph(20)
    kwargs = dict(heads=heads, concat=concat, beta=beta, root_weight=root_weight, bias=bias)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(TransformerConv(8, 5, **kwargs), pyg.TransformerConv(8, 5, **kwargs),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


@pytest.mark.parametrize("heads,concat", [(2, True), (2, False)])
def test_transformer_conv_with_edge_features_matches_pyg(heads, concat):
    edge_index, n = parity_graph(21)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64, requires_grad=True)
    kwargs = dict(heads=heads, concat=concat, edge_dim=3, beta=True)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(TransformerConv(8, 4, **kwargs), pyg.TransformerConv(8, 4, **kwargs),
                  lambda m, x: m(x, graph, edge_attr), lambda m, x: m(x, edge_index, edge_attr),
                  torch.randn(n, 8), extra=(edge_attr,))


@pytest.mark.parametrize("edge_dim", [None, 2])
def test_transformer_conv_attention_weights_match_pyg(edge_dim):
    edge_index, n = parity_graph(22)
    ours = TransformerConv(6, 4, heads=2, edge_dim=edge_dim)
    theirs = pyg.TransformerConv(6, 4, heads=2, edge_dim=edge_dim)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 6)
    edge_attr = torch.randn(edge_index.size(1), 2) if edge_dim else None
    out, (index, alpha) = ours(x, edge_index, edge_attr, return_attention_weights=True)
    ref_out, (ref_index, ref_alpha) = theirs(x, edge_index, edge_attr,
                                             return_attention_weights=True)
    torch.testing.assert_close(out, ref_out)
    assert torch.equal(index, ref_index)
    torch.testing.assert_close(alpha, ref_alpha)


def test_transformer_conv_dropout_and_determinism():
    edge_index, n = parity_graph(23)
    x = torch.randn(n, 4)
    torch.manual_seed(5)
    first = TransformerConv(4, 4, heads=2, dropout=0.5)
    torch.manual_seed(5)
    second = TransformerConv(4, 4, heads=2, dropout=0.5)
    first.eval(), second.eval()
    torch.testing.assert_close(first(x, edge_index), second(x, edge_index))
    first.train()
    torch.manual_seed(1)
    a = first(x, edge_index)
    torch.manual_seed(1)
    torch.testing.assert_close(first(x, edge_index), a)
    assert not torch.allclose(a, first(x, edge_index))


def test_transformer_conv_bad_input():
    edge_index, n = parity_graph(24)
    conv = TransformerConv(4, 4, edge_dim=2)
    with pytest.raises(ValueError, match="edge_dim but got no edge_attr"):
        conv(torch.randn(n, 4), edge_index)
    with pytest.raises(ValueError, match="edge_attr has 3 rows"):
        conv(torch.randn(n, 4), edge_index, torch.randn(3, 2))
    with pytest.raises(ValueError, match=r"shape \[N, 4\]"):
        conv(torch.randn(n, 5), edge_index)
    with pytest.raises(TypeError, match="floating-point"):
        conv(torch.ones(n, 4, dtype=torch.long), edge_index)
