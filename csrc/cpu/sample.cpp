// CPU kernels of neighbor_sample (layer-wise uniform sampling of in-neighbours without
// replacement, GraphSAGE / PyG NeighborLoader semantics, around a batch of seed nodes) and
// hop2_sample (LargeGT's fixed per-node samples from the 1- and 2-hop neighbourhood, as
// its official code draws them).
// Deterministic for a given seed whatever the thread count: each (hop, node) draws from its
// own counter-based random stream, and new nodes are numbered in one ordered pass.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "common/ops.h"
#include "cpu/splitmix.h"

namespace graphloc {
namespace {

struct Stream {
  uint64_t state;
  uint64_t next() { return mix(state++); }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

// k distinct offsets in [0, deg), uniformly (Floyd's algorithm; k is a small fan-out).
void sample_offsets(int64_t deg, int64_t k, Stream& rng, std::vector<int64_t>& out) {
  out.clear();
  if (k < 0 || deg <= k) {
    for (int64_t i = 0; i < deg; ++i) out.push_back(i);
    return;
  }
  for (int64_t j = deg - k; j < deg; ++j) {
    const int64_t t = rng.below(j + 1);
    out.push_back(std::find(out.begin(), out.end(), t) == out.end() ? t : j);
  }
  std::sort(out.begin(), out.end());
}

template <typename index_t>
std::vector<at::Tensor> sample(const index_t* indptr, const index_t* indices, int64_t n,
                               const int64_t* seeds, int64_t S, const std::vector<int64_t>& fanouts,
                               uint64_t seed) {
  std::vector<int64_t> nodes(seeds, seeds + S), local(n, -1);
  for (int64_t i = 0; i < S; ++i) {
    TORCH_CHECK(seeds[i] >= 0 && seeds[i] < n, "seed node ", seeds[i], " is out of range for ", n,
                " nodes");
    TORCH_CHECK(local[seeds[i]] < 0, "seed node ", seeds[i], " appears twice in the batch");
    local[seeds[i]] = i;
  }
  std::vector<int64_t> src, dst, pos, hop_nodes{S}, hop_edges{0};
  int64_t begin = 0;
  for (size_t hop = 0; hop < fanouts.size(); ++hop) {
    const int64_t end = static_cast<int64_t>(nodes.size()), k = fanouts[hop];
    // Pass 1 (parallel): every frontier node draws its CSR positions.
    std::vector<std::vector<int64_t>> picked(end - begin);
    at::parallel_for(begin, end, 256, [&](int64_t f0, int64_t f1) {
      std::vector<int64_t> offsets;
      for (int64_t f = f0; f < f1; ++f) {
        const int64_t w = nodes[f], row = indptr[w], deg = indptr[w + 1] - row;
        Stream rng{mix(
            seed ^ mix(static_cast<uint64_t>(hop) * 0x100000001b3ULL + static_cast<uint64_t>(w)))};
        sample_offsets(deg, k, rng, offsets);
        auto& mine = picked[f - begin];
        for (int64_t o : offsets) mine.push_back(row + o);
      }
    });
    // Pass 2 (ordered): number the new source nodes, emit the edges.
    for (int64_t f = begin; f < end; ++f) {
      for (int64_t e : picked[f - begin]) {
        const int64_t u = indices[e];
        if (local[u] < 0) {
          local[u] = static_cast<int64_t>(nodes.size());
          nodes.push_back(u);
        }
        src.push_back(local[u]);
        dst.push_back(f);
        pos.push_back(e);
      }
    }
    hop_nodes.push_back(static_cast<int64_t>(nodes.size()));
    hop_edges.push_back(static_cast<int64_t>(src.size()));
    begin = end;
  }
  auto as_tensor = [](const std::vector<int64_t>& v) {
    return at::tensor(v, at::TensorOptions().dtype(at::kLong));
  };
  return {as_tensor(nodes), as_tensor(src),       as_tensor(dst),
          as_tensor(pos),   as_tensor(hop_nodes), as_tensor(hop_edges)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
neighbor_sample_cpu(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& seeds,
                    at::IntArrayRef fanouts, int64_t seed) {
  check_csr(indptr, indices);
  TORCH_CHECK(seeds.dim() == 1 && seeds.scalar_type() == at::kLong, "seeds must be int64 [S]");
  for (int64_t k : fanouts)
    TORCH_CHECK(k >= -1, "fan-outs must be >= 0, or -1 for all neighbours, got ", k);
  auto sc = seeds.contiguous(), ic = indices.contiguous();
  std::vector<at::Tensor> out;
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    out = sample<index_t>(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(), indptr.numel() - 1,
                          sc.data_ptr<int64_t>(), sc.numel(),
                          std::vector<int64_t>(fanouts.begin(), fanouts.end()),
                          static_cast<uint64_t>(seed));
  });
  return {out[0], out[1], out[2], out[3], out[4], out[5]};
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
