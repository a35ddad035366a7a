// CPU kernels of gated_sum, the residual gated graph conv's aggregation: per edge (j -> i)
// and channel c,
//   out[i, c] = sum over i's edges of sigmoid(key[i, c] + query[j, c]) * value[j, c],
// without the [E, C] gates the composed ops (sddmm, sigmoid, a weighted spmm) write and read
// back forward and backward. The backward recomputes the gates where it needs them: d key
// over the CSR rows, d query and d value over the transpose.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "common/ops.h"
#include "common/reduce.h"
#include "cpu/fast_exp.h"
#include "cpu/rows.h"
#include "cpu/stream.h"

// The per-channel loops below are bound by the gates' exp and division: 512-bit vectors where
// the processor has them (GCC's tuning prefers 256-bit ones for its own vectorisation).
#pragma GCC push_options
#pragma GCC target("prefer-vector-width=512")

namespace graphloc {

namespace {

// torch's sigmoid, 1 / (1 + exp(-v)): 0 at -inf, 1 at +inf, NaN kept (exp_vec's rules).
template <typename acc_t>
inline acc_t sigmoid(acc_t v) {
  return acc_t(1) / (acc_t(1) + exp_vec(-v));
}

// The channel count as a compile-time constant where it is one of the common widths (the
// loops then have a fixed trip count), else the run-time value.
template <int CT>
inline int64_t width_of(int64_t C) {
  return CT > 0 ? CT : C;
}

// Rows of a contiguous [rows, C] tensor.
template <typename scalar_t>
struct Rows {
  const scalar_t* data;
  int64_t C;
  const scalar_t* operator[](int64_t r) const { return data + r * C; }
};

template <typename scalar_t>
Rows<scalar_t> rows_of(const at::Tensor& t) {
  return {t.data_ptr<scalar_t>(), t.size(1)};
}

// The rows [r0, r1) of the forward: out[i, c] = the sum over i's edges (j -> i) of
// sigmoid(key[i, c] + query[j, c]) * value[j, c], the source rows of the edges ahead
// prefetched. Not inlined into parallel_rows' loop, which is compiled without this file's
// vector width.
template <int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void forward_rows(const index_t* indptr, const index_t* indices,
                                            Rows<scalar_t> key, Rows<scalar_t> query,
                                            Rows<scalar_t> value, int64_t r0, int64_t r1,
                                            int64_t C_run, bool stream, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(2 * C);
  const int64_t ahead_end = static_cast<int64_t>(indptr[r1]) - distance;
  std::vector<acc_t> acc(C);
  acc_t* __restrict__ a = acc.data();
  for (int64_t i = r0; i < r1; ++i) {
    std::fill(a, a + C, acc_t(0));
    const scalar_t* __restrict__ k_i = key[i];
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      if (e < ahead_end) {
        const int64_t ahead = indices[e + distance];
        prefetch_row(query[ahead], C);
        prefetch_row(value[ahead], C);
      }
      const int64_t j = indices[e];
      const scalar_t* __restrict__ q = query[j];
      const scalar_t* __restrict__ v = value[j];
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        a[c] += sigmoid(static_cast<acc_t>(k_i[c]) + static_cast<acc_t>(q[c])) *
                static_cast<acc_t>(v[c]);
    }
    store_row(out + i * C, a, C, stream);
  }
}

// The rows [r0, r1) of d key: d key[i, c] = the sum over i's edges of
// grad[i, c] * value[j, c] * gate * (1 - gate), torch's sigmoid backward.
template <int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void key_grad_rows(const index_t* indptr, const index_t* indices,
                                             Rows<scalar_t> key, Rows<scalar_t> query,
                                             Rows<scalar_t> value, const scalar_t* grad, int64_t r0,
                                             int64_t r1, int64_t C_run, bool stream,
                                             scalar_t* grad_key) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(2 * C);
  const int64_t ahead_end = static_cast<int64_t>(indptr[r1]) - distance;
  std::vector<acc_t> acc(C);
  acc_t* __restrict__ a = acc.data();
  for (int64_t i = r0; i < r1; ++i) {
    std::fill(a, a + C, acc_t(0));
    const scalar_t* __restrict__ k_i = key[i];
    const scalar_t* __restrict__ g_i = grad + i * C;
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      if (e < ahead_end) {
        const int64_t ahead = indices[e + distance];
        prefetch_row(query[ahead], C);
        prefetch_row(value[ahead], C);
      }
      const int64_t j = indices[e];
      const scalar_t* __restrict__ q = query[j];
      const scalar_t* __restrict__ v = value[j];
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const acc_t s = sigmoid(static_cast<acc_t>(k_i[c]) + static_cast<acc_t>(q[c]));
        a[c] += static_cast<acc_t>(g_i[c]) * static_cast<acc_t>(v[c]) * ((acc_t(1) - s) * s);
      }
    }
    store_row(grad_key + i * C, a, C, stream);
  }
}

// The source rows [r0, r1) of the transpose: d value[j, c] = the sum over j's edges (j -> i)
// of gate * grad[i, c], and d query[j, c] = the sum of grad[i, c] * value[j, c] * gate *
// (1 - gate). The destination rows key[i] and grad[i] of the entries ahead are prefetched.
template <int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void source_grad_rows(const index_t* csc_indptr,
                                                const index_t* csc_indices, Rows<scalar_t> key,
                                                Rows<scalar_t> query, Rows<scalar_t> value,
                                                const scalar_t* grad, int64_t r0, int64_t r1,
                                                int64_t C_run, bool stream, scalar_t* grad_query,
                                                scalar_t* grad_value) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(2 * C);
  const int64_t ahead_end = static_cast<int64_t>(csc_indptr[r1]) - distance;
  std::vector<acc_t> dq(C), dv(C);
  acc_t* __restrict__ a = dq.data();
  acc_t* __restrict__ b = dv.data();
  for (int64_t j = r0; j < r1; ++j) {
    std::fill(a, a + C, acc_t(0));
    std::fill(b, b + C, acc_t(0));
    const scalar_t* __restrict__ q_j = query[j];
    const scalar_t* __restrict__ v_j = value[j];
    for (int64_t k = csc_indptr[j]; k < csc_indptr[j + 1]; ++k) {
      if (k < ahead_end) {
        const int64_t ahead = csc_indices[k + distance];
        prefetch_row(key[ahead], C);
        prefetch_row(grad + ahead * C, C);
      }
      const int64_t i = csc_indices[k];
      const scalar_t* __restrict__ k_i = key[i];
      const scalar_t* __restrict__ g_i = grad + i * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const acc_t s = sigmoid(static_cast<acc_t>(k_i[c]) + static_cast<acc_t>(q_j[c]));
        const acc_t g = static_cast<acc_t>(g_i[c]);
        b[c] += s * g;
        a[c] += g * static_cast<acc_t>(v_j[c]) * ((acc_t(1) - s) * s);
      }
    }
    if (grad_query != nullptr) store_row(grad_query + j * C, a, C, stream);
    if (grad_value != nullptr) store_row(grad_value + j * C, b, C, stream);
  }
}

at::Tensor gated_sum_cpu(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& key,
                         const at::Tensor& query, const at::Tensor& value,
                         const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
                         const c10::optional<at::Tensor>&) {
  check_gated_sum_args(indptr, indices, key, query, value);
  const int64_t C = key.size(1);
  auto kc = key.contiguous(), qc = query.contiguous(), vc = value.contiguous();
  auto out = empty_output(kc.sizes(), kc.options());
  GL_DISPATCH_FLOAT(key.scalar_type(), "graphloc::gated_sum", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const index_t* indptr_p = indptr.data_ptr<index_t>();
        parallel_rows(indptr_p, indptr.numel() - 1, [&](int64_t r0, int64_t r1) {
          forward_rows<CT>(indptr_p, indices.data_ptr<index_t>(), rows_of<scalar_t>(kc),
                           rows_of<scalar_t>(qc), rows_of<scalar_t>(vc), r0, r1, C,
                           streams_output(out.nbytes()), out.data_ptr<scalar_t>());
        });
      });
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> gated_sum_backward_cpu(
    const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& key,
    const at::Tensor& query, const at::Tensor& value, const at::Tensor& grad,
    const at::Tensor& csc_indptr, const at::Tensor& csc_indices, const at::Tensor& csc_perm,
    bool need_key, bool need_query, bool need_value) {
  check_gated_sum_args(indptr, indices, key, query, value);
  TORCH_CHECK(grad.sizes() == key.sizes() && grad.scalar_type() == key.scalar_type(),
              "grad must be ", key.scalar_type(), " of shape ", key.sizes(), ", got ",
              grad.scalar_type(), " of shape ", grad.sizes());
  check_transpose_args(csc_indptr, csc_indices, csc_perm, indptr, query.size(0), key.size(0),
                       indices.numel());
  const int64_t C = key.size(1);
  auto kc = key.contiguous(), qc = query.contiguous(), vc = value.contiguous();
  auto gc = grad.contiguous();
  auto none = at::empty({0}, key.options());
  auto grad_key = need_key ? empty_output(kc.sizes(), kc.options()) : none;
  auto grad_query = need_query ? empty_output(qc.sizes(), qc.options()) : none;
  auto grad_value = need_value ? empty_output(vc.sizes(), vc.options()) : none;
  GL_DISPATCH_FLOAT(key.scalar_type(), "graphloc::gated_sum_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const auto k = rows_of<scalar_t>(kc), q = rows_of<scalar_t>(qc), v = rows_of<scalar_t>(vc);
        const scalar_t* g = gc.data_ptr<scalar_t>();
        const index_t* ptr = indptr.data_ptr<index_t>();
        const index_t* t_ptr = csc_indptr.data_ptr<index_t>();
        if (need_key)
          parallel_rows(ptr, indptr.numel() - 1, [&](int64_t r0, int64_t r1) {
            key_grad_rows<CT>(ptr, indices.data_ptr<index_t>(), k, q, v, g, r0, r1, C,
                              streams_output(grad_key.nbytes()), grad_key.data_ptr<scalar_t>());
          });
        if (need_query || need_value)
          parallel_rows(t_ptr, query.size(0), [&](int64_t r0, int64_t r1) {
            source_grad_rows<CT>(
                t_ptr, csc_indices.data_ptr<index_t>(), k, q, v, g, r0, r1, C,
                streams_output(gc.nbytes() / std::max<int64_t>(kc.size(0), 1) * qc.size(0)),
                need_query ? grad_query.data_ptr<scalar_t>() : nullptr,
                need_value ? grad_value.data_ptr<scalar_t>() : nullptr);
          });
      });
    });
  });
  return {grad_key, grad_query, grad_value};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("gated_sum", &gated_sum_cpu);
  m.impl("gated_sum_backward", &gated_sum_backward_cpu);
}

}  // namespace graphloc

#pragma GCC pop_options
