"""Whole models, one family per file: ``GNN`` and ``DAGNN``, local augmentation (LAGNN),
LiftGCN, City-Networks' ChebNet and MLP baselines, MEGA-GNN, TANGNN, LargeGT, SGFormer,
UGT, ForwardGNN (node classification and link prediction), LATTE, A-DGN and label
propagation; the interaction graphs of PyG's
SchNet and ViSNet. They compose the layers of ``nn.conv``."""

from graphloc.nn.models.adgn import ADGN
from graphloc.nn.models.aug import LAModel, LocalAugmenter, pretrain_augmenter
from graphloc.nn.models.chebnet import ChebNet
from graphloc.nn.models.forward import ForwardGNN
from graphloc.nn.models.forward_link import ForwardLinkGNN
from graphloc.nn.models.gnn import ACTIVATIONS, DAGNN, GNN
from graphloc.nn.models.interaction_graphs import Distance, RadiusInteractionGraph
from graphloc.nn.models.label_prop import LabelPropagation
from graphloc.nn.models.largegt import EMACodebook, LargeGT, fastrp_encoding, hop2_tokens
from graphloc.nn.models.latte import LATTE
from graphloc.nn.models.lift import LiftBlock, LiftGCN
from graphloc.nn.models.mega import MEGAGNN
from graphloc.nn.models.mlp import CityNetworksMLP
from graphloc.nn.models.node2vec import Node2Vec
from graphloc.nn.models.sgformer import SGFormer
from graphloc.nn.models.tangnn import (
    TANGNN,
    TANGNNReleased,
    TANGNNReleasedFLC,
    TANGNNReleasedPooled,
)
from graphloc.nn.models.ugt import UGT, pretrain_ugt, ugt_inputs

__all__ = ["GNN", "DAGNN", "ChebNet", "CityNetworksMLP", "ACTIVATIONS", "LAModel", "LocalAugmenter",
           "pretrain_augmenter",
           "LiftBlock", "LiftGCN", "MEGAGNN", "TANGNN", "TANGNNReleased",
           "TANGNNReleasedPooled", "TANGNNReleasedFLC", "LargeGT", "EMACodebook",
           "hop2_tokens", "fastrp_encoding", "SGFormer", "UGT", "ugt_inputs", "pretrain_ugt",
           "ForwardGNN", "ForwardLinkGNN", "LATTE", "LabelPropagation", "Node2Vec", "ADGN",
           "RadiusInteractionGraph", "Distance"]
