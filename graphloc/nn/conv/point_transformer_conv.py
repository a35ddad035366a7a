"""The Point Transformer layer of Zhao et al. (PyG's ``PointTransformerConv``): vector
attention over each point's neighbours, with a learnt encoding of their offsets."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs, require_destination
from graphloc.nn.conv._utils import check_input, check_networks, check_sizes, linear, reset_like_pyg
from graphloc.nn.conv.gat import fresh_self_loops, mask_in_csr_order


class PointTransformerConv(ConvModule):
    r"""The Point Transformer layer of `Zhao et al., "Point Transformer" (ICCV 2021)
    <https://arxiv.org/abs/2012.09164>`_, as PyG's ``PointTransformerConv``:

    .. math::
        \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i) \cup \{i\}} \rho\big(\gamma(
        \mathbf{W}_3 \mathbf{x}_i - \mathbf{W}_2 \mathbf{x}_j + \delta_{ij})\big) \odot
        (\mathbf{W}_1 \mathbf{x}_j + \delta_{ij}), \qquad
        \delta_{ij} = h_{\Theta}(\mathbf{p}_i - \mathbf{p}_j),

    ``rho`` a softmax over each point's neighbours for every channel apart, ``gamma`` the
    ``attn_nn`` (identity without one), ``h`` the ``pos_nn`` (a ``Linear(3, out)`` by
    default), ``W_1``, ``W_2``, ``W_3`` the bias-free ``lin``, ``lin_src``, ``lin_dst``.

    A drop-in for PyG's ``PointTransformerConv``: the same arguments, parameters in PyG's
    layout and initial draws (a seed gives its weights), outputs and gradients. The offset
    encodings ``delta`` run per edge, as PyG's (its networks are the caller's); PyG then
    gathers both ends' projections, the scores, their softmax and the messages as further
    ``[E, C]`` tensors. Here the score is one ``[E, C]`` tensor, its softmax is one kernel
    over each point's edges, and the sum splits into ``W_1 x_j`` weighed per channel by
    one ``spmm`` (no gathered rows) and the weighted ``delta`` reduced per point.

    Args:
        in_channels (int or tuple): input width, or (source, destination) widths; -1 for
            PyG's lazy width.
        out_channels (int): output width, C.
        pos_nn (torch.nn.Module, optional): the offset encoding ``h`` (``Linear(3, C)``).
        attn_nn (torch.nn.Module, optional): the score network ``gamma``.
        add_self_loops (bool, default True): replace self-loops by one loop per point.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, F]`` or a pair ``(x_src, x_dst)``; ``pos [N, 3]`` or a pair; the
        graph (``edge_index [2, E]``, a ``Graph`` or a ``torch.sparse`` ``adj_t``, its
        pattern). output: ``[N_dst, C]``.

    Differences from PyG's: the sum of ``alpha (W_1 x_j + delta)`` is taken as two sums
    (the same to rounding); a point whose scores in a channel are all -inf gets weights 0
    there (PyG's: NaN), as in ``GATConv``; a pair ``(x_src, None)`` is a ``ValueError``
    naming it (PyG's fails in its ``Linear``). docs/models.md lists these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 pos_nn: torch.nn.Module | None = None, attn_nn: torch.nn.Module | None = None,
                 add_self_loops: bool = True, flow: str = "source_to_target"):
        super().__init__()
        check_sizes("PointTransformerConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels)
        check_networks("PointTransformerConv", pos_nn=pos_nn, attn_nn=attn_nn)
        check_flags("PointTransformerConv", add_self_loops=add_self_loops)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.add_self_loops = add_self_loops
        self.flow = check_flow("PointTransformerConv", flow)
        widths = in_channels if isinstance(in_channels, (tuple, list)) else \
            (in_channels, in_channels)
        # PyG's modules in its order: each draws its weights when built, as PyG's
        self.pos_nn = pos_nn if pos_nn is not None else torch.nn.Linear(3, out_channels)
        self.attn_nn = attn_nn
        self.lin = linear(widths[0], out_channels, bias=False)
        self.lin_src = linear(widths[0], out_channels, bias=False)
        self.lin_dst = linear(widths[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation, in its order (the same draws for a seed)."""
        reset_like_pyg(self.pos_nn)
        if self.attn_nn is not None:
            reset_like_pyg(self.attn_nn)
        for lin in (self.lin, self.lin_src, self.lin_dst):
            if not isinstance(lin.weight, torch.nn.parameter.UninitializedParameter):
                lin.reset_parameters()

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple, pos: Tensor | tuple, edge_index) -> Tensor:
        inputs = read_inputs(self, x, edge_index)
        x_src, x_dst = inputs.x_src, inputs.x_dst
        require_destination(self, x_dst, "the scores read W_3 x_i")
        check_input(self, x_src, None)
        check_input(self, x_dst, None, "x_dst")
        pos_src, pos_dst = self._positions(pos, inputs)
        graph = fresh_self_loops(inputs.graph) if self.add_self_loops else inputs.graph
        graph = graph.in_csr_order()  # (the edges in CSR order: a reduction per point)
        # p_i - p_j and W_3 x_i - W_2 x_j per edge, each one kernel (a + (-b) is a - b
        # exactly): no gathered rows, and gradients reduced per point without atomics
        delta = self.pos_nn(ops.sddmm(graph, -pos_src, pos_dst, op="add"))
        score = ops.sddmm(graph, -self.lin_src(x_src), self.lin_dst(x_dst), op="add") + delta
        if self.attn_nn is not None:
            score = self.attn_nn(score)
        alpha = ops.segment_softmax(graph, score)  # a softmax per channel
        mask = explain_mask(self, inputs)
        if mask is not None:  # each edge's message alpha (values_j + delta) scaled
            alpha = alpha * mask_in_csr_order(inputs, mask, self.add_self_loops).unsqueeze(-1)
        values = self.lin(x_src)
        out = ops.spmm(graph, values.unsqueeze(-1), alpha).squeeze(-1) + \
            ops.segment_reduce(alpha * delta, graph.csr.indptr, "sum")
        return inputs.node_output(out)

    def _positions(self, pos, inputs) -> tuple[Tensor, Tensor]:
        """``(pos_src, pos_dst)``: a pair, or one tensor for both ends, each with its end's
        point count and one width."""
        if inputs.batch is not None:
            raise ValueError("PointTransformerConv takes x [N, F]; call it on each point set "
                             "of a static batch")
        pos_src, pos_dst = pos if isinstance(pos, (tuple, list)) else (pos, pos)
        for name, p, rows in (("pos", pos_src, inputs.x_src.size(0)),
                              ("pos_dst", pos_dst, inputs.x_dst.size(0))):
            check_input(self, p, None, name)
            if p.size(0) != rows:
                raise ValueError(f"PointTransformerConv: {name} has {p.size(0)} rows but x "
                                 f"has {rows} points at that end")
        if pos_src.size(1) != pos_dst.size(1):
            raise ValueError(f"PointTransformerConv: pos has {pos_src.size(1)} coordinates "
                             f"at the sources but {pos_dst.size(1)} at the destinations")
        return pos_src, pos_dst

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
