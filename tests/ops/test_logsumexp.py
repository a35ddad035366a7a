"""segment_logsumexp (kernel and reference) against a row-by-row float64 oracle: special
values, empty rows, eps, gathered and in-order rows, every dtype; its gradient."""

import math

import pytest
import torch
from helpers import requires_ext

from graphloc.ops import reference

pytestmark = requires_ext
kernels = torch.ops.graphloc
INF = float("inf")


def oracle(x, indptr, indices, eps):
    """torch_scatter's formula per row in float64: log(eps + sum exp(x - s)) + max, s the max
    (0 when it is -inf); empty rows 0."""
    x = x.double()
    out = torch.zeros(indptr.numel() - 1, x.size(1), dtype=torch.float64)
    for row in range(indptr.numel() - 1):
        positions = range(int(indptr[row]), int(indptr[row + 1]))
        if not positions:
            continue
        vals = x[[int(indices[e]) if indices is not None else e for e in positions]]
        top = torch.where(vals.isnan(), -INF, vals).max(0).values  # NaN: from the sum
        shift = top.masked_fill(top == -INF, 0.0)
        out[row] = ((vals - shift).exp().sum(0) + eps).log() + top
    return out


def random_csr(num_rows, num_edges, seed, empty_every=5):
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, num_rows, (num_edges,), generator=gen)
    rows = rows[rows % empty_every != 1]  # some rows without edges
    counts = torch.bincount(rows, minlength=num_rows)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)]), rows.numel(), gen


@pytest.mark.parametrize("engine", [kernels, reference], ids=["kernel", "reference"])
@pytest.mark.parametrize("gathered", [True, False])
@pytest.mark.parametrize("eps", [0.0, 1e-12, 0.5])
@pytest.mark.parametrize("size", [(30, 90), (3000, 40000)])  # the second: several chunks
def test_matches_the_oracle(engine, gathered, eps, size):
    indptr, E, gen = random_csr(*size, seed=size[0] + int(gathered))
    x = torch.randn(E if not gathered else E // 2 + 1, 7, generator=gen, dtype=torch.float64) * 30
    indices = torch.randint(0, x.size(0), (E,), generator=gen) if gathered else None
    got = engine.segment_logsumexp(x, indptr, indices, eps)
    torch.testing.assert_close(got, oracle(x, indptr, indices, eps), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("engine", [kernels, reference], ids=["kernel", "reference"])
@pytest.mark.parametrize("eps", [0.0, 1e-12])
def test_special_values(engine, eps):
    """Channels: a -inf among finite values; only -inf (-inf, as torch.logsumexp); a NaN
    (NaN); +inf (NaN: inf - inf, as torch_scatter); very large values (no overflow)."""
    x = torch.tensor([[1.0, -INF, math.nan, INF, 1e30],
                      [-INF, -INF, 2.0, 1.0, 1e30],
                      [3.0, -INF, 1.0, 0.0, 1e30]])
    indptr = torch.tensor([0, 3, 3])
    got = engine.segment_logsumexp(x, indptr, torch.tensor([0, 1, 2]), eps)
    want = oracle(x, indptr, torch.tensor([0, 1, 2]), eps).float()
    torch.testing.assert_close(got, want, equal_nan=True)
    assert got[0, 1] == -INF and got[0, 2].isnan() and got[0, 3].isnan()
    assert got[0, 4] == pytest.approx(1e30 + math.log(3), rel=1e-6)
    assert got[1].tolist() == [0.0] * 5  # no edges


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_reduced_precision_accumulates_in_float32(dtype):
    indptr, E, gen = random_csr(200, 3000, seed=3)
    x = (torch.randn(E, 16, generator=gen) * 4).to(dtype)
    got = kernels.segment_logsumexp(x, indptr, None, 1e-12)
    assert got.dtype == dtype
    tol = {torch.float32: 1e-6, torch.bfloat16: 1e-2, torch.float16: 1e-3}[dtype]
    torch.testing.assert_close(got.double(), oracle(x, indptr, None, 1e-12), rtol=tol, atol=tol)
    torch.testing.assert_close(got, reference.segment_logsumexp(x, indptr, None, 1e-12))


def test_gradient():
    """eps = 0: the exact function's first and second derivatives. eps > 0: the max is held
    constant, as torch_scatter's formula (its scatter_max writes into a tensor without
    history), so the gradient is the row's softmax scaled by sum / (sum + eps): compared
    with the composite formula's autograd (the reference)."""
    indptr, E, gen = random_csr(40, 300, seed=5)
    x = torch.randn(E // 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    indices = torch.randint(0, x.size(0), (E,), generator=gen)  # rows read several times
    assert torch.autograd.gradcheck(
        lambda t: kernels.segment_logsumexp(t, indptr, indices, 0.0), (x,))
    assert torch.autograd.gradgradcheck(
        lambda t: kernels.segment_logsumexp(t, indptr, indices, 0.0), (x,))
    g = torch.randn(40, 4, dtype=torch.float64)
    for engine in (kernels, reference):
        out = engine.segment_logsumexp(x, indptr, indices, 0.5)
        (grad,) = torch.autograd.grad(out, x, g, create_graph=True)
        (second,) = torch.autograd.grad(grad, x, torch.ones_like(grad))
        if engine is kernels:
            want = (grad.detach(), second)
        else:
            torch.testing.assert_close((grad.detach(), second), want)


def test_gradient_of_masked_entries_and_rows():
    """A -inf entry gets 0; a row of only -inf gets 0 for eps > 0 (its exps are 0 / eps) and
    NaN for eps = 0 (0 / 0), as the composite formula's autograd; the others the row's
    softmax."""
    x = torch.tensor([[1.0], [-INF], [2.0], [-INF], [-INF]], dtype=torch.float64,
                     requires_grad=True)
    indptr = torch.tensor([0, 3, 5])
    for eps, masked_row in ((1e-12, [0.0, 0.0]), (0.0, [math.nan, math.nan])):
        for engine in (kernels, reference):
            (grad,) = torch.autograd.grad(engine.segment_logsumexp(x, indptr, None, eps).sum(), x)
            soft = torch.softmax(torch.tensor([1.0, 2.0], dtype=torch.float64), 0)
            torch.testing.assert_close(grad[[0, 2], 0], soft)
            assert grad[1, 0] == 0.0
            torch.testing.assert_close(grad[3:, 0], torch.tensor(masked_row, dtype=torch.float64),
                                       equal_nan=True)


def test_rejects_bad_arguments():
    x, indptr = torch.randn(4, 2), torch.tensor([0, 2, 4])
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 9 is out of range"):
        kernels.segment_logsumexp(x, indptr, torch.tensor([0, 9, 1, 2]), 0.0)
    with pytest.raises(RuntimeError, match="indptr ends at 4 but indices has 3 rows"):
        kernels.segment_logsumexp(x, indptr, torch.tensor([0, 1, 2]), 0.0)
    with pytest.raises(RuntimeError, match="indptr ends at 4 but x has 5 rows"):
        kernels.segment_logsumexp(torch.randn(5, 2), indptr, None, 0.0)
    with pytest.raises(RuntimeError, match="x must be float32, float64, bfloat16 or float16"):
        kernels.segment_logsumexp(torch.ones(4, 2, dtype=torch.long), indptr, None, 0.0)
    with pytest.raises(RuntimeError, match="x must be 2-D"):
        kernels.segment_logsumexp(torch.randn(4), indptr, None, 0.0)
    with pytest.raises(RuntimeError, match="must share one index dtype"):
        kernels.segment_logsumexp(x, indptr, torch.tensor([0, 1, 2, 3], dtype=torch.int32), 0.0)


@pytest.mark.parametrize("gathered", [True, False])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_edge_grad_matches_its_formula(gathered, dtype):
    """logsumexp_edge_grad (the backward's per-edge pass): exp(x[indices[e]] - norm[i]) *
    grad[i] at each CSR position e of row i, written out position by position."""
    indptr, E, gen = random_csr(300, 5000, seed=11 + gathered)
    x = torch.randn(E // 2 + 1 if gathered else E, 6, generator=gen, dtype=torch.float64)
    x[0, 0], x[1, 1] = -INF, math.nan
    indices = torch.randint(0, x.size(0), (E,), generator=gen) if gathered else None
    norm = torch.randn(300, 6, generator=gen, dtype=torch.float64)
    grad = torch.randn(300, 6, generator=gen, dtype=torch.float64)
    x, norm, grad = (t.to(dtype) for t in (x, norm, grad))
    got = kernels.logsumexp_edge_grad(x, indptr, indices, norm, grad)
    x, norm, grad = (t.double() for t in (x, norm, grad))  # the oracle on the rounded inputs
    rows = torch.repeat_interleave(torch.arange(300), indptr[1:] - indptr[:-1])
    src = indices if gathered else torch.arange(E)
    want = torch.stack([(x[src[e]] - norm[rows[e]]).exp() * grad[rows[e]] for e in range(E)])
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-6
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol, equal_nan=True)
    if dtype != torch.bfloat16:  # (the reference rounds each bfloat16 step, the kernel once)
        torch.testing.assert_close(got, reference.logsumexp_edge_grad(
            x.to(dtype), indptr, indices, norm.to(dtype), grad.to(dtype)), equal_nan=True)


def test_edge_grad_rejects_bad_arguments():
    x, indptr = torch.randn(4, 2), torch.tensor([0, 2, 4])
    norm, grad = torch.randn(2, 2), torch.randn(2, 2)
    with pytest.raises(RuntimeError, match=r"norm must be \[2, 2\], got shape \[3, 2\]"):
        kernels.logsumexp_edge_grad(x, indptr, None, torch.randn(3, 2), grad)
    with pytest.raises(RuntimeError, match="grad is Double but x is Float"):
        kernels.logsumexp_edge_grad(x, indptr, None, norm, grad.double())
    with pytest.raises(RuntimeError, match=r"indices\[0\] = -1 is out of range"):
        kernels.logsumexp_edge_grad(x, indptr, torch.tensor([-1, 0, 1, 2]), norm, grad)


def softmax_oracle(x, indptr, indices, eps, log):
    """Row by row in float64, each x row's result at its own position."""
    x = x.double()
    out = torch.empty_like(x)
    for row in range(indptr.numel() - 1):
        pos = [int(indices[e]) if indices is not None else e
               for e in range(int(indptr[row]), int(indptr[row + 1]))]
        if not pos:
            continue
        vals = x[pos]
        top = torch.where(vals.isnan(), -INF, vals).max(0).values
        centred = vals - top.masked_fill(top == -INF, 0.0)
        total = centred.exp().sum(0)
        out[pos] = centred - (total + eps).log() if log else \
            centred.exp() / torch.where(total == 0, 1.0, total)
    return out


@pytest.mark.parametrize("engine", [kernels, reference], ids=["kernel", "reference"])
@pytest.mark.parametrize("gathered", [True, False])
@pytest.mark.parametrize("log,eps", [(False, 0.0), (True, 0.0), (True, 1e-12), (True, 0.5)])
@pytest.mark.parametrize("size", [(30, 90), (3000, 40000)])
def test_softmax_rows_match_the_oracle(engine, gathered, log, eps, size):
    indptr, E, gen = random_csr(*size, seed=size[0] + 3 * int(gathered))
    x = torch.randn(E, 5, generator=gen, dtype=torch.float64) * 30
    x[::7, 1] = -INF
    x[:40, 2] = -INF  # (some rows of only -inf)
    indices = torch.randperm(E, generator=gen) if gathered else None
    got = engine.segment_softmax_rows(x, indptr, indices, eps, log)
    torch.testing.assert_close(got, softmax_oracle(x, indptr, indices, eps, log), rtol=1e-12,
                               atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_softmax_rows_round_once(dtype):
    """Computed in float32 and rounded once, x minus the row max first: at values near 100
    (where bfloat16's spacing is 0.5) the log-softmax keeps the precision of its own
    magnitude, not of the max's."""
    indptr, E, gen = random_csr(200, 2000, seed=4)
    x = (torch.randn(E, 8, generator=gen) + 100).to(dtype)
    for log in (True, False):
        got = kernels.segment_softmax_rows(x, indptr, None, 1e-12, log)
        want = softmax_oracle(x, indptr, None, 1e-12, log)  # on the rounded inputs
        torch.testing.assert_close(got.double(), want, rtol=2 ** -7, atol=2 ** -7 if log else 0)


@pytest.mark.parametrize("engine", [kernels, reference], ids=["kernel", "reference"])
def test_softmax_rows_special_values(engine):
    """NaN or +inf make the row NaN; a row of only -inf gets weights 0 (softmax) and -inf
    (log-softmax with eps > 0), NaN with eps = 0 (log 0 - log 0)."""
    x = torch.tensor([[1.0, math.nan, INF, -INF], [2.0, 0.0, 1.0, -INF]])
    indptr = torch.tensor([0, 2])
    soft = engine.segment_softmax_rows(x, indptr, None, 0.0, False)
    assert soft[:, 1].isnan().all() and soft[:, 2].isnan().all() and soft[:, 3].eq(0).all()
    torch.testing.assert_close(soft[:, 0], torch.softmax(x[:, 0], 0))
    log_soft = engine.segment_softmax_rows(x, indptr, None, 0.5, True)
    assert log_soft[:, 3].eq(-INF).all()
    assert engine.segment_softmax_rows(x, indptr, None, 0.0, True)[:, 3].isnan().all()


@pytest.mark.parametrize("engine", [kernels, reference], ids=["kernel", "reference"])
def test_empty_inputs(engine):
    """No edges at all, and rows without edges: shapes kept, log-sum-exp 0 per row."""
    for num_rows in (0, 3):
        indptr = torch.zeros(num_rows + 1, dtype=torch.long)
        x = torch.randn(0, 4)
        assert engine.segment_logsumexp(x, indptr, None, 1e-12).tolist() == [[0.0] * 4] * num_rows
        assert engine.segment_softmax_rows(x, indptr, None, 0.0, True).shape == (0, 4)
        gathered = engine.segment_logsumexp(torch.randn(5, 4), indptr,
                                            torch.zeros(0, dtype=torch.long), 0.0)
        assert gathered.tolist() == [[0.0] * 4] * num_rows
    grad = kernels.logsumexp_edge_grad(torch.randn(0, 4), torch.zeros(3, dtype=torch.long), None,
                                       torch.randn(2, 4), torch.randn(2, 4))
    assert grad.shape == (0, 4)


@pytest.mark.parametrize("engine", [kernels, reference], ids=["kernel", "reference"])
def test_hub_rows(engine):
    """One row holding most edges (it spans the kernels' work chunks) among rows of one."""
    gen = torch.Generator().manual_seed(9)
    counts = torch.ones(500, dtype=torch.long)
    counts[7] = 30000
    indptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    E = int(indptr[-1])
    x = torch.randn(E, 3, generator=gen, dtype=torch.float64) * 20
    indices = torch.randperm(E, generator=gen)
    torch.testing.assert_close(engine.segment_logsumexp(x, indptr, indices, 1e-12),
                               oracle(x, indptr, indices, 1e-12), rtol=1e-12, atol=1e-12)
    hub = indices[int(indptr[7]):int(indptr[8])]
    soft = engine.segment_softmax_rows(x, indptr, indices, 0.0, False)
    torch.testing.assert_close(soft[hub], torch.softmax(x[hub], 0), rtol=1e-12, atol=1e-15)


def test_softmax_rows_reject_indices_that_are_not_a_permutation():
    x, indptr = torch.randn(4, 2), torch.tensor([0, 2, 4])
    with pytest.raises(RuntimeError, match=r"indices\[3\] = 1 repeats a row of x"):
        kernels.segment_softmax_rows(x, indptr, torch.tensor([0, 1, 2, 1]), 0.0, False)
    with pytest.raises(RuntimeError, match="indices has 3 entries but x has 4 rows"):
        kernels.segment_softmax_rows(x, torch.tensor([0, 1, 3]), torch.tensor([0, 1, 2]), 0.0,
                                     True)
    with pytest.raises(RuntimeError, match=r"indices\[1\] = 4 is out of range"):
        kernels.segment_softmax_rows(x, indptr, torch.tensor([0, 4, 2, 1]), 0.0, False)
    with pytest.raises(ValueError, match="must list every row of x once"):
        reference.segment_softmax_rows(x, indptr, torch.tensor([0, 1, 2, 1]), 0.0, False)
