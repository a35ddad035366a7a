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

// A counter-based random stream: draw k is mix(state + k), so a stream is fixed by its start
// alone and any thread draws the same numbers (the samplers give each node or walk its own).
struct Stream {
  uint64_t state;
  uint64_t next() { return mix(state++); }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // in [0, 1)
};

}  // namespace graphloc
