"""PyG's ``summary`` for models built of graphloc's convs.

PyG's ``torch_geometric.nn.summary`` lists a model's modules and stops at its
message-passing layers (``leaf_module``, by default PyG's ``MessagePassing``). graphloc's
convs are not PyG subclasses, so it went on into their insides (maps, aggregation, the
explain port) and its table differed from the one for the same model of PyG's convs. This
``summary`` takes graphloc's convs as leaves too; everything else is PyG's.
"""

from __future__ import annotations

import torch

from graphloc.nn.conv._base import conv_classes


def summary(model: torch.nn.Module, *args, max_depth: int = 3,
            leaf_module="MessagePassing", **kwargs) -> str:
    """PyG's ``summary(model, *args, max_depth, leaf_module, **kwargs)``; with the default
    ``leaf_module``, graphloc's convs (and the user's subclasses of them) are leaves as
    PyG's ``MessagePassing`` layers are. A whole model that is one message-passing layer
    for PyG's explainers (``DAGNN``) is listed with its insides."""
    from torch_geometric.nn import MessagePassing
    from torch_geometric.nn import summary as pyg_summary
    if isinstance(leaf_module, str) and leaf_module == "MessagePassing":
        leaf_module = (MessagePassing, *conv_classes())
    return pyg_summary(model, *args, max_depth=max_depth, leaf_module=leaf_module, **kwargs)
