"""Total influence against PyG's implementation, a dense Jacobian oracle, and bad input."""

import json
import math
import warnings

import pytest
import torch
from helpers import random_edge_index, requires_ext, run_on_two_processes

from graphloc import Graph
from graphloc.influence import influence_per_hop, measure, receptive_field, total_influence
from graphloc.nn import GNN

pytestmark = requires_ext
pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.utils import total_influence as pyg_total_influence  # noqa: E402


def road_data(num_nodes=400, features=6, seed=0):
    import numpy as np
    from scipy.spatial import Delaunay
    rng = np.random.default_rng(seed)
    tri = Delaunay(rng.random((num_nodes, 2))).simplices
    pairs = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]),
                              axis=1), axis=0)
    pairs = torch.from_numpy(pairs[rng.random(len(pairs)) < 0.55]).long().t()
    edge_index = torch.cat([pairs, pairs.flip(0)], dim=1)
    return Data(x=torch.randn(num_nodes, features, generator=torch.Generator().manual_seed(seed)),
                edge_index=edge_index, num_nodes=num_nodes)


def hub_data(num_nodes=120, seed=1):
    edge_index = random_edge_index(num_nodes, 600, seed=seed, hub_degree=80).long()
    return Data(x=torch.randn(num_nodes, 6, generator=torch.Generator().manual_seed(seed)),
                edge_index=edge_index, num_nodes=num_nodes)


def models(depth=3):
    import torch_geometric.nn as pyg_nn

    import graphloc.nn as gl
    torch.manual_seed(0)
    return {
        "pyg-gcn": pyg_nn.GCN(6, 8, depth, 3), "pyg-sage": pyg_nn.GraphSAGE(6, 8, depth, 3),
        "pyg-gat": pyg_nn.GAT(6, 8, depth, 3, heads=2),
        "pyg-gatv2": pyg_nn.GAT(6, 8, depth, 3, heads=2, v2=True),
        "pyg-cheb": pyg_nn.ChebConv(6, 3, K=3),
        "gl-gcn": gl.GNN("gcn", 6, 8, 3, depth), "gl-sage": gl.GNN("sage", 6, 8, 3, depth),
        "gl-gat": gl.GNN("gat", 6, 8, 3, depth, heads=2),
        "gl-gatv2": gl.GNN("gatv2", 6, 8, 3, depth, heads=2),
        "gl-cheb": gl.GNN("cheb", 6, 8, 3, 2, K=3), "gl-gin": gl.GNN("gin", 6, 8, 3, depth),
        "gl-tag": gl.GNN("tag", 6, 8, 3, 2, K=2),
        "gl-sage-res": gl.GNN("sage", 6, 8, 3, depth, residual=True, norm="layer"),
    }


@pytest.mark.parametrize("graph", ["road", "hub"])
@pytest.mark.parametrize("max_hops", [1, 3, 5])
@pytest.mark.parametrize("name", sorted(models()))
def test_same_numbers_as_pyg(name, max_hops, graph):
    model = models()[name]
    data = road_data() if graph == "road" else hub_data()
    for average, normalize in ((True, True), (False, True)):
        torch.manual_seed(5)
        theirs, r_theirs = pyg_total_influence(model, data, max_hops, num_samples=12,
                                               normalize=normalize, average=average)
        torch.manual_seed(5)
        ours, r_ours = total_influence(model, data, max_hops, num_samples=12,
                                       normalize=normalize, average=average, batch_size=5)
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-12)
        if math.isnan(r_theirs):  # a seed no hop influences: PyG's R is NaN, ours leaves
            r_theirs = _r_of_live_seeds(model, data, max_hops)  # it out (with a warning)
        assert r_ours == pytest.approx(r_theirs, rel=1e-5)


def _r_of_live_seeds(model, data, max_hops: int) -> float:
    """The mean over PyG's seeds with some influence of R = sum_h h T_h / sum_h T_h."""
    torch.manual_seed(5)
    T, _ = pyg_total_influence(model, data, max_hops, num_samples=12, normalize=False,
                               average=False)
    live = T[T.sum(1) > 0]
    hops = torch.arange(T.size(1), dtype=T.dtype)
    return float(((live * hops).sum(1) / live.sum(1)).mean())


class _Pair(torch.nn.Module):
    """PyG convs called ``model(x, edge_index)``: a forward that names no edge values."""

    def __init__(self):
        super().__init__()
        import torch_geometric.nn as pyg_nn
        self.first, self.second = pyg_nn.GCNConv(6, 8), pyg_nn.GCNConv(8, 3)

    def forward(self, x, edge_index):
        return self.second(self.first(x, edge_index).relu(), edge_index)


class _Weighted(_Pair):
    """A forward that names ``edge_weight``: the user's own call passes the Data's."""

    def forward(self, x, edge_index, edge_weight=None):
        h = self.first(x, edge_index, edge_weight).relu()
        return self.second(h, edge_index, edge_weight)


class _OnData(_Pair):
    """``forward(self, data)``, PyG's tutorial form, reading the edge weights and ``pos``."""

    def forward(self, data):
        x = torch.cat([data.x[:, 3:], data.x[:, :3] * data.pos.sum(1, keepdim=True)], 1)
        h = self.first(x, data.edge_index, data.edge_weight).relu()
        return self.second(h, data.edge_index, data.edge_weight)


class _Positions(_Pair):
    """A forward that names a node tensor (``pos``) after keyword-only markers."""

    def forward(self, x, edge_index, *, pos):
        return super().forward(torch.cat([x[:, 3:], x[:, :3] * pos.sum(1, keepdim=True)], 1),
                               edge_index)


def _weighted_data(num_nodes=120):
    data = road_data(num_nodes=num_nodes)
    gen = torch.Generator().manual_seed(2)
    data.edge_weight = torch.rand(data.num_edges, generator=gen) + 0.1
    data.pos = torch.randn(num_nodes, 2, generator=gen)
    return data


def _ball_oracle(run, data, max_hops: int, seeds) -> torch.Tensor:
    """Per seed, PyG's ball (``k_hop_subgraph``) with its nodes' and edges' tensors sliced,
    ``run(x, ball)`` on it, the dense Jacobian of the seed's row, summed per hop
    (networkx distances)."""
    from torch_geometric.utils import k_hop_subgraph
    balls = _in_balls(data.edge_index, data.num_nodes, max_hops)
    T = torch.zeros(len(seeds), max_hops + 1, dtype=torch.float64)
    for s, v in enumerate(seeds.tolist()):
        subset, edge_index, centre, edge_mask = k_hop_subgraph(
            v, max_hops, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
        ball = Data(x=data.x[subset], edge_index=edge_index, pos=data.pos[subset],
                    num_nodes=len(subset))
        for key in ("edge_weight", "edge_attr"):
            if key in data:
                ball[key] = data[key][edge_mask]
        jac = torch.autograd.functional.jacobian(
            lambda x, ball=ball, centre=centre: run(x, ball)[centre].squeeze(0),
            ball.x.double())
        pair = jac.abs().sum((0, 2))
        for u, h in balls[v].items():
            T[s, h] += pair[(subset == u).nonzero().item()]
    return T


def test_edge_values_that_the_forward_does_not_name_are_named_in_a_warning():
    """A forward without parameters for a Data's edge weights or features is called
    ``model(x, edge_index)``, as PyG's total_influence calls it, with PyG's numbers: the
    warning names what it does not get. Without such values, no warning."""
    data = _weighted_data()
    data.edge_attr = torch.randn(data.num_edges, 2)
    torch.manual_seed(0)
    model = _Pair().eval()
    for run in (total_influence, measure):
        with pytest.warns(UserWarning, match=r"data has \['edge_attr', 'edge_weight'\], which "
                                             r"the model does not get"):
            run(model, data, max_hops=2, num_samples=8)
    torch.manual_seed(5)
    theirs, r_theirs = pyg_total_influence(model, data, 2, num_samples=8)
    torch.manual_seed(5)
    with pytest.warns(UserWarning, match="does not get"):
        ours, r_ours = total_influence(model, data, 2, num_samples=8)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total_influence(model, road_data(120), max_hops=2, num_samples=8)


@pytest.mark.parametrize("method", ["batched", "per_seed", "full_graph"])
@pytest.mark.parametrize("make,run", [
    (_Weighted, lambda m, x, ball: m(x, ball.edge_index, ball.edge_weight)),
    (_OnData, lambda m, x, ball: m(Data(x=x, edge_index=ball.edge_index, pos=ball.pos,
                                        edge_weight=ball.edge_weight))),
    (_Positions, lambda m, x, ball: m(x, ball.edge_index, pos=ball.pos)),
    (lambda: GNN("gat", 6, 8, 3, 2, heads=2, edge_dim=2),
     lambda m, x, ball: m(x, ball.edge_index, edge_attr=ball.edge_attr)),
], ids=["edge_weight", "data", "keyword-only-pos", "graphloc-gat-edge_attr"])
def test_a_forward_gets_the_data_values_it_names_on_every_ball(make, run, method):
    """PyG's total_influence calls every model ``model(x, edge_index)``: a model that reads
    the Data's edge weights was measured as another model (or failed, for ``forward(self,
    data)``). graphloc's passes each node or edge tensor of the Data that the forward names,
    sliced to the ball, and a Data to a forward of one argument: the totals of the dense
    Jacobian on PyG's balls with the model called as the user calls it (also for
    ``full_graph``: two layers, three hops, an undirected graph)."""
    data = _weighted_data()
    torch.manual_seed(0)
    model = make().double().eval()
    data.x, data.pos, data.edge_weight = (t.double() for t in (data.x, data.pos,
                                                                data.edge_weight))
    if make is _Positions:  # (it takes no edge weights: they would be named in a warning)
        del data.edge_weight
    if make not in (_Weighted, _OnData, _Positions):  # graphloc's GAT: edge features
        del data.edge_weight
        data.edge_attr = torch.rand(data.num_edges, 2, dtype=torch.float64,
                                    generator=torch.Generator().manual_seed(4))
    seeds = torch.arange(0, 120, 9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left out
        ours = influence_per_hop(model, data, 3, seeds, method=method, batch_size=5,
                                 locality=2 if method == "full_graph" else None)
        result = measure(model, data, 3, nodes=seeds, bootstrap=10)
    expected = _ball_oracle(lambda x, ball: run(model, x, ball), data, 3, seeds)
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(result.totals, expected)
    assert result.settings["model"]["call"] == {
        _Weighted: "model(x, edge_index, edge_weight=...)", _OnData: "model(data)",
        _Positions: "model(x, edge_index, pos=...)"}.get(
            make, "model(x, edge_index, edge_attr=...)")
    assert bool(result.settings["model"]["converted"]) == (make in (_Weighted, _OnData))


def test_a_forward_that_requires_pygs_batch_gets_each_ball_as_one_graph():
    """PyG's SGFormer requires ``batch`` (PyG's total_influence fails on it: "missing 1
    required positional argument: 'batch'"): each ball is one graph, batch all zeros, and
    the totals are the dense Jacobian on PyG's balls with that call. Its attention mixes
    packed balls, so it is measured per seed, with a warning."""
    from torch_geometric.nn.models import SGFormer as PyGSGFormer
    data = road_data(80)
    data.pos = torch.zeros(80, 2)  # (the oracle slices one; the model reads none)
    torch.manual_seed(0)
    model = PyGSGFormer(6, 8, 3, trans_num_layers=1, gnn_num_layers=1).eval()
    seeds = torch.arange(0, 80, 11)
    with pytest.warns(UserWarning, match="mixes the balls packed in one batch"):
        ours = influence_per_hop(model, data, 3, seeds)

    def run(x, ball):  # (PyG's attention works in float32 only)
        zeros = torch.zeros(ball.num_nodes, dtype=torch.long)
        return model(x.float(), ball.edge_index, zeros).double()
    expected = _ball_oracle(run, data, 3, seeds)
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-6)
    assert (ours[:, 3] > 0).all()  # global attention: the whole ball


def test_a_model_of_the_features_alone_has_all_its_influence_at_hop_zero():
    """An MLP baseline (``forward(self, x)``, or a Linear's ``forward(input)``) is called
    ``model(x)``: its Jacobian at a seed is its own row's (PyG's tool failed, "takes 2
    positional arguments but 3 were given")."""
    data = road_data(60)
    torch.manual_seed(0)
    for model in (torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(),
                                      torch.nn.Linear(5, 3)), torch.nn.Linear(6, 3)):
        seeds = torch.arange(0, 60, 7)
        T = influence_per_hop(model, data, 2, seeds)
        own = [torch.autograd.functional.jacobian(model, data.x[v]).abs().sum()
               for v in seeds.tolist()]
        torch.testing.assert_close(T[:, 0], torch.stack(own).double())
        assert (T[:, 1:] == 0).all()
        assert measure(model, data, 2, nodes=seeds, bootstrap=5).R == 0


def test_a_compiled_model_is_measured_as_its_eager_original():
    """torch.compile's backward refuses the retained graph of one backward per channel
    ("compiled with non-empty donated buffers"), and its wrapper hides the forward's
    parameters: the module it wraps is measured, the same numbers."""
    data = _weighted_data(80)
    torch.manual_seed(0)
    model = _Weighted().eval()
    eager = measure(model, data, 3, num_samples=10, bootstrap=5)
    compiled = measure(torch.compile(model), data, 3, num_samples=10, bootstrap=5)
    torch.testing.assert_close(compiled.totals, eager.totals)
    assert compiled.settings["model"]["call"] == "model(x, edge_index, edge_weight=...)"
    assert "eager original" in compiled.settings["model"]["compiled"]


def test_a_model_that_fails_on_the_balls_is_named_with_the_call():
    """from_pyg's advice ("pass an example=(x, edge_index) it accepts") named an argument
    the influence tool does not have: the model's own error comes with the call."""
    data = road_data(40)  # no pos: _OnData reads it
    data.edge_weight = torch.rand(data.num_edges)
    with pytest.raises(ValueError, match=r"model fails when influence calls it as "
                                         r"model\(data\) on a ball of the graph "
                                         r"\(AttributeError: .*'sum'"):
        measure(_OnData().eval(), data, 2, num_samples=4, bootstrap=5)


def test_batched_and_per_seed_paths_agree():
    data = road_data(300)
    model = models()["gl-sage"]
    nodes = torch.arange(0, 300, 7)
    batched = influence_per_hop(model, data, 4, nodes, batch_size=16)
    single = influence_per_hop(model, data, 4, nodes, method="per_seed")
    torch.testing.assert_close(batched, single, rtol=1e-6, atol=1e-12)


class _NormedGCN(torch.nn.Module):
    """A user's PyG model with a graph-level operation between its convs."""

    def __init__(self, norm):
        super().__init__()
        import torch_geometric.nn as pyg_nn
        self.conv1, self.conv2 = pyg_nn.GCNConv(6, 8), pyg_nn.GCNConv(8, 3)
        self.norm = norm

    def forward(self, x, edge_index):
        return self.conv2(self.norm(self.conv1(x, edge_index)).tanh(), edge_index)


@pytest.mark.parametrize("norm", ["graph_norm", "pair_norm", "layer_norm_graph",
                                  "instance_norm", "graph_size_norm"])
def test_models_that_mix_packed_balls_are_measured_per_seed(norm):
    """Packed balls share a graph-level normalisation: "auto" gave totals that depended on
    the batching (GraphNorm: 2x off PyG's). Now such a model is detected, warned about and
    measured per seed: PyG's numbers at every batch size; method="batched" refuses it."""
    import torch_geometric.nn as pyg_nn
    torch.manual_seed(0)
    layer = {"graph_norm": lambda: pyg_nn.GraphNorm(8), "pair_norm": pyg_nn.PairNorm,
             "layer_norm_graph": lambda: pyg_nn.LayerNorm(8, mode="graph"),
             "instance_norm": lambda: pyg_nn.InstanceNorm(8, affine=True),
             # x / sqrt(N): the batch's size, not its features (batched: 0.23x to 0.32x
             # PyG's totals)
             "graph_size_norm": pyg_nn.GraphSizeNorm}[norm]()
    model = _NormedGCN(layer)
    data = hub_data()
    nodes = torch.arange(0, 120, 9)
    torch.manual_seed(5)
    theirs, _ = pyg_total_influence(model, data, 3, num_samples=12, average=False)
    for batch_size in (4, 256):
        torch.manual_seed(5)
        with pytest.warns(UserWarning, match="mixes the balls packed in one batch"):
            ours, _ = total_influence(model, data, 3, num_samples=12, average=False,
                                      batch_size=batch_size)
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-12)
    with pytest.raises(ValueError, match="method='batched' would return totals that depend"):
        influence_per_hop(model, data, 3, nodes, method="batched")
    model.graphloc_global = True  # declared: per seed without the check
    torch.manual_seed(5)
    ours, _ = total_influence(model, data, 3, num_samples=12, average=False)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-12)


def test_local_models_are_not_reported_as_mixing(recwarn):
    for name in ("pyg-gcn", "pyg-gat", "pyg-cheb"):
        influence_per_hop(models()[name], hub_data(), 3, torch.arange(0, 120, 11))
    assert not [w for w in recwarn if "mixes the balls" in str(w.message)]


@pytest.mark.parametrize("name", ["gcn", "sage", "gat", "gin", "dagnn", "liftgcn"])
def test_layer_pruning_gives_the_unpruned_numbers(name, monkeypatch):
    import graphloc.nn as gl
    from graphloc.train import Standardized
    data = road_data(300)
    nodes = torch.arange(0, 300, 11)
    torch.manual_seed(2)
    model = {"dagnn": lambda: gl.DAGNN(6, 8, 3, K=5),
             "liftgcn": lambda: gl.LiftGCN(6, 8, 3, num_layers=5)}.get(
        name, lambda: gl.GNN(name, 6, 8, 3, 5, residual=True, norm="batch"))().double()
    model(data.x.double(), data.edge_index)  # BatchNorm statistics off their start
    x = data.x.double()
    calls, forward_within = [], type(model).forward_within
    monkeypatch.setattr(type(model), "forward_within", lambda *a: calls.append(1) or
                        forward_within(*a))
    for wrapped in (model, Standardized(model, 6).fit(x)):
        for max_hops, method in ((3, "batched"), (7, "batched"), (7, "full_graph")):
            calls.clear()
            pruned = influence_per_hop(wrapped, (x, data.edge_index), max_hops, nodes,
                                       batch_size=8, method=method)
            assert calls  # the pruned path ran
            calls.clear()
            plain = influence_per_hop(wrapped, (x, data.edge_index), max_hops, nodes,
                                      batch_size=8, method=method, prune_layers=False)
            assert not calls
            torch.testing.assert_close(pruned, plain, rtol=1e-10, atol=1e-14)


def test_dense_jacobian_oracle_on_a_tiny_graph():
    """With max_hops above the depth the ball truncation changes nothing: per-hop totals
    equal those of the full-graph Jacobian, grouped by in-hop distance."""
    import networkx as nx

    import graphloc.nn as gl
    edge_index = random_edge_index(18, 50, seed=3)
    x = torch.randn(20, 4, dtype=torch.float64)
    torch.manual_seed(1)
    model = gl.GNN("gcn", 4, 5, 3, 2).double().eval()
    graph = Graph(edge_index, num_nodes=20)
    jac = torch.autograd.functional.jacobian(lambda inp: model(inp, graph), x)  # [N,C,N,F]
    pair = jac.abs().sum(dim=(1, 3))  # I(v, u)
    g = nx.DiGraph()
    g.add_nodes_from(range(20))
    g.add_edges_from(edge_index.t().tolist())
    nodes = torch.arange(20)
    ours = influence_per_hop(model, (x, graph), 3, nodes)
    for v in range(20):
        dist = nx.single_source_shortest_path_length(g.reverse(), v, cutoff=3)
        expected = torch.zeros(4, dtype=torch.float64)
        for u, h in dist.items():
            expected[h] += pair[v, u]
        torch.testing.assert_close(ours[v], expected)


def test_eval_mode_restored_and_dropout_ignored():
    import graphloc.nn as gl
    data = road_data(200)
    model = gl.GNN("gcn", 6, 8, 3, 2, dropout=0.5).train()
    a = total_influence(model, data, 2, nodes=[1, 2, 3])[0]
    b = total_influence(model, data, 2, nodes=[1, 2, 3])[0]
    assert model.training and torch.equal(a, b)


def test_zero_influence_warns_and_bad_input():
    class Constant(torch.nn.Module):
        def forward(self, x, edge_index):
            return torch.zeros(x.size(0), 2) + 0 * x[:, :2]
    data = road_data(50)
    with pytest.warns(UserWarning, match="3 of 3 seed nodes have zero influence"):
        _, r = total_influence(Constant(), data, 2, nodes=[0, 1, 2])
    assert r != r  # NaN: no seed has any influence
    model = models()["gl-gcn"]
    with pytest.raises(ValueError, match="max_hops must be an integer >= 0, got -1"):
        total_influence(model, data, -1)
    with pytest.raises(ValueError, match="node 50 is out of range for 50 nodes"):
        total_influence(model, data, 2, nodes=[3, 50])

    class Pooled(torch.nn.Module):
        def forward(self, x, edge_index):
            return x.sum(0, keepdim=True)
    with pytest.raises(ValueError, match="one output row per node"):
        total_influence(Pooled(), data, 2, nodes=[0])

    class TwoOutputs(torch.nn.Module):  # an AttributeError on tuple.dim before
        def forward(self, x, edge_index):
            return x, x
    with pytest.raises(TypeError, match="the model returned a tuple: influence needs one "
                                        "tensor"):
        total_influence(TwoOutputs(), data, 2, nodes=[0])
    with pytest.raises(ValueError, match="no node features"):
        total_influence(model, Data(edge_index=data.edge_index, num_nodes=50), 2)
    with pytest.raises(TypeError, match="x must be floating point"):
        total_influence(model, (data.x.long(), data.edge_index), 2, nodes=[0])
    with pytest.raises(TypeError, match="nodes must be integer node ids, got torch.float32"):
        total_influence(model, data, 2, nodes=torch.tensor([0.5]))
    # a 0/1 mask read as ids would measure nodes 0 and 1 only (repeated seeds are allowed:
    # a resampling of the seeds repeats them)
    with pytest.raises(ValueError, match="nodes holds only 0s and 1s, one per node of the 50"):
        total_influence(model, data, 2, nodes=(torch.arange(50) < 5).to(torch.uint8))
    with pytest.raises(ValueError, match="method must be"):
        influence_per_hop(model, data, 2, [0], method="magic")


def test_measure_reports_curve_r_and_intervals(monkeypatch):
    data = road_data(300)
    result = measure(models()["gl-gcn"], data, 4, num_samples=40, bootstrap=200)
    ours, r = total_influence(models()["gl-gcn"], data, 4, nodes=result.nodes)
    torch.testing.assert_close(result.curve.float(), ours)
    assert result.R == pytest.approx(r, rel=1e-5)
    assert (result.curve_ci[0] <= result.curve + 1e-9).all()
    assert (result.curve <= result.curve_ci[1] + 1e-9).all()
    assert result.R_ci[0] <= result.R <= result.R_ci[1]
    json.dumps(result.to_dict())
    again = measure(models()["gl-gcn"], data, 4, num_samples=40, bootstrap=200)
    assert torch.equal(again.nodes, result.nodes)  # seed=0 by default: reproducible
    # the intervals against the bootstrap written out draw by draw (the same draws)
    draws = torch.randint(0, 40, (200, 40), generator=torch.Generator().manual_seed(0))
    curves, rs = [], []
    for d in draws:
        rows = result.totals[d]
        curves.append(rows.mean(0) / rows.mean(0)[0])
        live = rows[rows.sum(1) > 0]
        rs.append(((live * torch.arange(5)).sum(1) / live.sum(1)).mean())
    curves, rs = torch.stack(curves), torch.stack(rs)
    torch.testing.assert_close(result.curve_ci, torch.stack([curves.quantile(0.025, 0),
                                                             curves.quantile(0.975, 0)]))
    assert result.R_ci == pytest.approx((float(rs.quantile(0.025)),
                                         float(rs.quantile(0.975))), rel=1e-12)
    # resamples drawn 7 at a time (as for every node of a large graph): the same draws
    import graphloc.influence as influence
    monkeypatch.setattr(influence, "_BOOTSTRAP_ENTRIES", 7 * 40)
    chunked = measure(models()["gl-gcn"], data, 4, num_samples=40, bootstrap=200)
    torch.testing.assert_close(chunked.curve_ci, result.curve_ci)
    assert chunked.R_ci == pytest.approx(result.R_ci, rel=1e-12)


def test_two_processes_give_the_numbers_of_one(tmp_path):
    """graphloc influence --nproc 2 (torchrun, gloo, seeds sharded and gathered)."""
    from graphloc.cli import main
    common = ["influence", "--graph", "synthetic:400", "--model", "gcn", "--layers", "2",
              "--hidden", "8", "--max-hops", "4", "--samples", "30", "--seed", "3"]
    assert main([*common, "--out", str(tmp_path / "one.json")]) == 0
    assert main([*common, "--nproc", "2", "--out", str(tmp_path / "two.json")]) == 0
    one = json.loads((tmp_path / "one.json").read_text())["gcn x2"]
    two = json.loads((tmp_path / "two.json").read_text())["gcn x2"]
    assert two["nodes"] == one["nodes"]
    torch.testing.assert_close(torch.tensor(two["totals"]), torch.tensor(one["totals"]))
    assert two["R"] == pytest.approx(one["R"])


def test_processes_that_measure_different_things_are_refused_not_gathered(tmp_path):
    """measure under torchrun shards the seeds over the processes and gathers the rows:
    a model initialised per process, seeds drawn per process or features that differ
    made one result of several computations without a word. The same inputs give the
    numbers of one process."""
    proc = run_on_two_processes("influence_ranks.py", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    from graphloc.datasets import synthetic_city
    from graphloc.nn import GNN
    city = synthetic_city(200, seed=0, hops=2)
    torch.manual_seed(0)
    alone = measure(GNN("gcn", city.num_features, 8, 3, 2), (city.x, city.graph), 3,
                    nodes=torch.arange(0, 200, 7))
    for outcome in ranks:
        assert outcome["same"]["R"] == pytest.approx(alone.R, rel=1e-12)
        totals = torch.tensor(outcome["same"]["totals"], dtype=alone.totals.dtype)
        torch.testing.assert_close(totals, alone.totals)
        for case, named in (("weights", "'model.convs.0.lin.weight' on ranks [1]"),
                            ("seeds", "'seeds' on ranks [1]"), ("features", "'x' on ranks [1]")):
            # every process refuses: none is left waiting on the others
            refusal = outcome[case]["refused"]
            assert refusal.startswith("the measurement differs between the processes")
            assert named in refusal


def test_long_range_models_reach_as_far_as_their_design():
    import graphloc.nn as gl
    data = road_data(300)
    nodes = torch.arange(0, 300, 30)
    torch.manual_seed(0)
    lift = gl.LiftGCN(6, 8, 3, num_layers=3)
    T = influence_per_hop(lift, data, 6, nodes)
    assert (T[:, 4:] == 0).all() and (T[:, 3] > 0).all()  # 3 sparse products: 3 hops
    gt = gl.LargeGT(6, 8, 3, num_tokens=12, global_dim=4, num_centroids=8)
    T = influence_per_hop(gt, data, 6, nodes)  # node-batched: only the roots are scored
    assert (T[:, 5:] == 0).all() and (T[:, 1:5].sum(1) > 0).all()  # 2 sampled + 2 propagated
    for model in (gl.TANGNN(6, 8, 3, num_layers=1, m=4), gl.SGFormer(6, 8, 3, gnn_num_layers=1)):
        assert model.graphloc_global  # measured one ball at a time, so balls do not mix
        T = influence_per_hop(model.eval(), data, 6, nodes)
        assert (T[:, 3:].sum(1) > 0).all()  # beyond the one-hop local branch


def _in_balls(edge_index, num_nodes, radius):
    """node -> {u: hops} for the u that reach it within ``radius`` hops (networkx)."""
    import networkx as nx
    g = nx.DiGraph()
    g.add_nodes_from(range(num_nodes))
    g.add_edges_from(edge_index.t().tolist())
    rev = g.reverse()
    return {v: nx.single_source_shortest_path_length(rev, v, cutoff=radius)
            for v in range(num_nodes)}


@pytest.mark.parametrize("max_hops", [1, 2, 4])
@pytest.mark.parametrize("conv,kwargs", [("gcn", {}), ("sage", {}), ("cheb", {"K": 2})])
def test_full_graph_equals_the_dense_full_graph_jacobian(conv, kwargs, max_hops):
    """Every node of a directed graph with isolated nodes, max_hops below, at and above the
    depth: T_h(v) sums I(v, u) of the full-graph Jacobian over the u exactly h hops away."""
    import graphloc.nn as gl
    edge_index = random_edge_index(30, 70, seed=4)
    x = torch.randn(33, 4, dtype=torch.float64)
    torch.manual_seed(2)
    model = gl.GNN(conv, 4, 5, 3, 2, **kwargs).double().eval()
    graph = Graph(edge_index, num_nodes=33)
    pair = torch.autograd.functional.jacobian(lambda inp: model(inp, graph), x).abs().sum((1, 3))
    ours = influence_per_hop(model, (x, graph), max_hops, torch.arange(33), method="full_graph")
    expected = torch.zeros(33, max_hops + 1, dtype=torch.float64)
    for v, ball in _in_balls(edge_index, 33, max_hops).items():
        for u, h in ball.items():
            expected[v, h] += pair[v, u]
    torch.testing.assert_close(ours, expected)


@pytest.mark.parametrize("graph", ["road", "hub"])
@pytest.mark.parametrize("name", ["pyg-gcn", "pyg-sage", "gl-gat", "gl-cheb", "gl-gcn", "gl-tag"])
def test_full_graph_gives_pyg_numbers_once_max_hops_exceeds_the_depth(name, graph):
    """max_hops = L + 1: PyG's balls then hold every in-degree the model reads, so its
    truncated Jacobians are the full graph's. Cheb reads out-degrees, which PyG's in-balls
    truncate on a directed graph: it is compared on the undirected hub graph."""
    from torch_geometric.utils import to_undirected
    model = models()[name]
    data = road_data() if graph == "road" else hub_data()
    if name == "gl-cheb":
        data.edge_index = to_undirected(data.edge_index)
    locality = getattr(model, "graphloc_hops", 3)
    assert name != "gl-tag" or locality == 4  # two TAGConvs of K = 2 (counted 2 before)
    nodes = torch.arange(0, data.num_nodes, 3)
    batched = influence_per_hop(model, data, locality + 1, nodes, batch_size=7)
    full = influence_per_hop(model, data, locality + 1, nodes, method="full_graph",
                             locality=locality)
    torch.testing.assert_close(full, batched, rtol=1e-5, atol=1e-12)
    assert (full[:, locality + 1] == 0).all()


def test_separated_rounds_are_disjoint_and_greedy():
    """Within a round the L-balls share no node; each seed has the smallest round free of
    earlier seeds whose ball meets its own (a Python greedy over networkx balls)."""
    edge_index = random_edge_index(60, 150, seed=9)
    graph = Graph(edge_index, num_nodes=60)
    seeds = torch.randperm(60, generator=torch.Generator().manual_seed(0))[:45]
    for radius in (0, 1, 2):
        rounds = torch.ops.graphloc.separated_rounds(graph.csr.indptr, graph.csr.indices,
                                                     graph.csc.indptr, graph.csc.indices,
                                                     seeds, radius)
        balls = _in_balls(edge_index, 60, radius)
        expected = []
        for i, s in enumerate(seeds.tolist()):
            taken = {expected[j] for j in range(i) if balls[s].keys() & balls[int(seeds[j])].keys()}
            expected.append(min(set(range(i + 1)) - taken))
        assert rounds.tolist() == expected
    assert rounds.max() > 0  # the radius-2 balls do collide here


def test_full_graph_bad_input():
    import graphloc.nn as gl
    data = road_data(60)
    csr, csc = Graph(data.edge_index, num_nodes=60).csr, Graph(data.edge_index, 60).csc
    with pytest.raises(RuntimeError, match="seed 3 appears twice"):
        torch.ops.graphloc.separated_rounds(csr.indptr, csr.indices, csc.indptr, csc.indices,
                                            torch.tensor([3, 3]), 1)
    with pytest.raises(RuntimeError, match="seed 60 is out of range for 60 nodes"):
        torch.ops.graphloc.separated_rounds(csr.indptr, csr.indices, csc.indptr, csc.indices,
                                            torch.tensor([60]), 1)
    with pytest.raises(RuntimeError, match="seeds must be int64"):
        torch.ops.graphloc.separated_rounds(csr.indptr, csr.indices, csc.indptr, csc.indices,
                                            torch.tensor([1], dtype=torch.int32), 1)
    with pytest.raises(RuntimeError, match="the transpose must have the same nodes"):
        other = Graph(data.edge_index, num_nodes=61).csc  # one more node
        torch.ops.graphloc.separated_rounds(csr.indptr, csr.indices, other.indptr,
                                            other.indices, torch.tensor([1]), 1)
    for method in ("full_graph", "batched"):  # no seeds: no rows
        assert influence_per_hop(models()["gl-gcn"], data, 2, [], method=method).shape == (0, 3)
    with pytest.raises(ValueError, match="pass locality=L or set graphloc_hops on GCN"):
        influence_per_hop(models()["pyg-gcn"], data, 2, [0], method="full_graph")
    with pytest.raises(ValueError, match="locality must be an integer >= 0, got -1"):
        influence_per_hop(models()["gl-gcn"], data, 2, [0], method="full_graph", locality=-1)
    with pytest.raises(ValueError, match="SGFormer is global"):
        influence_per_hop(gl.SGFormer(6, 8, 3), data, 2, [0], method="full_graph", locality=2)
    # a repeated seed gets its row twice, like the other methods
    T = influence_per_hop(models()["gl-gcn"], data, 2, [5, 5, 1], method="full_graph")
    torch.testing.assert_close(T[0], T[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("conv", ["gcn", "sage", "gat", "gin"])
def test_cuda_gives_the_cpu_numbers(conv):
    import graphloc.nn as gl
    data = road_data(300)
    nodes = torch.arange(0, 300, 7)
    torch.manual_seed(4)
    model = gl.GNN(conv, 6, 8, 3, 4, residual=True, norm="layer").double()
    x = data.x.double()
    for method in ("batched", "full_graph"):
        cpu = influence_per_hop(model, (x, data.edge_index), 6, nodes, method=method)
        gpu = influence_per_hop(model.cuda(), (x, data.edge_index), 6, nodes, method=method,
                                device="cuda")
        model.cpu()
        torch.testing.assert_close(gpu, cpu, rtol=1e-9, atol=1e-12)


def test_influence_without_the_extension_gives_the_same_numbers(tmp_path):
    """A fresh process with GRAPHLOC_DISABLE_EXT=1: every op from the pure-torch twins."""
    import os
    import subprocess
    import sys

    import graphloc.nn as gl
    data = road_data(120)
    torch.manual_seed(6)
    model = gl.GNN("gcn", 6, 8, 3, 3).double()
    torch.save({"model": model, "x": data.x.double(), "edge_index": data.edge_index},
               tmp_path / "case.pt")
    nodes = torch.arange(0, 120, 9)
    script = (
        "import torch, graphloc, sys\n"
        "assert not graphloc.HAS_EXTENSION\n"
        "from graphloc.influence import influence_per_hop\n"
        f"case = torch.load(r'{tmp_path / 'case.pt'}', weights_only=False)\n"
        "data = (case['x'], case['edge_index'])\n"
        "nodes = torch.arange(0, 120, 9)\n"
        "rows = [influence_per_hop(case['model'], data, 4, nodes, method=m)\n"
        "        for m in ('batched', 'full_graph')]\n"
        f"torch.save(rows, r'{tmp_path / 'out.pt'}')\n")
    env = {**os.environ, "GRAPHLOC_DISABLE_EXT": "1"}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    without = torch.load(tmp_path / "out.pt")
    for method, rows in zip(("batched", "full_graph"), without, strict=True):
        expected = influence_per_hop(model, (data.x.double(), data.edge_index), 4, nodes,
                                     method=method)
        torch.testing.assert_close(rows, expected, rtol=1e-10, atol=1e-14)


def test_full_graph_refuses_a_locality_the_model_does_not_have():
    """A wrong L made full_graph return wrong totals quietly (R 0.47 against 0.84 for a
    3-layer GCN at L = 1): a declared depth above L, and a model that reads farther than it
    declares, are refused; the batched numbers are the reference."""
    data = road_data(120)
    deep = models(depth=3)["gl-gcn"]
    with pytest.raises(ValueError, match="locality=1 is below the 3 hops that GNN declares"):
        total_influence(deep, data, 4, nodes=[0, 5], method="full_graph", locality=1)

    class GlobalMean(torch.nn.Module):
        graphloc_hops = 1  # a false declaration: it pools over every node

        def __init__(self):
            super().__init__()
            self.conv = models(depth=1)["gl-gcn"]

        def forward(self, x, edge_index):
            h = self.conv(x, edge_index)
            return h + h.mean(0, keepdim=True)
    with pytest.raises(ValueError, match="GlobalMean is not 1-local: new features on the "
                                         "nodes beyond 1 hops of node 7"):
        measure(GlobalMean(), data, 3, nodes=[7, 8], method="full_graph")
    with pytest.raises(ValueError, match="is not 1-local"):  # undeclared, wrongly given
        total_influence(models(depth=3)["pyg-gcn"], data, 4, nodes=[7], method="full_graph",
                        locality=1)
    right = total_influence(deep, data, 4, nodes=[0, 5], method="full_graph", average=False)[0]
    batched = total_influence(deep, data, 4, nodes=[0, 5], average=False)[0]
    assert right.shape == batched.shape and (right[:, 4] == 0).all()


@pytest.mark.parametrize("kwargs, message", [
    ({"max_hops": 2.5}, "max_hops must be an integer >= 0, got 2.5"),
    ({"bootstrap": 0}, "bootstrap must be an integer >= 1, got 0"),
    ({"confidence": 1.5}, "confidence must lie strictly between 0 and 1, got 1.5"),
    ({"confidence": 0}, "confidence must lie strictly between 0 and 1, got 0"),
    ({"nodes": []}, "nodes is empty"),
    ({"nodes": [[0, 1]]}, "nodes must be 1-D"),
    ({"num_samples": 0}, "num_samples must be an integer >= 1, got 0"),
    ({"num_samples": 5, "nodes": [1]}, r"num_samples=5 and nodes were both given"),
    ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ({"seed": "a"}, "seed must be an integer, got 'a'"),
    ({"device": "tpu9"}, "device must be a torch device such as 'cpu' or 'cuda', got 'tpu9'"),
    pytest.param({"device": "cuda"}, "device='cuda', but CUDA is not available here",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here")),
])
def test_measure_arguments_are_checked(kwargs, message):
    data = road_data(40)
    args = {"max_hops": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        measure(models()["gl-gcn"], data, **args)


def test_results_plot_on_one_figure_and_the_extra_is_named(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from graphloc.influence import plot_influence
    data = road_data(60)
    results = {name: measure(models()[name], data, 3, nodes=[0, 4, 9], bootstrap=20)
               for name in ("gl-gcn", "gl-sage")}
    ax = results["gl-gcn"].plot(str(tmp_path / "one.png"), label="GCN")
    assert (tmp_path / "one.png").stat().st_size > 1000 and len(ax.lines) == 1
    ax = plot_influence(results, str(tmp_path / "two.png"))
    assert [line.get_label().split(" (R")[0] for line in ax.lines] == ["gl-gcn", "gl-sage"]
    with pytest.raises(ValueError, match="results is empty"):
        plot_influence([])
    with pytest.raises(TypeError, match=r"results\['r'\] must be an InfluenceResult"):
        plot_influence({"r": 1.2})
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'graphloc\[plot\]'"):
        plot_influence(results)


@pytest.mark.parametrize("procedure", ["ff", "sf", "sf-top2input"])
def test_forward_learned_models_are_measured_on_the_whole_graph(procedure):
    """ForwardGNN reads labelled nodes across the graph (class nodes, label blocks): its
    per-hop totals are those of the whole-graph Jacobian, not of a ball's subgraph."""
    from graphloc.nn.models.forward import ForwardGNN
    edge_index = random_edge_index(16, 40, seed=5)
    x = torch.randn(16, 4, dtype=torch.float64)
    torch.manual_seed(3)
    model = ForwardGNN("gcn", 4, 6, 3, 2, procedure=procedure, test_time_steps=3).double()
    model.set_context(16, torch.tensor([0, 3, 4, 9]), torch.tensor([0, 1, 2, 1]))
    model.eval()
    graph = Graph(edge_index, num_nodes=16)
    pair = torch.autograd.functional.jacobian(lambda inp: model(inp, graph), x).abs().sum((1, 3))
    ours = influence_per_hop(model, (x, graph), 6, torch.arange(16), batch_size=4)
    expected = torch.zeros(16, 7, dtype=torch.float64)
    for v, ball in _in_balls(edge_index, 16, 6).items():
        for u, h in ball.items():
            expected[v, h] += pair[v, u]
    torch.testing.assert_close(ours, expected)
    if procedure != "ff":  # class nodes: beyond the ball too (not counted, as PyG's hops)
        assert pair.sum() > expected.sum()


def test_a_data_with_the_adj_t_of_to_sparse_tensor():
    """A Data after ToSparseTensor (adj_t, no edge_index) gives the numbers of the Data
    before it; it raised "edge_index must be a torch.Tensor, got NoneType"."""
    import torch_geometric.transforms as T
    data = road_data(200)
    model = models()["gl-gcn"].eval()
    want = total_influence(model, data, max_hops=3, nodes=torch.arange(0, 200, 7))
    got = total_influence(model, T.ToSparseTensor()(data.clone()), max_hops=3,
                          nodes=torch.arange(0, 200, 7))
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == pytest.approx(want[1])


def _sparse_pyg_net(conv):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = conv(4, 8), conv(8, 3)

        def forward(self, x, edge_index):
            return self.c2(self.c1(x, edge_index).relu(), edge_index)
    return Net().double().eval()


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
@pytest.mark.parametrize("convert", [True, False])
def test_a_sparse_adjacency_is_measured_as_the_model_reads_it(layout, convert):
    """A Data whose edges are a torch.sparse adj_t: every ball was given to the model as an
    edge_index, so the measured model was another one than model(x, adj_t) wherever PyG
    reads the two differently, without a word: a repeated edge's entry (value 2) became
    one edge of weight 1 (SAGE, GIN, GCN), and GCNConv's sparse path adds a loop to every
    node where its edge_index path keeps a node's own. Each ball is now a sparse matrix of
    the data's key and layout. Oracle: the full-graph Jacobian of model(x, adj_t), grouped
    by in-hop distance."""
    import networkx as nx
    import torch_geometric.nn as P
    torch.manual_seed(0)
    n = 30
    edge_index = torch.cat([torch.randint(0, n, (2, 80)),
                            torch.tensor([[3, 3, 4, 4], [3, 7, 7, 7]])], 1)  # a loop, repeats
    x = torch.randn(n, 4, dtype=torch.float64)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1),
                                    dtype=torch.float64), (n, n)).coalesce()
    adj_t = adj_t.to_sparse_csr() if layout == torch.sparse_csr else adj_t
    g = nx.DiGraph(edge_index.t().tolist())
    nodes = torch.tensor([3, 7, 12, 25])
    convs = {"gcn": P.GCNConv, "sage": P.SAGEConv,
             "gin": lambda a, b: P.GINConv(torch.nn.Linear(a, b))}
    for name, conv in convs.items():
        torch.manual_seed(1)
        model = _sparse_pyg_net(conv)
        got = influence_per_hop(model, Data(x=x, adj_t=adj_t, num_nodes=n), 3, nodes,
                                convert=convert)
        pair = torch.autograd.functional.jacobian(lambda inp, m=model: m(inp, adj_t), x)
        pair = pair.abs().sum(dim=(1, 3))
        for row, v in enumerate(nodes.tolist()):
            expected = torch.zeros(4, dtype=torch.float64)
            reach = nx.single_source_shortest_path_length(g.reverse(), v, cutoff=3) \
                if v in g else {v: 0}
            for u, h in reach.items():
                expected[h] += pair[v, u]
            torch.testing.assert_close(got[row].double(), expected, msg=name)


def test_pyg_basic_gnns_on_a_sparse_adjacency_are_measured_as_they_read_it():
    """PyG's GCN, GraphSAGE and GIN converted (graphloc's GNN takes the sparse matrix as
    PyG's BasicGNN does) against the full-graph Jacobian of the PyG model on adj_t."""
    from torch_geometric.nn.models import GCN, GIN, GraphSAGE
    torch.manual_seed(0)
    n = 30
    edge_index = torch.cat([torch.randint(0, n, (2, 80)),
                            torch.tensor([[3, 3, 4, 4], [3, 7, 7, 7]])], 1)
    x = torch.randn(n, 4, dtype=torch.float64)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1),
                                    dtype=torch.float64), (n, n)).coalesce()
    for kind in (GCN, GraphSAGE, GIN):
        model = kind(4, 8, 2, 3).double().eval()
        # (max_hops above the depth: the ball holds every degree the model reads)
        result = measure(model, Data(x=x, adj_t=adj_t), 3, nodes=torch.tensor([7]))
        assert result.settings["model"]["measured"] == "GNN", result.settings
        whole = torch.autograd.functional.jacobian(lambda inp, m=model: m(inp, adj_t)[7], x)
        torch.testing.assert_close(result.totals.sum().double(), whole.abs().sum())


def test_a_model_that_takes_no_sparse_matrix_is_measured_on_its_edges():
    """A model that fails on a sparse adj_t but runs on an edge_index is measured on the
    matrix's edges and their values as edge weights, with a warning."""
    import graphloc.nn as gl
    data = road_data(120)
    torch.manual_seed(0)
    model = gl.SGFormer(6, 8, 3).eval()
    weights = torch.rand(data.edge_index.size(1)) + 0.5
    adj_t = torch.sparse_coo_tensor(data.edge_index.flip(0), weights,
                                    (120, 120)).coalesce()
    nodes = torch.arange(0, 120, 11)
    with pytest.warns(UserWarning, match="the model fails on the data's sparse adj_t"):
        got = influence_per_hop(model, Data(x=data.x, adj_t=adj_t), 3, nodes)
    want = influence_per_hop(model, Data(x=data.x, edge_index=data.edge_index), 3, nodes)
    torch.testing.assert_close(got, want)


def test_a_model_of_a_data_reads_its_adjacency_under_the_datas_key():
    """forward(self, data) reading data.adj_t gets each ball's adj_t."""
    import torch_geometric.nn as P
    torch.manual_seed(0)
    n = 25
    edge_index = torch.cat([torch.randint(0, n, (2, 60)), torch.tensor([[1, 1], [2, 2]])], 1)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1),
                                    dtype=torch.float64), (n, n)).coalesce()
    conv = P.SAGEConv(4, 3).double().eval()

    class OfData(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, data):
            return self.conv(data.x, data.adj_t)
    x = torch.randn(n, 4, dtype=torch.float64)
    got = influence_per_hop(OfData(), Data(x=x, adj_t=adj_t), 1, torch.tensor([2]))
    pair = torch.autograd.functional.jacobian(lambda inp: conv(inp, adj_t), x).abs().sum((1, 3))
    sources = edge_index[0, edge_index[1] == 2].unique()
    want = torch.stack([pair[2, 2], pair[2, sources[sources != 2]].sum()])
    torch.testing.assert_close(got[0].double(), want)


def test_the_conversion_check_probes_a_ball_with_edges(monkeypatch):
    """The converted twin of a PyG model was checked on the 2-hop ball of node 0. Where node
    0 has no in-edge, that compared the models on one node and no edge: a twin whose message
    passing differed passed. Here a twin is made wrong on every edge (spmm 1% high) and must
    be refused on a graph whose node 0 is isolated."""
    import torch_geometric.nn as pyg

    from graphloc import ops
    from graphloc.influence import _probe_node, as_graphloc_model
    edge_index = random_edge_index(30, 120, seed=3) + 1  # node 0 isolated, ids 1 .. 30
    graph = Graph(edge_index, num_nodes=31)
    model = pyg.GraphSAGE(4, 8, 2, out_channels=3).eval()
    x = torch.randn(31, 4)
    probe = int(_probe_node(graph))
    degree = graph.in_degree()
    assert degree[probe] > 0 and degree[probe] < degree.max()
    assert as_graphloc_model(model, x, graph)[1]["converted"]
    spmm = ops.spmm
    monkeypatch.setattr(ops, "spmm", lambda *a, **k: spmm(*a, **k) * 1.01)
    converted, report = as_graphloc_model(model, x, graph)
    assert not report["converted"] and converted is model


def test_more_samples_than_nodes_say_that_each_node_is_measured_once():
    """PyG's total_influence draws min(num_samples, N) seeds without a word; graphloc's
    measures the same seeds (every node once) and says so at the caller's line."""
    data = road_data(30)
    model = models()["gl-gcn"]
    with pytest.warns(UserWarning, match="num_samples=50 is more than the graph's 30 nodes") \
            as caught:
        result = measure(model, data, 3, num_samples=50, seed=1)
    assert caught[0].filename == __file__
    every = measure(model, data, 3, seed=1)
    assert sorted(result.nodes.tolist()) == list(range(30))
    by_node = lambda r: r.totals[torch.argsort(r.nodes)]  # noqa: E731
    torch.testing.assert_close(by_node(result), by_node(every))
    assert result.R == pytest.approx(every.R)


@pytest.mark.parametrize("call,match", [
    (lambda m, d: total_influence(m, d, 2, normalize="no"), "normalize must be True or False"),
    (lambda m, d: total_influence(m, d, 2, average=torch.tensor([1.0, 0.0])),
     "average must be True or False"),
    (lambda m, d: measure(m, d, 2, convert=[1], bootstrap=5), "convert must be True or False"),
    (lambda m, d: influence_per_hop(m, d, 2, [0], prune_layers="False"),
     "prune_layers must be True or False"),
    (lambda m, d: total_influence(m, d, 2, nodes="0 1"), "nodes must be integer node ids"),
    (lambda m, d: receptive_field([[1.0, 2.0]]), "T must be the per-seed totals"),
    (lambda m, d: receptive_field(torch.ones(3)), "T must be the per-seed totals"),
])
def test_bad_options_are_named(call, match):
    """A string such as "no" read as true, a tensor failed in 'Boolean value of Tensor ...
    ambiguous', nodes as a string in torch's tensor constructor, and receptive_field of
    a list or a 1-D tensor in an AttributeError or IndexError."""
    graph = Graph(random_edge_index(12, 40, seed=3), num_nodes=12)
    model = GNN("gcn", 4, 8, 3, 2).eval()
    with pytest.raises((TypeError, ValueError), match=match):
        call(model, (torch.randn(12, 4), graph))


class _EdgeFeatureStack(torch.nn.Module):
    """Three graphloc convs that read the Graph's edge features: GATConv's are optional
    (without them it is another model, which is what the balls measured until 2026-12-05),
    NNConv's and GMMConv's required."""

    def __init__(self, kind: str):
        super().__init__()
        import graphloc.nn as gl
        make = {"gat": lambda: gl.GATConv(4, 4, edge_dim=2),
                "nn": lambda: gl.NNConv(4, 4, torch.nn.Sequential(
                    torch.nn.Linear(2, 5), torch.nn.ReLU(), torch.nn.Linear(5, 16))),
                "gmm": lambda: gl.GMMConv(4, 4, dim=2, kernel_size=3)}[kind]
        self.convs = torch.nn.ModuleList(make() for _ in range(3))

    def forward(self, x, graph):
        for conv in self.convs:
            x = torch.tanh(conv(x, graph))
        return x


@pytest.mark.parametrize("method", ["batched", "per_seed", "full_graph"])
@pytest.mark.parametrize("kind", ["gat", "nn", "gmm"])
def test_a_graphs_edge_features_reach_the_model_on_every_ball(kind, method):
    """(x, Graph with edge_attr): each ball's Graph carries its edges' features, so the
    totals are those of the full-graph Jacobian of the model with them."""
    edge_index = random_edge_index(30, 90, seed=5)
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(32, 4, dtype=torch.float64, generator=gen)
    edge_attr = torch.rand(edge_index.size(1), 2, dtype=torch.float64, generator=gen)
    graph = Graph(edge_index, num_nodes=32, edge_attr=edge_attr)
    torch.manual_seed(7)
    model = _EdgeFeatureStack(kind).double().eval()
    pair = torch.autograd.functional.jacobian(lambda inp: model(inp, graph), x).abs().sum((1, 3))
    extra = {"locality": 3} if method == "full_graph" else {}
    ours = influence_per_hop(model, (x, graph), 4, torch.arange(32), method=method,
                             batch_size=8, **extra)
    expected = torch.zeros(32, 5, dtype=torch.float64)
    for v, ball in _in_balls(edge_index, 32, 4).items():
        for u, h in ball.items():
            expected[v, h] += pair[v, u]
    torch.testing.assert_close(ours, expected)


def test_a_pyg_model_on_a_graph_with_edge_features_is_told_it_gets_none():
    edge_index = random_edge_index(20, 60, seed=8)
    graph = Graph(edge_index, num_nodes=22, edge_attr=torch.rand(edge_index.size(1), 2))
    with pytest.warns(UserWarning, match=r"data has \['edge_attr'\], which the model does "
                                         r"not get: influence calls model\(x, edge_index\)"):
        influence_per_hop(_Pair(), (torch.randn(22, 6), graph), 2, torch.arange(4))


class _Cached(torch.nn.Module):
    """Two layers, the convs built with ``cached``: ``kind`` names PyG's (GCNConv, SGConv
    then GCNConv, a Linear then APPNP) or graphloc's GCNConv."""

    def __init__(self, kind: str, cached: bool):
        super().__init__()
        import torch_geometric.nn as pyg_nn

        import graphloc.nn as gl
        self.first, self.second = {
            "pyg-gcn": lambda: (pyg_nn.GCNConv(6, 8, cached=cached),
                                pyg_nn.GCNConv(8, 3, cached=cached)),
            "pyg-sg": lambda: (pyg_nn.SGConv(6, 8, K=2, cached=cached), pyg_nn.GCNConv(8, 3)),
            "pyg-appnp": lambda: (torch.nn.Linear(6, 3), pyg_nn.APPNP(3, 0.1, cached=cached)),
            "gl-gcn": lambda: (gl.GCNConv(6, 8, cached=cached), gl.GCNConv(8, 3, cached=cached)),
        }[kind]()

    def forward(self, x, edge_index):
        h = self.first(x) if isinstance(self.first, torch.nn.Linear) else \
            self.first(x, edge_index)
        return self.second(h.relu(), edge_index)


@pytest.mark.parametrize("convert", [True, False])
@pytest.mark.parametrize("kind", ["pyg-gcn", "pyg-sg", "pyg-appnp", "gl-gcn"])
def test_cached_convs_are_measured_as_the_function_of_the_graph(kind, convert):
    """influence runs the model on many balls of the graph. A cached=True conv kept the
    first ball's normalisation (or SGConv its propagated features) for the others: PyG's
    APPNP gave R = 0.16 where the model's is 1.38, without a word; graphloc's convs refused
    the next ball's node count. Now the caches are set aside for the measurement: the
    numbers are PyG's total_influence of the same model built without the cache (the
    function a cache filled on this graph computes), and the model keeps its flags and
    caches."""
    data = road_data(120)
    torch.manual_seed(3)
    model = _Cached(kind, cached=True)
    twin = _Cached(kind, cached=False)
    twin.load_state_dict(model.state_dict())
    torch.manual_seed(5)
    want, r_want = pyg_total_influence(twin, data, 3, num_samples=10)
    flags = [(m, m.cached) for m in model.modules() if hasattr(m, "cached")]
    torch.manual_seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (from_pyg's notes)
        got, r_got = total_influence(model, data, 3, num_samples=10, convert=convert)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-12)
    assert r_got == pytest.approx(r_want, rel=1e-5)
    assert any(flag for _, flag in flags) and all(m.cached == flag for m, flag in flags)


def test_a_users_own_cached_flag_is_left_alone():
    """Only convs holding PyG's cache attributes are set aside: a user's module with a
    ``cached`` flag of its own keeps it during the measurement."""
    import torch_geometric.nn as pyg_nn

    class Memo(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cached, self.seen = True, set()
            self.conv = pyg_nn.GCNConv(6, 3)

        def forward(self, x, edge_index):
            self.seen.add(self.cached)
            return self.conv(x, edge_index)

    model = Memo()
    total_influence(model, road_data(60), 2, num_samples=4, convert=False)
    assert model.seen == {True} and model.cached is True


def _hetero_graph(seed=1):
    """Papers, authors and terms, each relation with its reverse (a few nodes isolated)."""
    from graphloc.hetero import HeteroGraph
    gen = torch.Generator().manual_seed(seed)
    num = {"author": 10, "paper": 14, "term": 5}  # (papers, the target, not first)

    def pairs(num_src, num_dst, count):
        return torch.stack([torch.randint(0, num_src, (count,), generator=gen),
                            torch.randint(0, num_dst, (count,), generator=gen)])

    writes, about = pairs(10, 14, 22), pairs(5, 14, 12)
    edges = {("author", "writes", "paper"): writes, ("paper", "by", "author"): writes.flip(0),
             ("term", "in", "paper"): about, ("paper", "has", "term"): about.flip(0)}
    x = {t: torch.randn(n, w, generator=gen, dtype=torch.float64)
         for (t, n), w in zip(num.items(), [4, 6, 3], strict=True)}
    return x, HeteroGraph(num, edges)


def _hetero_oracle(run, x, hetero, target, max_hops):
    """Per target node v, the dense Jacobian of ``run(x_dict)[v]`` over every type's
    features on the whole graph, summed per hop of the union graph (networkx, edges of any
    relation into v)."""
    import networkx as nx
    types = list(x)
    offsets = {t: sum(len(x[u]) for u in types[:i]) for i, t in enumerate(types)}
    g = nx.DiGraph()
    g.add_nodes_from(range(sum(len(v) for v in x.values())))
    for (src, _, dst), graph in hetero.edges.items():
        s, d = graph.edge_index
        g.add_edges_from(zip((s + offsets[src]).tolist(), (d + offsets[dst]).tolist(),
                             strict=True))
    rev = g.reverse()
    jac = torch.autograd.functional.jacobian(lambda *xs: run(dict(zip(types, xs, strict=True))),
                                             tuple(x[t] for t in types))
    T = torch.zeros(len(x[target]), max_hops + 1, dtype=torch.float64)
    for v in range(len(x[target])):
        dist = nx.single_source_shortest_path_length(rev, offsets[target] + v, cutoff=max_hops)
        for t, part in zip(types, jac, strict=True):
            per_node = part[v].abs().sum((0, 2))  # [n_t]
            for i in range(len(x[t])):
                h = dist.get(offsets[t] + i)
                if h is None:
                    assert per_node[i] == 0  # beyond reach: no influence
                else:
                    T[v, h] += per_node[i]
    return T


@pytest.mark.parametrize("method", ["batched", "per_seed", "full_graph"])
def test_latte_on_a_heterogeneous_graph_is_the_dense_jacobian_per_hop(method):
    """A heterogeneous graph's hops count edges of any relation; each ball is split back into
    its node types and relations for the model (graphloc's LATTE takes a HeteroGraph). With
    the balls as wide as the graph, the totals are those of the full graph's Jacobian over
    every type's features."""
    import graphloc.nn as gl
    x, hetero = _hetero_graph()
    torch.manual_seed(0)
    model = gl.LATTE({t: v.size(1) for t, v in x.items()}, 8, 3, num_layers=2,
                     metadata=hetero.metadata(), target="paper").double().eval()
    ours = influence_per_hop(model, (x, hetero), 8, torch.arange(14), method=method,
                             batch_size=4, locality=3 if method == "full_graph" else None)
    expected = _hetero_oracle(lambda xs: model(xs, hetero), x, hetero, "paper", 8)
    torch.testing.assert_close(ours, expected)
    assert ours[:, 1:3].sum() > 0 and (ours[:, 4:] == 0).all()  # 3 hops: 1 + order 2
    result = measure(model, (x, hetero), 8, bootstrap=5)
    assert result.settings["target"] == "paper"
    assert result.settings["model"]["call"] == "model(x_dict, HeteroGraph)"


def test_a_pyg_heterogeneous_model_on_a_hetero_data():
    """PyG's to_hetero copies called model(x_dict, edge_index_dict), the target the one
    labelled type; converted to graphloc's convs, the dense Jacobian's totals (two SAGE
    layers: balls of 3 hops hold everything they read)."""
    import torch_geometric.nn as pyg_nn
    x, hetero = _hetero_graph()
    data = hetero.to_pyg(x)
    data["paper"].y = torch.zeros(14, dtype=torch.long)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = pyg_nn.SAGEConv((-1, -1), 8)
            self.second = pyg_nn.SAGEConv((-1, -1), 3)

        def forward(self, x, edge_index):
            return self.second(self.first(x, edge_index).tanh(), edge_index)

    torch.manual_seed(0)
    model = pyg_nn.to_hetero(Net(), data.metadata(), aggr="sum").double()
    model(data.x_dict, data.edge_index_dict)  # the lazy widths
    model.eval()
    result = measure(model, data, 3, bootstrap=5, nodes=torch.arange(14))
    expected = _hetero_oracle(lambda xs: model(xs, data.edge_index_dict)["paper"], x,
                              hetero, "paper", 3)
    torch.testing.assert_close(result.totals, expected)
    assert result.settings["model"]["call"] == "model(x_dict, edge_index_dict)"
    assert result.settings["model"]["converted"]
    from graphloc.datasets.hetero import HeteroNodeDataset
    index = torch.arange(14)
    dataset = HeteroNodeDataset("toy", hetero, x, data["paper"].y, "paper", index, index, index)
    torch.testing.assert_close(influence_per_hop(model, dataset, 3, index), expected)


def test_heterogeneous_inputs_that_cannot_be_measured_are_named():
    import graphloc.nn as gl
    from graphloc.hetero import HeteroGraph
    x, hetero = _hetero_graph()
    model = gl.LATTE({t: v.size(1) for t, v in x.items()}, 8, 3, num_layers=1,
                     metadata=hetero.metadata(), target="paper").double().eval()
    plain = torch.nn.Linear(6, 3)
    with pytest.raises(ValueError, match=r"target: pass the node type whose outputs are "
                                         r"measured, one of \['author', 'paper', 'term'\]"):
        measure(plain, (x, hetero), 2)
    with pytest.raises(ValueError, match="target='venue' is not a node type"):
        measure(model, (x, hetero), 2, target="venue")
    with pytest.raises(ValueError, match="node 14 is out of range for 14 nodes"):
        influence_per_hop(model, (x, hetero), 2, [3, 14])
    with pytest.raises(ValueError, match=r"node types \['term'\] have no features x"):
        measure(model, ({t: v for t, v in x.items() if t != "term"}, hetero), 2)
    with pytest.raises(TypeError, match="different dtypes"):
        measure(model, ({**x, "term": x["term"].float()}, hetero), 2)
    with pytest.raises(ValueError, match="target='paper' names a node type, but the graph "
                                         "has one node set"):
        total_influence(model, road_data(20), 2, target="paper")
    # no node to draw a seed from (randint's "random_ expects 'from' to be less than 'to'")
    empty = HeteroGraph({**hetero.num_nodes, "venue": 0}, hetero.edges)
    with pytest.raises(ValueError, match="no seed nodes to draw"):
        measure(model, ({**x, "venue": torch.zeros(0, 2, dtype=torch.float64)}, empty), 2,
                target="venue")
    with pytest.raises(ValueError, match="no seed nodes to draw"):
        no_edges = torch.zeros(2, 0, dtype=torch.long)
        measure(GNN("gcn", 6, 8, 3, 2), (torch.zeros(0, 6), Graph(no_edges, 0)), 2)


def test_batches_shrink_to_a_budget_of_nodes_and_edges(monkeypatch):
    """batch_size seeds were packed whatever their balls' sizes: 256 balls of a hub graph,
    each most of the graph, filled the memory (an example was killed). After a first batch
    of 8 seeds the largest ball seen sizes the next batches to the budget (never below one
    ball); the totals stay those of one seed at a time."""
    import graphloc.influence as influence
    data = hub_data(120)
    model = models()["gl-sage"].eval()
    nodes = torch.arange(0, 120, 3)
    single = influence_per_hop(model, data, 3, nodes, method="per_seed")
    batch = influence._batch_influence
    for budget, later in ((1, [1] * 32), (2**40, [32])):
        counts = []
        monkeypatch.setattr(influence, "_batch_influence",
                            lambda *a, counts=counts, **k: counts.append(len(a[4]))
                            or batch(*a, **k))
        monkeypatch.setattr(influence, "_PACKED_BUDGET", budget)
        batched = influence_per_hop(model, data, 3, nodes, batch_size=64)
        assert counts == [8, *later]
        torch.testing.assert_close(batched, single)


def test_a_model_that_cannot_take_the_tensors_it_names_is_measured_without_them():
    """PyG's BasicGNN names edge_weight and edge_attr whatever its convs take: its PNA built
    without edge_dim fails when given edge_attr (its users call it without). It is measured
    as model(x, edge_index), PyG's numbers, with a warning that says why."""
    import torch_geometric.nn as pyg_nn
    data = road_data(80)
    data.edge_attr = torch.rand(data.num_edges, 3, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    model = pyg_nn.PNA(6, 8, 2, 3, aggregators=["mean", "max"], scalers=["identity"],
                       deg=torch.tensor([0, 5, 5])).eval()
    torch.manual_seed(3)
    theirs, _ = pyg_total_influence(model, data, 2, num_samples=10)
    torch.manual_seed(3)
    with pytest.warns(UserWarning, match=r"the model fails when given the data's "
                                         r"\['edge_attr'\] \(AttributeError: .*\): measured "
                                         r"without them, as model\(x, edge_index\)"):
        ours, _ = total_influence(model, data, 2, num_samples=10)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("count, batch_size", [(10, 256), (37, 8), (1, 1)])
def test_the_progress_bar_counts_each_seed_once(monkeypatch, count, batch_size):
    """The bar advanced by the batch size asked for, not the seeds a batch held: 10 seeds
    showed as 264 of 10."""
    import tqdm.auto
    bars = []

    class Recorder(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": True})
            self.counted = 0
            bars.append(self)

        def update(self, n=1):
            self.counted += n

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    graph = Graph(random_edge_index(60, 200, seed=4), 60)
    model = GNN("gcn", 3, 8, 2, num_layers=2)
    influence_per_hop(model, (torch.randn(60, 3), graph), 3, torch.arange(count),
                      batch_size=batch_size, progress=True)
    assert [(bar.total, bar.counted) for bar in bars] == [(count, count)]


@pytest.mark.parametrize("method", ["full_graph", "batched", "per_seed"])
def test_a_local_augmentation_model_is_measured_through_its_generator(method):
    """An LA model's generated features are functions of x (the decoder at z = 0 given
    each node's own features), so x_u reaches v through them too: the influence is the
    dense Jacobian of the whole function, the generator written out here. graphloc cut
    that path and measured the model with its draws as constants."""
    from graphloc.nn.models.aug import LAModel, LocalAugmenter
    edge_index = random_edge_index(30, 70, seed=4)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(33, 4, dtype=torch.float64, generator=gen)
    torch.manual_seed(2)
    augmenter = LocalAugmenter(4, 8, 3).double()
    augmenter.fit_scaler(x)
    model = LAModel("gcn", 4, 5, 3, 2, augmenter=augmenter, num_generated=2).double().eval()
    graph = Graph(edge_index, num_nodes=33)
    first, second = augmenter.decoder[0], augmenter.decoder[2]

    def decoded(inp):  # decoder([0, (x - shift) / scale]) * scale + shift
        scaled = (inp - augmenter.shift) / augmenter.scale
        hidden = torch.relu(scaled @ first.weight[:, 3:].T + first.bias)
        return (hidden @ second.weight.T + second.bias) * augmenter.scale + augmenter.shift

    pair = torch.autograd.functional.jacobian(
        lambda inp: model(inp, graph, [decoded(inp), decoded(inp)]), x).abs().sum((1, 3))
    ours = influence_per_hop(model, (x, graph), 3, torch.arange(33), method=method)
    expected = torch.zeros(33, 4, dtype=torch.float64)
    for v, ball in _in_balls(edge_index, 33, 3).items():
        for u, h in ball.items():
            expected[v, h] += pair[v, u]
    torch.testing.assert_close(ours, expected)
    assert model.graphloc_hops == 2


def test_a_sparse_edge_index_is_read_as_pygs_layers_read_it():
    """Data(edge_index=<a torch.sparse matrix>): PyG's layers read it as an adj_t; it was
    refused ("aminmax" on a sparse tensor). Measured as the model reads it."""
    import torch_geometric.nn as P
    torch.manual_seed(0)
    n = 20
    edge_index = torch.cat([torch.randint(0, n, (2, 50)), torch.tensor([[2, 2], [5, 5]])], 1)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1),
                                    dtype=torch.float64), (n, n)).coalesce()
    model = _sparse_pyg_net(P.GCNConv)
    x = torch.randn(n, 4, dtype=torch.float64)
    got = measure(model, Data(x=x, edge_index=adj_t), 3, nodes=torch.tensor([5]))
    whole = torch.autograd.functional.jacobian(lambda inp: model(inp, adj_t)[5], x)
    torch.testing.assert_close(got.totals.sum().double(), whole.abs().sum())


class _FlowNet(torch.nn.Module):
    def __init__(self, convs, first, second):
        super().__init__()
        self.c1, self.c2 = convs.GCNConv(4, 8, flow=first), convs.GCNConv(8, 3, flow=second)

    def forward(self, x, edge_index, edge_weight=None):
        return self.c2(self.c1(x, edge_index, edge_weight).relu(), edge_index, edge_weight)


@pytest.mark.parametrize("library", ["pyg", "graphloc"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("convert", [True, False])
def test_a_model_whose_messages_run_against_the_edges_is_measured_along_them(
        library, weighted, convert):
    """flow="target_to_source": a node reads its out-neighbours. The balls and hops ran
    over in-edges, so the measured model missed what it reads (totals 30% low on these
    seeds) without a word. Oracle: the full-graph Jacobian grouped by the distance along
    the reversed edges."""
    import networkx as nx
    import torch_geometric.nn as P

    import graphloc.nn as gl
    torch.manual_seed(0)
    n = 30
    edge_index = torch.randint(0, n, (2, 60))
    weight = torch.rand(60, dtype=torch.float64)
    x = torch.randn(n, 4, dtype=torch.float64)
    torch.manual_seed(1)
    model = _FlowNet(P if library == "pyg" else gl, "target_to_source",
                     "target_to_source").double().eval()
    data = Data(x=x, edge_index=edge_index, edge_weight=weight) if weighted else \
        Data(x=x, edge_index=edge_index)
    nodes = torch.tensor([0, 5, 17])
    got = influence_per_hop(model, data, 3, nodes, convert=convert)
    given = weight if weighted else None
    pair = torch.autograd.functional.jacobian(lambda inp: model(inp, edge_index, given), x)
    pair = pair.abs().sum(dim=(1, 3))
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edge_index.t().tolist())
    for row, v in enumerate(nodes.tolist()):
        expected = torch.zeros(4, dtype=torch.float64)
        for u, h in nx.single_source_shortest_path_length(g, v, cutoff=3).items():
            expected[h] += pair[v, u]  # (u reached from v along the edges: v reads u)
        torch.testing.assert_close(got[row].double(), expected)


def test_a_model_that_sends_messages_both_ways_is_refused():
    import torch_geometric.nn as P
    model = _FlowNet(P, "source_to_target", "target_to_source").eval()
    data = Data(x=torch.randn(10, 4), edge_index=torch.randint(0, 10, (2, 20)))
    with pytest.raises(ValueError, match="the model's layers send messages both ways"):
        influence_per_hop(model, data, 2, torch.tensor([0]))
