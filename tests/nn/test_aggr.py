"""graphloc.nn.aggr against PyG's aggregations (same weights, through SAGEConv, whose
parameter names they share) and, for the packed LSTM, a per-node LSTM oracle."""

import copy

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import classes_with_true_false_options, true_false_options
from parity import assert_parity, parity_graph
from torch_geometric.utils import sort_edge_index

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import aggr


class _PygSAGE(pyg.SAGEConv):
    """PyG's SAGEConv under its own class: PyG keeps state per class (its fused-propagate
    decision), which an LCM instance would change for every later SAGEConv of the run."""


class _PygGIN(pyg.GINConv):
    """PyG's GINConv, likewise."""


def sorted_graph(seed):
    edge_index, n = parity_graph(seed)
    return sort_edge_index(edge_index, sort_by_row=False), n


@pytest.mark.parametrize("name,kwargs", [
    ("var", {}), ("std", {}), ("softmax", {}), ("softmax", {"learn": True, "t": 0.5}),
    ("lstm", {}), ("min", {}), ("max", {}), ("powermean", {"p": 2.5}),
    ("powermean", {"learn": True, "p": 0.7, "clamp_max": None}), ("mul", {}),
])
def test_single_aggregations_match_pyg(name, kwargs):
    edge_index, n = sorted_graph(21)
    extra = {"aggr_kwargs": kwargs} if kwargs else {}  # PyG's lstm path needs a dict or none
    ours = gl.SAGEConv(8, 6, aggr=name, **extra)
    theirs = _PygSAGE(8, 6, aggr=name, **extra)
    assert_parity(ours, theirs, lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


@pytest.mark.parametrize("mode,mode_kwargs", [
    ("cat", None), ("proj", {"in_channels": 8, "out_channels": 16}),
    ("attn", {"in_channels": 8, "out_channels": 16, "num_heads": 4}),
    ("sum", None), ("max", None), ("std", None),
])
def test_multi_aggregation_matches_pyg(mode, mode_kwargs):
    edge_index, n = sorted_graph(22)
    aggr_kwargs = {"mode": mode, "mode_kwargs": mode_kwargs,
                   "aggrs_kwargs": [{}, {}, {}, {"learn": True, "t": 1}]}
    names = ["mean", "max", "sum", "softmax"]
    ours = gl.SAGEConv(8, 6, aggr=names, aggr_kwargs=dict(aggr_kwargs))
    theirs = _PygSAGE(8, 6, aggr=names, aggr_kwargs=dict(aggr_kwargs))
    assert_parity(ours, theirs, lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


def test_a_pyg_aggregation_module_runs_inside_graphloc():
    edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
    module = pyg.MLPAggregation(8, 8, max_num_elements=2, num_layers=1)
    ours = gl.SAGEConv(8, 6, aggr=module)
    theirs = _PygSAGE(8, 6, aggr=pyg.MLPAggregation(8, 8, max_num_elements=2,
                                                        num_layers=1))
    assert_parity(ours, theirs, lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(4, 8))


def test_project_matches_pyg():
    edge_index, n = sorted_graph(23)
    assert_parity(gl.SAGEConv(8, 6, project=True), _PygSAGE(8, 6, project=True),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))


def test_packed_lstm_stops_at_each_nodes_last_neighbour():
    edge_index, n = sorted_graph(24)
    graph = Graph(edge_index, num_nodes=n)
    lstm_aggr = aggr.LSTMAggregation(5, 7, padded=False).double()
    x = torch.randn(n, 5, dtype=torch.float64)
    out = lstm_aggr(graph, x)
    for node in range(n):
        neighbours = edge_index[0][edge_index[1] == node]
        if neighbours.numel() == 0:
            assert out[node].abs().max() == 0
            continue
        expected = lstm_aggr.lstm(x[neighbours].unsqueeze(0))[0][0, -1]
        torch.testing.assert_close(out[node], expected)
    assert torch.autograd.gradcheck(
        lambda t: lstm_aggr(graph, t), (x[:, :].clone().requires_grad_(),), atol=1e-6)


def test_order_dependent_aggregations_and_bad_names_are_refused():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="'index' tensor is not sorted"):
        gl.SAGEConv(8, 6, aggr="lstm")(x, torch.tensor([[0, 1, 2, 3], [1, 0, 1, 0]]))
    with pytest.raises(ValueError, match="unknown aggregation 'nope'"):
        aggr.resolve("nope")
    with pytest.raises(ValueError, match="mode 'proj' needs in_channels and out_channels"):
        aggr.MultiAggregation(["mean", "max"], mode="proj")


def lcm_graph(seed, hub=0):
    """Sorted edges with isolated nodes, degree-1 rows and optionally a hub (node 0)."""
    from helpers import random_edge_index
    edge_index = random_edge_index(40, 150, seed=seed, hub_degree=hub)
    return sort_edge_index(edge_index, sort_by_row=False), 48


@pytest.mark.parametrize("project", [True, False])
@pytest.mark.parametrize("hub", [0, 300])
def test_lcm_matches_pyg_with_its_padding(project, hub):
    edge_index, n = lcm_graph(31, hub)
    graph = Graph(edge_index, num_nodes=n)
    ours = aggr.LCMAggregation(6 if project else 5, 5, project=project)
    theirs = pyg.LCMAggregation(6 if project else 5, 5, project=project)
    assert_parity(ours, theirs, lambda m, x: m(graph, x),
                  lambda m, x: m(x[edge_index[0]], edge_index[1], dim_size=n),
                  torch.randn(n, 6 if project else 5))


def test_lcm_unpadded_is_pyg_on_each_node_alone():
    edge_index, n = lcm_graph(32, hub=70)
    graph = Graph(edge_index, num_nodes=n)
    ours = aggr.LCMAggregation(4, 4, project=False, padded=False).double()
    theirs = pyg.LCMAggregation(4, 4, project=False).double()
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(n, 4, dtype=torch.float64)
    out = ours(graph, x)
    for node in range(n):
        neighbours = edge_index[0][edge_index[1] == node]
        if neighbours.numel() == 0:
            assert out[node].abs().max() == 0
            continue
        alone = theirs(x[neighbours], torch.zeros(neighbours.numel(), dtype=torch.long),
                       dim_size=1)
        torch.testing.assert_close(out[node], alone[0])


def test_lcm_wherever_an_aggregation_is_chosen():
    edge_index, n = lcm_graph(33)
    kwargs = {"in_channels": 8, "out_channels": 8}
    assert_parity(gl.SAGEConv(8, 6, aggr="lcm"),
                  _PygSAGE(8, 6, aggr="lcm", aggr_kwargs=dict(kwargs)),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6))
    assert_parity(gl.GINConv(mlp, aggr="lcm", aggr_kwargs=dict(kwargs)),
                  _PygGIN(copy.deepcopy(mlp), aggr="lcm", aggr_kwargs=dict(kwargs)),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))
    model = gl.GNN("sage", 8, 16, 3, num_layers=2, aggr="lcm")
    assert model(torch.randn(n, 8), edge_index).shape == (n, 3)


def test_lcm_refuses_what_pyg_refuses():
    with pytest.raises(ValueError, match="differ, so the neighbours must be projected"):
        aggr.LCMAggregation(4, 5, project=False)
    with pytest.raises(ValueError, match="'index' tensor is not sorted"):
        aggr.LCMAggregation(4, 4)(Graph(torch.tensor([[0, 1], [1, 0]])), torch.randn(2, 4))


@pytest.mark.parametrize("name, kwargs", [("median", {}), ("powermean", {"learn": True}),
                                          ("quantile", {"q": 0.3}), ("MinAggregation", {}),
                                          ("degreescaler", {"aggr": "mean",
                                                            "scaler": "amplification",
                                                            "deg": torch.tensor([2, 5, 3])})])
def test_aggregation_names_pyg_resolves_are_pygs(name, kwargs):
    """PyG's convs take any aggregation name its resolver knows; graphloc's took only the
    ones it has kernels for and refused "median": the others are PyG's modules (median,
    quantile and powermean graphloc's own), with PyG's outputs, gradients and parameter
    names; an
    aggregation that takes an ``aggr`` argument itself (degree scaler) gets it."""
    edge_index, n = parity_graph(21)
    assert_parity(gl.SAGEConv(5, 4, aggr=name, aggr_kwargs=kwargs),
                  pyg.SAGEConv(5, 4, aggr=name, aggr_kwargs=kwargs),
                  lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                  torch.randn(n, 5))
    with pytest.raises(ValueError, match="unknown aggregation 'nope'; expected one of"):
        gl.SAGEConv(5, 4, aggr="nope")


def test_weighted_adjacency_weights_the_messages_of_var_and_std():
    """A weighted sparse adjacency under an aggregation without a weighted fused product
    (variance, standard deviation): the variance over each node's weighted messages
    w * x_j, against a per-node loop in float64, gradients of x and the weights
    included."""
    gen = torch.Generator().manual_seed(3)
    n, e = 9, 30
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n - 2, (e,),
                                                                       generator=gen)
    weight = (torch.rand(e, generator=gen, dtype=torch.float64) + 0.5).requires_grad_()
    x = torch.randn(n, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    graph = Graph(torch.stack([src, dst]), num_nodes=n)
    for name, module in (("var", aggr.VarAggregation()), ("std", aggr.StdAggregation())):
        got = module(graph, x, weight)
        rows = []
        for i in range(n):
            messages = x[src[dst == i]] * weight[dst == i].unsqueeze(1)
            if messages.size(0) == 0:
                rows.append(x.new_zeros(4))
                continue
            var = (messages * messages).mean(0) - messages.mean(0) ** 2
            rows.append(var if name == "var" else
                        var.clamp(min=1e-5).sqrt().masked_fill(var.clamp(min=1e-5).sqrt()
                                                               <= 1e-5 ** 0.5, 0.0))
        want = torch.stack(rows)
        torch.testing.assert_close(got, want)
        g = torch.randn(n, 4, generator=gen, dtype=torch.float64)
        for a, b in zip(torch.autograd.grad(got, [x, weight], g),
                        torch.autograd.grad(want, [x, weight], g), strict=True):
            torch.testing.assert_close(a, b)
    with pytest.raises(TypeError, match="edge_weight has dtype torch.float32 but the "
                                        "features have torch.float64"):
        aggr.VarAggregation()(graph, x, weight.detach().float())


@pytest.mark.parametrize("offset", [1e3, 1e4])
@pytest.mark.parametrize("semi_grad", [False, True])
def test_variance_is_torch_var_where_the_mean_dwarfs_it(offset, semi_grad):
    """float32 features of 1e3 to 1e4 with a standard deviation of 1 (timestamps, raw
    coordinates): PyG's mean(x^2) - mean(x)^2 cancels to noise (33% off at 1e3); the
    variance against torch.var per node in float64, the gradient against the float64
    formula's (semi_grad: PyG's, through -mean(x)^2 alone)."""
    gen = torch.Generator().manual_seed(8)
    n, e = 12, 90
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n - 2, (e,),
                                                                       generator=gen)
    graph = Graph(torch.stack([src, dst]), num_nodes=n)
    x = (offset + torch.randn(n, 3, generator=gen)).requires_grad_()
    x64 = x.detach().double().requires_grad_()
    for module in (aggr.VarAggregation(semi_grad), aggr.StdAggregation(semi_grad)):
        got = module(graph, x)
        rows = []
        for i in range(n):
            messages = x64[src[dst == i]]
            if messages.size(0) == 0:
                rows.append(x64.new_zeros(3))
                continue
            mean = messages.mean(0)
            var = messages.var(0, unbiased=False)
            if semi_grad:  # the value of var, the gradient of -mean^2
                var = var.detach() - mean * mean + (mean * mean).detach()
            rows.append(var if isinstance(module, aggr.VarAggregation) else
                        var.clamp(min=1e-5).sqrt().masked_fill(var <= 1e-5, 0.0))
        want = torch.stack(rows)
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
        g = torch.randn(n, 3, generator=gen)
        (mine,) = torch.autograd.grad(got, x, g)
        (theirs,) = torch.autograd.grad(want, x64, g.double())
        torch.testing.assert_close(mine.double(), theirs, rtol=1e-4, atol=1e-3 * offset
                                   if semi_grad else 1e-4)


def _quantile_oracle(x, src, dst, num_nodes, qs, interpolation, fill_value):
    """torch.quantile over each node's neighbours alone (fill_value without any)."""
    rows = []
    q = torch.tensor(qs, dtype=x.dtype)
    for i in range(num_nodes):
        messages = x[src[dst == i]]
        if messages.size(0) == 0:
            rows.append(x.new_full((len(qs) * x.size(1),), fill_value))
            continue
        rows.append(torch.quantile(messages, q, dim=0, interpolation=interpolation).reshape(-1))
    return torch.stack(rows)


@pytest.mark.parametrize("interpolation", aggr.QuantileAggregation.interpolations)
@pytest.mark.parametrize("qs", [[0.5], [0.0, 0.3, 1.0], [0.25, 0.75]])
def test_quantile_aggregation_is_torch_quantile_per_node(interpolation, qs):
    """Values and gradients against torch.quantile on each node's neighbours alone, on a
    graph whose first nodes have no neighbours (PyG raises there), with parallel edges and
    odd and even degrees."""
    gen = torch.Generator().manual_seed(len(qs))
    n, e = 12, 60
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(2, n, (e,), generator=gen)
    x = torch.randn(n, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    module = aggr.QuantileAggregation(qs if len(qs) > 1 else qs[0], interpolation,
                                      fill_value=-2.0)
    got = module(Graph(torch.stack([src, dst]), num_nodes=n), x)
    want = _quantile_oracle(x, src, dst, n, qs, interpolation, -2.0)
    torch.testing.assert_close(got, want)
    grad = torch.randn_like(want)
    torch.testing.assert_close(torch.autograd.grad(got, x, grad)[0],
                               torch.autograd.grad(want, x, grad)[0])


def test_quantile_aggregation_propagates_nan_and_fills_empty_graphs():
    """A NaN among a node's neighbours gives NaN in that channel only (torch.quantile's
    rule; PyG sorts it last and returns a number); no edges at all gives fill_value."""
    x = torch.tensor([[1.0, 2.0], [float("nan"), 3.0], [5.0, -1.0], [0.0, 0.0]])
    graph = Graph(torch.tensor([[0, 1, 2, 0, 2], [3, 3, 3, 2, 1]]), num_nodes=4)
    for module in (aggr.MedianAggregation(), aggr.QuantileAggregation(0.9)):
        out = module(graph, x)
        assert torch.isnan(out[3, 0]) and not torch.isnan(out[3, 1])
        assert not torch.isnan(out[:3]).any()
    empty = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=3)
    out = aggr.QuantileAggregation([0.1, 0.6], fill_value=7.0)(empty, torch.randn(3, 2))
    torch.testing.assert_close(out, torch.full((3, 4), 7.0))


def test_quantile_aggregation_matches_pyg_and_takes_its_modules():
    """Where PyG's module runs (its first node has neighbours; "nearest" aside, which PyG
    rounds on the position in the whole edge list), PyG's numbers and gradients through
    SAGEConv; PyG's module passed as aggr runs as graphloc's, also on a graph PyG's
    raises on, with the same state dict."""
    edge_index, n = sorted_graph(23)
    edge_index = torch.cat([torch.tensor([[3], [0]]), edge_index], dim=1)
    for kwargs in ({"q": 0.3}, {"q": [0.2, 0.9], "interpolation": "midpoint"},
                   {"q": 0.7, "interpolation": "higher"}, {"q": 0.5, "interpolation": "lower"}):
        ours = gl.SAGEConv(5, 4, aggr="quantile", aggr_kwargs=dict(kwargs))
        if isinstance(kwargs["q"], list):  # PyG's SAGEConv does not widen its lin_l
            continue
        assert_parity(ours, pyg.SAGEConv(5, 4, aggr="quantile", aggr_kwargs=dict(kwargs)),
                      lambda m, x: m(x, edge_index), lambda m, x: m(x, edge_index),
                      torch.randn(n, 5))
    module = pyg.MedianAggregation(fill_value=1.5)
    ours = gl.SAGEConv(5, 4, aggr=module)
    assert isinstance(ours.aggr_module, aggr.MedianAggregation)
    assert ours.aggr_module.fill_value == 1.5
    ours.load_state_dict(pyg.SAGEConv(5, 4, aggr="median").state_dict())
    first_alone = torch.tensor([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(IndexError):
        pyg.SAGEConv(5, 4, aggr="median")(torch.randn(4, 5), first_alone)
    assert ours(torch.randn(4, 5), first_alone).shape == (4, 4)
    widened = gl.SAGEConv(5, 4, aggr="quantile", aggr_kwargs={"q": [0.2, 0.9]})
    assert widened.lin_l.in_features == 10


def test_quantile_aggregation_refuses_bad_arguments():
    with pytest.raises(ValueError, match=r"q must be in the range \[0, 1\], got 1.5"):
        aggr.QuantileAggregation([0.5, 1.5])
    with pytest.raises(ValueError, match="q must be in the range"):
        aggr.QuantileAggregation(float("nan"))
    with pytest.raises(ValueError, match="q: give at least one quantile"):
        aggr.QuantileAggregation([])
    with pytest.raises(ValueError, match="interpolation must be one of .* got 'cubic'"):
        aggr.QuantileAggregation(0.5, "cubic")


PYG_CALL_CASES = [("SumAggregation", {}), ("MeanAggregation", {}), ("MaxAggregation", {}),
                  ("MinAggregation", {}), ("VarAggregation", {}), ("StdAggregation", {}),
                  ("SoftmaxAggregation", {"learn": True}), ("MedianAggregation", {}),
                  ("QuantileAggregation", {"q": [0.25, 0.5]}),  # positions exact in PyG's float32
                  ("PowerMeanAggregation", {"p": 2.0}),
                  ("PowerMeanAggregation", {"learn": True, "channels": 4, "p": 1.5}),
                  ("DegreeScalerAggregation", {"aggr": ["mean", "max", "std"],
                                               "scaler": ["identity", "amplification",
                                                          "attenuation", "linear",
                                                          "inverse_linear"],
                                               "deg": torch.tensor([1, 4, 2, 2])}),
                  ("LSTMAggregation", {"in_channels": 4, "out_channels": 3}),
                  ("LCMAggregation", {"in_channels": 4, "out_channels": 3})]


@pytest.mark.parametrize("name,kwargs", PYG_CALL_CASES, ids=[c[0] for c in PYG_CALL_CASES])
def test_called_as_pyg_calls_its_aggregations(name, kwargs):
    """aggr(x, index, dim_size=...) as PyG's modules take it (it failed on the graph
    argument), against PyG's module with the same weights, values and gradients; ptr for
    the reductions PyG itself runs on ptr."""
    import torch_geometric.nn.aggr as pyg_aggr
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(40, 4, dtype=torch.float64, generator=gen)
    index = torch.sort(torch.randint(0, 9, (40,), generator=gen)).values
    ptr = torch.cat([torch.zeros(1, dtype=torch.long),
                     torch.bincount(index, minlength=11).cumsum(0)])
    torch.manual_seed(1)
    theirs = getattr(pyg_aggr, name)(**kwargs).double()
    ours = getattr(aggr, name)(**kwargs).double()
    ours.load_state_dict(theirs.state_dict())
    calls = [dict(index=index), dict(index=index, dim_size=11)]
    if name not in ("MedianAggregation", "QuantileAggregation", "LSTMAggregation",
                    "LCMAggregation", "DegreeScalerAggregation"):  # PyG's need index
        calls.append(dict(ptr=ptr))
    for call in calls:
        mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, want = ours(mine, **call), theirs(ref, **call)
        torch.testing.assert_close(out, want)
        grad = torch.randn_like(want)
        torch.testing.assert_close(torch.autograd.grad(out, mine, grad)[0],
                                   torch.autograd.grad(want, ref, grad)[0])


def test_the_pyg_call_names_what_is_wrong():
    mean = aggr.MeanAggregation()
    x = torch.randn(6, 3)
    with pytest.raises(ValueError, match="needs index or ptr"):
        mean(x)
    with pytest.raises(ValueError, match=r"index must hold one entry per row of x \(6\)"):
        mean(x, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"invalid 'dim_size' \(got 3, but index holds 5\)"):
        mean(x, torch.tensor([0, 1, 2, 5, 0, 1]), dim_size=3)
    with pytest.raises(ValueError, match=r"invalid 'dim_size' \(got 3, but ptr holds 2"):
        mean(x, ptr=torch.tensor([0, 2, 6]), dim_size=3)
    with pytest.raises(ValueError, match="invalid dimension 2 for x of shape"):
        mean(x, torch.zeros(3, dtype=torch.long), dim=2)
    with pytest.raises(ValueError, match=r"reduces the rows of a 2-D x \(dim=-2, it learns"):
        aggr.LSTMAggregation(3, 3)(x, torch.zeros(3, dtype=torch.long), dim=1)
    with pytest.raises(ValueError, match="indptr must run from 0 to src.size"):
        mean(x, ptr=torch.tensor([0, 2, 5]))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("name", ["SumAggregation", "MaxAggregation", "StdAggregation",
                                  "MedianAggregation", "SoftmaxAggregation",
                                  "PowerMeanAggregation"])
def test_the_pyg_call_reduces_any_dimension_of_a_channelwise_aggregation(name, dim):
    """PyG's modules reduce x along any dim; graphloc's channel-wise ones do the same by
    taking the other dimensions as channels. Against PyG's module."""
    import torch_geometric.nn.aggr as pyg_aggr
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(5, 6, 7, dtype=torch.float64, generator=gen)
    index = torch.randint(0, 3, (x.size(dim),), generator=gen)
    out = getattr(aggr, name)()(x, index, dim=dim, dim_size=4)
    torch.testing.assert_close(out, getattr(pyg_aggr, name)()(x, index, dim=dim, dim_size=4))


def test_power_mean_is_the_clamped_power_mean_per_node():
    """Per node and channel, (mean of clamp(x_j)^p)^(1/p) clamped, by a loop over the nodes
    (torch ops on each neighbourhood); a node without neighbours gets clamp_min^(1/p), as
    PyG's; per-channel powers; the bad arguments PyG refuses, refused by name."""
    gen = torch.Generator().manual_seed(5)
    graph = Graph(torch.randint(0, 12, (2, 40), generator=gen), num_nodes=14)
    x = torch.rand(14, 3, dtype=torch.float64, generator=gen) * 3
    p = torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64)
    module = aggr.PowerMeanAggregation(learn=True, channels=3).double()
    with torch.no_grad():
        module.p.copy_(p)
    src, dst = graph.edge_index
    want = torch.stack([
        (x[src[dst == i]].clamp(1e-4, 100).pow(p).mean(0) if (dst == i).any()
         else torch.zeros(3, dtype=x.dtype)).clamp(1e-4, 100).pow(1 / p) for i in range(14)])
    torch.testing.assert_close(module(graph, x), want)
    assert (dst != 13).all() and torch.allclose(want[13], 1e-4 ** (1 / p))
    with pytest.raises(ValueError, match="channels=3 needs learn=True"):
        aggr.PowerMeanAggregation(channels=3)
    with pytest.raises(ValueError, match=r"has 3 powers \(channels=3\) but the messages have 5"):
        module(graph, torch.rand(14, 5, dtype=torch.float64))


def test_temperatures_and_powers_are_numbers():
    """A tensor or bool as the initial t or p failed in a fill deep inside torch; p = 0
    divided by zero (PyG's too)."""
    for bad in (torch.tensor([1.0, 2.0]), True, "1"):
        with pytest.raises(TypeError, match="t must be a number"):
            aggr.SoftmaxAggregation(t=bad)
        with pytest.raises(TypeError, match="p must be a number"):
            aggr.PowerMeanAggregation(p=bad)
    with pytest.raises(ValueError, match="p = 0 has no power mean"):
        aggr.PowerMeanAggregation(p=0)
    graph = Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    for p in (1.0, 2.0):  # p = 2 made integer messages float without a word
        with pytest.raises(TypeError, match="messages must be floating point, got torch.int64"):
            aggr.PowerMeanAggregation(p=p)(graph, torch.ones(3, 2, dtype=torch.long))


def test_mul_aggregation_is_the_product_per_node_with_exact_gradients():
    """Per node and channel, the product of its neighbours (1 without any): against
    torch.prod node by node, values and gradients, with zeros (one and two in a group: the
    gradient is the product of the others, no division), NaN and infinities; the weights
    scale the neighbours first; PyG's call takes index, and refuses ptr as PyG's."""
    edge_index, n = parity_graph(31)
    x = torch.randn(n, 4, dtype=torch.float64)
    hub = int(torch.bincount(edge_index[1]).argmax())
    into_hub = edge_index[0, edge_index[1] == hub]
    x[into_hub[:2], 0] = 0.0  # two zeros in one group
    x[into_hub[2], 3] = 0.0  # and one in another channel
    x[int(edge_index[0, 2]), 1] = float("inf")
    x[int(edge_index[0, 3]), 2] = float("nan")
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    for w in (None, weight):
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        got = aggr.MulAggregation()(Graph(edge_index, num_nodes=n), x1, w)
        rows = []
        for node in range(n):
            into = edge_index[1] == node
            scale = 1.0 if w is None else w[into].unsqueeze(-1)
            rows.append((x2[edge_index[0, into]] * scale).prod(0))
        want = torch.stack(rows)
        torch.testing.assert_close(got, want, equal_nan=True)
        finite = torch.isfinite(want).all(1, keepdim=True).double().expand_as(want)
        g1, = torch.autograd.grad(got, x1, finite)
        g2, = torch.autograd.grad(want, x2, finite)
        torch.testing.assert_close(g1, g2, equal_nan=True)
    index = torch.tensor([0, 0, 2, 2, 2])
    ours = aggr.MulAggregation()(x[:5], index)
    torch.testing.assert_close(ours, pyg.MulAggregation()(x[:5], index), equal_nan=True)
    assert bool((ours[1] == 1).all())
    with pytest.raises(RuntimeError, match="requires 'index'"):
        aggr.MulAggregation()(x[:5], ptr=torch.tensor([0, 2, 2, 5]))


@pytest.mark.parametrize("build", [
    lambda M: M.LSTMAggregation(4, 6),
    lambda M: M.MultiAggregation(["mean", "max"], mode="attn",
                                 mode_kwargs=dict(in_channels=4, out_channels=4, num_heads=2)),
    lambda M: M.MultiAggregation(["mean", "max"], mode="proj",
                                 mode_kwargs=dict(in_channels=4, out_channels=4)),
    lambda M: M.SoftmaxAggregation(learn=True, channels=4),
], ids=["lstm", "multi-attn", "multi-proj", "softmax-learn"])
def test_a_seed_gives_pygs_initial_parameters(build):
    """The LSTM aggregation and the attention mode's per-aggregation maps were not reset at
    construction as PyG's are: a seed gave other initial weights."""
    import torch_geometric.nn.aggr as pyg_aggr

    import graphloc.nn.aggr as ours
    torch.manual_seed(0)
    want = build(pyg_aggr).state_dict()
    torch.manual_seed(0)
    got = build(ours).state_dict()
    assert list(got) == list(want)
    for key in want:
        assert torch.equal(got[key], want[key]), key


# each aggregation with a True/False option, at its least
AGGREGATIONS_WITH_FLAGS = {
    "VarAggregation": dict(), "StdAggregation": dict(), "SoftmaxAggregation": dict(),
    "PowerMeanAggregation": dict(), "LSTMAggregation": dict(in_channels=4, out_channels=4),
    "LCMAggregation": dict(in_channels=4, out_channels=4),
    "DegreeScalerAggregation": dict(aggr="mean", scaler="identity", deg=torch.tensor([1, 2])),
}


def test_every_aggregation_with_a_true_false_option_is_swept():
    assert classes_with_true_false_options(aggr) == set(AGGREGATIONS_WITH_FLAGS)


@pytest.mark.parametrize("name", sorted(AGGREGATIONS_WITH_FLAGS))
def test_aggregation_true_false_options_refuse_a_string_by_name(name):
    """SoftmaxAggregation(learn="False") learnt its temperature, quietly (2026-12-07)."""
    cls = getattr(aggr, name)
    for flag in true_false_options(cls):
        with pytest.raises(TypeError, match=f"{name}: {flag} must be True or False"):
            cls(**AGGREGATIONS_WITH_FLAGS[name], **{flag: "False"})
