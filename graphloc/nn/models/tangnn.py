"""TANGNN, the whole model: a stack of ``nn.conv.tangnn.TANGNNLayer`` (top-m attention
plus neighbourhood aggregation; graphloc's reading of the paper is documented there), and
``TANGNNReleased``, the network of the released code (its base and LC files), and
``TANGNNReleasedPooled`` and ``TANGNNReleasedFLC``, the networks of its NAI, TAI and FLC
files."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.graph import Graph
from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import (
    as_graph,
    check_dropouts,
    check_input,
    check_sizes,
    graph_of_rows,
)
from graphloc.nn.conv.sage import SAGEConv
from graphloc.nn.conv.tangnn import TANGNNLayer, sample_edges_per_node
from graphloc.nn.dropout import Dropout


class TANGNN(ModelCapabilities, torch.nn.Module):
    """TANGNN: ``num_layers`` :class:`TANGNNLayer` s and a linear classifier on the last
    layer's output (``variant="base"``) or on all layers' outputs concatenated
    (``variant="lc"``, the paper's layer-concatenation variant, often its best).

    Deviations from the released code, whose network is :class:`TANGNNReleased` (the
    module docstring and ``docs/models.md``): per-node
    top-m by cosine similarity in a learned projection rather than one global set chosen by
    an auxiliary vector; the attention output is used, not discarded; no Transformer over
    all N nodes (O(N^2)); one mean SAGEConv per layer where the code has a two-layer SAGE
    block; neighbour sampling is vectorised, not a Python loop. Also listed there: the code
    keeps at most 5 out-edges per source (so a node's in-neighbours are unbounded) and draws
    them in evaluation too, where graphloc samples at most ``sample_size`` in-edges per
    destination in training only; the code's later blocks sample 10 (its default), graphloc
    ``sample_size`` everywhere; the code passes ``[SAGE, top-m]`` on unprojected (2h wide)
    and reads out through an MLP and ``log_softmax``, graphloc projects each layer to h
    (ReLU, dropout) and returns the logits of one Linear. Defaults follow the code:
    m = 20 (its base model on Cora; 30 for LC), dropout 0.3, 5 sampled neighbours.

    Args:
        in_channels, hidden_channels, out_channels (int): widths.
        num_layers (int): TANGNN layers, at least 1.
        m (int, default 20), heads (int, default 1), sample_size (int, default 5): per layer.
        dropout (float, default 0.3): after each layer.
        variant (str, default "base"): "base" or "lc".
        **search: ``mode``, ``exact_max_nodes``, ``probes`` of the top-m search.
    """

    #: nodes interact beyond the graph's edges: influence is measured one seed at a time
    graphloc_global = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, m: int = 20, heads: int = 1, sample_size: int | None = 5,
                 dropout: float = 0.3, variant: str = "base", **search):
        super().__init__()
        check_sizes("TANGNN", in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers, m=m, heads=heads,
                    sample_size=sample_size)
        check_dropouts("TANGNN", dropout=dropout)
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if variant not in ("base", "lc"):
            raise ValueError(f"variant must be 'base' or 'lc', got {variant!r}")
        self.variant = variant
        widths = [in_channels] + [hidden_channels] * num_layers
        self.layers = torch.nn.ModuleList(
            TANGNNLayer(i, o, m=m, heads=heads, sample_size=sample_size, dropout=dropout,
                        **search) for i, o in zip(widths[:-1], widths[1:], strict=True))
        read_width = hidden_channels * (num_layers if variant == "lc" else 1)
        self.classifier = torch.nn.Linear(read_width, out_channels)

    def reset_parameters(self) -> None:
        for module in (*self.layers, self.classifier):
            module.reset_parameters()

    def forward(self, x: Tensor, graph) -> Tensor:
        graph = as_graph(graph, x)
        outputs = []
        for layer in self.layers:
            x = layer(x, graph)
            outputs.append(x)
        return self.classifier(torch.cat(outputs, 1) if self.variant == "lc" else x)


def _released_top_m(h: Tensor, a: Tensor, m: int) -> Tensor:
    """The released ``top_m_sampling`` (base, LC, NAI and TAI files): the ``min(m, N)``
    vertices closest in angle to ``a`` after a ReLU, ``a`` all ones where ``h`` is not as
    wide; equal scores in ``torch.topk``'s order, as released."""
    a = a if h.size(1) == a.size(0) else h.new_ones(h.size(1), 1)
    score = F.normalize(F.relu(h), dim=1) @ F.normalize(a, dim=0)
    return score.view(-1).topk(min(m, h.size(0))).indices


class _SAGEBlock(torch.nn.Module):
    """The released ``GraphSAGENet``: two mean SAGEConvs on one draw of at most
    ``sample_size`` out-edges per source, ReLU after each, dropout between them."""

    def __init__(self, in_channels: int, hidden_channels: int, sample_size: int | None,
                 dropout: float):
        super().__init__()
        self.conv1 = SAGEConv(in_channels, hidden_channels)
        self.conv2 = SAGEConv(hidden_channels, hidden_channels)
        self.dropout = Dropout(dropout)
        self.sample_size = sample_size

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        if self.sample_size is not None:  # drawn in evaluation too, as released
            graph = sample_edges_per_node(graph, self.sample_size, "out")
        h = self.dropout(F.relu(self.conv1(x, graph)))
        return F.relu(self.conv2(h, graph))


class _Widening(torch.nn.Module):
    """The released ``DimensionAdjustmentLayer``: Linear, ReLU, Linear, ReLU."""

    def __init__(self, in_channels: int, middle: int, out_channels: int):
        super().__init__()
        self.fc1 = torch.nn.Linear(in_channels, middle)
        self.fc2 = torch.nn.Linear(middle, out_channels)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.fc2(F.relu(self.fc1(x))))


class _EncoderLayer(torch.nn.Module):
    """The released ``TransformerLayer``: post-LN self-attention and a 4x ReLU FFN."""

    def __init__(self, channels: int, heads: int):
        super().__init__()
        self.multihead_attn = torch.nn.MultiheadAttention(channels, heads, batch_first=True)
        self.layer_norm1 = torch.nn.LayerNorm(channels)
        self.feed_forward = torch.nn.Sequential(
            torch.nn.Linear(channels, 4 * channels), torch.nn.ReLU(),
            torch.nn.Linear(4 * channels, channels))
        self.layer_norm2 = torch.nn.LayerNorm(channels)

    def forward(self, x: Tensor) -> Tensor:
        # need_weights=False: the same output without an N x N weight matrix kept
        attended, _ = self.multihead_attn(x, x, x, need_weights=False)
        x = self.layer_norm1(attended + x)
        return self.layer_norm2(self.feed_forward(x) + x)


class _Encoder(torch.nn.Module):
    """The released ``MultiLayerTransformer`` (one layer but in the FLC file), its name
    kept for loading."""

    def __init__(self, channels: int, heads: int, num_layers: int = 1):
        super().__init__()
        self.layers = torch.nn.ModuleList(_EncoderLayer(channels, heads)
                                          for _ in range(num_layers))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class TANGNNReleased(ModelCapabilities, torch.nn.Module):
    r"""TANGNN as the released code computes it (``ejwww/TANGNN``, files ``TANGNN/TANGNN``
    for ``variant="base"`` and ``TANGNN/TANGNN-LC`` for ``"lc"``, class ``CustomGNN``):
    the network to run where a result must be the paper's own model. :class:`TANGNN` is
    graphloc's reading of the paper's text instead (per-node top-m attention).

    Layer :math:`i` with input :math:`h` (the features first, then 2h wide):

    * :math:`s = \mathrm{SAGE}_2(\mathrm{drop}(\mathrm{SAGE}_1(h)))` (ReLU after each), a
      two-layer mean GraphSAGE on one draw of at most ``sample_size`` out-edges per
      source (``later_sample_size`` after the first layer: the released later blocks take
      their class default, 10), redrawn at every call, evaluation included;
    * the m vertices of largest :math:`\cos(\mathrm{ReLU}(h_v), a)`, one set for all
      nodes; :math:`a` is the learned ``a`` where :math:`h` is hidden wide and all ones
      otherwise (so from the second layer on, and at the first unless
      ``in_channels == hidden_channels``), as released;
    * their rows of :math:`h` through ``dimension_adjustments[i]`` (Linear, ReLU, Linear,
      ReLU), tiled over the nodes (node v gets selected vertex v mod m);
    * the next input :math:`[s \Vert \text{tiled}]`, 2h wide.

    Readout: ``mlp`` (Linear, ReLU, Linear) on the last layer's 2h features (base), or on
    the concatenated outputs of a post-LN Transformer layer over all N nodes as one
    sequence, run on ``embedding_adjustment`` of each layer's 2h features (LC; O(N^2)
    time, as released). Returns logits: the released model returns their
    ``log_softmax``, which ``graphloc.train``'s cross-entropy applies itself.

    The released module names, so its saved weights load as they are; that includes the
    modules the released code builds and never runs (``final_lin``, the base variant's
    Transformer layers and ``embedding_adjustment``, the second ``dimension_adjustments``
    entry of every later layer). Listed differences (``docs/models.md``): LC's readout
    takes ``num_layers * hidden`` features (the released one takes 2 x hidden, so it runs
    with 2 layers only); dropout masks and edge samples are graphloc's draws.

    Args:
        in_channels, hidden_channels, out_channels (int): widths.
        num_layers (int, default 2): layers, at least 1.
        m (int, default 20): selected vertices (the released base model's on Cora; its LC
            model uses 30, ``build_model("tangnn-released-lc")``'s default).
        heads (int, default 1): the Transformer's heads (LC).
        sample_size (int or None, default 5): out-edges per source in the first layer;
            None keeps every edge.
        later_sample_size (int or None, default 10): the same for the later layers.
        dropout (float, default 0.3): between each block's two SAGEConvs.
        variant (str, default "base"): "base" or "lc".
    """

    #: one global set of vertices reaches every node: influence runs one seed at a time
    graphloc_global = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, m: int = 20, heads: int = 1,
                 sample_size: int | None = 5, later_sample_size: int | None = 10,
                 dropout: float = 0.3, variant: str = "base"):
        super().__init__()
        check_sizes("TANGNNReleased", optional=("sample_size", "later_sample_size"),
                    in_channels=in_channels, hidden_channels=hidden_channels,
                    out_channels=out_channels, num_layers=num_layers, m=m, heads=heads,
                    sample_size=sample_size, later_sample_size=later_sample_size)
        check_dropouts("TANGNNReleased", dropout=dropout)
        if variant not in ("base", "lc"):
            raise ValueError(f"TANGNNReleased: variant must be 'base' or 'lc', got {variant!r}")
        _check_heads("TANGNNReleased", hidden_channels, heads)
        self.in_channels, self.m, self.variant = in_channels, m, variant
        hidden, wide = hidden_channels, 2 * hidden_channels
        self.a = torch.nn.Parameter(torch.randn(hidden, 1))
        self.graphsage_layers = torch.nn.ModuleList(
            _SAGEBlock(in_channels if i == 0 else wide, hidden,
                       sample_size if i == 0 else later_sample_size, dropout)
            for i in range(num_layers))
        self.transformer_layers = torch.nn.ModuleList(_Encoder(hidden, heads)
                                                      for _ in range(num_layers))
        self.embedding_adjustment = torch.nn.Linear(wide, hidden)
        # the released list: one for the first layer, two per later layer (entry i used)
        widths = [in_channels] + [wide] * (2 * (num_layers - 1))
        self.dimension_adjustments = torch.nn.ModuleList(
            _Widening(w, 2 * w if variant == "base" else wide, hidden) for w in widths)
        self.final_lin = torch.nn.Linear(wide, out_channels)  # built, never run (released)
        read_width = wide if variant == "base" else num_layers * hidden
        self.mlp = torch.nn.Sequential(torch.nn.Linear(read_width, wide), torch.nn.ReLU(),
                                       torch.nn.Linear(wide, out_channels))
        self.out_channels = out_channels

    def forward(self, x: Tensor, graph) -> Tensor:
        check_input(self, x, self.in_channels)
        graph = graph_of_rows(graph, x)
        if x.size(0) == 0:  # no vertex to select or tile
            return x.new_zeros(0, self.out_channels)
        tile = torch.arange(x.size(0), device=x.device)
        outputs = []
        for i, block in enumerate(self.graphsage_layers):
            picked = self.dimension_adjustments[i](x[_released_top_m(x, self.a, self.m)])
            x = torch.cat([block(x, graph), picked[tile % picked.size(0)]], dim=1)
            if self.variant == "lc":
                adjusted = self.embedding_adjustment(x).unsqueeze(0)
                outputs.append(self.transformer_layers[i](adjusted).squeeze(0))
        return self.mlp(torch.cat(outputs, 1) if self.variant == "lc" else x)


class _LogSoftmaxSAGE(torch.nn.Module):
    """The NAI and TAI files' ``GraphSAGENet``: two mean SAGEConvs on every edge, ReLU and
    dropout between them, a ``log_softmax`` over the channels after the second."""

    def __init__(self, in_channels: int, hidden_channels: int, dropout: float):
        super().__init__()
        self.conv1 = SAGEConv(in_channels, hidden_channels)
        self.conv2 = SAGEConv(hidden_channels, hidden_channels)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        h = self.dropout(F.relu(self.conv1(x, graph)))
        return F.log_softmax(self.conv2(h, graph), dim=1)


class TANGNNReleasedPooled(ModelCapabilities, torch.nn.Module):
    r"""The released TANGNN's NAI and TAI networks (``ejwww/TANGNN``, files
    ``TANGNN/TANGNN-NAI`` and ``TANGNN/TANGNN-TAI``, class ``CustomGNN``), as they compute.

    Layer :math:`i` with input :math:`h` (the features first, then 2h wide):

    * :math:`s = \mathrm{log\_softmax}(\mathrm{SAGE}_2(\mathrm{drop}(\mathrm{ReLU}(
      \mathrm{SAGE}_1(h)))))`, two mean SAGEConvs on every edge (no sampling here);
    * the ``m`` vertices of largest :math:`\cos(\mathrm{ReLU}(s_v), a)`, one set for all
      nodes, through ``transformer_layers[i]`` (one post-LN encoder layer) as one sequence,
      mean-pooled to one vector and broadcast to every node;
    * the next input :math:`[s \Vert \text{pooled}]`.

    Readout: ``mlp`` (Linear 2h to 2h, ReLU, Linear; NAI) or ``final_lin`` (TAI) on the
    last layer's 2h features. Returns logits (the released model returns their
    ``log_softmax``, which ``graphloc.train``'s cross-entropy applies itself).

    As released, the selection reads a log-probability, which is never positive: its ReLU
    is 0 for every vertex, so every score is 0 and the ``m`` vertices are those
    ``torch.topk`` returns among equal values (an order of torch's, not of the graph; on
    this CPU build vertices 18, 22, 10, ... of a 2,708-node graph), and ``a`` gets no
    gradient. graphloc runs the same operations, so it selects the same vertices as the
    released code on the same device. The released module names, so its weights load as
    they are (NAI's unused ``final_lin`` included); dropout masks are graphloc's draws.

    Args:
        in_channels, hidden_channels, out_channels (int): widths.
        num_layers (int, default 2): layers, at least 1.
        m (int, default 25): selected vertices (the released scripts', on PubMed).
        heads (int, default 1): the encoder's heads.
        dropout (float, default 0.3): between each block's two SAGEConvs.
        variant (str, default "nai"): "nai" (MLP readout) or "tai" (Linear readout).
    """

    #: one global set of vertices reaches every node: influence runs one seed at a time
    graphloc_global = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, m: int = 25, heads: int = 1, dropout: float = 0.3,
                 variant: str = "nai"):
        super().__init__()
        check_sizes("TANGNNReleasedPooled", in_channels=in_channels,
                    hidden_channels=hidden_channels, out_channels=out_channels,
                    num_layers=num_layers, m=m, heads=heads)
        check_dropouts("TANGNNReleasedPooled", dropout=dropout)
        if variant not in ("nai", "tai"):
            raise ValueError(f"TANGNNReleasedPooled: variant must be 'nai' or 'tai', got "
                             f"{variant!r}")
        _check_heads("TANGNNReleasedPooled", hidden_channels, heads)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.m, self.variant = m, variant
        hidden, wide = hidden_channels, 2 * hidden_channels
        self.a = torch.nn.Parameter(torch.randn(hidden, 1))
        self.graphsage_layers = torch.nn.ModuleList(
            _LogSoftmaxSAGE(in_channels if i == 0 else wide, hidden, dropout)
            for i in range(num_layers))
        self.transformer_layers = torch.nn.ModuleList(_Encoder(hidden, heads)
                                                      for _ in range(num_layers))
        self.final_lin = torch.nn.Linear(wide, out_channels)
        if variant == "nai":
            self.mlp = torch.nn.Sequential(torch.nn.Linear(wide, wide), torch.nn.ReLU(),
                                           torch.nn.Linear(wide, out_channels))

    def forward(self, x: Tensor, graph) -> Tensor:
        check_input(self, x, self.in_channels)
        graph = graph_of_rows(graph, x)
        if x.size(0) == 0:  # no vertex to select
            return x.new_zeros(0, self.out_channels)
        for block, encoder in zip(self.graphsage_layers, self.transformer_layers,
                                  strict=True):
            s = block(x, graph)
            picked = s[_released_top_m(s, self.a, self.m)].unsqueeze(0)
            pooled = encoder(picked).mean(dim=1)
            x = torch.cat([s, pooled.expand(s.size(0), -1)], dim=1)
        return self.mlp(x) if self.variant == "nai" else self.final_lin(x)


class _PlainSAGE(torch.nn.Module):
    """The FLC file's ``GraphSAGENet``: two mean SAGEConvs on every edge, a ReLU between."""

    def __init__(self, in_channels: int, hidden_channels: int):
        super().__init__()
        self.conv1 = SAGEConv(in_channels, hidden_channels)
        self.conv2 = SAGEConv(hidden_channels, hidden_channels)

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        return self.conv2(F.relu(self.conv1(x, graph)), graph)


class TANGNNReleasedFLC(ModelCapabilities, torch.nn.Module):
    r"""The released TANGNN's FLC network (``ejwww/TANGNN``, file ``TANGNN/TANGNN-FLC``,
    class ``CustomGNN``), as it computes: one two-layer mean GraphSAGE on every edge (a
    ReLU between its convs) beside ``transformer`` (``num_layers`` post-LN encoder layers)
    over the selected rows of ``adjust_dim(x)``, mean-pooled and broadcast to every node;
    ``mlp`` (Linear 2h to h, ReLU, Linear) on the two concatenated. Returns logits (the
    released model returns their ``log_softmax``).

    The selection, as released, is vertex 0 whatever the features. Its
    ``top_m_sampling`` ranks ``ReLU(h)`` and ``ReLU(-h)`` against ``a`` and intersects
    the two lists, but ``torch.topk`` runs along the last dimension of the ``[N, 1]``
    scores, which has one entry: every row's index is 0, and their intersection is vertex
    0. With ``m`` above 1 the same call raises (k out of range), so the released script's
    ``m = 1`` is the one setting that runs, and ``m`` is not an argument here. ``a`` gets
    no gradient, as released. The released module names, so its weights load as they are.

    Args:
        in_channels, hidden_channels, out_channels (int): widths.
        num_layers (int, default 3): the encoder's layers (the released script's 3).
        heads (int, default 1): the encoder's heads.
    """

    #: vertex 0's features reach every node: influence runs one seed at a time
    graphloc_global = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 3, heads: int = 1):
        super().__init__()
        check_sizes("TANGNNReleasedFLC", in_channels=in_channels,
                    hidden_channels=hidden_channels, out_channels=out_channels,
                    num_layers=num_layers, heads=heads)
        _check_heads("TANGNNReleasedFLC", hidden_channels, heads)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.a = torch.nn.Parameter(torch.randn(hidden_channels, 1))  # never read (above)
        self.graphsage = _PlainSAGE(in_channels, hidden_channels)
        self.adjust_dim = torch.nn.Linear(in_channels, hidden_channels)
        self.transformer = _Encoder(hidden_channels, heads, num_layers)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(2 * hidden_channels, hidden_channels), torch.nn.ReLU(),
            torch.nn.Linear(hidden_channels, out_channels))

    def forward(self, x: Tensor, graph) -> Tensor:
        check_input(self, x, self.in_channels)
        graph = graph_of_rows(graph, x)
        if x.size(0) == 0:  # no vertex 0
            return x.new_zeros(0, self.out_channels)
        picked = self.adjust_dim(x[:1]).unsqueeze(0)  # vertex 0 (see the class docstring)
        pooled = self.transformer(picked).mean(dim=1)
        s = self.graphsage(x, graph)
        return self.mlp(torch.cat([s, pooled.expand(s.size(0), -1)], dim=1))


def _check_heads(owner: str, hidden_channels: int, heads: int) -> None:
    if hidden_channels % heads:
        raise ValueError(f"{owner}: hidden_channels ({hidden_channels}) must be a multiple "
                         f"of heads ({heads})")
