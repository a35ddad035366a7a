"""The heterogeneous graph transformer conv of Hu et al. (HGT; PyG's ``HGTConv``): per node
type keys, queries and values, per relation and head key and value maps, and one softmax
over each destination's incoming edges of every relation."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.graph import Graph, adjacency_entries, graph_of_edges
from graphloc.hetero import HeteroGraph
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_input, check_sizes

Relation = tuple[str, str, str]


def _is_lazy(lin: torch.nn.Module) -> bool:
    # (isinstance, not torch.nn.parameter.is_lazy: dynamo traces the one, not the other)
    return isinstance(lin.weight, torch.nn.parameter.UninitializedParameter)


class TypedLinears(torch.nn.Module):
    """One Linear per type, held in ``lins`` (the layout of PyG's ``HeteroDictLinear``, so
    state dicts load both ways); a type of width -1 is lazy, its width taken from its first
    call. ``forward`` maps the types of a dict it has Linears for and drops the others, as
    PyG's."""

    def __init__(self, in_channels: dict, out_channels: int):
        super().__init__()
        self.lins = torch.nn.ModuleDict({
            t: torch.nn.LazyLinear(out_channels) if width == -1
            else torch.nn.Linear(width, out_channels) for t, width in in_channels.items()})
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins.values():
            if not _is_lazy(lin):
                lin.reset_parameters()

    def materialize(self, x: dict) -> None:
        """Gives each lazy Linear of a type in ``x`` its width, drawing its weights as PyG's
        lazy ``HeteroDictLinear`` does (twice: materialised, then reset) in ``x``'s order,
        so that a seed gives PyG's initial weights."""
        for t, features in x.items():
            lin = self.lins[t] if t in self.lins else None
            if lin is not None and _is_lazy(lin):
                lin.initialize_parameters(features)
                lin.reset_parameters()

    def width(self, t: str) -> int:
        """Type ``t``'s input width, -1 while lazy."""
        lin = self.lins[t]
        return -1 if _is_lazy(lin) else lin.in_features

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


class HGTConv(torch.nn.Module):
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
    source type's rows (with :math:`\mu` folded into the key map), the scores come from one
    sampled dot product per edge (``ops.sddmm``) and the softmax and weighted sum run fused
    per destination (``ops.segment_attention``) on one graph of all relations, built once
    while the edges stay the same: no per-edge keys, queries, values or messages.

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
    against the other side's offsets). ``kqv_lin``'s Linears are read as weights (a third
    each for keys, queries and values), so hooks on them do not run. docs/models.md lists
    these.
    """

    def __init__(self, in_channels: int | dict, out_channels: int, metadata: tuple,
                 heads: int = 1, flow: str = "source_to_target"):
        super().__init__()
        node_types, relations = _checked_metadata(metadata)
        check_sizes("HGTConv", lazy=True, out_channels=out_channels, heads=heads,
                    **({} if isinstance(in_channels, dict) else {"in_channels": in_channels}))
        if out_channels % heads:
            raise ValueError(f"HGTConv: out_channels ({out_channels}) must be divisible by "
                             f"heads ({heads})")
        self.in_channels = _widths(in_channels, node_types)
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
        self.skip = torch.nn.ParameterDict({_parameter_key(t): torch.nn.Parameter(
            torch.empty(1)) for t in node_types})
        self.p_rel = torch.nn.ParameterDict()
        for r in relations:
            self.p_rel[_parameter_key("__".join(r))] = torch.nn.Parameter(torch.empty(1, heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in (self.kqv_lin, self.out_lin, self.k_rel, self.v_rel):
            module.reset_parameters()
        with torch.no_grad():
            for p in (*self.skip.values(), *self.p_rel.values()):
                p.fill_(1.0)

    def forward(self, x_dict: dict, edge_index_dict) -> dict:
        check_flow("HGTConv", self.flow)
        if self.flow != "source_to_target":
            raise ValueError(f"HGTConv: flow={self.flow!r} is not defined between node types; "
                             "pass each edge_index flipped with the default flow")
        self._check_features(x_dict)
        counts = {t: x.size(0) for t, x in x_dict.items() if t in self.kqv_lin.lins}
        relations = self._relation_graphs(edge_index_dict, counts)
        self.kqv_lin.materialize(x_dict)
        messages = self._attend(x_dict, relations)
        mixed = self.out_lin({t: F.gelu(m) for t, m in messages.items()})
        out = {}
        for t, a in mixed.items():
            x = x_dict[t]
            if a.size(-1) == x.size(-1):
                gate = self.skip[_parameter_key(t)].sigmoid()
                a = gate * a + (1 - gate) * x
            out[t] = a
        return out

    def _attend(self, x_dict: dict, relations: dict) -> dict:
        """Each destination type's ``[N, C]`` attention output (before GELU), in
        ``kqv_lin``'s order (PyG's output order): one attention over a graph of every
        relation's edges, from the relations' mapped source rows (source type s's node j
        in its r-th relation at row ``start_s + r * N_s + j``) to the destination types'
        rows."""
        H, D = self.heads, self.out_channels // self.heads
        dst_types = [t for t in self.kqv_lin.lins if t in x_dict and t in self.dst_node_types]
        dst_start = dict(zip(dst_types, _starts([x_dict[t].size(0) for t in dst_types]),
                             strict=True))
        by_source: dict[str, list] = {}
        for relation, graph in relations.items():
            by_source.setdefault(relation[0], []).append((relation, graph))
        keys, values, edges, start = [], [], [], 0
        for src, outgoing in by_source.items():
            x = x_dict[src]
            keys.append(self._mapped(self._projection(src, 0, x), self.k_rel, outgoing))
            values.append(self._mapped(self._projection(src, 2, x), self.v_rel, outgoing))
            for r, (relation, graph) in enumerate(outgoing):
                sources, targets = graph.edge_index
                edges.append(torch.stack([sources + (start + r * x.size(0)),
                                          targets + dst_start[relation[2]]]))
            start += x.size(0) * len(outgoing)
        query = torch.cat([self._projection(t, 1, x_dict[t]) for t in dst_types]) \
            / math.sqrt(D)
        if not edges:  # no relation: no messages
            out = query.new_zeros(query.size(0), H * D)
        else:
            graph = graph_of_edges(torch.cat(edges, dim=1), query.size(0), start).in_csr_order()
            score = ops.sddmm(graph, torch.cat(keys), query.view(-1, H, D), "dot")
            out = ops.segment_attention(graph, score, torch.cat(values)).reshape(-1, H * D)
        return {t: out[dst_start[t]:dst_start[t] + x_dict[t].size(0)] for t in dst_types}

    def _projection(self, node_type: str, part: int, x: Tensor) -> Tensor:
        """The keys (part 0), queries (1) or values (2) of ``node_type``'s nodes, ``[N,
        C]``: one third of its ``kqv_lin`` (PyG's splits the whole product, whose backward
        then fills an ``[N, 3 C]`` gradient)."""
        lin, C = self.kqv_lin.lins[node_type], self.out_channels
        rows = slice(part * C, (part + 1) * C)
        return F.linear(x, lin.weight[rows], None if lin.bias is None else lin.bias[rows])

    def _mapped(self, rows: Tensor, maps: RelationMaps, outgoing: list) -> Tensor:
        """``rows`` ``[N, C]`` (one source type's keys or values) through each relation's
        map per head (the keys' scaled by the relation's prior mu: q^T (mu W k) = mu q^T W
        k), ``[R * N, H, D]`` with node j's r-th relation at row ``r * N + j``. One product
        per head with the relations' maps side by side, read from ``rows`` in place (no
        transposed copy for the backward, as a batched product over heads keeps)."""
        H, D = self.heads, self.out_channels // self.heads
        per_head = []
        for h in range(H):
            side_by_side = torch.cat([self._map(maps, relation, h) for relation, _ in outgoing],
                                     dim=1)
            per_head.append((rows[:, h * D:(h + 1) * D] @ side_by_side).view(
                -1, len(outgoing), D).transpose(0, 1))
        return torch.stack(per_head, dim=2).view(-1, H, D)

    def _map(self, maps: RelationMaps, relation: Relation, head: int) -> Tensor:
        weight = maps.of(self.edge_types_map[relation])[head]
        if maps is not self.k_rel:
            return weight
        return weight * self.p_rel[_parameter_key("__".join(relation))][0, head]

    def _check_features(self, x_dict) -> None:
        if not isinstance(x_dict, dict):
            raise TypeError(f"HGTConv expects x_dict, a dict of node type -> features, got "
                            f"{type(x_dict).__name__}")
        for t, x in x_dict.items():
            if t in self.kqv_lin.lins:
                check_input(self, x, self.kqv_lin.width(t), f"x_dict[{t!r}]")

    def _relation_graphs(self, edge_index_dict, counts: dict) -> dict[Relation, Graph]:
        """Each relation's Graph from its source type's nodes to its destination type's,
        checked against the node counts of ``x_dict`` (``counts``)."""
        if isinstance(edge_index_dict, HeteroGraph):
            edge_index_dict = edge_index_dict.edges
        if not isinstance(edge_index_dict, dict):
            raise TypeError(f"HGTConv expects edge_index_dict, a dict of relation -> "
                            f"edge_index or a HeteroGraph, got {type(edge_index_dict).__name__}")
        graphs = {}
        for relation, edges in edge_index_dict.items():
            if relation not in self.edge_types_map:
                raise ValueError(f"HGTConv: edge_index_dict holds the relation {relation!r}, "
                                 f"which is not in its metadata: {self.edge_types}")
            for end in (relation[0], relation[2]):
                if end not in counts:
                    raise ValueError(f"HGTConv: the relation {relation!r} names the node type "
                                     f"{end!r}, which x_dict has no features for")
            graphs[relation] = _relation_graph(relation, edges, counts[relation[0]],
                                               counts[relation[2]])
        return graphs

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(-1, {self.out_channels}, heads={self.heads})"


def _relation_graph(relation: Relation, edges, n_src: int, n_dst: int) -> Graph:
    """The relation's Graph (built once while its edge_index stays the same); errors name
    the relation."""
    try:
        if isinstance(edges, Graph):
            if (edges.num_src_nodes, edges.num_nodes) != (n_src, n_dst):
                raise ValueError(f"the Graph has {edges.num_src_nodes} source and "
                                 f"{edges.num_nodes} destination nodes, x_dict's node types "
                                 f"{n_src} and {n_dst}")
            return edges
        if isinstance(edges, Tensor) and edges.layout != torch.strided:
            if tuple(edges.shape[:2]) != (n_dst, n_src):
                raise ValueError(f"the sparse adjacency adj_t has shape {list(edges.shape)}, "
                                 f"not [N_dst, N_src] = [{n_dst}, {n_src}]")
            dst, src, _ = adjacency_entries(edges, "the sparse adjacency")
            return Graph.bipartite(torch.stack([src, dst]), (n_src, n_dst))
        return graph_of_edges(edges, n_dst, n_src)
    except (ValueError, TypeError) as err:
        raise type(err)(f"HGTConv: relation {relation!r}: {err}") from err


#: the names torch's ParameterDict refuses as keys (its own attributes)
_PARAMETER_DICT_ATTRIBUTES = frozenset(dir(torch.nn.ParameterDict))


def _parameter_key(name: str) -> str:
    """``name`` as a ParameterDict key, changed where torch's refuses it as PyG's
    ``ParameterDict`` changes it (an attribute's name in angle brackets, "." as "#"), so
    that state dicts load both ways."""
    if name in _PARAMETER_DICT_ATTRIBUTES:
        name = f"<{name}>"
    return name.replace(".", "#")


def _starts(counts: list[int]) -> list[int]:
    """Where each of consecutive blocks of ``counts`` rows starts."""
    starts, total = [], 0
    for count in counts:
        starts.append(total)
        total += count
    return starts


def _checked_metadata(metadata) -> tuple[list[str], list[Relation]]:
    if not (isinstance(metadata, (tuple, list)) and len(metadata) == 2):
        raise ValueError(f"HGTConv: metadata must be (node types, relations), as "
                         f"HeteroData.metadata(), got {metadata!r}")
    node_types, relations = list(metadata[0]), [tuple(r) for r in metadata[1]]
    for r in relations:
        if len(r) != 3 or r[0] not in node_types or r[2] not in node_types:
            raise ValueError(f"HGTConv: metadata's relation {r!r} is not a (src_type, name, "
                             f"dst_type) triple of its node types {node_types}")
    return node_types, relations


def _widths(in_channels, node_types: list[str]) -> dict:
    if not isinstance(in_channels, dict):
        return dict.fromkeys(node_types, in_channels)
    missing = [t for t in node_types if t not in in_channels]
    if missing:
        raise ValueError(f"HGTConv: in_channels has no width for the node types {missing}")
    for width in in_channels.values():
        check_sizes("HGTConv", lazy=True, in_channels=width)
    return dict(in_channels)
