"""Helpers shared by the conv layers: graph wrapping and input checks."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.graph import Graph


def as_graph(graph_or_edge_index, x: Tensor) -> Graph:
    """A ``Graph`` as given, or one built around a raw ``edge_index`` on ``x.size(0)`` nodes.

    Building validates and sorts the edges on every call; pass a ``Graph`` to do it once.
    """
    if isinstance(graph_or_edge_index, Graph):
        return graph_or_edge_index
    if isinstance(graph_or_edge_index, Tensor):
        return Graph(graph_or_edge_index, num_nodes=x.size(0))
    raise TypeError("expected a graphloc.Graph or an edge_index tensor, got "
                    f"{type(graph_or_edge_index).__name__}")


def check_input(layer: torch.nn.Module, x: Tensor, in_channels: int) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"{layer.__class__.__name__} expects floating-point node features, "
                        f"got {got}")
    if x.dim() != 2 or x.size(1) != in_channels:
        raise ValueError(f"{layer.__class__.__name__} expects x of shape [N, {in_channels}], "
                         f"got {list(x.shape)}")


def glorot_linear(in_channels: int, out_channels: int) -> torch.nn.Linear:
    """A bias-free Linear initialised like PyG's ``weight_initializer='glorot'``."""
    lin = torch.nn.Linear(in_channels, out_channels, bias=False)
    torch.nn.init.xavier_uniform_(lin.weight)
    return lin


def reset_glorot(lin: torch.nn.Linear) -> None:
    torch.nn.init.xavier_uniform_(lin.weight)
