"""The Weisfeiler-Lehman colour refinement step (PyG's ``WLConv``): each node's next colour
names its colour and the multiset of its in-neighbours' colours. The neighbours' colours
are sorted for all nodes at once; only the dictionary of colours is read per node."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from graphloc.nn.conv._inputs import check_flow, read_inputs


class WLConv(torch.nn.Module):
    r"""The Weisfeiler-Lehman operator of `Weisfeiler and Lehman, "A Reduction of a Graph
    to a Canonical Form and an Algebra Arising During this Reduction" (1968)
    <https://www.iti.zcu.cz/wl2018/pdf/wl_paper_translation.pdf>`_:

    .. math::
        \chi'_i = \mathrm{hash}\big(\chi_i, \{\{\chi_j : j \in \mathcal{N}(i)\}\}\big)

    A drop-in for PyG's ``WLConv``: the same colours, numbered in the order PyG numbers
    them (each new (colour, sorted neighbour colours) pair, met in node order, takes the
    next number) in a dictionary ``hashmap`` kept across calls, so colours of several
    graphs (or iterations) stay comparable; ``histogram`` counts them per graph. The
    neighbours' colours are gathered and sorted for every node at once (PyG sorts each
    node's in a loop of tensor operations).

    Args:
        flow (str, default "source_to_target"): the edge direction: a node's neighbours
            are the sources of its incoming edges (``"target_to_source"``: the ends of its
            outgoing ones).

    Differences from PyG's (docs/models.md): ``flow="target_to_source"`` is read (PyG's
    ignores it); inputs PyG asserts on are named errors.

    Shapes:
        input: colours ``x [N]`` (integers) or one-hot rows ``[N, C]``, the graph (an
        ``edge_index [2, E]``, a ``Graph`` or a ``torch.sparse`` ``adj_t``). output: the
        next colours ``[N]`` (integers).
    """

    def __init__(self, flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("WLConv", flow)
        self.hashmap: dict = {}

    def reset_parameters(self) -> None:
        """Forgets every colour (PyG's: an empty ``hashmap``)."""
        self.hashmap = {}

    @property
    def graphloc_hops(self) -> int:
        return 1

    @torch.no_grad()
    def forward(self, x: Tensor, edge_index) -> Tensor:
        colors = self._colors(x)
        # the graph is read on a placeholder of no features (the colours are integers)
        inputs = read_inputs(self, colors.new_empty(colors.size(0), 0, dtype=torch.float32),
                             edge_index)
        graph = inputs.graph
        graph._require_one_node_set("WLConv (a node and its neighbours share the colours)")
        # the colours' range, read once (one aminmax): both the sort and the hash ask
        low, high = (int(v) for v in torch.aminmax(colors)) if colors.numel() else (0, 0)
        sorted_colors = _neighbour_colors_by_destination(graph, colors, low, high)
        degree = graph.in_degree()
        keys = _tuple_hashes(colors, sorted_colors, degree) if _hashes_like_python(low, high) \
            else _python_hashes(colors, sorted_colors, degree)
        return self._numbered(keys).to(x.device)

    def _numbered(self, keys: Tensor) -> Tensor:
        """Each node's colour: its key's number in ``hashmap``, new keys numbered in the
        order of their first node (PyG's order)."""
        distinct, inverse = torch.unique(keys, return_inverse=True)
        first = torch.full((distinct.numel(),), keys.numel(), dtype=torch.long,
                           device=keys.device).scatter_reduce(
            0, inverse, torch.arange(keys.numel(), device=keys.device), "amin")
        by_first = first.argsort()
        numbers, hashmap = [], self.hashmap
        for key in distinct.index_select(0, by_first).tolist():
            number = hashmap.get(key)
            if number is None:
                number = hashmap[key] = len(hashmap)
            numbers.append(number)
        colour_of = torch.empty(distinct.numel(), dtype=torch.long, device=keys.device)
        colour_of[by_first] = torch.tensor(numbers, dtype=torch.long, device=keys.device)
        return colour_of.index_select(0, inverse)

    def _colors(self, x) -> Tensor:
        """``x`` as one colour per node: integers ``[N]``, or one-hot rows ``[N, C]``."""
        if not isinstance(x, Tensor):
            raise TypeError(f"WLConv expects colours x as a tensor, got {type(x).__name__}")
        if x.dim() == 2:
            if x.size(0) and not bool((x.sum(dim=-1) == 1).all()):
                row = int((x.sum(dim=-1) != 1).nonzero()[0])
                raise ValueError(f"WLConv: x of shape {list(x.shape)} is read as one-hot rows, "
                                 f"but row {row} sums to {x[row].sum().item()}, not 1")
            return x.argmax(dim=-1) if x.size(1) else x.new_zeros(0, dtype=torch.long)
        if x.dim() != 1 or x.dtype != torch.long:
            raise TypeError(f"WLConv expects colours x as int64 [N] or one-hot [N, C], got "
                            f"{x.dtype} {list(x.shape)}")
        return x

    def histogram(self, x: Tensor, batch: Tensor | None = None,
                  norm: bool = False) -> Tensor:
        """Per graph of ``batch`` (one graph without it), the count of each colour of
        ``x`` among the ``len(hashmap)`` colours known, ``[B, colours]``; with ``norm``
        each row divided by its Euclidean norm (float)."""
        num_colors = len(self.hashmap)
        if batch is None:
            batch = torch.zeros(x.size(0), dtype=torch.long, device=x.device)
        if x.dim() != 1 or x.dtype != torch.long or batch.shape != x.shape or \
                batch.dtype != torch.long:
            raise ValueError(f"WLConv.histogram: x must be int64 colours [N] and batch int64 "
                             f"graph ids [N], got {x.dtype} {list(x.shape)} and {batch.dtype} "
                             f"{list(batch.shape)}")
        if batch.numel() and int(batch.min()) < 0:
            raise ValueError(f"WLConv.histogram: batch holds {int(batch.min())}; graph ids "
                             "are >= 0")
        if x.numel() and (int(x.min()) < 0 or int(x.max()) >= num_colors):
            raise ValueError(f"WLConv.histogram: x holds colours {int(x.min())} .. "
                             f"{int(x.max())}, but {num_colors} are known (0 .. "
                             f"{num_colors - 1})")
        batch_size = int(batch.max()) + 1 if batch.numel() else 0
        counts = torch.bincount(batch * num_colors + x, minlength=num_colors * batch_size)
        out = counts.view(batch_size, num_colors)
        if norm:
            out = out.to(torch.float)
            out /= out.norm(dim=-1, keepdim=True)
        return out

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}()"


def _neighbour_colors_by_destination(graph, colors: Tensor, low: int, high: int) -> Tensor:
    """The colours of the edges' sources grouped by destination (ascending) and ascending
    within each: one sort of ``destination * (C + 1) + colour`` where that fits in int64
    (C = ``high`` the largest colour, ``low`` the smallest not negative), else two stable
    sorts."""
    src, dst = graph.edge_index
    neighbours = colors.index_select(0, src)
    if not neighbours.numel():
        return neighbours
    if low >= 0 and (high + 1) * graph.num_nodes < 1 << 62:
        return torch.sort(dst * (high + 1) + neighbours).values % (high + 1)
    by_color = neighbours.argsort(stable=True)
    order = by_color.index_select(0, dst.index_select(0, by_color).argsort(stable=True))
    return neighbours.index_select(0, order)


# CPython's tuple hash (Objects/tupleobject.c, 3.8 on: xxHash's primes and rotation) on
# 64 bits, in int64 arithmetic (whose products and sums wrap as the unsigned ones do)
def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_PRIME_1, _PRIME_2 = _signed(11400714785074694791), _signed(14029467366897019727)
_PRIME_5 = _signed(2870177450012600261)
_LENGTH_MASK = _PRIME_5 ^ 3527539


def _mix(acc: Tensor, lane: Tensor) -> Tensor:
    acc = acc + lane * _PRIME_2
    acc = (acc << 31) | ((acc >> 33) & ((1 << 31) - 1))  # rotate left by 31 bits
    return acc * _PRIME_1


def _tuple_hashes(colors: Tensor, sorted_colors: Tensor, degree: Tensor) -> Tensor:
    """Per node ``hash((colour, *sorted neighbour colours))`` as CPython computes it, one
    vectorised step per neighbour position (a Python int below 2 ** 61 - 1 hashes to
    itself). PyG's ``WLConv`` keys its colour dictionary by this hash."""
    acc = _mix(torch.full_like(colors, _PRIME_5), colors)
    starts = torch.cumsum(degree, 0) - degree
    # the nodes with a neighbour at each position are a prefix of the nodes by degree,
    # largest first: the steps read E entries in all (a hub's long tail, few nodes)
    by_degree = degree.argsort(descending=True, stable=True)
    longest = int(degree.max()) if degree.numel() else 0
    ascending = degree.index_select(0, by_degree.flip(0))
    counts = degree.numel() - torch.searchsorted(
        ascending, torch.arange(longest, device=degree.device), right=True)
    starts = starts.index_select(0, by_degree)
    for position, count in enumerate(counts.tolist()):
        nodes = by_degree[:count]
        lane = sorted_colors.index_select(0, starts[:count] + position)
        acc.index_copy_(0, nodes, _mix(acc.index_select(0, nodes), lane))
    acc = acc + ((degree + 1) ^ _LENGTH_MASK)
    return torch.where(acc == -1, torch.full_like(acc, 1546275796), acc)


def _python_hashes(colors: Tensor, sorted_colors: Tensor, degree: Tensor) -> Tensor:
    """``_tuple_hashes`` by Python's own ``hash``, node by node (colours the vectorised
    hash does not take, or an interpreter whose tuple hash differs)."""
    flat, keys, start = sorted_colors.tolist(), [], 0
    for node, end in zip(colors.tolist(), torch.cumsum(degree, 0).tolist(), strict=True):
        keys.append(hash((node, *flat[start:end])))
        start = end
    return torch.tensor(keys, dtype=torch.long, device=colors.device)


def _hashes_like_python(low: int, high: int) -> bool:
    """Whether ``_tuple_hashes`` gives Python's hashes for colours in ``[low, high]``: each
    in [0, 2 ** 61 - 1) (where an int's hash is itself), and this interpreter's tuple hash
    the one it computes (checked once on sample tuples)."""
    if low < 0 or high >= (1 << 61) - 1:
        return False
    return _interpreter_hashes_tuples_so()


@functools.cache
def _interpreter_hashes_tuples_so() -> bool:
    """Whether this interpreter's ``hash`` of int tuples is ``_tuple_hashes``'s (once)."""
    samples = [(0,), (5, 1, 1, 2), (3, *range(40)), ((1 << 61) - 2, 7)]
    colors = torch.tensor([t[0] for t in samples])
    degree = torch.tensor([len(t) - 1 for t in samples])
    rest = torch.tensor([c for t in samples for c in t[1:]])
    return _tuple_hashes(colors, rest, degree).tolist() == [hash(t) for t in samples]

