import os
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from helpers import random_edge_index, requires_ext

from graphloc import Graph
from graphloc.nn import EMACodebook, LargeGT, build_model, fastrp_encoding, hop2_tokens

pytestmark = requires_ext


def _official_pool(graph: Graph, v: int) -> list[int]:
    """LargeGT's data_utils: the CSR row of A (distinct in-neighbours, sorted), then the
    row of A·A (distinct nodes two in-steps away, v included when reached, sorted); from
    dense matrices here."""
    n = graph.num_nodes
    a = torch.zeros(n, n)
    a[graph.edge_index[1], graph.edge_index[0]] = 1.0  # a[v, u]: u -> v
    two = a @ a
    return a[v].nonzero().flatten().tolist() + two[v].nonzero().flatten().tolist()


def test_tokens_follow_the_official_pool():
    graph = Graph(random_edge_index(60, 150, seed=1), num_nodes=60)
    tokens = hop2_tokens(graph, 12, seed=3)
    assert tokens.shape == (60, 12) and torch.equal(tokens[:, 0], torch.arange(60))
    for v in range(60):
        pool, rest = _official_pool(graph, v), tokens[v, 1:].tolist()
        if len(pool) >= 11:  # without replacement over the list's positions
            have, allowed = Counter(rest), Counter(pool)
            assert all(have[u] <= allowed[u] for u in have)
        elif pool:  # the list repeated in its order
            assert rest == [pool[j % len(pool)] for j in range(11)]
        else:  # nothing within two hops: distinct random nodes
            assert len(set(rest)) == 11
    small = Graph(torch.tensor([[1, 2, 0], [0, 0, 1]]), num_nodes=3)
    # node 0 <- {1, 2}, 1 <- 0: pool [1, 2] + [0] (node 0 itself, two steps away)
    assert sorted(hop2_tokens(small, 4, seed=0)[0, 1:].tolist()) == [0, 1, 2]


@pytest.mark.parametrize("hub_degree", [300, 6000])
def test_tokens_are_uniform_over_the_pool(hub_degree):
    # node 0 <- {1, 2}; node 1 <- hub_degree leaves, node 2 <- 100 leaves
    leaves1 = torch.arange(3, 3 + hub_degree)
    leaves2 = torch.arange(3 + hub_degree, 103 + hub_degree)
    src = torch.cat([torch.tensor([1, 2]), leaves1, leaves2])
    dst = torch.cat([torch.tensor([0, 0]), torch.ones(hub_degree, dtype=torch.long),
                     torch.full((100,), 2)])
    graph = Graph(torch.stack([src, dst]), num_nodes=103 + hub_degree)
    from_hub = 0
    for seed in range(300):
        row = hop2_tokens(graph, 21, seed=seed)[0, 1:]
        assert row.unique().numel() == 20  # all pool entries are distinct nodes here
        from_hub += int(((row >= 3) & (row < 3 + hub_degree)).sum())
    expected = hub_degree / (hub_degree + 102)
    assert abs(from_hub / 6000 - expected) < 0.025


def test_tokens_are_deterministic_whatever_the_thread_count():
    graph = Graph(random_edge_index(3000, 12000, seed=2), num_nodes=3000)
    threads = torch.get_num_threads()
    first = hop2_tokens(graph, 16, seed=7)
    torch.set_num_threads(1)
    try:
        assert torch.equal(hop2_tokens(graph, 16, seed=7), first)
    finally:
        torch.set_num_threads(threads)
    assert not torch.equal(hop2_tokens(graph, 16, seed=8), first)
    isolated = Graph(torch.tensor([[0], [1]]), num_nodes=4)  # nodes 0, 2, 3: empty pools
    tokens = hop2_tokens(isolated, 5, seed=0)
    assert tokens[1, 1:].eq(0).all() and ((tokens >= 0) & (tokens < 4)).all()


def test_codebook_converges_on_clustered_data():
    gen = torch.Generator().manual_seed(0)
    centers = torch.randn(4, 8, generator=gen) * 6
    label = torch.randint(0, 4, (2000,), generator=gen)
    data = centers[label] + 0.2 * torch.randn(2000, 8, generator=gen)
    torch.manual_seed(0)
    book = EMACodebook(8, 8, decay=0.9)
    book.bind(2000)
    errors = []
    for _ in range(30):
        for batch in torch.randperm(2000).split(250):
            book.update(data[batch], batch)
        z = book.normalise(data)
        errors.append((z - book.centroids[book.nearest(z)]).pow(2).sum(1).mean().item())
    assert errors[-1] < 0.05 and errors[-1] <= errors[0]
    assignment = book.assignment
    assert (assignment >= 0).all() and book.counts.sum() == 2000
    assert torch.equal(book.counts, torch.bincount(assignment, minlength=8))
    for code in assignment.unique():  # every centroid holds one cluster
        assert label[assignment == code].unique().numel() == 1
    torch.testing.assert_close(book.denormalised_centroids()[assignment],
                               centers[label], atol=0.2, rtol=0)


def _data(n=300, seed=4):
    graph = Graph(random_edge_index(n, 4 * n, seed=seed), num_nodes=n).to_undirected()
    gen = torch.Generator().manual_seed(seed)
    return graph, torch.randn(n, 6, generator=gen), torch.randint(0, 3, (n,), generator=gen)


def _small_largegt(**kw):
    return LargeGT(6, 16, 3, num_tokens=8, heads=2, global_dim=8, num_centroids=16,
                   chunk_size=64, **kw)


def test_largegt_is_deterministic_under_a_seed_and_trains():
    graph, x, y = _data()
    runs = []
    for _ in range(2):
        torch.manual_seed(11)
        model = _small_largegt(dropout=0.1, local_dropout=0.0)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        losses = []
        for epoch in range(40):  # random labels: memorised, slowly (std-0.02 local init)
            for batch in torch.randperm(300, generator=torch.Generator().manual_seed(epoch)) \
                    .split(100):
                opt.zero_grad()
                loss = F.cross_entropy(model(x, graph, index=batch), y[batch])
                loss.backward()
                opt.step()
                losses.append(loss.item())
        model.eval()
        runs.append((losses, model(x, graph)))
    assert runs[0][0] == runs[1][0]
    torch.testing.assert_close(runs[0][1], runs[1][1], rtol=0, atol=0)
    assert sum(runs[0][0][-3:]) < 0.7 * sum(runs[0][0][:3])
    assert model.codebook.counts.sum() == 300


def test_largegt_chunks_index_and_local_mode():
    graph, x, _ = _data()
    for conv_type in ("full", "local"):
        torch.manual_seed(0)
        model = _small_largegt(conv_type=conv_type).eval()
        every = model(x, graph)  # chunks of 64
        some = torch.tensor([5, 299, 0, 5])
        torch.testing.assert_close(model(x, graph, index=some), every[some])
    assert not hasattr(model, "codebook")


def test_largegt_hop_features_cache_and_gradients():
    graph, x, _ = _data()
    torch.manual_seed(0)
    model = _small_largegt().eval()
    hops = model.hop_features(x, graph)
    src, dst = graph.edge_index  # the official D^-1/2 (A + I) D^-1/2, from dense matrices
    a = torch.zeros(300, 300).index_put_((dst, src), torch.ones(src.numel()), accumulate=True)
    a = a + torch.eye(300)
    d = a.sum(1).rsqrt()
    dense = d[:, None] * a * d[None, :]
    torch.testing.assert_close(hops, torch.stack([x, dense @ x, dense @ dense @ x], 1))
    assert model.hop_features(x, graph) is hops
    x.mul_(2)  # modified in place: recomputed
    torch.testing.assert_close(model.hop_features(x, graph)[:, 1], 2 * hops[:, 1])
    x_grad = x.clone().requires_grad_()
    model(x_grad, graph, index=torch.tensor([3]))[0, 0].backward()
    reach = (x_grad.grad.abs().sum(1) > 0).nonzero().flatten()
    tokens = set(model.tokens(graph)[3].tolist())
    two_hops = set(((dense.bool().float() @ dense.bool().float())[list(tokens)] > 0)
                   .any(0).nonzero().flatten().tolist())
    assert 3 in reach.tolist() and set(reach.tolist()) <= two_hops | tokens


@pytest.mark.parametrize("write", ["data", "numpy"])
def test_largegt_hop_features_see_writes_that_bypass_the_version_counter(write):
    """x changed through ``.data`` or a NumPy view keeps its version: the cache served the
    old features' hops. Checked against the uncached propagation of the new features, with
    a NaN feature (which must not defeat the cache's comparison)."""
    graph, x, _ = _data()
    torch.manual_seed(0)
    model = _small_largegt().eval()
    x[7, 0] = float("nan")
    first = model.hop_features(x, graph)
    assert model.hop_features(x, graph) is first  # NaN: still a hit
    version = x._version
    rows = x.data if write == "data" else x.numpy()
    rows[:50] *= -3
    assert x._version == version
    torch.testing.assert_close(model.hop_features(x, graph), model._propagate(x.clone(), graph),
                               equal_nan=True)


def test_a_graph_largegt_ran_on_pickles(tmp_path):
    """LargeGT memoises its propagated features on the graph with a weak reference to x,
    which pickle refuses: torch.save of such a Graph raised TypeError."""
    graph, x, _ = _data()
    torch.manual_seed(0)
    model = _small_largegt().eval()
    out = model(x, graph)
    torch.save(graph, tmp_path / "graph.pt")
    copied = torch.load(tmp_path / "graph.pt", weights_only=False)
    fresh = Graph(graph.edge_index.clone(), num_nodes=graph.num_nodes)
    torch.testing.assert_close(model(x, copied), model(x, fresh))
    torch.testing.assert_close(model(x, copied), out)


def test_largegt_with_fit(tmp_path):
    from graphloc.datasets import synthetic_city
    from graphloc.train import TrainConfig, fit, load_checkpoint
    city = synthetic_city(600, seed=0, hops=4)
    config = TrainConfig(model="largegt", hidden=16, lr=0.01, epochs=15, batch_size=128,
                         model_kwargs=dict(num_tokens=8, global_dim=8, num_centroids=32))
    history = fit(city, config, out_dir=str(tmp_path), progress=False)
    assert history[-1]["loss"] < history[0]["loss"]
    model, _ = load_checkpoint(str(tmp_path / "best.pt"))  # the node assignments reload
    assert model.model.codebook.assignment.numel() == 600


def test_largegt_bad_input():
    graph, x, _ = _data(50)
    model = _small_largegt()
    with pytest.raises(ValueError, match="index holds 50 but dim_size is 50"):
        model(x, graph, index=torch.tensor([0, 50]))
    with pytest.raises(ValueError, match="index holds -1"):
        model(x, graph, index=torch.tensor([-1]))
    with pytest.raises(TypeError, match="index must be an integer tensor"):
        model(x, graph, index=torch.tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match="floating-point"):
        model(x.long(), graph)
    with pytest.raises(ValueError, match="conv_type"):
        LargeGT(6, 8, 2, conv_type="global")
    with pytest.raises(ValueError, match="K .* must be an integer >= 1"):
        hop2_tokens(graph, 0)
    with pytest.raises(ValueError, match="decay"):
        EMACodebook(4, 2, decay=1.0)
    assert isinstance(build_model("largegt", 6, 8, 3, num_layers=1), LargeGT)
    encoding = fastrp_encoding(graph, 8)
    torch.testing.assert_close(encoding.mean(0), torch.zeros(8), atol=1e-5, rtol=0)


def test_one_node_graph_gives_finite_outputs():
    """FastRP standardised one node with torch's unbiased std (NaN): LargeGT returned NaN
    on a one-node graph, and per-seed influence of an isolated node with it."""
    graph = Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=1)
    assert fastrp_encoding(graph, 8).eq(0).all()  # one node: no spread, the mean itself
    torch.manual_seed(0)
    model = LargeGT(4, 8, 3, num_tokens=4, num_centroids=4).eval()
    assert torch.isfinite(model(torch.randn(1, 4), graph)).all()


def test_graph_without_nodes_and_empty_batches():
    """LargeGT raised on a graph without nodes (from the token sampler, FastRP and the
    token reshape) and on an empty training batch (the codebook's first draw): now an
    empty output, gradients included, and an empty batch leaves the codebook as it was."""
    for mode in (False, True):
        model = LargeGT(4, 8, 3, num_tokens=4, num_centroids=4).train(mode)
        x = torch.randn(0, 4, requires_grad=True)
        out = model(x, Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=0))
        assert out.shape == (0, 3)
        out.sum().backward()
    graph = Graph(random_edge_index(6, 20, seed=1), num_nodes=6)
    model = LargeGT(4, 8, 3, num_tokens=4, num_centroids=4).train()
    x = torch.randn(6, 4)
    model(x, graph, index=torch.tensor([0, 2, 3]))  # binds and initialises the codebook
    before = {k: v.clone() for k, v in model.codebook.state_dict().items()}
    out = model(x, graph, index=torch.empty(0, dtype=torch.long))
    assert out.shape == (0, 3)
    for key, value in model.codebook.state_dict().items():
        assert torch.equal(value, before[key]), key


def _hop_distances(edge_index: torch.Tensor, num_nodes: int, source: int) -> dict:
    """BFS over in-edges (a message u -> v brings u into v's ball): node -> hops."""
    into = {v: [] for v in range(num_nodes)}
    for u, v in edge_index.t().tolist():
        into[v].append(u)
    dist, frontier = {source: 0}, [source]
    while frontier:
        nxt = []
        for v in frontier:
            for u in into[v]:
                if u not in dist:
                    dist[u] = dist[v] + 1
                    nxt.append(u)
        frontier = nxt
    return dist


def _trained_largegt(n: int, edges: int, seed: int, **kwargs):
    """A symmetric random graph, float64 features and a LargeGT after a few training steps
    (codebook, counts and norms populated), in eval mode."""
    edge_index = random_edge_index(n, edges, seed=seed)
    edge_index = torch.cat([edge_index, edge_index.flip(0)], 1)
    torch.manual_seed(seed)
    x = torch.randn(n, 5, dtype=torch.float64)
    model = LargeGT(5, 8, 3, global_dim=4, **kwargs).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    graph = Graph(edge_index, num_nodes=n)
    for _ in range(6):
        opt.zero_grad()
        batch = torch.randperm(n)[:16]
        F.cross_entropy(model(x, graph, index=batch), torch.arange(16) % 3).backward()
        opt.step()
    return edge_index, graph, x, model.eval()


def test_influence_is_the_full_graph_jacobian_whatever_the_batching():
    """Tokens and positions were recomputed for whatever graph influence passed (a ball, a
    packed batch): batch 8 against per seed differed by 59%. Now every batching gives the
    dense Jacobian of the deployed model on the whole graph."""
    from graphloc.influence import influence_per_hop
    edge_index, graph, x, model = _trained_largegt(40, 100, seed=4, num_tokens=6,
                                                   num_centroids=8)
    seeds, max_hops = list(range(0, 40, 3)), 5
    per_seed = influence_per_hop(model, (x, graph), max_hops, seeds, method="per_seed")
    for batch_size in (1, 8, 15):
        batched = influence_per_hop(model, (x, graph), max_hops, seeds, batch_size=batch_size)
        torch.testing.assert_close(batched, per_seed, rtol=1e-10, atol=1e-12)
    jacobian = torch.autograd.functional.jacobian(lambda inp: model(inp, graph), x)
    influence = jacobian.abs().sum(dim=(1, 3))  # [v, u]
    for row, v in enumerate(seeds):
        expected = torch.zeros(max_hops + 1, dtype=torch.float64)
        for u, h in _hop_distances(edge_index, 40, v).items():
            if h <= max_hops:
                expected[h] += influence[v, u]
        torch.testing.assert_close(per_seed[row], expected)
    ptr, read = model.reads(graph, torch.arange(40))  # what each output depends on
    for v in range(40):
        outside = torch.ones(40, dtype=torch.bool)
        outside[read[ptr[v]:ptr[v + 1]]] = False
        assert influence[v, outside].abs().max() == 0


def _official_largegt_eval(model: LargeGT, x, edge_index, index):
    """LargeGT's eval forward written from the official model.py, local_module.py and
    codebook.py with dense matrices; only the weights, the token samples and the position
    encoding come from ``model``."""
    n, H, h = x.size(0), model.heads, model.hidden
    a = torch.zeros(n, n, dtype=x.dtype)  # scipy's csr_matrix sums parallel edges
    a.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=x.dtype),
                 accumulate=True)
    a = a + torch.eye(n, dtype=x.dtype)  # renormalize: D^-1/2 (A + I) D^-1/2
    d = a.sum(1).rsqrt()
    a_hat = d[:, None] * a * d[None, :]
    hop_feats = [x, a_hat @ x, a_hat @ a_hat @ x]
    ids = model.tokens(Graph(edge_index, n))[index]  # [B, K]
    seq = torch.cat([f[ids] for f in hop_feats], dim=1)  # [B, 3K, F]: X, then ÂX, then Â²X
    # local: fc_in_seq, att_embeddings_nope, EncoderLayer (pre-LN MHA, W_O, res_proj), LN
    t = model.local_embed(model.token_mlp(seq))
    y = model.local_norm(t)
    w_q, w_k, w_v = model.local_qkv.weight.view(3, H * h, h)
    b_q, b_k, b_v = model.local_qkv.bias.view(3, H * h)
    B, L = y.shape[:2]
    q = (y @ w_q.T + b_q).view(B, L, H, h).transpose(1, 2) * h ** -0.5
    k = (y @ w_k.T + b_k).view(B, L, H, h).transpose(1, 2)
    v = (y @ w_v.T + b_v).view(B, L, H, h).transpose(1, 2)
    att = (q @ k.transpose(2, 3)).softmax(3) @ v
    y = model.local_out(att.transpose(1, 2).reshape(B, L, H * h))
    out = model.out_norm(model.local_res(t) + y)
    node, rest = out[:, :1], out[:, 1:]
    weights = model.readout(torch.cat([node.expand_as(rest), rest], 2)).softmax(1)
    local = (node + (rest * weights).sum(1, keepdim=True)).squeeze(1)
    # global: q from [lin_proj_g(fc_in(x)) || pos], keys and values from the centroids
    pos = model.position_encoding(Graph(edge_index, n))[index]
    q_x = torch.cat([model.lin_global(model.fc_in(x[index])), pos], 1)
    book = model.codebook
    centroids = book.centroids * (book.norm.running_var + book.norm.eps).sqrt() + \
        book.norm.running_mean
    qg = model.global_q(q_x).view(-1, H, h).transpose(0, 1)
    kg = model.global_k(centroids).view(-1, H, h).transpose(0, 1)
    vg = model.global_v(centroids[:, :model.global_dim]).view(-1, H, h).transpose(0, 1)
    dots = qg @ kg.transpose(1, 2) / h ** 0.5 + book.counts.to(x.dtype).log()
    glob = (dots.softmax(-1) @ vg).transpose(0, 1).reshape(-1, H * h)
    return model.classifier(model.ffn(torch.cat([local, glob], 1)))


def test_largegt_equals_the_official_forward():
    # seed 8: a training run after which every centroid holds nodes (seed 6 did with
    # torch's dropout masks, and left one empty with graphloc's)
    edge_index, graph, x, model = _trained_largegt(30, 70, seed=8, num_tokens=5,
                                                   num_centroids=6)
    assert (model.codebook.counts > 0).all()  # log counts finite: no masked centroid
    index = torch.tensor([0, 7, 29, 13])
    torch.testing.assert_close(model(x, graph, index=index),
                               _official_largegt_eval(model, x, edge_index, index))


def test_a_trained_checkpoint_is_measured_on_the_whole_graph(tmp_path):
    """fit wraps models in train.Standardized: influence must still see LargeGT's reads
    and give the dense Jacobian of the checkpoint (standardisation included)."""
    from graphloc.datasets import synthetic_city
    from graphloc.influence import influence_per_hop
    from graphloc.train import Standardized, TrainConfig, fit, load_checkpoint
    city = synthetic_city(300, seed=0, hops=3)
    config = TrainConfig(model="largegt", hidden=8, epochs=2, batch_size=64,
                         model_kwargs=dict(num_tokens=5, global_dim=4, num_centroids=8))
    fit(city, config, out_dir=str(tmp_path), progress=False)
    wrapped, _ = load_checkpoint(str(tmp_path / "best.pt"))
    assert hasattr(wrapped, "reads")
    assert not hasattr(Standardized(torch.nn.Linear(2, 2), 2), "reads")
    seeds = [0, 5, 17]
    ours = influence_per_hop(wrapped, city, 4, seeds)
    jacobian = torch.autograd.functional.jacobian(
        lambda inp: wrapped(inp, city.graph, index=torch.tensor(seeds)), city.x)
    influence = jacobian.abs().sum(dim=(1, 3))  # [seed, u]: through the standardisation
    for row, v in enumerate(seeds):
        expected = torch.zeros(5, dtype=torch.float64)
        for u, h in _hop_distances(city.graph.edge_index, 300, v).items():
            if h <= 4:
                expected[h] += influence[row, u].double()
        torch.testing.assert_close(ours[row], expected, rtol=1e-5, atol=1e-8)


OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "largegt_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: f"seed-{c['seed']}")
def test_largegt_equals_the_official_code_run_on_a_directed_graph(case):
    """The official model, hop features and token layout run from its repository
    (``largegt_oracle.py``) on directed graphs with loops and parallel edges: a node reads
    the nodes its edges point to (the official adjacency has a row per source) with the
    official D2 (A + I) D1. graphloc read in-neighbours with the symmetric normalisation
    until 2026-12-07: the same only on symmetric graphs."""
    # the fixture's positions are graphloc's FastRP ones, copied into the official model
    model = LargeGT(5, 8, 3, num_tokens=5, heads=2, global_dim=4, num_centroids=6,
                    positions="fastrp").double()
    model.load_state_dict(case["weights"])
    graph = Graph(case["edge_index"], num_nodes=case["x"].size(0))
    out = model.eval()(case["x"], graph, index=torch.arange(graph.num_nodes))
    torch.testing.assert_close(out, case["official"], rtol=1e-9, atol=1e-9)
    pyg_direction = LargeGT(5, 8, 3, num_tokens=5, heads=2, global_dim=4, num_centroids=6,
                            flow="source_to_target", positions="fastrp").double()
    pyg_direction.load_state_dict(case["weights"])
    reversed_graph = Graph(case["edge_index"].flip(0), num_nodes=graph.num_nodes)
    # PyG's direction reads the in-edges: on the reversed graph, the official's samples
    # and hop features (the positions are graphloc's own, of the graph given)
    assert torch.equal(pyg_direction.tokens(reversed_graph), model.tokens(graph))
    torch.testing.assert_close(pyg_direction.hop_features(case["x"], reversed_graph),
                               model.hop_features(case["x"], graph))


def test_node2vec_positions_are_the_official_scripts_training():
    """The official positions: the scripts' loop (``data/pos_enc/*_node2vec.py``: PyG's
    Node2Vec with walk length 40, context 20, 10 walks per node, one epoch of torch's
    SparseAdam at lr 0.01 over batches of 256) run here on graphloc's Node2Vec, PyG's twin,
    under the same seed is the oracle; graphloc's fused epoch gives the same embedding to
    float32 rounding. Also: the caller's random state is left as it was, trailing isolated
    nodes get rows (PyG's count from the largest id would drop them), and an empty graph
    gives no rows."""
    from graphloc.nn.models.largegt import node2vec_encoding
    from graphloc.nn.models.node2vec import Node2Vec
    edge_index = random_edge_index(600, 3000, seed=4)
    graph = Graph(torch.cat([edge_index, edge_index.flip(0)], 1), num_nodes=603)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        model = Node2Vec(graph.edge_index, 16, walk_length=40, context_size=20,
                         walks_per_node=10, num_nodes=603, sparse=True)
        optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)
        for positive, negative in model.loader(batch_size=256, shuffle=True):  # 3 steps
            optimizer.zero_grad()
            model.loss(positive, negative).backward()
            optimizer.step()
    torch.manual_seed(11)
    before = torch.rand(3)
    torch.manual_seed(11)
    positions = node2vec_encoding(graph, 16, seed=3)
    assert torch.equal(torch.rand(3), before)  # the caller's stream is untouched
    assert positions.shape == (603, 16)
    torch.testing.assert_close(positions, model.embedding.weight.detach(), rtol=0, atol=1e-5)
    assert not torch.equal(positions, node2vec_encoding(graph, 16, seed=4))
    empty = Graph(torch.zeros(2, 0, dtype=torch.long), num_nodes=0)
    assert node2vec_encoding(empty, 8).shape == (0, 8)


def test_node2vec_epoch_steps_only_the_rows_a_batch_looked_up_as_sparse_adam():
    """Batches of 256 look up nearly every row of a small graph; batches of 2 start nodes
    leave most rows out, which SparseAdam neither moves nor decays: graphloc's epoch
    against torch's SparseAdam on the same walks, 100 steps of 2 start nodes."""
    from graphloc.nn.models.largegt import _sparse_adam_epoch
    from graphloc.nn.models.node2vec import Node2Vec
    edge_index = random_edge_index(200, 600, seed=6)
    edge_index = torch.cat([edge_index, edge_index.flip(0)], 1)
    results = []
    for fused in (True, False):
        torch.manual_seed(5)
        model = Node2Vec(edge_index, 8, walk_length=6, context_size=3, num_nodes=200,
                         sparse=not fused)
        if fused:
            _sparse_adam_epoch(model, batch_size=2, lr=0.01)
        else:
            optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)
            for positive, negative in model.loader(batch_size=2, shuffle=True):
                optimizer.zero_grad()
                model.loss(positive, negative).backward()
                optimizer.step()
        results.append(model.embedding.weight.detach())
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=1e-5)


def test_largegt_positions_are_node2vec_by_default_and_fastrp_on_request():
    from graphloc.nn.models.largegt import node2vec_encoding
    graph = Graph(random_edge_index(40, 160, seed=2), num_nodes=40)
    official = LargeGT(5, 8, 3, global_dim=4, seed=2)
    assert torch.equal(official.position_encoding(graph), node2vec_encoding(graph, 4, seed=2))
    fast = LargeGT(5, 8, 3, global_dim=4, seed=2, positions="fastrp")
    assert torch.equal(fast.position_encoding(graph), fastrp_encoding(graph, 4, seed=2))
    with pytest.raises(ValueError, match="LargeGT: positions must be 'node2vec' .* got 'rw'"):
        LargeGT(5, 8, 3, positions="rw")
    for seed in (-1, 1.5, "0", 2**63):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\^63\)"):
            LargeGT(5, 8, 3, seed=seed)
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\^63\)"):
            node2vec_encoding(graph, 4, seed=seed)
    with pytest.raises(ValueError, match="dim must be an integer >= 1, got 0"):
        node2vec_encoding(graph, 0)


def test_largegt_state_dict_carries_its_position_encoding():
    """The positions shape every output and hold no weight: they travel in the state dict,
    so a model loaded from it uses the encoding its weights were trained with, whatever it
    was built with. A state dict saved before they were recorded (FastRP then) loads with
    FastRP and a warning; an unknown encoding is refused by name."""
    graph = Graph(random_edge_index(30, 120, seed=1), num_nodes=30)
    x = torch.randn(30, 5)
    torch.manual_seed(0)
    trained = LargeGT(5, 8, 3, global_dim=4, num_centroids=8, positions="fastrp").eval()
    state = trained.state_dict()
    assert state["_extra_state"] == {"positions": "fastrp"}
    loaded = LargeGT(5, 8, 3, global_dim=4, num_centroids=8).eval()  # node2vec by default
    loaded.load_state_dict(state)
    assert loaded.positions == "fastrp"
    torch.testing.assert_close(loaded(x, graph), trained(x, graph), rtol=0, atol=0)
    old = {k: v for k, v in state.items() if k != "_extra_state"}
    with pytest.warns(UserWarning, match="records no position encoding .* positions='fastrp'"):
        LargeGT(5, 8, 3, global_dim=4, num_centroids=8).load_state_dict(old)
    with pytest.raises(ValueError, match="the state dict's positions must be one of "
                                         r"\['fastrp', 'node2vec'\], got 'rw'"):
        loaded.load_state_dict({**state, "_extra_state": {"positions": "rw"}})
