"""graphloc.loader.ClusterData: PyG's Cluster-GCN data on graphloc's partitioner, checked
against PyG's own ``Data.subgraph`` for every part and batch, and against ops.partition."""

import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.utils import sort_edge_index  # noqa: E402

from graphloc.loader import ClusterData, ClusterLoader  # noqa: E402
from graphloc.ops import partition  # noqa: E402


def grid_data(rows=12, cols=10):
    ids = torch.arange(rows * cols).view(rows, cols)
    pairs = torch.cat([torch.stack([ids[:, :-1].flatten(), ids[:, 1:].flatten()]),
                       torch.stack([ids[:-1].flatten(), ids[1:].flatten()])], dim=1)
    edge_index = torch.cat([pairs, pairs.flip(0)], dim=1)
    n = rows * cols
    return Data(x=torch.randn(n, 3, generator=torch.Generator().manual_seed(0)),
                y=torch.arange(n), n_id=torch.arange(n), edge_index=edge_index,
                edge_attr=torch.arange(edge_index.size(1)))


def assert_is_subgraph(batch, data, sparse_format="csr", any_order=False):
    """``batch`` is PyG's ``data.subgraph`` of its nodes, edges sorted by ``sparse_format``
    (``any_order``: as a set; a loader's batch of several parts orders each row's edges by
    part)."""
    expected = data.subgraph(batch.n_id)
    assert torch.equal(batch.x, expected.x) and torch.equal(batch.y, expected.y)
    edge_index, edge_attr = sort_edge_index(expected.edge_index, expected.edge_attr,
                                            sort_by_row=sparse_format == "csr")
    got_index, got_attr = batch.edge_index, batch.edge_attr
    if any_order:
        got_index, got_attr = sort_edge_index(got_index, got_attr,
                                              sort_by_row=sparse_format == "csr")
    assert torch.equal(got_index, edge_index)
    assert torch.equal(got_attr, edge_attr)


@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("sparse_format", ["csr", "csc"])
def test_parts_and_batches_are_pyg_subgraphs(recursive, sparse_format):
    data = grid_data()
    clusters = ClusterData(data, num_parts=6, recursive=recursive, log=False,
                           sparse_format=sparse_format, seed=3)
    parts = partition(data.edge_index, 6, num_nodes=data.num_nodes, recursive=recursive,
                      seed=3)
    assert clusters.partition.partptr.diff().tolist() == torch.bincount(parts).tolist()
    assert len(clusters) == 6
    for i in range(6):
        part = clusters[i]
        assert set(part.n_id.tolist()) == set((parts == i).nonzero().flatten().tolist())
        assert_is_subgraph(part, data, sparse_format)
    seen = []
    for batch in ClusterLoader(clusters, batch_size=4, shuffle=True):
        assert_is_subgraph(batch, data, sparse_format, any_order=True)
        seen += batch.n_id.tolist()
    assert sorted(seen) == list(range(data.num_nodes))


@pytest.mark.filterwarnings("ignore:Weights only load failed")  # PyG's loading of its file
def test_keep_inter_cluster_edges_and_save_dir(tmp_path):
    data = grid_data()
    clusters = ClusterData(data, num_parts=4, log=False, keep_inter_cluster_edges=True,
                           save_dir=str(tmp_path))
    parts = partition(data.edge_index, 4, num_nodes=data.num_nodes)
    part = clusters[0]
    members = part.n_id
    outgoing = torch.isin(data.edge_index[0], members)  # every edge leaving the part kept
    assert part.edge_index.size(1) == int(outgoing.sum()) == part.edge_attr.numel()
    assert bool((parts[data.edge_index[1, part.edge_attr]] != 0).any())
    loaded = ClusterData(data, num_parts=4, log=False, keep_inter_cluster_edges=True,
                         save_dir=str(tmp_path))
    assert torch.equal(loaded.partition.node_perm, clusters.partition.node_perm)


def test_bad_graphs_refused_before_pyg_reads_them():
    data = grid_data()
    data.edge_index = data.edge_index.clone()
    data.edge_index[1, 5] = data.num_nodes  # PyG's CSR conversion would write past its end
    with pytest.raises(ValueError, match="edge_index holds 120 but dim_size is 120"):
        ClusterData(data, num_parts=2, log=False)
    with pytest.raises(ValueError, match="num_parts must be an integer >= 1, got 0"):
        ClusterData(grid_data(), num_parts=0, log=False)
    with pytest.raises(ValueError, match="seed"):
        ClusterData(grid_data(), num_parts=2, log=False, seed=-1)
    with pytest.raises(TypeError, match="edge_index must be an integer tensor"):
        ClusterData(Data(x=torch.ones(2, 1), edge_index=torch.tensor([[0.0], [1.0]])),
                    num_parts=2, log=False)
    # no edges: parts of the nodes still, balanced
    empty = ClusterData(Data(x=torch.ones(4, 1), edge_index=torch.empty(2, 0, dtype=torch.long)),
                        num_parts=2, log=False)
    assert empty.partition.partptr.tolist() == [0, 2, 4]
    with pytest.raises(ValueError, match="edge_index, which is missing"):
        ClusterData(Data(x=torch.ones(3, 1)), num_parts=2, log=False)


@pytest.mark.parametrize("option", ["recursive", "log", "keep_inter_cluster_edges"])
def test_true_false_options_refuse_a_string_by_name(option):
    """log="False" printed and keep_inter_cluster_edges="False" kept them, quietly."""
    with pytest.raises(TypeError, match=f"ClusterData: {option} must be True or False"):
        ClusterData(grid_data(), 2, **{option: "False"})


def test_cluster_loader_is_pygs_and_refuses_a_truthy_shuffle():
    """The same batches as PyG's own ClusterLoader (in order, without shuffling), and a
    ``shuffle`` or ``drop_last`` that is not True or False refused by name (torch's
    DataLoader read ``shuffle="False"`` as True)."""
    from torch_geometric.loader import ClusterLoader as PyGClusterLoader
    clusters = ClusterData(grid_data(), num_parts=6, log=False, seed=3)
    ours = [b.n_id.tolist() for b in ClusterLoader(clusters, batch_size=4, shuffle=False)]
    theirs = [b.n_id.tolist() for b in PyGClusterLoader(clusters, batch_size=4,
                                                           shuffle=False)]
    assert ours == theirs and len(ours) == 2
    assert isinstance(ClusterLoader(clusters), PyGClusterLoader)
    for name in ("shuffle", "drop_last"):
        with pytest.raises(TypeError, match=f"ClusterLoader: {name} must be True or False, "
                                            "got 'False'"):
            ClusterLoader(clusters, batch_size=4, **{name: "False"})
