"""Helpers shared by the conv layers: graph wrapping and input checks."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import is_int_at_least, keyword_arguments
from graphloc.graph import Graph, graph_of_edges
from graphloc.nn import aggr as aggregations
from graphloc.ops.values import all_finite, can_branch_on_values


def as_graph(graph_or_edge_index, x: Tensor | tuple[Tensor, Tensor]) -> Graph:
    """A ``Graph`` as given, or one built around a raw ``edge_index`` on ``x.size(0)`` nodes
    (bipartite, ``size=(x_src.size(0), x_dst.size(0))``, for a pair ``x = (x_src, x_dst)``).

    The Graph of an ``edge_index`` is built once while the same tensor, unchanged, comes
    back (``graph_of_edges``).
    """
    pair = isinstance(x, (tuple, list))
    if isinstance(graph_or_edge_index, Graph):
        graph = graph_or_edge_index
    elif isinstance(graph_or_edge_index, Tensor):
        if not pair:
            return graph_of_edges(graph_or_edge_index, x.size(0))
        graph = graph_of_edges(graph_or_edge_index, x[1].size(0), x[0].size(0))
    else:
        raise TypeError("expected a graphloc.Graph or an edge_index tensor, got "
                        f"{type(graph_or_edge_index).__name__}")
    if pair and (x[0].size(0), x[1].size(0)) != (graph.num_src_nodes, graph.num_nodes):
        raise ValueError(f"x_src and x_dst have {x[0].size(0)} and {x[1].size(0)} rows but "
                         f"the graph has {graph.num_src_nodes} source and {graph.num_nodes} "
                         "destination nodes")
    return graph


def graph_of_rows(graph_or_edge_index, x: Tensor) -> Graph:
    """``as_graph`` for a model whose rows of ``x`` are the graph's nodes, one each: another
    row count means the features are not the graph's."""
    graph = as_graph(graph_or_edge_index, x)
    if x.size(0) != graph.num_nodes:
        raise ValueError(f"x has {x.size(0)} rows but the graph has {graph.num_nodes} nodes")
    return graph


def check_input(layer: torch.nn.Module, x: Tensor, in_channels: int | None,
                name: str = "x") -> None:
    """Floating-point ``[N, in_channels]`` features (any width when ``in_channels`` is None
    or -1, a lazy width)."""
    in_channels = None if in_channels == -1 else in_channels
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"{layer.__class__.__name__} expects floating-point node features "
                        f"{name}, got {got}")
    if x.dim() != 2 or (in_channels is not None and x.size(1) != in_channels):
        width = "F" if in_channels is None else in_channels
        raise ValueError(f"{layer.__class__.__name__} expects {name} of shape [N, {width}], "
                         f"got {list(x.shape)}")
    _check_dtype(layer, x, name)


def _check_dtype(layer: torch.nn.Module, x: Tensor, name: str) -> None:
    """Features in the layer's parameter dtype (outside autocast, which converts both):
    torch's own error ("mat1 and mat2 must have the same dtype") names no argument."""
    if torch.is_autocast_enabled(x.device.type):
        return
    weight = next((p for p in layer.parameters() if p.is_floating_point()), None)
    if weight is not None and weight.dtype != x.dtype:
        raise TypeError(f"{layer.__class__.__name__} has {weight.dtype} parameters, but "
                        f"{name} is {x.dtype}: convert one to the other "
                        f"({name}.to({weight.dtype}) or layer.to({x.dtype}))")




# torch's hooks around a module's call (register_forward_hook and its kin)
CALL_HOOKS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
              "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
              "_backward_pre_hooks", "_backward_hooks")


def read_rows_only(t: Tensor, read: Tensor) -> Tensor:
    """``t`` for a map taken once per node where PyG maps each edge's gathered rows: where
    ``t`` is not finite, the rows no edge reads (``read`` False) become 0, so their product
    is 0 and their zero gradient keeps the map's gradient finite (0 * NaN is NaN), as in
    PyG's, which never reads them; the rows that are read are unchanged. Under
    ``torch.compile`` or ``torch.func`` (no branch on values), always."""
    if can_branch_on_values() and all_finite(t):
        return t
    return torch.where(read.view(-1, *[1] * (t.dim() - 1)), t, t.new_zeros(()))


def sources_read(graph) -> Tensor:
    """Per source node, whether an edge reads it (its out-degree is not 0)."""
    return graph.out_degree() > 0


def destinations_read(graph) -> Tensor:
    """Per destination node, whether an edge reads it (its in-degree is not 0)."""
    return graph.in_degree() > 0


def has_call_hooks(module: torch.nn.Module) -> bool:
    """Whether hooks wait for ``module``'s own call (a conv that computes with the module's
    weights instead of calling it would skip them)."""
    return any(getattr(module, attr, None) for attr in CALL_HOOKS)



def split_widths(in_channels) -> tuple:
    """``(source width, destination width)`` from an int (both) or a pair."""
    if isinstance(in_channels, (tuple, list)):
        if len(in_channels) != 2:
            raise ValueError(f"in_channels must be an int or a pair, got {in_channels}")
        return tuple(in_channels)
    return in_channels, in_channels


def checked_features(layer: torch.nn.Module, inputs, in_channels) -> tuple[Tensor, Tensor | None]:
    """A call's ``(x_src, x_dst)`` (``x_dst`` None for a pair ``(x_src, None)``), each
    checked against its width: ``in_channels`` an int for both, a pair, -1 (lazy: any), or
    None (any source width, the destination of the same width)."""
    x_src, x_dst = inputs.x_src, inputs.x_dst
    src_width, dst_width = split_widths(-1 if in_channels is None else in_channels)
    check_input(layer, x_src, src_width, "x_src" if x_dst is not x_src else "x")
    if in_channels is None:
        dst_width = x_src.size(1)
    if x_dst is not None and x_dst is not x_src:
        check_input(layer, x_dst, dst_width, "x_dst")
    return x_src, x_dst


def checked_features_with_root(layer: torch.nn.Module, inputs, in_channels,
                               root: str) -> tuple[Tensor, Tensor]:
    """``checked_features`` for a layer whose output adds ``root`` of the destination
    features: a pair ``(x_src, None)`` is refused, naming it."""
    x_src, x_dst = checked_features(layer, inputs, in_channels)
    if x_dst is None:
        raise ValueError(f"{type(layer).__name__} adds {root} to its output, so a pair "
                         "(x_src, None) has nothing to add; pass (x_src, x_dst)")
    return x_src, x_dst


def check_sizes(owner: str, lazy: bool = False, optional: tuple[str, ...] = (),
                pair: bool = False, **sizes) -> None:
    """Each size is an integer >= 1 (with ``pair``, ``in_channels`` may be a pair of them,
    a bipartite layer's source and destination widths; with ``lazy`` -1: PyG's lazy width,
    inferred at the first call; None only for the sizes named in ``optional``, where it
    means unset): a width, head count or depth of 0 would build a layer that outputs zeros
    and still trains, and a negative one, a list or None fails deep inside torch, in words
    that name no argument."""
    for name, value in sizes.items():
        is_pair = pair and name in ("in_channels", "channels") and \
            isinstance(value, (tuple, list))
        values = value if is_pair else (value,)
        if value is None and name in optional:
            continue
        may_wait = lazy and name in ("in_channels", "channels")
        if len(values) != (2 if is_pair else 1) or any(
                not is_int_at_least(v, 1) and not (may_wait and is_int_at_least(v, -1) and v == -1)
                for v in values):
            hint = " (or -1, inferred at the first call)" if may_wait else ""
            hint += " (or a pair of them, source and destination)" if pair and \
                name in ("in_channels", "channels") else ""
            raise ValueError(f"{owner}: {name} must be an integer >= 1, got {value!r}{hint}")


def check_networks(owner: str, **networks) -> None:
    """Each optional network (``nn``, ``pos_nn``, ...) is None or callable: a number or
    string failed at the first call, in torch's words, naming no argument."""
    for name, nn in networks.items():
        if nn is not None and not callable(nn):
            raise TypeError(f"{owner}: {name} must be a module, got {type(nn).__name__}")


def reset_like_pyg(module) -> None:
    """PyG's ``reset``: the module's own ``reset_parameters``, else its children's, in order
    (so a seed draws a network's initial weights as a PyG conv draws them)."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
    else:
        for child in getattr(module, "children", lambda: ())():
            reset_like_pyg(child)


def linear(in_channels: int, out_channels: int, bias: bool = True,
           glorot: bool = False, uniform_bias: bool = False) -> torch.nn.Module:
    """A Linear with torch's default initialisation or PyG's ``'glorot'`` (a zero bias, or
    with ``uniform_bias`` PyG's default one); lazy (its input width taken from the first
    call) when ``in_channels`` is -1, as PyG's ``Linear``."""
    if in_channels == -1:
        return _LazyGlorotLinear(out_channels, bias, uniform_bias) if glorot else \
            torch.nn.LazyLinear(out_channels, bias=bias)
    if glorot:
        return _GlorotLinear(in_channels, out_channels, bias, uniform_bias)
    return torch.nn.Linear(in_channels, out_channels, bias=bias)


class _GlorotLinear(torch.nn.Linear):
    """A Linear initialised with glorot (and a zero bias, or PyG's uniform one) from its
    construction on, as PyG's ``Linear(weight_initializer='glorot')``: torch's Linear first
    drew its own initial weights, so a seed gave other weights than PyG's conv."""

    def __init__(self, in_features: int, out_features: int, bias: bool, uniform_bias: bool):
        self.uniform_bias = uniform_bias  # read by reset_parameters, which super() calls
        super().__init__(in_features, out_features, bias=bias)

    def reset_parameters(self) -> None:
        reset_glorot(self, self.uniform_bias)


class _LazyGlorotLinear(torch.nn.LazyLinear):
    """A lazy Linear whose weight takes glorot once its width is known (and a zero bias, or
    PyG's uniform one); once materialised it becomes a ``_GlorotLinear`` (a plain Linear,
    torch's default, would reset with torch's initialisation afterwards)."""

    cls_to_become = _GlorotLinear

    def __init__(self, out_features: int, bias: bool, uniform_bias: bool = False):
        self.uniform_bias = uniform_bias  # read by reset_parameters, which super() calls
        super().__init__(out_features, bias=bias)

    def reset_parameters(self) -> None:
        if self.has_uninitialized_params() or self.in_features == 0:
            return
        reset_glorot(self, self.uniform_bias)


def uniform_linear(in_channels: int, out_channels: int) -> torch.nn.Module:
    """A bias-free Linear initialised as PyG's ``Linear(weight_initializer='uniform')``:
    uniform in +-1/sqrt(in_features); lazy (drawn at its first call, from that width) when
    ``in_channels`` is -1."""
    if in_channels == -1:
        return _LazyUniformLinear(out_channels)
    return _UniformLinear(in_channels, out_channels)


class _UniformLinear(torch.nn.Linear):
    """``uniform_linear``'s Linear of a known width (torch's ``__init__`` calls this
    ``reset_parameters``, as PyG's ``Linear.__init__`` draws its own)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__(in_features, out_features, bias=False)

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        torch.nn.init.uniform_(self.weight, -bound, bound)


class _LazyUniformLinear(torch.nn.LazyLinear):
    """``uniform_linear``'s lazy Linear; once materialised it becomes a ``_UniformLinear``
    (a plain Linear would reset with torch's initialisation later)."""

    cls_to_become = _UniformLinear

    def __init__(self, out_features: int):
        super().__init__(out_features, bias=False)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features:
            _UniformLinear.reset_parameters(self)


def check_dropouts(owner: str, upto_one: bool = False, **probabilities) -> None:
    """Each dropout probability lies in [0, 1), or with ``upto_one`` in [0, 1] (the PyG
    twins: torch's and PyG's dropout take 1, which drops everything)."""
    for name, p in probabilities.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1 \
                or (p == 1 and not upto_one):
            interval = "[0, 1]" if upto_one else "[0, 1)"
            raise ValueError(f"{owner}: {name} must be a probability in {interval}, got {p!r}")


def glorot_linear(in_channels: int, out_channels: int) -> torch.nn.Module:
    """A bias-free Linear initialised like PyG's ``weight_initializer='glorot'`` (lazy for
    ``in_channels=-1``)."""
    return linear(in_channels, out_channels, bias=False, glorot=True)


def glorot(param: Tensor) -> None:
    """PyG's glorot on any tensor: uniform in +-sqrt(6 / (fan_in + fan_out)), the fans
    being its last two sizes (so a ``[1, heads, C]`` attention vector gets PyG's bound)."""
    bound = math.sqrt(6.0 / (param.size(-2) + param.size(-1)))
    torch.nn.init.uniform_(param, -bound, bound)


def reset_glorot(lin: torch.nn.Module, uniform_bias: bool = False) -> None:
    """Glorot weights and a zero bias (``uniform_bias``: PyG's default bias, uniform in
    +-1/sqrt(in_features)); a lazy Linear not yet called keeps waiting."""
    if isinstance(lin.weight, torch.nn.parameter.UninitializedParameter):
        return
    glorot(lin.weight)  # PyG's bound (torch's xavier_uniform_ rounds it 1 ulp apart)
    if lin.bias is None:
        return
    if uniform_bias and lin.in_features:
        bound = 1.0 / math.sqrt(lin.in_features)
        torch.nn.init.uniform_(lin.bias, -bound, bound)
    else:
        torch.nn.init.zeros_(lin.bias)


def check_ball_sizes(ball_sizes, num_nodes: int) -> None:
    """``forward_within``'s ``ball_sizes``: non-decreasing, the last one every node."""
    if not ball_sizes or ball_sizes[-1] != num_nodes or any(
            a > b for a, b in zip(ball_sizes[:-1], ball_sizes[1:], strict=True)):
        raise ValueError(f"ball_sizes must grow to the {num_nodes} nodes of x, got "
                         f"{list(ball_sizes)}")


def rows_within(ball_sizes, hops: int) -> int | None:
    """How many leading nodes lie within ``hops`` hops (None: no pruning, all of them)."""
    return None if ball_sizes is None else ball_sizes[min(hops, len(ball_sizes) - 1)]


def propagate_prefix(graph: Graph, weight: Tensor | None, x: Tensor,
                     num_dst: int | None) -> Tensor:
    """``spmm(graph, x_all, weight)[:num_dst]`` where ``x`` holds the first rows of
    ``x_all``, all that those rows read (nodes ordered by hop distance, see
    ``Graph.dst_prefix``); the whole product when ``num_dst`` is None."""
    if num_dst is None:
        return ops.spmm(graph, x, weight)
    prefix = graph.dst_prefix(num_dst, x.size(0))
    if weight is not None:
        weight = graph.to_csr_order(weight)[:prefix.num_edges]
    return ops.spmm(prefix, x, weight)



def first_linear(nn: torch.nn.Module):
    """``(the network's first Linear, the rest of it)``, or ``(None, None)`` where the
    network does not start with a ``torch.nn.Linear`` graphloc can take apart."""
    if type(nn) is torch.nn.Linear:
        return nn, torch.nn.Identity()
    if type(nn) is torch.nn.Sequential and len(nn) and type(nn[0]) is torch.nn.Linear:
        return nn[0], nn[1:]
    return None, None


#: PyG's aggregation names as graphloc's reductions name them (``ops.segment_reduce``,
#: ``ops.spmm``), for the convs that take exactly these
PYG_REDUCTIONS = {"max": "max", "min": "min", "mean": "mean", "add": "sum", "sum": "sum"}


def may_regroup_first_linear(first: torch.nn.Linear, *features: Tensor) -> bool:
    """Whether a network's first Linear may act on node products instead of each edge's
    inputs: the same numbers as PyG's only on finite ``features`` (inf - inf is NaN per
    edge, where the regrouped sums can be finite), where branching on values is allowed,
    autocast is off (PyG's product runs in its dtype) and no hook waits for the Linear's
    own call."""
    if first._forward_hooks or first._forward_pre_hooks or not can_branch_on_values():
        return False
    if torch.is_autocast_enabled(features[0].device.type):
        return False
    return all(all_finite(t) for t in features)


def check_first_linear(layer: torch.nn.Module, nn: torch.nn.Module, width: int,
                       given: str) -> None:
    """A network ``nn`` whose first Linear takes another width than the ``width`` it is
    given (``given`` says how), named before any work: torch's matmul error, after the
    aggregation, named neither the layer nor the widths."""
    first, _ = first_linear(nn)
    if first is not None and first.in_features != width:
        raise ValueError(f"{type(layer).__name__}: {given}, but nn's first Linear takes "
                         f"{first.in_features}")


def width_keeping_aggregation(owner: str, aggr, aggr_kwargs, width: int, why: str):
    """PyG's ``aggr`` (a name, a list or a module) as graphloc's aggregation module, checked
    to keep ``width`` (-1, a lazy width, is not checked): a list concatenated in "cat"
    mode would widen the messages, which ``why`` says the layer cannot take."""
    module = aggregations.resolve(aggr, **keyword_arguments(owner, "aggr_kwargs", aggr_kwargs))
    if width != -1 and module.out_channels_for(width) != width:
        label = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        raise ValueError(f"{owner}: aggr={label!r} changes the width ({width} -> "
                         f"{module.out_channels_for(width)}); {why}")
    return module


def mean_of_sums(graph: Graph, summed: Tensor) -> Tensor:
    """Per node, the sum over its in-edges made their mean (a node without any keeps 0)."""
    return summed / graph.in_degree().clamp(min=1).to(summed.dtype).unsqueeze(1)


def resolve_activation(owner: str, act, act_kwargs: dict | None = None) -> torch.nn.Module:
    """PyG's ``activation_resolver``: a module, a name of torch's (``"relu"``,
    ``"leaky_relu"``, ``"LeakyReLU"``, ...) with ``act_kwargs``, or a function; errors name
    ``owner``."""
    if isinstance(act, torch.nn.Module):
        return act
    if isinstance(act, str):
        wanted = act.lower().replace("_", "")
        for name in dir(torch.nn.modules.activation):
            kind = getattr(torch.nn.modules.activation, name)
            if isinstance(kind, type) and issubclass(kind, torch.nn.Module) and \
                    name.lower() == wanted:
                return kind(**(act_kwargs or {}))
        raise ValueError(f"{owner}: unknown activation {act!r}")
    if callable(act):
        return _Function(act)
    raise TypeError(f"{owner}: act must be a name, a module or a function, got "
                    f"{type(act).__name__}")


class _Function(torch.nn.Module):
    """A plain function as a module (an activation given as ``torch.tanh``)."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x: Tensor) -> Tensor:
        return self.function(x)


def root_map(layer: torch.nn.Module, name: str) -> torch.nn.Module | None:
    """The layer's root map ``name`` while ``layer.root_weight`` holds, else None: read at
    each call, as PyG's convs read the flag (PyG's ``DirGNNConv`` switches it off on its
    copies after building them). Turned on for a layer built without the map, it raises by
    name (PyG's fails on the missing attribute)."""
    lin = getattr(layer, name)
    if not layer.root_weight:
        return None
    if lin is None:
        raise ValueError(f"{type(layer).__name__}: root_weight is True but the layer was "
                         f"built with root_weight=False, so it has no {name}")
    return lin


def conv_hops(conv: torch.nn.Module) -> int | None:
    """How many hops one conv's output reaches: its ``graphloc_hops`` where it declares one
    (None included: a kNN conv reads no fixed ball), one for graphloc's other convs (one hop
    each: they declare nothing); None (unknown) for any other module."""
    if hasattr(conv, "graphloc_hops"):
        return conv.graphloc_hops
    return 1 if type(conv).__module__.startswith("graphloc.nn.conv.") else None
