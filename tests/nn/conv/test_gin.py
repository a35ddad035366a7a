import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import GINConv, GINEConv


def mlp(i, o):
    return torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))


@pytest.mark.parametrize("eps,train_eps", [(0.0, False), (0.3, True)])
def test_gin_matches_pyg(eps, train_eps):
    edge_index, n = parity_graph(5)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(GINConv(mlp(8, 6), eps, train_eps), pyg.GINConv(mlp(8, 6), eps, train_eps),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


@pytest.mark.parametrize("edge_dim", [None, 3])
@pytest.mark.parametrize("eps,train_eps", [(0.0, False), (0.3, True)])
def test_gine_matches_pyg(edge_dim, eps, train_eps):
    edge_index, n = parity_graph(6)
    width = 8 if edge_dim is None else edge_dim
    edge_attr = torch.randn(edge_index.size(1), width, dtype=torch.float64, requires_grad=True)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(GINEConv(mlp(8, 6), eps, train_eps, edge_dim),
                  pyg.GINEConv(mlp(8, 6), eps, train_eps, edge_dim),
                  lambda m, x: m(x, graph, edge_attr),
                  lambda m, x: m(x, edge_index, edge_attr), torch.randn(n, 8),
                  extra=(edge_attr,))


def test_gine_takes_edge_attr_from_the_graph_and_checks_it():
    edge_index, n = parity_graph(7)
    attr = torch.randn(edge_index.size(1), 4)
    conv = GINEConv(mlp(4, 4))
    x = torch.randn(n, 4)
    torch.testing.assert_close(conv(x, Graph(edge_index, n, edge_attr=attr)),
                               conv(x, edge_index, attr))
    with pytest.raises(ValueError, match="needs edge features"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="edge_attr has 3 features but x has 4"):
        conv(x, edge_index, torch.randn(edge_index.size(1), 3))
    with pytest.raises(ValueError, match="edge_attr has 2 rows"):
        conv(x, edge_index, torch.randn(2, 4))
    assert repr(GINConv(torch.nn.Linear(2, 2))).startswith("GINConv(nn=Linear")


@pytest.mark.parametrize("nn", [lambda: torch.nn.Linear(4, 8),
                                lambda: torch.nn.Sequential(torch.nn.Linear(4, 8),
                                                            torch.nn.ReLU())],
                         ids=["linear", "sequential"])
@pytest.mark.parametrize("cls", [GINConv, GINEConv])
def test_a_network_of_another_width_is_named_before_the_aggregation(cls, nn):
    """Features of 5 channels into a network whose first Linear takes 4: a ValueError
    naming the conv and both widths (torch's matmul error, after the aggregation, named
    neither); the same network on 4 channels runs, as PyG's."""
    edge_index, n = parity_graph(12)
    # GINE without edge_dim: edge features of x's width (with edge_dim, a width the edge
    # map does not give is named first, by test_inputs.py)
    edges = (lambda width: (torch.randn(edge_index.size(1), width),)) if cls is GINEConv \
        else (lambda width: ())
    conv = cls(nn())
    with pytest.raises(ValueError, match=rf"{cls.__name__}: x has 5 features, but nn's first "
                                         r"Linear takes 4"):
        conv(torch.randn(n, 5), edge_index, *edges(5))
    theirs = getattr(pyg, cls.__name__)(nn())
    theirs.load_state_dict(conv.state_dict())
    x, args = torch.randn(n, 4), edges(4)
    torch.testing.assert_close(conv(x, edge_index, *args), theirs(x, edge_index, *args))
