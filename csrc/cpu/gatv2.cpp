// CPU kernels of GATv2's scores: per edge (j -> i) and head h,
//   score[e, h] = sum_c att[h, c] * leaky_relu(src[j, h*C + c] + dst[i, h*C + c]),
// without the [E, H * C] sums the composed ops (sddmm, leaky_relu, a product with att)
// write and read back forward and backward. The backward recomputes the sums where it needs
// them: d dst and d att over the CSR rows (dst[i] stays in L1 while the source rows stream
// past), d src over the transpose (src[j] stays while the destination rows stream past).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "common/ops.h"
#include "common/reduce.h"
#include "cpu/rows.h"

namespace graphloc {

namespace {

// The LeakyReLU and its slope at a pre-activation (1 where v > 0, as torch's leaky_relu
// backward, which takes the slope at 0).
template <typename acc_t>
inline acc_t leaky(acc_t v, acc_t slope) {
  return v > acc_t(0) ? v : v * slope;
}

template <typename acc_t>
inline acc_t leaky_slope(acc_t v, acc_t slope) {
  return v > acc_t(0) ? acc_t(1) : slope;
}

// One edge's scores: the LeakyReLU of the two rows' sum into `buf` (lane-wise), then per
// head its dot product with att (lane-wise partial sums). One loop with a running sum per
// head did not vectorise: without reassociation GCC keeps a float sum in order.
template <int CT, typename scalar_t, typename acc_t>
inline void edge_scores(const scalar_t* __restrict__ sj, const scalar_t* __restrict__ di,
                        const acc_t* __restrict__ att, int64_t H, int64_t C_run, acc_t slope,
                        acc_t* __restrict__ buf, scalar_t* __restrict__ out) {
  const int64_t C = CT > 0 ? CT : C_run;  // a constant trip count: no loop overhead per head
  const int64_t K = H * C;
#pragma omp simd
  for (int64_t k = 0; k < K; ++k)
    buf[k] = leaky(static_cast<acc_t>(sj[k]) + static_cast<acc_t>(di[k]), slope);
  for (int64_t h = 0; h < H; ++h) {
    acc_t sum = 0;
    const acc_t* __restrict__ b = buf + h * C;
    const acc_t* __restrict__ a = att + h * C;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) sum += a[c] * b[c];
    out[h] = static_cast<scalar_t>(sum);
  }
}

// One edge's share of a gradient row: d[k] += grad[e, h] * att[k] * leaky'(sum) over the
// channels k of each head h, and with `a` (d att) a[k] += grad[e, h] * leaky(sum).
template <int CT, bool kAtt, typename scalar_t, typename acc_t>
inline void edge_grads(const scalar_t* __restrict__ sj, const scalar_t* __restrict__ di,
                       const acc_t* __restrict__ att, const scalar_t* __restrict__ g_e, int64_t H,
                       int64_t C_run, acc_t slope, acc_t* __restrict__ d, acc_t* __restrict__ a) {
  const int64_t C = CT > 0 ? CT : C_run;
  for (int64_t h = 0; h < H; ++h) {
    const acc_t g = static_cast<acc_t>(g_e[h]);
    const int64_t c0 = h * C;
#pragma omp simd
    for (int64_t c = c0; c < c0 + C; ++c) {
      const acc_t v = static_cast<acc_t>(sj[c]) + static_cast<acc_t>(di[c]);
      d[c] += g * att[c] * leaky_slope(v, slope);
      if constexpr (kAtt) a[c] += g * leaky(v, slope);
    }
  }
}

// Thread mapping: a thread owns a block of destination rows (parallel_rows), the source
// rows of the edges ahead prefetched.
template <int CT, typename scalar_t, typename index_t>
void scores_rows(const index_t* indptr, const index_t* indices, const scalar_t* src,
                 const scalar_t* dst, const scalar_t* att_in, int64_t num_rows, int64_t H,
                 int64_t C, double slope, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = H * C;
  std::vector<acc_t> att(att_in, att_in + K);
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    const int64_t chunk_end = indptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    std::vector<acc_t> buf(K);
    for (int64_t i = r0; i < r1; ++i) {
      for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        if (e + distance < chunk_end)
          prefetch_row(src + static_cast<int64_t>(indices[e + distance]) * K, K);
        edge_scores<CT>(src + static_cast<int64_t>(indices[e]) * K, dst + i * K, att.data(), H, C,
                        static_cast<acc_t>(slope), buf.data(), out + e * H);
      }
    }
  });
}

// d dst[i] = sum over the row's edges of grad[e, h] * att * leaky'(sum), and, with
// `att_rows`, the row's share of d att: sum over its edges of grad[e, h] * leaky(sum), one
// [H * C] row per destination (summed over the rows afterwards: the same order for any
// thread count).
template <int CT, typename scalar_t, typename index_t>
void dst_grad_rows(const index_t* indptr, const index_t* indices, const scalar_t* src,
                   const scalar_t* dst, const scalar_t* att_in, const scalar_t* grad,
                   int64_t num_rows, int64_t H, int64_t C, double slope_in, scalar_t* grad_dst,
                   scalar_t* att_rows) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = H * C;
  const acc_t slope = static_cast<acc_t>(slope_in);
  std::vector<acc_t> att(att_in, att_in + K);
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    const int64_t chunk_end = indptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    std::vector<acc_t> d_row(K), a_row(K);
    for (int64_t i = r0; i < r1; ++i) {
      std::fill(d_row.begin(), d_row.end(), acc_t(0));
      std::fill(a_row.begin(), a_row.end(), acc_t(0));
      const scalar_t* __restrict__ di = dst + i * K;
      for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        if (e + distance < chunk_end)
          prefetch_row(src + static_cast<int64_t>(indices[e + distance]) * K, K);
        const scalar_t* __restrict__ sj = src + static_cast<int64_t>(indices[e]) * K;
        if (att_rows != nullptr)
          edge_grads<CT, true>(sj, di, att.data(), grad + e * H, H, C, slope, d_row.data(),
                               a_row.data());
        else
          edge_grads<CT, false>(sj, di, att.data(), grad + e * H, H, C, slope, d_row.data(),
                                a_row.data());
      }
      for (int64_t k = 0; k < K; ++k) grad_dst[i * K + k] = static_cast<scalar_t>(d_row[k]);
      if (att_rows != nullptr)
        for (int64_t k = 0; k < K; ++k) att_rows[i * K + k] = static_cast<scalar_t>(a_row[k]);
    }
  });
}

// d src[j] = sum over j's out-edges (the transpose's row j: destination t_indices[k], edge
// t_perm[k]) of grad[e, h] * att * leaky'(sum).
template <int CT, typename scalar_t, typename index_t>
void src_grad_rows(const index_t* t_indptr, const index_t* t_indices, const index_t* t_perm,
                   const scalar_t* src, const scalar_t* dst, const scalar_t* att_in,
                   const scalar_t* grad, int64_t num_src, int64_t H, int64_t C, double slope_in,
                   scalar_t* grad_src) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = H * C;
  const acc_t slope = static_cast<acc_t>(slope_in);
  std::vector<acc_t> att(att_in, att_in + K);
  parallel_rows(t_indptr, num_src, [&](int64_t r0, int64_t r1) {
    const int64_t chunk_end = t_indptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    std::vector<acc_t> d_row(K);
    for (int64_t j = r0; j < r1; ++j) {
      std::fill(d_row.begin(), d_row.end(), acc_t(0));
      const scalar_t* __restrict__ sj = src + j * K;
      for (int64_t k = t_indptr[j]; k < t_indptr[j + 1]; ++k) {
        if (k + distance < chunk_end)
          prefetch_row(dst + static_cast<int64_t>(t_indices[k + distance]) * K, K);
        const scalar_t* __restrict__ di = dst + static_cast<int64_t>(t_indices[k]) * K;
        const int64_t e = static_cast<int64_t>(t_perm[k]);
        edge_grads<CT, false>(sj, di, att.data(), grad + e * H, H, C, slope, d_row.data(),
                              static_cast<acc_t*>(nullptr));
      }
      for (int64_t c = 0; c < K; ++c) grad_src[j * K + c] = static_cast<scalar_t>(d_row[c]);
    }
  });
}

at::Tensor gatv2_scores_cpu(const at::Tensor& indptr, const at::Tensor& indices,
                            const at::Tensor& src, const at::Tensor& dst, const at::Tensor& att,
                            double negative_slope, const c10::optional<at::Tensor>&,
                            const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&) {
  check_gatv2_args(indptr, indices, src, dst, att, negative_slope);
  const int64_t H = att.size(0), C = att.size(1), E = indices.numel();
  auto sc = src.contiguous(), dc = dst.contiguous(), ac = att.contiguous();
  auto out = empty_output({E, H}, src.options());
  GL_DISPATCH_FLOAT(src.scalar_type(), "graphloc::gatv2_scores", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        scores_rows<decltype(width)::value, scalar_t, index_t>(
            indptr.data_ptr<index_t>(), indices.data_ptr<index_t>(), sc.data_ptr<scalar_t>(),
            dc.data_ptr<scalar_t>(), ac.data_ptr<scalar_t>(), indptr.numel() - 1, H, C,
            negative_slope, out.data_ptr<scalar_t>());
      });
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> gatv2_scores_backward_cpu(
    const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& src,
    const at::Tensor& dst, const at::Tensor& att, double negative_slope, const at::Tensor& grad,
    const at::Tensor& csc_indptr, const at::Tensor& csc_indices, const at::Tensor& csc_perm,
    bool need_src, bool need_dst, bool need_att) {
  check_gatv2_args(indptr, indices, src, dst, att, negative_slope);
  const int64_t H = att.size(0), C = att.size(1), E = indices.numel();
  TORCH_CHECK(grad.dim() == 2 && grad.size(0) == E && grad.size(1) == H &&
                  grad.scalar_type() == src.scalar_type(),
              "grad must be ", src.scalar_type(), " of shape [", E, ", ", H, "], got ",
              grad.scalar_type(), " of shape ", grad.sizes());
  check_transpose_args(csc_indptr, csc_indices, csc_perm, indptr, src.size(0), dst.size(0), E);
  auto sc = src.contiguous(), dc = dst.contiguous(), ac = att.contiguous();
  auto gc = grad.contiguous();
  auto grad_src = need_src ? empty_output(sc.sizes(), sc.options()) : at::empty({0}, src.options());
  auto grad_dst =
      need_dst || need_att ? empty_output(dc.sizes(), dc.options()) : at::empty({0}, dst.options());
  auto att_rows = need_att ? empty_output(dc.sizes(), dc.options()) : at::empty({0}, dst.options());
  GL_DISPATCH_FLOAT(src.scalar_type(), "graphloc::gatv2_scores_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      with_constant<8, 16, 32, 64>(C, [&](auto width) {
        constexpr int CT = decltype(width)::value;
        if (need_dst || need_att)
          dst_grad_rows<CT, scalar_t, index_t>(
              indptr.data_ptr<index_t>(), indices.data_ptr<index_t>(), sc.data_ptr<scalar_t>(),
              dc.data_ptr<scalar_t>(), ac.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(),
              indptr.numel() - 1, H, C, negative_slope, grad_dst.data_ptr<scalar_t>(),
              need_att ? att_rows.data_ptr<scalar_t>() : nullptr);
        if (need_src)
          src_grad_rows<CT, scalar_t, index_t>(
              csc_indptr.data_ptr<index_t>(), csc_indices.data_ptr<index_t>(),
              csc_perm.data_ptr<index_t>(), sc.data_ptr<scalar_t>(), dc.data_ptr<scalar_t>(),
              ac.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(), src.size(0), H, C, negative_slope,
              grad_src.data_ptr<scalar_t>());
      });
    });
  });
  auto grad_att = need_att ? att_rows.sum(0).view({H, C}) : at::empty({0}, att.options());
  if (!need_dst) grad_dst = at::empty({0}, dst.options());
  return {grad_src, grad_dst, grad_att};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("gatv2_scores", &gatv2_scores_cpu);
  m.impl("gatv2_scores_backward", &gatv2_scores_backward_cpu);
}

}  // namespace graphloc
