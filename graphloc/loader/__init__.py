"""Mini-batches for training at scale: layer-wise neighbour sampling in C++.

``NeighborLoader`` takes a graphloc ``Graph`` (batches are ``SampledBatch``) or, as a
drop-in for ``torch_geometric.loader.NeighborLoader``, PyG data with PyG's arguments
(batches are PyG's ``Data`` / ``HeteroData``; see ``graphloc.loader.pyg``).
``LinkNeighborLoader``, ``NeighborSampler`` and ``BidirectionalNeighborSampler`` are PyG's,
on the same kernel; ``HGTLoader`` and ``HGTSampler`` PyG's, without torch-sparse
(``graphloc.loader.hgt``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import (
    check_flags,
    check_int,
    first_repeated,
    is_int_at_least,
    refuse_integer_mask,
)
from graphloc.graph import Graph


@dataclass
class SampledBatch:
    """A sampled subgraph: its first ``batch_size`` nodes are the seeds, in order.

    ``n_id`` maps local to global node ids, ``e_id`` local edges to the parent graph's edge
    ids (``graph`` carries the parent's ``edge_attr`` rows of its edges, where it has
    some); ``x`` and ``y`` are the sampled nodes' features and labels (if given);
    ``num_sampled_nodes`` / ``num_sampled_edges`` count what each hop added.
    """

    graph: Graph
    n_id: Tensor
    e_id: Tensor
    batch_size: int
    x: Tensor | None
    y: Tensor | None
    num_sampled_nodes: list[int]
    num_sampled_edges: list[int]


def _checked_fanouts(num_neighbors) -> list[int]:
    """Fan-outs per hop: a non-empty list of integers >= 0, or -1 for all neighbours."""
    fanouts = list(num_neighbors) if isinstance(num_neighbors, (list, tuple)) else None
    if not fanouts or not all(is_int_at_least(k, -1) for k in fanouts):
        raise ValueError(f"num_neighbors must be a non-empty list of integer fan-outs >= 0 "
                         f"(or -1 for all neighbours), got {num_neighbors!r}")
    return fanouts


def _checked_input_nodes(input_nodes, num_nodes: int) -> Tensor:
    """Seed ids as int64 [S] (all nodes when None; a boolean mask is turned into ids)."""
    if input_nodes is None:
        return torch.arange(num_nodes)
    if not isinstance(input_nodes, Tensor):
        raise TypeError(f"input_nodes must be a tensor of node ids or a boolean mask, got "
                        f"{type(input_nodes).__name__}")
    if input_nodes.dim() != 1:
        raise ValueError(f"input_nodes must be 1-D (node ids or a mask of {num_nodes}), got "
                         f"shape {list(input_nodes.shape)}")
    if input_nodes.dtype == torch.bool:
        if input_nodes.numel() != num_nodes:
            raise ValueError(f"the input_nodes mask has {input_nodes.numel()} entries but the "
                             f"graph has {num_nodes} nodes")
        input_nodes = input_nodes.nonzero().flatten()
    elif input_nodes.dtype.is_floating_point or input_nodes.dtype.is_complex:
        raise TypeError(f"input_nodes must be node ids or a boolean mask, got "
                        f"{input_nodes.dtype}")
    input_nodes = input_nodes.long()
    if input_nodes.numel() == 0:
        raise ValueError("input_nodes is empty: there are no seed nodes to sample around")
    low, high = int(input_nodes.min()), int(input_nodes.max())
    if low < 0 or high >= num_nodes:
        raise ValueError(f"input_nodes holds {low if low < 0 else high}; node ids must lie "
                         f"in [0, {num_nodes})")
    refuse_integer_mask(input_nodes, "input_nodes", num_nodes, masks_accepted=True)
    twice = first_repeated(input_nodes)
    if twice is not None:  # in two batches it would be a seed twice an epoch, unrefused
        raise ValueError(f"input_nodes holds node {twice} more than once: seeds must be "
                         f"distinct")
    return input_nodes


def _is_pyg_data(data) -> bool:
    """PyG's ``Data`` / ``HeteroData``, or a ``(FeatureStore, GraphStore)`` pair."""
    if isinstance(data, tuple) and len(data) == 2:
        return all(type(part).__module__.startswith("torch_geometric") or any(
            base.__module__.startswith("torch_geometric") for base in type(part).__mro__)
            for part in data)
    return any(base.__module__.startswith("torch_geometric.data")
               for base in type(data).__mro__)


def __getattr__(name: str):
    # PyG's loaders on graphloc's kernel, imported (with PyG) only when asked for
    if name in ("LinkNeighborLoader", "NeighborSampler", "BidirectionalNeighborSampler"):
        from graphloc.loader import pyg
        return getattr(pyg, name)
    if name in ("HGTLoader", "HGTSampler"):
        from graphloc.loader import hgt
        return getattr(hgt, name)
    if name in ("ClusterData", "ClusterLoader"):
        from graphloc.loader import cluster
        return getattr(cluster, name)
    if name in ("GraphSAINTSampler", "GraphSAINTNodeSampler", "GraphSAINTEdgeSampler",
                "GraphSAINTRandomWalkSampler"):
        from graphloc.loader import saint
        return getattr(saint, name)
    if name == "ShaDowKHopSampler":
        from graphloc.loader import shadow
        return shadow.ShaDowKHopSampler
    raise AttributeError(f"module 'graphloc.loader' has no attribute {name!r}")


class NeighborLoader:
    """Uniform sampling without replacement of up to ``num_neighbors[l]`` in-neighbours of
    every node reached at hop ``l`` (-1: all of them), around batches of seed nodes, as
    PyG's ``NeighborLoader`` (which needs pyg-lib or torch-sparse) does.

    Sampling runs in C++ over the CSR, in parallel over the frontier, and is deterministic:
    the same ``seed`` gives the same batches whatever the thread count; each epoch (each
    ``iter()``) draws anew. ``num_workers`` is accepted for API compatibility; batches are
    produced in the calling process (the sampler is itself parallel).

    Args:
        graph: a ``Graph``; features: ``[N, F]`` or None; labels: ``[N]`` or None.
        num_neighbors: fan-out per hop, e.g. ``[15, 10, 5]``.
        input_nodes: distinct seed node ids (default: all nodes), or a boolean mask. A
            mask held in another dtype (0s and 1s, one per node) is refused, not read as
            the ids 0 and 1.
        batch_size, shuffle, seed: as usual.
    """

    def __new__(cls, *args, **kwargs):
        data = args[0] if args else kwargs.get("data", kwargs.get("graph"))
        if not isinstance(data, Graph) and _is_pyg_data(data):
            from graphloc.loader.pyg import NeighborLoader as PyGNeighborLoader
            return PyGNeighborLoader(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, graph: Graph, features: Tensor | None, labels: Tensor | None,
                 num_neighbors: list[int], batch_size: int = 1024, shuffle: bool = False,
                 seed: int = 0, input_nodes: Tensor | None = None, num_workers: int = 0):
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a graphloc.Graph, got {type(graph).__name__}")
        graph._require_one_node_set("NeighborLoader")
        check_int(batch_size, "batch_size", 1)
        check_flags("NeighborLoader", shuffle=shuffle)
        self.num_neighbors = _checked_fanouts(num_neighbors)
        for name, t in (("features", features), ("labels", labels)):
            if t is not None and (not isinstance(t, Tensor) or t.dim() == 0
                                  or t.size(0) != graph.num_nodes):
                rows = t.size(0) if isinstance(t, Tensor) and t.dim() else "no"
                raise ValueError(f"{name} has {rows} rows but the graph has "
                                 f"{graph.num_nodes} nodes")
        input_nodes = _checked_input_nodes(input_nodes, graph.num_nodes)
        self.graph, self.features, self.labels = graph.to("cpu"), features, labels
        self.batch_size = batch_size
        self.shuffle, self.seed, self.input_nodes = shuffle, seed, input_nodes
        self._epoch = 0

    def __len__(self) -> int:
        return -(-self.input_nodes.numel() // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration counts as (its shuffled order); each iteration
        advances it by one. Resuming a run sets the epoch it stopped at."""
        self._epoch = check_int(epoch, "epoch", 0)

    def __iter__(self) -> Iterator[SampledBatch]:
        epoch, self._epoch = self._epoch, self._epoch + 1
        order = self.input_nodes
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            order = order[torch.randperm(order.numel(), generator=gen)]
        for i, seeds in enumerate(order.split(self.batch_size)):
            yield self.sample(seeds, seed=((self.seed * 1_000_003 + epoch) * 1_000_003 + i)
                              % 2**63)

    def sample(self, seeds: Tensor, seed: int = 0) -> SampledBatch:
        """One sampled subgraph around ``seeds`` (distinct node ids)."""
        if not isinstance(seeds, Tensor) or seeds.dim() != 1 or seeds.is_floating_point() \
                or seeds.dtype == torch.bool:
            raise TypeError(f"seeds must be a 1-D tensor of integer node ids, got "
                            f"{getattr(seeds, 'dtype', type(seeds).__name__)} "
                            f"{list(getattr(seeds, 'shape', []))}")
        csr = self.graph.csr
        n_id, src, dst, pos, hop_nodes, hop_edges = ops.neighbor_sample(
            self.graph, seeds, self.num_neighbors, seed)
        e_id = csr.perm[pos].long() if csr.perm is not None else pos
        # the parent's edge features follow their edges: graphloc's convs read a Graph's
        # (without them a GATConv with edge_dim trained on batches without its edge term)
        edge_attr = None if self.graph.edge_attr is None else self.graph.edge_attr[e_id]
        graph = Graph(torch.stack([src, dst]), num_nodes=n_id.numel(), edge_attr=edge_attr)
        return SampledBatch(
            graph=graph, n_id=n_id, e_id=e_id, batch_size=seeds.numel(),
            x=None if self.features is None else self.features[n_id],
            y=None if self.labels is None else self.labels[n_id],
            num_sampled_nodes=hop_nodes.diff(prepend=torch.zeros(1, dtype=torch.long)).tolist(),
            num_sampled_edges=hop_edges.diff().tolist())
