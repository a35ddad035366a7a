// CPU kernels of GATv2's scores: per edge (j -> i) and head h,
//   score[e, h] = sum_c att[h, c] * leaky_relu(src[j, h*C + c] + dst[i, h*C + c]),
// without the [E, H * C] sums the composed ops (sddmm, leaky_relu, a product with att)
// write and read back forward and backward. The backward recomputes the sums where it needs
// them: d dst and d att over the CSR rows, d src over the transpose (grad_rows).
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
  const int64_t C = width_of<CT>(C_run);  // a constant trip count: no loop overhead per head
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
  const int64_t C = width_of<CT>(C_run);
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

// One side's gradient, row by row over a CSR of that side: row r's entries k hold the
// other end idx[k] and the edge perm[k] (or k itself without perm), and
//   d own[r] = sum over the row's entries of grad[e, h] * att * leaky'(own[r] + other[idx[k]]).
// The CSR gives d dst (own = dst), the transpose d src (own = src): the sum is symmetric. With
// `att_rows`, the row's share of d att too: sum over its entries of grad[e, h] * leaky(sum),
// one [H * C] row per own row (summed over the rows afterwards: the same order for any
// thread count). own[r] stays in L1 while the other rows stream past, prefetched.
template <int CT, typename scalar_t, typename index_t>
void grad_rows(const index_t* ptr, const index_t* idx, const index_t* perm, const scalar_t* own,
               const scalar_t* other, const scalar_t* att_in, const scalar_t* grad,
               int64_t num_rows, int64_t H, int64_t C, double slope_in, scalar_t* grad_own,
               scalar_t* att_rows) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = H * C;
  const acc_t slope = static_cast<acc_t>(slope_in);
  std::vector<acc_t> att(att_in, att_in + K);
  parallel_rows(ptr, num_rows, [&](int64_t r0, int64_t r1) {
    const int64_t chunk_end = ptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    std::vector<acc_t> d_row(K), a_row(K);
    for (int64_t r = r0; r < r1; ++r) {
      std::fill(d_row.begin(), d_row.end(), acc_t(0));
      std::fill(a_row.begin(), a_row.end(), acc_t(0));
      const scalar_t* __restrict__ mine = own + r * K;
      for (int64_t k = ptr[r]; k < ptr[r + 1]; ++k) {
        if (k + distance < chunk_end)
          prefetch_row(other + static_cast<int64_t>(idx[k + distance]) * K, K);
        const scalar_t* __restrict__ theirs = other + static_cast<int64_t>(idx[k]) * K;
        const scalar_t* g_e = grad + (perm != nullptr ? static_cast<int64_t>(perm[k]) : k) * H;
        if (att_rows != nullptr)
          edge_grads<CT, true>(theirs, mine, att.data(), g_e, H, C, slope, d_row.data(),
                               a_row.data());
        else
          edge_grads<CT, false>(theirs, mine, att.data(), g_e, H, C, slope, d_row.data(),
                                a_row.data());
      }
      for (int64_t c = 0; c < K; ++c) grad_own[r * K + c] = static_cast<scalar_t>(d_row[c]);
      if (att_rows != nullptr)
        for (int64_t c = 0; c < K; ++c) att_rows[r * K + c] = static_cast<scalar_t>(a_row[c]);
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
          grad_rows<CT, scalar_t, index_t>(
              indptr.data_ptr<index_t>(), indices.data_ptr<index_t>(), nullptr,
              dc.data_ptr<scalar_t>(), sc.data_ptr<scalar_t>(), ac.data_ptr<scalar_t>(),
              gc.data_ptr<scalar_t>(), indptr.numel() - 1, H, C, negative_slope,
              grad_dst.data_ptr<scalar_t>(), need_att ? att_rows.data_ptr<scalar_t>() : nullptr);
        if (need_src)
          grad_rows<CT, scalar_t, index_t>(
              csc_indptr.data_ptr<index_t>(), csc_indices.data_ptr<index_t>(),
              csc_perm.data_ptr<index_t>(), sc.data_ptr<scalar_t>(), dc.data_ptr<scalar_t>(),
              ac.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(), src.size(0), H, C, negative_slope,
              grad_src.data_ptr<scalar_t>(), nullptr);
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
