// Launchers of graphloc's CUDA kernels: raw pointers and a stream, no ATen, so that every
// .cu file compiles with plain `nvcc -c` (CI checks this on machines without a GPU).
// cuda/binding.cpp is the only CUDA code that touches ATen. Types: scalar_t is float,
// double or __nv_bfloat16 (accumulated in float); index_t is int32_t or int64_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/reduce.h"
#include "common/sddmm.h"

namespace graphloc {
namespace cuda {

// out[i] = reduce_{e in row i} value[e, head] * x[src(e)], src(e) = indices[e] or e when
// indices is null (segment_reduce). arg (max/min only) gets the winning position or E.
template <typename scalar_t, typename index_t>
cudaError_t spmm(const index_t* indptr, const index_t* indices, const scalar_t* value,
                 int64_t heads, const scalar_t* x, int64_t num_rows, int64_t num_edges, int64_t K,
                 Reduce reduce, scalar_t* out, index_t* arg, cudaStream_t stream);

// Backward of max/min spmm over the transpose; grad_value (may be null) must be zeroed.
template <typename scalar_t, typename index_t>
cudaError_t spmm_arg_backward(const index_t* csc_indptr, const index_t* csc_indices,
                              const index_t* csc_perm, const scalar_t* value, int64_t heads,
                              const scalar_t* x, const index_t* arg, const scalar_t* grad,
                              int64_t num_src, int64_t K, scalar_t* grad_x, scalar_t* grad_value,
                              cudaStream_t stream);

template <typename scalar_t, typename index_t>
cudaError_t gather_csr(const index_t* indptr, const scalar_t* src, int64_t num_rows, int64_t K,
                       scalar_t* out, cudaStream_t stream);

template <typename scalar_t, typename index_t>
cudaError_t sddmm(const index_t* indptr, const index_t* indices, const scalar_t* a,
                  const scalar_t* b, int64_t num_rows, int64_t K, int64_t heads, EdgeOp op,
                  scalar_t* out, cudaStream_t stream);

template <typename scalar_t, typename index_t>
cudaError_t segment_softmax(const index_t* indptr, const scalar_t* score, int64_t num_rows,
                            int64_t heads, scalar_t* out, cudaStream_t stream);

template <typename scalar_t, typename index_t>
cudaError_t segment_softmax_backward(const index_t* indptr, const scalar_t* out,
                                     const scalar_t* grad, int64_t num_rows, int64_t heads,
                                     scalar_t* grad_in, cudaStream_t stream);

// out[i] = softmax over row i of score [E, heads], weighting x [N, heads * channels];
// lse [N, heads] gets each row's log-sum-exp (0 for empty rows).
template <typename scalar_t, typename index_t>
cudaError_t segment_attention(const index_t* indptr, const index_t* indices, const scalar_t* score,
                              const scalar_t* x, int64_t num_rows, int64_t heads, int64_t channels,
                              scalar_t* out, scalar_t* lse, cudaStream_t stream);

// segment_attention's backward over the CSR rows and the transpose (x has num_src rows).
// grad_score [E, heads] and grad_x [num_src, heads * channels] are written where not null;
// norm is scratch of [num_rows, heads, 2] accumulators. Returns cudaErrorNotSupported for
// the shapes attention_backward_fits refuses.
template <typename scalar_t, typename index_t>
struct AttentionBackward {
  const index_t *indptr, *indices, *csc_indptr, *csc_indices, *csc_perm;
  const scalar_t *score, *lse, *out, *grad, *grad_lse, *x;  // grad_lse may be null
  int64_t num_rows, num_src, heads, channels;
  scalar_t *grad_score, *grad_x;
  typename AccType<scalar_t>::type* norm;
};

template <typename scalar_t, typename index_t>
cudaError_t segment_attention_backward(const AttentionBackward<scalar_t, index_t>& args,
                                       cudaStream_t stream);

// Whether the fused backward takes rows of `heads` x `channels` (at most a warp of 16-byte
// packs or of elements per row, each head's packs a power of two): else the binding
// composes the backward from the other kernels.
template <typename scalar_t>
bool attention_backward_fits(int64_t heads, int64_t channels, const scalar_t* x,
                             const scalar_t* out, const scalar_t* grad);

// indptr[r] = first position of sorted (ascending) holding a value >= r, r in [0, num_rows].
template <typename index_t>
cudaError_t csr_indptr_from_sorted(const index_t* sorted, int64_t num_edges, int64_t num_rows,
                                   index_t* indptr, cudaStream_t stream);

}  // namespace cuda
}  // namespace graphloc
