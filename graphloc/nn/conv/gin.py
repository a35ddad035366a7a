"""Graph isomorphism network convolutions: GIN and its edge-feature variant GINE."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_number, keyword_arguments
from graphloc.nn import aggr as aggregations
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_messages, masked_weights
from graphloc.nn.conv._inputs import (
    check_flow,
    edge_features_from,
    read_inputs,
    relu_edge_messages,
    weights_from,
)
from graphloc.nn.conv._utils import (
    check_first_linear,
    check_sizes,
    checked_features,
    reset_like_pyg,
)


class _GINBase(ConvModule):
    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, nn: torch.nn.Module, eps: float, train_eps: bool,
                 aggr_module: torch.nn.Module | None = None, flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow(type(self).__name__, flow)
        check_flags(type(self).__name__, train_eps=train_eps)
        check_number(type(self).__name__, "eps", eps)
        if not isinstance(nn, torch.nn.Module):  # PyG's calls it as a module, later
            raise TypeError(f"{type(self).__name__}: nn must be a torch.nn.Module, got "
                            f"{type(nn).__name__}")
        if aggr_module is not None:  # registered first, as PyG's MessagePassing does
            self.aggr_module = aggr_module
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))

    def reset_parameters(self) -> None:
        reset_like_pyg(self.nn)
        self.eps.data.fill_(self.initial_eps)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"


class GINConv(_GINBase):
    r"""The graph isomorphism operator of `Xu et al., "How Powerful are Graph Neural
    Networks?" (ICLR 2019) <https://arxiv.org/abs/1810.00826>`_:

    .. math::
        \mathbf{x}'_i = h_{\mathbf{\Theta}}\Big((1 + \epsilon) \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \mathbf{x}_j\Big)

    A drop-in for PyG's ``GINConv``; the neighbour sum is one fused sparse product.

    Args:
        nn (torch.nn.Module): :math:`h_{\mathbf{\Theta}}`, e.g. an MLP.
        eps (float, default 0.0): initial :math:`\epsilon`.
        train_eps (bool, default False): learn :math:`\epsilon`.
        aggr (str or module, default "sum"): the neighbour aggregation, as PyG's ``aggr``
            (any of ``graphloc.nn.aggr``, e.g. "lcm"; the sum is GIN's and the default).
        aggr_kwargs (dict, optional): keyword arguments of the aggregation.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: ``[N, F_in]``, a static batch ``[B, N, F_in]``, or a pair ``(x_src, x_dst)``
        (neighbours from ``x_src``, the root from ``x_dst``, same width; ``x_dst`` None
        drops the root term), the graph (a ``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t`` whose values weight the sum), optionally
        ``size=(N_src, N_dst)``. output: ``[N, F_out]`` (``[N_dst, F_out]``) as ``nn`` maps it.
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False,
                 aggr="sum", aggr_kwargs: dict | None = None, flow: str = "source_to_target"):
        super().__init__(nn, eps, train_eps, aggregations.resolve(
            aggr, **keyword_arguments("GINConv", "aggr_kwargs", aggr_kwargs)),
                         flow)
        # a module is kept once, as aggr_module (PyG's state dict layout)
        self.aggr = str(aggr) if isinstance(aggr, torch.nn.Module) else aggr
        self.reset_parameters()

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if hasattr(self, "aggr_module"):
            self.aggr_module.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                size: tuple[int, int] | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, None)
        check_first_linear(self, self.nn, x_src.size(1), f"x has {x_src.size(1)} features")
        weight = masked_weights(weights_from(self, inputs, None), explain_mask(self, inputs))
        out = self.aggr_module(inputs.graph, x_src, weight)
        if x_dst is not None:
            # In place on a fused reduce's fresh output (no backward reads it): one buffer.
            out = out.addcmul_(x_dst, 1 + self.eps) if self.aggr_module.fresh_output \
                else out + (1 + self.eps) * x_dst
        return inputs.node_output(self.nn(out))


class GINEConv(_GINBase):
    r"""GIN with edge features, from `Hu et al., "Strategies for Pre-training Graph Neural
    Networks" (ICLR 2020) <https://arxiv.org/abs/1905.12265>`_:

    .. math::
        \mathbf{x}'_i = h_{\mathbf{\Theta}}\Big((1 + \epsilon) \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \mathrm{ReLU}(\mathbf{x}_j + \mathbf{W}\mathbf{e}_{j,i}
        + \mathbf{b})\Big)

    A drop-in for PyG's ``GINEConv``. The ReLU sits between the edge sum and the
    aggregation, so the ``[E, F]`` messages are formed (in CSR order) and then reduced.

    Args:
        nn (torch.nn.Module): :math:`h_{\mathbf{\Theta}}`; its first layer's input width is
            the node feature width.
        eps (float, default 0.0): initial :math:`\epsilon`.
        train_eps (bool, default False): learn :math:`\epsilon`.
        edge_dim (int, optional): edge feature width; if set, a Linear maps edge features to
            the node width, else they must already have it.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: features and graph as for :class:`GINConv`, ``edge_attr [E, D]`` (or the
        ``Graph``'s, or a sparse ``adj_t``'s values), optionally ``size=(N_src, N_dst)``.
        output: ``[N, F_out]`` (``[N_dst, F_out]``).
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False,
                 edge_dim: int | None = None, flow: str = "source_to_target"):
        super().__init__(nn, eps, train_eps, flow=flow)
        check_sizes("GINEConv", optional=("edge_dim",), edge_dim=edge_dim)
        self.lin = None
        if edge_dim is not None:
            first = nn[0] if isinstance(nn, torch.nn.Sequential) else nn
            width = getattr(first, "in_features", getattr(first, "in_channels", None))
            if width is None:
                raise ValueError("GINEConv could not infer the node width from `nn` "
                                 "(no in_features or in_channels on its first layer)")
            self.lin = torch.nn.Linear(edge_dim, width)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if self.lin is not None:
            self.lin.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, None)
        graph = inputs.graph
        edge_attr = edge_features_from(self, inputs, edge_attr)
        if edge_attr is None:
            raise ValueError("GINEConv needs edge features: pass edge_attr or a Graph "
                             "that carries them")
        messages = relu_edge_messages(self, graph, x_src, edge_attr, self.lin)  # (names a
        # width the edge map does not give)
        check_first_linear(self, self.nn, x_src.size(1), f"x has {x_src.size(1)} features")
        messages = masked_messages(messages, graph, explain_mask(self, inputs))
        out = ops.segment_reduce(messages, graph.csr.indptr, "sum")
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return inputs.node_output(self.nn(out))

