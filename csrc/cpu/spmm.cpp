// CPU kernels of the spmm family: spmm (gather + reduce over a destination-major CSR),
// segment_reduce (the same with rows read in place), the max/min backward over the CSC,
// and gather_csr. All pull-based: one thread owns a row, no atomics, deterministic.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <vector>

#include "common/ops.h"
#include "cpu/rows.h"
#include "cpu/vec.h"

namespace graphloc {
namespace {

// The row of the edge values that edge e reads: its own (EdgeRow), or value_index[e].
struct EdgeRow {
  int64_t operator()(int64_t e) const { return e; }
};

// Sum/mean of bfloat16 rows over one block of T channels that lies inside one head: the T
// float accumulators stay in vector registers while the row's neighbours stream past.
template <int T, typename scalar_t, typename index_t, Reduce R, typename Src, typename ValueRow>
inline void sum_row_tiled(const index_t* indptr, Src src, ValueRow value_row, const scalar_t* value,
                          int64_t heads, const scalar_t* x, int64_t row, int64_t K, int64_t F,
                          int64_t chunk_end, int64_t distance, bool stream, scalar_t* out) {
  using acc_t = typename AccType<scalar_t>::type;
  using Red = Reducer<acc_t, R>;
  const int64_t begin = indptr[row], end = indptr[row + 1];
  for (int64_t t0 = 0; t0 < K; t0 += T) {
    const int64_t h = t0 / F;
    acc_t a[T] = {};
    for (int64_t e = begin; e < end; ++e) {
      if (t0 == 0 && e + distance < chunk_end) {
        prefetch_row(x + src(e + distance) * K, K);
        if constexpr (!std::is_same_v<ValueRow, EdgeRow>)  // values read at random too
          if (value) __builtin_prefetch(value + value_row(e + distance) * heads);
      }
      const scalar_t* __restrict__ xr = x + src(e) * K + t0;
      const acc_t w = value ? static_cast<acc_t>(value[value_row(e) * heads + h]) : acc_t(1);
#pragma GCC unroll 64
      for (int f = 0; f < T; ++f) a[f] += w * static_cast<acc_t>(xr[f]);
    }
    scalar_t* __restrict__ o = out + row * K + t0;
    alignas(64) acc_t row_out[T];  // a's own address would keep a out of the registers
#pragma GCC unroll 64
    for (int f = 0; f < T; ++f) row_out[f] = Red::finish(a[f], end - begin);
    store_row(o, row_out, T, stream);
  }
}

// How spmm's vectorised sums weigh their edges: not at all, one value per head (a block of
// channels inside one head), one value per head for a block that spans several narrow heads
// (each vector inside one head), or one value per channel (heads of width 1, [E, K] values:
// a continuous filter per edge, SchNet's CFConv).
enum class Weights : int { None = 0, PerHead = 1, PerHeads = 2, PerChannel = 3 };

// Sum/mean over the edges [begin, end) of one block of Q * L channels (L per vector
// register) that lies inside head h (or, per channel, whose values are lanes too): the
// accumulators stay in native-width registers. kPrefetch: the first block of a row fetches
// the rows `distance` edges on.
template <int Q, int L, Weights kWeights, bool kPrefetch, typename A, typename Src,
          typename ValueRow>
__attribute__((always_inline)) inline void sum_block_edges(
    int64_t begin, int64_t end, Src src, ValueRow value_row, const A* value, int64_t heads,
    int64_t h, const int64_t* vector_heads, const A* x, int64_t K, int64_t t0, int64_t chunk_end,
    int64_t distance, typename Vec<A, L>::type* a) {
  for (int64_t e = begin; e < end; ++e) {
    if (kPrefetch && e + distance < chunk_end) {
      prefetch_row_unrolled(x + src(e + distance) * K, K);
      if constexpr (kWeights == Weights::PerChannel && !std::is_same_v<ValueRow, EdgeRow>)
        prefetch_row_unrolled(value + value_row(e + distance) * heads, K);
      else if constexpr (kWeights != Weights::None && !std::is_same_v<ValueRow, EdgeRow>)
        __builtin_prefetch(value + value_row(e + distance) * heads);  // values read at random
    }
    const A* xr = x + src(e) * K + t0;
    if constexpr (kWeights == Weights::PerChannel) {
      const A* wr = value + value_row(e) * heads + t0;
#pragma GCC unroll 16
      for (int q = 0; q < Q; ++q) a[q] += load_vec<A, L>(wr + q * L) * load_vec<A, L>(xr + q * L);
    } else if constexpr (kWeights == Weights::PerHead) {
      const A w = value[value_row(e) * heads + h];
#pragma GCC unroll 16
      for (int q = 0; q < Q; ++q) a[q] += w * load_vec<A, L>(xr + q * L);
    } else if constexpr (kWeights == Weights::PerHeads) {
      const A* wr = value + value_row(e) * heads;
#pragma GCC unroll 16
      for (int q = 0; q < Q; ++q) a[q] += wr[vector_heads[q]] * load_vec<A, L>(xr + q * L);
    } else {
#pragma GCC unroll 16
      for (int q = 0; q < Q; ++q) a[q] += load_vec<A, L>(xr + q * L);
    }
  }
}

// Sum/mean of float or double rows r0..r1, in blocks of T channels that each lie inside one
// head. Written with explicit vectors of the register width, weighted or not at compile
// time, and the prefetch unrolled: GCC's own vectorisation of sum_row_tiled's T scalar
// accumulators fell back to scalar code and stack spills as soon as the loop held any more
// branches (3x slower). Measured 2026-12-03 against sum_row_tiled, F = 64, paired calls:
// 0.85-0.89x the time on the power-law graph, 0.85-0.92x on the road graph. `k` is the row
// width K: an int64_t, or std::integral_constant<int64_t, T> for rows of one block, whose
// address arithmetic and prefetch then fold to constants.
template <int T, Weights kWeights, typename A, typename index_t, Reduce R, typename Src,
          typename ValueRow, typename Width>
__attribute__((always_inline)) inline void sum_row_blocks(const index_t* indptr, Src src,
                                                          ValueRow value_row, const A* value,
                                                          int64_t heads, const A* x, int64_t r0,
                                                          int64_t r1, Width k, int64_t F,
                                                          int64_t chunk_end, int64_t distance,
                                                          bool stream, A* out) {
  using Red = Reducer<A, R>;
  // spanning narrow heads, a vector holds 8 channels at most: heads come in multiples of 8
  constexpr int kLanes = kWeights == Weights::PerHeads ? 8 : T;
  constexpr int L = std::min<int>({T, kLanes, static_cast<int>(kVectorBytes / sizeof(A))});
  constexpr int Q = T / L;
  using V = typename Vec<A, L>::type;
  const int64_t K = k;
  int64_t vector_heads[Q] = {};  // PerHeads: the head of each vector of the block
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t begin = indptr[row], end = indptr[row + 1];
    for (int64_t t0 = 0; t0 < K; t0 += T) {
      const int64_t h = t0 / F;
      if constexpr (kWeights == Weights::PerHeads)
        for (int q = 0; q < Q; ++q) vector_heads[q] = (t0 + q * L) / F;
      V a[Q] = {};
      if (t0 == 0)
        sum_block_edges<Q, L, kWeights, true>(begin, end, src, value_row, value, heads, h,
                                              vector_heads, x, K, t0, chunk_end, distance, a);
      else
        sum_block_edges<Q, L, kWeights, false>(begin, end, src, value_row, value, heads, h,
                                               vector_heads, x, K, t0, chunk_end, distance, a);
      alignas(64) A row_out[T];
#pragma GCC unroll 16
      for (int q = 0; q < Q; ++q) store_vec<A, L>(row_out + q * L, a[q]);
#pragma GCC unroll 64
      for (int f = 0; f < T; ++f) row_out[f] = Red::finish(row_out[f], end - begin);
      store_row(out + row * K + t0, row_out, T, stream);
    }
  }
}

// sum_row_blocks with the row width known at compile time when a row is one block (K == T,
// one head). Against the run-time width (spmm sum, paired, 2026-12-03): 0.87x to 0.94x the
// time at F = 16, 0.93x to 1.02x at F = 64.
template <int T, Weights kWeights, typename A, typename index_t, Reduce R, typename Src,
          typename ValueRow>
__attribute__((noinline)) void sum_rows_vectorised(const index_t* indptr, Src src,
                                                   ValueRow value_row, const A* value,
                                                   int64_t heads, const A* x, int64_t r0,
                                                   int64_t r1, int64_t K, int64_t F,
                                                   int64_t chunk_end, int64_t distance, bool stream,
                                                   A* out) {
  if (K == T)
    sum_row_blocks<T, kWeights, A, index_t, R>(indptr, src, value_row, value, heads, x, r0, r1,
                                               std::integral_constant<int64_t, T>{}, F, chunk_end,
                                               distance, stream, out);
  else
    sum_row_blocks<T, kWeights, A, index_t, R>(indptr, src, value_row, value, heads, x, r0, r1, K,
                                               F, chunk_end, distance, stream, out);
}

// The channels of one register block of spmm's float and double sums: a one-head row of 128
// channels that fits eight vector registers (float with AVX-512) is one block, one pass over
// the row's edges instead of two; else tile_width. Measured 2026-12-03 (AVX-512, K = 128 floats,
// paired): 0.74x to 0.85x the time of two 64-channel blocks on the power-law graph, 0.92x to 0.95x
// on the road graph.
// Heads of width 1 (one value per channel) take blocks across the channels, their values
// loaded as lanes: the per-head blocks had no tile of one channel, and the scalar loop took
// 11x the time of an unweighted sum (67 ms against 6 ms, road graph, K = 64, 2026-12-05).
// Heads of a multiple of 8 channels share blocks wider than a head's own tile where the row
// has them (spans_heads): blocks inside one head passed over the row's edges once per head,
// 24 times for DNAConv's 24 heads of 8 (151 ms against 37 ms for 3 heads of 64 over the
// same channels, road graph, 2026-12-05).
inline bool spans_heads(int64_t K, int64_t heads) {
  const int64_t F = K / heads;
  return heads > 1 && heads < K && F % 8 == 0 && tile_width(K) > tile_width(F);
}

template <typename A>
inline int sum_tile_width(int64_t K, int64_t heads) {
  constexpr int64_t kMaxBlockBytes = 8 * kVectorBytes;
  if (heads == 1 && K == 128 && K * static_cast<int64_t>(sizeof(A)) <= kMaxBlockBytes) return 128;
  return (heads > 1 && heads == K) || spans_heads(K, heads) ? tile_width(K) : tile_width(K / heads);
}

// Max/min over one block of T channels inside one head, branch-free so it vectorises: the
// running extreme and its CSR position (as index_t, the same lane width for int32) stay in
// registers. Strict comparison keeps the first winner on ties. Only for finite inputs (see
// reduce_launch): a NaN-aware compare here cost 2x-5x. A row of -inf names its first edge.
template <int T, typename scalar_t, typename index_t, Reduce R, typename Src>
inline void arg_row_tiled(const index_t* indptr, Src src, const scalar_t* value, int64_t heads,
                          const scalar_t* x, int64_t row, int64_t K, int64_t F, int64_t chunk_end,
                          int64_t distance, int64_t num_edges, scalar_t* out, index_t* arg) {
  using acc_t = typename AccType<scalar_t>::type;
  using Red = Reducer<acc_t, R>;
  const int64_t begin = indptr[row], end = indptr[row + 1];
  for (int64_t t0 = 0; t0 < K; t0 += T) {
    const int64_t h = t0 / F;
    acc_t a[T];
    index_t b[T];
    for (int f = 0; f < T; ++f) {
      a[f] = Red::init();
      b[f] = static_cast<index_t>(num_edges);
    }
    for (int64_t e = begin; e < end; ++e) {
      if (t0 == 0 && e + distance < chunk_end) prefetch_row(x + src(e + distance) * K, K);
      const scalar_t* __restrict__ xr = x + src(e) * K + t0;
      const acc_t w = value ? static_cast<acc_t>(value[e * heads + h]) : acc_t(1);
      const index_t pos = static_cast<index_t>(e);
      for (int f = 0; f < T; ++f) {  // no unroll pragma: GCC's SLP would miss the blends
        const acc_t v = w * static_cast<acc_t>(xr[f]);
        const bool better = R == Reduce::Max ? v > a[f] : v < a[f];
        a[f] = better ? v : a[f];
        b[f] = better ? pos : b[f];
      }
    }
    for (int f = 0; f < T; ++f) {
      out[row * K + t0 + f] = static_cast<scalar_t>(Red::finish(a[f], end - begin));
      arg[row * K + t0 + f] = b[f];
    }
  }
  if (begin == end) return;
  // A channel of only -inf (max) never passed the strict compare: its first edge wins. A
  // separate pass over the stored row: folded into the loop above it cost 2x at F = 16.
  index_t* row_arg = arg + row * K;
  for (int64_t k = 0; k < K; ++k)
    row_arg[k] =
        row_arg[k] == static_cast<index_t>(num_edges) ? static_cast<index_t>(begin) : row_arg[k];
}

// Thread mapping: a thread owns a block of destination rows and reduces each row's
// neighbour features (x[src(e)], scaled by the edge value of their head) into an
// L1-resident accumulator of K channels, then writes the row once. Head widths divisible
// by 8 take the register-tiled paths instead.
template <typename scalar_t, typename index_t, Reduce R, typename Src, typename ValueRow = EdgeRow>
void reduce_rows(const index_t* indptr, Src src, ValueRow value_row, const scalar_t* value,
                 int64_t heads, const scalar_t* x, int64_t num_rows, int64_t K, scalar_t* out,
                 index_t* arg, bool finite) {
  using acc_t = typename AccType<scalar_t>::type;
  using Red = Reducer<acc_t, R>;
  const int64_t F = K / heads;
  const int64_t num_edges = indptr[num_rows];
  // max/min of inputs with NaN or infinities take the scalar path and its exact rule; so
  // do products and the types torch_scatter adds (half, integers), where speed matters less
  constexpr bool kTiled =
      R != Reduce::Mul && (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double> ||
                           std::is_same_v<scalar_t, c10::BFloat16>);
  // rows narrower than 8 channels (edge scores [E, H], 1-D scatters) take one whole-row tile
  // too: the generic loop's per-row fill and per-channel loop cost more than their work
  const bool narrow = heads == 1 && (K == 1 || K == 2 || K == 4);
  // float and double sums: explicit vectors (sum_rows_vectorised); bfloat16 sums and
  // max/min: the tiles
  constexpr bool kVectorised = !Red::kHasArg && std::is_same_v<scalar_t, acc_t>;
  const int tile = !kTiled || (Red::kHasArg && !finite) ? 0
                   : narrow                             ? K
                   : kVectorised                        ? sum_tile_width<scalar_t>(K, heads)
                                                        : tile_width(F);
  const bool stream = streams_output(num_rows * K * static_cast<int64_t>(sizeof(scalar_t)));
  parallel_rows(indptr, num_rows, [&](int64_t r0, int64_t r1) {
    const int64_t chunk_end = indptr[r1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    if constexpr (kTiled)
      if (tile > 0) {
        with_constant<128, 64, 32, 16, 8, 4, 2, 1>(tile, [&](auto width) {
          constexpr int T = decltype(width)::value;
          if constexpr (T > 0 && kVectorised) {
            if (value && heads > 1 && heads == K)
              sum_rows_vectorised<T, Weights::PerChannel, scalar_t, index_t, R>(
                  indptr, src, value_row, value, heads, x, r0, r1, K, F, chunk_end, distance,
                  stream, out);
            else if (value && spans_heads(K, heads))
              sum_rows_vectorised<T, Weights::PerHeads, scalar_t, index_t, R>(
                  indptr, src, value_row, value, heads, x, r0, r1, K, F, chunk_end, distance,
                  stream, out);
            else if (value)
              sum_rows_vectorised<T, Weights::PerHead, scalar_t, index_t, R>(
                  indptr, src, value_row, value, heads, x, r0, r1, K, F, chunk_end, distance,
                  stream, out);
            else
              sum_rows_vectorised<T, Weights::None, scalar_t, index_t, R>(
                  indptr, src, value_row, value, heads, x, r0, r1, K, F, chunk_end, distance,
                  stream, out);
          } else if constexpr (T > 0 && T <= 64)  // the generic tiles stop at 64 channels
            for (int64_t row = r0; row < r1; ++row) {
              if constexpr (Red::kHasArg)
                arg_row_tiled<T, scalar_t, index_t, R>(indptr, src, value, heads, x, row, K, F,
                                                       chunk_end, distance, num_edges, out, arg);
              else
                sum_row_tiled<T, scalar_t, index_t, R>(indptr, src, value_row, value, heads, x, row,
                                                       K, F, chunk_end, distance, stream, out);
            }
        });
        return;
      }
    std::vector<acc_t> acc(K);
    std::vector<int64_t> best(Red::kHasArg ? K : 0);
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t begin = indptr[row], end = indptr[row + 1];
      std::fill(acc.begin(), acc.end(), Red::init());
      std::fill(best.begin(), best.end(), num_edges);
      for (int64_t e = begin; e < end; ++e) {
        if (e + distance < chunk_end) prefetch_row(x + src(e + distance) * K, K);
        const scalar_t* __restrict__ xr = x + src(e) * K;
        for (int64_t h = 0; h < heads; ++h) {
          acc_t* __restrict__ a = acc.data() + h * F;
          const scalar_t* __restrict__ xh = xr + h * F;
          const acc_t w = value ? static_cast<acc_t>(value[value_row(e) * heads + h]) : acc_t(1);
          if constexpr (Red::kHasArg) {
            int64_t* b = best.data() + h * F;
            for (int64_t f = 0; f < F; ++f)
              Red::update(a[f], w * static_cast<acc_t>(xh[f]), b[f], e, e == begin);
          } else if constexpr (R == Reduce::Mul) {
            for (int64_t f = 0; f < F; ++f) a[f] *= w * static_cast<acc_t>(xh[f]);
          } else {
            for (int64_t f = 0; f < F; ++f) a[f] += w * static_cast<acc_t>(xh[f]);
          }
        }
      }
      scalar_t* o = out + row * K;
      for (int64_t k = 0; k < K; ++k)
        o[k] = static_cast<scalar_t>(Red::finish(acc[k], end - begin));
      if constexpr (Red::kHasArg)
        for (int64_t k = 0; k < K; ++k) arg[row * K + k] = static_cast<index_t>(best[k]);
    }
  });
}

std::tuple<at::Tensor, at::Tensor> reduce_launch(
    const at::Tensor& indptr, const c10::optional<at::Tensor>& indices,
    const c10::optional<at::Tensor>& value, const at::Tensor& x, Reduce reduce,
    const c10::optional<at::Tensor>& value_index = c10::nullopt) {
  const int64_t num_rows = indptr.numel() - 1, K = x.size(1);
  const int64_t num_edges = indices ? indices->numel() : x.size(0);
  // through value_index the values have a row per index value, not per edge
  const int64_t heads =
      value ? check_value(*value, x, value_index ? value->size(0) : num_edges) : 1;
  auto xc = x.contiguous();
  auto vc = value ? value->contiguous() : at::Tensor();
  auto ic = indices ? indices->contiguous() : at::Tensor();
  auto vic = value_index ? value_index->contiguous() : at::Tensor();
  auto out = empty_output({num_rows, K}, x.options());
  // The winning positions fit the index dtype: int32 halves their memory and traffic.
  auto arg =
      empty_output({has_arg(reduce) ? num_rows : 0, K}, x.options().dtype(indptr.scalar_type()));
  // One vectorised pass: a finite sum means no NaN or infinity, so the fast max/min loop,
  // which ignores NaN, gives the exact answer (an overflowing sum only costs speed).
  const bool finite = !has_arg(reduce) || (at::isfinite(xc.sum()).item<bool>() &&
                                           (!vc.defined() || at::isfinite(vc.sum()).item<bool>()));
  GL_DISPATCH_VALUES(x.scalar_type(), "graphloc::spmm", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      dispatch_reduce(reduce, [&](auto R) {
        const index_t* ip = indptr.data_ptr<index_t>();
        const scalar_t* v = vc.defined() ? vc.data_ptr<scalar_t>() : nullptr;
        index_t* arg_out = has_arg(reduce) ? arg.data_ptr<index_t>() : nullptr;
        constexpr Reduce kR = decltype(R)::value;
        if (ic.defined()) {
          const index_t* idx = ic.data_ptr<index_t>();
          const auto src = [idx](int64_t e) { return static_cast<int64_t>(idx[e]); };
          if constexpr (kR == Reduce::Sum)  // check_value_index: sum only
            if (vic.defined()) {
              const index_t* vi = vic.data_ptr<index_t>();
              reduce_rows<scalar_t, index_t, kR>(
                  ip, src, [vi](int64_t e) { return static_cast<int64_t>(vi[e]); }, v, heads,
                  xc.data_ptr<scalar_t>(), num_rows, K, out.data_ptr<scalar_t>(), arg_out, finite);
              return;
            }
          reduce_rows<scalar_t, index_t, kR>(ip, src, EdgeRow{}, v, heads, xc.data_ptr<scalar_t>(),
                                             num_rows, K, out.data_ptr<scalar_t>(), arg_out,
                                             finite);
        } else {
          reduce_rows<scalar_t, index_t, kR>(
              ip, [](int64_t e) { return e; }, EdgeRow{}, v, heads, xc.data_ptr<scalar_t>(),
              num_rows, K, out.data_ptr<scalar_t>(), arg_out, finite);
        }
      });
    });
  });
  return {out, arg};
}

std::tuple<at::Tensor, at::Tensor> spmm_cpu(
    const at::Tensor& indptr, const at::Tensor& indices, const c10::optional<at::Tensor>& value,
    const at::Tensor& x, c10::string_view reduce, const c10::optional<at::Tensor>& /*csc_indptr*/,
    const c10::optional<at::Tensor>& /*csc_indices*/, const c10::optional<at::Tensor>& csc_perm,
    const c10::optional<at::Tensor>& value_index, const c10::optional<at::Tensor>& csc_value) {
  check_spmm_args(indptr, indices, x, /*reducible=*/true);
  if (value_index) check_value_index(*value_index, value, indptr, indices.numel(), reduce);
  if (csc_value) check_csc_value(*csc_value, value, csc_perm, reduce);  // read by the backward only
  return reduce_launch(indptr, indices, value, x, parse_reduce(std::string(reduce)), value_index);
}

std::tuple<at::Tensor, at::Tensor> segment_reduce_cpu(const at::Tensor& src,
                                                      const at::Tensor& indptr,
                                                      c10::string_view reduce) {
  check_indptr(indptr);
  check_reducible(src, "src");
  check_csr_nnz(indptr, src.size(0), "src");
  return reduce_launch(indptr, c10::nullopt, c10::nullopt, src, parse_reduce(std::string(reduce)));
}

// Thread mapping: a thread owns a block of source rows j of the CSC and, for each entry
// (destination i, CSR position e), routes grad_out[i] to j in the channels whose winner was
// e. Each edge is visited once, so its value gradient is written without atomics.
template <typename scalar_t, typename index_t>
void arg_backward_rows(const index_t* cptr, const index_t* cidx, const index_t* cperm,
                       const scalar_t* value, int64_t heads, const scalar_t* x, const index_t* arg,
                       const scalar_t* grad, int64_t num_src, int64_t K, scalar_t* grad_x,
                       scalar_t* grad_value) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t F = K / heads;
  parallel_rows(cptr, num_src, [&](int64_t j0, int64_t j1) {
    std::vector<acc_t> acc(K);
    const int64_t chunk_end = cptr[j1];
    const int64_t distance = prefetch_distance_of<scalar_t>(K);
    for (int64_t j = j0; j < j1; ++j) {
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t c = cptr[j]; c < cptr[j + 1]; ++c) {
        if (c + distance < chunk_end) {
          const int64_t ahead = cidx[c + distance];
          prefetch_row(arg + ahead * K, K);
          prefetch_row(grad + ahead * K, K);
        }
        const int64_t i = cidx[c], e = cperm[c];
        const index_t* __restrict__ ai = arg + i * K;
        const scalar_t* __restrict__ gi = grad + i * K;
        const scalar_t* __restrict__ xj = x + j * K;
        for (int64_t h = 0; h < heads; ++h) {
          const acc_t w = value ? static_cast<acc_t>(value[e * heads + h]) : acc_t(1);
          acc_t* __restrict__ a = acc.data();
          acc_t dv = 0;
          for (int64_t f = h * F; f < (h + 1) * F; ++f) {  // branch-free: vectorises
            const acc_t g = ai[f] == e ? static_cast<acc_t>(gi[f]) : acc_t(0);
            a[f] += w * g;
            dv += g * static_cast<acc_t>(xj[f]);
          }
          if (grad_value) grad_value[e * heads + h] = static_cast<scalar_t>(dv);
        }
      }
      for (int64_t k = 0; k < K; ++k) grad_x[j * K + k] = static_cast<scalar_t>(acc[k]);
    }
  });
}

std::tuple<at::Tensor, at::Tensor> spmm_arg_backward_cpu(
    const at::Tensor& csc_indptr, const at::Tensor& csc_indices, const at::Tensor& csc_perm,
    const c10::optional<at::Tensor>& value, const at::Tensor& x, const at::Tensor& arg,
    const at::Tensor& grad_out, bool need_value_grad) {
  check_arg_backward_args(csc_indptr, csc_indices, csc_perm, x, arg, grad_out);
  const int64_t num_src = csc_indptr.numel() - 1, K = x.size(1), E = csc_perm.numel();
  check_csr_nnz(csc_indptr, E, "csc_perm");
  const int64_t heads = value ? check_value(*value, x, E) : 1;
  auto vc = value ? value->contiguous() : at::Tensor();
  auto xc = x.contiguous(), ac = arg.contiguous(), gc = grad_out.contiguous();
  auto grad_x = empty_output(xc.sizes(), xc.options());
  auto grad_value = need_value_grad && vc.defined() ? at::zeros_like(vc) : at::Tensor();
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::spmm_arg_backward", [&] {
    GL_DISPATCH_INDEX(csc_indptr.scalar_type(), [&] {
      arg_backward_rows<scalar_t, index_t>(
          csc_indptr.data_ptr<index_t>(), csc_indices.contiguous().data_ptr<index_t>(),
          csc_perm.contiguous().data_ptr<index_t>(),
          vc.defined() ? vc.data_ptr<scalar_t>() : nullptr, heads, xc.data_ptr<scalar_t>(),
          ac.data_ptr<index_t>(), gc.data_ptr<scalar_t>(), num_src, K, grad_x.data_ptr<scalar_t>(),
          grad_value.defined() ? grad_value.data_ptr<scalar_t>() : nullptr);
    });
  });
  return {grad_x, grad_value.defined() ? grad_value : at::empty({0}, x.options())};
}

// Thread mapping: a thread owns a block of rows and copies src[row] to each of its edges.
at::Tensor gather_csr_cpu(const at::Tensor& src, const at::Tensor& indptr, int64_t E) {
  check_indptr(indptr);
  check_reducible(src, "src");
  const int64_t num_rows = indptr.numel() - 1, K = src.size(1);
  TORCH_CHECK(src.size(0) == num_rows, "src has ", src.size(0), " rows but indptr describes ",
              num_rows);
  check_csr_nnz(indptr, E, "the output");
  auto sc = src.contiguous();
  auto out = empty_output({E, K}, src.options());
  GL_DISPATCH_VALUES(src.scalar_type(), "graphloc::gather_csr", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      const index_t* ip = indptr.data_ptr<index_t>();
      const scalar_t* s = sc.data_ptr<scalar_t>();
      scalar_t* o = out.data_ptr<scalar_t>();
      parallel_rows(ip, num_rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t e = ip[r]; e < ip[r + 1]; ++e)
            std::copy(s + r * K, s + (r + 1) * K, o + e * K);
      });
    });
  });
  return out;
}

// Thread mapping: a thread owns a range of output rows and copies each one's source row,
// prefetched ahead. For the narrow rows of edge tensors ([E, H] scores and weights) ATen's
// index_select and index_copy pay a per-row overhead larger than the copy: [E, 4] float32 on
// the power-law graph (2,315,598 rows) took 19 to 47 ms (2026-12-03; RESULTS.md).
at::Tensor gather_rows_cpu(const at::Tensor& src, const at::Tensor& index) {
  check_reducible(src, "src");
  check_index(index, "index");
  check_same_device(index, "index", src, "src");
  check_index_range(index, src.size(0), "index", "src");
  const int64_t n = index.numel(), K = src.size(1);
  auto sc = src.contiguous();
  auto out = empty_output({n, K}, src.options());
  if (n == 0 || K == 0) return out;
  GL_DISPATCH_VALUES(src.scalar_type(), "graphloc::gather_rows", [&] {
    GL_DISPATCH_INDEX(index.scalar_type(), [&] {
      const index_t* ix = index.data_ptr<index_t>();
      const scalar_t* s = sc.data_ptr<scalar_t>();
      scalar_t* o = out.data_ptr<scalar_t>();
      const int64_t distance = prefetch_distance_of<scalar_t>(K);
      at::parallel_for(0, n, 1 << 14, [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; ++k) {
          if (k + distance < k1) prefetch_row(s + static_cast<int64_t>(ix[k + distance]) * K, K);
          const scalar_t* row = s + static_cast<int64_t>(ix[k]) * K;
          std::copy(row, row + K, o + k * K);
        }
      });
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) {
  m.impl("spmm", &spmm_cpu);
  m.impl("segment_reduce", &segment_reduce_cpu);
  m.impl("spmm_arg_backward", &spmm_arg_backward_cpu);
  m.impl("gather_csr", &gather_csr_cpu);
  m.impl("gather_rows", &gather_rows_cpu);
}

}  // namespace graphloc
