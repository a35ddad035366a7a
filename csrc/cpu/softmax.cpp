// CPU kernels of segment_softmax: softmax of edge scores over each destination's incoming
// edges, per head, the exponentials of many short rows in one vectorised loop.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/ops.h"
#include "cpu/block_softmax.h"
#include "cpu/rows.h"

namespace graphloc {
namespace {

void check_softmax_args(const at::Tensor& t, const at::Tensor& indptr, const char* name) {
  check_indptr(indptr);
  check_scores(t, name);
  check_csr_nnz(indptr, t.size(0), name);
}

// Thread mapping: a thread owns a block of rows, taken in blocks of short rows
// (block_softmax.h): each row's scores shifted by their max per head, one vectorised exp
// over the block, then each row divided by its sum. A row of only -inf (fully masked) gets
// weights 0; a NaN or +inf score makes its row NaN, as torch.softmax does.
at::Tensor segment_softmax_cpu(const at::Tensor& score, const at::Tensor& indptr) {
  check_softmax_args(score, indptr, "score");
  const int64_t num_rows = indptr.numel() - 1, H = score.size(1);
  auto sc = score.contiguous();
  auto out = empty_output(sc.sizes(), sc.options());
  GL_DISPATCH_FLOAT(sc.scalar_type(), "graphloc::segment_softmax", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      using acc_t = typename AccType<scalar_t>::type;
      const index_t* ip = indptr.data_ptr<index_t>();
      const scalar_t* x = sc.data_ptr<scalar_t>();
      scalar_t* y = out.data_ptr<scalar_t>();
      const bool stream = streams_output(out.numel() * static_cast<int64_t>(sizeof(scalar_t)));
      parallel_rows(ip, num_rows, [&](int64_t r0, int64_t r1) {
        std::vector<acc_t> p, m, s(H);
        for_row_blocks(ip, r0, r1, [&](int64_t b0, int64_t b1) {
          const int64_t e0 = ip[b0], n = (ip[b1] - e0) * H;
          block_softmax_numerators(ip, b0, b1, H, x + e0 * H, p, m);
          normalise_block_rows(ip, b0, b1, H, p.data(), s.data());
          store_row(y + e0 * H, p.data(), n, stream);  // the block at once
        });
      });
    });
  });
  return out;
}

// One row [degree, H] of grad_in = y * (g - sum_row(g * y)), per head: one [HT] vector per
// edge when the head count is known at compile time (HT > 1, float or double), the same sums
// in the same order as the run-time loop over heads.
template <int HT, typename acc_t, typename scalar_t>
inline void softmax_backward_row(const scalar_t* y, const scalar_t* g, int64_t degree, int64_t H,
                                 scalar_t* grad_in) {
  if constexpr (short_row_vectors<HT, acc_t>() && std::is_same_v<scalar_t, acc_t>) {
    using V = HeadVec<HT, acc_t>;
    V dot = {};
    for (int64_t e = 0; e < degree; ++e)
      dot += load_vec<acc_t, HT>(g + e * HT) * load_vec<acc_t, HT>(y + e * HT);
    for (int64_t e = 0; e < degree; ++e)
      store_vec<acc_t, HT>(grad_in + e * HT, load_vec<acc_t, HT>(y + e * HT) *
                                                 (load_vec<acc_t, HT>(g + e * HT) - dot));
  } else {
    for (int64_t h = 0; h < H; ++h) {
      acc_t dot = 0;
      for (int64_t e = 0; e < degree; ++e)
        dot += static_cast<acc_t>(g[e * H + h]) * static_cast<acc_t>(y[e * H + h]);
      for (int64_t e = 0; e < degree; ++e)
        grad_in[e * H + h] = static_cast<scalar_t>(static_cast<acc_t>(y[e * H + h]) *
                                                   (static_cast<acc_t>(g[e * H + h]) - dot));
    }
  }
}

// Thread mapping as above; grad_in = y * (g - sum_row(g * y)).
at::Tensor segment_softmax_backward_cpu(const at::Tensor& out, const at::Tensor& grad,
                                        const at::Tensor& indptr) {
  check_softmax_args(out, indptr, "out");
  TORCH_CHECK(grad.sizes() == out.sizes(), "grad has shape ", grad.sizes(), " but out has ",
              out.sizes());
  const int64_t num_rows = indptr.numel() - 1, H = out.size(1);
  auto yc = out.contiguous(), gc = grad.contiguous();
  auto gin = empty_output(yc.sizes(), yc.options());
  GL_DISPATCH_FLOAT(yc.scalar_type(), "graphloc::segment_softmax_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      using acc_t = typename AccType<scalar_t>::type;
      const index_t* ip = indptr.data_ptr<index_t>();
      const scalar_t* y = yc.data_ptr<scalar_t>();
      const scalar_t* g = gc.data_ptr<scalar_t>();
      scalar_t* gi = gin.data_ptr<scalar_t>();
      parallel_rows(ip, num_rows, [&](int64_t r0, int64_t r1) {
        with_heads(H, [&](auto heads) {
          for (int64_t r = r0; r < r1; ++r)
            softmax_backward_row<decltype(heads)::value, acc_t>(
                y + ip[r] * H, g + ip[r] * H, ip[r + 1] - ip[r], H, gi + ip[r] * H);
        });
      });
    });
  });
  return gin;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("segment_softmax", &segment_softmax_cpu);
  m.impl("segment_softmax_backward", &segment_softmax_backward_cpu);
}

}  // namespace graphloc
