"""Neural-network layers and models on the graphloc engine.

``nn.conv``: every layer a user composes; ``nn.models``: whole models; ``nn.aggr``:
neighbourhood aggregations; ``nn.registry``: ``build_model`` and the model registry;
``nn.convert``: PyG models to their graphloc twins.
"""

from graphloc.nn import aggr, conv, models
from graphloc.nn.conv import (
    APPNP,
    CONVS,
    AGNNConv,
    ARMAConv,
    CGConv,
    ChebConv,
    ClusterGCNConv,
    EdgeConv,
    EGConv,
    FAConv,
    FastRGCNConv,
    FeaStConv,
    GATConv,
    GATEConv,
    GatedGraphConv,
    GATv2Conv,
    GCN2Conv,
    GCNConv,
    GENConv,
    GeneralConv,
    GINConv,
    GINEConv,
    GMMConv,
    GraphConv,
    LATTEConv,
    LEConv,
    LGConv,
    LiftConv,
    MFConv,
    MixHopConv,
    MultiEdgeConv,
    NNConv,
    PDNConv,
    PNAConv,
    ResGatedGraphConv,
    RGCNConv,
    SAGEConv,
    SGConv,
    SGFormerAttention,
    SimpleConv,
    SSGConv,
    TAGConv,
    TANGNNLayer,
    TopMAttention,
    TransformerConv,
    UGTLayer,
    WLConvContinuous,
    register_conv,
)
from graphloc.nn.conv.multi_edge import group_size_histogram
from graphloc.nn.conv.tangnn import top_m_similar
from graphloc.nn.convert import Unconvertible, from_pyg
from graphloc.nn.models import (
    DAGNN,
    GNN,
    LATTE,
    MEGAGNN,
    TANGNN,
    UGT,
    EMACodebook,
    ForwardGNN,
    LAModel,
    LargeGT,
    LiftBlock,
    LiftGCN,
    SGFormer,
    fastrp_encoding,
    hop2_tokens,
)
from graphloc.nn.registry import MODELS, build_model, register_model

__all__ = ["GCNConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv", "GINEConv", "ChebConv",
           "GraphConv", "ResGatedGraphConv", "TAGConv", "GatedGraphConv", "GENConv", "PNAConv",
           "TransformerConv", "SGConv", "APPNP", "GCN2Conv", "LGConv", "LEConv", "SSGConv",
           "MixHopConv", "FAConv", "ClusterGCNConv", "AGNNConv", "EdgeConv", "SimpleConv",
           "RGCNConv", "FastRGCNConv", "ARMAConv", "MFConv", "CGConv", "GeneralConv", "EGConv",
           "NNConv", "GMMConv", "GATEConv", "FeaStConv", "PDNConv", "WLConvContinuous", "GNN",
           "DAGNN",
           "LiftConv", "LiftBlock", "LiftGCN",
           "TopMAttention", "TANGNNLayer", "TANGNN", "top_m_similar", "LargeGT",
           "EMACodebook", "hop2_tokens", "fastrp_encoding", "SGFormer", "SGFormerAttention",
           "MultiEdgeConv", "MEGAGNN", "group_size_histogram", "LAModel", "from_pyg",
           "Unconvertible", "CONVS", "MODELS", "build_model", "register_conv",
           "register_model", "UGT", "UGTLayer", "ForwardGNN", "LATTE", "LATTEConv", "aggr",
           "conv", "models"]
