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
  // n = round(v / ln 2) by the 1.5 * 2^23 shift (exact for |v / ln 2| < 2^22): std::floor
  // here kept GCC 12 from vectorising any loop that calls exp_vec
  constexpr float kShift = 12582912.0f;
  const float n = (v * 1.44269504088896341f + kShift) - kShift;
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

// v[k] = exp(v[k]) for n consecutive values.
template <typename acc_t>
inline void exp_in_place(acc_t* v, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) v[k] = exp_vec(v[k]);
}

}  // namespace graphloc
