import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import SAGEConv


@pytest.mark.parametrize("aggr", ["mean", "max", "sum"])
@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_sage_matches_pyg(aggr, root_weight, normalize, bias):
    edge_index, n = parity_graph(4)
    kwargs = dict(aggr=aggr, root_weight=root_weight, normalize=normalize, bias=bias)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(SAGEConv(8, 6, **kwargs), pyg.SAGEConv(8, 6, **kwargs),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


def test_sage_repr_and_bad_input():
    assert repr(SAGEConv(3, 4, aggr="max")) == "SAGEConv(3, 4, aggr=max)"
    with pytest.raises(ValueError, match="unknown aggregation 'middle'"):
        SAGEConv(3, 4, aggr="middle")
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        SAGEConv(3, 4)(torch.randn(2, 5), torch.tensor([[0], [1]]))
