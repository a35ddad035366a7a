"""R-GCN: message passing with one weight matrix per relation, each relation's neighbours
aggregated apart."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_index
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow, read_inputs, relation_types, weights_from
from graphloc.nn.conv._utils import (
    check_sizes,
    glorot,
    split_widths,
    width_keeping_aggregation,
)


class RGCNConv(ConvModule):
    r"""The relational graph convolution of `Schlichtkrull et al., "Modeling Relational Data
    with Graph Convolutional Networks" (ESWC 2018) <https://arxiv.org/abs/1703.06103>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{\Theta}_{\textrm{root}} \mathbf{x}_i +
        \sum_{r \in \mathcal{R}} \mathrm{aggr}_{j \in \mathcal{N}_r(i)}
        \mathbf{\Theta}_r \mathbf{x}_j + \mathbf{b}

    A drop-in for PyG's ``RGCNConv`` and ``FastRGCNConv`` (same arguments, parameters
    ``weight``, ``comp``, ``root``, ``bias`` with PyG's initialisation, and outputs). PyG
    runs one propagation per relation; here one fused sparse product aggregates every
    relation of every node at once (the rows of ``Graph.by_relation``) and one matrix product
    applies all the relation weights.

    Args:
        in_channels (int or (int, int)): input width, or the source and destination widths
            (with node indices as input: the number of source and destination nodes).
        out_channels (int): output width.
        num_relations (int): relation count; ``edge_type`` holds values in ``[0, R)``.
        num_bases (int, optional): basis decomposition, ``Theta_r = sum_b comp[r, b] V_b``.
        num_blocks (int, optional): block-diagonal decomposition (widths divisible by it).
        aggr (str or module, default "mean"): the aggregation within each relation ("mean",
            "sum"/"add", "max", "min", or any that keeps the width, as ``SAGEConv``'s).
        root_weight (bool, default True), bias (bool, default True): as PyG's.
        is_sorted (bool, default False): PyG's hint that the edges are sorted by type; taken
            and not needed here.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x`` as features ``[N, F]``, node indices ``[N]`` (the rows of ``weight``
        and ``root`` as learnt embeddings) or None (the indices ``0 .. in_channels - 1``),
        or a pair of these; the graph (``edge_index [2, E]``, a ``Graph``, or a
        ``torch.sparse`` ``adj_t``); ``edge_type [E]`` in the graph's edge order (an
        adjacency's storage order, its values then weighting the edges), or left out with an
        ``adj_t`` whose values are the edge types (PyG's reading of a ``SparseTensor``).
        output: ``[N_dst, out]``.

    Differences from PyG's: an ``edge_type`` outside ``[0, R)`` is an error naming the value
    (PyG's loop over relations skips those edges without a word); a static batch ``[B, N,
    F]`` is refused (PyG's reads it with ``node_dim = 0``, as ``[N, B, F]``).
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 num_relations: int, num_bases: int | None = None, num_blocks: int | None = None,
                 aggr="mean", root_weight: bool = True, is_sorted: bool = False,
                 bias: bool = True, aggr_kwargs: dict | None = None,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("RGCNConv", pair=True, optional=("num_bases", "num_blocks"),
                    in_channels=in_channels, out_channels=out_channels,
                    num_relations=num_relations, num_bases=num_bases, num_blocks=num_blocks)
        check_flags("RGCNConv", root_weight=root_weight, is_sorted=is_sorted, bias=bias)
        self.flow = check_flow("RGCNConv", flow)
        if num_bases is not None and num_blocks is not None:
            raise ValueError("RGCNConv: num_bases and num_blocks are two decompositions; "
                             "give at most one")
        src_width, dst_width = split_widths(in_channels)
        if num_blocks is not None and (src_width % num_blocks or out_channels % num_blocks):
            raise ValueError(f"RGCNConv: num_blocks={num_blocks} must divide in_channels "
                             f"({src_width}) and out_channels ({out_channels})")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_relations, self.num_bases, self.num_blocks = num_relations, num_bases, num_blocks
        self.in_channels_l, self.is_sorted = src_width, is_sorted
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.aggr_module = width_keeping_aggregation(
            "RGCNConv", aggr, aggr_kwargs, src_width, "the relation weights take the input width")
        self.weight, self.comp = self._relation_parameters(src_width, out_channels)
        self.root = torch.nn.Parameter(torch.empty(dst_width, out_channels)) \
            if root_weight else None
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def _relation_parameters(self, width: int, out: int):
        """PyG's ``weight`` (and ``comp``) for the chosen decomposition."""
        if self.num_bases is not None:
            return (torch.nn.Parameter(torch.empty(self.num_bases, width, out)),
                    torch.nn.Parameter(torch.empty(self.num_relations, self.num_bases)))
        if self.num_blocks is not None:
            blocks = self.num_blocks
            return torch.nn.Parameter(torch.empty(self.num_relations, blocks, width // blocks,
                                                  out // blocks)), None
        return torch.nn.Parameter(torch.empty(self.num_relations, width, out)), None

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.aggr_module.reset_parameters()
        for param in (self.weight, self.comp, self.root):
            if param is not None:
                glorot(param)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def relation_weights(self) -> Tensor:
        """``Theta_r`` for every relation, ``[R, in, out]`` (``[R, blocks, in / blocks,
        out / blocks]`` with ``num_blocks``)."""
        if self.num_bases is None:
            return self.weight
        bases = self.weight.reshape(self.num_bases, -1)
        return (self.comp @ bases).view(self.num_relations, self.in_channels_l, self.out_channels)

    def forward(self, x, edge_index, edge_type: Tensor | None = None) -> Tensor:
        x_src, x_dst = self._node_inputs(x)
        pair = isinstance(x, (tuple, list))
        inputs = read_inputs(self, (_shape_of(x_src), _shape_of(x_dst)) if pair else
                             _shape_of(x_src), edge_index)
        # the adjacency's values weight the edges when they are not the types
        weight = None if edge_type is None else weights_from(self, inputs, None)
        weight = masked_weights(weight, explain_mask(self, inputs))
        edge_type = relation_types(self, inputs, edge_type, self.num_relations)
        relations = inputs.graph.by_relation(edge_type, self.num_relations)
        out = self._relation_sum(relations, x_src, weight, inputs.graph.num_nodes)
        if self.root is not None:
            out = out + (x_dst @ self.root if x_dst.is_floating_point() else self.root[x_dst])
        if self.bias is not None:
            out = out + self.bias
        return out

    def _node_inputs(self, x) -> tuple[Tensor, Tensor]:
        """(source, destination) inputs: features, or node indices (None: ``0 .. in - 1``)."""
        owner = type(self).__name__  # (FastRGCNConv's too)
        pair = isinstance(x, (tuple, list))
        if pair and len(x) != 2:
            raise TypeError(f"{owner} expects x as a tensor, None or a pair, got {len(x)} "
                            "entries")
        x_src = x[0] if pair else x
        if x_src is None:
            x_src = torch.arange(self.in_channels_l, device=self.weight.device)
        x_dst = x[1] if pair else x_src
        widths = split_widths(self.in_channels)
        for name, t, width in (("x_src" if pair else "x", x_src, widths[0]),
                               ("x_dst", x_dst, widths[1])):
            self._check_nodes(name, t, width)
        return x_src, x_dst

    def _check_nodes(self, name: str, t, width: int) -> None:
        owner = type(self).__name__
        if not isinstance(t, Tensor):
            raise TypeError(f"{owner}: {name} must be a tensor of features or node indices, "
                            f"got {type(t).__name__}")
        if t.is_floating_point():
            if t.dim() != 2 or t.size(1) != width:
                raise ValueError(f"{owner} expects {name} of shape [N, {width}] (a static "
                                 f"batch is not taken), got {list(t.shape)}")
            if t.dtype != self.weight.dtype and not torch.is_autocast_enabled(t.device.type):
                raise TypeError(f"{owner} has {self.weight.dtype} parameters, but {name} is "
                                f"{t.dtype}")
            return
        if t.dim() != 1 or t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"{owner}: {name} as node indices must be a 1-D integer tensor, "
                            f"got {t.dtype} {list(t.shape)}")
        if self.num_blocks is not None:
            raise ValueError(f"{owner}: the block-diagonal decomposition needs features, not "
                             f"node indices ({name})")
        check_index(t, width, f"{owner}: {name} (node indices into {width} rows)")

    def _relation_sum(self, relations, x_src: Tensor, weight: Tensor | None,
                      num_dst: int) -> Tensor:
        """sum_r aggr_{j in N_r(i)} Theta_r x_j for every destination i: each (relation,
        node) pair with edges aggregated once, its relation's weight applied to the pairs of
        that relation as one product, the results summed into their nodes."""
        graph, rows = relations
        if weight is not None:
            weight = weight.to(x_src.dtype if x_src.is_floating_point() else self.weight.dtype)
        if not x_src.is_floating_point():  # the messages are rows of Theta_r: aggregate them
            return self._aggregated_rows(graph, rows, x_src, weight, num_dst)
        per_pair = self.aggr_module(graph, x_src, weight)  # [K, F]
        bounds = relation_bounds(graph, rows, self.num_relations, num_dst)
        theta = self.relation_weights()
        # every relation, those without edges too: their weights get zero gradients, as
        # PyG's (None would let an optimiser skip what PyG's decays). split and unbind, not
        # slices: a slice's backward writes a zero tensor of the whole input per relation
        sizes = [end - start for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
        transformed = torch.cat([
            self._transform(part, theta_r)
            for part, theta_r in zip(per_pair.split(sizes), theta.unbind(0), strict=True)])
        return ops.spmm(pairs_to_nodes(graph, rows, num_dst), transformed)

    def _transform(self, rows: Tensor, theta: Tensor) -> Tensor:
        """``rows @ Theta_r`` (block by block with ``num_blocks``)."""
        if self.num_blocks is None:
            return rows @ theta
        blocks = rows.view(rows.size(0), self.num_blocks, theta.size(1))  # (no -1: K may be 0)
        return torch.einsum("kbi,bio->kbo", blocks, theta).reshape(rows.size(0),
                                                                   self.out_channels)

    def _aggregated_rows(self, graph, rows: Tensor, index: Tensor, weight: Tensor | None,
                         num_dst: int) -> Tensor:
        """Node indices as input (PyG's ``weight[r, x_j]``): the aggregation, per (relation,
        node) pair, of the rows ``Theta_r[x_j]`` of its in-edges j, summed into the nodes."""
        src, pair = graph.edge_index
        relation = rows[pair] // num_dst
        table = self.relation_weights().reshape(-1, self.out_channels)  # [R * in, out]
        gathered = type(graph).bipartite(
            torch.stack([relation * self.in_channels_l + index.long()[src], pair]),
            (table.size(0), graph.num_nodes))
        per_pair = self.aggr_module(gathered, table, weight)
        return ops.spmm(pairs_to_nodes(graph, rows, num_dst), per_pair)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_relations={self.num_relations})")


class FastRGCNConv(RGCNConv):
    """PyG's ``FastRGCNConv``: the same layer (PyG's computes it per edge, trading memory for
    speed; graphloc's ``RGCNConv`` already aggregates all relations at once). As PyG's, it
    takes "sum", "add" and "mean" only, and with node indices as input its messages are the
    rows ``Theta_r[j]`` of the source nodes' own ids j (the root term reads ``x_dst``'s
    indices), where ``RGCNConv`` reads ``Theta_r[x_j]``: the same for ``x = None``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.aggr not in ("add", "sum", "mean"):
            raise ValueError(f"FastRGCNConv takes aggr 'add', 'sum' or 'mean', got "
                             f"aggr={self.aggr!r}")

    def _node_inputs(self, x) -> tuple[Tensor, Tensor]:
        x_src, x_dst = super()._node_inputs(x)
        if not x_src.is_floating_point():  # PyG's message reads edge_index_j, not x_j
            x_src = torch.arange(x_src.numel(), device=x_src.device)
            check_index(x_src, self.in_channels_l, f"FastRGCNConv: the source node ids "
                        f"(node indices into {self.in_channels_l} rows)")
        return x_src, x_dst


def _shape_of(t: Tensor) -> Tensor:
    """What ``read_inputs`` reads the node count from: the features, or for node indices
    an empty ``[N, 0]`` stand-in."""
    return t if t.is_floating_point() else torch.empty(t.size(0), 0, device=t.device)


def relation_bounds(graph, rows: Tensor, num_relations: int, num_dst: int) -> list[int]:
    """Where each relation's (relation, node) rows start and end in ``rows``."""
    if rows.numel() == num_relations * num_dst:  # every pair a row (always while traced)
        return [r * num_dst for r in range(num_relations + 1)]

    def build():
        starts = torch.arange(num_relations + 1, device=rows.device) * num_dst
        return torch.searchsorted(rows, starts).tolist()
    return graph.cached(("relation_bounds", num_relations, num_dst), build)


def pairs_to_nodes(graph, rows: Tensor, num_dst: int):
    """The graph from the (relation, node) rows of ``Graph.by_relation`` to their nodes: a
    sum over it adds each node's relations."""
    def build():
        pairs = torch.arange(rows.numel(), device=rows.device)
        return type(graph)._derived(torch.stack([pairs, rows % num_dst]), num_dst,
                                    rows.numel())
    return graph.cached(("pairs_to_nodes", num_dst), build)
