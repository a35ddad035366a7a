"""The relational graph attention conv of Busbridge et al. (RGAT; PyG's ``RGATConv``) in
its default form: across-relation additive self-attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._inputs import check_flow, read_inputs, relation_types
from graphloc.nn.conv._utils import check_dropouts, check_sizes, checked_features, glorot

#: PyG's options graphloc's RGATConv does not compute: their values in its default form
_DEFAULT_FORM = {"num_blocks": None, "mod": None, "attention_mechanism": "across-relation",
                 "attention_mode": "additive-self-attention", "dim": 1, "edge_dim": None}


def _side_by_side(maps: Tensor) -> Tensor:
    """``[R, in, H]`` maps as one ``[in, R H]`` matrix, relation r's in columns r H to
    (r + 1) H."""
    return maps.permute(1, 0, 2).reshape(maps.size(1), -1)


class RGATConv(torch.nn.Module):
    r"""The relational graph attention operator of `Busbridge et al., "Relational Graph
    Attention Networks" (2019) <https://arxiv.org/abs/1904.05811>`_, as PyG's ``RGATConv``
    in its default form (across-relation, additive self-attention). With
    :math:`\mathbf{g}_{j,r} = \mathbf{x}_j \mathbf{W}_r` (``H`` heads of width ``C``):

    .. math::
        \alpha_{ij,h} = \mathrm{softmax}_{(j, r) \to i}\big(\mathrm{LeakyReLU}(
        \mathbf{g}_{i,r} \mathbf{q}_h + \mathbf{g}_{j,r} \mathbf{k}_h)\big),\qquad
        \mathbf{x}'_i = \Big\Vert_h \sum_{(j, r) \to i} \alpha_{ij,h}\,
        \mathbf{g}_{j,r,h} + \mathbf{b}

    (the softmax over every incoming edge of every relation; heads averaged when
    ``concat=False``; :math:`\mathbf{W}_r` a combination of ``num_bases`` bases when given).
    A drop-in for PyG's ``RGATConv`` with those options (same arguments, parameters ``q``,
    ``k``, ``bias``, ``weight`` or ``att`` and ``basis``, ``w``, ``l1``, ``b1``, ``l2``,
    ``b2`` in PyG's layout and initial draws, the last five unused there as in PyG's, and
    outputs and attention weights).

    PyG gathers each edge's ``[in, H C]`` relation matrix (``E in H C`` values: 11 GB for
    the 200,000-node road graph at 64 channels) and multiplies both ends by it. Here the
    score halves of every relation come from one product with :math:`\mathbf{W}_r
    \mathbf{q}` and :math:`\mathbf{W}_r \mathbf{k}` (``[in, H]`` each), the softmax runs
    once over the graph, and each relation's messages are one ``spmm`` of
    :math:`\mathbf{x} \mathbf{W}_r` over its own edges: no per-edge matrix or message.

    Args:
        in_channels (int): input width.
        out_channels (int): width per head, C.
        num_relations (int): relation count R; ``edge_type`` holds values in ``[0, R)``.
        num_bases (int, optional): basis decomposition of the relation maps.
        heads (int, default 1): number of heads, H.
        concat (bool, default True): concatenate heads, else average them.
        negative_slope (float, default 0.2): LeakyReLU's slope in the scores.
        dropout (float, default 0.0): dropout on the attention weights in training
            (graphloc's dropout: other masks than PyG's ``F.dropout``).
        bias (bool, default True): add a learnt bias.
        flow (str, default "source_to_target"): PyG's edge direction.
        num_blocks, mod, attention_mechanism, attention_mode, dim, edge_dim: PyG's other
            forms; only their defaults are taken (a ``ValueError`` names any other, and
            ``from_pyg`` keeps such a PyG conv as PyG's).

    Shapes:
        input: ``x [N, in]``; the graph (``edge_index [2, E]``, a ``Graph`` or a
        ``torch.sparse`` ``adj_t`` whose values are the edge types when ``edge_type`` is
        left out); ``edge_type [E]``; ``return_attention_weights`` as PyG's. output:
        ``[N, H C]`` (``[N, C]`` averaged), and ``(edge_index, alpha [E, H])`` when asked.

    Not a full drop-in: PyG's other forms raise (PyG's own ``test_rgat_conv.py``, which sets
    a ``mod`` in every case, fails with this class in place of PyG's).

    Differences from PyG's: the score halves are ``x (W_r q)`` where PyG's are ``(x W_r)
    q``, the same to rounding (with an infinite feature a score may be +-inf where PyG's is
    NaN); a destination whose scores are all -inf gets weights 0 (PyG's: NaN), as in
    ``GATConv``. docs/models.md lists these.
    """

    def __init__(self, in_channels: int, out_channels: int, num_relations: int,
                 num_bases: int | None = None, num_blocks: int | None = None,
                 mod: str | None = None, attention_mechanism: str = "across-relation",
                 attention_mode: str = "additive-self-attention", heads: int = 1, dim: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 edge_dim: int | None = None, bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        given = {"num_blocks": num_blocks, "mod": mod, "attention_mechanism": attention_mechanism,
                 "attention_mode": attention_mode, "dim": dim, "edge_dim": edge_dim}
        for name, value in given.items():
            if value != _DEFAULT_FORM[name]:
                raise ValueError(f"RGATConv: {name}={value!r} is not computed by graphloc's "
                                 f"RGATConv, which takes PyG's default form ({_DEFAULT_FORM}); "
                                 "use PyG's RGATConv for it")
        check_sizes("RGATConv", optional=("num_bases",), in_channels=in_channels,
                    out_channels=out_channels, num_relations=num_relations, heads=heads,
                    num_bases=num_bases)
        check_flags("RGATConv", concat=concat, bias=bias)
        check_dropouts("RGATConv", upto_one=True, dropout=dropout)
        self.in_channels, self.out_channels, self.num_relations = (in_channels, out_channels,
                                                                   num_relations)
        self.num_bases, self.heads, self.concat = num_bases, heads, concat
        self.negative_slope, self.dropout = negative_slope, dropout
        self.flow = check_flow("RGATConv", flow)
        width = heads * out_channels
        # PyG's parameters in its order (the last five are read only by its other forms)
        self.q = torch.nn.Parameter(torch.empty(width, heads))
        self.k = torch.nn.Parameter(torch.empty(width, heads))
        self.bias = torch.nn.Parameter(torch.empty(width if concat else out_channels)) \
            if bias else None
        if num_bases is not None:
            self.att = torch.nn.Parameter(torch.empty(num_relations, num_bases))
            self.basis = torch.nn.Parameter(torch.empty(num_bases, in_channels, width))
        else:
            self.weight = torch.nn.Parameter(torch.empty(num_relations, in_channels, width))
        self.w = torch.nn.Parameter(torch.ones(out_channels))
        self.l1 = torch.nn.Parameter(torch.empty(1, out_channels))
        self.b1 = torch.nn.Parameter(torch.empty(1, out_channels))
        self.l2 = torch.nn.Parameter(torch.empty(out_channels, out_channels))
        self.b2 = torch.nn.Parameter(torch.empty(1, out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.num_bases is not None:
            glorot(self.basis)
            glorot(self.att)
        else:
            glorot(self.weight)
        glorot(self.q)
        glorot(self.k)
        with torch.no_grad():
            if self.bias is not None:
                self.bias.zero_()
            self.l1.fill_(1.0)
            self.b1.zero_()
            # (PyG's reset leaves l2 as allocated: torch.full's result is dropped there)
            self.l2.fill_(1.0 / self.out_channels)
            self.b2.zero_()

    def relation_weights(self) -> Tensor:
        """``W_r`` of every relation, ``[R, in, H C]``."""
        if self.num_bases is None:
            return self.weight
        return (self.att @ self.basis.view(self.num_bases, -1)).view(
            self.num_relations, self.in_channels, -1)

    def forward(self, x: Tensor, edge_index, edge_type: Tensor | None = None,
                edge_attr: Tensor | None = None, size=None, return_attention_weights=None):
        if edge_attr is not None:
            raise ValueError("RGATConv was built without edge_dim but got edge_attr (graphloc's "
                             "takes no edge features)")
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        x_dst = x_src if x_dst is None else x_dst
        graph = inputs.graph
        types = relation_types(self, inputs, edge_type, self.num_relations)
        weight = self.relation_weights()
        alpha = self._attention(graph, types, weight, x_src, x_dst)
        dropped = ops.dropout(alpha, p=self.dropout) if self.dropout > 0 and self.training \
            else alpha
        out = self._messages(graph, types, weight, x_src, dropped)
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(1)
        if self.bias is not None:
            out = out + self.bias
        out = inputs.node_output(out)
        if return_attention_weights is None:  # PyG's rule: returned whenever it is given
            return out
        return out, inputs.attention_output(graph.edge_index, alpha)

    def _attention(self, graph, types: Tensor, weight: Tensor, x_src: Tensor,
                   x_dst: Tensor) -> Tensor:
        """``[E, H]`` weights: each edge's score halves from its relation's ``x (W_r q)``
        and ``x (W_r k)``, for every relation in one product per side, then one softmax
        over each destination's edges of every relation."""
        R, H = self.num_relations, self.heads
        src, dst = graph.edge_index
        half_dst = (x_dst @ _side_by_side(weight @ self.q)).view(-1, R, H)[dst, types]
        half_src = (x_src @ _side_by_side(weight @ self.k)).view(-1, R, H)[src, types]
        score = F.leaky_relu(half_dst + half_src, self.negative_slope)
        return ops.segment_softmax(graph, score)

    def _messages(self, graph, types: Tensor, weight: Tensor, x_src: Tensor,
                  alpha: Tensor) -> Tensor:
        """``[N, H, C]``: per relation, ``x W_r`` summed over its edges by their weights.
        Relations without edges are passed over (their ``x W_r`` would be all the work), but
        one is always taken, so that without edges the gradients are PyG's zeros, not
        None."""
        H, C = self.heads, self.out_channels
        subgraphs = graph.relation_subgraphs(types, self.num_relations)
        taken = [r for r, subgraph in enumerate(subgraphs) if subgraph.num_edges] or [0]
        out = None
        for r in taken:
            # traced, each subgraph holds every edge, the other relations' sent to an extra
            # row (dropped): its weights are all of them
            weights = alpha if torch.compiler.is_compiling() else alpha[types == r]
            mapped = (x_src @ weight[r]).view(-1, H, C)
            part = ops.spmm(subgraphs[r], mapped, weights)[:graph.num_nodes]
            out = part if out is None else out + part
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")
