"""PyG's fx transforms (``to_hetero``, ``to_hetero_with_bases``, ``to_fixed_size``) for
models built of graphloc's convs and aggregations.

PyG's ``torch_geometric.nn.to_hetero`` traces a model and copies each of its convs per edge
type, calling a copy ``conv((x_src, x_dst), edge_index)`` and aggregating the results per
destination type. A conv is one for it when it is an instance of PyG's ``MessagePassing``,
which graphloc's convs are not: it took them for node-level layers, copied them per node
type and called each on one type's features with another relation's edges, which fails
("edge_index[0] holds 29 at column 1 but the graph has 20 nodes"). This ``to_hetero`` runs
PyG's with graphloc's convs counted as message passing too; everything else is PyG's.

PyG's ``to_hetero_with_bases`` failed on them the same way. Its version here also counts
them as message passing and wraps each in graphloc's ``HeteroBasisConv``
(``nn.conv.hetero_basis``).

PyG's transforms find a model's global pooling with ``isinstance(module, Aggregation)``,
PyG's class: ``to_fixed_size`` left graphloc's aggregations unfixed without a word (one
graph's batch pooled to one row, not ``batch_size``), and ``to_hetero`` pooled them per
node type without summing the types. Here graphloc's aggregations count as global pooling
in all three.
"""

from __future__ import annotations

import contextlib
import inspect

import torch

from graphloc.checks import check_choice, check_int
from graphloc.nn.aggr import Aggregation
from graphloc.nn.conv.hetero_basis import HeteroBasisConv


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
    _check_arguments("to_hetero", module, metadata)
    check_choice("to_hetero", "aggr", aggr, _AGGREGATIONS)
    import torch_geometric.nn.fx as fx
    from torch_geometric.nn import to_hetero as pyg_to_hetero
    with _graphloc_modules_known(fx):
        return pyg_to_hetero(module, metadata, aggr, input_map, debug)


def to_fixed_size(module: torch.nn.Module, batch_size: int, debug: bool = False):
    """PyG's ``to_fixed_size(module, batch_size, debug)``: every global pooling of the
    model, graphloc's aggregations included, called with ``dim_size=batch_size``, so a
    batch of fewer graphs still gives ``batch_size`` rows (for static shapes)."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"to_fixed_size: module must be a torch.nn.Module, got "
                        f"{type(module).__name__}")
    check_int(batch_size, "to_fixed_size: batch_size", 1)
    import torch_geometric.nn.fx as fx
    from torch_geometric.nn.to_fixed_size_transformer import to_fixed_size as pyg_to_fixed
    with _graphloc_modules_known(fx):
        return pyg_to_fixed(module, batch_size, debug)


def to_hetero_with_bases(module: torch.nn.Module, metadata, num_bases: int,
                         in_channels: dict[str, int] | None = None, input_map=None,
                         debug: bool = False):
    """PyG's ``to_hetero_with_bases(module, metadata, num_bases, in_channels, input_map,
    debug)`` (R-GCN's basis decomposition), with the convs of ``graphloc.nn`` (and the
    user's subclasses of them) treated as PyG's own: the heterogeneous graph becomes one
    typed graph, and each conv becomes ``num_bases`` copies whose messages along an edge of
    type ``r`` the copy ``b`` multiplies by a trainable ``a[r, b]`` (its
    ``edge_type_weight``); the copies' outputs are summed (``HeteroBasisConv``).

    The convs that take this are those that apply an explainer's edge mask (README,
    "Explaining a model with PyG's explainers"); any other is refused by name, and so is a
    conv that adds self-loops (their messages have no edge type), as PyG refuses it.
    Beyond PyG's: messages with heads (``[E, H, C]``: GAT, GATv2, Transformer...) are
    weighed per edge, where PyG's hook reads the heads as edges and fails, and with
    ``num_bases=1`` the weights are initialised (PyG leaves them as ``torch.empty``).

    Example::

        from graphloc.nn import SAGEConv, to_hetero_with_bases
        model = to_hetero_with_bases(Net(), data.metadata(), num_bases=3,
                                     in_channels={"x": 16})
        out = model(data.x_dict, data.edge_index_dict)
    """
    _check_arguments("to_hetero_with_bases", module, metadata)
    check_int(num_bases, "num_bases", 1)
    _check_in_channels(module, in_channels)
    import torch_geometric.nn.fx as fx
    from torch_geometric.nn.to_hetero_with_bases_transformer import (
        ToHeteroWithBasesTransformer,
    )

    class Transformer(ToHeteroWithBasesTransformer):
        def init_submodule(self, module: torch.nn.Module, target: str) -> torch.nn.Module:
            if is_graphloc_conv(module):
                return HeteroBasisConv(module, len(self.metadata[1]), self.num_bases)
            return super().init_submodule(module, target)

    with _graphloc_modules_known(fx):
        return Transformer(module, metadata, num_bases, in_channels, input_map,
                           debug).transform()


def _check_in_channels(module: torch.nn.Module, in_channels) -> None:
    """PyG aligns the inputs named in ``in_channels`` and ignores any other name: a typo
    would leave an input unaligned without a word."""
    if in_channels is None:
        return
    if not isinstance(in_channels, dict):
        raise TypeError(f"to_hetero_with_bases: in_channels must be a dict of forward "
                        f"argument name -> width, got {type(in_channels).__name__}")
    arguments = list(inspect.signature(module.forward).parameters)
    for name, width in in_channels.items():
        if name not in arguments:
            raise ValueError(f"to_hetero_with_bases: in_channels names {name!r}, which is "
                             f"not an argument of {type(module).__name__}.forward "
                             f"{arguments}")
        check_int(width, f"in_channels[{name!r}]", 1)


_AGGREGATIONS = ("sum", "mean", "min", "max", "mul")  # PyG's to_hetero's


def _check_arguments(caller: str, module, metadata) -> None:
    """What PyG's transforms assert without a message, named."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"{caller}: module must be a torch.nn.Module, got "
                        f"{type(module).__name__}")
    shaped = isinstance(metadata, (tuple, list)) and len(metadata) == 2 and \
        all(isinstance(part, (tuple, list)) and part for part in metadata)
    relations = shaped and all(isinstance(r, (tuple, list)) and len(r) == 3
                               for r in metadata[1])
    if not relations:
        raise ValueError(f"{caller}: metadata must be (node types, edge types), both "
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
def _graphloc_modules_known(fx):
    """PyG's tracer decides what is message passing and what is global pooling with
    ``fx.is_message_passing_op`` and ``fx.is_global_pooling_op`` (read from the module's
    globals while a transform runs): for the transform, they also say so of graphloc's
    convs and aggregations."""
    passes_messages, pools = fx.is_message_passing_op, fx.is_global_pooling_op

    def is_message_passing_op(module, op: str, target: str) -> bool:
        return passes_messages(module, op, target) or (
            op == "call_module" and is_graphloc_conv(fx.get_submodule(module, target)))

    def is_global_pooling_op(module, op: str, target: str) -> bool:
        return pools(module, op, target) or (
            op == "call_module" and isinstance(fx.get_submodule(module, target), Aggregation))

    fx.is_message_passing_op, fx.is_global_pooling_op = is_message_passing_op, \
        is_global_pooling_op
    try:
        yield
    finally:
        fx.is_message_passing_op, fx.is_global_pooling_op = passes_messages, pools
