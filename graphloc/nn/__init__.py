"""Neural-network layers and models on the graphloc engine."""

from graphloc.nn import aug, models
from graphloc.nn.conv import (
    ChebConv,
    GATConv,
    GCNConv,
    GINConv,
    GINEConv,
    SAGEConv,
    TransformerConv,
)
from graphloc.nn.convert import Unconvertible, from_pyg
from graphloc.nn.largegt import EMACodebook, LargeGT, fastrp_encoding, hop2_tokens
from graphloc.nn.lift import LiftBlock, LiftConv, LiftGCN
from graphloc.nn.mega import MEGAGNN, MultiEdgeConv, group_size_histogram
from graphloc.nn.models import CONVS, DAGNN, GNN, MODELS, build_model, register_conv, register_model
from graphloc.nn.sgformer import SGFormer, SGFormerAttention
from graphloc.nn.tangnn import TANGNN, TANGNNLayer, TopMAttention, top_m_similar

__all__ = ["GCNConv", "SAGEConv", "GATConv", "GINConv", "GINEConv", "ChebConv",
           "TransformerConv", "GNN", "DAGNN", "LiftConv", "LiftBlock", "LiftGCN",
           "TopMAttention", "TANGNNLayer", "TANGNN", "top_m_similar", "LargeGT",
           "EMACodebook", "hop2_tokens", "fastrp_encoding", "SGFormer", "SGFormerAttention",
           "MultiEdgeConv", "MEGAGNN", "group_size_histogram", "from_pyg", "Unconvertible",
           "CONVS", "MODELS", "build_model", "register_conv", "register_model", "models", "aug"]
