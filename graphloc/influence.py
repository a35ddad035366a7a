"""Long-range dependency measurement: Jacobian total influence per hop and the
influence-weighted receptive field R (Liang et al., City-Networks, ICLR 2026), for any
model on any graph, with the arguments and numbers of PyG's
``torch_geometric.utils.total_influence``.

For a seed node v and a model with outputs H, ``I(v, u) = sum_{c, f} |dH[v, c] / dX[u, f]|``
and ``T_h(v)`` is the sum of ``I(v, u)`` over the nodes u exactly h hops from v; the
Jacobian is taken on the subgraph induced by v's ``max_hops`` ball, as PyG does, so the
numbers are the same. ``R(v) = sum_h h T_h(v) / sum_h T_h(v)``.

Public functions: :func:`total_influence` (PyG's), :func:`measure` (with bootstrap
intervals, an :class:`InfluenceResult`), :func:`influence_per_hop` (the raw ``T``),
:func:`receptive_field`, :func:`plot_influence`.

Notes:
    How it is fast: balls and hop shells come from one C++ breadth-first search per seed
    (PyG: about 2 * max_hops passes over the whole edge list, Python sets and an N-long
    vector per seed); the balls of ``batch_size`` seeds are packed as disjoint components of
    one graph, so one forward and one backward per output channel serve the whole batch (their
    gradients never mix). This needs a model whose output at a node depends only on its
    connected component (message passing, eval-mode BatchNorm); a model that mixes components
    (global attention, pooling, a graph-level normalisation) must be measured per seed.
    ``method="auto"`` checks it on the first two seeds' packed balls (new features on one
    must leave the other's outputs unchanged) and otherwise measures per seed with a
    warning; ``model.graphloc_global = True`` declares it (no check), and models that
    declare ``graphloc_hops`` or prune their layers are local and skip the check.
    For a model that ``prunes_layers`` (graphloc's ``GNN`` of gcn, sage, gat or gin convs,
    ``DAGNN``, ``LiftGCN``) the packed nodes are ordered by hop distance, and each layer runs
    only on the nodes the seeds' outputs still read (``forward_within``): a fraction of the
    work for a deep model, the same numbers. Without the compiled extension the balls come
    from the Python twins in ``graphloc.ops.reference`` (same numbers, slower).

    ``method="full_graph"`` drops PyG's truncation for strictly L-local models (the output at
    v depends only on the features of the nodes within L hops and on the edges into and out
    of them, degrees included; L from ``locality=`` or ``model.graphloc_hops``): the seeds are
    put in rounds whose L-balls are pairwise disjoint (greedy, C++), and each round gets one
    forward and C backward passes over the subgraph induced by the round's (L + 1)-balls and
    the out-neighbours of their L-balls, which holds everything their outputs depend on.
    The Jacobians are then those of the full graph, exact, for every seed including all N
    nodes; T_h is zero beyond L. They equal PyG's numbers when max_hops > L
    and the model reads in-degrees only (GCN) or the graph is undirected, and differ where
    PyG's ball truncates: the outermost degrees and neighbours when max_hops <= L, out-degrees
    (Cheb) on a directed graph.

    A heterogeneous graph is measured as the union of its node types: an edge of any
    relation is a hop, the seeds are nodes of the ``target`` type, and every type's features
    count. Its features sit in one zero-padded tensor, so every method above runs unchanged;
    each call splits the ball back into ``x_dict`` and its relations (:class:`_Hetero`).
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import (
    caller_stacklevel,
    check_flags,
    check_int,
    is_int_at_least,
    pyg_keys,
    refuse_integer_mask,
)
from graphloc.distributed import check_same_on_every_rank, rank_and_world
from graphloc.graph import Graph, pyg_data_with_edges, sparse_edges_key
from graphloc.hetero import HeteroGraph
from graphloc.io import save_figure
from graphloc.nn.capabilities import capabilities_of
from graphloc.plotting import require_matplotlib

METHODS = ("auto", "batched", "per_seed", "full_graph")


def total_influence(model: torch.nn.Module, data, max_hops: int, num_samples=None,
                    normalize: bool = True, average: bool = True, device="cpu",
                    vectorize: bool = True, *, nodes=None, seed: int | None = None,
                    batch_size: int = 256, method: str = "auto", locality: int | None = None,
                    prune_layers: bool = True, progress: bool = False,
                    convert: bool = True, target: str | None = None) -> tuple[Tensor, float]:
    """PyG's ``total_influence``: the same arguments, the same results, for a model in eval
    mode. The model is measured in eval mode (its mode restored after), as the
    City-Networks code measures it (``influence_main.py``: ``model.eval()``); PyG's tool
    runs it in the mode it is in, so a model left in training mode gets its dropout masks
    and BatchNorm's batch statistics there (R 2.2 against 1.1 for a two-layer GCN with
    BatchNorm on a random 40-node graph).

    Args:
        model: a ``torch.nn.Module``, called on each ball as its forward asks:
            ``model(x, edge_index)`` (PyG's call), with each of the data's node or edge
            tensors its forward names (``edge_weight``, ``edge_attr``, ``pos``, ...) by that
            name, ``model(data)`` for a forward of one argument, or ``model(x, graph)`` with
            a Graph's edge features. Edge tensors it does not take are named in a warning.
        data: a PyG ``Data``, a graphloc ``NodeDataset``, or a pair ``(x, graph)``.
        max_hops: K, the largest hop distance measured.
        num_samples: how many seed nodes (all when None), drawn as PyG draws them
            (``torch.randperm`` on the global generator) when ``seed`` is None, else from a
            generator seeded with ``seed``.
        normalize: divide the mean curve by its hop-0 value.
        average: return the mean curve; False returns the per-seed matrix.
        device: where the model runs.
        vectorize: accepted for compatibility (the batched backward makes it moot).
        nodes: explicit seed node ids, instead of ``num_samples``.
        seed: see ``num_samples``.
        batch_size: at most this many seeds' balls share one forward and backward pass;
            fewer where the balls are large (about 2^20 nodes and edges in a batch, never
            less than one ball: a hub graph's balls are most of the graph).
        method: "auto" (PyG's numbers; per seed for models marked ``graphloc_global``),
            "batched", "per_seed", or "full_graph" (exact full-graph Jacobians of an L-local
            model, see the module's Notes).
        locality: L for "full_graph" (default: the model's ``graphloc_hops``).
        prune_layers: skip the layer work on nodes that no output reads any more (same numbers).
        progress: show a progress bar.
        convert: measure a PyG model whose message passing converts as its graphloc twin.
        target: on a heterogeneous graph (a PyG ``HeteroData`` or ``(x_dict,
            HeteroGraph)``), the node type whose outputs are measured (default: the
            model's ``target``, as LATTE's, else the one node type with labels ``y``);
            ``nodes`` are then ids of that type. Hops count edges of any relation (see the
            module's Notes).

    Returns:
        ``(curve, R)``: the mean ``T_h`` per hop ``[K + 1]`` (divided by hop 0 if
        ``normalize``), or with ``average=False`` the ``[S, K + 1]`` matrix; and R averaged
        over the seeds. Seeds whose influence is zero at every hop are left out of R with a
        warning (PyG returns NaN).

    Example::

        from graphloc.influence import total_influence
        curve, R = total_influence(model, data, max_hops=16, num_samples=1000)
    """
    check_flags("total_influence", normalize=normalize, average=average, vectorize=vectorize)
    x, graph, values = _inputs(data, model, target)
    seeds = _seeds(values.seed_count(graph), num_samples, nodes, seed)
    T = _influence_per_hop(model, (x, graph, values), max_hops, seeds, batch_size=batch_size,
                           device=device, method=method, locality=locality,
                           prune_layers=prune_layers, progress=progress,
                           convert=convert)[0].float()
    R = _mean_r(T)
    if not average:
        return T, R
    mean = T.mean(0)
    return (mean / mean[0] if normalize else mean), R


def measure(model: torch.nn.Module, data, max_hops: int, num_samples=None, *, nodes=None,
            seed: int | None = 0, batch_size: int = 256, device="cpu", method: str = "auto",
            locality: int | None = None, prune_layers: bool = True, bootstrap: int = 1000,
            confidence: float = 0.95, progress: bool = False,
            convert: bool = True, target: str | None = None) -> InfluenceResult:
    """Total influence per hop of the seeds, its normalised curve, R, and bootstrap
    percentile intervals for both (seeds resampled ``bootstrap`` times).

    Args:
        model, data, max_hops, num_samples, nodes, batch_size, device, method, locality,
            prune_layers, progress, convert, target: as for :func:`total_influence`
            (``seed`` defaults to 0 here: the same seeds every run).
        bootstrap: resamples of the seeds for the intervals.
        confidence: the intervals' coverage, strictly between 0 and 1.

    Returns:
        An :class:`InfluenceResult`; ``settings["model"]`` records what was measured (a PyG
        model's graphloc twin, or the model as given and why).

    Example::

        result = measure(model, data, max_hops=16, num_samples=500)
        print(result.R, result.R_ci)
        result.plot("influence.png")
    """
    check_int(bootstrap, "bootstrap", 1)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
            or not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    check_flags("measure", prune_layers=prune_layers, progress=progress, convert=convert)
    x, graph, values = _inputs(data, model, target)
    seeds = _seeds(values.seed_count(graph), num_samples, nodes, seed)
    T, conversion = _influence_per_hop(
        model, (x, graph, values), max_hops, seeds, batch_size=batch_size, device=device,
        method=method, locality=locality, prune_layers=prune_layers, progress=progress,
        convert=convert)
    r = receptive_field(T)
    curve = T.mean(0) / T.mean(0)[0]
    curves, r_boot = _bootstrap(T, r, bootstrap, seed)
    lo, hi = (1 - confidence) / 2, (1 + confidence) / 2
    return InfluenceResult(
        nodes=seeds, totals=T, curve=curve, R=_mean_r(T), R_per_node=r,
        curve_ci=torch.stack([curves.nanquantile(lo, 0), curves.nanquantile(hi, 0)]),
        R_ci=(float(r_boot.nanquantile(lo)), float(r_boot.nanquantile(hi))),
        settings={"max_hops": max_hops, "num_seeds": len(seeds), "seed": seed,
                  "method": method, "locality": locality, "bootstrap": bootstrap,
                  "confidence": confidence, "model": conversion,
                  **({} if values.hetero is None else {"target": values.hetero.target})})


# the bootstrap's counts hold at most about this many entries at a time (every node of a
# large graph as seeds: 1,000 resamples of 2 million seeds would be 16 GB at once)
_BOOTSTRAP_ENTRIES = 2**24


def _bootstrap(T: Tensor, r: Tensor, draws: int, seed: int | None) -> tuple[Tensor, Tensor]:
    """The curves ``[B, K + 1]`` and the Rs ``[B]`` of ``draws`` resamples of the seeds (R
    over each resample's seeds with some influence). A resample is the number of times it
    draws each seed, so the means are one product, ``[B, S]`` at the most: gathering the
    rows (``T[draws]``, ``[B, S, K + 1]``) took 1.4 GB for the paper's 10,000 seeds and 16
    hops."""
    gen = torch.Generator().manual_seed(0 if seed is None else seed)
    valid = ~r.isnan()
    means, rs = [], []
    chunk = max(1, _BOOTSTRAP_ENTRIES // max(len(T), 1))  # resamples at a time
    for start in range(0, draws, chunk):
        rows = min(draws - start, chunk)  # (the generator's stream: that of one draw)
        picks = torch.randint(0, len(T), (rows, len(T)), generator=gen)
        counts = torch.zeros(rows, len(T), dtype=torch.float64)
        counts.scatter_add_(1, picks, torch.ones_like(picks, dtype=torch.float64))
        means.append(counts @ T / len(T))
        kept = counts[:, valid]
        rs.append(kept @ r[valid].double() / kept.sum(1))
    means = torch.cat(means)
    return means / means[:, :1], torch.cat(rs)


@dataclass
class InfluenceResult:
    """Everything ``measure`` found: per-seed totals, the curve, R, confidence intervals."""

    nodes: Tensor  # [S] seed node ids
    totals: Tensor  # [S, K + 1] T_h(v), float64
    curve: Tensor  # [K + 1] mean T_h / mean T_0
    R: float
    R_per_node: Tensor  # [S] (NaN where a seed has zero influence)
    curve_ci: Tensor  # [2, K + 1] bootstrap percentile interval
    R_ci: tuple[float, float]
    settings: dict = field(default_factory=dict)

    def plot(self, path: str | None = None, label: str = "model", ax=None):
        """The curve (mean T_h / mean T_0 per hop, log scale) with its interval; R in the
        legend. Draws on ``ax`` (a new figure when None), saves to ``path`` if given, and
        returns the axes. Needs matplotlib (``pip install 'graphloc[plot]'``)."""
        return plot_influence({label: self}, path, ax)

    def to_dict(self) -> dict:
        return {"nodes": self.nodes.tolist(), "totals": self.totals.tolist(),
                "curve": self.curve.tolist(), "R": self.R,
                "R_per_node": [None if math.isnan(r) else r for r in self.R_per_node.tolist()],
                "curve_ci": self.curve_ci.tolist(), "R_ci": list(self.R_ci),
                "settings": self.settings}


def influence_per_hop(model: torch.nn.Module, data, max_hops: int, nodes, *,
                      batch_size: int = 256, device="cpu", method: str = "auto",
                      locality: int | None = None, prune_layers: bool = True,
                      progress: bool = False, convert: bool = True,
                      target: str | None = None) -> Tensor:
    """The per-seed totals ``T``: the engine under :func:`total_influence` and
    :func:`measure`. The model runs in eval mode (its mode is restored).

    Args:
        model, data, max_hops, batch_size, device, method, locality, progress, convert,
            target: as for :func:`total_influence`.
        nodes: the seed node ids.
        prune_layers: False runs every layer on every node even for a model that
            ``prunes_layers`` (same numbers, about three times the work of a deep one).

    Returns:
        ``T [S, max_hops + 1]`` (float64): ``T[s, h]`` is the total influence on ``nodes[s]``
        of the nodes exactly h hops away.

    Example::

        T = influence_per_hop(model, data, max_hops=8, nodes=torch.tensor([0, 5]))
    """
    return _influence_per_hop(model, _inputs(data, model, target), max_hops, nodes,
                              batch_size=batch_size,
                              device=device, method=method, locality=locality,
                              prune_layers=prune_layers, progress=progress,
                              convert=convert)[0]


def _influence_per_hop(model: torch.nn.Module, inputs: tuple, max_hops: int, nodes, *,
                       batch_size: int, device, method: str, locality: int | None,
                       prune_layers: bool, progress: bool, convert: bool
                       ) -> tuple[Tensor, dict]:
    """``(T, what was measured)`` on ``inputs = _inputs(data)``: the arguments checked, the
    model's call read from its forward, a PyG model converted (``convert``)."""
    check_int(max_hops, "max_hops", 0)
    check_int(batch_size, "batch_size", 1)
    check_flags("influence", prune_layers=prune_layers, progress=progress, convert=convert)
    _check_device(device)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    declared = capabilities_of(model)
    whole_graph = declared.node_batched
    asked = method
    if method == "auto":
        method = "per_seed" if declared.graphloc_global else "batched"
    if method == "full_graph" and not whole_graph:
        locality = _locality(model, locality)
    x, graph, values = inputs
    if not whole_graph and values.hetero is None and _messages_run_against_edges(model):
        graph, values = _reversed_inputs(graph, values)
    model, compiled = _eager(model)
    values = _with_one_graph_batch(model, values, graph)
    call = _workable_call(model, _structure_call(model, values, x, graph), x, graph)
    model, report = as_graphloc_model(model, x, graph, call) if convert else \
        (model, {"converted": False, "reason": "convert=False"})
    report["call"] = call.describe()
    if compiled:
        report["compiled"] = "measured as its eager original (torch.compile's _orig_mod)"
    from graphloc.nn.convert import caches_set_aside
    with caches_set_aside(model):  # the model runs on many balls of the graph
        all_nodes = _seeds(values.seed_count(graph), None, nodes, None, allow_empty=True) \
            + values.seed_offset
        if method == "full_graph" and len(all_nodes) and not whole_graph:
            _verify_locality(model, call, x, graph, int(all_nodes[0]), locality, device)
        if method == "batched" and not whole_graph and batch_size > 1 and len(all_nodes) > 1:
            method = _batched_if_components_stay_apart(model, call, x, graph, all_nodes,
                                                       max_hops, device, asked)
        rank, world = rank_and_world()
        if world > 1:
            _check_one_computation(model, x, graph, values, all_nodes)
        nodes = all_nodes[rank::world]  # a shard per process; gathered below
        was_training = model.training
        model.eval()
        try:
            # (pruned layers read a Graph: not for a model given other tensors by name)
            prune = prune_layers and capabilities_of(model).prunes_layers \
                and call.style in ("pair", "graph") and call.values.adjacency is None \
                and not call.values.reversed
            if whole_graph:
                T = _whole_graph_influence(model, x, graph, nodes, max_hops, device, progress,
                                           1 if method == "per_seed" else batch_size)
            elif method == "full_graph":
                T = _full_graph_influence(model, call, x, graph, nodes, max_hops, locality,
                                          device, prune, progress)
            else:
                T = _batched_influence(model, call, x, graph, nodes, max_hops, device, prune,
                                       progress, 1 if method == "per_seed" else batch_size)
        finally:
            model.train(was_training)
        T = _gather_shards(T, len(all_nodes), rank, world) if world > 1 else T
    return T, report


def receptive_field(T: Tensor) -> Tensor:
    """Per seed, ``R = sum_h h T_h / sum_h T_h``.

    Args:
        T: per-seed totals ``[S, K + 1]``, as :func:`influence_per_hop` returns them.

    Returns:
        ``[S]``; a row with no influence at all is NaN.

    Example::

        R = receptive_field(influence_per_hop(model, data, 8, nodes))
    """
    if not isinstance(T, Tensor) or T.dim() != 2 or not T.is_floating_point():
        shape = list(T.shape) if isinstance(T, Tensor) else type(T).__name__
        raise ValueError(f"T must be the per-seed totals, a floating [S, K + 1] tensor, got "
                         f"{shape}")
    hops = torch.arange(T.size(1), dtype=T.dtype)
    return (T @ hops) / T.sum(1)


def plot_influence(results, path: str | None = None, ax=None):
    """Several :class:`InfluenceResult` s on one figure: one line per model, T_h / T_0
    per hop on a log scale with the bootstrap interval shaded, R in the legend.

    Args:
        results: a dict of labels to results, or a list of results.
        path: save the figure there, if given.
        ax: draw on these axes (a new figure when None).

    Returns:
        The axes. Needs matplotlib (``pip install 'graphloc[plot]'``).

    Example::

        plot_influence({"gcn": measure(gcn, data, 16), "gat": measure(gat, data, 16)}, "r.png")
    """
    plt = require_matplotlib()
    if not isinstance(results, dict):
        results = {f"model {i}": r for i, r in enumerate(results)}
    if not results:
        raise ValueError("plot_influence: results is empty (nothing to plot)")
    for label, result in results.items():
        if not isinstance(result, InfluenceResult):
            raise TypeError(f"plot_influence: results[{label!r}] must be an InfluenceResult "
                            f"(from measure), got {type(result).__name__}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for label, result in results.items():
        hops = range(len(result.curve))
        ax.plot(hops, result.curve.numpy(), marker="o", label=f"{label} (R = {result.R:.2f})")
        ax.fill_between(hops, *result.curve_ci.numpy(), alpha=0.2)
    ax.set(yscale="log", xlabel="hop h", ylabel="mean T_h / mean T_0")
    ax.legend()
    if path:
        ax.figure.tight_layout()
        save_figure(ax.figure, path)
    return ax


def as_graphloc_model(model: torch.nn.Module, x: Tensor, graph: Graph, call=None):
    """``(model to measure, report)``: the graphloc twin of a PyG model whose message
    passing all converts, checked against it on the 2-hop ball of ``_probe_node`` (called as
    ``call`` calls it; ``model(x, edge_index)`` when None); else the model as given (the
    report says why)."""
    from graphloc.nn.convert import (
        ExampleFailed,
        Unconvertible,
        from_pyg,
        has_pyg_message_passing,
    )
    if not has_pyg_message_passing(model):
        return model, {"converted": False, "reason": "no PyG message passing"}
    call = _ModelCall("pair", _Values()) if call is None else call
    sub = _probe_ball(graph, call.values, x.device)
    args, kwargs = call.arguments(x[sub.nodes].detach(), sub)
    if kwargs:
        return model, {"converted": False,
                       "reason": f"its forward takes {sorted(kwargs)} by keyword only"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = from_pyg(model, example=args, strict=True)
    except Unconvertible as err:
        return model, {"converted": False, "reason": str(err)}
    except ExampleFailed as err:  # the model's own error, not the conversion's
        cause = err.__cause__
        raise ValueError(f"model fails when influence calls it as {call.describe()} on a "
                         f"ball of the graph ({type(cause).__name__}: {cause})") from cause
    return converted, {"converted": True, **converted.pyg_conversion,
                       "measured": type(converted).__name__}


def _eager(model: torch.nn.Module) -> tuple[torch.nn.Module, bool]:
    """``(the module torch.compile wrapped, True)`` for a compiled model, else ``(model,
    False)``: the same function, whose compiled backward refuses the retained graph that
    one backward per output channel needs (and whose wrapper hides the forward's
    signature)."""
    original = getattr(model, "_orig_mod", None)
    if isinstance(original, torch.nn.Module) and type(model).__name__ == "OptimizedModule":
        return _eager(original)[0], True
    return model, False


def _probe_ball(graph: Graph, values: _Values, device) -> _Subgraph:
    """The 2-hop ball of :func:`_probe_node` among the nodes seeds are drawn from: where a
    model's conversion or its call is tried before the measurement."""
    start = values.seed_offset
    probe = _probe_node(graph, torch.arange(start, start + values.seed_count(graph)))
    _, nodes, _, _, src, dst, positions = ops.khop_subgraphs(graph, probe.view(1), 2)
    return _Subgraph(nodes, torch.stack([src, dst]).to(device), positions)


def _probe_node(graph: Graph, among: Tensor | None = None) -> Tensor:
    """A node whose 2-hop ball has edges, for the conversion's check: among the nodes with
    in-edges, one of median in-degree (a hub's ball can be most of the graph). Node 0 was
    the probe: where it has no in-edge (an isolated node, a source) the check compared the
    two models on one node and no edge, and saw nothing of their message passing. ``among``:
    the candidates (a heterogeneous graph's target nodes, whose outputs are compared)."""
    among = torch.arange(graph.num_nodes) if among is None else among
    degree = graph.in_degree()[among]
    reached = degree.nonzero().flatten()
    if reached.numel() == 0:
        return among[0] if among.numel() else torch.zeros((), dtype=torch.long)
    order = degree[reached].argsort(stable=True)
    return among[reached[order[order.numel() // 2]]]


# --- the inputs: features, the graph and the data's other tensors ------------------------

def _inputs(data, model=None, target: str | None = None) -> tuple[Tensor, Graph, _Values]:
    """(x, Graph, the data's other tensors) from a PyG Data, a NodeDataset, or an
    (x, edge_index | Graph) pair; from a heterogeneous graph (``HeteroData``, ``(x_dict,
    HeteroGraph)``) its union (:func:`_hetero_inputs`), ``target`` its measured type."""
    if _is_heterogeneous(data):
        return _hetero_inputs(data, model, target)
    if target is not None:
        raise ValueError(f"target={target!r} names a node type, but the graph has one node "
                         f"set (a heterogeneous graph: a HeteroData or (x_dict, HeteroGraph))")
    values = None
    if isinstance(data, tuple) and len(data) == 2:
        x, structure = data
    elif hasattr(data, "graph") and hasattr(data, "x"):  # NodeDataset
        x, structure = data.x, data.graph
    elif hasattr(data, "edge_index"):  # PyG Data (with ToSparseTensor's adj_t, its entries)
        given, data = data, pyg_data_with_edges(data)
        x, structure = getattr(data, "x", None), data.edge_index
        if structure is not None and x is not None and not isinstance(structure, Graph):
            structure = Graph(structure, num_nodes=data.num_nodes)
        values = data
    else:
        raise TypeError(f"data must be a PyG Data, a NodeDataset or (x, edge_index), got "
                        f"{type(data).__name__}")
    if x is None:
        raise ValueError("the graph has no node features x: influence is a Jacobian with "
                         "respect to them")
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be floating point (influence is a Jacobian), got {x.dtype}")
    graph = structure if isinstance(structure, Graph) else Graph(structure, x.size(0))
    graph._require_one_node_set("influence (hop distances over one node set)")
    if x.dim() != 2 or x.size(0) != graph.num_nodes:
        raise ValueError(f"x must be [{graph.num_nodes}, F], got {list(x.shape)}")
    if values is None:
        return x, graph, _graph_values(graph)
    return x, graph, _with_adjacency(_data_values(values, graph), given, values)


@dataclass
class _Values:
    """The data's tensors besides x and edge_index, for the subgraphs the model runs on:
    node-level ones by node, edge-level ones in CSR order (``graph.to_csr_order``).
    ``data_class``: the PyG Data class the data came in (None for other inputs);
    ``from_graph``: the edge features are a graphloc Graph's ``edge_attr``."""
    node: dict = field(default_factory=dict)
    edge: dict = field(default_factory=dict)
    data_class: type | None = None
    from_graph: bool = False
    hetero: _Hetero | None = None
    adjacency: _Adjacency | None = None
    # the balls are built over the reversed edges (a model whose messages run against them,
    # flow="target_to_source"); each ball's edges go back to the model as the data has them
    reversed: bool = False

    def seed_count(self, graph: Graph) -> int:
        """How many nodes seeds are drawn from: the target type's on a heterogeneous graph."""
        return graph.num_nodes if self.hetero is None else self.hetero.count(self.hetero.target)

    @property
    def seed_offset(self) -> int:
        """The union id of seed 0 (a heterogeneous graph's target nodes lie in a range)."""
        return 0 if self.hetero is None else self.hetero.offsets[self.hetero.target]


@dataclass
class _Adjacency:
    """The data's edges as it gave them: a torch.sparse ``key`` ("adj_t", or "edge_index" as
    PyG's layers read a sparse one: entry (i, j) the edge j -> i; "adj": the edge i -> j)
    of ``layout``, its entries' ``values`` in CSR order
    (None: all 1). Each ball is given to the model as such a matrix of its edges, as the
    model is called on the whole graph: a PyG conv reads a sparse adjacency otherwise than
    an edge_index (its entries' values as edge weights; GCNConv adds a loop to every node
    where the edge_index path keeps a node's own loop). ``dtype``: the matrix's;
    ``value_key``: the edge tensor its values became (edge_weight or edge_attr; None for
    values all 1)."""
    key: str
    layout: torch.layout
    values: Tensor | None
    dtype: torch.dtype
    value_key: str | None

    def of(self, edges: Tensor, positions: Tensor, num_nodes: int, device) -> Tensor:
        """The ball's matrix: its edges (as the data has them; ``positions``, their CSR
        positions in the graph), their values, the data's key and layout."""
        edges = edges.to(device)
        index = edges if self.key == "adj" else edges.flip(0)  # (adj_t: entry (i, j) = j -> i)
        values = torch.ones(edges.size(1), dtype=self.dtype, device=device) \
            if self.values is None else \
            self.values[positions.long().to(self.values.device)].to(device)
        size = (num_nodes, num_nodes, *values.shape[1:])
        matrix = torch.sparse_coo_tensor(index, values, size).coalesce()
        return matrix.to_sparse_csr() if self.layout == torch.sparse_csr else matrix


def _with_adjacency(values: _Values, given, converted) -> _Values:
    """``values`` with the data's sparse adjacency (``_Adjacency``) where the PyG Data gave
    its edges as one (``pyg_data_with_edges`` made ``converted``'s edge_index from it); the
    entries' values then travel in the matrix, not as an edge tensor of their own."""
    if converted is given:
        return values
    key = sparse_edges_key(given)
    made = [name for name in ("edge_weight", "edge_attr")
            if name in converted and converted[name] is not getattr(given, name, None)]
    edge = dict(values.edge)
    entries = edge.pop(made[0]) if made else None
    matrix = given[key]
    return replace(values, edge=edge, adjacency=_Adjacency(
        key, matrix.layout, entries, matrix.dtype, made[0] if made else None))


def _as_edge_lists(values: _Values) -> _Values:
    """``values`` whose balls go to the model as edge_index, the adjacency's values back as
    their edge tensor: for a model that takes an edge_index or a Graph but no sparse
    matrix (``_structure_call``), so that the data's matrix stands for its edges there."""
    adjacency = values.adjacency
    if adjacency is None:
        return values
    edge = dict(values.edge)
    if adjacency.value_key is not None:
        edge[adjacency.value_key] = adjacency.values
    return replace(values, edge=edge, adjacency=None)


def _data_values(data, graph: Graph) -> _Values:
    """A PyG Data's node- and edge-level tensors other than x and edge_index (PyG's own
    ``is_node_attr`` / ``is_edge_attr`` decide which is which)."""
    node, edge = {}, {}
    for key in sorted(pyg_keys(data) - {"x", "edge_index"}):
        value = data[key]
        if not isinstance(value, Tensor) or value.dim() == 0:
            continue
        if data.is_edge_attr(key) and value.size(0) == graph.num_edges:
            edge[key] = graph.to_csr_order(value)
        elif data.is_node_attr(key) and value.size(0) == graph.num_nodes:
            node[key] = value
    return _Values(node, edge, type(data))


def _graph_values(graph: Graph) -> _Values:
    edge = {} if graph.edge_attr is None else {"edge_attr": graph.to_csr_order(graph.edge_attr)}
    return _Values(edge=edge, from_graph=True)


# --- heterogeneous graphs: one node set for the hops, split back for each call -----------

def _is_heterogeneous(data) -> bool:
    return (isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], HeteroGraph)) \
        or isinstance(getattr(data, "graph", None), HeteroGraph) \
        or (hasattr(data, "node_types") and hasattr(data, "edge_types"))  # PyG's HeteroData


@dataclass
class _Hetero:
    """A heterogeneous graph seen as one node set (its union): type t's node i is union
    node ``offsets[t] + i``, and an edge of any relation is a hop. The features of all types
    sit in one ``[N, max F]`` tensor, zero-padded, so one leaf carries every type's
    gradient; each call splits a ball back into ``x_dict`` (type t's rows, its first
    ``widths[t]`` columns) and one edge_index per relation (or a HeteroGraph, for a model
    that takes one, as graphloc's LATTE)."""
    hetero: HeteroGraph
    widths: dict
    offsets: dict
    type_of: Tensor  # [N] the node type's index, per union node
    relation_of: Tensor  # [E] the relation's index, per union edge in CSR order
    target: str
    as_graph: bool

    def count(self, node_type: str) -> int:
        return self.hetero.num_nodes[node_type]

    def _local_ids(self, sub: _Subgraph) -> tuple[Tensor, list[Tensor]]:
        """Each ball node's id among the ball's nodes of its type, and per type its rows."""
        kinds = self.type_of[sub.nodes.long()]
        local = torch.empty(len(kinds), dtype=torch.long)
        rows = [(kinds == k).nonzero().flatten() for k in range(len(self.widths))]
        for positions in rows:
            local[positions] = torch.arange(len(positions))
        return local, rows

    def arguments(self, x: Tensor, sub: _Subgraph) -> tuple:
        local, rows = self._local_ids(sub)
        x_dict = {t: x[positions.to(x.device), :self.widths[t]]
                  for t, positions in zip(self.widths, rows, strict=True)}
        src, dst = local[sub.edge_index.cpu()]
        relation = self.relation_of[sub.positions.long()]
        edges = {r: torch.stack([src[relation == k], dst[relation == k]]).to(x.device)
                 for k, r in enumerate(self.hetero.relations)}
        if not self.as_graph:
            return x_dict, edges
        return x_dict, HeteroGraph({t: len(p) for t, p in zip(self.widths, rows, strict=True)},
                                   edges)

    def target_rows(self, out, sub: _Subgraph) -> Tensor:
        """The model's outputs for the target type (a dict's entry, or a tensor of its
        rows) placed at the ball's rows of that type, zero elsewhere."""
        target = out.get(self.target) if isinstance(out, dict) else out
        if not isinstance(target, Tensor):
            raise TypeError(f"the model returned {type(out).__name__} without a tensor for "
                            f"the target type {self.target!r}: influence needs its outputs")
        kinds = self.type_of[sub.nodes.long()]  # (only the target's rows: not every type's)
        rows = (kinds == list(self.widths).index(self.target)).nonzero().flatten()
        rows = rows.to(target.device)
        if target.dim() != 2 or target.size(0) != len(rows):
            raise ValueError(f"the model returned shape {list(target.shape)} for the "
                             f"{len(rows)} {self.target!r} nodes of a ball: influence needs "
                             f"one output row per node of the target type")
        placed = target.new_zeros(len(sub.nodes), target.size(1))
        return placed.index_copy(0, rows, target)


def _hetero_inputs(data, model, target: str | None) -> tuple[Tensor, Graph, _Values]:
    """The union of a heterogeneous graph (``HeteroData`` or ``(x_dict, HeteroGraph)``):
    padded features, the union Graph and the :class:`_Hetero` that splits it back."""
    if isinstance(data, tuple):
        x_dict, hetero = data
    elif isinstance(getattr(data, "graph", None), HeteroGraph):  # a HeteroNodeDataset
        x_dict, hetero = data.x, data.graph
        target = data.target if target is None and model is not None \
            and getattr(model, "target", None) is None else target
    else:
        hetero = HeteroGraph.from_pyg(data)
        x_dict = {t: data[t].get("x") for t in hetero.node_types}
    without = [t for t in hetero.node_types if not isinstance(x_dict.get(t), Tensor)]
    if without:
        raise ValueError(f"node types {without} have no features x: influence is a Jacobian "
                         f"with respect to every node's features")
    hetero.check_features(x_dict)
    dtypes = {x_dict[t].dtype for t in hetero.node_types}
    if len(dtypes) > 1:
        raise TypeError(f"the node types' features have different dtypes "
                        f"{sorted(map(str, dtypes))}: convert them to one")
    target = _hetero_target(model, data, hetero, target)
    counts = torch.tensor([hetero.num_nodes[t] for t in hetero.node_types])
    starts = (counts.cumsum(0) - counts).tolist()
    offsets = dict(zip(hetero.node_types, starts, strict=True))
    widths = {t: x_dict[t].size(1) for t in hetero.node_types}
    x = x_dict[target].new_zeros(int(counts.sum()), max(widths.values()))
    for t in hetero.node_types:
        x[offsets[t]:offsets[t] + hetero.num_nodes[t], :widths[t]] = x_dict[t]
    pairs = [hetero[r].edge_index.cpu() for r in hetero.relations]
    src = [p[0] + offsets[r[0]] for p, r in zip(pairs, hetero.relations, strict=True)]
    dst = [p[1] + offsets[r[2]] for p, r in zip(pairs, hetero.relations, strict=True)]
    edge_index = torch.stack([torch.cat(src), torch.cat(dst)]) if pairs else \
        torch.zeros(2, 0, dtype=torch.long)
    graph = Graph(edge_index, len(x))
    kinds = [torch.full((p.size(1),), k) for k, p in enumerate(pairs)]
    relation_of = graph.to_csr_order(torch.cat(kinds)) if kinds else torch.zeros(0)
    signature = _forward_signature(_eager(model)[0])
    names = [] if signature is None else list(signature.parameters)
    info = _Hetero(hetero, widths, offsets, torch.repeat_interleave(
        torch.arange(len(counts)), counts), relation_of, target,
        as_graph=len(names) > 1 and names[1] == "graph")
    return x.detach(), graph, _Values(hetero=info)


def _hetero_target(model, data, hetero: HeteroGraph, target: str | None) -> str:
    """The node type whose outputs are measured: ``target``, else the model's own (LATTE's
    ``target``), else the one type with labels ``y``."""
    if target is None:
        target = getattr(model, "target", None)
    if target is None and hasattr(data, "node_types"):
        labelled = [t for t in hetero.node_types if "y" in data[t]]
        target = labelled[0] if len(labelled) == 1 else None
    if target is None:
        raise ValueError(f"target: pass the node type whose outputs are measured, one of "
                         f"{hetero.node_types} (the model has no target, and the data does "
                         f"not label exactly one type)")
    if target not in hetero.num_nodes:
        raise ValueError(f"target={target!r} is not a node type of the graph "
                         f"({hetero.node_types})")
    return target


# --- how the model is called on a subgraph ------------------------------------------------

@dataclass
class _Subgraph:
    """Where the model runs: ``nodes`` (global ids, in the packed order), ``edge_index``
    between their positions, and each edge's CSR position in the graph (``positions``)."""
    nodes: Tensor
    edge_index: Tensor
    positions: Tensor

    def subset(self, num_nodes: int, edges: Tensor) -> _Subgraph:
        """Its first ``num_nodes`` nodes with the edges where ``edges`` (a mask) holds."""
        return _Subgraph(self.nodes[:num_nodes], self.edge_index[:, edges],
                         self.positions[edges.cpu()])


@dataclass
class _ModelCall:
    """How the measured model is called on a subgraph (``style``):

    - ``"pair"``: ``model(x, edge_index)``, as PyG's total_influence calls every model;
    - ``"graph"``: ``model(x, Graph)``, the Graph carrying its edge features (a graphloc
      model on a graphloc Graph with ``edge_attr``);
    - ``"named"``: ``model(x, edge_index, ...)`` with each of the data's node or edge
      tensors that the forward names as a parameter (``edge_attr``, ``edge_weight``,
      ``pos``, ``batch``, ...), bound to the forward's signature;
    - ``"data"``: ``model(data)``, the subgraph as a PyG Data with every node and edge tensor
      of the data, for a forward that takes one argument (``forward(self, data)``);
    - ``"features"``: ``model(x)``, for a forward that takes only the features (an MLP);
    - ``"hetero"``: ``model(x_dict, edge_index_dict)`` (or a HeteroGraph), a heterogeneous
      graph's ball split back into its node types and relations (:class:`_Hetero`)."""
    style: str
    values: _Values
    names: tuple = ()
    signature: inspect.Signature | None = None

    def arguments(self, x: Tensor, sub: _Subgraph) -> tuple[tuple, dict]:
        """``(args, kwargs)`` of the call on ``sub`` with node features ``x`` (its rows)."""
        edge_index = sub.edge_index.flip(0) if self.values.reversed else sub.edge_index
        adjacency = self.values.adjacency  # (edges given as a sparse matrix: one per ball)
        structure = edge_index if adjacency is None else \
            adjacency.of(edge_index, sub.positions, len(x), x.device)
        if self.style == "pair":
            return (x, structure), {}
        if self.style == "features":
            return (x,), {}
        if self.style == "hetero":
            return self.values.hetero.arguments(x, sub), {}
        edges = {key: value[sub.positions.long()].to(x.device)
                 for key, value in self.values.edge.items()
                 if self.style != "named" or key in self.names}
        if self.style == "graph":
            return (x, Graph(edge_index, len(x), edge_attr=edges["edge_attr"])), {}
        nodes = {key: value[sub.nodes.long().to(value.device)].to(x.device)
                 for key, value in self.values.node.items()
                 if self.style != "named" or key in self.names}
        if self.style == "data":
            key = "edge_index" if adjacency is None else adjacency.key
            return (self._data_class()(x=x, num_nodes=len(x), **{key: structure}, **nodes,
                                       **edges),), {}
        named = {**nodes, **edges}
        bound = self.signature.bind(x, structure, **named)
        bound.apply_defaults()  # positional up to the last value passed
        return bound.args, {k: v for k, v in bound.kwargs.items() if k in named}

    def describe(self) -> str:
        return {"pair": "model(x, edge_index)", "graph": "model(x, Graph with edge_attr)",
                "data": "model(data)", "features": "model(x)",
                "hetero": "model(x_dict, HeteroGraph)" if self.values.hetero is not None
                and self.values.hetero.as_graph else "model(x_dict, edge_index_dict)"}.get(
            self.style, f"model(x, edge_index, {', '.join(f'{n}=...' for n in self.names)})")

    def _data_class(self):
        if self.values.data_class is not None:
            return self.values.data_class
        try:
            from torch_geometric.data import Data
        except ImportError:
            raise ImportError("the model takes one argument, a PyG Data (forward(self, "
                              "data)): install torch_geometric to measure it") from None
        return Data


_STRUCTURE_NAMES = ("edge_index", "adj", "adj_t", "graph")
_FEATURE_NAMES = ("x", "input", "inputs", "h", "features", "feat")


def _model_call(model: torch.nn.Module, values: _Values, where: str) -> _ModelCall:
    """How ``model`` is called (see :class:`_ModelCall`), read from its forward's
    signature. Edge tensors it does not get are named in a warning."""
    from graphloc.nn.convert import has_pyg_message_passing
    if values.hetero is not None:
        return _ModelCall("hetero", values)
    signature = _forward_signature(model)
    one = None if signature is None else _one_argument_style(signature)
    if one is not None:
        call = _ModelCall(one, values)
        _warn_of_edge_values_left_out(call, where)
        return call
    offered = {**values.node, **values.edge}
    parameters = [] if signature is None else [
        p.name for p in signature.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    names = tuple(name for name in parameters[2:] if name in offered)
    if names:
        call = _ModelCall("named", values, names, signature)
    elif "edge_attr" in values.edge and values.from_graph \
            and not has_pyg_message_passing(model):
        call = _ModelCall("graph", values)
    else:
        call = _ModelCall("pair", values)
    _warn_of_edge_values_left_out(call, where)
    return call


def _with_one_graph_batch(model: torch.nn.Module, values: _Values, graph: Graph) -> _Values:
    """``values`` with a ``batch`` vector of zeros where the forward requires PyG's ``batch``
    and the data has none (PyG's ``SGFormer``, a model with a readout): each ball the model
    runs on is then one graph, as the measurement means it. PyG's total_influence fails on
    such a model (it calls ``model(x, edge_index)``)."""
    signature = _forward_signature(model)
    batch = None if signature is None else signature.parameters.get("batch")
    if batch is None or batch.default is not inspect.Parameter.empty \
            or "batch" in values.node or values.hetero is not None:
        return values
    zeros = torch.zeros(graph.num_nodes, dtype=torch.long)
    return replace(values, node={**values.node, "batch": zeros})


def _messages_run_against_edges(model: torch.nn.Module) -> bool:
    """Whether every message-passing layer of ``model`` (PyG's ``MessagePassing``,
    graphloc's convs) sends along ``edge_index[1] -> edge_index[0]``
    (``flow="target_to_source"``): a node then reads its out-neighbours, so its ball and
    hops run over the reversed edges. A model that mixes both flows is refused: its hop
    distances are not those of one direction."""
    from graphloc.nn.conv._base import ConvModule
    from graphloc.nn.convert import is_pyg_message_passing
    flows = {module.flow for module in model.modules()
             if isinstance(getattr(module, "flow", None), str)
             and (isinstance(module, ConvModule) or is_pyg_message_passing(module))}
    if flows == {"source_to_target", "target_to_source"}:
        raise ValueError("the model's layers send messages both ways (flow "
                         "'source_to_target' in some, 'target_to_source' in others): a hop "
                         "distance along one direction of the edges does not describe it")
    return flows == {"target_to_source"}


def _reversed_inputs(graph: Graph, values: _Values) -> tuple[Graph, _Values]:
    """The graph with every edge flipped, and the data's edge tensors in its CSR order."""
    flipped = graph.reversed()

    def reorder(t: Tensor | None) -> Tensor | None:
        return None if t is None else flipped.to_csr_order(graph.from_csr_order(t))
    edge = {key: reorder(t) for key, t in values.edge.items()}
    adjacency = values.adjacency if values.adjacency is None else \
        replace(values.adjacency, values=reorder(values.adjacency.values))
    return flipped, replace(values, edge=edge, adjacency=adjacency, reversed=True)


def _structure_call(model: torch.nn.Module, values: _Values, x: Tensor,
                    graph: Graph) -> _ModelCall:
    """``_model_call``; where the data's edges are a sparse matrix that the model fails on
    (a model taking an edge_index or a Graph only) but the model runs on them as an
    edge_index, that call instead, with a warning: the matrix then stands for its edges
    (tried once, on a probe ball)."""
    call = _model_call(model, values, "the data")
    if values.adjacency is None:
        return call
    sub = _probe_ball(graph, values, x.device)
    failure = _failure(model, call, x[sub.nodes].detach(), sub)
    if failure is None:
        return call
    with warnings.catch_warnings():  # (said below, once)
        warnings.simplefilter("ignore")
        lists = _model_call(model, _as_edge_lists(values), "the data")
    if _failure(model, lists, x[sub.nodes].detach(), sub) is not None:
        return call  # (a model failing either way fails in the measurement, named there)
    warnings.warn(f"the model fails on the data's sparse {values.adjacency.key} ({failure}): "
                  f"measured on its edges as {lists.describe()}", stacklevel=caller_stacklevel())
    return lists


def _workable_call(model: torch.nn.Module, call: _ModelCall, x: Tensor,
                   graph: Graph) -> _ModelCall:
    """``call``, or where the model fails when given the data's tensors its forward names as
    optional parameters, the call without them (a warning says which, and why). PyG's
    BasicGNN names ``edge_weight`` and ``edge_attr`` whatever its convs take: its ``PNA``
    built without ``edge_dim`` fails on ``edge_attr``, and its users call it without.
    Tried once, on the 2-hop ball of a seed-range node, in eval mode and without a trace."""
    optional = [name for name in call.names
                if call.signature.parameters[name].default is not inspect.Parameter.empty]
    if call.style != "named" or not optional:
        return call
    kept = tuple(name for name in call.names if name not in optional)
    without = _ModelCall("named", call.values, kept, call.signature) if kept else \
        _ModelCall("pair", call.values)
    sub = _probe_ball(graph, call.values, x.device)
    failure = _failure(model, call, x[sub.nodes].detach(), sub)
    if failure is None or _failure(model, without, x[sub.nodes].detach(), sub) is not None:
        return call  # (a model failing either way fails in the measurement, named there)
    warnings.warn(f"the model fails when given the data's {optional} ({failure}): measured "
                  f"without them, as {without.describe()}", stacklevel=caller_stacklevel())
    return without


def _failure(model: torch.nn.Module, call: _ModelCall, x: Tensor, sub: _Subgraph) -> str | None:
    """How the model fails on ``sub`` called as ``call`` (in eval mode, without gradients,
    its caches as they were), or None."""
    from graphloc.nn.convert import traceless_run
    args, kwargs = call.arguments(x, sub)
    try:
        traceless_run(model, args, lambda module, given: module(*given, **kwargs))
    except Exception as err:  # the model's own failure, whatever its kind
        return f"{type(err).__name__}: {err}"
    return None


def _forward_signature(model) -> inspect.Signature | None:
    try:
        return inspect.signature(model.forward)
    except (TypeError, ValueError, AttributeError):  # a builtin or C++ forward
        return None


def _one_argument_style(signature: inspect.Signature) -> str | None:
    """For a forward of one required positional argument and no edges of its own:
    ``"features"`` when it is the features (named ``x``, ``input``, ... or annotated as a
    Tensor: an MLP, called ``model(x)``), else ``"data"`` (``forward(self, data)``); None
    for any other forward."""
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    starred = any(p.kind == p.VAR_POSITIONAL for p in signature.parameters.values())
    if len(required) != 1 or positional[0] is not required[0] or starred \
            or any(p.name in _STRUCTURE_NAMES for p in positional):
        return None
    only = required[0]
    is_tensor = only.annotation in (Tensor, "Tensor", "torch.Tensor")
    return "features" if is_tensor or only.name in _FEATURE_NAMES else "data"


def _warn_of_edge_values_left_out(call: _ModelCall, where: str) -> None:
    """Edge weights or features the model is not given would be left out of the measured
    model without a word, so they are named."""
    given = {"pair": (), "features": (), "graph": ("edge_attr",), "hetero": (),
             "named": call.names}.get(call.style)
    left = [key for key in call.values.edge if given is not None and key not in given]
    if left:
        warnings.warn(
            f"{where} has {left}, which the model does not get: influence calls "
            f"{call.describe()} (a forward with parameters of those names gets them; "
            f"PyG's total_influence always calls model(x, edge_index))",
            stacklevel=caller_stacklevel())


# --- seeds, checks and the measurement ---------------------------------------------------

def _seeds(num_nodes: int, num_samples, nodes, seed, allow_empty: bool = False) -> Tensor:
    """Seed ids: ``nodes`` checked, else a draw. Per-hop totals of no seeds are an empty
    table (``allow_empty``); an R or a curve of no seeds is refused."""
    if nodes is not None and num_samples is not None:  # num_samples was dropped quietly
        raise ValueError(f"num_samples={num_samples!r} and nodes were both given: pass the "
                         f"seeds as nodes, or a number of them to draw as num_samples")
    if nodes is not None:
        try:
            nodes = torch.as_tensor(nodes)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"nodes must be integer node ids (a tensor or a list), got "
                            f"{nodes!r}") from None
        if nodes.numel() == 0 and not allow_empty:
            raise ValueError("nodes is empty: R and the curve need at least one seed node")
        if nodes.numel() == 0:  # torch.as_tensor([]) is float32
            nodes = nodes.long()
        if nodes.dtype.is_floating_point or nodes.dtype.is_complex or nodes.dtype == torch.bool:
            raise TypeError(f"nodes must be integer node ids, got {nodes.dtype}")
        if nodes.dim() > 1:
            raise ValueError(f"nodes must be 1-D node ids, got shape {list(nodes.shape)}")
        nodes = nodes.long().flatten()
        bad = (nodes < 0) | (nodes >= num_nodes)
        if bad.any():
            raise ValueError(f"node {int(nodes[bad][0])} is out of range for {num_nodes} nodes")
        # (a repeated seed is allowed: its row repeats, and an average weighs it again, as
        # a resampling of the seeds needs)
        refuse_integer_mask(nodes, "nodes", num_nodes)
        return nodes
    if num_samples is not None:
        check_int(num_samples, "num_samples", 1)
        if num_samples > num_nodes:  # PyG's total_influence does the same, without a word
            warnings.warn(f"num_samples={num_samples} is more than the graph's {num_nodes} "
                          f"nodes: each node is measured once ({num_nodes} seeds)",
                          stacklevel=caller_stacklevel())
    if seed is not None and not is_int_at_least(seed, -2**63):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if num_nodes == 0 and not allow_empty:
        raise ValueError("no seed nodes to draw: the graph (on a heterogeneous graph, the "
                         "target type) has no nodes")
    count = num_nodes if num_samples is None else num_samples
    gen = None if seed is None else torch.Generator().manual_seed(seed)
    return torch.randperm(num_nodes, generator=gen)[:count]  # seed=None: PyG's draw


def _check_device(device) -> None:
    """A device the model can run on here, or a ValueError naming it (torch said "Torch
    not compiled with CUDA enabled" from deep inside the measurement)."""
    try:
        where = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got "
                         f"{device!r}") from err
    if where.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}, but CUDA is not available here "
                         "(torch.cuda.is_available() is False)")


def _locality(model, locality) -> int:
    """The L of an L-local model: the argument, else ``model.graphloc_hops``. A locality
    below the one the model declares would cut its receptive field: refused."""
    if capabilities_of(model).graphloc_global:
        raise ValueError(f"method='full_graph' needs a message-passing model whose outputs "
                         f"reach a fixed number of hops; {type(model).__name__} is global")
    declared = capabilities_of(model).graphloc_hops
    if locality is None:
        locality = declared
    if locality is None:
        raise ValueError(f"method='full_graph' needs the model's locality L (how many hops "
                         f"its outputs reach): pass locality=L or set graphloc_hops on "
                         f"{type(model).__name__}")
    check_int(locality, "locality", 0)
    if declared is not None and locality < declared:
        raise ValueError(f"locality={locality} is below the {declared} hops that "
                         f"{type(model).__name__} declares (graphloc_hops): its outputs read "
                         f"farther, so method='full_graph' would cut them off")
    return locality


def _verify_locality(model, call: _ModelCall, x: Tensor, graph: Graph, seed: int,
                     locality: int, device) -> None:
    """One cheap check before trusting ``locality``: on the subgraph of the seed's
    (L + 2)-ball, new random features on the nodes beyond L hops must leave the seed's
    output unchanged. A model that reads farther (a deeper stack, global pooling or
    attention) fails it, and full_graph would otherwise return wrong totals quietly."""
    node_ptr, nodes, hops, _, src, dst, positions = ops.khop_subgraphs(
        graph, torch.tensor([seed]), locality + 2)
    far = hops > locality
    if not far.any():
        return  # the seed's component lies within L hops: nothing beyond to perturb
    sub = _Subgraph(nodes, torch.stack([src, dst]).to(device), positions)
    x_ball = x[nodes].detach().to(device)
    moved, far = x_ball.clone(), far.to(device)
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn((int(far.sum()), x.size(1)), generator=gen, dtype=x.dtype)
    moved[far] += noise.to(device) * (1 + x_ball.abs().max())
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            before = _node_outputs(model, call, x_ball, sub)[0]
            after = _node_outputs(model, call, moved, sub)[0]
    finally:
        model.train(was_training)
    if not torch.allclose(before, after, rtol=1e-5, atol=1e-6 * (1 + float(before.abs().max()))):
        change = float((before - after).abs().max())
        raise ValueError(
            f"{type(model).__name__} is not {locality}-local: new features on the nodes "
            f"beyond {locality} hops of node {seed} changed its output by {change:.3g}. "
            f"method='full_graph' would return wrong totals; pass the model's true locality "
            f"(at least its number of message-passing layers) or use method='batched'")


def _batched_if_components_stay_apart(model, call: _ModelCall, x: Tensor, graph: Graph,
                                      nodes: Tensor, max_hops: int, device, asked: str) -> str:
    """"batched" when the model keeps the packed balls apart, else "per_seed" (with a
    warning) for ``asked="auto"``, or a ValueError for ``asked="batched"``.

    Packing balls as components of one graph assumes each output depends on its own
    component only. A model with a graph-level operation (PyG's GraphNorm, PairNorm,
    InstanceNorm or LayerNorm(mode="graph") without a batch vector, global pooling or
    attention) mixes them, and the totals would depend on which seeds share a batch. So does
    one that reads the batch's size (PyG's GraphSizeNorm without a batch vector: x /
    sqrt(N)), which new features alone do not reveal. The check: the first seed's ball
    alone, then packed with the second seed's ball under new random features; the first
    ball's outputs must be the same. Models that declare a locality (``graphloc_hops``) or
    prune their layers (graphloc's local stacks) are local by construction and skip it."""
    declared = capabilities_of(model)
    if declared.graphloc_hops is not None or declared.prunes_layers:
        return "batched"
    node_ptr, both, *_ = _packed_balls(graph, nodes[:2], max_hops)
    both.edge_index = both.edge_index.to(device)
    first = int(node_ptr[1])
    packed = x[both.nodes].detach().to(device)
    moved = packed.clone()
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn(moved[first:].shape, generator=gen, dtype=moved.dtype)
    moved[first:] += noise.to(device) * (1 + packed.abs().max())
    alone = both.subset(first, both.edge_index[1] < first)  # the first ball, its edges
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            before = _node_outputs(model, call, packed[:first], alone)
            after = _node_outputs(model, call, moved, both)[:first]
    finally:
        model.train(was_training)
    tolerance = 1e-6 * (1 + float(before.abs().nan_to_num().max())) if first else 0.0
    if torch.allclose(before, after, rtol=1e-5, atol=tolerance, equal_nan=True):
        return "batched"
    change = float((before - after).abs().nan_to_num(nan=float("inf")).max())
    why = (f"{type(model).__name__} mixes the balls packed in one batch: packed with another "
           f"ball under new features, a ball's outputs changed by {change:.3g} (a graph-level "
           f"normalisation, pooling, attention or size?)")
    if asked == "batched":
        raise ValueError(f"{why}; method='batched' would return totals that depend on the "
                         f"batching. Use method='per_seed' (PyG's numbers)")
    warnings.warn(f"{why}: measured one seed at a time (method='per_seed'), as PyG does. "
                  f"Set model.graphloc_global = True to skip this check", stacklevel=3)
    return "per_seed"


# A batch packs at most ``batch_size`` balls and about this many nodes and edges in all
# (never less than one ball): the first batch takes a few seeds, and the largest ball seen so
# far sizes the next. 256 balls of a hub graph, each most of the graph, filled the memory.
_PACKED_BUDGET = 2**20
_FIRST_BATCH = 8


def _batched_influence(model, call: _ModelCall, x, graph: Graph, nodes: Tensor,
                       max_hops: int, device, prune: bool, progress: bool,
                       step: int) -> Tensor:
    from tqdm.auto import tqdm
    rows, start, largest = [], 0, None
    with tqdm(total=len(nodes), disable=not progress, desc="influence") as bar:
        while start < len(nodes):
            count = min(step, _FIRST_BATCH) if largest is None else \
                max(1, min(step, _PACKED_BUDGET // largest))
            seeds = nodes[start:start + count]
            T, ball = _batch_influence(model, call, x, graph, seeds, max_hops, device, prune)
            largest = max(ball, largest or 1)
            rows.append(T)
            start += len(seeds)
            bar.update(len(seeds))  # (the last batch may hold fewer than count)
    return torch.cat(rows) if rows else torch.zeros(0, max_hops + 1, dtype=torch.float64)


def _whole_graph_influence(model, x, graph: Graph, nodes: Tensor, max_hops: int, device,
                           progress: bool, step: int) -> Tensor:
    """Models whose inputs are properties of the whole graph (``node_batched``: LargeGT's
    token samples and positions, by global node id): the Jacobian of the deployed model on
    the whole graph, exact, for every seed. ``model.reads(graph, seeds)`` gives the nodes
    each output depends on; seeds whose sets are disjoint share a round (at most ``step``
    of them): one forward ``model(x, graph, index=seeds)`` and C backwards, each node's
    gradient credited to the one seed that reads it. The batching cannot change the
    numbers."""
    from tqdm.auto import tqdm
    if not hasattr(model, "reads"):
        raise ValueError(f"{type(model).__name__} scores nodes of the whole graph "
                         "(node_batched) but has no reads(graph, nodes) method saying which "
                         "nodes each output depends on: influence cannot separate the seeds")
    seeds, inverse = nodes.unique(return_inverse=True)
    ptr, read = model.reads(graph, seeds)
    batches = _disjoint_rounds(ptr, read, graph.num_nodes, step)
    on_device = graph.to(device)
    # one leaf for every round: torch.autograd.grad leaves no gradient behind on it
    packed = x.detach().to(device).requires_grad_()
    owner = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    T = torch.zeros(len(seeds), max_hops + 1, dtype=torch.float64)
    for members in tqdm(batches, disable=not progress, desc="influence rounds"):
        out = model(packed, on_device, index=seeds[members].to(device))
        total = _root_jacobian_l1(out, packed).cpu()
        positions, counts = _row_positions(ptr, members)
        owner[read[positions]] = torch.repeat_interleave(torch.arange(len(members)), counts)
        node_ptr, ball, hops, *_ = ops.khop_subgraphs(graph, seeds[members], max_hops)
        mine = owner[ball] == torch.repeat_interleave(torch.arange(len(members)),
                                                      node_ptr.diff())
        T[members] = _per_hop(node_ptr, hops, total[ball] * mine, max_hops)
        owner[read[positions]] = -1
    return T[inverse]


def _disjoint_rounds(ptr: Tensor, read: Tensor, num_nodes: int, step: int) -> list[Tensor]:
    """Greedy rounds of seeds (rows of the packed sets ``ptr``/``read``) whose sets are
    pairwise disjoint, at most ``step`` seeds each."""
    remaining, rounds = list(range(len(ptr) - 1)), []
    taken = torch.zeros(num_nodes, dtype=torch.bool)
    while remaining:
        members, deferred = [], []
        for s in remaining:
            nodes = read[ptr[s]:ptr[s + 1]]
            if len(members) < step and not taken[nodes].any():
                taken[nodes] = True
                members.append(s)
            else:
                deferred.append(s)
        taken.zero_()
        rounds.append(torch.tensor(members))
        remaining = deferred
    return rounds


def _full_graph_influence(model, call: _ModelCall, x, graph: Graph, nodes: Tensor,
                          max_hops: int, locality: int, device, prune: bool,
                          progress: bool) -> Tensor:
    """Rounds of seeds with disjoint ``locality``-balls, one forward and C backwards each."""
    from tqdm.auto import tqdm
    seeds, inverse = nodes.unique(return_inverse=True)
    rounds = ops.separated_rounds(graph, seeds, locality)
    T = torch.zeros(len(seeds), max_hops + 1, dtype=torch.float64)
    order = rounds.argsort(stable=True)
    sizes = torch.bincount(rounds).tolist() if len(seeds) else []
    local = torch.full((graph.num_nodes,), -1, dtype=torch.long)  # reset after each round
    for members in tqdm(order.split(sizes), disable=not progress, desc="influence rounds"):
        T[members] = _round_influence(model, call, x, graph, seeds[members], max_hops,
                                      locality, device, prune, local)
    return T[inverse]


def _round_influence(model, call: _ModelCall, x, graph: Graph, seeds: Tensor, max_hops: int,
                     locality: int, device, prune: bool, local: Tensor) -> Tensor:
    """Seeds with disjoint ``locality``-balls: the forward runs on the subgraph induced by
    their (locality + 1)-balls and the out-neighbours of their balls (out-degrees inside
    exact), where their outputs equal the full graph's; each node's gradient belongs to
    the one seed whose ball holds it. ``local``: an all -1 node-to-region map, left so
    (O(region) per round, not O(N))."""
    node_ptr, nodes, hops, *_ = ops.khop_subgraphs(graph, seeds, locality + 1)
    out_edges, _ = _row_positions(graph.csc.indptr, nodes[hops <= locality])
    region = torch.cat([nodes, graph.csc.indices[out_edges].long()]).unique()
    local[region] = torch.arange(len(region))
    in_edges, counts = _row_positions(graph.csr.indptr, region)  # O(region), not O(E)
    src = local[graph.csr.indices[in_edges].long()]
    dst = torch.repeat_interleave(torch.arange(len(region)), counts)
    inside = src >= 0
    sub = _Subgraph(region, torch.stack([src, dst])[:, inside], in_edges[inside])
    region_hop = torch.full((len(region),), locality + 2)  # the out-neighbours: farther
    region_hop.scatter_reduce_(0, local[nodes], hops, "amin")  # the L + 1 shells overlap
    total = _subgraph_jacobian_l1(model, call, x, sub, region_hop, local[seeds], device,
                                  prune)
    keep = hops <= min(locality, max_hops)  # zero influence from farther nodes
    T = _per_hop(node_ptr, hops, total[local[nodes[keep]]], max_hops, keep)
    local[region] = -1
    return T


def _check_one_computation(model, x, graph: Graph, values: _Values, seeds: Tensor) -> None:
    """Raises unless every process measures the same model (parameters and buffers), on
    the same features, edges, other data tensors and seeds: the shards are gathered into
    one result."""
    tensors = {f"model.{name}": t for name, t in model.state_dict().items()
               if isinstance(t, Tensor)}
    tensors.update({"x": x, "edge_index": graph.edge_index, "seeds": seeds})
    tensors.update({f"data.{key}": t for key, t in {**values.node, **values.edge}.items()})
    check_same_on_every_rank(tensors, "the measurement")


def _gather_shards(T: Tensor, total: int, rank: int, world: int) -> Tensor:
    """Every process gets the rows of all seeds, in the original seed order (rank r holds
    seeds r, r + world, ...)."""
    import torch.distributed as dist
    rows = -(-total // world)
    padded = torch.zeros(rows, T.size(1), dtype=T.dtype)
    padded[:len(T)] = T
    if dist.get_backend() == "nccl":
        padded = padded.cuda()
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    out = torch.zeros(total, T.size(1), dtype=T.dtype)
    for r, part in enumerate(parts):
        count = len(range(r, total, world))
        out[r::world] = part[:count].cpu()
    return out


def _batch_influence(model, call: _ModelCall, x, graph: Graph, seeds: Tensor,
                     max_hops: int, device, prune: bool) -> tuple[Tensor, int]:
    """Balls of ``seeds`` packed as disjoint components; one forward, C backwards. Also
    the largest ball's nodes and edges."""
    node_ptr, sub, hops, edge_ptr = _packed_balls(graph, seeds, max_hops)
    total = _subgraph_jacobian_l1(model, call, x, sub, hops, node_ptr[:-1], device, prune)
    return _per_hop(node_ptr, hops, total, max_hops), int((node_ptr.diff() +
                                                            edge_ptr.diff()).max())


def _packed_balls(graph: Graph, seeds: Tensor, max_hops: int):
    """The seeds' ``max_hops`` balls as disjoint components of one graph: ``(node_ptr,
    sub, hops, edge_ptr)``, ball s holding the packed rows ``node_ptr[s]:node_ptr[s+1]``
    and edges ``edge_ptr[s]:edge_ptr[s+1]`` of the :class:`_Subgraph` ``sub``, at hop
    distances ``hops``."""
    node_ptr, nodes, hops, edge_ptr, src, dst, positions = ops.khop_subgraphs(graph, seeds,
                                                                              max_hops)
    edge_offset = torch.repeat_interleave(node_ptr[:-1], edge_ptr.diff())
    edge_index = torch.stack([src + edge_offset, dst + edge_offset])
    return node_ptr, _Subgraph(nodes, edge_index, positions), hops, edge_ptr


def _subgraph_jacobian_l1(model, call: _ModelCall, x: Tensor, sub: _Subgraph, hop: Tensor,
                          roots: Tensor, device, prune: bool) -> Tensor:
    """Per node of a subgraph, the summed |d out[roots] / d x| (each node's gradient from
    the roots that reach it); ``hop`` is each node's distance to the nearest root. With
    ``prune`` (a model that ``prunes_layers``) the nodes are ordered by it, roots first,
    and each layer computed only where the roots' outputs still read it."""
    if prune:
        order = hop.argsort(stable=True)
        position = torch.empty_like(order)
        position[order] = torch.arange(len(order))
        sub = _Subgraph(sub.nodes[order], position[sub.edge_index], sub.positions)
        roots = position[roots]
    packed = x[sub.nodes].to(device).detach().requires_grad_()
    sub = _Subgraph(sub.nodes, sub.edge_index.to(device), sub.positions)
    if prune:
        ball_sizes = torch.bincount(hop).cumsum(0).tolist()
        (_, structure), _ = call.arguments(packed, sub)  # ("pair" or "graph")
        out = model.forward_within(packed, structure, ball_sizes)
    else:
        out = _node_outputs(model, call, packed, sub)
    total = _root_jacobian_l1(out[roots.to(device)], packed).cpu()
    return total[position] if prune else total


def _node_outputs(model, call: _ModelCall, x: Tensor, sub: _Subgraph) -> Tensor:
    """The model's rows on a subgraph, called as ``call`` says, checked to be one tensor
    with a row per node."""
    args, kwargs = call.arguments(x, sub)
    out = model(*args, **kwargs)
    if call.style == "hetero":
        out = call.values.hetero.target_rows(out, sub)
    if not isinstance(out, Tensor):
        raise TypeError(f"the model returned a {type(out).__name__}: influence needs one "
                        "tensor with an output row per node (wrap a model that returns "
                        "several values)")
    if out.dim() != 2 or out.size(0) != x.size(0):
        raise ValueError(f"the model returned shape {list(out.shape)} for {x.size(0)} "
                         "nodes: influence needs one output row per node")
    return out


def _per_hop(node_ptr: Tensor, hops: Tensor, values: Tensor, max_hops: int,
             keep: Tensor | None = None) -> Tensor:
    """``T [S, max_hops + 1]``: ``values`` (one per packed ball entry) summed per seed and
    hop, over the entries in ``keep`` (all if None)."""
    num_seeds = node_ptr.numel() - 1
    index = torch.repeat_interleave(torch.arange(num_seeds), node_ptr.diff()) \
        * (max_hops + 1) + hops
    if keep is not None:
        index = index[keep]
    per_hop = torch.zeros(num_seeds * (max_hops + 1), dtype=torch.float64)
    per_hop.index_add_(0, index, values.to(torch.float64))
    return per_hop.view(num_seeds, max_hops + 1)


def _root_jacobian_l1(root_out: Tensor, packed: Tensor) -> Tensor:
    """Per packed node, sum over channels c and features f of |d root_out[:, c] / d x|:
    one VJP per output channel (vmap-batched VJPs were slower here: graphloc's ops have
    no batching rule, and for PyG's layers they saved under 10%)."""
    channels = root_out.size(1)
    total = torch.zeros(packed.size(0), dtype=torch.float64, device=packed.device)
    for c in range(channels):
        (grad,) = torch.autograd.grad(root_out[:, c].sum(), packed,
                                      retain_graph=c + 1 < channels)
        total += grad.abs().sum(1, dtype=torch.float64)
    return total


def _row_positions(indptr: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """The positions of the entries of ``rows`` in a CSR layout, row after row, and the
    number per row."""
    starts = indptr[rows].long()
    counts = indptr[rows + 1].long() - starts
    first = torch.repeat_interleave(starts - (counts.cumsum(0) - counts), counts)
    return first + torch.arange(int(counts.sum())), counts


def _mean_r(T: Tensor) -> float:
    r = receptive_field(T)
    zero = T.sum(1) == 0
    if zero.any():
        warnings.warn(f"{int(zero.sum())} of {len(T)} seed nodes have zero influence from "
                      "every hop (a zero output Jacobian): they are left out of R",
                      stacklevel=3)
    return float(r[~zero].mean()) if (~zero).any() else float("nan")
