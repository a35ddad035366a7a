// CPU kernel of random_walk: node2vec's second-order random walks (Grover and Leskovec, KDD
// 2016) along a source-major CSR. From node v, having come from t, the CSR entry to x is
// taken with weight 1/p if x == t, 1 if the graph has an edge x -> t, 1/q otherwise (the
// reference implementation's rule), exactly: an entry drawn uniformly is accepted with
// probability weight / max weight. The first step, p = q = 1, and single-entry rows draw
// uniformly; a node without out-edges keeps the walk where it is (position -1).
// Deterministic for a given seed whatever the thread count: walk i draws from its own
// counter-based stream. With edge_ids, the entries taken are reported through it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "common/ops.h"
#include "cpu/splitmix.h"

namespace graphloc {
namespace {

// Whether row x holds t: a binary search where the caller vouches that rows are sorted
// (graphloc's source-major CSR is), else a scan.
template <typename index_t>
bool has_edge(const index_t* indptr, const index_t* indices, int64_t x, int64_t t, bool sorted) {
  const index_t *begin = indices + indptr[x], *end = indices + indptr[x + 1];
  const auto target = static_cast<index_t>(t);
  return sorted ? std::binary_search(begin, end, target) : std::find(begin, end, target) != end;
}

// One walk's state between steps: its stream, where it is and where it came from.
struct Walker {
  Stream rng;
  int64_t v, t;
};

// One step of one walk: the CSR entry taken (-1 at a dead end) and the node reached.
template <typename index_t>
int64_t step(const index_t* indptr, const index_t* indices, double p, double q, double top,
             bool sorted, Walker& w) {
  const int64_t row = indptr[w.v], deg = indptr[w.v + 1] - row;
  int64_t e = -1, x = w.v;
  if (deg > 0) {
    while (true) {
      e = row + w.rng.below(deg);
      x = indices[e];
      if ((p == 1.0 && q == 1.0) || w.t < 0 || deg == 1) break;
      const double weight =
          x == w.t ? 1.0 / p : (has_edge(indptr, indices, x, w.t, sorted) ? 1.0 : 1.0 / q);
      if (w.rng.unit() * top < weight) break;
    }
  }
  w.t = w.v;
  w.v = x;
  return e;
}

// Walks i0..i1 advanced a step at a time in groups of kLanes: each step is a chain of
// dependent reads (indptr, then indices), so one walk at a time waits on every miss, while
// a group's steps are independent and their misses overlap. Each walk keeps its own stream,
// so the grouping does not change the draws.
template <typename index_t>
void walk_group(const index_t* indptr, const index_t* indices, const int64_t* start,
                const int64_t* edge_ids, int64_t i0, int64_t i1, int64_t length, double p, double q,
                bool sorted, uint64_t seed, int64_t* nodes, int64_t* taken) {
  constexpr int64_t kLanes = 32;
  const double top = std::max({1.0 / p, 1.0, 1.0 / q});
  Walker lanes[kLanes];
  for (int64_t g = i0; g < i1; g += kLanes) {
    const int64_t m = std::min(kLanes, i1 - g);
    for (int64_t j = 0; j < m; ++j) {
      lanes[j] = {Stream{mix(seed ^ mix(static_cast<uint64_t>(g + j)))}, start[g + j], -1};
      nodes[(g + j) * (length + 1)] = start[g + j];
    }
    for (int64_t l = 0; l < length; ++l) {
      for (int64_t j = 0; j < m; ++j) {
        const int64_t e = step(indptr, indices, p, q, top, sorted, lanes[j]);
        taken[(g + j) * length + l] = e < 0 || !edge_ids ? e : edge_ids[e];
        nodes[(g + j) * (length + 1) + l + 1] = lanes[j].v;
      }
    }
  }
}

std::tuple<at::Tensor, at::Tensor> random_walk_cpu(const at::Tensor& indptr,
                                                   const at::Tensor& indices,
                                                   const at::Tensor& start, int64_t walk_length,
                                                   double p, double q, int64_t seed,
                                                   const std::optional<at::Tensor>& edge_ids,
                                                   bool sorted_rows) {
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
  at::Tensor idc;
  const int64_t* ids =
      optional_per_entry<int64_t>(edge_ids, indices.numel(), at::kLong, "edge_ids", idc);
  auto nodes = at::empty({S, walk_length + 1}, start.options());
  auto positions = at::empty({S, walk_length}, start.options());
  auto ic = indices.contiguous();
  int64_t* out_nodes = nodes.data_ptr<int64_t>();
  int64_t* out_positions = positions.data_ptr<int64_t>();
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    const index_t* ip = indptr.data_ptr<index_t>();
    const index_t* ix = ic.data_ptr<index_t>();
    at::parallel_for(0, S, 256, [&](int64_t i0, int64_t i1) {
      walk_group<index_t>(ip, ix, s, ids, i0, i1, walk_length, p, q, sorted_rows,
                          static_cast<uint64_t>(seed), out_nodes, out_positions);
    });
  });
  return {nodes, positions};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("random_walk", &random_walk_cpu); }

}  // namespace graphloc
