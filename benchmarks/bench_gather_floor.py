"""Gather floor of the machine: how fast any kernel can sum the rows an spmm gathers.

A sum spmm reads, for every edge j -> i, the row x[j] at random. This benchmark times a
bare gather of the same rows in the same order (``out[i] = sum of x[j]``, no weights, no
checks, AVX-512 or the compiler's vectors, streaming stores), compiled here with the system
C compiler, under several prefetch schemes, and takes the fastest. Against it: graphloc's
``ops.spmm`` on the same buffer, in turns in one process. Both run on the same ``x``, once
on 4 KiB pages and once on 2 MiB (transparent huge) pages, since on some machines the
page walks of random row reads cost as much as the reads.

graphloc's spmm at the bare gather's time means the sparse part of a layer is set by the
machine's random-read rate, and the layer's share of its dense bound cannot rise above
dense floor / (dense floor + its sparse time at that rate).

    python benchmarks/bench_gather_floor.py [--channels 64] [--turns 15]

Needs a C compiler with OpenMP (``cc -fopenmp``) and Linux (``mmap``, ``madvise``).
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from graphs import power_law, road_like  # noqa: E402

from graphloc import Graph, ops  # noqa: E402
from graphloc.memory import retain_freed_memory  # noqa: E402

# One kernel per prefetch scheme: every line of the row or every other one (the adjacent-line
# prefetcher fetching the rest), `distance` edges ahead. Rows of CHANNELS floats.
_SOURCE = r"""
#include <stdint.h>
#include <immintrin.h>
#include <omp.h>
typedef float block __attribute__((vector_size(64)));  /* 16 floats: one zmm, or two ymm */
enum { BLOCKS = CHANNELS / 16 };
static int threads = 1;
static inline void store(block* to, block value) {
#ifdef __AVX512F__
  _mm512_stream_ps((float*)to, (__m512)value);  /* the output is not read back */
#else
  *to = value;
#endif
}
void set_threads(int count) { threads = count; }
/* The first row of thread t's share: the rows split at equal edge counts. */
static int64_t first_row(const int32_t* indptr, int64_t rows, int t) {
  const int64_t target = (int64_t)indptr[rows] * t / threads;
  int64_t lo = 0, hi = rows;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (indptr[mid] < target) lo = mid + 1; else hi = mid;
  }
  return lo;
}
#define KERNEL(NAME, STEP)                                                                   \
void NAME(const int32_t* indptr, const int32_t* idx, int64_t rows, const float* x,          \
          float* out, int64_t distance) {                                                   \
  _Pragma("omp parallel num_threads(threads)")                                              \
  {                                                                                         \
    const int t = omp_get_thread_num();                                                     \
    const int64_t r0 = first_row(indptr, rows, t), r1 = first_row(indptr, rows, t + 1);    \
    const int64_t end = indptr[r1];                                                         \
    for (int64_t i = r0; i < r1; ++i) {                                                     \
      block acc[BLOCKS] = {0};                                                              \
      for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {                                 \
        if (STEP && e + distance < end) {                                                   \
          const char* p = (const char*)(x + (int64_t)idx[e + distance] * CHANNELS);         \
          for (int o = 0; o < CHANNELS * 4; o += STEP) _mm_prefetch(p + o, _MM_HINT_T0);    \
        }                                                                                   \
        const block* r = (const block*)(x + (int64_t)idx[e] * CHANNELS);                    \
        for (int k = 0; k < BLOCKS; ++k) acc[k] += r[k];                                    \
      }                                                                                     \
      block* o = (block*)(out + i * CHANNELS);                                              \
      for (int k = 0; k < BLOCKS; ++k) store(o + k, acc[k]);                                \
    }                                                                                       \
  }                                                                                         \
}
KERNEL(gather_no_prefetch, 0)
KERNEL(gather_every_line, 64)
KERNEL(gather_every_other_line, 128)
"""
_SCHEMES = ("gather_no_prefetch", "gather_every_line", "gather_every_other_line")
_DISTANCES = (16, 32, 64)


def compile_kernels(channels: int) -> ctypes.CDLL:
    folder = tempfile.mkdtemp(prefix="gather_floor_")
    source, library = os.path.join(folder, "gather.c"), os.path.join(folder, "gather.so")
    with open(source, "w") as f:
        f.write(_SOURCE)
    subprocess.run([os.environ.get("CC", "cc"), "-O3", "-march=native", "-fopenmp", "-shared",
                    "-fPIC", f"-DCHANNELS={channels}", source, "-o", library], check=True)
    os.environ["OMP_WAIT_POLICY"] = "passive"  # its threads sleep between calls, not spin
    lib = ctypes.CDLL(library)
    lib.set_threads.argtypes = [ctypes.c_int]
    for name in _SCHEMES:
        getattr(lib, name).argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64] + \
            [ctypes.c_void_p] * 2 + [ctypes.c_int64]
    return lib


def paged_buffer(num_floats: int, huge: bool) -> torch.Tensor:
    """A fresh anonymous mapping advised onto 2 MiB or 4 KiB pages before its first
    touch, as a float tensor (which keeps the mapping alive)."""
    size = -(-num_floats * 4 // (1 << 21)) * (1 << 21)
    area = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    area.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    tensor = torch.frombuffer(area, dtype=torch.float32, count=num_floats)
    tensor.copy_(torch.randn(num_floats))
    return tensor


def huge_page_share(tensor: torch.Tensor) -> float:
    """The share of the mapping holding ``tensor`` that is backed by huge pages
    (/proc/self/smaps), to confirm what the advice got."""
    address, inside = tensor.data_ptr(), False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                begin, end = (int(v, 16) for v in head.split("-"))
                inside = begin <= address < end
                size_kb = (end - begin) / 1024
            elif inside and head == "AnonHugePages:":
                return int(line.split()[1]) / size_kb
    return 0.0


def with_loops(graph: Graph) -> Graph:
    loops = torch.arange(graph.num_nodes)
    return Graph(torch.cat([graph.edge_index, torch.stack([loops, loops])], 1),
                 num_nodes=graph.num_nodes)


def _label(key) -> str:
    if key == "spmm":
        return "graphloc spmm"
    scheme, distance = key
    scheme = scheme.removeprefix("gather_").replace("_", " ")
    return f"{scheme}, {distance} edges ahead" if distance else scheme


def measure(lib, graph: Graph, channels: int, turns: int, huge: bool) -> dict:
    n = graph.num_nodes
    csr = graph.csr
    indptr, indices = csr.indptr.int().contiguous(), csr.indices.int().contiguous()
    x = paged_buffer(n * channels, huge).view(n, channels)
    out = torch.empty(n, channels)
    # graphloc's own scheme on this machine: every line, 8 KiB of rows ahead (rows.h; 16 KiB
    # and non-temporal on AMD, which this kernel does not reproduce)
    ours = ("gather_every_line", min(max(8192 // (channels * 4), 16), 256))
    distances = sorted({*_DISTANCES, ours[1]})
    bare = {(s, d): (lambda s=s, d=d: getattr(lib, s)(
        indptr.data_ptr(), indices.data_ptr(), n, x.data_ptr(), out.data_ptr(), d))
        for s in _SCHEMES for d in (distances if s != "gather_no_prefetch" else (0,))}

    def spmm():
        with torch.no_grad():
            ops.spmm(graph, x)
    runs = {"spmm": spmm, **bare}
    times = {key: [] for key in runs}
    for run in runs.values():
        run(), run()
    keys = list(runs)
    for turn in range(turns):  # every variant once per turn, the order rotating
        for key in keys[turn % len(keys):] + keys[:turn % len(keys)]:
            start = time.perf_counter()
            runs[key]()
            times[key].append((time.perf_counter() - start) * 1e3)
    med = {key: statistics.median(ts) for key, ts in times.items()}
    best = min((k for k in med if k != "spmm"), key=med.get)
    print("  medians (ms):", ", ".join(f"{_label(k)} {v:.2f}" for k, v in med.items()),
          flush=True)
    check = torch.zeros_like(out)
    bare[best]()
    check.copy_(out)
    with torch.no_grad():
        assert torch.allclose(ops.spmm(graph, x), check, rtol=1e-4, atol=1e-3)
    return {"spmm ms": med["spmm"], "bare gather ms": med[best], "best scheme": _label(best),
            "bare, same scheme ms": med[ours], "spmm / bare": med["spmm"] / med[best],
            "share on huge pages": huge_page_share(x)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--turns", type=int, default=15)
    args = parser.parse_args()
    if args.channels <= 0 or args.channels % 16:
        parser.error(f"--channels must be a positive multiple of 16, got {args.channels}")
    torch.set_num_threads(2)
    retain_freed_memory()
    lib = compile_kernels(args.channels)
    lib.set_threads(2)
    rows = []
    for name, make in (("road", road_like), ("power-law", power_law)):
        graph = with_loops(make())
        for huge in (False, True):
            print(name, "on 2 MiB pages" if huge else "on 4 KiB pages", flush=True)
            res = measure(lib, graph, args.channels, args.turns, huge)
            rows.append((name, "2 MiB" if huge else "4 KiB", res))
    lines = ["| graph | pages of x (share on huge pages) | graphloc spmm ms | bare gather, "
             "graphloc's scheme ms | fastest bare gather ms | spmm / fastest | fastest scheme |",
             "|---|---|---:|---:|---:|---:|---|"]
    lines += [f"| {g} | {p} ({r['share on huge pages']:.0%}) | {r['spmm ms']:.1f} | "
              f"{r['bare, same scheme ms']:.1f} | {r['bare gather ms']:.1f} | "
              f"{r['spmm / bare']:.2f} | {r['best scheme']} |" for g, p, r in rows]
    table = "\n".join(lines)
    print(table)


if __name__ == "__main__":
    main()
