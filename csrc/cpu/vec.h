// Fixed-width vectors through GCC's vector extensions, for loops GCC does not vectorise on
// its own (many register accumulators next to in-place stores). They compile to the
// target's widest registers (AVX-512 here) and split into narrower ones elsewhere.
#pragma once

#include <cstring>
#include <utility>

namespace graphloc {

// The widest vector register's bytes on the target.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

// T lanes of A.
template <typename A, int T>
struct Vec {
  typedef A type __attribute__((vector_size(T * sizeof(A))));
};

template <typename A, int T>
inline typename Vec<A, T>::type load_vec(const A* p) {
  typename Vec<A, T>::type v;
  std::memcpy(&v, p, sizeof(v));  // an unaligned load
  return v;
}

template <typename A, int T>
inline void store_vec(A* p, typename Vec<A, T>::type v) {
  std::memcpy(p, &v, sizeof(v));
}

template <typename V, std::size_t... I>
inline auto low_half(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, I...);
}

template <typename V, std::size_t... I>
inline auto high_half(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, (I + sizeof...(I))...);
}

// The sum of the N lanes of v (N a power of 2), halving in registers: log2(N) adds.
template <int N, typename A, typename V>
inline A lane_sum(V v) {
  if constexpr (N == 1) {
    return v[0];
  } else {
    constexpr auto half = std::make_index_sequence<N / 2>{};
    return lane_sum<N / 2, A>(low_half(v, half) + high_half(v, half));
  }
}

// The source lane of lane I when two vectors of N lanes, each in blocks of B lanes, are
// folded into one: each block summed with itself halved (the first half's lane, or with
// `high` the second half's), a's blocks in the first N / 2 lanes, b's in the last.
constexpr int folded_pair_lane(int I, int N, int B, bool high) {
  const int half = B / 2, from_b = I >= N / 2 ? 1 : 0, lane = I - from_b * (N / 2);
  return from_b * N + lane / half * B + (high ? half : 0) + lane % half;
}

template <int N, int B, typename V, std::size_t... I>
inline V fold_pair(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, folded_pair_lane(I, N, B, false)...) +
         __builtin_shufflevector(a, b, folded_pair_lane(I, N, B, true)...);
}

// One vector of N lanes in which v[g]'s partial sums hold lanes [g * N / G, (g + 1) * N / G).
template <int G, int N, typename V>
inline V head_blocks(const V* v) {
  if constexpr (G == 1) {
    return v[0];
  } else {
    return fold_pair<N, 2 * N / G>(head_blocks<G / 2, N>(v), head_blocks<G / 2, N>(v + G / 2),
                                   std::make_index_sequence<N>{});
  }
}

// Blocks of B lanes folded to blocks of B / 2 (a vector half as long).
template <int B, typename V, std::size_t... I>
inline auto fold_blocks(V v, std::index_sequence<I...>) {
  constexpr int half = B / 2;
  return __builtin_shufflevector(v, v,
                                 (static_cast<int>(I) / half * B + static_cast<int>(I) % half)...) +
         __builtin_shufflevector(
             v, v, (static_cast<int>(I) / half * B + half + static_cast<int>(I) % half)...);
}

template <int G, int B, typename V>
inline auto blocks_to_lanes(V v) {
  if constexpr (B == 1) {
    return v;
  } else {
    return blocks_to_lanes<G, B / 2>(fold_blocks<B>(v, std::make_index_sequence<G * B / 2>{}));
  }
}

// The lane sums of G vectors of N lanes each (G, N powers of 2, G <= N) as one vector of G
// lanes: G - 1 pairwise folds and log2(N / G) folds of the blocks, each two shuffles and an
// add, instead of G separate log2(N)-step lane_sum chains and G scalars to gather after.
template <int G, int N, typename A, typename V>
inline typename Vec<A, G>::type lane_sums(const V* v) {
  return blocks_to_lanes<G, N / G>(head_blocks<G, N>(v));
}

}  // namespace graphloc
