"""Every conv is permutation equivariant: relabelling nodes permutes the output rows."""

import pytest
import torch
from helpers import CONV_LAYERS as LAYERS
from parity import parity_graph

from graphloc import Graph


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
