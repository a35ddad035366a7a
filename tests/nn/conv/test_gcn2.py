import math

import pytest
import torch
import torch_geometric.nn as pyg
from parity import one_loop_per_node, parity_graph
from torch_geometric.utils import to_torch_coo_tensor

from graphloc import Graph
from graphloc.nn import GCN2Conv, from_pyg


def _run_both(ours, theirs, inputs_ours, inputs_theirs):
    """Outputs and the gradients of x, x_0, the weights and the edge weights, in float64."""
    ours.load_state_dict(theirs.state_dict())
    ours, theirs = ours.double(), theirs.double()
    out1, out2 = ours(*inputs_ours), theirs(*inputs_theirs)
    torch.testing.assert_close(out1, out2)
    grad = torch.randn_like(out1)
    leaves = lambda inputs, m: [t for t in inputs if isinstance(t, torch.Tensor)  # noqa: E731
                                and t.requires_grad] + list(m.parameters())
    for g1, g2 in zip(torch.autograd.grad(out1, leaves(inputs_ours, ours), grad),
                      torch.autograd.grad(out2, leaves(inputs_theirs, theirs), grad),
                      strict=True):
        torch.testing.assert_close(g1, g2)


@pytest.mark.parametrize("shared_weights", [True, False])
@pytest.mark.parametrize("theta,layer", [(None, None), (0.5, 3), (1.5, 1)])
@pytest.mark.parametrize("add_self_loops,normalize", [(True, True), (False, True),
                                                      (False, False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn2_matches_pyg(shared_weights, theta, layer, add_self_loops, normalize, weighted):
    edge_index, n = one_loop_per_node(*parity_graph(14))  # (see test_sg_conv.py)
    kwargs = dict(theta=theta, layer=layer, shared_weights=shared_weights,
                  add_self_loops=add_self_loops, normalize=normalize)
    x = torch.randn(n, 6, dtype=torch.float64)
    x_0 = torch.randn(n + 4, 6, dtype=torch.float64)  # more rows: the first n are read
    w = torch.rand(edge_index.size(1), dtype=torch.float64)

    def inputs(graph):
        leaf = lambda t: t.clone().requires_grad_()  # noqa: E731
        return (leaf(x), leaf(x_0), graph, leaf(w) if weighted else None)
    _run_both(GCN2Conv(6, 0.3, **kwargs), pyg.GCN2Conv(6, 0.3, **kwargs),
              inputs(Graph(edge_index, num_nodes=n)), inputs(edge_index))


def test_gcn2_is_its_formula():
    """((1 - alpha) P x + alpha x_0)((1 - beta) I + beta W), P = D^-1/2 (A + I) D^-1/2,
    beta = log(theta / layer + 1), with dense matrices."""
    edge_index = torch.tensor([[0, 1, 2, 3, 2], [1, 2, 3, 0, 0]])
    conv = GCN2Conv(3, 0.25, theta=0.5, layer=2).double()
    x, x_0 = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    a = torch.zeros(4, 4, dtype=torch.float64).index_put_(
        (edge_index[1], edge_index[0]), torch.ones(5, dtype=torch.float64)) + torch.eye(4)
    d = a.sum(1).rsqrt()
    p = d[:, None] * a * d[None, :]
    beta = math.log(0.5 / 2 + 1)
    h = 0.75 * p @ x + 0.25 * x_0
    expected = h @ ((1 - beta) * torch.eye(3, dtype=torch.float64) + beta * conv.weight1)
    assert conv.beta == beta
    torch.testing.assert_close(conv(x, x_0, edge_index), expected)


def test_gcn2_on_a_sparse_adjacency_matches_pyg():
    edge_index, n = parity_graph(15)
    edge_index = torch.unique(edge_index, dim=1)
    values = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    adj = to_torch_coo_tensor(edge_index.flip(0), values, size=(n, n)).to_sparse_csr()
    x, x_0 = torch.randn(n, 5, dtype=torch.float64), torch.randn(n, 5, dtype=torch.float64)
    ours, theirs = GCN2Conv(5, 0.1).double(), pyg.GCN2Conv(5, 0.1).double()
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, x_0, adj), theirs(x, x_0, adj))


def test_gcn2_arguments_are_checked():
    for kwargs, match in ((dict(alpha=1.5), "alpha must be a number in"),
                          (dict(alpha=0.1, theta=0.5), "theta and layer come together"),
                          (dict(alpha=0.1, theta=0.5, layer=0), "layer must be an integer"),
                          (dict(alpha=0.1, theta=float("nan"), layer=2), "theta must be")):
        with pytest.raises(ValueError, match=match):
            GCN2Conv(4, **kwargs)
    conv = GCN2Conv(4, 0.1)
    with pytest.raises(ValueError, match="x_0 has 2 rows but x has 3"):
        conv(torch.randn(3, 4), torch.randn(2, 4), torch.tensor([[0, 1], [1, 2]]))
    with pytest.raises(ValueError, match=r"x_0 of shape \[N, 4\]"):
        conv(torch.randn(3, 4), torch.randn(3, 5), torch.tensor([[0, 1], [1, 2]]))


class _GCNII(torch.nn.Module):
    """PyG's GCNII example, shortened: a linear map in, GCN2Conv layers with the initial
    residual, a linear map out."""

    def __init__(self, conv_module, channels=8, layers=4):
        super().__init__()
        self.lin_in, self.lin_out = torch.nn.Linear(5, channels), torch.nn.Linear(channels, 3)
        self.convs = torch.nn.ModuleList(
            conv_module.GCN2Conv(channels, 0.1, theta=0.5, layer=i + 1,
                                 shared_weights=i % 2 == 0) for i in range(layers))

    def forward(self, x, edge_index):
        x = x_0 = self.lin_in(x).relu()
        for conv in self.convs:
            x = conv(x, x_0, edge_index).relu()
        return self.lin_out(x)


def test_a_pyg_gcnii_converts_and_a_graphloc_one_is_pygs():
    edge_index, n = parity_graph(16)
    x = torch.randn(n, 5)
    torch.manual_seed(0)
    model = _GCNII(pyg).eval()
    converted = from_pyg(model, example=(x, edge_index), strict=True)
    assert converted.pyg_conversion["converted"]
    assert all(isinstance(c, GCN2Conv) for c in converted.convs)
    torch.testing.assert_close(converted(x, edge_index), model(x, edge_index))
    import graphloc.nn as gl
    ours = _GCNII(gl)
    ours.load_state_dict(model.state_dict())
    torch.testing.assert_close(ours(x, Graph(edge_index, num_nodes=n)), model(x, edge_index))


def test_gcn2_on_a_static_batch_is_each_feature_set_on_its_own():
    edge_index, n = parity_graph(17)
    conv = GCN2Conv(8, 0.2, theta=0.5, layer=2)
    x, x_0 = torch.randn(3, n, 8), torch.randn(3, n, 8)
    expected = torch.stack([conv(x[b], x_0[b], edge_index) for b in range(3)])
    torch.testing.assert_close(conv(x, x_0, edge_index), expected)
