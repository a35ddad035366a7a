import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from parity import assert_special_values_agree, assert_twins_agree, seeded_twins

import graphloc.nn as gl

ALL = ["sum", "mean", "symnorm", "min", "max", "var", "std"]



def _graph(seed=0, n=14, m=50):
    """Parallel edges, loops, a hub; the last node has an edge (PyG's self-loops without
    "symnorm" count max id + 1 nodes: test_every_node_gets_its_loop)."""
    edge_index = random_edge_index(n - 1, m, seed=seed, hub_degree=9)
    edge_index = torch.cat([edge_index, edge_index[:, :4], torch.tensor([[n - 1], [0]])], 1)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5, dtype=torch.float64, generator=gen), edge_index


@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("aggregators", [["symnorm"], ALL, ["max", "std"], ["mean", "var"]])
def test_matches_pyg_with_gradients(aggregators, add_self_loops):
    x, edge_index = _graph()
    ours, theirs = seeded_twins("EGConv", 5, 6, aggregators, num_heads=3, num_bases=2,
                                add_self_loops=add_self_loops)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index))


def test_an_expanded_upstream_gradient_gives_pygs_gradients():
    """out.sum().backward() hands on a gradient of strides 0 (made contiguous before the
    batched product's backward, which took 20x its forward on it)."""
    x, edge_index = _graph(seed=1)
    ours, theirs = seeded_twins("EGConv", 5, 8, ["symnorm", "max"], num_heads=4)
    ones = torch.ones(1, dtype=torch.float64).expand(14, 8)
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index),
                       upstream=ones)


def _dense_eg(conv, x, edge_index):
    """The layer from its formula: every aggregator over each node's in-neighbours and
    itself (one loop per node, parallel edges kept), the bases weighted per node, head
    and aggregator."""
    n, heads = x.size(0), conv.num_heads
    bases = (x @ conv.bases_lin.weight.t()).view(n, conv.num_bases, -1)
    weightings = (x @ conv.comb_lin.weight.t() + conv.comb_lin.bias).view(
        n, heads, len(conv.aggregators), conv.num_bases)
    keep = edge_index[0] != edge_index[1]
    src = torch.cat([edge_index[0, keep], torch.arange(n)])
    dst = torch.cat([edge_index[1, keep], torch.arange(n)])
    degree = torch.bincount(dst, minlength=n).double()
    rows = []
    for i in range(n):
        h = bases[src[dst == i]]  # [k, B, C/H]
        norm = (degree[src[dst == i]] * degree[i]).rsqrt().view(-1, 1, 1)
        values = {"sum": h.sum(0), "mean": h.mean(0), "symnorm": (norm * h).sum(0),
                  "min": h.min(0).values, "max": h.max(0).values,
                  "var": h.var(0, unbiased=False),
                  "std": h.var(0, unbiased=False).clamp(min=1e-5).sqrt()}
        per_aggregator = torch.stack([values[a] for a in conv.aggregators])  # [A, B, C/H]
        rows.append(torch.einsum("hab,abc->hc", weightings[i], per_aggregator).flatten())
    return torch.stack(rows) + conv.bias


def test_the_formula_node_by_node():
    x, edge_index = _graph(seed=2)
    conv = gl.EGConv(5, 6, ALL, num_heads=2, num_bases=3).double()
    torch.nn.init.normal_(conv.bias)
    want = _dense_eg(conv, x, edge_index)
    torch.testing.assert_close(conv(x, edge_index), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index), want)


def test_every_node_gets_its_loop():
    """PyG's EGConv without "symnorm" adds loops with add_remaining_self_loops(edge_index),
    which counts max id + 1 nodes: nodes past the largest id (isolated at the end) got no
    loop, so their aggregate was 0 instead of their own bases. graphloc's loops every
    node, as the paper's N(i) + {i} and PyG's "symnorm" path do."""
    x, edge_index = _graph(seed=3)
    edge_index = edge_index[:, (edge_index < 10).all(0)]  # nodes 10 .. 13 isolated
    conv = gl.EGConv(5, 6, ["max", "mean"], num_heads=2).double()
    torch.nn.init.normal_(conv.bias)
    torch.testing.assert_close(conv(x, edge_index), _dense_eg(conv, x, edge_index))


def test_cached_keeps_the_first_graph_as_pygs():
    x, edge_index = _graph(seed=4)
    ours, theirs = seeded_twins("EGConv", 5, 6, ["symnorm", "sum"], num_heads=2, cached=True)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    other = edge_index[:, 5:]
    with pytest.warns(UserWarning, match="reuses the normalised adjacency of the first"):
        got = ours(x, other)
    torch.testing.assert_close(got, theirs(x, other))
    ours.reset_parameters()
    assert ours._cached_edge_index is None


def test_a_static_batch_is_read_nodes_first_as_pyg_s_node_dim():
    x, edge_index = _graph(seed=5)
    ours, _ = seeded_twins("EGConv", 5, 6, ["symnorm", "max"], num_heads=2)
    batch = torch.randn(14, 3, 5, dtype=torch.float64)
    want = torch.stack([ours(batch[:, b], edge_index) for b in range(3)], dim=1)
    torch.testing.assert_close(ours(batch, edge_index), want)


def test_special_values_and_empty_graphs():
    """NaN and -inf features beside a hub: PyG's output (NaN where PyG's is), with the
    kernels and with their pure-torch twins; no edges gives PyG's."""
    x, edge_index = _graph(seed=6)
    x[3, 1], x[7, 2] = float("nan"), float("-inf")
    ours, theirs = seeded_twins("EGConv", 5, 6, ALL, num_heads=2)
    assert_special_values_agree(ours, theirs, x, edge_index, check_empty=False)
    # (no edges with "symnorm": PyG's other aggregators loop only max id + 1 nodes)
    assert_special_values_agree(*seeded_twins("EGConv", 5, 6, ["symnorm"], num_heads=2), x,
                                edge_index)

def test_from_pyg_converts_it():
    x, edge_index = _graph(seed=7)
    torch.manual_seed(0)
    theirs = pyg.EGConv(5, 8, ["symnorm", "std"], num_heads=4).double()
    ours = gl.from_pyg(theirs, example=(x, edge_index))
    assert type(ours) is gl.EGConv and ours.pyg_conversion["checked"]
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_bad_arguments_are_named():
    x, edge_index = _graph()
    with pytest.raises(ValueError, match=r"out_channels \(got 7\) must be divisible by the "
                                         r"number of heads, num_heads \(got 2\)"):
        gl.EGConv(5, 7, num_heads=2)
    with pytest.raises(ValueError, match="Unsupported aggregator: 'median' in aggregators"):
        gl.EGConv(5, 8, ["symnorm", "median"])
    with pytest.raises(ValueError, match="aggregators must be a non-empty list"):
        gl.EGConv(5, 8, "symnorm")
    with pytest.raises(ValueError, match="num_bases must be an integer >= 1, got 0"):
        gl.EGConv(5, 8, num_bases=0)
    with pytest.raises(ValueError, match="one node set, not a pair"):
        gl.EGConv(5, 8)((x.float(), x.float()), edge_index)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 5\]"):
        gl.EGConv(5, 8)(x[:, :3].float(), edge_index)
    conv = gl.EGConv(5, 8)
    conv.aggregators = ["symnorm", "mode"]
    with pytest.raises(ValueError, match="Unsupported aggregator: 'mode'"):
        conv(x.float(), edge_index)
