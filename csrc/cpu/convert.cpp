// CPU kernels of coo_to_csr (a stable, parallel counting sort of an index vector into
// (indptr, perm), validating the range on the way) and of arg_sources (the max/min
// winners' CSR positions as int64 source rows).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>
#include <vector>

#include "common/ops.h"
#include "cpu/rows.h"

namespace graphloc {
namespace {

// Thread mapping: the edges are cut into T contiguous chunks. Pass 1: each chunk counts its
// rows. A scan gives every (chunk, row) its first output slot, ordered chunk-major within
// a row, so pass 2 writes perm stably (equal keys keep their input order).
// Each chunk holds a count per row, so T is also kept to E / num_rows: the counts then take
// at most one int64 per row and per edge. Without that bound a graph of many rows and few
// edges per row took T int64 per row (128 bytes per node on 16 threads) and a sequential
// scan over all of them.
template <typename index_t>
void counting_sort(const index_t* index, int64_t E, int64_t num_rows, index_t* indptr,
                   index_t* perm) {
  const int64_t by_edges = std::min<int64_t>(E / (1 << 16), E / std::max<int64_t>(1, num_rows));
  const int64_t T = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), by_edges));
  std::vector<std::vector<int64_t>> counts(T, std::vector<int64_t>(num_rows, 0));
  auto chunk_begin = [&](int64_t t) { return E * t / T; };
  std::atomic<int64_t> bad{-1};
  at::parallel_for(0, T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t* c = counts[t].data();
      for (int64_t e = chunk_begin(t); e < chunk_begin(t + 1); ++e) {
        const int64_t r = index[e];
        if (r < 0 || r >= num_rows) {
          bad = e;
          return;
        }
        ++c[r];
      }
    }
  });
  const int64_t e_bad = bad.load();
  TORCH_CHECK(e_bad < 0, "index[", e_bad, "] = ", static_cast<int64_t>(index[e_bad]),
              " is out of range for ", num_rows, " rows");
  int64_t running = 0;
  for (int64_t r = 0; r < num_rows; ++r) {
    indptr[r] = static_cast<index_t>(running);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t c = counts[t][r];
      counts[t][r] = running;  // now the next free slot of (chunk t, row r)
      running += c;
    }
  }
  indptr[num_rows] = static_cast<index_t>(running);
  at::parallel_for(0, T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t* slot = counts[t].data();
      for (int64_t e = chunk_begin(t); e < chunk_begin(t + 1); ++e)
        perm[slot[index[e]]++] = static_cast<index_t>(e);
    }
  });
}

std::tuple<at::Tensor, at::Tensor> coo_to_csr_cpu(const at::Tensor& index, int64_t num_rows) {
  auto ic = index.contiguous();  // a row of a transposed edge_index is a strided view
  check_index(ic, "index");
  TORCH_CHECK(num_rows >= 0, "num_rows must be >= 0, got ", num_rows);
  auto indptr = at::empty({num_rows + 1}, index.options());
  auto perm = at::empty({index.numel()}, index.options());
  GL_DISPATCH_INDEX(index.scalar_type(), [&] {
    counting_sort<index_t>(ic.data_ptr<index_t>(), ic.numel(), num_rows, indptr.data_ptr<index_t>(),
                           perm.data_ptr<index_t>());
  });
  return {indptr, perm};
}

// One parallel pass: each position read once, checked against [0, num_edges], mapped through
// perm and written as int64 (on huge pages). Gathering in the index dtype with ATen and
// widening after it took two passes: 23.0 against 14.7 ms on [200,000, 64] winners with
// freed memory retained, 74.1 against 16.2 ms without (RESULTS.md, 2026-12-03).
template <typename index_t>
int64_t map_positions(const index_t* arg, int64_t n, const index_t* perm, int64_t num_edges,
                      int64_t* out) {
  std::atomic<int64_t> bad{n};
  at::parallel_for(0, n, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t a = arg[i];
      if (a < 0 || a > num_edges) {
        int64_t seen = bad.load();
        while (i < seen && !bad.compare_exchange_weak(seen, i)) {
        }
        return;
      }
      out[i] = a == num_edges || !perm ? a : static_cast<int64_t>(perm[a]);
    }
  });
  return bad.load();
}

at::Tensor arg_sources_cpu(const at::Tensor& arg, const c10::optional<at::Tensor>& perm,
                           int64_t num_edges) {
  TORCH_CHECK(arg.scalar_type() == at::kInt || arg.scalar_type() == at::kLong,
              "arg must be int32 or int64, got ", arg.scalar_type());
  TORCH_CHECK(num_edges >= 0, "num_edges must be >= 0, got ", num_edges);
  const bool mapped = perm.has_value() && perm->defined();
  if (mapped) {
    check_index(*perm, "perm");
    TORCH_CHECK(perm->scalar_type() == arg.scalar_type(), "perm is ", perm->scalar_type(),
                " but arg is ", arg.scalar_type());
    TORCH_CHECK(perm->numel() == num_edges, "perm has ", perm->numel(),
                " entries but num_edges is ", num_edges);
    check_same_device(*perm, "perm", arg, "arg");
  }
  const auto ac = arg.contiguous();
  const auto pc = mapped ? perm->contiguous() : at::Tensor();
  auto out = empty_output(arg.sizes(), arg.options().dtype(at::kLong));
  GL_DISPATCH_INDEX(arg.scalar_type(), [&] {
    const index_t* a = ac.data_ptr<index_t>();
    const int64_t n = ac.numel();
    const int64_t bad = map_positions<index_t>(a, n, mapped ? pc.data_ptr<index_t>() : nullptr,
                                               num_edges, out.data_ptr<int64_t>());
    TORCH_CHECK(bad == n, "arg (flattened)[", bad, "] = ", static_cast<int64_t>(a[bad]),
                " is not a CSR position in [0, ", num_edges, "]");
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("coo_to_csr", &coo_to_csr_cpu);
  m.impl("arg_sources", &arg_sources_cpu);
  m.impl("csr_facts", &csr_facts_op);
}

}  // namespace graphloc
