// Per-head dot products of feature rows, vectorised: the attention kernels' score
// gradients and sddmm's dot. Heads of one register tile are summed several at a time.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cpu/rows.h"
#include "cpu/vec.h"

namespace graphloc {

// Heads per register sweep (attention's weighted_head_sum, head_dots): the most of 8, 4, 2 that
// divides H and fits 64 register lanes of T channels each; 1 otherwise.
inline int heads_per_sweep(int64_t H, int T) {
  for (int g : {8, 4, 2})
    if (T > 0 && H % g == 0 && g * T <= 64) return g;
  return 1;
}

// body(std::integral_constant<int, G>) with G = group (8, 4, 2, 1, or 0 for none), compiled
// only for the groups whose registers fit (G * T <= 64 lanes).
template <int T, typename F>
inline void with_heads_per_sweep(int group, F&& body) {
  with_constant<8, 4, 2, 1>(group, [&](auto per_sweep) {
    constexpr int G = decltype(per_sweep)::value;
    if constexpr (G <= 1 || (T > 0 && G * T <= 64)) body(per_sweep);
  });
}

// The sum of N lanes (a power of 2) as a tree of halvings, each into a fresh array: a chain
// of log2(N) dependent adds instead of N / 2, and no in-place halving, which made GCC 12
// spill the lanes to the stack. (The float/double hot path uses vec.h's lane_sum instead.)
template <int N, typename acc_t>
inline acc_t tree_sum(const acc_t* v) {
  if constexpr (N == 1) {
    return v[0];
  } else {
    acc_t half[N / 2];
#pragma GCC unroll 64
    for (int f = 0; f < N / 2; ++f) half[f] = v[f] + v[f + N / 2];
    return tree_sum<N / 2>(half);
  }
}

// <a, b> over one head's C channels, vectorised (the reduction may be reassociated).
// T > 0 (a tile width dividing C, known at compile time): T lanes of partial sums in
// registers; with C only known at run time GCC spilled the simd reduction to the stack.
// Float or double inputs with T at least a register's lanes: one register of partial sums
// and vec.h's lane_sum (GCC turned tree_sum's 64 lanes into about 60 scalar adds per call:
// sddmm's one-head F = 64 dot product took 30 ms on the power-law graph, 2026-12-03).
template <typename acc_t, int T = 0, typename a_t, typename b_t>
inline acc_t head_dot(const a_t* a, const b_t* b, int64_t C) {
  constexpr int kLanes = kVectorBytes / static_cast<int>(sizeof(acc_t));
  if constexpr (T >= kLanes && std::is_same_v<a_t, acc_t> && std::is_same_v<b_t, acc_t>) {
    using V = typename Vec<acc_t, kLanes>::type;
    V v = {};
    for (int64_t c = 0; c < C; c += kLanes)
      v += load_vec<acc_t, kLanes>(a + c) * load_vec<acc_t, kLanes>(b + c);
    return lane_sum<kLanes, acc_t>(v);
  } else if constexpr (T == 0) {
    acc_t dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < C; ++c) dot += static_cast<acc_t>(a[c]) * static_cast<acc_t>(b[c]);
    return dot;
  } else {
    acc_t v[T] = {};
    for (int64_t t0 = 0; t0 < C; t0 += T)
#pragma GCC unroll 64
      for (int f = 0; f < T; ++f)
        v[f] += static_cast<acc_t>(a[t0 + f]) * static_cast<acc_t>(b[t0 + f]);
    return tree_sum<T>(v);
  }
}

// <a_h, b_h> per head h of one row of H heads of C channels, into dots. group > 1 (float or
// double, a head one tile of T channels: heads_per_sweep): `group` heads' dot products
// summed jointly (lane_sums), as in the transpose sweep; else head by head.
template <int T, typename scalar_t, typename acc_t>
inline void head_dots(const scalar_t* a, const scalar_t* b, int64_t H, int64_t C, int group,
                      acc_t* dots) {
  with_heads_per_sweep<T>(group, [&](auto per_sweep) {
    constexpr int G = decltype(per_sweep)::value;
    if constexpr (G > 1 && T > 0 && std::is_same_v<scalar_t, acc_t>) {
      using V = typename Vec<acc_t, T>::type;
      for (int64_t h0 = 0; h0 < H; h0 += G) {
        V products[G];
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          products[g] = load_vec<acc_t, T>(a + (h0 + g) * T) * load_vec<acc_t, T>(b + (h0 + g) * T);
        store_vec<acc_t, G>(dots + h0, lane_sums<G, T, acc_t>(products));
      }
    } else {
      for (int64_t h = 0; h < H; ++h) dots[h] = head_dot<acc_t, T>(a + h * C, b + h * C, C);
    }
  });
}

}  // namespace graphloc
