"""The in-memory node-classification dataset every loader returns."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from graphloc.checks import check_int, pyg_keys, refuse_integer_mask, whole_numbers
from graphloc.graph import Graph, networkx_node_order, pyg_data_with_edges


class OneGraphDataset:
    """PyG's protocol for a dataset of one graph, as PyG's ``InMemoryDataset`` answers it:
    ``len(dataset) == 1``, ``data = dataset[0]`` (the graph as PyG data, ``to_pyg()``),
    iteration, and so PyG's ``DataLoader``."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, idx):
        """``dataset[0]`` (or ``[-1]``, a NumPy or 0-dim tensor index): ``to_pyg()``."""
        if isinstance(idx, torch.Tensor) and idx.dim() == 0 and not idx.is_floating_point() \
                and idx.dtype != torch.bool:
            idx = int(idx)  # PyG takes a 0-dim integer tensor as an index
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
            raise TypeError(f"{self.name}: a {type(self).__name__} holds one graph; index it "
                            f"with 0, got {type(idx).__name__}")
        if idx not in (0, -1):
            raise IndexError(f"{self.name}: a {type(self).__name__} holds one graph; index 0, "
                             f"got {idx}")
        return self.to_pyg()


@dataclass
class NodeDataset(OneGraphDataset):
    """A graph with node features, labels and a train/val/test split.

    Splits are node-id tensors (``train_index``...) and, as properties, boolean masks
    (``train_mask``...): the City-Networks release stores ids in files named ``*_mask.pt``.
    A label of -1 marks a node without one (PyG's convention for unlabelled nodes); no
    split may hold such a node.
    """

    name: str
    graph: Graph
    x: Tensor
    y: Tensor
    train_index: Tensor
    val_index: Tensor
    test_index: Tensor
    pos: Tensor | None = None
    edge_attr: Tensor | None = None  # per edge, in graph.edge_index order
    labelled: bool = True  # False: y is a placeholder (a user's graph without labels)
    # the nodes' names in row order, where a graph file names them (an edge list of names,
    # a GraphML's ids): what a result's node ids stand for
    node_names: list | None = None

    def __post_init__(self):
        """Every tensor agrees with the graph: a mismatch is an error naming the field,
        not a wrong row read later."""
        if not isinstance(self.graph, Graph):
            raise TypeError(f"graph must be a graphloc.Graph, got {type(self.graph).__name__}")
        n = self.graph.num_nodes
        if not isinstance(self.x, Tensor) or self.x.dim() != 2 or self.x.size(0) != n:
            raise ValueError(f"{self.name}: x must be [{n}, F] (a row per node), got "
                             f"{list(getattr(self.x, 'shape', []))}")
        if self.x.layout != torch.strided:  # fit's checks and the layers read dense rows
            raise ValueError(f"{self.name}: x must be a dense tensor, got layout "
                             f"{self.x.layout} (pass x.to_dense())")
        if not self.x.is_floating_point():
            raise TypeError(f"{self.name}: x must be floating point, got {self.x.dtype}")
        for field, rows, what in (("pos", n, "node"), ("edge_attr", self.graph.num_edges, "edge")):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, Tensor) or value.dim() == 0
                                      or value.size(0) != rows):
                raise ValueError(f"{self.name}: {field} must have a row per {what} ({rows}), "
                                 f"got {list(getattr(value, 'shape', []))}")
        # -1: a node without a label (PyG's convention), which no split may hold
        check_labels_and_splits(self, n, unlabelled=True)
        if self.node_names is not None and len(self.node_names) != n:
            raise ValueError(f"{self.name}: node_names must name each of the {n} nodes, got "
                             f"{len(self.node_names)} names")

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_features(self) -> int:
        return self.x.size(1)

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1

    def _mask(self, index: Tensor) -> Tensor:
        mask = torch.zeros(self.num_nodes, dtype=torch.bool)
        mask[index] = True
        return mask

    @property
    def train_mask(self) -> Tensor:
        return self._mask(self.train_index)

    @property
    def val_mask(self) -> Tensor:
        return self._mask(self.val_index)

    @property
    def test_mask(self) -> Tensor:
        return self._mask(self.test_index)

    @classmethod
    def from_pyg(cls, data, name: str = "pyg", split: int | None = None) -> NodeDataset:
        """From a PyG ``Data`` with ``x``, ``edge_index`` and ``y``; the split from
        ``train_mask``/``val_mask``/``test_mask`` (boolean masks or node ids; for masks of
        shape ``[N, k]``, k splits, column ``split``), else :func:`city_split`. ``pos`` and
        ``edge_attr`` are kept; the Data's other attributes (``edge_weight``, say) are
        named in a warning."""
        for key in ("x", "y"):
            if getattr(data, key, None) is None:
                raise ValueError(f"the PyG Data has no {key!r}: a NodeDataset needs x, "
                                 "edge_index (or adj_t) and y")
        data = pyg_data_with_edges(data)
        graph = Graph(data.edge_index, num_nodes=data.num_nodes)
        y = class_labels(data.y, name)
        given = pyg_split(data, graph.num_nodes, split)
        warn_of_unread_keys(data, name, given is not None, stacklevel=3)
        given = given or labelled_split(y)
        return cls(name, graph, float_features(data.x), y, *given, **kept_extras(data))

    @classmethod
    def from_networkx(cls, g, x: Tensor, y: Tensor, name: str = "networkx",
                      split: tuple | None = None, nodes=None) -> NodeDataset:
        """From a networkx graph (undirected edges both ways) with features ``x [N, F]``
        and labels ``y [N]``, row i for node ``nodes[i]`` (default: ``g.nodes`` order);
        ``split`` as three id tensors or masks, else :func:`city_split`.

        Nodes labelled 0 .. N-1 that ``g.nodes`` lists in another order (an edge list read
        by networkx) are refused without ``nodes``: rows indexed by label would silently
        describe other nodes. ``nodes=sorted(g.nodes)`` matches row i to node i;
        ``nodes=list(g.nodes)`` keeps ``g.nodes`` order."""
        order, moved = networkx_node_order(g, nodes)
        if moved is not None:
            raise ValueError(f"{name}: the graph's nodes are the labels 0 .. {len(order) - 1}, "
                             f"but g.nodes lists them in another order (row {moved[0]} would be "
                             f"node {moved[1]!r}). Pass nodes=sorted(g.nodes) if row i of x and "
                             f"y is node i, or nodes=list(g.nodes) if the rows follow g.nodes")
        graph = Graph.from_networkx(g, nodes=order)
        y = class_labels(y, name)
        split = labelled_split(y) if split is None else \
            tuple(split_ids(s, k, graph.num_nodes) for s, k in
                  zip(split, ("train", "val", "test"), strict=True))
        return cls(name, graph, float_features(x), y, *split)

    def __repr__(self) -> str:
        return (f"NodeDataset({self.name!r}, nodes={self.num_nodes}, "
                f"edges={self.graph.num_edges}, features={self.num_features}, "
                f"classes={self.num_classes}, split={self.train_index.numel()}/"
                f"{self.val_index.numel()}/{self.test_index.numel()})")

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` with boolean masks (PyG's convention)."""
        from torch_geometric.data import Data
        return Data(x=self.x, edge_index=self.graph.edge_index, y=self.y, pos=self.pos,
                    edge_attr=self.edge_attr,
                    train_mask=self.train_mask, val_mask=self.val_mask,
                    test_mask=self.test_mask)

    @property
    def num_node_features(self) -> int:
        """PyG's name for :attr:`num_features`."""
        return self.num_features


def check_labels_and_splits(dataset, n: int, unlabelled: bool = False,
                            node: str = "node") -> None:
    """``dataset.y`` holds an integer class label >= 0 for each of the ``n`` nodes (with
    ``unlabelled``, -1 marks a node without one, which no split may hold), and its
    ``train_index``, ``val_index``, ``test_index`` are ids in [0, n). ``node`` names the
    nodes in the messages."""
    y, name = dataset.y, dataset.name
    if not isinstance(y, Tensor) or y.shape != (n,) or y.is_floating_point() or \
            y.dtype == torch.bool:
        raise ValueError(f"{name}: y must be integer class labels of shape [{n}], got "
                         f"{getattr(y, 'dtype', None)} {list(getattr(y, 'shape', []))}")
    if n and int(y.min()) < (-1 if unlabelled else 0):
        raise ValueError(f"{name}: y holds {int(y.min())}; labels are >= 0, or -1 for a node "
                         "without one" if unlabelled else
                         f"{name}: y holds the negative label {int(y.min())}")
    for split in ("train_index", "val_index", "test_index"):
        index = getattr(dataset, split)
        if not isinstance(index, Tensor) or index.dim() != 1 or index.is_floating_point() \
                or index.dtype == torch.bool:
            raise ValueError(f"{name}: {split} must be 1-D integer node ids, got "
                             f"{getattr(index, 'dtype', None)} "
                             f"{list(getattr(index, 'shape', []))}")
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
            bad = int(index.min()) if int(index.min()) < 0 else int(index.max())
            raise ValueError(f"{name}: {split} holds node {bad}, outside [0, {n})")
        refuse_integer_mask(index, f"{name}: {split}", n)
        if unlabelled and (y[index] < 0).any():
            bad = int(index[y[index] < 0][0])
            raise ValueError(f"{name}: {split} holds {node} {bad}, which has no label (-1)")
    _warn_on_shared_split_nodes(dataset, n, node)


def _warn_on_shared_split_nodes(dataset, n: int, node: str) -> None:
    """A node twice in a split (counted twice in its accuracy), or in two splits (a
    validation or test accuracy measured on training nodes), is almost always a mistake
    in building the split: warned, naming the first such node."""
    splits = {s: getattr(dataset, s) for s in ("train_index", "val_index", "test_index")}
    for split, index in splits.items():
        counts = torch.bincount(index, minlength=n) if index.numel() else None
        if counts is not None and counts.max() > 1:
            twice = int(counts.argmax())
            warnings.warn(f"{dataset.name}: {split} holds {node} {twice} more than once, so it "
                          "counts more than once in that split's accuracy", stacklevel=5)
    names = list(splits)
    for a, b in ((0, 1), (0, 2), (1, 2)):
        first, second = splits[names[a]], splits[names[b]]
        if first.numel() and second.numel():
            shared = torch.isin(second, first)
            if shared.any():
                warnings.warn(f"{dataset.name}: {names[a]} and {names[b]} share "
                              f"{int(shared.sum())} {node}s (the first: "
                              f"{int(second[shared][0])}), so {names[b]}'s accuracy is "
                              f"measured on nodes {names[a]} also holds", stacklevel=5)


#: what a NodeDataset keeps of a PyG Data besides x, y and the structure
KEPT_EXTRAS = ("pos", "edge_attr")


def kept_extras(data) -> dict:
    """The Data's ``KEPT_EXTRAS`` (None where absent), as NodeDataset keyword arguments."""
    return {key: getattr(data, key, None) for key in KEPT_EXTRAS}


def warn_of_unread_keys(data, where: str, split_read: bool, stacklevel: int) -> None:
    """Names the attributes of a PyG Data that a NodeDataset leaves out (its edge_weight,
    an incomplete split's masks, ...), as GraphML files and edge lists do: they were
    dropped without a word."""
    read = {"edge_index", "x", "y", "num_nodes", *KEPT_EXTRAS}
    if split_read:
        read |= {"train_mask", "val_mask", "test_mask"}
    unread = sorted(pyg_keys(data) - read)
    if unread:
        warnings.warn(f"{where}: Data attributes {unread} are not read: a dataset takes x, y, "
                      "edge_index, pos, edge_attr and a complete train/val/test_mask split "
                      "from a Data", stacklevel=stacklevel)


def pyg_split(data, num_nodes: int, split: int | None = None
              ) -> tuple[Tensor, Tensor, Tensor] | None:
    """The split a PyG ``Data`` carries in ``train_mask``/``val_mask``/``test_mask``
    (boolean masks or node ids), or None when any of the three is missing. Masks of shape
    ``[N, k]`` hold k splits, one per column (PyG's WikipediaNetwork, WebKB, Actor):
    ``split`` picks one."""
    keys = ("train_mask", "val_mask", "test_mask")
    masks = [getattr(data, k, None) for k in keys]
    if any(m is None for m in masks):
        if split is not None:
            missing = [k for k, m in zip(keys, masks, strict=True) if m is None]
            raise ValueError(f"split={split} picks a column of the Data's masks, but it has "
                             f"no {' / '.join(missing)}")
        return None
    masks = [_split_column(torch.as_tensor(m), k, num_nodes, split)
             for m, k in zip(masks, keys, strict=True)]
    return tuple(split_ids(m, k, num_nodes) for m, k in zip(masks, keys, strict=True))


def _split_column(mask: Tensor, name: str, num_nodes: int, split: int | None) -> Tensor:
    """Column ``split`` of a ``[N, k]`` boolean mask; a 1-D mask (or ids) as it is."""
    several = mask.dtype == torch.bool and mask.dim() == 2 and mask.size(0) == num_nodes
    if split is None:
        if several:
            raise ValueError(f"{name} has shape {list(mask.shape)}: {mask.size(1)} splits, one "
                             f"per column; pick one with split=i (NodeDataset.from_pyg(data, "
                             f"split=i)), i in [0, {mask.size(1)})")
        return mask
    if not several:
        raise ValueError(f"split={split} picks a column of [N, k] masks, but {name} has shape "
                         f"{list(mask.shape)}")
    if isinstance(split, bool) or not isinstance(split, int) or \
            not 0 <= split < mask.size(1):
        raise ValueError(f"split must be an int in [0, {mask.size(1)}) ({name} holds "
                         f"{mask.size(1)} splits), got {split!r}")
    return mask[:, split]


def city_split(num_nodes: int) -> tuple[Tensor, Tensor, Tensor]:
    """City-Networks' split: ``RandomState(0).permutation(N)``, the first ``N // 10`` nodes
    for training, the next ``N // 10`` for validation, the rest for testing."""
    check_int(num_nodes, "city_split: num_nodes", 0)
    perm = torch.from_numpy(np.random.RandomState(0).permutation(num_nodes))
    tenth = num_nodes // 10
    return perm[:tenth], perm[tenth:2 * tenth], perm[2 * tenth:]


def labelled_split(y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`city_split` of the labelled nodes (``y >= 0``; -1 marks a node without a
    label): the default split of a dataset that brings none. With every node labelled it
    is ``city_split(N)`` itself."""
    labelled = (y >= 0).nonzero().flatten()
    if labelled.numel() == y.numel():
        return city_split(y.numel())
    return tuple(labelled[part] for part in city_split(labelled.numel()))


# float32 holds every integer up to 2^24 exactly, and no odd one above it
_FLOAT32_EXACT = 2**24


def float_features(x) -> Tensor:
    """Features as the layers take them: integer or boolean ones (counts, one-hot) as
    float32, sparse ones dense. Complex features are left for NodeDataset to refuse: cast,
    they lost their imaginary part with only torch's warning. Integers beyond 2^24 in
    magnitude (timestamps, ids) are rounded by the cast: a warning names the largest."""
    x = torch.as_tensor(x)
    if x.layout != torch.strided:
        x = x.to_dense()
    if x.is_floating_point() or x.is_complex():
        return x
    if x.dtype != torch.bool and x.numel():
        largest = max(int(x.max()), -int(x.min()))  # abs() overflows at the dtype's min
        if largest > _FLOAT32_EXACT:
            warnings.warn(f"integer features as large as {largest:,} are not exact in float32 "
                          f"(exact up to 2^24 = {_FLOAT32_EXACT:,}): the cast rounds them "
                          f"(to a multiple of {2 ** max(0, largest.bit_length() - 24):,} "
                          "there); scale or shift them first if their low digits matter",
                          stacklevel=3)  # from_pyg's or load_graph_file's caller
    return x.float()


def float32_features(x: Tensor) -> Tensor:
    """Features in the layers' float32: float64 ones (NumPy's default) failed in ``train``
    and ``influence`` against the float32 models. Float32 features come back as they are."""
    return x.float() if x.is_floating_point() and x.dtype != torch.float32 else x


def class_labels(y, name: str) -> Tensor:
    """Labels as int64, flattened from ``[N]`` or ``[N, 1]``, or the classes of one-hot
    rows ``[N, C]`` (``one_hot_classes``). Other columns (multi-label or multi-task
    targets, as ogbn-proteins') are refused with their shape: flattened, they were reported
    as one column of N * k labels."""
    y = torch.as_tensor(y)
    if y.dim() > 1 and math.prod(y.shape[1:]) != 1:
        classes = one_hot_classes(y)
        if classes is None:
            raise ValueError(f"{name}: y has shape {list(y.shape)}, several labels per node "
                             f"(multi-label or multi-task targets); graphloc's datasets hold "
                             f"one class label per node ([N] or [N, 1], or one-hot rows)")
        return classes
    return whole_numbers(y.reshape(-1), f"{name}: y")


def one_hot_classes(y: Tensor) -> Tensor | None:
    """The classes of one-hot rows ``[N, C]`` (Kipf's Planetoid arrays, a Keras pipeline's
    targets): the column of each row's one 1, -1 where a row is all 0 (no label); None
    where ``y`` is not one-hot (several 1s in a row, or other values)."""
    flat = y.reshape(y.size(0), -1)
    if flat.is_complex() or not bool(((flat == 0) | (flat == 1)).all()) or \
            bool((flat.sum(1) > 1).any()):
        return None
    classes = flat.to(torch.float64).argmax(1) if flat.numel() else \
        torch.zeros(flat.size(0), dtype=torch.long)
    return torch.where(flat.sum(1) > 0, classes, torch.full_like(classes, -1))


def split_ids(split: Tensor, name: str, num_nodes: int) -> Tensor:
    """Node ids from a boolean mask of ``num_nodes`` or from ids."""
    split = torch.as_tensor(split)
    if split.dtype == torch.bool:
        if split.numel() != num_nodes:
            raise ValueError(f"{name} has {split.numel()} entries but the graph has "
                             f"{num_nodes} nodes")
        return split.nonzero().flatten()
    refuse_integer_mask(split.reshape(-1), name, num_nodes, masks_accepted=True)
    return whole_numbers(split, name).view(-1)


def as_node_dataset(data) -> NodeDataset:
    """What ``fit`` trains on: a NodeDataset as it is, a PyG ``Data`` (its masks), or a
    tuple ``(x, graph_or_edge_index, y)`` with an optional fourth item ``(train, val,
    test)`` (ids or masks; else :func:`city_split`)."""
    if isinstance(data, NodeDataset):
        return data
    if isinstance(data, tuple) and len(data) in (3, 4):
        x, structure, y = data[:3]
        graph = structure if isinstance(structure, Graph) else Graph(structure, x.size(0))
        y = class_labels(y, "data")
        split = labelled_split(y) if len(data) == 3 else tuple(
            split_ids(s, k, graph.num_nodes) for s, k in
            zip(data[3], ("train", "val", "test"), strict=True))
        return NodeDataset("data", graph, float_features(x), y, *split)
    if hasattr(data, "edge_index") and hasattr(data, "x"):
        return NodeDataset.from_pyg(data)
    raise TypeError(f"fit trains on a NodeDataset, a PyG Data or (x, edge_index, y[, split]), "
                    f"got {type(data).__name__}")


def has_reverse(graph: Graph) -> Tensor:
    """Per edge u -> v, whether the graph also holds v -> u (a loop is its own)."""
    src, dst = graph.edge_index
    n = graph.num_nodes
    return torch.isin(dst * n + src, src * n + dst)


def with_missing_reverses(graph: Graph, edge_attr: Tensor | None = None,
                          among: Tensor | None = None) -> tuple[Graph, Tensor | None]:
    """``graph`` plus v -> u for each edge u -> v without it (once per such edge, so a pair
    written twice one way gets two reverses, as the undirected multigraph it stands for),
    or for those of its edges that ``among`` [E] (bool) marks; ``edge_attr`` gives each
    added edge the attributes of the one it reverses."""
    missing = ~has_reverse(graph) if among is None else ~has_reverse(graph) & among
    graph = Graph(torch.cat([graph.edge_index, graph.edge_index[:, missing].flip(0)], dim=1),
                  num_nodes=graph.num_nodes)
    return graph, None if edge_attr is None else torch.cat([edge_attr, edge_attr[missing]])
