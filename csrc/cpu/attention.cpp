// CPU kernel of segment_attention: per destination row and head, the softmax of the edge
// scores and the attention-weighted sum of the source rows in one online pass, without any
// per-edge message tensor. Also returns the log-sum-exp per (row, head) for the backward.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "common/ops.h"
#include "cpu/rows.h"

namespace graphloc {
namespace {

constexpr int64_t kPrefetchDistance = 16;

// Thread mapping: a thread owns a block of destination rows. Per row it keeps, for each
// head, the running max m and normaliser s of the scores, and a C-channel accumulator that
// is rescaled by exp(m_old - m_new) whenever the max grows (the FlashAttention recurrence).
template <typename scalar_t, typename index_t>
void attention_rows(const index_t* indptr, const index_t* indices, const scalar_t* score,
                    const scalar_t* x, int64_t num_rows, int64_t H, int64_t C, scalar_t* out,
                    scalar_t* lse) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t K = H * C;
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> acc(K), m(H), s(H);
    const int64_t chunk_end = indptr[r1];
    for (int64_t i = r0; i < r1; ++i) {
      std::fill(acc.begin(), acc.end(), acc_t(0));
      std::fill(m.begin(), m.end(), -static_cast<acc_t>(INFINITY));
      std::fill(s.begin(), s.end(), acc_t(0));
      for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        if (e + kPrefetchDistance < chunk_end)
          prefetch_row(x + static_cast<int64_t>(indices[e + kPrefetchDistance]) * K, K);
        const scalar_t* __restrict__ xj = x + static_cast<int64_t>(indices[e]) * K;
        for (int64_t h = 0; h < H; ++h) {
          const acc_t v = static_cast<acc_t>(score[e * H + h]);
          acc_t* __restrict__ a = acc.data() + h * C;
          const scalar_t* __restrict__ xh = xj + h * C;
          acc_t p = 1;
          if (v > m[h]) {  // new max: rescale what was accumulated so far
            const acc_t scale = std::exp(m[h] - v);
            s[h] *= scale;
            for (int64_t c = 0; c < C; ++c) a[c] *= scale;
            m[h] = v;
          } else {
            p = std::exp(v - m[h]);
          }
          s[h] += p;
          for (int64_t c = 0; c < C; ++c) a[c] += p * static_cast<acc_t>(xh[c]);
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        const bool empty = s[h] == acc_t(0);
        for (int64_t c = 0; c < C; ++c)
          out[i * K + h * C + c] = static_cast<scalar_t>(empty ? acc_t(0) : acc[h * C + c] / s[h]);
        lse[i * H + h] = static_cast<scalar_t>(empty ? acc_t(0) : m[h] + std::log(s[h]));
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor> segment_attention_cpu(
    const at::Tensor& score, const at::Tensor& indptr, const at::Tensor& indices,
    const at::Tensor& x, const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
    const c10::optional<at::Tensor>&) {
  check_attention_args(score, indptr, indices, x);
  check_csr_nnz(indptr, indices.numel(), "indices");
  const int64_t num_rows = indptr.numel() - 1, H = score.size(1), C = x.size(1) / H;
  auto sc = score.contiguous(), xc = x.contiguous(), ic = indices.contiguous();
  auto out = empty_output({num_rows, H * C}, x.options());
  auto lse = at::empty({num_rows, H}, x.options());
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::segment_attention", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      attention_rows<scalar_t, index_t>(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(),
                                        sc.data_ptr<scalar_t>(), xc.data_ptr<scalar_t>(),
                                        num_rows, H, C, out.data_ptr<scalar_t>(),
                                        lse.data_ptr<scalar_t>());
    });
  });
  return {out, lse};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("segment_attention", &segment_attention_cpu); }

}  // namespace graphloc
