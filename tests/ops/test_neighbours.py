"""knn, knn_graph, radius, radius_graph and nearest against a brute-force oracle in Python
floats, by the kernel's KD-tree and by the pure-torch twin (each must return the oracle's
neighbours, ties, NaN and infinities included), PyG's edge direction; farthest point
sampling against a step-by-step oracle; named errors."""

import math

import pytest
import torch
from helpers import brute_force_neighbours, pointers

from graphloc.ops import (
    fps,
    knn,
    knn_graph,
    nearest,
    neighbours,
    radius,
    radius_graph,
    reference,
)
from graphloc.ops._library import HAS_EXTENSION, kernels

BACKENDS = ["kernel", "twin"] if HAS_EXTENSION else ["twin"]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    """The search run by the KD-tree kernel, or by the pure-torch twin as without the
    extension."""
    if request.param == "twin":
        monkeypatch.setattr(neighbours, "HAS_EXTENSION", False)
    return request.param


def _case(seed: int):
    """Points and queries in up to three examples (some empty), of 1 to 12 coordinates:
    whole numbers (many equal distances) every third case, a NaN point, an infinite
    coordinate and a NaN query in some."""
    gen = torch.Generator().manual_seed(seed)
    width = [1, 2, 3, 5, 12][seed % 5]
    n, m = (int(v) for v in torch.randint(0, 60, (2,), generator=gen))
    examples = int(torch.randint(1, 4, (), generator=gen))
    x = torch.randn(n, width, generator=gen)
    y = torch.randn(m, width, generator=gen)
    if seed % 3 == 0:
        x, y = x.mul(1.5).round(), y.mul(1.5).round()
    if seed % 4 == 1 and n:
        x[int(torch.randint(0, n, (), generator=gen))] = math.nan
    if seed % 5 == 2 and n:
        x[int(torch.randint(0, n, (), generator=gen)), 0] = math.inf
    if seed % 7 == 3 and m:
        y[int(torch.randint(0, m, (), generator=gen)), -1] = math.nan
    batch_x = torch.randint(0, examples, (n,), generator=gen).sort().values
    batch_y = torch.randint(0, examples, (m,), generator=gen).sort().values
    k = int(torch.randint(1, 9, (), generator=gen))
    return x, y, batch_x, batch_y, examples, k


@pytest.mark.parametrize("seed", range(40))
def test_knn_is_the_brute_force_ranking(seed, backend):
    x, y, batch_x, batch_y, examples, k = _case(seed)
    want = brute_force_neighbours(x, y, k, pointers(batch_x, examples),
                                  pointers(batch_y, examples))
    assert torch.equal(knn(x, y, k, batch_x, batch_y, batch_size=examples), want)


@pytest.mark.parametrize("seed", range(40))
def test_knn_graph_without_loops_is_each_points_k_others(seed, backend):
    x, _, batch, _, examples, k = _case(seed)
    ptr = pointers(batch, examples)
    want = brute_force_neighbours(x, x, k, ptr, ptr, exclude_self=True)
    assert torch.equal(knn_graph(x, k, batch, flow="target_to_source"), want)
    assert torch.equal(knn_graph(x, k, batch), want.flip(0))  # PyG's default direction
    with_loops = brute_force_neighbours(x, x, k, ptr, ptr)
    assert torch.equal(knn_graph(x, k, batch, loop=True), with_loops.flip(0))


@pytest.mark.parametrize("seed", range(40))
def test_radius_is_the_nearest_within_r(seed, backend):
    x, y, batch_x, batch_y, examples, k = _case(seed)
    r = [0.5, 1.0, 1.5, 2.5][seed % 4]
    want = brute_force_neighbours(x, y, k, pointers(batch_x, examples),
                                  pointers(batch_y, examples), within=r * r)
    got = radius(x, y, r, batch_x, batch_y, max_num_neighbors=k, batch_size=examples)
    assert torch.equal(got, want)
    ptr = pointers(batch_x, examples)
    graph = brute_force_neighbours(x, x, k, ptr, ptr, exclude_self=True, within=r * r)
    assert torch.equal(radius_graph(x, r, batch_x, max_num_neighbors=k), graph.flip(0))


def test_radius_excludes_a_point_at_exactly_r():
    x = torch.tensor([[0.0], [1.0], [2.0]])
    assert radius(x, x[:1], 1.0).tolist() == [[0], [0]]
    assert radius(x, x[:1], 1.0 + 1e-9).tolist() == [[0, 0], [0, 1]]


def test_equal_distances_go_to_the_lower_index(backend):
    # a query at the centre of a square: its four corners tie, twice over
    corners = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])
    x = torch.cat([corners, corners])
    assert knn(x, torch.zeros(1, 2), 3).tolist() == [[0, 0, 0], [0, 1, 2]]
    assert knn(x.flip(0), torch.zeros(1, 2), 3).tolist() == [[0, 0, 0], [0, 1, 2]]


def test_nan_and_infinite_distances_rank_last(backend):
    x = torch.tensor([[math.nan], [math.inf], [5.0], [-1.0]])
    assert knn(x, torch.zeros(1, 1), 4).tolist() == [[0] * 4, [3, 2, 1, 0]]
    # a NaN query has only NaN distances: its example's first points
    assert knn(x, torch.tensor([[math.nan]]), 2).tolist() == [[0, 0], [0, 1]]
    # within a radius, neither is anybody's neighbour
    assert radius(x, torch.zeros(1, 1), 100.0).tolist() == [[0, 0], [3, 2]]


def test_cosine_ranks_by_one_minus_the_cosine(backend):
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(40, 6, generator=gen), torch.randn(9, 6, generator=gen)
    x[5] = 0.0  # no direction: NaN, last
    got = knn(x, y, 40, cosine=True).view(2, 9, 40)
    for i in range(9):
        cos = [float(y[i] @ x[j]) / (float(y[i].norm()) * float(x[j].norm()))
               if j != 5 else math.nan for j in range(40)]
        want = sorted(range(40), key=lambda j: (math.isnan(cos[j]), 1 - cos[j]
                                                if not math.isnan(cos[j]) else 0, j))
        assert got[1, i].tolist() == want


def test_the_twins_blocks_pack_and_cut_examples(monkeypatch):
    """Small blocks: several examples padded into one, a large one cut into row chunks."""
    gen = torch.Generator().manual_seed(5)
    batch = torch.tensor([0] * 3 + [1] * 40 + [2] * 2 + [4] * 7)
    x = torch.randn(batch.numel(), 3, generator=gen).round()
    ptr = torch.tensor(pointers(batch, 5))
    want = brute_force_neighbours(x, x, 5, ptr.tolist(), ptr.tolist(), exclude_self=True)
    for block in (40, 100, 400):
        monkeypatch.setattr(reference, "_KNN_BLOCK", block)
        got = reference.knn(x.double(), x.double(), ptr, ptr, 5, True, math.inf)
        assert torch.equal(_pairs(got), want)


@pytest.mark.skipif(not HAS_EXTENSION, reason="the kernel needs the extension")
@pytest.mark.parametrize("width", [2, 3, 24])
def test_the_kernels_tree_is_the_twins_scan_on_a_large_cloud(width):
    gen = torch.Generator().manual_seed(width)
    x = torch.randn(4000, width, generator=gen, dtype=torch.float64)
    x[::7] = x[::7].round()  # repeated points and equal distances
    y = torch.cat([x[:300], torch.randn(200, width, generator=gen, dtype=torch.float64)])
    ptr_x, ptr_y = torch.tensor([0, 4000]), torch.tensor([0, 500])
    for k, within in ((10, math.inf), (50, 0.5 * width)):
        assert torch.equal(kernels.knn(x, y, ptr_x, ptr_y, k, False, within),
                           reference.knn(x, y, ptr_x, ptr_y, k, False, within))


def _pairs(nearest: torch.Tensor) -> torch.Tensor:
    found = nearest >= 0
    rows = torch.arange(nearest.size(0)).unsqueeze(1).expand_as(nearest)
    return torch.stack([rows[found], nearest[found]])


def test_empty_inputs_and_examples_without_points(backend):
    x, none = torch.randn(5, 2), torch.zeros(0, 2)
    assert knn(none, x, 3).shape == (2, 0)
    assert knn(x, none, 3).shape == (2, 0)
    assert knn_graph(none, 3).shape == (2, 0)
    assert radius_graph(none, 1.0).shape == (2, 0)
    # queries of example 1 have no points there; example 2 exists only in y
    got = knn(x, x[:3], 2, torch.tensor([0, 0, 0, 0, 0]), torch.tensor([0, 1, 2]))
    assert got.tolist() == brute_force_neighbours(x, x[:3], 2, [0, 5, 5, 5],
                                                  [0, 1, 2, 3]).tolist()


def test_inputs_of_any_real_dtype_and_one_dimension(backend):
    x = torch.tensor([3, 0, 7, 1])
    want = knn(x.double().view(-1, 1), x.double().view(-1, 1), 2)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64):
        assert torch.equal(knn(x.to(dtype), x.to(dtype), 2), want)
    points = torch.randn(6, 3, requires_grad=True)  # (no gradient flows through a search)
    assert not knn_graph(points, 2).requires_grad


@pytest.mark.parametrize("call, message", [
    (lambda x, b: knn(x, x, 0), "k must be an integer >= 1, got 0"),
    (lambda x, b: knn(x, x, 2.0), "k must be an integer >= 1, got 2.0"),
    (lambda x, b: knn(x, x[:, :2], 2), "x has 3 features per point but y has 2"),
    (lambda x, b: knn(x.view(2, 3, 3), x, 2), r"x must be \[num_points, num_features\]"),
    (lambda x, b: knn(x > 0, x, 2), "x must hold real coordinates"),
    (lambda x, b: knn([[0.0]], x, 2), "x must be a tensor of points, got list"),
    (lambda x, b: knn(x, x, 2, b.flip(0), b),
     r"batch_x must be sorted .*row 3 has example 0 after 1"),
    (lambda x, b: knn(x, x, 2, b, b[:4]), r"batch_y must hold one example id per row \(6\)"),
    (lambda x, b: knn(x, x, 2, b.float(), b), "batch_x must be an integer tensor"),
    (lambda x, b: knn(x, x, 2, b - 1, b), "batch_x holds -1; example ids must be >= 0"),
    (lambda x, b: knn(x, x, 2, b, b, batch_size=1), "batch_size is 1 but an example id is 1"),
    (lambda x, b: knn_graph(x, 2, b, loop="no"), "loop must be True or False"),
    (lambda x, b: knn_graph(x, 2, b, flow="both"), "flow must be 'source_to_target'"),
    (lambda x, b: knn_graph(x, 2, b, b), "loop must be True or False, got tensor"),
    (lambda x, b: radius(x, x, -1.0), "r must be a number >= 0, got -1.0"),
    (lambda x, b: radius(x, x, math.nan), "r must be a number >= 0, got nan"),
    (lambda x, b: radius(x, x, 1.0, max_num_neighbors=0),
     "max_num_neighbors must be an integer >= 1, got 0"),
    (lambda x, b: radius_graph(x, 1.0, num_workers=0),
     "num_workers must be an integer >= 1, got 0"),
])
def test_bad_arguments_are_named(call, message):
    x = torch.randn(6, 3)
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    with pytest.raises((ValueError, TypeError), match=message):
        call(x, batch)


@pytest.mark.skipif(not HAS_EXTENSION, reason="the kernel needs the extension")
@pytest.mark.parametrize("ptr_x, ptr_y, k, message", [
    ([0, 3, 2, 4], [0, 1, 2, 3], 2, "ptr_x must not decrease, got 3 then 2"),
    ([0, 2, 5], [0, 1, 3], 2, "ptr_x must run from 0 to 4"),
    ([0, 4], [1, 3], 2, "ptr_y must run from 0 to 3"),
    ([0, 2, 4], [0, 3], 2, "ptr_x has 2 examples but ptr_y has 1"),
    ([0, 4], [0, 3], 0, "k must be >= 1, got 0"),
])
def test_the_kernel_checks_the_ranges_it_reads(ptr_x, ptr_y, k, message):
    x, y = torch.randn(4, 2, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=message):
        kernels.knn(x, y, torch.tensor(ptr_x), torch.tensor(ptr_y), k, False, math.inf)
    with pytest.raises(RuntimeError, match="exclude_self needs x and y to be the same rows"):
        kernels.knn(x, y, torch.tensor([0, 4]), torch.tensor([0, 3]), 1, True, math.inf)


@pytest.mark.parametrize("seed", range(12))
def test_nearest_is_each_points_closest_in_its_example(seed, backend):
    x, y, batch_x, batch_y, examples, _ = _case(seed)
    keep = torch.isin(batch_x, batch_y)  # (every example of x needs points in y)
    x, batch_x = x[keep], batch_x[keep]
    want = brute_force_neighbours(y, x, 1, pointers(batch_y, examples),
                                  pointers(batch_x, examples))[1]
    assert torch.equal(nearest(x, y, batch_x, batch_y), want)


def test_nearest_refuses_an_example_without_points_in_y():
    x, y = torch.randn(4, 2), torch.randn(2, 2)
    with pytest.raises(ValueError, match="example 1 has points in x but none in y"):
        nearest(x, y, torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0]))


def _farthest_point_oracle(points: list, count: int, first: int) -> list:
    """Farthest point sampling step by step in Python floats: each step the point farthest
    from those taken (the lowest index among equals)."""
    def squared(a, b):
        return sum((u - v) ** 2 for u, v in zip(a, b, strict=True))
    taken = [first]
    nearest_taken = [squared(p, points[first]) for p in points]
    while len(taken) < count:
        best = max(range(len(points)), key=lambda j: (nearest_taken[j], -j))
        taken.append(best)
        nearest_taken = [min(d, squared(p, points[best])) for d, p in zip(
            nearest_taken, points, strict=True)]
    return taken


@pytest.mark.parametrize("ratio", [0.25, 0.5, 1.0])
def test_fps_is_the_step_by_step_oracle(ratio):
    gen = torch.Generator().manual_seed(7)
    sizes = [9, 1, 0, 23, 5]
    batch = torch.cat([torch.full((n,), b) for b, n in enumerate(sizes)])
    x = torch.randint(-3, 4, (batch.numel(), 3), generator=gen).double()  # many ties
    got = fps(x, batch, ratio=ratio, random_start=False)
    want, start = [], 0
    for n in sizes:
        count = math.ceil(n * ratio)
        if count:
            want += [start + j for j in _farthest_point_oracle(x[start:start + n].tolist(),
                                                               count, 0)]
        start += n
    assert got.tolist() == want


def test_fps_random_start_draws_from_torchs_generator():
    x, batch = torch.randn(40, 3), torch.arange(4).repeat_interleave(10)
    torch.manual_seed(3)
    first = fps(x, batch, ratio=0.3)
    torch.manual_seed(3)
    assert torch.equal(fps(x, batch, ratio=0.3), first)
    assert first.numel() == 12 and torch.equal(batch[first], torch.arange(4).repeat_interleave(3))
    starts = [_farthest_point_oracle(x[b * 10:b * 10 + 10].tolist(), 3,
                                     int(first[3 * b]) - 10 * b) for b in range(4)]
    assert first.tolist() == [10 * b + j for b, picks in enumerate(starts) for j in picks]


@pytest.mark.parametrize("call, message", [
    (lambda x, b: fps(x, b, ratio=0.0), r"ratio must lie in \(0, 1\], got 0.0"),
    (lambda x, b: fps(x, b, ratio=1.5), r"ratio must lie in \(0, 1\]"),
    (lambda x, b: fps(x, b, ratio=torch.tensor([0.5, 0.5, 0.5])), "one per example \\(2\\)"),
    (lambda x, b: fps(x, b, ratio="half"), "ratio must be a number"),
    (lambda x, b: fps(x.long(), b), "x must be floating point"),
    (lambda x, b: fps(x, ptr=[0, 3, 2]), r"ptr must rise from 0 to 6"),
    (lambda x, b: fps(x, b.flip(0)), "batch must be sorted"),
    (lambda x, b: fps(x, b, random_start="yes"), "random_start must be True or False"),
])
def test_fps_bad_arguments_are_named(call, message):
    x, batch = torch.randn(6, 3), torch.tensor([0, 0, 0, 1, 1, 1])
    with pytest.raises((ValueError, TypeError), match=message):
        call(x, batch)
