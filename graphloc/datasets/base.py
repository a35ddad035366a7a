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
