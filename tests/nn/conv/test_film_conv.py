import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import assert_special_values_agree, assert_twins_agree, seeded_twins
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _graph(seed=0, n=14, m=60, width=4, relations=3):
    """``(x, edge_index, edge_type)``: x in float64, parallel edges and loops included."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, width, dtype=torch.float64, generator=gen)
    edge_index = torch.randint(0, n, (2, m), generator=gen)
    edge_type = torch.randint(0, relations, (m,), generator=gen)
    return x, edge_index, edge_type


def _nn(width, out):
    return torch.nn.Sequential(torch.nn.Linear(width, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 2 * out))


OPTIONS = {
    "default": {},
    "sum": {"aggr": "add"},
    "max": {"aggr": "max"},
    "no act": {"act": None},
    "tanh": {"act": torch.nn.Tanh()},
    "relu in place": {"act": torch.nn.ReLU(inplace=True)},
    "nn": {"nn": _nn(4, 5)},
    "relations": {"num_relations": 3},
    "relations, sum, nn": {"num_relations": 3, "aggr": "sum", "nn": _nn(4, 5)},
    "relations, min, no act": {"num_relations": 3, "aggr": "min", "act": None},
    "softmax aggregation": {"aggr": "softmax"},
}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_gradients(option):
    x, edge_index, edge_type = _graph()
    ours, theirs = seeded_twins("FiLMConv", 4, 5, **OPTIONS[option])
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index, edge_type))


@pytest.mark.parametrize("relations", [1, 2])
def test_bipartite_pairs_and_the_reversed_flow_match_pyg(relations):
    x, edge_index, edge_type = _graph(seed=1, relations=relations)
    x_dst = torch.randn(6, 3, dtype=torch.float64)
    keep = edge_index[1] < 6
    edges, types = edge_index[:, keep], edge_type[keep]
    ours, theirs = seeded_twins("FiLMConv", (4, 3), 5, num_relations=relations)
    assert_twins_agree(ours, theirs, [x, x_dst],
                       lambda conv, a, b: conv((a, b), edges, types))
    ours, theirs = seeded_twins("FiLMConv", 4, 5, num_relations=relations,
                                flow="target_to_source")
    assert_twins_agree(ours, theirs, [x], lambda conv, x: conv(x, edge_index, edge_type))


def _film(film, x, out):
    beta, gamma = film(x).split(out, dim=-1)
    return beta, gamma


def _by_the_formula(conv, x, edge_index, edge_type):
    """The paper's layer node by node: the root term, then for each relation and node the
    mean (or sum, max) over its in-edges of that relation of act(gamma_i * W_r x_j +
    beta_i), added relation by relation."""
    C, act = conv.out_channels, conv.act or (lambda t: t)
    beta, gamma = _film(conv.film_skip, x, C)
    out = act(gamma * (x @ conv.lin_skip.weight.t()) + beta)
    rows = []
    for i in range(x.size(0)):
        total = out[i]
        for r in range(conv.num_relations):
            beta_r, gamma_r = _film(conv.films[r], x[i:i + 1], C)
            sources = [j for (j, k), t in zip(edge_index.t().tolist(), edge_type.tolist(),
                                              strict=True) if k == i and t == r]
            if not sources:
                continue
            messages = torch.stack([act(gamma_r[0] * (x[j] @ conv.lins[r].weight.t()) +
                                        beta_r[0]) for j in sources])
            total = total + {"mean": messages.mean(0), "add": messages.sum(0),
                             "max": messages.max(0).values}[conv.aggr]
        rows.append(total)
    return torch.stack(rows)


@pytest.mark.parametrize("relations", [1, 3])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
@pytest.mark.parametrize("act", [torch.nn.ReLU(), None])
def test_the_formula_node_by_node(relations, aggr, act):
    x, edge_index, edge_type = _graph(seed=2, relations=relations)
    torch.manual_seed(3)
    conv = gl.FiLMConv(4, 5, num_relations=relations, aggr=aggr, act=act).double()
    want = _by_the_formula(conv, x, edge_index, edge_type)
    torch.testing.assert_close(conv(x, edge_index, edge_type), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index, edge_type), want)


@pytest.mark.parametrize("relations", [1, 2])
def test_special_values_give_pygs_numbers(relations):
    x, edge_index, edge_type = _graph(seed=4, relations=relations)
    x[3, 1], x[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    ours, theirs = seeded_twins("FiLMConv", 4, 5, num_relations=relations)
    call = lambda conv, x, edges: conv(x, edges, edge_type[:edges.size(1)])  # noqa: E731
    assert_special_values_agree(ours, theirs, x, edge_index, call)


def test_special_values_give_pygs_gradients():
    x, edge_index, edge_type = _graph(seed=5, relations=2)
    x[3, 1], x[5, 0] = float("nan"), float("inf")
    ours, theirs = seeded_twins("FiLMConv", 4, 5, num_relations=2)
    grads = []
    for conv in (ours, theirs):
        leaf = x.clone().requires_grad_()
        out = conv(leaf, edge_index, edge_type)
        grads.append(torch.autograd.grad(out.nansum(), [leaf, *conv.parameters()]))
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)


def test_sparse_inputs_graphs_and_static_batches():
    x, _, _ = _graph(seed=6)
    gen = torch.Generator().manual_seed(6)
    pairs = torch.randperm(14 * 14, generator=gen)[:40]  # distinct: an adjacency sums repeats
    edge_index = torch.stack([pairs // 14, pairs % 14])
    edge_type = torch.randint(0, 3, (40,), generator=gen)
    for relations in (1, 3):
        ours, theirs = seeded_twins("FiLMConv", 4, 5, num_relations=relations)
        want = theirs(x, edge_index, edge_type)
        for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor):  # values: the types
            adj = to_sparse(edge_index.flip(0), edge_type, size=(14, 14))
            torch.testing.assert_close(ours(x, adj), want)
        torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=14), edge_type), want)
        torch.testing.assert_close(
            ours(torch.stack([x, 2 * x]), edge_index, edge_type),
            torch.stack([want, theirs(2 * x, edge_index, edge_type)]))


def test_a_lazy_conv_takes_its_widths_and_pygs_draws_at_the_first_call():
    x, edge_index, edge_type = _graph(seed=7, relations=2)
    outputs = []
    for module in (gl, pyg):
        torch.manual_seed(8)
        conv = module.FiLMConv(-1, 5, num_relations=2)
        outputs.append(conv(x.float(), edge_index, edge_type))
    torch.testing.assert_close(*outputs)
    assert conv.lins[0].weight.shape == (5, 4)


def test_from_pyg_converts_a_film_model():
    class FiLM(torch.nn.Module):  # PyG's examples/film.py, smaller
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([pyg.FiLMConv(4, 16), pyg.FiLMConv(16, 16)])
            self.norms = torch.nn.ModuleList([pyg.BatchNorm(16), pyg.BatchNorm(16)])
            self.out = pyg.FiLMConv(16, 3, act=None)

        def forward(self, x, edge_index):
            for conv, norm in zip(self.convs, self.norms, strict=True):
                x = norm(conv(x, edge_index))
            return self.out(x, edge_index)

    x, edge_index, _ = _graph(seed=9)
    torch.manual_seed(0)
    model = FiLM().double().eval()
    converted = from_pyg(model, example=(x, edge_index))
    assert all(type(conv) is gl.FiLMConv for conv in (*converted.convs, converted.out))
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))


def test_from_pyg_converts_relations_and_networks():
    x, edge_index, edge_type = _graph(seed=10)
    torch.manual_seed(1)
    conv = pyg.FiLMConv(4, 5, num_relations=3, nn=_nn(4, 5), aggr="max").double()
    converted = from_pyg(conv, example=(x, edge_index, edge_type))
    assert type(converted) is gl.FiLMConv and converted.aggr == "max"
    torch.testing.assert_close(converted(x, edge_index, edge_type), conv(x, edge_index, edge_type))


def test_bad_arguments_are_named():
    x, edge_index, edge_type = _graph(seed=11)
    for kwargs, match in (({"num_relations": 0}, "FiLMConv: num_relations"),
                          ({"out_channels": 0}, "FiLMConv: out_channels"),
                          ({"act": "relu"}, "FiLMConv: act must be a callable"),
                          ({"nn": 3}, "FiLMConv: nn must be a module"),
                          ({"aggr": "cat"}, "aggr"),
                          ({"flow": "up"}, "FiLMConv: flow")):
        with pytest.raises((ValueError, TypeError), match=match):
            gl.FiLMConv(**{"in_channels": 4, "out_channels": 5, **kwargs})
    with pytest.raises(ValueError, match="changes the width"):
        gl.FiLMConv(4, 5, aggr=["mean", "max"])
    conv = gl.FiLMConv(4, 5, num_relations=3).double()
    with pytest.raises(ValueError, match="FiLMConv needs edge_type"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match=r"FiLMConv: edge_type \(relations 0 .. 2\).* 3"):
        conv(x, edge_index, edge_type.clamp(max=2) + (edge_type == 2).long())
    with pytest.raises(ValueError, match="FiLMConv: edge_type has 5 rows but the graph has 60"):
        conv(x, edge_index, edge_type[:5])
    with pytest.raises(TypeError, match="FiLMConv: edge_type must be a 1-D integer tensor"):
        conv(x, edge_index, edge_type.double())
    with pytest.raises(ValueError, match=r"FiLMConv expects x of shape \[N, 4\]"):
        conv(x[:, :2], edge_index, edge_type)
    with pytest.raises(ValueError, match="FiLMConv needs destination features"):
        conv((x, None), edge_index, edge_type)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds 1\d\d"):
        conv(x, edge_index + 100, edge_type)
    with pytest.raises(TypeError, match="FiLMConv expects floating-point node features x"):
        conv(x.long(), edge_index, edge_type)
    wrong = gl.FiLMConv(4, 5, nn=torch.nn.Linear(4, 7)).double()
    with pytest.raises(ValueError, match=r"nn must map the features to \[N, 2 \* out_channels"
                                         r"\] = \[N, 10\].*\[14, 7\]"):
        wrong(x, edge_index)
