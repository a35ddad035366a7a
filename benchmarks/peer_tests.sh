#!/usr/bin/env bash
# Runs the peers' own test files against graphloc with only the imported names swapped:
# PyG's tests of the eight convs and total_influence, and torch_scatter's whole suite.
# Fetches nothing: pass checkouts of the peers' repositories (PyG at tag 2.8.0, torch_scatter
# at 2.1.2). Their files stay outside this repository; they are copied to a temp directory.
#
#   bash benchmarks/peer_tests.sh PYG_CHECKOUT SCATTER_CHECKOUT [--no-jit]
#
# --no-jit replaces torch.jit.script by the identity (graphloc's functions are Python, not
# TorchScript), so the rest of each scripted test still runs.
set -uo pipefail
pyg=${1:?PyG checkout}
scatter=${2:?torch_scatter checkout}
nojit=${3:-}
python=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/shim/torch_scatter" "$work/site"
if [ "$nojit" = "--no-jit" ]; then
  echo 'import torch; torch.jit.script = lambda f, *a, **k: f' > "$work/site/sitecustomize.py"
fi

# torch_scatter: the package name points at graphloc.scatter; its testing helpers are its own.
cp "$scatter/torch_scatter/testing.py" "$work/shim/torch_scatter/"
cat > "$work/shim/torch_scatter/__init__.py" <<'EOF'
from graphloc.scatter import *  # noqa: F401,F403
EOF
mkdir -p "$work/scatter" && cp -r "$scatter/test" "$work/scatter/"
echo "== torch_scatter's tests"
(cd "$work/scatter" && PYTHONPATH="$work/shim:$work/site" "$python" -m pytest -q -p no:cacheprovider test \
  | tail -1)

# PyG: the conv classes and total_influence come from graphloc, everything else from PyG.
mkdir -p "$work/pyg/test/nn/conv" "$work/pyg/test/utils"
for conv in gcn sage gat gin cheb transformer graph; do
  cp "$pyg/test/nn/conv/test_${conv}_conv.py" "$work/pyg/test/nn/conv/"
done
cp "$pyg/test/utils/test_total_influence.py" "$work/pyg/test/utils/"
cp "$pyg/test/conftest.py" "$work/pyg/test/" 2>/dev/null || true
sed -i -E \
  -e 's/^from torch_geometric\.nn import (GCNConv|SAGEConv|GATConv|ChebConv|TransformerConv|GraphConv|GINConv, GINEConv)$/from graphloc.nn import \1/' \
  -e 's/^from torch_geometric\.nn import MLPAggregation, SAGEConv$/from torch_geometric.nn import MLPAggregation\nfrom graphloc.nn import SAGEConv/' \
  -e 's/^from torch_geometric\.utils import total_influence$/from graphloc.influence import total_influence/' \
  "$work"/pyg/test/nn/conv/*.py "$work"/pyg/test/utils/*.py
echo "== PyG's conv and total_influence tests"
(cd "$work/pyg" && PYTHONPATH="$work/site" "$python" -m pytest -q -p no:cacheprovider test \
  | grep -E "^FAILED|[0-9]+ (passed|failed)")
