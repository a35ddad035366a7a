"""Builds the extension graphloc._C; all other metadata lives in pyproject.toml.

Switches (environment variables):
  GRAPHLOC_BUILD_EXT=1|0       0: no extension; graphloc then runs its pure-torch reference ops.
  GRAPHLOC_WITH_CUDA=auto|0|1  CUDA kernels: auto builds them when torch has CUDA and nvcc exists.
  GRAPHLOC_CPU_ARCH=...        value for -march; default native for a local or editable build,
                               a portable baseline (x86-64-v2, armv8-a) for a wheel.
  GRAPHLOC_DEBUG=1             -O0 -g, for gdb.

A build that cannot compile the extension (no compiler, say) still installs graphloc, with
a warning: the reference ops give the same results, slower.
"""

import glob
import os
import platform
import sys
import warnings

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension


def with_cuda() -> bool:
    mode = os.environ.get("GRAPHLOC_WITH_CUDA", "auto")
    if mode not in ("auto", "0", "1"):
        raise ValueError(f"GRAPHLOC_WITH_CUDA must be auto, 0 or 1, got {mode!r}")
    available = torch.version.cuda is not None and CUDA_HOME is not None
    if mode == "1" and not available:
        raise RuntimeError("GRAPHLOC_WITH_CUDA=1 but torch has no CUDA or nvcc was not found")
    return mode == "1" or (mode == "auto" and available)


# torch's nvcc flags (COMMON_NVCC_FLAGS) switch off the implicit half/bfloat16 conversions
# and operators; the kernels convert through static_cast to float accumulators, so turn
# them back on. The Makefile's cuda-check compiles with the same pair of flag sets.
NVCC_CONVERSIONS = ["-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"]


def abi_flags() -> list[str]:
    """torch's own std::string / std::list ABI. The kernels pass std::strings to torch (every
    TORCH_CHECK message goes through c10::detail::torchCheckFail(..., const std::string&)):
    built with the other ABI, the extension runs until its first error message, then
    crashes formatting it. Recent torch.utils.cpp_extension no longer passes this flag, so
    it is passed here, from torch itself."""
    return [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}"]


def cpu_arch() -> list[str]:
    """-march: the environment's; else native for an editable or in-place build (it runs
    where it is built), and a portable baseline for a wheel, which may run elsewhere
    (``pip install .`` builds a wheel too, so it gets the baseline)."""
    chosen = os.environ.get("GRAPHLOC_CPU_ARCH")
    if chosen:
        return [f"-march={chosen}"]
    if "bdist_wheel" not in sys.argv:
        return ["-march=native"]
    portable = {"x86_64": "x86-64-v2", "amd64": "x86-64-v2", "aarch64": "armv8-a",
                "arm64": "armv8-a"}.get(platform.machine().lower())
    return [f"-march={portable}"] if portable else []


def extension():
    debug = os.environ.get("GRAPHLOC_DEBUG") == "1"
    opt = ["-O0", "-g"] if debug else ["-O3"]
    # no FP contraction: a fused multiply-add keeps a product exact where torch rounds it
    # (an overflowing product beside -inf gave -inf, torch NaN), and GCC fused differently
    # per inlining site (int32 and int64 index kernels differed in the last bit on an AMD
    # EPYC); the gather kernels are bound by memory, not by these multiplies (RESULTS.md)
    cxx = [*opt, "-std=c++20", "-ffp-contract=off", *cpu_arch(), *abi_flags()]
    if torch.backends.openmp.is_available():
        cxx.append("-fopenmp")  # ATen's parallel_for is OpenMP-backed in this torch build
    sources = ["csrc/graphloc.cpp", *sorted(glob.glob("csrc/cpu/*.cpp"))]
    kwargs = dict(
        name="graphloc._C",
        include_dirs=[os.path.abspath("csrc")],
        extra_link_args=["-fopenmp"] if torch.backends.openmp.is_available() else [],
        py_limited_api=True,
    )
    if not with_cuda():
        return CppExtension(sources=sources, extra_compile_args={"cxx": cxx}, **kwargs)
    sources += sorted(glob.glob("csrc/cuda/*.cu")) + sorted(glob.glob("csrc/cuda/*.cpp"))
    # --fmad=false for the CUDA kernels, as -ffp-contract=off above: nvcc contracts a * b + c
    # into an FMA by default, which gave -inf where torch (and the CPU kernels) give NaN
    nvcc = [*opt, "-std=c++20", "--expt-relaxed-constexpr", "-lineinfo", "--fmad=false",
            *NVCC_CONVERSIONS, *abi_flags()]
    cxx.append("-DGRAPHLOC_WITH_CUDA")
    return CUDAExtension(sources=sources, extra_compile_args={"cxx": cxx, "nvcc": nvcc}, **kwargs)


class OptionalBuildExtension(BuildExtension):
    """Builds graphloc._C, or warns and goes on without it when compiling fails."""

    def run(self):
        try:
            super().run()
        except Exception as err:  # CompileError, a missing compiler, ninja failing
            warnings.warn(f"graphloc._C could not be built ({type(err).__name__}: {err}); "
                          "graphloc installs without it and runs its pure-torch reference "
                          "ops (same results, slower)", stacklevel=1)


BUILD_EXT = os.environ.get("GRAPHLOC_BUILD_EXT", "1")
if BUILD_EXT not in ("0", "1"):
    raise ValueError(f"GRAPHLOC_BUILD_EXT must be 0 or 1, got {BUILD_EXT!r}")

setup(
    ext_modules=[extension()] if BUILD_EXT == "1" else [],
    cmdclass={"build_ext": OptionalBuildExtension.with_options(use_ninja=True)},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
