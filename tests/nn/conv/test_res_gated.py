"""ResGatedGraphConv against PyG's ResGatedGraphConv (values and gradients, edge features
included) and a dense re-implementation of the paper's formula; its inputs' errors; from_pyg."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import ResGatedGraphConv, from_pyg


@pytest.mark.parametrize("act", [torch.nn.Sigmoid(), torch.nn.Tanh(), torch.nn.PReLU()],
                         ids=["sigmoid", "tanh", "prelu"])
@pytest.mark.parametrize("root_weight,bias", [(True, True), (False, True), (True, False)])
def test_matches_pyg(act, root_weight, bias):
    edge_index, n = parity_graph(41)
    kwargs = dict(act=act, root_weight=root_weight, bias=bias)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(ResGatedGraphConv(8, 5, **kwargs), pyg.ResGatedGraphConv(8, 5, **kwargs),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


@pytest.mark.parametrize("act", [torch.nn.Sigmoid(), torch.nn.ReLU()], ids=["sigmoid", "relu"])
def test_edge_features_match_pyg(act):
    """PyG maps [x, e] per edge; graphloc splits each map into its node and edge parts."""
    edge_index, n = parity_graph(42)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64, requires_grad=True)
    kwargs = dict(act=act, edge_dim=3)
    graph = Graph(edge_index, num_nodes=n, edge_attr=edge_attr)
    assert_parity(ResGatedGraphConv(8, 5, **kwargs), pyg.ResGatedGraphConv(8, 5, **kwargs),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index, edge_attr),
                  torch.randn(n, 8), extra=(edge_attr,))


@pytest.mark.parametrize("edge_dim", [None, 2])
def test_bipartite_pairs_match_pyg(edge_dim):
    src = torch.arange(20)
    edge_index = torch.stack([src, src % 7])
    edge_attr = torch.randn(20, 2, dtype=torch.float64) if edge_dim else None
    x_dst = torch.randn(7, 5, dtype=torch.float64)
    extra = () if edge_attr is None else (edge_attr,)
    assert_parity(ResGatedGraphConv((8, 5), 4, edge_dim=edge_dim),
                  pyg.ResGatedGraphConv((8, 5), 4, edge_dim=edge_dim),
                  lambda m, x: m((x, x_dst), edge_index, *extra),
                  lambda m, x: m((x, x_dst), edge_index, *extra), torch.randn(20, 8))


def test_the_papers_formula_on_a_dense_adjacency():
    """x'_i = W1 x_i + sum_j A_ij sigmoid(W3 x_i + W4 x_j) * W2 x_j, A_ij the number of
    edges j -> i (parallel edges count, a loop is an edge like any other)."""
    edge_index, n = parity_graph(43)
    conv = ResGatedGraphConv(8, 5).double()
    x = torch.randn(n, 8, dtype=torch.float64)
    A = torch.zeros(n, n, dtype=torch.float64).index_put_(
        (edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.float64),
        accumulate=True)
    key, query, value = conv.lin_key(x), conv.lin_query(x), conv.lin_value(x)
    gate = torch.sigmoid(key[:, None, :] + query[None, :, :])  # [i, j, C]
    dense = (A[:, :, None] * gate * value[None, :, :]).sum(1) + conv.lin_skip(x) + conv.bias
    torch.testing.assert_close(conv(x, edge_index), dense)


def test_static_batches_with_edge_features_are_each_set_on_its_own():
    edge_index, n = parity_graph(44)
    edge_attr = torch.randn(edge_index.size(1), 2)
    conv = ResGatedGraphConv(8, 6, edge_dim=2)
    x = torch.randn(3, n, 8)
    expected = torch.stack([conv(x[b], edge_index, edge_attr) for b in range(3)])
    torch.testing.assert_close(conv(x, edge_index, edge_attr), expected)


def test_lazy_width_with_edge_features():
    edge_index, n = parity_graph(45)
    edge_attr = torch.randn(edge_index.size(1), 2)
    lazy, fixed = ResGatedGraphConv(-1, 6, edge_dim=2), ResGatedGraphConv(8, 6, edge_dim=2)
    x = torch.randn(n, 8)
    lazy(x, edge_index, edge_attr)  # takes its widths: 8 + 2 per map
    lazy.load_state_dict(fixed.state_dict())
    torch.testing.assert_close(lazy(x, edge_index, edge_attr), fixed(x, edge_index, edge_attr))


def test_bad_calls_are_refused_by_name():
    edge_index, n = parity_graph(46)
    x = torch.randn(n, 8)
    with pytest.raises(ValueError, match="built with edge_dim=2 but the call has no edge_attr"):
        ResGatedGraphConv(8, 6, edge_dim=2)(x, edge_index)
    with pytest.raises(ValueError, match="built without edge_dim, so the edge_attr"):
        ResGatedGraphConv(8, 6)(x, edge_index, torch.randn(edge_index.size(1), 2))
    E = edge_index.size(1)
    with pytest.raises(ValueError, match=rf"edge_attr has shape \[{E}, 3\] but edge_dim is 2"):
        ResGatedGraphConv(8, 6, edge_dim=2)(x, edge_index, torch.randn(E, 3))
    with pytest.raises(ValueError, match=f"edge_attr has 7 rows but the graph has {E} edges"):
        ResGatedGraphConv(8, 6, edge_dim=2)(x, edge_index, torch.randn(7, 2))
    with pytest.raises(ValueError, match="needs destination features"):
        ResGatedGraphConv(8, 6)((x, None), edge_index)
    with pytest.raises(TypeError, match="act must be a callable gate function, got None"):
        ResGatedGraphConv(8, 6, act=None)
    with pytest.raises(ValueError, match="edge_dim must be an integer >= 1, got 0"):
        ResGatedGraphConv(8, 6, edge_dim=0)
    # widths named (1.5, None and -2 failed inside torch.empty; 0 built a zero-width layer)
    for width, given in ((0, "0"), (1.5, "1.5"), (None, "None"), (-2, "-2")):
        with pytest.raises(ValueError, match=f"out_channels must be an integer >= 1, got "
                                             f"{given}"):
            ResGatedGraphConv(8, width)
        with pytest.raises(ValueError, match=f"in_channels must be an integer >= 1, got "
                                             f"{given}"):
            ResGatedGraphConv(width, 6)


def test_from_pyg_converts_it_inside_a_model():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.ResGatedGraphConv(8, 16, edge_dim=3)
            self.conv2 = pyg.ResGatedGraphConv(16, 4, act=torch.nn.Tanh(), edge_dim=3)

        def forward(self, x, edge_index, edge_attr):
            return self.conv2(self.conv1(x, edge_index, edge_attr).relu(), edge_index,
                              edge_attr)

    edge_index, n = parity_graph(47)
    example = (torch.randn(n, 8), edge_index, torch.randn(edge_index.size(1), 3))
    model = Model()
    ours = from_pyg(model, example=example)
    assert ours.pyg_conversion["converted"] == ["conv1", "conv2"]
    assert isinstance(ours.conv1, ResGatedGraphConv)
    torch.testing.assert_close(ours(*example), model(*example))
    with pytest.warns(UserWarning, match="aggr='mean'"):
        kept = from_pyg(pyg.ResGatedGraphConv(8, 4, aggr="mean"), example=example[:2])
    assert isinstance(kept, pyg.ResGatedGraphConv)  # PyG's own mean, kept
