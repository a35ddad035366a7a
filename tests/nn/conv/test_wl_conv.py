import random
from collections import Counter

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc.nn import from_pyg
from graphloc.nn.conv.wl_conv import _python_hashes, _tuple_hashes


def _graph(seed: int, n: int = 30, m: int = 70, colors: int = 3):
    """Colours and edges: loops, parallel edges and isolated nodes included."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n - 3, (2, m), generator=gen)
    return torch.randint(0, colors, (n,), generator=gen), edge_index


def test_several_refinements_match_pygs_colours_and_dictionary():
    """Three graphs through one conv, three rounds each: the same colours and the same
    dictionary as PyG's (its numbering is kept across calls)."""
    ours, theirs = gl.WLConv(), pyg.WLConv()
    for seed in range(3):
        x, edge_index = _graph(seed)
        a = b = x
        for _ in range(3):
            a, b = ours(a, edge_index), theirs(b, edge_index)
            assert torch.equal(a, b)
        assert ours.hashmap == theirs.hashmap


@pytest.mark.parametrize("form", ["one-hot", "coo", "csr"])
def test_one_hot_colours_and_sparse_adjacencies_as_pygs(form):
    x, edge_index = _graph(4)
    graph, colors = edge_index, x
    if form == "one-hot":
        colors = torch.nn.functional.one_hot(x).float()
    else:
        graph = to_torch_coo_tensor(edge_index.flip(0), size=(30, 30)).coalesce()
        graph = graph if form == "coo" else graph.to_sparse_csr()
    assert torch.equal(gl.WLConv()(colors, graph), pyg.WLConv()(colors, graph))


def test_colours_are_the_refinement_numbered_by_first_node():
    """The oracle, without hashes: two nodes share a colour exactly when their colours and
    the multisets of their in-neighbours' colours agree, and a fresh conv numbers the
    classes 0, 1, 2, ... in the order of their first node."""
    x, edge_index = _graph(5, colors=2)
    signature = [(int(x[i]), frozenset(Counter(x[edge_index[0, edge_index[1] == i]].tolist())
                                        .items())) for i in range(x.numel())]
    numbering = {}
    want = [numbering.setdefault(s, len(numbering)) for s in signature]
    assert gl.WLConv()(x, edge_index).tolist() == want


def test_relabelling_the_nodes_keeps_each_graphs_histogram():
    x, edge_index = _graph(6)
    perm = torch.randperm(x.numel(), generator=torch.Generator().manual_seed(0))
    inverse = perm.argsort()
    conv = gl.WLConv()
    a = conv(x, edge_index)
    b = conv(x[perm], inverse[edge_index])
    assert torch.equal(conv.histogram(a), conv.histogram(b))


def test_the_vectorised_hash_is_pythons_and_other_colours_take_pythons_own():
    gen = random.Random(0)
    tuples = [tuple(gen.randrange(0, (1 << 61) - 1) for _ in range(gen.randint(1, 9)))
              for _ in range(200)] + [(0,), (2 ** 61 - 2, 0, 1)]
    colors = torch.tensor([t[0] for t in tuples])
    rest = torch.tensor([c for t in tuples for c in t[1:]])
    degree = torch.tensor([len(t) - 1 for t in tuples])
    want = [hash(t) for t in tuples]
    assert _tuple_hashes(colors, rest, degree).tolist() == want
    assert _python_hashes(colors, rest, degree).tolist() == want
    x, edge_index = _graph(7)
    x = x - 1  # negative colours (whose Python hashes are not themselves): the loop
    assert torch.equal(gl.WLConv()(x, edge_index), pyg.WLConv()(x, edge_index))


def test_target_to_source_reads_the_outgoing_edges():
    x, edge_index = _graph(8)
    conv = gl.WLConv(flow="target_to_source")
    assert torch.equal(conv(x, edge_index), gl.WLConv()(x, edge_index.flip(0)))


@pytest.mark.parametrize("norm", [False, True])
def test_histograms_as_pygs(norm):
    ours, theirs = gl.WLConv(), pyg.WLConv()
    x, edge_index = _graph(9, n=60, m=150)
    batch = torch.arange(60) // 20
    a, b = ours(x, edge_index), theirs(x, edge_index)
    want = theirs.histogram(b, batch, norm=norm)
    got = ours.histogram(a, batch, norm=norm)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(ours.histogram(a), theirs.histogram(b))


def test_a_kernel_model_converts_with_its_colours_and_the_probe_leaves_them():
    """PyG's WL kernel example: rounds of WLConv; converted with the colours it has numbered
    so far, and neither the user's dictionary nor the copy's gains the probe's."""
    class Kernel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([pyg.WLConv() for _ in range(3)])

        def forward(self, x, edge_index):
            for conv in self.convs:
                x = conv(x, edge_index)
            return x

    model = Kernel()
    x, edge_index = _graph(10)
    model(x, edge_index)
    seen = [dict(conv.hashmap) for conv in model.convs]
    converted = from_pyg(model, _graph(11), strict=True)
    assert converted.pyg_conversion["converted"] == ["convs.0", "convs.1", "convs.2"]
    assert [conv.hashmap for conv in model.convs] == seen
    assert [conv.hashmap for conv in converted.convs] == seen
    x, edge_index = _graph(12)
    assert torch.equal(converted(x, edge_index), model(x, edge_index))
    assert from_pyg(pyg.WLConv(), strict=True).hashmap == {}


def test_bad_inputs_are_named():
    conv = gl.WLConv()
    x, edge_index = _graph(13)
    with pytest.raises(TypeError, match="int64 \\[N\\] or one-hot"):
        conv(x.float(), edge_index)
    with pytest.raises(ValueError, match="row 0 sums to 2"):
        conv(torch.ones(30, 2), edge_index)
    with pytest.raises(ValueError, match="edge_index\\[0\\] holds 30"):
        conv(x, torch.tensor([[30], [0]]))
    with pytest.raises(ValueError, match="row 0 sums to 0"):
        conv(torch.ones(30, 0), edge_index)  # one-hot rows of no colours
    colours = conv(x, edge_index)
    with pytest.raises(ValueError, match="known"):
        conv.histogram(colours + 100)
    with pytest.raises(ValueError, match="batch int64 graph ids"):
        conv.histogram(colours, torch.zeros(30))
    with pytest.raises(ValueError, match="batch holds -1"):
        conv.histogram(colours, torch.full((30,), -1))


def test_a_large_graph_against_pygs():
    edge_index = random_edge_index(2000, 9000, seed=3, hub_degree=600)
    x = torch.randint(0, 4, (2000,), generator=torch.Generator().manual_seed(1))
    ours, theirs = gl.WLConv(), pyg.WLConv()
    for _ in range(2):
        x_ours, x = ours(x, edge_index), theirs(x, edge_index)
        assert torch.equal(x_ours, x)


def test_no_edges_and_no_nodes_as_pygs_and_bad_edges_named():
    """Without edges each colour class is its own pair; no nodes give no colours; edge
    indices out of range, negative or not integers are named."""
    empty = torch.empty(2, 0, dtype=torch.long)
    x = torch.tensor([2, 0, 2, 1])
    assert torch.equal(gl.WLConv()(x, empty), pyg.WLConv()(x, empty).long())
    assert gl.WLConv()(torch.empty(0, dtype=torch.long), empty).shape == (0,)
    for edges, match in ((torch.tensor([[0], [7]]), "edge_index\\[1\\] holds 7"),
                         (torch.tensor([[-1], [0]]), "holds -1"),
                         (torch.tensor([[0.0], [1.0]]), "integer dtype")):
        with pytest.raises((ValueError, TypeError), match=match):
            gl.WLConv()(x, edges)
