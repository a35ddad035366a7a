"""The conv registry: name -> factory(in_channels, out_channels, **kwargs), for ``GNN``,
``build_model``, the command line and the examples."""

from __future__ import annotations

from collections.abc import Callable

import torch

from graphloc.nn.conv._utils import check_dropouts, check_sizes
from graphloc.nn.conv.cheb import ChebConv
from graphloc.nn.conv.gat import GATConv
from graphloc.nn.conv.gcn import GCNConv
from graphloc.nn.conv.gin import GINConv
from graphloc.nn.conv.graph_conv import GraphConv
from graphloc.nn.conv.sage import SAGEConv
from graphloc.nn.conv.transformer import TransformerConv

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
register_conv("graphconv")(GraphConv)
register_conv("cheb")(lambda i, o, K=3, **kw: ChebConv(i, o, K=K, **kw))


def check_stack(owner: str, conv: str, dropout: float, **sizes) -> None:
    """The arguments of a stack of registered convs (``GNN``, ``ForwardGNN``): widths and
    depth >= 1, a dropout in [0, 1), a registered conv name."""
    check_sizes(owner, **sizes)
    check_dropouts(owner, dropout=dropout)
    if conv not in CONVS:
        raise ValueError(f"unknown conv {conv!r}; registered: {sorted(CONVS)}")


def _multi_head(layer):
    """A factory for an attention layer with ``heads`` heads: concatenated to
    ``out_channels`` in total when ``heads`` divides it, else averaged (each head
    ``out_channels`` wide), as GAT's own output layer does."""
    def factory(in_channels: int, out_channels: int, heads: int = 4, **kwargs):
        if out_channels % heads == 0:
            return layer(in_channels, out_channels // heads, heads=heads, **kwargs)
        return layer(in_channels, out_channels, heads=heads, concat=False, **kwargs)
    return factory


register_conv("gat")(_multi_head(GATConv))
register_conv("transformer")(_multi_head(TransformerConv))


@register_conv("gin")
def _gin(in_channels: int, out_channels: int, **kwargs) -> GINConv:
    mlp = torch.nn.Sequential(torch.nn.Linear(in_channels, out_channels), torch.nn.ReLU(),
                              torch.nn.Linear(out_channels, out_channels))
    return GINConv(mlp, **kwargs)
