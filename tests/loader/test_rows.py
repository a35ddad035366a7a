"""graphloc.loader.rows.packed_rows against a loop over the chosen rows."""

import torch

from graphloc.loader.rows import packed_rows


def test_packed_rows_against_a_loop():
    indptr = torch.tensor([0, 3, 3, 7, 8, 12], dtype=torch.int32)
    for nodes in (torch.tensor([2, 0, 4, 1, 2]), torch.tensor([1]),
                  torch.zeros(0, dtype=torch.long)):
        position, owner, offsets = packed_rows(indptr, nodes)
        expected = [(p, i) for i, v in enumerate(nodes.tolist())
                    for p in range(int(indptr[v]), int(indptr[v + 1]))]
        assert list(zip(position.tolist(), owner.tolist(), strict=True)) == expected
        lengths = [int(indptr[v + 1] - indptr[v]) for v in nodes.tolist()]
        assert offsets.tolist() == [sum(lengths[:i]) for i in range(len(lengths) + 1)]
        assert position.dtype == torch.long
