"""film_sum (the FiLM conv's aggregation in one kernel: relu(gamma[i] * value[j] + beta[i])
summed into row i): special values and relu's kink against torch's own ops, wide rows, each
gradient alone, views read in place, and the bad inputs the kernel must refuse (what it
shares with gated_sum, its definition on random graphs included: test_edge_functions.py)."""

import pytest
import torch
from helpers import (
    edge_function_inputs,
    film_sum_definition,
    hub_graph,
    random_edge_index,
    requires_ext,
)

from graphloc import Graph, ops
from graphloc.ops import reference

pytestmark = requires_ext


def _per_edge(graph, gamma, beta, value):
    """torch's own ops on the gathered rows, in the graph's edge order (PyG's messages)."""
    src, dst = graph.edge_index
    messages = torch.relu(gamma[dst] * value[src] + beta[dst])
    return torch.zeros_like(gamma).index_add(0, dst, messages)


@pytest.mark.parametrize("finite_gamma", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_special_values_and_relus_kink_give_torchs_numbers(dtype, finite_gamma):
    """NaN propagates to its rows and their gradients; inf as IEEE arithmetic gives it (0 *
    inf is NaN); relu's gradient is exactly 0 where a message is <= 0 (a NaN upstream
    gradient there included) and passes where it is NaN, as torch's; a message of exactly 0
    (gamma 0 and beta 0) takes no gradient. The kernel, its raw-CSR twin and torch's ops on
    the gathered rows agree, gradients included, with a NaN gamma (0 * NaN where relu
    blocks) and with a large finite one."""
    graph = Graph(random_edge_index(12, 70, seed=7), num_nodes=12)
    gen = torch.Generator().manual_seed(8)
    gamma, beta, value = (t.to(dtype) for t in edge_function_inputs("film_sum", graph, 6, gen))
    gamma[3, 1] = 1e30 if finite_gamma else float("nan")
    value[5, 4], value[6, 0] = float("inf"), float("-inf")
    beta[2, 2], gamma[4, 3], beta[4, 3] = float("-inf"), 0.0, 0.0
    value[7, 5], beta[8, 1] = float("nan"), float("inf")
    inputs = [t.clone().requires_grad_() for t in (gamma, beta, value)]
    twins = [t.detach().clone().requires_grad_() for t in inputs]
    kernel = ops.film_sum(graph, *inputs)
    want = _per_edge(graph, *twins)
    torch.testing.assert_close(kernel, want, equal_nan=True)
    csr = graph.csr
    torch.testing.assert_close(reference.film_sum(csr.indptr, csr.indices, *inputs), want,
                               equal_nan=True)
    grad = torch.randn(kernel.shape, generator=gen, dtype=torch.float64).to(dtype)
    grad[2, 0], grad[9, 3] = float("nan"), float("inf")
    for a, b in zip(torch.autograd.grad(kernel, inputs, grad),
                    torch.autograd.grad(want, twins, grad), strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)


@pytest.mark.parametrize("channels", [64, 70, 130])
def test_gradients_of_wide_rows(channels):
    """Rows of one register block and wider ones without a compiled width (70, 130
    channels), on a hub graph: the gradients are the per-edge form's."""
    graph = hub_graph()
    gen = torch.Generator().manual_seed(channels)
    inputs = [t.requires_grad_() for t in edge_function_inputs("film_sum", graph, channels, gen)]
    twins = [t.detach().clone().requires_grad_() for t in inputs]
    upstream = torch.randn(graph.num_nodes, channels, generator=gen, dtype=torch.float64)
    for got, want in zip(torch.autograd.grad(ops.film_sum(graph, *inputs), inputs, upstream),
                         torch.autograd.grad(_per_edge(graph, *twins), twins, upstream),
                         strict=True):
        torch.testing.assert_close(got, want)


def test_each_gradient_alone_and_none_asked():
    graph = Graph(random_edge_index(9, 30, seed=12), num_nodes=9)
    gen = torch.Generator().manual_seed(13)
    for wanted in range(3):
        inputs = list(edge_function_inputs("film_sum", graph, 8, gen))
        inputs[wanted].requires_grad_()
        out = ops.film_sum(graph, *inputs)
        twins = [t.detach().clone().requires_grad_(i == wanted) for i, t in enumerate(inputs)]
        (got,) = torch.autograd.grad(out.sum(), inputs[wanted])
        (want,) = torch.autograd.grad(_per_edge(graph, *twins).sum(), twins[wanted])
        torch.testing.assert_close(got, want)
    with torch.no_grad():
        torch.testing.assert_close(ops.film_sum(graph, *inputs), _per_edge(graph, *inputs))


def test_views_of_wider_tensors_and_transposed_inputs_are_read_where_they_lie():
    """beta and gamma as the halves of one [N, 2C] product (FiLM's split), value a column
    slice, the upstream gradient a transpose: the same numbers and gradients as from
    contiguous copies (the kernel reads rows at their stride, or copies where the
    channels are not adjacent)."""
    graph = Graph(random_edge_index(11, 50, seed=14), num_nodes=11)
    gen = torch.Generator().manual_seed(15)
    both = torch.randn(11, 12, dtype=torch.float64, generator=gen, requires_grad=True)
    wide = torch.randn(11, 9, dtype=torch.float64, generator=gen, requires_grad=True)
    beta, gamma = both.split(6, dim=1)
    value = wide[:, 2:8]
    out = ops.film_sum(graph, gamma, beta, value)
    copies = [t.detach().clone().requires_grad_() for t in (gamma, beta, value)]
    want = ops.film_sum(graph, *copies)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    upstream = torch.randn(6, 11, dtype=torch.float64, generator=gen).t()  # not contiguous
    got = torch.autograd.grad(out, (both, wide), upstream)
    wanted = torch.autograd.grad(want, copies, upstream.contiguous())
    torch.testing.assert_close(got[0], torch.cat([wanted[1], wanted[0]], 1), rtol=0, atol=0)
    torch.testing.assert_close(got[1][:, 2:8], wanted[2], rtol=0, atol=0)
    transposed = torch.randn(6, 11, dtype=torch.float64, generator=gen).t()
    fixed = (transposed, beta.detach(), value.detach())
    torch.testing.assert_close(ops.film_sum(graph, *fixed), film_sum_definition(graph, *fixed))


def test_bad_inputs_are_refused_by_name():
    graph = Graph(random_edge_index(5, 12, seed=11), num_nodes=5)
    gamma, beta, value = torch.randn(5, 6), torch.randn(5, 6), torch.randn(5, 6)
    with pytest.raises(ValueError, match="gamma has 4 rows but the graph has 5 nodes"):
        ops.film_sum(graph, gamma[:4], beta, value)
    with pytest.raises(ValueError, match="beta has 4 rows but the graph has 5 nodes"):
        ops.film_sum(graph, gamma, beta[:4], value)
    with pytest.raises(ValueError, match=r"must share C, got \[5, 6\], \[5, 6\] and \[5, 4\]"):
        ops.film_sum(graph, gamma, beta, value[:, :4])
    with pytest.raises(ValueError, match=r"must share C, got \[5, 6\], \[5, 3\] and \[5, 6\]"):
        ops.film_sum(graph, gamma, beta[:, :3], value)
    with pytest.raises(TypeError, match="must have one dtype"):
        ops.film_sum(graph, gamma, beta.double(), value)
    with pytest.raises(TypeError, match="value must be float16, float32, float64 or bfloat16"):
        ops.film_sum(graph, gamma, beta, value.long())
    with pytest.raises(TypeError, match="expected a graphloc.Graph"):
        ops.film_sum(graph.edge_index, gamma, beta, value)
    k = torch.ops.graphloc
    L = lambda *v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    x = torch.randn(3, 6)
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 9 is out of range"):
        k.film_sum(L(0, 1, 2, 3), L(0, 9, 1), x, x, x)
    with pytest.raises(RuntimeError, match=r"beta has shape \[3, 4\] but gamma has shape"):
        k.film_sum(L(0, 1, 2, 3), L(0, 2, 1), x, torch.randn(3, 4), x)
    with pytest.raises(RuntimeError, match="beta is Double but gamma is Float"):
        k.film_sum(L(0, 1, 2, 3), L(0, 2, 1), x, x.double(), x)
    with pytest.raises(RuntimeError, match=r"csc_indices\[1\] = 5 is out of range"):
        k.film_sum_backward(L(0, 1, 2, 3), L(1, 2, 0), x, x, x, x, L(0, 1, 2, 3), L(1, 5, 0),
                            L(0, 1, 2), True, True, True)
    with pytest.raises(RuntimeError, match="grad must be Float of shape"):
        k.film_sum_backward(L(0, 1, 2, 3), L(1, 2, 0), x, x, x, x[:2], L(0, 1, 2, 3),
                            L(1, 2, 0), L(0, 1, 2), True, True, True)
