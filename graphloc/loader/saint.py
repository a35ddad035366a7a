"""PyG's GraphSAINT samplers (Zeng et al., ICLR 2020): ``GraphSAINTNodeSampler``,
``GraphSAINTEdgeSampler`` and ``GraphSAINTRandomWalkSampler`` with PyG's arguments, batches
(``Data`` with the sampled nodes' induced subgraph, ``node_norm`` and ``edge_norm`` when
``sample_coverage`` > 0) and normalisation, without torch-sparse: PyG 2.8 builds them on
torch-sparse's ``SparseTensor`` (``saint_subgraph``, ``random_walk``) and they fail without
it. Here the induced subgraph is gathered from a CSR in torch and the walks are
``ops.random_walk``'s.

Differences from PyG, by design:

* ``GraphSAINTEdgeSampler`` draws an edge ``u -> v`` with probability proportional to
  ``1 / in-degree(u) + 1 / out-degree(v)`` (degrees of 0 read as 1), the paper's
  ``1 / deg(u) + 1 / deg(v)`` on an undirected graph. PyG's inverts the degrees twice
  (``deg_in = 1 / colcount``, then ``1 / deg_in[row]``) and so draws in proportion to
  ``in-degree(u) + out-degree(v)``: hub edges most often, the opposite of the paper's
  variance-reducing choice.
* the random walks draw from graphloc's stream, seeded from torch's default generator (the
  node and edge samplers draw from torch's generator as PyG's do);
* an ``edge_index`` entry outside ``[0, num_nodes)`` raises ``ValueError``; data already
  holding ``node_norm`` / ``edge_norm``, or on a GPU, raises ``ValueError`` (PyG asserts).
"""

from __future__ import annotations

import os.path as osp

import torch
from torch import Tensor

from graphloc.checks import check_dataloader_flags, check_flags, check_int
from graphloc.graph import Graph, check_edge_index
from graphloc.loader.rows import packed_rows
from graphloc.ops import random_walk, row_sorted_csr

__all__ = ["GraphSAINTSampler", "GraphSAINTNodeSampler", "GraphSAINTEdgeSampler",
           "GraphSAINTRandomWalkSampler"]


class GraphSAINTSampler(torch.utils.data.DataLoader):
    """PyG's ``torch_geometric.loader.GraphSAINTSampler`` (its arguments, batches and
    normalisation); subclasses choose the nodes. See the module docstring."""

    _draws_edges = True  # the node and edge samplers draw edges; the walks draw nodes

    def __init__(self, data, batch_size: int, num_steps: int = 1, sample_coverage: int = 0,
                 save_dir: str | None = None, log: bool = True, **kwargs):
        kwargs.pop("dataset", None)
        kwargs.pop("collate_fn", None)
        if data.edge_index is None:
            raise ValueError("GraphSAINT samplers need data.edge_index")
        for key in ("node_norm", "edge_norm"):
            if key in data:
                raise ValueError(f"data already holds '{key}', which the sampler writes")
        if data.edge_index.is_cuda:
            raise ValueError("GraphSAINT samplers take data on the CPU")
        check_int(batch_size, "batch_size", 1)
        check_int(num_steps, "num_steps", 1)
        check_int(sample_coverage, "sample_coverage", 0)
        check_flags(type(self).__name__, log=log)
        check_dataloader_flags(type(self).__name__, kwargs)
        check_edge_index(data.edge_index, data.num_nodes)
        self.num_steps, self._batch_size = num_steps, batch_size
        self.sample_coverage, self.save_dir, self.log = sample_coverage, save_dir, log
        self.N = N = data.num_nodes
        self.E = data.num_edges
        if N == 0 or (self._draws_edges and self.E == 0):
            raise ValueError(f"{type(self).__name__} needs a graph with nodes"
                             f"{' and edges' if self._draws_edges else ''} to draw from, got "
                             f"{N} nodes and {self.E} edges")
        row, col = data.edge_index.long()
        # edges sorted by source, then destination (SparseTensor's order), with their ids
        self._rowptr, self._edge_ids = row_sorted_csr(row, col, N)
        self._row, self._col = row[self._edge_ids], col[self._edge_ids]
        self.data = data
        super().__init__(self, batch_size=1, collate_fn=self._collate, **kwargs)
        if self.sample_coverage > 0:
            path = osp.join(save_dir or "", self._filename)
            if save_dir is not None and osp.exists(path):
                self.node_norm, self.edge_norm = torch.load(path)
            else:
                self.node_norm, self.edge_norm = self._compute_norm()
                if save_dir is not None:
                    torch.save((self.node_norm, self.edge_norm), path)

    @property
    def _filename(self) -> str:
        return f"{self.__class__.__name__.lower()}_{self.sample_coverage}.pt"

    def __len__(self) -> int:
        return self.num_steps

    def _sample_nodes(self, batch_size: int) -> Tensor:
        raise NotImplementedError

    def __getitem__(self, idx):
        node_idx = self._sample_nodes(self._batch_size).unique()
        return node_idx, self._induced_subgraph(node_idx)

    def _induced_subgraph(self, node_idx: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Every edge between ``node_idx`` (sorted, distinct): local source and destination
        ids, by source then destination, and edge ids."""
        local = torch.full((self.N,), -1, dtype=torch.long)
        local[node_idx] = torch.arange(node_idx.numel())
        position, _, _ = packed_rows(self._rowptr, node_idx)
        kept = position[local[self._col[position]] >= 0]
        return local[self._row[kept]], local[self._col[kept]], self._edge_ids[kept]

    def _collate(self, data_list):
        node_idx, (row, col, edge_idx) = data_list[0]
        data = self.data.__class__()
        data.num_nodes = node_idx.size(0)
        data.edge_index = torch.stack([row, col], dim=0)
        for key, item in self.data:
            if key in ("edge_index", "num_nodes"):
                continue
            if isinstance(item, Tensor) and item.size(0) == self.N:
                data[key] = item[node_idx]
            elif isinstance(item, Tensor) and item.size(0) == self.E:
                data[key] = item[edge_idx]
            else:
                data[key] = item
        if self.sample_coverage > 0:
            data.node_norm = self.node_norm[node_idx]
            data.edge_norm = self.edge_norm[edge_idx]
        return data

    def _compute_norm(self) -> tuple[Tensor, Tensor]:
        """PyG's estimate: sample until every node was drawn ``sample_coverage`` times on
        average; ``node_norm`` = samples / (count * N), ``edge_norm`` = count of the edge's
        source / count of the edge (1e4 at most; 0.1 for an edge never drawn)."""
        node_count = torch.zeros(self.N)
        edge_count = torch.zeros(self.E)
        num_samples = total_sampled_nodes = 0
        while total_sampled_nodes < self.N * self.sample_coverage:
            for _ in range(self.num_steps):
                node_idx, (_, _, edge_idx) = self[0]
                node_count[node_idx] += 1
                edge_count[edge_idx] += 1
                total_sampled_nodes += node_idx.numel()
            num_samples += self.num_steps
        source = torch.empty_like(edge_count).scatter_(0, self._edge_ids,
                                                       node_count[self._row])
        edge_norm = (source / edge_count).clamp_(0, 1e4)
        edge_norm[torch.isnan(edge_norm)] = 0.1
        node_count[node_count == 0] = 0.1
        return num_samples / node_count / self.N, edge_norm


class GraphSAINTNodeSampler(GraphSAINTSampler):
    """Nodes drawn as sources of uniformly drawn edges (probability by out-degree), as
    PyG's."""

    def _sample_nodes(self, batch_size: int) -> Tensor:
        edge_sample = torch.randint(0, self.E, (batch_size, self.batch_size), dtype=torch.long)
        return self._row[edge_sample]


class GraphSAINTEdgeSampler(GraphSAINTSampler):
    """``batch_size`` independent edge draws, ``u -> v`` in proportion to
    ``1 / in-degree(u) + 1 / out-degree(v)``, and their end nodes (see the module
    docstring for PyG's inverted weights)."""

    def _sample_nodes(self, batch_size: int) -> Tensor:
        in_degree = torch.bincount(self._col, minlength=self.N).clamp(min=1)
        out_degree = torch.bincount(self._row, minlength=self.N).clamp(min=1)
        prob = 1.0 / in_degree[self._row] + 1.0 / out_degree[self._col]
        # independent draws, as PyG's (one weighted draw per row of a [batch_size, E] key
        # matrix), without materialising batch_size x E random numbers
        edge_sample = torch.multinomial(prob, batch_size, replacement=True)
        return torch.cat([self._col[edge_sample], self._row[edge_sample]], -1)


class GraphSAINTRandomWalkSampler(GraphSAINTSampler):
    """Nodes of ``batch_size`` uniform random walks of ``walk_length`` steps along the
    edges from uniformly drawn roots, as PyG's."""

    _draws_edges = False

    def __init__(self, data, batch_size: int, walk_length: int, num_steps: int = 1,
                 sample_coverage: int = 0, save_dir: str | None = None, log: bool = True,
                 **kwargs):
        self.walk_length = check_int(walk_length, "walk_length", 0)
        self._graph = None  # built at the first walk, once the edges are checked
        super().__init__(data, batch_size, num_steps, sample_coverage, save_dir, log,
                         **kwargs)

    @property
    def _filename(self) -> str:
        return (f"{self.__class__.__name__.lower()}_{self.walk_length}_"
                f"{self.sample_coverage}.pt")

    def _sample_nodes(self, batch_size: int) -> Tensor:
        if self._graph is None:
            self._graph = Graph(self.data.edge_index, num_nodes=self.N)
        start = torch.randint(0, self.N, (batch_size,), dtype=torch.long)
        seed = int(torch.randint(0, 2**62, (), dtype=torch.long))
        walks = random_walk(self._graph, start, self.walk_length, seed=seed,
                            return_edges=False)
        return walks.nodes.view(-1)
