"""PNAConv against PyG's: outputs and gradients with the same weights over its options
(towers, divided input, edge features, deeper pre- and post-nets, trained norms, every
aggregator and scaler), special values, from_pyg and the degree histogram."""

import copy

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import hub_graph
from parity import assert_parity, parity_graph

from graphloc import Graph
from graphloc.nn import PNAConv, from_pyg

AGGREGATORS = ["sum", "mean", "min", "max", "var", "std"]
SCALERS = ["identity", "amplification", "attenuation", "linear", "inverse_linear"]
OPTIONS = [dict(), dict(towers=2), dict(towers=4, divide_input=True), dict(edge_dim=3),
           dict(edge_dim=3, towers=2, divide_input=True), dict(pre_layers=2),
           dict(post_layers=2, towers=2), dict(train_norm=True),
           dict(pre_layers=3, edge_dim=3, act="tanh"), dict(pre_layers=2, act="leaky_relu",
                                                            act_kwargs={"negative_slope": 0.3})]


def _histogram(edge_index, n):
    return torch.bincount(torch.bincount(edge_index[1], minlength=n))


@pytest.mark.parametrize("kwargs", OPTIONS)
@pytest.mark.parametrize("aggregators,scalers", [
    (AGGREGATORS, SCALERS), (["mean", "min", "max", "std"], ["identity", "amplification",
                                                             "attenuation"])])
def test_pna_matches_pyg(kwargs, aggregators, scalers):
    edge_index, n = parity_graph(50)
    graph = Graph(edge_index, num_nodes=n)
    deg = _histogram(edge_index, n)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64, requires_grad=True) \
        if "edge_dim" in kwargs else None
    torch.manual_seed(0)
    theirs = pyg.PNAConv(8, 8, aggregators, scalers, deg, **kwargs)
    ours = PNAConv(8, 8, aggregators, scalers, deg, **kwargs)
    extra = () if edge_attr is None else (edge_attr,)
    assert_parity(ours, theirs, lambda m, x: m(x, graph, edge_attr),
                  lambda m, x: m(x, edge_index, edge_attr), torch.randn(n, 8), extra=extra)


@pytest.mark.parametrize("special", [float("nan"), float("inf"), 1e30])
@pytest.mark.parametrize("pre_layers", [1, 2])
def test_special_values_reach_the_nodes_pygs_reach(special, pre_layers):
    """A NaN, inf or huge feature: the same outputs, NaN where PyG's are NaN (the variance
    of messages a_i + b_j is NaN where a_i is, though it does not depend on a finite a_i)."""
    edge_index, n = parity_graph(51)
    deg = _histogram(edge_index, n)
    torch.manual_seed(1)
    theirs = pyg.PNAConv(8, 8, AGGREGATORS, ["identity", "linear"], deg,
                         pre_layers=pre_layers).double()
    ours = PNAConv(8, 8, AGGREGATORS, ["identity", "linear"], deg,
                   pre_layers=pre_layers).double()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 8, dtype=torch.float64)
    x[edge_index[1, 0], 2] = special  # a node with in-edges
    x[edge_index[0, 5], 4] = -special if special == special else special
    got, want = ours(x, edge_index), theirs(x, edge_index)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    if special == 1e30:  # PyG's variance cancels at this scale: compare the rest
        return
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("kwargs", [dict(), dict(towers=2, pre_layers=2, post_layers=2,
                                                 act="tanh", edge_dim=3),
                                    dict(train_norm=True, divide_input=True, towers=2)])
def test_from_pyg_converts_pna(kwargs):
    edge_index, n = parity_graph(52)
    deg = _histogram(edge_index, n)
    torch.manual_seed(2)
    theirs = pyg.PNAConv(8, 8, ["mean", "max", "std"], ["identity", "linear"], deg,
                         **kwargs).double().eval()
    x = torch.randn(n, 8, dtype=torch.float64)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64) \
        if "edge_dim" in kwargs else None
    example = (x, edge_index) if edge_attr is None else (x, edge_index, edge_attr)
    ours = from_pyg(copy.deepcopy(theirs), example=example, strict=True)
    assert isinstance(ours, PNAConv)
    torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr))
    ours.reset_parameters()  # the degree averages come back to PyG's, not the placeholder's
    torch.testing.assert_close(ours.aggr_module.avg_deg_log.detach(),
                               theirs.aggr_module.avg_deg_log.detach())


def test_degree_histogram_is_pygs():
    from torch_geometric.data import Data
    from torch_geometric.loader import DataLoader
    graphs = [Data(num_nodes=6, edge_index=torch.randint(0, 6, (2, k))) for k in (3, 20, 9, 0)]
    loader = DataLoader(graphs, batch_size=1)
    assert torch.equal(PNAConv.get_degree_histogram(loader),
                       pyg.PNAConv.get_degree_histogram(loader))


def test_bad_arguments_are_named():
    deg = torch.tensor([1, 2, 3])
    with pytest.raises(ValueError, match=r"out_channels \(9\) must be divisible by towers"):
        PNAConv(8, 9, ["mean"], ["identity"], deg, towers=2)
    with pytest.raises(ValueError, match=r"in_channels \(9\) divisible by towers \(2\)"):
        PNAConv(9, 8, ["mean"], ["identity"], deg, towers=2, divide_input=True)
    with pytest.raises(ValueError, match="scalers must be among"):
        PNAConv(8, 8, ["mean"], ["identiti"], deg)
    with pytest.raises(ValueError, match="deg must count nodes"):
        PNAConv(8, 8, ["mean"], ["identity"], torch.zeros(3))
    with pytest.raises(ValueError, match="aggregators must be a non-empty list of names"):
        PNAConv(8, 8, torch.tensor([1, 2]), ["identity"], deg)
    with pytest.raises(TypeError, match="divide_input must be True or False"):
        PNAConv(8, 8, ["mean"], ["identity"], deg, divide_input=torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="PNAConv: towers must be an integer >= 1"):
        PNAConv(8, 8, ["mean"], ["identity"], deg, towers=0)
    edge_index, n = parity_graph(53)
    conv = PNAConv(8, 8, ["mean"], ["identity"], deg, edge_dim=3)
    with pytest.raises(ValueError, match="has edge_dim=3 .* but no edge_attr was given"):
        conv(torch.randn(n, 8), edge_index)
    with pytest.raises(ValueError, match="edge_attr has 5 rows but the graph has"):
        conv(torch.randn(n, 8), edge_index, torch.randn(5, 3))
    plain = PNAConv(8, 8, ["mean"], ["identity"], deg)
    with pytest.raises(ValueError, match="built without edge_dim, so the edge_attr of shape"):
        plain(torch.randn(n, 8), edge_index, torch.randn(edge_index.size(1), 3))
    bipartite = Graph.bipartite(torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]]), (4, 2))
    with pytest.raises(ValueError, match=r"graph is bipartite \(4 sources, 2 destinations\)"):
        PNAConv(8, 8, ["mean"], ["identity"], deg)(torch.randn(4, 8), bipartite)
    with pytest.raises(TypeError, match="x must be one tensor"):
        conv((torch.randn(n, 8), torch.randn(n, 8)), edge_index)
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 8\]"):
        conv(torch.randn(n, 7), edge_index, torch.randn(edge_index.size(1), 3))


@pytest.mark.parametrize("special", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("edge_dim", [None, 3])
def test_split_aggregates_are_the_per_edge_messages_aggregates(special, edge_dim):
    """The aggregates of a_i + b_j (+ c_e) formed from those of b_j equal the aggregates of
    the per-edge messages themselves (PyG's way), NaN and inf included: the variance of
    messages whose a_i is NaN or infinite is NaN, though a finite a_i does not move it."""
    edge_index, n = parity_graph(54)
    graph = Graph(edge_index, num_nodes=n)
    torch.manual_seed(3)
    conv = PNAConv(8, 8, AGGREGATORS, SCALERS, _histogram(edge_index, n), towers=2,
                   edge_dim=edge_dim).double()
    x = torch.randn(n, 8, dtype=torch.float64)
    x[edge_index[1, 0], 2] = special
    x[edge_index[0, 7], 5] = special
    towers = conv._tower_inputs(x)
    edge_attr = None if edge_dim is None else \
        conv.edge_encoder(torch.randn(edge_index.size(1), 3, dtype=torch.float64))
    with torch.no_grad():
        split = conv._split_aggregate(graph, towers, edge_attr)
        per_edge = conv._edge_aggregate(graph, towers, edge_attr)
    torch.testing.assert_close(split, per_edge, equal_nan=True)


def test_a_histogram_of_degree_zero_nodes_gives_pygs_non_finite_outputs():
    """A training graph without edges has mean degree 0, so the amplification and linear
    scalers divide by 0: infinite factors, whose products with the scaled entries PyG's
    Linear sums (NaN where signs meet). graphloc's first post-layer then takes PyG's order
    (its own, factor times the sum, gave inf where PyG's gives NaN)."""
    edge_index, n = parity_graph(55)
    torch.manual_seed(4)
    args = (["mean", "max"], ["amplification", "linear", "identity"], torch.tensor([7]))
    theirs = pyg.PNAConv(8, 4, *args).double()
    with pytest.warns(UserWarning, match=r"only nodes of in-degree 0, so the scalers "
                                         r"\['amplification', 'linear'\] divide by"):
        ours = PNAConv(8, 4, *args).double()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 8, dtype=torch.float64)
    got, want = ours(x, edge_index), theirs(x, edge_index)
    assert not want.isfinite().all()
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    torch.testing.assert_close(got, want, equal_nan=True)


def test_without_deg_the_first_training_forward_sets_the_degree_averages(tmp_path):
    """GNN("pna", ...) and the command line build PNA without deg: the averages are the
    first training forward's graph's (those of PyG's PNAConv given that graph's histogram),
    kept in the state dict; an eval forward before any training is an error."""
    from graphloc.cli import main
    from graphloc.nn import build_model
    edge_index, n = parity_graph(56)
    graph = Graph(edge_index, num_nodes=n)
    torch.manual_seed(5)
    model = build_model("pna", 8, 8, 3, 2).eval()
    x = torch.randn(n, 8)
    with pytest.raises(RuntimeError, match="built without deg and has not run a training"):
        model(x, graph)
    model.train()
    model(x, graph)
    given = pyg.PNAConv(8, 8, ["mean", "min", "max", "std"],
                        ["identity", "amplification", "attenuation"], _histogram(edge_index, n))
    for conv in model.convs:
        torch.testing.assert_close(conv.aggr_module.avg_deg_log, given.aggr_module.avg_deg_log)
        torch.testing.assert_close(conv.aggr_module.avg_deg_lin, given.aggr_module.avg_deg_lin)
    again = build_model("pna", 8, 8, 3, 2)
    again.load_state_dict(model.state_dict())
    model.eval(), again.eval()
    torch.testing.assert_close(again(x, graph), model(x, graph))
    run = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic:300", "--model", "pna", "--epochs", "2",
                 "--hidden", "8", "--out", str(run)]) == 0
    assert main(["influence", "--checkpoint", str(run / "best.pt"), "--max-hops", "2",
                 "--samples", "3", "--out", str(tmp_path / "r.json")]) == 0


@pytest.mark.parametrize("pre_layers", [1, 2])
def test_a_hub_loops_and_empty_rows_match_pyg(pre_layers):
    """A node of in-degree 3,000 beside loops, a parallel loop and nodes without edges."""
    graph = hub_graph()
    edge_index, n = graph.edge_index, graph.num_nodes
    torch.manual_seed(6)
    args = (AGGREGATORS, SCALERS, _histogram(edge_index, n))
    theirs = pyg.PNAConv(8, 8, *args, pre_layers=pre_layers)
    ours = PNAConv(8, 8, *args, pre_layers=pre_layers)
    assert_parity(ours, theirs, lambda m, x: m(x, graph), lambda m, x: m(x, edge_index),
                  torch.randn(n, 8))
