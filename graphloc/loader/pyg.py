"""PyG's ``NeighborLoader``, ``LinkNeighborLoader`` and ``NeighborSampler`` on graphloc's
sampling kernel: "change the import" for PyG training scripts.

PyG 2.8 samples neighbours only through pyg-lib or torch-sparse (its loaders raise
``ImportError`` without them, and their wheels trail new torch releases). These classes are
PyG's own, with PyG's arguments, batches (``Data`` / ``HeteroData`` with ``n_id``, ``e_id``,
``input_id``, ``batch_size``, ``num_sampled_nodes``, ``num_sampled_edges``), transforms,
feature and graph stores and worker processes; only the draw is graphloc's
(``ops.relational_neighbor_sample``, C++), with pyg-lib's semantics:

* at each hop, for each edge type in order, every node reached at the previous hop draws up
  to ``num_neighbors`` of its in-neighbours of that type; new nodes are numbered in that
  order, the seeds first;
* ``replace``, ``disjoint`` (one tree per seed, ``batch`` naming it), ``subgraph_type``
  ``"directional"``, ``"bidirectional"`` and ``"induced"`` (every edge between the sampled
  nodes), ``sample_direction``, homogeneous and heterogeneous graphs;
* temporal sampling (``time_attr`` on nodes or edges, ``input_time`` /
  ``edge_label_time``; ``temporal_strategy`` ``"uniform"`` or ``"last"``): a seed's tree
  draws only entries whose time is at most the seed's time;
* weighted sampling (``weight_attr``: finite weights >= 0).

Differences from pyg-lib, by design:

* the random draws are graphloc's: each batch takes one 62-bit seed from torch's default
  generator (so ``torch.manual_seed`` makes a run repeatable, workers included), and the
  draws do not depend on the thread count; pyg-lib's streams are its own, so the same seed
  gives other (equally distributed) neighbours;
* a seed given twice keeps its own row each time; edges reaching that node point at its
  first row (in pyg-lib the repeat takes no local id, so later nodes' edges point at the
  wrong rows);
* temporal sampling does not need each neighbourhood sorted by time (pyg-lib's binary
  search does, and raises on some unsorted ones); floating-point times are compared by
  their order (pyg-lib reads times as int64);
* weighted sampling may be combined with temporal sampling (pyg-lib refuses); an edge of
  weight 0 is drawn only when the whole neighbourhood is taken (pyg-lib's top-k may return
  it when fewer than ``num_neighbors`` edges have weight), and with replacement a
  neighbourhood whose weights are all 0 draws nothing (pyg-lib raises).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings

import torch
import torch_geometric.typing
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader as _PyGLinkNeighborLoader
from torch_geometric.loader import NeighborLoader as _PyGNeighborLoader
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.sampler import NeighborSampler as _PyGNeighborSampler
from torch_geometric.sampler.base import NumNeighbors, SubgraphType
from torch_geometric.sampler.neighbor_sampler import (
    BidirectionalNeighborSampler as _PyGBidirectionalNeighborSampler,
)
from torch_geometric.sampler.utils import remap_keys

from graphloc.checks import check_dataloader_flags, check_flags
from graphloc.graph import check_edge_index
from graphloc.ops import relational_neighbor_sample


def _check_edges(data) -> None:
    """Every edge_index of a ``Data`` / ``HeteroData`` (or COO edges of a graph store)
    within its node counts. PyG's CSC
    conversion (``index2ptr``, torch's ``_convert_indices_from_coo_to_csr``) writes past its
    output for a destination id >= num_nodes and corrupts the heap, so this runs first."""
    if isinstance(data, HeteroData):
        for edge_type in data.edge_types:
            if "edge_index" in data[edge_type]:
                _check_typed_edges(edge_type, data[edge_type].edge_index,
                                   (data[edge_type[0]].num_nodes, data[edge_type[2]].num_nodes))
    elif isinstance(data, Data) and "edge_index" in data:
        check_edge_index(data.edge_index, data.num_nodes)
    elif isinstance(data, tuple):  # (FeatureStore, GraphStore): its COO edges of known size
        for attr in data[1].get_all_edge_attrs():
            if attr.layout.value == "coo" and attr.size is not None:
                _check_typed_edges(attr.edge_type,
                                   torch.stack(list(data[1].get_edge_index(attr))), attr.size)


def _check_typed_edges(edge_type, edge_index: Tensor, size) -> None:
    """``check_edge_index`` for ``size = (sources, destinations)``, naming the edge type."""
    try:
        check_edge_index(edge_index, size[1], size[0])
    except (TypeError, ValueError) as err:
        raise type(err)(f"edge type {edge_type}: {err}") from None


@contextlib.contextmanager
def _with_kernel_features():
    """PyG's sampler refuses edge times and edge weights unless pyg-lib has them; graphloc's
    kernel has both."""
    names = ("WITH_EDGE_TIME_NEIGHBOR_SAMPLE", "WITH_WEIGHTED_NEIGHBOR_SAMPLE")
    saved = [getattr(torch_geometric.typing, n) for n in names]
    for n in names:
        setattr(torch_geometric.typing, n, True)
    try:
        yield
    finally:
        for n, value in zip(names, saved, strict=True):
            setattr(torch_geometric.typing, n, value)


class _TimeOrder:
    """Times as the kernel's int64: integers as they are, floating times by their rank
    among all the graph's times (a seed time by the rank of the latest time at or before
    it), which keeps every comparison the sampler makes."""

    def __init__(self, times: list[Tensor]):
        self.values, self.ranked = None, {}
        floating = [t for t in times if t.is_floating_point()]
        if floating:
            flat = torch.cat([t.double().flatten() for t in times])
            if bool(flat.isnan().any()):
                raise ValueError("the time attribute holds NaN, which has no order")
            self.values = flat.unique()

    def of_graph(self, t: Tensor) -> Tensor:
        """A graph's times as int64, converted once per tensor (not at every batch)."""
        if id(t) not in self.ranked:  # the tensor is kept, so its id stays its own
            ranks = t.long() if self.values is None else \
                torch.searchsorted(self.values, t.double())
            self.ranked[id(t)] = (t, ranks)
        return self.ranked[id(t)][1]

    def of_seeds(self, t: Tensor) -> Tensor:
        if self.values is None:
            return t.long()
        if bool(t.isnan().any()):
            raise ValueError("a seed time is NaN, which has no order")
        return torch.searchsorted(self.values, t.double(), right=True) - 1


def _rows_for(indptr: Tensor, num_rows: int) -> Tensor:
    """``indptr`` over ``num_rows`` rows: a graph store's CSR may stop at its last
    destination; the nodes past it have no in-edges."""
    missing = num_rows + 1 - indptr.numel()
    return torch.cat([indptr, indptr[-1:].expand(missing)]) if missing > 0 else indptr


def _seed_ids(seed: Tensor) -> Tensor:
    """PyG's bidirectional sampler passes ``torch.tensor([])`` (float) for no seeds."""
    return seed.long() if seed.numel() == 0 else seed


def _node_counts(cumulative: Tensor) -> list[int]:
    """``[seeds, new at hop 1, ...]`` from the cumulative ``[S, S + n1, ...]``."""
    return cumulative.diff(prepend=cumulative.new_zeros(1)).tolist()


def _edge_counts(cumulative: Tensor) -> list[int]:
    """``[edges at hop 1, ...]`` from the cumulative ``[0, e1, ...]``."""
    return cumulative.diff().tolist()


class NeighborSampler(_PyGNeighborSampler):
    """PyG's ``torch_geometric.sampler.NeighborSampler`` (same arguments) drawing with
    graphloc's kernel; see the module docstring for the semantics."""

    def __init__(self, data, num_neighbors, subgraph_type="directional", replace=False,
                 disjoint=False, temporal_strategy="uniform", time_attr=None, weight_attr=None,
                 is_sorted=False, share_memory=False, directed=True,
                 sample_direction="forward"):
        if temporal_strategy not in ("uniform", "last"):
            raise ValueError(f"temporal_strategy must be 'uniform' or 'last', got "
                             f"{temporal_strategy!r}")
        check_flags("NeighborSampler", replace=replace, disjoint=disjoint, is_sorted=is_sorted,
                    share_memory=share_memory, directed=directed)
        _check_edges(data)
        with warnings.catch_warnings(), _with_kernel_features():
            # PyG's advice to install pyg-lib does not apply
            warnings.filterwarnings("ignore", message=".*without a 'pyg-lib' installation")
            super().__init__(data, num_neighbors, subgraph_type=subgraph_type, replace=replace,
                             disjoint=disjoint, temporal_strategy=temporal_strategy,
                             time_attr=time_attr, weight_attr=weight_attr, is_sorted=is_sorted,
                             share_memory=share_memory, directed=directed,
                             sample_direction=sample_direction)
        if self.disjoint and self.subgraph_type == SubgraphType.induced:
            raise ValueError("disjoint sampling (disjoint=True, or a time_attr) cannot be "
                             "combined with subgraph_type='induced'")
        self._time_order = _TimeOrder([t for t in self._times() if t is not None])

    def _times(self) -> list:
        """The node and edge times PyG's constructor read (dicts for a heterogeneous graph)."""
        out = []
        for times in (self.node_time, self.edge_time):
            out += list(times.values()) if isinstance(times, dict) else [times]
        return out

    def _draw(self, csrs, relations, num_nodes, seeds, fanouts, node_times, edge_times,
              seed_times, edge_weights):
        seed = int(torch.randint(0, 2**62, (), dtype=torch.long))
        order = self._time_order
        timed = lambda ts: [None if t is None else order.of_graph(t) for t in ts]  # noqa: E731
        return relational_neighbor_sample(
            csrs, relations, num_nodes, seeds, fanouts, replace=self.replace,
            disjoint=self.disjoint, induced=self.subgraph_type == SubgraphType.induced,
            seed=seed, node_times=timed(node_times), edge_times=timed(edge_times),
            seed_times=None if seed_times is None else order.of_seeds(seed_times),
            edge_weights=edge_weights, last=self.temporal_strategy == "last")

    def _seed_times(self, seeds: list[Tensor], given: list, node_times: list) -> Tensor | None:
        """One time per tree, in the kernel's tree order: the given seed time, else (node
        times) the seed node's own time."""
        if not self.is_temporal:
            return None
        out = []
        for s, g, t in zip(seeds, given, node_times, strict=True):
            if g is not None:
                out.append(g)
            elif t is not None:
                out.append(t[s.long()])
            elif s.numel():
                raise ValueError("edge-level temporal sampling needs a time for each seed "
                                 "(input_time / edge_label_time)")
        return torch.cat([t.to(out[0].dtype) for t in out]) if out else None

    def _sample(self, seed, seed_time=None, **kwargs):
        if isinstance(seed, dict):
            return self._sample_hetero({t: _seed_ids(s) for t, s in seed.items()},
                                       seed_time or {})
        return self._sample_homo(_seed_ids(seed), seed_time)

    def _sample_homo(self, seed: Tensor, seed_time) -> SamplerOutput:
        dtype, n = self.colptr.dtype, int(self.num_nodes)
        out = self._draw([(_rows_for(self.colptr, n), self.row)], [(0, 0)], [n], [seed],
                         [list(self.num_neighbors.get_mapped_values())], [self.node_time],
                         [self.edge_time], self._seed_times([seed], [seed_time],
                                                            [self.node_time]),
                         [self.edge_weight])
        row, col = out.src[0].to(dtype), out.dst[0].to(dtype)
        if self.sample_direction == "backward":
            row, col = col, row
        induced = self.subgraph_type == SubgraphType.induced
        return SamplerOutput(
            node=out.nodes[0].to(dtype), row=row, col=col, edge=out.pos[0].to(dtype),
            batch=out.trees[0].to(dtype) if self.disjoint else None,
            num_sampled_nodes=None if induced else _node_counts(out.hop_nodes[0]),
            num_sampled_edges=None if induced else _edge_counts(out.hop_edges[0]))

    @functools.cached_property
    def _hetero_layout(self) -> tuple[list, list, list, list]:
        """Built once (the graph does not change between batches): the node types, the
        relations' names, per type its node count (at least the rows its relations' CSRs
        have: a graph store may give no count), per relation its CSR over all of them."""
        types = list(self.node_types)
        rels = [self.to_rel_type[k] for k in self.edge_types]
        index = {t: i for i, t in enumerate(types)}
        num_nodes = [int(self.num_nodes.get(t, 0) or 0) for t in types]
        for k, rel in zip(self.edge_types, rels, strict=True):
            dst = index[k[2]]
            num_nodes[dst] = max(num_nodes[dst], self.colptr_dict[rel].numel() - 1)
        csrs = [(_rows_for(self.colptr_dict[rel], num_nodes[index[k[2]]]), self.row_dict[rel])
                for k, rel in zip(self.edge_types, rels, strict=True)]
        if len({t.dtype for csr in csrs for t in csr}) > 1:  # int32 and int64 edge types
            csrs = [(indptr.long(), indices.long()) for indptr, indices in csrs]
        return types, rels, num_nodes, csrs

    def _sample_hetero(self, seed: dict, seed_time: dict) -> HeteroSamplerOutput:
        types, rels, num_nodes, csrs = self._hetero_layout
        edge_types = list(self.edge_types)
        index = {t: i for i, t in enumerate(types)}
        fanouts = self.num_neighbors.get_mapped_values(edge_types)
        seeds = [seed.get(t, torch.empty(0, dtype=torch.long)) for t in types]
        node_time = [(self.node_time or {}).get(t) for t in types]
        out = self._draw(csrs, [(index[k[0]], index[k[2]]) for k in edge_types], num_nodes,
                         seeds, [list(fanouts[rel]) for rel in rels], node_time,
                         [(self.edge_time or {}).get(rel) for rel in rels],
                         self._seed_times(seeds, [seed_time.get(t) for t in types], node_time),
                         [(self.edge_weight or {}).get(rel) for rel in rels])
        dtype = csrs[0][0].dtype if csrs else torch.long

        def keyed(keys, parts, convert=lambda p: p.to(dtype)):
            return {k: convert(p) for k, p in zip(keys, parts, strict=True)}

        row, col, edge = (keyed(edge_types, part) for part in (out.src, out.dst, out.pos))
        sampled_edges = keyed(edge_types, out.hop_edges, _edge_counts)
        if self.sample_direction == "backward":
            row, col = col, row
            row, col, edge, sampled_edges = (remap_keys(d, self.to_restored_edge_type)
                                             for d in (row, col, edge, sampled_edges))
        induced = self.subgraph_type == SubgraphType.induced
        return HeteroSamplerOutput(
            node=keyed(types, out.nodes), row=row, col=col, edge=edge,
            batch=keyed(types, out.trees) if self.disjoint else None,
            num_sampled_nodes=None if induced else keyed(types, out.hop_nodes, _node_counts),
            num_sampled_edges=None if induced else sampled_edges)


class BidirectionalNeighborSampler(_PyGBidirectionalNeighborSampler):
    """PyG's ``BidirectionalNeighborSampler`` (same arguments): hop by hop, the union of a
    forward and a backward draw, each with graphloc's kernel."""

    def __init__(self, data, num_neighbors, subgraph_type="directional", replace=False,
                 disjoint=False, temporal_strategy="uniform", time_attr=None, weight_attr=None,
                 is_sorted=False, share_memory=False, directed=True):
        values = num_neighbors.values if isinstance(num_neighbors, NumNeighbors) \
            else num_neighbors
        if isinstance(values, dict):
            raise RuntimeError("BidirectionalNeighborSampler does not yet support edge "
                               "delimited sampling.")  # PyG's own refusal
        self.forward_sampler, self.backward_sampler = (
            NeighborSampler(data, num_neighbors, subgraph_type, replace, disjoint,
                            temporal_strategy, time_attr, weight_attr, is_sorted, share_memory,
                            directed=directed, sample_direction=direction)
            for direction in ("forward", "backward"))
        self.num_neighbors = num_neighbors
        self.subgraph_type = subgraph_type


def _init_on_graphloc(pyg_loader, loader, data, num_neighbors, args, kwargs) -> None:
    """Runs PyG's loader constructor with its own arguments, the neighbour sampler
    graphloc's unless one is given (built from the same arguments, as PyG builds its own)."""
    bound = inspect.signature(pyg_loader.__init__).bind(loader, data, num_neighbors, *args,
                                                        **kwargs)
    bound.apply_defaults()
    given = dict(bound.arguments)
    given.pop("self")
    extra = given.pop("kwargs", {})
    check_dataloader_flags(type(loader).__name__, extra)
    if given["neighbor_sampler"] is None:
        given["neighbor_sampler"] = NeighborSampler(
            data, num_neighbors, subgraph_type=given["subgraph_type"],
            replace=given["replace"], disjoint=given["disjoint"],
            temporal_strategy=given["temporal_strategy"], time_attr=given["time_attr"],
            weight_attr=given["weight_attr"], is_sorted=given["is_sorted"],
            share_memory=extra.get("num_workers", 0) > 0, directed=given["directed"])
    pyg_loader.__init__(loader, **given, **extra)


class NeighborLoader(_PyGNeighborLoader):
    """PyG's ``torch_geometric.loader.NeighborLoader`` (its arguments and batches) on
    graphloc's sampler; see the module docstring."""

    def __init__(self, data, num_neighbors, *args, **kwargs):
        _init_on_graphloc(_PyGNeighborLoader, self, data, num_neighbors, args, kwargs)


class LinkNeighborLoader(_PyGLinkNeighborLoader):
    """PyG's ``torch_geometric.loader.LinkNeighborLoader`` (its arguments and batches) on
    graphloc's sampler; see the module docstring."""

    def __init__(self, data, num_neighbors, *args, **kwargs):
        _init_on_graphloc(_PyGLinkNeighborLoader, self, data, num_neighbors, args, kwargs)
