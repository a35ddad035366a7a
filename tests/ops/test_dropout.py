"""graphloc's dropout: the kernel against the pure-torch hash bit for bit, torch's dropout
semantics (scaling rounded to the dtype, NaN kept, p = 0 and p = 1, eval), a keep rate
within binomial bounds and independent masks across calls, reproducible under
torch.manual_seed and on any thread count, and the gradient (the same mask)."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import requires_ext

from graphloc import ops
from graphloc.nn.dropout import Dropout
from graphloc.ops import reference

kernels = torch.ops.graphloc


@requires_ext
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.999, 1.0])
def test_kernel_matches_the_pure_torch_hash(dtype, p):
    x = torch.randn(37, 53).to(dtype)
    for seed in (0, 1, -5, 2**62 + 3, -2**63):
        seed = torch.tensor(seed)
        assert torch.equal(kernels.dropout(x, p, seed), reference.dropout(x, p, seed))
    strided = x.t()  # element k of the row-major order, as the contiguous copy holds it
    assert torch.equal(kernels.dropout(strided, 0.3, torch.tensor(7)),
                       reference.dropout(strided.contiguous(), 0.3, torch.tensor(7)))
    for bad in (torch.tensor([1, 2]), torch.tensor(1.0), torch.tensor(1, dtype=torch.int32)):
        with pytest.raises(RuntimeError, match="seed must be a one-element int64 CPU tensor"):
            kernels.dropout(x, 0.3, bad)


def test_semantics_of_torch_dropout():
    x = torch.randn(400, 50, dtype=torch.float64)
    out = ops.dropout(x, 0.3)
    kept = out != 0
    # the survivors scaled by 1 / (1 - p) exactly as torch rounds it, the others zero
    torch.testing.assert_close(out[kept], x[kept] * (1 / 0.7), rtol=0, atol=0)
    assert ops.dropout(x, 0.3, training=False) is x and ops.dropout(x, 0.0) is x
    assert torch.equal(ops.dropout(x, 1.0), torch.zeros_like(x))
    nan = torch.full((1000,), float("nan"))
    assert ops.dropout(nan, 0.5).isnan().all()  # torch's: NaN * 0 is NaN
    assert F.dropout(nan, 0.5).isnan().all()
    half = torch.ones(1000, dtype=torch.bfloat16)
    scale = torch.tensor(1 / 0.7, dtype=torch.bfloat16)
    assert set(ops.dropout(half, 0.3).unique().tolist()) == {0.0, scale.item()}
    for bad in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="dropout probability p must lie in"):
            ops.dropout(x, bad)
    with pytest.raises(TypeError, match="x must be a floating-point tensor, got torch.int64"):
        ops.dropout(torch.ones(3, dtype=torch.long), 0.5)
    ints = torch.ones(3, dtype=torch.long)  # not dropping: any dtype passes, as torch's
    assert ops.dropout(ints, 0.5, training=False) is ints and ops.dropout(ints, 0.0) is ints
    assert F.dropout(ints, 0.5, training=False) is ints


def test_keep_rate_and_independent_masks():
    torch.manual_seed(0)
    n = 1_000_000
    for p in (0.1, 0.5, 0.9):
        first, second = ops.dropout(torch.ones(n), p) != 0, ops.dropout(torch.ones(n), p) != 0
        bound = 5 * math.sqrt(n * p * (1 - p))  # five standard deviations
        assert abs(first.sum().item() - n * (1 - p)) < bound
        # two calls draw two seeds: both kept with probability (1 - p)^2
        both = (first & second).sum().item()
        assert abs(both - n * (1 - p) ** 2) < 5 * math.sqrt(n * (1 - p) ** 2)
        # neighbours independent: pairs of consecutive kept elements as often as any pair
        pairs = (first[1:] & first[:-1]).sum().item()
        assert abs(pairs - (n - 1) * (1 - p) ** 2) < 5 * math.sqrt(n * (1 - p) ** 2)


def test_reproducible_under_manual_seed_and_any_thread_count():
    x = torch.randn(300, 64)
    threads = torch.get_num_threads()
    try:
        runs = []
        for count in (1, threads, 3):
            torch.set_num_threads(count)
            torch.manual_seed(11)
            runs.append(ops.dropout(x, 0.4))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(r, runs[0]) for r in runs)
    generator = torch.Generator().manual_seed(3)
    again = torch.Generator().manual_seed(3)
    assert torch.equal(ops.dropout(x, 0.4, generator=generator),
                       ops.dropout(x, 0.4, generator=again))


def test_gradient_is_the_same_mask():
    torch.manual_seed(2)
    x = torch.randn(50, 20, dtype=torch.float64, requires_grad=True)
    out = ops.dropout(x, 0.35)
    grad = torch.randn_like(out)
    (got,) = torch.autograd.grad(out, x, grad)
    torch.testing.assert_close(got, grad * (out.detach() / x.detach()).nan_to_num(),
                               rtol=1e-12, atol=0)
    torch.manual_seed(4)
    assert torch.autograd.gradcheck(lambda t: ops.dropout(t, 0.35, generator=torch.Generator()
                                                          .manual_seed(9)), (x,))


@requires_ext
def test_opcheck():
    x = torch.randn(8, 5, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(kernels.dropout, (x, 0.3, torch.tensor(12)))


def test_compiles_without_graph_breaks():
    """The seed is drawn by a traced random op: training-mode dropout compiles with
    fullgraph=True, and its backward applies the forward's mask."""
    x = torch.randn(500, 8, requires_grad=True)
    compiled = torch.compile(lambda t: ops.dropout(t, 0.4), fullgraph=True)
    out = compiled(x)
    kept = out != 0
    assert 0.45 < kept.float().mean().item() < 0.75
    torch.testing.assert_close(out[kept], x[kept] / 0.6)
    (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
    assert torch.equal(grad != 0, kept)


def test_module_is_a_drop_in_for_torch_dropout():
    ours, theirs = Dropout(0.2), torch.nn.Dropout(0.2)
    assert repr(ours) == repr(theirs) and ours.state_dict().keys() == theirs.state_dict().keys()
    x = torch.randn(1000)
    ours.eval()
    assert ours(x) is x
    ours.train()
    assert ((ours(x) == 0).float().mean() - 0.2).abs() < 0.05
    inplace = Dropout(0.5, inplace=True)
    y = x.clone()
    out = inplace(y)
    assert out is y and (y == 0).any()
    with pytest.raises(TypeError, match="Dropout: inplace must be True or False"):
        Dropout(0.5, inplace="False")  # worked in place, quietly


def test_special_values_and_empty_inputs():
    """inf, -inf and NaN through the kernel and its twin bit for bit, and as torch's
    product gives them (a kept inf scaled, a dropped one NaN: inf * 0); tensors with no
    elements come back empty."""
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1.0] * 50)
    seed = torch.tensor(3)
    want = reference.dropout(x, 0.5, seed)
    if ops.HAS_EXTENSION:
        got = kernels.dropout(x, 0.5, seed)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(), want.nan_to_num())
    kept = reference.dropout(torch.ones(300), 0.5, seed) != 0
    infinite = x.isinf()
    assert torch.equal(want[infinite & kept], x[infinite & kept])
    assert want[infinite & ~kept].isnan().all() and want[x.isnan()].isnan().all()
    for empty in (torch.empty(0), torch.empty(0, 5), torch.empty(3, 0)):
        out = ops.dropout(empty, 0.3)
        assert out.shape == empty.shape and out.dtype == empty.dtype
