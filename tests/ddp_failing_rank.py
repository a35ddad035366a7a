"""Run under torchrun with 2 processes: rank 1 raises after one DDP step while rank 0 keeps
training. Used by tests/test_train.py to check that nobody hangs."""

import torch
import torch.distributed as dist

from graphloc.datasets import synthetic_city
from graphloc.nn import GNN

dist.init_process_group("gloo")
city = synthetic_city(300, seed=0, hops=2)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(GNN("gcn", city.num_features, 8, 10, 2))
opt = torch.optim.AdamW(model.parameters())
for step in range(1000):
    if step == 1 and dist.get_rank() == 1:
        raise RuntimeError("rank 1 fails on purpose")
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(city.x, city.graph), city.y).backward()
    opt.step()
