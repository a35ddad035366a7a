// The k-hop ball of a node over in-edges (CSR rows are destinations), by depth-limited BFS:
// shared by local_eccentricity and khop_subgraphs.
#pragma once

#include <cstdint>
#include <vector>

namespace graphloc {

// Per-thread scratch: stamp[u] == mark means u is in the current ball, at position
// local[u] of `nodes`; marks differ per ball, so nothing is cleared between balls.
struct BallScratch {
  explicit BallScratch(int64_t n) : stamp(n, -1), local(n) {}
  std::vector<int64_t> stamp, local;
  std::vector<int64_t> nodes, hops;  // the ball in BFS (hop) order, source first
};

template <typename index_t>
void bfs_ball(const index_t* indptr, const index_t* indices, int64_t source, int64_t k,
              int64_t mark, BallScratch& s) {
  s.nodes.assign(1, source);
  s.hops.assign(1, 0);
  s.stamp[source] = mark;
  s.local[source] = 0;
  for (size_t head = 0; head < s.nodes.size(); ++head) {
    const int64_t w = s.nodes[head];
    if (s.hops[head] == k) continue;
    for (int64_t e = indptr[w]; e < indptr[w + 1]; ++e) {
      const int64_t u = indices[e];
      if (s.stamp[u] == mark) continue;
      s.stamp[u] = mark;
      s.local[u] = static_cast<int64_t>(s.nodes.size());
      s.nodes.push_back(u);
      s.hops.push_back(s.hops[head] + 1);
    }
  }
}

}  // namespace graphloc
