"""Argument checks shared by every layer of the package (a leaf module: imports nothing
of graphloc's, so ops and csrc wrappers can use it too)."""

from __future__ import annotations

import math
import os
import sys

import torch

# frames of graphloc and torch: a layer's warning skips them to name the caller's line
_INTERNAL = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
             os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)


def is_int_at_least(value, low: int) -> bool:
    """A Python int ``>= low``. Booleans, floats (3.9) and tensors are not counts: taking
    them would reinterpret the caller's value (True as 1, 3.9 as 3)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def check_int(value, name: str, low: int) -> int:
    """``value``, or a ValueError naming ``name`` and the value."""
    if not is_int_at_least(value, low):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def check_seed(value, name: str = "seed") -> int:
    """A seed for graphloc's random kernels: a Python int in ``[0, 2^63)`` (the kernels take
    int64; a larger one failed in torch's argument parser, naming no argument)."""
    if not is_int_at_least(value, 0) or value >= 2**63:
        raise ValueError(f"{name} must be an integer in [0, 2^63), got {value!r}")
    return value


def check_flags(owner: str, **flags) -> None:
    """Each option is True or False (a Python or NumPy bool, or the integers 0 and 1): a
    string such as "False" would read as true, and a tensor or list failed at the first
    call in words that name no argument."""
    for name, value in flags.items():
        numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in (
            "bool", "bool_")
        if not (isinstance(value, bool) or numpy_bool or (type(value) is int and
                                                           value in (0, 1))):
            raise TypeError(f"{owner}: {name} must be True or False, got {value!r}")


def check_dataloader_flags(owner: str, kwargs: dict) -> None:
    """``check_flags`` for the options a loader passes on to torch's DataLoader, which
    reads any truthy value (``shuffle="False"`` shuffled)."""
    check_flags(owner, **{key: kwargs[key] for key in ("shuffle", "drop_last") if key in kwargs})


def check_number(owner: str, name: str, value) -> None:
    """A finite real number (an initial temperature, power, slope or epsilon), not a bool
    or tensor: a tensor or string failed later, in torch's words, naming no argument, and
    NaN or inf gave NaN outputs without a word."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}: {name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{owner}: {name} must be a finite number, got {value!r}")


def check_text(owner: str, name: str, value, path: bool = False) -> None:
    """A name (a ``str``), or with ``path`` a file path (``str`` or ``os.PathLike``): other
    values failed later in ``.lower()`` or ``os.path.join``, naming no argument."""
    if not isinstance(value, str) and not (path and isinstance(value, os.PathLike)):
        kind = "a path" if path else "a name (str)"
        raise TypeError(f"{owner}: {name} must be {kind}, got {type(value).__name__}")


def check_choice(owner: str, name: str, value, choices) -> None:
    """``value`` one of ``choices`` (names, or None where it is one): a list or dict failed
    in the membership test ("unhashable type"), naming no argument."""
    hashable = value is None or isinstance(value, (str, int, float))
    if not hashable or value not in choices:
        listed = sorted(choices, key=str)
        raise ValueError(f"{owner}: {name} must be one of {listed}, got {value!r}")


def keyword_arguments(owner: str, name: str, value) -> dict:
    """A dict of keyword arguments (``aggr_kwargs``, ``act_kwargs``), None for none."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{owner}: {name} must be a dict of keyword arguments, got "
                        f"{value!r}")
    return dict(value)


_INDEX_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)


def long_edge_index(edge_index: torch.Tensor, name: str = "edge_index") -> torch.Tensor:
    """An integer ``[2, E]`` index as int64, whatever its integer dtype. A uint64 id of
    2^63 or more is refused by its value: int64 would wrap it to a negative id, and the
    range checks would then report a number the caller never passed."""
    if edge_index.dtype != torch.uint64:
        return edge_index.long()
    signed = edge_index.view(torch.int64)
    if signed.numel() and bool((signed < 0).any()):
        row, col = (int(i) for i in (signed < 0).nonzero()[0])
        raise ValueError(f"{name}[{row}] holds {int(signed[row, col]) % 2**64} at column "
                         f"{col}, beyond any node count (node ids are int64)")
    return signed.clone()


def caller_stacklevel() -> int:
    """The ``stacklevel`` at which ``warnings.warn``, called by the function that calls
    this, names the first frame outside graphloc and torch: a layer's warning then points
    at the user's call, through ``Module.__call__`` and any helpers."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame, level = frame.f_back, level + 1
    return level


def physical_memory_bytes() -> int | None:
    """This machine's physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits_in_memory(shape: tuple[int, ...], dtype: torch.dtype, argument: str) -> None:
    """An output of ``shape`` that ``argument`` sizes, refused by name when it exceeds the
    machine's memory: the allocator's own error names a byte count and no argument."""
    needed = math.prod(int(size) for size in shape) * dtype.itemsize
    memory = physical_memory_bytes()
    if memory is not None and needed > memory:
        raise ValueError(f"{argument} asks for a {list(shape)} {dtype} output of "
                         f"{needed / 2**30:,.1f} GiB, more than this machine's memory "
                         f"({memory / 2**30:,.1f} GiB)")


def check_index(index, dim_size: int, name: str) -> None:
    """An integer tensor whose values lie in ``[0, dim_size)``; errors name ``name`` and the
    offending value. While torch.compile traces, the values cannot be read: the range check
    is an assertion in the compiled graph, which names the range but not the value."""
    if not isinstance(index, torch.Tensor) or index.dtype not in _INDEX_DTYPES:
        got = index.dtype if isinstance(index, torch.Tensor) else type(index).__name__
        raise TypeError(f"{name} must be an integer tensor (int8, int16, int32, int64 or "
                        f"uint8), got {got}")
    if torch.compiler.is_compiling():  # before numel(): a masked index's size is unknown
        unbounded = dim_size >= 2**63 - 1  # (a check of the sign alone)
        torch._assert_async(((index >= 0) & (index < dim_size)).all(),
                            f"{name} holds a negative index; indices must be >= 0" if unbounded
                            else f"{name} holds an index outside [0, {dim_size})")
        return
    if index.numel() == 0:
        return
    low, high = torch.aminmax(index)
    if low < 0:
        raise ValueError(f"{name} holds {int(low)}; indices must be >= 0")
    if high >= dim_size:
        raise ValueError(f"{name} holds {int(high)} but dim_size is {dim_size} (indices "
                         f"must lie in [0, {dim_size}))")


def check_batch_vector(batch, n: int, owner: str, device=None) -> torch.Tensor:
    """PyG's ``batch`` vector: one graph id (>= 0) per node of ``n``, as int64; None means
    one graph (all zeros)."""
    if batch is None:
        return torch.zeros(n, dtype=torch.long, device=device)
    if not isinstance(batch, torch.Tensor) or batch.dim() != 1 or batch.numel() != n:
        got = list(batch.shape) if isinstance(batch, torch.Tensor) else type(batch).__name__
        raise ValueError(f"{owner}: batch must be [N] = [{n}] (a graph id per node), "
                         f"got {got}")
    check_index(batch, 2**63 - 1, "batch")
    return batch.long()


def whole_numbers(t: torch.Tensor, what: str) -> torch.Tensor:
    """``t`` as int64; floats only when they are whole numbers (a cast would silently
    truncate 0.5 to 0)."""
    if t.is_floating_point():
        fractional = ~torch.isfinite(t) | (t != t.round())
        if fractional.any():
            at = int(fractional.view(-1).nonzero()[0])
            raise ValueError(f"{what} must hold whole numbers (class or node ids), but entry "
                             f"{at} is {float(t.view(-1)[at])}")
    return t.long()


def refuse_integer_mask(ids: torch.Tensor, name: str, num_nodes: int,
                        masks_accepted: bool = False) -> None:
    """Node ids that are exactly ``num_nodes`` zeros and ones (at least 3 nodes) are a mask
    held in an integer dtype (uint8 was torch's mask type, and a mask of 0/1 integers is a
    common export): read as ids they would name nodes 0 and 1 over and over, a quietly
    different set of nodes. Refused, saying how to pass it."""
    if ids.dtype == torch.bool or ids.dim() != 1 or ids.numel() != num_nodes or num_nodes < 3:
        return
    if bool(((ids == 0) | (ids == 1)).all()):
        also = " or the mask as a bool tensor" if masks_accepted else ""
        raise ValueError(f"{name} holds only 0s and 1s, one per node of the {num_nodes}: a "
                         f"mask stored as {ids.dtype}. Read as node ids it would name nodes 0 "
                         f"and 1 over and over; pass the ids of its 1s "
                         f"(mask.nonzero().flatten()){also}")


def first_repeated(ids: torch.Tensor) -> int | None:
    """The smallest id that ``ids`` (1-D) holds more than once, or None."""
    if ids.numel() < 2:
        return None
    ordered = ids.sort().values
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    return int(repeated[0]) if repeated.numel() else None


def sampling_weights(weight: torch.Tensor, name: str, position: str) -> torch.Tensor:
    """``weight`` as float64 on the CPU, refused unless it holds real numbers that are finite
    and >= 0 (the first bad one is named with its ``position``, e.g. "edge 3")."""
    if weight.dtype == torch.bool or weight.is_complex():
        raise TypeError(f"{name} must be real numbers, got {weight.dtype}")
    weight = weight.detach().cpu().double()
    bad = ~(torch.isfinite(weight) & (weight >= 0))
    if bool(bad.any()):
        e = int(bad.nonzero()[0])
        raise ValueError(f"{name} must be finite and >= 0, got {weight[e].item()} at "
                         f"{position} {e}")
    return weight


def pyg_keys(store) -> set[str]:
    """The attribute names of a PyG Data or storage (``keys`` is a method since PyG 2.4,
    an attribute before), or none for an object without them."""
    keys = getattr(store, "keys", None)
    if keys is None:
        return set()
    return set(map(str, keys() if callable(keys) else keys))
