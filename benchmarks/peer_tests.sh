#!/usr/bin/env bash
# Runs the peers' own test files against graphloc with only the imported names swapped:
# PyG's tests of the convs, total_influence, to_hetero, to_hetero_with_bases, the
# explainers, compiled convs and neighbour loaders, torch_scatter's whole suite, and with
# torch_cluster and torch_spline_conv checkouts their whole suites (on graphloc.cluster and
# graphloc.spline_conv).
# Fetches nothing: pass checkouts of the peers' repositories (PyG at tag 2.8.0, torch_scatter
# at 2.1.2, torch_cluster at 1.6.3, torch_spline_conv at 1.2.2). Their files stay outside
# this repository; they are copied to a temp directory.
#
#   bash benchmarks/peer_tests.sh PYG_CHECKOUT SCATTER_CHECKOUT [--no-jit] \
#     [CLUSTER_CHECKOUT] [SPLINE_CONV_CHECKOUT]
#
# PyG's PANConv and PANPooling tests are marked to need torch-sparse; graphloc's run without
# it (the mark is dropped). PyG's DynamicEdgeConv, GravNetConv, XConv, knn_interpolate,
# SplineConv, Node2Vec, graclus and voxel_grid tests are marked to need pyg-lib (PyG's knn,
# spline basis, random walk and clusterings); the mark is dropped for graphloc's, which run
# without it.
#
# --no-jit replaces torch.jit.script by the identity, so the rest of each scripted test still
# runs: graphloc's convs are Python, not TorchScript (PyG scripts them only in its full
# tests). graphloc.scatter's, graphloc.cluster's and graphloc.spline_conv's functions script as
# their packages' do, and pass either way.
set -uo pipefail
pyg=${1:?PyG checkout}
scatter=${2:?torch_scatter checkout}
nojit=${3:-}
cluster=${4:-}
spline=${5:-}
python=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/shim/torch_scatter" "$work/site"
if [ "$nojit" = "--no-jit" ]; then
  echo 'import torch; torch.jit.script = lambda f, *a, **k: f' > "$work/site/sitecustomize.py"
fi

# The summary lines of a pytest run of DIR's test/ folder (PYTHONPATH: graphloc's site, or
# the second argument before it); further arguments go to pytest.
#   pytest_summary DIR [PATHS] [PYTEST_ARGS...]
pytest_summary() {
  local dir=$1 paths=${2:-}
  shift 2 2>/dev/null || shift
  (cd "$dir" && PYTHONPATH="${paths:+$paths:}$work/site" "$python" -m pytest -q \
    -p no:cacheprovider test "$@" | grep -E "^FAILED|^ERROR|[0-9]+ (passed|failed|error)")
}

# In each FILE, the NAMES (comma-separated) a `from torch_geometric.nn import ...` line imports
# (one line or parenthesised) come from MODULE instead; the rest stay PyG's. Fails where no
# line held any of them (PyG's import lines changed).
#   swap_pyg_imports MODULE NAMES FILE...
cat > "$work/swap_imports.py" <<'PY'
import re
import sys

module, names, paths = sys.argv[1], set(sys.argv[2].split(",")), sys.argv[3:]
grouped = re.compile(r"^from torch_geometric\.nn import \(([^)]*)\)", re.M)
single = re.compile(r"^from torch_geometric\.nn import ([A-Za-z_, ]+)$", re.M)
swapped = 0


def swap(match):
    global swapped
    items = [i.strip() for i in match.group(1).split(",") if i.strip()]
    kept, taken = [i for i in items if i not in names], [i for i in items if i in names]
    swapped += len(taken)
    lines = [f"from torch_geometric.nn import {', '.join(kept)}"] if kept else []
    return "\n".join(lines + ([f"from {module} import {', '.join(taken)}"] if taken else []))


for path in paths:
    text = open(path).read()
    open(path, "w").write(single.sub(swap, grouped.sub(swap, text)))
assert swapped, f"no import of {sorted(names)} from torch_geometric.nn in {paths}"
PY
swap_pyg_imports() { "$python" "$work/swap_imports.py" "$@"; }

# torch_scatter: the package name points at graphloc.scatter; its testing helpers are its own.
cp "$scatter/torch_scatter/testing.py" "$work/shim/torch_scatter/"
cat > "$work/shim/torch_scatter/__init__.py" <<'EOF'
from graphloc.scatter import *  # noqa: F401,F403
EOF
mkdir -p "$work/scatter" && cp -r "$scatter/test" "$work/scatter/"
echo "== torch_scatter's tests"
pytest_summary "$work/scatter" "$work/shim"

# PyG: the conv classes and total_influence come from graphloc, everything else from PyG.
mkdir -p "$work/pyg/test/nn/conv" "$work/pyg/test/utils"
for conv in gcn sage gat gatv2 gin cheb transformer graph sg gcn2 res_gated_graph tag gated_graph gen pna lg le ssg mixhop fa cluster_gcn agnn edge simple rgcn arma mf cg general eg nn gmm feast pdn signed \
    hypergraph point film hgt han rgat supergat point_transformer dna heat wl ppf point_gnn gravnet spline x \
    antisymmetric dir_gnn pan; do
  cp "$pyg/test/nn/conv/test_${conv}_conv.py" "$work/pyg/test/nn/conv/"
done
cp "$pyg/test/nn/conv/test_appnp.py" "$pyg/test/nn/conv/test_wl_conv_continuous.py" \
  "$pyg/test/nn/models/test_label_prop.py" "$pyg/test/nn/models/test_node2vec.py" \
  "$work/pyg/test/nn/conv/"
cp "$pyg/test/utils/test_total_influence.py" "$work/pyg/test/utils/"
cp "$pyg/test/nn/unpool/test_knn_interpolate.py" "$work/pyg/test/nn/conv/"
cp "$pyg/test/nn/pool/test_graclus.py" "$pyg/test/nn/pool/test_voxel_grid.py" \
  "$pyg/test/nn/pool/test_pan_pool.py" "$work/pyg/test/nn/conv/"
cp "$pyg/test/conftest.py" "$work/pyg/test/" 2>/dev/null || true
sed -i -E \
  -e 's/^from torch_geometric\.nn import (GCNConv|SAGEConv|GATConv|GATv2Conv|ChebConv|TransformerConv|GraphConv|GINConv, GINEConv|SGConv|APPNP|GCN2Conv|ResGatedGraphConv|TAGConv|GatedGraphConv|GENConv|PNAConv|LGConv|LEConv|SSGConv|MixHopConv|FAConv|ClusterGCNConv|AGNNConv|SimpleConv|FastRGCNConv, RGCNConv|ARMAConv|MFConv|CGConv|GeneralConv|EGConv|NNConv|GMMConv|FeaStConv|PDNConv|WLConvContinuous|SignedConv|HypergraphConv|PointNetConv|FiLMConv|HGTConv|HANConv|RGATConv|SuperGATConv|PointTransformerConv|DNAConv|HEATConv|WLConv|PPFConv|GravNetConv|SplineConv|XConv|AntiSymmetricConv|PANConv|PANConv, PANPooling|DirGNNConv, SAGEConv)$/from graphloc.nn import \1/' \
  -e 's/^from torch_geometric\.nn import MLPAggregation, SAGEConv$/from torch_geometric.nn import MLPAggregation\nfrom graphloc.nn import SAGEConv/' \
  -e 's/^from torch_geometric\.nn import MLP, PointGNNConv$/from torch_geometric.nn import MLP\nfrom graphloc.nn import PointGNNConv/' \
  -e 's/^from torch_geometric\.nn import DynamicEdgeConv, EdgeConv$/from graphloc.nn import DynamicEdgeConv, EdgeConv/' \
  -e 's/^from torch_geometric\.nn import knn_interpolate$/from graphloc.nn import knn_interpolate/' \
  -e 's/^from torch_geometric\.utils import total_influence$/from graphloc.influence import total_influence/' \
  -e 's/^from torch_geometric\.nn\.models import LabelPropagation$/from graphloc.nn import LabelPropagation/' \
  -e 's/^from torch_geometric\.nn import Node2Vec$/from graphloc.nn import Node2Vec/' \
  -e 's/^from torch_geometric\.nn import graclus$/from graphloc.nn import graclus/' \
  -e 's/^from torch_geometric\.nn import avg_pool, voxel_grid$/from torch_geometric.nn import avg_pool\nfrom graphloc.nn import voxel_grid/' \
  "$work"/pyg/test/nn/conv/*.py "$work"/pyg/test/utils/*.py
# PNAConv's degree-histogram test samples with PyG's NeighborLoader: graphloc's, unmarked
sed -i -e 's/^from torch_geometric\.loader import DataLoader, NeighborLoader$/from torch_geometric.loader import DataLoader\nfrom graphloc.loader import NeighborLoader/' \
  -e '/^@onlyNeighborSampler$/d' "$work/pyg/test/nn/conv/test_pna_conv.py"
# PANConv and PANPooling: PyG marks them to need torch-sparse; graphloc's return a torch.sparse
# M. test_pan_conv.py builds a torch-sparse SparseTensor before it checks for torch-sparse (it
# reads it only under WITH_TORCH_SPARSE): that line is dropped.
sed -i -e "/^@withPackage('torch_sparse')/d" -e '/adj2 = SparseTensor.from_edge_index/d' \
  "$work/pyg/test/nn/conv/test_pan_conv.py" "$work/pyg/test/nn/conv/test_pan_pool.py"
sed -i "/^@withPackage('pyg_lib')$/d" "$work/pyg/test/nn/conv/test_edge_conv.py" \
  "$work/pyg/test/nn/conv/test_node2vec.py" \
  "$work/pyg/test/nn/conv/test_graclus.py" "$work/pyg/test/nn/conv/test_voxel_grid.py" \
  "$work/pyg/test/nn/conv/test_gravnet_conv.py" "$work/pyg/test/nn/conv/test_knn_interpolate.py" \
  "$work/pyg/test/nn/conv/test_spline_conv.py" "$work/pyg/test/nn/conv/test_x_conv.py"
echo "== PyG's conv and total_influence tests"
pytest_summary "$work/pyg"

# PyG's KNNGraph, RadiusGraph, GridSampling and rooted-subgraph transform tests, with
# graphloc.transforms' classes (PyG marks them to need pyg-lib; the mark is dropped;
# RootedEgoNets stays PyG's).
mkdir -p "$work/pyg_transforms/test"
for name in knn_graph radius_graph grid_sampling rooted_subgraph; do
  cp "$pyg/test/transforms/test_${name}.py" "$work/pyg_transforms/test/"
done
cp "$pyg/test/conftest.py" "$work/pyg_transforms/test/" 2>/dev/null || true
sed -i -E -e "/^@withPackage\('pyg_lib'\)$/d" \
  -e 's/^from torch_geometric\.transforms import (KNNGraph|RadiusGraph|GridSampling)$/from graphloc.transforms import \1/' \
  -e 's/^from torch_geometric\.transforms import RootedEgoNets, RootedRWSubgraph$/from torch_geometric.transforms import RootedEgoNets\nfrom graphloc.transforms import RootedRWSubgraph/' \
  "$work"/pyg_transforms/test/test_*.py
echo "== PyG's transform tests (knn_graph, radius_graph, grid_sampling, rooted_subgraph)"
pytest_summary "$work/pyg_transforms"

# PyG's to_hetero tests, with graphloc's GATv2Conv, GCNConv, GINEConv, RGCNConv, SAGEConv,
# MeanAggregation (its graph-level model's pooling) and to_hetero (PyG's, with graphloc's
# convs counted as message passing and its aggregations as pooling); the models the
# file builds of PyG's own MessagePassing subclasses, GAT and GraphSAGE stay PyG's.
mkdir -p "$work/pyg_hetero/test"
cp "$pyg/test/nn/test_to_hetero_transformer.py" "$work/pyg_hetero/test/"
cp "$pyg/test/conftest.py" "$work/pyg_hetero/test/" 2>/dev/null || true
swap_pyg_imports graphloc.nn GATv2Conv,GCNConv,GINEConv,RGCNConv,SAGEConv,to_hetero \
  "$work/pyg_hetero/test/test_to_hetero_transformer.py"
swap_pyg_imports graphloc.nn.aggr MeanAggregation \
  "$work/pyg_hetero/test/test_to_hetero_transformer.py"
echo "== PyG's to_hetero tests (test_to_hetero_transformer.py)"
pytest_summary "$work/pyg_hetero"

# PyG's to_fixed_size test, with graphloc's SumAggregation and to_fixed_size.
mkdir -p "$work/pyg_fixed/test"
cp "$pyg/test/nn/test_to_fixed_size_transformer.py" "$work/pyg_fixed/test/"
swap_pyg_imports graphloc.nn.aggr SumAggregation \
  "$work/pyg_fixed/test/test_to_fixed_size_transformer.py"
sed -i -E 's/^from torch_geometric\.nn\.to_fixed_size_transformer import to_fixed_size$/from graphloc.nn import to_fixed_size/' \
  "$work/pyg_fixed/test/test_to_fixed_size_transformer.py"
echo "== PyG's to_fixed_size test (test_to_fixed_size_transformer.py)"
pytest_summary "$work/pyg_fixed"

# PyG's to_hetero_with_bases tests, with graphloc's GINEConv, RGCNConv, SAGEConv and
# to_hetero_with_bases; the file's own MessagePassing subclass stays PyG's.
mkdir -p "$work/pyg_bases/test"
cp "$pyg/test/nn/test_to_hetero_with_bases_transformer.py" "$work/pyg_bases/test/"
cp "$pyg/test/conftest.py" "$work/pyg_bases/test/" 2>/dev/null || true
swap_pyg_imports graphloc.nn GINEConv,RGCNConv,SAGEConv,to_hetero_with_bases \
  "$work/pyg_bases/test/test_to_hetero_with_bases_transformer.py"
echo "== PyG's to_hetero_with_bases tests (test_to_hetero_with_bases_transformer.py)"
pytest_summary "$work/pyg_bases"

# PyG's tests of what is built around convs, with graphloc's convs (GATConv, GCNConv,
# GCN2Conv, GENConv, GINConv, GraphConv, SAGEConv), SGFormer, its summary and to_hetero: the
# dense convs against the sparse ones, DeepGCN's layer, RevGNN's GroupAddRev, SAGPooling and
# ASAPooling, get_embeddings, k-hop subgraphs, the model summary, PyG's Sequential and
# HeteroConv, the PRBCD/GRBCD attacks (gradients through perturbed edge weights) and
# PyG's influence visualisation.
mkdir -p "$work/pyg_around/test"
for f in nn/dense/test_dense_gat_conv.py nn/dense/test_dense_gcn_conv.py \
    nn/dense/test_dense_gin_conv.py nn/dense/test_dense_graph_conv.py \
    nn/dense/test_dense_sage_conv.py nn/models/test_deepgcn.py nn/models/test_rev_gnn.py \
    nn/pool/test_asap.py nn/pool/test_sag_pool.py nn/test_model_summary.py \
    nn/models/test_sgformer.py nn/test_sequential.py nn/conv/test_hetero_conv.py \
    contrib/nn/models/test_rbcd_attack.py visualization/test_influence.py \
    utils/test_embedding.py utils/test_subgraph.py; do
  cp "$pyg/test/$f" "$work/pyg_around/test/"
done
cat "$pyg/test/conftest.py" "$pyg/test/utils/conftest.py" > "$work/pyg_around/test/conftest.py"
swap_pyg_imports graphloc.nn \
  GATConv,GCN2Conv,GCNConv,GENConv,GINConv,GraphConv,SAGEConv,summary,to_hetero \
  "$work"/pyg_around/test/test_*.py
sed -i 's/^from torch_geometric\.nn\.models import SGFormer$/from graphloc.nn import SGFormer/' \
  "$work/pyg_around/test/test_sgformer.py"
echo "== PyG's tests around convs (dense convs, DeepGCN, RevGNN, SAGPool, ASAP, SGFormer,"
echo "   Sequential, HeteroConv, RBCD attacks, influence plot, embeddings, subgraphs, summary)"
# Deselected with --no-jit: test_summary_with_jit_model, which scripts a torch Sequential of
# Linears and expects ScriptModule rows. (test_sequential_tracable runs since 2026-12-06:
# under torch.fx a graphloc conv is one call_module node.)
if [ "$nojit" = "--no-jit" ]; then
  pytest_summary "$work/pyg_around" "" -k "not test_summary_with_jit_model"
else
  pytest_summary "$work/pyg_around"
fi

# PyG's explainer tests (GNNExplainer, PGExplainer, CaptumExplainer, AttentionExplainer,
# the explanations, the mask utilities) with graphloc's convs and to_hetero: the models
# they build of GCNConv, GATConv, GATv2Conv, SAGEConv, TransformerConv and ChebConv are
# graphloc's. Left out: GraphMaskExplainer's tests (it replaces each layer's
# explain_message to read the per-edge messages, which graphloc's fused convs never form:
# they refuse it by name). Deselected: the 9 ShapleyValueSampling cases of the Captum test,
# which fail with PyG's own GCNConv under captum 0.9 (a node mask of three dimensions, for
# an index tensor).
# Expected to fail, for the same reason as GraphMask: test_custom_explain_message.
mkdir -p "$work/pyg_explain/test"
cp -r "$pyg/test/explain" "$work/pyg_explain/test/"
rm "$work/pyg_explain/test/explain/algorithm/test_graphmask_explainer.py"
cp "$pyg/test/conftest.py" "$work/pyg_explain/test/" 2>/dev/null || true
swap_pyg_imports graphloc.nn ChebConv,GATConv,GATv2Conv,GCNConv,SAGEConv,TransformerConv,to_hetero \
  $(grep -rl "^from torch_geometric.nn import" "$work/pyg_explain/test/explain")
echo "== PyG's explainer tests (test/explain)"
pytest_summary "$work/pyg_explain" "" -k "not (test_captum_explainer_multiclass_classification \
and index1 and ShapleyValueSampling and not None-None)"

# PyG's torch.compile tests of GCNConv and SAGEConv (no graph breaks, then the compiled
# conv's output): marked full tests, so run with FULL_TEST=1, this file alone.
mkdir -p "$work/pyg_compile/test"
cp "$pyg/test/nn/test_compile_conv.py" "$work/pyg_compile/test/"
cp "$pyg/test/conftest.py" "$work/pyg_compile/test/" 2>/dev/null || true
sed -i -E 's/^from torch_geometric\.nn import GCNConv, SAGEConv$/from graphloc.nn import GCNConv, SAGEConv/' \
  "$work/pyg_compile/test/test_compile_conv.py"
echo "== PyG's compile tests (test_compile_conv.py, FULL_TEST=1)"
FULL_TEST=1 pytest_summary "$work/pyg_compile"

# PyG's aggregation tests: the modules graphloc.nn.aggr has come from graphloc (called as
# PyG calls them, aggr(x, index, ptr, dim_size, dim)); any other stays PyG's.
mkdir -p "$work/pyg_aggr/test"
for name in basic lcm quantile lstm multi; do
  cp "$pyg/test/nn/aggr/test_${name}.py" "$work/pyg_aggr/test/"
done
cp "$pyg/test/conftest.py" "$work/pyg_aggr/test/" 2>/dev/null || true
swap_pyg_imports graphloc.nn.aggr "$("$python" -c "import graphloc.nn.aggr as a; \
print(','.join(n for n in dir(a) if n.endswith('Aggregation')))")" "$work"/pyg_aggr/test/test_*.py
echo "== PyG's aggregation tests (basic, lcm, quantile, lstm, multi)"
pytest_summary "$work/pyg_aggr"

# PyG's loader and sampler tests: NeighborLoader, LinkNeighborLoader, NeighborSampler,
# BidirectionalNeighborSampler, HGTLoader, ClusterData, ShaDowKHopSampler and the GraphSAINT
# samplers come from graphloc.loader, everything else from PyG. PyG marks them to need pyg-lib or torch-sparse
# (METIS for ClusterData) and branches on which one it has; graphloc's sampler does what
# both do and graphloc partitions, so the marks are dropped and the flags read True.
# test_shadow.py runs up to its SparseTensor input (torch-sparse's class itself). Left out:
# the two tests that call pyg-lib's and torch-sparse's raw ops to compare them with each
# other; skipped: two HGTLoader tests (one checks batches with torch-sparse's SparseTensor,
# one downloads Cora).
mkdir -p "$work/pyg_loader/test/loader" "$work/pyg_loader/test/utils" \
  "$work/pyg_loader/test/sampler" "$work/pyg_loader/test/nn"
for name in neighbor_loader link_neighbor_loader zip_loader prefetch imbalanced_sampler cache \
    mixin hgt_loader cluster shadow graph_saint; do
  cp "$pyg/test/loader/test_${name}.py" "$work/pyg_loader/test/loader/"
done
cp "$pyg/test/utils/test_trim_to_layer.py" "$work/pyg_loader/test/utils/"
cp "$pyg/test/sampler/test_sampler_neighbor_sampler.py" "$work/pyg_loader/test/sampler/"
cp "$pyg/test/nn/models/test_basic_gnn.py" "$work/pyg_loader/test/nn/"
cp "$pyg/test/conftest.py" "$work/pyg_loader/test/" 2>/dev/null || true
"$python" - "$work"/pyg_loader/test/*/test_*.py <<'PY'
import ast
import re
import sys

ours = {"torch_geometric.loader": {"NeighborLoader", "LinkNeighborLoader", "HGTLoader",
                                  "ClusterData", "ClusterLoader", "ShaDowKHopSampler",
                                  "GraphSAINTNodeSampler",
                                  "GraphSAINTEdgeSampler", "GraphSAINTRandomWalkSampler"},
        "torch_geometric.sampler": {"NeighborSampler", "BidirectionalNeighborSampler"},
        "torch_geometric.sampler.neighbor_sampler": {"NeighborSampler",
                                                     "BidirectionalNeighborSampler"}}
flags = {"WITH_PYG_LIB", "WITH_TORCH_SPARSE", "WITH_WEIGHTED_NEIGHBOR_SAMPLE",
         "WITH_EDGE_TIME_NEIGHBOR_SAMPLE"}
for path in sys.argv[1:]:
    text = open(path).read()
    lines, tree, edits, imported = text.splitlines(), ast.parse(text), [], set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in ours:
            names = [a.name for a in node.names]
            swapped = [n for n in names if n in ours[node.module]]
            if swapped:
                kept = [n for n in names if n not in swapped]
                new = [f"from {node.module} import {', '.join(kept)}"] if kept else []
                edits.append((node.lineno, node.end_lineno,
                              new + [f"from graphloc.loader import {', '.join(swapped)}"]))
        if isinstance(node, ast.ImportFrom) and node.module == "torch_geometric.typing":
            imported |= {a.name for a in node.names} & flags
    last = max(n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1:end] = new
        last += len(new) - (end - start + 1)
    if imported:
        lines.insert(last, f"{' = '.join(sorted(imported))} = True  # graphloc's sampler")
    text = "\n".join(lines) + "\n"
    text = re.sub(r"^@onlyNeighborSampler\n", "", text, flags=re.M)
    text = re.sub(r"^@withMETIS\n", "", text, flags=re.M)
    text = re.sub(r"^@withPackage\('pyg_lib'(, 'torch_sparse')?\)\n", "", text, flags=re.M)
    if path.endswith("test_graph_saint.py"):  # marked for PyG's torch-sparse samplers
        text = re.sub(r"^@withPackage\('torch_sparse'\)\n", "", text, flags=re.M)
    if path.endswith("test_shadow.py"):  # its second half builds a torch-sparse SparseTensor
        text = re.sub(r"^@withPackage\('torch_sparse'\)\n", "", text, flags=re.M)
        text = text[:text.index("    adj_t = SparseTensor(")]
    if path.endswith("test_hgt_loader.py"):  # marked for PyG's torch-sparse sampler
        text = re.sub(r"^@withPackage\('torch_sparse'\)\n", "", text, flags=re.M)
        text += ("\ntest_hgt_loader = pytest.mark.skip(reason=\"its oracle is torch-sparse's "
                 "SparseTensor\")(test_hgt_loader)\ntest_hgt_loader_on_cora = pytest.mark.skip("
                 "reason=\"downloads Cora\")(test_hgt_loader_on_cora)\n")
    open(path, "w").write(text)
PY
echo "== PyG's loader and sampler tests (neighbor, link, zip, prefetch, imbalanced, cache, mixin,"
echo "   hgt, cluster, shadow, graph_saint, trim_to_layer, sampler, basic_gnn)"
pytest_summary "$work/pyg_loader" "" \
  --deselect test/loader/test_neighbor_loader.py::test_pyg_lib_and_torch_sparse_homo_equality \
  --deselect test/loader/test_neighbor_loader.py::test_pyg_lib_and_torch_sparse_hetero_equality

# A peer package's own tests against graphloc: PACKAGE's name points at graphloc's
# functions (IMPORT, a line of Python); its testing helpers are its own.
#   shimmed_tests CHECKOUT PACKAGE IMPORT TITLE TEST_FILE...
shimmed_tests() {
  local checkout=$1 package=$2 import=$3 title=$4
  shift 4
  mkdir -p "$work/$package/test" "$work/${package}_shim/$package"
  for file in "$@"; do cp "$checkout/test/$file" "$work/$package/test/"; done
  cp "$checkout/$package/testing.py" "$work/${package}_shim/$package/"
  echo "$import  # noqa" > "$work/${package}_shim/$package/__init__.py"
  echo "== $title"
  pytest_summary "$work/$package" "$work/${package}_shim"
}

if [ -n "$cluster" ]; then
  shimmed_tests "$cluster" torch_cluster "from graphloc.cluster import *" \
    "torch_cluster's tests (knn, radius, nearest, fps, graclus, grid, random walk, sampler)" \
    test_knn.py test_radius.py test_nearest.py test_fps.py test_graclus.py test_grid.py \
    test_rw.py test_sampler.py
fi
if [ -n "$spline" ]; then
  shimmed_tests "$spline" torch_spline_conv "from graphloc.spline_conv import *" \
    "torch_spline_conv's tests (basis, weighting, conv)" test_basis.py test_weighting.py \
    test_conv.py
fi
