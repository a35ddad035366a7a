"""The in-memory node-classification dataset every loader returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from graphloc.graph import Graph


@dataclass
class NodeDataset:
    """A graph with node features, labels and a train/val/test split.

    Splits are node-id tensors (``train_index``...) and, as properties, boolean masks
    (``train_mask``...): the City-Networks release stores ids in files named ``*_mask.pt``.
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

    def __post_init__(self):
        """Every tensor agrees with the graph: a mismatch is an error naming the field,
        not a wrong row read later."""
        if not isinstance(self.graph, Graph):
            raise TypeError(f"graph must be a graphloc.Graph, got {type(self.graph).__name__}")
        n = self.graph.num_nodes
        if not isinstance(self.x, Tensor) or self.x.dim() != 2 or self.x.size(0) != n:
            raise ValueError(f"{self.name}: x must be [{n}, F] (a row per node), got "
                             f"{list(getattr(self.x, 'shape', []))}")
        if not isinstance(self.y, Tensor) or self.y.shape != (n,) or \
                self.y.is_floating_point() or self.y.dtype == torch.bool:
            raise ValueError(f"{self.name}: y must be integer class labels of shape [{n}], "
                             f"got {getattr(self.y, 'dtype', None)} "
                             f"{list(getattr(self.y, 'shape', []))}")
        if n and int(self.y.min()) < 0:
            raise ValueError(f"{self.name}: y holds the negative label {int(self.y.min())}")
        for split in ("train_index", "val_index", "test_index"):
            index = getattr(self, split)
            if not isinstance(index, Tensor) or index.dim() != 1 or index.is_floating_point() \
                    or index.dtype == torch.bool:
                raise ValueError(f"{self.name}: {split} must be 1-D integer node ids, got "
                                 f"{getattr(index, 'dtype', None)} "
                                 f"{list(getattr(index, 'shape', []))}")
            if index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
                bad = int(index.min()) if int(index.min()) < 0 else int(index.max())
                raise ValueError(f"{self.name}: {split} holds node {bad}, outside [0, {n})")

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

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` with boolean masks (PyG's convention)."""
        from torch_geometric.data import Data
        return Data(x=self.x, edge_index=self.graph.edge_index, y=self.y, pos=self.pos,
                    edge_attr=self.edge_attr,
                    train_mask=self.train_mask, val_mask=self.val_mask,
                    test_mask=self.test_mask)


def city_split(num_nodes: int) -> tuple[Tensor, Tensor, Tensor]:
    """City-Networks' split: ``RandomState(0).permutation(N)``, the first ``N // 10`` nodes
    for training, the next ``N // 10`` for validation, the rest for testing."""
    perm = torch.from_numpy(np.random.RandomState(0).permutation(num_nodes))
    tenth = num_nodes // 10
    return perm[:tenth], perm[tenth:2 * tenth], perm[2 * tenth:]
