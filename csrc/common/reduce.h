// Reduction policies shared by the CPU and CUDA kernels: one kernel body serves every
// reduction. Plain C++ (no ATen), so the .cu files can include it under nvcc alone.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define GL_HD __host__ __device__ __forceinline__
#else
#define GL_HD inline
#endif

namespace graphloc {

enum class Reduce : int { Sum = 0, Mean = 1, Max = 2, Min = 3 };

// Accumulators: float for float and bfloat16 inputs, double for double.
template <typename scalar_t> struct AccType { using type = float; };
template <> struct AccType<double> { using type = double; };

// init: the empty accumulator. takes / update: fold one value in, tracking the winning edge
// for max/min. finish: the value written out; empty rows give 0 for every reduction.
template <typename acc_t, Reduce R> struct Reducer {
  static constexpr bool kHasArg = R == Reduce::Max || R == Reduce::Min;

  static GL_HD acc_t init() {
    if (R == Reduce::Max) return -static_cast<acc_t>(INFINITY);
    if (R == Reduce::Min) return static_cast<acc_t>(INFINITY);
    return acc_t(0);
  }
  // Whether v replaces the running extreme acc (max/min). The row's first value always does,
  // so a row of -inf (max) still names an edge for the gradient. As torch.amax and argmax: a
  // NaN beats every number and the first NaN stays. Otherwise strictly better only, so ties
  // go to the lowest CSR position (deterministic).
  static GL_HD bool takes(acc_t v, acc_t acc, bool first) {
    // !(v <= acc): v is larger or either is NaN; acc == acc: no NaN has won yet.
    const bool unordered_better = R == Reduce::Max ? !(v <= acc) : !(v >= acc);
    return first | (unordered_better & (acc == acc));
  }
  static GL_HD void update(acc_t& acc, acc_t v, int64_t& arg, int64_t e, bool first) {
    if (kHasArg) {
      if (takes(v, acc, first)) { acc = v; arg = e; }
    } else {
      acc += v;
    }
  }
  static GL_HD acc_t finish(acc_t acc, int64_t count) {
    if (count == 0) return acc_t(0);
    if (R == Reduce::Mean) return acc / static_cast<acc_t>(count);
    return acc;
  }
};

}  // namespace graphloc
