"""Argument checks shared by every layer of the package (a leaf module: imports nothing
of graphloc's, so ops and csrc wrappers can use it too)."""

from __future__ import annotations


def is_int_at_least(value, low: int) -> bool:
    """A Python int ``>= low``. Booleans, floats (3.9) and tensors are not counts: taking
    them would reinterpret the caller's value (True as 1, 3.9 as 3)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def check_int(value, name: str, low: int) -> int:
    """``value``, or a ValueError naming ``name`` and the value."""
    if not is_int_at_least(value, low):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value
