"""torch_scatter's whole API in graphloc.scatter, each class against a brute-force oracle:
the dtypes torch_scatter takes, index broadcasting, N-D indptr, the coo variants, products,
std and logsumexp, empty inputs. The oracles loop over groups with plain torch ops."""

import itertools

import pytest
import torch
from helpers import requires_ext

import graphloc.scatter as gs
from graphloc.ops import reference
from graphloc.ops._library import kernels

pytestmark = requires_ext
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64]
REDUCES = ["sum", "mean", "max", "min", "mul"]


def group_oracle(values, reduce, floor_mean=True):
    """One group's reduction with torch_scatter's conventions (empty: 0, or 1 for mul)."""
    if values.numel() == 0:
        return 1 if reduce == "mul" else 0
    v = values.double()
    if reduce == "sum":
        return v.sum().item()
    if reduce == "mul":
        return v.prod().item()
    if reduce == "max":
        return v.max().item()
    if reduce == "min":
        return v.min().item()
    mean = v.sum().item() / v.numel()
    if values.is_floating_point():
        return mean
    return float(torch.tensor(v.sum().item()).div(v.numel(), rounding_mode=(
        "floor" if floor_mean else "trunc")))


def scatter_oracle(src, index, dim, dim_size, reduce):
    """Loops over every output element: out[..., j, ...] reduces the src elements whose
    (broadcast) index is j at the same position in the other dimensions."""
    if index.dim() == 1:
        index = index.view([-1 if d == dim else 1 for d in range(src.dim())])
    else:
        index = index.view(*index.shape, *[1] * (src.dim() - index.dim()))
    index = index.expand_as(src)
    moved_src, moved_idx = src.movedim(dim, -1), index.movedim(dim, -1)
    out = torch.zeros(*moved_src.shape[:-1], dim_size, dtype=torch.float64)
    for pos in itertools.product(*[range(n) for n in moved_src.shape[:-1]]):
        for j in range(dim_size):
            out[pos + (j,)] = group_oracle(moved_src[pos][moved_idx[pos] == j], reduce)
    return out.movedim(-1, dim)


def small_values(shape, dtype, gen):
    """Small integers, exact in every dtype (products of a few stay below 2**11)."""
    return torch.randint(-4, 5, shape, generator=gen).to(dtype)


@pytest.mark.parametrize("dtype,reduce", list(itertools.product(DTYPES, REDUCES)))
def test_every_dtype_and_reduction(dtype, reduce):
    gen = torch.Generator().manual_seed(0)
    src = small_values((3, 7, 2), dtype, gen)
    index = torch.randint(0, 5, (7,), generator=gen)
    out = gs.scatter(src, index, dim=1, dim_size=6, reduce=reduce)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), scatter_oracle(src, index, 1, 6, reduce))


@pytest.mark.parametrize("reduce", REDUCES)
def test_index_broadcasts_like_torch_scatter(reduce):
    gen = torch.Generator().manual_seed(1)
    src = torch.randn(2, 3, 4, 5, generator=gen, dtype=torch.float64)
    for index in (torch.randint(0, 4, (2, 1, 4, 5), generator=gen),  # size-1 dims expand
                  torch.randint(0, 4, (2, 3, 4), generator=gen),     # trailing dims added
                  torch.randint(0, 4, (4,), generator=gen)):         # 1-D along dim
        out = gs.scatter(src, index, dim=2, dim_size=4, reduce=reduce)
        torch.testing.assert_close(out, scatter_oracle(src, index, 2, 4, reduce))


def test_index_that_cannot_broadcast_is_named():
    with pytest.raises(ValueError, match=r"index of shape \[2, 3\] does not broadcast against "
                                         r"src of shape \[2, 4, 5\] \(dimension 1: 3 vs 4\)"):
        gs.scatter(torch.randn(2, 4, 5), torch.zeros(2, 3, dtype=torch.long), dim=1)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_segment_csr_with_nd_indptr(reduce):
    gen = torch.Generator().manual_seed(2)
    src = torch.randn(2, 6, 3, generator=gen, dtype=torch.float64)
    indptr = torch.tensor([[0, 2, 2, 5], [1, 3, 4, 4]])  # row 1 skips position 0 and 4..5
    out = gs.segment_csr(src, indptr, reduce=reduce)
    expected = torch.zeros(2, 3, 3, dtype=torch.float64)
    for b, r, c in itertools.product(range(2), range(3), range(3)):
        expected[b, r, c] = group_oracle(src[b, indptr[b, r]:indptr[b, r + 1], c], reduce)
    torch.testing.assert_close(out, expected)
    if reduce in ("max", "min"):
        values, arg = getattr(gs, f"segment_{reduce}_csr")(src, indptr)
        assert arg[0, 1].tolist() == [6, 6, 6]  # an empty segment: src.size(dim)
        hit = arg < 6
        torch.testing.assert_close(values[hit], src.gather(1, arg.clamp(max=5))[hit])


def test_segment_csr_gradients_through_batches():
    src = torch.randn(2, 5, 2, dtype=torch.float64, requires_grad=True)
    indptr = torch.tensor([[0, 2, 5], [1, 1, 4]])
    for reduce in ("sum", "mean", "max", "min"):
        assert torch.autograd.gradcheck(lambda s, r=reduce: gs.segment_csr(s, indptr, reduce=r),
                                        (src,))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_csr_and_gather_coo(dtype):
    gen = torch.Generator().manual_seed(3)
    src = small_values((2, 3, 2), dtype, gen)
    indptr = torch.tensor([[0, 1, 1, 4], [0, 2, 3, 4]])
    out = gs.gather_csr(src, indptr)
    for b in range(2):
        repeats = indptr[b, 1:] - indptr[b, :-1]
        torch.testing.assert_close(out[b], src[b].repeat_interleave(repeats, dim=0))
    index = torch.tensor([[0, 2, 2, 1], [1, 1, 0, 2]])
    expected = src.gather(1, index.unsqueeze(-1).expand(2, 4, 2))
    torch.testing.assert_close(gs.gather_coo(src, index), expected)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_segment_coo_is_scatter_along_the_index_dim(reduce):
    gen = torch.Generator().manual_seed(4)
    src = torch.randn(2, 6, 3, generator=gen, dtype=torch.float64)
    index = torch.tensor([[0, 0, 1, 3, 3, 3], [0, 2, 2, 2, 4, 4]])
    out = gs.segment_coo(src, index, reduce=reduce)
    torch.testing.assert_close(out, scatter_oracle(src, index, 1, 5, reduce))
    assert torch.autograd.gradcheck(
        lambda s: gs.segment_coo(s, index, reduce=reduce),
        (src.clone().requires_grad_(),))


def test_products_and_their_gradient_with_zeros():
    src = torch.tensor([2.0, 0.0, 3.0, 0.0, 0.0, 5.0, 4.0], dtype=torch.float64,
                       requires_grad=True)
    index = torch.tensor([0, 0, 0, 1, 1, 2, 2])  # one zero, two zeros, none
    out = gs.scatter_mul(src, index, dim_size=4)
    assert out.tolist() == [0.0, 0.0, 20.0, 1.0]  # an empty product is 1
    grad = torch.autograd.grad(out, src, torch.tensor([1.0, 1.0, 1.0, 1.0],
                                                      dtype=torch.float64))[0]
    expected = torch.autograd.grad(  # torch's own prod gradient, exact with zeros
        torch.ones(4, dtype=torch.float64).scatter_reduce(0, index, src, "prod"),
        src, torch.ones(4, dtype=torch.float64))[0]
    torch.testing.assert_close(grad, expected)
    assert torch.autograd.gradcheck(lambda s: gs.scatter_mul(s, index, dim_size=4), (src,))


def test_integer_means_round_as_torch_scatter():
    src = torch.tensor([-7, 2, 5])
    # scatter_mean floors (torch_scatter's Python division); segment_csr truncates (its C++)
    assert gs.scatter_mean(src, torch.tensor([0, 0, 1])).tolist() == [-3, 5]
    assert gs.segment_csr(src, torch.tensor([0, 2, 3]), reduce="mean").tolist() == [-2, 5]


SMALL_INTS = [torch.int8, torch.uint8, torch.int16]
TORCH_REDUCE = {"sum": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _wide_range_values(shape, dtype, gen):
    """Integers over the whole range of ``dtype``, so sums and products wrap around."""
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max + 1, shape, generator=gen).to(dtype)


def _torch_scatter_reduce(src, index, dim_size, reduce):
    """torch's own scatter_reduce in src's dtype (its wraparound), along dim 1; an empty
    group gets 0 (1 for a product), as torch_scatter's."""
    start = torch.ones if reduce == "mul" else torch.zeros
    out = start(src.size(0), dim_size, src.size(2), dtype=src.dtype)
    expanded = index.view(1, -1, 1).expand_as(src)
    return out.scatter_reduce(1, expanded, src, TORCH_REDUCE[reduce], include_self=False)


@pytest.mark.parametrize("dtype,reduce", list(itertools.product(SMALL_INTS, REDUCES)))
def test_int8_uint8_and_int16_reduce_as_torch_does(dtype, reduce):
    """torch_scatter takes int8, uint8 and int16; graphloc refused them ("src must be a
    float32, ..., int32 or int64 tensor"). Sums and products wrap around as torch's own
    scatter_reduce in that dtype; a mean is the exact mean, rounded down (scatter) or
    toward zero (segment_csr), as the wider integers' are."""
    gen = torch.Generator().manual_seed(11)
    src = _wide_range_values((2, 40, 3), dtype, gen)
    index = torch.randint(0, 5, (40,), generator=gen)  # slot 5 stays empty
    got = gs.scatter(src, index, dim=1, dim_size=6, reduce=reduce)
    assert got.dtype == dtype
    if reduce == "mean":
        expected = scatter_oracle(src, index, 1, 6, "mean").to(dtype)  # exact, floored
    else:
        expected = _torch_scatter_reduce(src, index, 6, reduce)
    assert torch.equal(got, expected)
    if reduce == "mul":  # segments take no products (nor do torch_scatter's)
        return
    order = index.argsort(stable=True)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long),
                        torch.bincount(index, minlength=6).cumsum(0)])
    segments = gs.segment_csr(src[:, order], indptr.view(1, -1), reduce=reduce)
    if reduce == "mean":
        sums = scatter_oracle(src, index, 1, 6, "sum")
        counts = torch.bincount(index, minlength=6).clamp(min=1).view(1, -1, 1)
        expected = torch.div(sums, counts, rounding_mode="trunc").to(dtype)
    assert torch.equal(segments, expected)
    assert torch.equal(gs.segment_coo(src[:, order], index[order].view(1, -1), dim_size=6,
                                      reduce=reduce), got if reduce != "mean" else
                       scatter_oracle(src, index, 1, 6, "mean").to(dtype))


def test_int8_uint8_and_int16_args_gathers_and_out():
    """The arg of a max or min, the gathers, and ``out=`` written in place in its dtype."""
    gen = torch.Generator().manual_seed(12)
    for dtype in SMALL_INTS:
        src = _wide_range_values((30,), dtype, gen)
        index = torch.randint(0, 4, (30,), generator=gen)
        wide_max, wide_arg = gs.scatter_max(src.long(), index, dim_size=5)
        small_max, small_arg = gs.scatter_max(src, index, dim_size=5)
        assert torch.equal(small_max, wide_max.to(dtype)) and torch.equal(small_arg, wide_arg)
        assert torch.equal(gs.gather_coo(src[:4], index.sort()[0]), src[:4][index.sort()[0]])
        indptr = torch.tensor([0, 3, 3, 10, 30])
        assert torch.equal(gs.gather_csr(src[:4], indptr),
                           src[:4].repeat_interleave(indptr.diff()))
        out = _wide_range_values((4,), dtype, gen)
        expected = out.scatter_reduce(0, index, src, "sum", include_self=True)
        returned = gs.scatter_sum(src, index, out=out)
        assert returned is out and torch.equal(out, expected)
        with pytest.raises(TypeError, match=f"out is torch.int64 but src is {dtype}"):
            gs.scatter_sum(src, index, out=out.long())
        with pytest.raises(ValueError, match=rf"out must be a {dtype} tensor of shape \[2\], "
                                             rf"got \(\[3\], {dtype}\)"):
            gs.segment_csr(src[:4], torch.tensor([0, 2, 4]), out=out[:3])


def test_std_against_torch():
    gen = torch.Generator().manual_seed(5)
    src = torch.randn(9, 2, generator=gen, dtype=torch.float64)
    index = torch.tensor([0, 2, 0, 2, 2, 0, 3, 2, 0])
    for unbiased in (True, False):
        out = gs.scatter_std(src, index, dim=0, unbiased=unbiased)
        for g in (0, 2):
            torch.testing.assert_close(out[g], src[index == g].std(0, unbiased=unbiased))
        assert out[1].tolist() == [0.0, 0.0]  # empty group
        assert out[3].tolist() == [0.0, 0.0]  # one element: 0 where torch gives NaN


def test_logsumexp_against_torch():
    src = torch.tensor([0.5, 0.5, 0.0, -2.1, 3.2, 7.0, -1.0, -100.0, float("-inf")])
    index = torch.tensor([0, 0, 1, 1, 1, 2, 4, 4, 5])
    out = gs.scatter_logsumexp(src, index)
    for g in (0, 1, 2, 4, 5):
        torch.testing.assert_close(out[g], torch.logsumexp(src[index == g], 0))
    assert out[3] == 0.0  # empty group
    assert out[5] == float("-inf")  # only -inf: as torch.logsumexp
    prior = torch.tensor([-10.0, -10.0])
    result = gs.scatter_logsumexp(torch.tensor([-1.0, -50.0]), torch.tensor([0, 0]), out=prior)
    torch.testing.assert_close(result, torch.stack([
        torch.logsumexp(torch.tensor([-10.0, -1.0, -50.0]), 0), torch.tensor(-10.0)]))


def test_empty_inputs_keep_shape_and_gradient():
    x = torch.randn(0, 0, 0, 16, dtype=torch.float64, requires_grad=True)
    index, indptr = torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)
    for out in (gs.scatter(x, index, dim=0, dim_size=0), gs.segment_coo(x, index, dim_size=0),
                gs.gather_coo(x, index), gs.segment_csr(x, indptr), gs.gather_csr(x, indptr)):
        assert out.shape == (0, 0, 0, 16)
        out.backward(torch.randn_like(out))
    src = torch.randn(0, 3)
    assert gs.scatter_mul(src, torch.tensor([], dtype=torch.long), 0, dim_size=2).tolist() == \
        [[1.0] * 3] * 2


def test_softmax_family_refuses_integers():
    for fn in (gs.scatter_softmax, gs.scatter_log_softmax, gs.scatter_logsumexp,
               gs.scatter_std):
        with pytest.raises(ValueError, match="floating-point tensors, got src of dtype "
                                             "torch.int64"):
            fn(torch.tensor([1, 2]), torch.tensor([0, 0]))


def test_bad_indptr_is_named():
    src = torch.randn(2, 5)
    with pytest.raises(ValueError, match=r"does not broadcast against src of shape \[2, 5\]"):
        gs.segment_csr(src, torch.tensor([[0, 5], [0, 5], [0, 5]]))
    with pytest.raises(ValueError, match=r"in row 1 indptr\[2\] = 1 < indptr\[1\] = 3"):
        gs.segment_csr(src, torch.tensor([[0, 2, 5], [0, 3, 1]]))
    with pytest.raises(ValueError, match="must run from 0 to 4 in every segment row, but row 1"):
        gs.gather_csr(torch.randn(2, 2), torch.tensor([[0, 1, 4], [1, 2, 4]]))
    with pytest.raises(TypeError, match="float16, int64, int32, int16, int8 or uint8 tensor, "
                                        "got torch.bool"):
        gs.scatter(torch.tensor([True, False]), torch.tensor([0, 0]))


@pytest.mark.parametrize("dtype,reduce", list(itertools.product(DTYPES, REDUCES)))
def test_kernels_and_reference_agree_on_every_dtype(dtype, reduce):
    gen = torch.Generator().manual_seed(6)
    src = small_values((9, 3), dtype, gen)
    indptr = torch.tensor([0, 2, 2, 6, 9])
    ours = kernels.segment_reduce(src, indptr, reduce)
    theirs = reference.segment_reduce(src, indptr, reduce)
    torch.testing.assert_close(ours[0], theirs[0])
    torch.testing.assert_close(ours[1].long(), theirs[1].long())


def _softmax_oracle(src, index, dim, eps, log):
    """Per (group, remaining position), in float64: exp(x - s) / sum, or x - (log(eps +
    sum(exp(x - s))) + s), s the group max; the index broadcast as torch_scatter's."""
    x = src.double().movedim(dim, -1)
    idx = index.reshape(*index.shape, *[1] * (src.dim() - index.dim())) if index.dim() > 1 \
        else index.reshape([-1 if d == dim else 1 for d in range(src.dim())])
    idx = idx.expand_as(src).movedim(dim, -1)
    out = torch.empty_like(x)
    for pos in itertools.product(*[range(n) for n in x.shape[:-1]]):
        for group in idx[pos].unique():
            mask = idx[pos] == group
            v = x[pos][mask]
            s = v.max()
            norm = torch.log(eps + (v - s).exp().sum()) + s
            out[pos + (mask,)] = v - norm if log else (v - norm).exp()
    return out.movedim(-1, dim)


@pytest.mark.parametrize("case", ["1-D index", "broadcast N-D index", "per-channel index"])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_family_against_groups(case, log):
    """Values against the per-group oracle, the gradient against autograd of torch's own
    (log_)softmax per group, and second derivatives by finite differences (gradgradcheck),
    on the row-gather path (an index along dim only) and the per-element gather path."""
    gen = torch.Generator().manual_seed(7)
    src = (torch.randn(3, 40, 5, generator=gen, dtype=torch.float64) * 5).requires_grad_()
    index = {"1-D index": torch.randint(0, 9, (40,), generator=gen),
             "broadcast N-D index": torch.randint(0, 9, (3, 40), generator=gen),
             "per-channel index": torch.randint(0, 9, (3, 40, 5), generator=gen)}[case]
    fn = gs.scatter_log_softmax if log else gs.scatter_softmax
    call = (lambda s: fn(s, index, dim=1, eps=0.0)) if log else (lambda s: fn(s, index, dim=1))
    out = call(src)
    torch.testing.assert_close(out, _softmax_oracle(src.detach(), index, 1, 0.0, log))
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    (grad,) = torch.autograd.grad(out, src, g)
    expand = index.reshape(*index.shape, *[1] * (3 - index.dim())) if index.dim() > 1 \
        else index.view(1, -1, 1)
    expand = expand.expand_as(src)
    want = torch.zeros_like(src)
    torch_fn = torch.log_softmax if log else torch.softmax
    for a, c in itertools.product(range(3), range(5)):
        for group in expand[a, :, c].unique():
            mask = expand[a, :, c] == group
            leaf = src.detach()[a, mask, c].requires_grad_()
            (want[a, mask, c],) = torch.autograd.grad(torch_fn(leaf, 0), leaf, g[a, mask, c])
    torch.testing.assert_close(grad, want)
    small = src.detach()[:, :12, :2].requires_grad_()
    if index.dim() == 1:
        small_index = index[:12]
    else:
        small_index = index[:, :12] if index.dim() == 2 else index[:, :12, :2]
    assert torch.autograd.gradgradcheck(
        lambda s: (fn(s, small_index, dim=1, eps=0.0) if log else fn(s, small_index, dim=1)),
        (small,))


def test_log_softmax_eps_and_masked_groups():
    """eps joins the sum after the shift, as torch_scatter's; a group of only -inf gives
    -inf (eps > 0) with the gradient passed through, and the softmax 0 with gradient 0."""
    src = torch.tensor([0.0, 1.0, float("-inf"), float("-inf"), 2.0],
                       dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 0, 1, 1, 0])
    out = gs.scatter_log_softmax(src, index, eps=0.25)
    torch.testing.assert_close(out[[0, 1, 4]], _softmax_oracle(src.detach()[[0, 1, 4]],
                                                               torch.zeros(3, dtype=torch.long),
                                                               0, 0.25, True))
    assert out[2] == out[3] == float("-inf")
    (grad,) = torch.autograd.grad(out, src, torch.ones(5, dtype=torch.float64))
    assert grad[2] == grad[3] == 1.0
    soft = gs.scatter_softmax(src, index)
    assert soft[2] == soft[3] == 0.0
    (grad,) = torch.autograd.grad(soft, src, torch.randn(5, dtype=torch.float64))
    assert grad[2] == grad[3] == 0.0


@pytest.mark.parametrize("fn", [gs.scatter_sum, gs.scatter_mean, gs.scatter_mul, gs.scatter_max,
                                gs.scatter_min, gs.scatter_std, gs.scatter_logsumexp],
                         ids=lambda f: f.__name__)
def test_an_index_past_out_names_out(fn):
    """With out=, out's size bounds the index; the error said "dim_size is 2", a size the
    caller never passed."""
    src, index = torch.ones(2, 3), torch.tensor([0, 2, 1])
    with pytest.raises(ValueError, match=r"index holds 2 but out has 2 entries along dim=1"):
        fn(src, index, dim=1, out=torch.zeros(2, 2))
    fn(src, index, dim=1, out=torch.zeros(2, 3))  # in range: runs
