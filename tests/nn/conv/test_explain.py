"""PyG's explainers on graphloc's convs, against PyG's own convs with the same weights:
edge masks on the messages, hop counts, embeddings, attention weights, whole explanations,
and the refusals where a conv does not apply a mask."""

import contextlib
import copy
import pickle
import subprocess
import sys

import pytest
import torch
import torch_geometric.nn as pyg
from helpers import random_edge_index
from torch_geometric.explain import Explainer
from torch_geometric.explain.algorithm import (
    AttentionExplainer,
    GNNExplainer,
    GraphMaskExplainer,
    PGExplainer,
)
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
from torch_geometric.nn.models.attentive_fp import GATEConv as AttentiveFPGATEConv
from torch_geometric.nn.models.schnet import CFConv as SchNetCFConv
from torch_geometric.utils import get_embeddings, get_num_hops

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn.conv._base import is_explain_port, message_weights

PNA_ARGS = (["mean", "min", "max", "std"], ["identity", "amplification", "attenuation"],
            torch.tensor([0, 3, 5, 4]))


def mlp(width=6):
    return torch.nn.Sequential(torch.nn.Linear(width, 5), torch.nn.ReLU(),
                               torch.nn.Linear(5, 5))


class Called(torch.nn.Module):
    """A conv whose call takes more than the explained ``(x, edge_index, ...)``, called
    through ``call(conv, x, edge_index, ...)`` (its parameters under ``conv.``)."""

    def __init__(self, conv, call):
        super().__init__()
        self.conv, self.call = conv, call

    def forward(self, x, edge_index, *rest):
        return self.call(self.conv, x, edge_index, *rest)


def with_initial(conv):
    """GCN2Conv or FAConv called as ``conv(x, x_0=x, edge_index, edge_weight)``."""
    return Called(conv, lambda c, x, e, w=None: c(x, x, e, w))


def with_distances(conv):
    """SchNet's CFConv called with distances (from the edge features) and edge features."""
    return Called(conv, lambda c, x, e, attr: c(x, e, 3 * attr[:, 0].abs(), attr))


def with_types(conv):
    """HEATConv called with node and edge types drawn from the ids."""
    return Called(conv, lambda c, x, e, attr: c(x, e, torch.arange(x.size(0)) % 3,
                                                 (e[0] + 2 * e[1]) % 4, attr))


def with_relations(conv):
    """RGATConv called with relation types drawn from the edges' ends."""
    return Called(conv, lambda c, x, e: c(x, e, (e[0] + 2 * e[1]) % 3))


def as_layers(conv):
    """DNAConv on the features read as two layers of three channels."""
    return Called(conv, lambda c, x, e, w=None: c(x.view(x.size(0), 2, 3), e, w))


def with_hyperedge_features(conv):
    """HypergraphConv with attention, each hyperedge's features a node's row of the same
    id (the hyperedges are the ids in edge_index[1])."""
    return Called(conv, lambda c, x, e: c(x, e, None, x[:int(e[1].max()) + 1]))


# (name, graphloc factory, PyG factory, edge features width or None, edge weights)
EXPLAINABLE = [
    ("gcn", lambda: gl.GCNConv(6, 5), lambda: pyg.GCNConv(6, 5), None, True),
    ("gcn-improved", lambda: gl.GCNConv(6, 5, improved=True),
     lambda: pyg.GCNConv(6, 5, improved=True), None, True),
    ("gcn-no-loops", lambda: gl.GCNConv(6, 5, add_self_loops=False),
     lambda: pyg.GCNConv(6, 5, add_self_loops=False), None, True),
    ("gcn-raw", lambda: gl.GCNConv(6, 5, normalize=False),
     lambda: pyg.GCNConv(6, 5, normalize=False), None, True),
    ("gat", lambda: gl.GATConv(6, 3, heads=2), lambda: pyg.GATConv(6, 3, heads=2), None, False),
    ("gat-mean", lambda: gl.GATConv(6, 3, heads=2, concat=False),
     lambda: pyg.GATConv(6, 3, heads=2, concat=False), None, False),
    ("gat-edges", lambda: gl.GATConv(6, 3, heads=2, edge_dim=2),
     lambda: pyg.GATConv(6, 3, heads=2, edge_dim=2), 2, False),
    ("gat-no-loops", lambda: gl.GATConv(6, 3, add_self_loops=False),
     lambda: pyg.GATConv(6, 3, add_self_loops=False), None, False),
    ("gatv2", lambda: gl.GATv2Conv(6, 3, heads=2), lambda: pyg.GATv2Conv(6, 3, heads=2), None,
     False),
    ("gatv2-edges", lambda: gl.GATv2Conv(6, 3, heads=2, edge_dim=2, concat=False),
     lambda: pyg.GATv2Conv(6, 3, heads=2, edge_dim=2, concat=False), 2, False),
    ("transformer", lambda: gl.TransformerConv(6, 3, heads=2),
     lambda: pyg.TransformerConv(6, 3, heads=2), None, False),
    ("transformer-edges", lambda: gl.TransformerConv(6, 3, heads=2, edge_dim=2, beta=True),
     lambda: pyg.TransformerConv(6, 3, heads=2, edge_dim=2, beta=True), 2, False),
    ("cheb", lambda: gl.ChebConv(6, 5, K=3), lambda: pyg.ChebConv(6, 5, K=3), None, True),
    ("cheb-rw", lambda: gl.ChebConv(6, 5, K=2, normalization="rw"),
     lambda: pyg.ChebConv(6, 5, K=2, normalization="rw"), None, False),
    ("sg", lambda: gl.SGConv(6, 5, K=2), lambda: pyg.SGConv(6, 5, K=2), None, True),
    ("ssg", lambda: gl.SSGConv(6, 5, 0.1, K=2), lambda: pyg.SSGConv(6, 5, 0.1, K=2), None,
     True),
    ("appnp", lambda: gl.APPNP(3, 0.2), lambda: pyg.APPNP(3, 0.2), None, True),
    ("appnp-raw", lambda: gl.APPNP(2, 0.1, normalize=False),
     lambda: pyg.APPNP(2, 0.1, normalize=False), None, True),
    ("tag", lambda: gl.TAGConv(6, 5, K=2), lambda: pyg.TAGConv(6, 5, K=2), None, True),
    ("lg", lambda: gl.LGConv(), lambda: pyg.LGConv(), None, True),
    ("gcn2", lambda: with_initial(gl.GCN2Conv(6, 0.2, theta=0.5, layer=2)),
     lambda: with_initial(pyg.GCN2Conv(6, 0.2, theta=0.5, layer=2)), None, True),
    ("gated-graph", lambda: gl.GatedGraphConv(6, 2), lambda: pyg.GatedGraphConv(6, 2), None,
     True),
    ("simple", lambda: gl.SimpleConv("mean", "cat"), lambda: pyg.SimpleConv("mean", "cat"),
     None, True),
    ("mixhop", lambda: gl.MixHopConv(6, 3), lambda: pyg.MixHopConv(6, 3), None, True),
    ("le", lambda: gl.LEConv(6, 5), lambda: pyg.LEConv(6, 5), None, True),
    ("cluster-gcn", lambda: gl.ClusterGCNConv(6, 5, diag_lambda=0.5),
     lambda: pyg.ClusterGCNConv(6, 5, diag_lambda=0.5), None, False),
    ("res-gated", lambda: gl.ResGatedGraphConv(6, 5), lambda: pyg.ResGatedGraphConv(6, 5),
     None, False),
    ("res-gated-tanh", lambda: gl.ResGatedGraphConv(6, 5, act=torch.nn.Tanh(), edge_dim=2),
     lambda: pyg.ResGatedGraphConv(6, 5, act=torch.nn.Tanh(), edge_dim=2), 2, False),
    ("edge", lambda: gl.EdgeConv(torch.nn.Linear(12, 5)),
     lambda: pyg.EdgeConv(torch.nn.Linear(12, 5)), None, False),
    ("edge-mean", lambda: gl.EdgeConv(torch.nn.Linear(12, 5), aggr="mean"),
     lambda: pyg.EdgeConv(torch.nn.Linear(12, 5), aggr="mean"), None, False),
    ("gen", lambda: gl.GENConv(6, 5), lambda: pyg.GENConv(6, 5), None, False),
    ("gen-edges-sum", lambda: gl.GENConv(6, 5, aggr="add", edge_dim=2),
     lambda: pyg.GENConv(6, 5, aggr="add", edge_dim=2), 2, False),
    ("fa", lambda: with_initial(gl.FAConv(6, eps=0.1)),
     lambda: with_initial(pyg.FAConv(6, eps=0.1)), None, False),
    ("fa-raw", lambda: with_initial(gl.FAConv(6, normalize=False)),
     lambda: with_initial(pyg.FAConv(6, normalize=False)), None, True),
    ("agnn", lambda: gl.AGNNConv(), lambda: pyg.AGNNConv(), None, False),
    ("arma", lambda: gl.ARMAConv(6, 5, num_stacks=2, num_layers=2),
     lambda: pyg.ARMAConv(6, 5, num_stacks=2, num_layers=2), None, True),
    ("mf", lambda: gl.MFConv(6, 5), lambda: pyg.MFConv(6, 5), None, False),
    ("cg", lambda: gl.CGConv(6, dim=2), lambda: pyg.CGConv(6, dim=2), 2, False),
    ("cg-mean", lambda: gl.CGConv(6, aggr="mean"), lambda: pyg.CGConv(6, aggr="mean"), None,
     False),
    ("pdn", lambda: gl.PDNConv(6, 5, edge_dim=2, hidden_channels=4),
     lambda: pyg.PDNConv(6, 5, edge_dim=2, hidden_channels=4), 2, False),
    ("pdn-raw", lambda: gl.PDNConv(6, 5, edge_dim=2, hidden_channels=4, normalize=False),
     lambda: pyg.PDNConv(6, 5, edge_dim=2, hidden_channels=4, normalize=False), 2, False),
    ("gcn-target-to-source", lambda: gl.GCNConv(6, 5, flow="target_to_source"),
     lambda: pyg.GCNConv(6, 5, flow="target_to_source"), None, True),
    ("sage-target-to-source", lambda: gl.SAGEConv(6, 5, flow="target_to_source"),
     lambda: pyg.SAGEConv(6, 5, flow="target_to_source"), None, False),
    ("gat-target-to-source", lambda: gl.GATConv(6, 3, heads=2, flow="target_to_source"),
     lambda: pyg.GATConv(6, 3, heads=2, flow="target_to_source"), None, False),
    ("nn-wide", lambda: gl.NNConv(6, 8, torch.nn.Sequential(torch.nn.Linear(2, 3),
                                                          torch.nn.ReLU(),
                                                          torch.nn.Linear(3, 48))),
     lambda: pyg.NNConv(6, 8, torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(),
                                                  torch.nn.Linear(3, 48))), 2, False),
    ("nn-narrow-mean", lambda: gl.NNConv(6, 2, torch.nn.Linear(2, 12), aggr="mean"),
     lambda: pyg.NNConv(6, 2, torch.nn.Linear(2, 12), aggr="mean"), 2, False),
    ("nn-max", lambda: gl.NNConv(6, 2, torch.nn.Linear(2, 12), aggr="max"),
     lambda: pyg.NNConv(6, 2, torch.nn.Linear(2, 12), aggr="max"), 2, False),
    ("gmm", lambda: gl.GMMConv(6, 5, dim=2, kernel_size=3),
     lambda: pyg.GMMConv(6, 5, dim=2, kernel_size=3), 2, False),
    ("gmm-max", lambda: gl.GMMConv(6, 5, dim=2, kernel_size=3, aggr="max"),
     lambda: pyg.GMMConv(6, 5, dim=2, kernel_size=3, aggr="max"), 2, False),
    ("gmm-separate", lambda: gl.GMMConv(6, 5, dim=2, kernel_size=2, separate_gaussians=True),
     lambda: pyg.GMMConv(6, 5, dim=2, kernel_size=2, separate_gaussians=True), 2, False),
    ("wl-continuous", lambda: gl.WLConvContinuous(), lambda: pyg.WLConvContinuous(), None,
     True),
    ("cf", lambda: with_distances(gl.CFConv(6, 5, 4, torch.nn.Linear(2, 4), 5.0)),
     lambda: with_distances(SchNetCFConv(6, 5, 4, torch.nn.Linear(2, 4), 5.0)), 2, False),
    ("pna", lambda: gl.PNAConv(6, 4, *PNA_ARGS), lambda: pyg.PNAConv(6, 4, *PNA_ARGS), None,
     False),
    ("pna-edges-towers", lambda: gl.PNAConv(6, 4, *PNA_ARGS, edge_dim=2, towers=2),
     lambda: pyg.PNAConv(6, 4, *PNA_ARGS, edge_dim=2, towers=2), 2, False),
    ("supergat", lambda: gl.SuperGATConv(6, 3, heads=2), lambda: pyg.SuperGATConv(6, 3, heads=2),
     None, False),
    ("supergat-sd-mean", lambda: gl.SuperGATConv(6, 3, heads=2, attention_type="SD",
                                                 concat=False),
     lambda: pyg.SuperGATConv(6, 3, heads=2, attention_type="SD", concat=False), None, False),
    ("gate", lambda: gl.GATEConv(6, 6, edge_dim=2, dropout=0.0),
     lambda: AttentiveFPGATEConv(6, 6, edge_dim=2, dropout=0.0), 2, False),
    ("feast", lambda: gl.FeaStConv(6, 5, heads=2), lambda: pyg.FeaStConv(6, 5, heads=2), None,
     False),
    ("feast-no-loops-mean", lambda: gl.FeaStConv(6, 5, heads=2, add_self_loops=False),
     lambda: pyg.FeaStConv(6, 5, heads=2, add_self_loops=False), None, False),
    ("heat", lambda: with_types(gl.HEATConv(6, 4, 3, 4, 3, 2, 5, heads=2)),
     lambda: with_types(pyg.HEATConv(6, 4, 3, 4, 3, 2, 5, heads=2)), 2, False),
    *[(f"rgat-{mod}", lambda mod=mod: with_relations(gl.RGATConv(6, 4, 3, heads=2, mod=mod)),
       lambda mod=mod: with_relations(pyg.RGATConv(6, 4, 3, heads=2, mod=mod)), None, False)
      # ("scaled" outputs about 1e-45 from its initial weights: no test of a mask)
      for mod in (None, "additive", "f-additive", "f-scaled")],
    ("rgat-multiplicative", lambda: with_relations(gl.RGATConv(
        6, 4, 3, dim=2, attention_mode="multiplicative-self-attention")),
     lambda: with_relations(pyg.RGATConv(
         6, 4, 3, dim=2, attention_mode="multiplicative-self-attention")), None, False),
    ("dna", lambda: as_layers(gl.DNAConv(3, heads=1)), lambda: as_layers(pyg.DNAConv(3, heads=1)),
     None, True),
    ("dna-raw", lambda: as_layers(gl.DNAConv(3, heads=3, normalize=False)),
     lambda: as_layers(pyg.DNAConv(3, heads=3, normalize=False)), None, True),
    *[(f"general-{i}", lambda kw=kw: gl.GeneralConv(6, 4, **kw),
       lambda kw=kw: pyg.GeneralConv(6, 4, **kw), kw.get("in_edge_channels"), False)
      for i, kw in enumerate([{}, {"aggr": "mean"}, {"directed_msg": False},
                              {"attention": True, "heads": 2},
                              {"attention": True, "attention_type": "dot_product", "heads": 2},
                              {"attention": True, "heads": 2, "aggr": "max"},
                              {"in_edge_channels": 2, "attention": True}])],
    # PyG's wrappers of a conv are no MessagePassing: the conv inside takes the mask
    ("dir-gnn", lambda: gl.DirGNNConv(gl.GCNConv(6, 5)),
     lambda: pyg.DirGNNConv(pyg.GCNConv(6, 5)), None, False),
    ("antisymmetric", lambda: gl.AntiSymmetricConv(6), lambda: pyg.AntiSymmetricConv(6), None,
     False),
    ("sage", lambda: gl.SAGEConv(6, 5), lambda: pyg.SAGEConv(6, 5), None, False),
    ("sage-sum", lambda: gl.SAGEConv(6, 5, aggr="sum"), lambda: pyg.SAGEConv(6, 5, aggr="sum"),
     None, False),
    ("sage-max", lambda: gl.SAGEConv(6, 5, aggr="max"), lambda: pyg.SAGEConv(6, 5, aggr="max"),
     None, False),
    ("gin", lambda: gl.GINConv(mlp(), train_eps=True),
     lambda: pyg.GINConv(mlp(), train_eps=True), None, False),
    ("gine", lambda: gl.GINEConv(mlp(), edge_dim=2), lambda: pyg.GINEConv(mlp(), edge_dim=2),
     2, False),
    ("eg", lambda: gl.EGConv(6, 8, num_heads=2), lambda: pyg.EGConv(6, 8, num_heads=2), None,
     False),
    ("eg-all-aggregators", lambda: gl.EGConv(6, 8, ["sum", "mean", "max", "min", "var", "std",
                                                    "symnorm"], num_heads=2, num_bases=3),
     lambda: pyg.EGConv(6, 8, ["sum", "mean", "max", "min", "var", "std", "symnorm"],
                        num_heads=2, num_bases=3), None, False),
    ("eg-no-loops", lambda: gl.EGConv(6, 8, ["symnorm", "max", "std"], num_heads=4,
                                      add_self_loops=False),
     lambda: pyg.EGConv(6, 8, ["symnorm", "max", "std"], num_heads=4, add_self_loops=False),
     None, False),
    ("eg-no-loops-sum", lambda: gl.EGConv(6, 8, ["sum", "var"], num_heads=2,
                                          add_self_loops=False),
     lambda: pyg.EGConv(6, 8, ["sum", "var"], num_heads=2, add_self_loops=False), None,
     False),
    ("film", lambda: gl.FiLMConv(6, 5), lambda: pyg.FiLMConv(6, 5), None, False),
    ("film-sum-linear", lambda: gl.FiLMConv(6, 5, aggr="sum", act=None),
     lambda: pyg.FiLMConv(6, 5, aggr="sum", act=None), None, False),
    ("film-max", lambda: gl.FiLMConv(6, 5, aggr="max"), lambda: pyg.FiLMConv(6, 5, aggr="max"),
     None, False),
    ("hypergraph", lambda: gl.HypergraphConv(6, 5), lambda: pyg.HypergraphConv(6, 5), None,
     False),
    ("hypergraph-attention", lambda: with_hyperedge_features(
        gl.HypergraphConv(6, 3, use_attention=True, heads=2)),
     lambda: with_hyperedge_features(pyg.HypergraphConv(6, 3, use_attention=True, heads=2)),
     None, False),
    ("hypergraph-attention-edge-mean", lambda: with_hyperedge_features(gl.HypergraphConv(
        6, 3, use_attention=True, attention_mode="edge", heads=2, concat=False)),
     lambda: with_hyperedge_features(pyg.HypergraphConv(
         6, 3, use_attention=True, attention_mode="edge", heads=2, concat=False)), None,
     False),
    ("graph", lambda: gl.GraphConv(6, 5), lambda: pyg.GraphConv(6, 5), None, True),
    ("graph-mean", lambda: gl.GraphConv(6, 5, aggr="mean"),
     lambda: pyg.GraphConv(6, 5, aggr="mean"), None, True),
]


def graph_with_loops(seed: int):
    """20 nodes, parallel edges, some self-loops (fewer than the nodes: with exactly one
    loop per node PyG applies the mask unshifted to its reordered edges) and an isolated
    node."""
    edge_index = random_edge_index(19, 70, seed=seed)
    loops = (edge_index[0] == edge_index[1]).sum().item()
    assert 0 < loops < 20
    return edge_index, 20


def call(conv, x, edge_index, edge_attr, edge_weight):
    if edge_attr is not None:
        return conv(x, edge_index, edge_attr)
    if edge_weight is not None:
        return conv(x, edge_index, edge_weight)
    return conv(x, edge_index)


def twin_case(ours, theirs, edge_dim, weighted):
    """An EXPLAINABLE case built: the two convs in float64 with PyG's weights, a graph with
    loops, features, edge features and edge weights where the case takes them, and one
    random factor per edge (``(ours, theirs, x, edge_index, edge_attr, edge_weight,
    factor)``)."""
    torch.manual_seed(0)
    edge_index, n = graph_with_loops(seed=3)
    theirs = theirs().double()
    ours = ours().double()
    ours.load_state_dict(theirs.state_dict())
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(n, 6, dtype=torch.float64, generator=gen)
    E = edge_index.size(1)
    edge_attr = None if edge_dim is None else \
        torch.randn(E, edge_dim, dtype=torch.float64, generator=gen)
    edge_weight = torch.rand(E, dtype=torch.float64, generator=gen) + 0.5 if weighted else None
    factor = torch.randn(E, dtype=torch.float64, generator=gen)
    return ours, theirs, x, edge_index, edge_attr, edge_weight, factor


@pytest.mark.parametrize("name,ours,theirs,edge_dim,weighted", EXPLAINABLE,
                         ids=[c[0] for c in EXPLAINABLE])
@pytest.mark.parametrize("apply_sigmoid", [True, False])
def test_an_edge_mask_scales_the_messages_as_in_pyg(name, ours, theirs, edge_dim, weighted,
                                                     apply_sigmoid):
    ours, theirs, x, edge_index, edge_attr, weight, mask = twin_case(ours, theirs, edge_dim,
                                                                     weighted)
    if not apply_sigmoid:
        mask = mask.sigmoid()
    results = []
    for conv in (ours, theirs):
        m = torch.nn.Parameter(mask.clone())
        xx = x.clone().requires_grad_()
        set_masks(conv, m, edge_index, apply_sigmoid=apply_sigmoid)
        out = call(conv, xx, edge_index, edge_attr, weight)
        grad_out = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator()
                               .manual_seed(2))
        grads = torch.autograd.grad(out, [m, xx], grad_out)
        clear_masks(conv)
        results.append((out, *grads))
    for a, b in zip(*results, strict=True):  # (PyG's ClusterGCN weights are float32)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)
    # the mask is cleared: the plain output again, and not the masked one
    plain = call(theirs, x, edge_index, edge_attr, weight)
    torch.testing.assert_close(call(ours, x, edge_index, edge_attr, weight), plain)
    assert not torch.allclose(results[0][0], plain)


class MessagesOutnumberEdges(Exception):
    """PyG's conv formed more or fewer messages than the caller gave edges (added loops)."""


def pyg_weighted_messages(weight):
    """PyG's ``to_hetero_with_bases`` hook, the edges read along the conv's ``node_dim``
    (PyG's own reads dim -2, the heads of an ``[E, H, C]`` message)."""
    def hook(module, inputs, out):
        dim = module.node_dim % out.dim()
        if out.size(dim) != weight.numel():
            raise MessagesOutnumberEdges
        return out * weight.view([-1 if d == dim else 1 for d in range(out.dim())])
    return hook


def weighted(model, weight, call_model):
    """``call_model()`` with each message of edge i times ``weight[i]``: PyG's convs in
    ``model`` through the hook, graphloc's through ``message_weights``."""
    with contextlib.ExitStack() as stack:
        for module in model.modules():
            if isinstance(module, pyg.MessagePassing) and not is_explain_port(module):
                handle = module.register_message_forward_hook(pyg_weighted_messages(weight))
                stack.callback(handle.remove)
            elif "explain_port" in module._modules:
                stack.enter_context(message_weights(module, weight))
        return call_model()


@pytest.mark.parametrize("name,ours,theirs,edge_dim,weighted_edges", EXPLAINABLE,
                         ids=[c[0] for c in EXPLAINABLE])
def test_message_weights_scale_each_edges_messages_as_pygs_hook(name, ours, theirs, edge_dim,
                                                                 weighted_edges):
    """``to_hetero_with_bases``'s path: each conv's messages times a weight per caller
    edge, against PyG's twin with the message hook; where PyG's conv adds self-loops (more
    messages than edges) graphloc's refuses, as PyG's hook does."""
    ours, theirs, x, edge_index, edge_attr, edge_weight, weight = twin_case(
        ours, theirs, edge_dim, weighted_edges)
    results = []
    for conv in (theirs, ours):
        w = torch.nn.Parameter(weight.clone())
        xx = x.clone().requires_grad_()
        try:
            out = weighted(conv, w, lambda c=conv, xx=xx: call(c, xx, edge_index, edge_attr,
                                                                edge_weight))
        except MessagesOutnumberEdges:
            with pytest.raises(ValueError, match="adds self-loops.*to_hetero_with_bases"):
                weighted(ours, weight, lambda: call(ours, x, edge_index, edge_attr,
                                                    edge_weight))
            return
        grad_out = torch.randn(out.shape, dtype=out.dtype,
                               generator=torch.Generator().manual_seed(2))
        results.append((out, *torch.autograd.grad(out, [w, xx], grad_out)))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-8)
    assert not torch.allclose(results[0][0], call(theirs, x, edge_index, edge_attr,
                                                  edge_weight))


@pytest.mark.parametrize("name,ours,theirs,edge_dim,weighted_edges", EXPLAINABLE,
                         ids=[c[0] for c in EXPLAINABLE])
def test_a_nan_weight_reaches_what_it_reaches_in_pyg(name, ours, theirs, edge_dim,
                                                     weighted_edges):
    """torch semantics on the weighted path: a NaN weight on two edges makes exactly the
    outputs NaN that it makes NaN in PyG's twin with the message hook (and a weight of 0
    or 1e30 on two others gives PyG's numbers)."""
    ours, theirs, x, edge_index, edge_attr, edge_weight, weight = twin_case(
        ours, theirs, edge_dim, weighted_edges)
    weight[5] = weight[17] = float("nan")
    weight[9], weight[30] = 0.0, 1e30
    try:
        want = weighted(theirs, weight, lambda: call(theirs, x, edge_index, edge_attr,
                                                      edge_weight))
    except MessagesOutnumberEdges:  # (refused: the test above)
        return
    got = weighted(ours, weight, lambda: call(ours, x, edge_index, edge_attr, edge_weight))
    assert bool(want.isnan().any())
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-8, equal_nan=True)


def test_the_mask_follows_the_edges_of_an_attention_graph_sorted_otherwise():
    """GAT's graph is reordered by destination with fresh loops: each caller edge must
    still get its own mask entry, checked against a dense softmax oracle."""
    torch.manual_seed(0)
    edge_index = torch.tensor([[3, 0, 2, 1, 2, 3], [0, 1, 1, 2, 0, 3]])  # one loop (3, 3)
    conv = gl.GATConv(4, 2).double()
    x = torch.randn(4, 4, dtype=torch.float64)
    mask = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], dtype=torch.float64)
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    out = conv(x, edge_index)
    h = conv.lin(x)
    a_src, a_dst = (h * conv.att_src[0]).sum(-1), (h * conv.att_dst[0]).sum(-1)
    # the non-loop edges with their masks, then one loop per node weighing 1
    edges = [(3, 0, 0.1), (0, 1, 0.2), (2, 1, 0.3), (1, 2, 0.4), (2, 0, 0.5)] + \
        [(i, i, 1.0) for i in range(4)]
    expected = torch.zeros(4, 2, dtype=torch.float64)
    for i in range(4):
        incoming = [(j, w) for j, d, w in edges if d == i]
        scores = torch.stack([torch.nn.functional.leaky_relu(a_src[j] + a_dst[i], 0.2)
                              for j, _ in incoming])
        alpha = scores.softmax(0)
        expected[i] = sum(a * w * h[j] for a, (j, w) in zip(alpha, incoming, strict=True))
    torch.testing.assert_close(out, expected + conv.bias)


@pytest.mark.parametrize("cls,aggr", [(gl.RGCNConv, "mean"), (gl.FastRGCNConv, "mean"),
                                      (gl.RGCNConv, "add")])
def test_relational_messages_are_masked_edge_by_edge(cls, aggr):
    """PyG's RGCNConv cannot be explained (its per-relation propagations count fewer
    messages than the mask has entries: an AssertionError); graphloc's scales each edge's
    message in its relation's aggregation, against a dense loop over the relations."""
    torch.manual_seed(0)
    edge_index, n = graph_with_loops(seed=3)
    edge_type = (edge_index[0] + 2 * edge_index[1]) % 3
    conv = cls(6, 5, 3, aggr=aggr).double()
    x = torch.randn(n, 6, dtype=torch.float64)
    mask = torch.rand(edge_index.size(1), dtype=torch.float64)
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    expected = x @ conv.root + conv.bias
    for r in range(3):
        for i in range(n):
            into = ((edge_index[1] == i) & (edge_type == r)).nonzero().flatten()
            if into.numel():
                total = (mask[into, None] * x[edge_index[0, into]]).sum(0)
                expected[i] += (total / (into.numel() if aggr == "mean" else 1)) @ conv.weight[r]
    torch.testing.assert_close(conv(x, edge_index, edge_type), expected)


def test_film_masks_each_edge_within_its_relation():
    """PyG's FiLMConv with several relations cannot be explained (as RGCNConv); graphloc's
    scales each edge's message act(gamma_r,i * W_r x_j + beta_r,i) within its relation's
    mean, against a dense loop over the relations."""
    torch.manual_seed(0)
    edge_index, n = graph_with_loops(seed=3)
    edge_type = (edge_index[0] + 2 * edge_index[1]) % 3
    conv = gl.FiLMConv(6, 5, num_relations=3).double()
    x = torch.randn(n, 6, dtype=torch.float64)
    mask = torch.rand(edge_index.size(1), dtype=torch.float64)
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    beta, gamma = conv.film_skip(x).split(5, dim=-1)
    expected = torch.relu(gamma * conv.lin_skip(x) + beta)
    for r in range(3):
        beta, gamma = conv.films[r](x).split(5, dim=-1)
        h = conv.lins[r](x)
        for i in range(n):
            into = ((edge_index[1] == i) & (edge_type == r)).nonzero().flatten()
            if into.numel():
                messages = torch.relu(gamma[i] * h[edge_index[0, into]] + beta[i])
                expected[i] += (mask[into, None] * messages).mean(0)
    torch.testing.assert_close(conv(x, edge_index, edge_type), expected)


def test_linkx_sparse_linear_masks_its_edges_as_pygs():
    from torch_geometric.nn.models.linkx import SparseLinear
    torch.manual_seed(0)
    edge_index, n = graph_with_loops(seed=2)
    theirs = SparseLinear(n, 5).double()
    ours = gl.SparseLinear(n, 5).double()
    ours.load_state_dict(theirs.state_dict())
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.5
    mask = torch.randn(edge_index.size(1), dtype=torch.float64)
    results = []
    for layer in (ours, theirs):
        m = torch.nn.Parameter(mask.clone())
        set_masks(layer, m, edge_index)
        out = layer(edge_index, weight)
        results.append((out, *torch.autograd.grad(out.square().sum(), [m, layer.weight])))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("loops", [False, True])
def test_lift_gcn_masks_its_normalised_adjacency(loops):
    """LiftConv (no PyG twin): rho * (A_hat o M) H against the dense formula, degrees
    unmasked; LiftGCN, which shares one LiftConv across its steps, explained whole."""
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    conv = gl.LiftConv(6, add_self_loops=loops).double()
    mask = torch.rand(edge_index.size(1), dtype=torch.float64)
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    n = x.size(0)
    adjacency, masked = torch.zeros(n, n, dtype=torch.float64), torch.zeros(n, n,
                                                                            dtype=torch.float64)
    for (src, dst), m in zip(edge_index.t().tolist(), mask.tolist(), strict=True):
        adjacency[dst, src] += 1
        masked[dst, src] += m
    if loops:
        adjacency += torch.eye(n, dtype=torch.float64)
        masked += torch.eye(n, dtype=torch.float64)
    inv_sqrt = adjacency.sum(1).pow(-0.5).nan_to_num(posinf=0.0)
    expected = conv.rho * ((inv_sqrt[:, None] * masked * inv_sqrt[None, :]) @ x.double())
    torch.testing.assert_close(conv(x.double(), edge_index), expected)
    model = gl.LiftGCN(6, 8, 3, num_layers=3, add_self_loops=loops).eval()
    got = explanation(model, GNNExplainer(epochs=3), x, edge_index)
    assert got.edge_mask.abs().sum() > 0


def test_simple_convs_added_loops_weigh_one_after_the_callers_edges():
    """SimpleConv(combine_root="self_loop") keeps the caller's loops and adds one per node:
    on a graph without loops PyG's; with loops PyG drops their entries and shifts the rest,
    graphloc keeps each edge's own (a dense oracle)."""
    x, edge_index = toy_graph()
    mask = torch.rand(edge_index.size(1), generator=torch.Generator().manual_seed(1))
    ours, theirs = gl.SimpleConv("sum", "self_loop"), pyg.SimpleConv("sum", "self_loop")
    for conv in (ours, theirs):
        set_masks(conv, mask, edge_index, apply_sigmoid=False)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    looped = torch.cat([edge_index, torch.tensor([[3, 5], [3, 5]])], dim=1)
    mask = torch.cat([mask, torch.tensor([0.25, 0.5])])
    set_masks(ours, mask, looped, apply_sigmoid=False)
    dense = torch.eye(x.size(0))
    for (src, dst), m in zip(looped.t().tolist(), mask.tolist(), strict=True):
        dense[dst, src] += m
    torch.testing.assert_close(ours(x, looped), dense @ x)


def test_a_loop_on_every_node_keeps_each_edge_its_own_mask_entry():
    """With exactly one loop per node PyG's count of messages equals the mask's, so PyG
    applies the mask unshifted to its reordered edges (the loops moved last): graphloc keeps
    each edge's entry, and the loops 1, against the dense D^-1/2 (A o M + I) D^-1/2 with
    the unmasked degrees."""
    edge_index = torch.tensor([[0, 1, 2, 3, 1, 2, 0, 3],
                               [0, 1, 2, 3, 0, 1, 2, 2]])  # loops first, then 4 edges
    conv = gl.GCNConv(3, 2, bias=False).double()
    x = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2], dtype=torch.float64)
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    adjacency, masked = torch.eye(4, dtype=torch.float64), torch.eye(4, dtype=torch.float64)
    for (src, dst), m in zip(edge_index.t().tolist()[4:], mask[4:].tolist(), strict=True):
        adjacency[dst, src] += 1
        masked[dst, src] += m
    inv_sqrt = adjacency.sum(1).pow(-0.5)
    expected = inv_sqrt[:, None] * masked * inv_sqrt[None, :] @ conv.lin(x)
    torch.testing.assert_close(conv(x, edge_index), expected)
    theirs = pyg.GCNConv(3, 2, bias=False).double()
    theirs.load_state_dict(conv.state_dict())
    set_masks(theirs, mask, edge_index, apply_sigmoid=False)
    assert not torch.allclose(theirs(x, edge_index), expected)  # PyG's shifted masks


class Net(torch.nn.Module):
    def __init__(self, nn, width=6):
        super().__init__()
        if nn is gl or nn is pyg:
            self.conv1 = nn.GCNConv(width, 8)
            self.conv2 = nn.GATConv(8, 4, heads=2)
            self.conv3 = nn.SAGEConv(8, 3)
        else:  # a mixed model
            self.conv1, self.conv2, self.conv3 = nn

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu()
        x = self.conv2(x, edge_index).relu()
        return self.conv3(x, edge_index)


def twin_models(seed=0):
    torch.manual_seed(seed)
    theirs = Net(pyg)
    ours = Net(gl)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def toy_graph(seed=5, n=30):
    edge_index = random_edge_index(n, 90, seed=seed)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(seed))
    return x, edge_index


@pytest.mark.parametrize("make", [lambda nn: nn.DirGNNConv(nn.GCNConv(6, 5)),
                                  lambda nn: nn.AntiSymmetricConv(6),
                                  lambda nn: nn.WLConv(), lambda nn: nn.GCNConv(6, 5),
                                  lambda nn: nn.GINConv(torch.nn.Linear(6, 5))],
                         ids=["dir-gnn", "antisymmetric", "wl", "gcn", "gin"])
def test_each_conv_counts_the_hops_pygs_counts(make):
    assert get_num_hops(make(gl)) == get_num_hops(make(pyg))


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_the_explainers_read_each_convs_own_edge_direction(flow):
    """PyG's explainers take a node's k-hop neighbourhood in the first layer's flow: the
    port's must be its conv's (a wrong one drops the edges that reach the node)."""
    from torch_geometric.explain.algorithm.base import ExplainerAlgorithm
    ours = Net([gl.GCNConv(6, 8, flow=flow), gl.GATConv(8, 8, flow=flow),
                gl.SAGEConv(8, 3, flow=flow)])
    theirs = Net([pyg.GCNConv(6, 8, flow=flow), pyg.GATConv(8, 8, flow=flow),
                  pyg.SAGEConv(8, 3, flow=flow)])
    assert ExplainerAlgorithm._flow(ours) == ExplainerAlgorithm._flow(theirs) == flow
    x, edge_index = toy_graph()
    got = ExplainerAlgorithm._get_hard_masks(ours, 4, edge_index, x.size(0))
    expected = ExplainerAlgorithm._get_hard_masks(theirs, 4, edge_index, x.size(0))
    assert torch.equal(got[1], expected[1])


def test_hops_and_embeddings_are_pygs():
    ours, theirs = twin_models()
    x, edge_index = toy_graph()
    assert get_num_hops(ours) == get_num_hops(theirs) == 3
    got, expected = get_embeddings(ours, x, edge_index), get_embeddings(theirs, x, edge_index)
    assert len(got) == len(expected) == 3
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def explanation(model, algorithm, x, edge_index, seed=0, **config):
    explainer = Explainer(model, algorithm, explanation_type="model",
                          node_mask_type=config.pop("node_mask_type", "attributes"),
                          edge_mask_type="object",
                          model_config=dict(mode="multiclass_classification",
                                            task_level="node", return_type="raw"))
    torch.manual_seed(seed)
    return explainer(x, edge_index, index=torch.tensor([0, 4]))


def test_gnn_explainer_gives_pygs_explanation():
    ours, theirs = twin_models()
    x, edge_index = toy_graph()
    got = explanation(ours, GNNExplainer(epochs=30), x, edge_index)
    expected = explanation(theirs, GNNExplainer(epochs=30), x, edge_index)
    torch.testing.assert_close(got.edge_mask, expected.edge_mask, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got.node_mask, expected.node_mask, rtol=1e-4, atol=1e-5)
    assert got.edge_mask.abs().sum() > 0
    assert ours.conv1.explain is None  # the masks are cleared after


def test_attention_explainer_reads_gats_weights_as_pygs():
    ours, theirs = twin_models()
    x, edge_index = toy_graph()
    got = explanation(ours, AttentionExplainer(), x, edge_index, node_mask_type=None)
    expected = explanation(theirs, AttentionExplainer(), x, edge_index, node_mask_type=None)
    torch.testing.assert_close(got.edge_mask, expected.edge_mask, rtol=1e-5, atol=1e-6)
    assert got.edge_mask.abs().sum() > 0


class Single(torch.nn.Module):
    """One conv, then a linear read-out."""

    def __init__(self, conv, width):
        super().__init__()
        self.conv, self.lin = conv, torch.nn.Linear(width, 3)

    def forward(self, x, edge_index):
        return self.lin(self.conv(x, edge_index))


@pytest.mark.parametrize("make,width", [
    (lambda nn: with_initial(nn.FAConv(6)), 6), (lambda nn: nn.GATv2Conv(6, 3, heads=2), 6),
    (lambda nn: nn.TransformerConv(6, 3), 3)], ids=["fa", "gatv2", "transformer"])
def test_every_attention_conv_gives_attention_explainer_its_weights(make, width):
    """Those whose PyG twin shows its weights to AttentionExplainer (AGNNConv's computes
    them inside its message, so PyG's explainer collects none from it, nor graphloc's)."""
    torch.manual_seed(0)
    theirs = Single(make(pyg), width)
    ours = Single(make(gl), width)
    ours.load_state_dict(theirs.state_dict())
    x, edge_index = toy_graph()
    got = explanation(ours, AttentionExplainer(), x, edge_index, node_mask_type=None)
    expected = explanation(theirs, AttentionExplainer(), x, edge_index, node_mask_type=None)
    torch.testing.assert_close(got.edge_mask, expected.edge_mask, rtol=1e-5, atol=1e-6)
    assert got.edge_mask.abs().sum() > 0


def test_pg_explainer_trains_and_explains_as_on_pygs_model():
    ours, theirs = twin_models()
    x, edge_index = toy_graph()
    masks = []
    for model in (ours, theirs):
        torch.manual_seed(0)
        algorithm = PGExplainer(epochs=3, lr=0.01)
        explainer = Explainer(model, algorithm, explanation_type="phenomenon",
                              edge_mask_type="object",
                              model_config=dict(mode="multiclass_classification",
                                                task_level="node", return_type="raw"))
        target = model(x, edge_index).argmax(-1)
        for epoch in range(3):
            algorithm.train(epoch, model, x, edge_index, target=target, index=2)
        masks.append(explainer(x, edge_index, target=target, index=2).edge_mask)
    torch.testing.assert_close(masks[0], masks[1], rtol=1e-4, atol=1e-5)


def test_a_conv_that_does_not_apply_masks_is_refused_by_name():
    torch.manual_seed(0)
    model = Net([pyg.GCNConv(6, 8), Called(gl.SignedConv(8, 4, first_aggr=True),
                                         lambda c, x, e: c(x, e, e.flip(0))),
                 pyg.SAGEConv(8, 3)])
    x, edge_index = toy_graph()
    with pytest.raises(ValueError, match="SignedConv does not take part"):
        explanation(model, GNNExplainer(epochs=2), x, edge_index)
    # its output is no explanation: get_embeddings reads it as a PyG conv's
    embeddings = get_embeddings(model, x, edge_index)
    first = model.conv1(x, edge_index).relu()
    torch.testing.assert_close(embeddings[1], model.conv2(first, edge_index))
    # left out on purpose, as PyG's explain = False
    model.conv2.conv.explain = False
    clear_masks(model)
    got = explanation(model, GNNExplainer(epochs=2), x, edge_index)
    assert got.edge_mask.shape == (edge_index.size(1),)


def test_graphmask_explainer_is_refused():
    ours, _ = twin_models()
    x, edge_index = toy_graph()
    explainer = Explainer(ours, GraphMaskExplainer(3, epochs=1), explanation_type="model",
                          node_mask_type="attributes", edge_mask_type="object",
                          model_config=dict(mode="multiclass_classification",
                                            task_level="node", return_type="raw"))
    with pytest.raises(ValueError, match="replaced explain_message"):
        explainer(x, edge_index, index=0)


def test_a_mask_of_another_length_is_refused():
    conv = gl.GCNConv(6, 5)
    x, edge_index = toy_graph()
    set_masks(conv, torch.zeros(edge_index.size(1) - 1), edge_index)
    with pytest.raises(ValueError, match=rf"shape \[{edge_index.size(1) - 1}\].* "
                                         rf"{edge_index.size(1)} edges"):
        conv(x, edge_index)


def test_explain_mode_with_a_sparse_adjacency_or_without_a_mask_is_refused():
    conv = gl.GCNConv(6, 5)
    x, edge_index = toy_graph()
    adjacency = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1)),
                                        (x.size(0), x.size(0)))
    set_masks(conv, torch.zeros(edge_index.size(1)), edge_index)
    with pytest.raises(ValueError, match="GCNConv: explanations and to_hetero_with_bases take "
                                         "the graph as an "
                                         "edge_index .* not a torch.sparse adjacency"):
        conv(x, adjacency)
    clear_masks(conv)
    conv.explain = True  # by hand, no mask set
    with pytest.raises(ValueError, match="GCNConv: in explain mode without an edge mask"):
        conv(x, edge_index)


def test_a_mask_that_is_not_floating_point_is_refused():
    conv = gl.GATConv(6, 5)
    x, edge_index = toy_graph()
    set_masks(conv, torch.ones(edge_index.size(1), dtype=torch.bool), edge_index)
    with pytest.raises(ValueError, match="GATConv: the explainer's edge mask must be a "
                                         "floating-point tensor, got torch.bool"):
        conv(x, edge_index)


def test_a_nan_in_the_mask_reaches_only_that_edges_destination():
    conv = gl.GCNConv(6, 5, add_self_loops=False)
    x, edge_index = toy_graph()
    mask = torch.ones(edge_index.size(1))
    mask[0] = float("nan")
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    out = conv(x, edge_index)
    reached = torch.zeros(x.size(0), dtype=torch.bool)
    reached[edge_index[1, 0]] = True
    assert out[reached].isnan().all() and not out[~reached].isnan().any()


@pytest.mark.parametrize("loops", [True, False])
def test_point_convs_mask_their_messages_as_pygs(loops):
    """PointNetConv, PPFConv (positions, normals), PointTransformerConv and PointGNNConv:
    PyG's convs in explain mode, same weights and mask (the graph has no loops: PyG's rule
    then holds for both)."""
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    gen = torch.Generator().manual_seed(2)
    pos = torch.randn(x.size(0), 3, generator=gen)
    normal = torch.nn.functional.normalize(torch.randn(x.size(0), 3, generator=gen), dim=-1)
    mask = torch.rand(edge_index.size(1), generator=gen)
    for name, extra in (("PointNetConv", ()), ("PPFConv", (normal,)),
                        ("PointTransformerConv", ()), ("PointGNNConv", ())):
        if name == "PointTransformerConv":
            theirs = pyg.PointTransformerConv(6, 5, add_self_loops=loops)
            ours = gl.PointTransformerConv(6, 5, add_self_loops=loops)
        elif name == "PointGNNConv":  # (no loops of its own: the same both times)
            networks = (torch.nn.Linear(6, 3), torch.nn.Linear(9, 6), torch.nn.Linear(6, 6))
            theirs = pyg.PointGNNConv(*copy.deepcopy(networks))
            ours = gl.PointGNNConv(*copy.deepcopy(networks))
        else:
            width = 6 + (3 if name == "PointNetConv" else 4)
            theirs = getattr(pyg, name)(torch.nn.Linear(width, 5), add_self_loops=loops)
            ours = getattr(gl, name)(torch.nn.Linear(width, 5), add_self_loops=loops)
        ours.load_state_dict(theirs.state_dict())
        outs = []
        for conv in (ours, theirs):
            set_masks(conv, mask, edge_index, apply_sigmoid=False)
            outs.append(conv(x, pos, *extra, edge_index))
        torch.testing.assert_close(outs[0], outs[1])
        clear_masks(theirs)
        assert not torch.allclose(outs[0], theirs(x, pos, *extra, edge_index))


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_spline_messages_are_masked_edge_by_edge(aggr):
    """PyG's SplineConv needs pyg-lib (not installable here): the oracle is graphloc's own
    conv on each edge alone (root and bias off), its one message times the edge's mask
    entry, aggregated by hand."""
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    gen = torch.Generator().manual_seed(1)
    pseudo = torch.rand(edge_index.size(1), 2, generator=gen)
    mask = torch.rand(edge_index.size(1), generator=gen)
    conv = gl.SplineConv(6, 5, dim=2, kernel_size=3, aggr=aggr, root_weight=False, bias=False)
    messages = torch.stack([conv(x, edge_index[:, e:e + 1], pseudo[e:e + 1])[edge_index[1, e]]
                            for e in range(edge_index.size(1))])
    masked = messages * mask.unsqueeze(-1)
    expected = torch.zeros(x.size(0), 5)
    for i in range(x.size(0)):
        into = edge_index[1] == i
        if into.any():
            rows = masked[into]
            expected[i] = {"add": rows.sum(0), "mean": rows.mean(0),
                           "max": rows.max(0).values}[aggr]
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    torch.testing.assert_close(conv(x, edge_index, pseudo), expected)


def test_a_static_batch_masks_every_copy_of_an_edge_alike():
    """x of shape [B, N, F] on one graph runs as B copies: each copy's edges take the mask
    of the edge they copy, as each copy called alone."""
    conv = gl.GATConv(6, 3, heads=2)
    x, edge_index = toy_graph()
    batch = torch.stack([x, 2 * x, -x])
    mask = torch.rand(edge_index.size(1), generator=torch.Generator().manual_seed(4))
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    expected = torch.stack([conv(copy, edge_index) for copy in batch])
    torch.testing.assert_close(conv(batch, edge_index), expected)


def test_the_port_adds_no_state_and_survives_copies():
    conv = gl.GATConv(6, 3, heads=2)
    assert list(conv.state_dict()) == list(pyg.GATConv(6, 3, heads=2).state_dict())
    x, edge_index = toy_graph()
    copies = [copy.deepcopy(conv), pickle.loads(pickle.dumps(conv))]  # before any hook
    get_embeddings(conv, x, edge_index)  # the relay is on: later copies carry it
    for twin in (*copies, copy.deepcopy(conv), pickle.loads(pickle.dumps(conv))):
        torch.testing.assert_close(twin(x, edge_index), conv(x, edge_index))
        with torch.no_grad():
            twin.lin.weight.mul_(2)  # the copy's own output, not the original's
        embeddings = get_embeddings(twin, x, edge_index)
        torch.testing.assert_close(embeddings[0], twin(x, edge_index))
        set_masks(twin, torch.zeros(edge_index.size(1)), edge_index)
        assert twin.explain is True and conv.explain is None


def test_pygs_summary_lists_a_model_with_any_conv():
    """summary hooks every module, the ports included: a conv that takes no mask is still
    summarised."""
    from torch_geometric.nn import summary
    x, edge_index = toy_graph()
    model = Net([gl.EGConv(6, 8), gl.GCNConv(8, 8), gl.SAGEConv(8, 3)])
    table = summary(model, x, edge_index)
    assert "EGConv" in table and "[30, 8]" in table


def test_captum_explainer_gives_pygs_attributions():
    pytest.importorskip("captum")
    from torch_geometric.explain.algorithm import CaptumExplainer
    ours, theirs = twin_models()
    x, edge_index = toy_graph()
    got = explanation(ours, CaptumExplainer("IntegratedGradients"), x, edge_index)
    expected = explanation(theirs, CaptumExplainer("IntegratedGradients"), x, edge_index)
    torch.testing.assert_close(got.edge_mask, expected.edge_mask, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(got.node_mask, expected.node_mask, rtol=1e-4, atol=1e-6)
    assert got.edge_mask.abs().sum() > 0


def test_a_heterogeneous_model_is_explained_as_pygs():
    from torch_geometric.data import HeteroData
    from torch_geometric.explain import HeteroExplanation  # noqa: F401 (what comes back)

    data = HeteroData()
    gen = torch.Generator().manual_seed(0)
    data["paper"].x = torch.randn(12, 6, generator=gen)
    data["author"].x = torch.randn(9, 6, generator=gen)
    data["paper", "cites", "paper"].edge_index = torch.randint(0, 12, (2, 30), generator=gen)
    data["author", "writes", "paper"].edge_index = torch.stack(
        [torch.randint(0, 9, (25,), generator=gen), torch.randint(0, 12, (25,), generator=gen)])
    data["paper", "rev_writes", "author"].edge_index = \
        data["author", "writes", "paper"].edge_index.flip(0)

    class Base(torch.nn.Module):
        def __init__(self, nn):
            super().__init__()
            self.conv1 = nn.SAGEConv((-1, -1), 8)
            self.conv2 = nn.GraphConv((-1, -1), 4)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    class Papers(torch.nn.Module):
        def __init__(self, gnn):
            super().__init__()
            self.gnn = gnn

        def forward(self, x_dict, edge_index_dict):
            return self.gnn(x_dict, edge_index_dict)["paper"]

    torch.manual_seed(0)
    theirs = Papers(pyg.to_hetero(Base(pyg), data.metadata()))
    theirs(data.x_dict, data.edge_index_dict)  # the lazy widths
    ours = Papers(gl.to_hetero(Base(gl), data.metadata()))
    ours(data.x_dict, data.edge_index_dict)
    ours.load_state_dict(theirs.state_dict())
    masks = []
    for model in (ours, theirs):
        explainer = Explainer(model, GNNExplainer(epochs=20), explanation_type="model",
                              node_mask_type="attributes", edge_mask_type="object",
                              model_config=dict(mode="regression", task_level="node",
                                                return_type="raw"))
        torch.manual_seed(0)
        masks.append(explainer(data.x_dict, data.edge_index_dict,
                               index=torch.tensor([1, 3])).edge_mask_dict)
    assert masks[0].keys() == masks[1].keys() and len(masks[0]) == 3
    for key in masks[1]:
        torch.testing.assert_close(masks[0][key], masks[1][key], rtol=1e-4, atol=1e-5)
    assert sum(float(m.abs().sum()) for m in masks[0].values()) > 0


@pytest.mark.parametrize("make", [lambda nn: nn.SGConv(6, 5, K=2, cached=True),
                                  lambda nn: nn.APPNP(2, 0.1, cached=True),
                                  lambda nn: nn.GCNConv(6, 5, cached=True)],
                         ids=["sg", "appnp", "gcn"])
def test_a_cached_conv_is_explained_on_this_graph_and_keeps_its_cache(make):
    """PyG's cached SGConv returns the first call's features whatever the mask (an
    explanation of nothing); graphloc's computes the masked call afresh, equal to PyG's
    conv built without the cache, and neither reads nor fills the cache."""
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    ours = make(gl)
    uncached = make(pyg)
    uncached.cached = False
    if list(uncached.state_dict()):
        ours.load_state_dict(uncached.state_dict())
    plain = ours(x, edge_index)  # fills the cache
    mask = torch.rand(edge_index.size(1), generator=torch.Generator().manual_seed(3))
    for conv in (ours, uncached):
        set_masks(conv, mask, edge_index, apply_sigmoid=False)
    torch.testing.assert_close(ours(x, edge_index), uncached(x, edge_index))
    clear_masks(ours)
    torch.testing.assert_close(ours(x, edge_index), plain)


def test_every_conv_whose_pyg_namesake_passes_messages_carries_a_port():
    """So that PyG's tools count it, and an explainer's mask is applied or refused."""
    from graphloc.nn.conv._base import ConvModule
    convs = [getattr(gl, name) for name in dir(gl) if isinstance(getattr(gl, name), type)
             and getattr(gl, name).__module__.startswith("graphloc.nn.conv.")]
    checked = 0
    for cls in convs:
        twin = getattr(pyg, cls.__name__, None)
        if isinstance(twin, type) and issubclass(twin, pyg.MessagePassing):
            assert issubclass(cls, ConvModule), cls.__name__
            checked += 1
        elif isinstance(twin, type):
            assert not issubclass(cls, ConvModule), cls.__name__  # PyG counts no hop
    assert checked > 50


def test_a_conv_that_refuses_says_which_convs_apply_masks():
    conv = gl.DynamicEdgeConv(torch.nn.Linear(12, 5), k=3)
    x, edge_index = toy_graph()
    with pytest.raises(ValueError, match="DynamicEdgeConv does not take part.* EdgeConv, "
                                         ".*GCNConv, .*SAGEConv"):
        set_masks(conv, torch.zeros(edge_index.size(1)), edge_index)


def test_without_pyg_the_convs_run_and_say_what_explanations_need(tmp_path):
    """PyG is optional: without it a conv has no port, computes as before, and refuses
    explain mode by name."""
    script = tmp_path / "no_pyg.py"
    script.write_text(
        "import sys\n"
        "sys.modules['torch_geometric'] = None  # an import of it fails\n"
        "import torch\n"
        "import graphloc.nn as gl\n"
        "conv = gl.GATConv(4, 3)\n"
        "assert 'explain_port' not in dict(conv.named_children())\n"
        "out = conv(torch.randn(5, 4), torch.tensor([[0, 1, 2], [1, 2, 3]]))\n"
        "assert out.shape == (5, 3) and conv.explain is None\n"
        "try:\n"
        "    conv.explain = True\n"
        "except ValueError as err:\n"
        "    assert 'need PyG' in str(err), err\n"
        "else:\n"
        "    raise AssertionError('explain mode without PyG was taken')\n"
        "print('ok')\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_the_pruned_forward_of_a_gcn_refuses_a_set_mask():
    conv = gl.GCNConv(6, 5)
    x, edge_index = toy_graph()
    set_masks(conv, torch.zeros(edge_index.size(1)), edge_index)
    with pytest.raises(ValueError, match="forward_prefix: the layer is being explained"):
        conv.forward_prefix(x, Graph(edge_index, num_nodes=x.size(0)), 4)


@pytest.mark.parametrize("basic_gnn", [pyg.GCN, pyg.GAT, pyg.GIN, pyg.GraphSAGE])
def test_a_pyg_model_converted_by_from_pyg_explains_as_the_original(basic_gnn):
    """PyG's BasicGNN and its graphloc twin (``from_pyg``: graphloc's GNN) give the same
    GNNExplainer explanation."""
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    model = basic_gnn(6, 8, num_layers=2, out_channels=3)
    twin = gl.from_pyg(model, example=(x, edge_index))
    assert type(twin).__module__.startswith("graphloc")
    got = explanation(twin, GNNExplainer(epochs=15), x, edge_index)
    expected = explanation(model, GNNExplainer(epochs=15), x, edge_index)
    torch.testing.assert_close(got.edge_mask, expected.edge_mask, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got.node_mask, expected.node_mask, rtol=1e-4, atol=1e-5)


def masked_pair(ours, theirs, call, mask, edge_index):
    """Both convs' outputs under one mask, the same weights, and graphloc's unmasked."""
    ours.load_state_dict(theirs.state_dict())
    plain = call(ours)
    outs = []
    for conv in (ours, theirs):
        set_masks(conv, mask, edge_index, apply_sigmoid=True)
        outs.append(call(conv))
    return (*outs, plain)


@pytest.mark.parametrize("name", ["gcn", "gat", "sage", "gin"])
def test_an_empty_graph_an_infinite_mask_and_a_hub_give_pygs_numbers(name):
    """No edges (a mask of no entries); entries of -inf and +inf (weights 0 and 1 after
    the sigmoid); a hub of in-degree 400 beside isolated nodes."""
    make = {"gcn": lambda nn: nn.GCNConv(6, 5), "gat": lambda nn: nn.GATConv(6, 3, heads=2),
            "sage": lambda nn: nn.SAGEConv(6, 5), "gin": lambda nn: nn.GINConv(mlp())}[name]
    torch.manual_seed(0)
    x = torch.randn(30, 6)
    empty = torch.empty(2, 0, dtype=torch.long)
    ours, theirs, _ = masked_pair(make(gl), make(pyg), lambda c: c(x, empty), torch.empty(0),
                                  empty)
    torch.testing.assert_close(ours, theirs)
    sources = torch.randint(0, 20, (400,))
    hub = torch.cat([random_edge_index(20, 60, seed=1),
                     torch.stack([sources, torch.zeros_like(sources)])], dim=1)
    hub = hub[:, hub[0] != hub[1]]
    mask = torch.randn(hub.size(1))
    mask[::7], mask[3::7] = float("-inf"), float("inf")
    ours, theirs, _ = masked_pair(make(gl), make(pyg), lambda c: c(x, hub), mask, hub)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(ours).all()


@pytest.mark.parametrize("name", ["gat", "sage", "graph", "gin"])
def test_a_bipartite_call_masks_its_edges_as_pygs(name):
    make = {"gat": lambda nn: nn.GATConv((6, 4), 3, heads=2, add_self_loops=False),
            "sage": lambda nn: nn.SAGEConv((6, 4), 5),
            "graph": lambda nn: nn.GraphConv((6, 4), 5),
            "gin": lambda nn: nn.GINConv(mlp())}[name]
    torch.manual_seed(0)
    x_src = torch.randn(12, 6)
    x_dst = torch.randn(7, 6 if name == "gin" else 4)
    edge_index = torch.stack([torch.randint(0, 12, (40,)), torch.randint(0, 7, (40,))])
    mask = torch.randn(40)
    ours, theirs, plain = masked_pair(make(gl), make(pyg),
                                      lambda c: c((x_src, x_dst), edge_index), mask, edge_index)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(ours, plain)


def test_a_pickled_conv_loads_in_a_fresh_process():
    """The port's class is made when PyG is first needed: unpickling makes it by name."""
    blob = pickle.dumps(gl.GATConv(4, 3))
    code = ("import pickle, sys\n"
            "conv = pickle.loads(sys.stdin.buffer.read())\n"
            "print(type(conv.explain_port).__name__, conv.explain_port.owner_ref() is conv)\n")
    run = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.split() == [b"ExplainPort", b"True"], \
        run.stderr[-2000:]


def reach_by_jacobian(model, n=24):
    """The farthest hop whose features a node's output reads: the Jacobian of the middle
    node of a path graph (both directions), by autograd (math, not the models' own count)."""
    chain = torch.arange(n - 1)
    edge_index = torch.cat([torch.stack([chain, chain + 1]), torch.stack([chain + 1, chain])], 1)
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(0), requires_grad=True)
    middle = n // 2
    out = model.eval()(x, edge_index)[middle].sum()
    (grad,) = torch.autograd.grad(out, x)
    read = grad.abs().sum(1).nonzero().flatten()
    return int((read - middle).abs().max())


HOP_MODELS = {
    "dagnn": lambda: gl.DAGNN(6, 8, 3, K=4),
    "liftgcn": lambda: gl.LiftGCN(6, 8, 3, num_layers=3),
    "adgn": lambda: gl.ADGN(6, 8, 3, num_layers=3),
    "gnn-cheb": lambda: gl.GNN("cheb", 6, 8, 3, 2, K=3),
    "gnn-tag": lambda: gl.GNN("tag", 6, 8, 3, 2),
    "gnn-gcn": lambda: gl.GNN("gcn", 6, 8, 3, 3),
}


@pytest.mark.parametrize("name", HOP_MODELS)
def test_graphloc_models_count_as_many_hops_as_they_read(name):
    """PyG's get_num_hops counts message-passing modules; a model that calls one conv K
    times (LiftGCN, A-DGN), propagates K steps (DAGNN) or stacks K-hop convs counted fewer,
    and PGExplainer cut its explanations short. The hop ports make up the difference:
    against the reach of the Jacobian on a path graph."""
    torch.manual_seed(0)
    model = HOP_MODELS[name]()
    assert get_num_hops(model) == reach_by_jacobian(model)
    assert get_num_hops(copy.deepcopy(model)) == get_num_hops(model)
    assert not any("explain" in key for key in model.state_dict())  # (the ports hold nothing)


def test_pg_explainer_keeps_the_far_edges_of_a_model_that_reuses_its_conv():
    """LiftGCN with one LiftConv for 3 hops: PGExplainer's hard mask, PyG's k-hop
    subgraph of get_num_hops, kept only the 1-hop edges before."""
    from torch_geometric.utils import k_hop_subgraph
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    model = gl.LiftGCN(6, 8, 3, num_layers=3).eval()
    target = model(x, edge_index).argmax(-1)
    algorithm = PGExplainer(epochs=2, lr=0.01)
    explainer = Explainer(model, algorithm, explanation_type="phenomenon",
                          edge_mask_type="object",
                          model_config=dict(mode="multiclass_classification",
                                            task_level="node", return_type="raw"))
    for epoch in range(2):
        algorithm.train(epoch, model, x, edge_index, target=target, index=3)
    got = explainer(x, edge_index, target=target, index=3).edge_mask
    *_, three_hops = k_hop_subgraph(3, 3, edge_index, num_nodes=x.size(0))
    *_, one_hop = k_hop_subgraph(3, 1, edge_index, num_nodes=x.size(0))
    assert bool((got[~three_hops] == 0).all())
    assert bool((got[three_hops & ~one_hop] > 0).any())


class OfficialProp(pyg.MessagePassing):
    """The official DAGNN's ``Prop`` (mengliu1998/DeeperGNN): K propagations over
    gcn_norm's graph, the stack scored by one linear map and sigmoid, summed."""

    def __init__(self, channels, K):
        super().__init__(aggr="add")
        self.K, self.proj = K, torch.nn.Linear(channels, 1)

    def forward(self, x, edge_index):
        from torch_geometric.nn.conv.gcn_conv import gcn_norm
        edge_index, norm = gcn_norm(edge_index, None, x.size(0), dtype=x.dtype)
        preds = [x]
        for _ in range(self.K):
            x = self.propagate(edge_index, x=x, norm=norm)
            preds.append(x)
        stack = torch.stack(preds, dim=1)
        score = torch.sigmoid(self.proj(stack)).squeeze(-1).unsqueeze(1)
        return torch.matmul(score, stack).squeeze(1)

    def message(self, x_j, norm):
        return norm.view(-1, 1) * x_j


def test_dagnn_is_explained_as_the_official_prop_in_pygs_explain_mode():
    """DAGNN's propagation takes an explainer's mask as the official Prop, a PyG
    MessagePassing, does in PyG's explain mode (same weights, same mask): outputs and the
    mask's and features' gradients."""
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    edge_index = torch.cat([edge_index, torch.tensor([[2, 7], [2, 7]])], dim=1)  # loops
    ours = gl.DAGNN(6, 8, 3, K=4, dropout=0.0).double().eval()
    prop = OfficialProp(3, 4).double()
    prop.proj.load_state_dict(ours.gate.state_dict())
    mask = torch.rand(edge_index.size(1), dtype=torch.float64,
                      generator=torch.Generator().manual_seed(1))
    results = []
    for model, call in [(ours, lambda xx: ours(xx, edge_index)),
                        (prop, lambda xx: prop(ours.lin2(torch.relu(ours.lin1(xx))),
                                               edge_index))]:
        m = torch.nn.Parameter(mask.clone())
        xx = x.double().clone().requires_grad_()
        set_masks(model, m, edge_index, apply_sigmoid=False)
        out = call(xx)
        results.append((out, *torch.autograd.grad(out.square().sum(), [m, xx])))
        clear_masks(model)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b)
    embeddings = get_embeddings(ours, x.double(), edge_index)  # the output, as Prop's
    torch.testing.assert_close(embeddings[-1], ours(x.double(), edge_index))


@pytest.mark.parametrize("make", [lambda nn: nn.SAGEConv(6, 5),
                                  lambda nn: nn.GATConv(6, 5, add_self_loops=False),
                                  lambda nn: nn.GCNConv(6, 5, add_self_loops=False)],
                         ids=["sage", "gat", "gcn"])
def test_an_explainer_mask_and_message_weights_compose_as_pygs_hook_and_mask(make):
    """A conv weighed per edge (to_hetero_with_bases) and explained at once: each message
    times its weight (PyG's hook) and then its mask entry (PyG's explain mode)."""
    torch.manual_seed(0)
    x, edge_index = toy_graph()
    theirs = make(pyg).double()
    ours = make(gl).double()
    ours.load_state_dict(theirs.state_dict())
    gen = torch.Generator().manual_seed(3)
    weight = torch.randn(edge_index.size(1), dtype=torch.float64, generator=gen)
    mask = torch.randn(edge_index.size(1), dtype=torch.float64, generator=gen)
    outs = []
    for conv in (theirs, ours):
        set_masks(conv, mask, edge_index, apply_sigmoid=True)
        outs.append(weighted(conv, weight, lambda c=conv: c(x.double(), edge_index)))
        clear_masks(conv)
    torch.testing.assert_close(outs[1], outs[0])
