"""LightGCN's light graph convolution: one product with the symmetrically normalised
adjacency, no self-loops, no parameters."""

from __future__ import annotations

from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask, masked_weights
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv.gcn import normalized_call_graph, read_weighted_call


class LGConv(ConvModule):
    r"""The light graph convolution of `He et al., "LightGCN: Simplifying and Powering
    Graph Convolution Network for Recommendation" (SIGIR 2020)
    <https://arxiv.org/abs/2002.02126>`_:

    .. math::
        \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i)} \frac{e_{j,i}}{\sqrt{\deg(i)\deg(j)}}
        \mathbf{x}_j,

    degrees summed at the destination over the edge weights, as PyG's ``gcn_norm`` without
    self-loops. A drop-in for PyG's ``LGConv`` (same arguments and outputs): one sparse
    product over the graph's cached normalisation, no ``[E, F]`` messages.

    Args:
        normalize (bool, default True): the symmetric normalisation (else the edge weights,
            or 1, as they are: a weighted sum of the neighbours).
        flow (str, default "source_to_target"): PyG's edge direction;
            ``"target_to_source"`` reads ``edge_index[0]`` as the destinations.

    Shapes:
        input: node features ``[N, F]`` (or ``[B, N, F]`` on one graph), a ``Graph``, an
        ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, optional ``edge_weight [E]``.
        output: ``[N, F]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, normalize: bool = True, flow: str = "source_to_target"):
        super().__init__()
        self.normalize = normalize
        self.flow = check_flow("LGConv", flow)
        check_flags("LGConv", normalize=normalize)

    def reset_parameters(self) -> None:
        pass  # nothing learned (PyG's models call it on every layer)

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight, None)
        mask = explain_mask(self, inputs)
        if self.normalize:
            graph, weight = normalized_call_graph(inputs, edge_weight, False, x.dtype, mask)
        else:
            graph = inputs.graph
            weight = None if edge_weight is None else edge_weight.to(x.dtype)
            weight = masked_weights(weight, mask)
        return inputs.node_output(ops.spmm(graph, x, weight))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
