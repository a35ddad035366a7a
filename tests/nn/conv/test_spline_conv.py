"""SplineConv against PyG's, whose pyg-lib basis and weighting are replaced by an oracle:
the B-spline values from the Cox-de Boor recursion and a per-edge sum of products. Values
and every gradient (features, pseudo-coordinates, parameters) for each degree, open and
closed splines, both regroupings and each aggregation; the basis against the recursion
alone; from_pyg; named errors."""

import functools
import math

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import oracle_spline_basis, random_edge_index
from parity import (
    assert_converts_and_trains_as_pygs,
    assert_twins_agree,
    pygs_spline_conv_by_oracle,
    seeded_twins_without_pyg_lib,
)

import graphloc.nn as gl
from graphloc.ops import spline_basis


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("dims, sizes, opens", [
    (1, [5], [True]), (2, [4, 3], [True, False]), (3, [3, 5, 4], [False, True, True])])
def test_the_basis_is_the_cox_de_boor_recursion(degree, dims, sizes, opens):
    gen = torch.Generator().manual_seed(degree * 10 + dims)
    pseudo = torch.rand(40, dims, dtype=torch.float64, generator=gen)
    pseudo[:4] = torch.tensor([0.0, 1.0, 0.5, 0.25], dtype=torch.float64).unsqueeze(1)
    kernel_size, is_open = torch.tensor(sizes), torch.tensor(opens, dtype=torch.uint8)
    basis, index = spline_basis(pseudo, kernel_size, is_open, degree)
    want_basis, want_index = oracle_spline_basis(pseudo, kernel_size, is_open, degree)
    torch.testing.assert_close(basis, want_basis)
    assert torch.equal(index, want_index)
    assert torch.autograd.gradcheck(lambda p: spline_basis(p, kernel_size, is_open, degree)[0],
                           pseudo[4:10].clone().requires_grad_())


_twins = functools.partial(seeded_twins_without_pyg_lib, "SplineConv")


def _graph(seed=0, n=14, dims=2):
    gen = torch.Generator().manual_seed(seed)
    edge_index = random_edge_index(n - 2, 50, seed=seed, hub_degree=7)
    pseudo = torch.rand(edge_index.size(1), dims, dtype=torch.float64, generator=gen)
    return edge_index, pseudo, n


OPTIONS = {
    "degree 1, in <= out": ((4, 6, 2, 5), {}),
    "degree 2, in > out": ((6, 3, 2, [4, 3]), {"degree": 2, "is_open_spline": [True, False]}),
    "degree 3, closed, add": ((4, 5, 2, 3), {"degree": 3, "is_open_spline": False,
                                             "aggr": "add"}),
    "max, no root, no bias": ((4, 3, 2, 4), {"aggr": "max", "root_weight": False,
                                             "bias": False}),
    "min, degree 2": ((5, 4, 2, 3), {"aggr": "min", "degree": 2}),
    "pair widths": (((4, 3), 6, 2, 5), {}),
}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient(option):
    args, kwargs = OPTIONS[option]
    edge_index, pseudo, n = _graph(1)
    ours, theirs = _twins(*args, **kwargs)
    src_width, dst_width = args[0] if isinstance(args[0], tuple) else (args[0], args[0])
    x = torch.randn(n, src_width, dtype=torch.float64)
    with pygs_spline_conv_by_oracle():
        if src_width == dst_width:
            assert_twins_agree(ours, theirs, [x, pseudo],
                               lambda conv, x, p: conv(x, edge_index, p))
        x_dst = torch.randn(n, dst_width, dtype=torch.float64)
        assert_twins_agree(ours, theirs, [x, x_dst, pseudo],
                           lambda conv, x, y, p: conv((x, y), edge_index, p))


def test_destination_chunks_match_pyg(monkeypatch):
    """The per-weight sums in chunks of a few destinations (recomputed in the backward):
    the same values and gradients as PyG's."""
    import graphloc.nn.conv.spline_conv as ours_module
    monkeypatch.setattr(ours_module, "_CHUNK_SUMS", 40)  # (3 destinations a chunk here)
    edge_index, pseudo, n = _graph(5)
    ours, theirs = _twins(4, 5, 2, [3, 2], degree=2)
    x = torch.randn(n, 4, dtype=torch.float64)
    with pygs_spline_conv_by_oracle():
        assert_twins_agree(ours, theirs, [x, pseudo], lambda c, x, p: c(x, edge_index, p))


def test_bipartite_and_a_pair_without_destination_features_match_pyg():
    ours, theirs = _twins((4, 3), 5, 1, 4)
    x, x_dst = torch.randn(6, 4, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1, 5, 5, 2], [0, 0, 1, 2, 2]])
    pseudo = torch.rand(5, dtype=torch.float64)  # ([E]: one dimension)
    with pygs_spline_conv_by_oracle():
        assert_twins_agree(ours, theirs, [x, x_dst], lambda c, x, y: c((x, y), edge_index,
                                                                        pseudo))
        assert_twins_agree(ours, theirs, [x], lambda c, x: c((x, None), edge_index, pseudo,
                                                             (6, 3)))


def test_pseudo_coordinates_pyg_would_read_out_of_range_raise():
    conv = gl.SplineConv(4, 3, 2, 5).double()
    edge_index, pseudo, n = _graph(2)
    x = torch.randn(n, 4, dtype=torch.float64)
    for bad in (-0.1, math.nan, math.inf):
        broken = pseudo.clone()
        broken[7, 1] = bad
        with pytest.raises(ValueError, match=r"edge 7, dimension 1 holds"):
            conv(x, edge_index, broken)
    with pytest.raises(ValueError, match="SplineConv needs pseudo-coordinates"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match=r"edge_attr has shape \[63, 3\] but the layer takes "
                                         r"2 features per edge \(dim=2\)"):
        conv(x, edge_index, torch.rand(edge_index.size(1), 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="degree must be 1, 2 or 3, got 4"):
        gl.SplineConv(4, 3, 2, 5, degree=4)
    with pytest.raises(ValueError, match="one entry per dimension"):
        gl.SplineConv(4, 3, 2, [5, 5, 5])
    with pytest.raises(ValueError, match=r"an open spline of degree 3 needs kernel_size >= 3"):
        gl.SplineConv(4, 3, 2, [5, 2], degree=3)
    wrapped = pseudo.clone()
    wrapped[0] = 1.25  # (above 1: wraps, as PyG's kernels)
    ours, theirs = _twins(4, 3, 2, 5)
    with pygs_spline_conv_by_oracle():
        torch.testing.assert_close(ours(x, edge_index, wrapped), theirs(x, edge_index, wrapped))


def test_lazy_width_draws_as_pygs():
    twins = []
    with pygs_spline_conv_by_oracle():
        for module in (gl, pyg):  # (seeded_twins compares weights a lazy conv lacks)
            torch.manual_seed(3)
            twins.append(module.SplineConv(-1, 4, 2, 3).double())
    ours, theirs = twins
    edge_index, pseudo, n = _graph(3)
    x = torch.randn(n, 5, dtype=torch.float64)
    with pygs_spline_conv_by_oracle():
        torch.manual_seed(9)
        want = theirs(x, edge_index, pseudo)
        torch.manual_seed(9)
        got = ours(x, edge_index, pseudo)
    torch.testing.assert_close(got, want)
    assert ours.weight.shape == (9, 5, 4)


def test_from_pyg_converts_and_trains_as_pygs():
    edge_index, pseudo, n = _graph(4, dims=3)
    x = torch.randn(n, 4, dtype=torch.float64)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = pyg.SplineConv(4, 8, dim=3, kernel_size=3, degree=2)
            self.second = pyg.SplineConv(8, 3, dim=3, kernel_size=[2, 3, 4], aggr="max",
                                         is_open_spline=[True, False, True])

        def forward(self, x, edge_index, pseudo):
            hidden = torch.nn.functional.elu(self.first(x, edge_index, pseudo))
            return self.second(hidden, edge_index, pseudo)

    with pygs_spline_conv_by_oracle():
        torch.manual_seed(0)
        model = Net().double()
        converted = assert_converts_and_trains_as_pygs(model, (x, edge_index, pseudo))
    assert isinstance(converted.second, gl.SplineConv) and converted.second.aggr == "max"


def test_no_edges_no_nodes_and_special_values_as_pygs():
    ours, theirs = _twins(4, 3, 2, 3)
    x = torch.randn(6, 4, dtype=torch.float64)
    none = torch.zeros(2, 0, dtype=torch.long)
    with pygs_spline_conv_by_oracle():
        torch.testing.assert_close(ours(x, none, torch.zeros(0, 2, dtype=torch.float64)),
                                   theirs(x, none, torch.zeros(0, 2, dtype=torch.float64)))
        assert ours(x[:0], none, torch.zeros(0, 2, dtype=torch.float64)).shape == (0, 3)
        edge_index, pseudo, n = _graph(6)
        x = torch.randn(n, 4, dtype=torch.float64)
        x[3, 1], x[5, 0], x[7, 2] = math.nan, math.inf, -math.inf
        assert_twins_agree(*_twins(4, 3, 2, 3), [x], lambda c, x: c(x, edge_index, pseudo),
                           equal_nan=True)
        # max: the outputs (its gradient at NaN goes to the first NaN: docs/models.md)
        ours, theirs = _twins(4, 3, 2, 3, aggr="max")
        torch.testing.assert_close(ours(x, edge_index, pseudo), theirs(x, edge_index, pseudo),
                                   equal_nan=True)
