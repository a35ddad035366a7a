"""Builds the extension graphloc._C; all other metadata lives in pyproject.toml.

Switches (environment variables):
  GRAPHLOC_WITH_CUDA=auto|0|1  CUDA kernels: auto builds them when torch has CUDA and nvcc exists.
  GRAPHLOC_CPU_ARCH=native     value for -march (set to e.g. x86-64-v2 for a portable build).
  GRAPHLOC_DEBUG=1             -O0 -g, for gdb.
"""

import glob
import os

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


def extension():
    debug = os.environ.get("GRAPHLOC_DEBUG") == "1"
    opt = ["-O0", "-g"] if debug else ["-O3"]
    cxx = [*opt, "-std=c++20", f"-march={os.environ.get('GRAPHLOC_CPU_ARCH', 'native')}",
           *abi_flags()]
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
    nvcc = [*opt, "-std=c++20", "--expt-relaxed-constexpr", "-lineinfo", *NVCC_CONVERSIONS,
            *abi_flags()]
    cxx.append("-DGRAPHLOC_WITH_CUDA")
    return CUDAExtension(sources=sources, extra_compile_args={"cxx": cxx, "nvcc": nvcc}, **kwargs)


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
