"""The heterogeneous graph attention conv of Wang et al. (HAN; PyG's ``HANConv``): GAT's
attention within each relation (meta-path), then a semantic attention over the relations
into each node type."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags, check_number
from graphloc.nn.conv import _hetero as hetero
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_dropouts, glorot
from graphloc.nn.conv.gat import head_dots


class HANConv(ConvModule):
    r"""The heterogeneous graph attention operator of `Wang et al., "Heterogeneous Graph
    Attention Network" (WWW 2019) <https://arxiv.org/abs/1903.07293>`_, as PyG's
    ``HANConv``. Each node type's features go through its own Linear, ``h = W_tau x``
    (``H`` heads of width ``D = C / H``); within each relation ``r`` (typically a
    meta-path) node ``i`` attends over its in-neighbours as GAT does,

    .. math::
        \mathbf{z}_{i,r} = \mathrm{ReLU}\Big(\Big\Vert_h \sum_{j \in \mathcal{N}_r(i)}
        \mathrm{softmax}_j\big(\mathrm{LeakyReLU}(\mathbf{a}_{r,h}^{src\top}
        \mathbf{h}_{j,h} + \mathbf{a}_{r,h}^{dst\top} \mathbf{h}_{i,h})\big)
        \mathbf{h}_{j,h}\Big),

    and the relations into a type are mixed by one semantic attention per type,
    :math:`\beta_r = \mathrm{softmax}_r(\mathbf{q}^\top \mathrm{mean}_i
    \tanh(\mathbf{K} \mathbf{z}_{i,r} + \mathbf{b}))`, :math:`\mathbf{x}'_i = \sum_r
    \beta_r \mathbf{z}_{i,r}`. A drop-in for PyG's ``HANConv`` (same arguments, parameters
    ``proj``, ``lin_src``, ``lin_dst``, ``k_lin``, ``q`` with PyG's initial draws, and
    outputs, including ``None`` for a type no relation of the call points to). It is
    PyG's operator: the paper's own code (Jhy1993/HAN) ends each meta-path's attention head
    with an ELU (its default activation) where PyG's applies a ReLU, and drops out the
    head's inputs as well as its attention weights.

    PyG forms each relation's per-node scores from ``[N, H, D]`` products and gathers its
    ``[E, H, D]`` source rows and messages, kept for the backward. Here each node type's
    score halves of every relation come from one pass (``ops.head_dots``), and each
    relation's attention runs fused per destination (``ops.additive_attention``: the
    scores, softmax and weighted sum in one pass, no ``[E, ...]`` tensor); with attention
    dropout in training the weights are materialised and dropped with graphloc's dropout
    (other masks than PyG's ``F.dropout`` draws).

    Args:
        in_channels (int or dict): input width of every node type, or per node type; -1
            takes it from the first call.
        out_channels (int): output width C, divisible by ``heads``.
        metadata (tuple): ``(node types, relations)``, as ``HeteroData.metadata()``.
        heads (int, default 1): number of heads, H.
        negative_slope (float, default 0.2): LeakyReLU's slope in the scores.
        dropout (float, default 0.0): dropout on the attention weights in training.
        flow (str, default "source_to_target"): PyG's edge direction; only the default is
            defined between node types.

    Shapes:
        input: ``x_dict`` node type -> ``[N_type, F_type]``; ``edge_index_dict`` relation ->
        ``edge_index [2, E]``, a ``torch.sparse`` ``adj_t`` or a Graph, or a
        :class:`~graphloc.hetero.HeteroGraph`; ``return_semantic_attention_weights``.
        output: node type -> ``[N_type, C]``, or ``None`` for a type no relation of
        ``edge_index_dict`` points to, in ``x_dict``'s order; with
        ``return_semantic_attention_weights`` also node type -> ``beta`` ``[R_type]`` (or
        None).

    Differences from PyG's: a relation outside ``metadata``, a node type of ``x_dict``
    without a Linear, or one a relation names missing from ``x_dict``, is a ``ValueError``
    naming it (PyG's: a ``KeyError``); an index past its relation's node counts is a
    ``ValueError`` naming the relation and the value; ``out_channels`` not divisible by
    ``heads`` is refused when built (PyG's fails at its first call);
    ``flow="target_to_source"`` is refused; a destination whose scores in a relation are
    all -inf gets weights 0 (PyG's: NaN), as in ``GATConv``. docs/models.md lists these.
    """

    def __init__(self, in_channels: int | dict, out_channels: int, metadata: tuple,
                 heads: int = 1, negative_slope: float = 0.2, dropout: float = 0.0,
                 flow: str = "source_to_target"):
        super().__init__()
        node_types, relations = hetero.checked_metadata("HANConv", metadata)
        hetero.check_heads("HANConv", out_channels, heads)
        check_dropouts("HANConv", upto_one=True, dropout=dropout)
        self.in_channels = hetero.widths_per_type("HANConv", in_channels, node_types)
        self.out_channels, self.heads = out_channels, heads
        check_number("HANConv", "negative_slope", negative_slope)
        self.negative_slope, self.dropout = negative_slope, dropout
        self.metadata = (node_types, relations)
        self.flow = check_flow("HANConv", flow)
        # built in PyG's order, each constructor drawing as PyG's does, so that a seed gives
        # PyG's initial weights
        self.k_lin = torch.nn.Linear(out_channels, out_channels)
        self.q = torch.nn.Parameter(torch.empty(1, out_channels))
        self.proj = hetero.typed_linears(self.in_channels, out_channels)
        dim = out_channels // heads
        self.lin_src, self.lin_dst = torch.nn.ParameterDict(), torch.nn.ParameterDict()
        for r in relations:
            self.lin_src[hetero.parameter_key(r)] = torch.nn.Parameter(torch.empty(1, heads, dim))
            self.lin_dst[hetero.parameter_key(r)] = torch.nn.Parameter(torch.empty(1, heads, dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.proj.values():
            if not hetero.is_lazy(lin):
                lin.reset_parameters()
        for p in (*self.lin_src.values(), *self.lin_dst.values()):
            glorot(p)
        self.k_lin.reset_parameters()
        glorot(self.q)

    def forward(self, x_dict: dict, edge_index_dict,
                return_semantic_attention_weights: bool = False):
        hetero.flow_between_types("HANConv", check_flow("HANConv", self.flow))
        check_flags("HANConv", return_semantic_attention_weights=return_semantic_attention_weights)
        hetero.check_feature_dict(self, x_dict, self.proj)
        unknown = [t for t in x_dict if t not in self.proj]
        if unknown:
            raise ValueError(f"HANConv: x_dict holds the node types {unknown}, which have no "
                             f"projection (node types: {list(self.proj)})")
        counts = {t: x.size(0) for t, x in x_dict.items()}
        graphs = hetero.relation_graphs("HANConv", edge_index_dict, counts, self.metadata[1])
        h = {t: self.proj[t](x) for t, x in x_dict.items()}
        halves = self._score_halves(h, graphs)
        per_type: dict[str, list[Tensor]] = {t: [] for t in x_dict}
        for relation, graph in graphs.items():
            per_type[relation[2]].append(F.relu(self._attend(
                graph, h[relation[0]], halves[relation, "src"], halves[relation, "dst"])))
        out, beta = {}, {}
        for t, zs in per_type.items():
            out[t], beta[t] = self._semantic_attention(zs)
        return (out, beta) if return_semantic_attention_weights else out

    def _score_halves(self, h: dict, graphs: dict) -> dict:
        """Each relation's per-node score halves ``[N, H]``, keyed ``(relation, "src")`` and
        ``(relation, "dst")``: per node type, every vector that reads its nodes in one pass
        (``ops.head_dots``: no ``[N, H, D]`` products, forward or backward)."""
        halves = {}
        for t, rows in h.items():
            wanted = [(r, "src", self.lin_src) for r in graphs if r[0] == t] + \
                     [(r, "dst", self.lin_dst) for r in graphs if r[2] == t]
            if not wanted:
                continue
            dots = head_dots(rows, *[vectors[hetero.parameter_key(r)] for r, _, vectors in wanted])
            for (r, side, _), half in zip(wanted, dots.split(self.heads, dim=1), strict=True):
                halves[r, side] = half.contiguous()
        return halves

    def _attend(self, graph, src: Tensor, a_src: Tensor, a_dst: Tensor) -> Tensor:
        """One relation's GAT attention over its source rows ``src`` ``[N_src, C]``,
        ``[N_dst, C]`` (before the ReLU)."""
        rows = src.view(-1, self.heads, self.out_channels // self.heads)
        if self.dropout > 0 and self.training:
            score = F.leaky_relu(ops.sddmm(graph, a_src, a_dst, "add"), self.negative_slope)
            alpha = ops.dropout(ops.segment_softmax(graph, score), p=self.dropout)
            out = ops.spmm(graph, rows, alpha)
        else:
            out = ops.additive_attention(graph, a_src, a_dst, rows, self.negative_slope)
        return out.reshape(-1, self.out_channels)

    def _semantic_attention(self, zs: list[Tensor]) -> tuple[Tensor | None, Tensor | None]:
        """The relations' outputs into one type mixed by their semantic weights (PyG's
        ``group``): ``(out, beta)``, ``(None, None)`` without relations. Relation by
        relation, where PyG's stacks them: no ``[R, N, C]`` copy, nor its ``K z`` and
        weighted products, on top of the relations' own outputs."""
        if not zs:
            return None, None
        if zs[0].numel() == 0:  # a type without nodes: [0, C], still reading every relation
            return torch.stack(zs).view(0, zs[0].size(-1)), None
        score = torch.stack([(self.q * torch.tanh(self.k_lin(z)).mean(0)).sum(-1)
                             for z in zs]).view(-1)
        beta = torch.softmax(score, dim=0)
        out = beta[0] * zs[0]
        for b, z in zip(beta[1:], zs[1:], strict=True):
            out = out + b * z
        return out, beta

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.out_channels}, heads={self.heads})"
