import math
import os

import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph
from graphloc.nn import MEGAGNN, GINEConv, MultiEdgeConv
from graphloc.nn.conv.multi_edge import (
    EDGE_AGGREGATORS,
    ORDERED_AGGREGATORS,
    Aggregation,
    group_size_histogram,
)


def _multigraph(n=12, seed=0):
    """Pairs with 1 to 4 parallel edges each, in shuffled edge order."""
    gen = torch.Generator().manual_seed(seed)
    pairs = random_edge_index(n, 30, seed=seed)
    pairs = pairs[:, pairs[0] != pairs[1]].unique(dim=1)
    copies = torch.randint(1, 5, (pairs.size(1),), generator=gen)
    edge_index = pairs.repeat_interleave(copies, dim=1)
    order = torch.randperm(edge_index.size(1), generator=gen)
    return Graph(edge_index[:, order], num_nodes=n)


@pytest.mark.parametrize("kind", [k for k in EDGE_AGGREGATORS if k not in ORDERED_AGGREGATORS])
def test_permuting_parallel_edges_leaves_the_output_unchanged(kind):
    graph = _multigraph()
    torch.manual_seed(0)
    conv = MultiEdgeConv(6, edge_agg=kind, bidirectional=True, edge_update=True).double()
    x = torch.randn(graph.num_nodes, 6, dtype=torch.float64)
    e = torch.randn(graph.num_edges, 6, dtype=torch.float64)
    out, e_new = conv(x, graph, e)
    perm = torch.randperm(graph.num_edges)
    shuffled = Graph(graph.edge_index[:, perm], num_nodes=graph.num_nodes)
    out_p, e_new_p = conv(x, shuffled, e[perm])
    torch.testing.assert_close(out_p, out)
    torch.testing.assert_close(e_new_p, e_new[perm])


def test_gru_aggregator_follows_time_order():
    torch.manual_seed(0)
    agg = Aggregation("gru", 4).double()
    values = torch.randn(7, 4, dtype=torch.float64)
    index = torch.tensor([1, 0, 1, 2, 1, 0, 1])
    time = torch.tensor([5.0, 1.0, 2.0, 0.0, 9.0, 0.5, 3.0], dtype=torch.float64)
    out = agg(values, index, 4, time)
    for g in range(3):  # oracle: the GRU on each group's rows sorted by time, outputs mean
        rows = (index == g).nonzero().flatten()
        rows = rows[time[rows].argsort()]
        seq, _ = agg.gru(values[rows].unsqueeze(1))
        torch.testing.assert_close(out[g], seq.mean(0)[0])
    torch.testing.assert_close(out[3], torch.zeros(4, dtype=torch.float64))  # empty group
    shuffled = torch.randperm(7)
    torch.testing.assert_close(agg(values[shuffled], index[shuffled], 4, time[shuffled]), out)
    reversed_time = agg(values, index, 4, -time)
    assert not torch.allclose(reversed_time[:2], out[:2])  # the order matters
    nothing = agg(values[:0], index[:0], 3, time[:0])  # raised (max of no lengths)
    torch.testing.assert_close(nothing, torch.zeros(3, 4, dtype=torch.float64))


def test_graphs_without_edges():
    """Every group empty: the GRU aggregator gives the empty mean (it raised); PNA with a
    histogram runs, and without one, in training, names what is missing."""
    empty = Graph(torch.empty(2, 0, dtype=torch.long), num_nodes=4)
    for edge_agg, deg in (("gru", None), ("pna", torch.tensor([0.0, 3.0, 1.0]))):
        for task in ("edge", "node"):
            model = MEGAGNN(3, 2, 8, 2, edge_agg=edge_agg, node_agg="sum", task=task,
                            pna_deg=deg)
            x = torch.randn(4, 3, requires_grad=True)
            out = model(x, empty, torch.randn(0, 2), torch.randn(0))
            assert out.shape == ((0, 2) if task == "edge" else (4, 2))
            assert bool(torch.isfinite(out).all())
            out.sum().backward()
    with pytest.raises(ValueError, match="this graph has no edges: pass deg="):
        MEGAGNN(3, 2, 8, 2, edge_agg="pna")(torch.randn(4, 3), empty, torch.randn(0, 2))


def test_pna_aggregator_is_pygs_degree_scaler_aggregation_with_a_fixed_histogram():
    """The official PnaAgg is PyG's DegreeScalerAggregation of mean, min, max and std with
    the identity, amplification and attenuation scalers (its std: 0 below sqrt(1e-5), so a
    one-edge pair's std is 0, not sqrt(1e-5) as in the PNA paper's formula)."""
    from torch_geometric.nn.aggr import DegreeScalerAggregation
    deg = torch.tensor([0, 5, 2, 1])  # training groups: five of size 1, two of 2, one of 3
    delta = (5 * math.log(2) + 2 * math.log(3) + math.log(4)) / 8  # mean log(P + 1)
    agg = Aggregation("pna", 2, deg=deg).double()
    assert agg.pna_delta.item() == pytest.approx(delta)
    pyg = DegreeScalerAggregation(["mean", "min", "max", "std"],
                                  ["identity", "amplification", "attenuation"], deg)
    values = torch.randn(6, 2, dtype=torch.float64)
    index = torch.tensor([0, 0, 0, 1, 2, 2])
    stats = agg._pna(values, index, 4)
    torch.testing.assert_close(stats[:3], pyg(values, index, dim_size=4)[:3])
    assert stats[1, 6:8].abs().sum() == 0  # the one-edge pair's std
    assert stats[3].abs().sum() == 0  # an empty group


def test_pna_std_does_not_cancel_where_the_mean_dwarfs_the_spread():
    """float32 edge states of 1e3 +- 1 (a timestamp, an amount): PyG's
    mean(x^2) - mean(x)^2 cancels to noise; the std against torch.std in float64."""
    agg = Aggregation("pna", 2, deg=torch.tensor([0, 0, 0, 1]))
    gen = torch.Generator().manual_seed(2)
    values = 1e3 + torch.randn(30, 2, generator=gen)
    index = torch.arange(3).repeat_interleave(10)
    std = agg._pna(values, index, 3)[:, 6:8]  # [mean, min, max, std] x 2 channels first
    want = torch.stack([values[index == g].double().var(0, unbiased=False).sqrt()
                        for g in range(3)])
    torch.testing.assert_close(std.double(), want, rtol=1e-5, atol=1e-6)


def test_pna_state_of_a_pair_does_not_depend_on_unrelated_pairs():
    """The review measured pair 0's state moving by 0.29 when 40 unrelated single-edge pairs
    were added: delta was recomputed from whatever graph was passed."""
    graph = Graph(torch.tensor([[0, 0, 0, 1], [1, 1, 1, 2]]), num_nodes=3)
    torch.manual_seed(0)
    conv = MultiEdgeConv(4, edge_agg="pna", deg=group_size_histogram(graph)).double().eval()
    x = torch.randn(3, 4, dtype=torch.float64)
    e = torch.randn(4, 4, dtype=torch.float64)
    group, _ = graph.edge_groups()
    state = conv.forward_dir.edge_agg(e, group, 2)
    extra = torch.stack([torch.arange(3, 43), torch.arange(4, 44)])
    bigger = Graph(torch.cat([graph.edge_index, extra], 1), num_nodes=44)
    big_group, big_pairs = bigger.edge_groups()
    e_big = torch.cat([e, torch.randn(40, 4, dtype=torch.float64)])
    big_state = conv.forward_dir.edge_agg(e_big, big_group, big_pairs)
    torch.testing.assert_close(big_state[big_group[0]], state[group[0]])
    fresh = MultiEdgeConv(4, edge_agg="pna").double().eval()
    with pytest.raises(RuntimeError, match="no degree statistics yet: pass deg="):
        fresh(x, graph, e)
    fresh.train()(x, graph, e)  # the first training forward fixes delta from its graph
    assert fresh.forward_dir.edge_agg.pna_delta.item() == pytest.approx(
        (math.log(4) + math.log(2)) / 2)
    assert "forward_dir.edge_agg.pna_delta" in fresh.state_dict()


def test_simple_graph_sum_one_direction_equals_gine():
    edge_index = random_edge_index(15, 50, seed=3)
    graph = Graph(edge_index, num_nodes=15).coalesce()  # no parallel edges
    conv = MultiEdgeConv(5, edge_agg="sum").double()
    gine = GINEConv(conv.forward_dir.gine.nn, edge_dim=5).double()
    gine.lin = conv.forward_dir.gine.lin
    x = torch.randn(15, 5, dtype=torch.float64)
    e = torch.randn(graph.num_edges, 5, dtype=torch.float64)
    out, e_new = conv(x, graph, e)
    torch.testing.assert_close(out, gine(x, graph, e))
    assert e_new is e


def test_parallel_edges_are_summed_into_one_pair_state():
    graph = Graph(torch.tensor([[0, 0, 0, 2], [1, 1, 1, 1]]), num_nodes=3)
    conv = MultiEdgeConv(3, edge_agg="sum").double()
    x = torch.randn(3, 3, dtype=torch.float64)
    e = torch.randn(4, 3, dtype=torch.float64)
    out, _ = conv(x, graph, e)
    h01 = e[:3].sum(0)
    lin = conv.forward_dir.gine.lin  # the official GINEConv(edge_dim=hidden)
    messages = torch.relu(x[0] + lin(h01)) + torch.relu(x[2] + lin(e[3]))
    torch.testing.assert_close(out[1], conv.forward_dir.gine.nn(x[1] + messages))


def test_bidirectional_sees_the_reverse_direction():
    # the signal sits on node 0, which only sends: only the reverse direction brings it to 0
    graph = Graph(torch.tensor([[0, 0], [1, 2]]), num_nodes=3)
    x = torch.zeros(3, 4, dtype=torch.float64)
    e = torch.zeros(2, 4, dtype=torch.float64)
    torch.manual_seed(0)
    one_way = MultiEdgeConv(4, bidirectional=False).double()
    both = MultiEdgeConv(4, bidirectional=True).double()
    signal = x.clone()
    signal[1] = 1.0  # node 1 changes: node 0 hears it only through reverse edges
    assert torch.equal(one_way(signal, graph, e)[0][0], one_way(x, graph, e)[0][0])
    assert not torch.allclose(both(signal, graph, e)[0][0], both(x, graph, e)[0][0])
    reverse = both.reverse_dir
    assert reverse is not None and reverse.gine.nn[0].weight.data_ptr() != \
        both.forward_dir.gine.nn[0].weight.data_ptr()


@pytest.mark.parametrize("edge_agg", ["sum", "gru", None])
def test_megagnn_learns_a_pair_level_edge_label(edge_agg):
    graph = _multigraph(n=30, seed=5)
    group, num_pairs = graph.edge_groups()
    size = torch.bincount(group)[group]
    y = (size >= 3).long()  # label: the edge's pair has many parallel edges
    time = torch.rand(graph.num_edges)
    torch.manual_seed(0)
    model = MEGAGNN(1, 1, 16, 2, num_layers=2, edge_agg=edge_agg)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    ones_x, ones_e = torch.ones(30, 1), torch.ones(graph.num_edges, 1)
    for _ in range(150):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(ones_x, graph, ones_e, time), y)
        loss.backward()
        opt.step()
    accuracy = (model.eval()(ones_x, graph, ones_e, time).argmax(1) == y).float().mean()
    if edge_agg is not None:
        assert accuracy > 0.95
    some = torch.tensor([0, 3])
    torch.testing.assert_close(model(ones_x, graph, ones_e, time, edges=some),
                               model(ones_x, graph, ones_e, time)[some])


def test_mega_bad_input():
    graph = _multigraph()
    with pytest.raises(ValueError, match="edge aggregator must be one of"):
        MultiEdgeConv(4, edge_agg="lstm")
    with pytest.raises(ValueError, match="node_agg"):
        MultiEdgeConv(4, node_agg="gru")
    with pytest.raises(ValueError, match="task"):
        MEGAGNN(1, 1, 4, 2, task="graph")
    conv = MultiEdgeConv(4, edge_agg="gru")
    x = torch.randn(graph.num_nodes, 4)
    with pytest.raises(ValueError, match="needs an order"):
        conv(x, graph, torch.randn(graph.num_edges, 4))
    with pytest.raises(ValueError, match=r"e must have shape"):
        conv(x, graph, torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"time must have shape"):
        conv(x, graph, torch.randn(graph.num_edges, 4), torch.randn(2))


def test_megagnn_node_task_with_pna_stage_two():
    graph = _multigraph(n=40, seed=7)
    group, _ = graph.edge_groups()
    parallel = torch.bincount(group)[group] >= 3
    y = torch.zeros(40, dtype=torch.long)
    y[graph.edge_index[1][parallel]] = 1  # receives some pair with >= 3 parallel edges
    torch.manual_seed(0)
    model = MEGAGNN(1, 1, 16, 2, edge_agg="sum", node_agg="pna", task="node")
    ones_x, ones_e = torch.ones(40, 1), torch.ones(graph.num_edges, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(150):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(ones_x, graph, ones_e), y).backward()
        opt.step()
    logits = model.eval()(ones_x, graph, ones_e)
    assert logits.shape == (40, 2)
    assert (logits.argmax(1) == y).float().mean() > 0.9


def test_megagnn_bad_input():
    graph = _multigraph()
    model = MEGAGNN(1, 2, 8, 2)
    x, e = torch.ones(graph.num_nodes, 1), torch.ones(graph.num_edges, 2)
    with pytest.raises(ValueError, match=r"edge_attr must have shape"):
        model(x, graph, torch.ones(graph.num_edges, 3))
    with pytest.raises(ValueError, match=r"edges holds .* but dim_size"):
        model(x, graph, e, edges=torch.tensor([graph.num_edges]))
    with pytest.raises(TypeError, match="edges must be an integer tensor"):
        model(x, graph, e, edges=torch.tensor([0.5]))
    with pytest.raises(TypeError, match="floating-point"):
        model(x.long(), graph, e)
    with pytest.raises(ValueError, match=r"shape \[N, 1\]"):
        model(torch.ones(graph.num_nodes, 2), graph, e)
    with pytest.raises(ValueError, match="reverse_states must be 'separate' or 'shared', "
                                         "got 'both'"):
        MEGAGNN(1, 2, 8, 2, reverse_states="both")
    for histogram in ([], [-1, 3], [0, 0], [[1, 1], [1, 1]]):
        with pytest.raises(ValueError, match="deg must be a non-empty histogram"):
            MEGAGNN(1, 2, 8, 2, node_agg="pna", pna_deg=torch.tensor(histogram))
    with pytest.raises(ValueError, match="only read by the 'pna' aggregator, but "
                                         "edge_agg='sum' and node_agg='mean'"):
        MEGAGNN(1, 2, 8, 2, node_agg="mean", pna_deg=torch.tensor([0, 4]))



def _official_megagnn(model: MEGAGNN, x, edge_index, edge_attr):
    """The official GINe with --flatten_edges --edge_agg_type sum --emlps --reverse_mp,
    eval mode, written from its models.py and training.py with plain loops: the reversed
    edges are a relation of their own (to_hetero, aggr='mean') with their own edge
    embedding, pair aggregation, GINE (edge_dim: a Linear on the pair state) and edge MLP;
    node update x = (x + ReLU(BN(mean of the relations))) / 2, then the edge update from the
    updated x; readout on the forward relation. Only the weights come from ``model``."""
    relations = {"to": edge_index, "rev_to": edge_index.flip(0)}
    embed = {"to": model.edge_emb, "rev_to": model.edge_emb_reverse}
    e = {r: embed[r](edge_attr) for r in relations}
    x = model.node_emb(x)
    for conv, norm in zip(model.convs, model.norms, strict=True):
        direction = {"to": conv.forward_dir, "rev_to": conv.reverse_dir}
        outs, pair_of_edge, pair_state = [], {}, {}
        for r, (src, dst) in relations.items():
            pairs = {}  # (i, j) -> member edges
            for k, (i, j) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
                pairs.setdefault((i, j), []).append(k)
            d = direction[r]
            h = {p: e[r][members].sum(0) for p, members in pairs.items()}
            agg = torch.zeros_like(x)
            for (i, j), state in h.items():
                agg[j] += torch.relu(x[i] + d.gine.lin(state))
            outs.append(d.gine.nn((1 + d.gine.eps) * x + agg))
            pair_of_edge[r] = [(i, j) for i, j in zip(src.tolist(), dst.tolist(), strict=True)]
            pair_state[r] = h
        x = (x + torch.relu(norm((outs[0] + outs[1]) / 2))) / 2
        for r, (src, _) in relations.items():
            remapped = torch.stack([pair_state[r][p] for p in pair_of_edge[r]])
            update = direction[r].edge_mlp(torch.cat([x[src], remapped, e[r]], 1))
            e[r] = e[r] + update / 2
    src, dst = edge_index
    ends = torch.relu(torch.cat([x[src], x[dst]], 1))
    return model.readout(torch.cat([ends, e["to"]], 1))


def test_megagnn_equals_the_official_bidirectional_forward():
    graph = _multigraph(n=10, seed=2)
    torch.manual_seed(0)
    model = MEGAGNN(3, 4, 6, 2, num_layers=2, edge_agg="sum").double().eval()
    for norm in model.norms:  # non-trivial running statistics
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 2.0)
    x = torch.randn(10, 3, dtype=torch.float64)
    edge_attr = torch.randn(graph.num_edges, 4, dtype=torch.float64)
    expected = _official_megagnn(model, x, graph.edge_index, edge_attr)
    torch.testing.assert_close(model(x, graph, edge_attr), expected)
    assert model.edge_emb_reverse is not None  # the reverse relation's own embedding
    shared = MEGAGNN(3, 4, 6, 2, reverse_states="shared")
    assert shared.edge_emb_reverse is None
    gine = model.convs[0].forward_dir.gine  # GINEConv(edge_dim=hidden): 6 x 6 + 6 more
    assert sum(p.numel() for p in gine.parameters()) == 2 * (36 + 6) + 42


OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "megagnn_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: f"{c['edge_agg']}-{c['num_layers']}")
def test_megagnn_equals_the_official_code_run_on_the_same_weights(case):
    """The official GINe with --flatten_edges --emlps --reverse_mp under to_hetero, run from
    its repository (``megagnn_oracle.py``): one pair aggregator per relation for all layers,
    PyG's PNA std; the GRU case has no padding (pairs of two edges)."""
    model = MEGAGNN(3, 4, 6, 2, num_layers=case["num_layers"], edge_agg=case["edge_agg"])
    model = model.double()
    model.load_state_dict(case["weights"])
    graph = Graph(case["edge_index"], num_nodes=case["x"].size(0))
    time = case["edge_attr"][:, 0]  # the official GRU orders by the first edge feature
    out = model.eval()(case["x"], graph, case["edge_attr"], time)
    torch.testing.assert_close(out, case["official"], rtol=1e-12, atol=1e-12)


GROUPS = os.path.join(os.path.dirname(__file__), "data", "megagnn_transformer_groups.pt")


@pytest.mark.parametrize("case", torch.load(GROUPS, weights_only=True))
def test_the_transformer_aggregator_is_the_officials_run_on_each_pair_alone(case):
    """Groups of 1 to 5 rows, interleaved and out of time order: each group's state is the
    official ``TransformerAgg`` run on that group alone (``megagnn_oracle.py``), whatever
    the lengths of the other groups, and its gradient flows to every row."""
    aggregation = Aggregation("transformer", case["values"].size(1)).double().eval()
    aggregation.load_state_dict(case["weights"])
    values = case["values"].clone().requires_grad_()
    out = aggregation(values, case["index"], 7, case["times"])
    torch.testing.assert_close(out, case["official"], rtol=1e-12, atol=1e-12)
    (out * torch.randn_like(out)).sum().backward()  # (a plain sum: LayerNorm's constant)
    assert bool((values.grad.abs().sum(1) > 1e-6).all())
    alone = aggregation(case["values"][case["index"] == 3], torch.zeros(5, dtype=torch.long),
                        1, case["times"][case["index"] == 3])
    torch.testing.assert_close(alone[0], out[3].detach(), rtol=1e-12, atol=1e-12)


def test_the_transformer_aggregator_refuses_an_odd_width_and_a_missing_order():
    with pytest.raises(ValueError, match="2 heads need an even channel count, got 5"):
        Aggregation("transformer", 5)
    with pytest.raises(ValueError, match="the transformer aggregator needs an order"):
        Aggregation("transformer", 4)(torch.randn(3, 4), torch.tensor([0, 0, 1]), 2)
    with pytest.raises(ValueError, match="node_agg must be"):
        MultiEdgeConv(4, node_agg="transformer")
    empty = Aggregation("transformer", 4)(torch.empty(0, 4), torch.empty(0, dtype=torch.long),
                                          3, torch.empty(0))
    assert empty.shape == (3, 4) and not empty.any()  # no rows: every group's state is 0


def test_per_layer_weights_are_not_loaded_into_a_shared_aggregator():
    per_layer = MEGAGNN(3, 4, 6, 2, edge_agg="gin", share_edge_agg=False)
    shared = MEGAGNN(3, 4, 6, 2, edge_agg="gin")
    assert shared.convs[1].forward_dir.edge_agg is shared.convs[0].forward_dir.edge_agg
    assert (sum(p.numel() for p in per_layer.parameters())
            - sum(p.numel() for p in shared.parameters())) == 2 * (2 * (36 + 6))
    with pytest.raises(ValueError, match=r"a pair aggregator per layer \(convs\.1\."
                                         r"forward_dir\.edge_agg\.mlp\.0\.weight differs"):
        shared.load_state_dict(per_layer.state_dict())
    shared.load_state_dict(MEGAGNN(3, 4, 6, 2, edge_agg="gin").state_dict())
    per_layer.load_state_dict(shared.state_dict())  # a shared one loads into per-layer
