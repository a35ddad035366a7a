// CUDA kernels of the spmm family: spmm / segment_reduce, the max/min backward over the
// transpose, and gather_csr. Pull-based over CSR rows: sums are written without atomics.
#include "cuda/common.cuh"
#include "cuda/kernels.h"

namespace graphloc {
namespace cuda {
namespace {

constexpr int kUnroll = 4;  // edges whose source rows are loaded before any is summed

// Folds edge e's source row (pack `xs` at channel k0, weight w) into lane's accumulators.
template <typename acc_t, Reduce R, typename scalar_t, int V>
__device__ __forceinline__ void fold_pack(acc_t* acc, int64_t* best, const Pack<scalar_t, V>& xs,
                                          acc_t w, int64_t e, bool first) {
#pragma unroll
  for (int v = 0; v < V; ++v)
    Reducer<acc_t, R>::update(acc[v], w * static_cast<acc_t>(xs.v[v]), best[v], e, first);
}

// Thread mapping: a row group (common.cuh) per destination row, each lane a pack of V
// channels (coalesced 16-byte reads of x where V > 1); rows wider than the group take
// several sweeps. The group loads G source ids at once and shares them by shuffle, and each
// lane has kUnroll source rows in flight before it folds them in, in edge order (max / min
// keep the first winner, as the CPU kernel).
template <typename scalar_t, typename index_t, Reduce R, bool kGather, int V>
__global__ void __launch_bounds__(kGroupBlock)
    spmm_kernel(const index_t* __restrict__ indptr, const index_t* __restrict__ indices,
                const scalar_t* __restrict__ value, int64_t heads, const scalar_t* __restrict__ x,
                int64_t num_rows, int64_t num_edges, int64_t K, int group,
                scalar_t* __restrict__ out, index_t* __restrict__ arg) {
  using acc_t = typename AccType<scalar_t>::type;
  using Red = Reducer<acc_t, R>;
  const RowGroup g = row_group(group);
  if (g.row >= num_rows) return;  // the whole group leaves together
  const int64_t begin = indptr[g.row], end = indptr[g.row + 1], packs = K / V;
  for (int64_t c0 = 0; c0 < packs; c0 += g.size) {
    const int64_t c = c0 + g.lane, k0 = c * V;
    const bool active = c < packs;
    const int64_t head = active && value ? k0 / (K / heads) : 0;
    acc_t acc[V];
    int64_t best[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = Red::init(), best[v] = num_edges;
    auto weight = [&](int64_t e) {
      return value ? static_cast<acc_t>(value[e * heads + head]) : acc_t(1);
    };
    for (int64_t base = begin; base < end; base += g.size) {
      const int64_t mine = base + g.lane;
      const int64_t src_mine =
          mine < end ? (kGather ? static_cast<int64_t>(indices[mine]) : mine) : 0;
      const int n = static_cast<int>(end - base < g.size ? end - base : g.size);
      int t = 0;
      for (; t + kUnroll <= n; t += kUnroll) {
        Pack<scalar_t, V> xs[kUnroll];
        acc_t w[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t j = from_lane(g, src_mine, t + u);
          if (active) xs[u] = load_pack<scalar_t, V>(x + j * K + k0), w[u] = weight(base + t + u);
        }
        if (active) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u)
            fold_pack<acc_t, R>(acc, best, xs[u], w[u], base + t + u, base + t + u == begin);
        }
      }
      for (; t < n; ++t) {
        const int64_t j = from_lane(g, src_mine, t);
        if (active)
          fold_pack<acc_t, R>(acc, best, load_pack<scalar_t, V>(x + j * K + k0), weight(base + t),
                              base + t, base + t == begin);
      }
    }
    if (!active) continue;
    Pack<scalar_t, V> result;
#pragma unroll
    for (int v = 0; v < V; ++v)
      result.v[v] = static_cast<scalar_t>(Red::finish(acc[v], end - begin));
    store_pack<scalar_t, V>(out + g.row * K + k0, result);
    if (Red::kHasArg) {
#pragma unroll
      for (int v = 0; v < V; ++v) arg[g.row * K + k0 + v] = static_cast<index_t>(best[v]);
    }
  }
}

// Thread mapping: one warp per (source row j of the transpose, 32-channel tile). Each lane
// routes grad[i, k] to j when edge e won channel k; value gradients of a head gather the
// hits of several lanes, hence the (rare: one winner per channel) atomics.
template <typename scalar_t, typename index_t>
__global__ void arg_backward_kernel(const index_t* __restrict__ cptr,
                                    const index_t* __restrict__ cidx,
                                    const index_t* __restrict__ cperm,
                                    const scalar_t* __restrict__ value, int64_t heads,
                                    const scalar_t* __restrict__ x, const index_t* __restrict__ arg,
                                    const scalar_t* __restrict__ grad, int64_t num_src, int64_t K,
                                    scalar_t* __restrict__ grad_x,
                                    scalar_t* __restrict__ grad_value) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int64_t k = static_cast<int64_t>(blockIdx.y) * kWarp + threadIdx.x;
  if (j >= num_src || k >= K) return;
  const int64_t head = k / (K / heads);
  acc_t acc = 0;
  for (int64_t c = cptr[j]; c < cptr[j + 1]; ++c) {
    const int64_t i = cidx[c], e = cperm[c];
    if (arg[i * K + k] != e) continue;
    const acc_t g = static_cast<acc_t>(grad[i * K + k]);
    acc += (value ? static_cast<acc_t>(value[e * heads + head]) : acc_t(1)) * g;
    if (grad_value)
      atomicAdd(&grad_value[e * heads + head],
                static_cast<scalar_t>(g * static_cast<acc_t>(x[j * K + k])));
  }
  grad_x[j * K + k] = static_cast<scalar_t>(acc);
}

// Thread mapping: one warp per (row, 32-channel tile); each lane copies its channel of
// src[row] to every edge of the row.
template <typename scalar_t, typename index_t>
__global__ void gather_csr_kernel(const index_t* __restrict__ indptr,
                                  const scalar_t* __restrict__ src, int64_t num_rows, int64_t K,
                                  scalar_t* __restrict__ out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int64_t k = static_cast<int64_t>(blockIdx.y) * kWarp + threadIdx.x;
  if (row >= num_rows || k >= K) return;
  const scalar_t v = src[row * K + k];
  for (int64_t e = indptr[row]; e < indptr[row + 1]; ++e) out[e * K + k] = v;
}

template <typename scalar_t, typename index_t, Reduce R>
void launch_spmm(const index_t* indptr, const index_t* indices, const scalar_t* value,
                 int64_t heads, const scalar_t* x, int64_t num_rows, int64_t num_edges, int64_t K,
                 scalar_t* out, index_t* arg, cudaStream_t stream) {
  const void* rows[] = {x, out};
  const int V = pack_width<scalar_t>(K, value ? K / heads : K, rows, 2);
  const int group = group_size(K / V);
  const dim3 grid(group_blocks(num_rows, group)), block(kGroupBlock);
  auto launch = [&](auto gather) {
    with_pack_width<scalar_t>(V, [&](auto width) {
      spmm_kernel<scalar_t, index_t, R, decltype(gather)::value, decltype(width)::value>
          <<<grid, block, 0, stream>>>(indptr, indices, value, heads, x, num_rows, num_edges, K,
                                       group, out, arg);
    });
  };
  indices ? launch(std::true_type{}) : launch(std::false_type{});
}

}  // namespace

template <typename scalar_t, typename index_t>
cudaError_t spmm(const index_t* indptr, const index_t* indices, const scalar_t* value,
                 int64_t heads, const scalar_t* x, int64_t num_rows, int64_t num_edges, int64_t K,
                 Reduce reduce, scalar_t* out, index_t* arg, cudaStream_t stream) {
  if (num_rows == 0 || K == 0) return cudaSuccess;
  // Mul is refused by the binding before it gets here (CPU only); its instantiation is inert.
  dispatch_reduce(reduce, [&](auto R) {
    launch_spmm<scalar_t, index_t, decltype(R)::value>(indptr, indices, value, heads, x, num_rows,
                                                       num_edges, K, out, arg, stream);
  });
  return cudaGetLastError();
}

template <typename scalar_t, typename index_t>
cudaError_t spmm_arg_backward(const index_t* csc_indptr, const index_t* csc_indices,
                              const index_t* csc_perm, const scalar_t* value, int64_t heads,
                              const scalar_t* x, const index_t* arg, const scalar_t* grad,
                              int64_t num_src, int64_t K, scalar_t* grad_x, scalar_t* grad_value,
                              cudaStream_t stream) {
  if (num_src == 0 || K == 0) return cudaSuccess;
  arg_backward_kernel<scalar_t, index_t>
      <<<row_channel_grid(num_src, K), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
          csc_indptr, csc_indices, csc_perm, value, heads, x, arg, grad, num_src, K, grad_x,
          grad_value);
  return cudaGetLastError();
}

template <typename scalar_t, typename index_t>
cudaError_t gather_csr(const index_t* indptr, const scalar_t* src, int64_t num_rows, int64_t K,
                       scalar_t* out, cudaStream_t stream) {
  if (num_rows == 0 || K == 0) return cudaSuccess;
  gather_csr_kernel<scalar_t, index_t>
      <<<row_channel_grid(num_rows, K), dim3(kWarp, kRowsPerBlock), 0, stream>>>(indptr, src,
                                                                                 num_rows, K, out);
  return cudaGetLastError();
}

#define GL_INSTANTIATE_SPMM(scalar_t, index_t)                                                     \
  template cudaError_t spmm<scalar_t, index_t>(                                                    \
      const index_t*, const index_t*, const scalar_t*, int64_t, const scalar_t*, int64_t, int64_t, \
      int64_t, Reduce, scalar_t*, index_t*, cudaStream_t);                                         \
  template cudaError_t spmm_arg_backward<scalar_t, index_t>(                                       \
      const index_t*, const index_t*, const index_t*, const scalar_t*, int64_t, const scalar_t*,   \
      const index_t*, const scalar_t*, int64_t, int64_t, scalar_t*, scalar_t*, cudaStream_t);      \
  template cudaError_t gather_csr<scalar_t, index_t>(const index_t*, const scalar_t*, int64_t,     \
                                                     int64_t, scalar_t*, cudaStream_t);
GL_INSTANTIATE_FOR_TYPES(GL_INSTANTIATE_SPMM)

}  // namespace cuda
}  // namespace graphloc
