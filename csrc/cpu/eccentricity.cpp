// CPU kernel of local_eccentricity: for every node v, the largest length-weighted shortest
// path distance from v to a node of its k-hop ball B_k(v), the distances taken inside the
// subgraph induced by the ball (the City-Networks label). Per source: a depth-limited BFS
// marks the ball, then Dijkstra relaxes only ball nodes. Cost ~ sum of ball sizes, not N*E.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "common/ops.h"

namespace graphloc {
namespace {

// One thread's scratch, reused across its sources: stamps instead of clearing N-long arrays.
struct BallScratch {
  explicit BallScratch(int64_t n) : in_ball(n, -1), settled(n, -1), hops(n), dist(n) {}
  std::vector<int64_t> in_ball, settled;  // == source id when set for the current source
  std::vector<int32_t> hops;
  std::vector<double> dist;
  std::vector<int64_t> frontier;
};

template <typename index_t, typename weight_t>
double ball_eccentricity(const index_t* indptr, const index_t* indices, const weight_t* weight,
                         int64_t source, int64_t k, BallScratch& s) {
  // Depth-limited BFS: the ball is every node within k hops.
  s.frontier.assign(1, source);
  s.in_ball[source] = source;
  s.hops[source] = 0;
  for (size_t head = 0; head < s.frontier.size(); ++head) {
    const int64_t u = s.frontier[head];
    if (s.hops[u] == k) continue;
    for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {
      const int64_t w = indices[e];
      if (s.in_ball[w] == source) continue;
      s.in_ball[w] = source;
      s.hops[w] = s.hops[u] + 1;
      s.frontier.push_back(w);
    }
  }
  // Dijkstra on the induced subgraph (lazy-deletion binary heap).
  using Item = std::pair<double, int64_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  s.dist[source] = 0.0;
  s.settled[source] = -2 - source;  // "tentative" marker: dist valid, not yet settled
  heap.emplace(0.0, source);
  double farthest = 0.0;
  while (!heap.empty()) {
    const auto [d, u] = heap.top();
    heap.pop();
    if (s.settled[u] == source) continue;
    s.settled[u] = source;
    farthest = d;  // settled in increasing order: the last one is the maximum
    for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {
      const int64_t w = indices[e];
      if (s.in_ball[w] != source || s.settled[w] == source) continue;
      const double nd = d + static_cast<double>(weight[e]);
      if (s.settled[w] != -2 - source || nd < s.dist[w]) {
        s.settled[w] = -2 - source;
        s.dist[w] = nd;
        heap.emplace(nd, w);
      }
    }
  }
  return farthest;
}

at::Tensor local_eccentricity_cpu(const at::Tensor& indptr, const at::Tensor& indices,
                                  const at::Tensor& weight, int64_t hops) {
  check_indptr(indptr);
  check_index(indices, "indices");
  TORCH_CHECK(indices.scalar_type() == indptr.scalar_type(), "indices and indptr must share ",
              "one index dtype");
  check_csr_nnz(indptr, indices.numel(), "indices");
  TORCH_CHECK(hops >= 0, "hops must be >= 0, got ", hops);
  TORCH_CHECK(weight.dim() == 1 && weight.numel() == indices.numel(), "weight must be [E] with ",
              "E = ", indices.numel(), ", got shape ", weight.sizes());
  TORCH_CHECK(weight.scalar_type() == at::kFloat || weight.scalar_type() == at::kDouble,
              "weight must be float32 or float64, got ", weight.scalar_type());
  const int64_t n = indptr.numel() - 1;
  auto ic = indices.contiguous(), wc = weight.contiguous();
  TORCH_CHECK(wc.numel() == 0 || wc.min().item<double>() >= 0.0,
              "weight must be non-negative and not NaN (Dijkstra), min is ",
              wc.numel() ? wc.min().item<double>() : 0.0);
  auto out = at::empty({n}, indptr.options().dtype(at::kDouble));
  double* o = out.data_ptr<double>();
  AT_DISPATCH_FLOATING_TYPES(weight.scalar_type(), "graphloc::local_eccentricity", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      const index_t* ip = indptr.data_ptr<index_t>();
      const index_t* ix = ic.data_ptr<index_t>();
      const scalar_t* w = wc.data_ptr<scalar_t>();
      // One scratch per thread; threads take blocks of sources from a shared counter, as
      // ball sizes (and so costs) vary across the graph.
      constexpr int64_t kBlock = 64;
      std::atomic<int64_t> next{0};
      const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(),
                                                                     n / kBlock));
      at::parallel_for(0, threads, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          BallScratch scratch(n);
          for (int64_t b = next.fetch_add(kBlock); b < n; b = next.fetch_add(kBlock))
            for (int64_t v = b; v < std::min(n, b + kBlock); ++v)
              o[v] = ball_eccentricity<index_t, scalar_t>(ip, ix, w, v, hops, scratch);
        }
      });
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("local_eccentricity", &local_eccentricity_cpu); }

}  // namespace graphloc
