// Edge-wise operations of sddmm, shared by the CPU and CUDA kernels (plain C++).
#pragma once

#include <string>

namespace graphloc {

// dot: per-head inner product of source and destination rows -> [E, heads].
// add / mul: channel-wise sum or product -> [E, K].
enum class EdgeOp : int { Dot = 0, Add = 1, Mul = 2 };

}  // namespace graphloc
