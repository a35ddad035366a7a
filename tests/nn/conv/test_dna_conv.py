import math

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import (
    assert_special_values_agree,
    assert_trains_as_pygs,
    assert_twins_agree,
    seeded_twins,
)
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg

N, LAYERS, C = 10, 3, 8


def _inputs(seed=0, n=N, m=30):
    """``(x [n, LAYERS, C], edge_index)`` in float64: at most one loop per node (gcn_norm's
    rule for several, docs/models.md), parallel edges, the last node without edges."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, LAYERS, C, dtype=torch.float64, generator=gen)
    edge_index = torch.randint(0, n - 1, (2, m), generator=gen)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    return x, torch.cat([edge_index, torch.tensor([[2, 5], [2, 5]])], dim=1)


OPTIONS = {
    "default": {},
    "heads": {"heads": 4},
    "groups": {"groups": 2},
    "heads, groups": {"heads": 2, "groups": 4},
    "no loops, no bias": {"add_self_loops": False, "bias": False},
    "unnormalised": {"normalize": False},
    "target_to_source": {"heads": 2, "flow": "target_to_source"},
}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient(option):
    x, edge_index = _inputs()
    ours, theirs = seeded_twins("DNAConv", C, **OPTIONS[option])  # PyG's initial draws
    weight = torch.rand(edge_index.size(1), dtype=torch.float64)
    assert_twins_agree(ours, theirs, [x, weight], lambda conv, x, w: conv(x, edge_index, w))


def _oracle(conv, x, edge_index, edge_weight):
    """The paper's layer node by node: GCN's normalised weights from a dense adjacency
    (loops of weight 1 where none is given), and per edge and head the scaled dot product
    of the destination's last-layer query with each of the source's layer keys, PyG's
    restricted softmax (an extra score of 0) over the layers, the weighted values."""
    heads, n = conv.multi_head.heads, x.size(0)
    adj = torch.zeros(n, n, dtype=x.dtype)  # adj[i, j]: the edge j -> i
    adj.index_put_((edge_index[1], edge_index[0]), edge_weight, accumulate=True)
    if conv.normalize:
        if conv.add_self_loops:
            missing = adj.diagonal() == 0
            adj[missing, missing] = 1.0
        norm = adj.sum(1).pow(-0.5).nan_to_num(posinf=0.0)
        adj = norm[:, None] * adj * norm[None, :]
    mh = conv.multi_head
    width = C // heads

    def project(lin, rows):  # the grouped map, a block at a time
        blocks = rows.view(-1, mh.groups, C // mh.groups)
        out = torch.cat([blocks[:, g] @ lin.weight[g] for g in range(mh.groups)], dim=1)
        return out if lin.bias is None else out + lin.bias

    out = torch.zeros(n, C, dtype=x.dtype)
    for i in range(n):
        q = project(mh.lin_q, x[i, -1:]).view(heads, width)
        for j in range(n):
            if adj[i, j] == 0:
                continue
            k = project(mh.lin_k, x[j]).view(LAYERS, heads, width)
            v = project(mh.lin_v, x[j]).view(LAYERS, heads, width)
            for h in range(heads):
                s = k[:, h] @ q[h] / math.sqrt(width)
                top = max(float(s.detach().max()), 0.0)
                e = (s - top).exp()
                alpha = e / (e.sum() + math.exp(-top))
                out[i, h * width:(h + 1) * width] += adj[i, j] * (alpha @ v[:, h])
    return out


@pytest.mark.parametrize("option", ["default", "heads, groups", "no loops, no bias",
                                    "unnormalised"])
def test_the_formula_node_by_node_with_the_kernels_and_without(option):
    x, edge_index = _inputs(1)
    torch.manual_seed(3)
    conv = gl.DNAConv(C, **OPTIONS[option]).double()
    weight = torch.rand(edge_index.size(1), dtype=torch.float64)
    want = _oracle(conv, x, edge_index, weight)
    torch.testing.assert_close(conv(x, edge_index, weight), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index, weight), want)


@pytest.mark.parametrize("node", [N - 1, 4])
def test_a_nan_feature_reaches_what_it_reaches_in_pygs(node):
    """A NaN at a node without edges (the last): PyG's per-edge maps never read it, so the
    maps' gradients stay finite; graphloc maps each node once and must not let 0 * NaN in.
    At a node with edges it reaches what it reaches in PyG's."""
    x, edge_index = _inputs(2)
    x[node, 0, 3] = float("nan")
    ours, theirs = seeded_twins("DNAConv", C, heads=2, add_self_loops=False)
    _, grads = assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index),
                                  equal_nan=True)
    maps_finite = all(torch.isfinite(g).all() for g in grads[1:])
    assert maps_finite == (node == N - 1)


def test_special_values_and_empty_graphs_as_pygs():
    x, edge_index = _inputs(3)
    x[1, 2, 0], x[6, 0, 1], x[7, 2, 5] = float("nan"), float("inf"), -float("inf")
    ours, theirs = seeded_twins("DNAConv", C, heads=2)
    assert_special_values_agree(ours, theirs, x, edge_index)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_a_sparse_adjacency_and_its_weights_as_pygs(layout):
    x, edge_index = _inputs(4)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64)
    adj = to_torch_coo_tensor(edge_index.flip(0), weight, (N, N)).coalesce()
    adj = adj if layout == torch.sparse_coo else adj.to_sparse_csr()
    for normalize in (True, False):
        ours, theirs = seeded_twins("DNAConv", C, heads=2, normalize=normalize)
        torch.testing.assert_close(ours(x, adj), theirs(x, adj))


def test_dropout_one_drops_every_weight_and_eval_mode_none():
    x, edge_index = _inputs(5)
    ours, theirs = seeded_twins("DNAConv", C, dropout=1.0)
    assert torch.equal(ours(x, edge_index), torch.zeros(N, C, dtype=torch.float64))
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_a_jumping_model_converts_and_trains_as_pygs():
    """PyG's DNA example: each layer attends over all earlier layers' outputs."""
    class Jump(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(5, C)
            self.convs = torch.nn.ModuleList([pyg.DNAConv(C, heads=2, groups=2)
                                              for _ in range(3)])
            self.out = torch.nn.Linear(C, 3)

        def forward(self, x, edge_index):
            x = self.lin(x).relu()
            layers = x.unsqueeze(1)
            for conv in self.convs:
                x = conv(layers, edge_index).relu()
                layers = torch.cat([layers, x.unsqueeze(1)], dim=1)
            return self.out(x)

    torch.manual_seed(0)
    model = Jump().double()
    x, edge_index = torch.randn(N, 5, dtype=torch.float64), _inputs(6)[1]
    converted = from_pyg(model, (x, edge_index), strict=True)
    assert converted.pyg_conversion["converted"] == ["convs.0", "convs.1", "convs.2"]
    assert all(isinstance(conv, gl.DNAConv) for conv in converted.convs)
    assert_trains_as_pygs(model, converted, lambda net: net(x, edge_index),
                          torch.randint(0, 3, (N,)))


@pytest.mark.parametrize("normalize", [True, False])
def test_from_pyg_checks_a_conv_without_an_example(normalize):
    theirs = pyg.DNAConv(C, heads=4, groups=2, normalize=normalize)
    converted = from_pyg(theirs, strict=True)
    assert converted.pyg_conversion["checked"]
    assert isinstance(converted, gl.DNAConv) and repr(converted) == repr(theirs)


def test_compiled_as_eager():
    x, edge_index = _inputs(7)
    torch.manual_seed(0)
    conv = gl.DNAConv(C, heads=2, groups=2).double()
    graph = Graph(edge_index, num_nodes=N)
    compiled = torch.compile(conv, fullgraph=True)
    torch.testing.assert_close(compiled(x, graph), conv(x, graph))


def test_cached_reuses_the_first_graph_and_says_so():
    x, edge_index = _inputs(8)
    ours, theirs = seeded_twins("DNAConv", C, cached=True)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    other = _inputs(9)[1]
    with pytest.warns(UserWarning, match="first graph"):
        got = ours(x, other)
    torch.testing.assert_close(got, theirs(x, other))  # PyG's numbers: the first graph's


@pytest.mark.parametrize("make, match", [
    (lambda: gl.DNAConv(6, heads=4), "channels=6 does not divide into heads=4"),
    (lambda: gl.DNAConv(12, heads=4, groups=6), "heads=4 and groups=6"),
    (lambda: gl.DNAConv(0), "channels must be an integer"),
    (lambda: gl.DNAConv(8, dropout=1.5), "dropout must be a probability"),
])
def test_bad_options_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs_are_named():
    conv, (x, edge_index) = gl.DNAConv(C).double(), _inputs(10)
    with pytest.raises(ValueError, match=r"\[num_nodes, num_layers >= 1, 8\], got \[10, 8\]"):
        conv(x[:, 0], edge_index)
    with pytest.raises(ValueError, match="got \\[10, 0, 8\\]"):
        conv(x[:, :0], edge_index)
    with pytest.raises(ValueError, match="got \\[10, 3, 4\\]"):
        conv(x[..., :4], edge_index)
    with pytest.raises(TypeError, match="floating-point"):
        conv(x.long(), edge_index)
    with pytest.raises(TypeError, match="float64 parameters, but x is torch.float32"):
        conv(x.float(), edge_index)
    with pytest.raises(ValueError, match="edge_index\\[0\\] holds 10"):
        conv(x, torch.tensor([[10], [0]]))
    with pytest.raises(ValueError, match="edge_weight has 2 rows"):
        conv(x, edge_index, torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="one node set"):
        conv(x, Graph.bipartite(torch.tensor([[0], [1]]), (N, 4)))
    conv.node_dim = -2  # (from_pyg copies PyG's; there the layers would be read as nodes)
    with pytest.raises(ValueError, match="node_dim=-2, but x is"):
        conv(x, edge_index)


def test_a_hub_of_300_edges_as_pygs():
    """One destination with 300 incoming edges (rows longer than the kernels' prefetch and
    block lengths), against PyG with every gradient."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(40, LAYERS, C, dtype=torch.float64, generator=gen)
    edge_index = torch.cat([torch.stack([torch.randint(0, 40, (300,), generator=gen),
                                         torch.zeros(300, dtype=torch.long)]),
                            torch.randint(0, 40, (2, 60), generator=gen)], dim=1)
    ours, theirs = seeded_twins("DNAConv", C, heads=4, groups=2)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))
