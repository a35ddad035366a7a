"""PyG's ``HGTLoader`` and ``HGTSampler`` without torch-sparse (PyG 2.8 samples HGT's
mini-batches only through ``torch_sparse.hgt_sample``, which does not install here).

HGT's budget sampling (Hu et al., WWW 2020, Algorithm 1), as torch-sparse does it: every
sampled node adds, to each of its in-neighbours not yet sampled, 1 / its in-degree (a row of
more than 50 entries adds 1/50 to 50 of them drawn without replacement); at each hop, each
node type draws ``num_samples[type][hop]`` of its budget's nodes without replacement with
probability proportional to the squared budget (all of them when the budget holds fewer),
and the drawn nodes leave the budget. The batch holds every edge between sampled nodes.

Differences from torch-sparse, by design: the batch's edges are all the edges between the
sampled nodes (torch-sparse keeps 50 drawn entries of a larger row, and reports those edges
with the ids of the row's first 50 entries: wrong edge ids, so wrong edge features, for every
node of in-degree above 50); the draws use torch's default generator (``torch.manual_seed``
repeats a run) and nodes enter in node-type and draw order (torch-sparse walks hash maps,
whose order is unspecified).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.loader import HGTLoader as _PyGHGTLoader
from torch_geometric.loader.node_loader import NodeLoader
from torch_geometric.sampler import HeteroSamplerOutput
from torch_geometric.sampler import HGTSampler as _PyGHGTSampler
from torch_geometric.sampler.utils import to_hetero_csc

from graphloc.checks import check_flags
from graphloc.loader.pyg import _check_edges
from graphloc.loader.rows import packed_rows

MAX_NEIGHBORS = 50  # torch-sparse's cap on the entries a large row adds to the budget


class HGTSampler(_PyGHGTSampler):
    """PyG's ``HGTSampler`` (same arguments) drawing without torch-sparse."""

    def __init__(self, data, num_samples, is_sorted: bool = False, share_memory: bool = False):
        if isinstance(data, (Data, tuple)):
            raise NotImplementedError(f"{self.__class__.__name__} does not support a data "
                                      f"object of type {type(data)}.")  # PyG's own refusal
        check_flags("HGTSampler", is_sorted=is_sorted, share_memory=share_memory)
        _check_edges(data)
        if isinstance(num_samples, (list, tuple)):
            num_samples = {key: list(num_samples) for key in data.node_types}
        self.node_types, self.edge_types = data.metadata()
        missing = [t for t in self.node_types if t not in num_samples]
        if missing:
            raise ValueError(f"num_samples has no entry for node type(s) {missing}")
        for t, counts in num_samples.items():
            if not isinstance(counts, (list, tuple)) or any(
                    isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
                raise ValueError(f"num_samples[{t!r}] must be a list of integers >= 0, got "
                                 f"{counts!r}")
        self.num_samples = num_samples
        self.num_hops = max(len(v) for v in num_samples.values())
        self.num_nodes = {t: data[t].num_nodes for t in self.node_types}
        colptr, row, self.perm = to_hetero_csc(data, device="cpu", share_memory=share_memory,
                                               is_sorted=is_sorted)
        self.csc = {k: (colptr[k].long(), row[k].long()) for k in self.edge_types}

    def _in_edges(self, edge_type, nodes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The in-edges of ``nodes``, their rows packed one after another: each entry's CSC
        position and index into ``nodes``, and the packed rows' pointer."""
        return packed_rows(self.csc[edge_type][0], nodes)

    def _grow_budget(self, budget, seen, node_type, samples: Tensor) -> None:
        """Adds the in-neighbours of new ``samples`` (of ``node_type``) to the budgets."""
        for edge_type in self.edge_types:
            if edge_type[2] != node_type or samples.numel() == 0:
                continue
            pos, owner, offsets = self._in_edges(edge_type, samples)
            degree = offsets.diff()[owner]
            large = degree > MAX_NEIGHBORS
            if bool(large.any()):  # MAX_NEIGHBORS of a large row, without replacement
                # sorted by owner, a large row's entries in random order within it
                key = owner.double() + torch.where(large, torch.rand(owner.numel(),
                                                                     dtype=torch.float64), 0.0)
                rank = torch.empty_like(owner)
                rank[torch.sort(key).indices] = torch.arange(owner.numel())
                keep = ~large | (rank - offsets[owner] < MAX_NEIGHBORS)
                pos, degree = pos[keep], degree[keep].clamp(max=MAX_NEIGHBORS)
            source = self.csc[edge_type][1][pos]
            fresh = ~seen[edge_type[0]][source]
            budget[edge_type[0]].index_add_(0, source[fresh],
                                            1.0 / degree[fresh].to(torch.float64))

    def sample_from_nodes(self, inputs) -> HeteroSamplerOutput:
        budget = {t: torch.zeros(n, dtype=torch.float64) for t, n in self.num_nodes.items()}
        seen = {t: torch.zeros(n, dtype=torch.bool) for t, n in self.num_nodes.items()}
        nodes = {t: [] for t in self.node_types}
        seed = inputs.node.long()
        if seed.numel() and not (0 <= int(seed.min()) and int(seed.max()) <
                                 self.num_nodes[inputs.input_type]):
            raise ValueError(f"input nodes of type {inputs.input_type!r} must lie in "
                             f"[0, {self.num_nodes[inputs.input_type]}), got "
                             f"{int(seed.min())}..{int(seed.max())}")
        nodes[inputs.input_type].append(seed)
        seen[inputs.input_type][seed] = True
        self._grow_budget(budget, seen, inputs.input_type, seed)
        for hop in range(self.num_hops):
            drawn = {}
            for t in self.node_types:
                counts = self.num_samples[t]
                drawn[t] = _draw(budget[t], counts[hop] if hop < len(counts) else 0)
                nodes[t].append(drawn[t])
                seen[t][drawn[t]] = True
                budget[t][drawn[t]] = 0
            if hop < self.num_hops - 1:
                for t in self.node_types:
                    self._grow_budget(budget, seen, t, drawn[t])
        node = {t: torch.cat(parts) if parts else torch.empty(0, dtype=torch.long)
                for t, parts in nodes.items()}
        row, col, edge = self._induced_edges(node)
        return HeteroSamplerOutput(node=node, row=row, col=col, edge=edge, batch=None,
                                   metadata=(inputs.input_id, inputs.time))

    def _induced_edges(self, node: dict) -> tuple[dict, dict, dict]:
        """Every edge between sampled nodes: (source row, destination row, CSC position)."""
        row, col, edge = {}, {}, {}
        for edge_type in self.edge_types:
            src, dst = edge_type[0], edge_type[2]
            local = torch.full((self.num_nodes[src],), -1, dtype=torch.long)
            local[node[src]] = torch.arange(node[src].numel())
            pos, owner, _ = self._in_edges(edge_type, node[dst])
            source = local[self.csc[edge_type][1][pos]]
            keep = source >= 0
            row[edge_type], col[edge_type], edge[edge_type] = source[keep], owner[keep], pos[keep]
        return row, col, edge


def _draw(budget: Tensor, count: int) -> Tensor:
    """``count`` nodes of the budget without replacement, with probability proportional to
    the squared budget (all of them, in id order, when it holds no more)."""
    candidates = budget.nonzero().flatten()
    if count <= 0 or candidates.numel() == 0:
        return candidates[:0]
    if count >= candidates.numel():
        return candidates
    return candidates[torch.multinomial(budget[candidates] ** 2, count)]


class HGTLoader(_PyGHGTLoader):
    """PyG's ``HGTLoader`` (same arguments and batches) on graphloc's ``HGTSampler``."""

    def __init__(self, data, num_samples, input_nodes, is_sorted=False, transform=None,
                 transform_sampler_output=None, filter_per_worker=None, **kwargs):
        sampler = HGTSampler(data, num_samples=num_samples, is_sorted=is_sorted,
                             share_memory=kwargs.get("num_workers", 0) > 0)
        NodeLoader.__init__(self, data=data, node_sampler=sampler, input_nodes=input_nodes,
                            transform=transform,
                            transform_sampler_output=transform_sampler_output,
                            filter_per_worker=filter_per_worker, **kwargs)
