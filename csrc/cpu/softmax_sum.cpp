// CPU kernels of softmax_sum, DeeperGCN's softmax aggregation: per CSR row i and channel k,
//   out[i, k] = sum over i's edges e of softmax_e(t[k] * x[src(e), k]) * x[src(e), k],
// the scores being the values themselves, scaled per channel. Composed, it gathers the
// [E, K] neighbour rows, scales them and runs an attention with one head per channel: the
// softmax aggregation took 647 of GENConv's 742 ms on the road graph that way (RESULTS.md,
// 2026-12-04). Here the forward reads each neighbour row twice in cache (the max, then the
// exponentials and both sums) and keeps each row's shift and sum per channel; the backward
// recomputes each weight from them over the transpose, so no [E, K] tensor is written
// either way.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <tuple>
#include <vector>

#include "common/ops.h"
#include "common/reduce.h"
#include "cpu/fast_exp.h"
#include "cpu/rows.h"
#include "cpu/stream.h"

namespace graphloc {

namespace {

// The score t * x rounded to scalar_t, as torch's product of the two tensors is (for
// bfloat16 a float product rounded once), then widened for the softmax.
template <typename scalar_t, typename acc_t>
inline acc_t score_of(scalar_t x, acc_t t) {
  return static_cast<acc_t>(static_cast<scalar_t>(static_cast<acc_t>(x) * t));
}

// Row i of the forward as the sum of the normalised weights' products, per channel
// sum_e (exp(score - shift) / total) x_e, into out [K]: where the sum of the exp-weighted
// values overflowed before its division (each weight <= 1: values within a factor of the
// degree of the type's largest) while the softmax-weighted sum is finite, as the pure-torch
// twin and PyG's softmax aggregation form it; also where the inputs are not finite.
template <typename scalar_t, typename index_t, typename acc_t>
__attribute__((noinline)) void normalised_row(const index_t* indptr, const index_t* indices,
                                              const scalar_t* x, const acc_t* t, int64_t i,
                                              int64_t K, const acc_t* shift, const acc_t* norm,
                                              acc_t* out) {
  std::fill(out, out + K, acc_t(0));
  for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
    const scalar_t* __restrict__ xr = x + static_cast<int64_t>(indices[e]) * K;
    for (int64_t k = 0; k < K; ++k) {
      const acc_t w = exp_vec(score_of(xr[k], t[k]) - shift[k]) / norm[k];
      out[k] += w * static_cast<acc_t>(xr[k]);
    }
  }
}

// Rows [r0, r1) of the forward. Per channel: top = the largest score of the row (NaN
// skipped: its exponential makes the sum NaN, so the row is NaN as in torch.softmax), the
// shift top, or 0 for a row of only -inf scores (their weights exp(-inf) = 0, no
// exp(-inf + inf) = NaN), total = the sum of exp(score - shift), 1 where it is 0. out is
// the sum of exp(score - shift) * x divided by total; shift and total are kept for the
// backward. A row without edges gives out 0, shift 0 and total 1.
template <int CT, typename scalar_t, typename index_t, typename acc_t>
__attribute__((noinline)) void forward_rows(const index_t* indptr, const index_t* indices,
                                            const scalar_t* x, const acc_t* t, int64_t r0,
                                            int64_t r1, int64_t K_run, scalar_t* out,
                                            acc_t* shift_out, acc_t* total_out) {
  const int64_t K = width_of<CT>(K_run);
  const int64_t distance = prefetch_distance_of<scalar_t>(K);
  const int64_t ahead_end = static_cast<int64_t>(indptr[r1]) - distance;
  // probe: NaN in a channel where some row's output is inf or NaN (v - v), else 0: the
  // chunk is checked once (a check per row cost the forward up to a tenth)
  std::vector<acc_t> top_v(K), total_v(K), sum_v(K), probe_v(K);
  acc_t* __restrict__ top = top_v.data();
  acc_t* __restrict__ total = total_v.data();
  acc_t* __restrict__ sum = sum_v.data();
  acc_t* __restrict__ probe = probe_v.data();
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t begin = indptr[i], end = indptr[i + 1];
    acc_t* __restrict__ shift = shift_out + i * K;
    acc_t* __restrict__ norm = total_out + i * K;
    std::fill(top, top + K, -std::numeric_limits<acc_t>::infinity());
    for (int64_t e = begin; e < end; ++e) {
      if (e < ahead_end) prefetch_row(x + static_cast<int64_t>(indices[e + distance]) * K, K);
      const scalar_t* __restrict__ xr = x + static_cast<int64_t>(indices[e]) * K;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) {
        const acc_t s = score_of(xr[k], t[k]);
        top[k] = s > top[k] ? s : top[k];
      }
    }
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) {
      shift[k] = top[k] == -std::numeric_limits<acc_t>::infinity() ? acc_t(0) : top[k];
      total[k] = acc_t(0);
      sum[k] = acc_t(0);
    }
    for (int64_t e = begin; e < end; ++e) {
      const scalar_t* __restrict__ xr = x + static_cast<int64_t>(indices[e]) * K;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) {
        const acc_t v = static_cast<acc_t>(xr[k]);
        const acc_t w = exp_vec(score_of(xr[k], t[k]) - shift[k]);
        total[k] += w;
        sum[k] += w * v;
      }
    }
    scalar_t* __restrict__ o = out + i * K;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) {
      norm[k] = total[k] == acc_t(0) ? acc_t(1) : total[k];
      const acc_t v = sum[k] / norm[k];
      probe[k] += v - v;
      o[k] = static_cast<scalar_t>(v);
    }
  }
  if (any_non_finite(probe, K))  // a sum overflowed, or the inputs are not finite
    for (int64_t i = r0; i < r1; ++i) {
      scalar_t* __restrict__ o = out + i * K;
      for (int64_t k = 0; k < K; ++k) sum[k] = static_cast<acc_t>(o[k]);
      if (!any_non_finite(sum, K)) continue;
      normalised_row(indptr, indices, x, t, i, K, shift_out + i * K, total_out + i * K, sum);
      for (int64_t k = 0; k < K; ++k) o[k] = static_cast<scalar_t>(sum[k]);
    }
}

// Rows [r0, r1) of the transpose (source rows j). With a = exp(score - shift[i]) / total[i]
// the weight of edge (j -> i) and g = grad[i], the score's gradient is torch.softmax's,
// ds = a * (g * x[j] - g * out[i]); x[j]'s gradient sums a * g (the value) and t * ds (the
// score, unless the scores are detached) over j's edges, and t_sum (K values, unless null)
// the chunk's ds * x[j]: each row's in acc_t, the rows' in double (a chunk can hold
// hundreds of thousands of edges).
template <int CT, bool kScoreGrad, typename scalar_t, typename index_t, typename acc_t>
__attribute__((noinline)) void source_rows(const index_t* csc_indptr, const index_t* csc_indices,
                                           const scalar_t* x, const acc_t* t, const scalar_t* out,
                                           const acc_t* shift, const acc_t* total,
                                           const scalar_t* grad, int64_t r0, int64_t r1,
                                           int64_t K_run, scalar_t* grad_x, double* t_sum) {
  const int64_t K = width_of<CT>(K_run);
  const int64_t distance = prefetch_distance_of<acc_t>(4 * K);
  const int64_t ahead_end = static_cast<int64_t>(csc_indptr[r1]) - distance;
  std::vector<acc_t> dx_v(K), dt_v(K);
  acc_t* __restrict__ dx = dx_v.data();
  acc_t* __restrict__ dt = dt_v.data();
  if (t_sum != nullptr) std::fill(t_sum, t_sum + K, 0.0);
  for (int64_t j = r0; j < r1; ++j) {
    std::fill(dx, dx + K, acc_t(0));
    std::fill(dt, dt + K, acc_t(0));
    const scalar_t* __restrict__ xj = x + j * K;
    for (int64_t c = csc_indptr[j]; c < csc_indptr[j + 1]; ++c) {
      if (c < ahead_end) {  // destination row i's four rows, `distance` entries ahead
        const int64_t ahead = static_cast<int64_t>(csc_indices[c + distance]) * K;
        prefetch_row(grad + ahead, K);
        prefetch_row(out + ahead, K);
        prefetch_row(shift + ahead, K);
        prefetch_row(total + ahead, K);
      }
      const int64_t i = static_cast<int64_t>(csc_indices[c]) * K;
      const scalar_t* __restrict__ g_i = grad + i;
      const scalar_t* __restrict__ o_i = out + i;
      const acc_t* __restrict__ s_i = shift + i;
      const acc_t* __restrict__ n_i = total + i;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) {
        const acc_t v = static_cast<acc_t>(xj[k]);
        const acc_t a = exp_vec(score_of(xj[k], t[k]) - s_i[k]) / n_i[k];
        const acc_t g = static_cast<acc_t>(g_i[k]);
        const acc_t ds = a * (g * v - g * static_cast<acc_t>(o_i[k]));
        dx[k] += kScoreGrad ? a * g + t[k] * ds : a * g;
        dt[k] += ds * v;
      }
    }
    if (grad_x != nullptr) store_row(grad_x + j * K, dx, K, false);
    if (t_sum != nullptr)
      for (int64_t k = 0; k < K; ++k) t_sum[k] += static_cast<double>(dt[k]);
  }
}

// Per-chunk sums of t's gradient, added in the order of the chunks' first rows once all
// are done: the same value for the same chunks (thread count), whichever thread ran which.
class ChunkSums {
 public:
  explicit ChunkSums(int64_t K) : K_(K) {}
  void add(int64_t first_row, std::vector<double> sum) {
    std::lock_guard<std::mutex> lock(mutex_);
    sums_.emplace_back(first_row, std::move(sum));
  }
  std::vector<double> total() {
    std::sort(sums_.begin(), sums_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<double> out(K_, 0.0);
    for (const auto& [row, sum] : sums_)
      for (int64_t k = 0; k < K_; ++k) out[k] += sum[k];
    return out;
  }

 private:
  int64_t K_;
  std::mutex mutex_;
  std::vector<std::pair<int64_t, std::vector<double>>> sums_;
};

// x [N_src, K] and t [K] of one float dtype, a CSR whose indices are rows of x.
void check_softmax_sum_args(const at::Tensor& x, const at::Tensor& t, const at::Tensor& indptr,
                            const at::Tensor& indices) {
  check_spmm_args(indptr, indices, x);
  TORCH_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "t must be 1-D with one value per channel (",
              x.size(1), "), got shape ", t.sizes());
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), "t is ", t.scalar_type(), " but x is ",
              x.scalar_type());
  check_same_device(t, "t", x, "x");
  check_csr_indices(indptr, indices, x.size(0), "x");
}

// t in the accumulation type, in a buffer the kernels read per channel.
template <typename acc_t, typename scalar_t>
std::vector<acc_t> widened(const at::Tensor& t) {
  const auto tc = t.contiguous();
  const scalar_t* p = tc.data_ptr<scalar_t>();
  return std::vector<acc_t>(p, p + tc.numel());
}

std::tuple<at::Tensor, at::Tensor> softmax_sum_cpu(const at::Tensor& x, const at::Tensor& t,
                                                   const at::Tensor& indptr,
                                                   const at::Tensor& indices, bool,
                                                   const c10::optional<at::Tensor>&,
                                                   const c10::optional<at::Tensor>&,
                                                   const c10::optional<at::Tensor>&) {
  check_softmax_sum_args(x, t, indptr, indices);
  const int64_t rows = indptr.numel() - 1, K = x.size(1);
  const auto xc = x.contiguous();
  const auto acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto out = empty_output({rows, K}, x.options());
  auto norm = empty_output({2, rows, K}, x.options().dtype(acc_type));
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::softmax_sum", [&] {
    using acc_t = typename AccType<scalar_t>::type;
    const auto tw = widened<acc_t, scalar_t>(t);
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<16, 32, 64>(K, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const index_t* ip = indptr.data_ptr<index_t>();
        acc_t* shift = norm.data_ptr<acc_t>();
        parallel_rows(ip, rows, [&](int64_t r0, int64_t r1) {
          forward_rows<CT>(ip, indices.data_ptr<index_t>(), xc.data_ptr<scalar_t>(), tw.data(), r0,
                           r1, K, out.data_ptr<scalar_t>(), shift, shift + rows * K);
        });
      });
    });
  });
  return {out, norm};
}

std::tuple<at::Tensor, at::Tensor> softmax_sum_backward_cpu(
    const at::Tensor& x, const at::Tensor& t, const at::Tensor& out, const at::Tensor& norm,
    const at::Tensor& grad, const at::Tensor& indptr, const at::Tensor& indices,
    const at::Tensor& csc_indptr, const at::Tensor& csc_indices, const at::Tensor& csc_perm,
    bool detach_scores, bool need_x, bool need_t) {
  check_softmax_sum_args(x, t, indptr, indices);
  const int64_t rows = indptr.numel() - 1, K = x.size(1);
  for (const auto& [tensor, name] : {std::pair{&out, "out"}, std::pair{&grad, "grad"}})
    TORCH_CHECK(tensor->dim() == 2 && tensor->size(0) == rows && tensor->size(1) == K &&
                    tensor->scalar_type() == x.scalar_type(),
                name, " must be ", x.scalar_type(), " of shape [", rows, ", ", K, "], got ",
                tensor->scalar_type(), " of shape ", tensor->sizes());
  const auto acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  TORCH_CHECK(norm.dim() == 3 && norm.size(0) == 2 && norm.size(1) == rows && norm.size(2) == K &&
                  norm.scalar_type() == acc_type,
              "norm must be ", acc_type, " of shape [2, ", rows, ", ", K, "], got ",
              norm.scalar_type(), " of shape ", norm.sizes());
  TORCH_CHECK(!(detach_scores && need_t), "t has no gradient when the scores are detached");
  check_transpose_args(csc_indptr, csc_indices, csc_perm, indptr, x.size(0), rows, indices.numel());
  const auto xc = x.contiguous(), oc = out.contiguous(), nc = norm.contiguous();
  const auto gc = grad.contiguous();
  auto grad_x = need_x ? empty_output(xc.sizes(), xc.options()) : at::empty({0}, x.options());
  auto grad_t = at::empty({need_t ? K : 0}, t.options());
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::softmax_sum_backward", [&] {
    using acc_t = typename AccType<scalar_t>::type;
    const auto tw = widened<acc_t, scalar_t>(t);
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<16, 32, 64>(K, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        const index_t* t_ptr = csc_indptr.data_ptr<index_t>();
        const acc_t* shift = nc.data_ptr<acc_t>();
        ChunkSums t_sums(K);
        parallel_rows(t_ptr, x.size(0), [&](int64_t r0, int64_t r1) {
          std::vector<double> t_sum(need_t ? K : 0);
          const auto run = [&](auto score_grad) {
            source_rows<CT, decltype(score_grad)::value>(
                t_ptr, csc_indices.data_ptr<index_t>(), xc.data_ptr<scalar_t>(), tw.data(),
                oc.data_ptr<scalar_t>(), shift, shift + rows * K, gc.data_ptr<scalar_t>(), r0, r1,
                K, need_x ? grad_x.data_ptr<scalar_t>() : nullptr, need_t ? t_sum.data() : nullptr);
          };
          if (detach_scores)
            run(std::false_type{});
          else
            run(std::true_type{});
          if (need_t) t_sums.add(r0, std::move(t_sum));
        });
        if (need_t) {
          const auto sum = t_sums.total();
          scalar_t* gt = grad_t.data_ptr<scalar_t>();
          for (int64_t k = 0; k < K; ++k) gt[k] = static_cast<scalar_t>(sum[k]);
        }
      });
    });
  });
  return {grad_x, grad_t};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("softmax_sum", &softmax_sum_cpu);
  m.impl("softmax_sum_backward", &softmax_sum_backward_cpu);
}

}  // namespace graphloc
