"""Drop-in replacement for the deprecated ``torch_scatter`` package, on graphloc's kernels.

``from graphloc.scatter import scatter, scatter_max, segment_csr`` wherever code imported
them from torch_scatter: same signatures and return values, deterministic, parallel on CPU.
"""

from graphloc.ops.scatter import (
    gather_csr,
    scatter,
    scatter_add,
    scatter_log_softmax,
    scatter_max,
    scatter_mean,
    scatter_min,
    scatter_softmax,
    scatter_sum,
    segment_csr,
)

__all__ = ["scatter", "scatter_sum", "scatter_add", "scatter_mean", "scatter_max",
           "scatter_min", "segment_csr", "gather_csr", "scatter_softmax", "scatter_log_softmax"]
