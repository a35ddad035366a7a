"""Message-passing layers, one per file, each a drop-in for PyG's layer of the same name."""

from graphloc.nn.conv.cheb import ChebConv
from graphloc.nn.conv.gat import GATConv
from graphloc.nn.conv.gcn import GCNConv
from graphloc.nn.conv.gin import GINConv, GINEConv
from graphloc.nn.conv.sage import SAGEConv
from graphloc.nn.conv.transformer import TransformerConv

__all__ = ["GCNConv", "SAGEConv", "GATConv", "GINConv", "GINEConv", "ChebConv", "TransformerConv"]
