"""The relational graph attention conv of Busbridge et al. (RGAT; PyG's ``RGATConv``) in
all of PyG's forms: across- or within-relation attention, additive or multiplicative
self-attention, the four cardinality ``mod``\\ s, bases or blocks, edge features."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_choice, check_flags, check_number
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import (
    check_flow,
    edge_feature_rows,
    mapped_edge_features,
    read_inputs,
    refuse_edge_attr_without_edge_dim,
    relation_types,
    require_destination,
)
from graphloc.nn.conv._utils import (
    check_dropouts,
    check_sizes,
    checked_features,
    glorot,
    glorot_linear,
    reset_glorot,
)

_MODS = (None, "additive", "scaled", "f-additive", "f-scaled")
_MECHANISMS = ("across-relation", "within-relation")
_MODES = ("additive-self-attention", "multiplicative-self-attention")


class RGATConv(ConvModule):
    r"""The relational graph attention operator of `Busbridge et al., "Relational Graph
    Attention Networks" (2019) <https://arxiv.org/abs/1904.05811>`_, as PyG's ``RGATConv``
    in all its forms. With :math:`\mathbf{g}_{j,r} = \mathbf{x}_j \mathbf{W}_r` (``H``
    heads of width ``C``) and, for each edge :math:`(j, r) \to i`, the scores
    :math:`q_{ij} = \mathbf{g}_{i,r} \mathbf{Q}`, :math:`k_{ij} = \mathbf{g}_{j,r}
    \mathbf{K}` (``[H D]`` each, ``D = dim``) and, with ``edge_dim``, :math:`a_{ij} =
    (\mathbf{e}_{ij} \mathbf{W}_e) \mathbf{E}`:

    .. math::
        s_{ij} = \mathrm{LeakyReLU}(q_{ij} + k_{ij} + a_{ij})\ \text{(additive)}\quad
        \text{or}\quad q_{ij}\, k_{ij}\, a_{ij}\ \text{(multiplicative)},

    :math:`\alpha_{ij} = \mathrm{softmax}(s_{ij})` over every incoming edge of ``i``
    (``"across-relation"``, the default) or over those of relation ``r`` alone
    (``"within-relation"``), and :math:`\mathbf{x}'_i = \sum_{(j, r) \to i}
    \alpha_{ij}\, \mathbf{g}_{j,r} + \mathbf{b}`, one sum per head and score column, heads
    concatenated or averaged. The ``mod``\ s (cardinality preservation) change the
    messages as PyG's: ``"additive"`` :math:`(\alpha_{ij} + \mathbf{w})\,
    \mathbf{g}_{j,r}`, ``"scaled"`` :math:`\alpha_{ij}\, \mathbf{g}_{j,r} \odot
    \psi(d_i)` with :math:`\psi(d) = \mathrm{ReLU}(d\, \mathbf{l}_1 + \mathbf{b}_1)
    \mathbf{l}_2 + \mathbf{b}_2` of the in-degree :math:`d_i`, ``"f-additive"``
    :math:`\alpha_{ij} + 1` where :math:`\alpha_{ij} > 0`, ``"f-scaled"`` :math:`d_i
    \alpha_{ij}`. :math:`\mathbf{W}_r` is a relation's own matrix, a combination of
    ``num_bases`` bases, or block-diagonal of ``num_blocks`` blocks.

    A drop-in for PyG's ``RGATConv``: the same arguments, parameters (``q``, ``k``,
    ``bias``, ``lin_edge``, ``e``, ``weight`` or ``att`` and ``basis``, ``w``, ``l1``,
    ``b1``, ``l2``, ``b2``) in PyG's layout and initial draws, outputs, returned attention
    weights (the softmax's, before a ``mod`` or dropout, as PyG's) and gradients. PyG's own
    ``test_rgat_conv.py`` passes with this class.

    PyG gathers each edge's ``[in, H C]`` relation matrix (``E in H C`` values: 11 GB for
    the 200,000-node road graph at 64 channels) and multiplies both ends by it. Here each
    (relation, node) pair that has edges (``Graph.by_relation`` for the destinations,
    ``by_source_relation`` for the sources) is mapped once by its relation's matrix, the
    scores are those rows' products with :math:`\mathbf{Q}` and :math:`\mathbf{K}`
    gathered per edge, the softmax runs once over the graph (per destination, or per
    destination and relation), and the messages are one ``spmm`` from the source pairs'
    rows with the (modified) weights; ``"additive"`` adds one unweighted ``spmm`` and
    ``"scaled"`` scales each node's sum by :math:`\psi(d_i)`. No per-edge matrix or
    message. As in PyG's, a node's features reach only the relations it takes part in (a
    NaN feature leaves the other relations' maps with finite gradients).

    Args:
        in_channels (int): input width.
        out_channels (int): width per head, C.
        num_relations (int): relation count R; ``edge_type`` holds values in ``[0, R)``.
        num_bases (int, optional): basis decomposition of the relation maps.
        num_blocks (int, optional): block-diagonal relation maps (dividing ``in_channels``
            and ``heads * out_channels``); not with ``num_bases``.
        mod (str, optional): ``"additive"``, ``"scaled"``, ``"f-additive"`` or
            ``"f-scaled"``; not with ``dropout``.
        attention_mechanism (str, default "across-relation"): or ``"within-relation"``.
        attention_mode (str, default "additive-self-attention"): or
            ``"multiplicative-self-attention"``.
        heads (int, default 1): number of heads, H.
        dim (int, default 1): score columns per head, D (> 1 only multiplicative).
        concat (bool, default True): concatenate heads, else average them.
        negative_slope (float, default 0.2): LeakyReLU's slope in additive scores.
        dropout (float, default 0.0): dropout on the attention weights in training, only
            without a ``mod`` (graphloc's dropout: other masks than PyG's ``F.dropout``).
        edge_dim (int, optional): edge feature width; the features enter the scores.
        bias (bool, default True): add a learnt bias.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``x [N, in]`` (or a bipartite pair); the graph (``edge_index [2, E]``, a
        ``Graph`` or a ``torch.sparse`` ``adj_t``, whose values are the edge types when
        ``edge_type`` is left out and the edge features when they are ``[E, edge_dim]``);
        ``edge_type [E]``; ``edge_attr [E, edge_dim]``; ``return_attention_weights`` as
        PyG's. output: ``[N, H D C]`` (``[N, D C]`` averaged), and ``(edge_index, alpha [E,
        H D])`` when asked.

    Differences from PyG's: a destination whose scores are all -inf gets weights 0 (PyG's:
    NaN), as in ``GATConv``; ``"additive"`` sums each destination's ``x_j W_r`` before
    the product with ``w`` (PyG's multiplies per edge): the same to rounding, but where
    +inf and -inf meet at one node the sum is NaN where PyG's may be infinite; ``l2``,
    which PyG's reset leaves as allocated (its ``torch.full`` result is dropped), starts
    at ``1 / out_channels``, the value PyG's reset computes; a ``mod`` outside PyG's four
    is an error (PyG's computes the plain form for it). docs/models.md lists these.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, num_relations: int,
                 num_bases: int | None = None, num_blocks: int | None = None,
                 mod: str | None = None, attention_mechanism: str = "across-relation",
                 attention_mode: str = "additive-self-attention", heads: int = 1, dim: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 edge_dim: int | None = None, bias: bool = True, flow: str = "source_to_target"):
        super().__init__()
        self._check_form(in_channels, out_channels, num_relations, num_bases, num_blocks, mod,
                         attention_mechanism, attention_mode, heads, dim, dropout, edge_dim)
        check_flags("RGATConv", concat=concat, bias=bias)
        check_number("RGATConv", "negative_slope", negative_slope)
        self.in_channels, self.out_channels, self.num_relations = (in_channels, out_channels,
                                                                   num_relations)
        self.num_bases, self.num_blocks, self.mod = num_bases, num_blocks, mod
        self.attention_mechanism, self.attention_mode = attention_mechanism, attention_mode
        self.heads, self.dim, self.concat = heads, dim, concat
        self.negative_slope, self.dropout, self.edge_dim = negative_slope, dropout, edge_dim
        self.flow = check_flow("RGATConv", flow)
        width, scores = heads * out_channels, heads * dim
        # PyG's parameters in its order; lin_edge draws its weights when built, as PyG's
        self.q = torch.nn.Parameter(torch.empty(width, scores))
        self.k = torch.nn.Parameter(torch.empty(width, scores))
        self.bias = torch.nn.Parameter(torch.empty(scores * out_channels if concat else
                                                   dim * out_channels)) if bias else None
        self.lin_edge = glorot_linear(edge_dim, width) if edge_dim is not None else None
        self.e = torch.nn.Parameter(torch.empty(width, scores)) if edge_dim is not None \
            else None
        if num_bases is not None:
            self.att = torch.nn.Parameter(torch.empty(num_relations, num_bases))
            self.basis = torch.nn.Parameter(torch.empty(num_bases, in_channels, width))
        elif num_blocks is not None:
            self.weight = torch.nn.Parameter(torch.empty(
                num_relations, num_blocks, in_channels // num_blocks, width // num_blocks))
        else:
            self.weight = torch.nn.Parameter(torch.empty(num_relations, in_channels, width))
        self.w = torch.nn.Parameter(torch.ones(out_channels))
        self.l1 = torch.nn.Parameter(torch.empty(1, out_channels))
        self.b1 = torch.nn.Parameter(torch.empty(1, out_channels))
        self.l2 = torch.nn.Parameter(torch.empty(out_channels, out_channels))
        self.b2 = torch.nn.Parameter(torch.empty(1, out_channels))
        self.reset_parameters()

    @staticmethod
    def _check_form(in_channels, out_channels, num_relations, num_bases, num_blocks, mod,
                    attention_mechanism, attention_mode, heads, dim, dropout, edge_dim) -> None:
        """PyG's rules for combining the options, as ``ValueError``\\ s naming them."""
        check_sizes("RGATConv", optional=("num_bases", "num_blocks", "edge_dim"),
                    in_channels=in_channels, out_channels=out_channels,
                    num_relations=num_relations, heads=heads, dim=dim, num_bases=num_bases,
                    num_blocks=num_blocks, edge_dim=edge_dim)
        check_choice("RGATConv", "mod", mod, _MODS)
        check_choice("RGATConv", "attention_mechanism", attention_mechanism, _MECHANISMS)
        check_choice("RGATConv", "attention_mode", attention_mode, _MODES)
        check_dropouts("RGATConv", upto_one=True, dropout=dropout)
        if attention_mode == "additive-self-attention" and dim > 1:
            raise ValueError(f"RGATConv: dim={dim} needs attention_mode="
                             "'multiplicative-self-attention' (additive self-attention has "
                             "one score per head)")
        if dropout > 0 and mod is not None:
            raise ValueError(f"RGATConv: dropout={dropout} is applied only without a mod "
                             f"(got mod={mod!r}), as PyG's")
        if num_bases is not None and num_blocks is not None:
            raise ValueError(f"RGATConv: num_bases={num_bases} and num_blocks={num_blocks} "
                             "cannot both be set")
        if num_blocks is not None and (in_channels % num_blocks or
                                       heads * out_channels % num_blocks):
            raise ValueError(f"RGATConv: num_blocks={num_blocks} must divide in_channels="
                             f"{in_channels} and heads * out_channels={heads * out_channels}")

    def reset_parameters(self) -> None:
        """PyG's initialisation, in its order (the same draws for a seed)."""
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
        if self.lin_edge is not None:
            reset_glorot(self.lin_edge)
            glorot(self.e)

    def relation_weights(self) -> Tensor:
        """``W_r`` of every relation as a dense ``[R, in, H C]`` (blocks placed on the
        diagonal)."""
        if self.num_blocks is not None:
            return torch.stack([torch.block_diag(*blocks) for blocks in self.weight])
        if self.num_bases is None:
            return self.weight
        return (self.att @ self.basis.view(self.num_bases, -1)).view(
            self.num_relations, self.in_channels, -1)

    def forward(self, x: Tensor, edge_index, edge_type: Tensor | None = None,
                edge_attr: Tensor | None = None, size=None, return_attention_weights=None):
        refuse_edge_attr_without_edge_dim(self, edge_attr)
        inputs = read_inputs(self, x, edge_index, size)
        x_src, x_dst = checked_features(self, inputs, self.in_channels)
        require_destination(self, x_dst, "the scores read x_i W_r")
        graph = inputs.graph
        types = relation_types(self, inputs, edge_type, self.num_relations)
        edge_rows = None if self.edge_dim is None else \
            edge_feature_rows(self, inputs, edge_attr, self.edge_dim, "edge_dim")
        # bases: the relation maps computed once; blocks: kept as blocks (W_r applied per
        # block, as PyG's, so that an infinite feature reaches only its own block)
        weight = self.relation_weights() if self.num_bases is not None else self.weight
        by_dst = graph.by_relation(types, self.num_relations)
        by_src = graph.by_source_relation(types, self.num_relations)
        values = self._per_pair(x_src, *by_src, weight, pair_end=0)
        ends = self._per_pair(x_dst, *by_dst, weight, pair_end=1)
        alpha = self._attention(graph, by_dst[0], by_src[0], values @ self.k, ends @ self.q,
                                edge_rows)
        mask = explain_mask(self, inputs)
        out = self._aggregate(graph, by_src[0], values, self._message_weights(graph, alpha),
                              mask)
        out = out.flatten(1) if self.concat else out.mean(1).flatten(1)
        if self.bias is not None:
            out = out + self.bias
        out = inputs.node_output(out)
        if return_attention_weights is None:  # PyG's rule: returned whenever it is given
            return out
        return out, inputs.attention_output(graph.edge_index, alpha)

    def _per_pair(self, x: Tensor, pair_graph, rows: Tensor, weight: Tensor,
                  pair_end: int) -> Tensor:
        """``x_i W_r`` for each (relation, node) pair row ``r * N + i`` of
        ``Graph.by_relation`` or ``by_source_relation``, ``[P, H C]``. Each relation maps
        only its own nodes' rows, as PyG's maps only its edges' ends, so a node's features
        reach only the relations it takes part in (a NaN feature leaves the maps of the
        other relations with finite gradients) and relations without edges cost nothing;
        one is always taken, so that without edges the gradients are PyG's zeros, not
        None. ``pair_end``: the row of ``pair_graph.edge_index`` that holds the pairs (0
        for ``by_source_relation``'s graph, 1 for ``by_relation``'s)."""
        R, N = self.num_relations, x.size(0)
        gathered = x[rows % N]
        if torch.compiler.is_compiling():  # every pair a row: those of no edge read zeros
            used = torch.zeros(rows.numel(), dtype=torch.bool, device=x.device).index_fill(
                0, pair_graph.edge_index[pair_end].long(), True)
            gathered = torch.where(used.unsqueeze(-1), gathered, 0)
            counts = [N] * R
        else:
            counts = torch.bincount(rows // N, minlength=R).tolist()
        taken = [r for r in range(R) if counts[r]] or [0]
        blocks = gathered.split(counts)
        return torch.cat([self._mapped(blocks[r], weight, r) for r in taken])

    def _attention(self, graph, by_dst, by_src, half_src: Tensor, half_dst: Tensor,
                   edge_rows: Tensor | None) -> Tensor:
        """``[E, H D]`` weights: each edge's score from its ends' pair halves and the edge
        term, then the softmax over each destination's edges of every relation, or over
        those of the edge's own relation (the segments of ``by_relation``'s graph)."""
        half_src = half_src.index_select(0, by_src.edge_index[0].long())
        half_dst = half_dst.index_select(0, by_dst.edge_index[1].long())
        edge_term = None if edge_rows is None else \
            mapped_edge_features(self, self.lin_edge, edge_rows) @ self.e
        if self.attention_mode == "additive-self-attention":
            score = half_dst + half_src if edge_term is None else \
                half_dst + half_src + edge_term
            score = F.leaky_relu(score, self.negative_slope)
        else:
            score = half_dst * half_src if edge_term is None else \
                half_dst * half_src * edge_term
        within = self.attention_mechanism == "within-relation"
        return ops.segment_softmax(by_dst if within else graph, score)

    def _message_weights(self, graph, alpha: Tensor) -> Tensor:
        """The weights each edge's message takes: the softmax's, as the ``mod`` changes
        them, or dropped out in training (PyG's: only without a ``mod``)."""
        if self.mod == "f-additive":
            return torch.where(alpha > 0, alpha + 1, alpha)
        if self.mod == "f-scaled":
            return alpha * self._in_degree(graph, alpha.dtype)[graph.edge_index[1]].unsqueeze(-1)
        if self.mod is None and self.training and self.dropout > 0:
            return ops.dropout(alpha, p=self.dropout)
        return alpha

    def _aggregate(self, graph, by_src, values: Tensor, edge_weights: Tensor,
                   mask: Tensor | None) -> Tensor:
        """``[N, H, D, C]``: the (relation, source) pairs' ``x_j W_r`` summed into each
        destination by the edges' weights in one product (each head's values once per score
        column), then the ``mod``'s per-node terms; each edge's whole message times an
        explainer's ``mask`` entry where one is set."""
        H, D, C, N = self.heads, self.dim, self.out_channels, graph.num_nodes
        if mask is not None:
            edge_weights = edge_weights * mask.view(-1, *[1] * (edge_weights.dim() - 1))
        values = values.view(-1, H, 1, C)
        out = ops.spmm(by_src, values.expand(-1, H, D, C).reshape(-1, H * D, C), edge_weights)
        out = out.view(N, H, D, C)
        if self.mod == "additive":  # the w * g_j half of each message, summed unweighted
            return out + (ops.spmm(by_src, values.view(-1, H, C), mask) * self.w).unsqueeze(2)
        if self.mod == "scaled":
            degree = self._in_degree(graph, out.dtype).unsqueeze(-1)
            scale = F.relu(degree @ self.l1 + self.b1) @ self.l2 + self.b2  # [N, C]
            return out * scale.view(N, 1, 1, C)
        return out

    @staticmethod
    def _mapped(x: Tensor, weight: Tensor, r: int) -> Tensor:
        """``x W_r``, ``[N, H C]``."""
        if weight.dim() == 4:
            blocks = x.reshape(x.size(0), weight.size(1), weight.size(2))
            return torch.einsum("nbi,bio->nbo", blocks, weight[r]).flatten(1)
        return x @ weight[r]

    @staticmethod
    def _in_degree(graph, dtype: torch.dtype) -> Tensor:
        """Each destination's incoming edges over every relation (PyG's ``degree`` in the
        scaled ``mod``\\ s), ``[N]``."""
        return graph.in_degree().to(dtype)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")
