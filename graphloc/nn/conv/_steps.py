"""PyG's ``MessagePassing`` steps on a graphloc conv: run by PyG's conv, or refused by
name, never ignored.

A PyG conv computes through the steps of ``MessagePassing.propagate``: ``message``,
``aggregate``, ``update`` (or ``message_and_aggregate``), and ``edge_update``. PyG users
change a conv by subclassing it and replacing a step (``class MyConv(GCNConv): def
message(...)``; PyG's own ``test_inheritance`` does it to GraphConv), and watch or change
the steps with hooks (``conv.register_message_forward_hook``). graphloc's convs run their
message passing as fused kernels, without those steps. A subclass of one that replaced
``message`` was still built and called, and computed the base conv without the
replacement, without a word (a GCNConv whose messages were doubled returned half of PyG's
output). And the hook methods were missing, so code that registered one met only Python's
"no attribute".

Now a user's subclass that defines a step its graphloc base never calls, where the
subclass's own methods do not call it either, is built on PyG's conv of the same name
instead, which runs the step: PyG's numbers, without graphloc's kernels, and a warning
naming the method, its file and line. Where PyG has no such ``MessagePassing`` (a
graphloc-only conv), or the graphloc conv is not a direct base of the class, the class is
a ``TypeError`` naming the same. Registering a step hook on a graphloc conv is a
``ValueError`` naming the step. Steps that a graphloc conv does define
(``MultiEdgeConv.aggregate``, ``edge_update``) are its own, and a subclass may replace them.
"""

from __future__ import annotations

import dis
import inspect
import warnings

from graphloc.checks import caller_stacklevel

#: PyG's names for the steps of its message passing, which a replacement expects a conv to
#: call (``edge_updater`` and ``propagate`` call the others; ``explain_message`` applies an
#: explainer's mask)
PYG_STEPS = ("propagate", "message", "aggregate", "update", "message_and_aggregate",
             "edge_updater", "edge_update", "explain_message")

#: the steps PyG lets one hook, before (``_pre``) and after each call
HOOKED_STEPS = ("propagate", "message", "aggregate", "message_and_aggregate", "edge_update")


def build_replaced_steps_on_pyg(cls: type) -> bool:
    """Where ``cls``, a user's subclass of a graphloc conv, replaces a PyG step that no
    graphloc class above it defines and none of the user's own methods calls (so the
    graphloc conv would never run it): rebuilds ``cls`` on PyG's conv of that name, which
    runs it, with a warning, and returns True. Raises where PyG has no such conv, or the
    graphloc conv is not a direct base of ``cls``."""
    graphloc_classes = [base for base in cls.__mro__ if base.__module__.startswith("graphloc.")]
    if not graphloc_classes or cls in graphloc_classes:
        return False
    replaced = _replaced_step(cls, graphloc_classes)
    if replaced is None:
        return False
    ours = graphloc_classes[0]
    twin = _pyg_message_passing(ours.__name__)
    where = f"{replaced[0].__qualname__}.{replaced[1]}{_where(replaced[2])}"
    if twin is None or ours not in cls.__bases__:
        raise TypeError(
            f"{where} replaces a step of PyG's MessagePassing that graphloc's {ours.__name__} "
            "never calls: it runs its message passing fused, so the replacement would be "
            "ignored. " + (f"PyG has no MessagePassing named {ours.__name__} to run it."
                           if twin is None else
                           f"Subclass torch_geometric.nn.{ours.__name__} (or replace the step "
                           f"in a class whose base is graphloc's {ours.__name__} itself)"))
    cls.__bases__ = tuple(twin if base is ours else base for base in cls.__bases__)
    warnings.warn(
        f"{where} replaces a step of PyG's MessagePassing, which graphloc's {ours.__name__} "
        f"runs fused: {cls.__qualname__} is built on PyG's {ours.__name__} instead, which runs "
        "it (PyG's numbers, without graphloc's kernels)", stacklevel=caller_stacklevel())
    return True


def _replaced_step(cls: type, ours: list) -> tuple | None:
    """``(class, name, function)`` of the first PyG step a user's class above ``cls``
    (or ``cls``) defines that no graphloc class (``ours``, in ``cls``'s order) defines and
    no user method calls."""
    theirs = cls.__mro__[:cls.__mro__.index(ours[0])]
    called = set().union(*(_self_attributes(fn) for base in theirs
                           for fn in vars(base).values() if inspect.isfunction(fn)))
    return next(((base, name, vars(base)[name]) for base in theirs for name in PYG_STEPS
                 if name in vars(base) and name not in called
                 and not any(name in vars(b) for b in ours)), None)


def _pyg_message_passing(name: str) -> type | None:
    """PyG's ``MessagePassing`` named ``name``, where PyG is installed and has one."""
    try:
        import torch_geometric.nn as pyg
    except ImportError:
        return None
    twin = getattr(pyg, name, None)
    return twin if isinstance(twin, type) and issubclass(twin, pyg.MessagePassing) else None


def refuse_step_hook(conv, step: str, kind: str) -> None:
    """The error for ``conv.register_{step}_forward{kind}_hook`` (an instance cannot be
    moved onto PyG's conv as a class can: it was built without PyG's state)."""
    name = type(conv).__name__
    attention = "return_attention_weights" in _parameters(conv.forward)
    hint = (" Its attention weights come with forward(..., return_attention_weights=True)."
            if attention else "")
    raise ValueError(
        f"{name}.register_{step}_forward{kind}_hook: graphloc's {name} runs its message "
        f"passing fused, with no {step} step to hook, so the hook would never run.{hint} "
        f"{_instead(name)}")


def _instead(name: str) -> str:
    twin = f"torch_geometric.nn.{name}" if _pyg_message_passing(name) else \
        "a PyG MessagePassing"
    return (f"To change or watch a step, subclass {twin} (graphloc.nn.from_pyg keeps a "
            "subclass that replaces a step as PyG's)")


def _self_attributes(function) -> set[str]:
    """The attributes of its first argument (``self``) that ``function`` and the functions
    nested in it read."""
    code = function.__code__
    if not code.co_varnames or code.co_argcount == 0:
        return set()
    return _attributes_of(code, code.co_varnames[0])


def _attributes_of(code, owner: str) -> set[str]:
    found, loaded = set(), None
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and loaded == owner:
            found.add(instruction.argval)
        loaded = _local_loaded(instruction)
    for constant in code.co_consts:  # closures, comprehensions and lambdas
        if hasattr(constant, "co_code"):
            found |= _attributes_of(constant, owner)
    return found


def _local_loaded(instruction) -> str | None:
    """The name of the local (or closure) variable ``instruction`` puts on top of the
    stack, if it loads one (``LOAD_FAST_LOAD_FAST`` loads two: the second is on top)."""
    if not instruction.opname.startswith(("LOAD_FAST", "LOAD_DEREF")):
        return None
    value = instruction.argval
    return value[-1] if isinstance(value, tuple) else value


def _where(function) -> str:
    code = getattr(function, "__code__", None)
    return "" if code is None else f" ({code.co_filename}:{code.co_firstlineno})"


def _parameters(function) -> tuple:
    try:
        return tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return ()


def add_step_hook_refusals(cls: type) -> None:
    """Gives ``cls`` PyG's ``register_{step}_forward[_pre]_hook`` methods, each refusing
    by name (``refuse_step_hook``)."""
    for step in HOOKED_STEPS:
        for kind in ("_pre", ""):
            setattr(cls, f"register_{step}_forward{kind}_hook", _refusal(step, kind))


def _refusal(step: str, kind: str):
    def register(self, hook):
        refuse_step_hook(self, step, kind)

    register.__name__ = register.__qualname__ = f"register_{step}_forward{kind}_hook"
    register.__doc__ = (f"PyG's hook {'before' if kind else 'after'} its ``{step}`` step: "
                        "refused, since graphloc's convs run no such step.")
    return register
