import math

import pytest
import torch
from helpers import reference_ops
from torch_geometric.nn.models import schnet
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _filter_network(gaussians=6, filters=8):
    return torch.nn.Sequential(torch.nn.Linear(gaussians, filters), schnet.ShiftedSoftplus(),
                               torch.nn.Linear(filters, filters))


def _inputs(seed=0, n=14, m=60, width=5, gaussians=6):
    """``(x, edge_index, distances, expansions)`` in float64, loops and parallel edges
    included, some distances beyond the cutoff of 5."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, width, dtype=torch.float64, generator=gen)
    edge_index = torch.randint(0, n, (2, m), generator=gen)
    distance = torch.rand(m, dtype=torch.float64, generator=gen) * 6
    expansion = torch.randn(m, gaussians, dtype=torch.float64, generator=gen)
    return x, edge_index, distance, expansion


def _twins(in_channels=5, out_channels=4, filters=8, cutoff=5.0):
    """graphloc's and PyG's CFConv from one seed, each on its own copy of one filter
    network, in float64."""
    torch.manual_seed(1)
    nn = _filter_network(filters=filters).double()
    twins = []
    for cls in (gl.CFConv, schnet.CFConv):
        torch.manual_seed(2)
        twins.append(cls(in_channels, out_channels, filters, _copy(nn), cutoff).double())
    for (key, a), (other, b) in zip(twins[0].state_dict().items(),
                                    twins[1].state_dict().items(), strict=True):
        assert key == other and torch.equal(a, b)
    return twins


def _copy(module):
    import copy
    return copy.deepcopy(module)


def _grads(conv, inputs, call):
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = call(conv, *leaves)
    upstream = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    return out, torch.autograd.grad(out, [*leaves, *conv.parameters()], upstream)


def test_matches_pyg_with_every_gradient():
    x, edge_index, distance, expansion = _inputs()
    ours, theirs = _twins()
    call = lambda conv, x, d, e: conv(x, edge_index, d, e)  # noqa: E731
    (got, got_grads), (want, want_grads) = (_grads(conv, [x, distance, expansion], call)
                                            for conv in (ours, theirs))
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b)


def test_the_formula_edge_by_edge():
    x, edge_index, distance, expansion = _inputs(seed=3)
    ours, _ = _twins()
    torch.nn.init.uniform_(ours.lin2.bias)  # (a zero bias would not be seen)
    h = x @ ours.lin1.weight.t()
    total = torch.zeros(14, 8, dtype=torch.float64)
    for (j, i), d, e in zip(edge_index.t().tolist(), distance, expansion, strict=True):
        cut = 0.5 * (math.cos(float(d) * math.pi / 5.0) + 1.0)
        total[i] += h[j] * ours.nn(e.unsqueeze(0))[0] * cut
    want = total @ ours.lin2.weight.t() + ours.lin2.bias
    torch.testing.assert_close(ours(x, edge_index, distance, expansion), want)
    with reference_ops():
        torch.testing.assert_close(ours(x, edge_index, distance, expansion), want)


def test_special_values_give_pygs_numbers_and_gradients():
    x, edge_index, distance, expansion = _inputs(seed=4)
    x[3, 1], x[5, 0] = float("nan"), float("inf")
    expansion[7, 2], distance[9] = float("-inf"), float("nan")
    ours, theirs = _twins()
    call = lambda conv, x, d, e: conv(x, edge_index, d, e)  # noqa: E731
    (got, got_grads), (want, want_grads) = (_grads(conv, [x, distance, expansion], call)
                                            for conv in (ours, theirs))
    torch.testing.assert_close(got, want, equal_nan=True)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)
    empty = torch.empty(2, 0, dtype=torch.long)
    none = torch.empty(0, dtype=torch.float64)
    torch.testing.assert_close(ours(x, empty, none, expansion[:0]),
                               theirs(x, empty, none, expansion[:0]))


def test_graphs_adjacency_patterns_and_static_batches():
    x, _, distance, expansion = _inputs(seed=5)
    gen = torch.Generator().manual_seed(5)
    pairs = torch.randperm(14 * 14, generator=gen)[:60]  # distinct: an adjacency sums repeats
    edge_index = torch.stack([pairs // 14, pairs % 14])
    ours, theirs = _twins()
    want = theirs(x, edge_index, distance, expansion)
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=14), distance, expansion),
                               want)
    order = torch.argsort(edge_index[1] * 14 + edge_index[0])  # the adjacency's storage order
    adj = to_torch_coo_tensor(edge_index.flip(0), size=(14, 14))
    torch.testing.assert_close(ours(x, adj, distance[order], expansion[order]), want)
    torch.testing.assert_close(
        ours(torch.stack([x, 2 * x]), edge_index, distance, expansion),
        torch.stack([want, theirs(2 * x, edge_index, distance, expansion)]))


class _SchNetBlocks(torch.nn.Module):
    """Two of PyG SchNet's interaction blocks (each holds its filter network twice: as
    ``mlp`` and as its conv's ``nn``) on given distances, with a readout."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([schnet.InteractionBlock(5, 6, 8, 5.0)
                                           for _ in range(2)])
        self.out = torch.nn.Linear(5, 1)

    def forward(self, x, edge_index, distance, expansion):
        for block in self.blocks:
            x = x + block(x, edge_index, distance, expansion)
        return self.out(x)


def test_from_pyg_converts_schnets_blocks_and_they_train_as_pygs():
    x, edge_index, distance, expansion = _inputs(seed=6)
    torch.manual_seed(0)
    model = _SchNetBlocks().double()
    converted = from_pyg(model, example=(x, edge_index, distance, expansion))
    assert all(type(block.conv) is gl.CFConv for block in converted.blocks)
    assert all(block.conv.nn is block.mlp for block in converted.blocks)  # still tied
    assert len(list(converted.parameters())) == len(list(model.parameters()))
    optimisers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, converted)]
    for _ in range(3):
        for m, optimiser in zip((model, converted), optimisers, strict=True):
            optimiser.zero_grad()
            m(x, edge_index, distance, expansion).square().mean().backward()
            optimiser.step()
    torch.testing.assert_close(converted(x, edge_index, distance, expansion),
                               model(x, edge_index, distance, expansion))


def test_bad_arguments_are_named():
    x, edge_index, distance, expansion = _inputs(seed=7)
    nn = _filter_network().double()
    for args, match in (((5, 4, 0, nn, 5.0), "CFConv: num_filters"),
                        ((5, 4, 8, "mlp", 5.0), "CFConv: nn must be a module"),
                        ((5, 4, 8, nn, 0.0), "CFConv: cutoff must be a positive number"),
                        ((5, 4, 8, nn, float("inf")), "cutoff"),
                        ((5, 4, 8, nn, True), "cutoff")):
        with pytest.raises((ValueError, TypeError), match=match):
            gl.CFConv(*args)
    conv = gl.CFConv(5, 4, 8, nn, 5.0).double()
    with pytest.raises(ValueError, match="CFConv: edge_weight has 3 rows but the graph has 60"):
        conv(x, edge_index, distance[:3], expansion)
    with pytest.raises(ValueError, match="CFConv: edge_attr has 59 rows but the graph has 60"):
        conv(x, edge_index, distance, expansion[:-1])
    with pytest.raises(ValueError, match=r"CFConv expects x of shape \[N, 5\]"):
        conv(x[:, :3], edge_index, distance, expansion)
    with pytest.raises(ValueError, match="CFConv takes one node set"):
        conv((x, x.clone()), edge_index, distance, expansion)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds 1\d\d"):
        conv(x, edge_index + 100, distance, expansion)
    with pytest.raises(TypeError, match="CFConv expects floating-point node features x"):
        conv(x.long(), edge_index, distance, expansion)
    nodeless = conv(x[:0], torch.empty(2, 0, dtype=torch.long), distance[:0], expansion[:0])
    assert nodeless.shape == (0, 4)
    wide = gl.CFConv(5, 4, 8, torch.nn.Linear(6, 7).double(), 5.0).double()
    with pytest.raises(ValueError, match=r"nn must map edge_attr to \[E, num_filters\] = "
                                         r"\[60, 8\], got \[60, 7\]"):
        wide(x, edge_index, distance, expansion)
