// CPU kernel of walk_counts: for each node i and each node j that reaches i within `hops`
// steps along the edges, the (weighted) number of walks j -> ... -> i of each length
// 0..hops, that is, row i of A^0, A^1, ..., A^hops for the adjacency A[i, j] = weight of
// j -> i (PyG's adj_t). Rows are built by Gustavson's method, one level at a time: the walks
// of length n into i are the walks of length n - 1 into each in-neighbour k, extended by
// k's in-edges. Two passes over the rows: the sizes (each row's pattern is i's in-ball of
// radius `hops`, found by BFS), then the values, written in place with each row's columns
// ascending.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "common/ops.h"
#include "cpu/ball.h"

namespace graphloc {
namespace {

// Per-thread scratch of the numeric pass beyond the ball's: the running sums of one level
// (acc), which nodes the level has touched (level_mark), and the level's frontier.
struct LevelScratch {
  explicit LevelScratch(int64_t n) : acc(n), level_mark(n, -1) {}
  std::vector<double> acc;
  std::vector<int64_t> level_mark, frontier, next;
  std::vector<double> frontier_value;
};

// Row i's walk counts into out[(slot of j) * (hops + 1) + level]; the ball's `local` holds
// each node's slot (its rank among the row's columns).
template <typename index_t>
void count_row(const index_t* indptr, const index_t* indices, const double* weight, int64_t i,
               int64_t hops, const BallScratch& ball, LevelScratch& s, int64_t& tag, double* out) {
  const int64_t width = hops + 1;
  s.frontier.assign(1, i);
  s.frontier_value.assign(1, 1.0);
  out[ball.local[i] * width] = 1.0;
  for (int64_t level = 1; level <= hops && !s.frontier.empty(); ++level) {
    ++tag;
    s.next.clear();
    for (size_t f = 0; f < s.frontier.size(); ++f) {
      const int64_t k = s.frontier[f];
      const double v = s.frontier_value[f];
      for (int64_t e = indptr[k]; e < indptr[k + 1]; ++e) {
        const int64_t j = indices[e];
        if (s.level_mark[j] != tag) {
          s.level_mark[j] = tag;
          s.acc[j] = 0.0;
          s.next.push_back(j);
        }
        s.acc[j] += v * (weight ? weight[e] : 1.0);
      }
    }
    s.frontier.swap(s.next);
    s.frontier_value.resize(s.frontier.size());
    for (size_t f = 0; f < s.frontier.size(); ++f) {
      const int64_t j = s.frontier[f];
      s.frontier_value[f] = s.acc[j];
      out[ball.local[j] * width + level] = s.acc[j];
    }
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> walk_counts_cpu(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& weight,
    int64_t hops, int64_t max_entries) {
  check_csr(indptr, indices);
  TORCH_CHECK(hops >= 0, "hops must be >= 0, got ", hops);
  TORCH_CHECK(max_entries >= 0, "max_entries must be >= 0, got ", max_entries);
  const int64_t n = indptr.numel() - 1;
  at::Tensor weight_keep;
  const double* w =
      optional_per_entry<double>(weight, indices.numel(), at::kDouble, "weight", weight_keep);
  auto ic = indices.contiguous();
  auto out_indptr = at::zeros({n + 1}, at::kLong);
  int64_t* optr = out_indptr.data_ptr<int64_t>();
  at::Tensor out_indices, counts;
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    const index_t* ip = indptr.data_ptr<index_t>();
    const index_t* ix = ic.data_ptr<index_t>();
    // pass 1: each row's size; every chunk stops once the pairs counted so far pass the
    // limit, so a graph whose balls would not fit is refused without walking them all
    std::atomic<int64_t> counted{0};
    at::parallel_for(0, n, 256, [&](int64_t r0, int64_t r1) {
      BallScratch ball(n);
      for (int64_t i = r0; i < r1 && counted.load(std::memory_order_relaxed) <= max_entries; ++i) {
        bfs_ball<index_t>(ip, ix, i, hops, i, ball);
        optr[i + 1] = static_cast<int64_t>(ball.nodes.size());
        counted.fetch_add(optr[i + 1], std::memory_order_relaxed);
      }
    });
    TORCH_CHECK_VALUE(counted.load() <= max_entries, "walk_counts: the walks of up to ", hops,
                      " hops join more node pairs than the limit of ", max_entries,
                      " (memory); use fewer hops");
    for (int64_t i = 0; i < n; ++i) optr[i + 1] += optr[i];
    out_indices = at::empty({optr[n]}, at::kLong);
    counts = at::zeros({optr[n], hops + 1}, at::kDouble);
    int64_t* oix = out_indices.data_ptr<int64_t>();
    double* oc = counts.data_ptr<double>();
    at::parallel_for(0, n, 256, [&](int64_t r0, int64_t r1) {  // pass 2: columns and values
      BallScratch ball(n);
      LevelScratch level(n);
      int64_t tag = 0;
      for (int64_t i = r0; i < r1; ++i) {
        bfs_ball<index_t>(ip, ix, i, hops, i, ball);
        int64_t* cols = oix + optr[i];
        std::copy(ball.nodes.begin(), ball.nodes.end(), cols);
        std::sort(cols, oix + optr[i + 1]);
        for (int64_t p = 0; p < optr[i + 1] - optr[i]; ++p) ball.local[cols[p]] = p;
        count_row<index_t>(ip, ix, w, i, hops, ball, level, tag, oc + optr[i] * (hops + 1));
      }
    });
  });
  return {out_indptr, out_indices, counts};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("walk_counts", &walk_counts_cpu); }

}  // namespace graphloc
