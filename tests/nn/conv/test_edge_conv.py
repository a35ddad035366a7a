"""EdgeConv against PyG's EdgeConv (values and gradients for each aggregation and network
shape, pairs, flows), the regrouped first product's accuracy against float64, and PyG's
per-edge path wherever regrouping could change a number; DynamicEdgeConv against PyG's
(its knn the brute-force oracle: PyG needs pyg-lib for it)."""

import copy

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import brute_force_neighbours, pointers, reference_ops
from parity import (
    assert_converts_and_trains_as_pygs,
    assert_parity,
    assert_twins_agree,
    parity_graph,
    pyg_knn_by_brute_force,
)

from graphloc.nn import DynamicEdgeConv, EdgeConv, from_pyg

NETWORKS = {  # the first two are regrouped, PyG's MLP runs per edge
    "sequential": lambda: torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.ReLU(),
                                              torch.nn.Linear(12, 6)),
    "linear": lambda: torch.nn.Linear(16, 6, bias=False),
    "pyg-mlp": lambda: pyg.MLP([16, 12, 6]),
}


def _pair(network: str, aggr: str = "max", **options):
    """graphloc's and PyG's EdgeConv on one network (both constructors reset it, as PyG's
    does: ours loads PyG's weights after that)."""
    theirs = pyg.EdgeConv(NETWORKS[network](), aggr=aggr, **options)
    ours = EdgeConv(copy.deepcopy(theirs.nn), aggr=aggr, **options)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


@pytest.mark.parametrize("aggr", ["max", "min", "mean", "add", "sum"])
@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_matches_pyg(network, aggr):
    """Outputs and gradients (x and every parameter of the network) on a graph with loops,
    parallel edges and isolated nodes (0 there, as PyG's)."""
    edge_index, n = parity_graph(101)
    ours, theirs = _pair(network, aggr)
    assert_parity(ours.eval(), theirs.eval(), lambda m, x: m(x, edge_index),
                  lambda m, x: m(x, edge_index), torch.randn(n, 8))


@pytest.mark.parametrize("network", ["sequential", "pyg-mlp"])
def test_pairs_flows_and_static_batches_match_pyg(network):
    edge_index, n = parity_graph(102)
    ours, theirs = _pair(network, "mean")
    ours, theirs = ours.eval(), theirs.eval()  # (one batch norm over all copies otherwise)
    x_src, x_dst = torch.randn(n, 8), torch.randn(n - 4, 8)
    bipartite = edge_index[:, edge_index[1] < n - 4]
    torch.testing.assert_close(ours((x_src, x_dst), bipartite), theirs((x_src, x_dst), bipartite))
    x = torch.randn(n, 8)
    ours.flow = theirs.flow = "target_to_source"
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    ours.flow = "source_to_target"
    batch = torch.randn(3, n, 8)
    torch.testing.assert_close(ours(batch, edge_index),
                               torch.stack([ours(batch[b], edge_index) for b in range(3)]))


@pytest.mark.parametrize("root_columns", ["learnt", "zero"])
def test_the_regrouped_product_is_as_close_to_the_exact_value_as_pygs(root_columns):
    """Near points (DGCNN's k-NN graphs): x_j - x_i is 1e-5 of x. With the x_i columns of W
    zero the output is W_2 (x_j - x_i), small: regrouped in float32, W_2 x_j - W_2 x_i
    would carry errors of x's scale (the design not taken); in float64 the result is at
    least as close to the float64 evaluation as PyG's float32 product, either way."""
    torch.manual_seed(0)
    n = 300
    x = torch.randn(1, 3) * 100 + 1e-3 * torch.randn(n, 3)
    edge_index = torch.randint(0, n, (2, 3000))
    theirs = pyg.EdgeConv(torch.nn.Linear(6, 16))  # (PyG's constructor resets the network)
    if root_columns == "zero":
        with torch.no_grad():
            theirs.nn.weight[:, :3] = 0
    ours, exact = EdgeConv(copy.deepcopy(theirs.nn)), copy.deepcopy(theirs).double()
    ours.load_state_dict(theirs.state_dict())  # (ours resets its network too, as PyG's)
    want = exact(x.double(), edge_index)
    ours_error = (ours(x, edge_index).double() - want).abs().max()
    pyg_error = (theirs(x, edge_index).double() - want).abs().max()
    assert ours_error <= pyg_error
    if root_columns == "zero":
        W, b = theirs.nn.weight.detach(), theirs.nn.bias.detach()
        regrouped = (x @ (W[:, :3] - W[:, 3:]).t() + b)[edge_index[1]] + \
            (x @ W[:, 3:].t())[edge_index[0]]
        per_edge = (x[edge_index[0]] - x[edge_index[1]]).double() @ W[:, 3:].double().t() + \
            b.double()
        assert (regrouped.double() - per_edge).abs().max() > 100 * pyg_error


def test_special_values_take_pygs_per_edge_path():
    """inf - inf is NaN per edge where regrouped sums could be finite: non-finite features
    run the network on [x_i, x_j - x_i] as PyG's, kernels and pure-torch twins alike."""
    edge_index, n = parity_graph(103)
    x = torch.randn(n, 8, dtype=torch.float64)
    x[2, 1], x[5, 3], x[9, 0] = float("inf"), float("nan"), float("-inf")
    ours, theirs = _pair("sequential")
    ours, theirs = ours.double(), theirs.double()
    expected = theirs(x, edge_index)
    torch.testing.assert_close(ours(x, edge_index), expected, equal_nan=True)
    with reference_ops():
        torch.testing.assert_close(ours(x, edge_index), expected, equal_nan=True)


def test_a_hooked_first_linear_is_called_as_a_module():
    edge_index, n = parity_graph(104)
    ours, theirs = _pair("sequential")
    calls = []
    for conv in (ours, theirs):
        conv.nn[0].register_forward_hook(lambda m, args, out: calls.append(1) or out * 2)
    x = torch.randn(n, 8)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    assert len(calls) == 2


def test_compiled_and_functional_calls_run_per_edge():
    edge_index, n = parity_graph(105)
    ours, theirs = _pair("sequential", "add")
    x = torch.randn(n, 8)
    expected = theirs(x, edge_index)
    params = dict(ours.named_parameters())
    got = torch.func.functional_call(ours, params, (x, edge_index))
    torch.testing.assert_close(got, expected)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(ours)(x, edge_index), expected)


def test_bad_arguments_are_named():
    edge_index, n = parity_graph(106)
    with pytest.raises(TypeError, match="nn must be a module"):
        EdgeConv(16)
    with pytest.raises(ValueError, match="aggr must be one of"):
        EdgeConv(torch.nn.Linear(16, 4), aggr="lstm")
    with pytest.raises(ValueError, match=r"pair \(x_src, None\)"):
        EdgeConv(torch.nn.Linear(16, 4))((torch.randn(n, 8), None), edge_index)
    with pytest.raises(ValueError, match="x has 5 features, so each edge's .* has 10, but "
                                         "nn's first Linear takes 16"):
        EdgeConv(torch.nn.Sequential(torch.nn.Linear(16, 4)))(torch.randn(n, 5), edge_index)
    with pytest.raises(ValueError, match=r"x_dst of shape \[N, 8\]"):
        EdgeConv(torch.nn.Linear(16, 4))((torch.randn(n, 8), torch.randn(n, 5)), edge_index)


def test_from_pyg_carries_the_aggregation_and_keeps_others():
    edge_index, n = parity_graph(107)
    x = torch.randn(n, 8)
    theirs = pyg.EdgeConv(torch.nn.Linear(16, 4), aggr="mean")
    ours = from_pyg(theirs, example=(x, edge_index))
    assert type(ours) is EdgeConv and ours.aggr == "mean"
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    with pytest.warns(UserWarning, match="aggr='std'"):
        kept = from_pyg(pyg.EdgeConv(torch.nn.Linear(16, 4), aggr="std"),
                        example=(x, edge_index))
    assert type(kept).__module__.startswith("torch_geometric")


def _dynamic_twins(network: str, k: int, aggr: str = "max"):
    """graphloc's and PyG's DynamicEdgeConv on one network, in float64."""
    with pyg_knn_by_brute_force():
        theirs = pyg.DynamicEdgeConv(NETWORKS[network](), k=k, aggr=aggr).double()
    ours = DynamicEdgeConv(copy.deepcopy(theirs.nn), k=k, aggr=aggr).double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _cloud(seed=0, n=30):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, dtype=torch.float64, generator=gen)
    return x, torch.tensor([0] * 12 + [1] * 3 + [2] * (n - 15))


@pytest.mark.parametrize("aggr", ["max", "mean", "add"])
@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_dynamic_matches_pyg_with_every_gradient(network, aggr):
    x, batch = _cloud()
    y = torch.randn(7, 8, dtype=torch.float64)
    batch_y = torch.tensor([0, 0, 1, 2, 2, 4, 4])  # (example 4: no source points)
    ours, theirs = _dynamic_twins(network, 5, aggr)
    with pyg_knn_by_brute_force():
        for call in (lambda conv, x: conv(x, batch), lambda conv, x: conv(x),
                     lambda conv, x: conv((x, y), (batch, batch_y))):
            assert_twins_agree(ours.eval(), theirs.eval(), [x], call)


def test_dynamic_is_edge_conv_on_the_k_nearest_points():
    x, batch = _cloud(1, n=20)
    conv = DynamicEdgeConv(NETWORKS["sequential"](), k=4).double()
    ptr = pointers(batch, 3)
    query, point = brute_force_neighbours(x, x, 4, ptr, ptr)
    want = EdgeConv(conv.nn).double()(x, torch.stack([point, query]))
    torch.testing.assert_close(conv(x, batch), want)


def test_dynamic_converts_and_trains_as_pygs():
    x, batch = _cloud(2)

    class DGCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = pyg.DynamicEdgeConv(NETWORKS["sequential"](), k=4)
            self.second = pyg.DynamicEdgeConv(torch.nn.Linear(12, 3), k=6, aggr="mean")

        def forward(self, x, batch):
            return self.second(self.first(x, batch), batch)

    with pyg_knn_by_brute_force():
        torch.manual_seed(0)
        converted = assert_converts_and_trains_as_pygs(DGCNN().double(), (x, batch))
    assert isinstance(converted.second, DynamicEdgeConv) and converted.second.k == 6


def test_dynamic_bad_arguments_are_named():
    x, batch = _cloud()
    conv = DynamicEdgeConv(torch.nn.Linear(16, 4), k=2).double()
    with pytest.raises(ValueError, match="k must be an integer >= 1, got -1"):
        DynamicEdgeConv(torch.nn.Linear(16, 4), k=-1)
    with pytest.raises(ValueError, match="static graphs are not supported"):
        conv(x.view(3, 10, 8))
    with pytest.raises(ValueError, match="batch_y must hold one example id per row"):
        conv(x, (batch, batch[:5]))
    with pytest.raises(ValueError, match=r"x must be a tensor or a pair \(x_src, x_dst\)"):
        conv((x, x, x))
    assert str(conv).startswith("DynamicEdgeConv(nn=Linear(") and str(conv).endswith("k=2)")


def test_dynamic_declares_no_graph_locality():
    """Its outputs read the nearest points in feature space, anywhere in the example: the
    1 hop EdgeConv declares would let the influence tool measure it on balls."""
    from graphloc.nn.capabilities import capabilities_of
    assert capabilities_of(EdgeConv(torch.nn.Linear(16, 4))).graphloc_hops == 1
    assert capabilities_of(DynamicEdgeConv(torch.nn.Linear(16, 4), k=3)).graphloc_hops is None


def test_dynamic_on_no_points_and_a_lone_point_as_pygs():
    ours, theirs = _dynamic_twins("sequential", 3)
    assert ours(torch.zeros(0, 8, dtype=torch.float64)).shape == (0, 6)
    x, _ = _cloud(3, n=16)
    lone = torch.tensor([0] * 15 + [1])
    with pyg_knn_by_brute_force():
        assert_twins_agree(ours.eval(), theirs.eval(), [x], lambda conv, x: conv(x, lone))
