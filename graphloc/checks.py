"""Argument checks shared by every layer of the package (a leaf module: imports nothing
of graphloc's, so ops and csrc wrappers can use it too)."""

from __future__ import annotations

import torch


def is_int_at_least(value, low: int) -> bool:
    """A Python int ``>= low``. Booleans, floats (3.9) and tensors are not counts: taking
    them would reinterpret the caller's value (True as 1, 3.9 as 3)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def check_int(value, name: str, low: int) -> int:
    """``value``, or a ValueError naming ``name`` and the value."""
    if not is_int_at_least(value, low):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


_INDEX_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)


def check_index(index, dim_size: int, name: str) -> None:
    """An integer tensor whose values lie in ``[0, dim_size)``; errors name ``name`` and the
    offending value. Reads the values, so not called while torch.compile traces."""
    if not isinstance(index, torch.Tensor) or index.dtype not in _INDEX_DTYPES:
        got = index.dtype if isinstance(index, torch.Tensor) else type(index).__name__
        raise TypeError(f"{name} must be an integer tensor, got {got}")
    if index.numel() == 0:
        return
    low, high = torch.aminmax(index)
    if low < 0:
        raise ValueError(f"{name} holds {int(low)}; indices must be >= 0")
    if high >= dim_size:
        raise ValueError(f"{name} holds {int(high)} but dim_size is {dim_size}")


def pyg_keys(store) -> set[str]:
    """The attribute names of a PyG Data or storage (``keys`` is a method since PyG 2.4,
    an attribute before), or none for an object without them."""
    keys = getattr(store, "keys", None)
    if keys is None:
        return set()
    return set(map(str, keys() if callable(keys) else keys))
