"""graphloc.scatter against torch's scatter_reduce, and torch_scatter when importable."""

import importlib.util

import pytest
import torch
from helpers import requires_ext
from hypothesis import given, settings
from hypothesis import strategies as st

import graphloc.scatter as gs

pytestmark = requires_ext
REDUCES = ["sum", "mean", "max", "min"]


def torch_scatter_oracle(src, index, dim, dim_size, reduce):
    """torch's scatter_reduce with torch_scatter's conventions (empty outputs are 0)."""
    index = index.view([-1 if d == dim else 1 for d in range(src.dim())]).expand_as(src)
    shape = list(src.shape)
    shape[dim] = dim_size
    mode = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce]
    return src.new_zeros(shape).scatter_reduce(dim, index, src, mode, include_self=False)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 200), dim_size=st.integers(1, 30), channels=st.integers(1, 5),
       dim=st.sampled_from([0, 1, -1]), reduce=st.sampled_from(REDUCES),
       seed=st.integers(0, 10_000))
def test_scatter_matches_torch(size, dim_size, channels, dim, reduce, seed):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randn(size, channels, 3, generator=gen, dtype=torch.float64).movedim(0, dim)
    index = torch.randint(0, dim_size, (size,), generator=gen)
    out = gs.scatter(src, index, dim=dim, dim_size=dim_size, reduce=reduce)
    torch.testing.assert_close(out, torch_scatter_oracle(src, index, dim % 3, dim_size, reduce))


@pytest.mark.parametrize("fn", [gs.scatter_max, gs.scatter_min])
def test_scatter_arg_points_at_the_winner(fn):
    src = torch.tensor([[1.0, 5.0], [3.0, -1.0], [2.0, 7.0], [0.5, 0.0]])
    index = torch.tensor([1, 1, 3, 1])
    out, arg = fn(src, index, dim=0, dim_size=4)
    winners = src.gather(0, arg.clamp(max=3))
    torch.testing.assert_close(out[[1, 3]], winners[[1, 3]])
    assert (arg[[0, 2]] == 4).all()  # empty outputs: the sentinel src.size(dim)
    assert (out[[0, 2]] == 0).all()


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_gradcheck(reduce):
    src = torch.randn(20, 3, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 6, (20,))
    assert torch.autograd.gradcheck(
        lambda s: gs.scatter(s, index, dim=0, dim_size=7, reduce=reduce), (src,))


def test_scatter_full_index_per_element():
    src = torch.randn(6, 4, dtype=torch.float64)
    index = torch.randint(0, 3, (6, 4))  # differs along dim 1: the elementwise path
    for reduce in REDUCES:
        mode = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce]
        expected = src.new_zeros(3, 4).scatter_reduce(0, index, src, mode, include_self=False)
        torch.testing.assert_close(gs.scatter(src, index, 0, dim_size=3, reduce=reduce),
                                   expected)
    out, arg = gs.scatter_max(src, index, 0, dim_size=3)
    hit = arg < 6
    torch.testing.assert_close(out[hit], src.gather(0, arg.clamp(max=5))[hit])


def test_segment_and_gather_csr():
    src = torch.randn(7, 2, dtype=torch.float64)
    indptr = torch.tensor([0, 3, 3, 7])
    torch.testing.assert_close(gs.segment_csr(src, indptr, reduce="sum"),
                               torch.stack([src[:3].sum(0), src.new_zeros(2), src[3:].sum(0)]))
    out, arg = gs.segment_max_csr(src, indptr)
    torch.testing.assert_close(out[2], src[3:].max(0).values)
    torch.testing.assert_close(gs.segment_csr(src, indptr, reduce="max"), out)  # values only
    assert arg[1].tolist() == [7, 7]
    rows = torch.randn(3, 2)
    torch.testing.assert_close(gs.gather_csr(rows, indptr), rows[[0, 0, 0, 2, 2, 2, 2]])


def test_scatter_softmax_and_log_softmax():
    src = torch.randn(10, 3, dtype=torch.float64)
    index = torch.tensor([0, 1, 0, 2, 2, 2, 1, 0, 4, 4])
    soft = gs.scatter_softmax(src, index, dim=0)
    log_soft = gs.scatter_log_softmax(src, index, dim=0)
    for group in index.unique():
        mask = index == group
        torch.testing.assert_close(soft[mask], torch.softmax(src[mask], 0))
        torch.testing.assert_close(log_soft[mask], torch.log_softmax(src[mask], 0))


@pytest.mark.skipif(importlib.util.find_spec("torch_scatter") is None,
                    reason="torch_scatter is not installed")
@pytest.mark.parametrize("reduce", REDUCES)
def test_parity_with_torch_scatter(reduce):
    import torch_scatter

    src = torch.randn(300, 8)
    index = torch.randint(0, 40, (300,))
    torch.testing.assert_close(gs.scatter(src, index, 0, dim_size=45, reduce=reduce),
                               torch_scatter.scatter(src, index, 0, dim_size=45, reduce=reduce))
    if reduce in ("max", "min"):
        fn = getattr(torch_scatter, f"scatter_{reduce}")
        ours = getattr(gs, f"scatter_{reduce}")(src, index, 0, dim_size=45)
        torch.testing.assert_close(ours[1], fn(src, index, 0, dim_size=45)[1])


def test_scatter_bad_input():
    src = torch.randn(4, 2)
    with pytest.raises(ValueError, match="holds 9 but dim_size is 3"):
        gs.scatter(src, torch.tensor([0, 1, 9, 2]), 0, dim_size=3)
    with pytest.raises(ValueError, match="holds -2"):
        gs.scatter(src, torch.tensor([0, 1, -2, 2]), 0)
    with pytest.raises(TypeError, match="integer tensor"):
        gs.scatter(src, torch.tensor([0.0, 1.0, 1.0, 0.0]), 0)
    with pytest.raises(ValueError, match="index has 3 entries but src has 4"):
        gs.scatter(src, torch.tensor([0, 1, 1]), 0)
    with pytest.raises(ValueError, match="reduce must be one of"):
        gs.scatter(src, torch.tensor([0, 1, 1, 0]), 0, reduce="median")
    with pytest.raises(ValueError, match="non-decreasing"):
        gs.segment_csr(src, torch.tensor([0, 3, 1, 4]))
    with pytest.raises(ValueError, match=r"runs from 0 to 5, outside src's 0 \.\. 4"):
        gs.segment_csr(src, torch.tensor([0, 2, 5]))


def test_out_takes_part_like_torch_scatter():
    src = torch.tensor([[1.0], [4.0], [2.0]])
    index = torch.tensor([0, 0, 2])
    out = torch.tensor([[10.0], [5.0], [0.0]])
    assert gs.scatter(src, index, 0, out=out.clone()).view(-1).tolist() == [15.0, 5.0, 2.0]
    result, arg = gs.scatter_max(src, index, 0, out=out.clone())
    assert result.view(-1).tolist() == [10.0, 5.0, 2.0]  # out's 10 beats 1 and 4
    assert arg.view(-1).tolist() == [3, 3, 2]  # 3 = src.size(0): no element of src won
    result, arg = gs.scatter_min(src, index, 0, out=out.clone())
    assert result.view(-1).tolist() == [1.0, 5.0, 0.0] and arg.view(-1).tolist() == [0, 3, 3]
    mean = gs.scatter_mean(src, index, 0, out=out.clone())
    assert mean.view(-1).tolist() == [7.5, 5.0, 2.0]  # (10 + 1 + 4) / 2, as torch_scatter
    target = out.clone()
    assert gs.scatter(src, index, 0, out=target) is target


def test_scatter_arguments_are_never_reinterpreted():
    src, index = torch.randn(3, 4), torch.tensor([0, 1, 0])
    for dim in (2, -3):  # torch would refuse both; a modulo would wrap them
        with pytest.raises(ValueError, match=rf"dim={dim} is out of range for src with 2 "):
            gs.scatter(src, index, dim=dim)
    with pytest.raises(ValueError, match="src is a 0-d tensor"):
        gs.scatter(torch.tensor(1.0), torch.tensor(0))
    with pytest.raises(ValueError, match=r"out has shape \[5\] but must match src's shape"):
        gs.scatter(src, index, dim=0, out=torch.zeros(5))
    with pytest.raises(ValueError, match="dim_size must be an integer >= 0, got 2.5"):
        gs.scatter(src, index, dim=0, dim_size=2.5)
    with pytest.raises(ValueError, match="index holds -1"):
        gs.scatter(src, torch.tensor([0, -1, 0]), dim=0)


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("api", ["scatter", "segment_csr"])
def test_float16_max_and_min_have_gradients(api, reduce):
    """The float16 reductions ran forward, but their backward stopped in the routing kernel
    ("x must be float32, float64 or bfloat16")."""
    gen = torch.Generator().manual_seed(0)
    # distinct: no ties; none 0, which torch's amin backward ties with its zero base
    src = (torch.randperm(600, generator=gen) + 1).view(200, 3).half()
    index = torch.sort(torch.randint(0, 20, (200,), generator=gen)).values
    grad = torch.randn(20, 3, generator=gen).half()
    ours = src.clone().requires_grad_()
    if api == "scatter":
        out = gs.scatter(ours, index, 0, dim_size=20, reduce=reduce)
    else:
        indptr = torch.cat([torch.zeros(1, dtype=torch.long),
                            torch.bincount(index, minlength=20).cumsum(0)])
        out = gs.segment_csr(ours, indptr, reduce=reduce)
    out.backward(grad)
    theirs = src.float().requires_grad_()
    torch_scatter_oracle(theirs, index, 0, 20, reduce).backward(grad.float())
    assert ours.grad.dtype == torch.float16
    torch.testing.assert_close(ours.grad, theirs.grad.half(), rtol=0, atol=0)


def _call_of(name):
    """A torch_scatter call of each public function: (args, kwargs) on small inputs."""
    src = torch.tensor([[1.0, -2.0, 3.0, 0.5, 4.0], [0.0, 2.0, -1.0, 5.0, 1.0]])
    index = torch.tensor([0, 2, 0, 1, 2])
    indptr = torch.tensor([0, 2, 2, 5])
    if name.startswith("segment") and name.endswith("csr") or name == "gather_csr":
        return (src.t() if name != "gather_csr" else src.t()[:3], indptr), {}  # dim 0
    if name.endswith("coo"):
        sorted_index = torch.tensor([0, 0, 1, 2, 2])
        return (src if name != "gather_coo" else src[:, :3], sorted_index.expand(2, 5)), {}
    if name == "scatter":
        return (src, index), {"dim": 1, "reduce": "max"}
    if name in ("scatter_softmax", "scatter_log_softmax"):
        return (src, index), {"dim": 1}
    return (src, index), {"dim": 1, "dim_size": 4}


@pytest.mark.parametrize("name", gs.__all__)
def test_each_function_takes_torch_jit_script_as_torch_scatters(name):
    """torch_scatter's functions are TorchScript functions and its own tests script them
    (400 of its 1,387 failed on graphloc.scatter before). Scripted, each gives its eager
    result; a user's scripted function calling it compiles and runs too."""
    function = getattr(gs, name)
    args, kwargs = _call_of(name)
    eager = function(*args, **kwargs)
    scripted = torch.jit.script(function)(*args, **kwargs)
    for got, want in zip(scripted if isinstance(scripted, tuple) else (scripted,),
                         eager if isinstance(eager, tuple) else (eager,), strict=True):
        assert torch.equal(got, want)


def _user_function(src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return gs.scatter_max(src, index, 0, None, 3)[0] + gs.scatter(src, index, 0, reduce="mean")


def test_a_scripted_user_function_runs_and_says_why_it_cannot_be_saved(tmp_path):
    src, index = torch.randn(6, 2), torch.tensor([0, 1, 1, 2, 0, 2])
    scripted = torch.jit.script(_user_function)
    torch.testing.assert_close(scripted(src, index), _user_function(src, index))
    with pytest.raises(RuntimeError, match="Could not export Python function call"):
        torch.jit.save(scripted, str(tmp_path / "model.pt"))


def test_scatter_std_unbiased_refuses_a_string_by_name():
    """unbiased="False" gave the unbiased estimate, quietly (2026-12-07)."""
    with pytest.raises(TypeError, match="scatter_std: unbiased must be True or False, got "
                                        "'False'"):
        gs.scatter_std(torch.randn(3, 2), torch.tensor([0, 0, 1]), 0, unbiased="False")
