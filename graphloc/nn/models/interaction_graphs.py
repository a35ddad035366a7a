"""The graphs that PyG's molecular models build inside their forward from atom positions,
on graphloc's radius search: PyG's ``radius_graph`` needs pyg-lib (PyG 2.8), so its
``SchNet`` and ``ViSNet`` fail without it ("'radius_graph' requires 'pyg-lib>=0.6.0'"),
converted convs or not. ``from_pyg`` puts these in place of PyG's modules of the same
names, so the converted models run.

Where an atom has more than ``max_num_neighbors`` atoms within the cutoff, graphloc keeps
the nearest (PyG's CPU search keeps the ones its tree meets first): the graphs are the same
whenever no atom has more, their edges possibly in another order.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.checks import check_flags, check_int, check_number
from graphloc.ops.neighbours import radius_graph


def _check_positions(owner: str, pos: Tensor) -> None:
    if not isinstance(pos, Tensor) or not pos.is_floating_point() or pos.dim() != 2:
        raise ValueError(f"{owner}: pos must be floating-point atom coordinates [N, D], got "
                         f"{getattr(pos, 'dtype', type(pos).__name__)} "
                         f"{list(getattr(pos, 'shape', []))}")


def _checked_cutoff(owner: str, cutoff) -> float:
    check_number(owner, "cutoff", cutoff)
    if not cutoff > 0:
        raise ValueError(f"{owner}: cutoff must be > 0, got {cutoff!r}")
    return float(cutoff)


class RadiusInteractionGraph(torch.nn.Module):
    """PyG's ``torch_geometric.nn.models.schnet.RadiusInteractionGraph``: the edges j -> i
    between atoms of one molecule (``batch``) closer than ``cutoff``, at most
    ``max_num_neighbors`` into each atom, and each edge's length."""

    def __init__(self, cutoff: float = 10.0, max_num_neighbors: int = 32):
        super().__init__()
        self.cutoff = _checked_cutoff("RadiusInteractionGraph", cutoff)
        check_int(max_num_neighbors, "RadiusInteractionGraph: max_num_neighbors", 1)
        self.max_num_neighbors = max_num_neighbors

    def forward(self, pos: Tensor, batch: Tensor) -> tuple[Tensor, Tensor]:
        _check_positions("RadiusInteractionGraph", pos)
        edge_index = radius_graph(pos, self.cutoff, batch,
                                  max_num_neighbors=self.max_num_neighbors)
        source, target = edge_index
        return edge_index, torch.linalg.vector_norm(pos[source] - pos[target], dim=-1)


class Distance(torch.nn.Module):
    """PyG's ``torch_geometric.nn.models.visnet.Distance``: the edges of
    :class:`RadiusInteractionGraph` (with each atom's loop when ``add_self_loops``), their
    lengths (a loop's 0) and their vectors ``pos[source] - pos[target]``."""

    def __init__(self, cutoff: float, max_num_neighbors: int = 32,
                 add_self_loops: bool = True):
        super().__init__()
        self.cutoff = _checked_cutoff("Distance", cutoff)
        check_int(max_num_neighbors, "Distance: max_num_neighbors", 1)
        check_flags("Distance", add_self_loops=add_self_loops)
        self.max_num_neighbors, self.add_self_loops = max_num_neighbors, add_self_loops

    def forward(self, pos: Tensor, batch: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        _check_positions("Distance", pos)
        edge_index = radius_graph(pos, self.cutoff, batch, loop=self.add_self_loops,
                                  max_num_neighbors=self.max_num_neighbors)
        vectors = pos[edge_index[0]] - pos[edge_index[1]]
        lengths = torch.zeros(vectors.size(0), dtype=pos.dtype, device=pos.device)
        # loops stay out of the norm, as in PyG: their length is 0 and no gradient flows
        apart = edge_index[0] != edge_index[1]
        lengths[apart] = torch.linalg.vector_norm(vectors[apart], dim=-1)
        return edge_index, lengths, vectors
