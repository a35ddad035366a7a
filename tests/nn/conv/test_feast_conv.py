import copy

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_special_values_agree, assert_twins_agree, seeded_twins
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _graph(seed=0, n=14, m=50, width=4):
    """``(x, edge_index)`` in float64 with loops, parallel edges, a hub and isolated nodes."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    edge_index = torch.cat([edge_index, edge_index[:, :4]], 1)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, width, dtype=torch.float64, generator=gen), edge_index


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("loops", [True, False])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
def test_matches_pyg_with_gradients(heads, loops, aggr):
    x, edge_index = _graph()
    if aggr == "max":  # (tied messages: graphloc's max sends the gradient to one winner)
        edge_index = torch.unique(edge_index, dim=1)
    ours, theirs = seeded_twins("FeaStConv", 4, 5, heads=heads, add_self_loops=loops, aggr=aggr)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_a_bipartite_pair_a_flow_and_a_lazy_width_match_pyg(flow):
    gen = torch.Generator().manual_seed(1)
    x_src = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(6, 4, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 6, (30,), generator=gen)])
    for width in (4, -1):  # (lazy: u, then lin, drawn at the first call, as PyG's)
        twins = []
        for module in (gl, pyg):
            torch.manual_seed(7)
            conv = module.FeaStConv(width, 5, heads=2).double()
            conv((x_src, x_dst), edge_index)
            twins.append(conv)
        ours, theirs = twins
        for (key, a), b in zip(ours.state_dict().items(), theirs.state_dict().values(),
                               strict=True):
            assert torch.equal(a, b), key
        assert_twins_agree(ours, theirs, [x_src, x_dst],
                           lambda conv, a, b: conv((a, b), edge_index))
    x, edges = _graph(seed=2)
    ours, theirs = seeded_twins("FeaStConv", 4, 3, heads=2, flow=flow)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edges))


def _dense_feast(conv, x_src, x_dst, edge_index, aggr):
    """The paper's layer node by node: per edge j -> i the softmax over the heads of
    u_h (x_j - x_i) + c_h weighs the maps W_h x_j; aggregated over i's edges (PyG's loop
    per node included), plus the bias."""
    H, M = conv.heads, conv.out_channels
    if conv.add_self_loops:
        keep = edge_index[0] != edge_index[1]
        loops = torch.arange(min(x_src.size(0), x_dst.size(0))).expand(2, -1)
        edge_index = torch.cat([edge_index[:, keep], loops], dim=1)
    W = conv.lin.weight.view(H, M, -1)
    rows = []
    for i in range(x_dst.size(0)):
        messages = []
        for e in (edge_index[1] == i).nonzero().view(-1).tolist():
            x_j = x_src[edge_index[0, e]]
            q = torch.softmax(conv.u.weight @ (x_j - x_dst[i]) + conv.c, dim=0)
            messages.append(sum(q[h] * (W[h] @ x_j) for h in range(H)))
        if not messages:
            h = torch.zeros(M, dtype=x_src.dtype)
        else:
            stacked = torch.stack(messages)
            h = {"add": stacked.sum(0), "mean": stacked.mean(0),
                 "min": stacked.min(0).values}[aggr]
        rows.append(h + conv.bias)
    return torch.stack(rows)


@pytest.mark.parametrize("loops", [True, False])
@pytest.mark.parametrize("aggr", ["mean", "add", "min"])
def test_the_formula_node_by_node(loops, aggr):
    x, edge_index = _graph(seed=3, n=10, m=30)
    torch.manual_seed(4)
    conv = gl.FeaStConv(4, 3, heads=3, add_self_loops=loops, aggr=aggr).double()
    want = _dense_feast(conv, x, x, edge_index, aggr)
    torch.testing.assert_close(conv(x, edge_index), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index), want)
    x_dst = x[:7] + 0.5  # bipartite: the destinations' own features enter the scores
    torch.testing.assert_close(conv((x, x_dst), edge_index[:, edge_index[1] < 7]),
                               _dense_feast(conv, x, x_dst, edge_index[:, edge_index[1] < 7],
                                            aggr))


def test_translated_points_keep_their_scores_as_well_as_pygs():
    """FeaSt's scores read x_j - x_i: on float32 points far from the origin (1e4, spread
    1e-2), graphloc's per-node products, in float64, keep the output and every gradient
    within float32 rounding of the exact values, as PyG's per-edge difference does
    (float32 products u x_j of size 1e4 would put errors of 1e-3 into scores of 1e-2)."""
    x, edge_index = _graph(seed=5, n=30, m=120)
    x = (x * 1e-2 + 1e4).float().double()  # (the exact value of float32 points)
    ours, theirs = seeded_twins("FeaStConv", 4, 6, heads=4)
    results = []
    for conv, dtype in ((theirs, torch.float64), (ours.float(), torch.float32),
                        (copy.deepcopy(theirs).float(), torch.float32)):
        leaf = x.to(dtype).requires_grad_()
        out = conv(leaf, edge_index)
        upstream = torch.linspace(-1, 1, out.numel(), dtype=dtype).view_as(out)
        grads = torch.autograd.grad(out, [leaf, *conv.parameters()], upstream)
        results.append([t.double() for t in (out, *grads)])
    exact, got, pygs = results
    for want, ours_value, pyg_value in zip(exact, got, pygs, strict=True):
        scale = want.abs().max()
        assert (ours_value - want).abs().max() <= 1e-5 * scale  # float32 rounding, no more
        assert (ours_value - want).abs().max() <= 4 * (pyg_value - want).abs().max() + \
            1e-6 * scale


def test_special_values_give_pygs_numbers():
    """NaN and infinities: PyG's per-edge products (inf - inf is NaN per edge), also for the
    gradients: a NaN row of a node that sends no message stays out of lin's gradient."""
    x, edge_index = _graph(seed=6)
    x[3, 1], x[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    ours, theirs = seeded_twins("FeaStConv", 4, 5, heads=2)
    assert_special_values_agree(ours, theirs, x, edge_index)
    x, edge_index = _graph(seed=7)
    x[13, 0] = float("nan")  # node 13 sends no message (and gets no loop)
    assert not (edge_index[0] == 13).any()
    ours, theirs = seeded_twins("FeaStConv", 4, 5, heads=2, add_self_loops=False)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index)[:13])


def test_sparse_adjacencies_graphs_and_static_batches_match_pyg():
    x, edge_index = _graph(seed=8)
    edge_index = torch.unique(edge_index, dim=1)
    ours, theirs = seeded_twins("FeaStConv", 4, 5, heads=3)
    want = theirs(x, edge_index)
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor):
        adj = to_sparse(edge_index.flip(0), size=(14, 14))
        torch.testing.assert_close(ours(x, adj), want)
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=14)), want)
    batch = torch.stack([x, 2 * x])
    torch.testing.assert_close(ours(batch, edge_index),
                               torch.stack([want, theirs(2 * x, edge_index)]))


def test_a_hook_on_lin_sees_pygs_per_edge_call():
    x, edge_index = _graph(seed=9)
    ours, theirs = seeded_twins("FeaStConv", 4, 5, heads=2, add_self_loops=False)
    seen = []
    for conv in (ours, theirs):
        conv.lin.register_forward_hook(lambda m, args, out: seen.append(args[0].shape))
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    assert seen == [(edge_index.size(1), 4)] * 2


def test_no_edges_give_the_bias_where_pygs_fails():
    x, _ = _graph(seed=10)
    ours, theirs = seeded_twins("FeaStConv", 4, 5, heads=2, add_self_loops=False)
    empty = torch.empty(2, 0, dtype=torch.long)
    torch.testing.assert_close(ours(x, empty), ours.bias.expand(14, 5))
    with pytest.raises(RuntimeError, match="reshape"):
        theirs(x, empty)


def test_from_pyg_converts_a_feastnet():
    class FeaStNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.FeaStConv(4, 8, heads=3)
            self.conv2 = pyg.FeaStConv(8, 3, heads=3, aggr="add")

        def forward(self, x, edge_index):
            return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)

    x, edge_index = _graph(seed=11)
    torch.manual_seed(0)
    model = FeaStNet().double()
    converted = from_pyg(model, example=(x, edge_index))
    assert type(converted.conv1) is gl.FeaStConv and type(converted.conv2) is gl.FeaStConv
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))
    lazy = torch.nn.ModuleList([pyg.FeaStConv(-1, 3)])
    with pytest.warns(UserWarning):
        kept = from_pyg(lazy)
    [(where, reason)] = kept.pyg_conversion["kept"]
    assert where == "0" and "a lazy FeaStConv not called yet" in reason


def test_bad_arguments_are_named():
    x, edge_index = _graph(seed=12)
    for kwargs, match in (({"heads": 0}, "FeaStConv: heads"),
                          ({"out_channels": 0}, "FeaStConv: out_channels"),
                          ({"add_self_loops": "yes"}, "add_self_loops"),
                          ({"flow": "both"}, "FeaStConv: flow"),
                          ({"aggr": ["mean", "max"], "aggr_kwargs": {"mode": "cat"}},
                           "changes the width")):
        with pytest.raises((ValueError, TypeError), match=match):
            gl.FeaStConv(**{"in_channels": 4, "out_channels": 3, **kwargs})
    conv = gl.FeaStConv(4, 3).double()
    with pytest.raises(ValueError, match=r"FeaStConv expects x of shape \[N, 4\], got \[14, 3\]"):
        conv(x[:, :3], edge_index)
    with pytest.raises(ValueError, match=r"FeaStConv: its head scores read x_j - x_i"):
        conv((x, None), edge_index)
    with pytest.raises(ValueError, match="edge_index"):
        conv(x, edge_index + 100)
    with pytest.raises(TypeError, match="FeaStConv expects floating-point node features x"):
        conv(x.long(), edge_index)
