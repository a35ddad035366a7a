"""PyG's ``to_hetero`` for models built of graphloc's convs.

PyG's ``torch_geometric.nn.to_hetero`` traces a model and copies each of its convs per edge
type, calling a copy ``conv((x_src, x_dst), edge_index)`` and aggregating the results per
destination type. A conv is one for it when it is an instance of PyG's ``MessagePassing``,
which graphloc's convs are not: it took them for node-level layers, copied them per node
type and called each on one type's features with another relation's edges, which fails
("edge_index[0] holds 29 at column 1 but the graph has 20 nodes"). This ``to_hetero`` runs
PyG's with graphloc's convs counted as message passing too; everything else is PyG's.
"""

from __future__ import annotations

import contextlib

import torch

from graphloc.checks import check_choice


def to_hetero(module: torch.nn.Module, metadata, aggr: str = "sum", input_map=None,
              debug: bool = False):
    """PyG's ``to_hetero(module, metadata, aggr, input_map, debug)``, with the convs of
    ``graphloc.nn`` (and the user's subclasses of them) treated as PyG's own: one copy per
    edge type, called on the relation's source and destination features.

    Example::

        from graphloc.nn import SAGEConv, to_hetero
        model = to_hetero(Net(), data.metadata(), aggr="sum")  # Net of graphloc convs
        out = model(data.x_dict, data.edge_index_dict)
    """
    _check_arguments(module, metadata, aggr)
    import torch_geometric.nn.fx as fx
    from torch_geometric.nn import to_hetero as pyg_to_hetero
    with _graphloc_convs_pass_messages(fx):
        return pyg_to_hetero(module, metadata, aggr, input_map, debug)


_AGGREGATIONS = ("sum", "mean", "min", "max", "mul")  # PyG's to_hetero's


def _check_arguments(module, metadata, aggr) -> None:
    """What PyG's transform asserts without a message, named."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"to_hetero: module must be a torch.nn.Module, got "
                        f"{type(module).__name__}")
    check_choice("to_hetero", "aggr", aggr, _AGGREGATIONS)
    shaped = isinstance(metadata, (tuple, list)) and len(metadata) == 2 and \
        all(isinstance(part, (tuple, list)) and part for part in metadata)
    relations = shaped and all(isinstance(r, (tuple, list)) and len(r) == 3
                               for r in metadata[1])
    if not relations:
        raise ValueError(f"to_hetero: metadata must be (node types, edge types), both "
                         f"non-empty, each edge type a (source, relation, destination) "
                         f"triple, as HeteroData.metadata() gives, got {metadata!r}")


def is_graphloc_conv(module: torch.nn.Module) -> bool:
    """Whether ``module`` is (a subclass of) a graphloc conv whose PyG namesake is a
    ``MessagePassing`` layer."""
    from torch_geometric import nn as pyg_nn
    for cls in type(module).__mro__:
        if cls.__module__.startswith("graphloc.nn.conv."):
            twin = getattr(pyg_nn, cls.__name__, None)
            if isinstance(twin, type) and issubclass(twin, pyg_nn.MessagePassing):
                return True
    return False


@contextlib.contextmanager
def _graphloc_convs_pass_messages(fx):
    """PyG's tracer decides what is message passing with ``fx.is_message_passing_op``
    (read from the module's globals while the transform runs): for the transform, it also
    says so of graphloc's convs."""
    original = fx.is_message_passing_op

    def is_message_passing_op(module, op: str, target: str) -> bool:
        return original(module, op, target) or (
            op == "call_module" and is_graphloc_conv(fx.get_submodule(module, target)))

    fx.is_message_passing_op = is_message_passing_op
    try:
        yield
    finally:
        fx.is_message_passing_op = original
