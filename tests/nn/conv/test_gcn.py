import warnings

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import transpose_products
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import GCNConv


@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("add_self_loops,normalize", [(True, True), (False, True),
                                                      (False, False)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_matches_pyg(improved, add_self_loops, normalize, bias, weighted):
    edge_index, n = parity_graph(1)
    kwargs = dict(improved=improved, add_self_loops=add_self_loops, normalize=normalize,
                  bias=bias)
    # PyG applies `improved` only with explicit edge weights: give it unit weights then.
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) if weighted else None
    pyg_weight = weight if weighted or not improved else torch.ones(edge_index.size(1),
                                                                    dtype=torch.float64)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(GCNConv(8, 6, **kwargs), pyg.GCNConv(8, 6, **kwargs),
                  lambda m, x: m(x, graph, weight), lambda m, x: m(x, edge_index, pyg_weight),
                  torch.randn(n, 8))


def test_gcn_improved_without_weights_is_a_plus_two_i():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    conv = GCNConv(3, 3, improved=True, bias=False).double()
    x = torch.randn(3, 3, dtype=torch.float64)
    a_hat = torch.zeros(3, 3, dtype=torch.float64)
    a_hat[edge_index[1], edge_index[0]] = 1.0
    a_hat += 2 * torch.eye(3, dtype=torch.float64)
    d = a_hat.sum(1).pow(-0.5)
    expected = (d[:, None] * a_hat * d[None, :]) @ conv.lin(x)
    torch.testing.assert_close(conv(x, edge_index), expected)


def test_pyg_improved_loops_weigh_one_only_without_edge_weights():
    """The option from_pyg sets: PyG 2.8's gcn_norm gives the loops it adds weight 1 when
    an edge_index comes without weights, 2 with them."""
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    weight = torch.tensor([0.5, 2.0, 1.5, 1.0], dtype=torch.float64)
    conv = GCNConv(3, 3, improved=True, bias=False, pyg_improved_loops=True).double()
    x = torch.randn(3, 3, dtype=torch.float64)
    for given, loop in ((None, 1.0), (weight, 2.0)):
        a_hat = torch.zeros(3, 3, dtype=torch.float64)
        a_hat[edge_index[1], edge_index[0]] = 1.0 if given is None else given
        a_hat += loop * torch.eye(3, dtype=torch.float64)
        d = a_hat.sum(1).pow(-0.5)
        expected = (d[:, None] * a_hat * d[None, :]) @ conv.lin(x)
        torch.testing.assert_close(conv(x, edge_index, given), expected)
        torch.testing.assert_close(conv(x, Graph(edge_index, num_nodes=3), given), expected)


def test_gcn_cached_and_raw_edge_index_agree():
    edge_index, n = parity_graph(2)
    conv = GCNConv(4, 4, cached=True)
    x = torch.randn(n, 4)
    first = conv(x, edge_index)
    torch.testing.assert_close(conv(x, Graph(edge_index, num_nodes=n)), first)
    assert conv._cached_edge_index is not None
    conv.reset_parameters()
    assert conv._cached_edge_index is None


def test_gcn_cached_on_another_graph_says_so():
    """cached=True on a second graph silently gave the first graph's output (as PyG's
    does). Now PyG's output (checked) with a warning; the same graph in another tensor or
    as a Graph stays quiet; another node count is an error; clearing the cache re-caches."""
    edge_index, n = parity_graph(4)
    other = torch.stack([edge_index[1], edge_index[0]])  # the reversed graph
    x = torch.randn(n, 4)
    ours, theirs = GCNConv(4, 3, cached=True), pyg.GCNConv(4, 3, cached=True)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours(x, edge_index.clone())
        ours(x, Graph(edge_index, num_nodes=n))
    with pytest.warns(UserWarning, match="reuses the normalised adjacency of the first graph"):
        stale = ours(x, other)
    torch.testing.assert_close(stale, theirs(x, other))  # PyG's (stale) numbers
    with pytest.warns(UserWarning, match="edge weights differ"):
        ours(x, edge_index, torch.rand(edge_index.size(1)))
    with pytest.raises(ValueError, match="normalised a graph of 30 nodes .* this call's graph "
                                         "has 31"):
        ours(torch.randn(n + 1, 4), edge_index)
    ours._cached_edge_index = None  # PyG's way to clear it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours(x, other)
        ours(x, other)
    fresh = GCNConv(4, 3)
    fresh.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(x, other), fresh(x, other))  # the new graph's own


def test_gcn_permutation_equivariant():
    edge_index, n = parity_graph(3)
    conv, x = GCNConv(5, 3), torch.randn(n, 5)
    perm = torch.randperm(n)
    new_id = torch.empty_like(perm)
    new_id[perm] = torch.arange(n)
    out = conv(x[perm], Graph(new_id[edge_index], num_nodes=n))
    torch.testing.assert_close(out, conv(x, Graph(edge_index, num_nodes=n))[perm])


def test_gcn_bad_input_and_repr():
    conv = GCNConv(4, 2)
    assert repr(conv) == "GCNConv(4, 2)"
    edge_index = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 4\], got \[2, 3\]"):
        conv(torch.randn(2, 3), edge_index)
    with pytest.raises(TypeError, match="floating-point node features"):
        conv(torch.ones(2, 4, dtype=torch.long), edge_index)
    with pytest.raises(ValueError, match="does not support adding self-loops without normalize"):
        GCNConv(4, 2, add_self_loops=True, normalize=False)
    with pytest.raises(TypeError, match="an edge_index tensor, a graphloc.Graph"):
        conv(torch.randn(2, 4), [[0, 1], [1, 0]])


def test_infinite_features_of_nodes_with_their_own_loops_stay_infinite_as_pyg():
    """PyG drops the loops add_remaining_self_loops replaces (a node keeps its last loop):
    a node with loops of its own and an infinite feature gives +-inf, as PyG, not the
    0 * inf = NaN of a dropped loop kept with weight 0."""
    edge_index = torch.tensor([[0, 1, 1, 1, 2, 2], [1, 1, 1, 2, 2, 0]])  # two loops at 1
    x = torch.randn(3, 4, dtype=torch.float64)
    x[1, 0] = float("inf")
    theirs = pyg.GCNConv(4, 3).double()
    ours = GCNConv(4, 3).double()
    ours.load_state_dict(theirs.state_dict())
    for weight in (None, torch.rand(6, dtype=torch.float64) + 0.5):
        expected = theirs(x, edge_index, weight)
        got = ours(x, Graph(edge_index, num_nodes=3), weight)
        assert expected[1:].isinf().all() and not expected.isnan().any()
        torch.testing.assert_close(got, expected, equal_nan=True)


def test_gcn_backward_reads_its_weights_in_transpose_order():
    """The normalised weights cached on the graph are kept in the transpose's order too
    (Graph.keep_transposed): each backward product reads them in order, not through
    value_index, and the gradients are still PyG's."""
    edge_index, n = parity_graph(1)
    graph = Graph(edge_index, num_nodes=n)
    for _ in range(2):  # the first call makes the copy, the second reuses it
        with transpose_products() as through_index:
            assert_parity(GCNConv(8, 6), pyg.GCNConv(8, 6), lambda m, x: m(x, graph),
                          lambda m, x: m(x, edge_index), torch.randn(n, 8))
        assert through_index == [False]


def test_learnable_weights_summing_to_zero_at_a_node_keep_finite_gradients():
    """A node whose in-weights sum to 0 gets normalisation 0, as in PyG; PyG's gradient
    there is NaN (pow(0, -0.5) = inf, masked to 0, times the masked zero gradient), which
    spreads through any optimiser step. graphloc's gradients are finite, and PyG's wherever
    PyG's are."""
    torch.manual_seed(0)
    edge_index = torch.tensor([[0, 1, 2, 3, 2], [2, 2, 3, 0, 1]])  # into node 2: w0 + w1 = 0
    ours, theirs = GCNConv(3, 2, add_self_loops=False), pyg.GCNConv(3, 2, add_self_loops=False)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(4, 3)
    grads = []
    for conv in (ours, theirs):
        weight = torch.tensor([1.0, -1.0, 0.5, 0.7, 0.3], requires_grad=True)
        out = conv(x, edge_index, weight)
        grads.append(torch.autograd.grad(out.sum(), weight)[0])
    ours_grad, pyg_grad = grads
    assert torch.isnan(pyg_grad[:2]).all() and torch.isfinite(ours_grad).all()
    torch.testing.assert_close(ours_grad[2:], pyg_grad[2:])


@pytest.mark.parametrize("name", ["GCNConv", "SGConv", "APPNP", "GCN2Conv"])
def test_normalising_convs_refuse_a_bipartite_graph_by_name(name):
    """D^-1/2 (A + I) D^-1/2 needs one node set; the error named gcn_norm, not the layer.
    Without the normalisation a bipartite graph is a plain weighted product."""
    import graphloc.nn as gl
    conv = {"GCNConv": lambda: gl.GCNConv(4, 2), "SGConv": lambda: gl.SGConv(4, 2),
            "APPNP": lambda: gl.APPNP(2, 0.1), "GCN2Conv": lambda: gl.GCN2Conv(4, 0.1)}[name]()
    graph = Graph.bipartite(torch.tensor([[0, 2], [1, 0]]), (3, 2))
    x = torch.randn(3, 4)
    args = (x, x, graph) if name == "GCN2Conv" else (x, graph)
    with pytest.raises(ValueError, match=rf"^{name} \(D\^-1/2 .* bipartite \(3 source, 2 dest"):
        conv(*args)
    plain = GCNConv(4, 2, normalize=False)
    expected = torch.zeros(2, 2).index_add_(0, torch.tensor([1, 0]), plain.lin(x)[[0, 2]])
    torch.testing.assert_close(plain(x, graph), expected + plain.bias)


@pytest.mark.parametrize("name", ["APPNP", "GCN2Conv"])
def test_cached_keeps_the_first_normalisation_as_pyg_and_says_so(name):
    """cached=True reuses the first call's normalised adjacency (PyG's
    ``_cached_edge_index``, cleared by reset_parameters): on another graph PyG's numbers
    (the first graph's), with a warning at the caller's line; another node count is an
    error; the same graph stays quiet."""
    import graphloc.nn as gl
    make = {"APPNP": lambda m, **kw: m.APPNP(2, 0.2, **kw),
            "GCN2Conv": lambda m, **kw: m.GCN2Conv(4, 0.2, **kw)}[name]
    call = (lambda layer, x, e: layer(x, x, e)) if name == "GCN2Conv" else \
        (lambda layer, x, e: layer(x, e))
    first, n = parity_graph(11)
    other = first[:, torch.randperm(first.size(1))[: first.size(1) // 2]]
    ours, theirs = make(gl, cached=True), make(pyg, cached=True)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(call(ours, x, first), call(theirs, x, first))
        torch.testing.assert_close(call(ours, x, first), call(theirs, x, first))
    assert ours._cached_edge_index is not None and ours._cached_adj_t is None
    with pytest.warns(UserWarning, match=rf"{name}\(cached=True\) reuses the normalised "
                                         r"adjacency of the first graph") as caught:
        got = call(ours, x, other)
    assert caught[0].filename == __file__
    torch.testing.assert_close(got, call(theirs, x, other))
    with pytest.raises(ValueError, match=rf"{name}\(cached=True\) normalised a graph of {n} "
                                         rf"nodes .* has {n + 1}"):
        call(ours, torch.randn(n + 1, 4), torch.tensor([[0, n], [n, 0]]))
    ours.reset_parameters()
    assert ours._cached_edge_index is None
