"""UGT, the whole model (`Hoang et al., AAAI 2024`; official code
``NSLab-CUK/Unified-Graph-Transformer``): the preprocessing that builds the attention graph
and its encodings (:func:`ugt_inputs`), a stack of ``nn.conv.ugt.UGTLayer``, the
self-supervised pre-training loss and a classification head.

What the official code computes, and what graphloc does (also in ``docs/models.md``):

* The graph: the official's networkx graph of the dataset (``to_networkx(data,
  to_undirected=True)``): each edge once in both directions, each self-loop once, and
  networkx's degrees, which count a loop twice. The same (until 2026-12-07 graphloc left
  loops out, so on a graph with loops ``I``, the transitions and the positions were
  others than the official's).
* Structural vector ``I`` per node (``4k + 1`` numbers): its degree, then for each ring
  ``r = 1..k`` (the nodes exactly r hops away) the min, max, mean and standard deviation of
  their degrees; 0 for an empty ring. The same (the official rounds to 3 decimals; graphloc
  keeps full precision). Normalised by each column's maximum, as the official.
* Virtual edges between structurally similar nodes that are not adjacent, 10% of ``|E|``.
  **Differs**: the official ranks all pairs by struc2vec distances (quadratic, DTW over
  degree sequences) and keeps weights above a threshold; graphloc ranks candidate pairs by
  the official structural similarity of their ``I`` vectors (the sum over columns of
  ``1 / ((I_i - I_j)^2 + 0.5)``, the same function as the edge encoding ``d``), the
  candidates being each node and its ``window`` successors in the order that sorts the
  ``I`` vectors (nodes of equal or close signatures meet there): ``O(N window)``, not
  ``O(N^2)``.
* The attention graph: all pairs within ``k`` hops of the graph with the virtual edges,
  both directions, no self-loops. The same.
* Edge encodings: ``d_ij = 1 / ((I_i - I_j)^2 + 0.5)`` per column and ``m_ij`` the
  transition probabilities ``(P^t)_{ij}``, ``t = 1..8``, ``P = D^{-1} A`` (a loop once in
  ``A``, twice in ``D``: the official's ``1 / degree`` at each of the node's edges); each
  column normalised by its maximum over the edges. The same (the official rounds ``1/deg`` to 3
  decimals; graphloc does not). Computed from sparse matrix powers, only at the edges.
  **Differs**: the official sets them, in the order it lists the pairs, as the edge data
  of ``dgl.to_bidirected`` of those pairs, whose edges DGL sorts by source and then
  destination. So a pair reads another pair's encodings wherever the two orders differ.
  graphloc gives each pair its own (``docs/models.md``).
* Positions: the 10 Laplacian eigenvectors (``I - D^{-1/2} A D^{-1/2}``, DGL's ``lap_pe``
  of the official's ``to_bidirected`` graph: a loop once in ``A`` and in ``D``) after the first,
  zero-padded, normalised by column maximum, their signs flipped at random in each
  pre-training step (the official fine-tuning reads them unflipped). The same.
* Pre-training: ``alpha * sum_t sum_ij (cos(H_i, H_j) - logT^t_ij)^2 / (steps N^2) + beta *
  MSE(X_hat, X)`` over all ``N^2`` pairs, with ``logT^t = max(0, log(P^t_ij / sum_i
  P^t_ij) - log(1/N))``, ``t = 1..6``. The same value, without the official's ``N x N``
  matrices: the sum over the pairs is expanded into a ``d x d`` product of the unit rows
  and one sparse product with the targets, nonzero only within ``t`` hops
  (:func:`_structure_loss`). The official schedule (:func:`pretrain_ugt`): Adam, lr 1e-3,
  weight decay 1e-5, up to 1,999 epochs, stopped 200 epochs after the lowest structure
  loss.
* Fine-tuning: the official freezes the pre-trained network but its last layer (its last
  two where ``num_layers`` is not 2) and trains an MLP head (16 hidden) on top: the same
  (:meth:`UGT.freeze_pretrained`, which :func:`pretrain_ugt` calls). Its loss is a
  cross-entropy of the softmax of the head's log-softmax; graphloc's training takes the
  cross-entropy of the head's logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int, check_number
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import check_dropouts, check_input, check_sizes, graph_of_rows
from graphloc.nn.conv.ugt import UGTLayer

TRANSITION_STEPS = 8  # the official m_ij: P^1 .. P^8


@dataclass
class UGTInputs:
    """The attention graph and its encodings, in the attention graph's edge order."""

    attention: Graph
    virtual: Tensor  # [2, V] virtual edges (i < j; both directions are in ``attention``)
    structure: Tensor  # I [N, 4k + 1], column-max normalised
    positions: Tensor  # [N, num_eigvecs] Laplacian eigenvectors, column-max normalised
    distance: Tensor  # d [E_a, 4k + 1]
    transition: Tensor  # m [E_a, 8]


# NumPy and SciPy work, once per graph and cached on it: torch.compile runs it eagerly (a
# graph break; under fullgraph=True run the model once first, which caches it)
@torch.compiler.disable
def ugt_inputs(graph: Graph, k_hop: int = 1, num_eigvecs: int = 10,
               virtual_ratio: float = 0.1, window: int = 8) -> UGTInputs:
    """UGT's preprocessing of ``graph`` (read as undirected and simple), deterministic.

    Args:
        graph: the graph (one node set).
        k_hop: the attention graph's radius and the number of rings in ``I``.
        num_eigvecs: Laplacian eigenvectors for the positions.
        virtual_ratio: virtual edges as a fraction of ``graph.num_edges`` (official 0.1).
        window: candidates per node for the virtual edges (see the module docstring).

    Example::

        inputs = ugt_inputs(Graph(edge_index, num_nodes=n))
        inputs.attention.num_edges, inputs.virtual.shape
    """
    check_int(k_hop, "k_hop", 1)
    check_int(num_eigvecs, "num_eigvecs", 1)
    _check_virtual_edges(virtual_ratio, window)
    graph._require_one_node_set("ugt_inputs")
    simple = _simple_undirected(graph.to("cpu"))
    raw = structural_vectors(simple, k_hop)
    virtual = virtual_edges(simple, raw, int(virtual_ratio * graph.num_edges), window)
    attention = _attention_graph(simple, virtual, k_hop)
    src, dst = attention.edge_index
    distance = _column_max_normalised(structural_distance(raw[src], raw[dst]))
    transition = transitions(simple, src, dst)
    return UGTInputs(attention=attention, virtual=virtual,
                     structure=_column_max_normalised(raw),
                     positions=_column_max_normalised(laplacian_eigenvectors(simple,
                                                                             num_eigvecs)),
                     distance=distance, transition=_column_max_normalised(transition))


def _simple_undirected(graph: Graph) -> Graph:
    """Both directions of every edge, once each, and each self-loop once: the official's
    networkx graph (``to_networkx(data, to_undirected=True)``, a simple graph that keeps
    loops)."""
    src, dst = graph.edge_index
    pairs = torch.unique(torch.cat([graph.edge_index, torch.stack([dst, src])], dim=1), dim=1)
    return Graph(pairs, num_nodes=graph.num_nodes)


def _networkx_degree(simple: Graph) -> Tensor:
    """Each node's degree as networkx counts it in the official's graph (float64): a
    self-loop counts twice (``getI``'s degrees and ``getM_logM``'s ``1 / degree``)."""
    src, dst = simple.edge_index
    loops = torch.bincount(src[src == dst], minlength=simple.num_nodes)
    return (simple.csr.degree() + loops).double()


def structural_vectors(simple: Graph, k_hop: int) -> Tensor:
    """``I [N, 4k + 1]`` (float64): the degree, then min, max, mean and standard deviation
    (population) of the degrees of each ring ``r = 1..k``; 0 for an empty ring. Degrees
    as networkx counts them (a self-loop twice), as the official ``getI``."""
    n = simple.num_nodes
    degree = _networkx_degree(simple)
    balls = ops.khop_subgraphs(simple, torch.arange(n), k_hop)
    seed = torch.repeat_interleave(torch.arange(n), balls.node_ptr.diff())
    ring = balls.hops
    keep = ring > 0
    group = (seed * k_hop + ring - 1)[keep]
    values = degree[balls.nodes[keep]]
    size = n * k_hop
    count = torch.bincount(group, minlength=size).double()
    stats = [ops.scatter(values, group, 0, dim_size=size, reduce=r) for r in ("min", "max")]
    mean = ops.scatter(values, group, 0, dim_size=size, reduce="sum") / count.clamp(min=1)
    square = ops.scatter(values * values, group, 0, dim_size=size, reduce="sum") / \
        count.clamp(min=1)
    std = (square - mean * mean).clamp(min=0).sqrt()
    rings = torch.stack([stats[0], stats[1], mean, std], dim=1).view(n, 4 * k_hop)
    return torch.cat([degree.unsqueeze(1), rings], dim=1)


def structural_distance(a: Tensor, b: Tensor) -> Tensor:
    """The official encoding of two structural vectors: ``1 / ((a - b)^2 + 0.5)`` per
    column (2 where they agree)."""
    return 1.0 / ((a - b) ** 2 + 0.5)


def _check_virtual_edges(virtual_ratio, window) -> None:
    check_int(window, "window", 1)
    if isinstance(virtual_ratio, bool) or not isinstance(virtual_ratio, (int, float)) or \
            not 0 <= virtual_ratio <= 1:
        raise ValueError(f"virtual_ratio must lie in [0, 1], got {virtual_ratio!r}")


def virtual_edges(simple: Graph, structure: Tensor, count: int, window: int) -> Tensor:
    """The ``count`` most similar non-adjacent pairs among each node and its ``window``
    successors in the order sorting the structural vectors; ``[2, V]`` with ``i < j``,
    ties broken by node ids."""
    n = simple.num_nodes
    if count == 0 or n < 2:
        return torch.empty(2, 0, dtype=torch.long)
    order = torch.arange(n)
    for column in reversed(range(structure.size(1))):  # lexicographic: stable sorts
        order = order[torch.sort(structure[order, column], stable=True).indices]
    steps = torch.arange(1, min(window, n - 1) + 1)
    first = order[:, None].expand(-1, steps.numel())[: n - 1]
    position = torch.arange(n - 1)[:, None] + steps[None, :]
    valid = position < n
    a, b = first[valid], order[position[valid]]
    i, j = torch.minimum(a, b), torch.maximum(a, b)
    key = torch.unique(i * n + j)
    i, j = key // n, key % n
    adjacent = torch.sort(simple.edge_index[0] * n + simple.edge_index[1]).values
    if adjacent.numel():
        at = torch.searchsorted(adjacent, key).clamp(max=adjacent.numel() - 1)
        i, j = i[adjacent[at] != key], j[adjacent[at] != key]
    score = structural_distance(structure[i], structure[j]).sum(1)
    # most similar first; ties by (i, j) ascending: sort by ids, then stably by score
    ranked = torch.sort(-score, stable=True).indices[:count]
    return torch.stack([i[ranked], j[ranked]])


def _attention_graph(simple: Graph, virtual: Tensor, k_hop: int) -> Graph:
    """All pairs within ``k_hop`` hops of the graph plus the virtual edges, both
    directions, no loops, sorted by destination."""
    src, dst = simple.edge_index
    both = torch.cat([simple.edge_index[:, src != dst], virtual, virtual.flip(0)], dim=1)
    union = Graph(torch.unique(both, dim=1), num_nodes=simple.num_nodes)
    if k_hop == 1:
        pairs = union.edge_index
    else:
        balls = ops.khop_subgraphs(union, torch.arange(union.num_nodes), k_hop)
        seed = torch.repeat_interleave(torch.arange(union.num_nodes), balls.node_ptr.diff())
        far = balls.hops > 0
        pairs = torch.stack([balls.nodes[far], seed[far]])
    order = torch.argsort(pairs[1] * simple.num_nodes + pairs[0])
    return Graph(pairs[:, order], num_nodes=simple.num_nodes)


def transitions(simple: Graph, src: Tensor, dst: Tensor) -> Tensor:
    """``(P^t)_{src, dst}`` for ``t = 1..8``, ``[E, 8]`` (float64), from sparse powers of
    ``P = D^{-1} A``."""
    if src.numel() == 0:
        return torch.zeros(0, TRANSITION_STEPS, dtype=torch.float64)
    s, d = src.numpy().copy(), dst.numpy().copy()
    probabilities = [np.asarray(power[s, d]).ravel()
                     for power in _transition_powers(simple, TRANSITION_STEPS)]
    return torch.from_numpy(np.stack(probabilities, axis=1))


def _transition_powers(simple: Graph, steps: int):
    """``P^1 .. P^steps`` (SciPy CSR), ``P = D^{-1} A`` (rows of isolated nodes 0), as
    ``getM_logM``: ``A`` holds each self-loop once and ``D`` counts it twice (networkx's
    degree), so the row of a node with a loop sums to less than 1."""
    n = simple.num_nodes
    row, col = simple.edge_index.numpy().copy()
    degree = _networkx_degree(simple).numpy()
    inv = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
    P = sp.csr_matrix((inv[row], (row, col)), shape=(n, n))
    power = sp.identity(n, format="csr")
    for _ in range(steps):
        power = (power @ P).tocsr()
        yield power


def _log_targets(value: np.ndarray, column_sum: np.ndarray, n: int) -> np.ndarray:
    """The official ``logT^t_ij = max(0, log(P^t_ij / sum_i P^t_ij) - log(1/N))``, 0 where
    it is undefined (``GetProbTranMat``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.log(value / column_sum) - np.log(1.0 / n)
    return np.nan_to_num(np.maximum(log, 0), nan=0.0, posinf=0.0)


@dataclass
class PretrainingTargets:
    """The official pre-training targets ``logT^t``, ``t = 1..steps``, over all ``N^2``
    pairs, kept as what the loss needs of them: their sum ``S = sum_t logT^t`` as a
    weighted graph (edge ``j -> i`` carries ``S_ij``; only pairs within ``steps`` hops are
    nonzero) and ``sum_t sum_ij (logT^t_ij)^2``."""

    summed: Graph
    weight: Tensor  # [E] float64, S_ij per edge j -> i
    square_sum: float


@torch.compiler.disable
def pretraining_targets(simple: Graph, steps: int) -> PretrainingTargets:
    """:class:`PretrainingTargets` of the simple undirected graph, from sparse powers of
    ``P`` (the official builds the dense ``N x N`` matrices)."""
    _check_steps(steps)
    n = simple.num_nodes
    total, square_sum = sp.csr_matrix((n, n)), 0.0
    for power in _transition_powers(simple, steps):
        entries = power.tocoo()
        column = np.asarray(power.sum(axis=0)).ravel()
        log = _log_targets(entries.data, column[entries.col], n)
        total = total + sp.csr_matrix((log, (entries.row, entries.col)), shape=(n, n))
        square_sum += float(np.square(log).sum())
    total.eliminate_zeros()
    total = total.tocoo()
    edges = torch.from_numpy(np.stack([total.col, total.row]).astype(np.int64))
    return PretrainingTargets(Graph(edges, num_nodes=n), torch.from_numpy(total.data),
                              square_sum)


def laplacian_eigenvectors(simple: Graph, k: int) -> Tensor:
    """The eigenvectors 2..k+1 of ``I - D^{-1/2} A D^{-1/2}`` by ascending eigenvalue
    (DGL's ``lap_pe`` of the official's ``to_bidirected`` graph: a self-loop once in ``A``
    and in the in-degrees ``D``), zero-padded when the graph is smaller; each column's sign
    fixed so its largest entry in absolute value is positive. ``[N, k]`` float64."""
    n = simple.num_nodes
    row, col = simple.edge_index.numpy().copy()
    degree = np.bincount(row, minlength=n).astype(np.float64)
    inv_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros(n), where=degree > 0)
    lap = sp.identity(n) - sp.csr_matrix((inv_sqrt[row] * inv_sqrt[col], (row, col)),
                                         shape=(n, n))
    wanted = min(k + 1, n)
    if n <= 2000:
        values, vectors = np.linalg.eigh(lap.toarray())
    else:  # shift-invert around 0 with one sparse LU (COLAMD): seconds at 200,000 nodes
        shift = 1e-3  # below the spectrum (>= 0): the shifted matrix is positive definite
        lu = spla.splu((lap + shift * sp.identity(n)).tocsc(), permc_spec="COLAMD")
        solve = spla.LinearOperator((n, n), matvec=lu.solve, dtype=np.float64)
        # a few more than wanted: Lanczos can miss one copy of a repeated eigenvalue
        values, vectors = spla.eigsh(lap.tocsc(), k=min(wanted + 8, n - 2), sigma=-shift,
                                     which="LM", OPinv=solve, tol=1e-8)
        order = np.argsort(values)
        values, vectors = values[order], vectors[:, order]
    vectors = vectors[:, 1:wanted]
    if vectors.size:  # no rows: argmax over them raises (a graph without nodes)
        sign = np.sign(vectors[np.abs(vectors).argmax(0), np.arange(vectors.shape[1])])
        vectors = vectors * np.where(sign == 0, 1, sign)
    out = torch.zeros(n, k, dtype=torch.float64)
    out[:, :vectors.shape[1]] = torch.from_numpy(np.ascontiguousarray(vectors))
    return out


def _column_max_normalised(t: Tensor) -> Tensor:
    """Each column divided by its largest absolute value (all-zero columns stay 0)."""
    scale = t.abs().amax(0, keepdim=True) if t.numel() else t.new_ones(1, t.size(1))
    return (t / torch.where(scale == 0, 1, scale)).float()


class UGT(ModelCapabilities, torch.nn.Module):
    r"""UGT: the official ``Transformer`` (``h = X W_h + PE W_pe``; ``num_layers``
    :class:`UGTLayer` of width ``hidden_channels``, then one more; the edge encodings
    embedded once) with the official fine-tuning head (an MLP with 16 hidden units) giving
    ``out_channels`` logits, and :meth:`pretrain_loss`, the official self-supervised loss.
    Its inputs come from :func:`ugt_inputs`, cached on the ``Graph``. See the module
    docstring for every difference from the official code.

    Args:
        in_channels (int): input feature width.
        hidden_channels (int): width of every layer (official 16).
        out_channels (int): classes.
        num_layers (int, default 2): layers before the last one (official 2, so 3 in all).
        heads (int, default 4): attention heads (official 4).
        k_hop (int, default 1): the attention graph's radius (official 1).
        dropout (float, default 0.5): the layers' dropouts (official 0.5).
        attention (str, default "official"): :class:`UGTLayer`'s ``attention``.
        num_eigvecs (int, default 10), virtual_ratio (float, default 0.1), window (int,
            default 8): :func:`ugt_inputs`.
    """

    graphloc_global = True  # virtual edges join far nodes: influence measures per seed

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, heads: int = 4, k_hop: int = 1, dropout: float = 0.5,
                 attention: str = "official", num_eigvecs: int = 10,
                 virtual_ratio: float = 0.1, window: int = 8):
        super().__init__()
        check_sizes("UGT", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers, heads=heads,
                    k_hop=k_hop, num_eigvecs=num_eigvecs)
        check_dropouts("UGT", dropout=dropout)
        _check_virtual_edges(virtual_ratio, window)  # (read at the first call otherwise)
        self.in_channels, self.k_hop = in_channels, k_hop
        self.preprocessing = dict(k_hop=k_hop, num_eigvecs=num_eigvecs,
                                  virtual_ratio=virtual_ratio, window=window)
        structure = 4 * k_hop + 1
        self.embedding_h = torch.nn.Linear(in_channels, hidden_channels, bias=False)
        self.lap_pos_enc = torch.nn.Linear(num_eigvecs, hidden_channels)
        self.embedding_de = torch.nn.Linear(structure, hidden_channels)
        self.embedding_m = torch.nn.Linear(TRANSITION_STEPS, hidden_channels)
        self.layers = torch.nn.ModuleList(
            UGTLayer(hidden_channels, hidden_channels, heads, hidden_channels, structure,
                     dropout, attention) for _ in range(num_layers + 1))
        self.MLP_layer_x = torch.nn.Sequential(torch.nn.Linear(hidden_channels, 128),
                                               torch.nn.SELU(), torch.nn.Linear(128, in_channels))
        self.head = torch.nn.Sequential(torch.nn.Linear(hidden_channels, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, out_channels))

    def reset_parameters(self) -> None:
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def inputs(self, graph: Graph) -> UGTInputs:
        """:func:`ugt_inputs` of ``graph`` with this model's settings (cached on it)."""
        key = ("ugt", *sorted(self.preprocessing.items()))
        inputs = graph.cached(key, lambda: ugt_inputs(graph, **self.preprocessing))
        return _to_device(inputs, graph.device)

    def embed(self, x: Tensor, graph, flip_positions: bool = False
              ) -> tuple[Tensor, UGTInputs]:
        """The representations ``H [N, hidden]`` before the head, and the inputs used.
        ``flip_positions``: the official pre-training's random sign flip of each
        eigenvector (its fine-tuning reads them unflipped)."""
        check_input(self, x, self.in_channels)
        graph = graph_of_rows(graph, x)  # the inputs below are per node of the graph
        inputs = self.inputs(graph)
        positions = inputs.positions.to(x.dtype)
        if flip_positions:
            flip = torch.randint(0, 2, (positions.size(1),), device=x.device) * 2 - 1
            positions = positions * flip.to(x.dtype)
        h = self.embedding_h(x) + self.lap_pos_enc(positions)
        d = self.embedding_de(inputs.distance.to(x.dtype))
        m = self.embedding_m(inputs.transition.to(x.dtype))
        structure = inputs.structure.to(x.dtype)
        for layer in self.layers:
            h = layer(h, inputs.attention, d, m, structure)
        return h, inputs

    def forward(self, x: Tensor, graph) -> Tensor:
        return self.head(self.embed(x, graph)[0])

    def _pretraining_targets(self, graph: Graph, steps: int) -> PretrainingTargets:
        """:func:`pretraining_targets` of ``graph`` (cached on it), on its device."""
        targets = graph.cached(("ugt-pretraining", steps), lambda: pretraining_targets(
            _simple_undirected(graph.to("cpu")), steps))
        return PretrainingTargets(targets.summed.to(graph.device),
                                  targets.weight.to(graph.device), targets.square_sum)

    def pretrain_losses(self, x: Tensor, graph, steps: int = 6) -> tuple[Tensor, Tensor]:
        """The official pre-training loss's two terms, exactly: the structure term
        ``sum_{t <= steps} sum_{i, j} (cos(H_i, H_j) - logT^t_ij)^2 / (steps N^2)`` over
        all ``N^2`` pairs, and the reconstruction ``MSE(X_hat, X)``. In training mode the
        positions' signs are flipped at random, as the official pre-training does."""
        _check_steps(steps)
        graph = graph_of_rows(graph, x)
        if graph.num_nodes == 0:
            raise ValueError("pretrain_losses: the graph has no nodes (the loss is a mean "
                             "over node pairs)")
        h, _ = self.embed(x, graph, flip_positions=self.training)
        structure = _structure_loss(h, self._pretraining_targets(graph, steps), steps)
        return structure, torch.nn.functional.mse_loss(self.MLP_layer_x(h), x)

    def pretrain_loss(self, x: Tensor, graph, steps: int = 6, alpha: float = 0.5,
                      beta: float = 0.5) -> Tensor:
        """The official self-supervised loss ``alpha * structure + beta * reconstruction``
        (:meth:`pretrain_losses`)."""
        structure, reconstruction = self.pretrain_losses(x, graph, steps)
        return alpha * structure + beta * reconstruction

    def freeze_pretrained(self) -> list[str]:
        """The official fine-tuning's freeze (``Transformer_class``): every parameter of the
        pre-trained network stops training but those of its last layer, or of its last two
        where ``num_layers`` (the layers before the last) is not 2; the head trains.
        Returns the names of the parameters left training."""
        last = len(self.layers) - 1
        kept = {last} if last == 2 else {last, last - 1}
        training = []
        for name, parameter in self.named_parameters():
            trains = name.startswith("head.") or any(
                name.startswith(f"layers.{i}.") for i in kept)
            parameter.requires_grad_(trains)
            if trains:
                training.append(name)
        return training


def _structure_loss(h: Tensor, targets: PretrainingTargets, steps: int) -> Tensor:
    """``sum_t sum_ij (c_ij - T^t_ij)^2 / (steps N^2)``, ``c`` the cosine similarities of the
    rows of ``h``, expanded so that no ``N x N`` matrix is formed: ``steps * ||U^T U||_F^2 -
    2 sum_ij c_ij S_ij + sum_t sum_ij (T^t_ij)^2`` with ``U`` the unit rows (a ``d x d``
    product) and ``S`` the summed targets (one spmm over the pairs within ``steps`` hops).
    In float64: the three terms are sums over ``N^2`` pairs."""
    n = h.size(0)
    unit = torch.nn.functional.normalize(h.double(), dim=1, eps=1e-12)
    gram = unit.t() @ unit
    cross = (unit * ops.spmm(targets.summed, unit, targets.weight)).sum()
    total = steps * (gram * gram).sum() - 2 * cross + targets.square_sum
    return (total / (steps * n * n)).to(h.dtype)


#: the official pre-training (``exp_10.py``): Adam, lr 1e-3, weight decay 1e-5, epochs
#: ``range(1, 2000)``, stopped 200 epochs after the lowest structure loss
PRETRAINING = dict(epochs=1999, lr=1e-3, weight_decay=1e-5, patience=200)


def pretrain_ugt(model: UGT, x: Tensor, graph, epochs: int = PRETRAINING["epochs"],
                 lr: float = PRETRAINING["lr"], weight_decay: float = PRETRAINING["weight_decay"],
                 patience: int | None = PRETRAINING["patience"], steps: int = 6,
                 alpha: float = 0.5, beta: float = 0.5, freeze: bool = True,
                 progress: bool = False) -> list[float]:
    """The official self-supervised stage, its defaults the official ones: Adam on
    :meth:`UGT.pretrain_loss` in training mode (dropout, sign flips), one full-graph step
    per epoch, stopped once ``patience`` epochs have passed since the lowest structure
    loss (the official's stopping rule; None: never); the model is kept as it is at the
    end (the official saves the last, not the best), left in eval mode, and with
    ``freeze`` frozen for fine-tuning as the official (:meth:`UGT.freeze_pretrained`),
    without gradients left from the last step (an optimiser stepping before its first
    ``zero_grad`` would move the frozen weights with them). ``progress``: a bar with the
    structure loss. Fine-tune afterwards (``graphloc.train`` or your loop; the head starts
    untrained).
    Returns the structure loss per epoch (the official's record).

    Example::

        model = UGT(x.size(1), 16, num_classes)
        pretrain_ugt(model, x, graph)
    """
    if not isinstance(model, UGT):
        raise TypeError(f"pretrain_ugt: model must be a UGT, got {type(model).__name__}")
    _check_pretraining(epochs, lr, weight_decay, patience, steps, alpha, beta, freeze)
    check_flags("pretrain_ugt", progress=progress)
    from tqdm.auto import tqdm
    model.requires_grad_(True)  # every parameter pre-trains (a frozen model's too)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    losses: list[float] = []
    bar = tqdm(range(epochs), disable=not progress, desc="ugt pre-training", leave=False)
    for _ in bar:
        optimizer.zero_grad()
        structure, reconstruction = model.pretrain_losses(x, graph, steps)
        (alpha * structure + beta * reconstruction).backward()
        optimizer.step()
        losses.append(float(structure.detach()))
        bar.set_postfix(structure=f"{losses[-1]:.4g}")
        if patience is not None and len(losses) - 1 - losses.index(min(losses)) > patience:
            break
    bar.close()
    model.eval()
    model.zero_grad(set_to_none=True)
    if freeze:
        model.freeze_pretrained()
    return losses


def _check_steps(steps) -> None:
    check_int(steps, "steps", 1)
    if steps > TRANSITION_STEPS:
        raise ValueError(f"steps must be at most {TRANSITION_STEPS}, got {steps}")


def _check_pretraining(epochs, lr, weight_decay, patience, steps, alpha, beta, freeze) -> None:
    """:func:`pretrain_ugt`'s arguments, before any step (``graphloc.train`` passes a
    config's values through)."""
    check_int(epochs, "epochs", 1)
    if patience is not None:
        check_int(patience, "patience", 1)
    _check_steps(steps)
    for name, value in (("lr", lr), ("weight_decay", weight_decay), ("alpha", alpha),
                        ("beta", beta)):
        check_number("pretrain_ugt", name, value)
    if lr <= 0 or weight_decay < 0:
        raise ValueError(f"pretrain_ugt: lr must be > 0 and weight_decay >= 0, got lr={lr!r}, "
                         f"weight_decay={weight_decay!r}")
    check_flags("pretrain_ugt", freeze=freeze)


def _to_device(inputs: UGTInputs, device) -> UGTInputs:
    if inputs.structure.device == torch.device(device):
        return inputs
    return UGTInputs(**{name: getattr(inputs, name).to(device)
                        for name in UGTInputs.__dataclass_fields__})
