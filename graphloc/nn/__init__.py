"""Neural-network layers and models on the graphloc engine."""

from graphloc.nn import aug, models
from graphloc.nn.conv import (ChebConv, GATConv, GCNConv, GINConv, GINEConv, SAGEConv,
                              TransformerConv)
from graphloc.nn.lift import LiftBlock, LiftConv, LiftGCN
from graphloc.nn.tangnn import TANGNN, TANGNNLayer, TopMAttention, top_m_similar
from graphloc.nn.models import CONVS, DAGNN, GNN, MODELS, build_model, register_conv, register_model

__all__ = ["GCNConv", "SAGEConv", "GATConv", "GINConv", "GINEConv", "ChebConv",
           "TransformerConv", "GNN", "DAGNN", "LiftConv", "LiftBlock", "LiftGCN",
           "TopMAttention", "TANGNNLayer", "TANGNN", "top_m_similar",
           "CONVS", "MODELS", "build_model", "register_conv", "register_model", "models", "aug"]
