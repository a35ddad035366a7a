"""Heterogeneous graphs: node types, each with its own node count, and relations
``(src_type, name, dst_type)``, each a :class:`Graph` on the existing kernels (bipartite
from the source type's nodes to the destination type's when the types differ).

    graph = HeteroGraph({"paper": 3, "author": 2},
                        {("author", "writes", "paper"): torch.tensor([[0, 1], [2, 2]])})
    graph["author", "writes", "paper"].num_src_nodes  # 2
"""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.graph import Graph, adjacency_entries

Relation = tuple[str, str, str]


def _check_type_name(name, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string, got {name!r}")


def _check_relation(relation, num_nodes: dict) -> Relation:
    if not (isinstance(relation, tuple) and len(relation) == 3):
        raise ValueError(f"a relation must be a (src_type, name, dst_type) tuple, got "
                         f"{relation!r}")
    for part, what in zip(relation, ("src_type", "name", "dst_type"), strict=True):
        _check_type_name(part, f"relation {relation!r}: {what}")
    for end in (relation[0], relation[2]):
        if end not in num_nodes:
            raise ValueError(f"relation {relation!r} names the node type {end!r}, which has "
                             f"no node count; node types: {sorted(num_nodes)}")
    return relation


class HeteroGraph:
    """Node types and the relations between them.

    Args:
        num_nodes (dict): node type -> number of nodes (an int >= 0).
        edges (dict): relation ``(src_type, name, dst_type)`` -> ``edge_index [2, E]``
            (row 0 source ids among ``src_type``'s nodes, row 1 destination ids among
            ``dst_type``'s) or a ``Graph`` of the right sizes. Messages flow from source
            to destination, as in PyG's ``HeteroData``.

    Each relation's ids are checked against its types' counts, with an error naming the
    relation, the offending id and the count.
    """

    def __init__(self, num_nodes: dict, edges: dict):
        if not isinstance(num_nodes, dict) or not num_nodes:
            raise ValueError(f"num_nodes must be a non-empty dict of node type -> count, got "
                             f"{num_nodes!r}")
        for node_type, count in num_nodes.items():
            _check_type_name(node_type, "a node type")
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"num_nodes[{node_type!r}] must be an integer >= 0, got "
                                 f"{count!r}")
        if not isinstance(edges, dict):
            raise ValueError(f"edges must be a dict of relation -> edge_index, got "
                             f"{type(edges).__name__}")
        self.num_nodes = dict(num_nodes)
        self.edges: dict[Relation, Graph] = {}
        for relation, value in edges.items():
            relation = _check_relation(relation, num_nodes)
            self.edges[relation] = self._relation_graph(relation, value)

    def _relation_graph(self, relation: Relation, value) -> Graph:
        src, _, dst = relation
        size = (self.num_nodes[src], self.num_nodes[dst])
        if isinstance(value, Graph):
            got = (value.num_src_nodes, value.num_nodes)
            if got != size:
                raise ValueError(f"relation {relation!r}: the Graph has {got[0]} source and "
                                 f"{got[1]} destination nodes, the node types {size}")
            return value
        try:
            if src == dst:
                return Graph(value, size[1])
            return Graph.bipartite(value, size)
        except (ValueError, TypeError) as err:
            raise type(err)(f"relation {relation!r}: {err}") from err

    @property
    def node_types(self) -> list[str]:
        return list(self.num_nodes)

    @property
    def relations(self) -> list[Relation]:
        return list(self.edges)

    def metadata(self) -> tuple[list[str], list[Relation]]:
        """(node types, relations), as PyG's ``HeteroData.metadata()``."""
        return self.node_types, self.relations

    def relations_into(self, node_type: str) -> list[Relation]:
        return [r for r in self.edges if r[2] == node_type]

    def __getitem__(self, relation: Relation) -> Graph:
        if relation not in self.edges:
            raise KeyError(f"no relation {relation!r}; relations: {self.relations}")
        return self.edges[relation]

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}={n}" for t, n in self.num_nodes.items())
        rels = ", ".join(f"{s}-{r}->{d}: {self.edges[(s, r, d)].num_edges}"
                         for s, r, d in self.edges)
        return f"HeteroGraph(nodes: {nodes}; edges: {rels})"

    @property
    def device(self) -> torch.device:
        return next(iter(self.edges.values())).device if self.edges else torch.device("cpu")

    def to(self, device) -> HeteroGraph:
        return HeteroGraph(self.num_nodes, {r: g.to(device) for r, g in self.edges.items()})

    def check_features(self, x: dict, what: str = "x") -> None:
        """``x`` has a floating ``[num_nodes, F]`` matrix for every node type."""
        if not isinstance(x, dict):
            raise TypeError(f"{what} must be a dict of node type -> features, got "
                            f"{type(x).__name__}")
        missing = [t for t in self.num_nodes if t not in x]
        if missing:
            raise ValueError(f"{what} has no features for the node types {missing}")
        for node_type, n in self.num_nodes.items():
            value = x[node_type]
            if not isinstance(value, Tensor) or value.dim() != 2 or value.size(0) != n or \
                    not value.is_floating_point() or value.layout != torch.strided:
                layout = "" if getattr(value, "layout", torch.strided) == torch.strided \
                    else f" {value.layout} (pass .to_dense())"
                raise ValueError(f"{what}[{node_type!r}] must be dense floating [{n}, F] (a row "
                                 f"per {node_type} node), got {getattr(value, 'dtype', None)} "
                                 f"{list(getattr(value, 'shape', []))}{layout}")

    @classmethod
    def from_pyg(cls, data) -> HeteroGraph:
        """The node types and relations of a PyG ``HeteroData`` (node counts from
        ``num_nodes`` or the feature rows; every edge type's ``edge_index``, or its
        ``adj_t`` as ``ToSparseTensor`` leaves it: entry (i, j) the edge j -> i, a repeated
        entry one edge)."""
        num_nodes = {}
        # a type only named by an edge type is no node type of PyG's (it has no store)
        named = [t for relation in data.edge_types for t in (relation[0], relation[2])]
        for node_type in dict.fromkeys([*data.node_types, *named]):
            count = data[node_type].num_nodes if node_type in data.node_types else None
            if count is None:
                raise ValueError(f"HeteroData node type {node_type!r} has no num_nodes and "
                                 f"no features to count: set data[{node_type!r}].num_nodes")
            num_nodes[node_type] = int(count)
        edges = {}
        for relation in data.edge_types:
            store = data[relation]
            adj_t = store.get("adj_t")
            if "edge_index" in store:
                edges[tuple(relation)] = store.edge_index
            elif isinstance(adj_t, Tensor) and adj_t.layout != torch.strided:
                dst, src, _ = adjacency_entries(adj_t, f"HeteroData relation {relation!r}: adj_t")
                edges[tuple(relation)] = torch.stack([src, dst])
            else:
                raise ValueError(f"HeteroData relation {relation!r} has no edge_index and no "
                                 "torch.sparse adj_t")
        return cls(num_nodes, edges)

    def to_pyg(self, x: dict | None = None):
        """A PyG ``HeteroData`` with these node counts and edges (and features ``x``)."""
        from torch_geometric.data import HeteroData
        data = HeteroData()
        for node_type, n in self.num_nodes.items():
            data[node_type].num_nodes = n
            if x is not None and node_type in x:
                data[node_type].x = x[node_type]
        for relation, graph in self.edges.items():
            data[relation].edge_index = graph.edge_index
        return data
