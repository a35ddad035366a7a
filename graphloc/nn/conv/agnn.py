"""AGNN's attention-based propagation: a softmax over each node's neighbours of the
cosine similarities, scaled by one learnable temperature."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_one_node_set
from graphloc.nn.conv._utils import check_input
from graphloc.nn.conv.gat import fresh_self_loops, on_attention_graph, pyg_loop_order


class AGNNConv(ConvModule):
    r"""The attention-based propagation of `Thekumparampil et al., "Attention-based Graph
    Neural Network for Semi-Supervised Learning" (2018) <https://arxiv.org/abs/1803.03735>`_:

    .. math::
        \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}} \alpha_{ij} \mathbf{x}_j,
        \qquad \alpha_{ij} = \mathrm{softmax}_j\big(\beta \cos(\mathbf{x}_i,
        \mathbf{x}_j)\big).

    A drop-in for PyG's ``AGNNConv`` (same arguments, the parameter or buffer ``beta``, and
    outputs): the cosines as one ``ops.sddmm`` of the normalised rows, the softmax and the
    weighted sum fused per node (``ops.segment_attention``: no ``[E, F]`` messages).

    Args:
        requires_grad (bool, default True): learn :math:`\beta` (initially 1); else a
            buffer of 1.
        add_self_loops (bool, default True): replace the graph's loops by one per node.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, F]`` (or ``[B, N, F]`` on one graph), a ``Graph``, an ``edge_index
        [2, E]`` or a ``torch.sparse`` ``adj_t`` (its pattern). output: ``[N, F]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, requires_grad: bool = True, add_self_loops: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_flags("AGNNConv", requires_grad=requires_grad, add_self_loops=add_self_loops)
        self.requires_grad, self.add_self_loops = requires_grad, add_self_loops
        self.flow = check_flow("AGNNConv", flow)
        if requires_grad:
            self.beta = torch.nn.Parameter(torch.ones(1))
        else:
            self.register_buffer("beta", torch.ones(1))

    def reset_parameters(self) -> None:
        if self.requires_grad:
            with torch.no_grad():
                self.beta.fill_(1.0)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index) -> Tensor:
        inputs = read_one_node_set(self, x, edge_index, "its scores are cosines of x_i and x_j")
        x = inputs.x_src
        check_input(self, x, None)
        graph = fresh_self_loops(inputs.graph) if self.add_self_loops else inputs.graph
        unit = F.normalize(x, p=2.0, dim=-1)
        scores = ops.sddmm(graph, unit, unit, "dot") * self.beta.to(x.dtype)
        mask = explain_mask(self, inputs)
        if mask is None:
            return inputs.node_output(ops.segment_attention(graph, scores, x))
        loops = pyg_loop_order(inputs.graph) if self.add_self_loops else None
        alpha = ops.segment_softmax(graph, scores) * on_attention_graph(mask, loops)
        return inputs.node_output(ops.spmm(graph, x, alpha))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
