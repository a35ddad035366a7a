"""Model builders. ``GNN`` stacks any registered conv; later layers join the registry."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from graphloc.nn.conv import ChebConv, GATConv, GCNConv, GINConv, SAGEConv
from graphloc.nn.conv._utils import as_graph

#: conv name -> factory(in_channels, out_channels, **kwargs) -> module called as conv(x, graph)
CONVS: dict[str, Callable[..., torch.nn.Module]] = {}


def register_conv(name: str):
    """Registers a conv factory under ``name`` for ``GNN``, the CLI and the examples."""
    def decorate(factory):
        if name in CONVS:
            raise ValueError(f"a conv named {name!r} is already registered")
        CONVS[name] = factory
        return factory
    return decorate


register_conv("gcn")(GCNConv)
register_conv("sage")(SAGEConv)
register_conv("cheb")(lambda i, o, K=3, **kw: ChebConv(i, o, K=K, **kw))


@register_conv("gat")
def _gat(in_channels: int, out_channels: int, heads: int = 4, **kwargs) -> GATConv:
    """Heads concatenated to ``out_channels`` in total when ``heads`` divides it, else
    averaged (each head ``out_channels`` wide), as GAT's own output layer does."""
    if out_channels % heads == 0:
        return GATConv(in_channels, out_channels // heads, heads=heads, **kwargs)
    return GATConv(in_channels, out_channels, heads=heads, concat=False, **kwargs)


@register_conv("gin")
def _gin(in_channels: int, out_channels: int, **kwargs) -> GINConv:
    mlp = torch.nn.Sequential(torch.nn.Linear(in_channels, out_channels), torch.nn.ReLU(),
                              torch.nn.Linear(out_channels, out_channels))
    return GINConv(mlp, **kwargs)


_ACTS = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "elu": torch.nn.ELU,
         "tanh": torch.nn.Tanh, "identity": torch.nn.Identity}


class GNN(torch.nn.Module):
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
        **conv_kwargs: passed to every conv (e.g. ``K=3`` for cheb, ``aggr="max"``).

    Shapes:
        input: ``[N, in_channels]`` and a ``Graph`` or ``edge_index``.
        output: ``[N, out_channels]``.
    """

    def __init__(self, conv: str, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, dropout: float = 0.0, act: str = "relu",
                 norm: str | None = None, residual: bool = False, **conv_kwargs):
        super().__init__()
        if conv not in CONVS:
            raise ValueError(f"unknown conv {conv!r}; registered: {sorted(CONVS)}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if act not in _ACTS:
            raise ValueError(f"act must be one of {sorted(_ACTS)}, got {act!r}")
        if norm not in (None, "batch", "layer"):
            raise ValueError(f"norm must be None, 'batch' or 'layer', got {norm!r}")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.conv_name, self.residual = conv, residual
        self.convs = torch.nn.ModuleList(CONVS[conv](i, o, **conv_kwargs)
                                         for i, o in zip(widths[:-1], widths[1:], strict=True))
        make_norm = {None: lambda w: torch.nn.Identity(), "batch": torch.nn.BatchNorm1d,
                     "layer": torch.nn.LayerNorm}[norm]
        self.norms = torch.nn.ModuleList(make_norm(w) for w in widths[1:-1])
        self.act = _ACTS[act]()
        self.dropout = torch.nn.Dropout(dropout)

    def reset_parameters(self) -> None:
        for module in [*self.convs, *self.norms]:
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def forward(self, x: Tensor, graph) -> Tensor:
        graph = as_graph(graph, x)  # wrap a raw edge_index once for all layers
        for conv, norm in zip(self.convs[:-1], self.norms, strict=True):
            h = self.dropout(self.act(norm(conv(x, graph))))
            x = x + h if self.residual and h.shape == x.shape else h
        return self.convs[-1](x, graph)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.conv_name}, layers={len(self.convs)}, "
                f"{self.convs[0].__repr__()} ... {self.convs[-1].__repr__()})")
