"""torch.func over graphloc: grad, vjp, jacrev and vmap of every differentiable op and of
the layers and models, against torch.autograd's Jacobians and per-entry loops.
torch.library's autograd registration makes an autograd.Function that torch.func refuses
("must override the setup_context staticmethod"); graphloc routes the ops through its own
under a functorch transform."""

import pytest
import torch
from helpers import (
    CONV_LAYERS,
    INITIAL_FEATURE_CONVS,
    initial_feature_conv,
    random_edge_index,
    reference_ops,
    requires_ext,
)
from torch.func import functional_call, grad, jacrev, vjp, vmap

import graphloc.scatter as gs
from graphloc import Graph, ops
from graphloc.nn import build_model

pytestmark = requires_ext


@pytest.fixture
def graph():
    return Graph(random_edge_index(9, 40, seed=3), num_nodes=9)


def _op_cases(graph):
    """(name, function of a float64 [9, 4] input x) for each differentiable op."""
    gen = torch.Generator().manual_seed(0)
    w = torch.rand(graph.num_edges, dtype=torch.float64, generator=gen) + 0.5
    b = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    scores = torch.randn(graph.num_edges, 2, dtype=torch.float64, generator=gen)
    index = torch.randint(0, 5, (9,), generator=gen)
    ptr = torch.tensor([0, 2, 2, 9])
    return [
        ("spmm sum", lambda x: ops.spmm(graph, x, w)),
        ("spmm mean", lambda x: ops.spmm(graph, x, reduce="mean")),
        ("spmm max", lambda x: ops.spmm(graph, x, w, reduce="max")),
        ("sddmm dot", lambda x: ops.sddmm(graph, x, b)),
        ("sddmm add", lambda x: ops.sddmm(graph, x, b, "add")),
        ("segment_softmax", lambda x: ops.segment_softmax(graph, ops.sddmm(graph, x, b))),
        ("segment_attention", lambda x: ops.segment_attention(graph, scores, x)),
        ("additive_attention",
         lambda x: ops.additive_attention(graph, x[:, :2], x[:, 2:], x)),
        ("gated_sum", lambda x: ops.gated_sum(graph, x, x.flip(1), x.sin())),
        ("film_sum", lambda x: ops.film_sum(graph, x, x.flip(1), x.sin())),
        ("edge_outer_sum", lambda x: ops.edge_outer_sum(graph, scores, x).sum(1)),
        ("edge_head_sum", lambda x: ops.edge_head_sum(graph, scores, x.view(-1, 2, 2))),
        ("softmax_sum", lambda x: ops.softmax_sum(graph, x, x[0].cos())),
        ("scatter sum", lambda x: ops.scatter(x, index, 0, dim_size=5, reduce="sum")),
        ("scatter max", lambda x: ops.scatter(x, index, 0, dim_size=5, reduce="max")),
        ("gather", lambda x: ops.gather(x, index)),
        ("segment_csr", lambda x: gs.segment_csr(x, ptr, reduce="mean")),
        ("gather_csr", lambda x: gs.gather_csr(x[:3], ptr)),
        ("scatter_softmax", lambda x: gs.scatter_softmax(x, index, 0)),
        ("scatter_logsumexp", lambda x: gs.scatter_logsumexp(x, index, 0)),
        ("scatter_mul", lambda x: gs.scatter_mul(x, index, 0)),
        ("dropout (eval)", lambda x: ops.dropout(x, 0.5, False)),
    ]


def test_every_op_under_grad_vjp_and_jacrev(graph):
    x = torch.randn(9, 4, dtype=torch.float64)
    for name, f in _op_cases(graph):
        want = torch.autograd.functional.jacobian(f, x)
        torch.testing.assert_close(jacrev(f)(x), want, msg=name)
        squared = lambda x, f=f: f(x).pow(2).sum()  # noqa: E731
        torch.testing.assert_close(grad(squared)(x),
                                   torch.autograd.grad(squared(x.requires_grad_()), x)[0],
                                   msg=name)
        x = x.detach()
        out, pull = vjp(f, x)
        cotangent = torch.randn_like(out)
        (got,) = pull(cotangent)
        expected = cotangent.reshape(-1) @ want.reshape(cotangent.numel(), -1)
        torch.testing.assert_close(got, expected.view_as(x), msg=name)


def test_vmap_of_every_op_is_the_loop(graph):
    xs = torch.randn(3, 9, 4, dtype=torch.float64)
    for name, f in _op_cases(graph):
        torch.testing.assert_close(vmap(f)(xs), torch.stack([f(x) for x in xs]), msg=name)


@pytest.mark.parametrize("name", sorted(CONV_LAYERS))
def test_layers_under_jacrev_and_vmap(name):
    edge_index = random_edge_index(8, 30, seed=4)
    graph = Graph(edge_index, num_nodes=8,
                  edge_attr=torch.randn(edge_index.size(1), 3, dtype=torch.float64))
    torch.manual_seed(0)
    conv = CONV_LAYERS[name]().double()
    f = lambda x: conv(x, graph)  # noqa: E731
    x = torch.randn(8, 5, dtype=torch.float64)
    torch.testing.assert_close(jacrev(f)(x), torch.autograd.functional.jacobian(f, x))
    xs = torch.randn(2, 8, 5, dtype=torch.float64)
    torch.testing.assert_close(vmap(f)(xs), torch.stack([f(x) for x in xs]))


@pytest.mark.parametrize("name", sorted(INITIAL_FEATURE_CONVS))
def test_layers_with_initial_features_under_jacrev_and_vmap(name):
    """FAConv and GCN2Conv, called conv(x, x_0, graph[, edge_weight])."""
    edge_index = random_edge_index(8, 30, seed=4)
    graph = Graph(edge_index, num_nodes=8)
    torch.manual_seed(0)
    conv, extra = initial_feature_conv(name, edge_index.size(1))
    conv, extra = conv.double(), tuple(w.double() for w in extra)
    x_0 = torch.randn(8, 5, dtype=torch.float64)
    f = lambda x: conv(x, x_0, graph, *extra)  # noqa: E731
    x = torch.randn(8, 5, dtype=torch.float64)
    torch.testing.assert_close(jacrev(f)(x), torch.autograd.functional.jacobian(f, x))
    xs = torch.randn(2, 8, 5, dtype=torch.float64)
    torch.testing.assert_close(vmap(f)(xs), torch.stack([f(x) for x in xs]))


@pytest.mark.parametrize("name", ["gcn", "gat", "sage", "dagnn", "liftgcn", "sgformer", "ugt",
                                  "tangnn"])
def test_per_sample_parameter_gradients_of_models(name):
    """vmap(grad) over per-node losses (per-sample gradients, a torch.func staple) equals
    one backward per node."""
    graph = Graph(random_edge_index(10, 40, seed=5), num_nodes=10).to_undirected()
    torch.manual_seed(0)
    model = build_model(name, 4, 8, 3, 2).double().eval()
    x = torch.randn(10, 4, dtype=torch.float64)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def node_loss(p, one_hot):  # the loss of one node (vmap cannot index by a tensor)
        return (functional_call(model, p, (x, graph)).pow(2).sum(1) * one_hot).sum()

    nodes = torch.tensor([0, 3, 7])
    one_hots = torch.nn.functional.one_hot(nodes, 10).double()
    got = vmap(grad(node_loss), in_dims=(None, 0))(params, one_hots)
    for i, node in enumerate(nodes.tolist()):
        model.zero_grad()
        model(x, graph)[node].pow(2).sum().backward()
        for key, param in model.named_parameters():
            want = param.grad if param.grad is not None else torch.zeros_like(param)
            torch.testing.assert_close(got[key][i], want, msg=f"{key} at node {node}")


@pytest.mark.parametrize("name", ["gcn", "gat", "sage-max", "transformer-fused", "cheb"])
def test_hessians_by_nested_reverse_mode(name):
    """jacrev(jacrev(f)) against torch's Hessian of the pure-torch twins: the backward
    formulas are differentiable again (the fused backward kernels are not: their pure-torch
    or composed forms run under create_graph)."""
    edge_index = random_edge_index(6, 20, seed=6)
    graph = Graph(edge_index, num_nodes=6,
                  edge_attr=torch.randn(edge_index.size(1), 3, dtype=torch.float64))
    torch.manual_seed(0)
    conv = CONV_LAYERS[name]().double()
    f = lambda x: conv(x, graph).tanh().pow(2).sum()  # noqa: E731
    x = torch.randn(6, 5, dtype=torch.float64)
    with reference_ops():  # torch's autograd through the pure-torch twins
        want = torch.autograd.functional.hessian(f, x)
    torch.testing.assert_close(jacrev(jacrev(f))(x), want)


def test_forward_mode_is_refused_by_name(graph):
    x = torch.randn(9, 4, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="graphloc.spmm has no forward-mode "
                                                  "derivative .* use reverse mode"):
        torch.func.jvp(lambda x: ops.spmm(graph, x), (x,), (torch.ones_like(x),))
