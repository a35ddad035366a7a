"""Helpers shared by the convs (graphloc/nn/conv/_utils.py)."""

import pytest
import torch

from graphloc.nn.conv._utils import narrow_matmul


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_narrow_matmul_matches_matmul_and_its_gradients(needs):
    """Values, first and second derivatives against torch's own matmul (float64)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 12, generator=gen, dtype=torch.float64, requires_grad=needs[0])
    w = torch.randn(12, 3, generator=gen, dtype=torch.float64, requires_grad=needs[1])
    grad = torch.randn(300, 3, generator=gen, dtype=torch.float64)
    inputs = [t for t in (x, w) if t.requires_grad]
    got = narrow_matmul(x, w)
    want = x @ w
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    got_grads = torch.autograd.grad(got, inputs, grad, create_graph=True)
    want_grads = torch.autograd.grad(want, inputs, grad, create_graph=True)
    for g, ref in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, ref)
    if all(needs):  # second order: d/dx of <d out/d w, v> is mixed, nonzero
        v = torch.randn(12, 3, generator=gen, dtype=torch.float64)
        second = torch.autograd.grad((got_grads[1] * v).sum(), x)[0]
        second_ref = torch.autograd.grad((want_grads[1] * v).sum(), x)[0]
        torch.testing.assert_close(second, second_ref)


def test_narrow_matmul_gradcheck():
    x = torch.randn(20, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(narrow_matmul, (x, w))
    assert torch.autograd.gradgradcheck(narrow_matmul, (x, w))
