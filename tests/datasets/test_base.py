"""NodeDataset: every tensor must agree with the graph, or the field is named."""

import warnings

import pytest
import torch

from graphloc import Graph
from graphloc.datasets import NodeDataset


def _dataset(**change):
    fields = dict(name="d", graph=Graph(torch.tensor([[0, 1, 2], [1, 2, 0]])),
                  x=torch.randn(3, 2), y=torch.tensor([0, 1, 0]), train_index=torch.tensor([0]),
                  val_index=torch.tensor([1]), test_index=torch.tensor([2]))
    return NodeDataset(**{**fields, **change})


@pytest.mark.parametrize("change, message", [
    ({"x": torch.randn(4, 2)}, r"x must be \[3, F\] \(a row per node\), got \[4, 2\]"),
    ({"x": torch.randn(3)}, r"x must be \[3, F\]"),
    ({"y": torch.tensor([0.0, 1.0, 0.0])}, "y must be integer class labels"),
    ({"y": torch.tensor([0, 1])}, r"y must be integer class labels of shape \[3\]"),
    ({"y": torch.tensor([0, -1, 0])}, "val_index holds node 1, which has no label"),
    ({"y": torch.tensor([0, -2, 0])}, "y holds -2; labels are >= 0, or -1 for a node"),
    ({"train_index": torch.tensor([5])}, r"train_index holds node 5, outside \[0, 3\)"),
    ({"val_index": torch.tensor([-1])}, "val_index holds node -1"),
    ({"test_index": torch.tensor([[2]])}, "test_index must be 1-D integer node ids"),
    ({"test_index": torch.tensor([True, False, True])}, "test_index must be 1-D integer"),
    ({"train_index": torch.tensor([1, 0, 1])}, "d: train_index holds only 0s and 1s, one per "
                                               "node of the 3: a mask stored as torch.int64"),
    ({"graph": torch.tensor([[0], [1]])}, "graph must be a graphloc.Graph"),
    ({"node_names": ["a", "b"]}, "d: node_names must name each of the 3 nodes, got 2 names"),
])
def test_inconsistent_fields_are_named(change, message):
    _dataset()  # the consistent one builds
    with pytest.raises((ValueError, TypeError), match=message):
        _dataset(**change)


def test_constructors_refuse_fractional_labels_and_ids_and_cast_integer_features():
    """from_networkx, from_pyg and as_node_dataset used to cast with .long(): y = 0.5 became
    class 0 and a node id 2.7 became 2, silently."""
    import networkx as nx
    from torch_geometric.data import Data

    from graphloc.datasets.base import as_node_dataset
    g = nx.path_graph(4)
    x, edge_index = torch.arange(8).view(4, 2), torch.tensor([[0, 1, 2], [1, 2, 3]])
    ds = NodeDataset.from_networkx(g, x, torch.tensor([0.0, 1.0, 1.0, 0.0]))
    assert ds.x.dtype == torch.float32 and torch.equal(ds.x, x.float())  # exact
    assert ds.y.tolist() == [0, 1, 1, 0]
    fractional = torch.tensor([0.0, 0.5, 1.0, 0.0])
    with pytest.raises(ValueError, match=r"y must hold whole numbers .* entry 1 is 0.5"):
        NodeDataset.from_networkx(g, x, fractional)
    with pytest.raises(ValueError, match="entry 1 is 0.5"):
        NodeDataset.from_pyg(Data(x=x.float(), edge_index=edge_index, y=fractional))
    with pytest.raises(ValueError, match="entry 0 is nan"):
        as_node_dataset((x.float(), edge_index, torch.tensor([float("nan"), 0, 1, 0])))
    split = (torch.tensor([2.7]), torch.tensor([1]), torch.tensor([0]))
    with pytest.raises(ValueError, match="train must hold whole numbers .* entry 0 is 2.7"):
        NodeDataset.from_networkx(g, x, torch.zeros(4, dtype=torch.long), split=split)
    with pytest.raises(TypeError, match="x must be floating point, got torch.int64"):
        _dataset(x=torch.ones(3, 2, dtype=torch.long))


def test_unlabelled_nodes_outside_the_splits_train():
    """PyG marks unlabelled nodes with y = -1 and leaves them out of its masks: such a Data
    trains (it was refused for the -1), and a -1 inside a split is an error naming the
    split and the node."""
    from torch_geometric.data import Data

    from graphloc.train import TrainConfig, fit
    gen = torch.Generator().manual_seed(0)
    n = 30
    edge_index = torch.randint(0, n, (2, 90), generator=gen)
    y = torch.randint(0, 3, (n,), generator=gen)
    y[20:] = -1
    ids = torch.arange(n)
    data = Data(x=torch.randn(n, 4, generator=gen), edge_index=edge_index, y=y,
                train_mask=ids < 12, val_mask=(ids >= 12) & (ids < 16),
                test_mask=(ids >= 16) & (ids < 20))
    history = fit(data, TrainConfig(model="gcn", epochs=2, hidden=8), progress=False)
    assert len(history) == 2 and 0.0 <= history[-1]["test"] <= 1.0
    dataset = NodeDataset.from_pyg(data)
    assert dataset.num_classes == int(y.max()) + 1
    data.test_mask = ids >= 16
    with pytest.raises(ValueError, match="test_index holds node 20, which has no label"):
        NodeDataset.from_pyg(data)


def test_positions_and_edge_features_of_another_size_are_refused():
    """A Data's pos or edge_attr with a row count other than the graph's was kept as it
    was, to be read against the wrong nodes or edges later."""
    from torch_geometric.data import Data
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    base = {"x": torch.randn(4, 2), "edge_index": edge_index, "y": torch.tensor([0, 1, 0, 1])}
    with pytest.raises(ValueError, match=r"pyg: edge_attr must have a row per edge \(3\), got "
                                         r"\[2, 2\]"):
        NodeDataset.from_pyg(Data(**base, edge_attr=torch.randn(2, 2)))
    with pytest.raises(ValueError, match=r"pyg: pos must have a row per node \(4\), got "
                                         r"\[5, 2\]"):
        NodeDataset.from_pyg(Data(**base, pos=torch.randn(5, 2)))
    kept = NodeDataset.from_pyg(Data(**base, pos=torch.randn(4, 2), edge_attr=torch.randn(3)))
    assert kept.pos.shape == (4, 2) and kept.edge_attr.shape == (3,)
    graph = Graph(edge_index, num_nodes=4)
    for field, value in (("pos", [[0.0, 1.0]] * 4), ("edge_attr", torch.tensor(1.0))):
        with pytest.raises(ValueError, match=rf"d: {field} must have a row per"):
            NodeDataset("d", graph, base["x"], base["y"], torch.tensor([0]), torch.tensor([1]),
                        torch.tensor([2]), **{field: value})


def test_data_attributes_a_dataset_leaves_out_are_named():
    """fit(data) on a Data with edge weights trained without them, without a word."""
    from torch_geometric.data import Data
    data = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]),
                y=torch.tensor([0, 1, 0, 1]), edge_weight=torch.rand(3))
    with pytest.warns(UserWarning, match=r"pyg: Data attributes \['edge_weight'\] are not "
                                         r"read") as record:
        NodeDataset.from_pyg(data)
    assert record[0].filename == __file__
    del data.edge_weight
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NodeDataset.from_pyg(data)


def test_nodes_shared_between_or_repeated_in_splits_warn():
    """A test accuracy measured partly on training nodes, or a node counted twice, is a
    silently inflated number: the dataset warns, naming the splits and the first node
    (from this file: the warning points at the caller)."""
    with pytest.warns(UserWarning, match=r"train_index and test_index share 1 nodes \(the "
                                         r"first: 0\)") as record:
        _dataset(test_index=torch.tensor([2, 0]))
    assert record[0].filename == __file__
    with pytest.warns(UserWarning, match="val_index holds node 1 more than once"):
        _dataset(val_index=torch.tensor([1, 1]))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _dataset()  # disjoint splits: quiet


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64, torch.float32])
def test_a_split_given_as_a_zero_one_mask_of_another_dtype_is_refused(dtype):
    """Read as node ids, a 0/1 mask trains on nodes 0 and 1 over and over (uint8 masks
    come from older PyG datasets): refused by the tuple and PyG paths alike, naming it."""
    from torch_geometric.data import Data

    from graphloc.datasets.base import as_node_dataset
    x, y = torch.randn(6, 3), torch.tensor([0, 1, 0, 1, 0, 1])
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    masks = [torch.tensor(m, dtype=dtype) for m in
             ([1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1])]
    with pytest.raises(ValueError, match=f"train holds only 0s and 1s, one per node of the "
                                         f"6: a mask stored as {dtype}"):
        as_node_dataset((x, edge_index, y, masks))
    data = Data(x=x, edge_index=edge_index, y=y, train_mask=masks[0], val_mask=masks[1],
                test_mask=masks[2])
    with pytest.raises(ValueError, match="train_mask holds only 0s and 1s"):
        NodeDataset.from_pyg(data)
    as_bool = as_node_dataset((x, edge_index, y, [m.bool() for m in masks]))  # the fix named
    assert as_bool.train_index.tolist() == [0, 1] and as_bool.test_index.tolist() == [4, 5]


def test_from_networkx_refuses_labels_out_of_order_unless_nodes_says_which_rows():
    """Rows of x and y indexed by label would describe other nodes when g.nodes lists the
    labels 0..N-1 in another order (an edge list read by networkx): refused, and nodes=
    picks the rows either way."""
    import networkx as nx
    g = nx.Graph([(2, 0), (0, 1), (1, 3)])  # g.nodes: [2, 0, 1, 3]
    x, y = torch.arange(8.0).view(4, 2), torch.tensor([0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"row 0 would be node 2\). Pass nodes=sorted"):
        NodeDataset.from_networkx(g, x, y)
    by_label = NodeDataset.from_networkx(g, x, y, nodes=sorted(g.nodes))
    edges = {tuple(e) for e in by_label.graph.edge_index.t().tolist()}
    assert edges == {(u, v) for a, b in g.edges for u, v in ((a, b), (b, a))}  # row i: node i
    as_listed = NodeDataset.from_networkx(g, x, y, nodes=list(g.nodes))
    order = list(g.nodes)
    edges = {(order[u], order[v]) for u, v in as_listed.graph.edge_index.t().tolist()}
    assert edges == {(u, v) for a, b in g.edges for u, v in ((a, b), (b, a))}


def test_several_labels_per_node_are_refused_with_their_shape():
    """A [N, k] target (multi-label or multi-task, as ogbn-proteins') was flattened into
    N * k labels and reported as "y must be ... of shape [N], got [N * k]"; [N, 1] (OGB's
    layout) is one label per node and is read as [N]."""
    from torch_geometric.data import Data

    data = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[0, 1], [1, 2]]),
                y=torch.tensor([[0, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 1]]))
    with pytest.raises(ValueError, match=r"y has shape \[4, 3\], several labels per node"):
        NodeDataset.from_pyg(data)
    from graphloc.datasets.base import as_node_dataset
    with pytest.raises(ValueError, match=r"data: y has shape \[4, 3\]"):
        as_node_dataset((data.x, data.edge_index, data.y))  # what fit reads a tuple with
    data.y = torch.tensor([[0], [1], [1], [0]])
    assert NodeDataset.from_pyg(data).y.tolist() == [0, 1, 1, 0]


def test_sparse_features_are_made_dense_and_complex_ones_refused():
    """Sparse features passed every check and crashed inside fit ("Could not run
    'aten::ne.Scalar' ... 'SparseCPU'"); complex ones were cast to real, their imaginary
    part dropped with only torch's warning."""
    from torch_geometric.data import Data

    x = torch.tensor([[0.0, 1.5], [0.0, 0.0], [2.0, 0.0], [0.0, -1.0]])
    edge_index, y = torch.tensor([[0, 1], [1, 2]]), torch.tensor([0, 1, 1, 0])
    ds = NodeDataset.from_pyg(Data(x=x.to_sparse(), edge_index=edge_index, y=y))
    assert ds.x.layout == torch.strided and torch.equal(ds.x, x)
    with pytest.raises(TypeError, match="x must be floating point, got torch.complex64"):
        NodeDataset.from_pyg(Data(x=x.to(torch.complex64), edge_index=edge_index, y=y))
    graph, split = Graph(edge_index, num_nodes=4), torch.tensor([0])
    with pytest.raises(ValueError, match=r"direct: x must be a dense tensor, got layout "
                                         r"torch.sparse_coo \(pass x.to_dense\(\)\)"):
        NodeDataset("direct", graph, x.to_sparse(), y, split, split + 1, split + 2)


def test_masks_holding_several_splits_take_one_by_its_column():
    """PyG's WikipediaNetwork, WebKB and Actor give masks of shape [N, 10], one split per
    column. They were refused as "train_mask has 200 entries but the graph has 20 nodes";
    split=i now picks column i, and without it the error says how."""
    from torch_geometric.data import Data
    n, k = 20, 4
    gen = torch.Generator().manual_seed(0)
    order = torch.stack([torch.randperm(n, generator=gen) for _ in range(k)], dim=1)
    train, val, test = order < 10, (order >= 10) & (order < 14), order >= 14
    data = Data(x=torch.randn(n, 3), edge_index=torch.randint(0, n, (2, 40), generator=gen),
                y=torch.randint(0, 3, (n,), generator=gen), train_mask=train, val_mask=val,
                test_mask=test)
    for i in range(k):
        ds = NodeDataset.from_pyg(data, split=i)
        assert ds.train_index.tolist() == train[:, i].nonzero().flatten().tolist()
        assert ds.val_index.tolist() == val[:, i].nonzero().flatten().tolist()
        assert ds.test_index.tolist() == test[:, i].nonzero().flatten().tolist()
    with pytest.raises(ValueError, match=r"train_mask has shape \[20, 4\]: 4 splits, one per "
                                         r"column; pick one with split=i"):
        NodeDataset.from_pyg(data)
    with pytest.raises(ValueError, match=r"split must be an int in \[0, 4\).* got 4"):
        NodeDataset.from_pyg(data, split=4)
    one = Data(x=data.x, edge_index=data.edge_index, y=data.y, train_mask=train[:, 0],
               val_mask=val[:, 0], test_mask=test[:, 0])
    with pytest.raises(ValueError, match=r"split=1 picks a column of \[N, k\] masks, but "
                                         r"train_mask has shape \[20\]"):
        NodeDataset.from_pyg(one, split=1)


def test_from_pyg_takes_the_adj_t_of_to_sparse_tensor():
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    data = Data(x=torch.randn(4, 2), edge_index=edge_index, y=torch.tensor([0, 1, 0, 1]))
    ds = NodeDataset.from_pyg(T.ToSparseTensor()(data.clone()))
    assert sorted(map(tuple, ds.graph.edge_index.t().tolist())) == \
        sorted(map(tuple, edge_index.t().tolist()))


def test_city_split_names_a_bad_node_count():
    from graphloc.datasets.base import city_split
    with pytest.raises(ValueError, match="city_split: num_nodes must be an integer >= 0"):
        city_split([10])


def test_load_dataset_names_a_spec_that_is_not_a_path():
    from graphloc.datasets import load_dataset
    with pytest.raises(TypeError, match="load_dataset: spec must be a path, got int"):
        load_dataset(3)


def test_a_dataset_answers_pygs_one_graph_dataset_calls():
    """``len``, ``dataset[0]`` (PyG's Data, also by ``-1``, a numpy or 0-dim tensor index)
    and iteration, as PyG's InMemoryDataset of one graph; other indices refused by name."""
    import numpy as np
    from torch_geometric.data import Data
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    data = Data(x=torch.randn(4, 2), edge_index=edge_index, y=torch.tensor([0, 1, 0, 1]),
                train_mask=torch.tensor([True, True, False, False]),
                val_mask=torch.tensor([False, False, True, False]),
                test_mask=torch.tensor([False, False, False, True]))
    ds = NodeDataset.from_pyg(data, "square")
    assert len(ds) == 1 and ds.num_node_features == 2
    for idx in (0, -1, np.int64(0), torch.tensor(0)):
        got = ds[idx]
        for key in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
            assert torch.equal(got[key], data[key]), (idx, key)
    assert [d.num_nodes for d in ds] == [4]
    with pytest.raises(IndexError, match="square: a NodeDataset holds one graph; index 0, "
                                         "got 1"):
        ds[1]
    for bad in (0.0, True, "0", torch.tensor([0])):
        with pytest.raises(TypeError, match="index it with 0"):
            ds[bad]


def test_a_pyg_data_with_one_hot_labels_reads_its_classes():
    """One-hot y [N, C] is one class per node (the column of its 1; an all-zero row is
    unlabelled), where several 1s in a row stay refused as multi-label targets."""
    from torch_geometric.data import Data

    ids = torch.tensor([2, 0, -1, 1])
    y = torch.zeros(4, 3, dtype=torch.float32)
    y[ids >= 0, ids[ids >= 0]] = 1
    data = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[0, 1], [1, 2]]), y=y)
    assert NodeDataset.from_pyg(data).y.tolist() == ids.tolist()
    data.y = y.bool()
    assert NodeDataset.from_pyg(data).y.tolist() == ids.tolist()
