"""Dir-GNN: a conv run along the edges and against them, mixed."""

from __future__ import annotations

import copy
import math

import torch
from torch import Tensor

from graphloc.checks import check_flags
from graphloc.graph import Graph
from graphloc.nn.conv._utils import check_input, check_networks, conv_hops


class DirGNNConv(torch.nn.Module):
    r"""The directed wrapper of `Rossi et al., "Edge Directionality Improves Learning on
    Heterophilic Graphs" (LoG 2023) <https://arxiv.org/abs/2305.10498>`_, as PyG's
    ``DirGNNConv``:

    .. math::
        \mathbf{x}'_i = \alpha \, \mathrm{conv}_{out}(\mathbf{X}, \mathbf{A}^\top)_i
        + (1 - \alpha) \, \mathrm{conv}_{in}(\mathbf{X}, \mathbf{A})_i
        + \mathbf{W} \mathbf{x}_i,

    two copies of ``conv``, one on the edges (messages to each node from its in-neighbours)
    and one on the reversed edges (from its out-neighbours), each with its self-loops and
    root term switched off (``add_self_loops`` and ``root_weight`` set False where the conv
    has them), and one root map ``lin`` (with ``root_weight``).

    A drop-in for PyG's: same arguments, parameters (``conv_in``, ``conv_out``, ``lin``) and
    outputs. ``conv`` may be graphloc's or PyG's. The graph may be an ``edge_index``, a
    ``graphloc.Graph`` (reversed with its edge order kept) or a ``torch.sparse`` ``adj_t``
    (reversed by transposing it; PyG's flips its first axis, which does not reverse it).

    Args:
        conv (module): the conv to copy (``in_channels`` and ``out_channels`` attributes).
        alpha (float, default 0.5): the weight of the reversed edges' output.
        root_weight (bool, default True): add ``lin(x)``.

    Shapes:
        input: ``x [N, F]`` (or ``[B, N, F]`` where ``conv`` takes it), ``edge_index [2, E]``
        or a ``Graph``. output: ``conv``'s.
    """

    def __init__(self, conv: torch.nn.Module, alpha: float = 0.5, root_weight: bool = True):
        super().__init__()
        check_networks("DirGNNConv", conv=conv)
        check_flags("DirGNNConv", root_weight=root_weight)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                not math.isfinite(alpha):
            raise ValueError(f"DirGNNConv: alpha must be a finite number, got {alpha!r}")
        for name in ("in_channels", "out_channels"):
            width = getattr(conv, name, None)
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise ValueError(f"DirGNNConv: conv must have an integer {name} >= 1 (the "
                                 f"root map's width; a lazy -1 gives none), got {width!r}")
        self.alpha, self.root_weight = alpha, root_weight
        self.conv_in, self.conv_out = copy.deepcopy(conv), copy.deepcopy(conv)
        for copied in (self.conv_in, self.conv_out):
            for flag in ("add_self_loops", "root_weight"):
                if hasattr(conv, flag):
                    setattr(copied, flag, False)
        self.lin = torch.nn.Linear(conv.in_channels, conv.out_channels) if root_weight \
            else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.conv_in.reset_parameters()
        self.conv_out.reset_parameters()
        if self.lin is not None:
            self.lin.reset_parameters()

    @property
    def graphloc_hops(self) -> int | None:
        return conv_hops(self.conv_in)  # (each copy reaches as far)

    def forward(self, x: Tensor, edge_index) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() != 3:  # (a static batch: the convs check it)
            check_input(self, x, self.conv_in.in_channels)
        x_in = self.conv_in(x, edge_index)
        x_out = self.conv_out(x, _reversed(edge_index))
        out = self.alpha * x_out + (1 - self.alpha) * x_in
        if self.lin is not None:
            out = out + self.lin(x)
        return out

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.conv_in}, alpha={self.alpha})"


def _reversed(edge_index):
    if isinstance(edge_index, Graph):
        if edge_index.is_bipartite:
            raise ValueError("DirGNNConv: the graph must have one node set (it runs the conv "
                             "on the reversed edges too); got a bipartite Graph")
        return Graph._derived(edge_index.edge_index.flip(0), edge_index.num_nodes,
                              edge_attr=edge_index.edge_attr)
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"DirGNNConv: the graph must be an edge_index [2, E], a Graph or a "
                        f"sparse adj_t, got {type(edge_index).__name__}")
    if edge_index.layout != torch.strided:
        return edge_index.t()  # adj_t [N_dst, N_src]: its transpose holds the reversed edges
    return edge_index.flip(0)
