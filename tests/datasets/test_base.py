"""NodeDataset: every tensor must agree with the graph, or the field is named."""

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
    ({"y": torch.tensor([0, -1, 0])}, "y holds the negative label -1"),
    ({"train_index": torch.tensor([5])}, r"train_index holds node 5, outside \[0, 3\)"),
    ({"val_index": torch.tensor([-1])}, "val_index holds node -1"),
    ({"test_index": torch.tensor([[2]])}, "test_index must be 1-D integer node ids"),
    ({"test_index": torch.tensor([True, False, True])}, "test_index must be 1-D integer"),
    ({"graph": torch.tensor([[0], [1]])}, "graph must be a graphloc.Graph"),
])
def test_inconsistent_fields_are_named(change, message):
    _dataset()  # the consistent one builds
    with pytest.raises((ValueError, TypeError), match=message):
        _dataset(**change)
