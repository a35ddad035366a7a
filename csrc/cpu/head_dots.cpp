// CPU kernels of head_dots, the per-node score halves of GAT and its kin: for node rows x
// [N, H * C] and attention vectors att [A, H, C],
//   out[n, a * H + h] = sum_c x[n, h * C + c] * att[a, h, c],
// in one pass over x. The thin product with the vectors' block-diagonal [H * C, A * H]
// matrix that it replaces took 8.9 ms where this pass takes 1.45 (MKL, road graph, 200,000
// x 64 against 2 x 4 x 16, 2026-12-07), and its zeros met every head's channels (an
// infinite channel made the other heads' dots NaN).
// The backward, one pass over x and grad [N, A * H]:
//   grad_x[n, h * C + c] = sum_a grad[n, a * H + h] * att[a, h, c]
//   grad_att[a, h, c]    = sum_n grad[n, a * H + h] * x[n, h * C + c],
// the latter summed per fixed block of rows, then over the blocks in order: the same bits
// for any number of threads.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "common/ops.h"
#include "cpu/additive_sweeps.h"
#include "cpu/rows.h"
#include "cpu/vec.h"

namespace graphloc {

namespace {

// Rows per block of grad_att's partial sums: at least this many, and at most kMaxBlocks
// blocks (their partials are [blocks, A * H * C]).
constexpr int64_t kMinBlockRows = 2048;
constexpr int64_t kMaxBlocks = 256;

void check_head_dots_args(const at::Tensor& x, const at::Tensor& att) {
  TORCH_CHECK(x.dim() == 2, "x must be 2-D [N, heads * C], got shape ", x.sizes());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(att.dim() == 3 && att.size(0) >= 1 && att.size(1) >= 1 && att.size(2) >= 1,
              "att must be [vectors, heads, C] with each at least 1, got shape ", att.sizes());
  TORCH_CHECK(att.scalar_type() == x.scalar_type(), "att is ", att.scalar_type(), " but x is ",
              x.scalar_type());
  check_same_device(x, "x", att, "att");
  TORCH_CHECK(x.size(1) == att.size(1) * att.size(2), "x has ", x.size(1),
              " channels but att holds ", att.size(1), " heads of ", att.size(2));
}

// out[n, a * H + h] for the rows [r0, r1).
template <int CT, typename scalar_t>
void dots_rows(const scalar_t* x, const scalar_t* att, int64_t A, int64_t H, int64_t C_run,
               int64_t r0, int64_t r1, scalar_t* out) {
  const int64_t C = width_of<CT>(C_run), K = H * C;
  for (int64_t n = r0; n < r1; ++n) {
    const scalar_t* __restrict__ row = x + n * K;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t h = 0; h < H; ++h) {
        const scalar_t* __restrict__ v = att + (a * H + h) * C;
        const scalar_t* __restrict__ r = row + h * C;
        scalar_t s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < C; ++c) s += r[c] * v[c];
        out[n * A * H + a * H + h] = s;
      }
  }
}

// The same for H heads of T channels that fill one register sweep (GAT's common layouts):
// each row's H heads in registers, and per vector the H dots summed jointly (lane_sums), a
// third of the time of a reduction per head (road graph, 200,000 x 64 against 2 x 4 x 16:
// 1.45 against 3.66 ms, 2026-12-07).
template <int H, int T, typename A>
void dots_sweeps(const A* x, const A* att, int64_t num_att, int64_t r0, int64_t r1, A* out) {
  using V = typename Vec<A, T>::type;
  constexpr int64_t K = H * T;
  for (int64_t n = r0; n < r1; ++n) {
    V rows[H];
#pragma GCC unroll 8
    for (int g = 0; g < H; ++g) rows[g] = load_vec<A, T>(x + n * K + g * T);
    for (int64_t a = 0; a < num_att; ++a) {
      V products[H];
#pragma GCC unroll 8
      for (int g = 0; g < H; ++g) products[g] = rows[g] * load_vec<A, T>(att + a * K + g * T);
      store_vec<A, H>(out + (n * num_att + a) * H, lane_sums<H, T, A>(products));
    }
  }
}

// grad_x for the rows [r0, r1) (grad_x null: not asked for), and their share of grad_att
// added to `partial` [A * H * C] (null: not asked for).
template <int CT, typename scalar_t>
void dots_grad_rows(const scalar_t* x, const scalar_t* att, const scalar_t* grad, int64_t A,
                    int64_t H, int64_t C_run, int64_t r0, int64_t r1, scalar_t* grad_x,
                    scalar_t* partial) {
  const int64_t C = width_of<CT>(C_run), K = H * C;
  for (int64_t n = r0; n < r1; ++n) {
    const scalar_t* g = grad + n * A * H;
    for (int64_t h = 0; h < H; ++h) {
      if (grad_x != nullptr) {
        scalar_t* __restrict__ out = grad_x + n * K + h * C;
        const scalar_t g0 = g[h];
        const scalar_t* __restrict__ v0 = att + h * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) out[c] = g0 * v0[c];
        for (int64_t a = 1; a < A; ++a) {
          const scalar_t ga = g[a * H + h];
          const scalar_t* __restrict__ v = att + (a * H + h) * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) out[c] += ga * v[c];
        }
      }
      if (partial != nullptr) {
        const scalar_t* __restrict__ r = x + n * K + h * C;
        for (int64_t a = 0; a < A; ++a) {
          const scalar_t ga = g[a * H + h];
          scalar_t* __restrict__ p = partial + (a * H + h) * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) p[c] += ga * r[c];
        }
      }
    }
  }
}

at::Tensor head_dots_cpu(const at::Tensor& x, const at::Tensor& att) {
  check_head_dots_args(x, att);
  const int64_t N = x.size(0), A = att.size(0), H = att.size(1), C = att.size(2);
  auto xc = x.contiguous(), ac = att.contiguous();
  auto out = at::empty({N, A * H}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "graphloc::head_dots", [&] {
    if (additive_sweeps_fit<scalar_t>(H, C)) {
      with_additive_layout(H, C, [&](auto heads, auto tile) {
        constexpr int HT = decltype(heads)::value, T = decltype(tile)::value;
        at::parallel_for(0, N, 4096, [&](int64_t r0, int64_t r1) {
          dots_sweeps<HT, T>(xc.data_ptr<scalar_t>(), ac.data_ptr<scalar_t>(), A, r0, r1,
                             out.data_ptr<scalar_t>());
        });
      });
      return;
    }
    with_constant<8, 16, 32, 64>(C, [&](auto width) {
      constexpr int CT = decltype(width)::value;
      at::parallel_for(0, N, 4096, [&](int64_t r0, int64_t r1) {
        dots_rows<CT>(xc.data_ptr<scalar_t>(), ac.data_ptr<scalar_t>(), A, H, C, r0, r1,
                      out.data_ptr<scalar_t>());
      });
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> head_dots_backward_cpu(const at::Tensor& x,
                                                          const at::Tensor& att,
                                                          const at::Tensor& grad, bool need_x,
                                                          bool need_att) {
  check_head_dots_args(x, att);
  const int64_t N = x.size(0), A = att.size(0), H = att.size(1), C = att.size(2);
  TORCH_CHECK(grad.dim() == 2 && grad.size(0) == N && grad.size(1) == A * H &&
                  grad.scalar_type() == x.scalar_type(),
              "grad must be ", x.scalar_type(), " of shape [", N, ", ", A * H, "], got ",
              grad.scalar_type(), " of shape ", grad.sizes());
  check_same_device(x, "x", grad, "grad");
  auto xc = x.contiguous(), ac = att.contiguous(), gc = grad.contiguous();
  auto grad_x = need_x ? empty_output(xc.sizes(), xc.options()) : at::empty({0}, x.options());
  const int64_t blocks =
      std::min(kMaxBlocks, std::max<int64_t>(1, (N + kMinBlockRows - 1) / kMinBlockRows));
  const int64_t block_rows = (N + blocks - 1) / blocks;
  auto partials =
      need_att ? at::zeros({blocks, A * H * C}, x.options()) : at::empty({0}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "graphloc::head_dots_backward", [&] {
    with_constant<8, 16, 32, 64>(C, [&](auto width) {
      constexpr int CT = decltype(width)::value;
      at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t r0 = std::min(N, b * block_rows), r1 = std::min(N, r0 + block_rows);
          dots_grad_rows<CT>(xc.data_ptr<scalar_t>(), ac.data_ptr<scalar_t>(),
                             gc.data_ptr<scalar_t>(), A, H, C, r0, r1,
                             need_x ? grad_x.data_ptr<scalar_t>() : nullptr,
                             need_att ? partials.data_ptr<scalar_t>() + b * A * H * C : nullptr);
        }
      });
    });
  });
  if (!need_att) return {grad_x, at::empty({0}, att.options())};
  // the blocks' partial sums added in block order (at::sum's order may vary)
  auto grad_att = partials[0].clone();
  for (int64_t b = 1; b < blocks; ++b) grad_att.add_(partials[b]);
  return {grad_x, grad_att.view({A, H, C})};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("head_dots", &head_dots_cpu);
  m.impl("head_dots_backward", &head_dots_backward_cpu);
}

}  // namespace graphloc
