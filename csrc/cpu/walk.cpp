// CPU kernel of random_walk: node2vec's second-order random walks (Grover and Leskovec, KDD
// 2016) along a source-major CSR. From node v, having come from t, the CSR entry to x is
// taken with weight 1/p if x == t, 1 if the graph has an edge x -> t, 1/q otherwise (the
// reference implementation's rule), exactly: an entry drawn uniformly is accepted with
// probability weight / max weight. The first step, p = q = 1, and single-entry rows draw
// uniformly; a node without out-edges keeps the walk where it is (position -1).
// Deterministic for a given seed whatever the thread count: walk i draws from its own
// counter-based stream.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "common/ops.h"
#include "cpu/splitmix.h"

namespace graphloc {
namespace {

struct WalkStream {
  uint64_t state;
  uint64_t next() { return mix(state++); }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // in [0, 1)
};

template <typename index_t>
bool has_edge(const index_t* indptr, const index_t* indices, int64_t x, int64_t t) {
  const index_t* end = indices + indptr[x + 1];
  return std::find(indices + indptr[x], end, static_cast<index_t>(t)) != end;
}

template <typename index_t>
void walk(const index_t* indptr, const index_t* indices, int64_t v, int64_t length, double p,
          double q, WalkStream& rng, int64_t* nodes, int64_t* positions) {
  const bool uniform = p == 1.0 && q == 1.0;
  const double top = std::max({1.0 / p, 1.0, 1.0 / q});
  int64_t t = -1;
  nodes[0] = v;
  for (int64_t l = 0; l < length; ++l) {
    const int64_t row = indptr[v], deg = indptr[v + 1] - row;
    int64_t e = -1, x = v;
    if (deg > 0) {
      while (true) {
        e = row + rng.below(deg);
        x = indices[e];
        if (uniform || t < 0 || deg == 1) break;
        const double weight = x == t ? 1.0 / p : (has_edge(indptr, indices, x, t) ? 1.0 : 1.0 / q);
        if (rng.unit() * top < weight) break;
      }
    }
    positions[l] = e;
    nodes[l + 1] = x;
    t = v;
    v = x;
  }
}

std::tuple<at::Tensor, at::Tensor> random_walk_cpu(const at::Tensor& indptr,
                                                   const at::Tensor& indices,
                                                   const at::Tensor& start, int64_t walk_length,
                                                   double p, double q, int64_t seed) {
  check_csr(indptr, indices);
  TORCH_CHECK(start.dim() == 1 && start.scalar_type() == at::kLong, "start must be int64 [S], got ",
              start.scalar_type(), " ", start.sizes());
  TORCH_CHECK(walk_length >= 0, "walk_length must be >= 0, got ", walk_length);
  TORCH_CHECK(std::isfinite(p) && p > 0 && std::isfinite(q) && q > 0,
              "p and q must be finite and > 0, got p = ", p, ", q = ", q);
  const int64_t n = indptr.numel() - 1, S = start.numel();
  auto sc = start.contiguous();
  const int64_t* s = sc.data_ptr<int64_t>();
  for (int64_t i = 0; i < S; ++i)
    TORCH_CHECK(s[i] >= 0 && s[i] < n, "start node ", s[i], " is out of range for ", n, " nodes");
  auto nodes = at::empty({S, walk_length + 1}, start.options());
  auto positions = at::empty({S, walk_length}, start.options());
  auto ic = indices.contiguous();
  int64_t* out_nodes = nodes.data_ptr<int64_t>();
  int64_t* out_positions = positions.data_ptr<int64_t>();
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    const index_t* ip = indptr.data_ptr<index_t>();
    const index_t* ix = ic.data_ptr<index_t>();
    at::parallel_for(0, S, 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        WalkStream rng{mix(static_cast<uint64_t>(seed) ^ mix(static_cast<uint64_t>(i)))};
        walk<index_t>(ip, ix, s[i], walk_length, p, q, rng, out_nodes + i * (walk_length + 1),
                      out_positions + i * walk_length);
      }
    });
  });
  return {nodes, positions};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("random_walk", &random_walk_cpu); }

}  // namespace graphloc
