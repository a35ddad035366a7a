// SplitMix64's step and finaliser: 64 well-mixed bits from any 64-bit counter, so the
// random kernels (sampling, dropout) need no shared generator state and give the same draws
// on any thread count. graphloc/ops/reference.py computes the same bits.
#pragma once

#include <cstdint>

namespace graphloc {

// SplitMix64's increment, the golden ratio in 64 bits.
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

inline uint64_t mix(uint64_t z) {
  z += kGolden;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace graphloc
