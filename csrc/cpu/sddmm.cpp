// CPU kernel of sddmm: per-edge values from source and destination features, in CSR order.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <type_traits>
#include <vector>

#include "common/ops.h"
#include "cpu/head_dots.h"
#include "cpu/rows.h"

namespace graphloc {

namespace {

// Thread mapping: a thread owns a block of destination rows; b[row] stays in L1 while the
// row's source rows a[src] stream past. Dot products go through head_dots: lane-wise partial
// sums, several heads at a time (a chain of F dependent scalar adds per edge and head was
// latency-bound: the power-law graph's F = 64 forward 41.7 ms, 2026-12-03; RESULTS.md).
template <int T, typename scalar_t, typename index_t, EdgeOp Op>
void sddmm_rows_tiled(const index_t* indptr, const index_t* indices, const scalar_t* a,
                      const scalar_t* b, int64_t num_rows, int64_t K, int64_t heads,
                      scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t F = K / heads;
  const int64_t width = Op == EdgeOp::Dot ? heads : K;
  // several heads per sweep only where a head is one tile of float or double (head_dots)
  const int group =
      std::is_same_v<scalar_t, acc_t> && T > 0 && F == T ? heads_per_sweep(heads, T) : 0;
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    const int64_t chunk_end = indptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    std::vector<acc_t> dots(Op == EdgeOp::Dot ? heads : 0);
    for (int64_t i = r0; i < r1; ++i) {
      const scalar_t* __restrict__ bi = b + i * K;
      for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        if (e + distance < chunk_end)
          prefetch_row(a + static_cast<int64_t>(indices[e + distance]) * K, K);
        const scalar_t* __restrict__ aj = a + static_cast<int64_t>(indices[e]) * K;
        scalar_t* __restrict__ o = out + e * width;
        if constexpr (Op == EdgeOp::Dot) {
          head_dots<T>(aj, bi, heads, F, group, dots.data());
          for (int64_t h = 0; h < heads; ++h) o[h] = static_cast<scalar_t>(dots[h]);
        } else if constexpr (Op == EdgeOp::Add) {
          for (int64_t k = 0; k < K; ++k)
            o[k] = static_cast<scalar_t>(static_cast<acc_t>(aj[k]) + static_cast<acc_t>(bi[k]));
        } else {
          for (int64_t k = 0; k < K; ++k)
            o[k] = static_cast<scalar_t>(static_cast<acc_t>(aj[k]) * static_cast<acc_t>(bi[k]));
        }
      }
    }
  });
}

// sddmm_rows_tiled with the widest register tile dividing a head (dot products), or none.
// Dot products of heads of width 1 are the channels' products: the product loop, which
// vectorises across the heads (the per-head dots of one term took 64 ms on the road graph at
// K = 64, 2026-12-05; spmm's per-channel edge values take this gradient).
template <typename scalar_t, typename index_t, EdgeOp Op>
void sddmm_rows(const index_t* indptr, const index_t* indices, const scalar_t* a, const scalar_t* b,
                int64_t num_rows, int64_t K, int64_t heads, scalar_t* out) {
  if (Op == EdgeOp::Dot && heads > 1 && heads == K)
    sddmm_rows_tiled<0, scalar_t, index_t, EdgeOp::Mul>(indptr, indices, a, b, num_rows, K, heads,
                                                        out);
  else if constexpr (Op == EdgeOp::Dot)
    with_tile(K / heads, [&](auto width) {
      constexpr int T = decltype(width)::value;
      sddmm_rows_tiled<T, scalar_t, index_t, Op>(indptr, indices, a, b, num_rows, K, heads, out);
    });
  else
    sddmm_rows_tiled<0, scalar_t, index_t, Op>(indptr, indices, a, b, num_rows, K, heads, out);
}

at::Tensor sddmm_cpu(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& a,
                     const at::Tensor& b, c10::string_view op, int64_t heads,
                     const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
                     const c10::optional<at::Tensor>&) {
  check_sddmm_args(indptr, indices, a, b, heads);
  const EdgeOp edge_op = parse_edge_op(std::string(op));
  const int64_t num_rows = indptr.numel() - 1, K = a.size(1), E = indices.numel();
  auto ac = a.contiguous(), bc = b.contiguous(), ic = indices.contiguous();
  auto out = empty_output({E, edge_op == EdgeOp::Dot ? heads : K}, a.options());
  GL_DISPATCH_FLOAT(a.scalar_type(), "graphloc::sddmm", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      auto run = [&](auto op_tag) {
        sddmm_rows<scalar_t, index_t, decltype(op_tag)::value>(
            indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(), ac.data_ptr<scalar_t>(),
            bc.data_ptr<scalar_t>(), num_rows, K, heads, out.data_ptr<scalar_t>());
      };
      if (edge_op == EdgeOp::Dot)
        run(std::integral_constant<EdgeOp, EdgeOp::Dot>{});
      else if (edge_op == EdgeOp::Add)
        run(std::integral_constant<EdgeOp, EdgeOp::Add>{});
      else
        run(std::integral_constant<EdgeOp, EdgeOp::Mul>{});
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("sddmm", &sddmm_cpu); }

}  // namespace graphloc
