// CUDA kernel behind coo_to_csr: row pointers of an already sorted index (the binding sorts
// with a stable radix sort, which also gives the permutation).
#include "cuda/common.cuh"
#include "cuda/kernels.h"

namespace graphloc {
namespace cuda {
namespace {

// Thread mapping: one thread per row pointer r in [0, num_rows], a binary search for the
// first sorted position holding a value >= r.
template <typename index_t>
__global__ void indptr_kernel(const index_t* __restrict__ sorted, int64_t num_edges,
                              int64_t num_rows, index_t* __restrict__ indptr) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r > num_rows) return;
  int64_t lo = 0, hi = num_edges;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (static_cast<int64_t>(sorted[mid]) < r)
      lo = mid + 1;
    else
      hi = mid;
  }
  indptr[r] = static_cast<index_t>(lo);
}

}  // namespace

template <typename index_t>
cudaError_t csr_indptr_from_sorted(const index_t* sorted, int64_t num_edges, int64_t num_rows,
                                   index_t* indptr, cudaStream_t stream) {
  indptr_kernel<index_t>
      <<<blocks_for(num_rows + 1, 256), 256, 0, stream>>>(sorted, num_edges, num_rows, indptr);
  return cudaGetLastError();
}

template cudaError_t csr_indptr_from_sorted<int32_t>(const int32_t*, int64_t, int64_t, int32_t*,
                                                     cudaStream_t);
template cudaError_t csr_indptr_from_sorted<int64_t>(const int64_t*, int64_t, int64_t, int64_t*,
                                                     cudaStream_t);

}  // namespace cuda
}  // namespace graphloc
