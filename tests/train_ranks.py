"""Run under torchrun with 2 processes (gloo): ``fit`` on one dataset, then on datasets that
differ between the processes in one tensor. Each process writes a JSON object of its cases
to ``<argv[1]>/rank<r>.json``; used by tests/test_train.py."""

import json
import sys
from pathlib import Path

import torch.distributed as dist

from graphloc.datasets import synthetic_city
from graphloc.train import TrainConfig, fit

dist.init_process_group("gloo")
rank = dist.get_rank()
outcomes = {}


def attempt(case: str, city) -> None:
    try:
        history = fit(city, TrainConfig(epochs=2, hidden=8, eval_every=1), progress=False)
        outcomes[case] = {"val": history[-1]["val"]}
    except ValueError as err:
        outcomes[case] = {"refused": str(err)}


attempt("same", synthetic_city(200, seed=0, hops=2))
city = synthetic_city(200, seed=0, hops=2)
city.x[3, 1] += rank  # a feature made differently on one process
attempt("features", city)
city = synthetic_city(200, seed=0, hops=2)
city.y[city.train_index[:3]] = (city.y[city.train_index[:3]] + rank) % city.num_classes
attempt("labels", city)
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(outcomes))
dist.destroy_process_group()
