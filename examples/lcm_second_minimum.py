"""The second-smallest element of a multiset: LCM aggregation against sum, max and mean.

The task of the LCM paper (Ong and Veličković, LoG 2022) and of PyG's
``examples/lcm_aggr_2nd_min.py``: each example is a multiset of integers written as bit
vectors, the label is the bit vector of its second smallest element (predicted bit by bit;
an example counts as correct when every bit is). Training sets hold 2 to 16 elements; the
validation sets hold 32, more than any seen in training. Every aggregation runs on
graphloc's engine, the sets being the destinations of a bipartite graph from their elements.
The element order inside each set is shuffled every epoch (LCM is not exactly
permutation-invariant).

    python examples/lcm_second_minimum.py                  # every aggregation
    python examples/lcm_second_minimum.py --aggr lcm --epochs 60

A scaled-down run of PyG's (65,536 sets and 1,000 epochs there): the defaults take a few
minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc import Graph
from graphloc.nn import aggr


def multisets(num_sets: int, min_size: int, max_size: int, num_bits: int,
              gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """``(bits [total, num_bits], set id of each element, label bits [num_sets, num_bits])``."""
    sizes = torch.randint(min_size, max_size + 1, (num_sets,), generator=gen)
    bits = torch.randint(0, 2, (int(sizes.sum()), num_bits), generator=gen)
    owner = torch.repeat_interleave(torch.arange(num_sets), sizes)
    values = (bits * 2 ** torch.arange(num_bits - 1, -1, -1)).sum(1)
    labels = torch.empty(num_sets, num_bits)
    start = 0
    for s, size in enumerate(sizes.tolist()):  # the second smallest, duplicates included
        second = values[start:start + size].topk(2, largest=False).indices[1] + start
        labels[s] = bits[second].float()
        start += size
    return bits, owner, labels


def set_graph(owner: Tensor, num_sets: int, gen: torch.Generator | None) -> tuple[Graph, Tensor]:
    """Elements -> their set, sorted by set; with ``gen`` each set's order is shuffled.
    Returns the graph and the element order it reads."""
    key = owner.double() + (torch.rand(owner.numel(), generator=gen, dtype=torch.float64)
                            * 0.5 if gen is not None else 0.0)
    order = torch.argsort(key)
    edges = torch.stack([torch.arange(owner.numel()), owner[order]])
    return Graph.bipartite(edges, (owner.numel(), num_sets)), order


class SetModel(torch.nn.Module):
    """Bitwise embedding and an MLP per element, one aggregation per set, an MLP decoder
    to one logit per bit (PyG's example's architecture)."""

    def __init__(self, num_bits: int, dim: int, aggregation: str):
        super().__init__()
        self.bits = torch.nn.ModuleList(torch.nn.Embedding(2, dim) for _ in range(num_bits))
        self.encoder = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.Dropout(0.5),
                                           torch.nn.GELU())
        if aggregation.startswith("lcm"):  # "lcm": PyG's padded tree; "lcm-own": each set's own
            self.aggr = aggr.LCMAggregation(dim, dim, project=False,
                                            padded=aggregation == "lcm")
        else:
            self.aggr = aggr.resolve(aggregation)
        self.decoder = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.Dropout(0.25),
                                           torch.nn.GELU(), torch.nn.Linear(dim, num_bits))

    def forward(self, bits: Tensor, graph: Graph) -> Tensor:
        h = torch.stack([emb(b) for emb, b in zip(self.bits, bits.t(), strict=True)]).sum(0)
        return self.decoder(self.aggr(graph, self.encoder(h)))


def batches(bits, owner, labels, batch_size, gen):
    """Mini-batches of whole sets: (element bits, graph, labels)."""
    sets = torch.randperm(labels.size(0), generator=gen) if gen is not None \
        else torch.arange(labels.size(0))
    for chunk in sets.split(batch_size):
        mask = torch.isin(owner, chunk)
        local = torch.empty(labels.size(0), dtype=torch.long)
        local[chunk] = torch.arange(chunk.numel())
        graph, order = set_graph(local[owner[mask]], chunk.numel(), gen)
        yield bits[mask][order], graph, labels[chunk]


def exact_match(model, data, batch_size) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for bits, graph, labels in batches(*data, batch_size, None):
            wrong = (model(bits, graph).sigmoid().round() != labels).sum(1)
            correct += int((wrong == 0).sum())
            total += labels.size(0)
    return correct / total


def run(aggregation: str, args, train, val) -> dict:
    torch.manual_seed(args.seed)
    model = SetModel(args.bits, args.dim, aggregation)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    start = time.perf_counter()
    for _ in range(args.epochs):
        model.train()
        for bits, graph, labels in batches(*train, args.batch_size, gen):
            opt.zero_grad()
            F.binary_cross_entropy_with_logits(model(bits, graph), labels).backward()
            opt.step()
    return {"train": exact_match(model, train, args.batch_size),
            "val": exact_match(model, val, args.batch_size),
            "seconds": time.perf_counter() - start}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--aggr", nargs="+", default=["lcm", "lcm-own", "sum", "max", "mean"],
                        help="lcm: PyG's padded tree; lcm-own: each set's own tree")
    parser.add_argument("--bits", type=int, default=8)
    parser.add_argument("--train-sets", type=int, default=8192)
    parser.add_argument("--val-sets", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    gen = torch.Generator().manual_seed(12345)
    train = multisets(args.train_sets, 2, 16, args.bits, gen)
    val = multisets(args.val_sets, 32, 32, args.bits, gen)
    print("| aggregation | train exact match | validation exact match (sets of 32) | s |")
    print("|---|---:|---:|---:|")
    for name in args.aggr:
        r = run(name, args, train, val)
        print(f"| {name} | {r['train']:.3f} | {r['val']:.3f} | {r['seconds']:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
