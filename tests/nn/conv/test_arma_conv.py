import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index
from parity import seeded_twins
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import graphloc.nn as gl

ACTS = {"relu": torch.nn.ReLU(), "none": None, "tanh": torch.nn.Tanh(),
        "softmax": torch.nn.Softmax(dim=-1)}  # (along the features: PyG's last axis)



def _graph(seed=0, n=12):
    edge_index = random_edge_index(n, 40, seed=seed, hub_degree=7)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, dtype=torch.float64, generator=gen)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64, generator=gen) + 0.5
    return x, edge_index, weight


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("shared_weights,bias", [(False, True), (True, False)])
@pytest.mark.parametrize("num_stacks,num_layers", [(1, 1), (3, 2), (2, 4)])
def test_matches_pyg_with_gradients(num_stacks, num_layers, shared_weights, bias, act):
    x, edge_index, weight = _graph()
    ours, theirs = seeded_twins("ARMAConv", 5, 4, num_stacks, num_layers, shared_weights,
                                ACTS[act], 0.0, bias)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = ours(xa, edge_index, weight), theirs(xb, edge_index, weight)
    torch.testing.assert_close(got, want)
    upstream = torch.randn(want.shape, dtype=want.dtype)
    for a, b in zip(torch.autograd.grad(got, [xa, *ours.parameters()], upstream,
                                        allow_unused=True),
                    torch.autograd.grad(want, [xb, *theirs.parameters()], upstream,
                                        allow_unused=True), strict=True):
        assert (a is None) == (b is None)  # one step: W is unused in both
        if a is not None:
            torch.testing.assert_close(a, b)


def test_dropout_draws_pygs_masks_from_one_seed():
    x, edge_index, _ = _graph(seed=1)
    ours, theirs = seeded_twins("ARMAConv", 5, 4, 2, 3, dropout=0.4)
    torch.manual_seed(3)
    got = ours(x, edge_index)
    torch.manual_seed(3)
    torch.testing.assert_close(got, theirs(x, edge_index))
    ours.eval()
    theirs.eval()
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_a_lazy_width_and_a_static_batch_match_pyg():
    x, edge_index, _ = _graph(seed=2)
    outputs = []
    for library in (gl, pyg):  # the weights drawn at the first call, from one seed
        torch.manual_seed(5)
        conv = library.ARMAConv(-1, 4, num_stacks=2, num_layers=2)
        torch.manual_seed(6)
        outputs.append(conv(x.float(), edge_index))
        assert conv.init_weight.shape == (2, 5, 4)
    torch.testing.assert_close(outputs[0], outputs[1])
    ours, theirs = seeded_twins("ARMAConv", 5, 4, 2, 2)
    assert repr(gl.ARMAConv(-1, 4, 2, 2)) == repr(pyg.ARMAConv(-1, 4, 2, 2))
    batch = torch.randn(3, 12, 5, dtype=torch.float64)
    torch.testing.assert_close(ours(batch, edge_index), theirs(batch, edge_index))


def _dense_arma(conv, x, edge_index, weight):
    """The paper's recursion with a dense normalised adjacency, one stack at a time."""
    n = x.size(0)
    adj = torch.zeros(n, n, dtype=x.dtype).index_put((edge_index[1], edge_index[0]), weight,
                                                      accumulate=True)
    degree = adj.sum(1)
    scale = torch.where(degree > 0, degree.pow(-0.5), torch.zeros_like(degree))
    laplacian = scale[:, None] * adj * scale[None, :]
    stacks = []
    for k in range(conv.num_stacks):
        h = x
        for t in range(conv.num_layers):
            step = 0 if conv.shared_weights else t
            w = conv.init_weight[k] if t == 0 else conv.weight[step - 1 if step else 0, k]
            h = torch.relu(laplacian @ (h @ w) + x @ conv.root_weight[step, k]
                           + conv.bias[step, k, 0])
        stacks.append(h)
    return torch.stack(stacks).mean(0)


@pytest.mark.parametrize("make", [to_torch_coo_tensor, to_torch_csr_tensor])
def test_a_weighted_sparse_adjacency_gives_the_formula(make):
    """PyG's ARMAConv fails on a torch.sparse adjacency (its product takes no [K, N, F]
    features; PyG's own test asks for that RuntimeError): graphloc's computes the filter."""
    x, edge_index, weight = _graph(seed=3)
    edge_index = torch.unique(edge_index, dim=1)
    weight = weight[:edge_index.size(1)]
    conv = gl.ARMAConv(5, 4, num_stacks=3, num_layers=3).double()
    torch.nn.init.normal_(conv.bias)
    adj = make(edge_index.flip(0), weight, size=(12, 12))
    want = _dense_arma(conv, x, edge_index, weight)
    torch.testing.assert_close(conv(x, adj), want)
    torch.testing.assert_close(conv(x, edge_index, weight), want)


def test_from_pyg_converts_it():
    x, edge_index, _ = _graph(seed=4)
    torch.manual_seed(0)
    theirs = pyg.ARMAConv(5, 4, num_stacks=2, num_layers=2, act=torch.nn.ELU()).double()
    ours = gl.from_pyg(theirs)
    assert type(ours) is gl.ARMAConv and ours.pyg_conversion["checked"]
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


def test_bad_arguments_are_named():
    x, edge_index, _ = _graph()
    with pytest.raises(TypeError, match="act must be callable or None, got 'relu'"):
        gl.ARMAConv(5, 4, act="relu")
    with pytest.raises(ValueError, match="dropout"):
        gl.ARMAConv(5, 4, dropout=1.5)
    with pytest.raises(ValueError, match="num_stacks must be an integer >= 1, got 0"):
        gl.ARMAConv(5, 4, num_stacks=0)
    with pytest.raises(TypeError, match="shared_weights must be True or False"):
        gl.ARMAConv(5, 4, shared_weights="no")
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 5\]"):
        gl.ARMAConv(5, 4)(x[:, :3].float(), edge_index)
    with pytest.raises(ValueError, match="edge_weight has 3 rows"):
        gl.ARMAConv(5, 4)(x.float(), edge_index, torch.ones(3))
