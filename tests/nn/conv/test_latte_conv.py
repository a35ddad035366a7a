"""LATTEConv against a loop-by-loop re-implementation of the official layer."""

import pytest
import torch
import torch.nn.functional as F

from graphloc.hetero import HeteroGraph
from graphloc.nn.conv.latte import LATTEConv

TYPES = {"paper": 7, "author": 5, "term": 3}
RELATIONS = {
    ("author", "writes", "paper"): torch.tensor([[0, 1, 2, 3, 0, 4, 4], [0, 1, 2, 3, 4, 4, 5]]),
    ("paper", "by", "author"): torch.tensor([[0, 1, 2, 3, 4, 4, 5], [0, 1, 2, 3, 0, 4, 4]]),
    ("term", "in", "paper"): torch.tensor([[0, 1, 2, 2], [0, 0, 1, 2]]),  # paper 6: none
}


def _setup(heads=2, width=8):
    torch.manual_seed(0)
    graph = HeteroGraph(TYPES, RELATIONS)
    paths = [(r,) for r in RELATIONS]
    conv = LATTEConv(4, width, list(TYPES), paths, heads=heads).eval()
    with torch.no_grad():  # sharpening away from 1 so it is exercised
        for p in conv.sharpening.values():
            p.fill_(1.7)
    h = {t: torch.randn(n, 4) for t, n in TYPES.items()}
    return conv, graph, paths, h


def _dense(conv, graph, paths, h, heads, width):
    """out[u] = ReLU(sum_m beta_um z_um + beta_u,self l_u), one node and edge at a time."""
    d = width // heads
    out, attention = {}, {}
    for t, n in TYPES.items():
        into = [p for p in paths if p[0][2] == t]
        rows = []
        for u in range(n):
            left = conv.left[t](h[t][u])
            beta = conv.beta[t](h[t][u]).softmax(0)
            total = beta[-1] * left
            for i, path in enumerate(into):
                name = "|".join("-".join(r) for r in path)
                src_type = path[-1][0]
                ei = graph[path[0]].edge_index
                edges = [e for e in range(ei.size(1)) if ei[1, e] == u]
                z = torch.zeros(width)
                if edges:
                    for k in range(heads):
                        sl = conv.left[t](h[t][u])[k * d:(k + 1) * d] @ conv.att_left[name][k]
                        scores = torch.stack([conv.sharpening[name] * F.leaky_relu(
                            sl + conv.right[src_type](h[src_type][ei[0, e]])[k * d:(k + 1) * d]
                            @ conv.att_right[name][k], 0.2) for e in edges])
                        alpha = scores.softmax(0)
                        for a, e in zip(alpha, edges, strict=True):
                            attention[(path, e, k)] = a
                            r = conv.right[src_type](h[src_type][ei[0, e]])
                            z[k * d:(k + 1) * d] += a * r[k * d:(k + 1) * d]
                total = total + beta[i] * z
            rows.append(F.relu(total))
        out[t] = torch.stack(rows)
    return out, attention


@pytest.mark.parametrize("heads", [1, 2])
def test_latte_conv_matches_the_loop_reference(heads):
    conv, graph, paths, h = _setup(heads)
    graphs = {p: graph[p[0]] for p in paths}
    out, attention, _ = conv(h, graphs)
    expected, expected_attention = _dense(conv, graph, paths, h, heads, 8)
    for t in TYPES:
        torch.testing.assert_close(out[t], expected[t], atol=1e-5, rtol=1e-5)
    for (path, e, k), value in expected_attention.items():
        torch.testing.assert_close(attention[path][e, k], value, atol=1e-6, rtol=1e-5)
    # the term type receives nothing: beta has only "self"
    assert conv.beta["term"].out_features == 1
    assert conv.beta["paper"].out_features == 3


def test_gradients_reach_every_parameter_used():
    conv, graph, paths, h = _setup()
    out, _, _ = conv(h, {p: graph[p[0]] for p in paths})
    sum(o.sum() for o in out.values()).backward()
    unused = [n for n, p in conv.named_parameters() if p.grad is None]
    assert unused == []


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"hidden_channels \(7\) must be divisible by heads"):
        LATTEConv(4, 7, ["a"], [], heads=2)
    conv, graph, paths, h = _setup()
    with pytest.raises(ValueError, match="no graph for the meta-path"):
        conv(h, {})
