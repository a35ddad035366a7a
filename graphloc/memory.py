"""Freed memory kept by the process for reuse: glibc's malloc otherwise returns every block
above its mmap threshold (at most 32 MB by default) to the operating system when it is
freed, and the next tensor of that size is faulted in and zeroed by the kernel again, page
by page. Full-graph training allocates and frees such tensors many times per step (a
[200,000, 64] float32 activation is 51 MB).

Measured (2026-12-03, AMD EPYC, 2 threads, torch 2.13.0+cpu): a 16-layer ``LiftGCN``
training step on the 200,000-node road benchmark graph took 12.8 s as the process starts
and 3.5 s after ``retain_freed_memory()`` (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_LARGEST = 2**31 - 1  # mallopt takes an int


def retain_freed_memory() -> bool:
    """Makes glibc's malloc serve every block from its heap and keep what is freed there
    for reuse, for the rest of the process (as the environment variables
    ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` do when set at its start).
    Tensors allocated afterwards reuse freed memory instead of being faulted in again; the
    process's resident memory then stays near its peak instead of shrinking after it.

    The ``graphloc`` command calls it for its own runs; in your own scripts it is opt-in
    (it changes how the whole process allocates). Returns True where it took effect (Linux
    with glibc), False elsewhere, changing nothing there."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # no C library by that name, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # the trim threshold first: a raised mmap threshold alone would put big blocks on the
    # heap and still hand them back to the system at its top
    return bool(mallopt(_M_TRIM_THRESHOLD, _LARGEST)) and \
        bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST))
