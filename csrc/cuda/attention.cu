// CUDA kernel of segment_attention: online softmax of edge scores and the weighted sum of
// source rows per destination row, without per-edge message tensors.
#include "cuda/common.cuh"
#include "cuda/kernels.h"

namespace graphloc {
namespace cuda {
namespace {

// Thread mapping: one warp per (destination row, tile of 32 channels), a lane per channel
// (coalesced reads of x). Each lane runs the online-softmax recurrence of its own head; the
// warp shares the row's source ids by shuffle. The first lane of each head writes its lse.
template <typename scalar_t, typename index_t>
__global__ void attention_kernel(const index_t* __restrict__ indptr,
                                 const index_t* __restrict__ indices,
                                 const scalar_t* __restrict__ score, const scalar_t* __restrict__ x,
                                 int64_t num_rows, int64_t H, int64_t C, scalar_t* __restrict__ out,
                                 scalar_t* __restrict__ lse) {
  using acc_t = typename AccType<scalar_t>::type;
  const int lane = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int64_t K = H * C;
  const int64_t k = static_cast<int64_t>(blockIdx.y) * kWarp + lane;
  if (i >= num_rows) return;  // whole warp leaves together
  const int64_t h = k < K ? k / C : 0;
  const int64_t begin = indptr[i], end = indptr[i + 1];
  acc_t m = -static_cast<acc_t>(INFINITY), s = 0, acc = 0;
  for (int64_t base = begin; base < end; base += kWarp) {
    const int64_t mine = base + lane;
    const int64_t src_mine = mine < end ? static_cast<int64_t>(indices[mine]) : 0;
    const int n = static_cast<int>(end - base < kWarp ? end - base : kWarp);
    for (int t = 0; t < n; ++t) {
      const int64_t j = __shfl_sync(kFullMask, src_mine, t);
      if (k >= K) continue;
      const acc_t v = static_cast<acc_t>(score[(base + t) * H + h]);
      if (v == -static_cast<acc_t>(INFINITY)) continue;  // masked: weight 0
      acc_t p = 1;
      if (v > m) {
        const acc_t scale = exp(m - v);
        s *= scale;
        acc *= scale;
        m = v;
      } else {
        p = exp(v - m);
      }
      s += p;
      acc += p * static_cast<acc_t>(x[j * K + k]);
    }
  }
  if (k >= K) return;
  if (m == static_cast<acc_t>(INFINITY)) s = static_cast<acc_t>(NAN);  // as torch.softmax
  const bool empty = s == acc_t(0);
  out[i * K + k] = static_cast<scalar_t>(empty ? acc_t(0) : acc / s);
  if (k % C == 0) lse[i * H + h] = static_cast<scalar_t>(empty ? acc_t(0) : m + log(s));
}

}  // namespace

template <typename scalar_t, typename index_t>
cudaError_t segment_attention(const index_t* indptr, const index_t* indices, const scalar_t* score,
                              const scalar_t* x, int64_t num_rows, int64_t heads, int64_t channels,
                              scalar_t* out, scalar_t* lse, cudaStream_t stream) {
  if (num_rows == 0 || heads * channels == 0) return cudaSuccess;
  attention_kernel<scalar_t, index_t>
      <<<row_channel_grid(num_rows, heads * channels), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
          indptr, indices, score, x, num_rows, heads, channels, out, lse);
  return cudaGetLastError();
}

#define GL_INSTANTIATE_ATTENTION(scalar_t, index_t)                                                \
  template cudaError_t segment_attention<scalar_t, index_t>(                                       \
      const index_t*, const index_t*, const scalar_t*, const scalar_t*, int64_t, int64_t, int64_t, \
      scalar_t*, scalar_t*, cudaStream_t);
GL_INSTANTIATE_FOR_TYPES(GL_INSTANTIATE_ATTENTION)

}  // namespace cuda
}  // namespace graphloc
