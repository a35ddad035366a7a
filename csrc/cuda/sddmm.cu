// CUDA kernel of sddmm: per-edge values from source and destination features, CSR order.
#include "cuda/common.cuh"
#include "cuda/kernels.h"

namespace graphloc {
namespace cuda {
namespace {

// Thread mapping: one warp per destination row, lanes striding over channels. For dot,
// each head's partial sums are reduced across the warp by shuffles; add/mul write their
// channels directly (coalesced).
template <typename scalar_t, typename index_t, EdgeOp Op>
__global__ void sddmm_kernel(const index_t* __restrict__ indptr,
                             const index_t* __restrict__ indices, const scalar_t* __restrict__ a,
                             const scalar_t* __restrict__ b, int64_t num_rows, int64_t K,
                             int64_t heads, scalar_t* __restrict__ out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int lane = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (i >= num_rows) return;
  const int64_t F = K / heads;
  for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
    const int64_t j = indices[e];
    if (Op == EdgeOp::Dot) {
      for (int64_t h = 0; h < heads; ++h) {
        acc_t s = 0;
        for (int64_t f = h * F + lane; f < (h + 1) * F; f += kWarp)
          s += static_cast<acc_t>(a[j * K + f]) * static_cast<acc_t>(b[i * K + f]);
        s = warp_sum(s);
        if (lane == 0) out[e * heads + h] = static_cast<scalar_t>(s);
      }
    } else {
      for (int64_t k = lane; k < K; k += kWarp) {
        const acc_t u = static_cast<acc_t>(a[j * K + k]), v = static_cast<acc_t>(b[i * K + k]);
        out[e * K + k] = static_cast<scalar_t>(Op == EdgeOp::Add ? u + v : u * v);
      }
    }
  }
}

}  // namespace

template <typename scalar_t, typename index_t>
cudaError_t sddmm(const index_t* indptr, const index_t* indices, const scalar_t* a,
                  const scalar_t* b, int64_t num_rows, int64_t K, int64_t heads, EdgeOp op,
                  scalar_t* out, cudaStream_t stream) {
  if (num_rows == 0) return cudaSuccess;
  const dim3 block(kWarp, kRowsPerBlock), grid(blocks_for(num_rows, kRowsPerBlock));
  if (op == EdgeOp::Dot)
    sddmm_kernel<scalar_t, index_t, EdgeOp::Dot>
        <<<grid, block, 0, stream>>>(indptr, indices, a, b, num_rows, K, heads, out);
  else if (op == EdgeOp::Add)
    sddmm_kernel<scalar_t, index_t, EdgeOp::Add>
        <<<grid, block, 0, stream>>>(indptr, indices, a, b, num_rows, K, heads, out);
  else
    sddmm_kernel<scalar_t, index_t, EdgeOp::Mul>
        <<<grid, block, 0, stream>>>(indptr, indices, a, b, num_rows, K, heads, out);
  return cudaGetLastError();
}

#define GL_INSTANTIATE_SDDMM(scalar_t, index_t)                                                  \
  template cudaError_t sddmm<scalar_t, index_t>(const index_t*, const index_t*, const scalar_t*, \
                                                const scalar_t*, int64_t, int64_t, int64_t,      \
                                                EdgeOp, scalar_t*, cudaStream_t);
GL_INSTANTIATE_FOR_TYPES(GL_INSTANTIATE_SDDMM)

}  // namespace cuda
}  // namespace graphloc
