"""Neighbourhood aggregations, chosen by name as in PyG (``aggr="mean"``, ``"lstm"``, a list
of names, or a module), run on the engine's kernels.

An aggregation reduces the neighbours of every destination node:
``forward(graph, x_src, edge_weight=None) -> [N_dst, out_channels]``. The plain reductions,
variance and standard deviation are fused sparse products over the node features (no
``[E, F]`` messages); the softmax aggregation runs on the fused attention kernel; LSTM,
median and quantiles and PyG aggregation modules read the messages in CSR order (sorted by
destination). Edge weights
(GraphConv's, or a weighted sparse adjacency's values) scale the neighbours inside the sum,
mean, max and min products; the other aggregations reduce the weighted messages
``w_e * x_j`` (``[E, F]``), as PyG's GraphConv does.

Parameter names follow PyG's ``torch_geometric.nn.aggr`` so that weights load.
"""

from __future__ import annotations

import copy
import math
import warnings

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import (
    caller_stacklevel,
    check_flags,
    check_index,
    check_int,
    check_number,
)
from graphloc.graph import Graph


class Aggregation(torch.nn.Module):
    """Base class: ``forward(graph, x_src, edge_weight=None)``; ``edge_weight`` (an
    adjacency's values) scales the neighbours where the aggregation defines it.

    Also called as PyG's aggregations are, ``aggr(x, index, ptr=None, dim_size=None,
    dim=-2)``: the rows of ``x`` reduced by ``index`` (or by the segments of ``ptr``) into
    ``dim_size`` rows (PyG's default: ``index.max() + 1``), each row of x one neighbour, so
    code written against PyG's aggregation modules (a custom ``MessagePassing.aggregate``,
    say) can call graphloc's. (PyG's own convs accept only PyG's modules as ``aggr``.)"""

    takes_weights = False
    fresh_output = False  # the output is a new tensor no backward reads (safe in place)
    # each channel reduced on its own, with nothing learnt per channel: PyG's call may then
    # reduce any dimension of any x (the others become channels and come back after)
    channelwise = False
    takes_ptr = True  # PyG's call with segments ``ptr`` instead of ``index``

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], Tensor):  # PyG's call: the rows of x by index
            graph, rows, restore = _rows_as_graph(self, *args, **kwargs)
            return restore(super().__call__(graph, rows))
        return super().__call__(*args, **kwargs)

    def out_channels_for(self, in_channels: int) -> int:
        return in_channels

    def reset_parameters(self) -> None:
        pass

    def _weighted_messages(self, graph: Graph, x: Tensor,
                           edge_weight: Tensor | None) -> tuple[Graph, Tensor]:
        """``(graph, x)`` for an aggregation that cannot weight neighbours inside its own
        products: as given without weights (or weights all 1); otherwise the weighted
        messages ``w_e * x[src_e]`` (``[E, ...]``, those PyG's ``GraphConv`` aggregates) on
        the graph whose edge e comes from message e, listed by destination as ``graph``'s
        CSR lists them."""
        if edge_weight is None or bool((edge_weight == 1).all()):
            return graph, x
        if edge_weight.dtype != x.dtype:  # as the fused products refuse it
            raise TypeError(f"edge_weight has dtype {edge_weight.dtype} but the features have "
                            f"{x.dtype}")
        ordered = graph.in_csr_order()
        weight = graph.to_csr_order(edge_weight)
        messages = x.index_select(0, ordered.edge_index[0]) * \
            weight.view(-1, *[1] * (x.dim() - 1))
        return per_edge(graph), messages

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"


def _rows_as_graph(aggr: Aggregation, x: Tensor, index: Tensor | None = None,
                   ptr: Tensor | None = None, dim_size: int | None = None,
                   dim: int = -2, max_num_elements: int | None = None):
    """PyG's aggregation call as ``(graph, rows, restore)``: the slices of ``x`` along
    ``dim`` as the rows of a 2-D ``rows`` (the other dimensions as channels, for a
    ``channelwise`` aggregation), row e the only source of edge e into row ``index[e]`` (or
    the segment of ``ptr`` holding e) of an output of ``dim_size`` rows (PyG's default:
    ``index.max() + 1``, or a row per segment); ``restore`` puts the output's dimensions
    back in ``x``'s order. Errors carry PyG's phrases ("invalid dimension", "invalid
    'dim_size'")."""
    name = type(aggr).__name__
    axis = dim + x.dim() if dim < 0 else dim
    if not 0 <= axis < x.dim():
        raise ValueError(f"{name}: invalid dimension {dim} for x of shape {list(x.shape)}")
    if (x.dim() != 2 or axis != 0) and not aggr.channelwise:
        raise ValueError(f"{name} reduces the rows of a 2-D x (dim=-2, it learns per "
                         f"channel), got x of shape {list(x.shape)} and dim={dim}")
    if ptr is not None and not aggr.takes_ptr:
        raise RuntimeError(f"{name} requires 'index' (ptr is not taken, as in PyG)")
    if max_num_elements is not None:
        raise ValueError(f"{name}: max_num_elements is not taken; sequences are padded to "
                         f"the largest group")
    moved = x.movedim(axis, 0)
    rows = moved.reshape(moved.size(0), math.prod(moved.shape[1:]))  # 0 rows: no -1
    index, dim_size = _groups(name, rows, index, ptr, dim_size)
    positions = torch.arange(rows.size(0), device=x.device)
    graph = Graph.bipartite(torch.stack([positions, index.long()]), (rows.size(0), dim_size))

    def restore(out: Tensor) -> Tensor:
        if x.dim() == 2 and axis == 0:  # the rows as given (the width may change)
            return out
        return out.reshape(dim_size, *moved.shape[1:]).movedim(0, axis)
    return graph, rows, restore


def _groups(name: str, rows: Tensor, index: Tensor | None, ptr: Tensor | None,
            dim_size: int | None) -> tuple[Tensor, int]:
    """Each row's output row, and the output's row count, from index or ptr (PyG's rules:
    with ptr, ``dim_size`` is the segment count; with index, above its largest entry)."""
    if ptr is not None:
        ops._check_indptr(ptr, rows)  # 1-D, from 0 to the rows of x, non-decreasing
        if dim_size is not None and dim_size != ptr.numel() - 1:
            raise ValueError(f"{name}: invalid 'dim_size' (got {dim_size}, but ptr holds "
                             f"{ptr.numel() - 1} segments)")
        index = torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device),
                                        ptr.diff())
        return index, ptr.numel() - 1
    if index is None:
        raise ValueError(f"{name} needs index or ptr to know which rows of x go together")
    if index.dim() != 1 or index.numel() != rows.size(0):
        raise ValueError(f"{name}: index must hold one entry per row of x ({rows.size(0)}), "
                         f"got shape {list(index.shape)}")
    largest = int(index.max()) if index.numel() else -1
    if dim_size is None:
        dim_size = largest + 1
    elif dim_size <= largest:
        raise ValueError(f"{name}: invalid 'dim_size' (got {dim_size}, but index holds "
                         f"{largest})")
    check_index(index, dim_size, "index")
    return index, dim_size


def per_edge(graph: Graph) -> Graph:
    """The graph over which an aggregation reduces per-edge messages: message e (rows
    ``[E, ...]`` in ``graph``'s CSR order) is the only source of an edge into edge e's
    destination (cached on ``graph``)."""
    ordered = graph.in_csr_order()
    return ordered.cached("one_source_per_edge", lambda: _one_source_per_edge(ordered))


def _one_source_per_edge(graph: Graph) -> Graph:
    """The bipartite graph from ``graph``'s E edges (as sources, in ``graph``'s edge order)
    to its destinations: edge e goes from source e to e's destination. ``graph``'s edges
    must be in CSR order (``in_csr_order``)."""
    sources = torch.arange(graph.num_edges, device=graph.device)
    return Graph._derived(torch.stack([sources, graph.edge_index[1]]), graph.num_nodes,
                          graph.num_edges, dst_sorted=True)


class _Reduce(Aggregation):
    reduce = "sum"
    takes_weights = True
    fresh_output = True
    channelwise = True

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        return ops.spmm(graph, x, edge_weight, reduce=self.reduce)


class SumAggregation(_Reduce):
    reduce = "sum"


class MeanAggregation(_Reduce):
    reduce = "mean"


class MaxAggregation(_Reduce):
    reduce = "max"


class MinAggregation(_Reduce):
    reduce = "min"


class MulAggregation(Aggregation):
    """The product of the neighbours, per channel (1 for a node without any, as PyG's);
    each neighbour's gradient is the product of the others (no division: exact with zeros,
    NaN and infinities). Edge weights scale the neighbours first, as ``GraphConv``'s. PyG's
    call takes ``index``, not ``ptr`` (as PyG's: its own tests ask for the error)."""

    channelwise = True
    takes_ptr = False

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph, x = self._weighted_messages(graph, x, edge_weight)
        ordered = graph.in_csr_order()
        src, dst = ordered.edge_index
        return ops.scatter(x.index_select(0, src), dst, 0, dim_size=graph.num_nodes,
                           reduce="mul")


class VarAggregation(Aggregation):
    """The variance (biased) of the neighbours: the mean of ``(x_j - mean_i)^2``, PyG's
    ``mean(x^2) - mean(x)^2`` computed without its cancellation. PyG's formula loses the
    variance where it is small beside the mean: on float32 features of 1e3 with a standard
    deviation of 1 it is 55% off (the standard deviation 33%), at 1e4 by a relative error of
    about 50; here it is torch.var's to float32 rounding. ``semi_grad``: PyG's gradient, that of
    ``-mean(x)^2`` alone (the second moment taken without gradient), on the exact value."""

    channelwise = True

    def __init__(self, semi_grad: bool = False):
        super().__init__()
        check_flags("VarAggregation", semi_grad=semi_grad)
        self.semi_grad = semi_grad

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph, x = self._weighted_messages(graph, x, edge_weight)
        mean = ops.spmm(graph, x, reduce="mean")
        ordered = graph.in_csr_order()
        src, dst = ordered.edge_index
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.semi_grad):
            # the deviations of each edge's message from its destination's mean ([E, ...],
            # as PyG's own x_j): no large second moment to subtract
            deviation = x.index_select(0, src) - mean.index_select(0, dst)
            per_edge = ordered.cached("one_source_per_edge",
                                      lambda: _one_source_per_edge(ordered))
            var = ops.spmm(per_edge, deviation * deviation, reduce="mean")
        if self.semi_grad:
            square = mean * mean  # + (0 with -mean^2's gradient): var's value exactly
            return var + (square.detach() - square)
        return var


class StdAggregation(Aggregation):
    """``sqrt(var)`` with PyG's guard: variances below 1e-5 give 0 (no infinite gradient at
    sqrt(0))."""

    channelwise = True

    def __init__(self, semi_grad: bool = False):
        super().__init__()
        check_flags("StdAggregation", semi_grad=semi_grad)
        self.var_aggr = VarAggregation(semi_grad)

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        out = self.var_aggr(graph, x, edge_weight).clamp(min=1e-5).sqrt()
        return out.masked_fill(out <= math.sqrt(1e-5), 0.0)


class QuantileAggregation(Aggregation):
    r"""Per channel, the ``q``-th quantile of the neighbours (several ``q``: concatenated,
    ``[N, len(q) * F]``), between the two nearest order statistics as ``interpolation``
    says ("linear", "lower", "higher", "midpoint", "nearest"); ``fill_value`` for a node
    without neighbours. PyG's ``QuantileAggregation``: its arguments, its ``q`` buffer (so
    weights load) and its numbers, except where PyG's are not torch.quantile's:

    - a node whose neighbourhood holds a NaN gets NaN in that channel, as torch.quantile
      (PyG sorts the NaN last and may return a number);
    - the first node without neighbours gets ``fill_value`` (PyG raises an IndexError);
    - "nearest" rounds the position within the node's neighbours, half to even as
      torch.quantile (PyG rounds the position in the whole edge list, so the same
      neighbourhood can give either neighbour depending on where its edges start);
    - the positions are exact at any edge count (PyG's float32 positions go wrong past
      2^24 edges).
    """

    @property
    def channelwise(self) -> bool:  # several q widen the channels
        return len(self.quantiles) == 1

    interpolations = ("linear", "lower", "higher", "midpoint", "nearest")

    def __init__(self, q: float | list[float], interpolation: str = "linear",
                 fill_value: float = 0.0):
        super().__init__()
        qs = [float(v) for v in q] if isinstance(q, (list, tuple)) else [float(q)]
        if not qs:
            raise ValueError("q: give at least one quantile")
        outside = [v for v in qs if not 0.0 <= v <= 1.0]  # NaN is outside too
        if outside:
            raise ValueError(f"q must be in the range [0, 1], got {outside[0]!r}")
        if interpolation not in self.interpolations:
            raise ValueError(f"Invalid interpolation method: interpolation must be one of "
                             f"{list(self.interpolations)}, got {interpolation!r}")
        self._q = q
        self.quantiles = qs  # exact: the float32 buffer can put q * (n - 1) below an integer
        self.register_buffer("q", torch.tensor(qs).view(-1, 1))  # PyG's state-dict entry
        self.interpolation = interpolation
        self.fill_value = fill_value

    def out_channels_for(self, in_channels: int) -> int:
        return in_channels * len(self.quantiles)

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph, x = self._weighted_messages(graph, x, edge_weight)
        messages, rows, _, degree = _csr_messages(graph, x)
        start = graph.csr.indptr.long()[:-1]
        flat = messages.reshape(messages.size(0), math.prod(x.shape[1:]))
        out = self._quantiles(_sorted_within_rows(flat, rows), start, degree)
        trailing = list(x.shape[1:])
        if len(self.quantiles) == 1:
            return out.view(-1, *trailing)
        return out.view(-1, len(self.quantiles) * trailing[0], *trailing[1:]) if trailing \
            else out.view(-1, len(self.quantiles))

    def _quantiles(self, ordered: Tensor, start: Tensor, degree: Tensor) -> Tensor:
        """``[N, Q * F]`` from each row's values sorted in place (``ordered`` ``[E, F]``,
        rows in CSR order)."""
        num_nodes, width = degree.numel(), ordered.size(1)
        if ordered.size(0) == 0:
            return ordered.new_full((num_nodes, len(self.quantiles) * width), self.fill_value)
        q = torch.tensor(self.quantiles, dtype=torch.float64, device=ordered.device)
        rank = q.view(1, -1) * (degree.view(-1, 1) - 1).clamp(min=0)  # [N, Q], in the row
        below, above = rank.floor(), rank.ceil()
        last = ordered.size(0) - 1

        def pick(position: Tensor) -> Tensor:  # [N, Q] row positions -> [N, Q, F]
            index = (start.view(-1, 1) + position.long()).clamp(max=last).view(-1)
            return ordered.index_select(0, index).view(num_nodes, -1, width)

        if self.interpolation in ("lower", "higher", "nearest"):
            out = pick({"lower": below, "higher": above, "nearest": rank.round()}
                       [self.interpolation])
        else:
            weight = 0.5 if self.interpolation == "midpoint" else \
                (rank - below).to(ordered.dtype).unsqueeze(-1)
            out = torch.lerp(pick(below), pick(above), weight)
        # NaN sorts last: a row holds one where its last value is NaN (torch.quantile's NaN)
        ends = (start + degree - 1).clamp(min=0, max=last)
        has_nan = torch.isnan(ordered.index_select(0, ends)).unsqueeze(1)
        out = out.masked_fill(has_nan, float("nan"))
        out = out.masked_fill((degree == 0).view(-1, 1, 1), self.fill_value)
        return out.reshape(num_nodes, -1)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(q={self._q})"


class MedianAggregation(QuantileAggregation):
    """The lower median per channel (PyG's ``MedianAggregation``: ``q = 0.5``, "lower"),
    with ``QuantileAggregation``'s rules for NaN and nodes without neighbours."""

    def __init__(self, fill_value: float = 0.0):
        super().__init__(0.5, "lower", fill_value)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"


def _sorted_within_rows(flat: Tensor, rows: Tensor) -> Tensor:
    """Each channel of ``flat`` ``[E, F]`` sorted ascending within each row's run (``rows``
    non-decreasing, CSR order), NaN last: a sort on the values, then a stable one on the
    rows, gradients through both."""
    values, order = torch.sort(flat, dim=0, stable=True)
    by_row = torch.sort(rows.index_select(0, order.view(-1)).view_as(order), dim=0,
                        stable=True).indices
    return values.gather(0, by_row)


class SoftmaxAggregation(Aggregation):
    r"""Per channel, :math:`\sum_j \mathrm{softmax}_j(t \cdot x_j) \, x_j` over the neighbours
    (Li et al., "DeeperGCN"); ``learn`` makes the temperature ``t`` a parameter (one per
    channel with ``channels``), ``semi_grad`` stops the gradient through the weights. Runs
    as ``ops.softmax_sum`` (on the CPU one kernel, without the ``[E, F]`` neighbour rows);
    a temperature of another dtype than the features is cast to theirs."""

    def __init__(self, t: float = 1.0, learn: bool = False, semi_grad: bool = False,
                 channels: int = 1):
        super().__init__()
        check_flags("SoftmaxAggregation", learn=learn, semi_grad=semi_grad)
        if learn and semi_grad:
            raise ValueError("SoftmaxAggregation: semi_grad cannot be used with learn=True")
        check_number("SoftmaxAggregation", "t", t)
        self.learn, self.semi_grad, self.channels, self._init_t = learn, semi_grad, channels, t
        self.t = torch.nn.Parameter(torch.empty(channels)) if learn else t
        self.reset_parameters()

    @property
    def channelwise(self) -> bool:  # one temperature for every channel
        return not isinstance(self.t, Tensor) or self.t.numel() == 1

    def reset_parameters(self) -> None:
        if isinstance(self.t, Tensor):
            torch.nn.init.constant_(self.t, self._init_t)

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph, x = self._weighted_messages(graph, x, edge_weight)
        channels = x.shape[1:]  # [N, ...]: the softmax per entry of a row, t broadcast to it
        if isinstance(self.t, Tensor) and self.t.numel() not in (1, x.size(-1)):
            raise ValueError(f"SoftmaxAggregation has {self.t.numel()} temperatures (channels="
                             f"{self.t.numel()}) but the messages have {x.size(-1)} channels")
        t = self.t.to(x.dtype).expand(channels).reshape(-1) if isinstance(self.t, Tensor) \
            else self.t
        rows = x.reshape(x.size(0), math.prod(channels))
        return ops.softmax_sum(graph, rows, t, self.semi_grad).view(-1, *channels)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(learn={self.learn})"


class PowerMeanAggregation(Aggregation):
    r"""Per channel, :math:`(\mathrm{mean}_j \, x_j^p)^{1/p}` over the neighbours (Li et al.,
    "DeeperGCN"), PyG's module: the messages and the mean are clamped to ``[clamp_min,
    clamp_max]`` (``None``: no bound) before each power, so a node without neighbours gets
    ``clamp_min ** (1 / p)``, as PyG's; ``p = 1`` (a number) is the plain mean, unclamped.
    ``learn`` makes ``p`` a parameter (one per channel with ``channels``). The powers are
    taken per message row (per node for node features, without an ``[E, F]`` tensor), the
    mean is ``spmm``'s."""

    def __init__(self, p: float = 1.0, learn: bool = False, channels: int = 1,
                 clamp_min: float | None = 1e-4, clamp_max: float | None = 100.0):
        super().__init__()
        check_flags("PowerMeanAggregation", learn=learn)
        channels = check_int(channels, "channels", 1)
        if not learn and channels != 1:
            raise ValueError(f"PowerMeanAggregation: channels={channels} needs learn=True (a "
                             "fixed p is one number)")
        check_number("PowerMeanAggregation", "p", p)
        if p == 0:
            raise ValueError("PowerMeanAggregation: p = 0 has no power mean (the output's "
                             "power is 1 / p)")
        for name, bound in (("clamp_min", clamp_min), ("clamp_max", clamp_max)):
            if bound is not None:  # (None: no bound)
                check_number("PowerMeanAggregation", name, bound)
        if clamp_min is not None and clamp_max is not None and clamp_min > clamp_max:
            raise ValueError(f"PowerMeanAggregation: clamp_min must be <= clamp_max, got "
                             f"{clamp_min!r} > {clamp_max!r}")
        self.learn, self.channels, self._init_p = learn, channels, p
        self.min_value, self.max_value = clamp_min, clamp_max
        self.p = torch.nn.Parameter(torch.empty(channels)) if learn else p
        self.reset_parameters()

    @property
    def channelwise(self) -> bool:  # one power for every channel
        return not isinstance(self.p, Tensor) or self.p.numel() == 1

    def reset_parameters(self) -> None:
        if isinstance(self.p, Tensor):
            torch.nn.init.constant_(self.p, self._init_p)

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        if not x.is_floating_point():  # (a clamp to 1e-4 made integer messages float)
            raise TypeError(f"PowerMeanAggregation: the messages must be floating point, got "
                            f"{x.dtype}")
        graph, x = self._weighted_messages(graph, x, edge_weight)
        p = self.p
        plain = not isinstance(p, Tensor) and p == 1
        if isinstance(p, Tensor) and p.numel() != 1 and p.numel() != x.size(-1):
            raise ValueError(f"PowerMeanAggregation has {p.numel()} powers (channels="
                             f"{p.numel()}) but the messages have {x.size(-1)} channels")
        if not plain:
            x = x.clamp(min=self.min_value, max=self.max_value).pow(p)
        out = ops.spmm(graph, x, reduce="mean")
        if plain:
            return out
        return out.clamp(min=self.min_value, max=self.max_value).pow(1.0 / p)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(learn={self.learn})"


class LSTMAggregation(Aggregation):
    """An LSTM over each node's neighbours in edge order (GraphSAGE's LSTM aggregator); the
    output is its last hidden state. Not permutation-invariant, so the edges must be sorted
    by destination (PyG's rule: the order is then explicit).

    ``padded=True`` (default) is PyG's convention: every sequence is padded with zeros to
    the largest degree of the graph and the state read after the padding, so a node's
    output also depends on the largest degree. ``padded=False`` stops each node's LSTM at
    its last neighbour (packed sequences, ``O(E F)`` memory, no ``N x max-degree`` batch).
    """

    def __init__(self, in_channels: int, out_channels: int, padded: bool = True, **kwargs):
        super().__init__()
        check_flags("LSTMAggregation", padded=padded)
        self.in_channels, self.out_channels, self.padded = in_channels, out_channels, padded
        self.lstm = torch.nn.LSTM(in_channels, out_channels, batch_first=True, **kwargs)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def out_channels_for(self, in_channels: int) -> int:
        return self.out_channels

    def reset_parameters(self) -> None:
        self.lstm.reset_parameters()

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        _require_sorted(graph, self)
        graph, x = self._weighted_messages(graph, x, edge_weight)
        messages, rows, position, degree = _csr_messages(graph, x)
        out = x.new_zeros(graph.num_nodes, self.out_channels)
        if messages.size(0) == 0:
            return out
        if self.padded:
            dense = x.new_zeros(graph.num_nodes, int(degree.max()), x.size(1))
            dense = dense.index_put((rows, position), messages)
            return self.lstm(dense)[0][:, -1]
        return self._packed(messages, rows, position, degree, out)

    def _packed(self, messages, rows, position, degree, out):
        """Sequences of their own lengths: nodes by decreasing degree, time-major data."""
        order = torch.sort(degree, descending=True, stable=True).indices
        busy = int((degree > 0).sum())
        rank = torch.empty_like(order).index_copy_(0, order, torch.arange(
            order.numel(), device=order.device))
        steps = torch.arange(int(degree.max()), device=degree.device)
        batch_sizes = (degree.unsqueeze(0) > steps.unsqueeze(1)).sum(1)
        start = torch.cat([batch_sizes.new_zeros(1), batch_sizes.cumsum(0)[:-1]])
        data = torch.empty_like(messages).index_copy_(0, start[position] + rank[rows],
                                                       messages)
        packed = torch.nn.utils.rnn.PackedSequence(data, batch_sizes.cpu())
        last = self.lstm(packed)[1][0][-1]  # h_n of the last layer, nodes in `order`
        return out.index_copy(0, order[:busy], last.to(out.dtype))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


class LCMAggregation(Aggregation):
    r"""Learnable commutative monoid aggregation (`Ong and Veličković, "Learnable Commutative
    Monoids for Graph Neural Networks", LoG 2022 <https://arxiv.org/abs/2212.08541>`_):
    each neighbourhood is reduced as a balanced binary tree of
    :math:`a \oplus b = \tfrac12 (\mathrm{GRU}(a, b) + \mathrm{GRU}(b, a))` (commutative by
    symmetry), ``O(log degree)`` deep; an odd element at a level is carried up unchanged.
    With ``project`` the neighbours first pass through ``ReLU(lin(x))``. Parameter names
    are PyG's (``lin``, ``gru_cell``), so its weights load.

    Not exactly permutation-invariant: the operator is not associative, so the result
    depends on the order of each node's neighbours (the edge order; the edges must be
    sorted by destination, as PyG requires).

    ``padded=True`` (default) gives PyG's numbers: PyG pads every neighbourhood with zeros
    to the largest degree and reduces the padded rows, so the zeros take part in the tree
    (and a node without neighbours gets the tree of zeros, not 0). graphloc computes the
    same values without the padding: a slot that no neighbour reaches holds the same value
    in every row, so one tree over an all-zero row gives them all, and each row keeps only
    the entries its own neighbours reach (memory ``O(E d)``, not PyG's ``O(N Δ d)``).
    ``padded=False`` reduces each node's own neighbours only (PyG's tree applied to that
    node alone): a row leaves once its tree is done, and a node without neighbours gets 0.
    """

    def __init__(self, in_channels: int, out_channels: int, project: bool = True,
                 padded: bool = True):
        super().__init__()
        check_flags("LCMAggregation", project=project, padded=padded)
        if in_channels != out_channels and not project:
            raise ValueError(f"LCMAggregation: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) differ, so the neighbours must be projected "
                             f"(project=True)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.project, self.padded = project, padded
        self.lin = torch.nn.Linear(in_channels, out_channels) if project else None
        self.gru_cell = torch.nn.GRUCell(out_channels, out_channels)

    def out_channels_for(self, in_channels: int) -> int:
        return self.out_channels

    def reset_parameters(self) -> None:
        if self.lin is not None:
            self.lin.reset_parameters()
        self.gru_cell.reset_parameters()

    def combine(self, left: Tensor, right: Tensor) -> Tensor:
        """``left ⊕ right`` row by row, both orders in one GRU call (as PyG's)."""
        out = self.gru_cell(torch.cat([left, right]), torch.cat([right, left]))
        return out.view(2, -1, out.size(-1)).mean(dim=0)

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        _require_sorted(graph, self)
        graph, x = self._weighted_messages(graph, x, edge_weight)
        if self.lin is not None:
            x = self.lin(x).relu()
        entries, rows, position, degree = _csr_messages(graph, x)
        if self.padded:
            return self._padded_tree(entries, rows, position, degree, graph.num_nodes)
        return self._own_tree(entries, rows, position, degree, graph.num_nodes)

    def _level(self, entries, rows, position, count, width, pad):
        """One tree level: entries at even positions pair with their right neighbour (an
        entry of the row, else the padding value ``pad[position + 1]`` where the level is
        ``width`` long); the last entry of an odd ``width`` is carried. Returns the next
        level's (entries, rows, positions)."""
        even = position % 2 == 0
        left, row, pos = entries[even], rows[even], position[even]
        has_right = pos + 1 < count[row]  # the row's own next entry
        right = torch.empty_like(left)
        right[has_right] = entries[torch.nonzero(even).squeeze(1)[has_right] + 1]
        paired = has_right | (pos + 1 < width[row])
        from_pad = paired & ~has_right
        if from_pad.any():
            right[from_pad] = pad[pos[from_pad] + 1]
        out = left.clone()
        if paired.any():
            out[paired] = self.combine(left[paired], right[paired])
        return out, row, pos // 2

    def _padded_tree(self, entries, rows, position, degree, num_nodes):
        """PyG's padded tree, padding never stored: ``pad`` is the all-zero row's level."""
        width = int(degree.max()) if degree.numel() else 0
        pad = entries.new_zeros(max(width, 1), self.out_channels)
        count = degree
        while width > 1:
            widths = torch.full_like(count, width)
            entries, rows, position = self._level(entries, rows, position, count, widths, pad)
            pad_rows = torch.zeros(width, dtype=torch.long, device=pad.device)
            pad_pos = torch.arange(width, device=pad.device)
            no_entries = torch.zeros_like(pad_rows[:1])
            pad = self._level(pad, pad_rows, pad_pos, no_entries, widths[:1], pad)[0]
            count, width = (count + 1) // 2, (width + 1) // 2
        out = pad[:1].expand(num_nodes, -1).clone()  # rows no neighbour reaches
        return out.index_copy(0, rows, entries) if entries.numel() else out

    def _own_tree(self, entries, rows, position, degree, num_nodes):
        """Each row's own tree; a row leaves as soon as one entry is left."""
        out = entries.new_zeros(num_nodes, self.out_channels)
        count = degree
        while entries.size(0):
            done = count[rows] == 1
            out = out.index_copy(0, rows[done], entries[done])
            entries, rows, position = entries[~done], rows[~done], position[~done]
            entries, rows, position = self._level(entries, rows, position, count, count, None)
            count = (count + 1) // 2
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"project={self.project})")


def _csr_messages(graph: Graph, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The neighbours' rows in CSR order (row by row), with each one's row, its position in
    the row, and the row degrees: what the sequence aggregations read."""
    messages = x.index_select(0, graph.csr.indices.long())
    degree = graph.csr.degree().long()
    rows = torch.repeat_interleave(torch.arange(graph.num_nodes, device=x.device), degree)
    position = torch.arange(messages.size(0), device=x.device) - graph.csr.indptr.long()[rows]
    return messages, rows, position, degree


def _require_sorted(graph: Graph, owner: Aggregation) -> None:
    dst = graph.edge_index[1]
    if dst.numel() > 1 and bool((dst[1:] < dst[:-1]).any()):
        raise ValueError(f"{owner.__class__.__name__} reads neighbours in edge order, but the "
                         "'index' tensor is not sorted: sort edge_index by destination "
                         "(torch_geometric.utils.sort_edge_index) so that the order is explicit")


class ModuleAggregation(Aggregation):
    """A PyG aggregation module (``torch_geometric.nn.aggr.*``, e.g. ``MLPAggregation``)
    called on the messages in CSR order with PyG's ``(x, index, ptr, dim_size)``."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module
        # State dicts carry the module's own names (PyG's layout), not ``module.<name>``.
        self.register_state_dict_post_hook(_drop_wrapper_prefix)
        self.register_load_state_dict_pre_hook(_add_wrapper_prefix)

    def out_channels_for(self, in_channels: int) -> int:
        if hasattr(self.module, "get_out_channels"):
            return self.module.get_out_channels(in_channels)
        return getattr(self.module, "out_channels", None) or in_channels

    def reset_parameters(self) -> None:
        if hasattr(self.module, "reset_parameters"):
            self.module.reset_parameters()

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph, x = self._weighted_messages(graph, x, edge_weight)
        messages, index, _, _ = _csr_messages(graph, x)
        return self.module(messages, index=index, ptr=graph.csr.indptr.long(),
                           dim_size=graph.num_nodes)

    def __repr__(self) -> str:
        return repr(self.module)


def _drop_wrapper_prefix(module, state_dict, prefix, local_metadata) -> None:
    inner = prefix + "module."
    for key in [k for k in state_dict if k.startswith(inner)]:
        state_dict[prefix + key[len(inner):]] = state_dict.pop(key)


def _add_wrapper_prefix(module, state_dict, prefix, *args) -> None:
    for key in [k for k in state_dict if k.startswith(prefix) and
                not k.startswith(prefix + "module.")]:
        state_dict[prefix + "module." + key[len(prefix):]] = state_dict.pop(key)


class MultiAggregation(Aggregation):
    """Several aggregations combined, as PyG's ``MultiAggregation``: ``mode`` is "cat"
    (concatenate), "proj" (a Linear over the concatenation), "attn" (multi-head attention
    across the aggregations, then their mean) or a reduction over them ("sum", "mean",
    "max", "min", "logsumexp", "std", "var"). ``mode_kwargs`` holds ``in_channels`` and
    ``out_channels`` for "proj"/"attn" (and ``num_heads`` for "attn")."""

    _DENSE_MODES = ("sum", "mean", "max", "min", "logsumexp", "std", "var")

    def __init__(self, aggrs, aggrs_kwargs=None, mode: str = "cat", mode_kwargs=None):
        super().__init__()
        if not isinstance(aggrs, (list, tuple)) or not aggrs:
            raise ValueError(f"MultiAggregation: aggrs must be a non-empty list, got {aggrs!r}")
        aggrs_kwargs = aggrs_kwargs or [{}] * len(aggrs)
        if len(aggrs_kwargs) != len(aggrs):
            raise ValueError(f"MultiAggregation: {len(aggrs_kwargs)} aggrs_kwargs for "
                             f"{len(aggrs)} aggrs")
        self.aggrs = torch.nn.ModuleList([resolve(a, **kw) for a, kw in
                                          zip(aggrs, aggrs_kwargs, strict=True)])
        if mode not in ("cat", "proj", "attn", *self._DENSE_MODES):
            raise ValueError(f"MultiAggregation: unknown mode {mode!r}")
        self.mode = mode
        mode_kwargs = copy.copy(mode_kwargs) or {}
        self.in_channels = mode_kwargs.pop("in_channels", None)
        self.out_channels = mode_kwargs.pop("out_channels", None)
        if mode in ("proj", "attn"):
            self._build_combiner(mode, mode_kwargs)
        self.takes_weights = all(a.takes_weights for a in self.aggrs)

    def _build_combiner(self, mode: str, mode_kwargs: dict) -> None:
        if len(self.aggrs) == 1:
            raise ValueError(f"MultiAggregation: mode {mode!r} needs several aggregations")
        if self.in_channels is None or self.out_channels is None:
            raise ValueError(f"MultiAggregation: mode {mode!r} needs in_channels and "
                             "out_channels in mode_kwargs")
        widths = [self.in_channels] * len(self.aggrs) if isinstance(self.in_channels, int) \
            else list(self.in_channels)
        if mode == "proj":
            self.lin = torch.nn.Linear(sum(widths), self.out_channels, **mode_kwargs)
            return
        num_heads = mode_kwargs.pop("num_heads", 1)
        self.lin_heads = _DictLinear(widths, self.out_channels)
        self.multihead_attn = torch.nn.MultiheadAttention(self.out_channels, num_heads,
                                                          **mode_kwargs)

    def out_channels_for(self, in_channels: int) -> int:
        if self.out_channels is not None:
            return self.out_channels
        return in_channels * len(self.aggrs) if self.mode == "cat" else in_channels

    def reset_parameters(self) -> None:
        for aggr in self.aggrs:
            aggr.reset_parameters()
        if self.mode == "proj":
            self.lin.reset_parameters()
        if self.mode == "attn":
            self.lin_heads.reset_parameters()
            self.multihead_attn._reset_parameters()

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        outs = [aggr(graph, x, edge_weight) for aggr in self.aggrs]
        if len(outs) == 1:
            return outs[0]
        if self.mode == "cat":
            return torch.cat(outs, dim=-1)
        if self.mode == "proj":
            return self.lin(torch.cat(outs, dim=-1))
        if self.mode == "attn":
            stacked = torch.stack(self.lin_heads(outs), dim=0)  # [aggrs, N, out]
            return self.multihead_attn(stacked, stacked, stacked)[0].mean(dim=0)
        out = getattr(torch, self.mode)(torch.stack(outs, dim=0), dim=0)
        return out if isinstance(out, Tensor) else out[0]

    def __repr__(self) -> str:  # PyG's layout
        inner = "".join(f"  {aggr},\n" for aggr in self.aggrs)
        return f"{self.__class__.__name__}([\n{inner}], mode={self.mode})"


SCALERS = ("identity", "amplification", "attenuation", "linear", "inverse_linear")


class DegreeScalerAggregation(Aggregation):
    """PNA's aggregators times its degree scalers (Corso et al., "Principal Neighbourhood
    Aggregation for Graph Nets", 2020), PyG's module: ``aggr`` (a name, a module, or a list
    of them, concatenated) scaled by each of ``scaler`` ("identity", "amplification"
    ``log(d + 1) / delta``, "attenuation" ``delta / log(max(d, 1) + 1)``, "linear"
    ``d / avg_d``, "inverse_linear" ``avg_d / max(d, 1)``), the results concatenated,
    scaler by scaler. ``d`` is each node's in-degree; ``delta`` (``avg_deg_log``) and
    ``avg_d`` (``avg_deg_lin``) are the means of ``log(d + 1)`` and ``d`` over the histogram
    ``deg`` of the training graph's in-degrees (``deg[i]`` nodes of degree ``i``), learnt
    with ``train_norm``. ``deg=None`` (graphloc's option; PyG's needs ``deg``) takes them
    from the graph of the first forward in training mode and keeps them (a buffer, saved
    with the model); a forward in eval mode before that is an error. A single scaler name
    is taken as one (PyG's module iterates over its characters when ``aggr`` is a list, and
    fails)."""

    def __init__(self, aggr, scaler, deg: Tensor | None, train_norm: bool = False,
                 aggr_kwargs=None):
        super().__init__()
        check_flags("DegreeScalerAggregation", train_norm=train_norm)
        self.aggr = MultiAggregation(list(aggr), aggr_kwargs) \
            if isinstance(aggr, (list, tuple)) else resolve(aggr, **(aggr_kwargs or {}))
        if not isinstance(scaler, (str, list, tuple)):
            raise ValueError(f"DegreeScalerAggregation: scalers must be a name or a list of "
                             f"names among {SCALERS}, got {scaler!r}")
        self.scaler = [scaler] if isinstance(scaler, str) else list(scaler)
        unknown = [s for s in self.scaler if not isinstance(s, str) or s not in SCALERS]
        if unknown or not self.scaler:
            raise ValueError(f"DegreeScalerAggregation: scalers must be among {SCALERS}, got "
                             f"{self.scaler!r}")
        self.init_avg_deg_lin, self.init_avg_deg_log = (math.nan, math.nan) if deg is None \
            else self._averages_of(deg)
        if train_norm:
            self.avg_deg_lin = torch.nn.Parameter(torch.empty(1))
            self.avg_deg_log = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("avg_deg_lin", torch.empty(1))
            self.register_buffer("avg_deg_log", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.aggr.reset_parameters()
        with torch.no_grad():
            self.avg_deg_lin.fill_(self.init_avg_deg_lin)
            self.avg_deg_log.fill_(self.init_avg_deg_log)

    def out_channels_for(self, in_channels: int) -> int:
        return self.aggr.out_channels_for(in_channels) * len(self.scaler)

    def forward(self, graph: Graph, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        return self.scale(self.aggr(graph, x, edge_weight), graph.in_degree())

    def scale(self, out: Tensor, degree: Tensor) -> Tensor:
        """``out [N, ...]`` times each scaler of the nodes' in-degrees ``degree [N]``,
        concatenated along the last dimension (PyG's formulas and dtypes)."""
        shape = (-1, *[1] * (out.dim() - 1))
        outs = [out if f is None else out * f.view(shape)
                for f in self.factors(degree, out.dtype)]
        return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]

    def _averages_of(self, deg: Tensor) -> tuple[float, float]:
        averages = degree_averages(deg)
        dividing = sorted({"amplification", "linear"} & set(self.scaler))
        if dividing and averages[0] == 0:
            warnings.warn(f"DegreeScalerAggregation: deg counts only nodes of in-degree 0, so "
                          f"the scalers {dividing} divide by a mean degree of 0 (infinite or "
                          f"NaN outputs, as PyG's); pass the training graph's in-degree "
                          f"histogram", stacklevel=caller_stacklevel())
        return averages

    def _ensure_statistics(self, degree: Tensor) -> None:
        """Built with ``deg=None``: the averages of the first training forward's graph (an
        eager one: while torch.compile traces, the statistics must be there already)."""
        missing = torch.isnan(self.avg_deg_lin).any()
        if torch.compiler.is_compiling():  # the values cannot be read; checked as it runs
            torch._assert_async(~missing, "DegreeScalerAggregation was built without deg: "
                                "run one training forward before torch.compile, or pass deg")
            return
        if not bool(missing):
            return
        if not self.training:
            raise RuntimeError("DegreeScalerAggregation was built without deg and has not "
                               "run a training forward yet: pass deg (the training graph's "
                               "in-degree histogram) or train it first")
        self.init_avg_deg_lin, self.init_avg_deg_log = self._averages_of(
            torch.bincount(degree.long().cpu()))
        with torch.no_grad():  # (the inner aggregations keep their state)
            self.avg_deg_lin.fill_(self.init_avg_deg_lin)
            self.avg_deg_log.fill_(self.init_avg_deg_log)

    def factors(self, degree: Tensor, dtype: torch.dtype) -> list:
        """Each scaler's factor per node ``[N]`` (None for the identity), PyG's formulas."""
        if any(s != "identity" for s in self.scaler):
            self._ensure_statistics(degree)
        d = degree.to(dtype)
        formulas = {"identity": lambda: None,
                    "amplification": lambda: torch.log(d + 1) / self.avg_deg_log,
                    "attenuation": lambda: self.avg_deg_log / torch.log(d.clamp(min=1) + 1),
                    "linear": lambda: d / self.avg_deg_lin,
                    "inverse_linear": lambda: self.avg_deg_lin / d.clamp(min=1)}
        return [formulas[s]() for s in self.scaler]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.aggr}, scaler={self.scaler})"


def degree_averages(deg, dtype: torch.dtype = torch.float32) -> tuple[float, float]:
    """PNA's degree statistics of a histogram (``deg[i]`` nodes, or groups, of size ``i``):
    the mean size and the mean ``log(size + 1)``, computed in ``dtype`` (float32: PyG's
    ``DegreeScalerAggregation``)."""
    if not isinstance(deg, (Tensor, list, tuple)) or isinstance(deg, Tensor) and (
            deg.is_complex() or deg.dtype == torch.bool):
        raise ValueError("deg must be a non-empty histogram, 1-D and finite (deg[i]: the "
                         f"number of nodes, or groups, of size i), got {deg!r}")
    deg = torch.as_tensor(deg)
    if deg.dim() != 1 or deg.is_floating_point() and not bool(torch.isfinite(deg).all()):
        raise ValueError("deg must be a non-empty histogram, 1-D and finite (deg[i]: the "
                         f"number of nodes, or groups, of size i), got {deg!r}")
    deg = deg.to(dtype)
    if bool((deg < 0).any()) or float(deg.sum()) <= 0:
        raise ValueError(f"deg must be a non-empty histogram: deg must count nodes "
                         f"(non-negative, not all 0), got {deg.tolist()}")
    total = float(deg.sum())
    bins = torch.arange(deg.numel(), dtype=dtype, device=deg.device)
    return float((bins * deg).sum()) / total, float(((bins + 1).log() * deg).sum()) / total


class _DictLinear(torch.nn.Module):
    """One Linear per aggregation (PyG's ``HeteroDictLinear`` layout: ``lins.<i>``)."""

    def __init__(self, widths: list[int], out_channels: int):
        super().__init__()
        self.lins = torch.nn.ModuleDict({str(i): torch.nn.Linear(w, out_channels)
                                         for i, w in enumerate(widths)})
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:
        for lin in self.lins.values():
            lin.reset_parameters()

    def forward(self, xs: list[Tensor]) -> list[Tensor]:
        return [self.lins[str(i)](x) for i, x in enumerate(xs)]


_BY_NAME = {"sum": SumAggregation, "add": SumAggregation, "mean": MeanAggregation,
            "max": MaxAggregation, "min": MinAggregation, "var": VarAggregation,
            "std": StdAggregation, "softmax": SoftmaxAggregation, "lstm": LSTMAggregation,
            "lcm": LCMAggregation, "median": MedianAggregation, "quantile": QuantileAggregation,
            "powermean": PowerMeanAggregation, "degreescaler": DegreeScalerAggregation,
            "mul": MulAggregation}


def resolve(aggr, /, **kwargs) -> Aggregation:
    """An ``Aggregation`` from a name (``"mean"``, ``"lstm"``, ...; kwargs go to its class),
    a list of them (a ``MultiAggregation``; kwargs go to it), one of ours, or a PyG
    aggregation module."""
    if isinstance(aggr, Aggregation):
        return aggr
    if isinstance(aggr, (list, tuple)):
        return MultiAggregation(aggr, **kwargs)
    if isinstance(aggr, str):
        key = aggr.lower().removesuffix("aggregation") if aggr.lower() not in _BY_NAME \
            else aggr.lower()
        if key in _BY_NAME:
            return _BY_NAME[key](**kwargs)
        module = _pyg_aggregation(aggr, kwargs)
        if module is None:
            raise ValueError(f"unknown aggregation {aggr!r}; expected one of "
                             f"{sorted(_BY_NAME)}, a list of them, an aggregation module, or "
                             "a name PyG's aggregation_resolver knows (with PyG installed)")
        return ModuleAggregation(module)
    if isinstance(aggr, torch.nn.Module):
        return _quantile_twin(aggr) or ModuleAggregation(aggr)
    raise TypeError(f"aggr must be a name, a list of names or an aggregation module, got "
                    f"{type(aggr).__name__}")


def _quantile_twin(module: torch.nn.Module) -> QuantileAggregation | None:
    """graphloc's twin of a PyG ``QuantileAggregation`` or ``MedianAggregation`` module
    (PyG's raises on a first node without neighbours; see ``QuantileAggregation``), None
    for any other module (a subclass included: it may compute something else)."""
    kind = type(module)
    if not kind.__module__.startswith("torch_geometric."):
        return None
    if kind.__name__ == "MedianAggregation":
        return MedianAggregation(module.fill_value).to(module.q.device)
    if kind.__name__ == "QuantileAggregation":
        return QuantileAggregation(module._q, module.interpolation,
                                   module.fill_value).to(module.q.device)
    return None


def _pyg_aggregation(name: str, kwargs: dict):
    """PyG's aggregation module of that name ("median", "powermean", ...) for the names
    graphloc has no kernel of its own for, as PyG's convs accept them; None without PyG or
    for a name PyG does not know either."""
    try:
        from torch_geometric.nn.resolver import aggregation_resolver
    except ImportError:
        return None
    try:
        return aggregation_resolver(name, **kwargs)
    except ValueError:  # PyG's "Could not resolve"
        return None
