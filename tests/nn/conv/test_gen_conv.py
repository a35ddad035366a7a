"""GENConv against PyG's: outputs and gradients with the same weights, over its options."""

import copy

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, parity_graph
from torch_geometric.utils import to_torch_coo_tensor

from graphloc import Graph
from graphloc.nn import GENConv, from_pyg
from graphloc.nn.aggr import PowerMeanAggregation

OPTIONS = [dict(), dict(aggr="softmax_sg"), dict(learn_t=True, t=0.5), dict(t=3.0),
           dict(aggr="mean"), dict(aggr="max"), dict(aggr="add"),
           dict(msg_norm=True), dict(msg_norm=True, learn_msg_scale=True), dict(norm=None),
           dict(norm="layer"), dict(norm="instance", num_layers=3), dict(num_layers=1),
           dict(num_layers=3, expansion=3), dict(bias=True), dict(eps=0.5),
           dict(aggr="power", learn_p=True, p=1.5), dict(aggr=["mean", "max"])]


@pytest.mark.parametrize("kwargs", OPTIONS)
@pytest.mark.parametrize("in_channels", [8, 6])  # 6: lin_src and lin_dst map to 8
@pytest.mark.parametrize("mode", ["train", "eval"])  # the MLP's BatchNorm differs
def test_gen_matches_pyg(kwargs, in_channels, mode):
    edge_index, n = parity_graph(40)
    graph = Graph(edge_index, num_nodes=n)
    torch.manual_seed(0)
    theirs = pyg.GENConv(in_channels, 8, **kwargs)
    ours = GENConv(in_channels, 8, **kwargs)
    getattr(theirs, mode)()
    getattr(ours, mode)()
    assert_parity(ours, theirs, lambda m, x: m(x, graph), lambda m, x: m(x, edge_index),
                  torch.randn(n, in_channels))


@pytest.mark.parametrize("edge_dim", [5, 8])  # 8: the edge features as they are
@pytest.mark.parametrize("kwargs", [dict(), dict(aggr="mean"), dict(msg_norm=True, t=2.0)])
def test_gen_with_edge_features_matches_pyg(edge_dim, kwargs):
    edge_index, n = parity_graph(41)
    graph = Graph(edge_index, num_nodes=n)
    edge_attr = torch.randn(edge_index.size(1), edge_dim, dtype=torch.float64,
                            requires_grad=True)
    torch.manual_seed(1)
    theirs, ours = pyg.GENConv(8, 8, edge_dim=edge_dim, **kwargs), \
        GENConv(8, 8, edge_dim=edge_dim, **kwargs)
    assert_parity(ours, theirs, lambda m, x: m(x, graph, edge_attr),
                  lambda m, x: m(x, edge_index, edge_attr), torch.randn(n, 8),
                  extra=(edge_attr,))


def test_gen_bipartite_sparse_and_lazy_calls_match_pyg():
    edge_index, n = parity_graph(42)
    src = edge_index.clone()
    src[0] = src[0] % 20  # 20 sources into n destinations
    x_src, x_dst = torch.randn(20, 5), torch.randn(n, 7)
    torch.manual_seed(2)
    theirs, ours = pyg.GENConv((5, 7), 8), GENConv((5, 7), 8)
    assert_parity(ours, theirs, lambda m, x: m((x, x_dst.double()), src, size=(20, n)),
                  lambda m, x: m((x, x_dst.double()), src, size=(20, n)), x_src)
    assert_parity(ours, theirs, lambda m, x: m((x, None), src, size=(20, n)),
                  lambda m, x: m((x, None), src, size=(20, n)), x_src)
    adj = to_torch_coo_tensor(edge_index.flip(0), size=(n, n))
    torch.manual_seed(3)
    theirs, ours = pyg.GENConv(8, 8, aggr="mean"), GENConv(8, 8, aggr="mean")
    assert_parity(ours, theirs, lambda m, x: m(x, adj.double()),  # its values not read
                  lambda m, x: m(x, adj.double()), torch.randn(n, 8))
    # an adj_t's values [E, D] are edge features, as PyG reads them (values [E] are not)
    edge_attr = torch.randn(edge_index.size(1), 5)
    adj = to_torch_coo_tensor(edge_index.flip(0), edge_attr, size=(n, n)).coalesce()
    torch.manual_seed(6)
    theirs, ours = pyg.GENConv(8, 8, edge_dim=5), GENConv(8, 8, edge_dim=5)
    assert_parity(ours, theirs, lambda m, x: m(x, adj.double()),
                  lambda m, x: m(x, adj.double()), torch.randn(n, 8))
    lazy = GENConv(-1, 8, edge_dim=-1)
    assert lazy(torch.randn(n, 6), edge_index, edge_attr).shape == (n, 8)


def test_gen_float32_agrees_with_pyg():
    """The softmax aggregation on the fused kernel in float32, to float32's tolerance."""
    edge_index, n = parity_graph(43)
    torch.manual_seed(4)
    theirs = pyg.GENConv(8, 8, learn_t=True).eval()
    ours = GENConv(8, 8, learn_t=True).eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 8)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("kwargs", [dict(), dict(learn_t=True), dict(aggr="softmax_sg"),
                                    dict(aggr="power"), dict(aggr="power", learn_p=True,
                                                             p=2.0),
                                    dict(aggr=["mean", "max"]),
                                    dict(edge_dim=5, msg_norm=True, learn_msg_scale=True),
                                    dict(norm="layer", num_layers=3, bias=True)])
def test_from_pyg_converts_gen(kwargs):
    edge_index, n = parity_graph(44)
    torch.manual_seed(5)
    theirs = pyg.GENConv(8, 8, **kwargs).double().eval()
    x = torch.randn(n, 8, dtype=torch.float64)
    edge_attr = torch.randn(edge_index.size(1), 5, dtype=torch.float64) \
        if "edge_dim" in kwargs else None
    ours = from_pyg(copy.deepcopy(theirs), example=(x, edge_index), strict=True)
    assert isinstance(ours, GENConv)
    if kwargs.get("aggr") == "power":  # graphloc's power mean, not PyG's module kept
        assert isinstance(ours.aggr_module, PowerMeanAggregation)
    torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr))


def test_gen_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"GENConv: norm must be one of \['batch', 'layer', "
                                         r"'instance', None\], got 'group'"):
        GENConv(8, 8, norm="group")
    for name, value in (("num_layers", 0), ("expansion", 1.5), ("out_channels", None),
                        ("edge_dim", 0)):
        with pytest.raises(ValueError, match=f"GENConv: {name} must be an integer >= 1"):
            GENConv(8, **{"out_channels": 8, name: value})
    edge_index, n = parity_graph(45)
    with pytest.raises(ValueError, match="GENConv: edge_attr has 3 features but x has 8"):
        GENConv(8, 8)(torch.randn(n, 8), edge_index, torch.randn(edge_index.size(1), 3))


@pytest.mark.parametrize("special", [float("nan"), float("inf"), -float("inf"), 1e30])
def test_gen_special_values_as_pyg(special):
    """NaN and infinities in a neighbour's features: PyG's outputs, NaN where PyG's are."""
    edge_index = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 0]])
    x = torch.randn(5, 4)
    x[1, 2] = special
    torch.manual_seed(7)
    theirs = pyg.GENConv(4, 4, norm=None).eval()
    ours = GENConv(4, 4, norm=None).eval()
    ours.load_state_dict(theirs.state_dict())
    want, got = theirs(x, edge_index), ours(x, edge_index)
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got.nan_to_num(0, 1e9, -1e9), want.nan_to_num(0, 1e9, -1e9),
                               rtol=1e-4, atol=1e-4)


def test_gen_wrong_dtype_and_indices_are_named():
    conv = GENConv(8, 8)
    with pytest.raises(TypeError, match="GENConv has torch.float32 parameters, but x is "
                                        "torch.float64"):
        conv(torch.randn(5, 8, dtype=torch.float64), torch.tensor([[0], [1]]))
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds 7 .* the graph has 5 nodes"):
        conv(torch.randn(5, 8), torch.tensor([[0], [7]]))
