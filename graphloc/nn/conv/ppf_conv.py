"""The PPFNet layer of Deng et al. (PyG's ``PPFConv``): a network on each edge's source
features and point pair features (the offset's length and three angles between the
offset and the normals), aggregated at the destination, then a global network."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.nn.conv._inputs import read_inputs
from graphloc.nn.conv._utils import (
    check_first_linear,
    check_input,
    first_linear,
    may_regroup_first_linear,
)
from graphloc.nn.conv.gat import fresh_self_loops
from graphloc.nn.conv.point_conv import PointNetConv


class PPFConv(PointNetConv):
    r"""The PPFNet operator of `Deng et al., "PPFNet: Global Context Aware Local Features
    for Robust 3D Point Matching" (CVPR 2018) <https://arxiv.org/abs/1802.02669>`_:

    .. math::
        \mathbf{x}'_i = \gamma_{\mathbf{\Theta}} \Big( \max_{j \in \mathcal{N}(i) \cup
        \{i\}} h_{\mathbf{\Theta}} \big( \mathbf{x}_j, \Vert \mathbf{d}_{ji} \Vert,
        \angle(\mathbf{n}_i, \mathbf{d}_{ji}), \angle(\mathbf{n}_j, \mathbf{d}_{ji}),
        \angle(\mathbf{n}_i, \mathbf{n}_j) \big) \Big), \qquad \mathbf{d}_{ji} =
        \mathbf{p}_j - \mathbf{p}_i

    (``local_nn`` h, ``global_nn`` gamma; the aggregation max by default; without
    features ``x`` the messages read the point pair features alone). A drop-in for PyG's
    ``PPFConv`` (same arguments and outputs). Where ``local_nn`` starts with a
    ``torch.nn.Linear`` (alone or first in a ``torch.nn.Sequential``), its product with the
    source features is taken per node, ``W_x x_j`` gathered per edge and added to
    ``W_f f_{ji} + b`` of the 4 point pair features, instead of an ``[E, F + 4]``
    concatenation and product. PyG's per-edge inputs under ``torch.autocast``,
    ``torch.compile`` or ``torch.func`` and where that Linear has hooks. The rest of
    ``local_nn`` runs per edge, as PyG's.

    Args: ``local_nn``, ``global_nn``, ``add_self_loops``, ``aggr`` and ``flow``, as
    :class:`PointNetConv`'s.

    Shapes:
        input: ``x [N, F]`` or None, or a pair ``(x_src, x_dst)`` (only ``x_src`` is
        read); ``pos [N, 3]`` and ``normal [N, 3]``, or pairs of them; the graph (a
        ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, its pattern).
        output: ``[N_dst, C]``.

    It shares PointNetConv's arguments, networks and checks; only the edge inputs differ.

    Differences from PyG's: with ``aggr="max"`` or ``"min"``, tied messages send the
    gradient to one winner per channel (PyG's shares it); positions, normals or features
    of another row count than the graph's nodes, or a first Linear of another width than
    ``F + 4``, are a ``ValueError`` naming them. docs/models.md lists these.
    """

    def forward(self, x: Tensor | tuple | None, pos: Tensor | tuple[Tensor, Tensor],
                normal: Tensor | tuple[Tensor, Tensor], edge_index) -> Tensor:
        inputs = read_inputs(self, pos, edge_index)
        pos_src, pos_dst = inputs.x_src, inputs.x_dst
        if pos_dst is None:
            raise ValueError("PPFConv: the messages read pos_i, so a pair (pos_src, None) has "
                             "no destination positions; pass (pos_src, pos_dst)")
        normal_src, normal_dst = normal if isinstance(normal, (tuple, list)) else \
            (normal, normal)
        for name, t, rows in (("pos", pos_src, inputs.graph.num_src_nodes),
                              ("pos_dst", pos_dst, inputs.graph.num_nodes),
                              ("normal", normal_src, inputs.graph.num_src_nodes),
                              ("normal_dst", normal_dst, inputs.graph.num_nodes)):
            check_input(self, t, 3, name)
            if t.size(0) != rows:
                raise ValueError(f"PPFConv: {name} has {t.size(0)} rows but the graph has "
                                 f"{rows} nodes there")
        x_src = self._features(x, inputs)
        graph = fresh_self_loops(inputs.graph) if self.add_self_loops else inputs.graph
        graph = graph.in_csr_order()
        src, dst = graph.csr.indices.long(), graph.edge_index[1]
        pairs = point_pair_features(pos_dst.index_select(0, dst), pos_src.index_select(0, src),
                                    normal_dst.index_select(0, dst),
                                    normal_src.index_select(0, src))
        messages = self._pair_messages(x_src, pairs, src)
        return self._reduce(inputs, graph, messages)

    def _pair_messages(self, x_src: Tensor | None, pairs: Tensor, src: Tensor) -> Tensor:
        """``local_nn([x_j, f_ji])`` per edge (CSR order), the first Linear's product with
        ``x`` per node where it may be."""
        first, rest = (None, None) if self.local_nn is None else first_linear(self.local_nn)
        if self.local_nn is not None:
            width = 4 + (0 if x_src is None else x_src.size(1))
            check_first_linear(self, self.local_nn, width,
                               f"each edge's [x_j, point pair features] has {width} features")
        if first is None or x_src is None or not may_regroup_first_linear(first, x_src, pairs):
            inputs = pairs if x_src is None else torch.cat([x_src.index_select(0, src), pairs],
                                                           dim=1)
            return inputs if self.local_nn is None else self.local_nn(inputs)
        w_x, w_f = first.weight.split([x_src.size(1), 4], dim=1)
        # (finite features only, may_regroup_first_linear: a NaN of a point no edge reads
        # takes PyG's per-edge path, which never multiplies it by a zero gradient)
        out = (x_src @ w_x.t()).index_select(0, src) + pairs @ w_f.t()
        return rest(out if first.bias is None else out + first.bias)


def point_pair_features(pos_i: Tensor, pos_j: Tensor, normal_i: Tensor,
                        normal_j: Tensor) -> Tensor:
    """``[|d|, angle(n_i, d), angle(n_j, d), angle(n_i, n_j)]`` per row, ``d = pos_j -
    pos_i`` (PyG's ``point_pair_features``; angles by ``atan2(|a x b|, a . b)``)."""
    offset = pos_j - pos_i
    return torch.stack([offset.norm(p=2, dim=1), _angle(normal_i, offset),
                        _angle(normal_j, offset), _angle(normal_i, normal_j)], dim=1)


def _angle(a: Tensor, b: Tensor) -> Tensor:
    return torch.atan2(torch.linalg.cross(a, b, dim=1).norm(p=2, dim=1), (a * b).sum(dim=1))
