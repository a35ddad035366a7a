"""The drop-ins added after the layer benchmark's table (SGConv, APPNP, GCN2Conv,
GATv2Conv, ResGatedGraphConv, TAGConv, GatedGraphConv, GENConv, SAGEConv with the
softmax aggregation, PNAConv, LGConv, LEConv, SSGConv, MixHopConv, FAConv,
ClusterGCNConv, AGNNConv, EdgeConv, SimpleConv, RGCNConv, ARMAConv, MFConv, CGConv,
GeneralConv, EGConv, NNConv, GMMConv, GATEConv, FeaStConv, PDNConv, WLConvContinuous,
SignedConv, HypergraphConv, PointNetConv, FiLMConv, CFConv, HGTConv, HANConv, LINKX's
SparseLinear, RGATConv, SuperGATConv, PointTransformerConv, AntiSymmetricConv, DirGNNConv)
against PyG's,
forward + backward, on the two benchmark graphs.

One process; graphloc's layer and PyG's (same weights) in turns, the order alternating;
times are medians, the speed-up the median of the per-turn ratios, so the machine's drift
cancels. The layers are called as PyG's, ``layer(x, edge_index)`` (GCN2Conv
and FAConv: ``layer(x, x_0, edge_index)``, x_0 = x; RGCNConv and FiLMConv: ``layer(x,
edge_index, edge_type)``; NNConv: ``layer(x, edge_index, edge_attr)`` with 4 edge features
and x's first ``in_channels``; GMMConv: ``layer(x, edge_index, pseudo)``; GATEConv and PDNConv:
``layer(x, edge_index, edge_attr)``; SignedConv: ``layer(x, pos_edge_index,
neg_edge_index)``, the edges split by position; HypergraphConv: ``layer(x, edge_index,
None, hyperedge_attr, N)``, hyperedge i the in-neighbours of node i, its features x_i
with attention; PointNetConv: ``layer(x, pos, edge_index)``, pos x's first 3 features;
CFConv: ``layer(x, edge_index, distance, gaussians)``; HGTConv and HANConv: ``layer(x_dict,
edge_index_dict)``, the graph split into 3 node types and 9 relations, ``hetero_split``;
SparseLinear: ``layer(edge_index)``; RGATConv: ``layer(x, edge_index, edge_type)`` on x's
first ``in_channels``),
with F = 64 features.

    python benchmarks/bench_propagation.py [--turns 7] [--layers GATv2Conv ...] [--memory]

``--memory``: instead of times, each layer's peak memory for one forward + backward, the
growth of a fresh process's peak resident set over its size just before the step (one
process per graph, layer and library, as ``bench_layers.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import machine  # noqa: E402
from graphs import power_law, road_like  # noqa: E402

F = 64


GRAPHS = {"road": road_like, "power-law": power_law}
LAYERS = {  # label -> the constructor, the same for graphloc's module and PyG's
    "APPNP(K=10, alpha=0.1)": "APPNP(10, 0.1)",
    "SGConv(64, 64, K=2)": "SGConv(64, 64, K=2)",
    "GCN2Conv(64, alpha=0.1, theta=0.5, layer=1)": "GCN2Conv(64, 0.1, theta=0.5, layer=1)",
    "GATv2Conv(64, 16, heads=4)": "GATv2Conv(64, 16, heads=4)",
    "ResGatedGraphConv(64, 64)": "ResGatedGraphConv(64, 64)",
    "TAGConv(64, 64, K=3)": "TAGConv(64, 64, K=3)",
    "GatedGraphConv(64, num_layers=3)": "GatedGraphConv(64, 3)",
    "GENConv(64, 64)": "GENConv(64, 64)",  # softmax aggregation, BatchNorm MLP: PyG's defaults
    # the softmax aggregation with little around it (ops.softmax_sum against PyG's softmax)
    "SAGEConv(64, 64, aggr='softmax')": "SAGEConv(64, 64, aggr='softmax')",
    # PyG's examples/pna.py aggregators and scalers; deg: the graph's in-degree histogram
    "PNAConv(64, 64)": "PNAConv(64, 64, ['mean', 'min', 'max', 'std'], "
                       "['identity', 'amplification', 'attenuation'], deg)",
    "LGConv()": "LGConv()",  # LightGCN's propagation
    "LEConv(64, 64)": "LEConv(64, 64)",
    "SSGConv(64, 64, alpha=0.1, K=4)": "SSGConv(64, 64, 0.1, K=4)",
    "MixHopConv(64, 32)": "MixHopConv(64, 32)",  # powers 0, 1, 2: 96 outputs
    "FAConv(64)": "FAConv(64)",  # FAGCN's signed coefficients, eps = 0.1
    "ClusterGCNConv(64, 64, diag_lambda=0.5)": "ClusterGCNConv(64, 64, diag_lambda=0.5)",
    "AGNNConv()": "AGNNConv()",  # a softmax of cosines, one learnt temperature
    # DGCNN's block: Linear(2F, 64), ReLU, Linear(64, 64) per edge, max aggregation
    "EdgeConv(MLP 128-64-64, max)": "EdgeConv(Sequential(Linear(128, 64), ReLU(), "
                                     "Linear(64, 64)))",
    "SimpleConv('mean', 'cat')": "SimpleConv('mean', 'cat')",  # no parameters
    # R-GCN's mean per relation; edge types uniform over its relations (relation_types)
    "RGCNConv(64, 64, num_relations=8)": "RGCNConv(64, 64, 8)",
    # the relation count of AIFB (PyG's examples/rgcn.py), with its basis decomposition
    "RGCNConv(64, 64, num_relations=90, num_bases=30)": "RGCNConv(64, 64, 90, num_bases=30)",
    "ARMAConv(64, 64, num_stacks=3, num_layers=2)": "ARMAConv(64, 64, 3, 2)",
    "MFConv(64, 64)": "MFConv(64, 64)",  # one weight pair per degree 0 .. 10
    "CGConv(64)": "CGConv(64)",  # gated messages of [x_i, x_j], no edge features
    "GeneralConv(64, 64)": "GeneralConv(64, 64)",  # GraphGym's default: linear messages
    # additive attention over 4 heads, averaged
    "GeneralConv(64, 64, heads=4, attention=True)": "GeneralConv(64, 64, heads=4, "
                                                    "attention=True)",
    # the paper's recommended EGC-M: symnorm, max, std over 4 bases and 8 heads
    "EGConv(64, 64, ['symnorm', 'max', 'std'])": "EGConv(64, 64, ['symnorm', 'max', 'std'])",
    "EGConv(64, 64)": "EGConv(64, 64)",  # EGC-S: symnorm only
    # PyG's QM9 network shape (Linear, ReLU, Linear) on 4 edge features, at widths whose
    # [E, in * out] per-edge matrices PyG can hold on these graphs: out < in (graphloc
    # sums the per-node products x_j A_k) and in = out on x's first 16 features (graphloc
    # sums outer products, ops.edge_outer_sum)
    "NNConv(64, 4, MLP 4-32-256)": "NNConv(64, 4, Sequential(Linear(4, 32), ReLU(), "
                                   "Linear(32, 256)))",
    "NNConv(16, 16, MLP 4-32-256)": "NNConv(16, 16, Sequential(Linear(4, 32), ReLU(), "
                                    "Linear(32, 256)))",
    # MoNet as in benchmarking-gnns: 3 kernels of 2-D pseudo-coordinates (uniform in [0, 1))
    "GMMConv(64, 64, dim=2, kernel_size=3)": "GMMConv(64, 64, dim=2, kernel_size=3)",
    # AttentiveFP's first layer on 4 edge features (PyG's lives in its models package)
    "GATEConv(64, 64, edge_dim=4)": "GATEConv(64, 64, 4)",
    # FeaStNet's layer: a softmax over 4 heads of u (x_j - x_i) + c weighs 4 maps of x_j
    "FeaStConv(64, 64, heads=4)": "FeaStConv(64, 64, heads=4)",
    # PDN's edge network (4 edge features, 32 hidden) weighing GCN's normalised sum
    "PDNConv(64, 64, edge_dim=4, hidden=32)": "PDNConv(64, 64, 4, 32)",
    "WLConvContinuous": "WLConvContinuous()",
    # SGCN's first layer; the edges split by position into positive and negative halves
    "SignedConv(64, 32, first_aggr=True)": "SignedConv(64, 32, True)",
    # the graph as a hypergraph: hyperedge i holds node i's in-neighbours (edge_index as the
    # incidences), and with attention hyperedge i's features are x_i
    "HypergraphConv(64, 64)": "HypergraphConv(64, 64)",
    "HypergraphConv(64, 16, attention, 4 heads)":
        "HypergraphConv(64, 16, use_attention=True, heads=4)",
    # PointNet++'s set layer: x's first 3 features as the positions, local MLP 67-64-64
    "PointNetConv(MLP 67-64-64)": "PointNetConv(Sequential(Linear(67, 64), ReLU(), "
                                  "Linear(64, 64)))",
    # GNN-FiLM as PyG's PPI example builds it (one relation, ReLU, mean), and with 3
    # relations (uniform edge types, as RGCNConv's)
    "FiLMConv(64, 64)": "FiLMConv(64, 64)",
    "FiLMConv(64, 64, 3 relations)": "FiLMConv(64, 64, num_relations=3)",
    # SchNet's interaction conv: 64 filters from 50 Gaussians of each edge's distance (uniform
    # in [0, 10), cutoff 10), through Linear(50, 64), ReLU, Linear(64, 64)
    "CFConv(64, 64, 64 filters)": "CFConv(64, 64, 64, Sequential(Linear(50, 64), ReLU(), "
                                  "Linear(64, 64)), 10.0)",
    # the graph as a heterogeneous one (hetero_split: 3 node types, 9 relations), with the
    # heads of PyG's examples/hetero/hgt_dblp.py
    "HGTConv(64, 64, heads=2, 3 types, 9 relations)": "HGTConv(64, 64, metadata, heads=2)",
    # the heads of PyG's examples/hetero/han_imdb.py, on the same split
    "HANConv(64, 64, heads=8, 3 types, 9 relations)": "HANConv(64, 64, metadata, heads=8)",
    # LINKX's adjacency layer: a weight row per node, each node's adjacency row times W
    "SparseLinear(N, 64)": "SparseLinear(num_nodes, 64)",
    # relational attention on x's first 16 features (PyG's gathers an [in, H C] matrix per
    # edge: at 64 features 11 GB on the road graph), 8 relations uniform over the edges
    "RGATConv(16, 8, num_relations=8, heads=2)": "RGATConv(16, 8, 8, heads=2)",
    # PyG's other forms: a softmax per relation, multiplicative scores, the f-scaled mod
    "RGATConv(16, 8, num_relations=8, heads=2, within, multiplicative, f-scaled)":
        "RGATConv(16, 8, 8, heads=2, attention_mechanism='within-relation', "
        "attention_mode='multiplicative-self-attention', mod='f-scaled')",
    # PyG's examples/super_gat.py layer (MX scores, 8 heads of 8, attention dropout 0.6,
    # 80% of the edges as positives), in training: the negatives drawn at every call
    "SuperGATConv(64, 8, heads=8, PyG's example)":
        "SuperGATConv(64, 8, heads=8, dropout=0.6, edge_sample_ratio=0.8, is_undirected=True)",
    # the Point Transformer layer, x's first 3 features as the positions: PyG's default
    # offset encoding (a Linear), and MLP encodings as in PyG's point_transformer examples
    "PointTransformerConv(64, 64)": "PointTransformerConv(64, 64)",
    "PointTransformerConv(64, 64, MLP pos_nn 3-64-64, attn_nn 64-64-64)":
        "PointTransformerConv(64, 64, Sequential(Linear(3, 64), ReLU(), Linear(64, 64)), "
        "Sequential(Linear(64, 64), ReLU(), Linear(64, 64)))",
    # Just Jump's attention over 3 layers' representations (x and two maps of it), with
    # the heads and groups of PyG's examples/dna.py
    "DNAConv(64, heads=8, groups=16, 3 layers)": "DNAConv(64, heads=8, groups=16)",
    # Point-GNN with plain MLPs (its alignment network per node, mlp_f's first Linear
    # regrouped), x's first 3 features as positions
    "PointGNNConv(MLPs 64-64-3, 67-64-64, 64-64-64)":
        "PointGNNConv(Sequential(Linear(64, 64), ReLU(), Linear(64, 3)), "
        "Sequential(Linear(67, 64), ReLU(), Linear(64, 64)), "
        "Sequential(Linear(64, 64), ReLU(), Linear(64, 64)))",
    # PPFNet: x's first 3 features as positions, the next 3 as normals
    "PPFConv(MLP 68-64-64)": "PPFConv(Sequential(Linear(68, 64), ReLU(), Linear(64, 64)))",
    # HEAT: node i of type i % 3, 9 edge types, 4 edge features; 4 heads of 16
    "HEATConv(64, 16, heads=4, 3 node types, 9 edge types, edge_dim=4)":
        "HEATConv(64, 16, 3, 9, 16, 4, 16, heads=4)",
    # A-DGN as in its paper's long-range runs: several Euler steps through one GCN phi
    "AntiSymmetricConv(64, num_iters=4)": "AntiSymmetricConv(64, num_iters=4)",
    # Dir-GNN's wrapper (its paper's best base convs), each with its two copies' own weights
    "DirGNNConv(SAGEConv(64, 64))": "DirGNNConv(SAGEConv(64, 64))",
    "DirGNNConv(GCNConv(64, 64))": "DirGNNConv(GCNConv(64, 64))",
}

#: hetero_split's node types and relations
NODE_TYPES = ["t0", "t1", "t2"]
METADATA = (NODE_TYPES, [(a, "to", b) for a in NODE_TYPES for b in NODE_TYPES])


def _namespace(lib, edge_index, num_nodes: int) -> dict:
    """The library's names, ``deg`` (the graph's in-degree histogram, for PNA) and the
    torch modules an edge network is built of (EdgeConv's); PyG's GATEConv from its
    AttentiveFP module (torch_geometric.nn does not export it)."""
    deg = torch.bincount(torch.bincount(edge_index[1], minlength=num_nodes))
    modules = {name: getattr(torch.nn, name) for name in ("Sequential", "Linear", "ReLU")}
    names = vars(lib)
    if "GATEConv" not in names:
        from torch_geometric.nn.models.attentive_fp import GATEConv
        from torch_geometric.nn.models.linkx import SparseLinear
        from torch_geometric.nn.models.schnet import CFConv
        names = {**names, "GATEConv": GATEConv, "CFConv": CFConv, "SparseLinear": SparseLinear}
    return {**names, **modules, "deg": deg, "metadata": METADATA, "num_nodes": num_nodes}


def _chosen(prefixes) -> list[str]:
    return [label for label in LAYERS if not prefixes or label.startswith(tuple(prefixes))]


def peak_step(graph_name: str, label: str, lib: str) -> float:
    """MB that one forward + backward adds to this process's peak resident set."""
    import resource

    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    torch.set_num_threads(2)
    graph = GRAPHS[graph_name]()
    edge_index = graph.edge_index.clone()
    x = torch.randn(graph.num_nodes, F, requires_grad=True)
    layer = eval(LAYERS[label], _namespace(gl if lib == "graphloc" else pyg,  # noqa: S307
                                           edge_index, graph.num_nodes))
    with open("/proc/self/statm") as f:
        before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    step(layer, call_args(layer, x, edge_index))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before


def memory_table(prefixes) -> None:
    print(machine())
    print("| graph | layer | graphloc peak MB | PyG peak MB | PyG / graphloc |")
    print("|---|---|---:|---:|---:|")
    for name in GRAPHS:
        for label in _chosen(prefixes):
            peaks = [_peak_in_subprocess(name, label, lib) for lib in ("graphloc", "PyG")]
            cells = ["killed (out of memory)" if p is None else f"{p:.0f}" for p in peaks]
            ratio = "" if None in peaks else f"{peaks[1] / peaks[0]:.1f}x"
            print(f"| {name} | {label} | {cells[0]} | {cells[1]} | {ratio} |", flush=True)


def _peak_in_subprocess(name: str, label: str, lib: str) -> float | None:
    """``peak_step`` in a fresh process; None where the kernel killed it (SIGKILL: the
    machine's memory ran out), which a row then says instead of ending the table."""
    import signal
    import subprocess
    run = subprocess.run([sys.executable, __file__, "--one", name, label, lib],
                         capture_output=True, text=True)
    if run.returncode == -signal.SIGKILL:
        return None
    run.check_returncode()
    return float(run.stdout.split()[-1])


def relation_types(edge_index, num_relations: int) -> torch.Tensor:
    """RGCNConv's edge types: uniform over its relations, the same for every run."""
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, num_relations, (edge_index.size(1),), generator=gen)


def edge_features(edge_index, width: int, uniform: bool = False) -> torch.Tensor:
    """NNConv's edge features (standard normal) or GMMConv's pseudo-coordinates (uniform in
    [0, 1)), the same for every run."""
    gen = torch.Generator().manual_seed(0)
    draw = torch.rand if uniform else torch.randn
    return draw(edge_index.size(1), width, generator=gen)


def hetero_split(x, edge_index) -> tuple[dict, dict]:
    """``(x_dict, edge_index_dict)``: node i of type ``t{i % 3}`` (row i // 3 there, its
    features x_i as a leaf of its own), each edge in the relation of its ends' types."""
    x_dict = {t: x[k::3].detach().requires_grad_() for k, t in enumerate(NODE_TYPES)}
    kinds, rows = edge_index % 3, edge_index // 3
    edges = {}
    for a, b, relation in ((a, b, r) for (a, b), r in zip(
            [(a, b) for a in range(3) for b in range(3)], METADATA[1], strict=True)):
        keep = (kinds[0] == a) & (kinds[1] == b)
        edges[relation] = rows[:, keep].contiguous()
    return x_dict, edges


def call_args(layer, x, edge_index) -> tuple:
    """A layer's arguments, as PyG's is called."""
    name = type(layer).__name__
    if name in ("HGTConv", "HANConv"):
        return hetero_split(x, edge_index)
    if name == "SparseLinear":  # (x not read)
        return (edge_index,)
    if name in ("GCN2Conv", "FAConv"):
        return x, x, edge_index
    if name in ("RGCNConv", "FiLMConv"):
        return x, edge_index, relation_types(edge_index, layer.num_relations)
    if name == "RGATConv":  # x's first in_channels
        return (x[:, :layer.in_channels], edge_index,
                relation_types(edge_index, layer.num_relations))
    if name == "NNConv":  # x's first in_channels features
        return x[:, :layer.in_channels], edge_index, edge_features(edge_index, 4)
    if name == "GMMConv":
        return x, edge_index, edge_features(edge_index, layer.dim, uniform=True)
    if name == "GATEConv":
        return x, edge_index, edge_features(edge_index, layer.lin1.in_features - x.size(1))
    if name == "PDNConv":
        return x, edge_index, edge_features(edge_index, layer.edge_dim)
    if name == "SignedConv":
        return x, edge_index[:, 0::2], edge_index[:, 1::2]
    if name == "HypergraphConv":
        return x, edge_index, None, x if layer.use_attention else None, x.size(0)
    if name == "HEATConv":
        node_type = torch.arange(x.size(0)) % layer.hetero_lin.num_types
        return (x, edge_index, node_type,
                relation_types(edge_index, layer.edge_type_emb.num_embeddings),
                edge_features(edge_index, layer.edge_attr_emb.weight.size(1)))
    if name == "DNAConv":  # [N, 3, 64]: each node's representation at 3 layers
        return torch.stack([x, x.tanh(), x.sin()], dim=1).detach().requires_grad_(), edge_index
    if name == "PPFConv":
        return x, x[:, :3].detach(), x[:, 3:6].detach(), edge_index
    if name in ("PointNetConv", "PointTransformerConv", "PointGNNConv"):
        return x, x[:, :3].detach(), edge_index
    if name == "CFConv":  # distances and their 50 Gaussians (SchNet's GaussianSmearing)
        distance = edge_features(edge_index, 1, uniform=True).view(-1) * 10
        centres = torch.linspace(0, 10, 50)
        return x, edge_index, distance, torch.exp(-12.005 * (distance.view(-1, 1) - centres) ** 2)
    return x, edge_index


def step(layer, args) -> float:
    start = time.perf_counter()
    out = layer(*args)
    if isinstance(out, dict):  # (a heterogeneous conv's None: a type without messages)
        sum(t.sum() for t in out.values() if t is not None).backward()
    else:
        out.sum().backward()
    return time.perf_counter() - start


def compare(ours, theirs, x, edge_index, turns: int) -> tuple[float, float, float]:
    theirs.load_state_dict(ours.state_dict())
    args = call_args(ours, x, edge_index)
    for _ in range(2):  # warm: the cached graph, the allocator
        step(ours, args), step(theirs, args)
    times = {"ours": [], "theirs": []}
    for turn in range(turns):
        pair = [("ours", ours), ("theirs", theirs)]
        for key, layer in pair if turn % 2 else pair[::-1]:
            times[key].append(step(layer, args))
    ratio = statistics.median(t / o for o, t in zip(times["ours"], times["theirs"],
                                                    strict=True))
    return statistics.median(times["ours"]), statistics.median(times["theirs"]), ratio


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--layers", nargs="+", metavar="NAME",
                        help="only the layers whose label starts with one of these")
    parser.add_argument("--memory", action="store_true", help="peak memory, not time")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(peak_step(*args.one))
        return
    if args.memory:
        return memory_table(args.layers)
    import torch_geometric.nn as pyg

    import graphloc.nn as gl
    from graphloc.memory import retain_freed_memory
    retain_freed_memory()
    torch.set_num_threads(2)
    print(machine())
    print("| graph | layer | graphloc ms | PyG ms | PyG / graphloc |")
    print("|---|---|---:|---:|---:|")
    for name, make in GRAPHS.items():
        graph = make()
        edge_index = graph.edge_index.clone()
        x = torch.randn(graph.num_nodes, F, requires_grad=True)
        for label in _chosen(args.layers):
            ours, theirs = (eval(LAYERS[label],  # noqa: S307 (fixed table)
                                 _namespace(lib, edge_index, graph.num_nodes))
                            for lib in (gl, pyg))
            mine, peer, ratio = compare(ours, theirs, x, edge_index, args.turns)
            print(f"| {name} | {label} | {mine * 1e3:.0f} | {peer * 1e3:.0f} | {ratio:.1f}x |",
                  flush=True)


if __name__ == "__main__":
    main()
