"""The conv registry: name -> factory(in_channels, out_channels, **kwargs), for ``GNN``,
``build_model``, the command line and the examples."""

from __future__ import annotations

from collections.abc import Callable

import torch

from graphloc.nn.conv._utils import check_dropouts, check_sizes
from graphloc.nn.conv.cheb import ChebConv
from graphloc.nn.conv.cluster_gcn import ClusterGCNConv
from graphloc.nn.conv.edge_conv import EdgeConv
from graphloc.nn.conv.gat import GATConv
from graphloc.nn.conv.gatv2 import GATv2Conv
from graphloc.nn.conv.gcn import GCNConv
from graphloc.nn.conv.gen_conv import GENConv
from graphloc.nn.conv.gin import GINConv
from graphloc.nn.conv.graph_conv import GraphConv
from graphloc.nn.conv.le_conv import LEConv
from graphloc.nn.conv.pna import PNAConv
from graphloc.nn.conv.res_gated import ResGatedGraphConv
from graphloc.nn.conv.sage import SAGEConv
from graphloc.nn.conv.tag_conv import TAGConv
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
register_conv("resgated")(ResGatedGraphConv)
register_conv("cheb")(lambda i, o, K=3, **kw: ChebConv(i, o, K=K, **kw))
register_conv("tag")(TAGConv)
register_conv("gen")(GENConv)  # DeeperGCN's conv, its own MLP inside
register_conv("le")(LEConv)
register_conv("clustergcn")(ClusterGCNConv)


@register_conv("edge")
def _edge(in_channels: int, out_channels: int, aggr: str = "max", **kwargs) -> EdgeConv:
    """DGCNN's edge block: Linear(2 in, out), ReLU, Linear(out, out) on [x_i, x_j - x_i]."""
    check_sizes("EdgeConv", in_channels=in_channels, out_channels=out_channels)
    mlp = torch.nn.Sequential(torch.nn.Linear(2 * in_channels, out_channels), torch.nn.ReLU(),
                              torch.nn.Linear(out_channels, out_channels))
    return EdgeConv(mlp, aggr=aggr, **kwargs)


@register_conv("pna")
def _pna(in_channels: int, out_channels: int,
         aggregators=("mean", "min", "max", "std"),
         scalers=("identity", "amplification", "attenuation"), deg=None, **kwargs):
    """PNA with PyG's example aggregators and scalers; without ``deg`` its degree averages
    come from the first training forward's graph."""
    return PNAConv(in_channels, out_channels, list(aggregators), list(scalers), deg, **kwargs)


def check_stack(owner: str, conv: str, dropout: float, **sizes) -> None:
    """The arguments of a stack of registered convs (``GNN``, ``ForwardGNN``): widths and
    depth >= 1, a dropout in [0, 1), a registered conv name."""
    check_sizes(owner, **sizes)
    check_dropouts(owner, dropout=dropout)
    check_registered(owner, conv)


def check_registered(owner: str, conv) -> None:
    """``conv`` a registered conv's name (a list failed the lookup: "unhashable type")."""
    if not isinstance(conv, str) or conv not in CONVS:
        raise ValueError(f"{owner}: unknown conv {conv!r}; registered: {sorted(CONVS)}")


def _multi_head(layer):
    """A factory for an attention layer with ``heads`` heads, as PyG's ``GAT`` model builds
    them: concatenated to ``out_channels`` in total (``heads`` must divide it), or, with
    ``concat=False``, averaged, each head ``out_channels`` wide (GAT's output layer: the
    last layer of a ``GNN``). Until 2026-12-04 a width that ``heads`` did not divide
    switched to averaging silently (three times the work of the width asked for)."""
    def factory(in_channels: int, out_channels: int, heads: int = 4, concat: bool = True,
                **kwargs):
        check_sizes(layer.__name__, heads=heads, out_channels=out_channels)
        if not concat:
            return layer(in_channels, out_channels, heads=heads, concat=False, **kwargs)
        if isinstance(out_channels, int) and out_channels % heads:
            raise ValueError(f"{layer.__name__}: heads={heads} does not divide the width "
                             f"{out_channels} its concatenated heads must add up to; pick "
                             "heads that divide it, or pass concat=False to average heads "
                             f"{out_channels} wide each")
        return layer(in_channels, out_channels // heads, heads=heads, **kwargs)
    factory.averages_last_layer = True
    return factory


register_conv("gat")(_multi_head(GATConv))
register_conv("gatv2")(_multi_head(GATv2Conv))
register_conv("transformer")(_multi_head(TransformerConv))


@register_conv("gin")
def _gin(in_channels: int, out_channels: int, **kwargs) -> GINConv:
    mlp = torch.nn.Sequential(torch.nn.Linear(in_channels, out_channels), torch.nn.ReLU(),
                              torch.nn.Linear(out_channels, out_channels))
    return GINConv(mlp, **kwargs)
