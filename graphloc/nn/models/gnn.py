"""Model builders. ``GNN`` stacks any registered conv; later layers join the registry."""

from __future__ import annotations

import functools
import inspect
import warnings

import torch
from torch import Tensor

from graphloc.checks import check_choice, check_flags, check_int, is_int_at_least
from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv import GATConv, GCNConv, GINConv, SAGEConv
from graphloc.nn.conv._base import ConvModule, add_hop_ports, graph_explain_mask
from graphloc.nn.conv._utils import (
    as_graph,
    check_ball_sizes,
    check_dropouts,
    check_input,
    check_sizes,
    conv_hops,
    propagate_prefix,
    rows_within,
)
from graphloc.nn.conv.gcn import masked_gcn_norm
from graphloc.nn.conv.registry import CONVS, check_stack
from graphloc.nn.dropout import Dropout

_PRUNABLE = (GCNConv, SAGEConv, GATConv, GINConv)

#: activation name -> module class, for ``act=`` arguments
ACTIVATIONS = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "elu": torch.nn.ELU,
               "tanh": torch.nn.Tanh, "identity": torch.nn.Identity,
               "leaky_relu": torch.nn.LeakyReLU, "silu": torch.nn.SiLU, "selu": torch.nn.SELU,
               "celu": torch.nn.CELU, "prelu": torch.nn.PReLU, "mish": torch.nn.Mish,
               "sigmoid": torch.nn.Sigmoid, "softplus": torch.nn.Softplus}


def stack_hops(convs) -> int:
    """How far a stack of convs reaches: the sum of each conv's hops (``conv_hops``)."""
    # (a registered conv of another library's, reach unknown, counts one hop: full_graph's
    # locality check catches a wrong one; ChebConv(K=1) reaches 0)
    return sum(1 if hops is None else hops for hops in map(conv_hops, convs))


def make_activation(owner: str, act: str, act_kwargs: dict | None) -> torch.nn.Module:
    """``ACTIVATIONS[act](**act_kwargs)`` (PyG's ``BasicGNN`` argument: ELU's ``alpha``,
    say), or an error naming the owner and the arguments that do not fit."""
    check_choice(owner, "act", act, ACTIVATIONS)
    if act_kwargs is None:
        return ACTIVATIONS[act]()
    if not isinstance(act_kwargs, dict):
        raise ValueError(f"{owner}: act_kwargs must be a dict, got {act_kwargs!r}")
    try:
        return ACTIVATIONS[act](**act_kwargs)
    except TypeError as err:
        raise ValueError(f"{owner}: act_kwargs={act_kwargs!r} do not fit act={act!r} "
                         f"({err})") from None


def with_attention_dropout(owner: str, conv: str, attention_dropout, conv_kwargs: dict) -> dict:
    """``conv_kwargs`` with the attention convs' ``dropout`` set to ``attention_dropout``
    (None: left to the conv); refused for a conv without attention weights."""
    if attention_dropout is None:
        return conv_kwargs
    check_dropouts(owner, attention_dropout=attention_dropout)
    if "dropout" not in inspect.signature(CONVS[conv]).parameters and \
            not getattr(CONVS[conv], "averages_last_layer", False):
        raise ValueError(f"{owner}: attention_dropout drops attention weights (gat, gatv2, "
                         f"transformer); conv {conv!r} has none")
    return {**conv_kwargs, "dropout": attention_dropout}


def _last_layer_kwargs(owner: str, conv: str, conv_kwargs: dict,
                       out_heads: int | None = None) -> dict:
    """The output conv's arguments: a multi-head attention conv averages its heads there
    (``concat=False``, each head ``out_channels`` wide), as GAT's output layer and PyG's
    ``GAT`` model (which overrides a ``concat`` given for the stack there too); with
    ``out_heads``, that many heads (GAT's own output layer: 1 head on Cora, 8 on PubMed)."""
    multi_head = getattr(CONVS[conv], "averages_last_layer", False)
    if out_heads is not None:
        if not multi_head:
            raise ValueError(f"{owner}: out_heads sets the heads of a multi-head output conv "
                             f"(gat, gatv2, transformer); conv {conv!r} has none")
        check_sizes(owner, out_heads=out_heads)
        return {**conv_kwargs, "concat": False, "heads": out_heads}
    return {**conv_kwargs, "concat": False} if multi_head else conv_kwargs



def _is_sparse_matrix(structure) -> bool:
    return isinstance(structure, Tensor) and structure.layout != torch.strided

class GNN(ModelCapabilities, torch.nn.Module):
    """``num_layers`` convs of one registered kind with norm, activation, dropout and
    optional residual connections between them.

    Args:
        conv (str): a name in ``CONVS`` ("gcn", "sage", "gat", "gin", "cheb", ...).
        in_channels, hidden_channels, out_channels (int): widths; the first conv maps
            in -> hidden, the last hidden -> out (a single layer maps in -> out).
        num_layers (int): number of convs, at least 1.
        dropout (float, default 0.0): dropout after each hidden layer's activation.
        act (str, default "relu"): activation after each hidden layer.
        norm (None, "batch" or "layer"): normalisation after each hidden conv.
        residual (bool, default False): add the layer input to each hidden -> hidden conv.
        act_kwargs (dict, optional): the activation's arguments (``{"alpha": 0.2}`` for
            an ELU), as PyG's ``BasicGNN``.
        out_heads (int, optional): the heads of a multi-head output conv (default: the
            hidden convs' ``heads``, as PyG's ``GAT`` model; GAT's paper and the official
            LAGAT use 1).
        attention_dropout (float, optional): the attention convs' own ``dropout`` (on the
            attention weights: gat, gatv2, transformer), which ``dropout`` (the features')
            leaves at 0, as PyG's ``GAT`` model does; GAT's paper uses 0.6.
        **conv_kwargs: passed to every conv (e.g. ``K=3`` for cheb, ``aggr="max"``).
            Multi-head convs (gat, gatv2, transformer; ``heads``, default 4) as PyG's ``GAT``
            model: the hidden convs concatenate their heads (``heads`` must divide
            ``hidden_channels``), the last one averages them. PyG's ``GAT`` defaults to
            one head, as the City-Networks baseline runs it: pass ``heads=1`` for that model.

    Shapes:
        input: ``[N, in_channels]`` and a ``Graph`` or ``edge_index``.
        output: ``[N, out_channels]``.
    """

    def __init__(self, conv: str, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, dropout: float = 0.0, act: str = "relu",
                 norm: str | None = None, residual: bool = False,
                 act_kwargs: dict | None = None, out_heads: int | None = None,
                 attention_dropout: float | None = None, **conv_kwargs):
        super().__init__()
        check_stack("GNN", conv, dropout, in_channels=in_channels,
                    hidden_channels=hidden_channels, out_channels=out_channels,
                    num_layers=num_layers)
        conv_kwargs = with_attention_dropout("GNN", conv, attention_dropout, conv_kwargs)
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        check_flags("GNN", residual=residual)
        check_choice("GNN", "norm", norm, (None, "batch", "layer"))
        self.act = make_activation("GNN", act, act_kwargs)
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.conv_name, self.residual = conv, residual
        self.in_channels = in_channels
        layer_kwargs = [conv_kwargs] * (num_layers - 1) + \
            [_last_layer_kwargs("GNN", conv, conv_kwargs, out_heads)]
        self.convs = torch.nn.ModuleList(
            CONVS[conv](i, o, **kwargs)
            for i, o, kwargs in zip(widths[:-1], widths[1:], layer_kwargs, strict=True))
        make_norm = {None: lambda w: torch.nn.Identity(), "batch": torch.nn.BatchNorm1d,
                     "layer": torch.nn.LayerNorm}[norm]
        self.norms = torch.nn.ModuleList(make_norm(w) for w in widths[1:-1])
        self.dropout = Dropout(dropout)
        add_hop_ports(self)

    def reset_parameters(self) -> None:
        for module in [*self.convs, *self.norms]:
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def forward(self, x: Tensor, graph, edge_weight: Tensor | None = None,
                edge_attr: Tensor | None = None, batch: Tensor | None = None,
                batch_size: int | None = None,
                num_sampled_nodes_per_hop: list[int] | None = None,
                num_sampled_edges_per_hop: list[int] | None = None) -> Tensor:
        """PyG's ``BasicGNN`` call: ``edge_weight`` goes to convs that take edge weights
        (gcn, cheb, graph), ``edge_attr`` to convs with edge features (gat, gine, ...);
        a conv kind without them ignores them with a warning (PyG's ignores them
        silently). ``batch`` and ``batch_size`` are accepted: graphloc's norms are per
        node and do not read them. ``num_sampled_*_per_hop`` (a NeighborLoader's
        counts, with ``graph`` an ``edge_index``) trim each layer's input to the nodes
        and edges it still needs, as PyG's ``trim_to_layer``: the output has the
        rows of the last layer's trimmed input."""
        self._check_width(x)
        edge_values = self._edge_values(edge_weight, edge_attr)
        trim = _LayerTrim.of(graph, x.size(0), num_sampled_nodes_per_hop,
                             num_sampled_edges_per_hop, edge_weight, edge_attr)
        if trim is None and not _is_sparse_matrix(graph):
            graph = as_graph(graph, x)  # wrap a raw edge_index once for all layers
        # (a torch.sparse adj_t goes to each conv as it is, as PyG's BasicGNN passes it: a
        # conv reads its entries' values as edge weights)
        for i, conv in enumerate(self.convs):
            if trim is not None:
                x, graph, edge_values = trim.to_layer(i, x, edge_values)
            h = conv(x, graph, **edge_values)
            if i == len(self.convs) - 1:
                return h
            h = self.dropout(self.act(self.norms[i](h)))
            x = x + h if self.residual and h.shape == x.shape else h

    def _edge_values(self, edge_weight: Tensor | None, edge_attr: Tensor | None) -> dict:
        """The keyword arguments of each conv call: those of ``edge_weight`` and
        ``edge_attr`` its kind takes."""
        given = {"edge_weight": edge_weight, "edge_attr": edge_attr}
        takes = _edge_arguments(type(self.convs[0]))
        for name, value in given.items():
            if value is not None and name not in takes:
                warnings.warn(f"GNN({self.conv_name!r}): its convs take no {name}; ignored "
                              "(as PyG's BasicGNN ignores it)", stacklevel=3)
        return {name: value for name, value in given.items()
                if name in takes and value is not None}

    def _check_width(self, x: Tensor) -> None:
        """The input width, checked here for every conv kind (a GINConv's network is the
        user's, so the conv cannot check it); the convs check the rest."""
        if isinstance(x, Tensor) and x.dim() >= 2 and self.in_channels != -1 \
                and x.size(-1) != self.in_channels:
            raise ValueError(f"GNN expects x of shape [N, {self.in_channels}], got "
                             f"{list(x.shape)}")

    def forward_within(self, x: Tensor, graph: Graph, ball_sizes: list[int]) -> Tensor:
        """``forward(x, graph)[:ball_sizes[0]]`` computing each layer only where the
        output still reads it: the nodes are ordered by hop distance from the first
        ``ball_sizes[0]`` of them (in-edges), ``ball_sizes[r]`` within r hops and all of
        them within R = ``len(ball_sizes) - 1``, so conv i of L needs its output for the
        first ``ball_sizes[min(L - 1 - i, R)]`` nodes only.
        Saves about 2/3 of a deep model's work on a road graph (influence's packed balls);
        needs ``prunes_layers``."""
        if not self.prunes_layers:
            raise ValueError(f"forward_within needs gcn, sage, gat or gin convs without a "
                             f"cached normalisation or edge features; got {self.convs[0]}")
        check_ball_sizes(ball_sizes, x.size(0))
        graph = as_graph(graph, x)
        for i, conv in enumerate(self.convs):
            rows = rows_within(ball_sizes, len(self.convs) - 1 - i)
            if isinstance(conv, GCNConv):
                h = conv.forward_prefix(x, graph, rows)
            else:  # SAGE, GAT, GIN: the in-edges of the first rows, as a bipartite graph
                h = conv((x, x[:rows]), graph.dst_prefix(rows, x.size(0)))
            if i == len(self.convs) - 1:
                return h
            h = self.dropout(self.act(self.norms[i](h)))
            x = x[:rows] + h if self.residual and h.size(1) == x.size(1) else h

    @property
    def prunes_layers(self) -> bool:
        """Whether ``forward_within`` applies: every conv a one-hop kind without a cached
        normalisation or edge features."""
        return all(isinstance(c, _PRUNABLE) and not getattr(c, "cached", False)
                   and getattr(c, "edge_dim", None) is None for c in self.convs)

    @property
    def graphloc_hops(self) -> int:
        """How far a node's output reaches (for ``graphloc.influence``'s full-graph mode): a
        conv's own ``graphloc_hops`` where it has one (TAGConv and SGConv: K), a ChebConv
        with K terms K - 1 hops, every other conv one. (A registered TAGConv counted one hop
        until 2026-12-04: full_graph refused the stack as not being that local.)"""
        return stack_hops(self.convs)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.conv_name}, layers={len(self.convs)}, "
                f"{self.convs[0].__repr__()} ... {self.convs[-1].__repr__()})")


class DAGNN(ModelCapabilities, ConvModule):
    r"""Deep Adaptive Graph Neural Network of `Liu et al., "Towards Deeper Graph Neural
    Networks" (KDD 2020) <https://arxiv.org/abs/2007.09296>`_: transformation decoupled
    from propagation.

    .. math::
        Z = \mathrm{Lin}_2(\mathrm{drop}(\mathrm{ReLU}(\mathrm{Lin}_1(\mathrm{drop}(X))))),
        \quad H_k = \hat A^k Z, \quad
        \mathrm{out}_i = \sum_{k=0}^{K} \sigma(H_{k,i} \cdot w + b)\, H_{k,i}

    with :math:`\hat A = D^{-1/2}(A + I)D^{-1/2}` and one gate vector :math:`w \in R^C`
    shared by all hops (independent sigmoid gates, not a softmax over hops). The hops are
    summed as they are computed, so memory is O(N·C) for any K, not the paper's
    ``[N, K + 1, C]`` stack. Returns logits (apply ``log_softmax`` for the paper's output).

    Args:
        in_channels, hidden_channels, out_channels (int): MLP widths (out = classes C).
        K (int, default 10): propagation steps, at least 0 (the official default; its
            scripts pass 5 to 20 per dataset).
        dropout (float, default 0.5): dropout before each MLP layer (the official default;
            its scripts pass 0.5 or 0.8 per dataset, ``docs/models.md``).

    PyG's explainers see the propagation as one message-passing layer, as the official
    ``Prop`` (a PyG ``MessagePassing``) is: an explainer's edge mask scales every step's
    messages (the self-loops weighing 1), and ``get_embeddings`` reads the output, which is
    ``Prop``'s. Unlike the official model, ``get_num_hops`` counts K, not 1
    (``add_hop_ports``), so PGExplainer keeps a node's K-hop edges.
    """

    pyg_aggr = None  # takes no aggr: no PyG twin

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)
    prunes_layers = True  # forward_within: influence runs each step only where it is read

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, K: int = 10,
                 dropout: float = 0.5):
        super().__init__()
        check_sizes("DAGNN", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels)
        check_dropouts("DAGNN", dropout=dropout)
        self.K = check_int(K, "K", 0)  # 1.5 or None failed in range(), naming nothing
        self.lin1 = torch.nn.Linear(in_channels, hidden_channels)
        self.lin2 = torch.nn.Linear(hidden_channels, out_channels)
        self.gate = torch.nn.Linear(out_channels, 1)
        self.dropout = Dropout(dropout)
        add_hop_ports(self)

    def reset_parameters(self) -> None:
        for lin in (self.lin1, self.lin2, self.gate):
            lin.reset_parameters()

    def gates(self, h: Tensor) -> Tensor:
        """The hop gates ``sigmoid(h w + b)``, ``[N, 1]``."""
        return torch.sigmoid(self.gate(h))

    def forward(self, x: Tensor, graph) -> Tensor:
        return self._forward(x, as_graph(graph, x), None)

    def forward_within(self, x: Tensor, graph: Graph, ball_sizes: list[int]) -> Tensor:
        """``forward(x, graph)[:ball_sizes[0]]``, propagation k only on the nodes within
        ``K - k`` hops (nodes ordered by hop distance, as ``GNN.forward_within``)."""
        check_ball_sizes(ball_sizes, x.size(0))
        return self._forward(x, as_graph(graph, x), ball_sizes)

    def _forward(self, x: Tensor, graph: Graph, ball_sizes) -> Tensor:
        check_input(self, x, self.lin1.in_features)
        h = self.lin2(self.dropout(torch.relu(self.lin1(self.dropout(x)))))
        mask = graph_explain_mask(self, graph)
        norm_graph, weight = masked_gcn_norm(graph, True, False, None, x.dtype,
                                             mask)  # cached (the mask multiplied after)
        roots = rows_within(ball_sizes, 0)  # None: every node
        out = self.gates(h[:roots]) * h[:roots]
        for k in range(self.K):
            h = propagate_prefix(norm_graph, weight, h, rows_within(ball_sizes, self.K - 1 - k))
            out = out + self.gates(h[:roots]) * h[:roots]
        return out

    @property
    def graphloc_hops(self) -> int:
        return self.K

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.lin1.in_features}, "
                f"{self.lin2.out_features}, K={self.K})")


@functools.cache
def _edge_arguments(conv_class: type) -> frozenset[str]:
    """Which of ``edge_weight`` and ``edge_attr`` a conv class's ``forward`` takes."""
    parameters = inspect.signature(conv_class.forward).parameters
    return frozenset(name for name in ("edge_weight", "edge_attr") if name in parameters)


class _LayerTrim:
    """PyG's ``trim_to_layer`` for a NeighborLoader batch: layer i drops the nodes and
    edges sampled at the last i hops (listed last by the loader), which no output of
    the remaining layers reads."""

    def __init__(self, edge_index: Tensor, nodes_per_hop: list[int],
                 edges_per_hop: list[int]):
        self.edge_index, self.nodes, self.edges = edge_index, nodes_per_hop, edges_per_hop

    @classmethod
    def of(cls, graph, num_nodes: int, nodes_per_hop, edges_per_hop, edge_weight, edge_attr):
        if nodes_per_hop is None and edges_per_hop is None:
            return None
        if nodes_per_hop is None or edges_per_hop is None:
            raise ValueError("num_sampled_nodes_per_hop and num_sampled_edges_per_hop go "
                             "together; got only one of them")
        if not isinstance(graph, Tensor) or graph.is_sparse or graph.dim() != 2:
            raise TypeError("trimming by num_sampled_*_per_hop needs the graph as an "
                            f"edge_index tensor, got {type(graph).__name__}")
        if edge_weight is not None and edge_attr is not None:
            raise NotImplementedError("trimming both edge_weight and edge_attr is not "
                                      "supported (nor by PyG's trim_to_layer)")
        if len(nodes_per_hop) != len(edges_per_hop) + 1:
            raise ValueError(f"num_sampled_nodes_per_hop has {len(nodes_per_hop)} entries, "
                             f"num_sampled_edges_per_hop {len(edges_per_hop)}: a loader "
                             "gives one more node count (the seeds) than edge counts")
        for name, counts, total in (("num_sampled_nodes_per_hop", nodes_per_hop, num_nodes),
                                    ("num_sampled_edges_per_hop", edges_per_hop,
                                     graph.size(1))):
            if any(not is_int_at_least(c, 0) for c in counts) or sum(counts) != total:
                raise ValueError(f"{name} must be counts >= 0 summing to the batch's "
                                 f"{total} {name.split('_')[2]} (as a loader gives them), "
                                 f"got {list(counts)}")
        return cls(graph, list(nodes_per_hop), list(edges_per_hop))

    def to_layer(self, layer: int, x: Tensor, edge_values: dict):
        """Layer ``layer``'s input: ``x`` (the previous layer's output) and the edge values
        cut to the nodes and edges still needed, and the graph on them."""
        if layer > 0 and layer < len(self.nodes):
            x = x.narrow(0, 0, x.size(0) - self.nodes[-layer])
            self.edge_index = self.edge_index.narrow(
                1, 0, self.edge_index.size(1) - self.edges[-layer])
            edge_values = {name: value.narrow(0, 0, self.edge_index.size(1))
                           for name, value in edge_values.items()}
        return x, Graph(self.edge_index, num_nodes=x.size(0)), edge_values
