r"""LargeGT (`Dwivedi et al., "Graph Transformers for Large Graphs", arXiv 2312.11109
<https://arxiv.org/abs/2312.11109>`_): a local module attending over 3K tokens sampled once
from each node's 2-hop neighbourhood (raw, once and twice propagated features: a 4-hop
receptive field from 2-hop operations) and a global module attending to a codebook of
centroids learned by EMA k-means, trained by mini-batches of nodes.
"""

from __future__ import annotations

import math
import warnings
import weakref

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_index, check_int, check_number, check_seed
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import as_graph, check_dropouts, check_input, check_sizes
from graphloc.nn.dropout import Dropout
from graphloc.nn.models.node2vec import Node2Vec


# NumPy and SciPy work, once per graph and cached on it: torch.compile runs it eagerly (a
# graph break; under fullgraph=True run the model once first, which caches it)
@torch.compiler.disable
def hop2_tokens(graph: Graph, K: int, seed: int = 0) -> Tensor:
    """Per node ``v`` a fixed sequence ``[v, u_1 .. u_{K-1}]`` (``[N, K]`` int64), as
    LargeGT's official sampler: draws without replacement from the list of ``v``'s distinct
    in-neighbours followed by the distinct nodes two in-steps away (the rows of A and A·A;
    ``v`` itself is in the second when a neighbour points back, and a node in both lists
    is there twice). Shorter lists repeat in their order; nodes with no 2-hop
    neighbourhood get distinct random nodes. Deterministic for a ``seed`` (C++, parallel
    over nodes). :class:`LargeGT` passes its ``read_graph``: the reversed graph for the
    official direction, where a node samples the nodes its edges point to."""
    check_int(K, "K (tokens per node)", 1)
    graph._require_one_node_set("hop2_tokens")
    return ops.hop2_sample(graph, K, seed)


def fastrp_encoding(graph: Graph, dim: int, seed: int = 0, hops: int = 3) -> Tensor:
    """A structural position encoding ``[N, dim]``: FastRP (`Chen et al., 2019
    <https://arxiv.org/abs/1908.11512>`_), a random Gaussian projection averaged over 1 to
    ``hops`` hops (random-walk normalised), each hop L2-normalised, then standardised per
    column. LargeGT's ``positions="fastrp"``, in place of the official node2vec: no random
    walks, no skip-gram training, ``hops`` sparse products."""
    check_int(dim, "dim", 1)
    check_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    e = torch.randn(graph.num_nodes, dim, generator=gen).to(graph.device) / math.sqrt(dim)
    out = torch.zeros_like(e)
    for _ in range(hops):
        e = ops.spmm(graph, e, reduce="mean")
        out += F.normalize(e, dim=1)
    # one node (or none) has no spread (torch's unbiased std would be NaN): it standardises to 0
    std = out.std(0) if out.size(0) > 1 else out.new_zeros(dim)
    return (out - out.mean(0)) / std.clamp_min(1e-6)


@torch.compiler.disable  # walks, a loader and an optimiser: eager, once per graph
def node2vec_encoding(graph: Graph, dim: int, seed: int = 0) -> Tensor:
    """LargeGT's position encoding ``[N, dim]`` as its scripts train it
    (``data/pos_enc/*_node2vec.py``): PyG's ``Node2Vec`` (graphloc's twin) on the graph's
    edges, walk length 40, context 20, 10 walks per node, one epoch of ``SparseAdam``
    (lr 0.01) over shuffled batches of 256 start nodes. Seeded by ``seed``; the caller's
    random state is left as it was. Every node gets a row (the scripts let PyG infer the
    count from the largest id, which drops trailing isolated nodes)."""
    check_int(dim, "dim", 1)
    check_seed(seed)
    if graph.num_nodes == 0:  # no node to start a walk from (the loader refuses)
        return torch.zeros(0, dim, device=graph.device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Node2Vec(graph.edge_index.cpu(), dim, walk_length=40, context_size=20,
                         walks_per_node=10, num_nodes=graph.num_nodes)
        _sparse_adam_epoch(model, batch_size=256, lr=0.01)
    return model.embedding.weight.detach().to(graph.device)


def _sparse_adam_epoch(model: Node2Vec, batch_size: int, lr: float,
                       betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """One epoch of the scripts' loop (``model.loss`` and torch's ``SparseAdam``), the same
    numbers to float32 rounding without its cost: the loss is one fused dot product per
    (window start, context node) pair, where ``Node2Vec.loss`` gathers a [windows, context,
    dim] tensor and SparseAdam coalesces a row per lookup; the Adam step then updates the
    rows the batch looked up, as SparseAdam does, with its global step count."""
    weight = model.embedding.weight
    exp_avg, exp_avg_sq = torch.zeros_like(weight), torch.zeros_like(weight)
    for step, (positive, negative) in enumerate(model.loader(batch_size=batch_size,
                                                             shuffle=True), start=1):
        grad = _skip_gram_gradient(weight, positive, negative, model.EPS)
        rows = torch.unique(torch.cat([positive.reshape(-1), negative.reshape(-1)]))
        g = grad[rows]
        m = exp_avg[rows].lerp_(g, 1 - betas[0])
        v = exp_avg_sq[rows].lerp_(g * g, 1 - betas[1])
        exp_avg[rows], exp_avg_sq[rows] = m, v
        size = lr * math.sqrt(1 - betas[1] ** step) / (1 - betas[0] ** step)
        with torch.no_grad():
            weight[rows] -= size * m / (v.sqrt() + eps)


def _skip_gram_gradient(weight: Tensor, positive: Tensor, negative: Tensor,
                        eps: float) -> Tensor:
    """The gradient of ``Node2Vec.loss(positive, negative)`` with respect to the
    embedding: each window's start paired with its other nodes, scored by ``ops.sddmm``."""
    windows = torch.cat([positive, negative])
    context = windows.size(1) - 1
    pairs = torch.stack([windows[:, :1].expand(-1, context).reshape(-1),
                         windows[:, 1:].reshape(-1)])
    graph = Graph._derived(pairs, weight.size(0))  # ids from the walks: in range
    weight = weight.detach().requires_grad_()
    with torch.enable_grad():
        probability = torch.sigmoid(ops.sddmm(graph, weight, weight))
        split = positive.size(0) * context
        loss = -torch.log(probability[:split] + eps).mean() \
            - torch.log(1 - probability[split:] + eps).mean()
        (grad,) = torch.autograd.grad(loss, weight)
    return grad


#: LargeGT's ``positions=`` choices
_POSITION_ENCODINGS = {"node2vec": node2vec_encoding, "fastrp": fastrp_encoding}


class EMACodebook(torch.nn.Module):
    r"""Vector quantisation by exponential-moving-average k-means (van den Oord et al.,
    2017): ``num_codes`` centroids over batch-normalised inputs, updated in training with
    decay ``decay`` and Laplace-smoothed cluster sizes, plus every node's current centroid
    (int64: no 32,767 cap) and the number of nodes per centroid. Centroids start at random
    inputs of the first training batch.
    """

    def __init__(self, num_codes: int, dim: int, decay: float = 0.99, eps: float = 1e-5):
        super().__init__()
        check_int(num_codes, "EMACodebook: num_codes", 1)
        check_int(dim, "EMACodebook: dim", 1)
        for name, value in (("decay", decay), ("eps", eps)):
            check_number("EMACodebook", name, value)
        if not 0 < decay < 1:
            raise ValueError(f"EMACodebook: decay must lie in (0, 1), got {decay!r}")
        if eps < 0:  # (the Laplace smoothing of the cluster sizes)
            raise ValueError(f"EMACodebook: eps must be >= 0, got {eps!r}")
        self.num_codes, self.decay, self.eps = num_codes, decay, eps
        self.norm = torch.nn.BatchNorm1d(dim, affine=False)
        self.register_buffer("centroids", torch.zeros(num_codes, dim))
        self.register_buffer("cluster_size", torch.zeros(num_codes))
        self.register_buffer("embed_sum", torch.zeros(num_codes, dim))
        self.register_buffer("initialised", torch.tensor(False))
        self.register_buffer("assignment", torch.zeros(0, dtype=torch.long))  # per node
        self.register_buffer("counts", torch.zeros(num_codes, dtype=torch.long))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + "assignment"  # its length is the graph's, known only once seen
        if key in state_dict:
            self.assignment = torch.empty_like(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def normalise(self, z: Tensor) -> Tensor:
        """``z`` on the codebook's scale by the running statistics (no update)."""
        return (z - self.norm.running_mean) / (self.norm.running_var + self.norm.eps).sqrt()

    def nearest(self, z: Tensor) -> Tensor:
        """The centroid of each (normalised) row of ``z``."""
        return torch.cdist(z, self.centroids).argmin(1)

    def denormalised_centroids(self) -> Tensor:
        """Centroids on the scale of the inputs (the batch norm undone)."""
        scale = (self.norm.running_var + self.norm.eps).sqrt()
        return self.centroids * scale + self.norm.running_mean

    def _assign(self, index: Tensor, codes: Tensor) -> None:
        old = self.assignment[index]
        known = old >= 0
        self.counts.index_add_(0, old[known], torch.full_like(old[known], -1))
        self.counts.index_add_(0, codes, torch.ones_like(codes))
        self.assignment[index] = codes

    @torch.no_grad()
    def bind(self, num_nodes: int) -> None:
        """Binds the codebook to a training graph of ``num_nodes`` nodes: on a new size,
        every node is unassigned (-1) until its first training batch. Evaluation never
        rebinds: the counts stay those of the training graph, the population the global
        attention stands for, whatever graph (a subgraph, a batch) is scored."""
        if self.assignment.numel() != num_nodes:
            self.assignment = torch.full((num_nodes,), -1, dtype=torch.long,
                                         device=self.centroids.device)
            self.counts.zero_()

    def _initialise(self, z: Tensor, where: Tensor) -> None:
        """Centroids at random rows of ``z``, each counted once, where the 0-d bool tensor
        ``where`` is true (a select, which torch.compile traces, not a branch)."""
        pick = z[torch.randint(0, z.size(0), (self.num_codes,), device=z.device)]
        self.centroids.copy_(torch.where(where, pick, self.centroids))
        self.embed_sum.copy_(torch.where(where, pick, self.embed_sum))
        self.cluster_size.copy_(torch.where(where, 1.0, self.cluster_size))
        self.initialised.fill_(True)

    @torch.no_grad()
    def update(self, inputs: Tensor, index: Tensor) -> None:
        """One EMA k-means step on the inputs of a training batch of nodes ``index``: the
        batch updates the running statistics, which then normalise it (the scale that
        evaluation and the denormalised centroids use too). An empty batch changes
        nothing."""
        if inputs.size(0) == 0:
            return
        self.norm.train()(inputs)
        z = self.normalise(inputs)
        # eager: only the first batch draws (the random stream as before); traced, every
        # batch draws and the flag selects
        if torch.compiler.is_compiling() or not bool(self.initialised):
            self._initialise(z, ~self.initialised)
        codes = self.nearest(z)
        batch_counts = torch.bincount(codes, minlength=self.num_codes).to(z.dtype)
        batch_sums = torch.zeros_like(self.embed_sum).index_add_(0, codes, z)
        self.cluster_size.mul_(self.decay).add_(batch_counts, alpha=1 - self.decay)
        self.embed_sum.mul_(self.decay).add_(batch_sums, alpha=1 - self.decay)
        total = self.cluster_size.sum()
        smoothed = (self.cluster_size + self.eps) / (total + self.num_codes * self.eps) * total
        self.centroids.copy_(self.embed_sum / smoothed.unsqueeze(1))
        self._assign(index, self.nearest(z))


def _official_hop_norm(looped: Graph, dtype: torch.dtype) -> Tensor:
    """Edge weights ``out_deg(dst)^-1/2 in_deg(src)^-1/2`` on a looped read graph (every
    degree at least 1), in its edge order."""
    src, dst = looped.edge_index
    in_deg = looped.in_degree().to(torch.float64)
    out_deg = looped.out_degree().to(torch.float64)
    return (out_deg[dst].rsqrt() * in_deg[src].rsqrt()).to(dtype)


def _same_bits(a: Tensor, b: Tensor) -> bool:
    """``a`` and ``b`` hold the same bits (NaN payloads equal to themselves, unlike
    ``torch.equal``, so features with NaN stay cached)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        a, b = a.view(bits), b.view(bits)  # same element size: any strides
    return torch.equal(a, b)


class LargeGT(ModelCapabilities, torch.nn.Module):
    r"""LargeGT for node classification, trained on mini-batches of nodes.

    Local module (the official ``fc_in_seq`` and ``LocalModule``): for node ``v`` with fixed
    samples ``S_v`` (:func:`hop2_tokens`), the 3K tokens :math:`X_u, \hat A X_u, \hat A^2
    X_u` (:math:`\hat A` with self-loops) go through an MLP (Linear, ReLU, dropout, Linear),
    a linear embedding, one pre-LayerNorm multi-head attention layer (each head ``hidden``
    wide, an output projection, dropout 0.3, a linear residual, dropout 0.3), a LayerNorm
    and NAGphormer's adaptive readout :math:`o_v = t_0 + \sum_{j \ge 1}
    \mathrm{softmax}_j(w^\top [t_0 \Vert t_j]) t_j`; its linear layers start as the
    official ``init_params`` (normal, std 0.02, zero bias). Global module: the node's own
    features through ``fc_in`` (Linear, BatchNorm, ReLU, dropout, Linear), then
    :math:`\tilde q_v = [W_g\, \mathrm{fc\_in}(x_v) \Vert p_v]` is quantised by an
    :class:`EMACodebook`; :math:`v` attends to all centroids with logits :math:`q_v \cdot
    k_j / \sqrt{d} + \log n_j` (:math:`n_j` nodes in centroid j), attention dropout
    ``attn_dropout``: attention to every node, each represented by its centroid. Both
    outputs are concatenated and go through an FFN and a linear classifier.

    Tokens, hop features and positions belong to the graph the model is deployed on
    (computed once for it, by global node id): influence is measured on that whole graph,
    never on a ball or a batch, so its numbers do not depend on how the seeds are batched
    (``reads`` tells it which nodes each output depends on: usually within 4 hops, but a
    node with nothing to read samples random nodes anywhere, as the official code).

    :math:`p_v` is node2vec, trained as the official scripts train it
    (:func:`node2vec_encoding`, once per graph), or with ``positions="fastrp"`` a FastRP
    encoding (:func:`fastrp_encoding`: no walks, no training, a few sparse products).

    Deviations from the official code (also in ``docs/models.md``): the codebook
    starts from the first batch's inputs and counts only trained nodes (the official starts
    from random centroids and gives every node a random centroid id); empty centroids are
    masked instead of producing :math:`\log 0`; centroid ids are int64; sampling is a
    parallel C++ kernel rather than a Python loop.

    Args:
        in_channels, hidden_channels, out_channels (int): widths (h = hidden).
        num_tokens (int, default 50): K, sampled nodes per node (itself included).
        heads (int, default 2): attention heads, each ``hidden`` wide.
        global_dim (int, default 64): g, width of :math:`W_g x` and of :math:`p_v`.
        num_centroids (int, default 4096): codebook size.
        conv_type (str, default "full"): "full" (local and global) or "local".
        dropout (float, default 0.5): the official ``ff_dropout``: in the FFN, ``fc_in`` and
            the token MLP (``token_dropout``, default the same).
        attn_dropout (float, default 0.0): on the global attention weights.
        local_dropout (float, default 0.3): the local module's dropouts after the
            attention and after the residual (fixed at 0.3 in the official code).
        decay (float, default 0.99): codebook EMA decay.
        seed (int, default 0): seed of the token samples and of the position encoding.
        positions (str, default "node2vec"): the position encoding, "node2vec" (the
            official) or "fastrp" (graphloc's default before 2026-12-07).
        chunk_size (int, default 4096): nodes per chunk when all nodes are scored.
        flow (str, default "target_to_source"): which nodes a node reads, tokens and hop
            features alike. "target_to_source", the official: the nodes its edges point
            to (the official adjacency has a row per source, ``snap-patents``' and DGL's),
            with the official ``D2 (A + I) D1`` (rows scaled by column sums, columns by row
            sums). "source_to_target": PyG's message direction, the in-neighbours, with the
            same normalisation on the reversed graph. The two agree on a symmetric graph
            (City-Networks' are); before 2026-12-07 graphloc read in-neighbours with the
            symmetric normalisation, which matched neither on a directed graph.

    Forward: ``model(x, graph, index=None)`` gives logits ``[len(index), out_channels]``
    for the nodes in ``index`` (all nodes when None, computed in chunks); in training,
    the codebook takes one EMA step on the batch.
    """

    #: ``fit`` trains it on batches of node ids (``model(x, graph, index=batch)``), and
    #: influence measures it on the whole graph it is deployed on (``reads``)
    node_batched = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_tokens: int = 50, heads: int = 2, global_dim: int = 64,
                 num_centroids: int = 4096, conv_type: str = "full", dropout: float = 0.5,
                 attn_dropout: float = 0.0, token_dropout: float | None = None,
                 decay: float = 0.99, seed: int = 0, chunk_size: int = 4096,
                 local_dropout: float = 0.3, flow: str = "target_to_source",
                 positions: str = "node2vec"):
        super().__init__()
        check_sizes("LargeGT", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_tokens=num_tokens, heads=heads,
                    global_dim=global_dim, num_centroids=num_centroids, chunk_size=chunk_size)
        token_dropout = dropout if token_dropout is None else token_dropout
        check_dropouts("LargeGT", dropout=dropout, attn_dropout=attn_dropout,
                       token_dropout=token_dropout, local_dropout=local_dropout)
        if conv_type not in ("full", "local"):
            raise ValueError(f"conv_type must be 'full' or 'local', got {conv_type!r}")
        if flow not in ("target_to_source", "source_to_target"):
            raise ValueError(f"LargeGT: flow must be 'target_to_source' (the official) or "
                             f"'source_to_target', got {flow!r}")
        self.flow = flow
        check_seed(seed)  # a float or a string failed at the first call, naming no argument
        if positions not in _POSITION_ENCODINGS:
            raise ValueError(f"LargeGT: positions must be 'node2vec' (the official) or "
                             f"'fastrp', got {positions!r}")
        self.positions = positions
        if num_tokens < 1 or heads < 1:
            raise ValueError(f"num_tokens and heads must be >= 1, got {num_tokens} and "
                             f"{heads}")
        h, H, g = hidden_channels, heads, global_dim
        self.in_channels, self.hidden, self.heads = in_channels, h, H
        self.num_tokens, self.global_dim, self.conv_type = num_tokens, g, conv_type
        self.attn_dropout, self.seed, self.chunk_size = attn_dropout, seed, chunk_size
        self.token_mlp = torch.nn.Sequential(  # the official fc_in_seq
            torch.nn.Linear(in_channels, h), torch.nn.ReLU(), Dropout(token_dropout),
            torch.nn.Linear(h, h))
        self.local_embed = torch.nn.Linear(h, h)  # LocalModule.att_embeddings_nope
        self.local_norm = torch.nn.LayerNorm(h)
        self.local_qkv = torch.nn.Linear(h, 3 * H * h)
        self.local_out = torch.nn.Linear(H * h, H * h)  # the attention's output projection
        self.local_res = torch.nn.Linear(h, H * h)
        self.local_dropout = Dropout(local_dropout)
        self.out_norm = torch.nn.LayerNorm(H * h)
        self.readout = torch.nn.Linear(2 * H * h, 1)
        for lin in (self.local_embed, self.local_qkv, self.local_out, self.local_res,
                    self.readout):  # the official LocalModule's init_params
            torch.nn.init.normal_(lin.weight, std=0.02)
            torch.nn.init.zeros_(lin.bias)
        width = H * h
        if conv_type == "full":
            self.fc_in = torch.nn.Sequential(  # the node's own features, for the query
                torch.nn.Linear(in_channels, h), torch.nn.BatchNorm1d(h), torch.nn.ReLU(),
                Dropout(dropout), torch.nn.Linear(h, h))
            self.lin_global = torch.nn.Linear(h, g)
            self.codebook = EMACodebook(num_centroids, 2 * g, decay)
            self.global_q = torch.nn.Linear(2 * g, H * h)
            self.global_k = torch.nn.Linear(2 * g, H * h)
            self.global_v = torch.nn.Linear(g, H * h)
            width = 2 * H * h
        self.ffn = torch.nn.Sequential(
            torch.nn.Linear(width, H * h), torch.nn.BatchNorm1d(H * h), torch.nn.ReLU(),
            Dropout(dropout), torch.nn.Linear(H * h, h), torch.nn.BatchNorm1d(h),
            torch.nn.ReLU(), Dropout(dropout))
        self.classifier = torch.nn.Linear(h, out_channels)

    # --- precomputation, once per graph (and feature tensor) --------------------------

    # The position encoding shapes every output but holds no weight: it travels in the
    # state dict, so weights never meet positions they were not trained with.
    def get_extra_state(self) -> dict:
        return {"positions": self.positions}

    def set_extra_state(self, state: dict) -> None:
        positions = state.get("positions") if isinstance(state, dict) else None
        if positions not in _POSITION_ENCODINGS:
            raise ValueError(f"LargeGT: the state dict's positions must be one of "
                             f"{sorted(_POSITION_ENCODINGS)}, got {positions!r}")
        self.positions = positions

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + "_extra_state"
        if key not in state_dict:  # saved before 2026-12-07, when FastRP was the encoding
            warnings.warn("LargeGT: this state dict records no position encoding (saved "
                          "before 2026-12-07): its weights were trained with FastRP "
                          "positions, so the model uses positions='fastrp'", stacklevel=4)
            state_dict[key] = {"positions": "fastrp"}
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def read_graph(self, graph: Graph) -> Graph:
        """The graph whose in-edges each node reads: ``graph`` reversed for ``flow=
        "target_to_source"`` (the official code's adjacency has a row per source, so a node
        reads the nodes its edges point to), ``graph`` itself for ``"source_to_target"``
        (PyG's message direction). The same on a symmetric graph."""
        return graph if self.flow == "source_to_target" else graph.reversed()

    def tokens(self, graph: Graph) -> Tensor:
        """The fixed ``[N, K]`` samples of ``graph`` (cached on it)."""
        read = self.read_graph(graph)
        return read.cached(("largegt_tokens", self.num_tokens, self.seed),
                           lambda: hop2_tokens(read, self.num_tokens, self.seed))

    def hop_features(self, x: Tensor, graph: Graph) -> Tensor:
        """``[N, 3, F]``: ``x``, ``Â x`` and ``Â² x``, cached on the graph while ``x`` is the
        same tensor, unmodified (computed with autograd, uncached, when ``x`` requires
        grad). Unmodified means the same version and the same values as the cached
        ``hops[:, 0]``: writes through ``x.data`` or a NumPy view leave the version as it
        was, and served the old features' hops."""
        # differentiable (e.g. for influence), or traced by torch.compile (which cannot
        # compare the cached values): computed, not cached
        if x.requires_grad or torch.compiler.is_compiling():
            return self._propagate(x, self.read_graph(graph))
        holder = graph.cached("largegt_hops", dict)
        ref = holder.get("x")
        if ref is None or ref() is not x or holder["version"] != x._version or \
                not _same_bits(x, holder["hops"][:, 0]):
            holder.update(x=weakref.ref(x), version=x._version,
                          hops=self._propagate(x, self.read_graph(graph)))
        return holder["hops"]

    @staticmethod
    def _propagate(x: Tensor, read: Graph) -> Tensor:
        # the official D2 (A + I) D1: a loop for every node on top of any existing one
        # (PyG's gcn_norm would keep an existing loop instead of adding one), parallel
        # edges summed, and on a directed graph the reader's and the source's degrees
        # taken on different sides (the official scales rows by column sums and columns by
        # row sums): node v reading u weighs out_deg(v)^-1/2 in_deg(u)^-1/2 on the looped
        # read graph, the symmetric normalisation where the graph is symmetric
        looped = read.cached("largegt_looped", read.add_self_loops)
        weight = looped.cached(("largegt_norm", x.dtype), lambda: _official_hop_norm(looped,
                                                                                    x.dtype))
        x1 = ops.spmm(looped, x, weight)
        return torch.stack([x, x1, ops.spmm(looped, x1, weight)], dim=1)

    def reads(self, graph: Graph, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """The nodes whose features each output in ``nodes`` reads in evaluation, packed
        ``(ptr [S + 1], ids)``: the node itself (the global query), its tokens, and the
        2-hop in-balls of the tokens in the ``read_graph`` (their propagated features)."""
        samples = self.tokens(graph)[nodes]  # [S, K], the node first
        flat = samples.reshape(-1)
        ptr, members, *_ = ops.khop_subgraphs(self.read_graph(graph), flat, 2)
        owner = torch.repeat_interleave(torch.arange(flat.numel()), ptr.diff())
        seed_of = owner // samples.size(1)
        pairs = torch.unique(seed_of * graph.num_nodes + members)  # sorted by seed
        counts = torch.bincount(pairs // graph.num_nodes, minlength=len(nodes))
        return torch.cat([counts.new_zeros(1), counts.cumsum(0)]), pairs % graph.num_nodes

    def position_encoding(self, graph: Graph) -> Tensor:
        encode = _POSITION_ENCODINGS[self.positions]
        return graph.cached((f"largegt_{self.positions}", self.global_dim, self.seed),
                            lambda: encode(graph, self.global_dim, self.seed))

    # --- the two modules ---------------------------------------------------------------

    def local_module(self, hops: Tensor, samples: Tensor) -> Tensor:
        B, K = samples.shape
        H, h = self.heads, self.hidden
        tokens = hops[samples].transpose(1, 2).reshape(B, 3 * K, hops.size(-1))  # raw, hop 1, 2
        t = self.local_embed(self.token_mlp(tokens))
        q, k, v = self.local_qkv(self.local_norm(t)).view(B, 3 * K, 3, H, h) \
            .permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v)  # no attention dropout here
        y = self.local_dropout(self.local_out(attended.transpose(1, 2).reshape(B, 3 * K, H * h)))
        t = self.out_norm(self.local_dropout(self.local_res(t) + y))
        root, rest = t[:, :1], t[:, 1:]
        weights = self.readout(torch.cat([root.expand_as(rest), rest], -1)).softmax(dim=1)
        return root.squeeze(1) + (weights * rest).sum(1)

    def _global_query(self, x: Tensor, pos: Tensor) -> Tensor:
        return torch.cat([self.lin_global(self.fc_in(x)), pos.to(x.dtype)], dim=1)  # float32 cache

    def global_module(self, q_tilde: Tensor) -> Tensor:
        H, h = self.heads, self.hidden
        centroids = self.codebook.denormalised_centroids()
        q = self.global_q(q_tilde).view(-1, H, h).transpose(0, 1)  # [H, B, h]
        k = self.global_k(centroids).view(-1, H, h).transpose(0, 1)  # [H, C, h]
        v = self.global_v(centroids[:, :self.global_dim]).view(-1, H, h).transpose(0, 1)
        counts = self.codebook.counts.to(q.dtype)
        # nothing assigned yet (untrained): uniform; a select, not a branch, which
        # torch.compile traces
        bias = torch.where(counts.any(), counts.log().masked_fill(counts == 0, float("-inf")),
                           torch.zeros_like(counts))
        logits = q @ k.transpose(1, 2) / math.sqrt(h) + bias
        attn = ops.dropout(logits.softmax(-1), self.attn_dropout, self.training)
        return (attn @ v).transpose(0, 1).reshape(-1, H * h)

    def _score(self, x: Tensor, hops: Tensor, samples: Tensor, pos: Tensor,
               index: Tensor) -> Tensor:
        out = self.local_module(hops, samples[index])
        if self.conv_type == "full":
            q_tilde = self._global_query(x[index], pos[index])
            if self.training:  # BatchNorm statistics and the EMA k-means step
                self.codebook.update(q_tilde.detach(), index)
            out = torch.cat([out, self.global_module(q_tilde)], dim=1)
        return self.classifier(self.ffn(out))

    def forward(self, x: Tensor, graph, index: Tensor | None = None) -> Tensor:
        check_input(self, x, self.in_channels)
        graph = as_graph(graph, x)
        samples, hops = self.tokens(graph), self.hop_features(x, graph)
        pos = self.position_encoding(graph) if self.conv_type == "full" else None
        if self.conv_type == "full" and self.training:
            self.codebook.bind(graph.num_nodes)
        if index is not None:
            check_index(index, graph.num_nodes, "index")
            return self._score(x, hops, samples, pos, index.long())
        chunks = torch.arange(graph.num_nodes, device=x.device).split(self.chunk_size)
        return torch.cat([self._score(x, hops, samples, pos, c) for c in chunks])

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.classifier.out_features},"
                f" K={self.num_tokens}, heads={self.heads}, conv_type={self.conv_type!r})")
