// CPU kernels of segment_logsumexp, segment_softmax_rows and logsumexp_edge_grad: per CSR
// row and channel, the max and the sum of the shifted exponentials of the rows of x the row
// gathers, in two sweeps over its edges, without any per-edge tensor (the softmax adds a
// third that writes each row's result). torch_scatter's composite formula (max, gather,
// subtract, exp, sum, log) writes [E, K] intermediates: the code built on it took 5.6x the
// fused log-sum-exp's time at E = 659,868, K = 64 (RESULTS.md, 2026-12-03).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "common/ops.h"
#include "common/reduce.h"
#include "cpu/fast_exp.h"
#include "cpu/rows.h"

namespace graphloc {
namespace {

template <typename acc_t, typename scalar_t>
inline void max_into(acc_t* __restrict__ top, const scalar_t* __restrict__ row, int64_t K) {
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) {
    const acc_t v = static_cast<acc_t>(row[k]);
    top[k] = v > top[k] ? v : top[k];
  }
}

template <typename acc_t, typename scalar_t>
inline void add_shifted_exp(acc_t* __restrict__ total, const scalar_t* __restrict__ row,
                            const acc_t* __restrict__ shift, int64_t K) {
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) total[k] += exp_vec(static_cast<acc_t>(row[k]) - shift[k]);
}

// total[k] becomes what write_normalised needs: log(eps + total) (log), or the divisor of
// the weights (softmax: 1 for a total of 0, whose weights exp(-inf) = 0 stay 0).
template <bool kLog, typename acc_t>
inline void normalisers(acc_t* __restrict__ total, acc_t eps, int64_t K) {
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) {
    const acc_t t = total[k], shifted = t + eps;
    const acc_t log_t = log_vec(shifted);  // unconditional: GCC vectorises no jump
    // the select of log(0) = -inf as in log_plus: without it the loop stayed scalar (2x)
    const acc_t log_total = shifted == acc_t(0) ? -std::numeric_limits<acc_t>::infinity() : log_t;
    total[k] = kLog ? log_total : (t == acc_t(0) ? acc_t(1) : t);
  }
}

template <bool kLog, typename acc_t, typename scalar_t>
inline void write_normalised(scalar_t* __restrict__ out, const scalar_t* __restrict__ row,
                             const acc_t* __restrict__ shift, const acc_t* __restrict__ norm,
                             int64_t K) {
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) {
    const acc_t centred = static_cast<acc_t>(row[k]) - shift[k];
    out[k] = static_cast<scalar_t>(kLog ? centred - norm[k] : exp_vec(centred) / norm[k]);
  }
}

// out[k] = log(total[k] + eps) + top[k], vectorised (a scalar log took 60% of the time). The
// select of log(0) = -inf is the same value written out; without it GCC 12 left the loop
// scalar ("control flow in loop").
template <typename acc_t, typename scalar_t>
inline void log_plus(scalar_t* __restrict__ out, const acc_t* __restrict__ total, acc_t eps,
                     const acc_t* __restrict__ top, int64_t K) {
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) {
    const acc_t t = total[k] + eps;
    const acc_t log_t = log_vec(t);
    out[k] = static_cast<scalar_t>(t == acc_t(0) ? -std::numeric_limits<acc_t>::infinity()
                                                 : log_t + top[k]);
  }
}

// Per channel over the row's edges e: top = the max of x[src(e)] (NaN ignored: the sum
// propagates it), shift = top, or 0 where top is -inf (a row of only -inf: no
// exp(-inf + inf) = NaN), total = the sum of exp(x[src(e)] - shift).
template <typename acc_t, typename scalar_t, typename Src>
inline void row_max_and_sum(int64_t begin, int64_t end, int64_t chunk_end, int64_t distance,
                            Src src, const scalar_t* x, int64_t K, acc_t* top, acc_t* shift,
                            acc_t* total) {
  std::fill(top, top + K, -std::numeric_limits<acc_t>::infinity());
  for (int64_t e = begin; e < end; ++e) {
    if (e + distance < chunk_end) prefetch_row(x + src(e + distance) * K, K);
    max_into(top, x + src(e) * K, K);
  }
  for (int64_t k = 0; k < K; ++k)
    shift[k] = top[k] == -std::numeric_limits<acc_t>::infinity() ? acc_t(0) : top[k];
  std::fill(total, total + K, acc_t(0));
  for (int64_t e = begin; e < end; ++e) add_shifted_exp(total, x + src(e) * K, shift, K);
}

// body(row, begin, end, top, shift, total) for each row with edges, after row_max_and_sum
// filled its per-thread buffers; empty(row) for the rows without.
template <typename acc_t, typename index_t, typename scalar_t, typename Src, typename Body,
          typename Empty>
void for_each_row_stats(const index_t* indptr, Src src, const scalar_t* x, int64_t num_rows,
                        int64_t K, Body&& body, Empty&& empty) {
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> top(K), shift(K), total(K);
    const int64_t chunk_end = indptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t begin = indptr[row], end = indptr[row + 1];
      if (begin == end) {
        empty(row);
        continue;
      }
      row_max_and_sum(begin, end, chunk_end, distance, src, x, K, top.data(), shift.data(),
                      total.data());
      body(row, begin, end, top.data(), shift.data(), total.data());
    }
  });
}

// out[row, k] = log(eps + total) + top over the row's edges (row_max_and_sum): NaN and +inf
// give NaN (inf - inf), as torch_scatter's formula; rows without edges give 0.
template <typename scalar_t, typename index_t, typename Src>
void logsumexp_rows(const index_t* indptr, Src src, const scalar_t* x, int64_t num_rows, int64_t K,
                    double eps, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  for_each_row_stats<acc_t>(
      indptr, src, x, num_rows, K,
      [&](int64_t row, int64_t, int64_t, const acc_t* top, const acc_t*, const acc_t* total) {
        log_plus(out + row * K, total, static_cast<acc_t>(eps), top, K);
      },
      [&](int64_t row) { std::fill(out + row * K, out + (row + 1) * K, scalar_t(0)); });
}

// The softmax (log: the log-softmax, with eps) of each row's gathered x rows, per channel,
// written at each x row's own position, all in the accumulation type and rounded once:
// (x - shift) - log(eps + total), or exp(x - shift) / total with a total of 0 (a row of
// only -inf) giving weights 0. x - shift first keeps the result's precision where the max
// is large (a bfloat16 log-sum-exp rounded before the subtraction lost up to 0.5 at 100).
template <bool kLog, typename scalar_t, typename index_t, typename Src>
void softmax_rows(const index_t* indptr, Src src, const scalar_t* x, int64_t num_rows, int64_t K,
                  double eps, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  for_each_row_stats<acc_t>(
      indptr, src, x, num_rows, K,
      [&](int64_t, int64_t begin, int64_t end, const acc_t*, const acc_t* shift, acc_t* total) {
        normalisers<kLog>(total, static_cast<acc_t>(eps), K);
        for (int64_t e = begin; e < end; ++e)
          write_normalised<kLog>(out + src(e) * K, x + src(e) * K, shift, total, K);
      },
      [](int64_t) {});  // (no positions to write)
}

// x [rows, K] of a float type, read through indices (one per CSR position) or in order.
void check_logsumexp_args(const at::Tensor& x, const at::Tensor& indptr,
                          const c10::optional<at::Tensor>& indices) {
  check_indptr(indptr);
  TORCH_CHECK(x.dim() == 2, "x must be 2-D [rows, channels], got shape ", x.sizes());
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "x must be float32, float64, bfloat16 or float16, got ", x.scalar_type());
  const bool gathered = indices.has_value() && indices->defined();
  if (gathered) {
    check_index(*indices, "indices");
    TORCH_CHECK(indices->scalar_type() == indptr.scalar_type(), "indices (", indices->scalar_type(),
                ") and indptr (", indptr.scalar_type(), ") must share one index dtype");
    check_same_device(*indices, "indices", x, "x");
    check_csr_nnz(indptr, indices->numel(), "indices");
    check_index_range(*indices, x.size(0), "indices", "x");
  } else {
    check_csr_nnz(indptr, x.size(0), "x");
  }
}

// run(src) with src(e) the row of x at CSR position e: indices[e] (ic defined), or e.
template <typename index_t, typename F>
void with_source_rows(const at::Tensor& ic, F&& run) {
  if (ic.defined()) {
    const index_t* idx = ic.data_ptr<index_t>();
    run([idx](int64_t e) { return static_cast<int64_t>(idx[e]); });
  } else {
    run([](int64_t e) { return e; });
  }
}

at::Tensor segment_logsumexp_cpu(const at::Tensor& x, const at::Tensor& indptr,
                                 const c10::optional<at::Tensor>& indices, double eps) {
  check_logsumexp_args(x, indptr, indices);
  const bool gathered = indices.has_value() && indices->defined();
  const int64_t num_rows = indptr.numel() - 1, K = x.size(1);
  const auto xc = x.contiguous();
  const auto ic = gathered ? indices->contiguous() : at::Tensor();
  auto out = empty_output({num_rows, K}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "graphloc::segment_logsumexp", [&] {
        GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
          const index_t* ip = indptr.data_ptr<index_t>();
          const scalar_t* xs = xc.data_ptr<scalar_t>();
          scalar_t* o = out.data_ptr<scalar_t>();
          with_source_rows<index_t>(ic, [&](auto src) {
            logsumexp_rows<scalar_t, index_t>(ip, src, xs, num_rows, K, eps, o);
          });
        });
      });
  return out;
}

// out[e] = exp(x[src(e)] - norm[row]) * grad[row] for the CSR positions e of each row: the
// backward's per-edge gradient in one pass, where ATen's gather, subtract, exp and
// multiply took four (78 ms against 15 at E = 659,868, K = 64).
template <typename scalar_t, typename index_t, typename Src>
void edge_grad_rows(const index_t* indptr, Src src, const scalar_t* x, const scalar_t* norm,
                    const scalar_t* grad, int64_t num_rows, int64_t K, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    const int64_t chunk_end = indptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    for (int64_t row = r0; row < r1; ++row) {
      const scalar_t* __restrict__ n = norm + row * K;
      const scalar_t* __restrict__ g = grad + row * K;
      for (int64_t e = indptr[row]; e < indptr[row + 1]; ++e) {
        if (e + distance < chunk_end) prefetch_row(x + src(e + distance) * K, K);
        const scalar_t* __restrict__ xr = x + src(e) * K;
        scalar_t* __restrict__ o = out + e * K;
#pragma omp simd
        for (int64_t k = 0; k < K; ++k)
          o[k] =
              static_cast<scalar_t>(exp_vec(static_cast<acc_t>(xr[k]) - static_cast<acc_t>(n[k])) *
                                    static_cast<acc_t>(g[k]));
      }
    }
  });
}

at::Tensor logsumexp_edge_grad_cpu(const at::Tensor& x, const at::Tensor& indptr,
                                   const c10::optional<at::Tensor>& indices, const at::Tensor& norm,
                                   const at::Tensor& grad) {
  check_logsumexp_args(x, indptr, indices);
  const int64_t num_rows = indptr.numel() - 1, K = x.size(1);
  for (const auto& [t, name] : {std::pair{&norm, "norm"}, std::pair{&grad, "grad"}}) {
    TORCH_CHECK(t->dim() == 2 && t->size(0) == num_rows && t->size(1) == K, name, " must be [",
                num_rows, ", ", K, "], got shape ", t->sizes());
    TORCH_CHECK(t->scalar_type() == x.scalar_type(), name, " is ", t->scalar_type(), " but x is ",
                x.scalar_type());
    check_same_device(*t, name, x, "x");
  }
  const bool gathered = indices.has_value() && indices->defined();
  const int64_t E = gathered ? indices->numel() : x.size(0);
  const auto xc = x.contiguous(), nc = norm.contiguous(), gc = grad.contiguous();
  const auto ic = gathered ? indices->contiguous() : at::Tensor();
  auto out = empty_output({E, K}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "graphloc::logsumexp_edge_grad", [&] {
        GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
          const index_t* ip = indptr.data_ptr<index_t>();
          const auto run = [&](auto src) {
            edge_grad_rows<scalar_t, index_t>(ip, src, xc.data_ptr<scalar_t>(),
                                              nc.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(),
                                              num_rows, K, out.data_ptr<scalar_t>());
          };
          with_source_rows<index_t>(ic, run);
        });
      });
  return out;
}

// Each row of x read once: the softmax writes each row at its own position.
template <typename index_t>
void check_permutation(const index_t* indices, int64_t n) {
  std::vector<uint8_t> seen(n, 0);  // (the range is checked before)
  for (int64_t e = 0; e < n; ++e) {
    const int64_t row = indices[e];
    TORCH_CHECK(!seen[row], "indices[", e, "] = ", row, " repeats a row of x: each row of x ",
                "is written at its own position, so indices must list every row once");
    seen[row] = 1;
  }
}

at::Tensor segment_softmax_rows_cpu(const at::Tensor& x, const at::Tensor& indptr,
                                    const c10::optional<at::Tensor>& indices, double eps,
                                    bool log) {
  check_logsumexp_args(x, indptr, indices);
  const bool gathered = indices.has_value() && indices->defined();
  TORCH_CHECK(!gathered || indices->numel() == x.size(0), "indices has ", indices->numel(),
              " entries but x has ", x.size(0), " rows: it must list every row once");
  const int64_t num_rows = indptr.numel() - 1, K = x.size(1);
  const auto xc = x.contiguous();
  const auto ic = gathered ? indices->contiguous() : at::Tensor();
  auto out = empty_output(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "graphloc::segment_softmax_rows", [&] {
        GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
          const index_t* ip = indptr.data_ptr<index_t>();
          const auto run = [&](auto src) {
            const scalar_t* xs = xc.data_ptr<scalar_t>();
            scalar_t* o = out.data_ptr<scalar_t>();
            if (log)
              softmax_rows<true, scalar_t, index_t>(ip, src, xs, num_rows, K, eps, o);
            else
              softmax_rows<false, scalar_t, index_t>(ip, src, xs, num_rows, K, eps, o);
          };
          if (gathered) check_permutation(ic.data_ptr<index_t>(), ic.numel());
          with_source_rows<index_t>(ic, run);
        });
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("segment_softmax_rows", &segment_softmax_rows_cpu);
  m.impl("segment_logsumexp", &segment_logsumexp_cpu);
  m.impl("logsumexp_edge_grad", &logsumexp_edge_grad_cpu);
}

}  // namespace graphloc
