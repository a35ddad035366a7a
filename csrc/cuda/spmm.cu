// CUDA kernels of the spmm family: spmm / segment_reduce, the max/min backward over the
// transpose, and gather_csr. Pull-based over CSR rows: sums are written without atomics.
#include "cuda/common.cuh"
#include "cuda/kernels.h"

namespace graphloc {
namespace cuda {
namespace {

// Thread mapping: one warp per (destination row, tile of 32 channels), a lane per channel
// (coalesced reads of x). The warp loads 32 source ids at once and broadcasts them by shuffle.
template <typename scalar_t, typename index_t, Reduce R, bool kGather>
__global__ void spmm_kernel(const index_t* __restrict__ indptr, const index_t* __restrict__ indices,
                            const scalar_t* __restrict__ value, int64_t heads,
                            const scalar_t* __restrict__ x, int64_t num_rows, int64_t num_edges,
                            int64_t K, scalar_t* __restrict__ out, index_t* __restrict__ arg) {
  using acc_t = typename AccType<scalar_t>::type;
  using Red = Reducer<acc_t, R>;
  const int lane = threadIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int64_t k = static_cast<int64_t>(blockIdx.y) * kWarp + lane;
  if (row >= num_rows) return;  // whole warp leaves together
  const int64_t begin = indptr[row], end = indptr[row + 1];
  const int64_t head = k < K ? k / (K / heads) : 0;
  acc_t acc = Red::init();
  int64_t best = num_edges;
  for (int64_t base = begin; base < end; base += kWarp) {
    const int64_t mine = base + lane;
    const int64_t src_mine =
        mine < end ? (kGather ? static_cast<int64_t>(indices[mine]) : mine) : 0;
    const int n = static_cast<int>(end - base < kWarp ? end - base : kWarp);
    for (int t = 0; t < n; ++t) {
      const int64_t j = __shfl_sync(kFullMask, src_mine, t);
      const int64_t e = base + t;
      if (k < K) {
        const acc_t w = value ? static_cast<acc_t>(value[e * heads + head]) : acc_t(1);
        Red::update(acc, w * static_cast<acc_t>(x[j * K + k]), best, e, e == begin);
      }
    }
  }
  if (k < K) {
    out[row * K + k] = static_cast<scalar_t>(Red::finish(acc, end - begin));
    if (Red::kHasArg) arg[row * K + k] = static_cast<index_t>(best);
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
  const dim3 block(kWarp, kRowsPerBlock), grid = row_channel_grid(num_rows, K);
  if (indices)
    spmm_kernel<scalar_t, index_t, R, true><<<grid, block, 0, stream>>>(
        indptr, indices, value, heads, x, num_rows, num_edges, K, out, arg);
  else
    spmm_kernel<scalar_t, index_t, R, false><<<grid, block, 0, stream>>>(
        indptr, indices, value, heads, x, num_rows, num_edges, K, out, arg);
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
