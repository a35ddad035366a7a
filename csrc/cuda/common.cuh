// Helpers shared by the .cu files: launch shapes and float conversions (CUDA headers only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace graphloc {
namespace cuda {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // warps per block, one row each
constexpr unsigned kFullMask = 0xffffffffu;

template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

inline unsigned blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

// V consecutive elements loaded and stored as one access: 16 bytes (float4, double2, eight
// bfloat16) where the row stride and the base pointer allow it, else one element (V = 1).
template <typename scalar_t, int V>
struct alignas(sizeof(scalar_t) * V) Pack {
  scalar_t v[V];
};

template <typename scalar_t, int V>
__device__ __forceinline__ Pack<scalar_t, V> load_pack(const scalar_t* p) {
  return *reinterpret_cast<const Pack<scalar_t, V>*>(p);
}

template <typename scalar_t, int V>
__device__ __forceinline__ void store_pack(scalar_t* p, const Pack<scalar_t, V>& pack) {
  *reinterpret_cast<Pack<scalar_t, V>*>(p) = pack;
}

// The widest pack for rows of K elements split into blocks of `block` elements (a head's
// channels; K for one head): 16 bytes when each block holds whole packs and the rows start
// on 16-byte boundaries, else 1.
template <typename scalar_t>
inline int pack_width(int64_t K, int64_t block, const void* const* rows, int num_rows) {
  constexpr int wide = 16 / sizeof(scalar_t);
  if (block % wide != 0 || K % wide != 0) return 1;
  for (int r = 0; r < num_rows; ++r)
    if (rows[r] && reinterpret_cast<uintptr_t>(rows[r]) % 16 != 0) return 1;
  return wide;
}

template <typename scalar_t>
using Wide = std::integral_constant<int, 16 / sizeof(scalar_t)>;
using Narrow = std::integral_constant<int, 1>;

// Calls f(width) with the pack width (Wide or Narrow) for V.
template <typename scalar_t, typename F>
void with_pack_width(int V, F&& f) {
  if (V == Wide<scalar_t>::value)
    f(Wide<scalar_t>{});
  else
    f(Narrow{});
}

// Row groups: G lanes (a power of two, 8 to 32) share one row of the CSR, so that a warp
// serves 32 / G short rows at once; lane c of a group holds packs c, c + G, ... of the row.
// The group's lanes run the same loop trips, so `mask` (its lanes alone) is what its
// shuffles name, while the other groups of the warp may be elsewhere.
struct RowGroup {
  int64_t row;
  int lane;  // in the group
  unsigned mask;
  int size;
};

__device__ __forceinline__ RowGroup row_group(int size) {
  const int warp_lane = threadIdx.x % kWarp;
  const unsigned ones = size == kWarp ? kFullMask : (1u << size) - 1;
  return {(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / size, warp_lane % size,
          ones << (warp_lane - warp_lane % size), size};
}

// The group of a row of `packs` packs: the next power of two, at least 8 lanes (the row's
// source ids are loaded G at a time) and at most a warp.
inline int group_size(int64_t packs) {
  int size = 8;
  while (size < packs && size < kWarp) size *= 2;
  return size;
}

constexpr int kGroupBlock = 256;  // threads per block of the row-group kernels

inline unsigned group_blocks(int64_t num_rows, int size) {
  return blocks_for(num_rows * size, kGroupBlock);
}

// The group's value of `v` from its lane t (a source id or edge loaded once per G edges).
template <typename T>
__device__ __forceinline__ T from_lane(const RowGroup& g, T v, int t) {
  return __shfl_sync(g.mask, v, t, g.size);
}

// Sum over aligned blocks of `span` lanes of the group (a power of two <= its size): every
// lane of a block gets its block's total. Every lane of the group must call it.
template <typename acc_t>
__device__ __forceinline__ acc_t span_sum(const RowGroup& g, acc_t v, int span) {
  for (int offset = span / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(g.mask, v, offset, g.size);
  return v;
}

// Block of kRowsPerBlock warps; grid x over row groups, y over 32-channel tiles.
inline dim3 row_channel_grid(int64_t num_rows, int64_t channels) {
  return dim3(blocks_for(num_rows, kRowsPerBlock), blocks_for(channels, kWarp));
}

}  // namespace cuda
}  // namespace graphloc

// Explicit instantiation over every (scalar, index) pair the binding dispatches to.
#define GL_INSTANTIATE_FOR_TYPES(MACRO) \
  MACRO(float, int32_t)                 \
  MACRO(float, int64_t)                 \
  MACRO(double, int32_t)                \
  MACRO(double, int64_t)                \
  MACRO(__nv_bfloat16, int32_t)         \
  MACRO(__nv_bfloat16, int64_t)
