"""What graphloc's tools may ask of a model, declared once.

``graphloc.influence`` and ``graphloc.train`` choose how to run a model from four
capabilities. graphloc's models inherit :class:`ModelCapabilities` and override what they
have; any other ``torch.nn.Module`` (a user's model, a PyG model) may set the same
attributes, and :func:`capabilities_of` reads them with the defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass


class ModelCapabilities:
    """Class attributes (or properties) a model sets to tell graphloc how it reads a graph.

    Attributes:
        graphloc_hops (int or None): how many hops a node's output reaches (an L-local
            message-passing model has L); None when unknown or unbounded. Lets influence's
            ``method="full_graph"`` run exact whole-graph Jacobians.
        graphloc_global (bool): outputs read the whole graph (global attention, virtual
            edges to far nodes): influence measures one seed at a time.
        prunes_layers (bool): the model has ``forward_within(x, graph, ball_sizes)``,
            which runs layer ``l`` only on the nodes that the output still reads; influence
            then skips the rest (same numbers).
        node_batched (bool): the model scores nodes given ``index=`` from inputs of the
            whole graph (LargeGT's fixed token samples) and has ``reads(graph, nodes)``,
            the nodes each output depends on; training feeds it mini-batches of nodes.
    """

    graphloc_hops: int | None = None
    graphloc_global: bool = False
    prunes_layers: bool = False
    node_batched: bool = False


@dataclass(frozen=True)
class Capabilities:
    """The four capabilities of one model, as :func:`capabilities_of` read them."""

    graphloc_hops: int | None
    graphloc_global: bool
    prunes_layers: bool
    node_batched: bool


def capabilities_of(model) -> Capabilities:
    """The capabilities ``model`` declares (the defaults of :class:`ModelCapabilities` for
    any it does not)."""
    return Capabilities(**{name: getattr(model, name, getattr(ModelCapabilities, name))
                           for name in Capabilities.__dataclass_fields__})
