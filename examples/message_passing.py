"""Build a small GNN directly from graphloc's ops and train it.

The task: on a 60x60 street grid, predict for every node the mean of a random signal over
its 2-hop neighbourhood, which a two-layer mean-aggregation network can represent exactly.

    python examples/message_passing.py
"""

import networkx as nx
import torch

from graphloc import Graph, ops


class MeanGNN(torch.nn.Module):
    """Two GraphSAGE-style layers: h' = W1 h + W2 mean_{j -> i} h_j."""

    def __init__(self, channels: int, hidden: int):
        super().__init__()
        self.root1 = torch.nn.Linear(channels, hidden)
        self.neigh1 = torch.nn.Linear(channels, hidden)
        self.root2 = torch.nn.Linear(hidden, 1)
        self.neigh2 = torch.nn.Linear(hidden, 1)

    def forward(self, x, graph):
        h = self.root1(x) + self.neigh1(ops.spmm(graph, x, reduce="mean"))
        h = torch.relu(h)
        return self.root2(h) + self.neigh2(ops.spmm(graph, h, reduce="mean"))


def main() -> None:
    torch.manual_seed(0)
    graph = Graph.from_networkx(nx.grid_2d_graph(60, 60))
    signal = torch.randn(graph.num_nodes, 1)
    target = ops.spmm(graph, ops.spmm(graph, signal, reduce="mean"), reduce="mean")
    model = MeanGNN(1, 32)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(301):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(signal, graph), target)
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step:3d}  mse {loss.item():.5f}  (target variance {target.var():.5f})")


if __name__ == "__main__":
    main()
