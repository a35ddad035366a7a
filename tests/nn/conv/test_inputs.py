"""The edge features a conv maps (graphloc/nn/conv/_inputs.py: mapped_edge_features and
relu_edge_messages): their width against the layer's edge_dim, and integer features."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import parity_graph

import graphloc.nn as gl


def _mlp():
    return torch.nn.Linear(8, 8)


EDGE_CONVS = {  # each built with edge_dim=3
    "GATConv": lambda: gl.GATConv(8, 4, edge_dim=3),
    "GATv2Conv": lambda: gl.GATv2Conv(8, 4, edge_dim=3),
    "TransformerConv": lambda: gl.TransformerConv(8, 4, edge_dim=3),
    "GINEConv": lambda: gl.GINEConv(_mlp(), edge_dim=3),
    "GENConv": lambda: gl.GENConv(8, 4, edge_dim=3),
    "PNAConv": lambda: gl.PNAConv(8, 4, ["sum"], ["identity"], torch.tensor([1, 2]),
                                  edge_dim=3),
    "ResGatedGraphConv": lambda: gl.ResGatedGraphConv(8, 4, edge_dim=3),
}


@pytest.mark.parametrize("name", sorted(EDGE_CONVS))
def test_edge_features_of_another_width_are_refused_by_name(name):
    """A width other than edge_dim failed in torch's matmul ("mat1 and mat2 shapes cannot
    be multiplied"), naming neither edge_attr nor edge_dim."""
    edge_index, n = parity_graph(101)
    x = torch.randn(n, 8)
    with pytest.raises(ValueError, match=f"{name}: edge_attr has .*7.* edge_dim"):
        EDGE_CONVS[name]()(x, edge_index, torch.randn(edge_index.size(1), 7))


@pytest.mark.parametrize("name", ["GINEConv", "GENConv", "PNAConv", "GATConv"])
def test_integer_edge_features_are_read_as_their_float_values(name):
    """Integer features (bond types, say) failed in GINE's, GENConv's and PNA's maps ("mat1
    and mat2 must have the same dtype"), and GAT's took the added loops' "mean" feature in
    integers (floored) before its map read them as floats: all now give the output of the
    same values as floats."""
    edge_index, n = parity_graph(102)
    x = torch.randn(n, 8)
    codes = torch.randint(0, 4, (edge_index.size(1), 3))
    torch.manual_seed(0)
    conv = EDGE_CONVS[name]().eval()
    torch.testing.assert_close(conv(x, edge_index, codes), conv(x, edge_index, codes.float()))


def test_gine_edge_map_output_must_match_the_node_width():
    """GINE maps edge features to its nn's input width; node features of another width
    failed adding the two, in torch's words."""
    edge_index, n = parity_graph(103)
    conv = gl.GINEConv(_mlp(), edge_dim=3)
    with pytest.raises(ValueError, match="GINEConv: edge_attr has 8 features but x has 5"):
        conv(torch.randn(n, 5), edge_index, torch.randn(edge_index.size(1), 3))


def test_matching_widths_still_give_pygs_outputs():
    edge_index, n = parity_graph(104)
    x, edge_attr = torch.randn(n, 8), torch.randn(edge_index.size(1), 3)
    ours, theirs = gl.GINEConv(_mlp(), edge_dim=3), pyg.GINEConv(_mlp(), edge_dim=3)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr))
