// Helpers shared by the .cu files: launch shapes and float conversions (CUDA headers only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

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
