"""Local augmentation (LAGNN): a conditional VAE of neighbour features, and a model wrapper
that feeds generated neighbour features to extra first-layer branches.

From `Liu et al., "Local Augmentation for Graph Neural Networks" (ICML 2022)
<https://arxiv.org/abs/2109.03856>`_. Deviations from the released code, and why:

- continuous features (road networks) get a Gaussian likelihood with a learned variance on
  standardised features, binary ones the paper's Bernoulli; the released citation code
  always uses a sigmoid + BCE, wrong for continuous data, and the OGB code's generator
  (BatchNorm layers, a Tanh output, MSE) bounds every generated feature to (-1, 1);
- the (centre, neighbour) pairs are drawn in batches from the CSR, never stacked as a
  dense ``2|E| x F`` matrix;
- the generator is kept by its loss on held-out pairs, not by the uncertainty score of an
  auxiliary GCN (which ties pre-training to one backbone and its own training run);
- the checkpoint holds the generator's weights and configuration, written atomically (the
  released script calls ``torch.save`` without an object).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_choice, check_flags, check_int, check_seed
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import as_graph, check_dropouts, check_sizes
from graphloc.nn.conv.registry import CONVS, check_registered
from graphloc.nn.dropout import Dropout
from graphloc.nn.models.gnn import GNN, make_activation, stack_hops, with_attention_dropout

LIKELIHOODS = ("bernoulli", "gaussian")


def infer_likelihood(x: Tensor) -> str:
    """``"bernoulli"`` for features that are all 0 or 1, else ``"gaussian"``."""
    return "bernoulli" if bool(((x == 0) | (x == 1)).all()) else "gaussian"


class LocalAugmenter(torch.nn.Module):
    r"""Conditional VAE of a neighbour's features :math:`x_j` given the centre's :math:`x_i`.

    Encoder :math:`[x_j \Vert x_i] \to` hidden (ReLU) :math:`\to \mu, \log\sigma^2`;
    decoder :math:`[z \Vert x_i] \to` hidden (ReLU) :math:`\to \hat x_j`. Loss per pair:
    negative log-likelihood of :math:`x_j` plus :math:`\mathrm{KL}(\mathcal N(\mu, \sigma^2)
    \Vert \mathcal N(0, I))`, averaged over the batch. Bernoulli: :math:`\hat x` are logits
    and the NLL is the summed binary cross-entropy. Gaussian: features are standardised with
    the statistics given to :meth:`fit_scaler`, :math:`\hat x` is the mean and a learned
    per-feature log-variance completes the NLL.

    Args:
        in_channels (int): feature width F.
        hidden_channels (int, default 256): width of the encoder and decoder hidden layers.
        latent_channels (int, default 10): width of z.
        likelihood (str): "bernoulli" or "gaussian" (see :func:`infer_likelihood`).
    """

    def __init__(self, in_channels: int, hidden_channels: int = 256, latent_channels: int = 10,
                 likelihood: str = "gaussian"):
        super().__init__()
        check_sizes("LocalAugmenter", in_channels=in_channels, hidden_channels=hidden_channels,
                    latent_channels=latent_channels)
        if likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
        self.config = dict(in_channels=in_channels, hidden_channels=hidden_channels,
                           latent_channels=latent_channels, likelihood=likelihood)
        self.likelihood = likelihood
        self.encoder = torch.nn.Linear(2 * in_channels, hidden_channels)
        self.mu = torch.nn.Linear(hidden_channels, latent_channels)
        self.logvar = torch.nn.Linear(hidden_channels, latent_channels)
        self.decoder = torch.nn.Sequential(
            torch.nn.Linear(latent_channels + in_channels, hidden_channels), torch.nn.ReLU(),
            torch.nn.Linear(hidden_channels, in_channels))
        self.out_logvar = torch.nn.Parameter(torch.zeros(in_channels))
        self.register_buffer("shift", torch.zeros(in_channels))
        self.register_buffer("scale", torch.ones(in_channels))

    def fit_scaler(self, x: Tensor) -> None:
        """Standardisation statistics for Gaussian features (no-op for Bernoulli)."""
        if self.likelihood == "gaussian":
            self.shift.copy_(x.mean(0))
            self.scale.copy_(x.std(0, unbiased=False).clamp(min=1e-6))

    def _scaled(self, x: Tensor) -> Tensor:
        return (x - self.shift) / self.scale if self.likelihood == "gaussian" else x

    def _check(self, x: Tensor, name: str) -> None:
        if not x.dtype.is_floating_point:
            raise TypeError(f"{name} must be floating point, got {x.dtype}")
        own = self.decoder[0].weight.dtype
        if x.dtype != own:
            raise TypeError(f"{name} is {x.dtype} but the augmenter's weights are {own}: "
                            f"convert one to the other ({name}.to({own}) or "
                            f"augmenter.to({x.dtype}))")
        if x.dim() != 2 or x.size(1) != self.config["in_channels"]:
            raise ValueError(f"{name} must be [N, {self.config['in_channels']}], "
                             f"got {list(x.shape)}")

    def loss(self, neighbour: Tensor, centre: Tensor) -> Tensor:
        """Mean negative ELBO of a batch of (neighbour, centre) feature pairs."""
        self._check(neighbour, "neighbour")
        self._check(centre, "centre")
        target, cond = self._scaled(neighbour), self._scaled(centre)
        h = F.relu(self.encoder(torch.cat([target, cond], dim=1)))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        out = self.decoder(torch.cat([z, cond], dim=1))
        if self.likelihood == "bernoulli":
            nll = F.binary_cross_entropy_with_logits(out, target, reduction="sum")
        else:
            nll = 0.5 * (((target - out) ** 2) * (-self.out_logvar).exp() + self.out_logvar
                         + math.log(2 * math.pi)).sum()
        kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum()
        return (nll + kl) / target.size(0)

    def generate(self, x: Tensor, mean: bool = False, generator: torch.Generator | None = None
                 ) -> Tensor:
        """Neighbour features for every node as the centre, ``[N, F]`` in the input's scale:
        Bernoulli probabilities or Gaussian means. ``mean=True`` decodes z = 0 (the prior's
        mean), a deterministic draw; else z ~ N(0, I)."""
        self._check(x, "x")
        cond = self._scaled(x)
        latent = self.config["latent_channels"]
        z = torch.zeros(x.size(0), latent, dtype=x.dtype, device=x.device) if mean else \
            torch.randn(x.size(0), latent, dtype=x.dtype, device=x.device, generator=generator)
        out = self.decoder(torch.cat([z, cond], dim=1))
        return out.sigmoid() if self.likelihood == "bernoulli" else out * self.scale + self.shift

    def save(self, path: str) -> None:
        """Writes weights and configuration to ``path`` atomically (temp file + rename)."""
        from graphloc.io import atomic_save
        atomic_save({"config": self.config, "state_dict": self.state_dict()}, path)

    @classmethod
    def load(cls, path: str) -> LocalAugmenter:
        from graphloc.io import load_file
        blob = load_file(path, "augmenter checkpoint", keys=("config", "state_dict"),
                         rebuild="Pretrain the augmenter again.")
        model = cls(**blob["config"])
        model.load_state_dict(blob["state_dict"])
        return model


def _edge_pairs(graph: Graph) -> tuple[Tensor, Tensor]:
    """(centre, neighbour) node ids of every edge without self-loops: ``E``-long index
    vectors, not feature matrices."""
    centre = torch.repeat_interleave(torch.arange(graph.num_nodes, device=graph.device),
                                     graph.csr.degree().long())
    neighbour = graph.csr.indices.long()
    keep = centre != neighbour
    return centre[keep], neighbour[keep]


def pretrain_augmenter(x: Tensor, graph, epochs: int = 10, batch_size: int = 64,
                       lr: float = 0.01, hidden_channels: int = 256, latent_channels: int = 10,
                       likelihood: str = "auto", holdout: float = 0.05, seed: int = 0,
                       checkpoint: str | None = None, progress: bool = True
                       ) -> LocalAugmenter:
    """Trains a :class:`LocalAugmenter` on all (centre, neighbour) pairs of ``graph``.

    Pairs come in shuffled batches of edge ids gathered from the CSR. A ``holdout``
    fraction of the pairs is kept aside; the weights of the epoch with the lowest held-out
    loss are returned (and written to ``checkpoint`` if given). ``epochs``, ``batch_size``,
    ``lr`` and the widths default to the official citation code's (``--pretrain_epochs``
    10, ``--batch_size`` 64, ``--pretrain_lr`` 0.01, 256 hidden, latent 10).
    """
    graph = as_graph(graph, x)
    check_flags("pretrain_augmenter", progress=progress)
    _check_pretraining(epochs, batch_size, lr, holdout, seed)
    if x.dim() != 2 or x.size(0) != graph.num_nodes:
        raise ValueError(f"x must be [{graph.num_nodes}, F], got {list(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be floating point, got {x.dtype}")
    if not torch.isfinite(x).all():
        bad = torch.nonzero(~torch.isfinite(x))[0].tolist()
        raise ValueError(f"x has a non-finite value at {bad}: {x[bad[0], bad[1]].item()}")
    if likelihood == "auto":
        likelihood = infer_likelihood(x)
    elif likelihood == "bernoulli" and not bool(((x >= 0) & (x <= 1)).all()):
        bad = torch.nonzero((x < 0) | (x > 1))[0].tolist()
        raise ValueError(f"likelihood='bernoulli' models features in [0, 1], but x{bad} = "
                         f"{x[bad[0], bad[1]].item()}: use 'gaussian' (or 'auto')")
    centre, neighbour = _edge_pairs(graph)
    if centre.numel() < 2:
        raise ValueError("the graph has fewer than 2 edges between distinct nodes: "
                         "no neighbour pairs to learn from")
    # The weights' initialisation and the VAE's noise draw from torch's global generator:
    # forked, so that the caller's random state is left as it was.
    devices = [x.device] if x.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), _one_cpu_thread(x.device):
        torch.manual_seed(seed)
        return _pretrain(x, centre, neighbour, epochs, batch_size, lr, hidden_channels,
                         latent_channels, likelihood, holdout, seed, checkpoint, progress)


@contextlib.contextmanager
def _one_cpu_thread(device: torch.device):
    """Pretraining on the CPU runs on one thread, then the caller's count is restored. Its
    thousands of small steps summed in a thread count's order drifted apart: 10 epochs on a
    400-node graph on 1 and on 2 threads gave weights up to 0.12 apart, and a model's R
    0.25% apart between one process and two (torchrun gives each one thread). One thread
    is no slower here (Helsinki on 2 AMD EPYC cores: 1.38 s against 1.63 s on 2 threads,
    medians of 5 paired runs, benchmarks/RESULTS.md)."""
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _check_pretraining(epochs, batch_size, lr, holdout, seed) -> None:
    """Each setting in its range, named when not: an epoch count of 0 failed inside the
    loop, a batch size of 0 divided by zero, and a held-out share of 1 or more left no pair
    to train on and returned the untrained generator."""
    check_int(epochs, "pretrain_augmenter: epochs", 1)
    check_int(batch_size, "pretrain_augmenter: batch_size", 1)
    check_seed(seed, "pretrain_augmenter: seed")
    _check_real("pretrain_augmenter", "lr", lr, lambda v: v > 0, "a number > 0 and finite")
    _check_real("pretrain_augmenter", "holdout", holdout, lambda v: 0 < v < 1,
                "a number in (0, 1)")


def _check_real(owner: str, name: str, value, within, wanted: str) -> None:
    """A finite real number (not a bool) for which ``within`` holds, else a ValueError
    saying it must be ``wanted``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not within(value):
        raise ValueError(f"{owner}: {name} must be {wanted}, got {value!r}")


def _pretrain(x, centre, neighbour, epochs, batch_size, lr, hidden_channels, latent_channels,
              likelihood, holdout, seed, checkpoint, progress) -> LocalAugmenter:
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(centre.numel(), generator=gen).to(centre.device)
    num_holdout = min(max(1, int(holdout * centre.numel())), centre.numel() - 1)
    held, train = order[:num_holdout], order[num_holdout:]
    model = LocalAugmenter(x.size(1), hidden_channels, latent_channels, likelihood).to(x)
    model.fit_scaler(x)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best, best_state = math.inf, None
    bar = _progress(epochs * math.ceil(train.numel() / batch_size), progress, "augmenter")
    for _ in range(epochs):
        model.train()
        shuffled = train[torch.randperm(train.numel(), generator=gen).to(train.device)]
        for batch in shuffled.split(batch_size):
            opt.zero_grad()
            model.loss(x[neighbour[batch]], x[centre[batch]]).backward()
            opt.step()
            bar.update()
        held_loss = _heldout_loss(model, x, centre, neighbour, held, batch_size)
        bar.set_postfix(heldout=f"{held_loss:.4g}")
        if held_loss < best:
            best, best_state = held_loss, {k: v.clone() for k, v in model.state_dict().items()}
            if checkpoint:
                model.save(checkpoint)
    bar.close()
    if best_state is None:
        raise RuntimeError(f"augmenter pretraining diverged (held-out loss {held_loss}); "
                           f"try a lower lr than {lr}")
    model.load_state_dict(best_state)
    # no stale pretraining gradients: an optimiser given the frozen generator's parameters
    # before its first zero_grad would step them with those
    model.zero_grad(set_to_none=True)
    return model.eval()


@torch.no_grad()
def _heldout_loss(model, x, centre, neighbour, held, batch_size) -> float:
    model.eval()
    total = sum(model.loss(x[neighbour[b]], x[centre[b]]).item() * b.numel()
                for b in held.split(batch_size))
    return total / held.numel()


def _progress(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm
    return tqdm(total=total, disable=not enabled, desc=desc, leave=False)


def _row_normalised(t: Tensor) -> Tensor:
    """Each row divided by its sum; a row summing to 0 becomes 0 (the official code's
    ``feature_tensor_normalize``)."""
    total = t.sum(1, keepdim=True)
    return torch.where(total == 0, 0.0, t / total)


def consistency_loss(logits: list[Tensor], temperature: float = 0.5) -> Tensor:
    """GRAND's consistency regulariser: squared distance of each prediction to the
    sharpened mean prediction (a constant target), averaged over nodes and predictions."""
    probs = [p.softmax(dim=-1) for p in logits]
    mean = torch.stack(probs).mean(0)
    sharp = mean.pow(1.0 / temperature)
    sharp = (sharp / sharp.sum(dim=1, keepdim=True)).detach()
    return torch.stack([(p - sharp).pow(2).sum(1).mean() for p in probs]).mean()


def _checked_objective(owner: str, samples, consistency_weight, temperature) -> dict:
    """The training objective's settings, each in its range or named."""
    check_int(samples, f"{owner}: samples", 1)
    _check_real(owner, "consistency_weight", consistency_weight, lambda v: v >= 0,
                "a finite number >= 0")
    _check_real(owner, "temperature", temperature, lambda v: v > 0, "a finite number > 0")
    return {"samples": samples, "consistency_weight": consistency_weight,
            "temperature": temperature}


def _check_augmenter(augmenter, in_channels: int) -> None:
    """A ``LocalAugmenter`` of the model's input width (or None): another module failed at
    the first forward, and a generator of another width there, in the first conv."""
    if augmenter is None:
        return
    if not isinstance(augmenter, LocalAugmenter):
        raise TypeError(f"LAModel: augmenter must be a LocalAugmenter (pretrain_augmenter "
                        f"or LocalAugmenter.load), got {type(augmenter).__name__}")
    if augmenter.config["in_channels"] != in_channels:
        raise ValueError(f"LAModel: the augmenter generates {augmenter.config['in_channels']} "
                         f"features per node but in_channels is {in_channels}")


# The official LAGAT's settings (``Citation/lagat.py``: ``--nb_heads`` 8 in the branches,
# ``--nb_heads_2`` 1 in the output conv, ``F.elu(x, alpha=args.alpha)`` with alpha 0.2)
LAGAT_DEFAULTS = {"heads": 8, "out_heads": 1, "act": "elu", "act_kwargs": {"alpha": 0.2}}


def _with_official_defaults(conv: str, dropout: float, settings: dict, conv_kwargs: dict
                            ) -> tuple[dict, dict]:
    """``settings`` (act, act_kwargs, out_heads, attention_dropout) and ``conv_kwargs``
    with the official defaults filled in where the caller gave none: LAGAT's for "gat"
    (``LAGAT_DEFAULTS``, and its convs' attention dropout: the model's ``dropout``, as
    ``GATConv(..., dropout=args.dropout)`` there), LAGCN's ReLU for every other conv."""
    settings = dict(settings)
    if conv != "gat":
        settings["act"] = settings["act"] or "relu"
        return settings, conv_kwargs
    if settings["act"] is None:
        settings["act"] = LAGAT_DEFAULTS["act"]
        if settings["act_kwargs"] is None:
            settings["act_kwargs"] = dict(LAGAT_DEFAULTS["act_kwargs"])
    for name, default in (("out_heads", LAGAT_DEFAULTS["out_heads"]),
                          ("attention_dropout", dropout)):
        settings[name] = default if settings[name] is None else settings[name]
    return settings, {"heads": LAGAT_DEFAULTS["heads"], **conv_kwargs}


class LAModel(ModelCapabilities, torch.nn.Module):
    """Any registered conv with local augmentation: one first-layer branch per generated
    feature matrix plus one for the original features, concatenated, then the remaining
    ``num_layers - 1`` layers as a :class:`~graphloc.nn.models.gnn.GNN` whose hidden layers
    keep the concatenation's width, ``(num_generated + 1) * hidden_channels``, as the
    official OGB models (``OGB/lagcn_arxiv.py``, ``lasage_arxiv.py``, ``lagat_arxiv.py``).

    Each branch is ``dropout(act(norm(conv(input_dropout(X_k), graph))))``, so with
    ``num_generated=0`` and ``input_dropout=0`` the model is exactly ``GNN(conv, ...)``
    with the same weights (in evaluation, whatever the dropouts). In training every
    forward draws fresh generated features (``augmenter.generate``); in evaluation the
    draw is deterministic: the decoder at z = 0 (``inference="mean"``), or the logits are
    averaged over ``eval_draws`` seeded draws (``inference="average"``).

    Args:
        conv (str): a name in ``CONVS``.
        augmenter (LocalAugmenter, optional): the pre-trained generator (needed when
            ``num_generated > 0``); it is frozen.
        num_generated (int, default 1): generated branches (the paper's ``concat``).
        in_channels, hidden_channels, out_channels, num_layers, dropout, act, norm,
        residual, act_kwargs, out_heads, attention_dropout, **conv_kwargs: as for
        :class:`~graphloc.nn.models.gnn.GNN` (``num_layers >= 2``), with the official
        defaults: LAGCN's ReLU for every conv but "gat", which takes the official LAGAT's
        (``LAGAT_DEFAULTS``: 8 heads in the branches and hidden layers, one averaged head
        in the output conv, ELU with alpha 0.2, as ``F.elu(x, alpha=args.alpha)`` there,
        and ``attention_dropout`` = ``dropout``, as its ``GATConv(..., dropout=...)``).
        inference (str, default "mean"), eval_draws (int, default 4): see above.
        samples (int, default 4), consistency_weight (float, default 1.0), temperature
            (float, default 0.5): the training objective's (:meth:`training_loss`) draws
            per step, weight of the consistency term and sharpening temperature: the
            citation scripts' ``--samples``, ``--lam`` and ``--tem`` (the OGB scripts take 2
            or 4 samples). ``fit`` and ``graphloc train`` train with them.
        input_dropout (float, optional): dropout on each branch's input before its conv,
            as the official LAGCN (``F.dropout(x_list[k])``); default ``dropout``.
        (Differences from the official ``SongtaoLiu0823/LAGNN``, also in ``docs/models.md``:
        evaluation uses a deterministic draw, not a fresh random one reused from the best
        validation epoch; any registered conv, not only GCN and GAT; the augmenter is
        chosen by held-out reconstruction loss, not by a second model's uncertainty score,
        and may have a Gaussian likelihood for continuous features; ``num_generated``
        defaults to the OGB scripts' 1 (the citation scripts' is 4); the convs keep their
        own initialisation; the original features' branch comes first in the
        concatenation, the official's last.)
        normalize_generated (bool or "auto", default "auto"): divide each generated row by
            its sum (zero sums give 0), as the official citation code does to the decoder's
            output; "auto" does it for a Bernoulli augmenter (0/1 features, the citation
            setting) and not for a Gaussian one (continuous features; the official OGB code
            does not normalise either).
        wide_hidden (bool, default True): the hidden layers after the branches are
            ``(num_generated + 1) * hidden_channels`` wide, as the official OGB models;
            False: ``hidden_channels`` wide (graphloc's layers before 2026-12-07). Only
            models of 3 layers or more have such layers (the citation models have 2).
        normalize_input (bool or "auto", default "auto"): divide each row of the original
            features by its sum before their branch (zero sums give 0), as the official
            citation code feeds ``normalize_features(features)`` to that branch while its
            generator reads the raw 0/1 features; "auto" does it for a Bernoulli augmenter
            and not otherwise (the OGB code, and a model without an augmenter, which then
            stays exactly ``GNN``).
    """

    def __init__(self, conv: str, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, augmenter: LocalAugmenter | None = None,
                 num_generated: int = 1, dropout: float = 0.0, act: str | None = None,
                 norm: str | None = None, residual: bool = False, inference: str = "mean",
                 eval_draws: int = 4, input_dropout: float | None = None,
                 normalize_generated: bool | str = "auto",
                 normalize_input: bool | str = "auto", wide_hidden: bool = True,
                 act_kwargs: dict | None = None, out_heads: int | None = None,
                 attention_dropout: float | None = None, samples: int = 4,
                 consistency_weight: float = 1.0, temperature: float = 0.5, **conv_kwargs):
        super().__init__()
        self.objective = _checked_objective("LAModel", samples, consistency_weight,
                                            temperature)
        settings, conv_kwargs = _with_official_defaults(
            conv, dropout, dict(act=act, act_kwargs=act_kwargs, out_heads=out_heads,
                                attention_dropout=attention_dropout), conv_kwargs)
        check_sizes("LAModel", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers, eval_draws=eval_draws)
        input_dropout = dropout if input_dropout is None else input_dropout
        check_dropouts("LAModel", dropout=dropout, input_dropout=input_dropout)
        check_flags("LAModel", wide_hidden=wide_hidden)
        for name, value in (("normalize_generated", normalize_generated),
                            ("normalize_input", normalize_input)):
            if not isinstance(value, (bool, str)) or value not in (True, False, "auto"):
                raise ValueError(f"{name} must be True, False or 'auto', got {value!r}")
        if num_layers < 2:
            raise ValueError(f"LAModel needs num_layers >= 2, got {num_layers}")
        if isinstance(num_generated, bool) or not isinstance(num_generated, int) \
                or num_generated < 0 or (num_generated > 0 and augmenter is None):
            raise ValueError(f"num_generated={num_generated} needs an augmenter "
                             "(and must be >= 0)")
        _check_augmenter(augmenter, in_channels)
        check_choice("LAModel", "inference", inference, ("mean", "average"))
        check_registered("LAModel", conv)
        check_choice("LAModel", "norm", norm, (None, "batch", "layer"))
        self.augmenter = augmenter.requires_grad_(False) if augmenter is not None else None
        self.num_generated, self.inference, self.eval_draws = num_generated, inference, eval_draws
        branch_kwargs = with_attention_dropout("LAModel", conv,
                                               settings["attention_dropout"], conv_kwargs)
        self.branches = torch.nn.ModuleList(CONVS[conv](in_channels, hidden_channels,
                                                        **branch_kwargs)
                                            for _ in range(num_generated + 1))
        make_norm = {None: lambda w: torch.nn.Identity(), "batch": torch.nn.BatchNorm1d,
                     "layer": torch.nn.LayerNorm}[norm]
        self.branch_norms = torch.nn.ModuleList(make_norm(hidden_channels)
                                                for _ in range(num_generated + 1))
        self.act = make_activation("LAModel", settings["act"], settings["act_kwargs"])
        self.dropout = Dropout(dropout)
        self.input_dropout = Dropout(input_dropout)
        citation_setting = augmenter is not None and augmenter.likelihood == "bernoulli"
        self.normalize_generated = (citation_setting if normalize_generated == "auto"
                                    else normalize_generated)
        self.normalize_input = citation_setting if normalize_input == "auto" else normalize_input
        self.wide_hidden = wide_hidden
        concatenated = (num_generated + 1) * hidden_channels
        self.rest = GNN(conv, concatenated, concatenated if wide_hidden else hidden_channels,
                        out_channels, num_layers - 1, dropout=dropout, norm=norm,
                        residual=residual, **settings, **conv_kwargs)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Weights of another shape are refused naming the defaults that changed on
        2026-12-07 (torch's own message gives only the shapes): LA models of 3 layers or
        more saved before then have narrower hidden layers (``wide_hidden=False``), and
        la-gat ones 4 heads everywhere and ReLU."""
        for name, value in self.state_dict(keep_vars=True).items():
            if name.startswith("augmenter."):
                continue
            given = state_dict.get(f"{prefix}{name}")
            if isinstance(given, Tensor) and given.shape != value.shape:
                error_msgs.append(
                    f"{prefix}{name} is {list(given.shape)} in the state dict but "
                    f"{list(value.shape)} in this model. Since 2026-12-07 the hidden layers "
                    f"after the branches are (num_generated + 1) * hidden_channels wide "
                    f"(wide_hidden=True, as the official OGB models; this model has "
                    f"wide_hidden={self.wide_hidden}; wide_hidden=False for the former "
                    f"hidden_channels), and la-gat takes the official LAGAT's settings "
                    f"(heads=8, out_heads=1, act='elu'; heads=4, out_heads=4, act='relu' "
                    f"for the former defaults): build the model the weights were saved from")
                break
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def generated_features(self, x: Tensor, generator: torch.Generator | None = None,
                           mean: bool = False) -> list[Tensor]:
        """``num_generated`` draws of the frozen generator given ``x``. They are functions
        of ``x`` (each node's draw of its own features), so gradients with respect to
        ``x`` flow through them: the model's Jacobian, and so its influence, is that of the
        function it computes (graphloc cut them until 2026-12-07, and measured a model with
        the draws as constants). The generator's weights get none (frozen)."""
        if self.num_generated == 0:
            return []
        draws = [self.augmenter.generate(x, mean=mean, generator=generator)
                 for _ in range(self.num_generated)]
        return [_row_normalised(d) for d in draws] if self.normalize_generated else draws

    def forward(self, x: Tensor, graph, generated: list[Tensor] | None = None) -> Tensor:
        graph = as_graph(graph, x)
        if generated is None and not self.training and self.num_generated:
            if self.inference == "average":
                draws = [self.generated_features(x, torch.Generator(x.device).manual_seed(s))
                         for s in range(self.eval_draws)]
                return torch.stack([self(x, graph, d) for d in draws]).mean(0)
            generated = self.generated_features(x, mean=True)
        if generated is None:
            generated = self.generated_features(x)
        if len(generated) != self.num_generated:
            raise ValueError(f"expected {self.num_generated} generated feature matrices, "
                             f"got {len(generated)}")
        original = _row_normalised(x) if self.normalize_input else x
        hs = [self.dropout(self.act(norm(conv(self.input_dropout(features), graph))))
              for conv, norm, features in zip(self.branches, self.branch_norms,
                                              [original, *generated], strict=True)]
        return self.rest(torch.cat(hs, dim=1), graph)

    @property
    def graphloc_hops(self) -> int:
        """How far a node's output reaches: the branches' convs, then the rest (the generator
        reads each node's own features only)."""
        return stack_hops(self.branches[:1]) + self.rest.graphloc_hops

    def training_loss(self, x: Tensor, graph, y: Tensor, mask: Tensor,
                      samples: int | None = None, consistency_weight: float | None = None,
                      temperature: float | None = None) -> Tensor:
        """The paper's objective: mean cross-entropy over ``samples`` forwards (each with a
        fresh draw) on the ``mask``-ed nodes, plus ``consistency_weight`` times the
        consistency loss over all nodes. Each argument left None is the model's own (set
        when built; ``fit`` trains with those)."""
        graph = as_graph(graph, x)
        given = {"samples": samples, "consistency_weight": consistency_weight,
                 "temperature": temperature}
        samples, consistency_weight, temperature = _checked_objective(
            "LAModel.training_loss", **{k: self.objective[k] if v is None else v
                                        for k, v in given.items()}).values()
        logits = [self(x, graph) for _ in range(samples)]
        nll = torch.stack([F.cross_entropy(out[mask], y[mask]) for out in logits]).mean()
        if samples < 2 or consistency_weight == 0:
            return nll
        return nll + consistency_weight * consistency_loss(logits, temperature)
