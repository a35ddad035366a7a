"""Helpers shared by the conv layers: graph wrapping and input checks."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import is_int_at_least
from graphloc.graph import Graph


def as_graph(graph_or_edge_index, x: Tensor | tuple[Tensor, Tensor]) -> Graph:
    """A ``Graph`` as given, or one built around a raw ``edge_index`` on ``x.size(0)`` nodes
    (bipartite, ``size=(x_src.size(0), x_dst.size(0))``, for a pair ``x = (x_src, x_dst)``).

    Building validates and sorts the edges on every call; pass a ``Graph`` to do it once.
    """
    pair = isinstance(x, (tuple, list))
    if isinstance(graph_or_edge_index, Graph):
        graph = graph_or_edge_index
    elif isinstance(graph_or_edge_index, Tensor):
        if not pair:
            return Graph(graph_or_edge_index, num_nodes=x.size(0))
        graph = Graph.bipartite(graph_or_edge_index, (x[0].size(0), x[1].size(0)))
    else:
        raise TypeError("expected a graphloc.Graph or an edge_index tensor, got "
                        f"{type(graph_or_edge_index).__name__}")
    if pair and (x[0].size(0), x[1].size(0)) != (graph.num_src_nodes, graph.num_nodes):
        raise ValueError(f"x_src and x_dst have {x[0].size(0)} and {x[1].size(0)} rows but "
                         f"the graph has {graph.num_src_nodes} source and {graph.num_nodes} "
                         "destination nodes")
    return graph


def check_input(layer: torch.nn.Module, x: Tensor, in_channels: int | None,
                name: str = "x") -> None:
    """Floating-point ``[N, in_channels]`` features (any width when ``in_channels`` is None)."""
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"{layer.__class__.__name__} expects floating-point node features "
                        f"{name}, got {got}")
    if x.dim() != 2 or (in_channels is not None and x.size(1) != in_channels):
        width = "F" if in_channels is None else in_channels
        raise ValueError(f"{layer.__class__.__name__} expects {name} of shape [N, {width}], "
                         f"got {list(x.shape)}")


def split_widths(in_channels) -> tuple:
    """``(source width, destination width)`` from an int (both) or a pair."""
    if isinstance(in_channels, (tuple, list)):
        if len(in_channels) != 2:
            raise ValueError(f"in_channels must be an int or a pair, got {in_channels}")
        return tuple(in_channels)
    return in_channels, in_channels


def node_pair(layer: torch.nn.Module, x, in_channels) -> tuple[Tensor, Tensor]:
    """``(x_src, x_dst)`` from a pair (bipartite message passing, PyG's convention) or from
    one tensor used on both sides, each checked against its width (``in_channels`` an int
    for both, a pair, or None for any)."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2 or any(not isinstance(t, Tensor) for t in x):
            raise TypeError(f"{layer.__class__.__name__} expects x as a tensor or a pair "
                            f"(x_src, x_dst) of tensors, got {[type(t).__name__ for t in x]}")
        x_src, x_dst = x
    else:
        x_src = x_dst = x
    src_width, dst_width = split_widths(in_channels)
    check_input(layer, x_src, src_width, "x_src" if x_src is not x_dst else "x")
    if x_dst is not x_src:
        check_input(layer, x_dst, dst_width, "x_dst")
    return x_src, x_dst


def check_sizes(owner: str, **sizes) -> None:
    """Each size is an integer >= 1 (``in_channels`` may be a pair of them; None means
    unset): a width, head count or depth of 0 would build a layer that outputs zeros and
    still trains, and a negative one fails deep inside torch."""
    for name, value in sizes.items():
        values = value if name == "in_channels" and isinstance(value, (tuple, list)) \
            else (value,)
        if value is None:
            continue
        if len(values) != 1 and len(values) != 2 or any(
                not is_int_at_least(v, 1) for v in values):
            raise ValueError(f"{owner}: {name} must be an integer >= 1, got {value!r}")


def check_dropouts(owner: str, **probabilities) -> None:
    """Each dropout probability lies in [0, 1)."""
    for name, p in probabilities.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
            raise ValueError(f"{owner}: {name} must be a probability in [0, 1), got {p!r}")


def glorot_linear(in_channels: int, out_channels: int) -> torch.nn.Linear:
    """A bias-free Linear initialised like PyG's ``weight_initializer='glorot'``."""
    lin = torch.nn.Linear(in_channels, out_channels, bias=False)
    torch.nn.init.xavier_uniform_(lin.weight)
    return lin


def reset_glorot(lin: torch.nn.Linear) -> None:
    torch.nn.init.xavier_uniform_(lin.weight)


def check_ball_sizes(ball_sizes, num_nodes: int) -> None:
    """``forward_within``'s ``ball_sizes``: non-decreasing, the last one every node."""
    if not ball_sizes or ball_sizes[-1] != num_nodes or any(
            a > b for a, b in zip(ball_sizes[:-1], ball_sizes[1:], strict=True)):
        raise ValueError(f"ball_sizes must grow to the {num_nodes} nodes of x, got "
                         f"{list(ball_sizes)}")


def rows_within(ball_sizes, hops: int) -> int | None:
    """How many leading nodes lie within ``hops`` hops (None: no pruning, all of them)."""
    return None if ball_sizes is None else ball_sizes[min(hops, len(ball_sizes) - 1)]


def propagate_prefix(graph: Graph, weight: Tensor | None, x: Tensor,
                     num_dst: int | None) -> Tensor:
    """``spmm(graph, x_all, weight)[:num_dst]`` where ``x`` holds the first rows of
    ``x_all``, all that those rows read (nodes ordered by hop distance, see
    ``Graph.dst_prefix``); the whole product when ``num_dst`` is None."""
    if num_dst is None:
        return ops.spmm(graph, x, weight)
    prefix = graph.dst_prefix(num_dst, x.size(0))
    if weight is not None:
        weight = graph.to_csr_order(weight)[:prefix.num_edges]
    return ops.spmm(prefix, x, weight)
