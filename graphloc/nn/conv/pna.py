"""PNAConv: Principal Neighbourhood Aggregation (Corso et al. 2020), as PyG's."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_flags, keyword_arguments
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_messages
from graphloc.nn.conv._inputs import (
    check_edge_rows,
    check_flow,
    edge_features_from,
    mapped_edge_features,
    read_inputs,
    refuse_edge_attr_without_edge_dim,
)
from graphloc.nn.conv._utils import (
    check_input,
    check_sizes,
    destinations_read,
    read_rows_only,
    resolve_activation,
    sources_read,
)

# the aggregators whose value on messages a_i + b_j the split path forms from b_j alone
_SPLIT_AGGREGATORS = ("sum", "mean", "min", "max", "var", "std")


class PNAConv(ConvModule):
    r"""The Principal Neighbourhood Aggregation conv of `Corso et al., "Principal
    Neighbourhood Aggregation for Graph Nets" (NeurIPS 2020)
    <https://arxiv.org/abs/2004.05718>`_:

    .. math::
        \mathbf{x}_i' = \mathrm{lin}\Big(\big\Vert_{t} \, \gamma_t\big(\mathbf{x}_i^t \,\Vert\,
        \textstyle\bigoplus_{j \in \mathcal{N}(i)} h_t(\mathbf{x}_i^t \Vert \mathbf{x}_j^t
        \Vert \mathbf{e}_{ji})\big)\Big)

    with ``towers`` towers ``t`` (each reads all of ``x``, or its own slice with
    ``divide_input``), the aggregators ``aggregators`` times the degree ``scalers``
    (``aggr.DegreeScalerAggregation``, normalised by the training graph's in-degree
    histogram ``deg``), ``h_t`` the ``pre_nns`` and ``gamma_t`` the ``post_nns``.

    A drop-in for PyG's ``PNAConv`` (same arguments, parameter names and outputs:
    ``aggr_module``, ``edge_encoder``, ``pre_nns``, ``post_nns``, ``lin``). With one pre-layer
    (the default) ``h_t`` is one Linear, so the message splits as ``a_i + b_j (+ c_e)``: the
    destination and source parts are products per node, and "sum", "mean", "min", "max",
    "var" and "std" of ``a_i + b_j`` come from the aggregations of ``b_j`` (``a_i`` added,
    times the degree for the sum; the variance does not move), with no ``[E, towers, F]``
    message tensor unless there are edge features. PyG forms the messages ``[x_i, x_j]``
    per edge and tower, then their images. Deeper pre-nets and other aggregators take the
    messages per edge, as PyG's. "var" and "std" are graphloc's (the mean squared
    deviation), not PyG's ``mean(x^2) - mean(x)^2``, which cancels; the std is PyG's
    (clamped at 1e-5 and masked to 0), not the official dense layers'
    ``sqrt(relu(var) + 1e-5)`` (``docs/models.md`` lists the differences).

    Args:
        in_channels (int): input width.
        out_channels (int): output width, a multiple of ``towers``.
        aggregators (list of str): "sum", "mean", "min", "max", "var", "std" (or any name
            ``aggr.resolve`` knows).
        scalers (list of str): "identity", "amplification", "attenuation", "linear",
            "inverse_linear".
        deg (Tensor or None): the training graph's in-degree histogram (``deg[i]``: the
            number of nodes of in-degree ``i``; ``PNAConv.get_degree_histogram``). None
            (graphloc's option, for ``GNN("pna", ...)`` and the command line): taken from
            the graph of the first forward in training mode and kept with the model (the
            whole graph in full-batch training; with sampled batches pass ``deg``).
        edge_dim (int, optional): edge feature width.
        towers, pre_layers, post_layers, divide_input, act, act_kwargs, train_norm: as PyG's.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes: input ``x [N, in_channels]``, ``edge_index [2, E]`` (or a ``Graph`` or sparse
    adjacency), optionally ``edge_attr [E, edge_dim]``; output ``[N, out_channels]``.
    """

    pyg_aggr = None  # takes no aggr: PyG's aggregates by its aggregators and scalers

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, aggregators: list[str],
                 scalers: list[str], deg: Tensor | None, edge_dim: int | None = None,
                 towers: int = 1,
                 pre_layers: int = 1, post_layers: int = 1, divide_input: bool = False,
                 act="relu", act_kwargs: dict | None = None, train_norm: bool = False,
                 flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("PNAConv", flow)
        check_sizes("PNAConv", optional=("edge_dim",), in_channels=in_channels,
                    out_channels=out_channels, towers=towers, pre_layers=pre_layers,
                    post_layers=post_layers, edge_dim=edge_dim)
        check_flags("PNAConv", divide_input=divide_input, train_norm=train_norm)
        act_kwargs = keyword_arguments("PNAConv", "act_kwargs", act_kwargs)
        if divide_input and in_channels % towers:
            raise ValueError(f"PNAConv: divide_input needs in_channels ({in_channels}) "
                             f"divisible by towers ({towers})")
        if out_channels % towers:
            raise ValueError(f"PNAConv: out_channels ({out_channels}) must be divisible by "
                             f"towers ({towers})")
        if not isinstance(aggregators, (list, tuple)) or not aggregators or \
                not all(isinstance(name, str) for name in aggregators):
            raise ValueError(f"PNAConv: aggregators must be a non-empty list of names, got "
                             f"{aggregators!r}")
        self.in_channels, self.out_channels, self.edge_dim = in_channels, out_channels, edge_dim
        self.towers, self.divide_input = towers, divide_input
        self.F_in = in_channels // towers if divide_input else in_channels
        self.F_out = out_channels // towers
        self.aggr_module = aggregations.DegreeScalerAggregation(list(aggregators), scalers,
                                                                deg, train_norm)
        self.aggregators = list(aggregators)
        if edge_dim is not None:
            self.edge_encoder = torch.nn.Linear(edge_dim, self.F_in)
        parts = 3 if edge_dim else 2
        aggregated = (len(aggregators) * len(self.aggr_module.scaler) + 1) * self.F_in
        self.pre_nns = torch.nn.ModuleList(
            _stack(parts * self.F_in, self.F_in, pre_layers, act, act_kwargs)
            for _ in range(towers))
        self.post_nns = torch.nn.ModuleList(
            _stack(aggregated, self.F_out, post_layers, act, act_kwargs) for _ in range(towers))
        self.lin = torch.nn.Linear(out_channels, out_channels)
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    def reset_parameters(self) -> None:  # PyG's order
        self.aggr_module.reset_parameters()
        if self.edge_dim is not None:
            self.edge_encoder.reset_parameters()
        for module in (*self.pre_nns, *self.post_nns):
            for layer in module:
                if hasattr(layer, "reset_parameters"):
                    layer.reset_parameters()
        self.lin.reset_parameters()

    def forward(self, x: Tensor, edge_index, edge_attr: Tensor | None = None) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"PNAConv: x must be one tensor [N, {self.in_channels}] (its "
                            f"messages read x_i and x_j of one node set), got "
                            f"{type(x).__name__}")
        inputs = read_inputs(self, x, edge_index)
        graph = inputs.graph
        if graph.is_bipartite:
            raise ValueError(f"PNAConv: its messages read x_i and x_j of one node set, but the "
                             f"graph is bipartite ({graph.num_src_nodes} sources, "
                             f"{graph.num_nodes} destinations)")
        check_input(self, inputs.x_src, self.in_channels, "x")
        edge_attr = self._edge_features(inputs, edge_attr)
        towers = self._tower_inputs(inputs.x_src)  # [N, T, F_in]
        mask = explain_mask(self, inputs)
        if len(self.pre_nns[0]) == 1 and mask is None and \
                all(a in _SPLIT_AGGREGATORS for a in self.aggregators):
            aggregated = self._split_aggregate(graph, towers, edge_attr)
        else:
            aggregated = self._edge_aggregate(graph, towers, edge_attr, mask)
        hidden = self._first_post_layer(towers, aggregated, graph.in_degree())
        out = torch.cat([nn[1:](h) for nn, h in zip(self.post_nns, hidden.unbind(1),
                                                    strict=True)], dim=1)
        return inputs.node_output(self.lin(out))

    def _first_post_layer(self, towers: Tensor, aggregated: Tensor, degree: Tensor) -> Tensor:
        """Each tower's first post-layer (a Linear) on ``[x_t, the scaled aggregates]``,
        ``[N, T, F_out]``, without forming the ``[N, T, (S * A + 1) * F_in]`` input PyG's
        concatenates: the scalers are factors per node, so the Linear of the scaled
        blocks is the sum of each scaler's factor times the Linear of the unscaled
        aggregates ``aggregated [N, T, A * F_in]`` by that scaler's columns."""
        factors = self.aggr_module.factors(degree, aggregated.dtype)
        # while torch.compile traces, the factors cannot be read: PyG's order, right for both
        if torch.compiler.is_compiling() or \
                not all(f is None or bool(torch.isfinite(f).all()) for f in factors):
            # an infinite factor (a mean degree of 0): inf times each scaled entry, as
            # PyG's order gives it (NaN where entries of both signs meet), not inf times
            # their sum
            full = torch.cat([towers, self.aggr_module.scale(aggregated, degree)], dim=-1)
            return torch.stack([nn[0](h) for nn, h in zip(self.post_nns, full.unbind(1),
                                                          strict=True)], dim=1)
        F, width = self.F_in, aggregated.size(-1)
        weight = torch.stack([nn[0].weight for nn in self.post_nns])  # [T, F_out, (S A + 1) F]
        bias = torch.stack([nn[0].bias for nn in self.post_nns])  # [T, F_out]
        out = torch.einsum("ntf,tof->nto", towers, weight[:, :, :F]) + bias
        for s, factor in enumerate(factors):
            block = weight[:, :, F + s * width:F + (s + 1) * width]
            term = torch.einsum("ntk,tok->nto", aggregated, block)
            out = out + (term if factor is None else term * factor.view(-1, 1, 1))
        return out

    def _edge_features(self, inputs, edge_attr: Tensor | None) -> Tensor | None:
        """The encoded edge features ``[E, F_in]``: the call's ``edge_attr``, else a sparse
        adjacency's values or the Graph's own, where the layer has ``edge_dim`` (None
        without it; a call's ``edge_attr`` is then an error, as it would be ignored)."""
        if self.edge_dim is None:
            refuse_edge_attr_without_edge_dim(self, edge_attr)
            return None
        edge_attr = edge_features_from(self, inputs, edge_attr)
        if edge_attr is None:
            raise ValueError(f"PNAConv: the layer has edge_dim={self.edge_dim} (its pre-nets "
                             "read [x_i, x_j, e]) but no edge_attr was given")
        check_edge_rows(self, "edge_attr", edge_attr, inputs.graph.num_edges)
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.unsqueeze(-1)
        return mapped_edge_features(self, self.edge_encoder, edge_attr)

    def _tower_inputs(self, x: Tensor) -> Tensor:
        if self.divide_input:
            return x.view(-1, self.towers, self.F_in)
        return x.view(-1, 1, self.F_in).expand(-1, self.towers, -1)

    def _split_aggregate(self, graph, towers: Tensor, edge_attr: Tensor | None) -> Tensor:
        """The aggregations of h_t(x_i, x_j, e) = a_i + b_j (+ c_e) through those of b_j
        (per edge, b_j + c_e, with edge features); [N, T, A * F_in], not yet scaled."""
        F, T = self.F_in, self.towers
        weights = [nn[0].weight for nn in self.pre_nns]  # [F, (2 | 3) F] each
        dst = torch.stack([w[:, :F] for w in weights])  # [T, F, F]
        src = torch.stack([w[:, F:2 * F] for w in weights])
        bias = torch.stack([nn[0].bias for nn in self.pre_nns])  # [T, F]
        # each block acts per node, on the rows PyG's per-edge maps read (read_rows_only)
        at_dst = read_rows_only(towers, destinations_read(graph))
        at_src = read_rows_only(towers, sources_read(graph))
        a = torch.einsum("ntf,tgf->ntg", at_dst, dst) + bias  # [N, T, F]
        b = torch.einsum("ntf,tgf->ntg", at_src, src).reshape(-1, T * F)
        if edge_attr is not None:
            edge = torch.stack([w[:, 2 * F:] for w in weights])  # [T, F, F]
            c = torch.einsum("ef,tgf->etg", edge_attr, edge).reshape(-1, T * F)
            ordered = graph.in_csr_order()
            b = b.index_select(0, ordered.edge_index[0]) + graph.to_csr_order(c)
            graph = aggregations.per_edge(graph)
        degree = graph.in_degree()
        # both extremes where either is asked for: each one's infinities make the other NaN
        names = set(self.aggregators) | ({"min", "max"} if {"min", "max"} &
                                          set(self.aggregators) else set())
        of_sources = {name: self._aggregator(name)(graph, b).view(-1, T, F) for name in names}
        has_edges = (degree > 0).view(-1, 1, 1)
        outs = [_with_destination(name, of_sources, a, degree, has_edges)
                for name in self.aggregators]
        return torch.cat(outs, dim=-1)

    def _aggregator(self, name: str):
        """The aggregation module of that name (one of ``aggr_module``'s, or the other
        extreme's)."""
        inner = self.aggr_module.aggr
        modules = inner.aggrs if isinstance(inner, aggregations.MultiAggregation) else [inner]
        if name not in self.aggregators:
            return aggregations.resolve(name)
        return modules[self.aggregators.index(name)]

    def _edge_aggregate(self, graph, towers: Tensor, edge_attr: Tensor | None,
                        mask: Tensor | None = None) -> Tensor:
        """PyG's way: the messages h_t([x_i, x_j, e]) per edge and tower (each times an
        explainer's ``mask`` entry where one is set), aggregated; [N, T, A * F_in], not yet
        scaled (the scalers read the unmasked degrees, as PyG's)."""
        ordered = graph.in_csr_order()
        src, dst = ordered.edge_index
        parts = [towers.index_select(0, dst), towers.index_select(0, src)]
        if edge_attr is not None:
            e = graph.to_csr_order(edge_attr)
            parts.append(e.unsqueeze(1).expand(-1, self.towers, -1))
        h = torch.cat(parts, dim=-1)
        messages = torch.stack([nn(h[:, t]) for t, nn in enumerate(self.pre_nns)], dim=1)
        messages = masked_messages(messages, graph, mask)
        return self.aggr_module.aggr(aggregations.per_edge(graph), messages)

    @staticmethod
    def get_degree_histogram(loader) -> Tensor:
        """The in-degree histogram of the graphs a loader yields (PyG ``Data`` batches with
        ``edge_index`` and ``num_nodes``): ``deg[i]`` nodes of in-degree ``i``."""
        histogram = torch.zeros(1, dtype=torch.long)
        for data in loader:
            degree = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
            counts = torch.bincount(degree, minlength=histogram.numel()).to(histogram.device)
            counts[:histogram.numel()] += histogram  # counts is at least as long
            histogram = counts
        return histogram

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"towers={self.towers}, edge_dim={self.edge_dim})")


def _with_destination(name: str, of_sources: dict, a: Tensor, degree: Tensor,
                      has_edges: Tensor) -> Tensor:
    """An aggregator's value on the messages a_i + b_j from the aggregates of b_j
    (``of_sources`` by name), as the messages' own aggregate would be, special values
    included: the sum adds deg * a_i; the variance does not move, but is NaN where a_i is
    not finite; min and max add a_i, and are NaN where a_i and some b_j are infinities of
    opposite signs (their message is inf - inf); nodes without edges keep 0 (no messages)."""
    if name == "sum":
        shift = a * degree.to(a.dtype).view(-1, 1, 1)
    elif name in ("var", "std"):
        shift = a * 0
    else:
        shift = a
    out = of_sources[name] + shift
    if name in ("min", "max"):  # the opposite extreme is where a_i's infinity meets its own
        opposite = of_sources["max" if name == "min" else "min"]
        sign = -1.0 if name == "min" else 1.0  # the a_i that a finite extreme hides
        lost = (a == sign * float("inf")) & (opposite == -sign * float("inf"))
        out = out.masked_fill(lost, float("nan"))
    return torch.where(has_edges, out, torch.zeros_like(out))


def _stack(in_width: int, out_width: int, layers: int, act, act_kwargs) -> torch.nn.Sequential:
    """PyG's pre-/post-net: a Linear, then (activation, Linear) ``layers - 1`` times."""
    modules = [torch.nn.Linear(in_width, out_width)]
    for _ in range(layers - 1):
        modules += [resolve_activation("PNAConv", act, act_kwargs),
                    torch.nn.Linear(out_width, out_width)]
    return torch.nn.Sequential(*modules)
