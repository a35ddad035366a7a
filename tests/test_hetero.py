"""HeteroGraph: validation naming the relation, PyG HeteroData both ways."""

import pytest
import torch

from graphloc import Graph
from graphloc.hetero import HeteroGraph

WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")


def _graph():
    return HeteroGraph({"paper": 4, "author": 3},
                       {WRITES: torch.tensor([[0, 1, 2, 2], [0, 0, 1, 3]]),
                        CITES: torch.tensor([[0, 1, 2], [1, 2, 3]])})


def test_relations_are_graphs_of_the_right_sizes():
    g = _graph()
    assert g.metadata() == (["paper", "author"], [WRITES, CITES])
    writes = g[WRITES]
    assert writes.is_bipartite and (writes.num_src_nodes, writes.num_nodes) == (3, 4)
    assert not g[CITES].is_bipartite and g[CITES].num_nodes == 4
    assert g.relations_into("paper") == [WRITES, CITES] and g.relations_into("author") == []
    assert "author-writes->paper: 4" in repr(g)
    same = HeteroGraph(g.num_nodes, {WRITES: writes})  # a Graph is taken as it is
    assert same[WRITES] is writes


@pytest.mark.parametrize("num_nodes,edges,match", [
    ({}, {}, "num_nodes must be a non-empty dict"),
    ({"paper": -1}, {}, r"num_nodes\['paper'\] must be an integer >= 0, got -1"),
    ({"paper": 2.0}, {}, r"num_nodes\['paper'\] must be an integer"),
    ({"paper": 2}, {("paper", "cites"): torch.zeros(2, 0, dtype=torch.long)},
     "a relation must be a \\(src_type, name, dst_type\\) tuple"),
    ({"paper": 2}, {("venue", "has", "paper"): torch.zeros(2, 0, dtype=torch.long)},
     "names the node type 'venue', which has no node count"),
    ({"paper": 2, "author": 3}, {WRITES: torch.tensor([[3], [0]])},
     r"relation \('author', 'writes', 'paper'\): .*3"),
    ({"paper": 2, "author": 3}, {WRITES: torch.tensor([[0], [2]])},
     r"relation \('author', 'writes', 'paper'\): .*2"),
    ({"paper": 2, "author": 3}, {WRITES: Graph(torch.tensor([[0], [1]]), 2)},
     "the Graph has 2 source and 2 destination nodes, the node types \\(3, 2\\)"),
])
def test_bad_input_names_the_relation(num_nodes, edges, match):
    with pytest.raises(ValueError, match=match):
        HeteroGraph(num_nodes, edges)


def test_features_are_checked_per_type():
    g = _graph()
    g.check_features({"paper": torch.randn(4, 2), "author": torch.randn(3, 5)})
    with pytest.raises(ValueError, match=r"x\['author'\] must be dense floating \[3, F\]"):
        g.check_features({"paper": torch.randn(4, 2), "author": torch.ones(3, 5).long()})
    with pytest.raises(TypeError, match="x must be a dict"):
        g.check_features(torch.randn(4, 2))


def test_pyg_heterodata_both_ways():
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import HeteroData
    data = HeteroData()
    data["paper"].x = torch.randn(4, 2)
    data["author"].num_nodes = 3
    data[WRITES].edge_index = torch.tensor([[0, 1, 2, 2], [0, 0, 1, 3]])
    data[CITES].edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    g = HeteroGraph.from_pyg(data)
    assert g.num_nodes == {"paper": 4, "author": 3}
    assert torch.equal(g[WRITES].edge_index, data[WRITES].edge_index)
    back = g.to_pyg({"paper": data["paper"].x})
    assert back.metadata() == data.metadata()
    assert torch.equal(back[CITES].edge_index, data[CITES].edge_index)
    assert torch.equal(back["paper"].x, data["paper"].x) and back["author"].num_nodes == 3


def test_wrong_dtypes_and_shapes_are_named():
    with pytest.raises((ValueError, TypeError), match=r"relation \('author', 'writes', 'paper'\)"):
        HeteroGraph({"paper": 4, "author": 3}, {WRITES: torch.tensor([[0.0], [1.0]])})
    with pytest.raises((ValueError, TypeError), match=r"relation \('author', 'writes', 'paper'\)"):
        HeteroGraph({"paper": 4, "author": 3}, {WRITES: torch.tensor([0, 1, 2])})
    empty = HeteroGraph({"paper": 0, "author": 0}, {WRITES: torch.zeros(2, 0, dtype=torch.long)})
    assert empty[WRITES].num_edges == 0


def test_from_pyg_reads_the_adj_t_that_to_sparse_tensor_leaves():
    """ToSparseTensor replaces each edge type's edge_index by adj_t ([N_dst, N_src]); such a
    HeteroData was refused. Its edges are the matrix's entries (a repeated edge once)."""
    import torch_geometric.transforms as T
    from torch_geometric.data import HeteroData
    data = HeteroData()
    data["a"].x, data["b"].x = torch.randn(4, 2), torch.randn(3, 2)
    data["a", "to", "b"].edge_index = torch.tensor([[0, 1, 3, 3], [0, 2, 1, 1]])
    data["b", "rev", "a"].edge_index = torch.tensor([[0, 2], [1, 3]])
    graph = HeteroGraph.from_pyg(T.ToSparseTensor()(data.clone()))
    for relation in data.edge_types:
        want = sorted(set(map(tuple, data[relation].edge_index.t().tolist())))
        got = sorted(map(tuple, graph[relation].edge_index.t().tolist()))
        assert got == want
    assert graph["a", "to", "b"].num_src_nodes == 4 and graph["a", "to", "b"].num_nodes == 3


def test_from_pyg_names_a_node_type_without_a_count():
    from torch_geometric.data import HeteroData
    data = HeteroData()  # node types named only by an edge type: PyG keeps no store for them
    data["a", "r", "b"].edge_index = torch.tensor([[0, 1], [2, 0]])
    with pytest.raises(ValueError, match=r"node type 'a' has no num_nodes .* set "
                                         r"data\['a'\].num_nodes"):
        HeteroGraph.from_pyg(data)
    data["a"].num_nodes, data["b"].num_nodes = 2, 3
    graph = HeteroGraph.from_pyg(data)
    assert (graph.num_nodes, graph["a", "r", "b"].edge_index.tolist()) == \
        ({"a": 2, "b": 3}, [[0, 1], [2, 0]])
