"""Node classification training: full-batch or sampled mini-batches, AdamW, evaluation
every k epochs, best-on-validation checkpoints (weights + full configuration), resume.

    from graphloc.train import TrainConfig, fit, load_checkpoint
    history = fit(dataset, TrainConfig(model="gcn", layers=4, epochs=200), out_dir="runs/gcn")
    model, info = load_checkpoint("runs/gcn/best.pt")
"""

from __future__ import annotations

import io
import math
import os
import warnings
from dataclasses import asdict, dataclass, field, replace

import torch
import torch.nn.functional as F

from graphloc.checks import check_flags, check_seed, is_int_at_least
from graphloc.datasets.base import NodeDataset, float32_features
from graphloc.datasets.hetero import HeteroNodeDataset, as_dataset
from graphloc.distributed import check_same_on_every_rank, rank_and_world
from graphloc.io import atomic_save, load_file, save_figure, write_json
from graphloc.nn import build_model
from graphloc.nn.capabilities import ModelCapabilities, capabilities_of
from graphloc.nn.models.aug import LocalAugmenter, pretrain_augmenter
from graphloc.nn.models.forward import GREEDY, PROCEDURES
from graphloc.nn.models.ugt import UGT, pretrain_ugt
from graphloc.nn.registry import HETERO_MODELS, augmented_conv
from graphloc.ops import partition
from graphloc.plotting import require_matplotlib


@dataclass
class TrainConfig:
    """What ``fit`` trains; saved whole in every checkpoint. Defaults: the City-Networks
    protocol (hidden 64, dropout 0.2, AdamW lr 5e-4, weight decay 1e-5)."""

    model: str = "gcn"
    layers: int = 2
    hidden: int = 64
    dropout: float = 0.2
    lr: float = 5e-4
    weight_decay: float = 1e-5
    epochs: int = 100
    eval_every: int = 1
    batch_size: int | None = None  # None: full batch
    fanout: list[int] | None = None  # per layer; default 10 per layer when batched
    seed: int = 0
    standardize: bool = True  # inputs scaled by the training nodes' mean and std
    model_kwargs: dict = field(default_factory=dict)
    # "backprop", or a ForwardGNN procedure ("ff", "ff-vn", "sf", "sf-top2input",
    # "sf-top2loss"): model then names the conv, trained layer by layer without
    # backpropagation across layers (graphloc.nn.models.forward)
    procedure: str = "backprop"
    patience: int | None = None  # stop after this many evaluations without a better val
    # "la-<conv>" models: pretrain_augmenter's arguments (epochs, batch_size, lr,
    # hidden_channels, latent_channels, likelihood, holdout; default the official citation
    # settings). The generator learns the features the model reads: standardised when
    # standardize is True (a Gaussian likelihood then), the raw 0/1 features of the
    # citation setting (Bernoulli) with standardize=False.
    # "ugt": pretrain_ugt's arguments (epochs, lr, weight_decay, patience, steps, alpha,
    # beta, freeze; default the official pre-training, then the official freeze for
    # fine-tuning); {"epochs": 0} trains the whole model from its initial weights instead
    pretrain: dict = field(default_factory=dict)
    # "adamw" (decoupled weight decay, the City-Networks protocol), "adam" (weight decay
    # as an L2 term in the gradient, torch's Adam: the optimiser of the UGT, TANGNN, LAGNN
    # and SGFormer official runs) or None: AdamW for backprop, Adam for the forward
    # procedures (ForwardGNN's official optimiser)
    optimizer: str | None = None


PRETRAIN_ARGUMENTS = ("epochs", "batch_size", "lr", "hidden_channels", "latent_channels",
                      "likelihood", "holdout")
#: TrainConfig.optimizer -> the optimiser class (None: the procedure's own, _optimizer)
OPTIMIZERS = {None: None, "adamw": torch.optim.AdamW, "adam": torch.optim.Adam}
UGT_PRETRAIN_ARGUMENTS = ("epochs", "lr", "weight_decay", "patience", "steps", "alpha", "beta",
                          "freeze")


class Standardized(ModelCapabilities, torch.nn.Module):
    """``model((x - mean) / std, graph)``: raw features in, the statistics kept as buffers
    (so checkpoints and influence measurements see the same inputs as training). For a
    heterogeneous model ``num_features`` and ``x`` are dicts per node type, with
    statistics per type."""

    def __init__(self, model: torch.nn.Module, num_features: int | dict):
        super().__init__()
        self.model = model
        self.node_types = list(num_features) if isinstance(num_features, dict) else None
        widths = num_features if self.node_types else {None: num_features}
        for i, width in enumerate(widths.values()):
            self.register_buffer(self._key("mean", i), torch.zeros(width))
            self.register_buffer(self._key("std", i), torch.ones(width))

    def _key(self, stat: str, i: int) -> str:
        return f"{stat}_{i}" if self.node_types else stat

    def _stats(self, i: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        return getattr(self, self._key("mean", i)), getattr(self, self._key("std", i))

    # The wrapped model's capabilities are this wrapper's (fit and influence ask it).
    @property
    def node_batched(self) -> bool:
        return capabilities_of(self.model).node_batched

    @property
    def graphloc_global(self) -> bool:
        return capabilities_of(self.model).graphloc_global

    @property
    def graphloc_hops(self) -> int | None:
        return capabilities_of(self.model).graphloc_hops

    @property
    def prunes_layers(self) -> bool:
        return capabilities_of(self.model).prunes_layers

    @property
    def reads(self):
        """The wrapped model's ``reads`` (an AttributeError, so ``hasattr`` is False, when it
        has none): which nodes each output depends on, for influence."""
        return self.model.reads

    @property
    def training_loss(self):
        """The wrapped model's ``training_loss`` on standardised inputs (an AttributeError,
        so ``getattr(..., None)`` is None, when it has none)."""
        own = self.model.training_loss
        return lambda x, graph, y, rows: own(self.standardize(x), graph, y, rows)

    def standardize(self, x):
        if self.node_types:
            return {t: (x[t] - self._stats(i)[0]) / self._stats(i)[1]
                    for i, t in enumerate(self.node_types)}
        mean, std = self._stats()
        return (x - mean) / std

    def forward_within(self, x, graph, ball_sizes):
        return self.model.forward_within(self.standardize(x), graph, ball_sizes)

    def fit(self, x) -> Standardized:
        """Mean and std of each column over ``x`` (the training nodes; a dict per node
        type for a heterogeneous model). A column constant there carries no information
        the model could learn from, and dividing by a std clamped near 0 would blow other
        nodes' values up to ~1e6: it gets std = inf, so its standardised value is 0, and
        a warning names it."""
        if self.node_types:
            for i, t in enumerate(self.node_types):
                self._fit_columns(x[t], i, f"{t} ")
        else:
            self._fit_columns(x, 0, "")
        return self

    def _fit_columns(self, x: torch.Tensor, i: int, what: str) -> None:
        mean, std = x.mean(0), x.std(0) if x.size(0) > 1 else torch.zeros_like(x[0])
        constant = std <= 1e-6 * mean.abs()  # also std == 0, and a single training node
        if constant.any():
            columns = constant.nonzero().flatten().tolist()
            warnings.warn(f"{what}feature columns {columns} are constant over the "
                          f"{x.size(0)} training nodes: they are standardised to 0",
                          stacklevel=4)
        self._stats(i)[0].copy_(mean)
        self._stats(i)[1].copy_(std.masked_fill(constant, float("inf")))

    def forward(self, x, graph, **kwargs):
        return self.model(self.standardize(x), graph, **kwargs)


def check_config(config: TrainConfig) -> None:
    """Each field in its range, or a ValueError naming it: no value is reinterpreted (a
    batch size of 0 is not full batch, an empty fan-out list is not the default)."""
    def integer(name, low, allow_none=False):
        value = getattr(config, name)
        if allow_none and value is None:
            return
        if not is_int_at_least(value, low):
            none = " (or None)" if allow_none else ""
            raise ValueError(f"TrainConfig.{name} must be an integer >= {low}{none}, "
                             f"got {value!r}")

    def real(name, low, high=math.inf, include_low=True):
        value = getattr(config, name)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
            (low <= value if include_low else low < value) and value < high
        if not ok:
            bracket = "[" if include_low else "("
            raise ValueError(f"TrainConfig.{name} must lie in {bracket}{low}, {high}), "
                             f"got {value!r}")

    if not isinstance(config.model, str):
        raise ValueError(f"TrainConfig.model must be a model name (str), got {config.model!r}")
    _check_model_kwargs(config)
    check_seed(config.seed, "TrainConfig.seed")
    for name in ("layers", "hidden", "epochs", "eval_every"):
        integer(name, 1)
    integer("batch_size", 1, allow_none=True)
    integer("patience", 1, allow_none=True)
    if config.procedure not in ("backprop", *PROCEDURES):
        raise ValueError(f"TrainConfig.procedure must be one of "
                         f"{('backprop', *PROCEDURES)}, got {config.procedure!r}")
    if config.procedure != "backprop" and config.batch_size is not None:
        raise ValueError(f"TrainConfig.procedure={config.procedure!r} trains full batch: "
                         f"batch_size must be None, got {config.batch_size!r}")
    check_flags("TrainConfig", standardize=config.standardize)
    if not (config.optimizer is None or isinstance(config.optimizer, str) and
            config.optimizer in OPTIMIZERS):
        raise ValueError(f"TrainConfig.optimizer must be one of {list(OPTIMIZERS)}, got "
                         f"{config.optimizer!r}")
    _check_pretrain(config)
    real("dropout", 0, 1)
    real("lr", 0, include_low=False)
    real("weight_decay", 0)
    if config.fanout is not None and (
            not isinstance(config.fanout, (list, tuple)) or not config.fanout or any(
                isinstance(k, bool) or not isinstance(k, int) or k < -1
                for k in config.fanout)):
        raise ValueError(f"TrainConfig.fanout must be None (10 per layer) or a non-empty "
                         f"list of integers >= 0 (-1: all neighbours), got {config.fanout!r}")


# build_model's arguments that TrainConfig's own fields set; a forward procedure's
# ForwardGNN takes three more from them
_SET_BY_FIELDS = {"in_channels": "the dataset's features", "hidden_channels": "hidden",
                  "out_channels": "the dataset's classes", "num_layers": "layers",
                  "dropout": "dropout"}
_SET_BY_LAYERWISE_FIELDS = {"conv": "model", "procedure": "procedure", "seed": "seed"}


def _check_model_kwargs(config: TrainConfig) -> None:
    """A dict of the model's other arguments with string keys, none of them one that a
    field of TrainConfig sets (torch named only "multiple values for argument")."""
    if not isinstance(config.model_kwargs, dict) or \
            not all(isinstance(k, str) for k in config.model_kwargs):
        raise ValueError(f"TrainConfig.model_kwargs must be a dict of argument names to "
                         f"values, got {config.model_kwargs!r}")
    taken = _SET_BY_FIELDS if config.procedure == "backprop" else \
        {**_SET_BY_FIELDS, **_SET_BY_LAYERWISE_FIELDS}
    for name in config.model_kwargs:
        if name in taken:
            raise ValueError(f"TrainConfig.model_kwargs[{name!r}]: the model's {name} is "
                             f"set by {taken[name]} (TrainConfig's own field)")


def _check_pretrain(config: TrainConfig) -> None:
    """``pretrain`` is a dict of the arguments of the model's pretraining: those of
    ``pretrain_augmenter`` for a local augmentation model, of ``pretrain_ugt`` for UGT.
    Given to any other model, it would be silently ignored."""
    if not isinstance(config.pretrain, dict):
        raise ValueError(f"TrainConfig.pretrain must be a dict, got {config.pretrain!r}")
    backprop = config.procedure == "backprop"
    if backprop and config.model == "ugt":
        takes, owner = UGT_PRETRAIN_ARGUMENTS, "pretrain_ugt"
        epochs = config.pretrain.get("epochs", 1)
        if not is_int_at_least(epochs, 0):
            raise ValueError(f"TrainConfig.pretrain['epochs'] must be an integer >= 0 (0: no "
                             f"pre-training), got {epochs!r}")
        if epochs == 0 and len(config.pretrain) > 1:
            raise ValueError(f"TrainConfig.pretrain={config.pretrain!r}: with epochs 0 UGT is "
                             "not pre-trained, so its other settings would not be used")
    else:
        takes, owner = PRETRAIN_ARGUMENTS, "pretrain_augmenter"
    unknown = sorted(set(config.pretrain) - set(takes))
    if unknown:
        raise ValueError(f"TrainConfig.pretrain: unknown argument(s) {unknown}; "
                         f"{owner} takes {list(takes)}")
    if config.pretrain and owner == "pretrain_augmenter" and (
            augmented_conv(config.model, config.model_kwargs) is None or not backprop):
        raise ValueError(f"TrainConfig.pretrain={config.pretrain!r} sets the pretraining of "
                         f"a local augmentation model's generator ('la-<conv>' with generated "
                         f"branches, trained by backprop) or of UGT; model {config.model!r} "
                         f"(procedure {config.procedure!r}) has none")


def _pretrained_stage(model: torch.nn.Module, dataset, config: TrainConfig,
                      resumed: dict | None, progress: bool) -> None:
    """UGT's official self-supervised stage before fine-tuning (``pretrain_ugt`` with
    ``config.pretrain``, on the features the model reads, which include the nodes outside
    the training split as the official's do), then its freeze. A resumed run's weights come
    from its checkpoint: only the freeze is redone (``requires_grad`` is not saved)."""
    inner = model.model if isinstance(model, Standardized) else model
    arguments = config.pretrain
    if not isinstance(inner, UGT) or arguments.get("epochs", 1) == 0:
        return
    if resumed is not None:
        if arguments.get("freeze", True):
            inner.freeze_pretrained()
        return
    x = model.standardize(dataset.x) if isinstance(model, Standardized) else dataset.x
    pretrain_ugt(inner, x, dataset.graph, progress=progress, **arguments)


def _check_checkpointable(config: TrainConfig) -> None:
    """Every ``model_kwargs`` value loads back from a checkpoint: ``load_checkpoint`` reads
    only plain data and tensors (``weights_only``), so a module or a function there gave a
    run whose every checkpoint was refused after training."""
    for name, value in config.model_kwargs.items():
        buffer = io.BytesIO()
        try:
            torch.save(value, buffer)
            buffer.seek(0)
            torch.load(buffer, weights_only=True)
        except Exception as err:  # pickling and weights_only refusals have several types
            hint = " (fit pretrains the generator itself: TrainConfig.pretrain sets how)" \
                if name == "augmenter" else ""
            raise ValueError(
                f"TrainConfig.model_kwargs[{name!r}] is a {type(value).__name__}, which a "
                f"checkpoint cannot hold as a setting (load_checkpoint reads plain data and "
                f"tensors only); pass a plain value, or train without out_dir{hint}"
            ) from err


def _features_in_float32(dataset):
    """The dataset with float32 features, the dtype of the models ``fit`` builds: float64
    ones (NumPy's default) failed at the first layer, which the caller of ``fit`` cannot
    cast. The caller's dataset is left as it is."""
    x = dataset.x
    if isinstance(x, dict):
        cast = {t: float32_features(v) for t, v in x.items()}
        unchanged = all(cast[t] is v for t, v in x.items())
    else:
        cast = float32_features(x)
        unchanged = cast is x
    return dataset if unchanged else replace(dataset, x=cast)


def _check_features(dataset) -> None:
    """NaN or infinite inputs would train on NaN losses and report accuracies of argmaxes
    of NaN logits: refused, naming the first one."""
    blocks = dataset.x.items() if isinstance(dataset.x, dict) else [(None, dataset.x)]
    for node_type, x in blocks:
        bad = ~torch.isfinite(x)
        if bad.any():
            node, column = bad.nonzero()[0].tolist()
            where = f"x[{node_type!r}]" if node_type else "x"
            raise ValueError(f"{dataset.name}: {where}[{node}, {column}] = "
                             f"{x[node, column].item()}; fit needs finite features (impute "
                             "or drop the missing values)")


def _check_splits(dataset: NodeDataset) -> None:
    """Training needs training nodes, and the best checkpoint needs validation nodes."""
    for split, purpose in (("train", "train on"), ("val", "select the best model by")):
        if getattr(dataset, f"{split}_index").numel() == 0:
            raise ValueError(f"{dataset.name} has no {split} nodes ({dataset.num_nodes} "
                             f"nodes in all): nothing to {purpose}")
    if dataset.test_index.numel() == 0:
        warnings.warn(f"{dataset.name} has no test nodes: test accuracy is reported as NaN "
                      "(null in metrics.json)", stacklevel=3)


# A label space this wide, of which under a quarter is used, is taken for labels that are
# not class ids (raw category codes, node ids): the classifier gets an output per id.
_WIDE_LABEL_SPACE = 1024
_USED_SHARE = 4


def _check_classes(dataset) -> None:
    """The classifier has one output per class id up to the largest label. Labels that are
    not class ids made torch fail to allocate its output layer (labels up to 3 * 10^9: "you
    tried to allocate 768000000256 bytes") or left most of its outputs to classes no node
    has: refused, naming the largest label and how to renumber."""
    used = torch.unique(dataset.y[dataset.y >= 0])
    classes = dataset.num_classes
    if classes > _WIDE_LABEL_SPACE and classes > _USED_SHARE * used.numel():
        raise ValueError(
            f"{dataset.name}: the labels reach {classes - 1}, so the classifier would have "
            f"{classes} outputs, but only {used.numel()} distinct labels are used. Are these "
            f"class ids? Renumber them 0 .. {used.numel() - 1} first: "
            f"y[y >= 0] = torch.unique(y[y >= 0], return_inverse=True)[1]")


def _build(config: TrainConfig, num_features, num_classes: int, hetero: dict | None = None,
           augmenter: LocalAugmenter | None = None) -> torch.nn.Module:
    """The model of ``config``; ``hetero``: a heterogeneous dataset's ``metadata`` and
    ``target`` (for the models in ``HETERO_MODELS``); ``augmenter``: the generator of an
    ``"la-<conv>"`` model."""
    if (hetero is not None) != (config.model in HETERO_MODELS):
        raise ValueError(f"model {config.model!r} " + (
            f"takes a homogeneous graph; this dataset is heterogeneous (node types "
            f"{hetero['metadata'][0]}): use one of {sorted(HETERO_MODELS)}" if hetero else
            "takes a heterogeneous dataset (a HeteroNodeDataset or PyG HeteroData)"))
    if config.procedure == "backprop":
        given = {"augmenter": augmenter} if augmenter is not None else {}
        model = build_model(config.model, num_features, config.hidden, num_classes,
                            config.layers, dropout=config.dropout, **(hetero or {}),
                            **given, **config.model_kwargs)
    else:
        model = build_model("forwardgnn", num_features, config.hidden, num_classes,
                            config.layers, conv=config.model, procedure=config.procedure,
                            dropout=config.dropout, seed=config.seed, **config.model_kwargs)
    return Standardized(model, num_features) if config.standardize else model


@torch.no_grad()
def evaluate(model: torch.nn.Module, dataset: NodeDataset) -> dict:
    """Full-graph accuracy on the three splits (model in eval mode, mode restored)."""
    was_training = model.training
    model.eval()
    pred = model(dataset.x, dataset.graph).argmax(1)
    model.train(was_training)
    return {split: (pred[index] == dataset.y[index]).float().mean().item()
            for split, index in (("train", dataset.train_index), ("val", dataset.val_index),
                                 ("test", dataset.test_index))}


def hetero_spec(dataset) -> dict | None:
    """A heterogeneous dataset's ``metadata`` and ``target`` (the arguments LATTE is built
    with), or None for a homogeneous one."""
    if not isinstance(dataset, HeteroNodeDataset):
        return None
    return {"metadata": dataset.graph.metadata(), "target": dataset.target}


def _training_rows(dataset):
    """The rows standardisation is fitted on: the training nodes; in a heterogeneous
    dataset, all nodes of the unlabelled types (their features are inputs only)."""
    if not isinstance(dataset.x, dict):
        return dataset.x[dataset.train_index]
    return {t: x[dataset.train_index] if t == dataset.target else x
            for t, x in dataset.x.items()}


def _shards(train_index, graph, world: int, seed: int) -> list[torch.Tensor]:
    """Every process's training nodes, by rank: those in its part of the graph
    (``ops.partition``: neighbouring seeds share their samples), or a seeded random split
    where a part holds no training node. Every process computes the same split (both are
    deterministic), so no communication is needed."""
    if world == 1:
        return [train_index]
    part = partition(graph.edge_index, world, num_nodes=graph.num_nodes)
    counts = torch.bincount(part[train_index], minlength=world)
    if (counts > 0).all():
        return [train_index[part[train_index] == rank] for rank in range(world)]
    perm = torch.randperm(len(train_index), generator=torch.Generator().manual_seed(seed))
    return [train_index[perm[rank::world]] for rank in range(world)]


class _NodeBatches:
    """Shuffled batches of node ids, a new order every epoch (seeded), for models that
    take ``index=`` (``node_batched``, e.g. LargeGT with its own fixed token samples)."""

    def __init__(self, nodes: torch.Tensor, batch_size: int, seed: int):
        self.nodes, self.batch_size, self.seed, self._epoch = nodes, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration counts as (as ``NeighborLoader.set_epoch``)."""
        self._epoch = epoch

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self._epoch)
        self._epoch += 1
        yield from self.nodes[torch.randperm(self.nodes.numel(), generator=gen)] \
            .split(self.batch_size)


class _Objective(torch.nn.Module):
    """The training loss of ``model`` as a forward, the call DistributedDataParallel
    averages the gradients of: the model's own ``training_loss`` where it has one (a local
    augmentation model's samples and consistency term) on the ``rows`` given, else the
    cross-entropy of its outputs there; for a node-batched model (``index=``), of the
    outputs it computes for those nodes."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x, graph, y, rows=None, index=None):
        if index is not None:
            return F.cross_entropy(self.model(x, graph, index=index), y[index])
        own = getattr(self.model, "training_loss", None)
        if own is not None:
            return own(x, graph, y, rows)
        return F.cross_entropy(self.model(x, graph)[rows], y[rows])


def _train_one_epoch(model, opt, dataset: NodeDataset, shard, loader, share: float = 1.0,
                     steps: int | None = None) -> float:
    """One epoch; returns its mean training loss. Full batch: the loss of this process's
    ``shard`` is weighted by ``share`` (its nodes' share of the training nodes, times the
    process count), so that the processes' averaged gradients are the gradient of the mean
    over all training nodes, as in one process. Mini-batches: ``steps`` of them (see
    ``_batches``)."""
    model.train()
    if loader is None:
        opt.zero_grad()
        loss = model(dataset.x, dataset.graph, dataset.y, shard)
        auxiliary = _auxiliary_loss(model)
        (loss * share + auxiliary).backward()
        opt.step()
        return (loss + auxiliary).item()
    total, count = 0.0, 0
    for batch in _batches(loader, steps):
        opt.zero_grad()
        if isinstance(batch, torch.Tensor):  # node ids, for models that batch over nodes
            loss, seeds = model(dataset.x, dataset.graph, dataset.y, index=batch), batch.numel()
        else:  # the seeds come first in a sampled batch
            seeds = batch.batch_size
            loss = model(batch.x, batch.graph, batch.y, torch.arange(seeds))
        loss.backward()
        opt.step()
        total, count = total + loss.item() * seeds, count + seeds
    return total / count


def _batches(loader, steps: int | None):
    """``steps`` batches of ``loader`` (all of one pass when None), starting another pass (a
    new order) when it runs out: under DistributedDataParallel every process takes as many
    optimiser steps as the one with the most training nodes. With fewer, a process left
    its epoch early: its next gradient was averaged with another process's step of an
    earlier epoch, and the run ended in a crash ("Connection closed by peer")."""
    if steps is None:
        yield from loader
        return
    taken = 0
    while taken < steps:
        before = taken
        for batch in loader:
            yield batch
            taken += 1
            if taken == steps:
                return
        if taken == before:  # a pass with no batch would start passes forever
            raise RuntimeError("the training loader yielded no batch")


def _auxiliary_loss(model) -> torch.Tensor | float:
    """The model's own extra loss for its last forward (LATTE's proximity term), else 0."""
    inner = getattr(model, "module", model)  # DistributedDataParallel
    while isinstance(inner, (_Objective, Standardized)):
        inner = inner.model
    extra = inner.auxiliary_loss() if hasattr(inner, "auxiliary_loss") else None
    return 0.0 if extra is None else extra


def fit(dataset, config: TrainConfig, out_dir: str | None = None,
        resume: bool = False, progress: bool = True) -> list[dict]:
    """Trains ``config.model`` on ``dataset`` (a ``NodeDataset``, a PyG ``Data`` with its
    masks, or ``(x, edge_index or Graph, y)`` with an optional ``(train, val, test)`` split;
    a ``HeteroNodeDataset`` or PyG ``HeteroData`` for LATTE; see
    :func:`graphloc.datasets.hetero.as_dataset`); returns the history (one dict per
    evaluation). With ``out_dir``: ``best.pt`` (best validation accuracy), ``last.pt``
    (optimizer and random state too, for ``resume``), ``metrics.json`` and, when
    matplotlib is installed, ``curve.png``.

    Under torch.distributed (``graphloc train --nproc N``) every process trains a
    DistributedDataParallel copy on its share of the training nodes (those in its part of
    the graph, ``ops.partition``; each samples mini-batches around its own seeds over the
    whole graph); process 0 writes the files."""
    from tqdm.auto import tqdm

    from graphloc.loader import NeighborLoader
    check_flags("fit", resume=resume, progress=progress)
    dataset = _features_in_float32(as_dataset(dataset))
    check_config(config)
    if out_dir:
        _check_checkpointable(config)
    _check_features(dataset)
    _check_splits(dataset)
    _check_classes(dataset)
    rank, world = rank_and_world()
    if world > 1:  # each process trains on its share of one dataset
        check_same_on_every_rank(_dataset_tensors(dataset), dataset.name)
    torch.manual_seed(config.seed)  # the same initial weights on every process
    hetero = hetero_spec(dataset)
    if hetero and (world > 1 or config.batch_size):
        raise ValueError(f"{dataset.name} is heterogeneous: it trains full batch in one "
                         "process (no batch_size, no --nproc)")
    if config.procedure != "backprop":
        _check_layerwise_run(config, world, resume)
    last = os.path.join(out_dir, "last.pt") if out_dir else None  # every process resumes
    resumed = _resumed_state(last, config) if resume else None
    model = _build(config, dataset.num_features, dataset.num_classes, hetero,
                   _augmenter(config, dataset, resumed, progress))
    definition = model_definition(model)  # as built, before training changes any setting
    if resumed is not None:
        _check_definition(resumed, definition, last)
    if config.standardize:
        model.fit(_training_rows(dataset))
    _pretrained_stage(model, dataset, config, resumed, progress)
    if config.procedure != "backprop":
        return _fit_layerwise(model, dataset, config, out_dir, progress, definition)
    shards = _shards(dataset.train_index, dataset.graph, world, config.seed)
    shard = shards[rank]
    if shard.numel() == 0:
        raise ValueError(f"process {rank} of {world} has no training nodes: "
                         f"{dataset.name} has {dataset.train_index.numel()} training nodes, "
                         f"fewer than the {world} processes; use fewer processes")
    net = _Objective(model)
    if world > 1:  # gradients averaged over the processes
        net = torch.nn.parallel.DistributedDataParallel(net)
    opt = _optimizer(config, model.parameters())
    loader = None
    if config.batch_size and capabilities_of(model).node_batched:
        loader = _NodeBatches(shard, config.batch_size, config.seed + rank)
    elif config.batch_size:
        fanout = [10] * config.layers if config.fanout is None else config.fanout
        loader = NeighborLoader(dataset.graph, dataset.x, dataset.y, fanout,
                                batch_size=config.batch_size, shuffle=True,
                                seed=config.seed + rank, input_nodes=shard)
    share = world * shard.numel() / dataset.train_index.numel()
    steps = None if loader is None or world == 1 else \
        max(-(-len(nodes) // config.batch_size) for nodes in shards)
    history, start, best, stale = [], 0, -1.0, 0
    out_dir = out_dir if rank == 0 else None  # one process writes
    if resumed is not None:
        state = resumed
        model.load_state_dict(state["state_dict"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        history, start, best = state["history"], state["epoch"], state["best_val"]
        stale = state.get("stale", 0)  # older checkpoints: counted from the resume
    bar = tqdm(range(start, config.epochs), disable=not progress, desc=config.model)
    for epoch in bar:
        if loader is not None:  # the epoch's order, also after a pass begun by _batches
            loader.set_epoch(epoch)
        loss = _train_one_epoch(net, opt, dataset, shard, loader, share, steps)
        _check_loss(loss, epoch + 1, config)
        if (epoch + 1) % config.eval_every and epoch + 1 < config.epochs:
            continue
        history.append({"epoch": epoch + 1, "loss": loss, **evaluate(model, dataset)})
        bar.set_postfix(loss=f"{loss:.3f}", val=f"{history[-1]['val']:.3f}")
        if history[-1]["val"] > best:
            best, stale = history[-1]["val"], 0
            if out_dir:
                atomic_save(_checkpoint(model, config, dataset, history, definition),
                            os.path.join(out_dir, "best.pt"))
        else:
            stale += 1
        if out_dir:
            atomic_save({**_checkpoint(model, config, dataset, history, definition),
                         "optimizer": opt.state_dict(), "rng": torch.get_rng_state(),
                         "epoch": epoch + 1, "best_val": best, "stale": stale,
                         "history": history}, last)
        if config.patience is not None and stale >= config.patience:
            break
    if out_dir:
        _write_metrics(history, out_dir)
    return history


def _resumed_state(last: str | None, config: TrainConfig) -> dict:
    """``last.pt`` of the run to resume, checked to be of the same configuration."""
    if not last or not os.path.exists(last):
        raise FileNotFoundError(f"nothing to resume: no {last}")
    state = load_file(last, "training checkpoint",
                      keys=("config", "state_dict", "optimizer", "rng", "epoch", "best_val",
                            "history"), rebuild=_NO_REBUILD)
    if asdict(TrainConfig(**state["config"])) != asdict(config):
        raise ValueError("the checkpoint was trained with another configuration: "
                         f"{state['config']}")
    return state


def _augmenter(config: TrainConfig, dataset, resumed: dict | None, progress: bool
               ) -> LocalAugmenter | None:
    """The generator of an ``"la-<conv>"`` model (None for any other model), pretrained by
    ``pretrain_augmenter`` with ``config.pretrain`` and ``config.seed`` on the features the
    model reads: standardised by the training nodes' statistics when ``config.standardize``
    (the model's own ``Standardized`` fits the same ones). A resumed run's generator is
    rebuilt from its checkpoint, whose state dict holds its weights."""
    if config.procedure != "backprop" or augmented_conv(config.model,
                                                        config.model_kwargs) is None:
        return None
    if resumed is not None and resumed.get("augmenter"):
        return LocalAugmenter(**resumed["augmenter"])
    x = dataset.x
    if config.standardize:
        scaler = Standardized(torch.nn.Identity(), dataset.num_features)
        with warnings.catch_warnings():  # the model's own standardisation warns once
            warnings.simplefilter("ignore")
            x = scaler.fit(_training_rows(dataset)).standardize(x)
    return pretrain_augmenter(x, dataset.graph, seed=config.seed, progress=progress,
                              **config.pretrain)


def _check_loss(loss: float, step: int, config: TrainConfig) -> None:
    """Stops a run whose loss is no longer finite: its weights are then NaN or inf, and
    the accuracies of later evaluations (argmax of NaN logits) would be numbers about
    nothing. best.pt keeps the best model before."""
    if not math.isfinite(loss):
        raise FloatingPointError(
            f"the training loss is {loss} at epoch {step} (lr={config.lr}): the weights "
            f"diverged; lower lr. best.pt, if written, holds the best model before")


def _dataset_tensors(dataset) -> dict:
    """The tensors of a homogeneous or heterogeneous dataset that training reads, by name."""
    names = ("x", "y", "train_index", "val_index", "test_index", "edge_attr", "pos")
    tensors = {name: getattr(dataset, name, None) for name in names}
    tensors["edge_index"] = getattr(dataset.graph, "edge_index", None)
    return {name: t for name, t in tensors.items() if isinstance(t, torch.Tensor)}


def _optimizer(config: TrainConfig, parameters) -> torch.optim.Optimizer:
    """``config.optimizer`` over ``parameters``; None: AdamW for backprop, and for the
    forward procedures Adam, ForwardGNN's official optimiser."""
    default = torch.optim.AdamW if config.procedure == "backprop" else torch.optim.Adam
    kind = OPTIMIZERS[config.optimizer] or default
    return kind(parameters, lr=config.lr, weight_decay=config.weight_decay)


def _check_layerwise_run(config: TrainConfig, world: int, resume: bool) -> None:
    if world > 1:
        raise ValueError(f"procedure={config.procedure!r} trains in one process; run it "
                         f"without --nproc ({world} processes here)")
    if resume:
        raise ValueError(f"procedure={config.procedure!r} cannot resume (each layer's "
                         "training runs to its end); train again")


def _fit_layerwise(model, dataset: NodeDataset, config: TrainConfig, out_dir, progress,
                   definition: dict):
    """Forward learning: every layer has its own optimiser (Adam, the official one, unless
    ``config.optimizer`` names another) and its own local loss. ff, ff-vn and sf train
    layer 1 to its best validation accuracy (with the layers below it), freeze it and push
    its inputs through it, then layer 2...; sf-top2input and sf-top2loss step every layer
    at every epoch (the whole model keeps its best). Writes best.pt and metrics.json; a
    record per evaluation (with ``layer``)."""
    from tqdm.auto import tqdm
    net = model.model if isinstance(model, Standardized) else model
    x = model.standardize(dataset.x) if isinstance(model, Standardized) else dataset.x
    net.set_context(dataset.num_nodes, dataset.train_index, dataset.y[dataset.train_index])
    opts = [_optimizer(config, conv.parameters()) for conv in net.convs]
    history: list[dict] = []
    schedule = _greedy_layers if config.procedure in GREEDY else _all_layers
    bar = tqdm(total=config.epochs * (net.num_layers if config.procedure in GREEDY else 1),
               disable=not progress, desc=f"{config.model} {config.procedure}")
    schedule(model, net, opts, x, dataset, config, history, bar)
    bar.close()
    net.depth = net.num_layers
    history.append({"epoch": history[-1]["epoch"], "layer": net.num_layers, "loss": None,
                    "final": True, **_layerwise_accuracy(model, net, dataset)})
    if out_dir:
        atomic_save(_checkpoint(model, config, dataset, history, definition),
                    os.path.join(out_dir, "best.pt"))
        _write_metrics(history, out_dir)
    return history


@torch.no_grad()
def _layerwise_accuracy(model, net, dataset: NodeDataset) -> dict:
    """``evaluate``'s accuracies; for ff and ff-vn the training nodes are scored as the
    evaluated ones (claiming each class in turn), not with their own labels as input."""
    accuracy = evaluate(model, dataset)
    if net.procedure in ("ff", "ff-vn"):
        model.eval()
        pred = model(dataset.x, dataset.graph, evaluated=dataset.train_index).argmax(1)
        index = dataset.train_index
        accuracy["train"] = (pred[index] == dataset.y[index]).float().mean().item()
    return accuracy


class _Records:
    """The history of a layer-wise run: ``add`` records an evaluation (and the progress
    bar) and answers whether to stop: ``patience`` evaluations without a better val."""

    def __init__(self, config: TrainConfig, history: list, bar):
        self.patience, self.history, self.bar = config.patience, history, bar
        self.best, self.stale = -1.0, 0

    def add(self, record: dict) -> bool:
        self.history.append(record)
        self.bar.set_postfix(loss=f"{record['loss']:.3f}", val=f"{record['val']:.3f}")
        improved = record["val"] > self.best
        self.best, self.stale = (record["val"], 0) if improved else (self.best, self.stale + 1)
        return self.patience is not None and self.stale >= self.patience


def _due(epoch: int, config: TrainConfig) -> bool:
    return (epoch + 1) % config.eval_every == 0 or epoch + 1 == config.epochs


def _greedy_layers(model, net, opts, x, dataset, config, history, bar) -> None:
    streams = net.streams(x, dataset.graph)
    step = 0
    for j in range(net.num_layers):
        net.depth = j + 1  # validation reads the layers trained so far
        best, best_state, records = -1.0, None, _Records(config, history, bar)
        for epoch in range(config.epochs):
            bar.update()
            model.train()
            opts[j].zero_grad()
            loss = net.greedy_loss(j, streams)
            loss.backward()
            opts[j].step()
            step += 1
            _check_loss(loss.item(), step, config)
            if not _due(epoch, config):
                continue
            record = {"epoch": step, "layer": j + 1, "loss": loss.item(),
                      **_layerwise_accuracy(model, net, dataset)}
            if record["val"] > best:
                best, best_state = record["val"], _copy_state(net.convs[j])
            if records.add(record):
                break
        net.convs[j].load_state_dict(best_state)
        model.eval()  # the frozen layer's outputs without dropout
        streams = net.advance(j, streams)


def _all_layers(model, net, opts, x, dataset, config, history, bar) -> None:
    with torch.no_grad():
        states, graph = net.top_states(x, dataset.graph)
    best, best_state, records = -1.0, None, _Records(config, history, bar)
    # sf-top2input: even layers, then odd ones on the fresh states (a layer of one parity
    # reads states the other parity writes, so each new state replaces its old one at
    # once); sf-top2loss: every layer reads the previous step's states (the official orders)
    layers = range(net.num_layers)
    red_black = config.procedure == "sf-top2input"
    groups = [layers[0::2], layers[1::2]] if red_black else [layers]
    for epoch in range(config.epochs):
        bar.update()
        model.train()
        losses = []
        for group in groups:
            fresh = {}
            for j in group:
                opts[j].zero_grad()
                loss, fresh[j] = net.top_loss(j, states, graph)
                loss.backward()
                if config.procedure == "sf-top2loss":  # the official clip, this variant only
                    torch.nn.utils.clip_grad_norm_(net.convs[j].parameters(), 1.0)
                opts[j].step()
                losses.append(loss.item())
                if red_black:
                    states[j + 1] = fresh.pop(j)
            for j, state in fresh.items():
                states[j + 1] = state
        _check_loss(sum(losses), epoch + 1, config)
        if not _due(epoch, config):
            continue
        record = {"epoch": epoch + 1, "layer": net.num_layers,
                  "loss": sum(losses) / len(losses), **_layerwise_accuracy(model, net, dataset)}
        if record["val"] > best:
            best, best_state = record["val"], _copy_state(net)
        if records.add(record):
            break
    net.load_state_dict(best_state)


def _copy_state(module: torch.nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


_NO_REBUILD = "A checkpoint cannot be rebuilt: restore a copy or train again."


def _augmenter_config(model) -> dict | None:
    """The configuration of the model's ``LocalAugmenter`` (``load_checkpoint`` rebuilds it
    before loading the weights), None for a model without one."""
    inner = model.model if isinstance(model, Standardized) else model
    augmenter = getattr(inner, "augmenter", None)
    return dict(augmenter.config) if isinstance(augmenter, LocalAugmenter) else None


def _checkpoint(model, config, dataset, history, definition: dict) -> dict:
    return {"config": asdict(config), "state_dict": model.state_dict(),
            "definition": definition,
            "augmenter": _augmenter_config(model),
            "num_features": dataset.num_features, "num_classes": dataset.num_classes,
            "dataset": dataset.name, "dataset_files": getattr(dataset, "files", {}),
            "hetero": hetero_spec(dataset), "metrics": history[-1]}


_SETTINGS = (bool, int, float, str, type(None))


def _is_setting(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_setting(v) for v in value)
    return isinstance(value, _SETTINGS)


def model_definition(model: torch.nn.Module) -> dict[str, dict[str, str]]:
    """Per submodule (by its path), its class (``"type"``) and its settings: the public
    attributes that are numbers, names, flags or tuples of them (heads, slopes, dropout
    rates, eps, K...), each as its ``repr``. Taken as built, before training."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model_definition takes a torch.nn.Module, got {type(model).__name__}")
    return {path: {"type": type(module).__qualname__,
                   **{k: repr(v) for k, v in sorted(vars(module).items())
                      if not k.startswith("_") and k != "training" and _is_setting(v)}}
            for path, module in model.named_modules()}


def _definition_changes(saved: dict, now: dict) -> list[str]:
    """What differs between two definitions, module by module, in words."""
    changes = []
    for path in sorted(set(saved) | set(now)):
        before, after = saved.get(path), now.get(path)
        where = path or "(the model)"
        if before is None or after is None:
            changes.append(f"{where}: {'added' if before is None else 'gone'} "
                           f"({(after or before)['type']})")
        elif before != after:
            keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            changes.append(f"{where} ({after['type']}): " + ", ".join(
                f"{k} saved {before.get(k, '(none)')}, now {after.get(k, '(none)')}"
                for k in keys))
    return changes


def _check_definition(state: dict, now: dict, path: str) -> None:
    """Warns where this graphloc builds the checkpoint's configuration as another model
    than the one trained (a default that changed since: an activation, a slope, a
    normalisation), which its weights would load into unchanged where the shapes agree.
    Checkpoints written before 2026-12-07 keep no definition and are not checked."""
    saved = state.get("definition")
    if not isinstance(saved, dict):
        return
    changes = _definition_changes(saved, now)
    if changes:
        more = f" (and {len(changes) - 4} more modules)" if len(changes) > 4 else ""
        warnings.warn(f"{path}: this graphloc builds its configuration as another model than "
                      f"the one it was trained as: {'; '.join(changes[:4])}{more}. Its "
                      f"weights are loaded into the model built now, which may compute "
                      f"differently; pass the saved settings in model_kwargs to rebuild the "
                      f"trained one", stacklevel=3)


def _write_metrics(history: list[dict], out_dir: str) -> None:
    write_json(history, os.path.join(out_dir, "metrics.json"), indent=1)
    try:
        plt = require_matplotlib()
    except ImportError:  # the curve is optional; metrics.json has the numbers
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    epochs = [h["epoch"] for h in history]
    for split in ("train", "val", "test"):
        ax.plot(epochs, [h[split] for h in history], label=split)
    ax.set(xlabel="epoch", ylabel="accuracy")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, os.path.join(out_dir, "curve.png"), dpi=100)
    plt.close(fig)


def load_checkpoint(path: str) -> tuple[torch.nn.Module, dict]:
    """The model of a ``fit`` checkpoint (in eval mode) and the checkpoint's metadata."""
    state = load_file(path, "checkpoint",
                      keys=("config", "state_dict", "num_features", "num_classes"),
                      rebuild=_NO_REBUILD)
    config = TrainConfig(**state["config"])
    augmenter = state.get("augmenter")
    model = _build(config, state["num_features"], state["num_classes"], state.get("hetero"),
                   LocalAugmenter(**augmenter) if augmenter else None)
    _check_definition(state, model_definition(model), path)
    model.load_state_dict(state["state_dict"])
    return model.eval(), {k: v for k, v in state.items() if k != "state_dict"}
