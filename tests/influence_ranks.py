"""Run under torchrun with 2 processes (gloo): ``measure`` sharded over them, where the
processes agree and where each differs in one input. Each process writes a JSON object of
its cases to ``<argv[1]>/rank<r>.json``; used by tests/test_influence.py."""

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from graphloc.datasets import synthetic_city
from graphloc.influence import measure
from graphloc.nn import GNN

dist.init_process_group("gloo")
rank = dist.get_rank()
city = synthetic_city(200, seed=0, hops=2)


def model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return GNN("gcn", city.num_features, 8, 3, 2)


outcomes = {}


def attempt(case: str, net, nodes, x) -> None:
    try:
        result = measure(net, (x, city.graph), 3, nodes=nodes)
        outcomes[case] = {"R": result.R, "totals": result.totals.tolist()}
    except ValueError as err:
        outcomes[case] = {"refused": str(err)}


seeds = torch.arange(0, 200, 7)
attempt("same", model(0), seeds, city.x)
attempt("weights", model(rank), seeds, city.x)  # an initialisation without a common seed
attempt("seeds", model(0), torch.randperm(200, generator=torch.Generator().manual_seed(rank))[:20],
        city.x)
shifted = city.x.clone()
shifted[5, 0] += rank
attempt("features", model(0), seeds, shifted)
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(outcomes))
dist.destroy_process_group()
