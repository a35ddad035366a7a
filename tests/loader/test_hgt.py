"""graphloc.loader.HGTLoader: PyG's HGTLoader without torch-sparse, against brute force:
sizes per hop, every edge between the sampled nodes, budgets, draws by squared budget."""

import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data, HeteroData  # noqa: E402

from graphloc.loader import HGTLoader  # noqa: E402


def paper_author(seed=0):
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data["paper"].x = torch.arange(100)
    data["author"].x = torch.arange(100, 300)
    for (src, dst), (n_src, n_dst), count in ((("paper", "paper"), (100, 100), 500),
                                               (("paper", "author"), (100, 200), 1000),
                                               (("author", "paper"), (200, 100), 1000)):
        data[src, "to", dst].edge_index = torch.stack([
            torch.randint(0, n_src, (count,), generator=gen),
            torch.randint(0, n_dst, (count,), generator=gen)])
        data[src, "to", dst].edge_attr = torch.arange(count)
    return data


def test_batches_hold_their_draws_and_every_edge_between_them():
    data = paper_author()
    torch.manual_seed(0)
    loader = HGTLoader(data, num_samples=[5] * 4, batch_size=20, input_nodes="paper")
    assert str(loader) == "HGTLoader()" and len(loader) == 5
    for batch in loader:
        assert batch["paper"].num_nodes == 20 + 4 * 5 and batch["author"].num_nodes == 4 * 5
        assert torch.equal(batch["paper"].n_id[:20], batch["paper"].input_id)
        for t in ("paper", "author"):
            assert batch[t].n_id.unique().numel() == batch[t].num_nodes
        for edge_type in data.edge_types:
            src, _, dst = edge_type
            store, parent = batch[edge_type], data[edge_type]
            s_ids, d_ids = batch[src].n_id, batch[dst].n_id
            got = {(int(s_ids[a]), int(d_ids[b]), int(e)) for (a, b), e in
                   zip(store.edge_index.t().tolist(), store.e_id.tolist(), strict=True)}
            inside_s, inside_d = set(s_ids.tolist()), set(d_ids.tolist())
            expected = {(s, d, e) for e, (s, d) in enumerate(parent.edge_index.t().tolist())
                        if s in inside_s and d in inside_d}
            assert got == expected  # all of them, each with its own id
            assert torch.equal(store.edge_attr, store.e_id)


def test_drawn_nodes_come_from_the_budget():
    """A node enters a batch (past the seeds) only as an in-neighbour of a sampled node."""
    data = paper_author(seed=1)
    loader = HGTLoader(data, num_samples=[3] * 3, batch_size=10, input_nodes="paper")
    for batch in loader:
        for t in ("paper", "author"):
            start = batch[t].batch_size if t == "paper" else 0
            for v in batch[t].n_id[start:].tolist():
                assert any(v in data[et].edge_index[0][torch.isin(
                    data[et].edge_index[1], batch[et[2]].n_id)].tolist()
                    for et in data.edge_types if et[0] == t)


def test_draws_follow_the_squared_budget():
    """Seeds: papers 0 and 1, each with 2 in-edges; author 0 writes both (budget 1/2 + 1/2),
    authors 1 and 2 one each (1/2). One author drawn: 0 with probability 1 / 1.5, the others
    1/6 each; chi-square with 2 degrees of freedom below 13.8 (p = 0.001) over 3,000."""
    data = HeteroData()
    data["paper"].num_nodes = 2
    data["author"].num_nodes = 3
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 0, 2], [0, 0, 1, 1]])
    torch.manual_seed(1)
    loader = HGTLoader(data, num_samples={"paper": [0], "author": [1]}, batch_size=2,
                       input_nodes=("paper", torch.tensor([0, 1])))
    counts = torch.zeros(3)
    for _ in range(3000):
        counts[next(iter(loader))["author"].n_id] += 1
    expected = torch.tensor([2000.0, 500.0, 500.0])
    assert float(((counts - expected) ** 2 / expected).sum()) < 13.8


def test_a_large_row_adds_fifty_of_its_in_neighbours():
    data = HeteroData()
    data["paper"].num_nodes = 1
    data["author"].num_nodes = 120
    data["author", "writes", "paper"].edge_index = torch.stack(
        [torch.arange(120), torch.zeros(120, dtype=torch.long)])
    loader = HGTLoader(data, num_samples={"paper": [0], "author": [500]}, batch_size=1,
                       input_nodes="paper")
    for _ in range(5):
        authors = next(iter(loader))["author"].n_id
        assert authors.numel() == 50 and authors.unique().numel() == 50


def test_bad_input_is_named():
    data = paper_author()
    with pytest.raises(NotImplementedError, match="does not support a data object"):
        HGTLoader(Data(edge_index=torch.tensor([[0], [1]])), num_samples=[2],
                  input_nodes=None)
    data["author", "to", "paper"].edge_index[1, 3] = 100
    with pytest.raises(ValueError, match="edge type \\('author', 'to', 'paper'\\): "
                                         "edge_index\\[1\\] holds 100 at column 3"):
        HGTLoader(data, num_samples=[2], input_nodes="paper")
    with pytest.raises(ValueError, match="num_samples has no entry for node type"):
        HGTLoader(paper_author(), num_samples={"paper": [2]}, input_nodes="paper")
    with pytest.raises(ValueError, match="num_samples\\['author'\\] must be a list of "
                                         "integers >= 0, got \\[-1\\]"):
        HGTLoader(paper_author(), num_samples={"paper": [2], "author": [-1]},
                  input_nodes="paper")
    empty = HGTLoader(paper_author(), num_samples=[2, 2], batch_size=4,
                      input_nodes=("paper", torch.tensor([], dtype=torch.long)))
    assert len(empty) == 0


def test_is_sorted_refuses_a_string_by_name():
    data = paper_author()
    with pytest.raises(TypeError, match="HGTSampler: is_sorted must be True or False"):
        HGTLoader(data, [2], ("paper", torch.arange(4)), is_sorted="False")
