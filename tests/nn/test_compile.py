"""Every conv and model compiles with torch.compile(fullgraph=True), as PyG's convs do (a
user's compiled PyG model keeps compiling with graphloc's layers): the same outputs and
input gradients as eager. Before 2026-12-05 GATConv, GATv2Conv, TransformerConv and
ResGatedGraphConv with edge features, ChebConv, PNAConv and LargeGT failed: value checks
and branches on tensor values that dynamo cannot trace. Traced, those checks are
assertions in the compiled graph, tested here too.

The backend is "aot_eager": dynamo's graph capture and AOTAutograd's backward, without
inductor's code generation (minutes for all); GNN's fullgraph tests in
tests/nn/models/test_models.py run inductor."""

import pytest
import torch
from helpers import (
    CONV_LAYERS,
    INITIAL_FEATURE_CONVS,
    build_repeatable,
    initial_feature_conv,
    random_edge_index,
)
from parity import parity_graph

from graphloc import Graph, ops
from graphloc.nn import (
    MODELS,
    CFConv,
    FastRGCNConv,
    FiLMConv,
    HANConv,
    HGTConv,
    PNAConv,
    RGATConv,
    RGCNConv,
    build_model,
)

MODEL_NAMES = sorted(set(MODELS) - {"latte", "forwardgnn"})  # their own inputs and training


def _compiled_matches_eager(run, x: torch.Tensor) -> None:
    torch._dynamo.reset()
    outputs = []
    for f in (run, torch.compile(run, fullgraph=True, backend="aot_eager")):
        xg = x.clone().requires_grad_()
        out = f(xg)
        outputs.append((out, *torch.autograd.grad(out.square().sum(), xg)))
    for compiled, eager in zip(outputs[1], outputs[0], strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CONV_LAYERS))
def test_convs_compile_fullgraph(name):
    edge_index, n = parity_graph(15)
    torch.manual_seed(0)
    graph = Graph(edge_index, num_nodes=n, edge_attr=torch.randn(edge_index.size(1), 3))
    conv = CONV_LAYERS[name]()
    _compiled_matches_eager(lambda x: conv(x, graph), torch.randn(n, 5))


@pytest.mark.parametrize("name", sorted(INITIAL_FEATURE_CONVS))
def test_initial_feature_convs_compile_fullgraph(name):
    edge_index, n = parity_graph(15)
    torch.manual_seed(0)
    graph = Graph(edge_index, num_nodes=n)
    conv, extra = initial_feature_conv(name, edge_index.size(1))
    _compiled_matches_eager(lambda x: conv(x, x, graph, *extra), torch.randn(n, 5))


RELATIONAL_CONVS = {
    "rgcn": lambda: RGCNConv(5, 4, 3),
    "rgcn-blocks-max": lambda: RGCNConv(6, 4, 3, num_blocks=2, aggr="max"),
    "fast-rgcn-bases": lambda: FastRGCNConv(5, 4, 3, num_bases=2),
    "film": lambda: FiLMConv(5, 4, 3),
    "film-max-nn": lambda: FiLMConv(5, 4, 3, nn=torch.nn.Linear(5, 8), aggr="max"),
    "rgat": lambda: RGATConv(5, 4, 3, heads=2),
    "rgat-within-scaled-blocks": lambda: RGATConv(6, 4, 3, num_blocks=2, heads=2, mod="scaled",
                                                  attention_mechanism="within-relation"),
    "rgat-multiplicative-additive": lambda: RGATConv(
        5, 4, 3, attention_mode="multiplicative-self-attention", dim=2, mod="additive"),
}


@pytest.mark.parametrize("name", sorted(RELATIONAL_CONVS))
def test_relational_convs_compile_fullgraph(name):
    """Graph.by_relation's count of (relation, node) pairs depends on the edge types: traced,
    every pair is a row instead (a graph break failed fullgraph=True, where PyG's
    masked loops compile)."""
    edge_index, n = parity_graph(15)
    edge_type = torch.arange(edge_index.size(1)) % 3
    conv = RELATIONAL_CONVS[name]()
    width = 6 if name in ("rgcn-blocks-max", "rgat-within-scaled-blocks") else 5
    _compiled_matches_eager(lambda x: conv(x, edge_index, edge_type), torch.randn(n, width))


def test_cf_conv_compiles_fullgraph():
    """SchNet's conv, called with each edge's distance and its features."""
    edge_index, n = parity_graph(16)
    gen = torch.Generator().manual_seed(16)
    distance = torch.rand(edge_index.size(1), generator=gen) * 6
    expansion = torch.randn(edge_index.size(1), 6, generator=gen)
    conv = CFConv(5, 4, 8, torch.nn.Linear(6, 8), cutoff=5.0)
    _compiled_matches_eager(lambda x: conv(x, edge_index, distance, expansion), torch.randn(n, 5))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_models_compile_fullgraph(name):
    graph = Graph(random_edge_index(30, 120, seed=1), num_nodes=30).to_undirected()
    torch.manual_seed(0)
    model = build_repeatable(name, 6, 8, 3, 2).eval()  # eval: the same dropout masks (none)
    _compiled_matches_eager(lambda x: model(x, graph), torch.randn(30, 6))


def test_largegt_trains_compiled_and_initialises_its_codebook_once():
    """LargeGT's codebook starts at random inputs of the first training batch: traced, a
    select on its flag (the second batch keeps the first's centroids moving by EMA, not
    drawn again)."""
    torch._dynamo.reset()
    graph = Graph(random_edge_index(30, 120, seed=1), num_nodes=30).to_undirected()
    torch.manual_seed(0)
    model = build_model("largegt", 6, 8, 3, 2)
    x = torch.randn(30, 6)
    model.eval()(x, graph)  # eager: the graph's tokens (NumPy work, cached on it)
    compiled = torch.compile(model.train(), fullgraph=True, backend="aot_eager")
    codebook = model.codebook
    assert not bool(codebook.initialised)
    compiled(x, graph, torch.arange(10))
    assert bool(codebook.initialised) and bool(codebook.cluster_size.sum() > 0)
    sizes = codebook.cluster_size.clone()
    compiled(x, graph, torch.arange(10, 20))
    # EMA: sizes decay and grow by the batch's assignments; a fresh draw would reset to 1
    decay = codebook.decay
    assert torch.allclose(codebook.cluster_size.sum(), sizes.sum() * decay + (1 - decay) * 10)


@pytest.mark.parametrize("name", ["largegt", "ugt"])
def test_models_with_numpy_preprocessing_compile_on_a_fresh_graph(name):
    """LargeGT's tokens and UGT's inputs are NumPy and SciPy work, once per graph: compiled,
    it runs eagerly (UGT's failed: dynamo traced NumPy's divide and raised). Under
    fullgraph=True an eager call caches it first (test_models_compile_fullgraph)."""
    torch._dynamo.reset()
    edge_index = random_edge_index(30, 120, seed=1)
    torch.manual_seed(0)
    model = build_repeatable(name, 6, 8, 3, 2).eval()
    x = torch.randn(30, 6)
    compiled = torch.compile(model, backend="aot_eager")
    out = compiled(x, Graph(edge_index, num_nodes=30).to_undirected())
    torch.testing.assert_close(out, model(x, Graph(edge_index, num_nodes=30).to_undirected()))


def test_an_index_out_of_range_is_refused_in_a_compiled_graph():
    """Traced, the values cannot be read before the graph runs: the range check is an
    assertion in it, which names the argument and the range."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda src, index: ops.scatter(src, index, 0, dim_size=4),
                             fullgraph=True, backend="aot_eager")
    src = torch.randn(5, 3)
    torch.testing.assert_close(compiled(src, torch.tensor([0, 1, 1, 3, 2])),
                               torch.zeros(4, 3).index_add_(0, torch.tensor([0, 1, 1, 3, 2]),
                                                            src))
    for bad, match in (([0, 1, 1, 4, 2], r"index holds an index outside \[0, 4\)"),
                       ([0, -1, 1, 3, 2], r"index holds a negative index")):
        with pytest.raises(RuntimeError, match=match):
            compiled(src, torch.tensor(bad))


def test_pna_without_deg_needs_a_training_forward_before_compiling():
    edge_index, n = parity_graph(15)
    graph = Graph(edge_index, num_nodes=n)
    conv = PNAConv(5, 4, ["mean", "max"], ["identity", "amplification"], deg=None)
    x = torch.randn(n, 5)
    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True, backend="aot_eager")
    with pytest.raises(RuntimeError, match="built without deg: run one training forward"):
        compiled(x, graph)
    conv(x, graph)  # eager, in training: the graph's degree statistics
    torch.testing.assert_close(compiled(x, graph), conv(x, graph))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "mul"])
def test_a_masked_scatter_compiles_and_reduces_an_empty_selection(reduce):
    """A boolean-masked src has a size unknown while traced: the scatter takes it as
    non-empty, a path that also reduces an empty selection to empty slots (0, 1 for
    products), as eager does."""
    torch._dynamo.reset()

    def masked(src, mask, index):
        return ops.scatter(src[mask], index[mask], 0, dim_size=4, reduce=reduce)
    compiled = torch.compile(masked, fullgraph=True, backend="aot_eager")
    src, index = torch.randn(5, 2), torch.tensor([0, 1, 1, 3, 2])
    for mask in (torch.tensor([True, False, True, True, False]), torch.zeros(5, dtype=bool)):
        dense = torch.full((4, 2), 1.0 if reduce == "mul" else 0.0)
        if mask.any():  # the reduction by torch, as the reference
            dense = dense.scatter_reduce(0, index[mask].unsqueeze(1).expand(-1, 2), src[mask],
                                         reduce={"sum": "sum", "mean": "mean", "max": "amax",
                                                 "mul": "prod"}[reduce], include_self=False)
        torch.testing.assert_close(compiled(src, mask, index), dense)


@pytest.mark.parametrize("name", ["HGTConv", "HANConv"])
def test_heterogeneous_convs_compile_fullgraph(name):
    """Heterogeneous inputs: dicts of features and of each relation's edges."""
    gen = torch.Generator().manual_seed(17)
    metadata = (["a", "b"], [("a", "to", "b"), ("b", "back", "a"), ("a", "self", "a")])
    counts = {"a": 9, "b": 5}
    edges = {r: torch.stack([torch.randint(0, counts[r[0]], (20,), generator=gen),
                             torch.randint(0, counts[r[2]], (20,), generator=gen)])
             for r in metadata[1]}
    b = torch.randn(5, 4, generator=gen)
    conv = {"HGTConv": HGTConv, "HANConv": HANConv}[name](4, 6, metadata, heads=2)
    _compiled_matches_eager(lambda x: torch.cat(list(conv({"a": x, "b": b}, edges).values())),
                            torch.randn(9, 4, generator=gen))
