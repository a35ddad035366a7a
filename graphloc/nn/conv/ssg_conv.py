"""The simple spectral graph convolution (S^2GC): the mean of K products with Kipf &
Welling's normalised adjacency, mixed with the input, then one linear map."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_int
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_sizes, linear
from graphloc.nn.conv.gcn import normalized_call_graph, read_weighted_call
from graphloc.nn.conv.sg_conv import check_cached_features


class SSGConv(torch.nn.Module):
    r"""The simple spectral graph convolution of `Zhu & Koniusz, "Simple Spectral Graph
    Convolution" (ICLR 2021) <https://openreview.net/forum?id=CYO5T-YjWZV>`_:

    .. math::
        \mathbf{X}' = \Big(\alpha \mathbf{X} + \frac{1 - \alpha}{K} \sum_{k=1}^{K}
        \big(\hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}} \hat{\mathbf{D}}^{-1/2}\big)^k
        \mathbf{X}\Big) \mathbf{\Theta} + \mathbf{b}, \qquad
        \hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}.

    A drop-in for PyG's ``SSGConv`` (same arguments, parameter names and outputs): K sparse
    products over the graph's cached normalisation, then one linear map.

    Args:
        in_channels (int): input feature width (-1: inferred at the first call).
        out_channels (int): output feature width.
        alpha (float): the input's share, :math:`\alpha`, a finite number (PyG's does not
            check it either; the paper takes it in [0, 1]).
        K (int, default 1): number of hops, >= 1 (PyG's divides by it).
        cached (bool, default False): keep the mixed features of the first call
            (``_cached_h``, PyG's name) and reuse them, as PyG's; a later call with other
            features or another graph is said (a warning, or an error where the node count
            differs), as ``SGConv``'s.
        add_self_loops (bool, default True): add the self-loops of :math:`\hat{\mathbf{A}}`.
        bias (bool, default True): learn the additive bias :math:`\mathbf{b}`.
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Differences from PyG's (docs/models.md): with two or more self-loops at a node and
    learnable ``edge_weight``, the gradient reaches only the loop whose weight is used
    (PyG's reaches every one), as for ``SGConv``.

    Shapes:
        input: node features ``[N, in_channels]`` (or ``[B, N, in_channels]`` on one graph),
        a ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, optional
        ``edge_weight [E]``. output: ``[N, out_channels]``.
    """

    def __init__(self, in_channels: int, out_channels: int, alpha: float, K: int = 1,
                 cached: bool = False, add_self_loops: bool = True, bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("SSGConv", lazy=True, in_channels=in_channels, out_channels=out_channels)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                not math.isfinite(alpha):
            raise ValueError(f"SSGConv: alpha must be a finite number, got {alpha!r}")
        self.K = check_int(K, "SSGConv: K", 1)
        self.in_channels, self.out_channels, self.alpha = in_channels, out_channels, alpha
        self.cached, self.add_self_loops = cached, add_self_loops
        self.flow = check_flow("SSGConv", flow)
        self.lin = linear(in_channels, out_channels, bias=bias)
        self._cached_h = None  # PyG's name: models clear the cache by setting it to None
        self._cached_input = (None, None, None)  # the graph, weights and features of it

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        self._cached_h = None

    @property
    def graphloc_hops(self) -> int:
        return self.K

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.in_channels)
        if self.cached and self._cached_h is not None:
            check_cached_features(self, "_cached_h", inputs.graph, edge_weight, x)
            return inputs.node_output(self.lin(self._cached_h.detach()))
        graph, weight = normalized_call_graph(inputs, edge_weight, self.add_self_loops, x.dtype)
        h, step = x * self.alpha, (1 - self.alpha) / self.K
        for _ in range(self.K):
            x = ops.spmm(graph, x, weight)
            h = h.add_(x, alpha=step)  # in place on a fresh sum: its backward reads no input
        if self.cached:
            self._cached_h = h
            self._cached_input = (inputs.graph, edge_weight, inputs.x_src.detach().clone())
        return inputs.node_output(self.lin(h))

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"K={self.K}, alpha={self.alpha})")
