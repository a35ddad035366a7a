// exp and log in forms the compiler vectorises, for the softmax kernels (std::exp and
// std::log are scalar calls).
// exp, float: range reduction by ln 2 and a degree-6 Cephes polynomial, relative error below
// 2e-7 on [-87.3, 88.7] (tested against float64); subnormal results below that down to
// -150 ln 2, within one subnormal step of the float64 exp (torch's exp gives them too: a
// weight flushed to 0 turned an infinite feature's product into NaN where torch's is
// infinite); 0 below (exp(-inf) = 0), +inf above, NaN kept. double: std::exp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace graphloc {

// The int32 lanes of n (whole numbers in float lanes): a float, or a GCC vector of floats.
inline int32_t whole_lanes(float n) { return static_cast<int32_t>(n); }
template <typename V>
inline auto whole_lanes(V n) {
  typedef int32_t I __attribute__((vector_size(sizeof(V))));
  return __builtin_convertvector(n, I);
}

// 2^k for k in [-126, 127] (lane by lane), from its bits.
template <typename F, typename I>
inline F power_of_two(I k) {
  const I bits = (k + 127) << 23;
  F out;
  static_assert(sizeof out == sizeof bits);
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// exp_vec's steps on F, a float or a GCC vector of floats (exp_lanes): the same operations
// on every lane, so both give the same values.
template <typename F>
inline F exp_steps(F x) {
  // lo = -150 ln 2: n >= -150 below, whose 2^n1 * 2^n2 rounds once, in the last product
  const float lo = -103.97208f, hi = 88.72283f;
  const auto nan = x != x;
  const F v = nan ? F{} : (x < lo ? F{} + lo : (x > hi ? F{} + hi : x));
  // n = round(v / ln 2) by the 1.5 * 2^23 shift (exact for |v / ln 2| < 2^22): std::floor
  // here kept GCC 12 from vectorising any loop that calls exp_vec
  constexpr float kShift = 12582912.0f;
  const F n = (v * 1.44269504088896341f + kShift) - kShift;
  const F r = v - n * 0.693359375f + n * 2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  // 2^n as 2^n1 * 2^n2, each a normal float for n in [-150, 128] (neither 2^-150 nor
  // 2^128 is one alone)
  const auto whole = whole_lanes(n);
  const auto n1 = whole >> 1, n2 = whole - n1;
  const F y = (p * r * r + r + 1.0f) * power_of_two<F>(n1) * power_of_two<F>(n2);
  const F above = F{} + std::numeric_limits<float>::infinity();
  return nan ? x : (x < lo ? F{} : (x > hi ? above : y));
}

inline float exp_vec(float x) { return exp_steps(x); }

inline double exp_vec(double x) { return std::exp(x); }

// exp_vec lane by lane on a GCC vector (vec.h), the same steps on every lane: a few heads'
// weights of one edge at a time, where a vectorised loop over a short row's values runs
// almost only its scalar remainder (GAT's forward on the road graph: 4 heads x degree ~4;
// per edge, 4 lanes took the kernel 0.6x the time of a per-row loop of exp_vec).
template <typename V>
inline V exp_lanes(V x) {
  using A = std::remove_cv_t<std::remove_reference_t<decltype(x[0])>>;
  if constexpr (std::is_same_v<A, float>) {
    return exp_steps(x);
  } else {
    V out;
    for (int k = 0; k < static_cast<int>(sizeof(V) / sizeof(A)); ++k) out[k] = exp_vec(x[k]);
    return out;
  }
}

// log, float: x = 2^e * m with m in [sqrt(1/2), sqrt(2)) read off the bits (subnormals scaled
// up by 2^23 first), log(m) = log(1 + z) by Cephes' degree-8 polynomial in z = m - 1, plus
// e * ln 2 in two parts; error within 2 ulp of std::log (tested against float64). As
// std::log: log(0) = -inf, log(+inf) = +inf, NaN for x < 0 and NaN kept. double: std::log.
inline float log_vec(float x) {
  const bool subnormal = x < 1.17549435e-38f;  // (and 0, negatives: replaced below)
  const float scaled = subnormal ? x * 8388608.0f : x;
  int32_t bits;
  std::memcpy(&bits, &scaled, sizeof bits);
  int32_t e = ((bits >> 23) & 0xff) - (subnormal ? 127 + 23 : 127);
  const int32_t mantissa_bits = (bits & 0x007fffff) | 0x3f800000;  // m in [1, 2)
  float m;
  std::memcpy(&m, &mantissa_bits, sizeof m);
  const bool above = m > 1.41421356f;
  m = above ? m * 0.5f : m;
  e = above ? e + 1 : e;
  const float z = m - 1.0f, z2 = z * z, fe = static_cast<float>(e);
  float p = 7.0376836292e-2f;
  p = p * z - 1.1514610310e-1f;
  p = p * z + 1.1676998740e-1f;
  p = p * z - 1.2420140846e-1f;
  p = p * z + 1.4249322787e-1f;
  p = p * z - 1.6668057665e-1f;
  p = p * z + 2.0000714765e-1f;
  p = p * z - 2.4999993993e-1f;
  p = p * z + 3.3333331174e-1f;
  const float y = z + (p * z * z2 + fe * -2.12194440e-4f - 0.5f * z2) + fe * 0.693359375f;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // selects only, no && (a jump keeps GCC from vectorising the caller's loop)
  const float special = x == 0.0f ? -inf : (x < 0.0f ? nan : x);  // NaN and +inf: x itself
  const bool finite_positive = (x > 0.0f) & (x < inf);
  return finite_positive ? y : special;
}

inline double log_vec(double x) { return std::log(x); }

// v[k] = exp(v[k]) for n consecutive values.
template <typename acc_t>
inline void exp_in_place(acc_t* v, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) v[k] = exp_vec(v[k]);
}

}  // namespace graphloc
