"""Every conv gives the same outputs and gradients on the GPU as on the CPU (run where a
GPU and a CUDA build are present)."""

import copy

import pytest
import torch
from parity import parity_graph
from test_equivariance import LAYERS

from graphloc import Graph

cuda_built = torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key(
    "graphloc::spmm", "CUDA")
pytestmark = pytest.mark.skipif(not cuda_built, reason="no GPU or graphloc built without CUDA")


def _forward_backward(conv, x, graph):
    x = x.clone().requires_grad_()
    out = conv(x, graph)
    grads = torch.autograd.grad(out, [x, *conv.parameters()], torch.ones_like(out))
    return [t.cpu() for t in (out, *grads)]


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_conv_on_gpu_matches_cpu(name):
    edge_index, n = parity_graph(17)
    conv = LAYERS[name]().double().eval()
    x = torch.randn(n, 5, dtype=torch.float64)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64)
    graph = Graph(edge_index, num_nodes=n, edge_attr=edge_attr)
    torch.testing.assert_close(
        _forward_backward(copy.deepcopy(conv).cuda(), x.cuda(), graph.to("cuda")),
        _forward_backward(conv, x, graph))


def test_from_pyg_converts_a_model_on_the_gpu_to_the_gpu():
    """The converted convs are built on the CPU: a PyG model on the GPU gets its twin on
    the GPU (parameters, buffers and the tied ones all there), with PyG's outputs."""
    import torch_geometric.nn as pyg

    from graphloc.nn import from_pyg
    edge_index, n = parity_graph(18)
    x = torch.randn(n, 5, device="cuda")
    theirs = pyg.GCN(5, 8, 2, 3, norm="batch_norm").cuda().eval()
    mixed = torch.nn.ModuleList([pyg.GINConv(torch.nn.Linear(5, 5)),
                                 pyg.FeaStConv(5, 4, heads=2)]).cuda()
    for model in (theirs, mixed):
        ours = from_pyg(model, example=None if model is mixed else (x, edge_index.cuda()))
        assert all(t.is_cuda for t in (*ours.parameters(), *ours.buffers()))
    torch.testing.assert_close(ours[1](x, edge_index.cuda()), mixed[1](x, edge_index.cuda()))
