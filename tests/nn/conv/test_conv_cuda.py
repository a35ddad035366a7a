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
