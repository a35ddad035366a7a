// Work split for pull-based CSR kernels: one thread owns whole rows (no atomics, and the
// result of a row never depends on the thread count), and rows are cut into chunks of
// equal cost = nonzeros + rows, found by binary search on the monotone indptr[r] + r.
// Threads claim chunks as they finish: equal cost is not equal time (hub rows come back
// from the cache, rows of degree 1 run their per-row overhead), and a static split left
// one of two threads waiting at the end (libgomp spinning in 4% to 8% of the samples of
// the attention and softmax kernels on the power-law graph).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cpu/stream.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace graphloc {

template <typename index_t, typename F>
void parallel_rows(const index_t* indptr, int64_t num_rows, F&& body) {
  if (num_rows == 0) return;
  const int64_t total = static_cast<int64_t>(indptr[num_rows]) + num_rows;
  constexpr int64_t kMinCost = 1 << 14;  // below this a chunk is not worth a thread
  constexpr int64_t kChunksPerThread = 16;
  const int64_t threads = at::get_num_threads();
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(threads * kChunksPerThread, total / kMinCost));
  auto boundary = [&](int64_t c) -> int64_t {
    if (c >= chunks) return num_rows;
    const int64_t target = total * c / chunks;
    int64_t lo = 0, hi = num_rows;  // first row r with indptr[r] + r >= target
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (static_cast<int64_t>(indptr[mid]) + mid < target)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  std::atomic<int64_t> next{0};
  at::parallel_for(0, std::min(threads, chunks), 1, [&](int64_t, int64_t) {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      const int64_t r0 = boundary(c), r1 = boundary(c + 1);
      if (r0 < r1) body(r0, r1);
    }
    fence_streaming_stores();  // bodies may write through store_row
  });
}

// Whether any of the n values is inf or NaN: v - v is 0 for a finite v and NaN otherwise,
// summed as a vectorised reduction (a bool or-reduction ran as a scalar loop). The
// softmax-weighted kernels check their rows with it, as a p-weighted sum can overflow
// before its division by the sum of the weights.
template <typename acc_t>
inline bool any_non_finite(const acc_t* v, int64_t n) {
  acc_t probe = 0;
#pragma omp simd reduction(+ : probe)
  for (int64_t k = 0; k < n; ++k) probe += v[k] - v[k];
  return probe != acc_t(0);
}

// Prefetch a whole feature row (all its cache lines) ahead of use: gathers of random
// neighbour rows are latency-bound, the hardware prefetcher only helps within a row.
//
// The hint depends on the processor. On AMD's Zen, rows are prefetched non-temporally
// (prefetchnta): lines fetched so skip the outer caches on eviction, so rows read once do not
// push out the rows that are reused (the hubs of a power-law graph); measured 2026-12-03 on
// an EPYC against prefetcht2, paired in one process: the power-law GCNConv step 0.95x, the
// power-law sddmm forward + backward 0.37x, the road graph within noise (RESULTS.md). On an
// Intel Xeon the same hint left the rows out of reach: the power-law spmm forward took 41 ms
// with prefetchnta and 13 to 15 ms with prefetcht0, the road graph's 21 and 5 to 6 ms, GAT's
// attention forward + backward 180 and 87 ms (F = 64, 2026-12-03, RESULTS.md), so elsewhere
// rows are prefetched into every cache level (t0).
inline const bool kNonTemporalPrefetch = [] {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") != 0;
#else
  return false;
#endif
}();

// Bytes of gathered rows in flight ahead of use: the rows of the edges (or transpose
// entries) that many bytes on are prefetched, which hides the latency of rows gathered at
// random. A budget in bytes rather than a fixed count of edges: the best count measured
// fell as the rows widened (spmm sum, 2026-12-03 on an EPYC, paired in one process: at
// 64-byte rows 128 to 192 edges, at 256-byte rows 64 to 96, at 1 KiB rows 16 to 32; about
// 16 KiB each time, a third of the 48 KiB L1). The fixed 32 edges used before cost 15% to 25%
// of the power-law spmm at F = 64 there. With prefetcht0 (every processor but AMD's, above)
// half of that: on an Intel Xeon, paired in one process at 256-byte rows, 8 KiB against
// 16 KiB took the power-law spmm forward 0.82x to 0.84x, its forward + backward 0.97x to
// 0.99x and GAT's attention forward + backward 0.96x to 0.97x, the road graph's 0.96x to
// 0.99x; 4 KiB gave the attention 0.94x to 0.95x but the spmm forward + backward 1.00x to
// 1.02x (RESULTS.md, 2026-12-03).
inline int64_t prefetch_bytes() {
  return kNonTemporalPrefetch ? int64_t(16) << 10 : int64_t(8) << 10;
}

// The prefetch distance in edges for gathered rows of row_bytes bytes: prefetch_bytes() of
// rows, at least 16 edges (wide rows: enough to cover the latency) and at most 256 (narrow
// rows: the index reads ahead stay in L1).
inline int64_t prefetch_distance(int64_t row_bytes) {
  return std::clamp<int64_t>(prefetch_bytes() / std::max<int64_t>(row_bytes, 1), 16, 256);
}

// prefetch_distance for gathered rows of `channels` values of scalar_t.
template <typename scalar_t>
inline int64_t prefetch_distance_of(int64_t channels) {
  return prefetch_distance(channels * static_cast<int64_t>(sizeof(scalar_t)));
}

// The hint is chosen outside the loops: a trial that chose it per line (a switch inside the
// loop) compiled to no prefetch at all, which GCC does not warn about (count the prefetch
// instructions in the objects after changing these).
template <typename scalar_t>
inline void prefetch_row(const scalar_t* row, int64_t channels) {
  const char* p = reinterpret_cast<const char*>(row);
  const int64_t bytes = channels * static_cast<int64_t>(sizeof(scalar_t));
  if (kNonTemporalPrefetch) {
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 0);
  } else {
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
  }
}

// prefetch_row in straight-line code for rows of up to four cache lines (64 floats), a loop
// after: in spmm's vectorised sum the loop of prefetch_row cost 8% to 15% at F = 64
// (measured 2026-12-03). The other kernels keep prefetch_row: where GCC vectorises scalar
// accumulators itself these branches made it give up, and in the attention kernels the
// unrolled form measured no gain above the noise (RESULTS.md, 2026-12-03).
template <int locality>
__attribute__((always_inline)) inline void prefetch_lines(const char* p, int64_t bytes) {
  __builtin_prefetch(p, 0, locality);
  if (bytes > 64) __builtin_prefetch(p + 64, 0, locality);
  if (bytes > 128) __builtin_prefetch(p + 128, 0, locality);
  if (bytes > 192) __builtin_prefetch(p + 192, 0, locality);
  if (__builtin_expect(bytes > 256, 0))
    for (int64_t off = 256; off < bytes; off += 64) __builtin_prefetch(p + off, 0, locality);
}

template <typename scalar_t>
__attribute__((always_inline)) inline void prefetch_row_unrolled(const scalar_t* row,
                                                                 int64_t channels) {
  const char* p = reinterpret_cast<const char*>(row);
  const int64_t bytes = channels * static_cast<int64_t>(sizeof(scalar_t));
  if (kNonTemporalPrefetch)
    prefetch_lines<0>(p, bytes);
  else
    prefetch_lines<3>(p, bytes);
}

// The widest register tile that divides the channels of one head (0: none fits).
inline int tile_width(int64_t F) {
  for (int t : {64, 32, 16, 8})
    if (F % t == 0) return t;
  return 0;
}

// Calls body(std::integral_constant<int, V>) with V = value when value is one of Values,
// else with V = 0: kernels that keep per-lane or per-head values in registers need their
// count at compile time, and fall back to a run-time loop for the others.
template <int... Values, typename F>
inline void with_constant(int64_t value, F&& body) {
  const bool matched =
      ((value == Values ? (body(std::integral_constant<int, Values>{}), true) : false) || ...);
  if (!matched) body(std::integral_constant<int, 0>{});
}

// The width a kernel instantiated by with_constant loops over: its constant CT where one
// matched (a fixed trip count), else the run-time value.
template <int CT>
inline int64_t width_of(int64_t width) {
  return CT > 0 ? CT : width;
}

// body(std::integral_constant<int, T>) with T = tile_width(F) (0 when no tile fits).
template <typename F>
inline void with_tile(int64_t channels, F&& body) {
  with_constant<64, 32, 16, 8>(tile_width(channels), body);
}

// A fresh output tensor whose large interior is backed by transparent huge pages. Outputs of
// N x F floats are written once by the kernel, and with 4 KiB pages the first-touch faults
// cost more than the kernel itself (51 MB: ~16 ms of faults vs ~5 ms of work on 2 cores).
// Advising before the first write makes the kernel fault in 2 MiB pages instead.
inline at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor out = at::empty(sizes, options);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(out.data_ptr());
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + out.nbytes()) & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
  return out;
}

// Rows of a [rows, C] tensor whose rows are contiguous, `stride` values apart.
template <typename scalar_t>
struct Rows {
  const scalar_t* data;
  int64_t stride;
  const scalar_t* operator[](int64_t r) const { return data + r * stride; }
};

// The rows of t, a [rows, C] tensor from with_contiguous_rows (or contiguous).
template <typename scalar_t>
Rows<scalar_t> rows_of(const at::Tensor& t) {
  return {t.data_ptr<scalar_t>(), t.stride(0)};
}

// t itself where its rows are contiguous (the channels one value apart, as in a column slice
// of a wider tensor: FiLM's beta and gamma, split from one product), else a contiguous copy.
inline at::Tensor with_contiguous_rows(const at::Tensor& t) {
  return t.dim() == 2 && (t.stride(1) == 1 || t.size(1) <= 1) && t.stride(0) >= t.size(1)
             ? t
             : t.contiguous();
}

// Row r's entries k of a CSR (ptr, idx): edge(rows[idx[k]]...), the row of each tensor in
// `rows` at the other end of the entry, those `distance` entries ahead prefetched (up to
// ahead_end, the thread's chunk's end). For the kernels whose per-edge work reads rows of
// several node tensors at the far end (gated_sum, film_sum).
template <typename scalar_t, typename index_t, typename Edge, typename... Tensors>
__attribute__((always_inline)) inline void for_each_entry(const index_t* ptr, const index_t* idx,
                                                          int64_t r, int64_t ahead_end,
                                                          int64_t distance, int64_t C, Edge&& edge,
                                                          Rows<scalar_t> first, Tensors... rest) {
  for (int64_t k = ptr[r]; k < ptr[r + 1]; ++k) {
    if (k < ahead_end) {
      const int64_t ahead = idx[k + distance];
      prefetch_row(first[ahead], C);
      (prefetch_row(rest[ahead], C), ...);
    }
    const int64_t other = idx[k];
    edge(first[other], rest[other]...);
  }
}

}  // namespace graphloc
