"""gated_sum (the residual gated conv's aggregation in one kernel: sigmoid(key[i] +
query[j]) * value[j] summed into row i): special values against the composed ops, and the
bad inputs the kernel must refuse (what it shares with film_sum, its definition on random
graphs included: test_edge_functions.py)."""

import pytest
import torch
from helpers import (
    edge_function_inputs,
    random_edge_index,
    requires_ext,
)

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext


def test_kernel_and_composed_path_agree_on_special_values():
    """NaN propagates to its rows and their gradients, and +-inf as IEEE arithmetic does
    (a gate of 0 times an infinite value is NaN, as torch's product), on the kernel and on
    the composed ops (the pure-torch path of other devices) alike."""
    graph = Graph(random_edge_index(12, 60, seed=7), num_nodes=12)
    gen = torch.Generator().manual_seed(8)
    key, query, value = edge_function_inputs("gated_sum", graph, 6, gen)
    key[3, 1], query[5, 4], query[6, 0] = float("nan"), float("inf"), float("-inf")
    value[2, 2], key[4, 3] = float("inf"), -1e4  # a saturated gate: exactly 0
    inputs = [t.clone().float().requires_grad_() for t in (key, query, value)]
    twins = [t.detach().clone().requires_grad_() for t in inputs]
    kernel = ops.gated_sum(graph, *inputs)
    gate = torch.sigmoid(ops.sddmm(graph, twins[1], twins[0], "add"))
    composed = ops.spmm(graph, twins[2].unsqueeze(-1), gate).squeeze(-1)
    torch.testing.assert_close(kernel, composed, equal_nan=True)
    twin = reference.gated_sum(graph.csr.indptr, graph.csr.indices, *twins)  # the raw-CSR twin
    torch.testing.assert_close(kernel, twin, equal_nan=True)
    grad = torch.randn(kernel.shape, generator=gen, dtype=torch.float64).float()
    for a, b in zip(torch.autograd.grad(kernel, inputs, grad),
                    torch.autograd.grad(composed, twins, grad), strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_bad_inputs_are_refused_by_name():
    graph = Graph(random_edge_index(5, 12, seed=11), num_nodes=5)
    key, query, value = torch.randn(5, 6), torch.randn(5, 6), torch.randn(5, 6)
    with pytest.raises(ValueError, match="key has 4 rows but the graph has 5 nodes"):
        ops.gated_sum(graph, key[:4], query, value)
    with pytest.raises(ValueError, match=r"must share C, got \[5, 6\], \[5, 6\] and \[5, 4\]"):
        ops.gated_sum(graph, key, query, value[:, :4])
    with pytest.raises(TypeError, match="must have one dtype"):
        ops.gated_sum(graph, key, query, value.double())
    with pytest.raises(TypeError, match="value must be float16, float32, float64 or bfloat16"):
        ops.gated_sum(graph, key, query, value.long())
    k = torch.ops.graphloc
    L = lambda *v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    x = torch.randn(3, 6)
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 9 is out of range"):
        k.gated_sum(L(0, 1, 2, 3), L(0, 9, 1), x, x, x)
    with pytest.raises(RuntimeError, match=r"value has shape \[3, 4\] but query has shape"):
        k.gated_sum(L(0, 1, 2, 3), L(0, 2, 1), x, x, torch.randn(3, 4))
    with pytest.raises(RuntimeError, match=r"csc_indices\[1\] = 5 is out of range"):
        k.gated_sum_backward(L(0, 1, 2, 3), L(1, 2, 0), x, x, x, x, L(0, 1, 2, 3), L(1, 5, 0),
                             L(0, 1, 2), True, True, True)
    with pytest.raises(RuntimeError, match="grad must be Float of shape"):
        k.gated_sum_backward(L(0, 1, 2, 3), L(1, 2, 0), x, x, x, x[:2], L(0, 1, 2, 3),
                             L(1, 2, 0), L(0, 1, 2), True, True, True)
