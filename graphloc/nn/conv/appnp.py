"""APPNP: personalised PageRank propagation with Kipf & Welling's normalised adjacency."""

from __future__ import annotations

from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_int
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_dropouts
from graphloc.nn.conv.gcn import (
    cached_normalisation,
    clear_normalisation_cache,
    read_weighted_call,
)


class APPNP(ConvModule):
    r"""The approximate personalised propagation of neural predictions of `Gasteiger et al.,
    "Predict then Propagate: Graph Neural Networks meet Personalized PageRank" (ICLR 2019)
    <https://arxiv.org/abs/1810.05997>`_: K steps of

    .. math::
        \mathbf{X}^{(k)} = (1 - \alpha) \hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}}
        \hat{\mathbf{D}}^{-1/2} \mathbf{X}^{(k-1)} + \alpha \mathbf{X}^{(0)},

    without parameters. A drop-in for PyG's ``APPNP`` (same arguments and outputs), each
    step one sparse product over the graph's cached normalisation.

    Args:
        K (int): number of steps (0: the input itself).
        alpha (float): teleport probability, in [0, 1].
        dropout (float, default 0): dropout on the normalised edge weights at each step in
            training, as PyG's (graphloc's dropout: another mask than torch's for a seed).
        cached (bool, default False): as PyG's, the first call's normalised graph and
            weights are kept (``_cached_edge_index``) and reused by every later call; a
            later call on another graph or with other edge weights gets the first one's,
            as PyG's, with a warning (an error for another node count). The normalisation
            of a ``Graph`` or an unchanged ``edge_index`` is cached on the graph anyway.
        add_self_loops (bool, default True): add the self-loops of :math:`\hat{\mathbf{A}}`.
        normalize (bool, default True): apply the symmetric normalisation (else the edge
            weights, or 1, as they are).
        flow (str, default "source_to_target"): PyG's edge direction.

    Differences from PyG's (docs/models.md): with two or more self-loops at a node and
    learnable ``edge_weight``, the gradient reaches only the loop whose weight is used
    (PyG's reaches every one).

    Shapes:
        input: node features ``[N, F]`` (or ``[B, N, F]`` on one graph), a ``Graph``, an
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, optional ``edge_weight [E]``.
        output: ``[N, F]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, K: int, alpha: float, dropout: float = 0.0, cached: bool = False,
                 add_self_loops: bool = True, normalize: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        self.K = check_int(K, "APPNP: K", 0)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"APPNP: alpha must be a number in [0, 1], got {alpha!r}")
        check_dropouts("APPNP", upto_one=True, dropout=dropout)
        self.alpha, self.dropout, self.cached = float(alpha), dropout, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.flow = check_flow("APPNP", flow)
        check_flags("APPNP", cached=cached, add_self_loops=add_self_loops, normalize=normalize)
        clear_normalisation_cache(self)

    def reset_parameters(self) -> None:
        clear_normalisation_cache(self)  # nothing learned

    @property
    def graphloc_hops(self) -> int:
        return self.K

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight, None)
        mask = explain_mask(self, inputs)
        if self.normalize:
            graph, weight = cached_normalisation(self, inputs, edge_weight, x.dtype, mask)
        else:
            graph = inputs.graph
            weight = None if edge_weight is None else edge_weight.to(x.dtype)
            weight = masked_weights(weight, mask)
        if weight is None and (self.alpha != 0 or self.dropout > 0):
            weight = x.new_ones(graph.num_edges)  # (PyG's dropout asserts there are weights)
        # (1 - alpha) folded into the E weights and alpha h added in place: one pass over
        # [N, F] per step besides the product, where (S x) (1 - alpha) + alpha h made three
        # (spmm's backward does not read its output, so the in-place add is safe)
        dropping = self.dropout > 0 and self.training
        scaled = None if weight is None or dropping else weight * (1 - self.alpha)
        h = x
        for _ in range(self.K):
            step_weight = scaled
            if dropping:  # a new mask at each step, as PyG's
                step_weight = ops.dropout(weight, p=self.dropout) * (1 - self.alpha)
            x = ops.spmm(graph, x, step_weight)
            if self.alpha != 0:
                x = x.add_(h, alpha=self.alpha)
        return inputs.node_output(x)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(K={self.K}, alpha={self.alpha})"
