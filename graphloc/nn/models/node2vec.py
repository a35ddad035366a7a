"""Node2Vec (Grover and Leskovec, KDD 2016) as PyG's ``torch_geometric.nn.Node2Vec``, on
graphloc's random walks: PyG 2.8's needs pyg-lib (its constructor raises ``ImportError``
without it), and pyg-lib's walk refuses ``p`` or ``q`` other than 1."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.graph import Graph
from graphloc.ops.traversal import check_walk_bias


class Node2Vec(torch.nn.Module):
    """PyG's ``Node2Vec``: the same arguments, attributes (``embedding``, ``EPS``,
    ``walk_length`` = the given one - 1, ...), initial draw, ``loader``, ``sample``,
    ``pos_sample``, ``neg_sample``, ``loss`` and ``test``.

    The walks are ``graphloc.ops.random_walk``'s, along the edges ``src -> dst``: node2vec's
    second-order weights (``1 / p`` back to the previous node, 1 to a node with an edge
    back to it, ``1 / q`` elsewhere) drawn exactly, for any ``p`` and ``q`` > 0. Each call
    takes one seed from torch's default generator, so ``torch.manual_seed`` repeats the
    walks (in loader workers too). Negative walks are uniform random nodes, as PyG's.
    """

    def __init__(self, edge_index: Tensor, embedding_dim: int, walk_length: int,
                 context_size: int, walks_per_node: int = 1, p: float = 1.0, q: float = 1.0,
                 num_negative_samples: int = 1, num_nodes: int | None = None,
                 sparse: bool = False):
        super().__init__()
        if not isinstance(walk_length, int) or not isinstance(context_size, int) \
                or not 1 <= context_size <= walk_length:
            raise ValueError(f"Node2Vec needs integers 1 <= context_size <= walk_length, got "
                             f"context_size={context_size!r}, walk_length={walk_length!r}")
        for name, value in (("walks_per_node", walks_per_node),
                            ("num_negative_samples", num_negative_samples)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.graph = Graph(edge_index.cpu(), num_nodes=num_nodes)
        self.num_nodes = self.graph.num_nodes
        self.EPS = 1e-15
        self.embedding_dim = embedding_dim
        self.walk_length = walk_length - 1
        self.context_size = context_size
        self.walks_per_node = walks_per_node
        check_walk_bias(p, q)
        check_flags("Node2Vec", sparse=sparse)
        self.p, self.q = p, q
        self.num_negative_samples = num_negative_samples
        self.embedding = torch.nn.Embedding(self.num_nodes, embedding_dim, sparse=sparse)
        self.reset_parameters()

    def reset_parameters(self):
        self.embedding.reset_parameters()

    def forward(self, batch: Tensor | None = None) -> Tensor:
        """The embeddings of the nodes in ``batch`` (all of them without one)."""
        weight = self.embedding.weight
        return weight if batch is None else weight[batch]

    def loader(self, **kwargs) -> DataLoader:
        return DataLoader(range(self.num_nodes), collate_fn=self.sample, **kwargs)

    def _windows(self, walks: Tensor) -> Tensor:
        """Every ``context_size`` window of each walk, stacked window by window."""
        count = 1 + self.walk_length + 1 - self.context_size
        return torch.cat([walks[:, j:j + self.context_size] for j in range(count)], dim=0)

    def pos_sample(self, batch: Tensor) -> Tensor:
        batch = batch.repeat(self.walks_per_node)
        seed = int(torch.randint(0, 2**62, (), dtype=torch.long))
        walks = ops.random_walk(self.graph, batch.cpu(), self.walk_length, self.p, self.q,
                                seed=seed, return_edges=False).nodes
        return self._windows(walks.to(batch.device))

    def neg_sample(self, batch: Tensor) -> Tensor:
        batch = batch.repeat(self.walks_per_node * self.num_negative_samples)
        walks = torch.randint(self.num_nodes, (batch.size(0), self.walk_length),
                              dtype=batch.dtype, device=batch.device)
        return self._windows(torch.cat([batch.view(-1, 1), walks], dim=-1))

    def sample(self, batch) -> tuple[Tensor, Tensor]:
        if not isinstance(batch, Tensor):
            batch = torch.tensor(batch)
        return self.pos_sample(batch), self.neg_sample(batch)

    def _log_likelihood(self, walks: Tensor, positive: bool) -> Tensor:
        start, rest = walks[:, 0], walks[:, 1:].contiguous()
        h_start = self.embedding(start).view(walks.size(0), 1, self.embedding_dim)
        h_rest = self.embedding(rest.view(-1)).view(walks.size(0), -1, self.embedding_dim)
        out = torch.sigmoid((h_start * h_rest).sum(dim=-1).view(-1))
        return -torch.log((out if positive else 1 - out) + self.EPS).mean()

    def loss(self, pos_rw: Tensor, neg_rw: Tensor) -> Tensor:
        """The skip-gram loss with negative sampling of positive and negative walks."""
        return self._log_likelihood(pos_rw, True) + self._log_likelihood(neg_rw, False)

    def test(self, train_z: Tensor, train_y: Tensor, test_z: Tensor, test_y: Tensor,
             solver: str = "lbfgs", *args, **kwargs) -> float:
        """Accuracy of a logistic regression (scikit-learn) fitted on ``train_z``."""
        from sklearn.linear_model import LogisticRegression
        clf = LogisticRegression(*args, solver=solver, **kwargs).fit(
            train_z.detach().cpu().numpy(), train_y.detach().cpu().numpy())
        return clf.score(test_z.detach().cpu().numpy(), test_y.detach().cpu().numpy())

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.embedding.weight.size(0)}, "
                f"{self.embedding.weight.size(1)})")
