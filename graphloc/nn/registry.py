"""The model registry and ``build_model``: every registered conv as a ``GNN`` stack, whole
models by name, and ``"la-<conv>"`` for local augmentation. Above both ``nn.conv`` and
``nn.models``, so neither imports it."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from graphloc.checks import caller_stacklevel, check_int
from graphloc.nn.conv._utils import check_dropouts
from graphloc.nn.conv.registry import CONVS
from graphloc.nn.models.adgn import ADGN
from graphloc.nn.models.aug import LAModel
from graphloc.nn.models.chebnet import ChebNet
from graphloc.nn.models.forward import ForwardGNN
from graphloc.nn.models.gnn import DAGNN, GNN
from graphloc.nn.models.largegt import LargeGT
from graphloc.nn.models.latte import LATTE
from graphloc.nn.models.lift import LiftGCN
from graphloc.nn.models.mlp import CityNetworksMLP
from graphloc.nn.models.sgformer import SGFormer
from graphloc.nn.models.tangnn import (
    TANGNN,
    TANGNNReleased,
    TANGNNReleasedFLC,
    TANGNNReleasedPooled,
)
from graphloc.nn.models.ugt import UGT

#: model name -> factory(in_channels, hidden_channels, out_channels, num_layers, **kwargs):
#: every registered conv as a ``GNN`` stack, plus whole models such as "dagnn".
MODELS: dict[str, Callable[..., torch.nn.Module]] = {}


def register_model(name: str):
    """Registers a model factory under ``name`` for ``build_model``, the CLI and examples."""
    def decorate(factory):
        if name in MODELS or name in CONVS:
            raise ValueError(f"a model or conv named {name!r} is already registered")
        MODELS[name] = factory
        return factory
    return decorate


register_model("dagnn")(lambda in_channels, hidden_channels, out_channels, num_layers, **kw:
                        DAGNN(in_channels, hidden_channels, out_channels, K=num_layers, **kw))


# The City-Networks paper's Chebyshev baseline (projections, SiLU, K = 2), not GNN("cheb")
register_model("chebnet")(ChebNet)
# and its MLP baseline (PyG's MLP: batch norm, ReLU), which reads no edge
register_model("mlp")(CityNetworksMLP)
register_model("liftgcn")(LiftGCN)
register_model("adgn")(ADGN)  # num_layers: the Euler steps, one shared conv (official)
register_model("tangnn")(TANGNN)
register_model("tangnn-lc")(lambda *args, **kw: TANGNN(*args, variant="lc", **kw))
# the released code's network; its LC script selects 30 vertices
register_model("tangnn-released")(TANGNNReleased)
register_model("tangnn-released-lc")(lambda *args, m=30, **kw: TANGNNReleased(
    *args, m=m, variant="lc", **kw))
# the released NAI and TAI files (their scripts select 25 vertices) and FLC (num_layers: its
# encoder's layers, 3 in its script)
register_model("tangnn-released-nai")(lambda *args, **kw: TANGNNReleasedPooled(
    *args, variant="nai", **kw))
register_model("tangnn-released-tai")(lambda *args, **kw: TANGNNReleasedPooled(
    *args, variant="tai", **kw))
register_model("tangnn-released-flc")(lambda *args, **kw: _without_dropout(
    "tangnn-released-flc", TANGNNReleasedFLC, *args, **kw))


def _without_dropout(name: str, cls, *args, dropout=0.0, **kw):
    """A model without dropout (as released) built through ``build_model``, which passes
    the training's ``dropout``: a nonzero one is said to go unused, not silently dropped
    nor a TypeError."""
    check_dropouts(name, dropout=dropout)
    if dropout:
        warnings.warn(f"{name} has no dropout (as released): dropout={dropout} is not used",
                      stacklevel=caller_stacklevel())
    return cls(*args, **kw)


def _largegt(in_channels, hidden_channels, out_channels, num_layers, **kw):
    check_int(num_layers, "num_layers", 1)  # unused, but "x" or -1 is still a caller's error
    if num_layers != 1:  # a run labelled "largegt x4" would claim a depth it does not have
        warnings.warn(f"largegt has one local and one global attention module (the official "
                      f"model, no depth to set): num_layers={num_layers} is not used",
                      stacklevel=3)
    return LargeGT(in_channels, hidden_channels, out_channels, **kw)


register_model("largegt")(_largegt)
register_model("sgformer")(lambda in_channels, hidden_channels, out_channels, num_layers,
                           dropout=0.5, **kw: SGFormer(
                               in_channels, hidden_channels, out_channels,
                               gnn_num_layers=num_layers, trans_dropout=dropout,
                               gnn_dropout=dropout, **kw))
# The City-Networks baseline as its benchmark runs it: depth and dropout go to the GCN
# branch; the attention keeps its own dropout (0.5), one layer and one head.
register_model("sgformer-citynetworks")(
    lambda in_channels, hidden_channels, out_channels, num_layers, dropout=0.2, **kw:
    SGFormer(in_channels, hidden_channels, out_channels, gnn_num_layers=num_layers,
             gnn_dropout=dropout, variant="citynetworks", **kw))


register_model("ugt")(lambda in_channels, hidden_channels, out_channels, num_layers,
                     dropout=0.5, **kw: UGT(in_channels, hidden_channels, out_channels,
                                            num_layers=num_layers, dropout=dropout, **kw))


# Heterogeneous: in_channels is a dict per node type; graphloc.train passes the dataset's
# metadata and target type.
register_model("latte")(lambda in_channels, hidden_channels, out_channels, num_layers, **kw:
                        LATTE(in_channels, hidden_channels, out_channels, num_layers, **kw))
#: models that take a HeteroGraph (and x as a dict per node type)
HETERO_MODELS = {"latte"}


# Forward learning of any registered conv stack; graphloc.train's TrainConfig(procedure=...)
# trains it layer by layer.
register_model("forwardgnn")(lambda in_channels, hidden_channels, out_channels, num_layers,
                             conv="gcn", **kw: ForwardGNN(conv, in_channels, hidden_channels,
                                                          out_channels, num_layers, **kw))


def augmented_conv(name: str, kwargs: dict | None = None) -> str | None:
    """The conv of a ``"la-<conv>"`` name whose model needs a pretrained augmenter (one
    not given in ``kwargs``, with generated branches), else None: such a model is built
    only once a :func:`~graphloc.nn.models.aug.pretrain_augmenter` has run on its data."""
    kwargs = kwargs or {}
    conv = _la_conv(name)
    if conv is None or "augmenter" in kwargs or kwargs.get("num_generated", 1) == 0:
        return None
    return conv


def _la_conv(name) -> str | None:
    """The registered conv of a ``"la-<conv>"`` name, else None."""
    local = isinstance(name, str) and name.startswith("la-") and name[3:] in CONVS
    return name[3:] if local else None


def build_model(name: str, in_channels: int, hidden_channels: int, out_channels: int,
                num_layers: int, **kwargs) -> torch.nn.Module:
    """A registered model, a ``GNN`` of a registered conv, or ``"la-<conv>"``: that conv
    with local augmentation (:class:`graphloc.nn.models.aug.LAModel`, pass ``augmenter=``).
    ``num_layers`` is the depth: the number of convs or layers, the propagation steps of
    DAGNN and LiftGCN, SGFormer's GCN layers; LargeGT has one layer and warns of any other."""
    check_model_name(name)
    augmented = _la_conv(name)
    if augmented is not None:
        return LAModel(augmented, in_channels, hidden_channels, out_channels, num_layers,
                       **kwargs)
    if name in MODELS:
        return MODELS[name](in_channels, hidden_channels, out_channels, num_layers, **kwargs)
    return GNN(name, in_channels, hidden_channels, out_channels, num_layers, **kwargs)


def check_model_name(name) -> None:
    """Refuses a name that :func:`build_model` cannot build, listing the registered ones."""
    if _la_conv(name) is None and name not in MODELS and name not in CONVS:
        raise ValueError(f"unknown model {name!r}; registered: {sorted([*MODELS, *CONVS])} "
                         "or la-<conv>")
