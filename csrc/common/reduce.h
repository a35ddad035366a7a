// Reduction policies shared by the CPU and CUDA kernels: one kernel body serves every
// reduction. Plain C++ (no ATen), so the .cu files can include it under nvcc alone.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#ifdef __CUDACC__
#define GL_HD __host__ __device__ __forceinline__
#else
#define GL_HD inline
#endif

namespace graphloc {

enum class Reduce : int { Sum = 0, Mean = 1, Max = 2, Min = 3, Mul = 4 };

// The reduction a name stands for ("add" is "sum"; "amax"/"amin" are max/min, torch's
// names). False for an unknown name: the binding raises, naming it.
inline bool parse_reduce(const std::string& name, Reduce* out) {
  if (name == "sum" || name == "add")
    *out = Reduce::Sum;
  else if (name == "mean")
    *out = Reduce::Mean;
  else if (name == "max" || name == "amax")
    *out = Reduce::Max;
  else if (name == "min" || name == "amin")
    *out = Reduce::Min;
  else if (name == "mul")
    *out = Reduce::Mul;
  else
    return false;
  return true;
}

inline bool has_arg(Reduce r) { return r == Reduce::Max || r == Reduce::Min; }

// Calls f(std::integral_constant<Reduce, R>{}) so each reduction is its own instantiation.
template <typename F>
decltype(auto) dispatch_reduce(Reduce r, F&& f) {
  switch (r) {
    case Reduce::Sum:
      return f(std::integral_constant<Reduce, Reduce::Sum>{});
    case Reduce::Mean:
      return f(std::integral_constant<Reduce, Reduce::Mean>{});
    case Reduce::Max:
      return f(std::integral_constant<Reduce, Reduce::Max>{});
    case Reduce::Min:
      return f(std::integral_constant<Reduce, Reduce::Min>{});
    default:
      return f(std::integral_constant<Reduce, Reduce::Mul>{});
  }
}

// Accumulators: float for float, half and bfloat16 inputs, double for double, int64 for
// the integer types (sums wrap as torch's do when cast back; integer means truncate).
template <typename scalar_t>
struct AccType {
  using type = float;
};
template <>
struct AccType<double> {
  using type = double;
};
template <>
struct AccType<int32_t> {
  using type = int64_t;
};
template <>
struct AccType<int64_t> {
  using type = int64_t;
};

// The identity of max (lowest) and min (highest): infinities for floats, the int64 limits
// for the integer accumulators.
template <typename acc_t>
GL_HD acc_t lowest_value() {
  if constexpr (std::is_floating_point<acc_t>::value)
    return -static_cast<acc_t>(INFINITY);
  else
    return static_cast<acc_t>(INT64_MIN);
}
template <typename acc_t>
GL_HD acc_t highest_value() {
  if constexpr (std::is_floating_point<acc_t>::value)
    return static_cast<acc_t>(INFINITY);
  else
    return static_cast<acc_t>(INT64_MAX);
}

// init: the empty accumulator (Mul: only on the CPU kernels). takes / update: fold one value in,
// tracking the winning edge for max/min. finish: the value written out; empty rows give 0 for every
// reduction.
template <typename acc_t, Reduce R>
struct Reducer {
  static constexpr bool kHasArg = R == Reduce::Max || R == Reduce::Min;

  static GL_HD acc_t init() {
    if (R == Reduce::Max) return lowest_value<acc_t>();
    if (R == Reduce::Min) return highest_value<acc_t>();
    return R == Reduce::Mul ? acc_t(1) : acc_t(0);
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
      if (takes(v, acc, first)) {
        acc = v;
        arg = e;
      }
    } else if (R == Reduce::Mul) {
      acc *= v;
    } else {
      acc += v;
    }
  }
  // An empty product is 1 (torch_scatter's scatter_mul); every other empty row is 0.
  static GL_HD acc_t finish(acc_t acc, int64_t count) {
    if (count == 0) return R == Reduce::Mul ? acc_t(1) : acc_t(0);
    if (R == Reduce::Mean) return acc / static_cast<acc_t>(count);
    return acc;
  }
};

}  // namespace graphloc
