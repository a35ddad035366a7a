// CPU kernel of segment_attention: per destination row and head, the softmax of the edge
// scores and the attention-weighted sum of the source rows in one pass over the rows,
// without any per-edge message tensor. Also returns the log-sum-exp per (row, head) for the
// backward.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/ops.h"
#include "cpu/block_softmax.h"
#include "cpu/fast_exp.h"
#include "cpu/rows.h"
#include "cpu/vec.h"

namespace graphloc {
namespace {

// The p-weighted sums of the source rows for the G heads h0 .. h0 + G - 1, each divided by
// its head's normaliser s[h]. T > 0: T channels of each of the G heads at a time in
// registers, so one sweep over the row's edges serves G heads (G * T <= 64: 4 heads of 16
// channels take one sweep, not four). T = 0 (any width, G = 1): through the L1-resident
// `acc`. The first sweep prefetches the source rows of the edges before `ahead`.
template <int T, int G, typename acc_t, typename scalar_t, typename index_t>
inline void weighted_head_sum(const index_t* row_indices, const acc_t* p, int64_t degree,
                              int64_t ahead, int64_t H, int64_t h0, int64_t C, const scalar_t* x,
                              const acc_t* s, acc_t* acc, scalar_t* out) {
  const int64_t K = H * C;
  acc_t scale[G];
  for (int g = 0; g < G; ++g)  // empty row or fully masked head: 0
    scale[g] = s[h0 + g] == acc_t(0) ? acc_t(0) : acc_t(1) / s[h0 + g];
  if constexpr (T == 0) {
    static_assert(G == 1, "run-time widths take one head per sweep");
    std::fill(acc, acc + C, acc_t(0));
    for (int64_t e = 0; e < degree; ++e) {
      if (h0 == 0 && e < ahead)
        prefetch_row(x + static_cast<int64_t>(row_indices[e + kPrefetchDistance]) * K, K);
      const acc_t w = p[e * H + h0];
      const scalar_t* __restrict__ xh = x + static_cast<int64_t>(row_indices[e]) * K + h0 * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) acc[c] += w * static_cast<acc_t>(xh[c]);
    }
    for (int64_t c = 0; c < C; ++c) out[h0 * C + c] = static_cast<scalar_t>(acc[c] * scale[0]);
  } else {
    for (int64_t t0 = 0; t0 < C; t0 += T) {
      acc_t a[G][T] = {};
      for (int64_t e = 0; e < degree; ++e) {
        if (h0 == 0 && t0 == 0 && e < ahead)
          prefetch_row(x + static_cast<int64_t>(row_indices[e + kPrefetchDistance]) * K, K);
        const scalar_t* __restrict__ xr =
            x + static_cast<int64_t>(row_indices[e]) * K + h0 * C + t0;
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const acc_t w = p[e * H + h0 + g];
#pragma GCC unroll 64
          for (int f = 0; f < T; ++f) a[g][f] += w * static_cast<acc_t>(xr[g * C + f]);
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g)
#pragma GCC unroll 64
        for (int f = 0; f < T; ++f)
          out[(h0 + g) * C + t0 + f] = static_cast<scalar_t>(a[g][f] * scale[g]);
    }
  }
}

// Heads per sweep of weighted_head_sum: the most of 8, 4, 2 that divides H and fits 64
// register lanes of T channels each; 1 otherwise.
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

// Thread mapping: a thread owns a block of destination rows. Per block of rows: the scores
// [edges, H] copied into the accumulation type, each row's max m per head subtracted, one
// vectorised exp over the block; then per row the normaliser and the p-weighted sum of the source
// rows (prefetched ahead). Two passes over the scores instead of the online rescaling: the
// exponentials vectorise, and no accumulator is rescaled. Writes out [rows, H * C] and the
// log-sum-exp lse [rows, H].
template <typename scalar_t, typename index_t>
void attend_rows(const index_t* indptr, const index_t* indices, const scalar_t* score,
                 const scalar_t* x, int64_t num_rows, int64_t H, int64_t C, scalar_t* out,
                 scalar_t* lse) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = H * C;
  with_tile(C, [&](auto width) {
    constexpr int T = decltype(width)::value;
    const int group = heads_per_sweep(H, T);
    parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
      std::vector<acc_t> acc(C), m, s(H), p;
      const int64_t chunk_end = indptr[r1];
      for_row_blocks(indptr, r0, r1, [&](int64_t b0, int64_t b1) {
        const int64_t e0 = indptr[b0];
        block_softmax_numerators(indptr, b0, b1, H, score + e0 * H, p, m);
        for (int64_t i = b0; i < b1; ++i) {
          const int64_t begin = indptr[i], degree = indptr[i + 1] - begin;
          // edges e < ahead prefetch the source row kPrefetchDistance edges on, within the chunk
          const int64_t ahead = chunk_end - kPrefetchDistance - begin;
          const acc_t* row = p.data() + (begin - e0) * H;
          with_heads(
              H, [&](auto heads) { row_sums<decltype(heads)::value>(row, degree, H, s.data()); });
          with_heads_per_sweep<T>(group, [&](auto per_sweep) {
            constexpr int G = decltype(per_sweep)::value;
            if constexpr (G > 0)  // group >= 1 here
              for (int64_t h = 0; h < H; h += G)
                weighted_head_sum<T, G>(indices + begin, row, degree, ahead, H, h, C, x, s.data(),
                                        acc.data(), out + i * K);
          });
          for (int64_t h = 0; h < H; ++h) {
            const acc_t mh = m[(i - b0) * H + h];
            lse[i * H + h] =
                static_cast<scalar_t>(s[h] == acc_t(0) ? acc_t(0) : mh + std::log(s[h]));
          }
        }
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
      attend_rows<scalar_t, index_t>(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(),
                                     sc.data_ptr<scalar_t>(), xc.data_ptr<scalar_t>(), num_rows, H,
                                     C, out.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>());
    });
  });
  return {out, lse};
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
template <typename acc_t, int T = 0, typename a_t, typename b_t>
inline acc_t head_dot(const a_t* a, const b_t* b, int64_t C) {
  if constexpr (T == 0) {
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

// alpha_e = score_e - lse_i for the edges of the rows [r0, r1), before the exp. HT > 1
// (float or double): one [HT] vector per edge, H a run-time loop otherwise.
template <int HT, typename scalar_t, typename index_t, typename acc_t>
inline void shift_by_lse(const index_t* indptr, int64_t r0, int64_t r1, const scalar_t* score,
                         const scalar_t* lse, int64_t H, acc_t* alpha) {
  if constexpr (short_row_vectors<HT, acc_t>() && std::is_same_v<scalar_t, acc_t>) {
    for (int64_t i = r0; i < r1; ++i) {
      const HeadVec<HT, acc_t> l = load_vec<acc_t, HT>(lse + i * HT);
      for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e)
        store_vec<acc_t, HT>(alpha + e * HT, load_vec<acc_t, HT>(score + e * HT) - l);
    }
  } else {
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e)
        for (int64_t h = 0; h < H; ++h)
          alpha[e * H + h] =
              static_cast<acc_t>(score[e * H + h]) - static_cast<acc_t>(lse[i * H + h]);
  }
}

// Backward, pass 1 (rows of the CSR): the attention weights alpha_e = exp(score_e - lse_i),
// recomputed from lse into `alpha` [E, H], which is the score gradient's own buffer when
// that is asked for: nothing [E, H] is kept between forward and backward. One vectorised
// exp per chunk of rows (a chunk's edges are contiguous). With `base` (the score gradient
// asked for), also base_i = grad_lse_i - <g_i, out_i> per head: rows of g and out are read
// in order here, so pass 2 gathers H values per edge instead of the row of out.
template <int T, typename scalar_t, typename index_t, typename acc_t>
void attention_weights(const index_t* indptr, const scalar_t* score, const scalar_t* lse,
                       const scalar_t* out, const scalar_t* grad, const scalar_t* grad_lse,
                       int64_t num_rows, int64_t H, int64_t C, acc_t* alpha, acc_t* base) {
  const int64_t K = H * C;
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    with_heads(H, [&](auto heads) {
      shift_by_lse<decltype(heads)::value>(indptr, r0, r1, score, lse, H, alpha);
    });
    for (int64_t i = r0; i < r1; ++i) {
      if (base)
        for (int64_t h = 0; h < H; ++h)
          base[i * H + h] = (grad_lse ? static_cast<acc_t>(grad_lse[i * H + h]) : acc_t(0)) -
                            head_dot<acc_t, T>(grad + i * K + h * C, out + i * K + h * C, C);
    }
    exp_in_place(alpha + static_cast<int64_t>(indptr[r0]) * H,
                 static_cast<int64_t>(indptr[r1] - indptr[r0]) * H);
  });
}

// Backward, pass 2 (rows of the transpose), both gradients from one gather of g = grad_out:
// for each source j and each edge e = (j -> i), with x_j staying in L1 across j's edges,
//   d x_j += alpha_e * g_i                         (NeedX)
//   d score_e = alpha_e * (<g_i, x_j> + base_i)   per head, over alpha_e (NeedScore).
// Each edge is visited once, so the in-place write is safe. Computing the score gradient
// here rather than over the CSR rows saves a second gather pass (of the rows of x).

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
// registers. Entries before `ahead_end` prefetch kPrefetchDistance entries on (first sweep
// only). Explicit vectors: GCC left the plain loops scalar, 64 accumulators on the stack.
template <bool NeedScore, bool NeedX, int T, int G, typename acc_t, typename index_t>
inline void transpose_sweep(const index_t* csc_indices, const index_t* csc_perm, int64_t c0,
                            int64_t c1, int64_t ahead_end, const acc_t* __restrict__ grad,
                            const acc_t* __restrict__ xj, const acc_t* __restrict__ base, int64_t H,
                            int64_t h0, acc_t* __restrict__ alpha_to_grad,
                            acc_t* __restrict__ grad_xj) {
  using V = typename Vec<acc_t, T>::type;
  const int64_t K = H * T;
  V a[G] = {}, xv[G];
  for (int g = 0; g < G; ++g) xv[g] = load_vec<acc_t, T>(xj + (h0 + g) * T);
  for (int64_t c = c0; c < c1; ++c) {
    if (h0 == 0 && c < ahead_end)
      prefetch_entry<NeedScore>(csc_indices, csc_perm, c + kPrefetchDistance, grad, base, H, K,
                                alpha_to_grad);
    const int64_t i = csc_indices[c], e = csc_perm[c];
    const acc_t* gi = grad + i * K + h0 * T;
    acc_t* we = alpha_to_grad + e * H + h0;
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const V gv = load_vec<acc_t, T>(gi + g * T);
      const acc_t w = we[g];
      if constexpr (NeedX) a[g] += w * gv;
      if constexpr (NeedScore) we[g] = w * (lane_sum<T, acc_t>(gv * xv[g]) + base[i * H + h0 + g]);
    }
  }
  if constexpr (NeedX)
    for (int g = 0; g < G; ++g) store_vec<acc_t, T>(grad_xj + (h0 + g) * T, a[g]);
}

// All heads of any width in one sweep over j's entries, d x through the L1-resident `acc`.
template <bool NeedScore, bool NeedX, int T, typename scalar_t, typename index_t, typename acc_t>
inline void transpose_sweep_any(const index_t* csc_indices, const index_t* csc_perm, int64_t c0,
                                int64_t c1, int64_t ahead_end, const scalar_t* grad,
                                const scalar_t* xj, const acc_t* base, int64_t H, int64_t C,
                                acc_t* alpha_to_grad, acc_t* acc, scalar_t* grad_xj) {
  const int64_t K = H * C;
  if constexpr (NeedX) std::fill(acc, acc + K, acc_t(0));
  for (int64_t c = c0; c < c1; ++c) {
    if (c < ahead_end)
      prefetch_entry<NeedScore>(csc_indices, csc_perm, c + kPrefetchDistance, grad, base, H, K,
                                alpha_to_grad);
    const int64_t i = csc_indices[c], e = csc_perm[c];
    const scalar_t* __restrict__ gi = grad + i * K;
    for (int64_t h = 0; h < H; ++h) {
      const acc_t w = alpha_to_grad[e * H + h];
      if constexpr (NeedX) {
        acc_t* __restrict__ a = acc + h * C;
#pragma omp simd
        for (int64_t k = 0; k < C; ++k) a[k] += w * static_cast<acc_t>(gi[h * C + k]);
      }
      if constexpr (NeedScore)
        alpha_to_grad[e * H + h] =
            w * (head_dot<acc_t, T>(gi + h * C, xj + h * C, C) + base[i * H + h]);
    }
  }
  if constexpr (NeedX)
    for (int64_t k = 0; k < K; ++k) grad_xj[k] = static_cast<scalar_t>(acc[k]);
}

// Thread mapping: a thread owns a block of source rows j of the transpose. G > 0 (float or
// double, head width C == T): G heads per register sweep; G = 0: transpose_sweep_any.
template <bool NeedScore, bool NeedX, int T, int G, typename scalar_t, typename index_t,
          typename acc_t>
void attention_transpose_grads(const index_t* csc_indptr, const index_t* csc_indices,
                               const index_t* csc_perm, const scalar_t* grad, const scalar_t* x,
                               const acc_t* base, int64_t num_src, int64_t H, int64_t C,
                               acc_t* alpha_to_grad, scalar_t* grad_x) {
  const int64_t K = H * C;
  constexpr bool kSweeps = G > 0 && std::is_same_v<scalar_t, acc_t>;
  parallel_rows(csc_indptr, num_src, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> acc(kSweeps ? 0 : K);
    const int64_t ahead_end = static_cast<int64_t>(csc_indptr[r1]) - kPrefetchDistance;
    for (int64_t j = r0; j < r1; ++j) {
      const int64_t c0 = csc_indptr[j], c1 = csc_indptr[j + 1];
      scalar_t* grad_xj = NeedX ? grad_x + j * K : nullptr;
      if constexpr (kSweeps) {
        for (int64_t h0 = 0; h0 < H; h0 += G)
          transpose_sweep<NeedScore, NeedX, T, G>(csc_indices, csc_perm, c0, c1, ahead_end, grad,
                                                  x + j * K, base, H, h0, alpha_to_grad, grad_xj);
      } else {
        transpose_sweep_any<NeedScore, NeedX, T>(csc_indices, csc_perm, c0, c1, ahead_end, grad,
                                                 x + j * K, base, H, C, alpha_to_grad, acc.data(),
                                                 grad_xj);
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor> segment_attention_backward_cpu(
    const at::Tensor& score, const at::Tensor& lse, const at::Tensor& out,
    const at::Tensor& grad_out, const c10::optional<at::Tensor>& grad_lse, const at::Tensor& indptr,
    const at::Tensor& indices, const at::Tensor& x, const at::Tensor& csc_indptr,
    const at::Tensor& csc_indices, const at::Tensor& csc_perm, bool need_score, bool need_x) {
  check_attention_args(score, indptr, indices, x);
  check_attention_backward_args(score, lse, out, grad_out, grad_lse, indptr, x, csc_indptr,
                                csc_indices, csc_perm);
  const int64_t num_rows = indptr.numel() - 1, H = score.size(1), C = x.size(1) / H;
  auto sc = score.contiguous(), lc = lse.contiguous(), g = grad_out.contiguous();
  at::Tensor grad_x = need_x ? empty_output(x.sizes(), x.options()) : at::empty({0}, x.options());
  // alpha in the accumulation type, becoming the score gradient in place (cast at the end
  // for bfloat16 scores)
  const auto acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor alpha = empty_output(sc.sizes(), sc.options().dtype(acc_type));
  at::Tensor base = need_score ? at::empty(lc.sizes(), lc.options().dtype(acc_type)) : at::Tensor();
  auto oc = out.contiguous(), xc = x.contiguous(), cic = csc_indices.contiguous(),
       cpc = csc_perm.contiguous();
  const at::Tensor gl = grad_lse ? grad_lse->contiguous() : at::Tensor();
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::segment_attention_backward", [&] {
    using acc_t = typename AccType<scalar_t>::type;
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      acc_t* a = alpha.data_ptr<acc_t>();
      acc_t* b = need_score ? base.data_ptr<acc_t>() : nullptr;
      with_tile(C, [&](auto width) {
        constexpr int T = decltype(width)::value;
        attention_weights<T>(
            indptr.data_ptr<index_t>(), sc.data_ptr<scalar_t>(), lc.data_ptr<scalar_t>(),
            oc.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
            gl.defined() ? gl.data_ptr<scalar_t>() : nullptr, num_rows, H, C, a, b);
        // heads per register sweep when a head is one tile (0: the L1 path); both flags as
        // compile-time constants (with_constant<1>: 1 if set, else 0)
        constexpr bool kVectors = std::is_same_v<scalar_t, acc_t>;  // not bfloat16
        const int group = kVectors && T > 0 && C == T ? heads_per_sweep(H, T) : 0;
        with_heads_per_sweep<T>(group, [&](auto per_sweep) {
          constexpr int G = decltype(per_sweep)::value;
          if constexpr (G == 0 || (kVectors && T > 0))  // G > 0: a head is one tile
            with_constant<1>(need_score, [&](auto score_flag) {
              with_constant<1>(need_x, [&](auto x_flag) {
                constexpr bool kScore = decltype(score_flag)::value, kX = decltype(x_flag)::value;
                if constexpr (kScore || kX)
                  attention_transpose_grads<kScore, kX, T, G>(
                      csc_indptr.data_ptr<index_t>(), cic.data_ptr<index_t>(),
                      cpc.data_ptr<index_t>(), g.data_ptr<scalar_t>(), xc.data_ptr<scalar_t>(), b,
                      x.size(0), H, C, a, kX ? grad_x.data_ptr<scalar_t>() : nullptr);
              });
            });
        });
      });
    });
  });
  at::Tensor grad_score =
      need_score ? alpha.to(score.scalar_type()) : at::empty({0}, score.options());
  return {grad_score, grad_x};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("segment_attention", &segment_attention_cpu);
  m.impl("segment_attention_backward", &segment_attention_backward_cpu);
}

}  // namespace graphloc
