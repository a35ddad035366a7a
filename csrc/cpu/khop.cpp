// CPU kernel of khop_subgraphs: for each seed, its k-hop ball over in-edges (the nodes that
// reach the seed within k hops, as PyG's k_hop_subgraph finds them) with each node's hop
// distance, and the induced edges relabelled to ball-local ids. Balls of all seeds are
// returned packed (node_ptr / edge_ptr delimit seed s), ready to be batched as disjoint
// components of one graph.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "common/ops.h"
#include "cpu/ball.h"

namespace graphloc {
namespace {

struct Ball {
  std::vector<int64_t> nodes, hops, src, dst, edge;
};

template <typename index_t>
void extract_ball(const index_t* indptr, const index_t* indices, int64_t seed_pos,
                  int64_t seed, int64_t k, BallScratch& s, Ball& b) {
  bfs_ball(indptr, indices, seed, k, seed_pos, s);
  b.nodes = s.nodes;
  b.hops = s.hops;
  b.src.clear();
  b.dst.clear();
  b.edge.clear();
  for (size_t i = 0; i < b.nodes.size(); ++i) {  // induced edges u -> w, both in the ball
    const int64_t w = b.nodes[i];
    for (int64_t e = indptr[w]; e < indptr[w + 1]; ++e) {
      const int64_t u = indices[e];
      if (s.stamp[u] != seed_pos) continue;
      b.src.push_back(s.local[u]);
      b.dst.push_back(static_cast<int64_t>(i));
      b.edge.push_back(e);
    }
  }
}

at::Tensor concat(const std::vector<Ball>& balls, std::vector<int64_t> Ball::*field,
                  const std::vector<int64_t>& offsets) {
  auto out = at::empty({offsets.back()}, at::kLong);
  int64_t* o = out.data_ptr<int64_t>();
  at::parallel_for(0, static_cast<int64_t>(balls.size()), 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      std::copy((balls[b].*field).begin(), (balls[b].*field).end(), o + offsets[b]);
  });
  return out;
}

std::vector<int64_t> offsets_of(const std::vector<Ball>& balls,
                                std::vector<int64_t> Ball::*field) {
  std::vector<int64_t> off(balls.size() + 1, 0);
  for (size_t b = 0; b < balls.size(); ++b) off[b + 1] = off[b] + (balls[b].*field).size();
  return off;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
khop_subgraphs_cpu(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& seeds,
                   int64_t hops) {
  check_csr(indptr, indices);
  TORCH_CHECK(hops >= 0, "hops must be >= 0, got ", hops);
  TORCH_CHECK(seeds.dim() == 1 && seeds.scalar_type() == at::kLong, "seeds must be int64 [S]");
  const int64_t n = indptr.numel() - 1, S = seeds.numel();
  auto sc = seeds.contiguous();
  const int64_t* seed = sc.data_ptr<int64_t>();
  for (int64_t i = 0; i < S; ++i)
    TORCH_CHECK(seed[i] >= 0 && seed[i] < n, "seed ", seed[i], " is out of range for ", n,
                " nodes");
  std::vector<Ball> balls(S);
  auto ic = indices.contiguous();
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    const index_t* ip = indptr.data_ptr<index_t>();
    const index_t* ix = ic.data_ptr<index_t>();
    at::parallel_for(0, S, 1, [&](int64_t s0, int64_t s1) {
      BallScratch scratch(n);  // one per chunk: parallel_for gives a thread few large chunks
      for (int64_t i = s0; i < s1; ++i)
        extract_ball<index_t>(ip, ix, i, seed[i], hops, scratch, balls[i]);
    });
  });
  const auto node_off = offsets_of(balls, &Ball::nodes);
  const auto edge_off = offsets_of(balls, &Ball::src);
  return {at::tensor(node_off, at::kLong), concat(balls, &Ball::nodes, node_off),
          concat(balls, &Ball::hops, node_off), at::tensor(edge_off, at::kLong),
          concat(balls, &Ball::src, edge_off), concat(balls, &Ball::dst, edge_off),
          concat(balls, &Ball::edge, edge_off)};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("khop_subgraphs", &khop_subgraphs_cpu); }

}  // namespace graphloc
