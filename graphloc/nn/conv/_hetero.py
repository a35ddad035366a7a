"""Helpers of the heterogeneous convs (HGTConv, HANConv): PyG's metadata, widths per node
type, the relations' graphs from an ``edge_index_dict``, and PyG's parameter-dict keys."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.graph import Graph, adjacency_entries, graph_of_edges
from graphloc.hetero import HeteroGraph
from graphloc.nn.conv._utils import check_input, check_sizes

Relation = tuple[str, str, str]


def checked_metadata(owner: str, metadata) -> tuple[list[str], list[Relation]]:
    """``(node types, relations)`` of PyG's ``HeteroData.metadata()``, checked."""
    if not (isinstance(metadata, (tuple, list)) and len(metadata) == 2):
        raise ValueError(f"{owner}: metadata must be (node types, relations), as "
                         f"HeteroData.metadata(), got {metadata!r}")
    node_types, relations = list(metadata[0]), [tuple(r) for r in metadata[1]]
    for r in relations:
        if len(r) != 3 or r[0] not in node_types or r[2] not in node_types:
            raise ValueError(f"{owner}: metadata's relation {r!r} is not a (src_type, name, "
                             f"dst_type) triple of its node types {node_types}")
    return node_types, relations


def check_heads(owner: str, out_channels: int, heads: int) -> None:
    """``out_channels`` and ``heads`` integers >= 1, the one divisible by the other."""
    check_sizes(owner, out_channels=out_channels, heads=heads)
    if out_channels % heads:
        raise ValueError(f"{owner}: out_channels ({out_channels}) must be divisible by "
                         f"heads ({heads})")


def widths_per_type(owner: str, in_channels, node_types: list[str]) -> dict:
    """Each node type's input width (-1: lazy) from an int for all or a dict."""
    if not isinstance(in_channels, dict):
        check_sizes(owner, lazy=True, in_channels=in_channels)
        return dict.fromkeys(node_types, in_channels)
    missing = [t for t in node_types if t not in in_channels]
    if missing:
        raise ValueError(f"{owner}: in_channels has no width for the node types {missing}")
    for width in in_channels.values():
        check_sizes(owner, lazy=True, in_channels=width)
    return dict(in_channels)


def is_lazy(lin: torch.nn.Module) -> bool:
    # (isinstance, not torch.nn.parameter.is_lazy: dynamo traces the one, not the other)
    return isinstance(lin.weight, torch.nn.parameter.UninitializedParameter)


def typed_linears(widths: dict, out_channels: int) -> torch.nn.ModuleDict:
    """A Linear per type (lazy for a width of -1)."""
    return torch.nn.ModuleDict({
        t: torch.nn.LazyLinear(out_channels) if width == -1
        else torch.nn.Linear(width, out_channels) for t, width in widths.items()})


def check_feature_dict(layer: torch.nn.Module, x_dict, lins: torch.nn.ModuleDict) -> None:
    """``x_dict`` is a dict whose features of each type in ``lins`` have that Linear's
    input width (any while it is lazy)."""
    if not isinstance(x_dict, dict):
        raise TypeError(f"{type(layer).__name__} expects x_dict, a dict of node type -> "
                        f"features, got {type(x_dict).__name__}")
    for t, x in x_dict.items():
        if t in lins:
            width = -1 if is_lazy(lins[t]) else lins[t].in_features
            check_input(layer, x, width, f"x_dict[{t!r}]")


def relation_graphs(owner: str, edge_index_dict, counts: dict,
                    relations: list[Relation]) -> dict[Relation, Graph]:
    """Each relation's Graph from its source type's nodes to its destination type's, in
    ``edge_index_dict``'s order, checked against ``x_dict``'s node counts (``counts``) and
    the ``relations`` of the layer's metadata; errors name the relation."""
    if isinstance(edge_index_dict, HeteroGraph):
        edge_index_dict = edge_index_dict.edges
    if not isinstance(edge_index_dict, dict):
        raise TypeError(f"{owner} expects edge_index_dict, a dict of relation -> edge_index "
                        f"or a HeteroGraph, got {type(edge_index_dict).__name__}")
    graphs = {}
    for relation, edges in edge_index_dict.items():
        if relation not in relations:
            raise ValueError(f"{owner}: edge_index_dict holds the relation {relation!r}, which "
                             f"is not in its metadata: {relations}")
        for end in (relation[0], relation[2]):
            if end not in counts:
                raise ValueError(f"{owner}: the relation {relation!r} names the node type "
                                 f"{end!r}, which x_dict has no features for")
        try:
            graphs[relation] = _relation_graph(edges, counts[relation[0]], counts[relation[2]])
        except (ValueError, TypeError) as err:
            raise type(err)(f"{owner}: relation {relation!r}: {err}") from err
    return graphs


def _relation_graph(edges, n_src: int, n_dst: int) -> Graph:
    """A relation's Graph from an edge_index (built once while it stays the same), a
    ``torch.sparse`` ``adj_t`` or a Graph."""
    if isinstance(edges, Graph):
        if (edges.num_src_nodes, edges.num_nodes) != (n_src, n_dst):
            raise ValueError(f"the Graph has {edges.num_src_nodes} source and "
                             f"{edges.num_nodes} destination nodes, x_dict's node types "
                             f"{n_src} and {n_dst}")
        return edges
    if isinstance(edges, Tensor) and edges.layout != torch.strided:
        if tuple(edges.shape[:2]) != (n_dst, n_src):
            raise ValueError(f"the sparse adjacency adj_t has shape {list(edges.shape)}, not "
                             f"[N_dst, N_src] = [{n_dst}, {n_src}]")
        dst, src, _ = adjacency_entries(edges, "the sparse adjacency")
        return Graph.bipartite(torch.stack([src, dst]), (n_src, n_dst))
    return graph_of_edges(edges, n_dst, n_src)


#: the names torch's ParameterDict refuses as keys (its own attributes)
_PARAMETER_DICT_ATTRIBUTES = frozenset(dir(torch.nn.ParameterDict))


def parameter_key(name: str | Relation) -> str:
    """A node type's or relation's ParameterDict key as PyG's layers store it: a relation's
    parts joined by "__", and a name torch's ParameterDict refuses changed as PyG's
    ``ParameterDict`` changes it (an attribute's name in angle brackets, "." as "#"), so
    that state dicts load both ways."""
    if isinstance(name, tuple):
        name = "__".join(name)
    if name in _PARAMETER_DICT_ATTRIBUTES:
        name = f"<{name}>"
    return name.replace(".", "#")


def flow_between_types(owner: str, flow: str) -> None:
    """Refuses PyG's ``flow="target_to_source"``, not defined between node types."""
    if flow != "source_to_target":
        raise ValueError(f"{owner}: flow={flow!r} is not defined between node types; pass "
                         "each edge_index flipped with the default flow")
