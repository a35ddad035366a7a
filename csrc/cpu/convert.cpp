// CPU kernel of coo_to_csr: a stable, parallel counting sort of an index vector into
// (indptr, perm), validating the range on the way.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>
#include <vector>

#include "common/ops.h"

namespace graphloc {
namespace {

// Thread mapping: the edges are cut into T contiguous chunks. Pass 1: each chunk counts its
// rows. A scan gives every (chunk, row) its first output slot, ordered chunk-major within
// a row, so pass 2 writes perm stably (equal keys keep their input order).
template <typename index_t>
void counting_sort(const index_t* index, int64_t E, int64_t num_rows, index_t* indptr,
                   index_t* perm) {
  const int64_t T = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), E / (1 << 16)));
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
  check_index(index, "index");
  TORCH_CHECK(num_rows >= 0, "num_rows must be >= 0, got ", num_rows);
  auto ic = index.contiguous();
  auto indptr = at::empty({num_rows + 1}, index.options());
  auto perm = at::empty({index.numel()}, index.options());
  GL_DISPATCH_INDEX(index.scalar_type(), [&] {
    counting_sort<index_t>(ic.data_ptr<index_t>(), ic.numel(), num_rows, indptr.data_ptr<index_t>(),
                           perm.data_ptr<index_t>());
  });
  return {indptr, perm};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("coo_to_csr", &coo_to_csr_cpu); }

}  // namespace graphloc
