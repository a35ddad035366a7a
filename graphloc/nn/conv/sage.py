"""GraphSAGE convolution."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.nn.conv._utils import as_graph, check_sizes, node_pair, split_widths


class SAGEConv(torch.nn.Module):
    r"""The GraphSAGE operator of `Hamilton et al., "Inductive Representation Learning on
    Large Graphs" (NeurIPS 2017) <https://arxiv.org/abs/1706.02216>`_:

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2 \cdot
        \mathrm{aggr}_{j \in \mathcal{N}(i)} \mathbf{x}_j

    A drop-in for PyG's ``SAGEConv`` (``lin_l`` acts on the aggregate and carries the bias,
    ``lin_r`` on the root); the aggregation is one fused sparse reduce.

    Args:
        in_channels (int or (int, int)): input feature width, or the source and destination
            widths of a bipartite input.
        out_channels (int): output feature width.
        aggr (str, default "mean"): "mean", "max" or "sum" (alias "add"); nodes without
            neighbours aggregate to 0.
        normalize (bool, default False): L2-normalise the output rows.
        root_weight (bool, default True): add the root term :math:`\mathbf{W}_1 \mathbf{x}_i`.
        bias (bool, default True): bias of ``lin_l``.

    Shapes:
        input: ``[N, in_channels]`` or a pair ``(x_src [N_src, F_src], x_dst [N_dst, F_dst])``
        (aggregated over ``x_src``, root term from ``x_dst``), and a ``Graph`` or
        ``edge_index [2, E]``. output: ``[N, out_channels]`` (``[N_dst, out_channels]``).
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr: str = "mean",
                 normalize: bool = False, root_weight: bool = True, bias: bool = True):
        super().__init__()
        check_sizes("SAGEConv", in_channels=in_channels, out_channels=out_channels)
        if aggr not in ("mean", "max", "sum", "add"):
            raise ValueError(f"SAGEConv aggr must be 'mean', 'max' or 'sum', got {aggr!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr, self.normalize, self.root_weight = aggr, normalize, root_weight
        src_width, dst_width = split_widths(in_channels)
        self.lin_l = torch.nn.Linear(src_width, out_channels, bias=bias)
        self.lin_r = torch.nn.Linear(dst_width, out_channels, bias=False) if root_weight \
            else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_l.reset_parameters()
        if self.lin_r is not None:
            self.lin_r.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor], graph) -> Tensor:
        x_src, x_dst = node_pair(self, x, self.in_channels)
        graph = as_graph(graph, x)
        out = self.lin_l(ops.spmm(graph, x_src, reduce=self.aggr))
        if self.lin_r is not None:  # accumulated in place: one [N, out] tensor, not three
            out = out.addmm_(x_dst, self.lin_r.weight.t())
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"aggr={self.aggr})")
