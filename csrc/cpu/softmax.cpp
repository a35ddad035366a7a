// CPU kernels of segment_softmax: softmax of edge scores over each destination's incoming
// edges, per head, with the max and the normaliser found in one online pass.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "common/ops.h"
#include "cpu/rows.h"

namespace graphloc {
namespace {

void check_softmax_args(const at::Tensor& t, const at::Tensor& indptr, const char* name) {
  check_indptr(indptr);
  check_scores(t, name);
  check_csr_nnz(indptr, t.size(0), name);
}

// Thread mapping: a thread owns a block of rows; per row and head, one pass keeps the
// running max m and sum s (rescaling s when m grows), a second writes exp(x - m) / s. A row
// of only -inf (fully masked) gets weights 0; a NaN or +inf score makes its row NaN, as
// torch.softmax does.
at::Tensor segment_softmax_cpu(const at::Tensor& score, const at::Tensor& indptr) {
  check_softmax_args(score, indptr, "score");
  const int64_t num_rows = indptr.numel() - 1, H = score.size(1);
  auto sc = score.contiguous();
  auto out = at::empty_like(sc);
  GL_DISPATCH_FLOAT(sc.scalar_type(), "graphloc::segment_softmax", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      using acc_t = typename AccType<scalar_t>::type;
      constexpr acc_t kInf = std::numeric_limits<acc_t>::infinity();
      const index_t* ip = indptr.data_ptr<index_t>();
      const scalar_t* x = sc.data_ptr<scalar_t>();
      scalar_t* y = out.data_ptr<scalar_t>();
      parallel_rows(ip, num_rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t h = 0; h < H; ++h) {
            acc_t m = -static_cast<acc_t>(INFINITY), s = 0;
            for (int64_t e = ip[r]; e < ip[r + 1]; ++e) {
              const acc_t v = static_cast<acc_t>(x[e * H + h]);
              if (v > m) {
                s = s * std::exp(m - v) + 1;
                m = v;
              } else if (v != -kInf)
                s += std::exp(v - m);  // -inf adds 0 (m may be -inf)
            }
            if (m == kInf) s = std::numeric_limits<acc_t>::quiet_NaN();  // as torch.softmax
            for (int64_t e = ip[r]; e < ip[r + 1]; ++e)
              y[e * H + h] = static_cast<scalar_t>(
                  s == acc_t(0) ? acc_t(0) : std::exp(static_cast<acc_t>(x[e * H + h]) - m) / s);
          }
        }
      });
    });
  });
  return out;
}

// Thread mapping as above; grad_in = y * (g - sum_row(g * y)).
at::Tensor segment_softmax_backward_cpu(const at::Tensor& out, const at::Tensor& grad,
                                        const at::Tensor& indptr) {
  check_softmax_args(out, indptr, "out");
  TORCH_CHECK(grad.sizes() == out.sizes(), "grad has shape ", grad.sizes(), " but out has ",
              out.sizes());
  const int64_t num_rows = indptr.numel() - 1, H = out.size(1);
  auto yc = out.contiguous(), gc = grad.contiguous();
  auto gin = at::empty_like(yc);
  GL_DISPATCH_FLOAT(yc.scalar_type(), "graphloc::segment_softmax_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      using acc_t = typename AccType<scalar_t>::type;
      const index_t* ip = indptr.data_ptr<index_t>();
      const scalar_t* y = yc.data_ptr<scalar_t>();
      const scalar_t* g = gc.data_ptr<scalar_t>();
      scalar_t* gi = gin.data_ptr<scalar_t>();
      parallel_rows(ip, num_rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t h = 0; h < H; ++h) {
            acc_t dot = 0;
            for (int64_t e = ip[r]; e < ip[r + 1]; ++e)
              dot += static_cast<acc_t>(g[e * H + h]) * static_cast<acc_t>(y[e * H + h]);
            for (int64_t e = ip[r]; e < ip[r + 1]; ++e)
              gi[e * H + h] = static_cast<scalar_t>(static_cast<acc_t>(y[e * H + h]) *
                                                    (static_cast<acc_t>(g[e * H + h]) - dot));
          }
        }
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
