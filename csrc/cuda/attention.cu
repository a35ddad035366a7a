// CUDA kernels of segment_attention: online softmax of edge scores and the weighted sum of
// source rows per destination row, without per-edge message tensors, and its backward in
// two passes (the CSR rows, then the transpose) with no [E, H] weights kept in between.
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/kernels.h"

namespace graphloc {
namespace cuda {
namespace {

constexpr int kUnroll = 4;  // edges whose rows are loaded before any is folded in

template <typename acc_t>
__device__ __forceinline__ acc_t minus_infinity() {
  return -static_cast<acc_t>(INFINITY);
}

// One lane's online softmax over its head's scores: the running max m, the sum s of
// exp(score - m) and the weighted sum acc of its V channels, all rescaled when m grows.
template <typename acc_t, int V>
struct OnlineSoftmax {
  acc_t m = minus_infinity<acc_t>(), s = 0, acc[V] = {};

  template <typename scalar_t>
  __device__ __forceinline__ void fold(acc_t v, const Pack<scalar_t, V>& xs) {
    if (v == minus_infinity<acc_t>()) return;  // masked: weight 0
    acc_t p = 1;
    if (v > m) {
      const acc_t scale = exp(m - v);
      s *= scale;
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] *= scale;
      m = v;
    } else {
      p = exp(v - m);  // a NaN score makes p, and so the row, NaN
    }
    s += p;
#pragma unroll
    for (int u = 0; u < V; ++u) acc[u] += p * static_cast<acc_t>(xs.v[u]);
  }
};

// A lane's pack as the sum of the normalised weights' products, sum_e exp(score - m) * scale
// * x_e, into sums: where the running weighted sum overflowed before its division (each
// weight <= 1: values within a factor of the degree of the type's largest) while the
// softmax-weighted sum is finite, as the pure-torch twin and PyG form it; also where the
// inputs are not finite. Reads the row's edges itself (no shuffle: other lanes of the group
// may not take this path).
template <typename scalar_t, typename index_t, typename acc_t, int V>
__device__ __noinline__ void normalised_sum(const index_t* __restrict__ indptr,
                                            const index_t* __restrict__ indices,
                                            const scalar_t* __restrict__ score,
                                            const scalar_t* __restrict__ x, int64_t row, int64_t H,
                                            int64_t h, int64_t K, int64_t k0, acc_t m, acc_t scale,
                                            acc_t (&sums)[V]) {
#pragma unroll
  for (int u = 0; u < V; ++u) sums[u] = 0;
  for (int64_t e = indptr[row]; e < indptr[row + 1]; ++e) {
    const acc_t v = static_cast<acc_t>(score[e * H + h]);
    if (v == minus_infinity<acc_t>()) continue;  // masked: weight 0, as fold
    const acc_t w = exp(v - m) * scale;
    const Pack<scalar_t, V> xs =
        load_pack<scalar_t, V>(x + static_cast<int64_t>(indices[e]) * K + k0);
#pragma unroll
    for (int u = 0; u < V; ++u) sums[u] += w * static_cast<acc_t>(xs.v[u]);
  }
}

// Thread mapping: a row group (common.cuh) per destination row, each lane a pack of V
// channels of one head (coalesced reads of x), running its head's online softmax; the
// group shares the row's source ids by shuffle and each lane has kUnroll source rows in
// flight. The first lane of each head writes its lse.
template <typename scalar_t, typename index_t, int V>
__global__ void __launch_bounds__(kGroupBlock)
    attention_kernel(const index_t* __restrict__ indptr, const index_t* __restrict__ indices,
                     const scalar_t* __restrict__ score, const scalar_t* __restrict__ x,
                     int64_t num_rows, int64_t H, int64_t C, int group, scalar_t* __restrict__ out,
                     scalar_t* __restrict__ lse) {
  using acc_t = typename AccType<scalar_t>::type;
  const RowGroup g = row_group(group);
  if (g.row >= num_rows) return;  // the whole group leaves together
  const int64_t K = H * C, packs = K / V, begin = indptr[g.row], end = indptr[g.row + 1];
  for (int64_t c0 = 0; c0 < packs; c0 += g.size) {
    const int64_t k0 = (c0 + g.lane) * V;
    const bool active = c0 + g.lane < packs;
    const int64_t h = active ? k0 / C : 0;
    OnlineSoftmax<acc_t, V> state;
    for (int64_t base = begin; base < end; base += g.size) {
      const int64_t mine = base + g.lane;
      const int64_t src_mine = mine < end ? static_cast<int64_t>(indices[mine]) : 0;
      const int n = static_cast<int>(end - base < g.size ? end - base : g.size);
      int t = 0;
      for (; t + kUnroll <= n; t += kUnroll) {
        Pack<scalar_t, V> xs[kUnroll];
        acc_t v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t j = from_lane(g, src_mine, t + u);
          if (active) {
            xs[u] = load_pack<scalar_t, V>(x + j * K + k0);
            v[u] = static_cast<acc_t>(score[(base + t + u) * H + h]);
          }
        }
        if (active) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) state.fold(v[u], xs[u]);
        }
      }
      for (; t < n; ++t) {
        const int64_t j = from_lane(g, src_mine, t);
        if (active)
          state.fold(static_cast<acc_t>(score[(base + t) * H + h]),
                     load_pack<scalar_t, V>(x + j * K + k0));
      }
    }
    if (!active) continue;
    if (state.m == static_cast<acc_t>(INFINITY)) state.s = static_cast<acc_t>(NAN);  // as torch
    const bool empty = state.s == acc_t(0);
    const acc_t scale = empty ? acc_t(0) : acc_t(1) / state.s;
    acc_t sums[V];
    bool overflowed = false;
#pragma unroll
    for (int u = 0; u < V; ++u) {
      sums[u] = state.acc[u] * scale;
      overflowed |= (sums[u] - sums[u]) != acc_t(0);  // inf or NaN
    }
    if (overflowed)
      normalised_sum(indptr, indices, score, x, g.row, H, h, K, k0, state.m, scale, sums);
    Pack<scalar_t, V> result;
#pragma unroll
    for (int u = 0; u < V; ++u) result.v[u] = static_cast<scalar_t>(sums[u]);
    store_pack<scalar_t, V>(out + g.row * K + k0, result);
    if (k0 % C == 0)
      lse[g.row * H + h] = static_cast<scalar_t>(empty ? acc_t(0) : state.m + log(state.s));
  }
}

template <typename acc_t, typename scalar_t, int V>
__device__ __forceinline__ acc_t pack_dot(const Pack<scalar_t, V>& a, const Pack<scalar_t, V>& b) {
  acc_t sum = 0;
#pragma unroll
  for (int u = 0; u < V; ++u) sum += static_cast<acc_t>(a.v[u]) * static_cast<acc_t>(b.v[u]);
  return sum;
}

// Backward, pass 1: a row group per destination row i, the whole row in one sweep (at
// most a warp of packs), the lanes of a head forming an aligned block of `span` lanes.
// Per head: the softmax weights recomputed as exp(score - lse) divided by their sum (that
// division takes out lse's rounding at the scores' scale, as the CPU kernel), whose shift
// and inverse sum go to `norm` [rows, H, 2] for pass 2; with the score gradient,
//   d score_e = alpha_e * (<g_i, x_j> + grad_lse_i - <g_i, out_i>)   per head,
// each dot product summed over the head's lanes by shuffles.
template <typename scalar_t, typename index_t, int V, bool NeedScore>
__global__ void __launch_bounds__(kGroupBlock) attention_rows_backward_kernel(
    const index_t* __restrict__ indptr, const index_t* __restrict__ indices,
    const scalar_t* __restrict__ score, const scalar_t* __restrict__ lse,
    const scalar_t* __restrict__ out, const scalar_t* __restrict__ grad,
    const scalar_t* __restrict__ grad_lse, const scalar_t* __restrict__ x, int64_t num_rows,
    int64_t H, int64_t C, int group, int span, scalar_t* __restrict__ grad_score,
    typename AccType<scalar_t>::type* __restrict__ norm) {
  using acc_t = typename AccType<scalar_t>::type;
  const RowGroup g = row_group(group);
  if (g.row >= num_rows) return;
  const int64_t i = g.row, K = H * C, k0 = g.lane * V, begin = indptr[i], end = indptr[i + 1];
  const bool active = k0 < K;
  const int64_t h = active ? k0 / C : 0;
  const bool leader = active && k0 % C == 0;  // writes its head's values
  const acc_t shift = active ? static_cast<acc_t>(lse[i * H + h]) : acc_t(0);
  acc_t sum = 0;
  if (active) {
#pragma unroll 4
    for (int64_t e = begin; e < end; ++e) sum += exp(static_cast<acc_t>(score[e * H + h]) - shift);
  }
  const acc_t inverse = sum == acc_t(0) ? acc_t(0) : acc_t(1) / sum;
  if (leader) norm[(i * H + h) * 2] = shift, norm[(i * H + h) * 2 + 1] = inverse;
  if (!NeedScore) return;
  Pack<scalar_t, V> gi = {}, oi = {};
  if (active)
    gi = load_pack<scalar_t, V>(grad + i * K + k0), oi = load_pack<scalar_t, V>(out + i * K + k0);
  const acc_t base = (grad_lse && active ? static_cast<acc_t>(grad_lse[i * H + h]) : acc_t(0)) -
                     span_sum(g, pack_dot<acc_t>(gi, oi), span);
  auto write = [&](int64_t e, acc_t score_e, acc_t partial_dot) {
    const acc_t dot = span_sum(g, partial_dot, span);
    if (leader)
      grad_score[e * H + h] = static_cast<scalar_t>(exp(score_e - shift) * inverse * (dot + base));
  };
  for (int64_t base_e = begin; base_e < end; base_e += g.size) {
    const int64_t mine = base_e + g.lane;
    const int64_t src_mine = mine < end ? static_cast<int64_t>(indices[mine]) : 0;
    const int n = static_cast<int>(end - base_e < g.size ? end - base_e : g.size);
    int t = 0;
    for (; t + kUnroll <= n; t += kUnroll) {
      Pack<scalar_t, V> xs[kUnroll] = {};
      acc_t v[kUnroll] = {};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t j = from_lane(g, src_mine, t + u);
        if (active) {
          xs[u] = load_pack<scalar_t, V>(x + j * K + k0);
          v[u] = static_cast<acc_t>(score[(base_e + t + u) * H + h]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) write(base_e + t + u, v[u], pack_dot<acc_t>(gi, xs[u]));
    }
    for (; t < n; ++t) {
      const int64_t j = from_lane(g, src_mine, t), e = base_e + t;
      Pack<scalar_t, V> xs = {};
      acc_t v = 0;
      if (active)
        xs = load_pack<scalar_t, V>(x + j * K + k0), v = static_cast<acc_t>(score[e * H + h]);
      write(e, v, pack_dot<acc_t>(gi, xs));
    }
  }
}

// Backward, pass 2: a row group per source j over the transpose, each lane a pack of V
// channels: d x_j = sum over j's edges e = (j -> i) of alpha_e * g_i, alpha_e recomputed
// from the score and pass 1's shift and inverse sum of (i, head).
template <typename scalar_t, typename index_t, int V>
__global__ void __launch_bounds__(kGroupBlock)
    attention_cols_backward_kernel(const index_t* __restrict__ csc_indptr,
                                   const index_t* __restrict__ csc_indices,
                                   const index_t* __restrict__ csc_perm,
                                   const scalar_t* __restrict__ score,
                                   const typename AccType<scalar_t>::type* __restrict__ norm,
                                   const scalar_t* __restrict__ grad, int64_t num_src, int64_t H,
                                   int64_t C, int group, scalar_t* __restrict__ grad_x) {
  using acc_t = typename AccType<scalar_t>::type;
  const RowGroup g = row_group(group);
  if (g.row >= num_src) return;
  const int64_t K = H * C, packs = K / V, begin = csc_indptr[g.row], end = csc_indptr[g.row + 1];
  for (int64_t c0 = 0; c0 < packs; c0 += g.size) {
    const int64_t k0 = (c0 + g.lane) * V;
    const bool active = c0 + g.lane < packs;
    const int64_t h = active ? k0 / C : 0;
    acc_t acc[V] = {};
    auto fold = [&](const Pack<scalar_t, V>& gs, acc_t w) {
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] += w * static_cast<acc_t>(gs.v[u]);
    };
    auto weight = [&](int64_t i, int64_t e) {
      const acc_t* n = norm + (i * H + h) * 2;
      return exp(static_cast<acc_t>(score[e * H + h]) - n[0]) * n[1];
    };
    for (int64_t base = begin; base < end; base += g.size) {
      const int64_t mine = base + g.lane;
      const int64_t dst_mine = mine < end ? static_cast<int64_t>(csc_indices[mine]) : 0;
      const int64_t edge_mine = mine < end ? static_cast<int64_t>(csc_perm[mine]) : 0;
      const int n = static_cast<int>(end - base < g.size ? end - base : g.size);
      int t = 0;
      for (; t + kUnroll <= n; t += kUnroll) {
        Pack<scalar_t, V> gs[kUnroll];
        acc_t w[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t i = from_lane(g, dst_mine, t + u), e = from_lane(g, edge_mine, t + u);
          if (active) gs[u] = load_pack<scalar_t, V>(grad + i * K + k0), w[u] = weight(i, e);
        }
        if (active) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) fold(gs[u], w[u]);
        }
      }
      for (; t < n; ++t) {
        const int64_t i = from_lane(g, dst_mine, t), e = from_lane(g, edge_mine, t);
        if (active) fold(load_pack<scalar_t, V>(grad + i * K + k0), weight(i, e));
      }
    }
    if (!active) continue;
    Pack<scalar_t, V> result;
#pragma unroll
    for (int u = 0; u < V; ++u) result.v[u] = static_cast<scalar_t>(acc[u]);
    store_pack<scalar_t, V>(grad_x + g.row * K + k0, result);
  }
}

// Pass 1's layout for rows of H heads of C channels: the pack width, or 0 where the row
// does not fit one sweep of a group or a head's lanes are no aligned power-of-two block.
template <typename scalar_t>
int rows_backward_width(int64_t H, int64_t C, const void* const* rows, int num_rows) {
  for (int V : {pack_width<scalar_t>(H * C, C, rows, num_rows), 1}) {
    const int64_t packs = H * C / V, span = C / V;
    const bool aligned_heads = H == 1 || (span & (span - 1)) == 0;
    if (packs <= kWarp && aligned_heads) return V;
  }
  return 0;
}

}  // namespace

template <typename scalar_t, typename index_t>
cudaError_t segment_attention(const index_t* indptr, const index_t* indices, const scalar_t* score,
                              const scalar_t* x, int64_t num_rows, int64_t heads, int64_t channels,
                              scalar_t* out, scalar_t* lse, cudaStream_t stream) {
  if (num_rows == 0 || heads * channels == 0) return cudaSuccess;
  const int64_t K = heads * channels;
  const void* rows[] = {x, out};
  const int V = pack_width<scalar_t>(K, channels, rows, 2);
  const int group = group_size(K / V);
  with_pack_width<scalar_t>(V, [&](auto width) {
    attention_kernel<scalar_t, index_t, decltype(width)::value>
        <<<group_blocks(num_rows, group), kGroupBlock, 0, stream>>>(
            indptr, indices, score, x, num_rows, heads, channels, group, out, lse);
  });
  return cudaGetLastError();
}

template <typename scalar_t>
bool attention_backward_fits(int64_t heads, int64_t channels, const scalar_t* x,
                             const scalar_t* out, const scalar_t* grad) {
  const void* rows[] = {x, out, grad};
  return rows_backward_width<scalar_t>(heads, channels, rows, 3) != 0;
}

template <typename scalar_t, typename index_t>
cudaError_t segment_attention_backward(const AttentionBackward<scalar_t, index_t>& a,
                                       cudaStream_t stream) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = a.heads * a.channels;
  if (K == 0) return cudaSuccess;
  const void* rows[] = {a.x, a.out, a.grad};
  const int V = rows_backward_width<scalar_t>(a.heads, a.channels, rows, 3);
  if (V == 0) return cudaErrorNotSupported;  // the binding checks attention_backward_fits
  if (a.num_rows > 0) {
    const int group = group_size(K / V);
    const int span = a.heads == 1 ? group : static_cast<int>(a.channels / V);
    with_pack_width<scalar_t>(V, [&](auto width) {
      auto launch = [&](auto need_score) {
        attention_rows_backward_kernel<scalar_t, index_t, decltype(width)::value,
                                       decltype(need_score)::value>
            <<<group_blocks(a.num_rows, group), kGroupBlock, 0, stream>>>(
                a.indptr, a.indices, a.score, a.lse, a.out, a.grad, a.grad_lse, a.x, a.num_rows,
                a.heads, a.channels, group, span, a.grad_score, a.norm);
      };
      a.grad_score ? launch(std::true_type{}) : launch(std::false_type{});
    });
  }
  if (!a.grad_x || a.num_src == 0) return cudaGetLastError();
  const void* columns[] = {a.grad, a.grad_x};
  const int W = pack_width<scalar_t>(K, a.channels, columns, 2);
  const int group = group_size(K / W);
  with_pack_width<scalar_t>(W, [&](auto width) {
    attention_cols_backward_kernel<scalar_t, index_t, decltype(width)::value>
        <<<group_blocks(a.num_src, group), kGroupBlock, 0, stream>>>(
            a.csc_indptr, a.csc_indices, a.csc_perm, a.score, static_cast<const acc_t*>(a.norm),
            a.grad, a.num_src, a.heads, a.channels, group, a.grad_x);
  });
  return cudaGetLastError();
}

#define GL_INSTANTIATE_ATTENTION(scalar_t, index_t)                                                \
  template cudaError_t segment_attention<scalar_t, index_t>(                                       \
      const index_t*, const index_t*, const scalar_t*, const scalar_t*, int64_t, int64_t, int64_t, \
      scalar_t*, scalar_t*, cudaStream_t);                                                         \
  template cudaError_t segment_attention_backward<scalar_t, index_t>(                              \
      const AttentionBackward<scalar_t, index_t>&, cudaStream_t);
GL_INSTANTIATE_FOR_TYPES(GL_INSTANTIATE_ATTENTION)

#define GL_INSTANTIATE_FITS(scalar_t)                                                \
  template bool attention_backward_fits<scalar_t>(int64_t, int64_t, const scalar_t*, \
                                                  const scalar_t*, const scalar_t*);
GL_INSTANTIATE_FITS(float)
GL_INSTANTIATE_FITS(double)
GL_INSTANTIATE_FITS(__nv_bfloat16)

}  // namespace cuda
}  // namespace graphloc
