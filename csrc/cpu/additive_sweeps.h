// GAT's additive attention on its common layouts, H in {1, 2, 4, 8} heads of C channels that
// together fill one register sweep (C one tile, H * C <= 64 lanes; float or double): per
// edge, the H heads' scores and weights as one vector of H lanes, the H heads' rows in
// registers, and no pass over a block of scores. The forward keeps each row's shift (its
// max) and sum per head, from which the backward recomputes the forward's weights exactly
// (exp(score - shift) / sum) where it meets each edge, in one transpose sweep.
//
// Against the block kernels of attention.cpp (which the other layouts keep), on the road
// graph (200,000 nodes, 4 heads x 16, self-loops, 2 threads, the two builds in alternating
// processes, 2026-12-04): the op's forward 13.1 to 13.9 ms against 14.6 to 16.4, forward +
// backward 38.9 to 40.5 against 44.1 to 45.9, the GATConv step 95.8 to 97.5 against 100.0
// to 103.5. Per edge, the forward's loop computes the H weights with one exp of H lanes: a
// vectorised exp over a short row's 16 values runs mostly its scalar remainder (a per-row
// loop of exp_vec took a prototype of this kernel 12.4 ms, the per-edge vector 7.4 ms).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/fast_exp.h"
#include "cpu/head_dots.h"
#include "cpu/rows.h"
#include "cpu/vec.h"

namespace graphloc {

// Whether H heads of C channels of scalar_t take the register sweeps.
template <typename scalar_t>
inline bool additive_sweeps_fit(int64_t H, int64_t C) {
  if (!std::is_same_v<scalar_t, float> && !std::is_same_v<scalar_t, double>) return false;
  const int T = tile_width(C);
  return (H == 1 || H == 2 || H == 4 || H == 8) && T == C && heads_per_sweep(H, T) == H;
}

// body(std::integral_constant<int, H>, std::integral_constant<int, C>) for a layout that fits.
template <typename F>
inline void with_additive_layout(int64_t H, int64_t C, F&& body) {
  with_constant<1, 2, 4, 8>(H, [&](auto heads) {
    with_tile(C, [&](auto tile) {
      constexpr int HT = decltype(heads)::value, T = decltype(tile)::value;
      if constexpr (HT > 0 && T > 0 && HT * T <= 64) body(heads, tile);
    });
  });
}

// Lane-wise: where v > 0, v itself, else v * slope (the LeakyReLU), and its derivative as
// torch's leaky_relu_backward takes it (1 where v > 0, else the slope).
template <typename W, typename A>
inline W leaky(W v, A slope) {
  return v > A(0) ? v : v * slope;
}
template <typename W, typename A>
inline W leaky_slope(W v, A slope) {
  return v > A(0) ? W{} + A(1) : W{} + slope;
}

// The rows [r0, r1) of the forward whose output holds inf or NaN, again as the sum of the
// normalised weights' products, sum_e (exp(score - shift) / sum) x_e per head: where the sum
// of the exp-weighted rows overflowed before its division (each weight <= 1: values within
// a factor of the degree of the type's largest) while the softmax-weighted sum is finite, as
// the pure-torch twin and PyG form it; also where the inputs are not finite, whose
// normalised sum it gives. Taken for a chunk whose rows' probe fired (the forward checks a
// chunk, not each row: a check per row cost the forward up to a tenth).
template <int H, int T, typename A, typename index_t>
__attribute__((noinline)) void renormalise_rows(const index_t* indptr, const index_t* indices,
                                                const A* a_src, const A* a_dst, A slope, const A* x,
                                                int64_t r0, int64_t r1, A* out, const A* shift,
                                                const A* sum) {
  using W = typename Vec<A, H>::type;
  constexpr int64_t K = H * T;
  for (int64_t i = r0; i < r1; ++i) {
    A* row = out + i * K;
    if (!any_non_finite(row, K)) continue;
    const W d = load_vec<A, H>(a_dst + i * H), m = load_vec<A, H>(shift + i * H);
    const W total = load_vec<A, H>(sum + i * H);
    const W inverse = total == A(0) ? W{} : A(1) / total;
    std::fill(row, row + K, A(0));
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const A* xr = x + static_cast<int64_t>(indices[e]) * K;
      const W s = leaky(load_vec<A, H>(a_src + static_cast<int64_t>(indices[e]) * H) + d, slope);
      const W w = exp_lanes(s - m) * inverse;
      for (int g = 0; g < H; ++g)
        for (int f = 0; f < T; ++f) row[g * T + f] += w[g] * xr[g * T + f];
    }
  }
}

// Forward: out [rows, H * T], and per row and head its shift (the max score, 0 for a row
// without edges or whose scores are all -inf) and sum of exp(score - shift).
template <int H, int T, typename A, typename index_t>
void additive_forward_sweeps(const index_t* indptr, const index_t* indices, const A* a_src,
                             const A* a_dst, A slope, const A* x, int64_t num_rows, A* out,
                             A* shift, A* sum) {
  using W = typename Vec<A, H>::type;  // one lane per head
  using V = typename Vec<A, T>::type;  // one head's channels
  constexpr int64_t K = H * T;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const bool stream = streams_output(num_rows * K * static_cast<int64_t>(sizeof(A)));
  const int64_t distance = prefetch_distance_of<A>(K);
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    std::vector<W> scores;
    V probe = {};  // NaN in a lane where some output of the chunk is inf or NaN (v - v)
    const int64_t ahead_end = static_cast<int64_t>(indptr[r1]) - distance;
    for (int64_t i = r0; i < r1; ++i) {
      const int64_t begin = indptr[i], end = indptr[i + 1];
      if (end - begin > static_cast<int64_t>(scores.size())) scores.resize(end - begin);
      const W d = load_vec<A, H>(a_dst + i * H);
      W m = W{} + kNegInf;
      for (int64_t e = begin; e < end; ++e) {
        if (e < ahead_end) prefetch_row(a_src + static_cast<int64_t>(indices[e + distance]) * H, H);
        const W s = leaky(load_vec<A, H>(a_src + static_cast<int64_t>(indices[e]) * H) + d, slope);
        scores[e - begin] = s;
        m = s > m ? s : m;  // lane-wise; NaN never wins (its weight is NaN below)
      }
      m = m == kNegInf ? W{} : m;
      V acc[H] = {};
      W total = {};
      for (int64_t e = begin; e < end; ++e) {
        if (e < ahead_end)
          prefetch_row_unrolled(x + static_cast<int64_t>(indices[e + distance]) * K, K);
        const W w = exp_lanes(scores[e - begin] - m);
        total += w;
        const A* xr = x + static_cast<int64_t>(indices[e]) * K;
#pragma GCC unroll 8
        for (int g = 0; g < H; ++g) acc[g] += w[g] * load_vec<A, T>(xr + g * T);
      }
      const W inverse = total == A(0) ? W{} : A(1) / total;
      alignas(64) A row[K];
#pragma GCC unroll 8
      for (int g = 0; g < H; ++g) {
        const V v = acc[g] * inverse[g];
        probe += v - v;
        store_vec<A, T>(row + g * T, v);
      }
      store_row(out + i * K, row, K, stream);
      store_vec<A, H>(shift + i * H, m);
      store_vec<A, H>(sum + i * H, total);
    }
    if (lane_sum<T, A>(probe) != A(0))  // a sum overflowed, or the inputs are not finite
      renormalise_rows<H, T>(indptr, indices, a_src, a_dst, slope, x, r0, r1, out, shift, sum);
  });
}

// Backward, per row i: a record [a_dst_i, shift_i, 1 / sum_i, -<g_i, out_i>] of H lanes
// each, read in order here so that the sweep gathers one record per edge (a line for 4
// heads) instead of the rows of out.
template <int H, int T, typename A>
void additive_records(const A* a_dst, const A* shift, const A* sum, const A* grad, const A* out,
                      int64_t num_rows, A* records) {
  using W = typename Vec<A, H>::type;
  using V = typename Vec<A, T>::type;
  constexpr int64_t K = H * T;
  at::parallel_for(0, num_rows, 4096, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      V products[H];
#pragma GCC unroll 8
      for (int g = 0; g < H; ++g)
        products[g] = load_vec<A, T>(grad + i * K + g * T) * load_vec<A, T>(out + i * K + g * T);
      const W total = load_vec<A, H>(sum + i * H);
      A* record = records + i * 4 * H;
      store_vec<A, H>(record, load_vec<A, H>(a_dst + i * H));
      store_vec<A, H>(record + H, load_vec<A, H>(shift + i * H));
      store_vec<A, H>(record + 2 * H, total == A(0) ? W{} : A(1) / total);
      store_vec<A, H>(record + 3 * H, -lane_sums<H, T, A>(products));
    }
  });
}

// Backward, over the transpose: for source j and each edge e = (j -> i), the weight w_e
// recomputed from j's a_src and i's record, then
//   d x_j += w_e * g_i                                      (NeedX)
//   d pre_e = slope_e * w_e * (<g_i, x_j> - <g_i, out_i>)   (NeedScore)
// per head, d pre_e written to d_pre in CSR order (its sum over row i is d a_dst_i, the
// caller's pass) and summed over j's edges into d a_src_j.
template <bool NeedScore, bool NeedX, int H, int T, typename A, typename index_t>
void additive_transpose_sweeps(const index_t* csc_indptr, const index_t* csc_indices,
                               const index_t* csc_perm, const A* grad, const A* x, const A* a_src,
                               const A* records, A slope, int64_t num_src, A* d_pre, A* grad_x,
                               A* grad_a_src) {
  using W = typename Vec<A, H>::type;
  using V = typename Vec<A, T>::type;
  constexpr int64_t K = H * T, R = 4 * H;
  const bool stream = streams_output(num_src * K * static_cast<int64_t>(sizeof(A)));
  const int64_t distance = prefetch_distance_of<A>(K);
  parallel_rows(csc_indptr, num_src, [&](int64_t r0, int64_t r1) {
    const int64_t ahead_end = static_cast<int64_t>(csc_indptr[r1]) - distance;
    for (int64_t j = r0; j < r1; ++j) {
      V acc[H] = {}, xj[H];
      if constexpr (NeedScore)
#pragma GCC unroll 8
        for (int g = 0; g < H; ++g) xj[g] = load_vec<A, T>(x + j * K + g * T);
      const W source = load_vec<A, H>(a_src + j * H);
      W d_source = {};
      for (int64_t c = csc_indptr[j]; c < csc_indptr[j + 1]; ++c) {
        if (c < ahead_end) {
          const int64_t next = csc_indices[c + distance];
          prefetch_row_unrolled(grad + next * K, K);
          prefetch_row(records + next * R, R);
          if constexpr (NeedScore)
            __builtin_prefetch(d_pre + static_cast<int64_t>(csc_perm[c + distance]) * H, 1);
        }
        const int64_t i = csc_indices[c];
        const A* record = records + i * R;
        const W pre = source + load_vec<A, H>(record);
        const W w = exp_lanes(leaky(pre, slope) - load_vec<A, H>(record + H)) *
                    load_vec<A, H>(record + 2 * H);
        V g_rows[H], products[H];
#pragma GCC unroll 8
        for (int g = 0; g < H; ++g) {
          g_rows[g] = load_vec<A, T>(grad + i * K + g * T);
          if constexpr (NeedX) acc[g] += w[g] * g_rows[g];
          if constexpr (NeedScore) products[g] = g_rows[g] * xj[g];
        }
        if constexpr (NeedScore) {
          const W d = leaky_slope(pre, slope) * w *
                      (lane_sums<H, T, A>(products) + load_vec<A, H>(record + 3 * H));
          d_source += d;
          store_vec<A, H>(d_pre + static_cast<int64_t>(csc_perm[c]) * H, d);
        }
      }
      if constexpr (NeedX) {
        alignas(64) A row[K];
#pragma GCC unroll 8
        for (int g = 0; g < H; ++g) store_vec<A, T>(row + g * T, acc[g]);
        store_row(grad_x + j * K, row, K, stream);
      }
      if constexpr (NeedScore) store_vec<A, H>(grad_a_src + j * H, d_source);
    }
  });
}

}  // namespace graphloc
