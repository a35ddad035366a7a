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

// The gates' exp and division take much of the per-channel loops below (with the gathers):
// 512-bit vectors where the processor has them, since GCC's tuning prefers 256-bit ones for
// its own vectorisation (forward 29 -> 27 ms on the road graph, RESULTS.md). GCC on x86
// only; other compilers and targets keep their default.
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#define GL_WIDE_VECTORS 1
#else
#define GL_WIDE_VECTORS 0
#endif
#if GL_WIDE_VECTORS
#pragma GCC push_options
#pragma GCC target("prefer-vector-width=512")
#endif

namespace graphloc {

namespace {

// torch's sigmoid, 1 / (1 + exp(-v)): 0 at -inf, 1 at +inf, NaN kept (exp_vec's rules).
template <typename acc_t>
inline acc_t sigmoid(acc_t v) {
  return acc_t(1) / (acc_t(1) + exp_vec(-v));
}

// The rows [r0, r1) of a pass over the CSR rows, out[i] one of
//   forward (kKeyGrad false): the sum over i's edges (j -> i) of
//     sigmoid(key[i, c] + query[j, c]) * value[j, c];
//   d key (kKeyGrad true): the sum of grad[i, c] * value[j, c] * gate * (1 - gate), torch's
//     sigmoid backward.
// Not inlined into parallel_rows' loop, which is compiled without this file's vector width.
template <bool kKeyGrad, int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void csr_rows(const index_t* indptr, const index_t* indices,
                                        Rows<scalar_t> key, Rows<scalar_t> query,
                                        Rows<scalar_t> value, Rows<scalar_t> grad, int64_t r0,
                                        int64_t r1, int64_t C_run, bool stream, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t C = width_of<CT>(C_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(2 * C);
  const int64_t ahead_end = static_cast<int64_t>(indptr[r1]) - distance;
  std::vector<acc_t> acc(C);
  acc_t* __restrict__ a = acc.data();
  for (int64_t i = r0; i < r1; ++i) {
    std::fill(a, a + C, acc_t(0));
    const scalar_t* __restrict__ k_i = key[i];
    const scalar_t* __restrict__ g_i = kKeyGrad ? grad[i] : nullptr;
    for_each_entry(
        indptr, indices, i, ahead_end, distance, C,
        [&](const scalar_t* __restrict__ q, const scalar_t* __restrict__ v) {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const acc_t s = sigmoid(static_cast<acc_t>(k_i[c]) + static_cast<acc_t>(q[c]));
            if constexpr (kKeyGrad)
              a[c] += static_cast<acc_t>(g_i[c]) * static_cast<acc_t>(v[c]) * ((acc_t(1) - s) * s);
            else
              a[c] += s * static_cast<acc_t>(v[c]);
          }
        },
        query, value);
    store_row(out + i * C, a, C, stream);
  }
}

// The source rows [r0, r1) of the transpose: d value[j, c] = the sum over j's edges (j -> i)
// of gate * grad[i, c], and d query[j, c] = the sum of grad[i, c] * value[j, c] * gate *
// (1 - gate).
template <int CT, typename scalar_t, typename index_t>
__attribute__((noinline)) void source_grad_rows(const index_t* csc_indptr,
                                                const index_t* csc_indices, Rows<scalar_t> key,
                                                Rows<scalar_t> query, Rows<scalar_t> value,
                                                Rows<scalar_t> grad, int64_t r0, int64_t r1,
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
    for_each_entry(
        csc_indptr, csc_indices, j, ahead_end, distance, C,
        [&](const scalar_t* __restrict__ k_i, const scalar_t* __restrict__ g_i) {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const acc_t s = sigmoid(static_cast<acc_t>(k_i[c]) + static_cast<acc_t>(q_j[c]));
            const acc_t g = static_cast<acc_t>(g_i[c]);
            b[c] += s * g;
            a[c] += g * static_cast<acc_t>(v_j[c]) * ((acc_t(1) - s) * s);
          }
        },
        key, grad);
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
          csr_rows<false, CT>(indptr_p, indices.data_ptr<index_t>(), rows_of<scalar_t>(kc),
                              rows_of<scalar_t>(qc), rows_of<scalar_t>(vc), Rows<scalar_t>{}, r0,
                              r1, C, streams_output(out.nbytes()), out.data_ptr<scalar_t>());
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
        const auto g = rows_of<scalar_t>(gc);
        const index_t* ptr = indptr.data_ptr<index_t>();
        const index_t* t_ptr = csc_indptr.data_ptr<index_t>();
        if (need_key)
          parallel_rows(ptr, indptr.numel() - 1, [&](int64_t r0, int64_t r1) {
            csr_rows<true, CT>(ptr, indices.data_ptr<index_t>(), k, q, v, g, r0, r1, C,
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

#if GL_WIDE_VECTORS
#pragma GCC pop_options
#endif
