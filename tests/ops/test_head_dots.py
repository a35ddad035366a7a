"""head_dots (GAT's per-node score halves in one pass) against their definition written as a
Python loop over the rows, heads and vectors: forward and both gradients on the register
layouts and the others, non-finite values that must stay in their head, the composed path
that other devices take, thread-count determinism, and the inputs the op must refuse."""

import pytest
import torch
from helpers import requires_ext

from graphloc import ops
from graphloc.ops.heads import composed_head_dots

pytestmark = requires_ext

# (vectors, heads, channels): GAT's register layouts (heads x channels <= 64 lanes), wider
# heads, odd widths, more heads than channels
LAYOUTS = [(2, 4, 16), (1, 1, 64), (2, 8, 8), (1, 2, 32), (3, 3, 5), (2, 1, 7), (2, 16, 4),
           (1, 4, 100), (2, 2, 1)]


def _definition(x, att):
    """out[n, a * H + h] = sum_c x[n, h * C + c] * att[a, h, c], one dot at a time."""
    A, H, C = att.shape
    out = torch.zeros(x.size(0), A * H, dtype=torch.float64)
    for n in range(x.size(0)):
        for a in range(A):
            for h in range(H):
                out[n, a * H + h] = sum(float(x[n, h * C + c]) * float(att[a, h, c])
                                        for c in range(C))
    return out


def _gradient_definition(x, att, grad):
    """d x[n, h * C + c] = sum_a grad[n, a * H + h] att[a, h, c]; d att[a, h, c] =
    sum_n grad[n, a * H + h] x[n, h * C + c], summed in float64."""
    A, H, C = att.shape
    x, att, grad = x.double(), att.double(), grad.double()
    d_x = torch.zeros(x.shape, dtype=torch.float64)
    d_att = torch.zeros(att.shape, dtype=torch.float64)
    for a in range(A):
        for h in range(H):
            g = grad[:, a * H + h]
            d_x[:, h * C:(h + 1) * C] += g[:, None] * att[a, h]
            d_att[a, h] = (g[:, None] * x[:, h * C:(h + 1) * C]).sum(0)
    return d_x, d_att


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_values_and_gradients_match_the_definition(layout, dtype):
    A, H, C = layout
    gen = torch.Generator().manual_seed(A * 100 + H * 10 + C)
    x = torch.randn(37, H * C, generator=gen, dtype=dtype, requires_grad=True)
    att = torch.randn(A, H, C, generator=gen, dtype=dtype, requires_grad=True)
    out = ops.head_dots(x, att)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.double(), _definition(x.detach(), att.detach()), **tol)
    grad = torch.randn(out.shape, generator=gen, dtype=dtype)
    d_x, d_att = torch.autograd.grad(out, (x, att), grad)
    want_x, want_att = _gradient_definition(x.detach(), att.detach(), grad)
    torch.testing.assert_close(d_x.double(), want_x, **tol)
    torch.testing.assert_close(d_att.double(), want_att, **tol)


def test_many_rows_cross_the_blocks_of_the_attention_gradient():
    """More rows than one block of grad_att's partial sums (2,048), a partial last block."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(10_007, 64, generator=gen, dtype=torch.float64, requires_grad=True)
    att = torch.randn(2, 4, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(10_007, 8, generator=gen, dtype=torch.float64)
    d_x, d_att = torch.autograd.grad(ops.head_dots(x, att), (x, att), grad)
    want_x, want_att = _gradient_definition(x.detach(), att.detach(), grad)
    torch.testing.assert_close(d_x, want_x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(d_att, want_att, rtol=1e-11, atol=1e-11)


def test_shapes_and_promotion():
    """x as [N, H, C], att as [H, C]; float32 rows against float64 vectors give float64
    (PyG's product promotes); no rows give [0, A * H] and zero gradients."""
    x = torch.randn(6, 3, 4)
    att = torch.randn(3, 4, dtype=torch.float64)
    out = ops.head_dots(x, att)
    assert out.dtype == torch.float64 and out.shape == (6, 3)
    torch.testing.assert_close(out, _definition(x.reshape(6, 12).double(), att[None]))
    empty = torch.zeros(0, 8, requires_grad=True)
    att = torch.randn(2, 2, 4, requires_grad=True)
    out = ops.head_dots(empty, att)
    assert out.shape == (0, 4)
    d_x, d_att = torch.autograd.grad(out.sum(), (empty, att))
    assert d_x.shape == (0, 8) and torch.equal(d_att, torch.zeros(2, 2, 4))


def test_autocast_keeps_the_promoted_dtype():
    x = torch.randn(20, 32).bfloat16()
    att = torch.randn(2, 2, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ops.head_dots(x, att)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), _definition(x.float(), att), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_channel_stays_in_its_head(bad):
    """PyG's per-head product: a non-finite channel of head 1 reaches head 1's dots only,
    forward, and an infinite gradient of one head's dot only that head's gradients."""
    A, H, C = 2, 4, 16
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, H * C, generator=gen, dtype=torch.float64)
    att = torch.randn(A, H, C, generator=gen, dtype=torch.float64)
    x[2, 1 * C + 3] = bad
    x.requires_grad_(True)
    att.requires_grad_(True)
    out = ops.head_dots(x, att)
    pyg = (x.view(-1, 1, H, C) * att).sum(-1).reshape(-1, A * H)
    torch.testing.assert_close(out, pyg, equal_nan=True)
    assert torch.isfinite(out[2, [0, 2, 3, 4, 6, 7]]).all()
    grad = torch.ones(5, A * H, dtype=torch.float64)
    grad[1, 2] = bad
    got = torch.autograd.grad(out, (x, att), grad)
    want = torch.autograd.grad(pyg, (x, att), grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, equal_nan=True)
    assert torch.isfinite(got[0][1, [c for c in range(H * C) if c // C != 2]]).all()


@pytest.mark.parametrize("layout", [(2, 4, 16), (3, 3, 5)])
def test_the_kernel_and_the_composed_path_agree(layout):
    """The path other devices take (a thin matmul with the block-diagonal vectors) gives
    the kernel's values and gradients, special values included."""
    A, H, C = layout
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(50, H * C, generator=gen, dtype=torch.float64)
    att = torch.randn(A, H, C, generator=gen, dtype=torch.float64)
    x[7, 0] = float("inf")
    x[9, -1] = float("nan")
    x.requires_grad_(True)
    att.requires_grad_(True)
    grad = torch.randn(50, A * H, generator=gen, dtype=torch.float64)
    kernel, composed = ops.head_dots(x, att), composed_head_dots(x, att)
    torch.testing.assert_close(kernel, composed, equal_nan=True)
    for k, c in zip(torch.autograd.grad(kernel, (x, att), grad),
                    torch.autograd.grad(composed, (x, att), grad), strict=True):
        torch.testing.assert_close(k, c, equal_nan=True)


def test_the_attention_gradient_does_not_depend_on_the_thread_count():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(20_000, 64, generator=gen, requires_grad=True)
    att = torch.randn(2, 4, 16, generator=gen, requires_grad=True)
    grad = torch.randn(20_000, 8, generator=gen)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(torch.autograd.grad(ops.head_dots(x, att), (x, att), grad))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other, strict=True))


def test_gradcheck_and_double_backward():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(9, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    att = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ops.head_dots, (x, att))
    assert torch.autograd.gradgradcheck(ops.head_dots, (x, att))


def test_vmap_and_grad_transforms():
    """Under torch.func: vmap over a batch of rows, and grad, equal to the loop."""
    gen = torch.Generator().manual_seed(6)
    xs = torch.randn(3, 10, 8, generator=gen, dtype=torch.float64)
    att = torch.randn(2, 2, 4, generator=gen, dtype=torch.float64)
    batched = torch.func.vmap(ops.head_dots, in_dims=(0, None))(xs, att)
    torch.testing.assert_close(batched, torch.stack([ops.head_dots(x, att) for x in xs]))
    d_att = torch.func.grad(lambda a: ops.head_dots(xs[0], a).square().sum())(att)
    out = _definition(xs[0], att)
    torch.testing.assert_close(d_att, _gradient_definition(xs[0], att, 2 * out)[1])


@pytest.mark.parametrize("call, error, message", [
    (lambda: ops.head_dots(torch.randn(4, 8), torch.randn(2, 3, 4)), ValueError,
     r"x must be \[N, 3, 4\] or \[N, 12\] for att of shape \[2, 3, 4\], got \[4, 8\]"),
    (lambda: ops.head_dots(torch.randn(4, 2, 5), torch.randn(1, 2, 4)), ValueError,
     r"x must be \[N, 2, 4\] or \[N, 8\]"),
    (lambda: ops.head_dots(torch.randn(4, 8), torch.randn(8)), ValueError,
     r"att must be \[vectors, heads, C\] or \[heads, C\] with no zero size, got \[8\]"),
    (lambda: ops.head_dots(torch.randn(4, 0), torch.randn(1, 2, 0)), ValueError,
     r"no zero size, got \[1, 2, 0\]"),
    (lambda: ops.head_dots(torch.ones(4, 8, dtype=torch.long), torch.randn(2, 4)), TypeError,
     r"x must be a floating torch.Tensor, got torch.int64"),
    (lambda: ops.head_dots(torch.randn(4, 8), [[1.0] * 4] * 2), TypeError,
     r"att must be a floating torch.Tensor, got list"),
    (lambda: ops.head_dots(torch.randn(4, 8), torch.randn(2, 4, device="meta")), ValueError,
     r"x is on cpu but att is on meta"),
])
def test_bad_inputs_are_refused_by_name(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_kernels_check_their_arguments():
    """The compiled kernels refuse what the wrapper would not pass them, by name."""
    k = torch.ops.graphloc
    x, att = torch.randn(4, 8), torch.randn(2, 2, 4)
    for call, message in [
        (lambda: k.head_dots(x, torch.randn(2, 3, 4)), "x has 8 channels but att holds 3 heads"),
        (lambda: k.head_dots(x, torch.randn(8, 1)), "att must be \\[vectors, heads, C\\]"),
        (lambda: k.head_dots(x, att.double()), "att is Double but x is Float"),
        (lambda: k.head_dots(x.bfloat16(), att.bfloat16()), "x must be float32 or float64"),
        (lambda: k.head_dots(torch.randn(4, 2, 4), att), "x must be 2-D"),
        (lambda: k.head_dots_backward(x, att, torch.randn(4, 3), True, True),
         "grad must be Float of shape \\[4, 4\\], got Float of shape \\[4, 3\\]"),
        (lambda: k.head_dots_backward(x, att, torch.randn(5, 4), True, False),
         "grad must be Float of shape \\[4, 4\\]"),
    ]:
        with pytest.raises(RuntimeError, match=message):
            call()
