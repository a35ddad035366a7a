import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import (
    assert_special_values_agree,
    assert_twins_agree,
    graph_with_edge_features,
    one_loop_mask,
    seeded_twins,
)
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _graph(seed=0, n=14, m=50, edge_dim=3, one_loop=True):
    """``(x, edge_index, edge_attr)`` in float64; with ``one_loop`` at most one self-loop
    per node (the gradient of a second loop's weight is PyG's artefact, docs/models.md)."""
    x, edge_index, edge_attr = graph_with_edge_features(seed, n, m, edge_dim=edge_dim)
    if one_loop:
        keep = one_loop_mask(edge_index)
        edge_index, edge_attr = edge_index[:, keep], edge_attr[keep]
    return x, edge_index, edge_attr


@pytest.mark.parametrize("loops", [True, False])
@pytest.mark.parametrize("normalize", [True, False])
def test_matches_pyg_with_gradients(loops, normalize):
    x, edge_index, edge_attr = _graph()
    ours, theirs = seeded_twins("PDNConv", 4, 5, 3, 6, add_self_loops=loops,
                                normalize=normalize)
    assert_twins_agree(ours, theirs, [x, edge_attr],
                       lambda conv, x, e: conv(x, edge_index, e))


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_a_flow_and_no_edge_features_match_pyg(flow):
    x, edge_index, edge_attr = _graph(seed=1)
    ours, theirs = seeded_twins("PDNConv", 4, 5, 3, 6, flow=flow)
    assert_twins_agree(ours, theirs, [x, edge_attr],
                       lambda conv, x, e: conv(x, edge_index, e))
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))  # GCN's


def _dense_pdn(conv, x, edge_index, edge_attr):
    """The paper's layer as matrices: each edge's weight from the edge network, summed
    per (destination, source) pair, loops of weight 1 added where a node has none, then
    D^-1/2 W D^-1/2 (D the weighted in-degrees) times x Theta, plus the bias."""
    n = x.size(0)
    w = conv.mlp(edge_attr).squeeze(-1)
    dense = torch.zeros(n, n, dtype=x.dtype)
    for (j, i), value in zip(edge_index.t().tolist(), w, strict=True):
        dense[i, j] = dense[i, j] + value
    if conv.normalize:
        if conv.add_self_loops:
            for i in range(n):
                if not ((edge_index[0] == i) & (edge_index[1] == i)).any():
                    dense[i, i] = 1.0
        degree = dense.sum(1)
        inverse = torch.where(degree > 0, degree.pow(-0.5), torch.zeros_like(degree))
        dense = inverse.view(-1, 1) * dense * inverse.view(1, -1)
    out = dense @ (x @ conv.lin.weight.t())
    return out + conv.bias


@pytest.mark.parametrize("loops", [True, False])
@pytest.mark.parametrize("normalize", [True, False])
def test_the_formula_as_matrices(loops, normalize):
    x, edge_index, edge_attr = _graph(seed=2)
    torch.manual_seed(3)
    conv = gl.PDNConv(4, 3, 3, 5, add_self_loops=loops, normalize=normalize).double()
    torch.nn.init.uniform_(conv.bias)  # (a zero bias would not be seen)
    want = _dense_pdn(conv, x, edge_index, edge_attr)
    torch.testing.assert_close(conv(x, edge_index, edge_attr), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index, edge_attr), want)


def test_special_values_give_pygs_numbers():
    x, edge_index, edge_attr = _graph(seed=4)
    x[3, 1], x[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    ours, theirs = seeded_twins("PDNConv", 4, 5, 3, 6)
    call = lambda conv, x, edges: conv(x, edges, edge_attr[:edges.size(1)])  # noqa: E731
    assert_special_values_agree(ours, theirs, x, edge_index, call)
    finite_x = _graph(seed=4)[0]
    bad_attr = edge_attr.clone()
    bad_attr[2, 0], bad_attr[7, 1] = float("inf"), float("nan")
    torch.testing.assert_close(ours(finite_x, edge_index, bad_attr),
                               theirs(finite_x, edge_index, bad_attr), equal_nan=True)


def test_sparse_inputs_graphs_and_static_batches_carry_the_edge_features():
    x, _, _ = _graph(seed=5)
    gen = torch.Generator().manual_seed(5)
    pairs = torch.randperm(14 * 14, generator=gen)[:40]  # distinct: an adjacency sums repeats
    edge_index = torch.stack([pairs // 14, pairs % 14])
    edge_attr = torch.randn(40, 3, dtype=torch.float64, generator=gen)
    ours, theirs = seeded_twins("PDNConv", 4, 5, 3, 6, add_self_loops=False)
    want = theirs(x, edge_index, edge_attr)
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor):
        adj = to_sparse(edge_index.flip(0), edge_attr, size=(14, 14))
        torch.testing.assert_close(ours(x, adj), want)
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=14, edge_attr=edge_attr)),
                               want)
    torch.testing.assert_close(ours(torch.stack([x, 2 * x]), edge_index, edge_attr),
                               torch.stack([want, theirs(2 * x, edge_index, edge_attr)]))
    sparse_x = x.to_sparse()
    torch.testing.assert_close(ours(sparse_x, edge_index, edge_attr), want)


def test_integer_edge_features_are_taken_in_the_networks_dtype():
    x, edge_index, _ = _graph(seed=6)
    bonds = torch.randint(0, 4, (edge_index.size(1), 3))
    ours, theirs = seeded_twins("PDNConv", 4, 5, 3, 6)
    torch.testing.assert_close(ours(x, edge_index, bonds),
                               theirs(x, edge_index, bonds.double()))


def test_without_edge_features_and_normalize_false_is_the_plain_sum_where_pygs_fails():
    x, edge_index, _ = _graph(seed=7)
    ours, theirs = seeded_twins("PDNConv", 4, 5, 3, 6, normalize=False)
    plain = gl.SimpleConv("sum")(x @ ours.lin.weight.t(), edge_index) + ours.bias
    torch.testing.assert_close(ours(x, edge_index), plain)
    with pytest.raises(AttributeError):
        theirs(x, edge_index)


def test_from_pyg_converts_a_pdn():
    class PDN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.PDNConv(4, 8, 3, 16)
            self.conv2 = pyg.PDNConv(8, 3, 3, 16, normalize=False)

        def forward(self, x, edge_index, edge_attr):
            h = torch.relu(self.conv1(x, edge_index, edge_attr))
            return self.conv2(h, edge_index, edge_attr)

    x, edge_index, edge_attr = _graph(seed=8, one_loop=False)
    torch.manual_seed(0)
    model = PDN().double()
    converted = from_pyg(model, example=(x, edge_index, edge_attr))
    assert type(converted.conv1) is gl.PDNConv and type(converted.conv2) is gl.PDNConv
    torch.testing.assert_close(converted(x, edge_index, edge_attr),
                               model(x, edge_index, edge_attr))


def test_bad_arguments_are_named():
    x, edge_index, edge_attr = _graph(seed=9)
    for kwargs, match in (({"edge_dim": 0}, "PDNConv: edge_dim"),
                          ({"hidden_channels": -1}, "PDNConv: hidden_channels"),
                          ({"normalize": "yes"}, "normalize"),
                          ({"flow": "up"}, "PDNConv: flow")):
        with pytest.raises((ValueError, TypeError), match=match):
            gl.PDNConv(**{"in_channels": 4, "out_channels": 3, "edge_dim": 3,
                          "hidden_channels": 5, **kwargs})
    conv = gl.PDNConv(4, 3, 3, 5).double()
    with pytest.raises(ValueError, match=r"edge_attr has shape \[\d+, 2\] .*edge_dim=3"):
        conv(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match=r"PDNConv: edge_attr has 3 rows but the graph has"):
        conv(x, edge_index, edge_attr[:3])
    with pytest.raises(ValueError, match=r"PDNConv expects x of shape \[N, 4\]"):
        conv(x[:, :2], edge_index, edge_attr)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds 1\d\d"):
        conv(x, edge_index + 100, edge_attr)
    with pytest.raises(TypeError, match="PDNConv expects floating-point node features x"):
        conv(x.long(), edge_index, edge_attr)
    with pytest.raises(ValueError, match="one node set"):
        conv((x, x[:5]), edge_index[:, edge_index[1] < 5], edge_attr[edge_index[1] < 5])
