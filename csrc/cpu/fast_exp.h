// exp in a form the compiler vectorises, for the softmax kernels (std::exp is a scalar call).
// float: range reduction by ln 2 and a degree-6 Cephes polynomial, relative error below
// 2e-7 on [-87.3, 88.7], 0 below that range (exp(-inf) = 0), NaN kept. double: std::exp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace graphloc {

inline float exp_vec(float x) {
  const float lo = -87.33654f, hi = 88.72283f;
  const bool nan = x != x;
  const float v = nan ? 0.0f : (x < lo ? lo : (x > hi ? hi : x));
  const float n = std::floor(v * 1.44269504088896341f + 0.5f);
  const float r = v - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float y = (p * r * r + r + 1.0f) * scale;
  return nan ? x : (x < lo ? 0.0f : y);
}

inline double exp_vec(double x) { return std::exp(x); }

// out[k] = exp(in[k] - shift[k % H]) for the H heads of `rows` consecutive edges.
template <typename acc_t, typename scalar_t>
inline void shifted_exp(const scalar_t* in, const acc_t* shift, int64_t rows, int64_t H,
                        acc_t* out) {
  for (int64_t e = 0; e < rows; ++e)
    for (int64_t h = 0; h < H; ++h) out[e * H + h] = static_cast<acc_t>(in[e * H + h]) - shift[h];
#pragma omp simd
  for (int64_t k = 0; k < rows * H; ++k) out[k] = exp_vec(out[k]);
}

}  // namespace graphloc
