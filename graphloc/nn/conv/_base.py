"""The base of graphloc's convs, and the port through which PyG's explainers reach them.

PyG's explainers (``GNNExplainer``, ``PGExplainer``, ``CaptumExplainer``,
``AttentionExplainer``, ``GraphMaskExplainer``), ``get_num_hops`` and ``get_embeddings``
find a model's graph layers with ``isinstance(module, MessagePassing)``. graphloc's convs
do not derive from PyG (an optional dependency), so a model built with them was explained
as if they were not there: ``get_num_hops`` counted none of them, an edge mask reached only
the PyG layers of a mixed model (an explanation of part of the model, given without a word),
and ``PGExplainer`` read the last PyG layer's embeddings as the model's.

Where PyG is installed, each conv therefore carries an ``explain_port``: an empty
``MessagePassing`` child on which those tools set their edge mask and register their
hooks. Every conv relays its output to the port's forward hooks (a hook of its own, put on
when the port gets its first one: ``get_embeddings``, PyG's ``summary``). A conv that
applies the mask (``explainable = True``) reads it from the port, and an attention conv
gives its weights to the port's message hooks (``AttentionExplainer``); any other conv
refuses an explainer's mask and message hooks by name, so no layer is left out quietly. As
in PyG, ``conv.explain = False`` leaves a conv out of an explanation on purpose.

The same path carries ``to_hetero_with_bases``'s edge-type weights (``message_weights``):
PyG multiplies each message by its edge's weight in a message hook, where the explain mode
multiplies it by its mask entry, so a conv that applies masks applies those weights too.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from contextvars import ContextVar
from functools import cache

import torch
from torch import Tensor

from graphloc.nn.conv._inputs import ConvInputs
from graphloc.nn.conv._options import take_message_passing_options
from graphloc.nn.conv._steps import add_step_hook_refusals, build_replaced_steps_on_pyg


def _fx_leaf_call(module: torch.nn.Module, args: tuple, kwargs: dict):
    """Under torch.fx tracing, a conv called on traced values becomes one ``call_module``
    node, as PyG's tracers keep a ``MessagePassing``: traced into, its checks met fx's
    proxies and refused them ("expects node features x as a tensor, got Proxy"), so a
    model of graphloc's convs could not be traced (PyG's ``test_sequential_tracable``).
    None where nothing is traced, or the conv is no submodule of the traced root."""
    fx = sys.modules.get("torch.fx")
    if fx is None:
        return None
    proxy = next((a for a in (*args, *kwargs.values())
                  if isinstance(a, fx.Proxy) or (isinstance(a, (tuple, list)) and
                                                 any(isinstance(b, fx.Proxy) for b in a))),
                 None)
    if proxy is None:
        return None
    if not isinstance(proxy, fx.Proxy):
        proxy = next(b for b in proxy if isinstance(b, fx.Proxy))
    tracer = proxy.tracer
    try:
        path = tracer.path_of_module(module)
    except NameError:
        return None
    return tracer.create_proxy("call_module", path, args, kwargs)


class ConvModule(torch.nn.Module):
    """A graphloc conv: a ``torch.nn.Module`` that PyG's explainers and hop counts see as
    one message-passing layer (through its ``explain_port``, where PyG is installed).

    ``explainable`` (class attribute): the conv's forward multiplies each message by an
    explainer's edge mask (``explain_mask``)."""

    explainable: bool = False
    #: the aggregation PyG's twin names in ``aggr`` (None: no ``aggr``), taken where this
    #: conv's constructor does not name ``aggr`` (``_options``)
    pyg_aggr: str | None = "add"

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if not build_replaced_steps_on_pyg(cls):  # (else it is PyG's conv, with PyG's options)
            take_message_passing_options(cls)

    def __init__(self) -> None:
        super().__init__()
        port_class = _port_class()
        if port_class is not None:
            self.explain_port = port_class(type(self).__name__, type(self).explainable)
            self.explain_port.owner_ref = weakref.ref(self)

    def __call__(self, *args, **kwargs):
        traced = _fx_leaf_call(self, args, kwargs)
        return traced if traced is not None else super().__call__(*args, **kwargs)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        port = self._modules.get("explain_port")
        if port is not None:  # a copy's or an unpickled conv's port relays to it
            port.owner_ref = weakref.ref(self)

    @property
    def explain(self) -> bool | None:
        """PyG's ``MessagePassing.explain``: True while an explainer's mask is set, False
        to leave the conv out of explanations, None otherwise."""
        port = self._modules.get("explain_port")
        return None if port is None else port.explain

    @explain.setter
    def explain(self, value: bool | None) -> None:
        port = self._modules.get("explain_port")
        if port is None:
            raise ValueError(f"{type(self).__name__}.explain: explanations need PyG "
                             "(torch_geometric) installed when the conv is built")
        if value is True and "explain_message" in self.__dict__:
            refuse_replaced_message(type(self).__name__)
        port.explain = value

    # PyG's names for what an explainer set (read by code written against MessagePassing)
    @property
    def _edge_mask(self) -> Tensor | None:
        port = self._modules.get("explain_port")
        return None if port is None else port._edge_mask

    @property
    def _loop_mask(self) -> Tensor | None:
        port = self._modules.get("explain_port")
        return None if port is None else port._loop_mask

    @property
    def _apply_sigmoid(self) -> bool:
        port = self._modules.get("explain_port")
        return True if port is None else port._apply_sigmoid


add_step_hook_refusals(ConvModule)


def refuse_replaced_message(owner: str) -> None:
    raise ValueError(f"{owner} does not run a replaced explain_message (GraphMaskExplainer's, "
                     "or one set on the layer): graphloc's convs form no per-edge messages")


@cache
def _port_class():
    """The port's class, defined once PyG is importable (None where it is not)."""
    try:
        from torch_geometric.nn import MessagePassing
    except ImportError:
        return None

    class ExplainPort(MessagePassing):
        """Where PyG's explainers set their edge mask and hooks on a graphloc conv (its
        ``explain_port``); the conv reads them. Called only by the conv's relay, to run
        the forward hooks on the conv's output."""

        def __init__(self, owner: str, explainable: bool) -> None:
            super().__init__()
            self.owner, self.explainable = owner, explainable
            self.owner_ref = None  # the conv, weakly (set by it)
            self.message_weight = None  # one factor per edge, set by ``message_weights``

        def __getstate__(self) -> dict:
            state = dict(self.__dict__)
            state["owner_ref"] = None  # a weak reference does not pickle; the conv resets it
            return state

        def forward(self, out: Tensor) -> Tensor:
            return out

        def _owner(self) -> torch.nn.Module | None:
            return None if self.owner_ref is None else self.owner_ref()

        # the conv's edge direction (PyG's explainers read the first layer's to find a
        # node's k-hop neighbourhood); MessagePassing's own before the conv is known
        @property
        def flow(self) -> str:
            return getattr(self._owner(), "flow", self._flow)

        @flow.setter
        def flow(self, value: str) -> None:
            self._flow = value

        def _refuse_unless_explainable(self, what: str) -> None:
            if not self.explainable:
                raise ValueError(
                    f"{self.owner} does not take part in PyG's explanations ({what}): "
                    f"graphloc applies an explainer's edge mask in {explainable_convs()}. "
                    "Set the layer's explain = False to explain the model without it")

        def _set_explain(self, value: bool | None) -> None:
            if value is True:
                self._refuse_unless_explainable("an edge mask")
                if "explain_message" in self.__dict__:
                    refuse_replaced_message(self.owner)
            MessagePassing.explain.fset(self, value)

        explain = property(MessagePassing.explain.fget, _set_explain)

        def register_forward_hook(self, hook, *args, **kwargs):
            self._relay_from_owner()
            return super().register_forward_hook(hook, *args, **kwargs)

        def register_forward_pre_hook(self, hook, *args, **kwargs):
            self._relay_from_owner()
            return super().register_forward_pre_hook(hook, *args, **kwargs)

        def _relay_from_owner(self) -> None:
            owner = self._owner()
            if owner is not None and _relay_output not in owner._forward_hooks.values():
                owner.register_forward_hook(_relay_output)

        def register_message_forward_hook(self, hook):
            self._refuse_unless_explainable("a message hook, as AttentionExplainer sets")
            return super().register_message_forward_hook(hook)

        def __repr__(self) -> str:
            return f"{type(self).__name__}({self.owner})"

    # importable by name, so that models with ports pickle
    ExplainPort.__qualname__, ExplainPort.__module__ = "ExplainPort", __name__
    globals()["ExplainPort"] = ExplainPort
    return ExplainPort


def __getattr__(name: str):
    if name == "ExplainPort" and _port_class() is not None:  # unpickling, before any conv
        return _port_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def add_hop_ports(model: torch.nn.Module) -> None:
    """Ports that only count (``model.explain_hops``), for a model whose message-passing
    modules are fewer than its hops (``graphloc_hops``: a conv called several times, a
    K-step propagation, a K-hop conv). PyG's ``get_num_hops`` counts those modules, and
    PGExplainer and AttentionExplainer cut a node's explanation to that many hops: the
    farther edges were dropped without a word. The ports are never called and hold
    nothing; they take the flow (as it is now) and explainability of the model's first
    conv with a port, whose own port takes the mask. Call it last in ``__init__``, after
    the model's convs; a model that needs none gets none."""
    port_class, hops = _port_class(), getattr(model, "graphloc_hops", None)
    anchor = next((m for m in model.modules() if "explain_port" in m._modules), None)
    if port_class is None or hops is None or anchor is None:
        return
    from torch_geometric.nn import MessagePassing
    missing = hops - sum(isinstance(module, MessagePassing) for module in model.modules())
    if missing <= 0:
        return
    model.explain_hops = torch.nn.ModuleList()
    for _ in range(missing):
        port = port_class(f"{type(anchor).__name__} (hop count)", type(anchor).explainable)
        port.flow = getattr(anchor, "flow", "source_to_target")
        model.explain_hops.append(port)


def conv_classes() -> list[type]:
    """graphloc's conv classes: the subclasses of ``ConvModule`` defined in
    ``graphloc.nn.conv`` (a user's subclass of one is an instance of it too)."""
    found, todo = [], list(ConvModule.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("graphloc.nn.conv."):
            found.append(cls)
    return found


def explainable_convs() -> str:
    """The names of graphloc's convs that apply an explainer's edge mask."""
    return ", ".join(sorted({cls.__name__ for cls in conv_classes()
                             if cls.explainable and not cls.__name__.startswith("_")}))


def is_explain_port(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a conv's ``explain_port`` (not a layer of the model)."""
    port_class = _port_class()
    return port_class is not None and isinstance(module, port_class)


def explain_mask(layer: torch.nn.Module, inputs) -> Tensor | None:
    """The factors of a call's messages, one per edge of the caller's graph in its order
    (repeated for a static batch's copies): an explainer's edge mask (the sigmoid applied
    where the explainer asks) times ``to_hetero_with_bases``'s edge-type weights, whichever
    are set; None when neither is. The conv multiplies each of those edges' messages by
    it; as in PyG's explain mode, the self-loops a conv adds weigh 1 (``loop_factors``;
    and so do the caller's loops that it replaces)."""
    port = layer._modules.get("explain_port")
    weight = None if port is None else getattr(port, "message_weight", None)
    explaining = port is not None and port.explain is True
    if not explaining and weight is None:
        return None
    name = type(layer).__name__
    if inputs.adj_layout is not None:
        raise ValueError(f"{name}: explanations and to_hetero_with_bases take the graph as "
                         "an edge_index (their factors follow its edges), not a torch.sparse "
                         "adjacency")
    num_edges = inputs.graph.num_edges // (inputs.batch or 1)
    factor = None
    if explaining:
        if port._edge_mask is None:
            raise ValueError(f"{name}: in explain mode without an edge mask (set it with "
                             "torch_geometric.explain.algorithm.utils.set_masks)")
        factor = _checked_factors(name, port._edge_mask, num_edges, "the explainer's edge mask",
                                  "the explained edge_index")
        factor = factor.sigmoid() if port._apply_sigmoid else factor
    if weight is not None:
        weight = _checked_factors(name, weight, num_edges, "the edge-type weights",
                                  "to_hetero_with_bases's edge_index")
        factor = weight if factor is None else factor * weight
    return inputs.edge_input(factor)


def graph_explain_mask(layer: torch.nn.Module, graph) -> Tensor | None:
    """``explain_mask`` of a call on one ``Graph`` as given, without a static batch or a
    ``torch.sparse`` adjacency (LiftConv, DAGNN's propagation, HypergraphConv's
    incidences)."""
    return explain_mask(layer, ConvInputs(None, None, graph, None, None, None))


def _checked_factors(name: str, factors: Tensor, num_edges: int, what: str,
                     edges: str) -> Tensor:
    if not factors.is_floating_point():
        raise ValueError(f"{name}: {what} must be a floating-point tensor, got "
                         f"{factors.dtype}")
    if factors.dim() != 1 or factors.numel() != num_edges:
        raise ValueError(f"{name}: {what} has shape {list(factors.shape)}, but the layer was "
                         f"called with {num_edges} edges (one entry per edge of {edges})")
    return factors


#: the conv whose messages carry ``message_weights`` now (None outside such a call)
_WEIGHTED_CONV: ContextVar[str | None] = ContextVar("graphloc_weighted_conv", default=None)


@contextlib.contextmanager
def message_weights(conv: torch.nn.Module, weight: Tensor):
    """For the calls inside: each message of the caller's edge ``i`` times ``weight[i]``,
    as PyG's ``to_hetero_with_bases`` scales messages in a message hook. A self-loop that
    the conv adds has no edge, and so no weight: refused (``loop_factors``), as PyG's hook
    refuses a message count other than the edge count."""
    port = conv._modules.get("explain_port")
    if port is None:
        raise ValueError(f"{type(conv).__name__}: per-edge message weights need PyG "
                         "(torch_geometric) installed when the conv is built")
    port.message_weight = weight
    token = _WEIGHTED_CONV.set(type(conv).__name__)
    try:
        yield
    finally:
        _WEIGHTED_CONV.reset(token)
        port.message_weight = None


def loop_factors(like: Tensor, count: int) -> Tensor:
    """The factors of ``count`` self-loops that a conv adds beside the caller's edges, to
    append to the caller's: 1 each, as PyG's explain mode gives them."""
    refuse_added_loops(count)
    return like.new_ones(count)


def refuse_added_loops(count: int) -> None:
    """Raises inside ``message_weights`` when a conv adds ``count`` > 0 self-loops (or
    replaces the caller's): their messages would have no edge type."""
    owner = _WEIGHTED_CONV.get()
    if owner is not None and count > 0:
        raise ValueError(f"{owner} adds self-loops, whose messages have no edge type for "
                         "to_hetero_with_bases to weigh (PyG's refuses such a layer too): "
                         "build it with add_self_loops=False where it has that option, "
                         "or use a layer that adds none")


def masked_messages(messages: Tensor, graph, mask: Tensor | None) -> Tensor:
    """Per-edge messages in ``graph``'s CSR order (``[E, ...]``), each times its edge's
    entry of an explainer's ``mask`` (given in the caller's edge order) where one is set."""
    if mask is None:
        return messages
    return messages * graph.to_csr_order(mask).view(-1, *[1] * (messages.dim() - 1))


def masked_weights(weight: Tensor | None, mask: Tensor | None) -> Tensor | None:
    """Per-edge message multipliers: the edge weights times the explainer's mask."""
    if mask is None:
        return weight
    return mask if weight is None else weight * mask


def attention_hooked(layer: torch.nn.Module) -> bool:
    """Whether a tool hooked the conv's messages (``AttentionExplainer``): an attention
    conv then gives it its weights (``report_attention``)."""
    port = layer._modules.get("explain_port")
    return port is not None and bool(port._message_forward_hooks)


def report_attention(layer: torch.nn.Module, alpha: Tensor) -> None:
    """Gives the attention weights (``[E, H]`` in PyG's edge order) to the message hooks
    on the conv's port, as PyG's ``propagate`` gives them its ``message`` arguments."""
    port = layer._modules["explain_port"]
    for hook in list(port._message_forward_hooks.values()):
        hook(port, ({"alpha": alpha},), None)


def _relay_output(layer: torch.nn.Module, args, out):
    """A conv's forward hook, put on when its port gets one: the conv's output through
    the port's hooks (``get_embeddings`` sees it as a PyG conv's forward hook would)."""
    port = layer._modules.get("explain_port")
    if port is None or not (port._forward_hooks or port._forward_pre_hooks):
        return None
    return port(out)
