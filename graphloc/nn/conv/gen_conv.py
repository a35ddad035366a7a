"""GENConv: the generalized graph convolution of DeeperGCN (Li et al. 2020), as PyG's."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_flags, check_number, keyword_arguments
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_messages
from graphloc.nn.conv._inputs import (
    check_flow,
    edge_features_from,
    read_inputs,
    relu_edge_messages,
)
from graphloc.nn.conv._utils import (
    check_sizes,
    checked_features,
    linear,
    reset_like_pyg,
    split_widths,
)

# the norms of GENConv's MLP, as PyG builds them
_NORMS = {"batch": lambda width: torch.nn.BatchNorm1d(width, affine=True),
          "layer": lambda width: torch.nn.LayerNorm(width, elementwise_affine=True),
          "instance": lambda width: torch.nn.InstanceNorm1d(width, affine=False)}


class GENConv(ConvModule):
    r"""The GENeralized Graph Convolution of `Li et al., "DeeperGCN: All You Need to Train
    Deeper GCNs" (2020) <https://arxiv.org/abs/2006.07739>`_:

    .. math::
        \mathbf{x}_i^{\prime} = \mathrm{MLP} \Big( \mathbf{x}_i +
        \mathrm{AGG} \big( \{ \mathrm{ReLU} ( \mathbf{x}_j + \mathbf{e}_{ji} ) +
        \epsilon : j \in \mathcal{N}(i) \} \big) \Big)

    A drop-in for PyG's ``GENConv`` (same arguments, parameter names and outputs:
    ``lin_src``, ``lin_edge``, ``lin_dst`` where a width differs from ``out_channels``,
    ``aggr_module``, the ``mlp`` Sequential, ``msg_norm.scale``). Without edge
    features the messages ``ReLU(x_j) + eps`` are a node's own, so they are formed per node
    and aggregated over the graph (the softmax aggregation in one kernel,
    ``ops.softmax_sum``) with no ``[E, C]`` tensor at all; with edge features the ``[E, C]``
    messages are formed, as PyG's.

    Args:
        in_channels (int or (int, int)): input width, -1 to take it from the first call; a
            pair for bipartite graphs.
        out_channels (int): output width.
        aggr (str, list or module, default "softmax"): "softmax", "softmax_sg" (the
            weights' gradient stopped), "power" / "powermean", or any
            aggregation ``SAGEConv`` takes.
        t, learn_t: the softmax temperature and whether it is learnt; p, learn_p: the
            power mean's exponent and whether it is learnt.
        msg_norm, learn_msg_scale: PyG's ``MessageNorm`` of the aggregate (scaled to the
            root's norm) and whether its scale is learnt.
        norm ("batch", "layer", "instance" or None, default "batch"): the MLP's
            normalisation.
        num_layers (int, default 2), expansion (int, default 2): the MLP's depth and hidden
            width factor.
        eps (float, default 1e-7): added to every message.
        bias (bool, default False): biases in the linear maps.
        edge_dim (int, optional): edge feature width (mapped to ``out_channels`` where it
            differs; -1 to take it from the first call).
        aggr_kwargs (dict, optional): keyword arguments of the aggregation, in place of
            those ``t``, ``learn_t``, ``p``, ``learn_p`` give.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``x [N, F]`` or a pair, a ``Graph`` / ``edge_index`` / sparse ``adj_t``,
        optionally ``edge_attr [E, D]`` and ``size``. output: ``[N, out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 aggr="softmax", t: float = 1.0, learn_t: bool = False, p: float = 1.0,
                 learn_p: bool = False, msg_norm: bool = False, learn_msg_scale: bool = False,
                 norm: str | None = "batch", num_layers: int = 2, expansion: int = 2,
                 eps: float = 1e-7, bias: bool = False, edge_dim: int | None = None,
                 aggr_kwargs: dict | None = None, flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("GENConv", flow)
        check_flags("GENConv", learn_t=learn_t, learn_p=learn_p, msg_norm=msg_norm,
                    learn_msg_scale=learn_msg_scale, bias=bias)
        check_sizes("GENConv", lazy=True, pair=True, optional=("edge_dim",),
                    in_channels=in_channels, out_channels=out_channels,
                    num_layers=num_layers, expansion=expansion,  # edge_dim -1: lazy, as PyG's
                    edge_dim=None if type(edge_dim) is int and edge_dim == -1 else edge_dim)
        for name, value in (("t", t), ("p", p), ("eps", eps)):  # (t or p alone is read)
            check_number("GENConv", name, value)
        if norm is not None and (not isinstance(norm, str) or norm not in _NORMS):
            raise ValueError(f"GENConv: norm must be one of {[*_NORMS, None]}, got {norm!r}")
        self.in_channels, self.out_channels, self.eps = in_channels, out_channels, eps
        name, kwargs = _aggregation(aggr, t, learn_t, p, learn_p, None if aggr_kwargs is None
                                    else keyword_arguments("GENConv", "aggr_kwargs", aggr_kwargs))
        self.aggr_module = aggregations.resolve(name, **kwargs)
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        src_width, dst_width = split_widths(in_channels)
        aggregated = self.aggr_module.out_channels_for(out_channels)
        # PyG's order of creation (and so of parameters()): lin_src, lin_edge, lin_aggr_out,
        # lin_dst, mlp, msg_norm
        self.lin_src = linear(src_width, out_channels, bias) \
            if src_width != out_channels else None
        self.lin_edge = linear(edge_dim, out_channels, bias) \
            if edge_dim is not None and edge_dim != out_channels else None
        self.lin_aggr_out = linear(aggregated, out_channels, bias) \
            if aggregated != out_channels else None
        self.lin_dst = linear(dst_width, out_channels, bias) \
            if dst_width != out_channels else None
        widths = [out_channels] + [out_channels * expansion] * (num_layers - 1) + [out_channels]
        self.mlp = _mlp(widths, norm, bias)
        self.msg_norm = _MessageNorm(learn_msg_scale) if msg_norm else None

    def reset_parameters(self) -> None:  # PyG's order; its reset recurses into the MLP
        for module in (self.aggr_module, self.mlp, self.msg_norm, self.lin_src, self.lin_edge,
                       self.lin_aggr_out, self.lin_dst):
            if module is not None:
                reset_like_pyg(module)

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        if self.lin_src is not None:
            x_src = self.lin_src(x_src)
        # PyG's rule for a sparse adj_t: values [E, D] are edge features, values [E] edge
        # weights, which GENConv does not take
        if edge_attr is not None or inputs.adj_values is None or inputs.adj_values.dim() > 1:
            edge_attr = edge_features_from(self, inputs, edge_attr)
        out = self._aggregate(inputs.graph, x_src, edge_attr, explain_mask(self, inputs))
        if self.lin_aggr_out is not None:
            out = self.lin_aggr_out(out)
        if self.msg_norm is not None:
            out = self.msg_norm(x_dst if x_dst is not None else x_src, out)
        if x_dst is not None:
            out = out + (self.lin_dst(x_dst) if self.lin_dst is not None else x_dst)
        return inputs.node_output(self.mlp(out))

    def _aggregate(self, graph, x_src: Tensor, edge_attr: Tensor | None,
                   mask: Tensor | None) -> Tensor:
        """AGG of ReLU(x_j + e_ji) + eps: per node without edge features (the same
        message on every edge out of j), per edge with them or an explainer's ``mask``
        (each message times its edge's entry)."""
        if edge_attr is None and mask is None:
            return self.aggr_module(graph, torch.relu(x_src) + self.eps)
        if edge_attr is None:
            messages = torch.relu(x_src).index_select(0, graph.csr.indices.long()) + self.eps
        else:
            messages = relu_edge_messages(self, graph, x_src, edge_attr, self.lin_edge) + \
                self.eps
        messages = masked_messages(messages, graph, mask)
        return self.aggr_module(aggregations.per_edge(graph), messages)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, " \
               f"aggr={self.aggr})"


def _aggregation(aggr, t: float, learn_t: bool, p: float, learn_p: bool,
                 aggr_kwargs: dict | None) -> tuple:
    """``(aggr, kwargs)`` for ``aggregations.resolve``, by PyG's GENConv rules."""
    semi_grad = aggr == "softmax_sg"
    aggr = "softmax" if semi_grad else "powermean" if aggr == "power" else aggr
    if aggr_kwargs is None:
        aggr_kwargs = dict(t=t, learn=learn_t, semi_grad=semi_grad) if aggr == "softmax" \
            else dict(p=p, learn=learn_p) if aggr == "powermean" else {}
    return aggr, aggr_kwargs


def _mlp(widths: list[int], norm: str | None, bias: bool) -> torch.nn.Sequential:
    """PyG's GENConv MLP: a Linear per step, each but the last followed by its norm, a ReLU
    and a Dropout(0) (kept: they number the Sequential's entries, PyG's state-dict keys)."""
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers.append(torch.nn.Linear(a, b, bias=bias))
        if i < len(widths) - 2:
            if norm is not None:
                layers.append(_NORMS[norm](b))
            layers += [torch.nn.ReLU(), torch.nn.Dropout(0.0)]
    return torch.nn.Sequential(*layers)


class _MessageNorm(torch.nn.Module):
    """PyG's ``MessageNorm``: the aggregate scaled to unit length, then to the root's
    length times ``scale`` (learnt with ``learn_scale``)."""

    def __init__(self, learn_scale: bool):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1), requires_grad=learn_scale)

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.scale.fill_(1.0)

    def forward(self, x: Tensor, msg: Tensor) -> Tensor:
        return F.normalize(msg, p=2.0, dim=-1) * x.norm(p=2.0, dim=-1, keepdim=True) * \
            self.scale

