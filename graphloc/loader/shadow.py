"""PyG's ``ShaDowKHopSampler`` (ShaDow-GNN, Zeng et al., NeurIPS 2021) on graphloc's
sampler: "change the import" for ShaDow training scripts. PyG 2.8 draws its subgraphs with
torch-sparse's ``ego_k_hop_sample_adj`` and raises ``ImportError`` without it.

Each root (a node of ``node_idx``) gets its own subgraph: ``depth`` hops in which every node
reached at the hop before draws up to ``num_neighbors`` of its in-neighbours (all of them
when it has no more, or ``num_neighbors`` < 0), then every edge between the subgraph's
nodes. A batch is PyG's: the subgraphs side by side, each's nodes in increasing id, its
edges sorted by source then destination, with ``batch``, ``ptr``, ``root_n_id`` (each
root's row), ``y`` of the roots, and node and edge attributes of the data gathered, as
torch-sparse's sampler gives them.

Differences from PyG with torch-sparse, by design: the random draws are graphloc's (one seed
per batch from torch's default generator, so ``torch.manual_seed`` repeats a run; the same
distribution, other neighbours); ``data.adj_t`` (a torch-sparse ``SparseTensor``) is not
taken, ``edge_index`` is; an ``edge_index`` entry outside ``[0, num_nodes)`` raises
``ValueError``.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

from graphloc.checks import check_flags, check_index
from graphloc.graph import check_edge_index
from graphloc.loader.rows import packed_rows
from graphloc.ops import coo_to_csr, relational_neighbor_sample

__all__ = ["ShaDowKHopSampler"]


class ShaDowKHopSampler(torch.utils.data.DataLoader):
    """PyG's ``torch_geometric.loader.ShaDowKHopSampler`` (its arguments and batches) on
    graphloc's sampler; see the module docstring."""

    def __init__(self, data: Data, depth: int, num_neighbors: int,
                 node_idx: Tensor | None = None, replace: bool = False, **kwargs):
        if data.edge_index is None:
            raise TypeError("ShaDowKHopSampler takes data.edge_index; data.adj_t (torch-sparse's "
                            "SparseTensor) needs torch-sparse")
        for name, value in (("depth", depth), ("num_neighbors", num_neighbors)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        check_flags("ShaDowKHopSampler", replace=replace)
        check_edge_index(data.edge_index, data.num_nodes)
        self.data = copy.copy(data)
        num_nodes = data.num_nodes
        # a subgraph stops growing within num_nodes hops: more hops are the same batches
        self.depth = min(depth, num_nodes)
        self.num_neighbors, self.replace = num_neighbors, bool(replace)
        src, dst = data.edge_index.long().cpu()
        # in-neighbour CSR: rows are destinations, entries their sources, in edge order
        self._indptr, self._edge_ids = coo_to_csr(dst, num_nodes)
        self._sources = src[self._edge_ids.long()]
        self.node_idx = _roots(node_idx, num_nodes)
        super().__init__(self.node_idx.tolist(), collate_fn=self.__collate__, **kwargs)

    def __collate__(self, n_id) -> Batch:
        roots = torch.as_tensor(n_id, dtype=torch.long).view(-1)
        nodes, tree = self._sample(roots)
        order = torch.argsort(tree * self.data.num_nodes + nodes)  # per root, node ids ascending
        nodes, tree = nodes[order], tree[order]
        ptr = torch.zeros(roots.numel() + 1, dtype=torch.long)
        ptr[1:] = torch.bincount(tree, minlength=roots.numel()).cumsum(0)
        edge_index, e_id = self._induced_edges(nodes, tree)
        # each root is its tree's node equal to it
        root_n_id = torch.searchsorted(tree * self.data.num_nodes + nodes,
                                       torch.arange(roots.numel()) * self.data.num_nodes + roots)
        batch = Batch(batch=tree, ptr=ptr)
        batch.root_n_id = root_n_id
        batch.edge_index = edge_index
        for key, value in self.data:
            if key in ("edge_index", "adj_t", "num_nodes", "batch", "ptr"):
                continue
            if key == "y" and value.size(0) == self.data.num_nodes:
                batch[key] = value[nodes][root_n_id]
            elif isinstance(value, Tensor) and value.size(0) == self.data.num_nodes:
                batch[key] = value[nodes]
            elif isinstance(value, Tensor) and value.size(0) == self.data.num_edges:
                batch[key] = value[e_id]
            else:
                batch[key] = value
        return batch

    def _sample(self, roots: Tensor) -> tuple[Tensor, Tensor]:
        """Every root's sampled nodes (global ids) and the root (tree) each belongs to."""
        seed = int(torch.randint(0, 2**62, (), dtype=torch.long))
        sampled = relational_neighbor_sample(
            [(self._indptr, self._sources.to(self._indptr.dtype))], [(0, 0)],
            [self.data.num_nodes], [roots], [[self.num_neighbors] * self.depth],
            replace=self.replace, disjoint=True, seed=seed)
        return sampled.nodes[0], sampled.trees[0]

    def _induced_edges(self, nodes: Tensor, tree: Tensor) -> tuple[Tensor, Tensor]:
        """Every edge between nodes of one tree, in batch ids (rows sorted by source, then
        destination), and its edge id. ``(tree, nodes)`` are sorted."""
        n = self.data.num_nodes
        keys = tree * n + nodes
        # the in-edges of every sampled node: CSR position and destination batch id
        position, dst, _ = packed_rows(self._indptr, nodes)
        source_keys = tree[dst] * n + self._sources[position]
        src = torch.searchsorted(keys, source_keys).clamp(max=max(keys.numel() - 1, 0))
        kept = keys[src] == source_keys if keys.numel() else source_keys.new_zeros(0).bool()
        src, dst, e_id = src[kept], dst[kept], self._edge_ids.long()[position[kept]]
        order = torch.argsort(src * nodes.numel() + dst, stable=True)
        return torch.stack([src[order], dst[order]]), e_id[order]


def _roots(node_idx, num_nodes: int) -> Tensor:
    """The roots: all nodes, the ids of a boolean mask's True entries, or node ids, checked
    here rather than at the first batch."""
    if node_idx is None:
        return torch.arange(num_nodes)
    if not isinstance(node_idx, Tensor):
        raise TypeError(f"node_idx must be a tensor of node ids or a boolean mask, got "
                        f"{type(node_idx).__name__}")
    if node_idx.dtype == torch.bool:
        if node_idx.shape != (num_nodes,):
            raise ValueError(f"node_idx as a mask must hold one entry per node ({num_nodes}), "
                             f"got shape {list(node_idx.shape)}")
        return node_idx.nonzero(as_tuple=False).view(-1)
    check_index(node_idx.view(-1), num_nodes, "node_idx")
    return node_idx.view(-1).long().cpu()
