"""Every compiled kernel checks the indices it reads, whatever the Python wrappers did:
an indptr that does not start at 0, decreases or ends elsewhere than E, an index outside
the rows it addresses (negative, one past the end, a heap-sized value), and a strided view
of either (whose memory holds other values than the view) are RuntimeErrors naming the
array and the value. Run in a child process, so that a crash
(SIGSEGV) fails the test instead of killing the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from helpers import requires_ext

from graphloc import Graph
from graphloc.datasets.labels import local_eccentricity
from graphloc.influence import measure
from graphloc.loader import NeighborLoader
from graphloc.nn import GNN, ChebConv
from graphloc.nn.models.largegt import hop2_tokens

CHILD = textwrap.dedent("""
    import torch, graphloc
    k = torch.ops.graphloc
    L = lambda *v: torch.tensor(v, dtype=torch.long)
    x = torch.randn(3, 4)
    good_ptr, good_idx = L(0, 1, 2, 3), L(1, 2, 0)
    bad_csrs = {  # name -> (indptr, indices, expected message)
        "indptr start": (L(1, 1, 2, 3), L(1, 2, 0), "indptr must start at 0, got 1"),
        "indptr decreasing": (L(0, 2, 1, 3), L(1, 2, 0), "indptr must be non-decreasing"),
        "indptr end": (L(0, 1, 2, 2), L(1, 2, 0), "indptr ends at 2"),
        "index too large": (good_ptr, L(1, 3, 0), "indices\\\\[1\\\\] = 3 is out of range"),
        "index negative": (good_ptr, L(1, -1, 0), "indices\\\\[1\\\\] = -1 is out of range"),
        "index from the heap": (good_ptr, L(1, 8367752087222772008, 0), "is out of range"),
        # strided views: the kernels read raw memory, so the values checked must be those read
        "indptr strided": (L(0, 9, 1, 9, 2, 9, 3)[::2], L(1, 2, 0), "indptr must be contiguous"),
        "indices strided": (good_ptr, L(1, 9, 2, 9, 0)[::2], "indices must be contiguous"),
    }
    def calls(ptr, idx):
        w = torch.ones(idx.numel())
        s = torch.randn(idx.numel(), 2)
        return {
            "spmm": lambda: k.spmm(ptr, idx, None, x, "sum"),
            "spmm max": lambda: k.spmm(ptr, idx, None, x, "max"),
            "sddmm": lambda: k.sddmm(ptr, idx, x, x, "dot", 1),
            "segment_attention": lambda: k.segment_attention(s, ptr, idx, x),
            "additive_attention": lambda: k.additive_attention(
                torch.randn(3, 2), torch.randn(3, 2), 0.2, ptr, idx, x),
            "gatv2_scores": lambda: k.gatv2_scores(ptr, idx, x, x, torch.randn(2, 2), 0.2),
            "gated_sum": lambda: k.gated_sum(ptr, idx, x, x, x),
            "film_sum": lambda: k.film_sum(ptr, idx, x, x, x),
            "edge_outer_sum": lambda: k.edge_outer_sum(ptr, idx, s, x),
            "edge_outer_sum_backward": lambda: k.edge_outer_sum_backward(
                ptr, idx, s, x, torch.randn(3, 8), True, True),
            "softmax_sum": lambda: k.softmax_sum(x, torch.ones(4), ptr, idx, False),
            "local_eccentricity": lambda: k.local_eccentricity(ptr, idx, w.double(), 2),
            "khop_subgraphs": lambda: k.khop_subgraphs(ptr, idx, L(0), 2),
            "walk_counts": lambda: k.walk_counts(ptr, idx, None, 2, 2**40),
            "separated_rounds": lambda: k.separated_rounds(ptr, idx, good_ptr, good_idx, L(0), 1),
            "separated_rounds (transpose)": lambda: k.separated_rounds(
                good_ptr, good_idx, ptr, idx, L(0), 1),
            "neighbor_sample": lambda: k.neighbor_sample(
                [ptr], [idx], [0], [0], [3], [L(0)], [2, 2], False, False, False, 0, [], [],
                None, [], False),
            "hop2_sample": lambda: k.hop2_sample(ptr, idx, 3, 0),
            "graclus": lambda: k.graclus(ptr, idx, L(0, 1, 2), None),
            "partition": lambda: k.partition(ptr, idx, None, None, 2, False, 30, 0),
            "random_walk": lambda: k.random_walk(ptr, idx, L(0, 1, 2), 3, 0.5, 2.0, 0, None,
                                                 False),
        }
    def ptr_only(ptr):
        e = torch.randn(3, 2)
        return {
            "segment_reduce": lambda: k.segment_reduce(e, ptr, "sum"),
            "gather_csr": lambda: k.gather_csr(torch.randn(3, 2), ptr, 3),
            "segment_softmax": lambda: k.segment_softmax(e, ptr),
            "segment_softmax_backward": lambda: k.segment_softmax_backward(e, e, ptr),
        }
    failures = []
    for case, (ptr, idx, message) in bad_csrs.items():
        todo = dict(calls(ptr, idx))
        if case.startswith("indptr"):
            todo.update(ptr_only(ptr))
        for op, call in todo.items():
            try:
                call()
                failures.append(f"{op} accepted {case}")
            except RuntimeError as err:
                import re
                if not re.search(message, str(err)):
                    failures.append(f"{op} on {case}: {str(err).splitlines()[0]}")
    # backward kernels: their transpose arrays are checked too
    ci, cx, cp = good_ptr, L(1, 2, 0), L(0, 1, 7)
    arg = torch.zeros(3, 4, dtype=torch.long)
    for op, call in {
        "spmm_arg_backward": lambda: k.spmm_arg_backward(ci, cx, cp, None, x, arg,
                                                         torch.randn(3, 4), False),
        "segment_attention_backward": lambda: k.segment_attention_backward(
            torch.randn(3, 1), torch.randn(3, 1), torch.randn(3, 4), torch.randn(3, 4), None,
            good_ptr, good_idx, x, ci, cx, cp, True, True),
        "additive_attention_backward": lambda: k.additive_attention_backward(
            torch.randn(3, 1), torch.randn(3, 1), 0.2, torch.randn(2, 3, 1), torch.randn(3, 4),
            torch.randn(3, 4), good_ptr, good_idx, x, ci, cx, cp, True, True),
        "gatv2_scores_backward": lambda: k.gatv2_scores_backward(
            good_ptr, good_idx, x, x, torch.randn(2, 2), 0.2, torch.randn(3, 2), ci, cx, cp,
            True, True, True),
        "gated_sum_backward": lambda: k.gated_sum_backward(
            good_ptr, good_idx, x, x, x, x, ci, cx, cp, True, True, True),
        "film_sum_backward": lambda: k.film_sum_backward(
            good_ptr, good_idx, x, x, x, x, ci, cx, cp, True, True, True),
        "softmax_sum_backward": lambda: k.softmax_sum_backward(
            x, torch.ones(4), x, torch.ones(2, 3, 4), x, good_ptr, good_idx, ci, cx, cp, False,
            True, True),
    }.items():
        try:
            call()
            failures.append(f"{op} accepted csc_perm holding 7")
        except RuntimeError as err:
            if "csc_perm[2] = 7 is out of range" not in str(err):
                failures.append(f"{op}: {str(err).splitlines()[0]}")
    # arg_sources reads perm at each position it is given
    perm = L(2, 0, 1)
    far = 8367752087222772008
    for case, bad in {"negative": -1, "past num_edges": 4, "from the heap": far}.items():
        try:
            k.arg_sources(L(0, 3, bad, 1).view(2, 2), perm, 3)
            failures.append(f"arg_sources accepted a position {case}")
        except RuntimeError as err:
            if f"arg (flattened)[2] = {bad} is not a CSR position in [0, 3]" not in str(err):
                failures.append(f"arg_sources, {case}: {str(err).splitlines()[0]}")
    print("FAILURES", failures)
""")


@requires_ext
def test_every_kernel_refuses_bad_csr_arrays_without_crashing():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"the child crashed ({proc.returncode}): {proc.stderr[-2000:]}"
    assert "FAILURES []" in proc.stdout, proc.stdout


@pytest.fixture
def bipartite():
    """20 sources into 3 destinations (source ids above the destination count)."""
    src = torch.arange(20)
    return Graph.bipartite(torch.stack([src, src % 3]), (20, 3))


def test_graph_algorithms_refuse_a_bipartite_graph(bipartite):
    message = "needs a graph on one node set; this one is bipartite"
    with pytest.raises(ValueError, match=message):
        local_eccentricity(bipartite, torch.ones(20))
    with pytest.raises(ValueError, match=message):
        NeighborLoader(bipartite, None, None, [2])
    with pytest.raises(ValueError, match=message):
        measure(GNN("gcn", 4, 4, 2, 2), (torch.randn(3, 4), bipartite), 2)
    with pytest.raises(ValueError, match=message):
        hop2_tokens(bipartite, 4)
    with pytest.raises(ValueError, match=message):
        ChebConv(4, 2, K=2)(torch.randn(20, 4), bipartite)


def test_far_source_ids_in_a_bipartite_graph_are_refused_too():
    src = torch.tensor([0, 4_999_999])
    graph = Graph.bipartite(torch.stack([src, torch.tensor([0, 2])]), (5_000_000, 3))
    with pytest.raises(ValueError, match="bipartite"):
        local_eccentricity(graph, torch.ones(2))
