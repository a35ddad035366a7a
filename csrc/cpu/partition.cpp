// CPU kernel of graph partitioning, METIS's scheme (Karypis and Kumar, SIAM J. Sci. Comput.
// 1998): coarsen by heavy-edge matching (and pairs of unmatched nodes sharing a neighbour,
// which stars and power-law hubs need), split the coarsest graph by recursive bisection
// grown breadth-first, then project back level by level with greedy boundary refinement
// under a balance limit. `recursive` splits by recursive multilevel bisection instead.
// Every step is integer arithmetic and one random stream consumed in a fixed order, so
// graphloc/ops/reference.py's `partition` gives the same parts.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <vector>

#include "common/ops.h"
#include "cpu/splitmix.h"

namespace graphloc {
namespace {

using Ids = std::vector<int64_t>;

// A symmetric graph without self-loops, weights on nodes and edges; `members`: how many
// nodes of the input graph each node stands for.
struct WeightedGraph {
  Ids xadj{0}, adj, ewgt, vwgt, members;
  int64_t size() const { return static_cast<int64_t>(vwgt.size()); }
  int64_t total() const { return std::accumulate(vwgt.begin(), vwgt.end(), int64_t{0}); }
};

constexpr int kRefinePasses = 10;
constexpr int kGrowTries = 4;
constexpr int kFmPasses = 8;

Ids random_order(int64_t n, Stream& rng) {  // Fisher-Yates from the identity
  Ids order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  return order;
}

// The most each part may weigh: shares[p] / sum(shares) of the total, plus the tolerance
// (per mille), and never below the exact share rounded up.
Ids part_limits(int64_t total, const Ids& shares, int64_t tolerance) {
  const __int128 sum = std::accumulate(shares.begin(), shares.end(), int64_t{0});
  Ids limits;
  for (int64_t s : shares) {
    const __int128 exact = (static_cast<__int128>(total) * s + sum - 1) / sum;
    const __int128 loose = static_cast<__int128>(total) * s * (1000 + tolerance) / (1000 * sum);
    limits.push_back(static_cast<int64_t>(std::max(exact, loose)));
  }
  return limits;
}

// The weight shares[p] / sum(shares) of the total, rounded down.
int64_t share_of(int64_t total, const Ids& shares, size_t p) {
  const __int128 sum = std::accumulate(shares.begin(), shares.end(), int64_t{0});
  return static_cast<int64_t>(static_cast<__int128>(total) * shares[p] / sum);
}

// The nodes in a random order, then stably by increasing degree: low-degree nodes, which
// have few partners to choose from, match first (METIS's sorted heavy-edge matching).
Ids by_degree(const WeightedGraph& g, Stream& rng) {
  Ids order = random_order(g.size(), rng);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return g.xadj[a + 1] - g.xadj[a] < g.xadj[b + 1] - g.xadj[b];
  });
  return order;
}

// Pairs each node (in the given order) with its unmatched neighbour of heaviest edge, then
// pairs unmatched neighbours of one node when many are left; a pair weighs at most `max_weight`.
// Returns each node's partner (itself when single).
Ids match_nodes(const WeightedGraph& g, int64_t max_weight, const Ids& order) {
  const int64_t n = g.size();
  Ids mate(n, -1);
  for (int64_t u : order) {
    if (mate[u] >= 0) continue;
    int64_t best = -1, best_weight = -1;
    for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e) {
      const int64_t v = g.adj[e];
      if (v == u || mate[v] >= 0 || g.vwgt[u] + g.vwgt[v] > max_weight) continue;
      if (g.ewgt[e] > best_weight) best = v, best_weight = g.ewgt[e];
    }
    if (best >= 0) mate[u] = best, mate[best] = u;
  }
  // leaves of one hub, which heavy-edge matching leaves single (as METIS, only when over
  // a tenth of the nodes are: pairs of non-neighbours make looser coarse nodes)
  const int64_t single = std::count(mate.begin(), mate.end(), int64_t{-1});
  for (int64_t h : 10 * single > n ? order : Ids{}) {
    int64_t pending = -1;
    for (int64_t e = g.xadj[h]; e < g.xadj[h + 1]; ++e) {
      const int64_t v = g.adj[e];
      if (v == h || v == pending || mate[v] >= 0) continue;
      if (pending < 0) {
        pending = v;
      } else if (g.vwgt[pending] + g.vwgt[v] <= max_weight) {
        mate[pending] = v, mate[v] = pending, pending = -1;
      }
    }
  }
  // nodes without neighbours pair up in node order, or the coarsening stalls on them
  // (a road network's map holds thousands); they cut nothing wherever they go
  int64_t island = -1;
  for (int64_t u = 0; u < n; ++u) {
    if (mate[u] >= 0 || g.xadj[u] != g.xadj[u + 1]) continue;
    if (island >= 0 && g.vwgt[island] + g.vwgt[u] <= max_weight) {
      mate[island] = u, mate[u] = island, island = -1;
    } else {
      island = u;
    }
  }
  for (int64_t u = 0; u < n; ++u)
    if (mate[u] < 0) mate[u] = u;
  return mate;
}

// The graph of the pairs: coarse node c is the c-th pair by its smaller id; parallel edges
// merge (weights added) in the order first met, edges inside a pair vanish.
WeightedGraph contract(const WeightedGraph& g, const Ids& mate, Ids& coarse_of) {
  const int64_t n = g.size();
  coarse_of.assign(n, -1);
  Ids members;
  for (int64_t u = 0; u < n; ++u) {
    if (mate[u] < u) continue;
    coarse_of[u] = coarse_of[mate[u]] = static_cast<int64_t>(members.size()) / 2;
    members.push_back(u);
    members.push_back(mate[u]);
  }
  WeightedGraph c;
  const int64_t nc = static_cast<int64_t>(members.size()) / 2;
  Ids where(nc, -1);
  for (int64_t cu = 0; cu < nc; ++cu) {
    const int64_t start = static_cast<int64_t>(c.adj.size());
    const int64_t a = members[2 * cu], b = members[2 * cu + 1];
    c.vwgt.push_back(a == b ? g.vwgt[a] : g.vwgt[a] + g.vwgt[b]);
    c.members.push_back(a == b ? g.members[a] : g.members[a] + g.members[b]);
    for (int64_t u : a == b ? Ids{a} : Ids{a, b}) {
      for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e) {
        const int64_t cv = coarse_of[g.adj[e]];
        if (cv == cu) continue;
        if (where[cv] >= start) {
          c.ewgt[where[cv]] += g.ewgt[e];
        } else {
          where[cv] = static_cast<int64_t>(c.adj.size());
          c.adj.push_back(cv);
          c.ewgt.push_back(g.ewgt[e]);
        }
      }
    }
    c.xadj.push_back(static_cast<int64_t>(c.adj.size()));
  }
  return c;
}

// Greedy refinement of `part` (ids 0..k-1) in place: boundary nodes, in a random order, move
// to the adjacent part they are most connected to when that cuts less, cuts as much and
// evens the weights, or their part is over its limit; never into a part over its limit
// after the move, never out of a part left with fewer than fewest[p] input nodes. Parts still over
// their limit then shed nodes (to an adjacent part, else the lightest), and the greedy
// passes run again.
class Refiner {
 public:
  Refiner(const WeightedGraph& g, Ids& part, const Ids& limits, const Ids& fewest, Stream& rng)
      : g_(g),
        part_(part),
        limits_(limits),
        fewest_(fewest),
        rng_(rng),
        weight_(limits.size(), 0),
        conn_(limits.size(), 0),
        count_(limits.size(), 0),
        outside_(g.size(), 0),
        listed_(limits.size(), 0) {
    for (int64_t u = 0; u < g.size(); ++u) {
      weight_[part[u]] += g.vwgt[u], count_[part[u]] += g.members[u];
      outside_[u] = neighbours_outside(u);
    }
  }

  void run() {
    greedy_passes();
    if (!over_limit()) return;
    balance();
    greedy_passes();
  }

 private:
  void greedy_passes() {
    for (int pass = 0; pass < kRefinePasses; ++pass) {
      int64_t moved = 0;
      for (int64_t u : random_order(g_.size(), rng_)) moved += visit(u, false);
      if (moved * 1000 <= g_.size()) break;  // a pass that moved under 0.1% of the nodes
    }
  }

  void balance() {
    for (int64_t u : random_order(g_.size(), rng_)) visit(u, true);
  }

  bool over_limit() const {
    for (size_t p = 0; p < limits_.size(); ++p)
      if (weight_[p] > limits_[p]) return true;
    return false;
  }

  bool fits(int64_t p, int64_t u) const { return weight_[p] + g_.vwgt[u] <= limits_[p]; }

  // Moves u where the rules above say; `shed`: only out of a part over its limit, to the
  // lightest part when no adjacent one fits. Returns whether u moved.
  bool visit(int64_t u, bool shed) {
    const int64_t a = part_[u];
    const bool over = weight_[a] > limits_[a];
    if ((shed && !over) || count_[a] - g_.members[u] < fewest_[a]) return false;
    if (!shed && outside_[u] == 0) return false;  // interior: no adjacent part to go to
    touched_.clear();
    for (int64_t e = g_.xadj[u]; e < g_.xadj[u + 1]; ++e) {
      const int64_t p = part_[g_.adj[e]];
      if (!listed_[p]) listed_[p] = 1, touched_.push_back(p);
      conn_[p] += g_.ewgt[e];
    }
    const int64_t inside = conn_[a];
    int64_t best = -1, best_gain = 0;
    for (int64_t p : touched_) {
      if (p == a || !fits(p, u)) continue;
      const int64_t gain = conn_[p] - inside;
      if (best < 0 || gain > best_gain || (gain == best_gain && weight_[p] < weight_[best]))
        best = p, best_gain = gain;
    }
    for (int64_t p : touched_) conn_[p] = 0, listed_[p] = 0;
    if (best < 0 && shed) {
      best = lightest();
      best_gain = -inside;
      if (best == a || !fits(best, u)) best = -1;
    }
    if (best < 0) return false;
    const bool evens = best_gain == 0 && weight_[best] + g_.vwgt[u] < weight_[a];
    if (!(best_gain > 0 || evens || over)) return false;
    weight_[a] -= g_.vwgt[u], count_[a] -= g_.members[u];
    weight_[best] += g_.vwgt[u], count_[best] += g_.members[u];
    part_[u] = best;
    for (int64_t e = g_.xadj[u]; e < g_.xadj[u + 1]; ++e) {
      const int64_t v = g_.adj[e];
      if (v != u) outside_[v] += part_[v] == a ? 1 : (part_[v] == best ? -1 : 0);
    }
    outside_[u] = neighbours_outside(u);
    return true;
  }

  // Entries of u's row in another part than u's (kept per node, so that the passes skip
  // interior nodes without reading their rows).
  int64_t neighbours_outside(int64_t u) const {
    int64_t outside = 0;
    for (int64_t e = g_.xadj[u]; e < g_.xadj[u + 1]; ++e) outside += part_[g_.adj[e]] != part_[u];
    return outside;
  }

  int64_t lightest() const {
    return std::min_element(weight_.begin(), weight_.end()) - weight_.begin();
  }

  const WeightedGraph& g_;
  Ids& part_;
  const Ids& limits_;
  const Ids& fewest_;  // nodes each part keeps at least
  Stream& rng_;
  Ids weight_, conn_, count_, outside_, touched_;
  std::vector<char> listed_;  // parts in touched_
};

// Fiduccia-Mattheyses passes over a bisection: a node moves from the side further above its
// target weight (side 1 on ties), the unlocked one of largest gain there (cut weight saved,
// ties to the smaller id), even at a loss, and locks; after the moves the sides return to
// the best state seen (least weight over the limits, then least cut). A pass ends when moves
// have not improved on that state for a while, or the side to move from has no candidate.
// A side keeps at least fewest[s] input nodes (the parts it is to be split into): a node
// whose move would leave fewer locks instead.
void fm_bisection(const WeightedGraph& g, Ids& side, const Ids& limits, int64_t target,
                  const Ids& fewest) {
  const int64_t n = g.size();
  const int64_t patience = std::min<int64_t>(std::max<int64_t>(n / 100, 15), 100);
  Ids weight(2, 0), count(2, 0);
  for (int64_t u = 0; u < n; ++u) weight[side[u]] += g.vwgt[u], count[side[u]] += g.members[u];
  const Ids targets{target, weight[0] + weight[1] - target};
  auto excess = [&] {
    return std::max<int64_t>(0, weight[0] - limits[0]) +
           std::max<int64_t>(0, weight[1] - limits[1]);
  };
  using Entry = std::pair<int64_t, int64_t>;  // (-gain, node)
  using Heap = std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>>;
  // gains (cut weight a move saves) and the cut, read once, then kept up to date through
  // moves and their rollbacks; a node is on the boundary when its gain exceeds -(its
  // edges' weight)
  Ids gain(n, 0), reach(n, 0);
  int64_t cut = 0;
  for (int64_t u = 0; u < n; ++u) {
    for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e) {
      const bool crosses = side[g.adj[e]] != side[u];
      gain[u] += crosses ? g.ewgt[e] : -g.ewgt[e];
      cut += crosses ? g.ewgt[e] : 0;
      reach[u] += g.ewgt[e];
    }
  }
  cut /= 2;
  auto flip = [&](int64_t u) {  // u to the other side, its and its neighbours' gains after
    const int64_t a = side[u], b = 1 - a;
    side[u] = b, weight[a] -= g.vwgt[u], weight[b] += g.vwgt[u];
    count[a] -= g.members[u], count[b] += g.members[u];
    cut -= gain[u];
    gain[u] = -gain[u];
    for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e) {
      const int64_t v = g.adj[e];
      if (v != u) gain[v] += side[v] == b ? -2 * g.ewgt[e] : 2 * g.ewgt[e];
    }
  };
  for (int pass = 0; pass < kFmPasses; ++pass) {
    Ids moves;
    std::vector<char> locked(n, 0);
    Heap heaps[2];
    for (int64_t u = 0; u < n; ++u)
      if (gain[u] > -reach[u]) heaps[side[u]].emplace(-gain[u], u);
    Entry best{excess(), cut};
    size_t best_moves = 0;
    while (static_cast<int64_t>(moves.size() - best_moves) < patience) {
      const int64_t a = weight[0] - targets[0] > weight[1] - targets[1] ? 0 : 1;
      Heap& heap = heaps[a];
      while (!heap.empty() &&
             (locked[heap.top().second] || -heap.top().first != gain[heap.top().second]))
        heap.pop();
      if (heap.empty()) break;
      const int64_t u = heap.top().second;
      heap.pop();
      locked[u] = 1;
      if (count[a] - g.members[u] < fewest[a]) continue;
      flip(u);
      moves.push_back(u);
      for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e) {
        const int64_t v = g.adj[e];
        if (!locked[v]) heaps[side[v]].emplace(-gain[v], v);
      }
      const Entry state{excess(), cut};
      if (state < best) best = state, best_moves = moves.size();
    }
    for (size_t i = moves.size(); i-- > best_moves;) flip(moves[i]);
    if (best_moves == 0) break;
  }
}

// FM passes first for a bisection, then the greedy refinement with its balancing. Shares
// count the parts each part of this split stands for (1 each at the end; a bisection's
// halves k1 and k2), and a part keeps at least that many input nodes, so that no part is
// left empty where the graph has as many nodes as parts.
void improve(const WeightedGraph& g, Ids& part, const Ids& shares, int64_t tolerance, Stream& rng) {
  const int64_t total = g.total();
  const Ids limits = part_limits(total, shares, tolerance);
  if (shares.size() == 2) fm_bisection(g, part, limits, share_of(total, shares, 0), shares);
  Refiner(g, part, limits, shares, rng).run();
}

int64_t cut_weight(const WeightedGraph& g, const Ids& part) {
  int64_t cut = 0;
  for (int64_t u = 0; u < g.size(); ++u)
    for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e)
      if (part[g.adj[e]] != part[u]) cut += g.ewgt[e];
  return cut;
}

int64_t excess_weight(const WeightedGraph& g, const Ids& part, const Ids& limits) {
  Ids weight(limits.size(), 0);
  for (int64_t u = 0; u < g.size(); ++u) weight[part[u]] += g.vwgt[u];
  int64_t excess = 0;
  for (size_t p = 0; p < limits.size(); ++p) excess += std::max<int64_t>(0, weight[p] - limits[p]);
  return excess;
}

// Side 0 grown breadth-first from a random node (a new random start whenever the frontier
// runs out) until it holds `target` weight; the rest is side 1.
Ids grow_side(const WeightedGraph& g, int64_t target, Stream& rng) {
  const int64_t n = g.size();
  Ids side(n, 1), queue;
  std::vector<char> queued(n, 0);
  int64_t start = rng.below(n), head = 0, weight = 0;
  while (weight < target) {
    if (head == static_cast<int64_t>(queue.size())) {
      while (queued[start]) start = (start + 1) % n;
      queued[start] = 1;
      queue.push_back(start);
    }
    const int64_t u = queue[head++];
    side[u] = 0;
    weight += g.vwgt[u];
    for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e)
      if (!queued[g.adj[e]]) queued[g.adj[e]] = 1, queue.push_back(g.adj[e]);
  }
  return side;
}

// The best of a few grown and refined bisections: least weight over the limits, then least
// cut, the first on ties.
Ids grown_bisection(const WeightedGraph& g, const Ids& shares, int64_t tolerance, Stream& rng) {
  const int64_t total = g.total();
  const Ids limits = part_limits(total, shares, tolerance);
  const int64_t target = share_of(total, shares, 0);
  Ids best;
  int64_t best_excess = 0, best_cut = 0;
  for (int t = 0; t < kGrowTries; ++t) {
    Ids side = grow_side(g, target, rng);
    improve(g, side, shares, tolerance, rng);
    const int64_t excess = excess_weight(g, side, limits), cut = cut_weight(g, side);
    if (best.empty() || excess < best_excess || (excess == best_excess && cut < best_cut))
      best = std::move(side), best_excess = excess, best_cut = cut;
  }
  return best;
}

// The subgraph of the nodes of `side` == s, renumbered in increasing id (`nodes` lists them).
WeightedGraph side_subgraph(const WeightedGraph& g, const Ids& side, int64_t s, Ids& nodes) {
  Ids local(g.size(), -1);
  nodes.clear();
  for (int64_t u = 0; u < g.size(); ++u)
    if (side[u] == s) local[u] = static_cast<int64_t>(nodes.size()), nodes.push_back(u);
  WeightedGraph sub;
  for (int64_t u : nodes) {
    sub.vwgt.push_back(g.vwgt[u]);
    sub.members.push_back(g.members[u]);
    for (int64_t e = g.xadj[u]; e < g.xadj[u + 1]; ++e) {
      if (local[g.adj[e]] < 0) continue;
      sub.adj.push_back(local[g.adj[e]]);
      sub.ewgt.push_back(g.ewgt[e]);
    }
    sub.xadj.push_back(static_cast<int64_t>(sub.adj.size()));
  }
  return sub;
}

using Bisect = Ids (*)(const WeightedGraph&, const Ids&, int64_t, Stream&);

// Parts first..first+len(shares)-1 by recursive bisection: the first half of the shares
// against the rest, each side split again.
void bisect_recursively(const WeightedGraph& g, const Ids& shares, int64_t first, int64_t tolerance,
                        Stream& rng, Bisect bisect, Ids& out) {
  const int64_t k = static_cast<int64_t>(shares.size());
  if (k == 1 || g.size() == 0) {
    std::fill(out.begin(), out.end(), first);
    return;
  }
  const int64_t half = k / 2;
  const Ids halves{std::accumulate(shares.begin(), shares.begin() + half, int64_t{0}),
                   std::accumulate(shares.begin() + half, shares.end(), int64_t{0})};
  const Ids side = bisect(g, halves, tolerance, rng);
  for (int64_t s = 0; s < 2; ++s) {
    Ids nodes;
    const WeightedGraph sub = side_subgraph(g, side, s, nodes);
    const Ids sub_shares(s == 0 ? shares.begin() : shares.begin() + half,
                         s == 0 ? shares.begin() + half : shares.end());
    Ids sub_part(nodes.size());
    bisect_recursively(sub, sub_shares, s == 0 ? first : first + half, tolerance, rng, bisect,
                       sub_part);
    for (size_t i = 0; i < nodes.size(); ++i) out[nodes[i]] = sub_part[i];
  }
}

// Coarsen, split the coarsest graph by grown recursive bisection, refine back to `g`.
// A bisection coarsens to 60 nodes and grows its split there; k > 2 parts coarsen as METIS's
// k-way scheme, to 30 nodes per part or n / (20 log2 k), and split that graph by recursive
// multilevel bisection.
Ids multilevel(const WeightedGraph& g, const Ids& shares, int64_t tolerance, Stream& rng) {
  const int64_t k = static_cast<int64_t>(shares.size());
  const int64_t log2k = 63 - __builtin_clzll(static_cast<uint64_t>(k));
  const int64_t coarsest = k == 2 ? 60 : std::max<int64_t>(30 * k, g.size() / (20 * log2k));
  const Bisect split = k == 2 ? grown_bisection : multilevel;
  const int64_t total = g.total();
  std::vector<WeightedGraph> levels;
  std::vector<Ids> maps;
  const WeightedGraph* current = &g;
  while (current->size() > coarsest) {
    const int64_t max_weight = std::max<int64_t>(1, 3 * (total / (2 * coarsest)));
    const Ids mate = match_nodes(*current, max_weight, by_degree(*current, rng));
    Ids coarse_of;
    WeightedGraph next = contract(*current, mate, coarse_of);
    if (20 * next.size() > 19 * current->size()) break;  // under 5% fewer nodes: stalled
    levels.push_back(std::move(next));
    maps.push_back(std::move(coarse_of));
    current = &levels.back();
  }
  Ids part(current->size());
  bisect_recursively(*current, shares, 0, tolerance, rng, split, part);
  for (size_t level = levels.size() + 1; level-- > 0;) {
    const WeightedGraph& at = level == 0 ? g : levels[level - 1];
    if (level < levels.size()) {
      Ids finer(at.size());
      for (int64_t u = 0; u < at.size(); ++u) finer[u] = part[maps[level][u]];
      part = std::move(finer);
    }
    improve(at, part, shares, tolerance, rng);
  }
  return part;
}

Ids partition_graph(const WeightedGraph& g, int64_t num_parts, bool recursive, int64_t tolerance,
                    uint64_t seed) {
  Stream rng{mix(seed)};
  // parts beyond the node count stay empty anyway; counting them would allocate per part
  num_parts = std::min(num_parts, std::max<int64_t>(g.size(), 1));
  const Ids shares(num_parts, 1);
  if (num_parts == 1) return Ids(g.size(), 0);
  if (!recursive) return multilevel(g, shares, tolerance, rng);
  Ids part(g.size());
  bisect_recursively(g, shares, 0, tolerance, rng, multilevel, part);
  improve(g, part, shares, tolerance, rng);
  return part;
}

Ids checked_weights(const std::optional<at::Tensor>& w, int64_t entries, const char* name) {
  if (!w.has_value()) return Ids(entries, 1);
  at::Tensor keep;
  const int64_t* data = optional_per_entry<int64_t>(w, entries, at::kLong, name, keep);
  Ids out(data, data + entries);
  int64_t sum = 0;
  for (int64_t i = 0; i < entries; ++i) {
    TORCH_CHECK(out[i] >= 0, name, " must be >= 0, got ", out[i], " at ", i);
    TORCH_CHECK(!__builtin_add_overflow(sum, out[i], &sum) && sum < (int64_t{1} << 52), name,
                " sums past 2^52, too large to weigh parts exactly");
  }
  return out;
}

at::Tensor partition_cpu(const at::Tensor& indptr, const at::Tensor& indices,
                         const std::optional<at::Tensor>& node_weight,
                         const std::optional<at::Tensor>& edge_weight, int64_t num_parts,
                         bool recursive, int64_t tolerance, int64_t seed) {
  check_csr(indptr, indices);
  TORCH_CHECK(num_parts >= 1, "num_parts must be >= 1, got ", num_parts);
  TORCH_CHECK(tolerance >= 0 && tolerance <= 1000000, "tolerance (per mille) must be in ",
              "[0, 1000000], got ", tolerance);
  WeightedGraph g;
  const auto ip = indptr.to(at::kLong).contiguous(), ix = indices.to(at::kLong).contiguous();
  g.xadj.assign(ip.data_ptr<int64_t>(), ip.data_ptr<int64_t>() + ip.numel());
  g.adj.assign(ix.data_ptr<int64_t>(), ix.data_ptr<int64_t>() + ix.numel());
  g.vwgt = checked_weights(node_weight, ip.numel() - 1, "node_weight");
  g.members.assign(g.vwgt.size(), 1);
  g.ewgt = checked_weights(edge_weight, ix.numel(), "edge_weight");
  const Ids part = partition_graph(g, num_parts, recursive, tolerance, seed);
  return at::tensor(part, indptr.options().dtype(at::kLong));
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("partition", &partition_cpu); }

}  // namespace graphloc
