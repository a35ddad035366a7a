"""The Python twins of the graph kernels (balls, rounds, sampling) give exactly the kernels'
output, so the fallback without the extension draws the same samples."""

import pytest
import torch
from helpers import random_edge_index, requires_ext

from graphloc import Graph
from graphloc.ops import reference

pytestmark = requires_ext


def _graphs():
    for seed, hub in ((10, 0), (11, 30)):  # loops, parallel edges, isolated nodes; a hub
        yield seed, Graph(random_edge_index(50, 140, seed=seed, hub_degree=hub), num_nodes=50)


def test_ball_twins_give_the_kernels_output():
    for seed, graph in _graphs():
        csr, csc = graph.csr, graph.csc
        seeds = torch.randperm(50, generator=torch.Generator().manual_seed(seed))[:30]
        for hops in (0, 1, 3):
            ours = reference.khop_subgraphs(csr.indptr, csr.indices, seeds, hops)
            kernel = torch.ops.graphloc.khop_subgraphs(csr.indptr, csr.indices, seeds, hops)
            for a, b in zip(ours, kernel, strict=True):
                assert torch.equal(a, b)
            args = (csr.indptr, csr.indices, csc.indptr, csc.indices, seeds, hops)
            assert torch.equal(reference.separated_rounds(*args),
                               torch.ops.graphloc.separated_rounds(*args))
    with pytest.raises(ValueError, match="seed 50 is out of range for 50 nodes"):
        reference.khop_subgraphs(csr.indptr, csr.indices, torch.tensor([3, 50]), 2)
    with pytest.raises(ValueError, match="hops must be >= 0"):
        reference.khop_subgraphs(csr.indptr, csr.indices, seeds, -1)
    with pytest.raises(ValueError, match="seed 3 appears twice"):
        reference.separated_rounds(csr.indptr, csr.indices, csc.indptr, csc.indices,
                                   torch.tensor([3, 4, 3]), 1)


def test_sampling_twins_draw_the_kernels_samples():
    for seed, graph in _graphs():
        csr = graph.csr
        seeds = torch.randperm(50, generator=torch.Generator().manual_seed(seed))[:8]
        for fanouts in ([2, 3], [-1, 1], [0], [5, 5, 5]):
            for stream in (0, 12345, 2**62):
                ours = reference.neighbor_sample(csr.indptr, csr.indices, seeds, fanouts, stream)
                kernel = torch.ops.graphloc.neighbor_sample(csr.indptr, csr.indices, seeds,
                                                            fanouts, stream)
                for a, b in zip(ours, kernel, strict=True):
                    assert torch.equal(a, b)
        for K in (1, 3, 8):
            assert torch.equal(reference.hop2_sample(csr.indptr, csr.indices, K, 99),
                               torch.ops.graphloc.hop2_sample(csr.indptr, csr.indices, K, 99))
    # a pool of more than 4,096 two-hop paths: sampled by position in both
    dense = torch.cartesian_prod(torch.arange(80), torch.arange(80)).t()
    csr = Graph(dense, num_nodes=80).csr
    assert torch.equal(reference.hop2_sample(csr.indptr, csr.indices, 6, 7),
                       torch.ops.graphloc.hop2_sample(csr.indptr, csr.indices, 6, 7))
    with pytest.raises(ValueError, match="seed node 3 appears twice"):
        reference.neighbor_sample(csr.indptr, csr.indices, torch.tensor([3, 3]), [2], 0)
    with pytest.raises(ValueError, match="fan-outs must be >= 0, or -1"):
        reference.neighbor_sample(csr.indptr, csr.indices, torch.tensor([3]), [-2], 0)
    with pytest.raises(ValueError, match="K \\(tokens per node\\) must be >= 1"):
        reference.hop2_sample(csr.indptr, csr.indices, 0, 0)
