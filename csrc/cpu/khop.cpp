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
void extract_ball(const index_t* indptr, const index_t* indices, int64_t seed_pos, int64_t seed,
                  int64_t k, BallScratch& s, Ball& b) {
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

at::Tensor concat(const std::vector<Ball>& balls, std::vector<int64_t> Ball::* field,
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
                                std::vector<int64_t> Ball::* field) {
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
  return {at::tensor(node_off, at::kLong),      concat(balls, &Ball::nodes, node_off),
          concat(balls, &Ball::hops, node_off), at::tensor(edge_off, at::kLong),
          concat(balls, &Ball::src, edge_off),  concat(balls, &Ball::dst, edge_off),
          concat(balls, &Ball::edge, edge_off)};
}

// Greedy rounds of seeds whose in-balls of radius k are pairwise disjoint: seed i takes the
// smallest round not held by an earlier seed t with ball(i) and ball(t) sharing a node, that
// is, a t reached from ball(i) within k hops over out-edges. Sequential (each choice depends
// on the earlier ones); the cost per seed is the size of its 2k-hop neighbourhood.
template <typename index_t>
void assign_rounds(const index_t* indptr, const index_t* indices, const index_t* t_indptr,
                   const index_t* t_indices, const int64_t* seed, int64_t S, int64_t k, int64_t n,
                   int64_t* round) {
  BallScratch ball(n);
  std::vector<int64_t> reach_stamp(n, -1), reach, depth, held(S + 1, -1);
  std::vector<int64_t> round_at(n, -1);  // the round of the seed at a node, -1 if none
  for (int64_t i = 0; i < S; ++i) {
    bfs_ball(indptr, indices, seed[i], k, i, ball);
    reach.assign(ball.nodes.begin(), ball.nodes.end());
    depth.assign(reach.size(), 0);
    for (const int64_t u : reach) reach_stamp[u] = i;
    for (size_t head = 0; head < reach.size(); ++head) {
      const int64_t w = reach[head];
      if (round_at[w] >= 0) held[round_at[w]] = i;
      if (depth[head] == k) continue;
      for (int64_t e = t_indptr[w]; e < t_indptr[w + 1]; ++e) {
        const int64_t t = t_indices[e];
        if (reach_stamp[t] == i) continue;
        reach_stamp[t] = i;
        reach.push_back(t);
        depth.push_back(depth[head] + 1);
      }
    }
    int64_t r = 0;
    while (held[r] == i) ++r;
    round[i] = r;
    round_at[seed[i]] = r;
  }
}

at::Tensor separated_rounds_cpu(const at::Tensor& indptr, const at::Tensor& indices,
                                const at::Tensor& t_indptr, const at::Tensor& t_indices,
                                const at::Tensor& seeds, int64_t hops) {
  check_csr(indptr, indices);
  check_csr(t_indptr, t_indices);
  TORCH_CHECK(t_indptr.numel() == indptr.numel() && t_indices.numel() == indices.numel() &&
                  t_indptr.scalar_type() == indptr.scalar_type(),
              "the transpose must have the same nodes, edges and index dtype as the CSR");
  TORCH_CHECK(hops >= 0, "hops must be >= 0, got ", hops);
  TORCH_CHECK(seeds.dim() == 1 && seeds.scalar_type() == at::kLong, "seeds must be int64 [S]");
  const int64_t n = indptr.numel() - 1, S = seeds.numel();
  auto sc = seeds.contiguous();
  const int64_t* seed = sc.data_ptr<int64_t>();
  std::vector<char> seen(n, 0);
  for (int64_t i = 0; i < S; ++i) {
    TORCH_CHECK(seed[i] >= 0 && seed[i] < n, "seed ", seed[i], " is out of range for ", n,
                " nodes");
    TORCH_CHECK(!seen[seed[i]], "seed ", seed[i], " appears twice");
    seen[seed[i]] = 1;
  }
  auto round = at::empty({S}, at::kLong);
  auto ic = indices.contiguous(), tc = t_indices.contiguous();
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    assign_rounds<index_t>(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(),
                           t_indptr.data_ptr<index_t>(), tc.data_ptr<index_t>(), seed, S, hops, n,
                           round.data_ptr<int64_t>());
  });
  return round;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("khop_subgraphs", &khop_subgraphs_cpu);
  m.impl("separated_rounds", &separated_rounds_cpu);
}

}  // namespace graphloc
