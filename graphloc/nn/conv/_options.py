"""PyG's ``MessagePassing`` options in a graphloc conv's constructor.

A PyG conv passes its ``**kwargs`` to ``MessagePassing``: ``aggr``, ``flow``, ``node_dim``
and ``decomposed_layers`` (``GCNConv(16, 32, aggr="add")``). A graphloc conv whose
constructor does not name one of them failed on it with Python's "unexpected keyword
argument", so code that passed PyG's own default broke when only its import changed, and a
value that changes the computation was refused without saying why. Each such conv now
takes the value that computes what it computes, and refuses any other by name:

- ``aggr``: the aggregation of PyG's twin (``pyg_aggr``, a class attribute; "add" and "sum"
  are one, as everywhere in graphloc's reductions). Another aggregation is PyG's conv, not this one.
- ``flow``: "source_to_target" (a conv that takes "target_to_source" names ``flow``).
- ``node_dim``: the axis of x that holds the nodes, kept as the conv's ``node_dim``
  attribute, which every conv reads at each call (as after ``from_pyg``): -2 by default,
  0 for a static batch given as ``[N, B, F]``.
- ``decomposed_layers``: any count >= 1, with no effect. PyG runs its propagation in that
  many feature slices to cap the memory of its per-edge messages: the same values for a
  conv whose messages are linear per channel (GCNConv), an error or other values for the
  rest (AGNNConv's cosines over slices). graphloc's fused kernels hold no per-edge messages
  to slice: every count gives the unsliced conv.
"""

from __future__ import annotations

import functools
import inspect

from graphloc.checks import check_int
from graphloc.ops import canonical_reduce

OPTIONS = ("aggr", "flow", "node_dim", "decomposed_layers")


def take_message_passing_options(cls) -> None:
    """Wraps ``cls.__init__`` (its own, where it has one that neither names an option nor
    takes ``**kwargs``) so that it checks and drops the options it does not name."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return
    parameters = inspect.signature(init).parameters
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return  # passes them on to a constructor that names or checks them
    unnamed = tuple(name for name in OPTIONS if name not in parameters)
    if not unnamed:
        return

    @functools.wraps(init)
    def checked_init(self, *args, **kwargs):
        options = {name: kwargs.pop(name) for name in unnamed if name in kwargs}
        for name, value in options.items():
            _check_option(cls, name, value)
        init(self, *args, **kwargs)
        if "node_dim" in options:
            self.node_dim = options["node_dim"]

    cls.__init__ = checked_init


def _check_option(cls, name: str, value) -> None:
    owner = cls.__name__
    if name == "decomposed_layers":
        check_int(value, f"{owner}: decomposed_layers", 1)
    elif name == "node_dim" and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{owner}: node_dim must be an integer axis of x, got {value!r}")
    elif name == "flow" and value != "source_to_target":
        raise ValueError(f"{owner}: flow={value!r}: graphloc's {owner} passes messages from "
                         f"edge_index[0] to edge_index[1] only (flow='source_to_target')")
    elif name == "aggr" and cls.pyg_aggr is None:
        raise ValueError(f"{owner}: aggr={value!r}: {owner} takes no aggr")
    elif name == "aggr" and not _same_aggregation(value, cls.pyg_aggr):
        raise ValueError(f"{owner}: aggr={value!r}: graphloc's {owner} aggregates its "
                         f"messages by {cls.pyg_aggr!r}, as PyG's does by default. For another "
                         f"aggregation keep PyG's {owner} (graphloc.nn.from_pyg keeps a "
                         f"converted one as PyG's)")


def _same_aggregation(value, own: str) -> bool:
    """Whether ``value`` names ``own`` (the reductions' aliases: "add" is "sum")."""
    try:
        return canonical_reduce(value) == canonical_reduce(own)
    except ValueError:  # not a reduction's name (None, "softmax", a module)
        return False
