import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph
from graphloc.nn import CONVS, GNN, ChebConv, GCNConv, GINConv, SAGEConv, register_conv


def test_registry_builds_each_conv():
    assert {"gcn", "sage", "gat", "gin", "cheb"} <= set(CONVS)
    kinds = {"gcn": GCNConv, "sage": SAGEConv, "gin": GINConv, "cheb": ChebConv}
    for name, cls in kinds.items():
        model = GNN(name, 5, 8, 3, num_layers=3)
        assert all(isinstance(c, cls) for c in model.convs)
        widths = [(c.in_channels, c.out_channels) for c in model.convs
                  if hasattr(c, "in_channels")]
        assert widths in ([], [(5, 8), (8, 8), (8, 3)])
    with pytest.raises(ValueError, match="already registered"):
        register_conv("gcn")(GCNConv)


def test_gnn_equals_the_layers_composed_by_hand():
    edge_index = random_edge_index(20, 80, seed=40)
    graph = Graph(edge_index, num_nodes=20)
    model = GNN("sage", 4, 6, 2, num_layers=3, act="gelu", residual=True).eval()
    x = torch.randn(20, 4)
    c0, c1, c2 = model.convs
    h = torch.nn.functional.gelu(c0(x, graph))
    h = h + torch.nn.functional.gelu(c1(h, graph))
    torch.testing.assert_close(model(x, edge_index), c2(h, graph))


@pytest.mark.parametrize("conv", ["gcn", "sage", "gat", "gin", "cheb"])
def test_gnn_compiles_without_graph_breaks(conv):
    torch._dynamo.reset()
    graph = Graph(random_edge_index(30, 120, seed=41), num_nodes=30)
    model = GNN(conv, 4, 8, 3, num_layers=2, norm="layer")
    x = torch.randn(30, 4, requires_grad=True)
    eager = model(x, graph)
    explain = torch._dynamo.explain(model)(x, graph)
    assert explain.graph_break_count == 0
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x, graph), eager, rtol=1e-5, atol=1e-5)


def test_deep_gcn_trains():
    torch.manual_seed(0)
    graph = Graph(random_edge_index(200, 1200, seed=42), num_nodes=200).to_undirected()
    x, y = torch.randn(200, 8), torch.randint(0, 3, (200,))
    model = GNN("gcn", 8, 16, 3, num_layers=32, norm="layer", residual=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x, graph), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.8 * losses[0]


def test_gnn_bad_arguments():
    with pytest.raises(ValueError, match="unknown conv 'transformer'"):
        GNN("transformer", 2, 2, 2, 2)
    with pytest.raises(ValueError, match="num_layers must be >= 1"):
        GNN("gcn", 2, 2, 2, 0)
    with pytest.raises(ValueError, match="norm must be"):
        GNN("gcn", 2, 2, 2, 2, norm="group")
