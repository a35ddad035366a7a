"""Every layer a user composes, one per file: the message-passing convs (each a drop-in for
PyG's layer of the same name) and the long-range layers of the seed papers; the conv
registry (``CONVS``, ``register_conv``) lives in ``registry.py``."""

from graphloc.nn.conv.agnn import AGNNConv
from graphloc.nn.conv.antisymmetric_conv import AntiSymmetricConv
from graphloc.nn.conv.appnp import APPNP
from graphloc.nn.conv.arma_conv import ARMAConv
from graphloc.nn.conv.cf_conv import CFConv
from graphloc.nn.conv.cg_conv import CGConv
from graphloc.nn.conv.cheb import ChebConv
from graphloc.nn.conv.cluster_gcn import ClusterGCNConv
from graphloc.nn.conv.dir_gnn_conv import DirGNNConv
from graphloc.nn.conv.dna_conv import DNAConv
from graphloc.nn.conv.edge_conv import DynamicEdgeConv, EdgeConv
from graphloc.nn.conv.eg_conv import EGConv
from graphloc.nn.conv.fa_conv import FAConv
from graphloc.nn.conv.feast_conv import FeaStConv
from graphloc.nn.conv.film_conv import FiLMConv
from graphloc.nn.conv.gat import GATConv
from graphloc.nn.conv.gate_conv import GATEConv
from graphloc.nn.conv.gated_graph import GatedGraphConv
from graphloc.nn.conv.gatv2 import GATv2Conv
from graphloc.nn.conv.gcn import GCNConv
from graphloc.nn.conv.gcn2 import GCN2Conv
from graphloc.nn.conv.gen_conv import GENConv
from graphloc.nn.conv.general_conv import GeneralConv
from graphloc.nn.conv.gin import GINConv, GINEConv
from graphloc.nn.conv.gmm_conv import GMMConv
from graphloc.nn.conv.graph_conv import GraphConv
from graphloc.nn.conv.gravnet_conv import GravNetConv
from graphloc.nn.conv.han_conv import HANConv
from graphloc.nn.conv.heat_conv import HEATConv
from graphloc.nn.conv.hgt_conv import HGTConv
from graphloc.nn.conv.hypergraph_conv import HypergraphConv
from graphloc.nn.conv.latte import LATTEConv
from graphloc.nn.conv.le_conv import LEConv
from graphloc.nn.conv.lg_conv import LGConv
from graphloc.nn.conv.lift import LiftConv
from graphloc.nn.conv.mf_conv import MFConv
from graphloc.nn.conv.mixhop import MixHopConv
from graphloc.nn.conv.multi_edge import MultiEdgeConv
from graphloc.nn.conv.nn_conv import NNConv
from graphloc.nn.conv.pan_conv import PANConv
from graphloc.nn.conv.pdn_conv import PDNConv
from graphloc.nn.conv.pna import PNAConv
from graphloc.nn.conv.point_conv import PointNetConv
from graphloc.nn.conv.point_gnn_conv import PointGNNConv
from graphloc.nn.conv.point_transformer_conv import PointTransformerConv
from graphloc.nn.conv.ppf_conv import PPFConv
from graphloc.nn.conv.registry import CONVS, register_conv
from graphloc.nn.conv.res_gated import ResGatedGraphConv
from graphloc.nn.conv.rgat_conv import RGATConv
from graphloc.nn.conv.rgcn_conv import FastRGCNConv, RGCNConv
from graphloc.nn.conv.sage import SAGEConv
from graphloc.nn.conv.sg_conv import SGConv
from graphloc.nn.conv.sgformer import SGFormerAttention
from graphloc.nn.conv.signed_conv import SignedConv
from graphloc.nn.conv.simple_conv import SimpleConv
from graphloc.nn.conv.sparse_linear import SparseLinear
from graphloc.nn.conv.spline_conv import SplineConv
from graphloc.nn.conv.ssg_conv import SSGConv
from graphloc.nn.conv.supergat_conv import SuperGATConv
from graphloc.nn.conv.tag_conv import TAGConv
from graphloc.nn.conv.tangnn import TANGNNLayer, TopMAttention
from graphloc.nn.conv.transformer import TransformerConv
from graphloc.nn.conv.ugt import UGTLayer
from graphloc.nn.conv.wl_conv import WLConv
from graphloc.nn.conv.wl_conv_continuous import WLConvContinuous
from graphloc.nn.conv.x_conv import XConv

__all__ = ["GCNConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv", "GINEConv", "ChebConv",
           "GraphConv", "ResGatedGraphConv", "TAGConv", "GatedGraphConv", "GENConv", "PNAConv",
           "TransformerConv", "SGConv", "APPNP", "GCN2Conv", "LGConv", "LEConv", "SSGConv",
           "MixHopConv", "FAConv", "ClusterGCNConv", "AGNNConv", "EdgeConv",
           "SimpleConv", "RGCNConv", "FastRGCNConv", "ARMAConv", "MFConv", "CGConv", "GeneralConv",
           "EGConv", "NNConv", "GMMConv", "FeaStConv", "PDNConv", "WLConvContinuous", "SignedConv",
           "HypergraphConv", "PointNetConv", "FiLMConv", "CFConv", "HGTConv", "HANConv",
           "SparseLinear", "RGATConv", "SuperGATConv", "PointTransformerConv",
           "GATEConv", "DNAConv", "HEATConv", "WLConv", "PPFConv", "PointGNNConv",
           "DynamicEdgeConv", "GravNetConv", "SplineConv", "XConv", "AntiSymmetricConv",
           "DirGNNConv", "PANConv",
           "LiftConv",
           "MultiEdgeConv",
           "TopMAttention", "TANGNNLayer", "SGFormerAttention", "UGTLayer", "LATTEConv", "CONVS",
           "register_conv"]
