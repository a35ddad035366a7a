"""The signed graph convolution of Derr et al. (SGCN; PyG's ``SignedConv``): balanced and
unbalanced features aggregated over positive and negative edges."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice, check_flags
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._inputs import check_flow, read_inputs
from graphloc.nn.conv._utils import PYG_REDUCTIONS, check_sizes, checked_features_with_root


class SignedConv(ConvModule):
    r"""The signed graph convolution of `Derr et al., "Signed Graph Convolutional Network"
    (ICDM 2018) <https://arxiv.org/abs/1808.06354>`_. The first layer
    (``first_aggr=True``):

    .. math::
        \mathbf{x}^{(\textrm{pos})}_i = \mathbf{\Theta}^{(\textrm{pos})}_l
        \operatorname{mean}_{j \in \mathcal{N}^{+}(i)} \mathbf{x}_j +
        \mathbf{\Theta}^{(\textrm{pos})}_r \mathbf{x}_i, \qquad
        \mathbf{x}^{(\textrm{neg})}_i = \mathbf{\Theta}^{(\textrm{neg})}_l
        \operatorname{mean}_{j \in \mathcal{N}^{-}(i)} \mathbf{x}_j +
        \mathbf{\Theta}^{(\textrm{neg})}_r \mathbf{x}_i,

    the output ``[x_pos, x_neg]``. A later layer reads such an input (``in_channels`` per
    half) and aggregates each half over the edges that keep or flip its balance: the
    balanced half from the positive neighbours' balanced and the negative neighbours'
    unbalanced halves, the unbalanced half the other way round. A drop-in for PyG's
    ``SignedConv`` (same arguments, parameters ``lin_pos_l``, ``lin_pos_r``, ``lin_neg_l``,
    ``lin_neg_r``, PyG's initialisation from one seed, and outputs). PyG propagates four
    ``[E, F]`` message tensors in a later layer; here one ``spmm`` per edge sign aggregates
    both halves at once.

    Args:
        in_channels (int): input width (per half when ``first_aggr`` is False).
        out_channels (int): output width per half (the output has ``2 * out_channels``).
        first_aggr (bool): the first layer's aggregation, else a later layer's.
        bias (bool, default True): biases in the root maps.
        aggr (str, default "mean"): "mean", "add", "sum", "max" or "min".
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, F]`` (``[N, 2 F]`` for a later layer), a static batch or a pair
        ``(x_src, x_dst)``; ``pos_edge_index`` and ``neg_edge_index`` (each a ``Graph``,
        ``edge_index [2, E]`` or ``torch.sparse`` ``adj_t``, its pattern). output:
        ``[N_dst, 2 * out_channels]``.

    Differences from PyG's: a pair ``(x_src, None)`` is a ``ValueError`` (the root maps read
    ``x_dst``; PyG's fails in a Linear); with ``aggr="max"`` or ``"min"``, tied messages
    send the gradient to one winner per channel (PyG's shares it). docs/models.md lists
    these.
    """

    def __init__(self, in_channels: int, out_channels: int, first_aggr: bool,
                 bias: bool = True, aggr: str = "mean", flow: str = "source_to_target"):
        super().__init__()
        check_sizes("SignedConv", in_channels=in_channels, out_channels=out_channels)
        check_flags("SignedConv", first_aggr=first_aggr, bias=bias)
        check_choice("SignedConv", "aggr", aggr, tuple(PYG_REDUCTIONS))
        self.flow = check_flow("SignedConv", flow)
        self.in_channels, self.out_channels, self.first_aggr = in_channels, out_channels, \
            first_aggr
        self.aggr = aggr
        aggregated = in_channels if first_aggr else 2 * in_channels
        # PyG's Linears (torch's initialisation, drawn at construction in this order)
        self.lin_pos_l = torch.nn.Linear(aggregated, out_channels, bias=False)
        self.lin_pos_r = torch.nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_neg_l = torch.nn.Linear(aggregated, out_channels, bias=False)
        self.lin_neg_r = torch.nn.Linear(in_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        for lin in (self.lin_pos_l, self.lin_pos_r, self.lin_neg_l, self.lin_neg_r):
            lin.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor], pos_edge_index,
                neg_edge_index) -> Tensor:
        positive = self._read(x, pos_edge_index, "pos_edge_index")
        negative = self._read(x, neg_edge_index, "neg_edge_index")
        width = self.in_channels if self.first_aggr else 2 * self.in_channels
        x_src, x_dst = checked_features_with_root(self, positive, width, "its root maps")
        reduce = PYG_REDUCTIONS[self.aggr]
        at_pos = ops.spmm(positive.graph, x_src, reduce=reduce)
        at_neg = ops.spmm(negative.graph, negative.x_src, reduce=reduce)
        if self.first_aggr:
            out_pos = self.lin_pos_l(at_pos) + self.lin_pos_r(x_dst)
            out_neg = self.lin_neg_l(at_neg) + self.lin_neg_r(x_dst)
        else:  # each half: [balanced, unbalanced] of the positive and negative neighbours
            F = self.in_channels
            out_pos = self.lin_pos_l(torch.cat([at_pos[:, :F], at_neg[:, F:]], dim=-1)) + \
                self.lin_pos_r(x_dst[:, :F])
            out_neg = self.lin_neg_l(torch.cat([at_pos[:, F:], at_neg[:, :F]], dim=-1)) + \
                self.lin_neg_r(x_dst[:, F:])
        return positive.node_output(torch.cat([out_pos, out_neg], dim=-1))

    def _read(self, x, edges, name: str):
        """``read_inputs`` of one sign's graph, its errors naming that argument (both are
        edge lists, which its own messages call ``edge_index``); an error of the features
        themselves is raised as it is."""
        try:
            return read_inputs(self, x, edges)
        except (TypeError, ValueError) as err:
            if not self._reads_alone(x):
                raise
            raise type(err)(f"{name}: {err}") from None

    def _reads_alone(self, x) -> bool:
        """Whether the features ``x`` are read on an edgeless graph (their own checks)."""
        first = x[0] if isinstance(x, (tuple, list)) and x else x
        device = first.device if isinstance(first, Tensor) else None
        try:
            read_inputs(self, x, torch.empty(2, 0, dtype=torch.long, device=device))
            return True
        except (TypeError, ValueError):
            return False

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"first_aggr={self.first_aggr})")
