import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import assert_special_values_agree, assert_twins_agree, graph_with_edge_features
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg
from graphloc.nn.conv import nn_conv


def _network(kind: str, width_in: int, width_out: int, edge_dim: int = 3):
    lin, relu = torch.nn.Linear, torch.nn.ReLU
    return {
        "mlp": lambda: torch.nn.Sequential(lin(edge_dim, 6), relu(), lin(6, width_in * width_out)),
        "mlp-no-bias": lambda: torch.nn.Sequential(lin(edge_dim, 6), torch.nn.Tanh(),
                                                   lin(6, width_in * width_out, bias=False)),
        "linear": lambda: lin(edge_dim, width_in * width_out),
        # ends in an activation: PyG's per-edge matrices
        "mlp-relu": lambda: torch.nn.Sequential(lin(edge_dim, width_in * width_out), relu()),
    }[kind]()


def seeded_nn_twins(in_channels, out_channels, kind="mlp", **kwargs):
    """graphloc's and PyG's NNConv, each with its own network, from one seed in float64:
    the same parameter names and initial values (PyG's draws, its network reset too)."""
    width_in = in_channels[0] if isinstance(in_channels, tuple) else in_channels
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(7)
        network = _network(kind, width_in, out_channels)
        twins.append(module.NNConv(in_channels, out_channels, network, **kwargs).double())
    for (key, a), (other, b) in zip(twins[0].state_dict().items(),
                                    twins[1].state_dict().items(), strict=True):
        assert key == other and torch.equal(a, b)
    return twins


def _graph(seed=0):
    return graph_with_edge_features(seed)


def _count_regrouped(monkeypatch) -> list:
    """The widths of the calls that took the regrouped sum, once the test has run."""
    calls = []
    original = nn_conv.NNConv._regrouped
    monkeypatch.setattr(nn_conv.NNConv, "_regrouped", lambda conv, *a: calls.append(
        (conv.in_channels_l, conv.out_channels)) or original(conv, *a))
    return calls


@pytest.mark.parametrize("kind", ["mlp", "mlp-no-bias", "linear", "mlp-relu"])
@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("widths", [(4, 5), (4, 2)])  # both sides the regrouping takes
def test_matches_pyg_with_gradients(kind, aggr, widths, monkeypatch):
    x, edge_index, edge_attr = _graph()
    ours, theirs = seeded_nn_twins(*widths, kind, aggr=aggr)
    calls = _count_regrouped(monkeypatch)
    assert_twins_agree(ours, theirs, [x, edge_attr],
                       lambda conv, x, e: conv(x, edge_index, e))
    # the regrouped sum serves the linear aggregations of networks ending in a Linear
    assert bool(calls) == (aggr != "max" and kind != "mlp-relu")


@pytest.mark.parametrize("root_weight,bias", [(False, True), (True, False), (False, False)])
def test_without_root_or_bias_matches_pyg(root_weight, bias):
    x, edge_index, edge_attr = _graph(seed=1)
    ours, theirs = seeded_nn_twins(4, 5, root_weight=root_weight, bias=bias, aggr="mean")
    assert_twins_agree(ours, theirs, [x, edge_attr], lambda conv, x, e: conv(x, edge_index, e))


def test_a_bipartite_pair_and_a_missing_root_match_pyg():
    gen = torch.Generator().manual_seed(1)
    x_src = torch.randn(9, 4, dtype=torch.float64, generator=gen)
    x_dst = torch.randn(6, 2, dtype=torch.float64, generator=gen)
    edge_index = torch.stack([torch.randint(0, 9, (30,), generator=gen),
                              torch.randint(0, 6, (30,), generator=gen)])
    edge_attr = torch.randn(30, 3, dtype=torch.float64, generator=gen)
    ours, theirs = seeded_nn_twins((4, 2), 5)
    assert_twins_agree(ours, theirs, [x_src, x_dst, edge_attr],
                       lambda conv, a, b, e: conv((a, b), edge_index, e))
    torch.testing.assert_close(ours((x_src, None), edge_index, edge_attr, (9, 6)),
                               theirs((x_src, None), edge_index, edge_attr, (9, 6)))


def _dense_nn_conv(conv, x, edge_index, edge_attr, aggr):
    """The paper's layer node by node: each edge's matrix from the network, its source
    multiplied by it, the messages aggregated, the root and bias added."""
    rows = []
    for i in range(x.size(0)):
        edges = (edge_index[1] == i).nonzero().view(-1).tolist()
        messages = [x[edge_index[0, e]] @ conv.nn(edge_attr[e]).view(x.size(1), -1)
                    for e in edges]
        if not messages:
            h = torch.zeros(conv.out_channels, dtype=x.dtype)
        else:
            stacked = torch.stack(messages)
            h = {"add": stacked.sum(0), "mean": stacked.mean(0),
                 "max": stacked.max(0).values}[aggr]
        rows.append(h + conv.lin.weight @ x[i] + conv.bias)
    return torch.stack(rows)


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("width_out", [5, 2])
def test_the_formula_node_by_node(aggr, width_out):
    x, edge_index, edge_attr = _graph(seed=2)
    torch.manual_seed(3)
    conv = gl.NNConv(4, width_out, _network("mlp", 4, width_out), aggr=aggr).double()
    torch.nn.init.uniform_(conv.bias)  # (a zero bias would not be seen)
    want = _dense_nn_conv(conv, x, edge_index, edge_attr, aggr)
    torch.testing.assert_close(conv(x, edge_index, edge_attr), want)
    with reference_ops():
        torch.testing.assert_close(conv(x, edge_index, edge_attr), want)


@pytest.mark.parametrize("width_out", [8, 3])
def test_the_regrouped_sum_is_as_close_to_the_exact_value_as_pygs(width_out):
    """A hub of 2,000 neighbours in float32: graphloc's regrouped sum and PyG's per-edge
    products, each against the float64 value of the same layer, the largest error over six
    draws (one draw's errors are each a few float32 roundings of the hub's sum, and which
    side is closer on a given draw depends on the processor's GEMM kernels)."""
    n = 2001
    edge_index = torch.stack([torch.arange(1, n), torch.zeros(n - 1, dtype=torch.long)])
    ours_error = theirs_error = 0.0
    for seed in range(4, 10):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 8, generator=gen)
        edge_attr = torch.randn(n - 1, 3, generator=gen)
        ours, theirs = seeded_nn_twins(8, width_out)
        exact = theirs(x.double(), edge_index, edge_attr.double())
        ours, theirs = ours.float(), theirs.float()
        ours_error = max(ours_error, (ours(x, edge_index, edge_attr).double() - exact).abs().max())
        theirs_error = max(theirs_error,
                           (theirs(x, edge_index, edge_attr).double() - exact).abs().max())
    assert ours_error <= 2 * theirs_error + 1e-6


def test_special_values_give_pygs_numbers(monkeypatch):
    """NaN and infinities in the features, the edge features and the last Linear's
    weights: PyG's outputs (the regrouped sum would make 0 * inf NaN where a ReLU zeroed
    an edge value, so those calls take PyG's per-edge products)."""
    x, edge_index, edge_attr = _graph(seed=5)
    x[3, 1], x[5, 0], x[6, 2] = float("nan"), float("inf"), float("-inf")
    ours, theirs = seeded_nn_twins(4, 5, aggr="add")
    call = lambda conv, x, edges: conv(x, edges, edge_attr[:edges.size(1)])  # noqa: E731
    assert_special_values_agree(ours, theirs, x, edge_index, call)
    finite_x = _graph(seed=5)[0]
    bad_attr = edge_attr.clone()
    bad_attr[2, 0], bad_attr[7, 1] = float("inf"), float("nan")
    torch.testing.assert_close(ours(finite_x, edge_index, bad_attr),
                               theirs(finite_x, edge_index, bad_attr), equal_nan=True)
    for conv in (ours, theirs):
        with torch.no_grad():
            conv.nn[-1].weight[3, 2] = float("inf")
    torch.testing.assert_close(ours(finite_x, edge_index, edge_attr),
                               theirs(finite_x, edge_index, edge_attr), equal_nan=True)
    calls = _count_regrouped(monkeypatch)
    ours(finite_x, edge_index, edge_attr)
    assert not calls


def test_sparse_adjacencies_carry_the_edge_features():
    """A torch.sparse adj_t's [E, D] values are the edge features (PyG's reading); values
    [E] are weights, which NNConv does not take: an error naming edge_attr."""
    x, edge_index, edge_attr = _graph(seed=6)
    edge_index, edge_attr = edge_index[:, :50], edge_attr[:50]  # (no parallel edges)
    edge_index = torch.unique(edge_index, dim=1)
    edge_attr = edge_attr[:edge_index.size(1)]
    ours, theirs = seeded_nn_twins(4, 5)
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor):
        adj = to_sparse(edge_index.flip(0), edge_attr, size=(14, 14))
        torch.testing.assert_close(ours(x, adj), theirs(x, adj))
    weights = to_torch_coo_tensor(edge_index.flip(0), edge_attr[:, 0], size=(14, 14))
    with pytest.raises(ValueError, match="NNConv needs edge features"):
        ours(x, weights)


def test_a_graph_and_a_static_batch_carry_their_edge_features():
    x, edge_index, edge_attr = _graph(seed=7)
    ours, theirs = seeded_nn_twins(4, 5)
    graph = Graph(edge_index, num_nodes=14, edge_attr=edge_attr)
    want = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(ours(x, graph), want)
    batch = torch.stack([x, 2 * x])
    torch.testing.assert_close(ours(batch, edge_index, edge_attr)[1],
                               theirs(2 * x, edge_index, edge_attr))


def test_integer_and_float64_edge_features_are_taken_in_the_networks_dtype():
    """Bond types as integers, or float64 features for a float32 layer: PyG's fails in the
    network's first product; graphloc's takes them as the float features of nn's dtype."""
    x, edge_index, _ = _graph(seed=10)
    bonds = torch.randint(0, 4, (edge_index.size(1), 3))
    ours, theirs = seeded_nn_twins(4, 5)
    ours, theirs = ours.float(), theirs.float()
    want = theirs(x.float(), edge_index, bonds.float())
    torch.testing.assert_close(ours(x.float(), edge_index, bonds), want)
    torch.testing.assert_close(ours(x.float(), edge_index, bonds.double()), want)
    with pytest.raises(RuntimeError, match="must have the same dtype"):
        theirs(x.float(), edge_index, bonds)


def test_from_pyg_converts_an_mpnn():
    """PyG's QM9 example model (NNConv, then a GRU), converted: the same outputs."""
    class MPNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            network = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(),
                                          torch.nn.Linear(16, 8 * 8))
            self.lin0 = torch.nn.Linear(4, 8)
            self.conv = pyg.NNConv(8, 8, network, aggr="mean")
            self.gru = torch.nn.GRU(8, 8)

        def forward(self, x, edge_index, edge_attr):
            out = torch.relu(self.lin0(x))
            h = out.unsqueeze(0)
            for _ in range(3):
                m = torch.relu(self.conv(out, edge_index, edge_attr))
                out, h = self.gru(m.unsqueeze(0), h)
                out = out.squeeze(0)
            return out

    x, edge_index, edge_attr = _graph(seed=8)
    torch.manual_seed(0)
    model = MPNN().double()
    converted = from_pyg(model, example=(x, edge_index, edge_attr))
    assert type(converted.conv) is gl.NNConv
    torch.testing.assert_close(converted(x, edge_index, edge_attr), model(x, edge_index, edge_attr))


def test_bad_arguments_are_named():
    x, edge_index, edge_attr = _graph(seed=9)
    network = _network("mlp", 4, 5)
    with pytest.raises(ValueError, match=r"NNConv: in_channels must be an integer >= 1, got -1"):
        gl.NNConv(-1, 5, network)
    with pytest.raises(TypeError, match="NNConv: nn must be a torch.nn.Module, got function"):
        gl.NNConv(4, 5, lambda e: e)
    with pytest.raises(ValueError, match="NNConv: aggr=.* changes the width"):
        gl.NNConv(4, 5, network, aggr=["mean", "max"], aggr_kwargs={"mode": "cat"})
    conv = gl.NNConv(4, 5, network).double()
    with pytest.raises(ValueError, match="NNConv needs edge features"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="NNConv: edge_attr has 3 rows but the graph has 69"):
        conv(x, edge_index, edge_attr[:3])
    with pytest.raises(ValueError, match=r"nn maps the edge features to shape \[69, 12\], but "
                                         r"the layer needs \[E, in_channels \* out_channels\] "
                                         r"= \[69, 20\]"):
        gl.NNConv(4, 5, _network("mlp", 4, 3)).double()(x, edge_index, edge_attr)
    with pytest.raises(ValueError, match="NNConv: edge_attr has 2 features per edge, but nn's "
                                         "first Linear takes 3"):
        conv(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match=r"NNConv expects x of shape \[N, 4\], got \[14, 3\]"):
        conv(x[:, :3], edge_index, edge_attr)
