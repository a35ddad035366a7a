"""Parity harness: a graphloc layer against its PyG twin with the same weights."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from helpers import brute_force_neighbours, oracle_spline_basis, random_edge_index

from graphloc import Graph
from graphloc.ops import spline_basis


def parity_graph(seed: int = 0):
    """30 nodes, ids drawn from the first 25 (so isolated nodes), with self-loops and
    parallel edges."""
    edge_index = random_edge_index(25, 120, seed=seed)
    return edge_index, 30


def graph_with_edge_features(seed: int = 0, n: int = 14, m: int = 50, width: int = 4,
                             edge_dim: int = 3, uniform: bool = False):
    """``(x [n, width], edge_index, edge_attr [E, edge_dim])`` in float64: parallel edges,
    loops, a hub and isolated nodes; edge features standard normal, or uniform in [0, 1)
    (pseudo-coordinates)."""
    edge_index = random_edge_index(n - 2, m, seed=seed, hub_degree=9)
    edge_index = torch.cat([edge_index, edge_index[:, :4]], 1)  # parallel edges
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, width, dtype=torch.float64, generator=gen)
    draw = torch.rand if uniform else torch.randn
    return x, edge_index, draw(edge_index.size(1), edge_dim, dtype=torch.float64, generator=gen)


def one_loop_per_node(edge_index: torch.Tensor, num_nodes: int):
    """``edge_index`` with every self-loop after a node's first dropped: where a node has
    several, PyG's gcn_norm sends a gradient to the weights of the loops it does not use
    (test_sg_conv.py), so weight gradients are compared on graphs without them."""
    return edge_index[:, one_loop_mask(edge_index)], num_nodes


def one_loop_mask(edge_index: torch.Tensor) -> torch.Tensor:
    """The edges ``one_loop_per_node`` keeps (to select their features too)."""
    seen, keep = set(), []
    for src, dst in edge_index.t().tolist():
        keep.append(src != dst or src not in seen)
        if src == dst:
            seen.add(src)
    return torch.tensor(keep, dtype=torch.bool)


def assert_parity(ours: torch.nn.Module, theirs: torch.nn.Module, run_ours, run_theirs,
                  x: torch.Tensor, extra: tuple = ()) -> None:
    """Same initial weights, then the same outputs and the same gradients (x, every
    parameter, and any tensor in ``extra`` that requires grad), to 1e-5 relative."""
    ours.load_state_dict(theirs.state_dict(), strict=True)
    ours, theirs = ours.double(), theirs.double()
    x = x.double()
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = run_ours(ours, x1), run_theirs(theirs, x2)
    torch.testing.assert_close(out1, out2, rtol=1e-5, atol=1e-8)
    grad = torch.randn_like(out1)
    learnt = [p for p in ours.parameters() if p.requires_grad]  # not a frozen scale
    theirs_learnt = [p for p in theirs.parameters() if p.requires_grad]
    g1 = torch.autograd.grad(out1, [x1, *learnt, *extra], grad, allow_unused=True)
    g2 = torch.autograd.grad(out2, [x2, *theirs_learnt, *extra], grad, allow_unused=True)
    for a, b in zip(g1, g2, strict=True):
        if a is None or b is None:
            assert a is None and b is None
            continue
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)


def assert_weighted_parity(ours: torch.nn.Module, theirs: torch.nn.Module, seed: int,
                           weighted: bool, width: int = 8) -> None:
    """``assert_parity`` on ``parity_graph(seed)``, given to ours as a Graph and to PyG's as
    the edge_index, with learnable edge weights in [0.1, 1.1) when ``weighted`` (their
    gradients compared too)."""
    edge_index, n = parity_graph(seed)
    extra = () if not weighted else \
        (torch.rand(edge_index.size(1), dtype=torch.float64).add_(0.1).requires_grad_(),)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(ours, theirs, lambda m, x: m(x, graph, *extra),
                  lambda m, x: m(x, edge_index, *extra), torch.randn(n, width), extra=extra)


def assert_attention_weights_parity(ours: torch.nn.Module, theirs: torch.nn.Module,
                                    x: torch.Tensor, edge_index: torch.Tensor) -> None:
    """Same initial weights, then PyG's outputs, edge list (loops included, in its order) and
    attention weights from ``return_attention_weights=True``."""
    ours.load_state_dict(theirs.state_dict())
    out, (index, alpha) = ours(x, edge_index, return_attention_weights=True)
    ref_out, (ref_index, ref_alpha) = theirs(x, edge_index, return_attention_weights=True)
    torch.testing.assert_close(out, ref_out)
    assert torch.equal(index, ref_index)
    torch.testing.assert_close(alpha, ref_alpha)


def assert_edge_feature_parity(ours_cls, theirs_cls, fill_value, seed: int) -> None:
    """An attention conv with ``edge_dim=3`` (2 heads of 4) against PyG's, its edge features
    given with a Graph (ours) and with the edge_index (PyG's): outputs and gradients, the
    edge features' included, the added loops' features filled by ``fill_value``."""
    edge_index, n = parity_graph(seed)
    edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.float64, requires_grad=True)
    kwargs = dict(heads=2, edge_dim=3, fill_value=fill_value)
    graph = Graph(edge_index, num_nodes=n)
    assert_parity(ours_cls(8, 4, **kwargs), theirs_cls(8, 4, **kwargs),
                  lambda m, x: m(x, graph, edge_attr), lambda m, x: m(x, edge_index, edge_attr),
                  torch.randn(n, 8), extra=(edge_attr,))


def seeded_twins(name: str, *args, **kwargs):
    """graphloc's and PyG's class ``name`` built from one seed, in float64: their parameter
    names and initial values checked equal (PyG's initialisation)."""
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    torch.manual_seed(7)
    ours = getattr(gl, name)(*args, **kwargs).double()
    torch.manual_seed(7)
    theirs = getattr(pyg, name)(*args, **kwargs).double()
    for (key, a), (other, b) in zip(ours.state_dict().items(), theirs.state_dict().items(),
                                    strict=True):
        assert key == other and torch.equal(a, b)
    return ours, theirs


def assert_twins_agree(ours: torch.nn.Module, theirs: torch.nn.Module, inputs: list, call,
                       upstream: torch.Tensor | None = None, equal_nan: bool = False) -> tuple:
    """``call(layer, *inputs)`` of both: the same outputs, and the same gradients of every
    input and parameter (None on both sides where unused), for ``upstream`` (default: a
    ramp over the output); with ``equal_nan``, NaN where the other has NaN. Returns
    ``theirs``'s output and gradients (inputs first, then parameters)."""
    results = []
    for layer in (ours, theirs):
        leaves = [t.clone().requires_grad_() for t in inputs]
        out = call(layer, *leaves)
        grad = upstream if upstream is not None else \
            torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
        results.append((out, torch.autograd.grad(out, [*leaves, *layer.parameters()], grad,
                                                 allow_unused=True)))
    (got, got_grads), (want, want_grads) = results
    torch.testing.assert_close(got, want, equal_nan=equal_nan)
    for a, b in zip(got_grads, want_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, equal_nan=equal_nan)
    return want, want_grads


def assert_special_values_agree(ours: torch.nn.Module, theirs: torch.nn.Module,
                                x: torch.Tensor, edge_index: torch.Tensor, call=None,
                                check_empty: bool = True) -> None:
    """On ``x`` holding NaN and infinities, ``call(layer, x, edge_index)`` (default
    ``layer(x, edge_index)``) of both: PyG's output (NaN where PyG's is), with the kernels
    and with their pure-torch twins; with ``check_empty``, also on no edges, and no nodes
    give ``[0, out]``."""
    from helpers import reference_ops
    call = call or (lambda layer, x, edges: layer(x, edges))
    want = call(theirs, x, edge_index)
    torch.testing.assert_close(call(ours, x, edge_index), want, equal_nan=True)
    with reference_ops():
        torch.testing.assert_close(call(ours, x, edge_index), want, equal_nan=True)
    if check_empty:
        empty = torch.empty(2, 0, dtype=torch.long)
        torch.testing.assert_close(call(ours, x, empty), call(theirs, x, empty),
                                   equal_nan=True)
        assert call(ours, x[:0], empty).shape == (0, want.size(1))


# A heterogeneous graph for the heterogeneous convs (HGTConv, HANConv): a self-relation, a
# pair of opposite relations, one into a type with few nodes, and "orphan", a type no
# relation points to (it gets no output)
HETERO_COUNTS = {"paper": 11, "author": 7, "venue": 3, "orphan": 4}
HETERO_WIDTHS = {"paper": 6, "author": 4, "venue": 5, "orphan": 6}
HETERO_RELATIONS = [("author", "writes", "paper"), ("paper", "written_by", "author"),
                    ("paper", "cites", "paper"), ("paper", "in", "venue"),
                    ("orphan", "likes", "paper")]
HETERO_METADATA = (list(HETERO_COUNTS), HETERO_RELATIONS)


def hetero_inputs(seed=0, widths=HETERO_WIDTHS, edges=30, dtype=torch.float64):
    """``(x_dict, edge_index_dict)``: random features, random edges per relation with
    parallel edges and (in "cites") self-loops; the last paper without incoming edges."""
    gen = torch.Generator().manual_seed(seed)
    x = {t: torch.randn(n, widths[t], dtype=dtype, generator=gen)
         for t, n in HETERO_COUNTS.items()}
    e = {r: torch.stack([torch.randint(0, HETERO_COUNTS[r[0]], (edges,), generator=gen),
                         torch.randint(0, HETERO_COUNTS[r[2]] - (r[2] == "paper"), (edges,),
                                       generator=gen)]) for r in HETERO_RELATIONS}
    return x, e


def hetero_call(edges):
    """``call(conv, *xs)`` for ``assert_twins_agree``: the features of the types in
    HETERO_COUNTS' order, the outputs of every type with any stacked (``None`` skipped)."""
    def call(conv, *xs):
        out = conv(dict(zip(HETERO_COUNTS, xs, strict=True)), edges)
        return torch.cat([o for o in out.values() if o is not None])
    return call


def assert_hetero_outputs_agree(got: dict, want: dict, equal_nan: bool = False) -> None:
    """Two heterogeneous convs' outputs: the same node types in the same order, None where
    the other's is None, else the same values."""
    assert list(got) == list(want)
    for t, w in want.items():
        if w is None:
            assert got[t] is None, t
        else:
            torch.testing.assert_close(got[t], w, equal_nan=equal_nan)


def assert_trains_as_pygs(model, converted, run, labels, steps: int = 3) -> None:
    """``steps`` SGD steps of a cross-entropy on ``run(net)`` (its logits) for PyG's
    ``model`` and its ``from_pyg`` conversion: the same parameters after them."""
    import torch.nn.functional as F
    for net in (model, converted):
        optimiser = torch.optim.SGD(net.parameters(), lr=0.5)
        for _ in range(steps):
            optimiser.zero_grad()
            F.cross_entropy(run(net), labels).backward()
            optimiser.step()
    for (key, a), (other, b) in zip(model.state_dict().items(),
                                    converted.state_dict().items(), strict=True):
        assert key == other
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def assert_converts_and_trains_as_pygs(model, inputs: tuple) -> torch.nn.Module:
    """``from_pyg(model, inputs, strict=True)`` (every conv converted, checked on
    ``inputs``), then a few SGD steps of both on labels drawn for the outputs' rows and
    classes: the same parameters (``assert_trains_as_pygs``). Returns the conversion."""
    from graphloc.nn import from_pyg
    converted = from_pyg(model, inputs, strict=True)
    rows, classes = copy.deepcopy(model)(*inputs).shape  # (a copy: BatchNorm's statistics)
    labels = torch.randint(0, classes, (rows,), generator=torch.Generator().manual_seed(0))
    assert_trains_as_pygs(model, converted, lambda net: net(*inputs), labels)
    return converted


def seeded_hetero_twins(name: str, kwargs: dict, x: dict):
    """``seeded_twins`` for a heterogeneous conv (``kwargs`` without the metadata, which is
    HETERO_METADATA); a lazy pair (``in_channels=-1``) is called once on ``x`` in float32,
    from one seed, to draw its widths' weights."""
    if kwargs["in_channels"] != -1:
        return seeded_twins(name, metadata=HETERO_METADATA, **kwargs)
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    twins = []
    for module in (gl, pyg):
        torch.manual_seed(7)
        conv = getattr(module, name)(metadata=HETERO_METADATA, **kwargs)
        torch.manual_seed(8)
        conv({t: v.float() for t, v in x.items()}, hetero_inputs()[1])
        twins.append(conv.double())
    for (key, a), (other, b) in zip(twins[0].state_dict().items(),
                                    twins[1].state_dict().items(), strict=True):
        assert key == other and torch.equal(a, b)
    return twins



@contextlib.contextmanager
def pyg_knn_by_brute_force():
    """PyG's DynamicEdgeConv and GravNetConv without pyg-lib, inside the block: its flag
    set and ``torch.ops.pyg.knn`` the brute-force oracle (so the PyG twin's neighbours are
    the oracle's, not graphloc's)."""
    import torch_geometric.typing

    def knn(x, y, ptr_x, ptr_y, k, cosine, num_workers):
        assert not cosine
        ptr_x = [0, x.size(0)] if ptr_x is None else ptr_x.tolist()
        ptr_y = [0, y.size(0)] if ptr_y is None else ptr_y.tolist()
        ptr_x += [ptr_x[-1]] * (len(ptr_y) - len(ptr_x))  # (examples x lacks: no points)
        return brute_force_neighbours(x.detach(), y.detach(), k, ptr_x, ptr_y)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch_geometric.typing, "WITH_KNN", True)
        patch.setattr(torch.ops.pyg, "knn", knn, raising=False)
        yield


def _oracle_basis_with_gradient(pseudo, kernel_size, is_open_spline, degree):
    """The oracle's values, carrying the gradient of graphloc's basis (the oracle has
    none: it checks the values; the gradient is checked by finite differences below)."""
    values, index = oracle_spline_basis(pseudo.detach(), kernel_size, is_open_spline, degree)
    ours, _ = spline_basis(pseudo, kernel_size, is_open_spline, degree)
    return ours + (values - ours).detach(), index


def _oracle_weighting(x, weight, basis, weight_index):
    """Per edge, the sum of every term ``basis * weight * x`` formed on its own, as PyG's
    kernel adds them (an einsum would combine the weights first, and an infinite feature
    then meets their sum rather than each weight)."""
    terms = basis[:, :, None, None] * weight[weight_index] * x[:, None, :, None]
    return terms.sum((1, 2))


@contextlib.contextmanager
def pygs_spline_conv_by_oracle():
    """PyG's SplineConv without pyg-lib, inside the block: its basis the Cox-de Boor
    oracle's values and its weighting a per-edge sum of products."""
    import torch_geometric.nn.conv.spline_conv as pygs_spline
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pygs_spline, "spline_basis", _oracle_basis_with_gradient)
        patch.setattr(pygs_spline, "spline_weighting", _oracle_weighting)
        yield


def seeded_twins_without_pyg_lib(name: str, *args, **kwargs):
    """``seeded_twins`` for a conv PyG builds only with pyg-lib (its knn or its spline
    kernels): the oracles stand in while both are built."""
    with pyg_knn_by_brute_force(), pygs_spline_conv_by_oracle():
        return seeded_twins(name, *args, **kwargs)


class CooOnly:
    """torch-sparse's SparseTensor as PyG's PANPooling reads it: coo() and sparse_sizes()."""

    def __init__(self, m: torch.Tensor):
        self.m = m.coalesce()

    def coo(self):
        return self.m.indices()[0], self.m.indices()[1], self.m.values()

    def sparse_sizes(self):
        return tuple(self.m.shape)


def dense_pan(conv, x: torch.Tensor, edge_index, n: int, edge_weight=None):
    """``(out, M)`` of the formula, in float64 dense matrices, differentiable in the filter
    weights and x (autograd through dense matrix powers)."""
    a = torch.zeros(n, n, dtype=torch.float64)
    ones = torch.ones(edge_index.size(1), dtype=torch.float64)
    a = a.index_put((edge_index[1], edge_index[0]),
                    ones if edge_weight is None else edge_weight.double(), accumulate=True)
    reach = torch.zeros(n, n, dtype=torch.bool)  # which pairs any walk of <= L edges joins
    step = torch.zeros(n, n, dtype=torch.bool).index_put(
        (edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.bool))
    hop = torch.eye(n, dtype=torch.bool)
    power, total, coefficient = torch.eye(n, dtype=torch.float64), 0.0, 1.0
    for w in conv.weight.double():
        coefficient = coefficient * w
        total = total + coefficient * power
        reach |= hop
        power, hop = power @ a, (hop.double() @ step.double()) > 0
    scale = reach.sum(1).double().rsqrt()
    m = scale[:, None] * total * scale[None, :]
    lin = conv.lin
    return (m @ x.double()) @ lin.weight.double().t() + lin.bias.double(), m


@contextlib.contextmanager
def pygs_pan_conv_by_oracle():
    """PyG's PANConv without torch-sparse, inside the block: its forward the dense formula
    (``dense_pan``) on its own weights, its path matrix torch-sparse's ``coo()`` view of
    the formula's (all PyG's PANPooling reads)."""
    import torch_geometric.nn as pyg

    def forward(self, x, edge_index):
        out, m = dense_pan(self, x, edge_index, x.size(0))
        return out.to(x.dtype), CooOnly(m.to(x.dtype).to_sparse())

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pyg.PANConv, "forward", forward)
        yield
