"""The simple spectral graph convolution (S^2GC): the mean of K products with Kipf &
Welling's normalised adjacency, mixed with the input, then one linear map."""

from __future__ import annotations

import math

from torch import Tensor

from graphloc import ops
from graphloc.graph import Graph
from graphloc.nn.conv.sg_conv import SGConv


class SSGConv(SGConv):
    r"""The simple spectral graph convolution of `Zhu & Koniusz, "Simple Spectral Graph
    Convolution" (ICLR 2021) <https://openreview.net/forum?id=CYO5T-YjWZV>`_:

    .. math::
        \mathbf{X}' = \Big(\alpha \mathbf{X} + \frac{1 - \alpha}{K} \sum_{k=1}^{K}
        \big(\hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}} \hat{\mathbf{D}}^{-1/2}\big)^k
        \mathbf{X}\Big) \mathbf{\Theta} + \mathbf{b}, \qquad
        \hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}.

    A drop-in for PyG's ``SSGConv`` (same arguments, parameter names and outputs): K sparse
    products over the graph's cached normalisation, then one linear map (``SGConv``'s
    call, cache and checks, with this mixture of the hops).

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

    _cache = "_cached_h"  # PyG's name
    _fewest_hops = 1  # PyG's divides by K

    def __init__(self, in_channels: int, out_channels: int, alpha: float, K: int = 1,
                 cached: bool = False, add_self_loops: bool = True, bias: bool = True,
                 flow: str = "source_to_target"):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                not math.isfinite(alpha):
            raise ValueError(f"SSGConv: alpha must be a finite number, got {alpha!r}")
        super().__init__(in_channels, out_channels, K, cached, add_self_loops, bias, flow)
        self.alpha = alpha

    def _propagate(self, graph: Graph, weight: Tensor, x: Tensor) -> Tensor:
        """``alpha x + (1 - alpha) / K sum_k S^k x``."""
        h, step = x * self.alpha, (1 - self.alpha) / self.K
        for _ in range(self.K):
            x = ops.spmm(graph, x, weight)
            h = h.add_(x, alpha=step)  # in place on a fresh sum: its backward reads no input
        return h

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"K={self.K}, alpha={self.alpha})")
