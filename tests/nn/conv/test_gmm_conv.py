import math

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import (
    assert_special_values_agree,
    assert_twins_agree,
    graph_with_edge_features,
    seeded_twins,
)
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _graph(seed=0, n=14, m=50, dim=3):
    """With pseudo-coordinates in [0, 1) (MoNet's polar or Cartesian offsets)."""
    return graph_with_edge_features(seed, n, m, edge_dim=dim, uniform=True)


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
def test_matches_pyg_with_gradients(separate, aggr):
    x, edge_index, pseudo = _graph()
    ours, theirs = seeded_twins("GMMConv", 4, 5, dim=3, kernel_size=6,
                                separate_gaussians=separate, aggr=aggr)
    assert_twins_agree(ours, theirs, [x, pseudo], lambda conv, x, e: conv(x, edge_index, e))


@pytest.mark.parametrize("separate", [False, True])
def test_a_bipartite_pair_a_missing_root_and_a_lazy_width_match_pyg(separate):
    gen = torch.Generator().manual_seed(1)
    x_src = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(6, 2, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 6, (30,), generator=gen)])
    pseudo = torch.rand(30, 2, dtype=torch.float64, generator=gen)
    for widths in ((4, 2), (-1, -1)):  # (lazy: drawn at the first call, as PyG's)
        twins = []
        for module in (gl, pyg):
            torch.manual_seed(7)
            conv = module.GMMConv(widths, 5, dim=2, kernel_size=3,
                                  separate_gaussians=separate).double()
            conv((x_src, x_dst), edge_index, pseudo)
            twins.append(conv)
        ours, theirs = twins
        assert_twins_agree(ours, theirs, [x_src, x_dst, pseudo],
                           lambda conv, a, b, e: conv((a, b), edge_index, e))
        for (key, a), b in zip(ours.state_dict().items(), theirs.state_dict().values(),
                               strict=True):
            assert torch.equal(a, b), key
    torch.testing.assert_close(ours((x_src, None), edge_index, pseudo, (9, 6)),
                               theirs((x_src, None), edge_index, pseudo, (9, 6)))


def _dense_gmm(conv, x, edge_index, pseudo, aggr):
    """The paper's layer node by node: each edge's K Gaussian weights of its
    pseudo-coordinates (one kernel per input and output channel when separate), the
    weighted sum of the source's transformed features, aggregated, root and bias added."""
    K, out_width, in_width = conv.kernel_size, conv.out_channels, x.size(1)
    rows = []
    for i in range(x.size(0)):
        messages = []
        for e in (edge_index[1] == i).nonzero().view(-1).tolist():
            u, x_j = pseudo[e], x[edge_index[0, e]]
            if conv.separate_gaussians:
                message = torch.zeros(out_width, dtype=x.dtype)
                for f in range(in_width):
                    for m in range(out_width):
                        for k in range(K):
                            mu, sigma = conv.mu[f, m, k], conv.sigma[f, m, k]
                            w = torch.exp(-0.5 * ((u - mu) ** 2 / (1e-15 + sigma ** 2)).sum())
                            message[m] = message[m] + x_j[f] * conv.g[f, m * K + k] * w
            else:
                projected = (x_j @ conv.g).view(K, out_width)
                w = torch.exp(-0.5 * ((u - conv.mu) ** 2 / (1e-15 + conv.sigma ** 2)).sum(1))
                message = (w.unsqueeze(1) * projected).sum(0)
            messages.append(message)
        if not messages:
            h = torch.zeros(out_width, dtype=x.dtype)
        else:
            stacked = torch.stack(messages)
            h = {"add": stacked.sum(0), "mean": stacked.mean(0),
                 "max": stacked.max(0).values}[aggr]
        rows.append(h + conv.root.weight @ x[i] + conv.bias)
    return torch.stack(rows)


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
def test_the_formula_node_by_node(separate, aggr):
    x, edge_index, pseudo = _graph(seed=2, n=9, m=25)
    torch.manual_seed(3)
    conv = gl.GMMConv(4, 3, dim=3, kernel_size=2, separate_gaussians=separate,
                      aggr=aggr).double()
    torch.nn.init.uniform_(conv.bias)  # (a zero bias would not be seen)
    want = _dense_gmm(conv, x, edge_index, pseudo, aggr)
    torch.testing.assert_close(conv(x, edge_index, pseudo), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index, pseudo), want)


def test_root_weight_false_works_where_pygs_raises():
    x, edge_index, pseudo = _graph(seed=4)
    torch.manual_seed(5)
    ours = gl.GMMConv(4, 3, dim=3, kernel_size=2, root_weight=False).double()
    with_root = gl.GMMConv(4, 3, dim=3, kernel_size=2).double()
    with_root.load_state_dict({**ours.state_dict(), "root.weight": torch.zeros(3, 4)})
    torch.testing.assert_close(ours(x, edge_index, pseudo), with_root(x, edge_index, pseudo))
    theirs = pyg.GMMConv(4, 3, dim=3, kernel_size=2, root_weight=False).double()
    with pytest.raises(AttributeError, match="root"):
        theirs(x, edge_index, pseudo)


def test_special_values_give_pygs_numbers():
    """NaN and infinities in the features and the pseudo-coordinates: PyG's outputs (the
    same products per edge and kernel, summed in another order)."""
    x, edge_index, pseudo = _graph(seed=6)
    x[3, 1], x[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    pseudo[2, 0], pseudo[7, 1] = float("inf"), float("nan")
    ours, theirs = seeded_twins("GMMConv", 4, 5, dim=3, kernel_size=6, aggr="add")
    call = lambda conv, x, edges: conv(x, edges, pseudo[:edges.size(1)])  # noqa: E731
    assert_special_values_agree(ours, theirs, x, edge_index, call)
    with torch.no_grad():
        for conv in (ours, theirs):
            conv.sigma[1, 2] = 0.0  # a kernel of width 0: PyG's EPS keeps it finite or 0
    finite_x = _graph(seed=6)[0]
    torch.testing.assert_close(ours(finite_x, edge_index, pseudo),
                               theirs(finite_x, edge_index, pseudo), equal_nan=True)


def test_sparse_adjacencies_and_graphs_carry_the_pseudo_coordinates():
    x, edge_index, pseudo = _graph(seed=7)
    edge_index = torch.unique(edge_index, dim=1)
    pseudo = pseudo[:edge_index.size(1)]
    ours, theirs = seeded_twins("GMMConv", 4, 5, dim=3, kernel_size=4)
    want = theirs(x, edge_index, pseudo)
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor):
        adj = to_sparse(edge_index.flip(0), pseudo, size=(14, 14))
        torch.testing.assert_close(ours(x, adj), theirs(x, adj))
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=14, edge_attr=pseudo)), want)


def test_pseudo_coordinates_of_another_dtype_are_taken_in_the_parameters():
    """Integer offsets (a grid), or float64 ones for a float32 layer: PyG's promotes (its
    output float64 for float64 ones); graphloc's computes in the layer's dtype."""
    x, edge_index, _ = _graph(seed=8)
    grid = torch.randint(-2, 3, (edge_index.size(1), 3))
    ours, theirs = seeded_twins("GMMConv", 4, 5, dim=3, kernel_size=4)
    ours, theirs = ours.float(), theirs.float()
    want = theirs(x.float(), edge_index, grid.float())
    torch.testing.assert_close(ours(x.float(), edge_index, grid), want)
    out = ours(x.float(), edge_index, grid.double())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, want)


def test_from_pyg_converts_monet_and_keeps_an_uncalled_lazy_conv():
    class MoNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.GMMConv(4, 8, dim=2, kernel_size=5)
            self.conv2 = pyg.GMMConv(8, 3, dim=2, kernel_size=5, aggr="add")

        def forward(self, x, edge_index, pseudo):
            return self.conv2(torch.nn.functional.elu(self.conv1(x, edge_index, pseudo)),
                              edge_index, pseudo)

    x, edge_index, pseudo = _graph(seed=9, dim=2)
    torch.manual_seed(0)
    model = MoNet().double()
    converted = from_pyg(model, example=(x, edge_index, pseudo))
    assert type(converted.conv1) is gl.GMMConv and type(converted.conv2) is gl.GMMConv
    torch.testing.assert_close(converted(x, edge_index, pseudo), model(x, edge_index, pseudo))
    lazy = torch.nn.ModuleList([pyg.GMMConv(-1, 3, dim=2, kernel_size=2)])
    with pytest.warns(UserWarning):
        kept = from_pyg(lazy)
    [(where, reason)] = kept.pyg_conversion["kept"]
    assert where == "0" and "a lazy GMMConv not called yet" in reason


def test_bad_arguments_are_named():
    x, edge_index, pseudo = _graph(seed=10)
    for kwargs, match in (({"dim": 0}, "GMMConv: dim"), ({"kernel_size": 0}, "kernel_size"),
                          ({"out_channels": 0}, "GMMConv: out_channels"),
                          ({"separate_gaussians": "yes"}, "separate_gaussians")):
        with pytest.raises((ValueError, TypeError), match=match):
            gl.GMMConv(**{"in_channels": 4, "out_channels": 3, "dim": 3, "kernel_size": 2,
                          **kwargs})
    conv = gl.GMMConv(4, 3, dim=3, kernel_size=2).double()
    with pytest.raises(ValueError, match="GMMConv needs pseudo-coordinates"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match=r"edge_attr has shape \[69, 2\] but the layer takes "
                                         r"3 features per edge \(dim=3\)"):
        conv(x, edge_index, pseudo[:, :2])
    with pytest.raises(ValueError, match="GMMConv: edge_attr has 3 rows but the graph has 69"):
        conv(x, edge_index, pseudo[:3])
    assert math.isfinite(conv(x, edge_index, pseudo).sum().item())
