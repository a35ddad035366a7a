"""Neural-network layers and models on the graphloc engine."""

from graphloc.nn import models
from graphloc.nn.conv import ChebConv, GATConv, GCNConv, GINConv, GINEConv, SAGEConv
from graphloc.nn.models import CONVS, GNN, register_conv

__all__ = ["GCNConv", "SAGEConv", "GATConv", "GINConv", "GINEConv", "ChebConv", "GNN", "CONVS",
           "register_conv", "models"]
