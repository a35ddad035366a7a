import math

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import assert_twins_agree

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg

N = 14


def _graph(seed=0, m=50):
    """``(x, edge_index, neg_edge_index)`` in float64: loops and parallel edges included,
    the last node without edges."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, 6, dtype=torch.float64, generator=gen)
    edge_index = torch.randint(0, N - 1, (2, m), generator=gen)
    return x, edge_index, torch.randint(0, N, (2, 12), generator=gen)


def _twins(**kwargs):
    """graphloc's and PyG's SuperGATConv from one seed in float64: PyG's draws, checked
    equal, then a random bias on both."""
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(3)
        twins.append(module.SuperGATConv(6, 4, **kwargs).double())
    ours, theirs = twins
    for (key, a), (other, b) in zip(ours.state_dict().items(), theirs.state_dict().items(),
                                    strict=True):
        assert key == other and torch.equal(a, b)
    if theirs.bias is not None:
        with torch.no_grad():
            theirs.bias.uniform_(-1, 1)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


OPTIONS = {"MX": {}, "MX, two heads": {"heads": 2},
           "SD, three heads averaged": {"attention_type": "SD", "heads": 3, "concat": False},
           "MX without loops": {"heads": 2, "add_self_loops": False},
           "SD without loops or bias": {"attention_type": "SD", "add_self_loops": False,
                                        "bias": False},
           "MX, slope 0.05, undirected": {"negative_slope": 0.05, "is_undirected": True}}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_in_eval_and_in_training_with_the_attention_loss(option):
    """Outputs and every gradient; in training with given negatives (and every edge kept:
    no random draw on either side) also att_x, att_y and the loss, through whose gradient
    the logits of the edges and negatives train."""
    x, edge_index, negatives = _graph()
    ours, theirs = _twins(**OPTIONS[option])
    for conv in (ours, theirs):
        conv.eval()
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))
    for conv in (ours, theirs):
        conv.train()

    def with_loss(conv, x):
        out = conv(x, edge_index, negatives)
        return out + conv.get_attention_loss()
    assert_twins_agree(ours, theirs, [x], with_loss)
    torch.testing.assert_close(ours.att_x, theirs.att_x)
    assert torch.equal(ours.att_y, theirs.att_y)
    torch.testing.assert_close(ours.get_attention_loss(), theirs.get_attention_loss())
    ours.eval()
    assert torch.equal(ours.get_attention_loss(), torch.tensor([0]))


def _oracle(conv, x, edge_index):
    """SuperGAT from its formula, destination by destination: loops replaced by one per
    node, the logits <h_i, h_j>, the MX or SD scores, LeakyReLU, a softmax, the sum."""
    H, C = conv.heads, conv.out_channels
    h = (x @ conv.lin.weight.t()).view(N, H, C)
    edges = edge_index[:, edge_index[0] != edge_index[1]] if conv.add_self_loops else edge_index
    if conv.add_self_loops:
        edges = torch.cat([edges, torch.arange(N).repeat(2, 1)], dim=1)
    out = torch.zeros(N, H, C, dtype=x.dtype)
    for i in range(N):
        sources = edges[0, edges[1] == i]
        if not sources.numel():
            continue
        logits = (h[sources] * h[i]).sum(-1)  # [e, H]
        if conv.attention_type == "MX":
            scores = ((h[sources] * conv.att_l).sum(-1) + (h[i] * conv.att_r).sum(-1)) * \
                logits.sigmoid()
        else:
            scores = logits / math.sqrt(C)
        alpha = F.leaky_relu(scores, conv.negative_slope).softmax(0)
        out[i] = (alpha.unsqueeze(-1) * h[sources]).sum(0)
    out = out.reshape(N, H * C) if conv.concat else out.mean(1)
    return out if conv.bias is None else out + conv.bias


@pytest.mark.parametrize("option", OPTIONS)
def test_the_formula_edge_by_edge_with_the_kernels_and_without(option):
    x, edge_index, _ = _graph(seed=1)
    ours, _ = _twins(**OPTIONS[option])
    ours.eval()
    with torch.no_grad():
        want = _oracle(ours, x, edge_index)
        for context in (torch.no_grad, reference_ops):
            with context():
                torch.testing.assert_close(ours(x, edge_index), want)


@pytest.mark.parametrize("option", ["MX, two heads", "MX without loops",
                                    "SD without loops or bias"])
def test_a_nan_feature_reaches_what_it_reaches_in_pygs(option):
    """A NaN feature of a node without edges: without loops PyG's per-edge products never
    read it, so the attention vectors keep finite gradients (a product over every node's
    row passed 0 * NaN on to them)."""
    x, edge_index, negatives = _graph(seed=2)
    x[N - 1, 2] = float("nan")  # (the last node has no edges)
    ours, theirs = _twins(**OPTIONS[option])
    ours.eval()
    theirs.eval()
    for context in (torch.enable_grad, reference_ops):
        with context():
            _, want_grads = assert_twins_agree(ours, theirs, [x],
                                               lambda conv, x: conv(x, edge_index),
                                               equal_nan=True)
    if not ours.add_self_loops and ours.att_l is not None:  # (with loops it reads itself)
        assert want_grads[1].isfinite().all()  # att_l: untouched by the NaN


def test_sampled_negatives_are_distinct_non_edges_within_each_graph():
    """Against a brute force over the pairs: every sampled negative is a pair of distinct
    nodes that is an edge in neither direction, none repeats, the count is PyG's
    (neg_sample_ratio * edge_sample_ratio * E), and with a batch each lies in one graph,
    that many per graph; a graph with fewer non-edges gives all of them."""
    conv = gl.SuperGATConv(6, 4, neg_sample_ratio=0.5)
    gen = torch.Generator().manual_seed(4)
    edge_index = torch.randint(0, 30, (2, 80), generator=gen)
    torch.manual_seed(0)
    negatives = conv.negative_sampling(edge_index, 30)
    edges = {tuple(e) for e in edge_index.t().tolist()}
    pairs = [tuple(e) for e in negatives.t().tolist()]
    assert len(pairs) == 40 == len(set(pairs))
    assert all(j != i and (j, i) not in edges and (i, j) not in edges for j, i in pairs)
    batch = torch.arange(30) // 10
    within = edge_index[:, (edge_index // 10)[0] == (edge_index // 10)[1]]
    negatives = conv.negative_sampling(within, 30, batch)
    graph_of = (negatives // 10)
    assert torch.equal(graph_of[0], graph_of[1])
    assert torch.bincount(graph_of[0], minlength=3).tolist() == [within.size(1) // 2] * 3
    full = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 3]])  # K4 minus 1-3 and 2-3
    dense = gl.SuperGATConv(6, 4, neg_sample_ratio=5.0).negative_sampling(full, 4)
    assert sorted(map(tuple, dense.t().tolist())) == [(1, 3), (2, 3), (3, 1), (3, 2)]


def test_training_samples_positives_and_negatives_by_the_ratios():
    """edge_sample_ratio keeps that share of the edges (loops included) as positives, in
    PyG's order; the negatives are the ratios' count of non-edges; att_y marks them."""
    gen = torch.Generator().manual_seed(5)
    edge_index = torch.randint(0, 300, (2, 2000), generator=gen)
    x = torch.randn(300, 6, generator=gen)
    torch.manual_seed(1)
    conv = gl.SuperGATConv(6, 4, edge_sample_ratio=0.6, neg_sample_ratio=0.5).train()
    conv(x, edge_index)
    total = edge_index.size(1) - int((edge_index[0] == edge_index[1]).sum()) + 300
    positives = int(conv.att_y.sum())
    assert abs(positives - 0.6 * total) < 4 * math.sqrt(total * 0.24)
    assert conv.att_x.size(0) - positives == int(0.5 * 0.6 * total)
    assert conv.att_y[:positives].eq(1).all() and conv.att_y[positives:].eq(0).all()
    all_kept = gl.SuperGATConv(6, 4).train()
    all_kept(x, edge_index)
    logits = (all_kept.lin(x).view(-1, 1, 4)[edge_index[1]] *
              all_kept.lin(x).view(-1, 1, 4)[edge_index[0]]).sum(-1)
    kept = edge_index[0] != edge_index[1]  # PyG's order: the old loops dropped, new ones last
    torch.testing.assert_close(all_kept.att_x[:int(kept.sum())], logits[kept])


def test_inputs_from_pyg_and_named_errors():
    x, edge_index, negatives = _graph(seed=6)
    ours, theirs = _twins(heads=2)
    ours.eval()
    theirs.eval()
    want = theirs(x, edge_index)
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=N)), want)
    distinct = edge_index.unique(dim=1)  # (an adjacency holds each edge once)
    adj_t = torch.sparse_coo_tensor(distinct.flip(0), torch.ones(distinct.size(1)),
                                    (N, N)).coalesce()
    torch.testing.assert_close(ours(x, adj_t), theirs(x, distinct))
    converted = from_pyg(theirs, (x, edge_index), strict=True)
    assert type(converted) is gl.SuperGATConv
    torch.testing.assert_close(converted(x, edge_index), want)
    with pytest.raises(ValueError, match="attention_type must be one of .*got 'GO'"):
        gl.SuperGATConv(6, 4, attention_type="GO")
    with pytest.raises(ValueError, match="edge_sample_ratio must lie in \\(0, 1\\], got 0"):
        gl.SuperGATConv(6, 4, edge_sample_ratio=0)
    with pytest.raises(ValueError, match="neg_sample_ratio must be > 0, got -1"):
        gl.SuperGATConv(6, 4, neg_sample_ratio=-1)
    ours.train()
    with pytest.raises(ValueError, match="neg_edge_index holds 14"):
        ours(x, edge_index, torch.tensor([[0], [N]]))
    with pytest.raises(ValueError, match=r"neg_edge_index must be an integer tensor \[2, E_neg\]"):
        ours(x, edge_index, negatives.double())
    with pytest.raises(ValueError, match="batch must be a sorted integer tensor"):
        ours(x, edge_index, batch=torch.arange(N).flip(0))
    with pytest.raises(TypeError, match="x must be one tensor"):
        ours((x, x), edge_index)
    with pytest.raises(RuntimeError, match="no training forward has run"):
        gl.SuperGATConv(6, 4).get_attention_loss()


def test_a_compiled_training_forward_takes_given_negatives_and_says_it_needs_them():
    x, edge_index, negatives = _graph(seed=7)
    conv = gl.SuperGATConv(6, 4, heads=2).double().train()

    def step(x, negatives=None):
        return conv(x, edge_index, negatives).sum() + conv.get_attention_loss()
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, negatives), step(x, negatives))
    with pytest.raises(Exception, match="pass neg_edge_index"):
        compiled(x)


def test_no_nodes_no_edges_and_one_node_as_pygs():
    """Empty inputs: PyG's outputs, gradients, labels and positive logits (eval and
    training)."""
    ours, theirs = _twins(heads=2)
    no_edges = torch.empty(2, 0, dtype=torch.long)
    gen = torch.Generator().manual_seed(8)
    for x in (torch.randn(0, 6, dtype=torch.float64), torch.randn(1, 6, dtype=torch.float64),
              torch.randn(5, 6, dtype=torch.float64, generator=gen)):
        for training in (False, True):
            ours.train(training)
            theirs.train(training)
            assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, no_edges))
            if training:  # the loops' logits (the negatives are random draws)
                assert torch.equal(ours.att_y, theirs.att_y)
                positives = int(theirs.att_y.sum())
                torch.testing.assert_close(ours.att_x[:positives], theirs.att_x[:positives])


def test_a_hub_of_300_edges_as_pygs():
    ours, theirs = _twins(heads=2, attention_type="SD")
    ours.eval()
    theirs.eval()
    hub = torch.stack([torch.arange(300) % N, torch.zeros(300, dtype=torch.long)])
    x = torch.randn(N, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    for context in (torch.enable_grad, reference_ops):
        with context():
            assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, hub))
