// CPU kernels of neighbor_sample (layer-wise sampling of in-neighbours around a batch of
// seed nodes, over one or several relations: GraphSAGE / PyG NeighborLoader semantics,
// uniform, weighted or temporal) and hop2_sample (LargeGT's fixed per-node samples from the
// 1- and 2-hop neighbourhood, as its official code draws them).
// Deterministic for a given seed whatever the thread count: each (hop, relation, tree, node)
// draws from its own counter-based random stream, and new nodes are numbered in one ordered
// pass.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "common/ops.h"
#include "cpu/splitmix.h"

namespace graphloc {
namespace {

// The stream of node w at hop `hop` over relation r in tree `tree` (disjoint sampling; 0
// otherwise). One relation and one tree give the streams of the single-graph sampler.
Stream stream_of(uint64_t seed, int64_t hop, int64_t r, int64_t tree, int64_t w) {
  uint64_t key =
      seed ^ mix(static_cast<uint64_t>(hop) * 0x100000001b3ULL + static_cast<uint64_t>(w));
  if (r != 0 || tree != 0)
    key ^= mix((static_cast<uint64_t>(r) << 40) ^ static_cast<uint64_t>(tree) ^ 0x5bd1e995ULL);
  return Stream{mix(key)};
}

// Offsets in [0, deg): all of them if k < 0 or (without replacement) deg <= k; else k
// distinct ones uniformly (Floyd's algorithm; k is a small fan-out) or, with replacement, k
// independent uniform draws. Sorted.
void sample_offsets(int64_t deg, int64_t k, bool replace, Stream& rng, std::vector<int64_t>& out) {
  out.clear();
  if (deg == 0) return;
  if (k < 0 || (!replace && deg <= k)) {
    for (int64_t i = 0; i < deg; ++i) out.push_back(i);
    return;
  }
  if (replace) {
    for (int64_t j = 0; j < k; ++j) out.push_back(rng.below(deg));
  } else {
    for (int64_t j = deg - k; j < deg; ++j) {
      const int64_t t = rng.below(j + 1);
      out.push_back(std::find(out.begin(), out.end(), t) == out.end() ? t : j);
    }
  }
  std::sort(out.begin(), out.end());
}

// k of the candidate CSR positions drawn by weight, sorted: with replacement by inverse CDF
// (none when every weight is 0); without, the k largest Efraimidis-Spirakis keys
// log(1 - u) / w (ties to the lower position) among the positive weights. All of them when
// k < 0 or, without replacement, k >= the candidates.
void weighted_pick(const std::vector<int64_t>& cand, const double* weight, int64_t k, bool replace,
                   Stream& rng, std::vector<int64_t>& out) {
  out.clear();
  const int64_t n = static_cast<int64_t>(cand.size());
  if (k < 0 || (!replace && k >= n)) {
    out = cand;
    return;
  }
  if (replace) {
    std::vector<double> cum(n);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) cum[i] = total += weight[cand[i]];
    if (!(total > 0)) return;
    for (int64_t j = 0; j < k; ++j) {
      const double x = rng.unit() * total;
      out.push_back(cand[std::upper_bound(cum.begin(), cum.end(), x) - cum.begin()]);
    }
  } else {
    std::vector<std::pair<double, int64_t>> keys;
    for (int64_t i = 0; i < n; ++i) {
      const double u = rng.unit(), w = weight[cand[i]];
      if (w > 0) keys.push_back({std::log(1.0 - u) / w, cand[i]});
    }
    const auto first = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    const int64_t m = std::min<int64_t>(k, static_cast<int64_t>(keys.size()));
    std::partial_sort(keys.begin(), keys.begin() + m, keys.end(), first);
    for (int64_t i = 0; i < m; ++i) out.push_back(keys[i].second);
  }
  std::sort(out.begin(), out.end());
}

template <typename index_t>
struct Relation {
  const index_t* indptr;
  const index_t* indices;
  int64_t rows, nnz, src, dst;  // rows: destination nodes the CSR has
  const int64_t* source_time;   // per source node (node-level temporal sampling) or null
  const int64_t* edge_time;     // per CSR position (edge-level temporal sampling) or null
  const double* weight;         // per CSR position (weighted sampling) or null
};

// How one row is drawn: fan-out k, with or without replacement; with times, only the entries
// at or before the tree's seed time, and with `last` only the k latest of those.
struct Rule {
  int64_t k;
  bool replace, last;
};

template <typename index_t>
int64_t time_of(const Relation<index_t>& rel, int64_t e) {
  return rel.edge_time ? rel.edge_time[e] : rel.source_time[rel.indices[e]];
}

// The CSR positions row w draws (sorted), for a tree whose seed time is seed_time.
template <typename index_t>
void draw_row(const Relation<index_t>& rel, int64_t w, const Rule& rule, int64_t seed_time,
              Stream& rng, std::vector<int64_t>& cand, std::vector<int64_t>& out) {
  const int64_t row = rel.indptr[w], end = rel.indptr[w + 1];
  const bool timed = rel.source_time || rel.edge_time;
  if (!timed && !rel.weight) {
    sample_offsets(end - row, rule.k, rule.replace, rng, out);
    for (auto& o : out) o += row;
    return;
  }
  cand.clear();
  for (int64_t e = row; e < end; ++e)
    if (!timed || time_of(rel, e) <= seed_time) cand.push_back(e);
  const int64_t n = static_cast<int64_t>(cand.size());
  if (timed && rule.last && rule.k >= 0 && n > rule.k) {
    std::stable_sort(cand.begin(), cand.end(),
                     [&](int64_t a, int64_t b) { return time_of(rel, a) < time_of(rel, b); });
    cand.erase(cand.begin(), cand.end() - rule.k);
    std::sort(cand.begin(), cand.end());
  }
  if (rel.weight) {
    weighted_pick(cand, rel.weight, rule.k, rule.replace, rng, out);
    return;
  }
  sample_offsets(static_cast<int64_t>(cand.size()), rule.k, rule.replace, rng, out);
  for (auto& o : out) o = cand[o];
}

// The sampled nodes of one node type: global ids (seeds first), their trees (disjoint
// sampling), and the map from (tree, global id) to the local id.
struct NodeSet {
  int64_t count;  // nodes of this type in the graph
  bool disjoint;
  std::vector<int64_t> nodes, trees, local;
  std::unordered_map<int64_t, int64_t> local_in_tree;

  int64_t find(int64_t tree, int64_t u) const {
    if (!disjoint) return local[u];
    auto it = local_in_tree.find(tree * count + u);
    return it == local_in_tree.end() ? -1 : it->second;
  }
  int64_t add(int64_t tree, int64_t u) {  // local id of (tree, u), appended if new
    const int64_t found = find(tree, u);
    if (found >= 0) return found;
    const int64_t id = static_cast<int64_t>(nodes.size());
    nodes.push_back(u);
    if (disjoint) {
      trees.push_back(tree);
      local_in_tree.emplace(tree * count + u, id);
    } else {
      local[u] = id;
    }
    return id;
  }
};

struct Edges {
  std::vector<int64_t> src, dst, pos, per_hop{0};
};

// A node's row of the relation's CSR; the CSR's own values were checked on entry.
template <typename index_t>
void check_row(const Relation<index_t>& rel, int64_t w) {
  TORCH_CHECK(w < rel.rows, "node ", w, " has no row in a CSR of ", rel.rows, " destination nodes");
}

// One hop over one relation: every frontier node of the destination type draws its
// in-neighbours (in parallel), then the new sources are numbered in frontier order.
template <typename index_t>
void sample_hop(const Relation<index_t>& rel, int64_t r, int64_t hop, const Rule& rule,
                const int64_t* seed_times, uint64_t seed, int64_t begin, int64_t end,
                const NodeSet& at, NodeSet& to, Edges& out) {
  std::vector<std::vector<int64_t>> picked(end - begin);
  at::parallel_for(begin, end, 256, [&](int64_t f0, int64_t f1) {
    std::vector<int64_t> cand;
    for (int64_t f = f0; f < f1; ++f) {
      const int64_t w = at.nodes[f], tree = at.disjoint ? at.trees[f] : 0;
      check_row(rel, w);
      Stream rng = stream_of(seed, hop, r, tree, w);
      draw_row(rel, w, rule, seed_times ? seed_times[tree] : 0, rng, cand, picked[f - begin]);
    }
  });
  for (int64_t f = begin; f < end; ++f) {
    const int64_t tree = at.disjoint ? at.trees[f] : 0;
    for (int64_t e : picked[f - begin]) {
      out.src.push_back(to.add(tree, rel.indices[e]));
      out.dst.push_back(f);
      out.pos.push_back(e);
    }
  }
}

// Every edge of the relation between two sampled nodes, by destination in sampled order,
// then CSR position.
template <typename index_t>
void induced_edges(const Relation<index_t>& rel, const NodeSet& at, const NodeSet& to, Edges& out) {
  for (int64_t f = 0; f < static_cast<int64_t>(at.nodes.size()); ++f) {
    const int64_t w = at.nodes[f], tree = at.disjoint ? at.trees[f] : 0;
    check_row(rel, w);
    for (int64_t e = rel.indptr[w]; e < rel.indptr[w + 1]; ++e) {
      const int64_t s = to.find(tree, rel.indices[e]);
      if (s < 0) continue;
      out.src.push_back(s);
      out.dst.push_back(f);
      out.pos.push_back(e);
    }
  }
  out.per_hop.push_back(static_cast<int64_t>(out.src.size()));
}

at::Tensor as_tensor(const std::vector<int64_t>& v) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong));
}

// The seeds of every type, first in their node sets (a repeated seed keeps its own row;
// edges reach the first); disjoint sampling numbers one tree per seed across types.
void place_seeds(std::vector<NodeSet>& sets, const std::vector<at::Tensor>& seeds,
                 std::vector<std::vector<int64_t>>& per_hop) {
  int64_t tree = 0;
  for (size_t t = 0; t < sets.size(); ++t) {
    auto& set = sets[t];
    const int64_t* s = seeds[t].data_ptr<int64_t>();
    for (int64_t i = 0; i < seeds[t].numel(); ++i) {
      TORCH_CHECK(s[i] >= 0 && s[i] < set.count, "seed node ", s[i], " is out of range for ",
                  set.count, " nodes");
      set.nodes.push_back(s[i]);
      if (set.disjoint) {
        set.trees.push_back(tree);
        set.local_in_tree.emplace(tree * set.count + s[i], i);
        ++tree;
      } else if (set.local[s[i]] < 0) {
        set.local[s[i]] = i;
      }
    }
    per_hop[t].push_back(seeds[t].numel());
  }
}

template <typename index_t>
std::vector<at::Tensor> sample(const std::vector<Relation<index_t>>& rels,
                               std::vector<NodeSet>& sets, const std::vector<at::Tensor>& seeds,
                               const std::vector<int64_t>& fanouts, int64_t hops, bool replace,
                               bool induced, bool last, const int64_t* seed_times, uint64_t seed) {
  const int64_t T = static_cast<int64_t>(sets.size()), R = static_cast<int64_t>(rels.size());
  std::vector<std::vector<int64_t>> per_hop(T);
  place_seeds(sets, seeds, per_hop);
  std::vector<int64_t> begin(T, 0);
  std::vector<Edges> edges(R);
  for (int64_t hop = 0; hop < hops; ++hop) {
    std::vector<int64_t> end(T);
    for (int64_t t = 0; t < T; ++t) end[t] = static_cast<int64_t>(sets[t].nodes.size());
    for (int64_t r = 0; r < R; ++r) {
      const auto& rel = rels[r];
      const Rule rule{fanouts[r * hops + hop], replace, last};
      sample_hop(rel, r, hop, rule, seed_times, seed, begin[rel.dst], end[rel.dst], sets[rel.dst],
                 sets[rel.src], edges[r]);
      edges[r].per_hop.push_back(static_cast<int64_t>(edges[r].src.size()));
    }
    for (int64_t t = 0; t < T; ++t) {
      begin[t] = end[t];
      per_hop[t].push_back(static_cast<int64_t>(sets[t].nodes.size()));
    }
  }
  if (induced) {
    for (int64_t r = 0; r < R; ++r) {
      edges[r] = Edges{};
      induced_edges(rels[r], sets[rels[r].dst], sets[rels[r].src], edges[r]);
    }
  }
  std::vector<at::Tensor> out;
  for (const auto& s : sets) out.push_back(as_tensor(s.nodes));
  for (const auto& s : sets) out.push_back(as_tensor(s.trees));
  for (const auto& h : per_hop) out.push_back(as_tensor(h));
  for (const auto& e : edges) out.push_back(as_tensor(e.src));
  for (const auto& e : edges) out.push_back(as_tensor(e.dst));
  for (const auto& e : edges) out.push_back(as_tensor(e.pos));
  for (const auto& e : edges) out.push_back(as_tensor(e.per_hop));
  return out;
}

// An optional per-type or per-relation list: empty, or one tensor each (numel 0: none).
void check_optional_list(at::TensorList list, int64_t count, const char* name) {
  TORCH_CHECK(list.empty() || static_cast<int64_t>(list.size()) == count, name,
              " must be empty or hold one tensor each (", count, "), got ", list.size());
}

// Entry i of an optional per-type or per-relation list (none for an empty list or an empty
// tensor), checked and kept by optional_per_entry.
template <typename T>
const T* optional_data(at::TensorList list, int64_t i, int64_t size, at::ScalarType dtype,
                       const char* name, std::vector<at::Tensor>& keep) {
  if (list.empty() || list[i].numel() == 0) return nullptr;
  keep.emplace_back();
  return optional_per_entry<T>(list[i], size, dtype,
                               std::string(name) + "[" + std::to_string(i) + "]", keep.back());
}

std::vector<at::Tensor> neighbor_sample_cpu(at::TensorList indptrs, at::TensorList indices,
                                            at::IntArrayRef src_types, at::IntArrayRef dst_types,
                                            at::IntArrayRef num_nodes, at::TensorList seeds,
                                            at::IntArrayRef fanouts, bool replace, bool disjoint,
                                            bool induced, int64_t seed, at::TensorList node_times,
                                            at::TensorList edge_times,
                                            const std::optional<at::Tensor>& seed_times,
                                            at::TensorList edge_weights, bool last) {
  const int64_t R = static_cast<int64_t>(indptrs.size()),
                T = static_cast<int64_t>(num_nodes.size());
  TORCH_CHECK(
      static_cast<int64_t>(indices.size()) == R && static_cast<int64_t>(src_types.size()) == R &&
          static_cast<int64_t>(dst_types.size()) == R,
      "neighbor_sample needs one indptr, indices, source and destination type per relation");
  TORCH_CHECK(static_cast<int64_t>(seeds.size()) == T,
              "neighbor_sample needs one seed tensor per node type (", T, "), got ", seeds.size());
  TORCH_CHECK(R == 0 ? fanouts.empty() : fanouts.size() % R == 0,
              "neighbor_sample needs the same number of fan-outs (hops) for each relation");
  TORCH_CHECK(!(induced && disjoint), "induced subgraphs are not sampled disjointly");
  check_optional_list(node_times, T, "node_times");
  check_optional_list(edge_times, R, "edge_times");
  check_optional_list(edge_weights, R, "edge_weights");
  for (int64_t k : fanouts)
    TORCH_CHECK(k >= -1, "fan-outs must be >= 0, or -1 for all neighbours, got ", k);
  int64_t total_seeds = 0;
  for (int64_t t = 0; t < T; ++t) {
    TORCH_CHECK(num_nodes[t] >= 0, "node type ", t, " has a negative node count ", num_nodes[t]);
    TORCH_CHECK(seeds[t].dim() == 1 && seeds[t].scalar_type() == at::kLong,
                "seeds must be int64 [S]");
    total_seeds += seeds[t].numel();
  }
  for (int64_t t = 0; t < T; ++t)
    TORCH_CHECK(!disjoint || num_nodes[t] == 0 || total_seeds <= INT64_MAX / num_nodes[t],
                "too many trees for disjoint sampling of ", num_nodes[t], " nodes");
  std::vector<at::Tensor> keep;
  at::Tensor seed_keep;
  const int64_t* seed_time = nullptr;
  if (seed_times.has_value() && seed_times->numel()) {
    TORCH_CHECK(disjoint, "temporal sampling needs disjoint trees (one seed time each)");
    seed_time =
        optional_per_entry<int64_t>(seed_times, total_seeds, at::kLong, "seed_times", seed_keep);
  }
  const auto dtype = R ? indptrs[0].scalar_type() : at::kLong;
  std::vector<at::Tensor> ip, ix, sc;
  for (int64_t r = 0; r < R; ++r) {
    check_indptr(indptrs[r]);
    check_index(indices[r], "indices");
    TORCH_CHECK(indptrs[r].scalar_type() == dtype && indices[r].scalar_type() == dtype,
                "every relation's indptr and indices must share one index dtype");
    TORCH_CHECK(src_types[r] >= 0 && src_types[r] < T && dst_types[r] >= 0 && dst_types[r] < T,
                "relation ", r, " names node types (", src_types[r], ", ", dst_types[r],
                ") outside 0..", T - 1);
    check_csr_indices(indptrs[r], indices[r], num_nodes[src_types[r]], "the relation's sources");
    ip.push_back(indptrs[r].contiguous());
    ix.push_back(indices[r].contiguous());
  }
  for (const auto& s : seeds) sc.push_back(s.contiguous());
  std::vector<NodeSet> sets(T);
  for (int64_t t = 0; t < T; ++t) {
    sets[t].count = num_nodes[t];
    sets[t].disjoint = disjoint;
    if (!disjoint) sets[t].local.assign(num_nodes[t], -1);
  }
  const int64_t hops = R ? static_cast<int64_t>(fanouts.size()) / R : 0;
  std::vector<int64_t> k(fanouts.begin(), fanouts.end());
  std::vector<at::Tensor> out;
  GL_DISPATCH_INDEX(dtype, [&] {
    std::vector<Relation<index_t>> rels;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t nnz = ix[r].numel();
      Relation<index_t> rel{
          ip[r].data_ptr<index_t>(),
          ix[r].data_ptr<index_t>(),
          ip[r].numel() - 1,
          nnz,
          src_types[r],
          dst_types[r],
          optional_data<int64_t>(node_times, src_types[r], num_nodes[src_types[r]], at::kLong,
                                 "node_times", keep),
          optional_data<int64_t>(edge_times, r, nnz, at::kLong, "edge_times", keep),
          optional_data<double>(edge_weights, r, nnz, at::kDouble, "edge_weights", keep)};
      TORCH_CHECK(!(rel.source_time || rel.edge_time) || seed_time,
                  "temporal sampling needs seed_times (one per tree)");
      rels.push_back(rel);
    }
    out = sample<index_t>(rels, sets, sc, k, hops, replace, induced, last, seed_time,
                          static_cast<uint64_t>(seed));
  });
  return out;
}

// --- hop2_sample: LargeGT's fixed token sequences ------------------------------------------

// The official pool of node v (LargeGT's data_utils.create_node_ids): the distinct
// in-neighbours of v (the CSR row of A), then the distinct nodes two in-steps away (the row
// of A·A, v itself included when a neighbour points back), each list in increasing id.
template <typename index_t>
void hop2_pool(const index_t* indptr, const index_t* indices, int64_t v, std::vector<int64_t>& pool,
               std::vector<int64_t>& two) {
  pool.assign(indices + indptr[v], indices + indptr[v + 1]);
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  two.clear();
  for (const int64_t u : pool) two.insert(two.end(), indices + indptr[u], indices + indptr[u + 1]);
  std::sort(two.begin(), two.end());
  two.erase(std::unique(two.begin(), two.end()), two.end());
  pool.insert(pool.end(), two.begin(), two.end());
}

// k draws as the official code: without replacement from the pool when it has k entries
// (a partial Fisher-Yates), else the pool repeated in list order, else (an empty pool) k
// distinct random nodes (with repetition only when the graph has fewer than k nodes).
void draw_tokens(std::vector<int64_t>& pool, int64_t k, int64_t n, Stream& rng, int64_t* out) {
  const int64_t m = static_cast<int64_t>(pool.size());
  if (m >= k) {
    for (int64_t j = 0; j < k; ++j) std::swap(pool[j], pool[j + rng.below(m - j)]);
    std::copy(pool.begin(), pool.begin() + k, out);
  } else if (m > 0) {
    for (int64_t j = 0; j < k; ++j) out[j] = pool[j % m];
  } else {
    for (int64_t j = 0; j < k;) {
      const int64_t u = rng.below(n);
      if (n < k || std::find(out, out + j, u) == out + j) out[j++] = u;
    }
  }
}

at::Tensor hop2_sample_cpu(const at::Tensor& indptr, const at::Tensor& indices, int64_t K,
                           int64_t seed) {
  check_csr(indptr, indices);
  TORCH_CHECK(K >= 1, "K (tokens per node) must be >= 1, got ", K);
  const int64_t n = indptr.numel() - 1;
  auto out = at::empty({n, K}, indptr.options().dtype(at::kLong));
  auto ic = indices.contiguous();
  int64_t* o = out.data_ptr<int64_t>();
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    const index_t* p = indptr.data_ptr<index_t>();
    const index_t* i = ic.data_ptr<index_t>();
    at::parallel_for(0, n, 256, [&](int64_t v0, int64_t v1) {
      std::vector<int64_t> pool, two;
      for (int64_t v = v0; v < v1; ++v) {
        Stream rng{mix(static_cast<uint64_t>(seed) ^ mix(static_cast<uint64_t>(v)))};
        o[v * K] = v;
        hop2_pool<index_t>(p, i, v, pool, two);
        draw_tokens(pool, K - 1, n, rng, o + v * K + 1);
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("neighbor_sample", &neighbor_sample_cpu);
  m.impl("hop2_sample", &hop2_sample_cpu);
}

}  // namespace graphloc
