// Streaming (non-temporal) stores for [N, K] outputs too large to stay in the cache. A plain
// store first reads the line it writes (read for ownership): for an output written once,
// row by row, that read is wasted bandwidth, which the gathers of the same kernel need.
// Measured 2026-12-02 (spmm at F = 64, 2 threads): the road graph's product 14% faster, the
// power-law graph's 5%. Outputs that fit in the cache are stored plainly, so that the next
// op finds them there.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace graphloc {

// Outputs of at least this many bytes are streamed: half of the 32 MiB L3 of the benchmark
// machine's core complex (sysconf reports the whole socket's there), which the kernel's
// inputs share with the output.
constexpr int64_t kStreamBytes = int64_t(16) << 20;

inline bool streams_output(int64_t bytes) { return bytes >= kStreamBytes; }

// to[0, n) = from[0, n): through streaming stores when `stream` is set, A is float or double,
// and `to` starts a cache line (n * sizeof(A) a multiple of 64, checked by the callers'
// tiles); a plain copy otherwise. The stores are weakly ordered: parallel_rows fences each
// chunk before its threads join.
template <typename A>
inline void store_row(A* to, const A* from, int64_t n, bool stream) {
#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)
  constexpr bool kStreamable = std::is_same_v<A, float> || std::is_same_v<A, double>;
  if constexpr (kStreamable) {
    if (stream && reinterpret_cast<uintptr_t>(to) % 64 == 0 && (n * sizeof(A)) % 64 == 0) {
      for (int64_t k = 0; k < n; k += 64 / sizeof(A)) {
        if constexpr (std::is_same_v<A, float>) {
#if defined(__AVX512F__)
          _mm512_stream_ps(to + k, _mm512_loadu_ps(from + k));
#elif defined(__AVX__)
          _mm256_stream_ps(to + k, _mm256_loadu_ps(from + k));
          _mm256_stream_ps(to + k + 8, _mm256_loadu_ps(from + k + 8));
#else
          for (int q = 0; q < 16; q += 4) _mm_stream_ps(to + k + q, _mm_loadu_ps(from + k + q));
#endif
        } else {
#if defined(__AVX512F__)
          _mm512_stream_pd(to + k, _mm512_loadu_pd(from + k));
#elif defined(__AVX__)
          _mm256_stream_pd(to + k, _mm256_loadu_pd(from + k));
          _mm256_stream_pd(to + k + 4, _mm256_loadu_pd(from + k + 4));
#else
          for (int q = 0; q < 8; q += 2) _mm_stream_pd(to + k + q, _mm_loadu_pd(from + k + q));
#endif
        }
      }
      return;
    }
  }
#endif
  std::memcpy(to, from, n * sizeof(A));
}

// Orders this thread's streaming stores before what follows (the join of its threads).
inline void fence_streaming_stores() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace graphloc
