"""The FiLM conv of Brockschmidt (GNN-FiLM; PyG's ``FiLMConv``): each destination modulates
its incoming messages with a feature-wise affine map of its own features."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_int
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_messages
from graphloc.nn.conv._inputs import check_flow, read_inputs, relation_types
from graphloc.nn.conv._utils import (
    check_networks,
    check_sizes,
    checked_features,
    linear,
    mean_of_sums,
    reset_like_pyg,
    split_widths,
    width_keeping_aggregation,
)

#: the default activation, one instance shared by the layers that take it (as PyG's default)
_RELU = torch.nn.ReLU()


class FiLMConv(ConvModule):
    r"""The FiLM graph convolution of `Brockschmidt, "GNN-FiLM: Graph Neural Networks with
    Feature-wise Linear Modulation" (ICML 2020) <https://arxiv.org/abs/1906.12192>`_:

    .. math::
        \mathbf{x}'_i = \sigma\left(\boldsymbol{\gamma}_{i} \odot \mathbf{W} \mathbf{x}_i +
        \boldsymbol{\beta}_{i}\right) + \sum_{r \in \mathcal{R}}
        \mathrm{aggr}_{j \in \mathcal{N}_r(i)} \sigma\left(
        \boldsymbol{\gamma}_{r,i} \odot \mathbf{W}_r \mathbf{x}_j +
        \boldsymbol{\beta}_{r,i} \right),
        \qquad [\boldsymbol{\beta}_{r,i}, \boldsymbol{\gamma}_{r,i}] = g_r(\mathbf{x}_i)

    (sigma ``act``, the aggregation a mean by default; ``g_r`` a Linear of width ``2 C``, or
    a copy of ``nn``; the root term's ``g`` has no bias). A drop-in for PyG's ``FiLMConv``
    (same arguments, parameters ``lins``, ``films``, ``lin_skip``, ``film_skip`` with PyG's
    initialisation, and outputs).

    PyG gathers each edge's ``W_r x_j``, ``beta_i`` and ``gamma_i`` and keeps them with the
    messages for the backward, five ``[E, C]`` tensors per relation. Here, with the default
    ReLU and a sum or mean, ``ops.film_sum`` forms each message where it is summed, forward
    and backward (one CPU kernel: no ``[E, C]`` tensor), relation by relation over
    ``Graph.relation_subgraphs`` (cached). Another ``act`` or aggregation gets the per-edge
    messages, aggregated as ``SAGEConv``'s aggregations are. The messages are PyG's to the
    bit; only the order of their sum differs.

    Args:
        in_channels (int or (int, int)): input width, -1 to take it from the first call; a
            pair gives sources and destinations their own widths.
        out_channels (int): output width, C.
        num_relations (int, default 1): relation count; with more than one, ``edge_type``
            holds values in ``[0, R)`` (with one it is not read, as PyG's).
        nn (torch.nn.Module, optional): the network ``g_r`` from ``x_i`` to ``[beta,
            gamma]`` (``2 C`` wide); each relation and the root term get a copy.
        act (callable or None, default ``torch.nn.ReLU()``): sigma.
        aggr (str, list or module, default "mean"): the aggregation within each relation
            ("mean", "sum"/"add", "max", "min", or any that keeps the width).
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, F]``, a static batch ``[B, N, F]`` or a pair ``(x_src, x_dst)``; the
        graph (``edge_index [2, E]``, a ``Graph`` or a ``torch.sparse`` ``adj_t``, whose
        values are read as the edge types when ``edge_type`` is left out); ``edge_type
        [E]`` in the graph's edge order (an adjacency's storage order). output:
        ``[N_dst, out_channels]``.

    An explainer's edge mask (PyG's explain mode) scales each edge's message, as PyG's does
    with one relation; with several, PyG's per-relation propagations count fewer messages
    than the mask has entries and fail, where graphloc's scales each edge's message within
    its relation's aggregation (a masked call takes the per-edge messages).

    Differences from PyG's: an ``edge_type`` outside ``[0, R)`` is an error naming the value
    (PyG's loop over relations skips those edges without a word); ``num_relations=0`` is
    refused (PyG's fails at the first call). docs/models.md lists these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 num_relations: int = 1, nn: torch.nn.Module | None = None, act=_RELU,
                 aggr="mean", aggr_kwargs: dict | None = None, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("FiLMConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels)
        check_int(num_relations, "FiLMConv: num_relations", 1)
        if act is not None and not callable(act):
            raise TypeError(f"FiLMConv: act must be a callable or None, got {act!r}")
        check_networks("FiLMConv", nn=nn)
        self.flow = check_flow("FiLMConv", flow)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_relations = num_relations
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.aggr_module = width_keeping_aggregation(
            "FiLMConv", aggr, aggr_kwargs, out_channels, "the output adds the root term")
        self.act = act  # before the linear maps: PyG's module order
        src_width, dst_width = split_widths(in_channels)
        self.lins = torch.nn.ModuleList()
        self.films = torch.nn.ModuleList()
        for _ in range(num_relations):  # PyG's construction order: a seed draws its weights
            self.lins.append(linear(src_width, out_channels, bias=False))
            self.films.append(linear(dst_width, 2 * out_channels) if nn is None
                              else copy.deepcopy(nn))
        self.lin_skip = linear(dst_width, out_channels, bias=False)
        self.film_skip = linear(dst_width, 2 * out_channels, bias=False) if nn is None \
            else copy.deepcopy(nn)
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.aggr_module.reset_parameters()
        for lin, film in zip(self.lins, self.films, strict=True):
            lin.reset_parameters()
            reset_like_pyg(film)
        self.lin_skip.reset_parameters()
        reset_like_pyg(self.film_skip)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index,
                edge_type: Tensor | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        if x_dst is None:
            raise ValueError("FiLMConv needs destination features: its modulations and root "
                             "term read them (got a pair (x_src, None))")
        # every map called in PyG's order: lazy maps draw their weights at their first call
        out = self._modulated(self._film(self.film_skip, x_dst), self.lin_skip(x_dst))
        mask = explain_mask(self, inputs)
        if self.num_relations == 1:  # (edge_type not read, as PyG's)
            graphs, masks = (inputs.graph,), (mask,)
        else:
            edge_type = relation_types(self, inputs, edge_type, self.num_relations)
            graphs = inputs.graph.relation_subgraphs(edge_type, self.num_relations)
            masks = _relation_masks(mask, edge_type, self.num_relations)
        num_dst = out.size(0)
        for graph, mask, film, lin in zip(graphs, masks, self.films, self.lins, strict=True):
            beta, gamma = self._film(film, x_dst)
            h = lin(x_src)
            if graph.num_nodes > num_dst:  # traced: a last row for the other relations' edges
                beta, gamma = (F.pad(t, (0, 0, 0, 1)) for t in (beta, gamma))
            out = out + self._aggregate(graph, gamma, beta, h, mask)[:num_dst]
        return inputs.node_output(out)

    def _film(self, film: torch.nn.Module, x_dst: Tensor) -> tuple[Tensor, Tensor]:
        """``(beta, gamma)`` of the destinations, as PyG splits the network's output."""
        modulation = film(x_dst)
        if modulation.dim() != 2 or modulation.size(-1) != 2 * self.out_channels:
            raise ValueError(f"FiLMConv: nn must map the features to [N, 2 * out_channels] = "
                             f"[N, {2 * self.out_channels}] (beta and gamma), got "
                             f"{list(modulation.shape)}")
        beta, gamma = modulation.split(self.out_channels, dim=-1)
        return beta, gamma

    def _modulated(self, modulation: tuple[Tensor, Tensor], h: Tensor) -> Tensor:
        """The root term, ``act(gamma * h + beta)``."""
        beta, gamma = modulation
        out = gamma * h + beta
        return out if self.act is None else self.act(out)

    def _aggregate(self, graph, gamma: Tensor, beta: Tensor, h: Tensor,
                   mask: Tensor | None) -> Tensor:
        """The aggregation over each destination's edges of ``act(gamma_i * h_j + beta_i)``,
        each message times its entry of an explainer's ``mask`` (``graph``'s edge order)
        where one is set: one kernel for ReLU with a sum or mean, else the per-edge
        messages."""
        kind = type(self.aggr_module)
        if mask is None and _is_relu(self.act) and kind in (aggregations.SumAggregation,
                                                            aggregations.MeanAggregation):
            summed = ops.film_sum(graph, gamma, beta, h)
            return mean_of_sums(graph, summed) if kind is aggregations.MeanAggregation \
                else summed
        ordered = graph.in_csr_order()
        sources, destinations = ordered.edge_index
        messages = gamma.index_select(0, destinations) * h.index_select(0, sources) + \
            beta.index_select(0, destinations)
        if self.act is not None:
            messages = self.act(messages)
        messages = masked_messages(messages, graph, mask)
        return self.aggr_module(aggregations.per_edge(ordered), messages)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_relations={self.num_relations})")


def _relation_masks(mask: Tensor | None, edge_type: Tensor, num_relations: int) -> list:
    """An explainer's mask on each relation's subgraph (``relation_subgraphs``): the
    relation's entries in their order, or under ``torch.compile`` every entry (each
    subgraph keeps every edge, the others' sent to a row that is dropped)."""
    if mask is None or torch.compiler.is_compiling():
        return [mask] * num_relations
    return [mask[edge_type == r] for r in range(num_relations)]


def _is_relu(act) -> bool:
    """torch's ReLU (in place or not: the same numbers), as a module or a function."""
    return type(act) is torch.nn.ReLU or act is torch.relu or act is F.relu
