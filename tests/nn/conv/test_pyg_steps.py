"""A user's subclass of a graphloc conv that replaces one of PyG's message-passing steps,
and PyG's step hooks: refused by name, where they would have been ignored."""

import inspect
import re

import pytest
import torch
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


def test_the_steps_and_hooks_are_pygs():
    for step in PYG_STEPS:
        assert callable(getattr(MessagePassing, step))
    pygs = {name for name in dir(MessagePassing)
            if re.fullmatch(r"register_\w+_forward(_pre)?_hook", name)
            and not hasattr(torch.nn.Module, name)}
    assert pygs == {f"register_{s}_forward{k}_hook" for s in HOOKED_STEPS for k in ("", "_pre")}


def test_pygs_conv_runs_a_replaced_message():
    """The reference: PyG's GCNConv with its messages doubled gives twice its output, which
    graphloc's GCNConv, fused, would not."""
    from torch_geometric.nn import GCNConv

    class Doubled(GCNConv):
        def message(self, x_j, edge_weight):
            return 2 * super().message(x_j, edge_weight)

    edge_index, n = parity_graph(1)
    x = torch.randn(n, 8)
    torch.manual_seed(0)
    plain = GCNConv(8, 6, bias=False)
    torch.manual_seed(0)
    torch.testing.assert_close(Doubled(8, 6, bias=False)(x, edge_index), 2 * plain(x, edge_index))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_a_subclass_replacing_a_step_the_conv_never_calls_is_refused(cls):
    for step in PYG_STEPS:
        if step in OWN_STEPS[cls]:
            continue
        with pytest.raises(TypeError, match=(
                rf"Mine\.{step} \(.*test_pyg_steps\.py:\d+\) replaces a step of PyG's "
                rf"MessagePassing that graphloc's {cls.__name__} never calls")):
            type("Mine", (cls,), {step: lambda self, *args: None})


def test_the_refusal_names_the_file_and_line_of_the_replacement():
    line = inspect.currentframe().f_lineno + 3  # the line of ``def aggregate``
    with pytest.raises(TypeError) as err:
        class Scaled(gl.SAGEConv):
            def aggregate(self, inputs, index, ptr=None, dim_size=None):
                return 3 * inputs

    assert str(err.value).startswith(f"test_the_refusal_names_the_file_and_line_of_the_"
                                     f"replacement.<locals>.Scaled.aggregate ({__file__}:{line})")
    assert "subclass torch_geometric.nn.SAGEConv" in str(err.value)


def test_a_replacement_the_subclass_calls_itself_is_its_own_method():
    """A subclass whose own forward (or a closure in it, or a subclass above it) calls the
    method runs it: its output is what that method computes."""
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
        torch.manual_seed(0)
        plain = gl.GCNConv(8, 6)
        torch.manual_seed(0)
        torch.testing.assert_close(cls(8, 6)(x, edge_index), expected(plain(x, edge_index)))


def test_a_dict_update_in_forward_does_not_count_as_calling_the_step():
    with pytest.raises(TypeError, match=r"Mine\.update .* GINConv never calls"):
        class Mine(gl.GINConv):
            def forward(self, x, edge_index):
                options = {}
                options.update(edge_index=edge_index)
                return super().forward(x, **options)

            def update(self, inputs):
                return inputs


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
    import torch_geometric.nn as pyg
    twins = {name for name in dir(gl)
             if isinstance(getattr(pyg, name, None), type)
             and issubclass(getattr(pyg, name), MessagePassing)}
    assert twins <= {cls.__name__ for cls in CLASSES}
    assert all(issubclass(getattr(gl, name), (ConvModule, gl.LabelPropagation))
               for name in twins)
