"""GCNII's convolution: initial residual and identity mapping, for deep GCNs."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_input, check_sizes, glorot
from graphloc.nn.conv.gcn import (
    cached_normalisation,
    clear_normalisation_cache,
    read_weighted_call,
)


class GCN2Conv(ConvModule):
    r"""The graph convolution with initial residual and identity mapping of `Chen et al.,
    "Simple and Deep Graph Convolutional Networks" (ICML 2020)
    <https://arxiv.org/abs/2007.02133>`_:

    .. math::
        \mathbf{X}' = \left( (1 - \alpha) \hat{\mathbf{P}} \mathbf{X} + \alpha
        \mathbf{X}^{(0)} \right) \left( (1 - \beta) \mathbf{I} + \beta \mathbf{\Theta}
        \right), \qquad \hat{\mathbf{P}} = \hat{\mathbf{D}}^{-1/2} (\mathbf{A} + \mathbf{I})
        \hat{\mathbf{D}}^{-1/2},

    with :math:`\beta = \log(\theta / \ell + 1)` (1 without ``theta`` and ``layer``), and with
    ``shared_weights=False`` the two terms through their own :math:`\mathbf{\Theta}`. A
    drop-in for PyG's ``GCN2Conv`` (same arguments, parameter names ``weight1`` and
    ``weight2``, and outputs): one sparse product over the graph's cached normalisation,
    with :math:`1 - \alpha` folded into its weights.

    Args:
        channels (int): feature width, in and out.
        alpha (float): the initial residual's weight, in [0, 1].
        theta (float, optional) and layer (int, optional): :math:`\theta` and the layer's
            depth :math:`\ell` (both or neither).
        shared_weights (bool, default True): one :math:`\mathbf{\Theta}` for both terms.
        cached (bool, default False): as PyG's, the first call's normalised graph and
            weights are kept (``_cached_edge_index``) and reused by every later call (on
            another graph or with other edge weights: a warning, or an error for another
            node count). The normalisation of a ``Graph`` or an unchanged ``edge_index``
            without weights is cached on the graph anyway.
        add_self_loops (bool, default True): add the self-loops of :math:`\hat{\mathbf{P}}`.
        normalize (bool, default True): apply the symmetric normalisation.
        flow (str, default "source_to_target"): PyG's edge direction.

    Differences from PyG's (docs/models.md): with two or more self-loops at a node and
    learnable ``edge_weight``, the gradient reaches only the loop whose weight is used
    (PyG's reaches every one); a row holding +-inf gives
    +-inf as the formula does, where PyG's ``(1 - beta) h + beta h W`` can give
    inf - inf = NaN.

    Shapes:
        input: ``x [N, channels]``, the initial features ``x_0 [N', channels]`` (N' >= N:
        its first N rows are read), a ``Graph``, an ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t``, optional ``edge_weight [E]``. output: ``[N, channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, channels: int, alpha: float, theta: float | None = None,
                 layer: int | None = None, shared_weights: bool = True, cached: bool = False,
                 add_self_loops: bool = True, normalize: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("GCN2Conv", channels=channels)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"GCN2Conv: alpha must be a number in [0, 1], got {alpha!r}")
        self.channels, self.alpha, self.beta = channels, float(alpha), 1.0
        if theta is not None or layer is not None:
            if theta is None or layer is None:
                raise ValueError(f"GCN2Conv: theta and layer come together (beta = "
                                 f"log(theta / layer + 1)), got theta={theta!r}, "
                                 f"layer={layer!r}")
            check_int(layer, "GCN2Conv: layer", 1)
            if isinstance(theta, bool) or not isinstance(theta, (int, float)) or \
                    not math.isfinite(theta) or theta <= -layer:
                raise ValueError(f"GCN2Conv: theta must be a finite number > -layer, got "
                                 f"{theta!r}")
            self.beta = math.log(theta / layer + 1)
        self.cached, self.add_self_loops, self.normalize = cached, add_self_loops, normalize
        self.flow = check_flow("GCN2Conv", flow)
        check_flags("GCN2Conv", shared_weights=shared_weights, cached=cached,
                    add_self_loops=add_self_loops, normalize=normalize)
        self.weight1 = torch.nn.Parameter(torch.empty(channels, channels))
        self.weight2 = None if shared_weights else \
            torch.nn.Parameter(torch.empty(channels, channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        clear_normalisation_cache(self)
        glorot(self.weight1)
        if self.weight2 is not None:
            glorot(self.weight2)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, x_0: Tensor, edge_index,
                edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.channels)
        if isinstance(x_0, Tensor) and inputs.batch is not None and x_0.dim() == 3:
            x_0 = x_0.reshape(-1, x_0.size(-1))  # the static batch, folded as x is
        check_input(self, x_0, self.channels, "x_0")
        if x_0.size(0) < x.size(0):
            raise ValueError(f"GCN2Conv: x_0 has {x_0.size(0)} rows but x has {x.size(0)}: "
                             "the initial features need a row per node")
        mask = explain_mask(self, inputs)
        if self.normalize:
            graph, weight = cached_normalisation(self, inputs, edge_weight, x.dtype, mask)
        else:
            graph = inputs.graph
            weight = x.new_ones(graph.num_edges) if edge_weight is None else \
                edge_weight.to(x.dtype)
            weight = masked_weights(weight, mask)
        # (1 - alpha) P x: one product with scaled weights. Then h ((1 - beta) I + beta W) as
        # one product with a [C, C] matrix, where PyG's addmm(h, h, W) adds and scales
        # [N, C] tensors forward and backward; alpha x_0 added in place, without a scaled
        # copy (spmm's backward does not read its output): 0.79x the time of PyG's
        # arrangement on the road graph, forward + backward (RESULTS.md, 2026-12-04)
        h = ops.spmm(graph, x, weight * (1 - self.alpha))
        x_0 = x_0[:x.size(0)]
        if self.weight2 is None:
            out = h.add_(x_0, alpha=self.alpha) @ self._mapping(self.weight1)
        else:
            out = torch.addmm(h @ self._mapping(self.weight1), x_0,
                              self._mapping(self.weight2), alpha=self.alpha)
        return inputs.node_output(out)

    def _mapping(self, weight: Tensor) -> Tensor:
        """``(1 - beta) I + beta W``, GCNII's identity mapping, as one ``[C, C]`` matrix."""
        eye = torch.eye(self.channels, dtype=weight.dtype, device=weight.device)
        return torch.add(eye * (1.0 - self.beta), weight, alpha=self.beta)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels}, alpha={self.alpha}, " \
               f"beta={self.beta})"
