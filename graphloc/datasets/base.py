"""The in-memory node-classification dataset every loader returns."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
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


def load_file(path: str, what: str, weights_only: bool = True):
    """``torch.load`` of a file graphloc wrote, with clear errors: FileNotFoundError when it
    is missing, ValueError when it is not a readable torch file (truncated, corrupt)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no {what} at {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as err:  # torch raises several types for damaged archives
        raise ValueError(f"{path} is not a readable {what} ({type(err).__name__}: {err}): "
                         "truncated or corrupt?") from err


def atomic_save(obj, path: str) -> None:
    """``torch.save`` that never leaves a half-written file at ``path``."""
    with atomic_file(path) as tmp:
        torch.save(obj, tmp)


@contextmanager
def atomic_file(path: str, suffix: str = ".tmp"):
    """Yields a temporary path in ``path``'s folder, renamed to ``path`` (with a new file's
    usual permissions) when the block succeeds and removed when it raises: a crash never
    leaves a half-written file at ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=suffix)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide it from other users
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
