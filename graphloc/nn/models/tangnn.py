"""TANGNN, the whole model: a stack of ``nn.conv.tangnn.TANGNNLayer`` (top-m attention
plus neighbourhood aggregation; graphloc's reading of the paper is documented there)."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc.nn.capabilities import ModelCapabilities
from graphloc.nn.conv._utils import as_graph, check_dropouts, check_sizes
from graphloc.nn.conv.tangnn import TANGNNLayer


class TANGNN(ModelCapabilities, torch.nn.Module):
    """TANGNN: ``num_layers`` :class:`TANGNNLayer` s and a linear classifier on the last
    layer's output (``variant="base"``) or on all layers' outputs concatenated
    (``variant="lc"``, the paper's layer-concatenation variant, often its best).

    Deviations from the released code (the module docstring and ``docs/models.md``): per-node
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
