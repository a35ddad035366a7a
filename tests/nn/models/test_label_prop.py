import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index, reference_ops
from torch_geometric.nn.models import CorrectAndSmooth
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg


def _labelled(seed=0, n=20, m=70, classes=4):
    """``(class ids [n], edge_index, training mask)``: loops, parallel edges, a hub and
    isolated nodes."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, classes, (n,), generator=gen), edge_index,
            torch.rand(n, generator=gen) < 0.5)


@pytest.mark.parametrize("options", ["plain", "bool-mask", "index-mask", "weights",
                                     "post-step"])
def test_matches_pyg(options):
    y, edge_index, mask = _labelled()
    kwargs = {"bool-mask": {"mask": mask}, "index-mask": {"mask": mask.nonzero().view(-1)},
              "weights": {"edge_weight": torch.rand(edge_index.size(1), dtype=torch.float64)},
              "post-step": {"post_step": lambda out: out.softmax(-1)}}.get(options, {})
    labels = torch.nn.functional.one_hot(y).double()
    for given in (y, labels):
        ours = gl.LabelPropagation(3, 0.9)(given, edge_index, **kwargs)
        theirs = pyg.LabelPropagation(3, 0.9)(given, edge_index, **kwargs)
        torch.testing.assert_close(ours, theirs.to(ours.dtype))
        assert not ours.requires_grad


def test_the_formula_as_matrices():
    y, edge_index, mask = _labelled(seed=1)
    given = torch.nn.functional.one_hot(y).double()
    labels = given * mask.unsqueeze(1)
    n = y.numel()
    adjacency = torch.zeros(n, n, dtype=torch.float64).index_put(
        (edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.float64),
        accumulate=True)
    degree = adjacency.sum(1)
    inverse = torch.where(degree > 0, degree.pow(-0.5), torch.zeros_like(degree))
    normalised = inverse.view(-1, 1) * adjacency * inverse.view(1, -1)
    want = labels
    for _ in range(4):
        want = (0.7 * normalised @ want + 0.3 * labels).clamp(0, 1)
    prop = gl.LabelPropagation(4, 0.7)
    torch.testing.assert_close(prop(given, edge_index, mask), want)
    with reference_ops():
        torch.testing.assert_close(prop(given, edge_index, mask), want)


def test_a_sparse_adjacency_and_a_graph_match_pyg():
    y, edge_index, mask = _labelled(seed=2)
    edge_index = torch.unique(edge_index, dim=1)
    values = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    adj = to_torch_coo_tensor(edge_index.flip(0), values, size=(20, 20))
    labels = torch.nn.functional.one_hot(y).double()
    torch.testing.assert_close(gl.LabelPropagation(2, 0.8)(labels, adj, mask),
                               pyg.LabelPropagation(2, 0.8)(labels, adj, mask))
    torch.testing.assert_close(gl.LabelPropagation(2, 0.8)(y, Graph(edge_index, num_nodes=20)),
                               pyg.LabelPropagation(2, 0.8)(y, edge_index))


def test_from_pyg_converts_correct_and_smooth():
    y, edge_index, mask = _labelled(seed=3)
    torch.manual_seed(0)
    soft = torch.randn(20, 4).softmax(-1)
    known = mask.nonzero().view(-1)
    theirs = CorrectAndSmooth(2, 0.8, 3, 0.7)
    ours = from_pyg(torch.nn.ModuleList([theirs]))[0]
    assert all(type(prop) is gl.LabelPropagation for prop in (ours.prop1, ours.prop2))
    corrected = ours.correct(soft, y[known], known, edge_index)
    torch.testing.assert_close(corrected, theirs.correct(soft, y[known], known, edge_index))
    torch.testing.assert_close(ours.smooth(corrected, y[known], known, edge_index),
                               theirs.smooth(corrected, y[known], known, edge_index))


def test_bad_arguments_are_named():
    y, edge_index, mask = _labelled(seed=4)
    with pytest.raises(ValueError, match="LabelPropagation: num_layers"):
        gl.LabelPropagation(-1, 0.5)
    with pytest.raises(TypeError, match="LabelPropagation: alpha"):
        gl.LabelPropagation(2, "0.5")
    prop = gl.LabelPropagation(2, 0.5)
    with pytest.raises(ValueError, match=r"a boolean mask must have shape \[20\], got \[5\]"):
        prop(y, edge_index, mask[:5])
    with pytest.raises(ValueError, match=r"mask holds node ids outside \[0, 20\)"):
        prop(y, edge_index, torch.tensor([3, 25]))
    with pytest.raises(ValueError, match="class ids must be >= 0, got -1"):
        prop(torch.tensor([0, -1] * 10), edge_index)
    with pytest.raises(ValueError, match="edge_index"):
        prop(y, edge_index + 30)
