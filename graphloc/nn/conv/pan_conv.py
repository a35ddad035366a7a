"""PAN's path integral based convolution: a learned mixture of the adjacency's powers."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_fits_in_memory
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._inputs import check_flow, read_one_node_set, weights_from
from graphloc.nn.conv._utils import check_input, check_sizes, linear


class PANConv(ConvModule):
    r"""The path integral based convolution of `Ma et al., "Path Integral Based Convolution
    and Pooling for Graph Neural Networks" (NeurIPS 2020)
    <https://arxiv.org/abs/2006.16811>`_, as PyG's ``PANConv``:

    .. math::
        \mathbf{X}' = \mathbf{M} \mathbf{X} \mathbf{W}, \quad
        \mathbf{M} = \mathbf{Z}^{-1/2} \Big( \sum_{n=0}^{L} c_n \mathbf{A}^n \Big)
        \mathbf{Z}^{-1/2}, \quad c_n = \prod_{k=0}^{n} w_k,

    ``A[i, j]`` the weight of the edge ``j -> i`` (1 without weights; parallel edges add),
    ``w`` the ``filter_size + 1`` learned weights (``weight``, all 0.5 at first), and
    ``Z_ii`` the number of nodes that reach ``i`` within ``L`` hops, ``i`` included (the
    number of entries in row ``i`` of the path matrix, as PyG's ``rowcount``).

    A drop-in for PyG's, which needs torch-sparse: same arguments, parameters (``lin``,
    ``weight``) and outputs ``(out, M)``, ``M`` a coalesced ``torch.sparse`` COO tensor
    ``[N, N]`` (PyG's is torch-sparse's ``SparseTensor``; both give the same
    ``to_dense()``). The walk counts of every length come from one kernel
    (:func:`graphloc.ops.walk_counts`), not from ``L`` sparse-sparse products, and ``M X``
    is one sparse product.

    Differences from PyG's, each where PyG's fails: a CSC ``adj_t`` is read (PyG's raises),
    ``flow="target_to_source"`` reverses the edges (PyG's raises for it), and an
    ``edge_weight`` may weigh an ``edge_index`` as a sparse adjacency's values do.

    Differences from the official code (``YuGuangWang/PAN``, kept as PyG has them): the
    official ``filter_size`` counts the weights (``L + 1``), applies ``lin`` before the
    propagation (so its bias is scaled by ``M``'s row sums), weighs the powers by
    :math:`\prod_{k=1}^{n} w_k` (without ``w_0``), counts ``Z`` over the entries per column
    of ``M`` (the same for an undirected graph), and keeps an ``M`` with the squared path
    weights for its pooling (docs/models.md).

    The pattern (which pairs are joined by walks) has no gradient; ``weight``, ``lin`` and
    ``x`` get theirs. Edge weights that require grad are refused (no gradient would flow
    to them). A pair whose weighted walks add to 0 keeps its entry and
    counts in ``Z``.

    ``torch.compile`` runs it with graph breaks (the walks' pattern has a data-dependent
    size, and ``M`` is a sparse tensor, which it does not trace); ``fullgraph=True`` fails.

    Args:
        in_channels (int): input width (-1: taken from the first call).
        out_channels (int): output width.
        filter_size (int): ``L``, the longest walk (``>= 0``).
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``x [N, F]``, a ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse``
        ``adj_t`` whose values are the edge weights, optional ``edge_weight [E]``.
        output: ``([N, out_channels], M [N, N])``.
    """

    def __init__(self, in_channels: int, out_channels: int, filter_size: int,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("PANConv", lazy=True, in_channels=in_channels, out_channels=out_channels)
        if isinstance(filter_size, bool) or not isinstance(filter_size, int) or filter_size < 0:
            raise ValueError(f"PANConv: filter_size must be an integer >= 0, got {filter_size!r}")
        check_fits_in_memory((filter_size + 1,), torch.float32, "PANConv: filter_size")
        self.flow = check_flow("PANConv", flow)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.filter_size = filter_size
        self.lin = linear(in_channels, out_channels)
        self.weight = torch.nn.Parameter(torch.empty(filter_size + 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        with torch.no_grad():
            self.weight.fill_(0.5)

    @property
    def graphloc_hops(self) -> int:
        return self.filter_size  # (its longest walk)

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None
                ) -> tuple[Tensor, Tensor]:
        inputs = read_one_node_set(self, x, edge_index, "it sums powers of one adjacency")
        if inputs.batch is not None:
            raise ValueError("PANConv: x must be [N, F]; a static batch [B, N, F] has no one "
                             "[N, N] matrix M to return")
        check_input(self, inputs.x_src, self.in_channels, "x")
        x = inputs.x_src
        weight = weights_from(self, inputs, edge_weight)
        graph, values = path_matrix(inputs.graph, weight, self.weight.to(x.dtype))
        out = self.lin(ops.spmm(graph, x, values))
        rows, cols = graph.edge_index[1], graph.edge_index[0]
        m = torch.sparse_coo_tensor(torch.stack([rows, cols]), values,
                                    (graph.num_nodes, graph.num_nodes), is_coalesced=True,
                                    check_invariants=False)  # sorted, in range, by construction
        return out, m

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"filter_size={self.filter_size})")


def path_matrix(graph: Graph, edge_weight: Tensor | None, weight: Tensor
                ) -> tuple[Graph, Tensor]:
    """PAN's normalised path matrix ``M``: its pattern as a Graph (the edge ``j -> i`` for
    the entry ``(i, j)``, destination-major) and its values in that order."""
    if edge_weight is not None and edge_weight.requires_grad and torch.is_grad_enabled():
        raise ValueError("PANConv: the edge weights require grad, but no gradient flows to "
                         "them (the walk counts have none); pass them detached")
    hops, device = weight.numel() - 1, weight.device
    if edge_weight is None:  # the graph's own walks: counted once per graph, then reused
        pattern, counts, scale = graph.cached(
            ("pan_walks", hops, device), lambda: _walk_pattern(graph, hops, None, device))
    else:
        pattern, counts, scale = _walk_pattern(graph, hops, edge_weight, device)
    values = counts.to(weight.dtype) @ torch.cumprod(weight, 0)
    rows, cols = pattern.edge_index[1], pattern.edge_index[0]
    return pattern, values * scale[rows].to(weight.dtype) * scale[cols].to(weight.dtype)


def _walk_pattern(graph: Graph, hops: int, edge_weight: Tensor | None, device
                  ) -> tuple[Graph, Tensor, Tensor]:
    """The walks' pattern as a Graph, their counts ``[nnz, hops + 1]`` (float64) and
    ``Z^-1/2`` per node (float64), on ``device``."""
    walks = ops.walk_counts(graph, hops, None if edge_weight is None else edge_weight.detach())
    indptr, cols = walks.indptr.to(device), walks.indices.to(device)
    per_row = indptr[1:] - indptr[:-1]
    rows = torch.repeat_interleave(torch.arange(graph.num_nodes, device=device), per_row)
    scale = per_row.to(torch.float64).rsqrt()  # every row holds its own node: no zero count
    pattern = Graph._derived(torch.stack([cols, rows]), graph.num_nodes, dst_sorted=True)
    return pattern, walks.counts.to(device), scale
