import pytest


@pytest.fixture(params=[1 << 24, 7], ids=["one block", "blocks of 7 characters"])
def blocks(request, monkeypatch):
    """Text readers parse a block of lines at a time: a file of one block, and one of many
    (blocks of 7 characters cut most lines apart)."""
    from graphloc.datasets import readers
    monkeypatch.setattr(readers, "BLOCK_CHARS", request.param)
    return request.param
