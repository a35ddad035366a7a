// CPU kernel of graclus: Dhillon et al.'s greedy matching (PAMI 2007), as PyG's graclus
// pooling takes it. Nodes are visited in the given order; an unmatched node is paired with
// an unmatched out-neighbour (the first in row order, or with weights the heaviest, ties to
// the later entry) and both get the smaller id as their cluster; a node left without one
// is its own cluster. Self-loops never pair a node with itself.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "common/ops.h"

namespace graphloc {
namespace {

template <typename index_t>
void match(const index_t* indptr, const index_t* indices, const int64_t* order,
           const double* weight, int64_t n, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t u = order[i];
    if (out[u] >= 0) continue;
    int64_t best = u;
    double best_weight = 0;
    for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {
      const int64_t v = indices[e];
      if (v == u || out[v] >= 0) continue;
      if (!weight) {
        best = v;
        break;
      }
      if (weight[e] >= best_weight) {
        best = v;
        best_weight = weight[e];
      }
    }
    out[u] = out[best] = std::min(u, best);
  }
}

at::Tensor graclus_cpu(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& order,
                       const std::optional<at::Tensor>& weight) {
  check_csr(indptr, indices);
  const int64_t n = indptr.numel() - 1;
  TORCH_CHECK(order.dim() == 1 && order.scalar_type() == at::kLong && order.numel() == n,
              "order must be int64 [", n, "] (a permutation of the nodes), got ",
              order.scalar_type(), " ", order.sizes());
  auto oc = order.contiguous();
  const int64_t* o = oc.data_ptr<int64_t>();
  std::vector<char> seen(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK(o[i] >= 0 && o[i] < n && !seen[o[i]], "order is not a permutation of the ", n,
                " nodes: it holds ", o[i], " at ", i);
    seen[o[i]] = 1;
  }
  at::Tensor wc;
  const double* w = optional_per_entry<double>(weight, indices.numel(), at::kDouble, "weight", wc);
  auto out = at::full({n}, -1, order.options());
  auto ic = indices.contiguous();
  GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
    match<index_t>(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(), o, w, n,
                   out.data_ptr<int64_t>());
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("graclus", &graclus_cpu); }

}  // namespace graphloc
