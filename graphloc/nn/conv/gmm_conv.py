"""The Gaussian mixture model convolution of Monti et al. (MoNet; PyG's ``GMMConv``): each
edge weighs K kernels of its pseudo-coordinates."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs, required_edge_feature_rows
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features,
    glorot,
    glorot_linear,
    mean_of_sums,
    split_widths,
    width_keeping_aggregation,
)

# PyG's: keeps a kernel of width 0 from dividing by 0
_EPS = 1e-15
# the aggregations edge_head_sum serves (linear in the messages)
_LINEAR_AGGREGATIONS = ("add", "sum", "mean")


class GMMConv(ConvModule):
    r"""The Gaussian mixture model convolution of `Monti et al., "Geometric Deep Learning on
    Graphs and Manifolds using Mixture Model CNNs" (CVPR 2017)
    <https://arxiv.org/abs/1611.08402>`_ (MoNet):

    .. math::
        \mathbf{x}'_i = \mathbf{\Theta} \mathbf{x}_i + \mathrm{aggr}_{j \in \mathcal{N}(i)}
        \sum_{k=1}^K w_k(\mathbf{e}_{j,i}) \odot \mathbf{G}_k \mathbf{x}_j, \quad
        w_k(\mathbf{e}) = \exp\left(-\tfrac{1}{2} \sum_d
        \frac{(e_d - \mu_{k,d})^2}{\epsilon + \sigma_{k,d}^2}\right)

    for ``D``-dimensional pseudo-coordinates ``e`` (``edge_attr``). A drop-in for PyG's
    ``GMMConv`` (same arguments, parameters ``g``, ``mu``, ``sigma``, ``bias`` and ``root``,
    PyG's initialisation and lazy width from one seed, and outputs).

    PyG gathers each edge's ``[K, out]`` block of ``x_j G`` and weighs it by the edge's K
    kernel values. Here, for a sum or a mean, each node's ``[K, out]`` block is weighed and
    summed per destination by ``ops.edge_head_sum`` (on the CPU its kernels run over the
    transpose: a source's block is read once, no ``[E, K, out]`` tensor forward or
    backward); the same products, summed in another order. With ``separate_gaussians``
    (a kernel per input and output channel) and for other aggregations, PyG's per-edge
    messages.

    Args:
        in_channels (int or (int, int)): input width, or the source and destination widths;
            -1 infers them at the first call.
        out_channels (int): output width.
        dim (int): the pseudo-coordinates' dimension ``D``.
        kernel_size (int): the number of kernels ``K``.
        separate_gaussians (bool, default False): one kernel per input and output channel.
        aggr (str or module, default "mean"): the aggregation of the messages ("add",
            "mean", "max", "min", or any that keeps the width, as ``SAGEConv``'s).
        root_weight (bool, default True): add ``root(x_dst)``.
        bias (bool, default True): add a bias.
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, in_channels]``, a static batch ``[B, N, in_channels]`` or a pair
        ``(x_src, x_dst)`` (``x_dst`` may be None: no root term); the graph (a ``Graph``,
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t`` whose values ``[E, D]`` are
        the pseudo-coordinates); ``edge_attr [E, dim]`` (``[E]`` for ``dim = 1``), else the
        sparse adjacency's or the Graph's own; optional ``size=(N_src, N_dst)``. output:
        ``[N_dst, out_channels]``.

    Differences from PyG's: ``root_weight=False`` works (PyG's forward reads the missing
    ``root`` and raises an ``AttributeError``); pseudo-coordinates of another dtype
    (integers, or float64 for a float32 layer) are taken in the parameters' dtype (PyG's
    promotes: float64 ones make its output float64); a call without pseudo-coordinates,
    or with another width than ``dim``, is a ``ValueError`` naming ``dim`` (PyG's fails in
    a ``view``); with ``aggr="max"`` or ``"min"``, tied messages send the gradient to one
    winner per channel (PyG's shares it). docs/models.md lists these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, dim: int,
                 kernel_size: int, separate_gaussians: bool = False, aggr="mean",
                 root_weight: bool = True, bias: bool = True, aggr_kwargs: dict | None = None,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("GMMConv", lazy=True, pair=True, in_channels=in_channels,
                    out_channels=out_channels)
        check_int(dim, "GMMConv: dim", 1)
        check_int(kernel_size, "GMMConv: kernel_size", 1)
        check_flags("GMMConv", separate_gaussians=separate_gaussians, root_weight=root_weight,
                    bias=bias)
        self.flow = check_flow("GMMConv", flow)
        self.in_channels, self.out_channels, self.dim = in_channels, out_channels, dim
        self.kernel_size, self.separate_gaussians = kernel_size, separate_gaussians
        self.root_weight = root_weight
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.aggr_module = width_keeping_aggregation(
            "GMMConv", aggr, aggr_kwargs, out_channels, "the output adds root(x_dst) and the bias")
        src_width, dst_width = split_widths(in_channels)
        self.rel_in_channels = src_width
        if src_width > 0:
            self.g = torch.nn.Parameter(torch.empty(src_width, out_channels * kernel_size))
            self.mu = torch.nn.Parameter(torch.empty(self._kernel_shape(src_width)))
            self.sigma = torch.nn.Parameter(torch.empty(self._kernel_shape(src_width)))
        else:  # drawn at the first call, as PyG's
            self.g = torch.nn.parameter.UninitializedParameter()
            self.mu = torch.nn.parameter.UninitializedParameter()
            self.sigma = torch.nn.parameter.UninitializedParameter()
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.root = glorot_linear(dst_width, out_channels) if root_weight else None
        self.reset_parameters()

    def _kernel_shape(self, src_width: int) -> tuple[int, ...]:
        if self.separate_gaussians:
            return (src_width, self.out_channels, self.kernel_size, self.dim)
        return (self.kernel_size, self.dim)

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        self.aggr_module.reset_parameters()
        if not isinstance(self.g, torch.nn.parameter.UninitializedParameter):
            for param in (self.g, self.mu, self.sigma):
                glorot(param)
        if self.root is not None:
            self.root.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        self._materialize(x_src)
        pseudo = required_edge_feature_rows(self, inputs, edge_attr, self.dim, "dim",
                                            "pseudo-coordinates")
        graph = inputs.graph.in_csr_order()
        pseudo = inputs.graph.to_csr_order(pseudo).to(self.mu.dtype)
        mask = explain_mask(self, inputs)  # a message is linear in its kernel values
        scale = None if mask is None else inputs.graph.to_csr_order(mask).unsqueeze(-1)
        if self.separate_gaussians:
            messages = self._separate_messages(graph, x_src, pseudo)
            out = self.aggr_module(aggregations.per_edge(graph),
                                   messages if scale is None else messages * scale)
        else:
            kernels = self._kernel_values(pseudo)
            out = self._mixture(graph, x_src, kernels if scale is None else kernels * scale)
        if x_dst is not None and self.root is not None:
            out = out + self.root(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    @torch.no_grad()
    def _materialize(self, x_src: Tensor) -> None:
        """A lazy layer's ``g``, ``mu`` and ``sigma`` from the first call's width, drawn in
        PyG's order (before the root map, which draws at its own first call)."""
        if not isinstance(self.g, torch.nn.parameter.UninitializedParameter):
            return
        width = x_src.size(-1)
        self.rel_in_channels = width
        self.g.materialize((width, self.out_channels * self.kernel_size))
        self.mu.materialize(self._kernel_shape(width))
        self.sigma.materialize(self._kernel_shape(width))
        for param in (self.g, self.mu, self.sigma):
            glorot(param)

    def _kernel_values(self, pseudo: Tensor) -> Tensor:
        """``w_k(e)`` per edge, ``[E, K]`` (PyG's formula)."""
        E, K, D = pseudo.size(0), self.kernel_size, self.dim
        scaled = -0.5 * (pseudo.view(E, 1, D) - self.mu.view(1, K, D)).pow(2)
        scaled = scaled / (_EPS + self.sigma.view(1, K, D).pow(2))
        return torch.exp(scaled.sum(dim=-1))

    def _mixture(self, graph, x_src: Tensor, kernels: Tensor) -> Tensor:
        """``aggr_j sum_k w_k(e_ji) (x_j G)_k``: each node's ``[K, out]`` blocks of ``x G``
        weighed per edge, summed per destination (a mean divides by the in-degree)."""
        blocks = (x_src @ self.g).view(-1, self.kernel_size, self.out_channels)
        if isinstance(self.aggr, str) and self.aggr in _LINEAR_AGGREGATIONS:
            out = ops.edge_head_sum(graph, kernels, blocks)
            if self.aggr == "mean":
                out = mean_of_sums(graph, out)
            return out
        messages = (blocks.index_select(0, graph.csr.indices.long())
                    * kernels.unsqueeze(-1)).sum(dim=-2)
        return self.aggr_module(aggregations.per_edge(graph), messages)

    def _separate_messages(self, graph, x_src: Tensor, pseudo: Tensor) -> Tensor:
        """PyG's messages with a kernel per input and output channel, ``[E, out]``."""
        F, M = self.rel_in_channels, self.out_channels
        E, K, D = pseudo.size(0), self.kernel_size, self.dim
        scaled = -0.5 * (pseudo.view(E, 1, 1, 1, D) - self.mu.view(1, F, M, K, D)).pow(2)
        scaled = scaled / (_EPS + self.sigma.view(1, F, M, K, D).pow(2))
        weights = (torch.exp(scaled.sum(dim=-1)) * self.g.view(1, F, M, K)).sum(dim=-1)
        x_j = x_src.index_select(0, graph.csr.indices.long())
        return (x_j.view(E, F, 1) * weights).sum(dim=-2)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"dim={self.dim})")
