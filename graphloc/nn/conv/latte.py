"""One LATTE layer (Tran et al., "Layer-stacked Attention for Heterogeneous Network
Embedding"; official code JonnyTran/LATTE, ``conv.py``, ``LATTEConv``): attention over each
node's neighbours within each (meta) relation, then attention over the node's relations.

Relations are meta-paths: tuples of first-order relations ``(src_type, name, dst_type)``
listed from the destination ("head") end, so ``path[0][2]`` is the type that receives and
``path[-1][0]`` the type that sends; ``(("author", "writes", "paper"), ("paper", "by",
"author"))`` carries author -> paper -> author... read backwards: a paper's authors' papers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import ops
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule
from graphloc.nn.dropout import Dropout

MetaPath = tuple[tuple[str, str, str], ...]


def path_src(path: MetaPath) -> str:
    """The node type a meta-path's messages leave from (its tail)."""
    return path[-1][0]


def path_dst(path: MetaPath) -> str:
    """The node type a meta-path's messages arrive at (its head)."""
    return path[0][2]


def path_name(path: MetaPath) -> str:
    """A module-dict key for a meta-path ("src.name.dst" per relation, joined by "|",
    without the characters ``nn.ModuleDict`` refuses)."""
    return "|".join("-".join(r) for r in path).replace(".", "_")


def _xavier(weight: Tensor, gain: float) -> None:
    torch.nn.init.xavier_normal_(weight, gain=gain)


class LATTEConv(ConvModule):
    """Relation-level and neighbour-level attention of one LATTE layer.

    For each node u of type tau, with left and right projections l_u = W^L_tau h_u and
    r_v = W^R_tau h_v split into ``heads`` heads:

    - per meta-path m into tau and head k: e(u, v) = kappa_m * LeakyReLU_0.2(<a^L_mk,
      l_uk> + <a^R_mk, r_vk>) over the m-neighbours v of u, softmax over them (attention
      dropout after it), z_um = concat_k sum_v alpha(u, v) r_vk;
    - beta_u = softmax(W^beta_tau h_u + b) over tau's meta-paths and "self";
    - h'_u = dropout(ReLU(sum_m beta_um z_um + beta_u,self l_u)).

    kappa_m (the official "sharpening", a learnable scalar per meta-path) starts at 1.
    A meta-path with no edges at u contributes z = 0 and keeps its share of beta, as the
    official code.

    Args:
        in_channels (int or dict): input width (per node type).
        out_channels (int): output width, divisible by ``heads``.
        node_types (list): the node types.
        paths (list): the meta-paths this layer attends over.
        heads (int, default 2), attn_dropout (default 0.2), dropout (default 0.2): the
            official defaults.
    """

    pyg_aggr = None  # takes no aggr: no PyG twin

    def __init__(self, in_channels, out_channels: int, node_types: list[str],
                 paths: list[MetaPath], heads: int = 2, attn_dropout: float = 0.2,
                 dropout: float = 0.2):
        super().__init__()
        check_heads(out_channels, heads)
        widths = in_channels if isinstance(in_channels, dict) else \
            dict.fromkeys(node_types, in_channels)
        self.node_types, self.paths, self.heads = list(node_types), list(paths), heads
        self.out_channels = out_channels
        relu, leaky = torch.nn.init.calculate_gain("relu"), \
            torch.nn.init.calculate_gain("leaky_relu", 0.2)
        self.left = torch.nn.ModuleDict({t: torch.nn.Linear(widths[t], out_channels)
                                         for t in node_types})
        self.right = torch.nn.ModuleDict({t: torch.nn.Linear(widths[t], out_channels)
                                          for t in node_types})
        d = out_channels // heads
        self.att_left = torch.nn.ParameterDict({path_name(p): torch.nn.Parameter(
            torch.empty(heads, d)) for p in paths})
        self.att_right = torch.nn.ParameterDict({path_name(p): torch.nn.Parameter(
            torch.empty(heads, d)) for p in paths})
        self.sharpening = torch.nn.ParameterDict({path_name(p): torch.nn.Parameter(
            torch.ones(())) for p in paths})
        self.beta = torch.nn.ModuleDict({t: torch.nn.Linear(
            widths[t], len(self.paths_into(t)) + 1) for t in node_types})
        for t in node_types:
            _xavier(self.left[t].weight, relu)
            _xavier(self.right[t].weight, relu)
            _xavier(self.beta[t].weight, 1.0)
        for p in self.att_left.values():
            _xavier(p, leaky)
        for p in self.att_right.values():
            _xavier(p, leaky)
        self.attn_dropout = Dropout(attn_dropout)
        self.dropout = Dropout(dropout)

    def paths_into(self, node_type: str) -> list[MetaPath]:
        return [p for p in self.paths if path_dst(p) == node_type]

    def scores(self, path: MetaPath, left: dict, right: dict, graph: Graph) -> Tensor:
        """[E, heads] pre-softmax scores e(u, v) of ``path``'s edges (graph edge order)."""
        name, h = path_name(path), self.heads
        dst, src = path_dst(path), path_src(path)
        s_left = (left[dst].view(-1, h, self.out_channels // h) * self.att_left[name]).sum(-1)
        s_right = (right[src].view(-1, h, self.out_channels // h)
                   * self.att_right[name]).sum(-1)
        raw = s_left[graph.edge_index[1]] + s_right[graph.edge_index[0]]
        return self.sharpening[name] * F.leaky_relu(raw, 0.2)

    def forward(self, h: dict, graphs: dict) -> tuple[dict, dict, dict]:
        """``h``: node type -> [N_tau, in]; ``graphs``: meta-path -> Graph (source type's
        nodes to destination type's). Returns (node type -> [N_tau, out], meta-path ->
        attention [E, heads] before dropout in the graph's edge order, node type -> beta
        [N_tau, len(paths_into(tau)) + 1], "self" last)."""
        for path in self.paths:
            if path not in graphs:
                raise ValueError(f"no graph for the meta-path {path!r}")
        left = {t: self.left[t](h[t]) for t in self.node_types}
        right = {t: self.right[t](h[t]) for t in self.node_types}
        attention, out, betas = {}, {}, {}
        for t in self.node_types:
            into = self.paths_into(t)
            beta = betas[t] = self.beta[t](h[t]).softmax(-1)
            total = beta[:, -1:] * left[t]  # the self term reads the left projection
            for i, path in enumerate(into):
                graph = graphs[path]
                alpha = ops.segment_softmax(graph, self.scores(path, left, right, graph))
                attention[path] = alpha
                src = right[path_src(path)].view(-1, self.heads,
                                                  self.out_channels // self.heads)
                z = ops.spmm(graph, src, self.attn_dropout(alpha)).reshape(-1,
                                                                           self.out_channels)
                total = total + beta[:, i:i + 1] * z
            out[t] = self.dropout(F.relu(total))
        return out, attention, betas

    def link_logits(self, path: MetaPath, h: dict, src: Tensor, dst: Tensor) -> Tensor:
        """The proximity loss's link scores kappa_m * LeakyReLU(max_k [<a^L, l_u> +
        <a^R, r_v>]) for the pairs (src[i] -> dst[i]) of ``path``'s end types."""
        name, k = path_name(path), self.heads
        width = self.out_channels // k
        left = self.left[path_dst(path)](h[path_dst(path)][dst]).view(-1, k, width)
        right = self.right[path_src(path)](h[path_src(path)][src]).view(-1, k, width)
        raw = (left * self.att_left[name]).sum(-1) + (right * self.att_right[name]).sum(-1)
        return self.sharpening[name] * F.leaky_relu(raw.max(1).values, 0.2)


def check_heads(out_channels: int, heads: int) -> None:
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ValueError(f"heads must be an integer >= 1, got {heads!r}")
    if out_channels % heads:
        raise ValueError(f"hidden_channels ({out_channels}) must be divisible by heads "
                         f"({heads})")

