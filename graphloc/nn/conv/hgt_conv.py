"""The heterogeneous graph transformer conv of Hu et al. (HGT; PyG's ``HGTConv``): per node
type keys, queries and values, per relation and head key and value maps, and one softmax
over each destination's incoming edges of every relation."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.graph import graph_of_edges
from graphloc.nn.conv import _hetero as hetero
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._inputs import check_flow


class TypedLinears(torch.nn.Module):
    """One Linear per type, held in ``lins`` (the layout of PyG's ``HeteroDictLinear``, so
    state dicts load both ways); a type of width -1 is lazy, its width taken from its first
    call. ``forward`` maps the types of a dict it has Linears for and drops the others, as
    PyG's."""

    def __init__(self, in_channels: dict, out_channels: int):
        super().__init__()
        self.lins = hetero.typed_linears(in_channels, out_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins.values():
            if not hetero.is_lazy(lin):
                lin.reset_parameters()

    def materialize(self, x: dict) -> None:
        """Gives each lazy Linear of a type in ``x`` its width, drawing its weights as PyG's
        lazy ``HeteroDictLinear`` does (twice: materialised, then reset) in ``x``'s order,
        so that a seed gives PyG's initial weights."""
        for t, features in x.items():
            lin = self.lins[t] if t in self.lins else None
            if lin is not None and hetero.is_lazy(lin):
                lin.initialize_parameters(features)
                lin.reset_parameters()

    def forward(self, x: dict) -> dict:
        # in the Linears' order, as PyG's (a heterogeneous conv's outputs follow it)
        return {t: lin(x[t]) for t, lin in self.lins.items() if t in x}


class RelationMaps(torch.nn.Module):
    """A ``[D, D]`` map per (head, relation), ``weight[h * R + r]`` (the layout of PyG's
    ``HeteroLinear`` without bias, as HGT's ``k_rel`` and ``v_rel``)."""

    def __init__(self, channels: int, heads: int, num_relations: int):
        super().__init__()
        self.channels, self.heads, self.num_relations = channels, heads, num_relations
        self.weight = torch.nn.Parameter(torch.empty(heads * num_relations, channels, channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # PyG's kaiming_uniform with fan = channels and a = sqrt(5): one draw over the whole
        # tensor (torch's kaiming_uniform_ would read the fan of a 3-D tensor as D * D)
        bound = math.sqrt(6 / ((1 + 5) * self.channels))
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def of(self, relation: int) -> Tensor:
        """The relation's maps of every head, ``[H, D, D]``."""
        return self.weight.view(self.heads, self.num_relations, self.channels,
                                self.channels)[:, relation]


class HGTConv(ConvModule):
    r"""The heterogeneous graph transformer operator of `Hu et al., "Heterogeneous Graph
    Transformer" (WWW 2020) <https://arxiv.org/abs/2003.01332>`_, as PyG's ``HGTConv``.
    For a node ``i`` of type :math:`\tau` and head ``h`` (width ``D = C / H``), with
    :math:`[\mathbf{k}, \mathbf{q}, \mathbf{v}] = \mathrm{Linear}_\tau(\mathbf{x})` per
    node type:

    .. math::
        \alpha_{ij} = \mathrm{softmax}_{(j, r) \to i}\Big(
        \frac{\mathbf{q}_{i,h}^\top \mathbf{W}^K_{r,h}{}^\top \mathbf{k}_{j,h}\,
        \mu_{r,h}}{\sqrt{D}}\Big),\qquad
        \mathbf{m}_i = \Big\Vert_h \sum_{(j, r) \to i} \alpha_{ij}
        \mathbf{v}_{j,h} \mathbf{W}^V_{r,h}

    over every incoming edge ``j -> i`` of every relation ``r``, then
    :math:`\mathbf{a}_i = \mathrm{Linear}'_\tau(\mathrm{GELU}(\mathbf{m}_i))` and, where the
    widths agree, :math:`\mathbf{x}'_i = \sigma(s_\tau) \mathbf{a}_i + (1 -
    \sigma(s_\tau)) \mathbf{x}_i`. A drop-in for PyG's ``HGTConv`` (same arguments,
    parameters ``kqv_lin``, ``out_lin``, ``k_rel``, ``v_rel``, ``skip``, ``p_rel`` in PyG's
    layout and initial draws, and outputs). It is PyG's operator: the paper's own code
    (acbull/pyHGT) also applies dropout and, by default, a LayerNorm per node type after the
    skip, and can add a relative temporal encoding; PyG's, and so this one, has none of
    them.

    PyG copies each relation's source keys and values, maps the copies per (head,
    relation), and gathers keys, queries and values per edge for its softmax and sum (six
    ``[E, H, D]`` tensors kept for the backward). Here each relation's maps act on its
    source type's rows, the scores come from one sampled dot product per edge
    (``ops.sddmm``, times the edge's prior :math:`\mu`) and the softmax and weighted sum
    run fused per destination (``ops.segment_attention``) on one graph of all relations,
    built once while the edges stay the same: no per-edge keys, queries, values or
    messages.

    Args:
        in_channels (int or dict): input width of every node type, or per node type; -1
            takes it from the first call.
        out_channels (int): output width C, divisible by ``heads``.
        metadata (tuple): ``(node types, relations)``, as ``HeteroData.metadata()``; the
            relations are ``(src_type, name, dst_type)`` triples.
        heads (int, default 1): number of heads, H.
        flow (str, default "source_to_target"): PyG's edge direction; only the default is
            defined for relations between types (as in PyG's).

    Shapes:
        input: ``x_dict`` node type -> ``[N_type, F_type]``; ``edge_index_dict`` relation ->
        ``edge_index [2, E]`` (sources of the relation's first type, destinations of its
        last) or a ``torch.sparse`` ``adj_t`` ``[N_dst, N_src]``, or a
        :class:`~graphloc.hetero.HeteroGraph`. output: node type -> ``[N_type, C]`` for the
        node types that some relation of ``metadata`` points to, in ``in_channels``' order
        (``metadata``'s for an int), as PyG's.

    Differences from PyG's: every relation's indices are checked against its own node
    types' counts, and an error names the relation and the value (PyG's offsets them into
    one index space, where an index past its type's count reads another relation's or type's
    rows without a word); a relation of ``edge_index_dict`` outside ``metadata``, or a node
    type it names missing from ``x_dict``, is an error naming it; an empty
    ``edge_index_dict`` gives every destination type no messages (PyG's fails on an empty
    concatenation); ``flow="target_to_source"`` is refused (PyG's reads each edge reversed
    against the other side's offsets); a destination whose scores are all -inf gets weights
    0 (PyG's: NaN), as in ``GATConv``. docs/models.md lists these.
    """

    def __init__(self, in_channels: int | dict, out_channels: int, metadata: tuple,
                 heads: int = 1, flow: str = "source_to_target"):
        super().__init__()
        node_types, relations = hetero.checked_metadata("HGTConv", metadata)
        hetero.check_heads("HGTConv", out_channels, heads)
        self.in_channels = hetero.widths_per_type("HGTConv", in_channels, node_types)
        self.out_channels, self.heads = out_channels, heads
        self.node_types, self.edge_types = node_types, relations
        self.edge_types_map = {r: i for i, r in enumerate(relations)}
        self.dst_node_types = {r[-1] for r in relations}
        self.flow = check_flow("HGTConv", flow)
        # built in PyG's order, each constructor drawing as PyG's does, so that a seed gives
        # PyG's initial weights
        self.kqv_lin = TypedLinears(self.in_channels, 3 * out_channels)
        self.out_lin = TypedLinears(dict.fromkeys(node_types, out_channels), out_channels)
        dim = out_channels // heads
        self.k_rel = RelationMaps(dim, heads, len(relations))
        self.v_rel = RelationMaps(dim, heads, len(relations))
        # PyG's parameter orders: torch's ParameterDict sorts a dict's keys (skip), items
        # set one by one keep their order (p_rel)
        self.skip = torch.nn.ParameterDict({hetero.parameter_key(t): torch.nn.Parameter(
            torch.empty(1)) for t in node_types})
        self.p_rel = torch.nn.ParameterDict()
        for r in relations:
            self.p_rel[hetero.parameter_key(r)] = torch.nn.Parameter(torch.empty(1, heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in (self.kqv_lin, self.out_lin, self.k_rel, self.v_rel):
            module.reset_parameters()
        with torch.no_grad():
            for p in (*self.skip.values(), *self.p_rel.values()):
                p.fill_(1.0)

    def forward(self, x_dict: dict, edge_index_dict) -> dict:
        hetero.flow_between_types("HGTConv", check_flow("HGTConv", self.flow))
        hetero.check_feature_dict(self, x_dict, self.kqv_lin.lins)
        counts = {t: x.size(0) for t, x in x_dict.items() if t in self.kqv_lin.lins}
        relations = hetero.relation_graphs("HGTConv", edge_index_dict, counts, self.edge_types)
        self.kqv_lin.materialize(x_dict)
        messages = self._attend(x_dict, relations)
        mixed = self.out_lin({t: F.gelu(m) for t, m in messages.items()})
        out = {}
        for t, a in mixed.items():
            x = x_dict[t]
            if a.size(-1) == x.size(-1):
                gate = self.skip[hetero.parameter_key(t)].sigmoid()
                a = gate * a + (1 - gate) * x
            out[t] = a
        return out

    def _attend(self, x_dict: dict, relations: dict) -> dict:
        """Each destination type's ``[N, C]`` attention output (before GELU), in
        ``kqv_lin``'s order (PyG's output order): one attention over a graph of every
        relation's edges, from the relations' mapped source rows (source type s's node j
        in its r-th relation at row ``start_s + r * N_s + j``) to every type's rows."""
        H, C = self.heads, self.out_channels
        D = C // H
        # every type's keys, queries and values from its whole map, as PyG's: a type no
        # relation reads gets zero gradients, not None (weight decay and momentum treat it
        # alike), and a non-finite feature reaches the weights' gradients as in PyG's
        kqv = {t: rows.view(rows.size(0), 3, C).unbind(1)
               for t, rows in self.kqv_lin(x_dict).items()}
        dst_start = dict(zip(kqv, _starts([x_dict[t].size(0) for t in kqv]), strict=True))
        by_source: dict[str, list] = {}
        for relation, graph in relations.items():
            by_source.setdefault(relation[0], []).append((relation, graph))
        keys, values, edges, priors, start = [], [], [], [], 0
        for src, outgoing in by_source.items():
            keys.append(self._mapped(kqv[src][0], self.k_rel, outgoing))
            values.append(self._mapped(kqv[src][2], self.v_rel, outgoing))
            for r, (relation, graph) in enumerate(outgoing):
                sources, targets = graph.edge_index
                edges.append(torch.stack([sources + (start + r * x_dict[src].size(0)),
                                          targets + dst_start[relation[2]]]))
                priors.append(self.p_rel[hetero.parameter_key(relation)].expand(graph.num_edges, H))
            start += x_dict[src].size(0) * len(outgoing)
        query = torch.cat([k_q_v[1] for k_q_v in kqv.values()]) / math.sqrt(D)
        if not edges:  # no relation: no messages
            out = query.new_zeros(query.size(0), C)
        else:
            graph = graph_of_edges(torch.cat(edges, dim=1), query.size(0), start)
            ordered = graph.in_csr_order()
            # each edge's prior mu, per edge as PyG's: folded into the key maps, a key no
            # edge reads (a NaN feature's) reached mu's gradient
            prior = graph.to_csr_order(torch.cat(priors))
            score = ops.sddmm(ordered, torch.cat(keys), query.view(-1, H, D), "dot") * prior
            out = ops.segment_attention(ordered, score, torch.cat(values)).reshape(-1, C)
        return {t: out[dst_start[t]:dst_start[t] + x_dict[t].size(0)] for t in kqv
                if t in self.dst_node_types}

    def _mapped(self, rows: Tensor, maps: RelationMaps, outgoing: list) -> Tensor:
        """``rows`` ``[N, C]`` (one source type's keys or values) through each relation's
        map per head, ``[R * N, H, D]`` with node j's r-th relation at row ``r * N + j``.
        One product per head with the relations' maps side by side, read from ``rows`` in
        place (no transposed copy for the backward, as a batched product over heads
        keeps)."""
        H, D = self.heads, self.out_channels // self.heads
        per_head = []
        for h in range(H):
            side_by_side = torch.cat([maps.of(self.edge_types_map[relation])[h]
                                      for relation, _ in outgoing], dim=1)
            per_head.append((rows[:, h * D:(h + 1) * D] @ side_by_side).view(
                -1, len(outgoing), D).transpose(0, 1))
        return torch.stack(per_head, dim=2).view(-1, H, D)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(-1, {self.out_channels}, heads={self.heads})"


def _starts(counts: list[int]) -> list[int]:
    """Where each of consecutive blocks of ``counts`` rows starts."""
    starts, total = [], 0
    for count in counts:
        starts.append(total)
        total += count
    return starts
