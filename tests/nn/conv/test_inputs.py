"""The calls a conv reads (graphloc/nn/conv/_inputs.py): the edge features it maps
(mapped_edge_features and relu_edge_messages, their width against the layer's edge_dim, and
integer features), a static batch's edges, and the node axis a layer's node_dim names."""

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


STATIC_CONVS = {"GCNConv": lambda: gl.GCNConv(8, 4), "SAGEConv": lambda: gl.SAGEConv(8, 4),
                "GATConv": lambda: gl.GATConv(8, 4), "GINConv": lambda: gl.GINConv(_mlp())}


@pytest.mark.parametrize("name", sorted(STATIC_CONVS))
def test_a_static_batch_refuses_non_integer_edges(name):
    """The static copies were offset from edge_index.long(): float indices were truncated
    (0.5 read as node 0) and booleans read as 0 and 1, where an [N, F] call refuses both."""
    conv = STATIC_CONVS[name]()
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    x = torch.randn(2, 3, 8)
    for bad in (edge_index + 0.5, edge_index.float(), edge_index.bool()):
        with pytest.raises(TypeError, match=f"{name}: edge_index must have an integer dtype"):
            conv(x, bad)
        with pytest.raises(TypeError, match="edge_index must have an integer dtype"):
            conv(x[0], bad)


@pytest.mark.parametrize("name", sorted(STATIC_CONVS))
def test_a_static_batchs_out_of_range_edge_is_named_at_the_callers_column(name):
    """Checked after the copies were offset, the error named an index and a column of the
    copies (edge_index[0] holds 12 at column 7) that the caller never passed."""
    conv = STATIC_CONVS[name]()
    edge_index = torch.tensor([[0, 1, 2, 5], [1, 2, 0, 1]])
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds 5 at column 3, but each "
                                         r"feature set of the static batch has 3 nodes"):
        conv(torch.randn(2, 3, 8), edge_index)
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds -1 at column 0; indices"):
        conv(torch.randn(2, 3, 8), torch.tensor([[0], [-1]]))


@pytest.mark.parametrize("name", sorted(STATIC_CONVS))
@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_a_static_batch_takes_unsigned_edges_as_an_nf_call_does(name, dtype):
    """An unsigned edge_index gives the static batch the outputs of int64 edges (it raised
    torch's NotImplementedError from aminmax); an out-of-range id is named as passed."""
    conv = STATIC_CONVS[name]()
    edges = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(conv(x, edges.to(dtype)), conv(x, edges))
    big = 2**63 + 5 if dtype == torch.uint64 else torch.iinfo(dtype).max
    with pytest.raises(ValueError, match=rf"{name}: edge_index\[0\] holds {big} at column 1"):
        conv(x, torch.tensor([[0, big], [1, 0]], dtype=dtype))


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv", "GINConv"])
def test_node_dim_zero_reads_a_static_batch_nodes_first(name):
    """node_dim=0 (PyG's MessagePassing attribute) reads [N, B, F]: each x[:, b] is one
    feature set, the oracle being the layer on that [N, F] alone."""
    edge_index, n = parity_graph(21)
    conv = STATIC_CONVS[name]()
    x = torch.randn(n, n, 8)  # B = N: reading the wrong axis raises nothing
    expected = torch.stack([conv(x[:, b], edge_index) for b in range(n)], dim=1)
    conv.node_dim = 0
    torch.testing.assert_close(conv(x, edge_index), expected)
    conv.node_dim = -2  # [B, N, F]: each x[b]
    torch.testing.assert_close(conv(x, edge_index),
                               torch.stack([conv(x[b], edge_index) for b in range(n)]))


def test_a_static_batch_compiles_fullgraph():
    """The static copy's edge check reads values, so it is skipped while torch.compile
    traces (the kernels check every index they read); it broke fullgraph compiles of
    [B, N, F] calls until it was (2026-12-05). Oracle: one eager call per feature set."""
    torch._dynamo.reset()
    edge_index, n = parity_graph(22)
    conv = gl.GCNConv(8, 4)
    x = torch.randn(2, n, 8)
    expected = torch.stack([conv(x[b], edge_index) for b in range(2)])
    torch.testing.assert_close(torch.compile(conv, fullgraph=True)(x, edge_index), expected)
