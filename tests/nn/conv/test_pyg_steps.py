"""A user's subclass of a graphloc conv that replaces one of PyG's message-passing steps
(built on PyG's conv, which runs it, or refused by name) and PyG's step hooks (refused by
name), where both were ignored without a word."""

import inspect
import re
import warnings

import pytest
import torch
import torch_geometric.nn as pyg
from parity import parity_graph
from torch_geometric.nn import MessagePassing

import graphloc.nn as gl
from graphloc.nn.conv._base import ConvModule, conv_classes
from graphloc.nn.conv._steps import HOOKED_STEPS, PYG_STEPS

# the classes whose PyG twin is a MessagePassing: the convs and LabelPropagation
CLASSES = [*conv_classes(), gl.LabelPropagation]
# (a class, the PyG steps it defines itself): graphloc's own, which a subclass may replace
OWN_STEPS = {cls: [s for s in PYG_STEPS if any(s in vars(b) for b in cls.__mro__)]
             for cls in CLASSES}


def _pyg_twin(cls):
    twin = getattr(pyg, cls.__name__, None)
    return twin if isinstance(twin, type) and issubclass(twin, MessagePassing) else None


def _subclass(cls, step: str):
    """``type("Mine", (cls,), {step: ...})`` and the warnings its definition gave."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mine = type("Mine", (cls,), {step: lambda self, *args: None})
    return mine, [str(w.message) for w in seen]


def test_the_steps_and_hooks_are_pygs():
    for step in PYG_STEPS:
        assert callable(getattr(MessagePassing, step))
    pygs = {name for name in dir(MessagePassing)
            if re.fullmatch(r"register_\w+_forward(_pre)?_hook", name)
            and not hasattr(torch.nn.Module, name)}
    assert pygs == {f"register_{s}_forward{k}_hook" for s in HOOKED_STEPS for k in ("", "_pre")}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_a_subclass_replacing_a_step_the_conv_never_calls_is_built_on_pygs_conv(cls):
    twin = _pyg_twin(cls)
    for step in (s for s in PYG_STEPS if s not in OWN_STEPS[cls]):
        if twin is None:
            with pytest.raises(TypeError, match=(
                    rf"Mine\.{step} \(.*test_pyg_steps\.py:\d+\) replaces a step of PyG's "
                    rf"MessagePassing that graphloc's {cls.__name__} never calls.*PyG has no "
                    rf"MessagePassing named {cls.__name__}")):
                _subclass(cls, step)
            continue
        mine, seen = _subclass(cls, step)
        assert issubclass(mine, twin) and not issubclass(mine, cls)
        assert seen == [f"Mine.{step} ({__file__}:{_line_of_subclass()}) replaces a step of "
                        f"PyG's MessagePassing, which graphloc's {cls.__name__} runs fused: "
                        f"Mine is built on PyG's {cls.__name__} instead, which runs it (PyG's "
                        "numbers, without graphloc's kernels)"]


def _line_of_subclass() -> int:
    source, first = inspect.getsourcelines(_subclass)
    return first + next(i for i, line in enumerate(source) if "lambda self" in line)


def _doubled(cls):
    """A subclass of ``cls`` whose messages are twice those of PyG's conv of its name
    (with PyG's signature, which PyG's propagate reads to pass the message's inputs)."""
    def message(self, *args, **kwargs):
        return 2 * super(mine, self).message(*args, **kwargs)

    message.__signature__ = inspect.signature(_pyg_twin(cls).message)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = type("Doubled", (cls,), {"message": message})
    return mine


@pytest.mark.parametrize("name, make, call", [
    ("GCNConv", lambda c: c(8, 6), lambda conv, x, ei, w: conv(x, ei, w)),
    ("GraphConv", lambda c: c(8, 6), lambda conv, x, ei, w: conv(x, ei, w)),
    ("SAGEConv", lambda c: c(8, 6), lambda conv, x, ei, w: conv(x, ei)),
    ("GATConv", lambda c: c(8, 3, heads=2), lambda conv, x, ei, w: conv(x, ei)),
    ("GINConv", lambda c: c(torch.nn.Linear(8, 6)), lambda conv, x, ei, w: conv(x, ei)),
    ("LabelPropagation", lambda c: c(3, 0.9),
     lambda conv, x, ei, w: conv(x.softmax(-1), ei, edge_weight=w)),
])
def test_a_replaced_message_computes_what_pygs_subclass_computes(name, make, call):
    """The same subclass on graphloc's class and on PyG's, the same draws: the same
    outputs, and not the plain conv's (the replacement runs)."""
    edge_index, n = parity_graph(5)
    x, weight = torch.randn(n, 8), torch.rand(edge_index.size(1))
    outputs = []
    for cls in (getattr(gl, name), getattr(pyg, name), getattr(gl, name)):
        torch.manual_seed(0)
        conv = make(cls if len(outputs) == 2 else _doubled(cls))
        outputs.append(call(conv, x, edge_index, weight))
    torch.testing.assert_close(outputs[0], outputs[1])
    assert not torch.allclose(outputs[0], outputs[2])


def test_pygs_own_subclass_test_runs():
    """PyG's ``test_inheritance`` (test_graph_conv.py): a GraphConv whose message weighs
    each neighbour, on graphloc's GraphConv."""
    with pytest.warns(UserWarning, match="EdgeGraphConv is built on PyG's GraphConv"):
        class EdgeGraphConv(gl.GraphConv):
            def message(self, x_j, edge_weight):
                return edge_weight.view(-1, 1) * x_j

    x, edge_weight = torch.randn(4, 8), torch.rand(4)
    edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
    conv = EdgeGraphConv(8, 16)
    weighed = edge_weight.view(-1, 1) * x[edge_index[0]]
    summed = torch.zeros(4, 8).index_add_(0, edge_index[1], weighed)
    expected = conv.lin_rel(summed) + conv.lin_root(x)  # PyG's GraphConv's formula
    torch.testing.assert_close(conv(x, edge_index, edge_weight), expected)


def test_a_replacement_below_a_users_subclass_is_refused_by_name():
    class Scaled(gl.SAGEConv):
        def forward(self, x, edge_index):
            return 2 * super().forward(x, edge_index)

    line = inspect.currentframe().f_lineno + 3  # the line of ``def aggregate``
    with pytest.raises(TypeError) as err:
        class Summed(Scaled):
            def aggregate(self, inputs, index, ptr=None, dim_size=None):
                return 3 * inputs

    assert str(err.value).startswith(
        f"test_a_replacement_below_a_users_subclass_is_refused_by_name.<locals>.Summed."
        f"aggregate ({__file__}:{line}) replaces a step of PyG's MessagePassing that "
        "graphloc's SAGEConv never calls")
    assert "Subclass torch_geometric.nn.SAGEConv" in str(err.value)


def test_a_replacement_the_subclass_calls_itself_is_its_own_method():
    """A subclass whose own forward (or a closure in it, or a subclass above it) calls the
    method runs it on graphloc's conv: its output is what that method computes."""
    class Own(gl.GCNConv):
        def forward(self, x, edge_index):
            return self.message(super().forward(x, edge_index))

        def message(self, h):
            return h + 1

    class Closure(gl.GCNConv):
        def forward(self, x, edge_index):
            step = lambda h: self.update(h)  # noqa: E731
            return step(super().forward(x, edge_index))

        def update(self, h):
            return 2 * h

    class Below(Own):
        def message(self, h):
            return h - 1

    edge_index, n = parity_graph(2)
    x = torch.randn(n, 8)
    for cls, expected in ((Own, lambda h: h + 1), (Closure, lambda h: 2 * h),
                          (Below, lambda h: h - 1)):
        assert issubclass(cls, gl.GCNConv)
        torch.manual_seed(0)
        plain = gl.GCNConv(8, 6)
        torch.manual_seed(0)
        torch.testing.assert_close(cls(8, 6)(x, edge_index), expected(plain(x, edge_index)))


def test_a_dict_update_in_forward_does_not_count_as_calling_the_step():
    with pytest.warns(UserWarning, match=r"Mine\.update .* built on PyG's GINConv"):
        class Mine(gl.GINConv):
            def forward(self, x, edge_index):
                options = {}
                options.update(edge_index=edge_index)
                return super().forward(x, **options)

            def update(self, inputs):
                return inputs

    assert issubclass(Mine, pyg.GINConv)


def test_a_subclass_may_replace_a_step_its_graphloc_conv_defines():
    """MultiEdgeConv's forward calls its own ``aggregate``: a replacement runs."""
    class Halved(gl.MultiEdgeConv):
        def aggregate(self, x, graph, e, time=None):
            out, contexts = super().aggregate(x, graph, e, time)
            return out / 2, contexts

    assert "aggregate" in OWN_STEPS[gl.MultiEdgeConv]
    from graphloc import Graph
    edge_index, n = parity_graph(3)
    graph = Graph(edge_index, num_nodes=n)
    x, e = torch.randn(n, 4), torch.randn(edge_index.size(1), 4)
    torch.manual_seed(0)
    plain = gl.MultiEdgeConv(4)
    torch.manual_seed(0)
    halved = Halved(4)
    want, _ = plain.aggregate(x, graph, e)
    got, _ = halved.aggregate(x, graph, e)
    torch.testing.assert_close(got, want / 2)


@pytest.mark.parametrize("step", HOOKED_STEPS)
@pytest.mark.parametrize("kind", ["", "_pre"])
def test_registering_a_step_hook_is_refused_by_name(step, kind):
    for conv, hint in ((gl.GCNConv(4, 4), False), (gl.GATConv(4, 4), True),
                       (gl.LabelPropagation(2, 0.9), False)):
        name = f"register_{step}_forward{kind}_hook"
        with pytest.raises(ValueError, match=(
                rf"{type(conv).__name__}\.{name}: graphloc's {type(conv).__name__} runs its "
                rf"message passing fused, with no {step} step to hook")) as err:
            getattr(conv, name)(lambda *args: None)
        assert ("return_attention_weights=True" in str(err.value)) == hint


def test_every_class_has_pygs_hook_methods():
    for cls in CLASSES:
        for step in HOOKED_STEPS:
            assert getattr(cls, f"register_{step}_forward_hook").__name__ == \
                f"register_{step}_forward_hook"


def test_the_only_pyg_message_passing_twins_are_these_classes():
    """Every class graphloc.nn exports under the name of a PyG MessagePassing is here."""
    twins = {name for name in dir(gl)
             if isinstance(getattr(pyg, name, None), type)
             and issubclass(getattr(pyg, name), MessagePassing)}
    assert twins <= {cls.__name__ for cls in CLASSES}
    assert all(issubclass(getattr(gl, name), (ConvModule, gl.LabelPropagation))
               for name in twins)
