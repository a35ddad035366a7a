"""GAT's fused attention (``ops.additive_attention``, 4 heads x 16, self-loops added)
against a plain sum ``spmm`` over the same edges, forward and backward, the two alternating
in one process. The ratio is the attention's cost over the gathers every kernel must make
(#22); run two builds in alternating processes (``PYTHONPATH`` at a copy of the package)
to compare kernels.

    python benchmarks/bench_attention_vs_spmm.py [road|power-law] [calls]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graphs import benchmark_graph  # noqa: E402

from graphloc import ops  # noqa: E402


def timed_step(forward, upstream) -> tuple[float, float]:
    """Seconds of ``forward()`` and of its backward with ``upstream``."""
    start = time.perf_counter()
    out = forward()
    middle = time.perf_counter()
    out.backward(upstream)
    return middle - start, time.perf_counter() - middle


def main(name: str = "road", calls: int = 15) -> None:
    graph = benchmark_graph(name).add_self_loops()
    n, heads, channels = graph.num_nodes, 4, 16
    torch.manual_seed(0)
    x = torch.randn(n, heads, channels, requires_grad=True)
    a_src = torch.randn(n, heads, requires_grad=True)
    a_dst = torch.randn(n, heads, requires_grad=True)
    rows = torch.randn(n, heads * channels, requires_grad=True)
    upstream = torch.randn(n, heads, channels)

    def attention():
        return timed_step(lambda: ops.additive_attention(graph, a_src, a_dst, x), upstream)

    def spmm():
        return timed_step(lambda: ops.spmm(graph, rows), upstream.reshape(n, -1))

    for _ in range(3):  # warm-up: page faults, the graph's cached transpose
        attention(), spmm()
    pairs = [(attention(), spmm()) for _ in range(calls)]
    att_f, att_b, sp_f, sp_b = (statistics.median(p[k][d] * 1e3 for p in pairs)
                                for k, d in ((0, 0), (0, 1), (1, 0), (1, 1)))
    print(f"{name}: attention forward {att_f:.1f} ms, backward {att_b:.1f} ms | spmm forward "
          f"{sp_f:.1f} ms, backward {sp_b:.1f} ms | ratios: forward {att_f / sp_f:.2f}, "
          f"backward {att_b / sp_b:.2f}, both {(att_f + att_b) / (sp_f + sp_b):.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "road",
         int(sys.argv[2]) if len(sys.argv) > 2 else 15)
