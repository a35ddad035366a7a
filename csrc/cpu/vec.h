// Fixed-width vectors through GCC's vector extensions, for loops GCC does not vectorise on
// its own (many register accumulators next to in-place stores). They compile to the
// target's widest registers (AVX-512 here) and split into narrower ones elsewhere.
#pragma once

#include <cstring>
#include <utility>

namespace graphloc {

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

}  // namespace graphloc
