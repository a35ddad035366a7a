"""PyG modules to graphloc: ``from_pyg``.

A PyG ``BasicGNN`` (``GCN``, ``GraphSAGE``, ``GIN``, ``GAT``) whose options graphloc's
:class:`~graphloc.nn.models.gnn.GNN` has becomes a ``GNN`` with the same weights, so it gets
the fused kernels and, in influence measurements, the layer pruning. Any other module gets
its PyG convs (every class in ``_CONVERTERS``) replaced in place by graphloc's, weights
copied, with the conv's own forward and backward hooks. Every conversion is checked on a
probe against the original, and what did not convert (or did not give the same outputs)
is left as it was and reported.
"""

from __future__ import annotations

import contextlib
import copy
import math
import warnings

import torch
from torch import Tensor
from torch.utils._pytree import tree_flatten

from graphloc.checks import check_flags
from graphloc.nn import conv as gl_conv
from graphloc.nn.conv._base import is_explain_port
from graphloc.nn.conv._steps import PYG_STEPS
from graphloc.nn.conv._utils import CALL_HOOKS, PYG_REDUCTIONS, has_call_hooks
from graphloc.nn.conv.hetero_basis import HeteroBasisConv
from graphloc.nn.models.interaction_graphs import Distance, RadiusInteractionGraph
from graphloc.nn.pool import PANPooling

#: the registered conv of each PyG BasicGNN that converts to a GNN
_BASIC_GNNS = {"GCN": "gcn", "GraphSAGE": "sage", "GIN": "gin", "GAT": "gat"}


class Unconvertible(ValueError):
    """A PyG module graphloc has no equivalent for; the message says why."""


class ExampleFailed(ValueError):
    """The original module fails on the example it is to be checked on (its error is the
    ``__cause__``)."""


def from_pyg(module: torch.nn.Module, example: tuple | None = None, atol: float = 1e-5,
             strict: bool = False) -> torch.nn.Module:
    """A graphloc version of the PyG ``module`` with the same outputs.

    Args:
        module: a PyG ``BasicGNN`` model, a PyG conv, or any module containing PyG convs
            (the original is not changed: a converted copy is returned).
        example: ``(x, edge_index)``, the probe the converted module is checked on
            (``module(*example)`` must run); for a ``BasicGNN`` or a conv a random probe
            is made when None. Without a probe, other modules are returned unchecked,
            with a warning.
        atol: largest absolute output difference accepted on the probe.
        strict: raise :class:`Unconvertible` if any PyG conv stays (or the probe
            differs), instead of a warning.

    Returns the converted module; ``module.pyg_conversion`` (a dict) lists what was
    ``converted``, what was ``kept`` (with the reason) and whether it was ``checked``.
    The global random state is left as it was (building the twins and the random probe
    draw from it), so a seeded script runs the same with or without the conversion.
    """
    _check_arguments(module, example, atol)
    check_flags("from_pyg", strict=strict)
    cuda = sorted({t.device.index or 0 for t in module.parameters() if t.device.type == "cuda"})
    with torch.random.fork_rng(devices=cuda):
        return _from_pyg(module, example, atol, strict)


def _from_pyg(module: torch.nn.Module, example, atol: float, strict: bool) -> torch.nn.Module:
    if example is not None and _has_lazy_parameters(module):
        module = _materialized(module, example)
    kind = type(module).__name__
    if _is_pyg(module) and kind in _BASIC_GNNS and hasattr(module, "convs"):
        try:
            return _checked(module, _basic_gnn(module), example, atol, [kind], [])
        except Unconvertible as err:  # e.g. jumping knowledge: convert conv by conv
            warnings.warn(f"from_pyg: {kind} stays a PyG model with graphloc convs ({err}): "
                          "no layer pruning in influence", stacklevel=3)
    if _is_pyg_conv(module):
        converted, done, kept = _top_level_conv(module)
    else:
        converted = copy.deepcopy(module)
        done, kept = _replace_convs(converted)
    result = _checked(module, converted, example, atol, done, kept)
    if kept:
        message = "; ".join(f"{name}: {why}" for name, why in kept)
        if strict:
            raise Unconvertible(f"could not convert {message}")
        warnings.warn(f"from_pyg kept these PyG modules: {message}", stacklevel=3)
    return result


def _has_lazy_parameters(module: torch.nn.Module) -> bool:
    return any(torch.nn.parameter.is_lazy(t) for t in (*module.parameters(), *module.buffers()))


def _materialized(module: torch.nn.Module, example: tuple) -> torch.nn.Module:
    """A copy of a model with lazy widths (``in_channels=-1``), called once on the example
    in eval mode, so its weights are drawn: the model converted and checked is that copy,
    and the model passed stays as it was. Converting the lazy model itself, the probe drew
    its weights and the twin's separately, so the check failed ("outputs differ"), and the
    user's model had its weights drawn by the conversion."""
    copied = copy.deepcopy(module)
    traceless_run(copied, example, _run_original)
    return copied


def has_pyg_message_passing(module: torch.nn.Module) -> bool:
    """Whether ``module`` is or contains a PyG conv graphloc converts, or is a BasicGNN."""
    return any(_is_pyg(m) and (type(m).__name__ in _CONVERTERS or
                               type(m).__name__ in _BASIC_GNNS) for m in module.modules())


def _is_pyg(module) -> bool:
    return _is_pyg_class(type(module))


def _is_pyg_class(cls) -> bool:
    return cls.__module__.startswith("torch_geometric")


def _is_pyg_conv(module) -> bool:
    return _is_pyg(module) and type(module).__name__ in _CONVERTERS


def _top_level_conv(module):
    copied = copy.deepcopy(module)  # (the converted conv takes over its copy's parameters)
    try:
        return _convert_conv(copied), [type(module).__name__], []
    except Unconvertible as err:
        return copied, [], [(type(module).__name__, str(err))]


def _replace_convs(root: torch.nn.Module) -> tuple[list[str], list[tuple[str, str]]]:
    """Replaces every PyG conv below ``root`` in place; returns (converted, kept). kept
    also lists the PyG message-passing modules graphloc has no equivalent for (PNAConv,
    EdgeConv, ...): they stay, and the report must say so."""
    done, kept = [], []
    converted = {}  # id(PyG conv) -> its twin, or its Unconvertible: one per conv object
    # every name of every module, so a conv the model reaches under two names (an alias,
    # self.first = self.convs[0]) is replaced under both (named_modules lists it once)
    for name, child in list(root.named_modules(remove_duplicate=False)):
        if _inside(name, done):  # (the walk still lists a replaced module's children)
            continue
        if (_is_pyg_conv(child) or _is_pyg_basis_conv(child)) and name:
            parent_name, _, attr = name.rpartition(".")
            parent = root.get_submodule(parent_name) if parent_name else root
            if id(child) not in converted:
                try:
                    converted[id(child)] = _basis_conv(child) if _is_pyg_basis_conv(child) \
                        else _convert_conv(child)
                except Unconvertible as err:
                    converted[id(child)] = err
            twin = converted[id(child)]
            if isinstance(twin, Unconvertible):
                kept.append((name, str(twin)))
            else:
                setattr(parent, attr, twin)
                done.append(name)
        elif is_pyg_message_passing(child):
            kept.append((name or type(child).__name__,
                         f"{type(child).__name__} has no graphloc equivalent"))
    return done, kept


def _is_pyg_basis_conv(module) -> bool:
    """PyG's ``to_hetero_with_bases`` wrapper of a conv (its ``HeteroBasisConv``)."""
    return _is_pyg(module) and type(module).__name__ == "HeteroBasisConv"


def _basis_conv(module) -> HeteroBasisConv:
    """PyG's ``HeteroBasisConv`` as graphloc's: each copy converted without PyG's weighting
    hook, and its edge-type weights (the same Parameter) moved to the twin. Where a copy
    does not convert, the wrapper is kept whole (hook and weights put back)."""
    from torch_geometric.nn.to_hetero_with_bases_transformer import hook as weighting
    twins, stripped = [], []  # stripped: (conv, its message hooks before, its weights)
    try:
        for conv in module.convs:
            hooks = conv._message_forward_hooks
            stripped.append((conv, dict(hooks), conv._parameters.pop("edge_type_weight")))
            for key in [key for key, fn in hooks.items() if fn is weighting]:
                del hooks[key]
            twin = _convert_conv(conv)
            _require(getattr(type(twin), "explainable", False),
                     f"{type(twin).__name__} cannot weigh its messages edge by edge")
            twin.edge_type_weight = stripped[-1][2]
            twins.append(twin)
    except Unconvertible:
        for conv, hooks, weight in stripped:  # (the hooks in their order)
            conv._message_forward_hooks.clear()
            conv._message_forward_hooks.update(hooks)
            conv.edge_type_weight = weight
        raise
    return HeteroBasisConv.of_copies(twins)


def is_pyg_message_passing(module) -> bool:
    """A PyG conv of any kind (a subclass of PyG's MessagePassing), converted or not; not
    a graphloc conv's explain port (a MessagePassing for PyG's explainers only)."""
    return not is_explain_port(module) and any(
        base.__name__ == "MessagePassing" and _is_pyg_class(base)
        for base in type(module).__mro__)


def _inside(name: str, converted: list[str]) -> bool:
    """Whether module ``name`` lies below one that was replaced (the walk still lists the
    PyG original's children)."""
    return any(name.startswith(f"{parent}.") for parent in converted)


# --- one conv -----------------------------------------------------------------------------

def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise Unconvertible(reason)


def _gcn(conv):
    # pyg_improved_loops: PyG's improved loops weigh 1 when no edge weights are passed
    return gl_conv.GCNConv(conv.in_channels, conv.out_channels, improved=conv.improved,
                           cached=conv.cached, add_self_loops=conv.add_self_loops,
                           normalize=conv.normalize, bias=conv.bias is not None,
                           pyg_improved_loops=True)


def _aggregation_of(conv):
    """A conv's aggregation for graphloc's twin: a plain name builds graphloc's kernel; any
    other (learnable, a list with its mode, PyG's own) is PyG's module itself, copied:
    same parameters, same numbers."""
    plain = isinstance(conv.aggr, str) and conv.aggr in ("mean", "max", "min", "sum", "add",
                                                          "mul")
    return conv.aggr if plain else conv.aggr_module


def _sage(conv):
    return gl_conv.SAGEConv(conv.in_channels, conv.out_channels, aggr=_aggregation_of(conv),
                            normalize=conv.normalize, root_weight=conv.root_weight,
                            project=getattr(conv, "project", False),
                            bias=conv.lin_l.bias is not None)


def _gat(conv):
    return gl_conv.GATConv(conv.in_channels, conv.out_channels, heads=conv.heads,
                           concat=conv.concat,
                           negative_slope=conv.negative_slope, dropout=conv.dropout,
                           add_self_loops=conv.add_self_loops, edge_dim=conv.edge_dim,
                           fill_value=conv.fill_value, bias=conv.bias is not None,
                           residual=getattr(conv, "res", None) is not None)


def _gatv2(conv):
    return gl_conv.GATv2Conv(conv.in_channels, conv.out_channels, heads=conv.heads,
                             concat=conv.concat, negative_slope=conv.negative_slope,
                             dropout=conv.dropout, add_self_loops=conv.add_self_loops,
                             edge_dim=conv.edge_dim, fill_value=conv.fill_value,
                             bias=conv.bias is not None, share_weights=conv.share_weights,
                             residual=getattr(conv, "res", None) is not None)


def _gin(conv):
    return gl_conv.GINConv(conv.nn, eps=conv.initial_eps,
                           train_eps=isinstance(conv.eps, torch.nn.Parameter),
                           aggr=_aggregation_of(conv))


def _gine(conv):
    # (PyG's own Linear, which names its width in_channels)
    edge_dim = _input_width(conv.lin, 0) if getattr(conv, "lin", None) is not None else None
    return gl_conv.GINEConv(conv.nn, eps=conv.initial_eps,
                            train_eps=isinstance(conv.eps, torch.nn.Parameter), edge_dim=edge_dim)


def _cheb(conv):
    return gl_conv.ChebConv(conv.in_channels, conv.out_channels, K=len(conv.lins),
                            normalization=conv.normalization, bias=conv.bias is not None)


def _transformer(conv):
    return gl_conv.TransformerConv(conv.in_channels, conv.out_channels, heads=conv.heads,
                                   concat=conv.concat, beta=conv.beta, dropout=conv.dropout,
                                   edge_dim=conv.edge_dim, bias=conv.lin_skip.bias is not None
                                   if conv.lin_skip is not None else True,
                                   root_weight=conv.root_weight)


def _graph_conv(conv):
    # graphloc weights the plain aggregations inside one fused product; the others reduce
    # [E, F] weighted messages as PyG's conv does, so converting them would gain nothing
    _require(isinstance(conv.aggr, str) and conv.aggr in ("add", "sum", "mean", "max", "min"),
             f"aggr={conv.aggr!r} (graphloc's GraphConv fuses add, mean, max and min)")
    return gl_conv.GraphConv(conv.in_channels, conv.out_channels, aggr=conv.aggr,
                             bias=conv.lin_rel.bias is not None)


def _sg_conv(conv):
    return gl_conv.SGConv(conv.in_channels, conv.out_channels, K=conv.K, cached=conv.cached,
                          add_self_loops=conv.add_self_loops, bias=conv.lin.bias is not None)


def _appnp(conv):
    return gl_conv.APPNP(conv.K, conv.alpha, dropout=conv.dropout, cached=conv.cached,
                         add_self_loops=conv.add_self_loops, normalize=conv.normalize)


def _gcn2(conv):
    ours = gl_conv.GCN2Conv(conv.channels, conv.alpha, shared_weights=conv.weight2 is None,
                            cached=conv.cached, add_self_loops=conv.add_self_loops,
                            normalize=conv.normalize)
    ours.beta = conv.beta  # PyG keeps beta = log(theta / layer + 1), not theta and layer
    return ours


def _res_gated(conv):
    return gl_conv.ResGatedGraphConv(conv.in_channels, conv.out_channels,
                                     act=conv.act, edge_dim=conv.edge_dim,
                                     root_weight=conv.root_weight, bias=conv.bias is not None)


def _tag(conv):
    return gl_conv.TAGConv(conv.in_channels, conv.out_channels, K=conv.K,
                           bias=conv.bias is not None, normalize=conv.normalize)


def _gated_graph(conv):
    _require(isinstance(conv.aggr, str) and conv.aggr in ("add", "sum", "mean", "max", "min"),
             f"aggr={conv.aggr!r} (graphloc's GatedGraphConv fuses add, mean, max and min)")
    return gl_conv.GatedGraphConv(conv.out_channels, conv.num_layers, aggr=conv.aggr,
                                  bias=conv.rnn.bias_ih is not None)


def _gen(conv):
    mlp = list(conv.mlp)
    lins = [m for m in mlp if type(m).__name__ == "Linear"]  # PyG's Linear, or torch's
    norms = {torch.nn.BatchNorm1d: "batch", torch.nn.LayerNorm: "layer",
             torch.nn.InstanceNorm1d: "instance"}
    found = [norms[type(m)] for m in mlp if type(m) in norms]
    _require(len(mlp) == len(lins) + (len(lins) - 1) * (2 + bool(found)) and
             all(m in lins or type(m) in (torch.nn.ReLU, torch.nn.Dropout, *norms)
                 for m in mlp) and
             all(m.p == 0 for m in mlp if isinstance(m, torch.nn.Dropout)),
             "an MLP other than GENConv's own")
    hidden = getattr(lins[0], "out_features", getattr(lins[0], "out_channels", None))
    aggr, kwargs = _gen_aggregation(conv.aggr_module)
    return gl_conv.GENConv(conv.in_channels, conv.out_channels, aggr=aggr, aggr_kwargs=kwargs,
                           msg_norm=hasattr(conv, "msg_norm"),
                           learn_msg_scale=hasattr(conv, "msg_norm") and
                           conv.msg_norm.scale.requires_grad,
                           norm=found[0] if found else None, num_layers=len(lins),
                           expansion=hidden // conv.out_channels if len(lins) > 1 else 2,
                           eps=conv.eps, bias=lins[0].bias is not None,
                           edge_dim=conv.lin_edge.in_channels if hasattr(conv, "lin_edge")
                           else None)


def _gen_aggregation(module) -> tuple:
    """GENConv's aggregation: the softmax and the power mean as graphloc's (the temperature
    or power comes with the state dict), the plain reductions by name, any other PyG's own
    module."""
    name = type(module).__name__
    if name == "SoftmaxAggregation" and type(module).__module__.startswith("torch_geometric"):
        learn = isinstance(module.t, torch.nn.Parameter)
        return "softmax", dict(t=1.0 if learn else module.t, learn=learn,
                               semi_grad=module.semi_grad, channels=module.channels)
    if name == "PowerMeanAggregation" and type(module).__module__.startswith("torch_geometric"):
        learn = isinstance(module.p, torch.nn.Parameter)
        return "powermean", dict(p=1.0 if learn else module.p, learn=learn,
                                 channels=module.channels, clamp_min=module.min_value,
                                 clamp_max=module.max_value)
    plain = {"SumAggregation": "sum", "MeanAggregation": "mean", "MaxAggregation": "max",
             "MinAggregation": "min"}
    if name in plain:
        return plain[name], {}
    return copy.deepcopy(module), {}


_PNA_AGGREGATORS = {"SumAggregation": "sum", "MeanAggregation": "mean",
                    "MinAggregation": "min", "MaxAggregation": "max",
                    "VarAggregation": "var", "StdAggregation": "std"}


def _pna(conv):
    scaler = conv.aggr_module
    inner = scaler.aggr
    modules = list(inner.aggrs) if type(inner).__name__ == "MultiAggregation" else [inner]
    _require(type(inner).__name__ != "MultiAggregation" or inner.mode == "cat",
             "aggregators combined other than by concatenation")
    _require(all(type(m).__name__ in _PNA_AGGREGATORS for m in modules),
             "aggregators other than sum, mean, min, max, var and std")
    _require(all(not getattr(m, "semi_grad", False) for m in modules),
             "a var or std aggregator with semi_grad")
    pre = list(conv.pre_nns[0])
    post = list(conv.post_nns[0])
    acts = [m for m in pre[1::2] + post[1::2]]
    ours = gl_conv.PNAConv(
        conv.in_channels, conv.out_channels, [_PNA_AGGREGATORS[type(m).__name__]
                                              for m in modules],
        list(scaler.scaler), torch.ones(1), edge_dim=conv.edge_dim, towers=conv.towers,
        pre_layers=(len(pre) + 1) // 2, post_layers=(len(post) + 1) // 2,
        divide_input=conv.divide_input, act=copy.deepcopy(acts[0]) if acts else "relu",
        train_norm=isinstance(scaler.avg_deg_lin, torch.nn.Parameter))
    # the averages of the training graph's degrees (PyG keeps them, not the histogram)
    ours.aggr_module.init_avg_deg_lin = scaler.init_avg_deg_lin
    ours.aggr_module.init_avg_deg_log = scaler.init_avg_deg_log
    return ours


def _lg(conv):
    return gl_conv.LGConv(normalize=conv.normalize)


def _le(conv):
    return gl_conv.LEConv(conv.in_channels, conv.out_channels, bias=conv.lin1.bias is not None)


def _ssg(conv):
    return gl_conv.SSGConv(conv.in_channels, conv.out_channels, conv.alpha, K=conv.K,
                           cached=conv.cached, add_self_loops=conv.add_self_loops,
                           bias=conv.lin.bias is not None)


def _mixhop(conv):
    return gl_conv.MixHopConv(conv.in_channels, conv.out_channels, powers=conv.powers,
                              add_self_loops=conv.add_self_loops, bias=conv.bias is not None)


def _fa(conv):
    return gl_conv.FAConv(conv.channels, eps=conv.eps, dropout=conv.dropout, cached=conv.cached,
                          add_self_loops=conv.add_self_loops, normalize=conv.normalize)


def _cluster_gcn(conv):
    return gl_conv.ClusterGCNConv(conv.in_channels, conv.out_channels,
                                  diag_lambda=conv.diag_lambda,
                                  add_self_loops=conv.add_self_loops,
                                  bias=conv.lin_out.bias is not None)


def _agnn(conv):
    return gl_conv.AGNNConv(requires_grad=conv.requires_grad,
                            add_self_loops=conv.add_self_loops)


def _require_reduction(conv, name: str) -> None:
    """The conv's aggregation is one graphloc's twin reduces its messages with."""
    _require(conv.aggr in PYG_REDUCTIONS,
             f"aggr={conv.aggr!r} (graphloc's {name}: max, min, mean, add or sum)")


def _edge(conv):
    _require_reduction(conv, "EdgeConv")
    return gl_conv.EdgeConv(conv.nn, aggr=conv.aggr)


def _dynamic_edge(conv):
    _require_reduction(conv, "DynamicEdgeConv")
    return gl_conv.DynamicEdgeConv(conv.nn, conv.k, aggr=conv.aggr,
                                   num_workers=conv.num_workers)


def _gravnet(conv):
    _require(list(conv.aggr) == ["mean", "max"],
             f"aggr={conv.aggr!r} (graphloc's GravNetConv: PyG's mean and max)")
    _require(conv.flow == "source_to_target",
             f"flow={conv.flow!r} (graphloc's GravNetConv: PyG's, source_to_target)")
    return gl_conv.GravNetConv(conv.in_channels, conv.out_channels,
                               conv.lin_s.out_channels, conv.lin_h.out_channels, conv.k)


def _spline(conv):
    _require_reduction(conv, "SplineConv")
    return gl_conv.SplineConv(conv.in_channels, conv.out_channels, conv.dim,
                              conv.kernel_size.tolist(),
                              [bool(v) for v in conv.is_open_spline.tolist()],
                              degree=conv.degree, aggr=conv.aggr,
                              root_weight=conv.root_weight, bias=conv.bias is not None)


def _x_conv(conv):
    return gl_conv.XConv(conv.in_channels, conv.out_channels, conv.dim, conv.kernel_size,
                         hidden_channels=conv.hidden_channels, dilation=conv.dilation,
                         bias=conv.conv[-1].bias is not None, num_workers=conv.num_workers)


def _point(conv):
    _require_reduction(conv, "PointNetConv")
    return gl_conv.PointNetConv(conv.local_nn, conv.global_nn,
                                add_self_loops=conv.add_self_loops, aggr=conv.aggr)


def _label_propagation(model):
    from graphloc.nn.models.label_prop import LabelPropagation
    return LabelPropagation(model.num_layers, model.alpha)


def _rgcn(conv):
    twin = gl_conv.FastRGCNConv if type(conv).__name__ == "FastRGCNConv" else gl_conv.RGCNConv
    return twin(conv.in_channels, conv.out_channels, conv.num_relations,
                num_bases=conv.num_bases, num_blocks=conv.num_blocks,
                aggr=_aggregation_of(conv), root_weight=conv.root is not None,
                is_sorted=conv.is_sorted, bias=conv.bias is not None)


def _arma(conv):
    return gl_conv.ARMAConv(conv.in_channels, conv.out_channels, num_stacks=conv.num_stacks,
                            num_layers=conv.num_layers, shared_weights=conv.shared_weights,
                            act=conv.act, dropout=conv.dropout,
                            bias=conv.bias is not None)


def _simple(conv):
    return gl_conv.SimpleConv(_aggregation_of(conv), combine_root=conv.combine_root)


def _mf(conv):
    return gl_conv.MFConv(conv.in_channels, conv.out_channels, max_degree=conv.max_degree,
                          bias=conv.lins_l[0].bias is not None, aggr=_aggregation_of(conv))


def _cg(conv):
    return gl_conv.CGConv(conv.channels, dim=conv.dim, aggr=_aggregation_of(conv),
                          batch_norm=conv.batch_norm, bias=conv.lin_f.bias is not None)


def _general(conv):
    return gl_conv.GeneralConv(conv.in_channels, conv.out_channels, conv.in_edge_channels,
                               aggr=_aggregation_of(conv), skip_linear=conv.skip_linear,
                               directed_msg=conv.directed_msg, heads=conv.heads,
                               attention=conv.attention, attention_type=conv.attention_type,
                               l2_normalize=conv.normalize_l2,
                               bias=conv.lin_msg.bias is not None)


def _nn(conv):
    return gl_conv.NNConv(conv.in_channels, conv.out_channels, conv.nn,
                          aggr=_aggregation_of(conv), root_weight=conv.root_weight,
                          bias=conv.bias is not None)


def _gmm(conv):
    unset = [name for name, param in conv.named_parameters()
             if isinstance(param, torch.nn.parameter.UninitializedParameter)]
    _require(not unset, f"a lazy GMMConv not called yet ({', '.join(unset)} without a width)")
    src_width = conv.g.size(0)  # (PyG's in_channels stay -1 once a lazy conv is called)
    dst_width = conv.root.weight.size(1) if conv.root_weight else src_width
    return gl_conv.GMMConv(src_width if src_width == dst_width else (src_width, dst_width),
                           conv.out_channels, conv.dim, conv.kernel_size,
                           separate_gaussians=conv.separate_gaussians,
                           aggr=_aggregation_of(conv), root_weight=conv.root_weight,
                           bias=conv.bias is not None)


def _gate(conv):
    return gl_conv.GATEConv(conv.att_r.size(1), conv.att_l.size(1),
                            conv.lin1.in_features - conv.att_r.size(1), dropout=conv.dropout)


def _feast(conv):
    _require(not isinstance(conv.lin.weight, torch.nn.parameter.UninitializedParameter),
             "a lazy FeaStConv not called yet (lin and u without a width)")
    return gl_conv.FeaStConv(conv.lin.weight.size(1), conv.out_channels, heads=conv.heads,
                             add_self_loops=conv.add_self_loops,
                             bias=conv.bias is not None, aggr=_aggregation_of(conv))


def _pdn(conv):
    return gl_conv.PDNConv(conv.in_channels, conv.out_channels, conv.edge_dim,
                           conv.hidden_channels, add_self_loops=conv.add_self_loops,
                           normalize=conv.normalize, bias=conv.bias is not None)


def _wl_continuous(conv):
    return gl_conv.WLConvContinuous()


def _signed(conv):
    return gl_conv.SignedConv(conv.in_channels, conv.out_channels, conv.first_aggr,
                              bias=conv.lin_pos_r.bias is not None,
                              aggr=_aggregation_of(conv))


def _hypergraph(conv):
    lazy = isinstance(conv.lin.weight, torch.nn.parameter.UninitializedParameter)
    _require(not lazy, "a lazy HypergraphConv not called yet (lin without a width)")
    return gl_conv.HypergraphConv(  # (PyG's sets heads 1 and concat True without attention)
        conv.lin.weight.size(1), conv.out_channels, use_attention=conv.use_attention,
        attention_mode=conv.attention_mode, heads=conv.heads, concat=conv.concat,
        negative_slope=getattr(conv, "negative_slope", 0.2),
        dropout=getattr(conv, "dropout", 0.0), bias=conv.bias is not None)


def _film(conv):
    lazy = isinstance(conv.lin_skip.weight, torch.nn.parameter.UninitializedParameter)
    _require(not lazy, "a lazy FiLMConv not called yet (lins without a width)")
    _require(len(conv.lins) >= 1, "a FiLMConv of num_relations=0 (PyG's fails at its call)")
    widths = (conv.lins[0].weight.size(1), conv.lin_skip.weight.size(1))
    ours = gl_conv.FiLMConv(widths[0] if widths[0] == widths[1] else widths,
                            conv.out_channels, num_relations=conv.num_relations,
                            act=conv.act, aggr=_aggregation_of(conv))
    # the modulation networks taken over whole (PyG's Linears, or its copies of nn, with
    # their buffers and hooks)
    ours.films, ours.film_skip = conv.films, conv.film_skip
    return ours


def _cf(conv):
    # nn taken over, not copied: SchNet's interaction block holds it too (tied weights)
    return gl_conv.CFConv(conv.lin1.in_features, conv.lin2.out_features,
                          conv.lin1.out_features, conv.nn, conv.cutoff)


def _radius_interaction_graph(module):
    return RadiusInteractionGraph(module.cutoff, module.max_num_neighbors)


def _distance(module):
    return Distance(module.cutoff, module.max_num_neighbors, module.add_self_loops)


def _eg(conv):
    return gl_conv.EGConv(conv.in_channels, conv.out_channels, list(conv.aggregators),
                          num_heads=conv.num_heads, num_bases=conv.num_bases,
                          cached=conv.cached, add_self_loops=conv.add_self_loops,
                          bias=conv.bias is not None)


def _type_widths(conv, lins) -> dict:
    """A heterogeneous conv's input width per node type, from its Linear per type (a lazy
    conv not called yet has none: kept)."""
    lazy = [t for t, lin in lins.items()
            if isinstance(lin.weight, torch.nn.parameter.UninitializedParameter)]
    _require(not lazy, f"a lazy {type(conv).__name__} not called yet (no width for the node "
             f"types {lazy})")
    return {t: lin.weight.size(1) for t, lin in lins.items()}


def _hgt(conv):
    return gl_conv.HGTConv(_type_widths(conv, conv.kqv_lin.lins), conv.out_channels,
                           (conv.node_types, conv.edge_types), heads=conv.heads)


def _han(conv):
    return gl_conv.HANConv(_type_widths(conv, conv.proj), conv.out_channels, conv.metadata,
                           heads=conv.heads, negative_slope=conv.negative_slope,
                           dropout=conv.dropout)


def _sparse_linear(conv):
    return gl_conv.SparseLinear(conv.in_channels, conv.out_channels,
                                bias=conv.bias is not None)


def _rgat(conv):
    other = {name: getattr(conv, name) for name in ("num_blocks", "mod", "attention_mechanism",
                                                    "attention_mode", "dim", "edge_dim")}
    return gl_conv.RGATConv(conv.in_channels, conv.out_channels, conv.num_relations,
                            num_bases=conv.num_bases, heads=conv.heads, concat=conv.concat,
                            negative_slope=conv.negative_slope, dropout=conv.dropout,
                            bias=conv.bias is not None, **other)


def _supergat(conv):
    return gl_conv.SuperGATConv(
        conv.in_channels, conv.out_channels, heads=conv.heads, concat=conv.concat,
        negative_slope=conv.negative_slope, dropout=conv.dropout,
        add_self_loops=conv.add_self_loops, bias=conv.bias is not None,
        attention_type=conv.attention_type, neg_sample_ratio=conv.neg_sample_ratio,
        edge_sample_ratio=conv.edge_sample_ratio, is_undirected=conv.is_undirected)


def _dna(conv):
    heads = conv.multi_head
    return gl_conv.DNAConv(heads.in_channels, heads=heads.heads, groups=heads.groups,
                           dropout=heads.dropout, cached=conv.cached, normalize=conv.normalize,
                           add_self_loops=conv.add_self_loops, bias=conv.bias)


def _heat(conv):
    return gl_conv.HEATConv(
        conv.in_channels, conv.out_channels, conv.hetero_lin.num_types,
        conv.edge_type_emb.num_embeddings, conv.edge_type_emb.embedding_dim,
        conv.edge_attr_emb.in_channels, conv.edge_attr_emb.out_channels, heads=conv.heads,
        concat=conv.concat, negative_slope=conv.negative_slope, dropout=conv.dropout,
        root_weight=conv.root_weight, bias=conv.lin.bias is not None)


def _ppf(conv):
    _require_reduction(conv, "PPFConv")
    return gl_conv.PPFConv(conv.local_nn, conv.global_nn, add_self_loops=conv.add_self_loops,
                           aggr=conv.aggr)


def _point_gnn(conv):
    _require_reduction(conv, "PointGNNConv")
    return gl_conv.PointGNNConv(conv.mlp_h, conv.mlp_f, conv.mlp_g, aggr=conv.aggr)


def _wl(conv):
    ours = gl_conv.WLConv()
    ours.hashmap = conv.hashmap  # (the conversion's copy's): the colours it has numbered
    return ours


def _pan(conv):
    return gl_conv.PANConv(conv.in_channels, conv.out_channels, conv.filter_size)


def _pan_pooling(pool):
    """PyG's PANPooling, which reads the path matrix of PyG's PANConv (a torch-sparse
    ``SparseTensor``): converted with it, as graphloc's takes graphloc's ``M``. PyG's
    ``SelectTopK`` reads a ratio >= 1 as a count (``int(ratio)`` nodes per graph, so 1.0
    keeps one), graphloc's a float 1.0 as every node: the count is passed as one."""
    ratio = pool.ratio
    if pool.min_score is None and ratio >= 1:
        ratio = int(ratio)
    return PANPooling(pool.in_channels, ratio, pool.min_score, pool.multiplier,
                      pool.select.act)


def _point_transformer(conv):
    return gl_conv.PointTransformerConv(conv.in_channels, conv.out_channels, conv.pos_nn,
                                        conv.attn_nn, add_self_loops=conv.add_self_loops)


_CONVERTERS = {"GCNConv": _gcn, "SAGEConv": _sage, "GATConv": _gat, "GATv2Conv": _gatv2,
               "GINConv": _gin,
               "GINEConv": _gine, "ChebConv": _cheb, "TransformerConv": _transformer,
               "GraphConv": _graph_conv, "SGConv": _sg_conv, "APPNP": _appnp,
               "GCN2Conv": _gcn2, "ResGatedGraphConv": _res_gated,
               "TAGConv": _tag, "GatedGraphConv": _gated_graph, "GENConv": _gen,
               "PNAConv": _pna, "LGConv": _lg, "LEConv": _le,
               "SSGConv": _ssg, "MixHopConv": _mixhop, "FAConv": _fa,
               "ClusterGCNConv": _cluster_gcn, "AGNNConv": _agnn,
               "EdgeConv": _edge, "SimpleConv": _simple, "RGCNConv": _rgcn,
               "FastRGCNConv": _rgcn, "ARMAConv": _arma, "MFConv": _mf,
               "CGConv": _cg, "GeneralConv": _general, "EGConv": _eg, "NNConv": _nn,
               "GMMConv": _gmm, "FeaStConv": _feast,
               "PDNConv": _pdn, "WLConvContinuous": _wl_continuous,
               "SignedConv": _signed, "HypergraphConv": _hypergraph,
               "PointNetConv": _point, "LabelPropagation": _label_propagation, "GATEConv": _gate,
               "FiLMConv": _film, "CFConv": _cf, "HGTConv": _hgt,
               "HANConv": _han, "SparseLinear": _sparse_linear,
               "RGATConv": _rgat, "SuperGATConv": _supergat,
               "PointTransformerConv": _point_transformer, "DNAConv": _dna,
               "HEATConv": _heat, "WLConv": _wl, "PPFConv": _ppf,
               "PointGNNConv": _point_gnn, "DynamicEdgeConv": _dynamic_edge,
               "GravNetConv": _gravnet, "SplineConv": _spline, "XConv": _x_conv,
               "PANConv": _pan, "PANPooling": _pan_pooling}
# PyG modules that build a graph in the forward with pyg-lib's search, which is not here:
# SchNet's and ViSNet's (no aggregation; converted as the convs are)
_GRAPH_BUILDERS = {"RadiusInteractionGraph": _radius_interaction_graph, "Distance": _distance}
_CONVERTERS.update(_GRAPH_BUILDERS)


# the root maps PyG's forward skips when root_weight is False: a conv built with it and
# then switched off (PyG's DirGNNConv does so to its two copies) still holds them
_ROOT_MAPS = ("lin_r.", "lin_skip.")


def _used_state(conv, state: dict | None, ours: torch.nn.Module) -> dict:
    """The PyG conv's parameters and buffers that its forward reads (``state``, its
    ``state_dict`` taken before graphloc's conv was built, else its own): all of them, less
    the root maps when ``root_weight`` is False and graphloc's conv has none."""
    state = conv.state_dict() if state is None else state
    if getattr(conv, "root_weight", True) is False:
        wanted = ours.state_dict()
        state = {key: value for key, value in state.items()
                 if key in wanted or not key.startswith(_ROOT_MAPS)}
    return state


# the convs whose converters carry PyG's aggregation over; every other graphloc twin sums
# its messages, as its PyG conv does by default (PyG's MessagePassing takes aggr= for any)
_AGGREGATION_CARRIED = ("SAGEConv", "GINConv", "GraphConv", "GatedGraphConv", "GENConv",
                        "PNAConv", "EdgeConv", "SimpleConv", "RGCNConv", "FastRGCNConv",
                        "MFConv", "CGConv", "GeneralConv", "NNConv", "GMMConv", "FeaStConv",
                        "SignedConv", "PointNetConv", "FiLMConv", "PPFConv",
                        "PointGNNConv", "DynamicEdgeConv", "GravNetConv", "SplineConv")


def _convert_conv(conv) -> torch.nn.Module:
    name = type(conv).__name__
    _require(name in _CONVERTERS, f"{name} has no graphloc equivalent")
    _require(name in _AGGREGATION_CARRIED or getattr(conv, "aggr", "add") in ("add", "sum"),
             f"aggr={getattr(conv, 'aggr', None)!r} (graphloc's {name} sums its messages)")
    _check_pyg_steps(conv)
    # taken first: graphloc's conv takes over the conv's networks (nn, act, ...), and its
    # constructor resets them (a lazy conv's, not called yet, has no state to take)
    lazy = any(torch.nn.parameter.is_lazy(t) for t in (*conv.parameters(), *conv.buffers()))
    state = None if lazy else {key: value.clone() for key, value in conv.state_dict().items()}
    try:
        ours = _CONVERTERS[name](conv)
        # every converted conv reads its flow and node axis at each call (PyG's WLConv and
        # XConv, no MessagePassing, have neither)
        if hasattr(conv, "flow"):
            ours.flow = conv.flow
        ours.node_dim = getattr(conv, "node_dim", -2)
        ours.load_state_dict(_used_state(conv, state, ours), strict=True)
    except Exception as err:  # (an option graphloc's conv lacks shows up here)
        if state is not None:  # the kept PyG conv keeps its weights, whatever was reset
            conv.load_state_dict(state)
        if isinstance(err, Unconvertible):
            raise
        raise Unconvertible(f"{name}: {type(err).__name__}: {err}") from None
    _carry_call_hooks(conv, ours)
    ours = ours.to(_device_of(conv), _dtype_of(conv)).train(conv.training)
    _share_parameters(conv, ours)
    return ours


def _share_parameters(conv, ours: torch.nn.Module) -> None:
    """``ours``'s parameters become the PyG conv's own Parameter objects (same names, shapes
    and dtypes), so weights the model ties stay tied: two convs on one MLP, or SchNet's
    interaction block and its conv on one filter network. Copied into fresh parameters
    they were untied, and the converted model trained another model than PyG's. ``conv``
    is the conversion's private copy of the user's module (``from_pyg`` never changes the
    original)."""
    theirs = dict(conv.named_parameters())
    for name, param in list(ours.named_parameters()):
        source = theirs.get(name)
        if source is not None and source.shape == param.shape and source.dtype == param.dtype:
            path, _, attr = name.rpartition(".")
            setattr(ours.get_submodule(path) if path else ours, attr, source)


# PyG's hooks on the steps of its propagate, which graphloc's fused convs do not take
_STEP_HOOKS = tuple(f"_{step}_forward{kind}_hooks" for step in (
    "propagate", "message", "aggregate", "message_and_aggregate", "edge_update")
    for kind in ("_pre", ""))


# PyG's caches of cached=True convs (GCNConv, APPNP, GCN2Conv, FAConv; SGConv; SSGConv)
_PYG_CACHES = ("_cached_edge_index", "_cached_adj_t", "_cached_x", "_cached_h")


def _check_pyg_steps(conv) -> None:
    """Refuses what graphloc's conv would drop without a word: hooks on PyG's message,
    aggregate and propagate steps or steps set on the conv object, an explainer's edge
    mask, and a filled cache (PyG's
    reuses the first graph's normalisation on any later graph; a fresh twin would
    normalise the next one)."""
    filled = [attr for attr in _PYG_CACHES if getattr(conv, attr, None) is not None]
    _require(not filled, f"cached=True with a filled cache ({', '.join(filled)}): PyG's "
             "reuses its first graph's normalisation on any later graph; clear it "
             "(conv.reset_parameters() or conv._cached_edge_index = None) to convert")
    replaced = [step for step in PYG_STEPS if step in vars(conv)
                and not _pygs_own_step(conv, step, vars(conv)[step])]
    _require(not replaced, f"its own {', '.join(replaced)} set on the conv object, which "
             "graphloc's conv has no step for")
    hooked = [attr.strip("_") for attr in _STEP_HOOKS if getattr(conv, attr, None)]
    _require(not hooked, f"hooks on PyG's message-passing steps ({', '.join(hooked)}), "
             "which graphloc's conv has no step for")
    _require(not getattr(conv, "explain", False) and getattr(conv, "_edge_mask", None) is None,
             "explain mode (an explainer's edge mask, which graphloc's conv does not apply)")


def _pygs_own_step(conv, name: str, value) -> bool:
    """Whether ``value``, set on the conv object as its ``name``, is PyG's own: its explain
    mode and ``decomposed_layers`` set ``conv.propagate`` to the class's plain or compiled
    ``propagate`` (``_orig_propagate``, ``_jinja_propagate``), bound to the conv."""
    own = {getattr(type(conv), f"{prefix}{name}", None) for prefix in ("", "_orig_", "_jinja_")}
    return getattr(value, "__self__", None) is conv and getattr(value, "__func__", None) in own


def _carry_call_hooks(conv, ours: torch.nn.Module) -> None:
    """The conv's own forward and backward hooks, on graphloc's conv (copies of torch's
    hook tables: the caller's conv keeps its own). A hooked submodule must be in graphloc's
    conv under its name with its hooks (GIN's network is a copy); a map graphloc's conv
    reads as a weight (PyG's ``lin``) would not call its hooks, so such a conv is kept."""
    for name, sub in conv.named_modules():
        if not name or not has_call_hooks(sub):
            continue
        try:
            twin = ours.get_submodule(name)
        except AttributeError:
            twin = None
        _require(twin is not None and all(
            list(getattr(twin, attr).values()) == list(getattr(sub, attr).values())
            for attr in CALL_HOOKS if hasattr(sub, attr)),
            f"hooks on its submodule {name!r}, which graphloc's conv does not call")
    for attr in CALL_HOOKS:
        if hasattr(conv, attr):
            setattr(ours, attr, copy.copy(getattr(conv, attr)))
    ours._is_full_backward_hook = conv._is_full_backward_hook


# --- a BasicGNN as a GNN ------------------------------------------------------------------

def _basic_gnn(model) -> torch.nn.Module:
    from graphloc.nn.models.gnn import GNN
    _require(getattr(model, "jk_mode", None) is None and not hasattr(model, "lin"),
             "jumping knowledge (graphloc's GNN has none)")
    _require(not model.act_first or model.act is None, "act_first=True")
    hooked = [name or "the model" for name, m in model.named_modules()
              if has_call_hooks(m) and not name.startswith("convs.")]
    _require(not hooked, f"hooks on {', '.join(hooked)} (GNN builds its own)")
    act = model.act
    _require(act is None or isinstance(act, torch.nn.Module), f"activation {act!r}")
    norm = _norm_kind(model.norms[:-1] if len(model.norms) == model.num_layers
                      else model.norms)
    convs = [_convert_conv(conv) for conv in copy.deepcopy(model.convs)]  # (see _share_...)
    first = model.convs[0]
    try:  # a layout GNN cannot build falls back to converting conv by conv
        gnn = GNN(_BASIC_GNNS[type(model).__name__], _width(first, "in"),
                  model.hidden_channels, _width(model.convs[-1], "out"), model.num_layers,
                  dropout=model.dropout.p, act="identity", norm=norm, **_head_layout(model))
    except (ValueError, TypeError) as err:
        raise Unconvertible(f"graphloc's GNN: {err}") from None
    gnn.convs = torch.nn.ModuleList(convs)
    if act is not None:  # any activation, with its own arguments and weights (PReLU's)
        gnn.act = copy.deepcopy(act)
    gnn = gnn.to(_device_of(model), _dtype_of(model)).train(model.training)
    for ours, theirs in zip(gnn.norms, copy.deepcopy(model.norms), strict=False):
        inner = getattr(theirs, "module", theirs)  # PyG's BatchNorm wraps torch's
        ours.load_state_dict(inner.state_dict(), strict=True)
        _share_parameters(inner, ours)  # (a frozen norm stays frozen)
    return gnn


def _head_layout(model) -> dict:
    """A GAT's heads and whether its hidden convs concatenate them, for the GNN built
    around the converted convs: with GNN's default of 4 heads, a hidden width that 4 does
    not divide (PyG's default is 1 head) raised about heads the user never chose."""
    first = model.convs[0]
    if not hasattr(first, "heads"):
        return {}
    return {"heads": first.heads, **({"concat": first.concat} if model.num_layers > 1 else {})}


def _norm_kind(norms) -> str | None:
    kinds = set()
    for norm in norms:
        name = type(norm).__name__
        if name == "Identity":
            kinds.add(None)
        elif name == "BatchNorm" and isinstance(getattr(norm, "module", None),
                                                torch.nn.BatchNorm1d):
            kinds.add("batch")
        elif name == "LayerNorm" and getattr(norm, "mode", None) == "node":
            kinds.add("layer")
        else:
            mode = f" mode={norm.mode!r}" if hasattr(norm, "mode") else ""
            raise Unconvertible(f"norm {name}{mode} (graphloc's GNN: batch_norm, or "
                                "layer_norm with mode='node')")
    _require(len(kinds) <= 1, "different norms per layer")
    return kinds.pop() if kinds else None


def _width(conv, side: str) -> int:
    if side == "in":
        width = getattr(conv, "in_channels", None)
        if width is None:  # GIN: the MLP's first layer
            width = _features(_mlp_linears(conv)[0], "in")
    else:
        width = getattr(conv, "out_channels", None)
        if width is None:
            width = _features(_mlp_linears(conv)[-1], "out")
        elif getattr(conv, "concat", False):
            width *= conv.heads
    _require(isinstance(width, int) and width > 0, f"lazy in_channels ({width})")
    return width


def _mlp_linears(conv) -> list[torch.nn.Module]:
    """The Linear layers of a conv's MLP ``nn`` (GIN's); a conv without widths or an MLP
    (LGConv) has no width to read."""
    linears = _linears(getattr(conv, "nn", torch.nn.Identity()))
    _require(bool(linears), f"no width: {type(conv).__name__} has neither in_channels nor "
             "an MLP")
    return linears


def _linears(module) -> list[torch.nn.Module]:
    """The Linear layers of a GIN MLP (torch's or PyG's ``Linear``), in order."""
    return [m for m in module.modules() if hasattr(m, "in_features") or
            (type(m).__name__ == "Linear" and hasattr(m, "in_channels"))]


def _features(linear, side: str) -> int:
    """in or out width of torch's Linear (``in_features``) or PyG's (``in_channels``)."""
    return getattr(linear, f"{side}_features", None) or getattr(linear, f"{side}_channels")


def _dtype_of(module) -> torch.dtype:
    for p in module.parameters():
        return p.dtype
    return torch.float32


def _device_of(module) -> torch.device:
    """The device of the module's first parameter or buffer (a conv on a GPU gets its twin
    there), else the CPU."""
    for t in (*module.parameters(), *module.buffers()):
        return t.device
    return torch.device("cpu")


# --- the probe ----------------------------------------------------------------------------

def _check_arguments(module, example, atol) -> None:
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_pyg: module must be a torch.nn.Module, got "
                        f"{type(module).__name__}")
    if example is not None and not isinstance(example, (tuple, list)):
        raise TypeError(f"from_pyg: example must be a tuple such as (x, edge_index), got "
                        f"{type(example).__name__}")
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not atol >= 0:
        raise ValueError(f"from_pyg: atol must be a number >= 0, got {atol!r}")


def _run_original(original, probe):
    """The original on the probe; its failure is the caller's bad example, said so."""
    try:
        return original(*probe)
    except Exception as err:
        raise ExampleFailed(f"from_pyg: the original module fails on example "
                         f"({type(err).__name__}: {err}); pass an example=(x, edge_index) "
                         "it accepts") from err


def _probe(module, example):
    if example is not None:
        return example
    width = None
    if isinstance(getattr(module, "in_channels", None), int) and hasattr(module, "convs"):
        width = module.in_channels  # a BasicGNN (EdgeCNN's first MLP reads 2 x in)
    elif hasattr(module, "convs"):
        try:
            width = _width(module.convs[0], "in")
        except Unconvertible:  # no width to probe at (LightGCN's LGConvs: no parameters)
            return None
    elif _is_pyg_conv(module) and type(module).__name__ in ("HGTConv", "HANConv"):
        return _heterogeneous_probe(module)
    elif _is_pyg_conv(module) and type(module).__name__ == "SparseLinear":
        # (LINKX's adjacency layer: a weight row per node, called layer(edge_index))
        gen = torch.Generator().manual_seed(0)
        return (torch.randint(0, module.in_channels, (2, 60), generator=gen),)
    elif _is_pyg_conv(module) and type(module).__name__ == "DNAConv":
        return _dna_probe(module)
    elif _is_pyg_conv(module) and type(module).__name__ == "HEATConv":
        return _heat_probe(module)
    elif _is_pyg_conv(module) and type(module).__name__ == "DynamicEdgeConv":
        # (x[, batch]): points in 4 examples, its network's input width halved
        return _points_probe(module, _input_width(module.nn, 2) // 2)
    elif _is_pyg_conv(module) and type(module).__name__ == "GravNetConv":
        return _points_probe(module, module.in_channels)
    elif _is_pyg_conv(module) and type(module).__name__ == "XConv":  # (x, pos, batch)
        x, batch = _points_probe(module, module.in_channels)
        gen = torch.Generator().manual_seed(1)
        pos = torch.randn(x.size(0), module.dim, generator=gen, dtype=x.dtype)
        return x, pos, batch
    elif _is_pyg_conv(module) and type(module).__name__ == "WLConv":  # colours, integers
        gen = torch.Generator().manual_seed(0)
        return (torch.randint(0, 3, (20,), generator=gen),
                torch.randint(0, 20, (2, 60), generator=gen))
    elif _is_pyg_conv(module) and type(module).__name__ in ("GINConv", "GINEConv"):
        return _gin_probe(module)
    elif _is_pyg_conv(module) and type(module).__name__ == "EdgeConv":  # nn([x_i, x_j - x_i])
        width = _input_width(module.nn, 0) // 2
    elif _is_pyg_conv(module):  # (GatedGraphConv has no in_channels: its state width)
        width = getattr(module, "in_channels", getattr(module, "out_channels", None))
        width = width if isinstance(width, int) else getattr(module, "channels", None)
        width = width if isinstance(width, int) else None
        if width is None and all(p.numel() <= 1 for p in module.parameters()):
            width = 8  # no weights but scalars, so any width (APPNP, LGConv, AGNNConv)
    if not width or width < 0:
        return None
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 20, (2, 60), generator=gen)
    x = torch.randn(20, width, generator=gen, dtype=_dtype_of(module))
    if type(module).__name__ in ("GCN2Conv", "FAConv"):  # (x, x_0, edge_index[, weights])
        x_0 = torch.randn(20, width, generator=gen, dtype=x.dtype)
        weights = () if module.normalize else (torch.rand(60, generator=gen, dtype=x.dtype),)
        return x, x_0, edge_index, *weights
    if type(module).__name__ == "PointTransformerConv":  # (x, pos, edge_index)
        pos = torch.randn(20, _input_width(module.pos_nn, 3), generator=gen, dtype=x.dtype)
        return x, pos, edge_index
    edge_dim = getattr(module, "edge_dim", None)
    if type(module).__name__ in ("RGCNConv", "FastRGCNConv", "RGATConv"):  # (.., edge_type)
        edge_type = torch.randint(0, module.num_relations, (60,), generator=gen)
        if not isinstance(edge_dim, int):
            return x, edge_index, edge_type
        return x, edge_index, edge_type, torch.randn(60, edge_dim, generator=gen, dtype=x.dtype)
    if type(module).__name__ == "SplineConv":  # (x, edge_index, pseudo-coordinates in [0, 1])
        return x, edge_index, torch.rand(60, module.dim, generator=gen, dtype=x.dtype)
    if type(module).__name__ == "FiLMConv" and module.num_relations > 1:  # (.., edge_type)
        return x, edge_index, torch.randint(0, module.num_relations, (60,), generator=gen)
    if type(module).__name__ == "ClusterGCNConv" and not module.add_self_loops:
        # PyG's adds node i's weight to the i-th loop: right for one loop per node, in order
        loops = torch.arange(20).repeat(2, 1)
        return x, torch.cat([loops, edge_index[:, edge_index[0] != edge_index[1]]], dim=1)
    # edge features at the width the conv reads them (NNConv's network, GMMConv's and
    # CGConv's pseudo-coordinates)
    edge_dim = _edge_width(module, edge_dim)
    if not isinstance(edge_dim, int):
        return x, edge_index
    # a conv built with edge_dim is checked on its edge path (PyG's ResGatedGraphConv needs
    # edge features then)
    return x, edge_index, torch.randn(60, edge_dim, generator=gen, dtype=x.dtype)


def _edge_width(conv, edge_dim):
    """The width of the edge features ``conv`` is called with, or ``edge_dim`` as given."""
    kind = type(conv).__name__
    if kind == "NNConv":
        return _input_width(conv.nn, 1)
    if kind in ("GMMConv", "CGConv") and isinstance(conv.dim, int) and conv.dim > 0:
        return conv.dim
    return edge_dim


def _gin_probe(conv):
    """``(x, edge_index[, edge_attr])`` for a GINConv or GINEConv at its network's input
    width (None where no module states one); GINE's edges at its ``edge_dim``, else at the
    node width its messages add them to."""
    width = _input_width(conv.nn, 0)
    if not width:
        return None
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(20, width, generator=gen, dtype=_dtype_of(conv))
    edge_index = torch.randint(0, 20, (2, 60), generator=gen)
    if type(conv).__name__ == "GINConv":
        return x, edge_index
    lin = getattr(conv, "lin", None)  # edge_dim -> width, where GINE was built with edge_dim
    edge_width = width if lin is None else _input_width(lin, width)
    return x, edge_index, torch.randn(60, edge_width, generator=gen, dtype=x.dtype)


def _points_probe(conv, width: int):
    """``(x [20, width], batch)`` for a conv that finds its own neighbours: 20 points in
    four examples of five; None while the width is lazy."""
    if width <= 0:
        return None
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(20, width, generator=gen, dtype=_dtype_of(conv))
    return x, torch.arange(4).repeat_interleave(5)


def _dna_probe(conv):
    """``(x [20, 3, channels], edge_index[, edge_weight])`` for a DNAConv: three layers'
    representations per node; edge weights where it does not normalise (PyG's needs
    them then)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(20, 3, conv.multi_head.in_channels, generator=gen, dtype=_dtype_of(conv))
    edge_index = torch.randint(0, 20, (2, 60), generator=gen)
    if conv.normalize:
        return x, edge_index
    return x, edge_index, torch.rand(60, generator=gen, dtype=x.dtype)


def _heat_probe(conv):
    """``(x, edge_index, node_type, edge_type, edge_attr)`` for a HEATConv: 20 nodes of
    random types, 60 edges of random types and features."""
    gen = torch.Generator().manual_seed(0)
    dtype = _dtype_of(conv)
    return (torch.randn(20, conv.in_channels, generator=gen, dtype=dtype),
            torch.randint(0, 20, (2, 60), generator=gen),
            torch.randint(0, conv.hetero_lin.num_types, (20,), generator=gen),
            torch.randint(0, conv.edge_type_emb.num_embeddings, (60,), generator=gen),
            torch.randn(60, conv.edge_attr_emb.in_channels, generator=gen, dtype=dtype))


def _input_width(network: torch.nn.Module, default: int) -> int:
    """The input width of a network: its first module (itself included) that states one
    (torch's ``in_features``, PyG's ``Linear`` and ``MLP`` ``in_channels``), else
    ``default``."""
    for module in network.modules():
        for name in ("in_features", "in_channels"):
            width = getattr(module, name, None)
            if isinstance(width, int) and width > 0:
                return width
    return default


def _heterogeneous_probe(conv):
    """``(x_dict, edge_index_dict)`` for an HGTConv or HANConv: 20 nodes of each node type
    at its width (its first Linear's, which a lazy conv's first call sets), 60 random edges
    per relation; None while a width is lazy."""
    hgt = type(conv).__name__ == "HGTConv"
    lins = conv.kqv_lin.lins if hgt else conv.proj
    relations = conv.edge_types if hgt else conv.metadata[1]
    weights = {t: lin.weight for t, lin in lins.items()}
    if any(torch.nn.parameter.is_lazy(w) for w in weights.values()):
        return None
    gen = torch.Generator().manual_seed(0)
    x_dict = {t: torch.randn(20, w.size(1), generator=gen, dtype=_dtype_of(conv))
              for t, w in weights.items()}
    return x_dict, {tuple(r): torch.randint(0, 20, (2, 60), generator=gen) for r in relations}


def _checked(original, converted, example, atol, done, kept):
    probe = _probe(original, example)
    report = {"converted": done, "kept": kept, "checked": probe is not None}
    if probe is None:
        warnings.warn("from_pyg: no probe to check the converted module on; pass "
                      "example=(x, edge_index)", stacklevel=3)
    else:
        want = traceless_run(_runnable(original), probe, _run_original)
        got = traceless_run(converted, probe, lambda module, args: module(*args))
        difference, mismatch = _output_difference(want, got)
        if mismatch is not None:
            raise Unconvertible(f"the converted module's outputs differ in form from the "
                                f"original's on the probe: {mismatch}")
        if not difference <= atol:
            raise Unconvertible(f"the converted module's outputs differ from the original's "
                                f"on the probe by {difference:.3g}")
        report["max_difference"] = difference
    converted.pyg_conversion = report
    return converted


def _runnable(original: torch.nn.Module) -> torch.nn.Module:
    """The original to check the converted module against: itself, or where it builds its
    graphs with pyg-lib (SchNet, ViSNet), a copy with only those modules graphloc's, its
    convs PyG's (without pyg-lib PyG's own cannot run: "'radius_graph' requires
    'pyg-lib>=0.6.0'")."""
    builders = [name for name, module in original.named_modules()
                if _is_pyg(module) and type(module).__name__ in _GRAPH_BUILDERS]
    if not builders:
        return original
    copied = copy.deepcopy(original)
    for name in builders:
        copied.set_submodule(name, _convert_conv(copied.get_submodule(name)))
    return copied


# what a call leaves in a module besides its outputs: PyG's caches of cached=True convs,
# graphloc's record of the input a cache was built from, and WLConv's colour dictionary
_CALL_STATE = (*_PYG_CACHES, "_cached_input", "hashmap")


@contextlib.contextmanager
def _call_state_kept(*modules: torch.nn.Module):
    """Runs the probe without a trace in ``modules``: their convs' caches and colour
    dictionaries as before it. The probe filled the caches of ``cached=True`` convs, the
    user's own model's among them, which then reused the probe graph's normalisation on
    every later graph without a word (PyG's says nothing), and a converted conv's cache
    refused the user's first graph."""
    kept = [(module, name, getattr(module, name)) for root in modules
            for module in root.modules() for name in _CALL_STATE if name in vars(module)]
    contents = [dict(value) if isinstance(value, dict) else None for _, _, value in kept]
    try:
        yield
    finally:
        for (module, name, value), content in zip(kept, contents, strict=True):
            if content is not None:  # the same dictionary, its entries as they were
                value.clear()
                value.update(content)
            setattr(module, name, value)


def traceless_run(module: torch.nn.Module, args: tuple, run):
    """``run(module, args)`` in eval mode without gradients, leaving no trace: the mode,
    and the caches and colour dictionaries (``_call_state_kept``), as they were."""
    was = module.training
    module.eval()
    try:
        with torch.no_grad(), _call_state_kept(module):
            return run(module, args)
    finally:
        module.train(was)


@contextlib.contextmanager
def caches_set_aside(model: torch.nn.Module):
    """``model`` with every ``cached=True`` conv (PyG's or graphloc's) computing afresh on
    each graph, its cache set aside and restored afterwards, with the flag. For runs on
    many subgraphs of one graph (the influence measurement's balls): a cache keeps the
    first graph's normalisation, or SGConv's its propagated features, for every later
    call, so the balls after the first were computed with the first ball's (PyG's says
    nothing; graphloc's warned, or refused another node count)."""
    held = [module for module in model.modules() if getattr(module, "cached", None) is True
            and any(name in vars(module) for name in _PYG_CACHES)]
    saved = [(module, {name: getattr(module, name) for name in _PYG_CACHES
                       if name in vars(module)}) for module in held]
    try:
        for module, state in saved:
            module.cached = False
            for name in state:
                setattr(module, name, None)
        yield model
    finally:
        for module, state in saved:
            module.cached = True
            for name, value in state.items():
                setattr(module, name, value)


def _output_difference(want, got) -> tuple[float, str | None]:
    """The largest absolute difference over every tensor of two outputs of one structure
    (a tensor, or tuples, lists and dicts of them: a heterogeneous model returns a dict,
    and a second output is checked as the first), entries equal or NaN in both counting 0;
    or the reason the two cannot be compared."""
    want_leaves, want_form = tree_flatten(want)
    got_leaves, got_form = tree_flatten(got)
    if want_form != got_form:
        return math.inf, f"{got_form} against {want_form}"
    largest = 0.0
    for w, g in zip(want_leaves, got_leaves, strict=True):
        if not isinstance(w, Tensor) or not isinstance(g, Tensor):
            if type(w) is not type(g) or w != g:
                return math.inf, f"{g!r} against {w!r}"
            continue
        if w.shape != g.shape:
            return math.inf, f"shapes {list(g.shape)} against {list(w.shape)}"
        w, g = (t.to_dense() if t.layout != torch.strided else t for t in (w, g))
        w, g = w.detach().double(), g.detach().double()
        agree = (w == g) | (w.isnan() & g.isnan())
        if w.numel():
            largest = max(largest, float(torch.where(agree, 0.0, (w - g).abs()).max()))
    return largest, None
