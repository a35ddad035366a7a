"""Drop-in replacement for the deprecated ``torch_scatter`` package, on graphloc's kernels.

``from graphloc.scatter import scatter, scatter_max, segment_csr`` wherever code imported
them from torch_scatter: torch_scatter 2.1's whole public API, with its signatures, return
values, dtypes and index broadcasting; deterministic and parallel on CPU.
"""

from graphloc.ops.scatter import (
    gather_coo,
    gather_csr,
    scatter,
    scatter_add,
    scatter_log_softmax,
    scatter_logsumexp,
    scatter_max,
    scatter_mean,
    scatter_min,
    scatter_mul,
    scatter_softmax,
    scatter_std,
    scatter_sum,
    segment_add_coo,
    segment_add_csr,
    segment_coo,
    segment_csr,
    segment_max_coo,
    segment_max_csr,
    segment_mean_coo,
    segment_mean_csr,
    segment_min_coo,
    segment_min_csr,
    segment_sum_coo,
    segment_sum_csr,
)

__all__ = ["scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean",
           "scatter_max", "scatter_min", "scatter_std", "scatter_logsumexp",
           "scatter_softmax", "scatter_log_softmax",
           "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr",
           "segment_max_csr", "segment_min_csr", "gather_csr",
           "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
           "segment_max_coo", "segment_min_coo", "gather_coo"]
