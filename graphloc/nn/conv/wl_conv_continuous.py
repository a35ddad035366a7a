"""The continuous Weisfeiler-Lehman step of Togninalli et al. (PyG's ``WLConvContinuous``):
each node's features averaged with the weighted mean of its neighbours'."""

from __future__ import annotations

from torch import Tensor

from graphloc import ops
from graphloc.graph import degree_power
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._utils import checked_features


class WLConvContinuous(ConvModule):
    r"""The continuous Weisfeiler-Lehman operator of `Togninalli et al., "Wasserstein
    Weisfeiler-Lehman Graph Kernels" (NeurIPS 2019) <https://arxiv.org/abs/1906.01277>`_:

    .. math::
        \mathbf{x}'_i = \frac{1}{2} \Big( \mathbf{x}_i + \frac{1}{\sum_{j \in
        \mathcal{N}(i)} w_{ji}} \sum_{j \in \mathcal{N}(i)} w_{ji} \mathbf{x}_j \Big)

    (``w`` = 1 without edge weights; a node whose weights sum to 0 takes 0 for the mean; a
    pair ``(x_src, None)`` gives the mean alone). A drop-in for PyG's ``WLConvContinuous``
    (no parameters; same outputs): the weighted sum is one ``spmm`` (PyG's scatters
    ``[E, F]`` messages).

    Args:
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, F]``, a static batch ``[B, N, F]`` or a pair ``(x_src, x_dst)``
        (``x_dst`` may be None); the graph (a ``Graph``, ``edge_index [2, E]`` or a
        ``torch.sparse`` ``adj_t``, whose values are the weights); optional
        ``edge_weight [E]`` and ``size=(N_src, N_dst)``. output: ``[N_dst, F]``.

    Differences from PyG's: with ``flow="target_to_source"`` the mean divides by the sum of
    each node's own edges' weights (PyG's divides by the weights summed at
    ``edge_index[1]``, the other end's); a node whose weights sum to -0.0 takes 0 for the
    mean (PyG's masks only +inf, so it gets -inf times its sum), and the gradient of edge
    weights summing to 0 at a node is finite (PyG's is NaN: 0 * inf); a ``torch.sparse``
    adjacency works (PyG's indexes it as an edge list). docs/models.md lists these.
    """

    pyg_aggr = None  # takes no aggr: PyG's sets its own aggr

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, flow: str = "source_to_target"):
        super().__init__()
        self.flow = check_flow("WLConvContinuous", flow)

    def reset_parameters(self) -> None:  # (no parameters: PyG's interface)
        pass

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index,
                edge_weight: Tensor | None = None, size: tuple[int, int] | None = None
                ) -> Tensor:
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, None)
        graph, weight = inputs.graph, weights_from(self, inputs, edge_weight)
        if weight is None:
            degree = graph.in_degree().to(x_src.dtype)
        else:
            weight = weight.to(x_src.dtype)
            degree = graph.weighted_in_degree(weight).to(x_src.dtype)
        # the degrees stay the unmasked ones, as PyG's, which sums the weights apart
        weight = masked_weights(weight, explain_mask(self, inputs))
        out = ops.spmm(graph, x_src, weight) * degree_power(degree, -1.0).unsqueeze(1)
        if x_dst is not None:
            out = 0.5 * (x_dst + out)
        return inputs.node_output(out)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}()"
