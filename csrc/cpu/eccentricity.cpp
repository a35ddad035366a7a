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
#include "cpu/ball.h"

namespace graphloc {
namespace {

// Dijkstra state per thread, stamped like the ball: settled[u] == mark once u is final,
// == -2 - mark while its tentative distance dist[u] is valid.
struct DijkstraScratch {
  explicit DijkstraScratch(int64_t n) : ball(n), settled(n, -1), dist(n) {}
  BallScratch ball;
  std::vector<int64_t> settled;
  std::vector<double> dist;
};

template <typename index_t, typename weight_t>
double ball_eccentricity(const index_t* indptr, const index_t* indices, const weight_t* weight,
                         int64_t source, int64_t k, DijkstraScratch& s) {
  bfs_ball(indptr, indices, source, k, source, s.ball);
  const auto& in_ball = s.ball.stamp;
  // Dijkstra on the induced subgraph (lazy-deletion binary heap).
  using Item = std::pair<double, int64_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  const int64_t tentative = -2 - source;
  s.dist[source] = 0.0;
  s.settled[source] = tentative;
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
      if (in_ball[w] != source || s.settled[w] == source) continue;
      const double nd = d + static_cast<double>(weight[e]);
      if (s.settled[w] != tentative || nd < s.dist[w]) {
        s.settled[w] = tentative;
        s.dist[w] = nd;
        heap.emplace(nd, w);
      }
    }
  }
  return farthest;
}

at::Tensor local_eccentricity_cpu(const at::Tensor& indptr, const at::Tensor& indices,
                                  const at::Tensor& weight, int64_t hops) {
  check_csr(indptr, indices);
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
      const int64_t threads =
          std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n / kBlock));
      at::parallel_for(0, threads, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          DijkstraScratch scratch(n);
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
