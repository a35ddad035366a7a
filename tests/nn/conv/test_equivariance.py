"""Every conv is permutation equivariant: relabelling nodes permutes the output rows."""

import pytest
import torch
from parity import parity_graph

from graphloc import Graph
from graphloc.nn import (
    ChebConv,
    GATConv,
    GCNConv,
    GINConv,
    GINEConv,
    LiftConv,
    SAGEConv,
    TransformerConv,
)

LAYERS = {
    "gcn": lambda: GCNConv(5, 4),
    "sage-max": lambda: SAGEConv(5, 4, aggr="max"),
    "gat": lambda: GATConv(5, 2, heads=2, edge_dim=3),
    "gin": lambda: GINConv(torch.nn.Linear(5, 4)),
    "gine": lambda: GINEConv(torch.nn.Linear(5, 4), edge_dim=3),
    "cheb": lambda: ChebConv(5, 4, K=3),
    "transformer": lambda: TransformerConv(5, 2, heads=2, edge_dim=3, beta=True),
    "transformer-fused": lambda: TransformerConv(5, 4, heads=2, concat=False),
    "lift": lambda: LiftConv(5),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_permutation_equivariance(name):
    edge_index, n = parity_graph(13)
    conv = LAYERS[name]().double().eval()
    x = torch.randn(n, 5, dtype=torch.float64)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64)
    perm = torch.randperm(n)
    new_id = torch.empty_like(perm)
    new_id[perm] = torch.arange(n)
    edge_order = torch.randperm(edge_index.size(1))  # edge order must not matter either
    original = Graph(edge_index, num_nodes=n, edge_attr=edge_attr)
    relabelled = Graph(new_id[edge_index][:, edge_order], num_nodes=n,
                       edge_attr=edge_attr[edge_order])
    torch.testing.assert_close(conv(x[perm], relabelled), conv(x, original)[perm])
