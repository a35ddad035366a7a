"""Every float argument of every public layer, aggregation and model of graphloc.nn that
constructs from the usual arguments: NaN and inf are refused at construction, naming the
argument. Several took them quietly and returned NaN outputs (GINConv's eps, GENConv's t,
the LeakyReLU slopes of HypergraphConv, RGATConv, HANConv and HEATConv, ...)."""

import inspect
import math

import pytest
import torch

import graphloc.nn as gl
import graphloc.nn.aggr as aggr

# a value chosen as an output where there is nothing to aggregate or no edge attribute:
# NaN there is the caller's explicit wish, not a setting that breaks the computation
EXPLICIT_FILLS = {"fill_value"}

USUAL = dict(in_channels=8, out_channels=4, channels=8, hidden_channels=8, num_layers=2, K=2,
             heads=2, num_heads=2, num_relations=3, kernel_size=3, dim=2, num_nodes=10,
             num_classes=3, alpha=0.1, edge_dim=3, quantiles=[0.5], q=0.5, k=3,
             space_dimensions=2, propagate_dimensions=4, num_edge_types=3, num_node_types=3,
             edge_type_emb_dim=4, edge_attr_emb_dim=4, embedding_dim=4, walk_length=4,
             context_size=2, codebook_size=4, aggregators=["mean"], scalers=["identity"],
             deg=torch.tensor([0, 3, 5]), powers=[0, 1], aggrs=["mean", "max"],
             scaler="identity", cutoff=5.0, num_codes=4, num_filters=8, node_in=8, edge_in=3,
             hidden=8,
             metadata=(["a", "b"], [("a", "to", "b"), ("b", "to", "a")]))
MODULES = {"nn", "mlp", "module", "local_nn", "global_nn"}


def _usual(param, cls):
    if param.name in MODULES:
        return torch.nn.Linear(8, 4 if "GIN" in cls.__name__ else 8)
    if param.name == "conv":  # a conv to wrap, or a registered conv's name for a stack
        return gl.GCNConv(8, 8) if cls.__name__ == "DirGNNConv" else "gcn"
    if param.name == "aggr" and cls.__name__ == "DegreeScalerAggregation":
        return "mean"
    if param.name == "in_channels" and cls.__name__ in ("LATTE", "HANConv"):
        return {"a": 8, "b": 8}
    if param.name == "out_channels" and cls.__name__ == "UGTLayer":
        return 8  # (its residual needs in_channels == out_channels)
    if param.name == "target":
        return "a"
    if param.name == "edge_index":
        return torch.tensor([[0, 1], [1, 0]])
    return USUAL.get(param.name, inspect.Parameter.empty)


def _float_arguments():
    """(class, required arguments, float argument name) for each constructible class."""
    classes = {obj for module in (gl, aggr) for obj in vars(module).values()
               if inspect.isclass(obj) and issubclass(obj, torch.nn.Module)
               and obj.__module__.startswith("graphloc")}
    cases = []
    for cls in sorted(classes, key=lambda c: c.__name__):
        params = [p for p in inspect.signature(cls.__init__).parameters.values()
                  if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        required = {p.name: _usual(p, cls) for p in params
                    if p.default is p.empty or p.name in ("target", "metadata")}
        if inspect.Parameter.empty in required.values():
            continue
        try:
            cls(**required)
        except (ValueError, TypeError):
            continue
        for p in params:
            is_float = isinstance(p.default, float) or (
                "float" in str(p.annotation) and not isinstance(p.default, bool))
            if is_float and p.name not in EXPLICIT_FILLS:
                cases.append((cls, required, p.name))
    return cases


CASES = _float_arguments()


def test_the_sweep_reaches_the_layers_it_is_meant_to():
    names = {(cls.__name__, name) for cls, _, name in CASES}
    assert len(CASES) > 60
    for expected in [("GINConv", "eps"), ("GENConv", "t"), ("GATConv", "negative_slope"),
                     ("HypergraphConv", "negative_slope"), ("SoftmaxAggregation", "t"),
                     ("PowerMeanAggregation", "clamp_max"), ("LiftBlock", "scale_init"),
                     ("APPNP", "alpha"), ("ForwardGNN", "theta"),
                     ("LabelPropagation", "alpha"), ("GNN", "dropout"), ("CFConv", "cutoff"),
                     ("EMACodebook", "eps"), ("HANConv", "negative_slope"),
                     ("LATTE", "edge_threshold"), ("UGTLayer", "dropout"),
                     ("MEGAGNN", "final_dropout")]:
        assert expected in names


@pytest.mark.parametrize("cls, required, name", CASES,
                         ids=[f"{c.__name__}.{n}" for c, _, n in CASES])
def test_a_float_argument_that_is_not_finite_is_refused_by_name(cls, required, name):
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises((ValueError, TypeError), match=name):
            cls(**{**required, name: bad})


def test_power_mean_bounds_must_be_ordered():
    with pytest.raises(ValueError, match="clamp_min must be <= clamp_max, got 5 > 1"):
        aggr.PowerMeanAggregation(p=2.0, clamp_min=5, clamp_max=1)
    aggr.PowerMeanAggregation(p=2.0, clamp_min=None, clamp_max=None)  # no bounds
