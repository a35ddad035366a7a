import pytest
import torch
import torch_geometric.nn as pyg
from helpers import out_of_place_gradient_sums, random_edge_index, requires_ext
from parity import (
    assert_attention_weights_parity,
    assert_edge_feature_parity,
    assert_parity,
    parity_graph,
)

from graphloc import Graph
from graphloc.nn import GATConv, GATv2Conv


@pytest.mark.parametrize("heads,concat", [(1, True), (3, True), (3, False)])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("bias,residual", [(True, False), (False, True)])
def test_gat_matches_pyg(heads, concat, add_self_loops, bias, residual):
    edge_index, n = parity_graph(9)
    kwargs = dict(heads=heads, concat=concat, add_self_loops=add_self_loops, bias=bias,
                  residual=residual)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(GATConv(8, 5, **kwargs), pyg.GATConv(8, 5, **kwargs),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


@pytest.mark.parametrize("heads", [1, 4])
def test_gat_on_a_loop_free_graph_matches_pyg(heads):
    """No old loops to mask: the layer skips the mask (eager), with PyG's numbers."""
    edge_index, n = parity_graph(13)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(GATConv(8, 5, heads=heads), pyg.GATConv(8, 5, heads=heads),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


@pytest.mark.parametrize("fill_value", ["mean", "max", "mul", 0.5, None,  # None: ones
                                        torch.tensor([0.5, -1.0, 2.0]),  # one per feature
                                        torch.tensor(0.25)])
def test_gat_with_edge_features_matches_pyg(fill_value):
    assert_edge_feature_parity(GATConv, pyg.GATConv, fill_value, seed=10)


def test_gat_attention_weights_match_pyg():
    edge_index, n = parity_graph(11)
    assert_attention_weights_parity(GATConv(6, 4, heads=2), pyg.GATConv(6, 4, heads=2),
                                    torch.randn(n, 6), edge_index)


def test_gat_attention_dropout_only_in_training():
    edge_index, n = parity_graph(12)
    conv, x = GATConv(4, 4, heads=2, dropout=0.5), torch.randn(n, 4)
    conv.eval()
    torch.testing.assert_close(conv(x, edge_index), conv(x, edge_index))
    conv.train()
    torch.manual_seed(0)
    first = conv(x, edge_index)
    torch.manual_seed(1)
    assert not torch.allclose(first, conv(x, edge_index))


def test_gat_built_with_edge_dim_runs_without_edge_features_as_pyg():
    """PyG's GATConv(edge_dim=...) called without edge_attr leaves the edge term out."""
    edge_index, n = parity_graph(10)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(GATConv(8, 4, heads=2, edge_dim=3), pyg.GATConv(8, 4, heads=2, edge_dim=3),
                  lambda m, x: m(x, graph), lambda m, x: m(x, edge_index), torch.randn(n, 8))


def test_gat_bad_input():
    conv = GATConv(4, 2, heads=2, edge_dim=3)
    edge_index = torch.tensor([[0, 1], [1, 0]])
    assert repr(conv) == "GATConv(4, 2, heads=2)"
    with pytest.raises(ValueError, match="edge_attr has 3 rows but the graph has 2 edges"):
        conv(torch.randn(2, 4), edge_index, torch.randn(3, 3))
    with pytest.raises(ValueError, match=r"\[N, 4\]"):
        conv(torch.randn(2, 5), edge_index)
    # a fill_value PyG does not take was refused only at the first call with edge features,
    # as a "reduce" error
    from graphloc.nn import GATv2Conv
    for cls in (GATConv, GATv2Conv):
        for fill_value in ("avg", [1.0], True):
            with pytest.raises(ValueError, match=rf"{cls.__name__}: fill_value must be a "
                                                 rf"number, a tensor, None .*got"):
                cls(4, 2, edge_dim=3, fill_value=fill_value)


@requires_ext
@pytest.mark.parametrize("concat", [True, False])
def test_message_gradients_sum_in_place(concat):
    """The messages h = lin(x) feed the attention and the score projection; their two
    gradients must be summed in place (no fresh [N, H * C] tensor per step), which needs
    the attention's gradient not to be a view (GATConv keeps h 2-D)."""
    graph = Graph(random_edge_index(40, 200, seed=31), num_nodes=40)
    conv = GATConv(6, 4, heads=2, concat=concat)
    x = torch.randn(40, 6, requires_grad=True)
    out = conv(x, graph)
    assert out_of_place_gradient_sums(out, [x, *conv.parameters()], (40, 8)) == 0


def test_edge_features_to_a_gat_without_edge_dim_are_ignored_with_a_warning():
    """PyG's GATConv ignores them without a word; graphloc's says so at the caller's line,
    and gives PyG's output (that of the call without them)."""
    edge_index, n = parity_graph(21)
    ours, theirs = GATConv(6, 4, heads=2), pyg.GATConv(6, 4, heads=2)
    ours.load_state_dict(theirs.state_dict())
    x, edge_attr = torch.randn(n, 6), torch.randn(edge_index.size(1), 3)
    with pytest.warns(UserWarning, match=r"GATConv was built without edge_dim: the edge_attr "
                                         r"of shape \[\d+, 3\] enters no score") as caught:
        out = ours(x, edge_index, edge_attr)
    assert caught[0].filename == __file__
    torch.testing.assert_close(out, theirs(x, edge_index, edge_attr))
    torch.testing.assert_close(out, ours(x, edge_index))


@pytest.mark.parametrize("vectors, heads", [(1, 1), (1, 3), (2, 3)])
def test_head_dots_are_the_per_head_products_to_the_second_derivative(vectors, heads):
    """The block-diagonal matmul and its own backward against the per-head products
    ``(h.view(N, H, C) * att).sum(-1)`` differentiated by torch (float64): values, first
    and second derivatives, and gradcheck."""
    from graphloc.nn.conv.gat import head_dots
    gen = torch.Generator().manual_seed(heads)
    h = torch.randn(30, heads * 4, generator=gen, dtype=torch.float64, requires_grad=True)
    atts = [torch.randn(1, heads, 4, generator=gen, dtype=torch.float64, requires_grad=True)
            for _ in range(vectors)]

    def per_head(h, *atts):
        return torch.cat([(h.view(-1, heads, 4) * att).sum(-1) for att in atts], dim=1)

    grad = torch.randn(30, vectors * heads, generator=gen, dtype=torch.float64)
    got, want = head_dots(h, *atts), per_head(h, *atts)
    torch.testing.assert_close(got, want)
    got_grads = torch.autograd.grad(got, [h, *atts], grad, create_graph=True)
    want_grads = torch.autograd.grad(want, [h, *atts], grad, create_graph=True)
    for g, ref in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, ref)
    v = torch.randn(1, heads, 4, generator=gen, dtype=torch.float64)  # mixed: d/dh <d/datt, v>
    second = torch.autograd.grad((got_grads[1] * v).sum(), h)[0]
    torch.testing.assert_close(second, torch.autograd.grad((want_grads[1] * v).sum(), h)[0])
    assert torch.autograd.gradcheck(head_dots, (h, *atts))
    assert torch.autograd.gradgradcheck(head_dots, (h, *atts))


def test_head_dots_take_batched_gradients():
    """Under ``autograd.grad(..., is_grads_batched=True)`` (legacy vmap, as the influence
    tool runs) the backward cannot read the gradient's values: the per-head products, the
    same as one backward per gradient, one of them infinite at a head."""
    from graphloc.nn.conv.gat import head_dots
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(20, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    atts = [torch.randn(1, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
            for _ in range(2)]
    out = head_dots(h, *atts)
    grads = torch.randn(4, 20, 6, generator=gen, dtype=torch.float64)
    grads[2, 7, 1] = float("inf")
    batched = torch.autograd.grad(out, [h, *atts], grads, is_grads_batched=True,
                                  retain_graph=True)
    for i, grad in enumerate(grads):
        one = torch.autograd.grad(out, [h, *atts], grad, retain_graph=True)
        for got, want in zip(batched, one, strict=True):
            torch.testing.assert_close(got[i], want, equal_nan=True)


@pytest.mark.parametrize("case", ["gat", "gat-edges", "gatv2-edges"])
def test_an_infinite_gradient_of_one_head_leaves_the_other_heads_as_pyg(case):
    """An infinite upstream gradient of head 0's output at one node: the scores' gradient
    went through one matmul with block-diagonal attention vectors, whose zeros made head
    1's parameter gradients NaN (0 * inf); PyG's stay finite. Every parameter's gradient
    as PyG's, NaN where PyG's."""
    torch.manual_seed(1)
    edge_index = torch.randint(0, 12, (2, 50))
    kwargs = {"edge_dim": 3} if "edges" in case else {}
    args = (torch.randn(50, 3, dtype=torch.float64),) if kwargs else ()
    ours_cls, pyg_cls = (GATv2Conv, pyg.GATv2Conv) if case.startswith("gatv2") else \
        (GATConv, pyg.GATConv)
    theirs = pyg_cls(4, 2, heads=2, **kwargs).double()
    ours = ours_cls(4, 2, heads=2, **kwargs).double()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(12, 4, dtype=torch.float64)
    upstream = torch.ones(12, 4, dtype=torch.float64)
    upstream[5, 0] = float("inf")  # head 0's first channel at node 5
    grads = []
    for conv in (ours, theirs):
        (conv(x, edge_index, *args) * upstream).sum().backward()
        grads.append({name: p.grad for name, p in conv.named_parameters()})
    assert any(g.isnan().any() for g in grads[1].values())  # head 0's are NaN in PyG too
    for name, want in grads[1].items():
        torch.testing.assert_close(grads[0][name], want, equal_nan=True, msg=name)


def _one_head_overflows(ours, theirs, lins):
    """Head 0 of node 5's projections overflows to +-inf (a feature of 1e308 weighed 10),
    head 1 does not read that feature: PyG's head 1 stays finite there."""
    with torch.no_grad():
        for lin in lins:
            lin.weight[:, 0] = 0.0
            lin.weight[: theirs.out_channels, 0] = 10.0
    ours.load_state_dict(theirs.state_dict())


@pytest.mark.parametrize("case", ["gat", "gat-edges", "gatv2-edges", "gat-inf-att"])
def test_a_non_finite_head_leaves_the_other_heads_as_pyg(case):
    """The per-head scores came from one matmul with block-diagonal attention vectors, whose
    zeros met the overflowing head's channels: 0 * inf made every head's score NaN (twice
    PyG's NaN outputs here). Outputs and attention weights as PyG's, NaN where PyG's."""
    torch.manual_seed(1)
    edge_index = torch.randint(0, 12, (2, 50))
    x = torch.randn(12, 4, dtype=torch.float64)
    edge_attr = torch.randn(50, 3, dtype=torch.float64) if "edges" in case else None
    kwargs = {"edge_dim": 3} if edge_attr is not None else {}
    if case.startswith("gatv2"):
        theirs = pyg.GATv2Conv(4, 2, heads=2, **kwargs).double()
        ours = GATv2Conv(4, 2, heads=2, **kwargs).double()
        _one_head_overflows(ours, theirs, [theirs.lin_l, theirs.lin_r])
    else:
        theirs, ours = pyg.GATConv(4, 2, heads=2, **kwargs).double(), \
            GATConv(4, 2, heads=2, **kwargs).double()
        _one_head_overflows(ours, theirs, [theirs.lin])
    if case == "gat-inf-att":  # an infinite attention entry of head 0 only
        with torch.no_grad():
            theirs.att_src[0, 0, 1] = float("inf")
        ours.load_state_dict(theirs.state_dict())
    else:
        x[5, 0] = 1e308
    args = () if edge_attr is None else (edge_attr,)
    want, (_, want_alpha) = theirs(x, edge_index, *args, return_attention_weights=True)
    got, (_, got_alpha) = ours(x, edge_index, *args, return_attention_weights=True)
    assert bool(want.isnan().any()) and not bool(want.isnan().all())
    # head 1 (the last two columns) untouched, as PyG's; head 0 too, but where its scores
    # are all -inf (an infinite attention entry: every row) PyG's NaN is graphloc's 0
    torch.testing.assert_close(got[:, 2:], want[:, 2:])
    if case != "gat-inf-att":
        assert torch.equal(got.isnan(), want.isnan())
        torch.testing.assert_close(got, want, equal_nan=True)
    # PyG's NaN where a row's scores are all -inf is graphloc's 0 (docs/models.md)
    finite_rows = ~want_alpha.isnan()
    torch.testing.assert_close(got_alpha[finite_rows], want_alpha[finite_rows])
    assert bool(finite_rows[:, 1].all()) and torch.equal(got_alpha[:, 1].isnan(),
                                                         want_alpha[:, 1].isnan())
