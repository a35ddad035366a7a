// CUDA kernels of segment_softmax (online max and sum in one pass) and its backward.
#include "cuda/common.cuh"
#include "cuda/kernels.h"

namespace graphloc {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// Thread mapping: one thread per (row, head), walking the row's edges serially: one pass
// keeps the running max and rescaled sum, a second writes exp(x - max) / sum. A row of only
// -inf (fully masked) gets weights 0; a NaN or +inf score makes its row NaN, as torch.softmax.
template <typename scalar_t, typename index_t>
__global__ void softmax_kernel(const index_t* __restrict__ indptr,
                               const scalar_t* __restrict__ score, int64_t num_rows, int64_t H,
                               scalar_t* __restrict__ out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= num_rows * H) return;
  const int64_t r = t / H, h = t % H;
  acc_t m = -static_cast<acc_t>(INFINITY), s = 0;
  for (int64_t e = indptr[r]; e < indptr[r + 1]; ++e) {
    const acc_t v = static_cast<acc_t>(score[e * H + h]);
    if (v > m) {
      s = s * exp(m - v) + acc_t(1);
      m = v;
    } else if (v != -static_cast<acc_t>(INFINITY))
      s += exp(v - m);  // -inf adds 0 (m may be -inf)
  }
  if (m == static_cast<acc_t>(INFINITY)) s = static_cast<acc_t>(NAN);  // as torch: +inf -> NaN row
  for (int64_t e = indptr[r]; e < indptr[r + 1]; ++e)
    out[e * H + h] = static_cast<scalar_t>(
        s == acc_t(0) ? acc_t(0) : exp(static_cast<acc_t>(score[e * H + h]) - m) / s);
}

// Thread mapping as above; grad_in = y * (g - sum_row(g * y)).
template <typename scalar_t, typename index_t>
__global__ void softmax_backward_kernel(const index_t* __restrict__ indptr,
                                        const scalar_t* __restrict__ y,
                                        const scalar_t* __restrict__ g, int64_t num_rows, int64_t H,
                                        scalar_t* __restrict__ grad_in) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= num_rows * H) return;
  const int64_t r = t / H, h = t % H;
  acc_t dot = 0;
  for (int64_t e = indptr[r]; e < indptr[r + 1]; ++e)
    dot += static_cast<acc_t>(g[e * H + h]) * static_cast<acc_t>(y[e * H + h]);
  for (int64_t e = indptr[r]; e < indptr[r + 1]; ++e)
    grad_in[e * H + h] = static_cast<scalar_t>(static_cast<acc_t>(y[e * H + h]) *
                                               (static_cast<acc_t>(g[e * H + h]) - dot));
}

}  // namespace

template <typename scalar_t, typename index_t>
cudaError_t segment_softmax(const index_t* indptr, const scalar_t* score, int64_t num_rows,
                            int64_t heads, scalar_t* out, cudaStream_t stream) {
  if (num_rows * heads == 0) return cudaSuccess;
  softmax_kernel<scalar_t, index_t>
      <<<blocks_for(num_rows * heads, kThreads), kThreads, 0, stream>>>(indptr, score, num_rows,
                                                                        heads, out);
  return cudaGetLastError();
}

template <typename scalar_t, typename index_t>
cudaError_t segment_softmax_backward(const index_t* indptr, const scalar_t* out,
                                     const scalar_t* grad, int64_t num_rows, int64_t heads,
                                     scalar_t* grad_in, cudaStream_t stream) {
  if (num_rows * heads == 0) return cudaSuccess;
  softmax_backward_kernel<scalar_t, index_t>
      <<<blocks_for(num_rows * heads, kThreads), kThreads, 0, stream>>>(indptr, out, grad, num_rows,
                                                                        heads, grad_in);
  return cudaGetLastError();
}

#define GL_INSTANTIATE_SOFTMAX(scalar_t, index_t)                                    \
  template cudaError_t segment_softmax<scalar_t, index_t>(                           \
      const index_t*, const scalar_t*, int64_t, int64_t, scalar_t*, cudaStream_t);   \
  template cudaError_t segment_softmax_backward<scalar_t, index_t>(                  \
      const index_t*, const scalar_t*, const scalar_t*, int64_t, int64_t, scalar_t*, \
      cudaStream_t);
GL_INSTANTIATE_FOR_TYPES(GL_INSTANTIATE_SOFTMAX)

}  // namespace cuda
}  // namespace graphloc
