// CPU kernels of edge_outer_sum, the aggregation of the edge-conditioned convolution (PyG's
// NNConv) once its per-edge weight matrices are regrouped: per CSR row i,
//   out[i, k, c] = sum over i's edges e = (j -> i) of weight[e, k] * x[j, c],
// so that a layer whose per-edge matrix is an affine map of K edge values needs no
// [E, C_in, C_out] matrices: the map's weights act once per node on out. Per edge, only
// the K edge values and the source's C channels are read; the [K, C] accumulator of the
// row stays in cache. The backward runs over the same CSR rows: d weight[e, k] =
// <grad[i, k, :], x[j, :]> and the source's share sum_k weight[e, k] grad[i, k, :] per edge,
// which the caller sums per source through the transpose.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "common/ops.h"
#include "common/reduce.h"
#include "cpu/rows.h"
#include "cpu/stream.h"

namespace graphloc {

namespace {

// The rows [r0, r1) of the forward: out[i] = sum_e weight[e] (x) x[indices[e]], [K, C] each.
template <int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void outer_rows(const index_t* indptr, const index_t* indices,
                                          const scalar_t* weight, const scalar_t* x, int64_t K,
                                          int64_t C_run, int64_t r0, int64_t r1, bool stream,
                                          scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(C);
  const int64_t ahead_end = static_cast<int64_t>(indptr[r1]) - distance;
  std::vector<acc_t> acc(K * C);
  acc_t* __restrict__ a = acc.data();
  for (int64_t i = r0; i < r1; ++i) {
    std::fill(a, a + K * C, acc_t(0));
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      if (e < ahead_end) prefetch_row(x + static_cast<int64_t>(indices[e + distance]) * C, C);
      const scalar_t* __restrict__ x_j = x + static_cast<int64_t>(indices[e]) * C;
      const scalar_t* __restrict__ w_e = weight + e * K;
      for (int64_t k = 0; k < K; ++k) {
        const acc_t w = static_cast<acc_t>(w_e[k]);
        acc_t* __restrict__ a_k = a + k * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) a_k[c] += w * static_cast<acc_t>(x_j[c]);
      }
    }
    store_row(out + i * K * C, a, K * C, stream);
  }
}

// The rows [r0, r1) of the backward: per edge e = (j -> i) of row i, grad_weight[e, k] =
// <grad[i, k, :], x[j, :]> and edge_grad[e, :] = sum_k weight[e, k] grad[i, k, :] (either
// pointer null when not asked for).
template <int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void outer_grad_rows(const index_t* indptr, const index_t* indices,
                                               const scalar_t* weight, const scalar_t* x,
                                               const scalar_t* grad, int64_t K, int64_t C_run,
                                               int64_t r0, int64_t r1, scalar_t* grad_weight,
                                               scalar_t* edge_grad) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  // the row's gradient once in the accumulation type, read by each of its edges
  std::vector<acc_t> g_row(K * C), share(C);
  acc_t* __restrict__ g = g_row.data();
  acc_t* __restrict__ s = share.data();
  for (int64_t i = r0; i < r1; ++i) {
    if (indptr[i] == indptr[i + 1]) continue;
    const scalar_t* grad_i = grad + i * K * C;
    std::copy(grad_i, grad_i + K * C, g);
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const scalar_t* __restrict__ x_j = x + static_cast<int64_t>(indices[e]) * C;
      const scalar_t* __restrict__ w_e = weight + e * K;
      if (grad_weight != nullptr) {
        for (int64_t k = 0; k < K; ++k) {
          const acc_t* __restrict__ g_k = g + k * C;
          acc_t dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t c = 0; c < C; ++c) dot += g_k[c] * static_cast<acc_t>(x_j[c]);
          grad_weight[e * K + k] = static_cast<scalar_t>(dot);
        }
      }
      if (edge_grad != nullptr) {
        std::fill(s, s + C, acc_t(0));
        for (int64_t k = 0; k < K; ++k) {
          const acc_t w = static_cast<acc_t>(w_e[k]);
          const acc_t* __restrict__ g_k = g + k * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) s[c] += w * g_k[c];
        }
        std::copy(s, s + C, edge_grad + e * C);
      }
    }
  }
}

at::Tensor edge_outer_sum_cpu(const at::Tensor& indptr, const at::Tensor& indices,
                              const at::Tensor& weight, const at::Tensor& x,
                              const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
                              const c10::optional<at::Tensor>&) {
  check_edge_outer_sum_args(indptr, indices, weight, x);
  const int64_t K = weight.size(1), C = x.size(1), rows = indptr.numel() - 1;
  auto wc = weight.contiguous(), xc = x.contiguous();
  auto out = empty_output({rows, K * C}, xc.options());
  if (out.numel() == 0) return out;
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::edge_outer_sum", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const index_t* ptr = indptr.data_ptr<index_t>();
        parallel_rows(ptr, rows, [&](int64_t r0, int64_t r1) {
          outer_rows<CT>(ptr, indices.data_ptr<index_t>(), wc.data_ptr<scalar_t>(),
                         xc.data_ptr<scalar_t>(), K, C, r0, r1, streams_output(out.nbytes()),
                         out.data_ptr<scalar_t>());
        });
      });
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> edge_outer_sum_backward_cpu(
    const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& weight,
    const at::Tensor& x, const at::Tensor& grad, bool need_weight, bool need_x) {
  check_edge_outer_sum_args(indptr, indices, weight, x);
  const int64_t K = weight.size(1), C = x.size(1), rows = indptr.numel() - 1;
  const int64_t E = indices.numel();
  TORCH_CHECK(grad.dim() == 2 && grad.size(0) == rows && grad.size(1) == K * C &&
                  grad.scalar_type() == x.scalar_type(),
              "grad must be ", x.scalar_type(), " of shape [", rows, ", ", K * C, "], got ",
              grad.scalar_type(), " of shape ", grad.sizes());
  check_same_device(grad, "grad", x, "x");
  auto wc = weight.contiguous(), xc = x.contiguous(), gc = grad.contiguous();
  auto none = at::empty({0}, x.options());
  // every edge lies in some row, so each entry below is written
  auto grad_weight = need_weight ? at::empty({E, K}, x.options()) : none;
  auto edge_grad = need_x ? at::empty({E, C}, x.options()) : none;
  if ((!need_weight && !need_x) || E == 0 || C == 0) {
    if (need_weight) grad_weight.zero_();
    return {grad_weight, edge_grad};
  }
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::edge_outer_sum_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const index_t* ptr = indptr.data_ptr<index_t>();
        parallel_rows(ptr, rows, [&](int64_t r0, int64_t r1) {
          outer_grad_rows<CT>(ptr, indices.data_ptr<index_t>(), wc.data_ptr<scalar_t>(),
                              xc.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(), K, C, r0, r1,
                              need_weight ? grad_weight.data_ptr<scalar_t>() : nullptr,
                              need_x ? edge_grad.data_ptr<scalar_t>() : nullptr);
        });
      });
    });
  });
  return {grad_weight, edge_grad};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("edge_outer_sum", &edge_outer_sum_cpu);
  m.impl("edge_outer_sum_backward", &edge_outer_sum_backward_cpu);
}

}  // namespace graphloc
