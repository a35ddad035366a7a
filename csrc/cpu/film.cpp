// CPU kernels of film_sum, the FiLM conv's aggregation: per edge (j -> i) and channel c,
//   out[i, c] = sum over i's edges of relu(gamma[i, c] * value[j, c] + beta[i, c]),
// without the [E, C] gathered rows, products and messages that the per-edge form writes
// forward and keeps for the backward. The backward recomputes each pre-activation where it
// needs it: d gamma and d beta over the CSR rows, d value over the transpose.
//
// Rounding and special values are torch's: the product and the sum are two roundings (the
// extension is built without FP contraction), relu keeps NaN, and its backward passes the
// gradient where relu's output is not <= 0 (NaN included) and gives exactly 0 elsewhere, the
// product's backward then multiplying that by the other factor (0 * inf is NaN, as torch's).
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

// torch's relu(gamma * v + beta): the pre-activation rounded as torch's two ops round it, NaN
// kept (a comparison with NaN is false, so it is returned as is).
template <typename acc_t>
inline acc_t film_message(acc_t gamma, acc_t v, acc_t beta) {
  const acc_t pre = gamma * v + beta;
  return pre <= acc_t(0) ? acc_t(0) : pre;
}

// The gradient that reaches the pre-activation: torch's relu backward (threshold_backward on
// relu's output), g where relu(pre) is not <= 0, exactly 0 elsewhere.
template <typename acc_t>
inline acc_t film_pre_grad(acc_t gamma, acc_t v, acc_t beta, acc_t g) {
  const acc_t pre = gamma * v + beta;
  return pre <= acc_t(0) ? acc_t(0) : g;
}

// The rows [r0, r1) of a pass over the CSR rows:
//   forward (kGrad false): out[i] = the sum over i's edges (j -> i) of the messages;
//   backward (kGrad true): d gamma[i] = the sum of d pre * value[j], and d beta[i] = the sum
//   of d pre (either output may be null).
template <bool kGrad, int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void csr_rows(const index_t* indptr, const index_t* indices,
                                        Rows<scalar_t> gamma, Rows<scalar_t> beta,
                                        Rows<scalar_t> value, Rows<scalar_t> grad, int64_t r0,
                                        int64_t r1, int64_t C_run, bool stream, scalar_t* out,
                                        scalar_t* out_beta) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(C);
  const int64_t ahead_end = static_cast<int64_t>(indptr[r1]) - distance;
  std::vector<acc_t> acc(C), acc_beta(kGrad ? C : 0);
  acc_t* __restrict__ a = acc.data();
  acc_t* __restrict__ b = acc_beta.data();
  for (int64_t i = r0; i < r1; ++i) {
    std::fill(a, a + C, acc_t(0));
    if constexpr (kGrad) std::fill(b, b + C, acc_t(0));
    const scalar_t* __restrict__ gamma_i = gamma[i];
    const scalar_t* __restrict__ beta_i = beta[i];
    const scalar_t* __restrict__ g_i = kGrad ? grad[i] : nullptr;
    for_each_entry(
        indptr, indices, i, ahead_end, distance, C,
        [&](const scalar_t* __restrict__ v) {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const acc_t gm = static_cast<acc_t>(gamma_i[c]), bt = static_cast<acc_t>(beta_i[c]);
            const acc_t vj = static_cast<acc_t>(v[c]);
            if constexpr (kGrad) {
              const acc_t d = film_pre_grad(gm, vj, bt, static_cast<acc_t>(g_i[c]));
              a[c] += d * vj;
              b[c] += d;
            } else {
              a[c] += film_message(gm, vj, bt);
            }
          }
        },
        value);
    if (out != nullptr) store_row(out + i * C, a, C, stream);
    if constexpr (kGrad)
      if (out_beta != nullptr) store_row(out_beta + i * C, b, C, stream);
  }
}

// The source rows [r0, r1) of the transpose: d value[j] = the sum over j's edges (j -> i) of
// d pre * gamma[i].
template <int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void value_grad_rows(const index_t* csc_indptr,
                                               const index_t* csc_indices, Rows<scalar_t> gamma,
                                               Rows<scalar_t> beta, Rows<scalar_t> value,
                                               Rows<scalar_t> grad, int64_t r0, int64_t r1,
                                               int64_t C_run, bool stream, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(3 * C);
  const int64_t ahead_end = static_cast<int64_t>(csc_indptr[r1]) - distance;
  std::vector<acc_t> acc(C);
  acc_t* __restrict__ a = acc.data();
  for (int64_t j = r0; j < r1; ++j) {
    std::fill(a, a + C, acc_t(0));
    const scalar_t* __restrict__ v_j = value[j];
    for_each_entry(
        csc_indptr, csc_indices, j, ahead_end, distance, C,
        [&](const scalar_t* __restrict__ gamma_i, const scalar_t* __restrict__ beta_i,
            const scalar_t* __restrict__ g_i) {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const acc_t gm = static_cast<acc_t>(gamma_i[c]);
            a[c] += film_pre_grad(gm, static_cast<acc_t>(v_j[c]), static_cast<acc_t>(beta_i[c]),
                                  static_cast<acc_t>(g_i[c])) *
                    gm;
          }
        },
        gamma, beta, grad);
    store_row(out + j * C, a, C, stream);
  }
}

at::Tensor film_sum_cpu(const at::Tensor& indptr, const at::Tensor& indices,
                        const at::Tensor& gamma, const at::Tensor& beta, const at::Tensor& value,
                        const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
                        const c10::optional<at::Tensor>&) {
  check_film_sum_args(indptr, indices, gamma, beta, value);
  const int64_t C = gamma.size(1);
  auto gc = with_contiguous_rows(gamma), bc = with_contiguous_rows(beta);
  auto vc = with_contiguous_rows(value);
  auto out = empty_output(gc.sizes(), gc.options());
  GL_DISPATCH_FLOAT(gamma.scalar_type(), "graphloc::film_sum", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const index_t* indptr_p = indptr.data_ptr<index_t>();
        parallel_rows(indptr_p, indptr.numel() - 1, [&](int64_t r0, int64_t r1) {
          csr_rows<false, CT>(indptr_p, indices.data_ptr<index_t>(), rows_of<scalar_t>(gc),
                              rows_of<scalar_t>(bc), rows_of<scalar_t>(vc), Rows<scalar_t>{}, r0,
                              r1, C, streams_output(out.nbytes()), out.data_ptr<scalar_t>(),
                              static_cast<scalar_t*>(nullptr));
        });
      });
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> film_sum_backward_cpu(
    const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& gamma,
    const at::Tensor& beta, const at::Tensor& value, const at::Tensor& grad,
    const at::Tensor& csc_indptr, const at::Tensor& csc_indices, const at::Tensor& csc_perm,
    bool need_gamma, bool need_beta, bool need_value) {
  check_film_sum_args(indptr, indices, gamma, beta, value);
  TORCH_CHECK(grad.sizes() == gamma.sizes() && grad.scalar_type() == gamma.scalar_type(),
              "grad must be ", gamma.scalar_type(), " of shape ", gamma.sizes(), ", got ",
              grad.scalar_type(), " of shape ", grad.sizes());
  check_same_device(grad, "grad", gamma, "gamma");
  check_transpose_args(csc_indptr, csc_indices, csc_perm, indptr, value.size(0), gamma.size(0),
                       indices.numel());
  const int64_t C = gamma.size(1);
  auto gc = with_contiguous_rows(gamma), bc = with_contiguous_rows(beta);
  auto vc = with_contiguous_rows(value), dc = with_contiguous_rows(grad);
  auto none = at::empty({0}, gamma.options());
  auto grad_gamma = need_gamma ? empty_output(gc.sizes(), gc.options()) : none;
  auto grad_beta = need_beta ? empty_output(bc.sizes(), bc.options()) : none;
  auto grad_value = need_value ? empty_output(vc.sizes(), vc.options()) : none;
  GL_DISPATCH_FLOAT(gamma.scalar_type(), "graphloc::film_sum_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const auto gm = rows_of<scalar_t>(gc), bt = rows_of<scalar_t>(bc);
        const auto v = rows_of<scalar_t>(vc), d = rows_of<scalar_t>(dc);
        const index_t* ptr = indptr.data_ptr<index_t>();
        const index_t* t_ptr = csc_indptr.data_ptr<index_t>();
        if (need_gamma || need_beta)
          parallel_rows(ptr, indptr.numel() - 1, [&](int64_t r0, int64_t r1) {
            csr_rows<true, CT>(ptr, indices.data_ptr<index_t>(), gm, bt, v, d, r0, r1, C,
                               streams_output(dc.nbytes()),
                               need_gamma ? grad_gamma.data_ptr<scalar_t>() : nullptr,
                               need_beta ? grad_beta.data_ptr<scalar_t>() : nullptr);
          });
        if (need_value)
          parallel_rows(t_ptr, value.size(0), [&](int64_t r0, int64_t r1) {
            value_grad_rows<CT>(t_ptr, csc_indices.data_ptr<index_t>(), gm, bt, v, d, r0, r1, C,
                                streams_output(grad_value.nbytes()),
                                grad_value.data_ptr<scalar_t>());
          });
      });
    });
  });
  return {grad_gamma, grad_beta, grad_value};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("film_sum", &film_sum_cpu);
  m.impl("film_sum_backward", &film_sum_backward_cpu);
}

}  // namespace graphloc
