"""LEConv against PyG's LEConv (values and gradients, edge weights, bipartite pairs),
ASAP's formula written per edge, special values where the regrouped sum would differ, and
its float32 rounding against PyG's; from_pyg."""

import pytest
import torch
import torch_geometric.nn as pyg
from parity import assert_parity, assert_weighted_parity, parity_graph

from graphloc import Graph
from graphloc.nn import LEConv, from_pyg
from graphloc.nn.conv.le_conv import neighbour_differences


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_pyg(bias, weighted):
    assert_weighted_parity(LEConv(8, 5, bias=bias), pyg.LEConv(8, 5, bias=bias), 71, weighted)


def test_bipartite_pairs_match_pyg():
    edge_index = torch.stack([torch.randint(0, 12, (50,)), torch.randint(0, 7, (50,))])
    x_dst = torch.randn(7, 3, dtype=torch.float64)
    assert_parity(LEConv((8, 3), 5), pyg.LEConv((8, 3), 5),
                  lambda m, x: m((x, x_dst), edge_index), lambda m, x: m((x, x_dst), edge_index),
                  torch.randn(12, 8))
    with pytest.raises(ValueError, match="LEConv needs destination features"):
        LEConv(8, 5)((torch.randn(12, 8), None), edge_index)


def test_asap_formula_per_edge():
    """sum over the edges j -> i of w_ji (W1 x_j + b1 - W2 x_i), plus W3 x_i + b3, one
    edge at a time."""
    edge_index, n = parity_graph(72)
    weight = torch.randn(edge_index.size(1), dtype=torch.float64)
    conv = LEConv(8, 5).double()
    x = torch.randn(n, 8, dtype=torch.float64)
    want = conv.lin3(x)
    for (j, i), w in zip(edge_index.t().tolist(), weight.tolist(), strict=True):
        want[i] += w * (conv.lin1(x[j]) - conv.lin2(x[i]))
    torch.testing.assert_close(conv(x, edge_index, weight), want)


@pytest.mark.parametrize("case", ["inf-at-destination", "nan-at-destination",
                                  "inf-weight", "nan-weight", "inf-at-source",
                                  "inf-without-edges"])
def test_special_values_meet_as_in_pyg(case):
    """Regrouped, sum_j w (a_j - b_i) is sum_j w a_j - (sum_j w) b_i: with an infinite b_i
    and weights of both signs PyG's is -inf + inf = NaN where the regrouped one is finite
    times inf; a zero weight times inf is NaN per edge but vanishes in the degree. Such
    inputs take the per-edge path; a node without edges gets 0 whatever its b_i."""
    edge_index, n = parity_graph(73)
    x = torch.randn(n, 8, dtype=torch.float64)
    weight = torch.randn(edge_index.size(1), dtype=torch.float64)
    weight[::7] = 0.0
    node = int(edge_index[1, 0])
    if case == "inf-at-destination":  # b_i = +-inf in every channel (all of x_i: NaN)
        x[node, 0] = float("inf")
    elif case == "nan-at-destination":
        x[node, 2] = float("nan")
    elif case == "inf-weight":
        weight[3] = float("inf")
    elif case == "nan-weight":
        weight[5] = float("nan")
    elif case == "inf-at-source":
        x[int(edge_index[0, 4])] = -float("inf")
    else:
        x[27] = float("inf")  # ids 25..29 have no edges
    ours, theirs = LEConv(8, 5).double(), pyg.LEConv(8, 5).double()
    ours.load_state_dict(theirs.state_dict())
    got, want = ours(x, edge_index, weight), theirs(x, edge_index, weight)
    if case == "inf-at-destination":  # weights of both signs into the node: NaN there
        assert bool(want[node].isnan().all())
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, equal_nan=True)


def test_float32_result_is_at_least_as_close_as_pyg():
    """The regrouped sums nearly cancel where a_j is close to b_i: on a hub of 2,000
    neighbours whose projections agree to 1e-4, graphloc's float32 output is at least as
    close to the float64 result as PyG's float32 per-edge sum (a float32 regrouping was
    6.7 times further off)."""
    torch.manual_seed(0)
    n = 2001
    edge_index = torch.stack([torch.arange(1, n), torch.zeros(n - 1, dtype=torch.long)])
    x = 100.0 + 0.01 * torch.randn(n, 8, dtype=torch.float64)
    weight = torch.rand(n - 1, dtype=torch.float64)
    reference = pyg.LEConv(8, 5).double()
    reference.lin2.weight.data.copy_(reference.lin1.weight.data)  # a_j - b_i near 0
    theirs, ours = pyg.LEConv(8, 5), LEConv(8, 5)
    theirs.load_state_dict(reference.state_dict())
    ours.load_state_dict(reference.state_dict())
    with torch.no_grad():
        exact = reference(x, edge_index, weight)
        pyg_error = theirs(x.float(), edge_index, weight.float()).double() - exact
        our_error = ours(x.float(), edge_index, weight.float()).double() - exact
    assert float(pyg_error[0].abs().max()) > 1e-3  # the case does cancel in float32
    assert float(our_error.abs().max()) <= float(pyg_error.abs().max())


def test_product_path_equals_per_edge_path():
    """The two paths of neighbour_differences on finite inputs (the per-edge one is what
    torch.func and torch.compile run)."""
    edge_index, n = parity_graph(74)
    graph = Graph(edge_index, num_nodes=n)
    a, b = torch.randn(n, 5, dtype=torch.float64), torch.randn(n, 5, dtype=torch.float64)
    weight = torch.randn(edge_index.size(1), dtype=torch.float64)
    b_poisoned = b.clone()
    b_poisoned[29] = float("inf")  # a node without edges: forces the per-edge path
    for w in (None, weight):
        torch.testing.assert_close(neighbour_differences(graph, a, b, w),
                                   neighbour_differences(graph, a, b_poisoned, w))


def test_converts_and_other_aggregations_stay_pyg():
    edge_index, n = parity_graph(75)
    x = torch.randn(n, 8)
    theirs = pyg.LEConv(8, 5).eval()
    ours = from_pyg(theirs, example=(x, edge_index))
    assert type(ours) is LEConv
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    with pytest.warns(UserWarning, match="aggr='max'"):
        kept = from_pyg(pyg.LEConv(8, 5, aggr="max"), example=(x, edge_index))
    assert type(kept).__module__.startswith("torch_geometric")
