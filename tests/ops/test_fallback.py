"""Without the compiled extension the package still works, on the reference ops."""

import os
import subprocess
import sys

import torch
from helpers import random_edge_index, requires_ext

from graphloc import Graph, ops

SCRIPT = """
import sys, warnings, torch
{setup}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import graphloc
    from graphloc import Graph, ops
    import graphloc.scatter
print("warnings", sum("reference ops" in str(w.message) for w in caught))
print("ext", graphloc.HAS_EXTENSION)
edge_index, x, w = torch.load(sys.argv[1])
g = Graph(edge_index, num_nodes=x.size(0))
xg = x.clone().requires_grad_()
outs = [ops.spmm(g, xg, w, r) for r in ("sum", "mean", "max", "min")]
outs.append(ops.sddmm(g, x, x))
outs.append(ops.segment_softmax(g, w))
outs.append(graphloc.scatter.scatter_max(x[edge_index[0]], edge_index[1], 0, dim_size=x.size(0))[0])
outs.append(torch.autograd.grad(sum(o.sum() for o in outs[:4]), xg)[0])
torch.save(outs, sys.argv[2])
"""


def _run(tmp_path, setup, env_extra):
    edge_index = random_edge_index(30, 120, seed=30)
    x = torch.randn(30, 5, dtype=torch.float64)
    w = torch.rand(edge_index.size(1), dtype=torch.float64)
    torch.save((edge_index, x, w), tmp_path / "in.pt")
    env = {**os.environ, **env_extra}
    script = SCRIPT.format(setup=setup)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "in.pt"),
                           str(tmp_path / "out.pt")], env=env, capture_output=True, text=True,
                          check=True)
    return proc.stdout, torch.load(tmp_path / "out.pt"), (edge_index, x, w)


def _expected(edge_index, x, w):
    import graphloc.scatter

    g = Graph(edge_index, num_nodes=x.size(0))
    xg = x.clone().requires_grad_()
    outs = [ops.spmm(g, xg, w, r) for r in ("sum", "mean", "max", "min")]
    per_edge = x[edge_index[0]]
    outs += [ops.sddmm(g, x, x), ops.segment_softmax(g, w),
             graphloc.scatter.scatter_max(per_edge, edge_index[1], 0, dim_size=x.size(0))[0]]
    outs.append(torch.autograd.grad(sum(o.sum() for o in outs[:4]), xg)[0])
    return outs


@requires_ext
def test_disable_ext_uses_reference_ops_with_same_results(tmp_path):
    stdout, outs, inputs = _run(tmp_path, "", {"GRAPHLOC_DISABLE_EXT": "1"})
    assert "ext False" in stdout and "warnings 0" in stdout  # asked for: no warning
    for got, expected in zip(outs, _expected(*inputs), strict=True):
        torch.testing.assert_close(got, expected)


@requires_ext
def test_missing_extension_warns_once_and_works(tmp_path):
    stdout, outs, inputs = _run(tmp_path, "sys.modules['graphloc._C'] = None", {})
    assert "ext False" in stdout and "warnings 1" in stdout
    for got, expected in zip(outs, _expected(*inputs), strict=True):
        torch.testing.assert_close(got, expected)


SAMPLING_SCRIPT = """
import sys, torch
import graphloc
from graphloc import Graph
from graphloc.loader import NeighborLoader
from graphloc.nn.models.largegt import hop2_tokens
assert not graphloc.HAS_EXTENSION
edge_index = torch.load(sys.argv[1])
graph = Graph(edge_index, num_nodes=40)
loader = NeighborLoader(graph, None, None, [3, 2], batch_size=7, shuffle=True, seed=5)
batches = [(b.n_id, b.graph.edge_index, b.e_id) for b in loader]
torch.save((batches, hop2_tokens(graph, 5, seed=3)), sys.argv[2])
"""


@requires_ext
def test_sampling_without_the_extension_draws_the_same_batches(tmp_path):
    from graphloc.loader import NeighborLoader
    from graphloc.nn.models.largegt import hop2_tokens
    edge_index = random_edge_index(40, 160, seed=31)
    torch.save(edge_index, tmp_path / "in.pt")
    subprocess.run([sys.executable, "-c", SAMPLING_SCRIPT, str(tmp_path / "in.pt"),
                    str(tmp_path / "out.pt")], env={**os.environ, "GRAPHLOC_DISABLE_EXT": "1"},
                   capture_output=True, text=True, check=True)
    batches, tokens = torch.load(tmp_path / "out.pt")
    graph = Graph(edge_index, num_nodes=40)
    loader = NeighborLoader(graph, None, None, [3, 2], batch_size=7, shuffle=True, seed=5)
    expected = [(b.n_id, b.graph.edge_index, b.e_id) for b in loader]
    assert len(batches) == len(expected) == 6
    for got, want in zip(batches, expected, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert torch.equal(tokens, hop2_tokens(graph, 5, seed=3))
