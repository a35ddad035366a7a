// Softmax numerators of many short rows at once, for the CPU softmax and attention kernels:
// rows go in blocks, each row's scores are shifted by their max per head, and one vectorised
// exp runs over the whole block (a row of a road graph, 4 heads x degree ~4, alone would run
// almost only the scalar remainder of a vector loop).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/fast_exp.h"
#include "cpu/rows.h"
#include "cpu/vec.h"

namespace graphloc {

// Per-head running values live in registers for the usual head counts (HT = H), not in
// memory that the row's scores might alias; HT = 0 for any other H.
template <typename F>
inline void with_heads(int64_t H, F&& body) {
  with_constant<1, 2, 4, 8>(H, body);
}

// Per-head running values over a row [degree, HT] (HT > 0) go in kLanes lanes, lane l
// holding head l % HT (kLanes is a multiple of every compile-time head count), so that a long
// row runs whole vectors instead of HT scalar chains; the lanes are folded per head at the end.
constexpr int kLanes = 16;

template <int HT, typename acc_t, typename Step>
inline void fold_lanes(const acc_t* __restrict__ row, int64_t degree, acc_t init, Step step,
                       acc_t* __restrict__ out) {
  static_assert(HT > 0 && kLanes % HT == 0);
  const int64_t n = degree * HT, full = n / kLanes * kLanes;
  acc_t lane[kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] = init;
  for (int64_t q0 = 0; q0 < full; q0 += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = step(lane[l], row[q0 + l]);
  for (int64_t q = full; q < n; ++q) lane[q - full] = step(lane[q - full], row[q]);
  for (int h = 0; h < HT; ++h) {
    acc_t v = lane[h];
    for (int l = h + HT; l < kLanes; l += HT) v = step(v, lane[l]);
    out[h] = v;
  }
}

// A short row (at most kShortRow values, degree * HT, HT > 1) runs one [HT] vector per
// edge: on a road graph's rows (4 heads x degree ~4) fold_lanes runs only its scalar
// remainder and fold, about 40 scalar steps per row.
constexpr int64_t kShortRow = 2 * kLanes;

// Edges in row_sums' fixed window: a row that short, with that many edges readable from its
// start, is summed in a loop of this many steps whatever its degree.
constexpr int64_t kWindowEdges = 8;

template <int HT, typename acc_t>
constexpr bool short_row_vectors() {
  return HT > 1 && std::is_floating_point_v<acc_t>;
}

template <int HT, typename acc_t>
using HeadVec = typename Vec<acc_t, HT>::type;

// A row's scores [degree, HT] shifted by m, its running max per head (lanes still at -inf:
// a fully masked head, shifted by 0), which is written to m_out. Shared by shift_by_row_max
// and the kernels that take the max on their own way through the row.
template <int HT, typename acc_t>
__attribute__((always_inline)) inline void shift_row_by_max(acc_t* __restrict__ row, int64_t degree,
                                                            HeadVec<HT, acc_t> m,
                                                            acc_t* __restrict__ m_out) {
  m = m == -std::numeric_limits<acc_t>::infinity() ? HeadVec<HT, acc_t>{} : m;
  for (int64_t e = 0; e < degree; ++e)
    store_vec<acc_t, HT>(row + e * HT, load_vec<acc_t, HT>(row + e * HT) - m);
  store_vec<acc_t, HT>(m_out, m);
}

// Per head of a row's scores [degree, H]: m = the max (NaN never wins, as in the reference;
// a head of only -inf, masked, shifts by 0, so its weights are exp(-inf) = 0 and it
// aggregates to 0 as an empty row; NaN or +inf scores give a NaN row), then scores -= m.
template <int HT, typename acc_t>
inline void shift_by_row_max(acc_t* __restrict__ row, int64_t degree, int64_t H,
                             acc_t* __restrict__ m_out) {
  constexpr acc_t kNegInf = -std::numeric_limits<acc_t>::infinity();
  const auto larger = [](acc_t m, acc_t v) { return v > m ? v : m; };
  if constexpr (short_row_vectors<HT, acc_t>()) {
    if (degree * HT <= kShortRow) {
      using V = HeadVec<HT, acc_t>;
      V m = V{} + kNegInf;
      for (int64_t e = 0; e < degree; ++e) {
        const V v = load_vec<acc_t, HT>(row + e * HT);
        m = v > m ? v : m;  // lane-wise, NaN never wins as in `larger`
      }
      shift_row_by_max<HT>(row, degree, m, m_out);
      return;
    }
  }
  if constexpr (HT > 0) {
    acc_t m[HT], pattern[kLanes];
    fold_lanes<HT>(row, degree, kNegInf, larger, m);
    for (int h = 0; h < HT; ++h) m[h] = m[h] == kNegInf ? acc_t(0) : m[h];
    for (int l = 0; l < kLanes; ++l) pattern[l] = m[l % HT];
    const int64_t n = degree * HT, full = n / kLanes * kLanes;
    for (int64_t q0 = 0; q0 < full; q0 += kLanes)
      for (int l = 0; l < kLanes; ++l) row[q0 + l] -= pattern[l];
    for (int64_t q = full; q < n; ++q) row[q] -= pattern[q - full];
    for (int h = 0; h < HT; ++h) m_out[h] = m[h];
  } else {
    for (int64_t h = 0; h < H; ++h) m_out[h] = kNegInf;
    for (int64_t e = 0; e < degree; ++e)
      for (int64_t h = 0; h < H; ++h) m_out[h] = larger(m_out[h], row[e * H + h]);
    for (int64_t h = 0; h < H; ++h) m_out[h] = m_out[h] == kNegInf ? acc_t(0) : m_out[h];
    for (int64_t e = 0; e < degree; ++e)
      for (int64_t h = 0; h < H; ++h) row[e * H + h] -= m_out[h];
  }
}

// Per head of a row's weights [degree, H]: their sum. Always inlined: on short rows a call
// cost more than the sum (d a_dst's pass over GAT's road-graph rows). `readable`: how many
// edges' values may be read from `row` on (the row's own and those after it in the buffer).
// With kWindowEdges of them, a row of at most that many edges is summed over the whole
// window, the edges past its end selected away: a loop whose length does not depend on the
// degree. (GAT's d a_dst pass on the road graph, rows of a few edges each in no order of
// length, ran 2% to 4% of the whole backward longer with the degree-dependent exit.) The
// same adds in the same order as the plain loop, plus zeros: the same sums bit for bit.
template <int HT, typename acc_t>
__attribute__((always_inline)) inline void row_sums(const acc_t* __restrict__ row, int64_t degree,
                                                    int64_t H, acc_t* __restrict__ s_out,
                                                    int64_t readable = 0) {
  const auto plus = [](acc_t a, acc_t b) { return a + b; };
  if constexpr (short_row_vectors<HT, acc_t>()) {
    if (degree <= kWindowEdges && readable >= kWindowEdges) {
      using V = HeadVec<HT, acc_t>;
      V sum = {};
      const acc_t edges = static_cast<acc_t>(degree);
#pragma GCC unroll 8
      for (int e = 0; e < kWindowEdges; ++e) {
        const V v = load_vec<acc_t, HT>(row + e * HT);
        // a lane-wise select (a scalar condition compiles to the jump this avoids): a NaN
        // past the row's end never enters the sum
        sum += V{} + static_cast<acc_t>(e) < edges ? v : V{};
      }
      for (int h = 0; h < HT; ++h) s_out[h] = sum[h];
      return;
    }
    if (degree * HT <= kShortRow) {
      HeadVec<HT, acc_t> sum = {};
      for (int64_t e = 0; e < degree; ++e) sum += load_vec<acc_t, HT>(row + e * HT);
      for (int h = 0; h < HT; ++h) s_out[h] = sum[h];
      return;
    }
  }
  if constexpr (HT > 0) {
    fold_lanes<HT>(row, degree, acc_t(0), plus, s_out);
  } else {
    for (int64_t h = 0; h < H; ++h) s_out[h] = acc_t(0);
    for (int64_t e = 0; e < degree; ++e)
      for (int64_t h = 0; h < H; ++h) s_out[h] += row[e * H + h];
  }
}

// A block holds at most kBlockEdges edges and kBlockRows rows (a longer row is a block alone).
constexpr int64_t kBlockEdges = 256, kBlockRows = 128;

// Calls body(b0, b1) for consecutive blocks of the rows [r0, r1).
template <typename index_t, typename F>
inline void for_row_blocks(const index_t* indptr, int64_t r0, int64_t r1, F&& body) {
  for (int64_t b0 = r0, b1; b0 < r1; b0 = b1) {
    b1 = b0 + 1;
    while (b1 < r1 && b1 - b0 < kBlockRows && indptr[b1 + 1] - indptr[b0] <= kBlockEdges) ++b1;
    body(b0, b1);
  }
}

// For the rows [b0, b1): p = exp(score - m) per row and head (p[(e - indptr[b0]) * H + h]),
// with m each row's max (m[(i - b0) * H + h]). `scores(p, m)` writes the block's scores
// [edges, H] into p in the accumulation type, and returns true where it has also shifted
// them by their row maxima into m itself (as shift_by_row_max does) on the way, false where
// that is left to here. The buffers grow to the block's size.
template <typename index_t, typename acc_t, typename Scores>
inline void block_softmax_numerators_of(const index_t* indptr, int64_t b0, int64_t b1, int64_t H,
                                        Scores&& scores, std::vector<acc_t>& p,
                                        std::vector<acc_t>& m) {
  const int64_t e0 = indptr[b0], n = (indptr[b1] - e0) * H;
  if (static_cast<int64_t>(p.size()) < n) p.resize(n);
  if (static_cast<int64_t>(m.size()) < (b1 - b0) * H) m.resize((b1 - b0) * H);
  if (!scores(p.data(), m.data()))
    with_heads(H, [&](auto heads) {
      for (int64_t i = b0; i < b1; ++i)
        shift_by_row_max<decltype(heads)::value>(
            p.data() + (indptr[i] - e0) * H, indptr[i + 1] - indptr[i], H, m.data() + (i - b0) * H);
    });
  exp_in_place(p.data(), n);
}

// row[e, h] *= s[h] over a row's weights [degree, H], and by sign[e, h] where a sign row is
// given (the same layout): one [HT] vector per edge when the head count is known at compile
// time (HT > 1), GCC left the run-time loop scalar.
template <int HT, typename acc_t>
inline void scale_heads(acc_t* row, int64_t degree, int64_t H, const acc_t* s,
                        const acc_t* sign = nullptr) {
  if constexpr (short_row_vectors<HT, acc_t>()) {
    const HeadVec<HT, acc_t> scale = load_vec<acc_t, HT>(s);
    for (int64_t e = 0; e < degree; ++e) {
      const auto v = load_vec<acc_t, HT>(row + e * HT) * scale;
      store_vec<acc_t, HT>(row + e * HT, sign ? v * load_vec<acc_t, HT>(sign + e * HT) : v);
    }
  } else {
    for (int64_t e = 0; e < degree; ++e)
      for (int64_t h = 0; h < H; ++h) row[e * H + h] *= sign ? s[h] * sign[e * H + h] : s[h];
  }
}

// The numerators p of the rows [b0, b1) (exp of their shifted scores) divided by their
// row's sum per head: the softmax weights, as torch.softmax computes them. A sum of 0 (an
// empty row, or a head of only -inf) leaves its weights 0; a NaN sum makes them NaN. `s`
// holds H values. With `sign` (the block's layout), each weight also takes its sign (+-1).
template <typename index_t, typename acc_t>
inline void normalise_block_rows(const index_t* indptr, int64_t b0, int64_t b1, int64_t H, acc_t* p,
                                 acc_t* s, const acc_t* sign = nullptr) {
  const int64_t e0 = indptr[b0];
  with_heads(H, [&](auto heads) {
    constexpr int HT = decltype(heads)::value;
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t degree = indptr[i + 1] - indptr[i], offset = (indptr[i] - e0) * H;
      // the block's later rows may be read past this one's end (row_sums' fixed window)
      row_sums<HT>(p + offset, degree, H, s, indptr[b1] - indptr[i]);
      for (int64_t h = 0; h < H; ++h) s[h] = s[h] == acc_t(0) ? acc_t(0) : 1 / s[h];
      scale_heads<HT>(p + offset, degree, H, s, sign ? sign + offset : nullptr);
    }
  });
}

// block_softmax_numerators_of for scores read from `score` (the block's first edge).
template <typename scalar_t, typename index_t, typename acc_t>
inline void block_softmax_numerators(const index_t* indptr, int64_t b0, int64_t b1, int64_t H,
                                     const scalar_t* score, std::vector<acc_t>& p,
                                     std::vector<acc_t>& m) {
  const int64_t n = (indptr[b1] - indptr[b0]) * H;
  block_softmax_numerators_of(
      indptr, b0, b1, H,
      [&](acc_t* out, acc_t*) {
        for (int64_t k = 0; k < n; ++k) out[k] = static_cast<acc_t>(score[k]);
        return false;
      },
      p, m);
}

}  // namespace graphloc
