// CPU kernels of segment_attention and additive_attention: per destination row and head, the
// softmax of the edge scores and the attention-weighted sum of the source rows in one pass
// over the rows, without any per-edge message tensor. segment_attention also returns the
// log-sum-exp per (row, head) for the backward, which recomputes the weights from it and
// renormalises each row; additive_attention (GAT's) returns each row's shift and sum per
// head (norm), and computes its scores leaky_relu(a_src[j] + a_dst[i]) where they are
// needed: no [E, H] scores forward or backward. Its common layouts (1, 2, 4 or 8 heads in one
// register sweep, float or double) run the kernels of additive_sweeps.h.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/ops.h"
#include "cpu/additive_sweeps.h"
#include "cpu/block_softmax.h"
#include "cpu/fast_exp.h"
#include "cpu/head_dots.h"
#include "cpu/rows.h"
#include "cpu/vec.h"

namespace graphloc {
namespace {

// if_true where `condition`, else if_false, chosen on the bits rather than by a jump: GCC
// branched on the signs of the scores, which are as good as random per edge and head (a
// mispredicted jump on about every second one: GAT's backward on the power-law graph spent
// a fifth of its time there).
template <typename acc_t>
inline acc_t select(bool condition, acc_t if_true, acc_t if_false) {
  using bits_t = std::conditional_t<sizeof(acc_t) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(bits_t) == sizeof(acc_t));
  bits_t t, f;
  std::memcpy(&t, &if_true, sizeof t);
  std::memcpy(&f, &if_false, sizeof f);
  const bits_t mask = bits_t(0) - static_cast<bits_t>(condition);  // all ones where true
  const bits_t chosen = (t & mask) | (f & ~mask);
  acc_t out;
  std::memcpy(&out, &chosen, sizeof out);
  return out;
}

// Lane-wise bit operations on G lanes of acc_t: |v| by clearing the sign bits, and a select
// on the sign bits (both without a jump, as `select`).
template <int G, typename acc_t>
struct SignBits {
  using W = typename Vec<acc_t, G>::type;
  using bits_t = std::conditional_t<sizeof(acc_t) == 4, int32_t, int64_t>;
  using B = typename Vec<bits_t, G>::type;

  static B bits(W v) {
    B b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }
  static W from(B b) {
    W v;
    std::memcpy(&v, &b, sizeof v);
    return v;
  }
  static W abs(W v) { return from(bits(v) & std::numeric_limits<bits_t>::max()); }
  // if_negative where sign_of's sign bit is set, else otherwise
  static W where_negative(W sign_of, acc_t if_negative, acc_t otherwise) {
    const B negative = bits(sign_of) >> (8 * sizeof(bits_t) - 1);  // all ones where set
    return from((bits(W{} + if_negative) & negative) | (bits(W{} + otherwise) & ~negative));
  }
};

// Where the scores come from: rows(...) writes the scores [edges, H] of the edges of the rows
// [b0, b1) into out (the accumulation type), the block's first edge at out[0]. With a
// `shift` ([rows, H], the backward's log-sum-exp), each row's shift is subtracted from its
// scores on the way; additive scores with a `sign` buffer also write +-1 per value there,
// the side of its LeakyReLU (the score's sign before the shift). Both on the way, not as
// passes of their own over the block. With `row_max` (the forward, no shift), rows(...)
// may shift each row by its max per head itself, as shift_by_row_max does, writing the
// maxima to row_max[(i - b0) * H + h]; it returns whether it did.

// An [E, H] tensor of scores (segment_attention).
template <typename scalar_t>
struct StoredScores {
  static constexpr bool kAdditive = false;
  const scalar_t* score;

  template <int HT, bool kShift, typename index_t, typename acc_t>
  bool rows(const index_t* indptr, const index_t*, int64_t b0, int64_t b1, int64_t, int64_t H,
            const scalar_t* shift, acc_t* out, acc_t*, acc_t*) const {
    const int64_t e0 = indptr[b0];
    if constexpr (!kShift) {
      const int64_t n = (indptr[b1] - e0) * H;
      for (int64_t k = 0; k < n; ++k) out[k] = static_cast<acc_t>(score[e0 * H + k]);
    } else {
      for (int64_t i = b0; i < b1; ++i)
        for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e)
          for (int64_t h = 0; h < H; ++h)
            out[(e - e0) * H + h] =
                static_cast<acc_t>(score[e * H + h]) - static_cast<acc_t>(shift[i * H + h]);
    }
    return false;
  }
};

// GAT's scores, leaky_relu(a_src[j] + a_dst[i]) per edge (j -> i) and head, computed in the
// accumulation type (additive_attention).
template <typename scalar_t, typename acc_t>
struct AdditiveScores {
  static constexpr bool kAdditive = true;
  const scalar_t* a_src;
  const scalar_t* a_dst;
  acc_t slope;

  template <int HT, bool kShift, typename index_t>
  bool rows(const index_t* indptr, const index_t* indices, int64_t b0, int64_t b1,
            int64_t prefetch_end, int64_t H, const scalar_t* shift, acc_t* out, acc_t* sign,
            acc_t* row_max) const {
    const int64_t e0 = indptr[b0];
    // random rows of a table beyond L2, prefetched across blocks (up to prefetch_end)
    const int64_t distance = prefetch_distance_of<scalar_t>(H);
    const int64_t ahead_end = prefetch_end - distance;
    for (int64_t i = b0; i < b1; ++i) {
      if constexpr (short_row_vectors<HT, acc_t>() && std::is_same_v<scalar_t, acc_t>) {
        using V = HeadVec<HT, acc_t>;
        const V d = load_vec<acc_t, HT>(a_dst + i * HT);
        const V l = kShift ? load_vec<acc_t, HT>(shift + i * HT) : V{};
        constexpr acc_t kNegInf = -std::numeric_limits<acc_t>::infinity();
        V m = V{} + kNegInf;
        for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
          if (e < ahead_end)
            prefetch_row(a_src + static_cast<int64_t>(indices[e + distance]) * HT, HT);
          const V v = load_vec<acc_t, HT>(a_src + static_cast<int64_t>(indices[e]) * HT) + d;
          const V score = leaky(v, slope);
          store_vec<acc_t, HT>(out + (e - e0) * HT, kShift ? score - l : score);
          if (sign)
            store_vec<acc_t, HT>(sign + (e - e0) * HT, score > acc_t(0) ? V{} + 1 : V{} - 1);
          m = score > m ? score : m;  // lane-wise, NaN never wins (shift_by_row_max's rule)
        }
        if (row_max)  // the row's scores, still in L1
          shift_row_by_max<HT>(out + (indptr[i] - e0) * HT, indptr[i + 1] - indptr[i], m,
                               row_max + (i - b0) * HT);
      } else {
        for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
          if (e < ahead_end)
            prefetch_row(a_src + static_cast<int64_t>(indices[e + distance]) * H, H);
          for (int64_t h = 0; h < H; ++h) {
            const acc_t score =
                activation(static_cast<acc_t>(a_src[static_cast<int64_t>(indices[e]) * H + h]) +
                           static_cast<acc_t>(a_dst[i * H + h]));
            out[(e - e0) * H + h] = kShift ? score - static_cast<acc_t>(shift[i * H + h]) : score;
            if (sign) sign[(e - e0) * H + h] = score > acc_t(0) ? acc_t(1) : acc_t(-1);
          }
        }
      }
    }
    return row_max && short_row_vectors<HT, acc_t>() && std::is_same_v<scalar_t, acc_t>;
  }

  acc_t activation(acc_t v) const { return select(v > acc_t(0), v, v * slope); }
  // d leaky_relu(v) / dv as torch's leaky_relu_backward takes it (1 where v > 0, else the
  // slope), from a weight that carries the sign of v (attention_weights)
  acc_t derivative_of_signed(acc_t signed_weight) const {
    return select(std::signbit(signed_weight), slope, acc_t(1));
  }
  // the same for the G heads of one edge, lane by lane
  template <int G>
  typename Vec<acc_t, G>::type derivatives_of_signed(typename Vec<acc_t, G>::type signed_w) const {
    return SignBits<G, acc_t>::where_negative(signed_w, slope, acc_t(1));
  }
};

// The scores of the rows [b0, b1) into the block buffer, for each head count, less each
// row's `shift` where one is given (sign: as Scores::rows); gathered rows are prefetched for
// the edges before prefetch_end (the thread's chunk's end).
template <typename Scores, typename scalar_t, typename index_t, typename acc_t>
inline bool scores_of_rows(const Scores& scores, const index_t* indptr, const index_t* indices,
                           int64_t b0, int64_t b1, int64_t prefetch_end, int64_t H,
                           const scalar_t* shift, acc_t* out, acc_t* sign = nullptr,
                           acc_t* row_max = nullptr) {
  bool shifted_by_max = false;
  with_heads(H, [&](auto heads) {
    with_constant<1>(shift != nullptr, [&](auto shifted) {
      shifted_by_max = scores.template rows<decltype(heads)::value, decltype(shifted)::value == 1>(
          indptr, indices, b0, b1, prefetch_end, H, shift, out, sign, row_max);
    });
  });
  return shifted_by_max;
}

// 1 / s for a head's weight sum s, or 0 for an empty row or a fully masked head (s = 0).
template <typename acc_t>
inline acc_t inverse_or_zero(acc_t s) {
  return s == acc_t(0) ? acc_t(0) : acc_t(1) / s;
}

// A head's channels [c0, c0 + n) of the row as the sum of the normalised weights' products,
// sum_e (p_e * scale) x_e, into out: where the p-weighted sum overflowed before its division
// (p <= 1 per edge: values within a factor of the degree of the type's largest) while the
// softmax-weighted sum is finite, as the pure-torch twin and PyG form it. Also taken where
// the inputs hold inf or NaN, whose normalised sum it then gives.
template <typename acc_t, typename scalar_t, typename index_t>
__attribute__((noinline)) void normalised_head_sum(const index_t* row_indices, const acc_t* p,
                                                   int64_t degree, int64_t H, int64_t h, int64_t K,
                                                   int64_t c0, int64_t n, acc_t scale,
                                                   const scalar_t* x, acc_t* out) {
  std::fill(out, out + n, acc_t(0));
  for (int64_t e = 0; e < degree; ++e) {
    const acc_t w = p[e * H + h] * scale;
    const scalar_t* __restrict__ xr = x + static_cast<int64_t>(row_indices[e]) * K + c0;
    for (int64_t c = 0; c < n; ++c) out[c] += w * static_cast<acc_t>(xr[c]);
  }
}

// The p-weighted sums of the source rows for the G heads h0 .. h0 + G - 1, each divided by
// its head's normaliser, the sum of its weights: summed on the way, as the sweep loads each
// weight anyway (a separate pass over the row cost the road graph's forward a seventh of
// its time), and written to s[h0 + g]. T > 0: T channels of each of the G heads at a time
// in registers, so one sweep over the row's edges serves G heads (G * T <= 64: 4 heads of 16
// channels take one sweep, not four); each tile sums the weights again, in the same order.
// T = 0 (any width, G = 1): through the L1-resident `acc`. The first sweep prefetches the
// source rows of the edges before `ahead`.
template <int T, int G, typename acc_t, typename scalar_t, typename index_t>
inline void weighted_head_sum(const index_t* row_indices, const acc_t* p, int64_t degree,
                              int64_t ahead, int64_t distance, int64_t H, int64_t h0, int64_t C,
                              const scalar_t* x, bool stream, acc_t* acc, acc_t* s, scalar_t* out) {
  const int64_t K = H * C;
  if constexpr (T == 0) {
    static_assert(G == 1, "run-time widths take one head per sweep");
    std::fill(acc, acc + C, acc_t(0));
    acc_t sum = 0;
    for (int64_t e = 0; e < degree; ++e) {
      if (h0 == 0 && e < ahead)
        prefetch_row(x + static_cast<int64_t>(row_indices[e + distance]) * K, K);
      const acc_t w = p[e * H + h0];
      sum += w;
      const scalar_t* __restrict__ xh = x + static_cast<int64_t>(row_indices[e]) * K + h0 * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) acc[c] += w * static_cast<acc_t>(xh[c]);
    }
    s[h0] = sum;
    const acc_t scale = inverse_or_zero(sum);
    for (int64_t c = 0; c < C; ++c) acc[c] *= scale;
    if (any_non_finite(acc, C))
      normalised_head_sum(row_indices, p, degree, H, h0, K, h0 * C, C, scale, x, acc);
    for (int64_t c = 0; c < C; ++c) out[h0 * C + c] = static_cast<scalar_t>(acc[c]);
  } else {
    for (int64_t t0 = 0; t0 < C; t0 += T) {
      acc_t a[G][T] = {}, sum[G] = {};
      for (int64_t e = 0; e < degree; ++e) {
        if (h0 == 0 && t0 == 0 && e < ahead)
          prefetch_row(x + static_cast<int64_t>(row_indices[e + distance]) * K, K);
        const scalar_t* __restrict__ xr =
            x + static_cast<int64_t>(row_indices[e]) * K + h0 * C + t0;
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const acc_t w = p[e * H + h0 + g];
          sum[g] += w;
#pragma GCC unroll 64
          for (int f = 0; f < T; ++f) a[g][f] += w * static_cast<acc_t>(xr[g * C + f]);
        }
      }
      using V = typename Vec<acc_t, T>::type;
      V probe = {};  // NaN in a lane where some head's channel is inf or NaN (v - v), else 0
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        s[h0 + g] = sum[g];
        const acc_t scale = inverse_or_zero(sum[g]);
        alignas(64) acc_t head_out[T];  // a's own address would keep a out of the registers
#pragma GCC unroll 64
        for (int f = 0; f < T; ++f) head_out[f] = a[g][f] * scale;
        const V v = load_vec<acc_t, T>(head_out);
        probe += v - v;
        store_row(out + (h0 + g) * C + t0, head_out, T, stream);
      }
      if (lane_sum<T, acc_t>(probe) != acc_t(0))  // overflowed, or inputs not finite
        for (int g = 0; g < G; ++g) {
          alignas(64) acc_t head_out[T];
          normalised_head_sum(row_indices, p, degree, H, h0 + g, K, (h0 + g) * C + t0, T,
                              inverse_or_zero(sum[g]), x, head_out);
          store_row(out + (h0 + g) * C + t0, head_out, T, stream);
        }
    }
  }
}

// lse[k] = m[k] + log(s[k]) for n (row, head) pairs, 0 where s[k] = 0 (an empty row or a
// fully masked head), vectorised: four scalar logs per row took an eighth of the road graph's
// forward.
template <typename scalar_t, typename acc_t>
inline void log_sum_exp(const acc_t* m, const acc_t* s, int64_t n, scalar_t* lse) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) {
    const acc_t log_s = log_vec(s[k]);  // taken unconditionally: GCC vectorises no jump
    lse[k] = static_cast<scalar_t>(s[k] == acc_t(0) ? acc_t(0) : m[k] + log_s);
  }
}

// Thread mapping: a thread owns a block of destination rows. Per block of rows: the scores
// [edges, H] copied into the accumulation type, each row's max m per head subtracted, one
// vectorised exp over the block; then per row the p-weighted sum of the source rows
// (prefetched ahead) and the normaliser s; last, the block's row statistics from m and s
// (`stats`: segment_attention's log-sum-exp m + log(s), additive_attention's m and s). Two
// passes over the scores instead of the online rescaling: the exponentials vectorise, and
// no accumulator is rescaled. Writes out [rows, H * C].
template <typename scalar_t, typename index_t, typename Scores, typename Stats>
void attend_rows(const index_t* indptr, const index_t* indices, const Scores& scores,
                 const scalar_t* x, int64_t num_rows, int64_t H, int64_t C, scalar_t* out,
                 const Stats& stats) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = H * C;
  with_tile(C, [&](auto width) {
    constexpr int T = decltype(width)::value;
    const int group = heads_per_sweep(H, T);
    const bool stream = streams_output(num_rows * K * static_cast<int64_t>(sizeof(scalar_t)));
    parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
      std::vector<acc_t> acc(C), m, s, p;
      const int64_t chunk_end = indptr[r1];
      const int64_t distance = prefetch_distance_of<scalar_t>(K);
      for_row_blocks(indptr, r0, r1, [&](int64_t b0, int64_t b1) {
        const int64_t e0 = indptr[b0];
        block_softmax_numerators_of(
            indptr, b0, b1, H,
            [&](acc_t* block, acc_t* row_max) {
              return scores_of_rows(scores, indptr, indices, b0, b1, chunk_end, H,
                                    static_cast<const scalar_t*>(nullptr), block,
                                    static_cast<acc_t*>(nullptr), row_max);
            },
            p, m);
        s.resize(std::max<size_t>(s.size(), (b1 - b0) * H));
        for (int64_t i = b0; i < b1; ++i) {
          const int64_t begin = indptr[i], degree = indptr[i + 1] - begin;
          // edges e < ahead prefetch the source row `distance` edges on, within the chunk
          const int64_t ahead = chunk_end - distance - begin;
          const acc_t* row = p.data() + (begin - e0) * H;
          with_heads_per_sweep<T>(group, [&](auto per_sweep) {
            constexpr int G = decltype(per_sweep)::value;
            if constexpr (G > 0)  // group >= 1 here
              for (int64_t h = 0; h < H; h += G)
                weighted_head_sum<T, G>(indices + begin, row, degree, ahead, distance, H, h, C, x,
                                        stream, acc.data(), s.data() + (i - b0) * H, out + i * K);
          });
        }
        stats(m.data(), s.data(), b0 * H, (b1 - b0) * H);
      });
    });
  });
}

std::tuple<at::Tensor, at::Tensor> segment_attention_cpu(
    const at::Tensor& score, const at::Tensor& indptr, const at::Tensor& indices,
    const at::Tensor& x, const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
    const c10::optional<at::Tensor>&) {
  check_attention_args(score, indptr, indices, x);
  const int64_t num_rows = indptr.numel() - 1, H = score.size(1), C = x.size(1) / H;
  auto sc = score.contiguous(), xc = x.contiguous(), ic = indices.contiguous();
  auto out = empty_output({num_rows, H * C}, x.options());
  auto lse = at::empty({num_rows, H}, x.options());
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::segment_attention", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      using acc_t = typename AccType<scalar_t>::type;
      scalar_t* l = lse.data_ptr<scalar_t>();
      attend_rows(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(),
                  StoredScores<scalar_t>{sc.data_ptr<scalar_t>()}, xc.data_ptr<scalar_t>(),
                  num_rows, H, C, out.data_ptr<scalar_t>(),
                  [&](const acc_t* m, const acc_t* s, int64_t at, int64_t n) {
                    log_sum_exp(m, s, n, l + at);
                  });
    });
  });
  return {out, lse};
}

// GAT's forward: out, and norm [2, rows, H], each row's shift (norm[0], its max score per
// head) and sum of exp(score - shift) (norm[1]), from which the backward recomputes the
// forward's weights.
std::tuple<at::Tensor, at::Tensor> additive_attention_cpu(
    const at::Tensor& a_src, const at::Tensor& a_dst, double negative_slope,
    const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& x,
    const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
    const c10::optional<at::Tensor>&) {
  check_additive_attention_args(a_src, a_dst, negative_slope, indptr, indices, x);
  const int64_t num_rows = indptr.numel() - 1, H = a_src.size(1), C = x.size(1) / H;
  auto sc = a_src.contiguous(), dc = a_dst.contiguous(), xc = x.contiguous(),
       ic = indices.contiguous();
  auto out = empty_output({num_rows, H * C}, x.options());
  auto norm = at::empty({2, num_rows, H}, x.options());
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::additive_attention", [&] {
    using acc_t = typename AccType<scalar_t>::type;
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      scalar_t* shift = norm.data_ptr<scalar_t>();
      scalar_t* sum = shift + num_rows * H;
      if constexpr (std::is_same_v<scalar_t, acc_t>) {
        if (additive_sweeps_fit<scalar_t>(H, C)) {
          with_additive_layout(H, C, [&](auto heads, auto tile) {
            additive_forward_sweeps<decltype(heads)::value, decltype(tile)::value>(
                indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(), sc.data_ptr<scalar_t>(),
                dc.data_ptr<scalar_t>(), static_cast<scalar_t>(negative_slope),
                xc.data_ptr<scalar_t>(), num_rows, out.data_ptr<scalar_t>(), shift, sum);
          });
          return;
        }
      }
      const AdditiveScores<scalar_t, acc_t> scores{sc.data_ptr<scalar_t>(), dc.data_ptr<scalar_t>(),
                                                   static_cast<acc_t>(negative_slope)};
      attend_rows(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(), scores,
                  xc.data_ptr<scalar_t>(), num_rows, H, C, out.data_ptr<scalar_t>(),
                  [&](const acc_t* m, const acc_t* s, int64_t at, int64_t n) {
                    for (int64_t k = 0; k < n; ++k) {
                      shift[at + k] = static_cast<scalar_t>(m[k]);
                      sum[at + k] = static_cast<scalar_t>(s[k]);
                    }
                  });
    });
  });
  return {out, norm};
}

// Backward, pass 1 (rows of the CSR): the attention weights recomputed into `alpha` [E, H],
// which is the score gradient's own buffer when that is asked for: nothing [E, H] is kept
// between forward and backward. Per block of rows (in L1) the scores less lse (in the
// scores' own loop), one vectorised exp, then each row divided by its sum: the forward's
// softmax. exp(score - lse) alone is that softmax only up to a factor per row, the rounding
// of lse = max + log(sum) at the scores' scale (0.05% at scores of 1e4, 3% at 1e6; two tied
// scores of 1e30 weighed 1 each), which the division takes out. With `base` (the score
// gradient asked for), also base_i = grad_lse_i - <g_i, out_i> per head: rows of g and out
// are read in order here, so pass 2 gathers H values per edge instead of the row of out.
// Additive scores with `base`: alpha carries the sign of its score (-alpha where score <= 0,
// a free bit as alpha >= 0), the side of the LeakyReLU that pass 2 needs, read there instead
// of a_dst[i]. The sign of leaky_relu(v) is that of v for a slope >= 0 (additive_attention's
// domain).
template <int T, typename Scores, typename scalar_t, typename index_t, typename acc_t>
void attention_weights(const index_t* indptr, const index_t* indices, const Scores& scores,
                       const scalar_t* lse, const scalar_t* out, const scalar_t* grad,
                       const scalar_t* grad_lse, int64_t num_rows, int64_t H, int64_t C, int group,
                       acc_t* alpha, acc_t* base) {
  const int64_t K = H * C;
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> sign, s(H);
    const int64_t chunk_end = indptr[r1];
    for_row_blocks(indptr, r0, r1, [&](int64_t b0, int64_t b1) {
      acc_t* block = alpha + static_cast<int64_t>(indptr[b0]) * H;
      const int64_t n = static_cast<int64_t>(indptr[b1] - indptr[b0]) * H;
      const bool signed_weights = Scores::kAdditive && base;
      if (signed_weights) sign.resize(std::max<size_t>(sign.size(), n));
      scores_of_rows(scores, indptr, indices, b0, b1, chunk_end, H, lse, block,
                     signed_weights ? sign.data() : nullptr);
      exp_in_place(block, n);
      normalise_block_rows(indptr, b0, b1, H, block, s.data(),
                           signed_weights ? sign.data() : nullptr);
    });
    if (!base) return;
    std::vector<acc_t> dots(H);
    for (int64_t i = r0; i < r1; ++i) {
      head_dots<T>(grad + i * K, out + i * K, H, C, group, dots.data());
      for (int64_t h = 0; h < H; ++h)
        base[i * H + h] = (grad_lse ? static_cast<acc_t>(grad_lse[i * H + h]) : acc_t(0)) - dots[h];
    }
  });
}

// Backward, pass 2 (rows of the transpose), both gradients from one gather of g = grad_out:
// for each source j and each edge e = (j -> i), with x_j staying in L1 across j's edges,
//   d x_j += alpha_e * g_i                         (NeedX)
//   d score_e = alpha_e * (<g_i, x_j> + base_i)   per head, over alpha_e (NeedScore).
// Each edge is visited once, so the in-place write is safe. Computing the score gradient
// here rather than over the CSR rows saves a second gather pass (of the rows of x).
// Additive scores: d score_e is taken through the LeakyReLU (d pre_e, pre_e = a_src[j] +
// a_dst[i]), and d a_src[j], the sum of j's d pre_e, accumulates in registers on the way;
// pass 3 sums d a_dst over the CSR rows.

// The rows transpose entry c will read: its destination's gradient (and base) row and its
// edge's weights. Always inlined: a call inside the sweeps would spill their vector
// registers (the score-only backward ran 3x slower, 48 against 15-18 ms).
template <bool NeedScore, typename scalar_t, typename index_t, typename acc_t>
__attribute__((always_inline)) inline void prefetch_entry(const index_t* csc_indices,
                                                          const index_t* csc_perm, int64_t c,
                                                          const scalar_t* grad, const acc_t* base,
                                                          int64_t H, int64_t K,
                                                          const acc_t* alpha_to_grad) {
  const int64_t i = csc_indices[c];
  prefetch_row(grad + i * K, K);
  prefetch_row(alpha_to_grad + static_cast<int64_t>(csc_perm[c]) * H, H);
  if constexpr (NeedScore) prefetch_row(base + i * H, H);
}

// One sweep over source j's transpose entries [c0, c1) for the G heads h0 .. h0 + G - 1,
// each head exactly one tile of T channels (float or double): x_j and the heads' d x stay in
// registers. Entries before `ahead_end` prefetch `distance` entries on (first sweep
// only). Explicit vectors: GCC left the plain loops scalar, 64 accumulators on the stack.
template <bool NeedScore, bool NeedX, int T, int G, typename Scores, typename acc_t,
          typename index_t>
inline void transpose_sweep(const index_t* csc_indices, const index_t* csc_perm, int64_t c0,
                            int64_t c1, int64_t ahead_end, int64_t distance,
                            const acc_t* __restrict__ grad, const acc_t* __restrict__ xj,
                            const acc_t* __restrict__ base, int64_t H, int64_t h0,
                            const Scores& scores, int64_t j, acc_t* __restrict__ alpha_to_grad,
                            bool stream, acc_t* __restrict__ grad_xj,
                            acc_t* __restrict__ grad_a_src) {
  using V = typename Vec<acc_t, T>::type;
  constexpr bool kAdditive = NeedScore && Scores::kAdditive;
  const int64_t K = H * T;
  V a[G] = {}, xv[G];
  acc_t da[G] = {};
  // G > 1 with the score gradient: the G heads' dot products summed jointly (lane_sums) and
  // their per-head arithmetic as one vector of G lanes, instead of G scalar chains
  using Signs = SignBits<G, acc_t>;
  typename Signs::W da_heads = {};
  for (int g = 0; g < G; ++g) xv[g] = load_vec<acc_t, T>(xj + (h0 + g) * T);
  for (int64_t c = c0; c < c1; ++c) {
    if (h0 == 0 && c < ahead_end)
      prefetch_entry<NeedScore>(csc_indices, csc_perm, c + distance, grad, base, H, K,
                                alpha_to_grad);
    const int64_t i = csc_indices[c], e = csc_perm[c];
    const acc_t* gi = grad + i * K + h0 * T;
    acc_t* we = alpha_to_grad + e * H + h0;
    if constexpr (NeedScore && G > 1) {
      using W = typename Signs::W;
      V gv[G], products[G];
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        gv[g] = load_vec<acc_t, T>(gi + g * T);
        products[g] = gv[g] * xv[g];
      }
      const W signed_w = load_vec<acc_t, G>(we);
      const W w = kAdditive ? Signs::abs(signed_w) : signed_w;
      if constexpr (NeedX) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) a[g] += w[g] * gv[g];
      }
      W d = w * (lane_sums<G, T, acc_t>(products) + load_vec<acc_t, G>(base + i * H + h0));
      if constexpr (kAdditive) {
        d *= scores.template derivatives_of_signed<G>(signed_w);
        da_heads += d;
      }
      store_vec<acc_t, G>(we, d);
    } else {
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const V gv = load_vec<acc_t, T>(gi + g * T);
        const acc_t signed_w = we[g], w = kAdditive ? std::abs(signed_w) : signed_w;
        if constexpr (NeedX) a[g] += w * gv;
        if constexpr (NeedScore) {
          acc_t d = w * (lane_sum<T, acc_t>(gv * xv[g]) + base[i * H + h0 + g]);
          if constexpr (kAdditive) {
            d *= scores.derivative_of_signed(signed_w);
            da[g] += d;
          }
          we[g] = d;
        }
      }
    }
  }
  if constexpr (kAdditive && G > 1)
    for (int g = 0; g < G; ++g) da[g] = da_heads[g];
  if constexpr (NeedX)
    for (int g = 0; g < G; ++g) {
      alignas(64) acc_t head_grad[T];  // a's own address would keep a out of the registers
      store_vec<acc_t, T>(head_grad, a[g]);
      store_row(grad_xj + (h0 + g) * T, head_grad, T, stream);
    }
  if constexpr (kAdditive)
    for (int g = 0; g < G; ++g) grad_a_src[j * H + h0 + g] = da[g];
}

// All heads of any width in one sweep over j's entries, d x through the L1-resident `acc`.
// Additive scores: d a_src[j] accumulates in `da` (L1, H values).
template <bool NeedScore, bool NeedX, int T, typename Scores, typename scalar_t, typename index_t,
          typename acc_t>
inline void transpose_sweep_any(const index_t* csc_indices, const index_t* csc_perm, int64_t c0,
                                int64_t c1, int64_t ahead_end, int64_t distance,
                                const scalar_t* grad, const scalar_t* xj, const acc_t* base,
                                int64_t H, int64_t C, const Scores& scores, int64_t j,
                                acc_t* alpha_to_grad, acc_t* acc, acc_t* da, scalar_t* grad_xj,
                                scalar_t* grad_a_src) {
  constexpr bool kAdditive = NeedScore && Scores::kAdditive;
  const int64_t K = H * C;
  if constexpr (NeedX) std::fill(acc, acc + K, acc_t(0));
  if constexpr (kAdditive) std::fill(da, da + H, acc_t(0));
  for (int64_t c = c0; c < c1; ++c) {
    if (c < ahead_end)
      prefetch_entry<NeedScore>(csc_indices, csc_perm, c + distance, grad, base, H, K,
                                alpha_to_grad);
    const int64_t i = csc_indices[c], e = csc_perm[c];
    const scalar_t* __restrict__ gi = grad + i * K;
    for (int64_t h = 0; h < H; ++h) {
      const acc_t signed_w = alpha_to_grad[e * H + h];
      const acc_t w = kAdditive ? std::abs(signed_w) : signed_w;
      if constexpr (NeedX) {
        acc_t* __restrict__ a = acc + h * C;
#pragma omp simd
        for (int64_t k = 0; k < C; ++k) a[k] += w * static_cast<acc_t>(gi[h * C + k]);
      }
      if constexpr (NeedScore) {
        acc_t d = w * (head_dot<acc_t, T>(gi + h * C, xj + h * C, C) + base[i * H + h]);
        if constexpr (kAdditive) {
          d *= scores.derivative_of_signed(signed_w);
          da[h] += d;
        }
        alpha_to_grad[e * H + h] = d;
      }
    }
  }
  if constexpr (NeedX)
    for (int64_t k = 0; k < K; ++k) grad_xj[k] = static_cast<scalar_t>(acc[k]);
  if constexpr (kAdditive)
    for (int64_t h = 0; h < H; ++h) grad_a_src[j * H + h] = static_cast<scalar_t>(da[h]);
}

// Thread mapping: a thread owns a block of source rows j of the transpose. G > 0 (float or
// double, head width C == T): G heads per register sweep; G = 0: transpose_sweep_any.
template <bool NeedScore, bool NeedX, int T, int G, typename Scores, typename scalar_t,
          typename index_t, typename acc_t>
void attention_transpose_grads(const index_t* csc_indptr, const index_t* csc_indices,
                               const index_t* csc_perm, const scalar_t* grad, const scalar_t* x,
                               const acc_t* base, int64_t num_src, int64_t H, int64_t C,
                               const Scores& scores, acc_t* alpha_to_grad, scalar_t* grad_x,
                               scalar_t* grad_a_src) {
  const int64_t K = H * C;
  constexpr bool kSweeps = G > 0 && std::is_same_v<scalar_t, acc_t>;
  const bool stream = streams_output(num_src * K * static_cast<int64_t>(sizeof(scalar_t)));
  parallel_rows(csc_indptr, num_src, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> acc(kSweeps ? 0 : K), da(kSweeps ? 0 : H);
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    const int64_t ahead_end = static_cast<int64_t>(csc_indptr[r1]) - distance;
    for (int64_t j = r0; j < r1; ++j) {
      const int64_t c0 = csc_indptr[j], c1 = csc_indptr[j + 1];
      scalar_t* grad_xj = NeedX ? grad_x + j * K : nullptr;
      if constexpr (kSweeps) {
        for (int64_t h0 = 0; h0 < H; h0 += G)
          transpose_sweep<NeedScore, NeedX, T, G>(csc_indices, csc_perm, c0, c1, ahead_end,
                                                  distance, grad, x + j * K, base, H, h0, scores, j,
                                                  alpha_to_grad, stream, grad_xj, grad_a_src);
      } else {
        transpose_sweep_any<NeedScore, NeedX, T>(
            csc_indices, csc_perm, c0, c1, ahead_end, distance, grad, x + j * K, base, H, C, scores,
            j, alpha_to_grad, acc.data(), da.data(), grad_xj, grad_a_src);
      }
    }
  });
}

// Backward, pass 3 (additive scores): d a_dst[i] = the sum of d pre_e over row i's edges.
template <typename scalar_t, typename index_t, typename acc_t>
void dst_score_grads(const index_t* indptr, int64_t num_rows, int64_t H, const acc_t* d_pre,
                     scalar_t* grad_a_dst) {
  const int64_t num_edges = indptr[num_rows];
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> s(H);
    with_heads(H, [&](auto heads) {
      constexpr int HT = decltype(heads)::value;
      for (int64_t i = r0; i < r1; ++i) {
        const int64_t begin = indptr[i], degree = indptr[i + 1] - begin;
        // d_pre holds every edge, only read here: the window may run into the next rows
        const int64_t readable = num_edges - begin;
        if constexpr (std::is_same_v<scalar_t, acc_t>) {  // straight into the output
          row_sums<HT>(d_pre + begin * H, degree, H, grad_a_dst + i * H, readable);
        } else {
          row_sums<HT>(d_pre + begin * H, degree, H, s.data(), readable);
          for (int64_t h = 0; h < H; ++h) grad_a_dst[i * H + h] = static_cast<scalar_t>(s[h]);
        }
      }
    });
  });
}

// The tensors of one backward call, contiguous, and its outputs.
struct BackwardArgs {
  at::Tensor lse, out, grad, grad_lse, indptr, indices, x, csc_indptr, csc_indices, csc_perm;
  at::Tensor alpha;               // [E, H] accumulation type: the weights, then d score
  at::Tensor grad_x, grad_a_src;  // empty when not asked for
  bool need_score, need_x;
};

BackwardArgs backward_args(int64_t num_edges, int64_t H, const at::Tensor& lse,
                           const at::Tensor& out, const at::Tensor& grad_out,
                           const c10::optional<at::Tensor>& grad_lse, const at::Tensor& indptr,
                           const at::Tensor& indices, const at::Tensor& x,
                           const at::Tensor& csc_indptr, const at::Tensor& csc_indices,
                           const at::Tensor& csc_perm, bool need_score, bool need_x) {
  check_attention_backward_args(num_edges, H, lse, out, grad_out, grad_lse, indptr, x, csc_indptr,
                                csc_indices, csc_perm);
  // alpha in the accumulation type, becoming the score gradient in place (cast at the end
  // for bfloat16 scores)
  const auto acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return {lse.contiguous(),
          out.contiguous(),
          grad_out.contiguous(),
          grad_lse ? grad_lse->contiguous() : at::Tensor(),
          indptr,
          indices.contiguous(),
          x.contiguous(),
          csc_indptr,
          csc_indices.contiguous(),
          csc_perm.contiguous(),
          empty_output({num_edges, H}, x.options().dtype(acc_type)),
          need_x ? empty_output(x.sizes(), x.options()) : at::empty({0}, x.options()),
          at::empty({0}, x.options()),
          need_score,
          need_x};
}

// body(score_flag, x_flag), each std::integral_constant<int, 0 or 1>: which of d score and d x
// the call asks for, as compile-time constants; not called when it asks for neither.
template <typename F>
void with_gradients_asked(const BackwardArgs& args, F&& body) {
  with_constant<1>(args.need_score, [&](auto score_flag) {
    constexpr int kScore = decltype(score_flag)::value;
    with_constant<1>(args.need_x, [&](auto x_flag) {
      if constexpr (kScore || decltype(x_flag)::value)
        body(std::integral_constant<int, kScore>{}, x_flag);
    });
  });
}

// Passes 1 and 2 for one score source: d score in args.alpha (through the LeakyReLU for
// additive scores), d x in args.grad_x, d a_src in args.grad_a_src (additive scores).
template <typename Scores, typename scalar_t, typename index_t>
void attention_backward(const Scores& scores, BackwardArgs& args, int64_t H) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t num_rows = args.indptr.numel() - 1, C = args.x.size(1) / H;
  at::Tensor base;
  if (args.need_score) base = at::empty({num_rows, H}, args.alpha.options());
  acc_t* a = args.alpha.data_ptr<acc_t>();
  acc_t* b = args.need_score ? base.data_ptr<acc_t>() : nullptr;
  const index_t* indptr = args.indptr.data_ptr<index_t>();
  with_tile(C, [&](auto width) {
    constexpr int T = decltype(width)::value;
    // heads per register sweep when a head is one tile (0: the L1 path); both flags as
    // compile-time constants (with_constant<1>: 1 if set, else 0)
    constexpr bool kVectors = std::is_same_v<scalar_t, acc_t>;  // not bfloat16
    const int group = kVectors && T > 0 && C == T ? heads_per_sweep(H, T) : 0;
    attention_weights<T>(indptr, args.indices.data_ptr<index_t>(), scores,
                         args.lse.data_ptr<scalar_t>(), args.out.data_ptr<scalar_t>(),
                         args.grad.data_ptr<scalar_t>(),
                         args.grad_lse.defined() ? args.grad_lse.data_ptr<scalar_t>() : nullptr,
                         num_rows, H, C, group, a, b);
    with_heads_per_sweep<T>(group, [&](auto per_sweep) {
      constexpr int G = decltype(per_sweep)::value;
      if constexpr (G == 0 || (kVectors && T > 0))  // G > 0: a head is one tile
        with_gradients_asked(args, [&](auto score_flag, auto x_flag) {
          constexpr bool kScore = decltype(score_flag)::value, kX = decltype(x_flag)::value;
          attention_transpose_grads<kScore, kX, T, G>(
              args.csc_indptr.data_ptr<index_t>(), args.csc_indices.data_ptr<index_t>(),
              args.csc_perm.data_ptr<index_t>(), args.grad.data_ptr<scalar_t>(),
              args.x.data_ptr<scalar_t>(), b, args.x.size(0), H, C, scores, a,
              kX ? args.grad_x.data_ptr<scalar_t>() : nullptr,
              args.grad_a_src.numel() ? args.grad_a_src.data_ptr<scalar_t>() : nullptr);
        });
    });
  });
}

// The register layouts' backward (additive_sweeps.h): records, then the transpose sweep,
// d pre into args.alpha in CSR order for pass 3.
template <typename scalar_t, typename index_t>
void additive_sweeps_backward(const at::Tensor& a_src, const at::Tensor& a_dst,
                              const at::Tensor& norm, double negative_slope, BackwardArgs& args,
                              int64_t H, int64_t C) {
  const int64_t num_rows = args.indptr.numel() - 1;
  const scalar_t slope = static_cast<scalar_t>(negative_slope);
  const scalar_t* shift = norm.data_ptr<scalar_t>();
  at::Tensor records = at::empty({num_rows, 4 * H}, args.x.options());
  with_additive_layout(H, C, [&](auto heads, auto tile) {
    constexpr int HT = decltype(heads)::value, T = decltype(tile)::value;
    additive_records<HT, T>(a_dst.data_ptr<scalar_t>(), shift, shift + num_rows * H,
                            args.grad.data_ptr<scalar_t>(), args.out.data_ptr<scalar_t>(), num_rows,
                            records.data_ptr<scalar_t>());
    with_gradients_asked(args, [&](auto score_flag, auto x_flag) {
      constexpr bool kScore = decltype(score_flag)::value, kX = decltype(x_flag)::value;
      additive_transpose_sweeps<kScore, kX, HT, T>(
          args.csc_indptr.data_ptr<index_t>(), args.csc_indices.data_ptr<index_t>(),
          args.csc_perm.data_ptr<index_t>(), args.grad.data_ptr<scalar_t>(),
          args.x.data_ptr<scalar_t>(), a_src.data_ptr<scalar_t>(), records.data_ptr<scalar_t>(),
          slope, args.x.size(0), args.alpha.data_ptr<scalar_t>(),
          kX ? args.grad_x.data_ptr<scalar_t>() : nullptr,
          kScore ? args.grad_a_src.data_ptr<scalar_t>() : nullptr);
    });
  });
}

std::tuple<at::Tensor, at::Tensor> segment_attention_backward_cpu(
    const at::Tensor& score, const at::Tensor& lse, const at::Tensor& out,
    const at::Tensor& grad_out, const c10::optional<at::Tensor>& grad_lse, const at::Tensor& indptr,
    const at::Tensor& indices, const at::Tensor& x, const at::Tensor& csc_indptr,
    const at::Tensor& csc_indices, const at::Tensor& csc_perm, bool need_score, bool need_x) {
  check_attention_args(score, indptr, indices, x);
  const int64_t H = score.size(1);
  BackwardArgs args = backward_args(score.size(0), H, lse, out, grad_out, grad_lse, indptr, indices,
                                    x, csc_indptr, csc_indices, csc_perm, need_score, need_x);
  auto sc = score.contiguous();
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::segment_attention_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      attention_backward<StoredScores<scalar_t>, scalar_t, index_t>(
          StoredScores<scalar_t>{sc.data_ptr<scalar_t>()}, args, H);
    });
  });
  at::Tensor grad_score =
      need_score ? args.alpha.to(score.scalar_type()) : at::empty({0}, score.options());
  return {grad_score, args.grad_x};
}

// GAT's backward from the forward's norm ([2, rows, H]: shift and sum per row and head).
// The register layouts: one pass over the rows for the records, one transpose sweep, and
// pass 3; the others: passes 1 to 3 with norm[0] as the shift, each row renormalised.
std::tuple<at::Tensor, at::Tensor, at::Tensor> additive_attention_backward_cpu(
    const at::Tensor& a_src, const at::Tensor& a_dst, double negative_slope, const at::Tensor& norm,
    const at::Tensor& out, const at::Tensor& grad_out, const at::Tensor& indptr,
    const at::Tensor& indices, const at::Tensor& x, const at::Tensor& csc_indptr,
    const at::Tensor& csc_indices, const at::Tensor& csc_perm, bool need_scores, bool need_x) {
  check_additive_attention_args(a_src, a_dst, negative_slope, indptr, indices, x);
  const int64_t H = a_src.size(1), num_rows = indptr.numel() - 1, C = x.size(1) / H;
  TORCH_CHECK(norm.dim() == 3 && norm.size(0) == 2 && norm.size(1) == num_rows && norm.size(2) == H,
              "norm must be [2, rows, heads] = [2, ", num_rows, ", ", H, "], got shape ",
              norm.sizes());
  TORCH_CHECK(norm.scalar_type() == x.scalar_type(), "norm must have x's dtype ", x.scalar_type(),
              ", got ", norm.scalar_type());
  const at::Tensor nc = norm.contiguous();
  BackwardArgs args =
      backward_args(indices.numel(), H, nc.select(0, 0), out, grad_out, c10::nullopt, indptr,
                    indices, x, csc_indptr, csc_indices, csc_perm, need_scores, need_x);
  auto sc = a_src.contiguous(), dc = a_dst.contiguous();
  if (need_scores) args.grad_a_src = at::empty(sc.sizes(), sc.options());
  at::Tensor grad_a_dst =
      need_scores ? at::empty(dc.sizes(), dc.options()) : at::empty({0}, dc.options());
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::additive_attention_backward", [&] {
    using acc_t = typename AccType<scalar_t>::type;
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      bool swept = false;
      if constexpr (std::is_same_v<scalar_t, acc_t>) {
        if (additive_sweeps_fit<scalar_t>(H, C) && (need_scores || need_x)) {
          additive_sweeps_backward<scalar_t, index_t>(sc, dc, nc, negative_slope, args, H, C);
          swept = true;
        }
      }
      if (!swept) {
        const AdditiveScores<scalar_t, acc_t> scores{
            sc.data_ptr<scalar_t>(), dc.data_ptr<scalar_t>(), static_cast<acc_t>(negative_slope)};
        attention_backward<AdditiveScores<scalar_t, acc_t>, scalar_t, index_t>(scores, args, H);
      }
      if (need_scores)
        dst_score_grads(indptr.data_ptr<index_t>(), num_rows, H, args.alpha.data_ptr<acc_t>(),
                        grad_a_dst.data_ptr<scalar_t>());
    });
  });
  return {args.grad_a_src, grad_a_dst, args.grad_x};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("segment_attention", &segment_attention_cpu);
  m.impl("segment_attention_backward", &segment_attention_backward_cpu);
  m.impl("additive_attention", &additive_attention_cpu);
  m.impl("additive_attention_backward", &additive_attention_backward_cpu);
}

}  // namespace graphloc
