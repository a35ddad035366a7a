"""The vectorisable exp and log of csrc/cpu/fast_exp.h against float64 std::exp and
std::log, over a sweep of float bit patterns and the special values: a small C++ program
compiled with the machine's g++ (the extension's own compiler) and run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "csrc"

PROGRAM = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include "cpu/fast_exp.h"

static float from_bits(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
// floats as integers in their order, so that the distance between two is their ulps apart
static int64_t ordered(float f) {
  int32_t b;
  std::memcpy(&b, &f, 4);
  return b < 0 ? -static_cast<int64_t>(b & 0x7fffffff) : b;
}

int main() {
  // log over every 61st positive finite float (subnormals included): the largest distance
  // in ulps from the correctly rounded float64 log
  int64_t worst_log = 0;
  float worst_log_at = 0;
  for (uint64_t b = 1; b < 0x7f800000u; b += 61) {
    const float x = from_bits(static_cast<uint32_t>(b));
    const float want = static_cast<float>(std::log(static_cast<double>(x)));
    const int64_t d = std::llabs(ordered(graphloc::log_vec(x)) - ordered(want));
    if (d > worst_log) { worst_log = d; worst_log_at = x; }
  }
  // exp's relative error over [-87.3, 88.7]
  double worst_exp = 0;
  for (float x = -87.3f; x < 88.7f; x += 0.000731f) {
    const double want = std::exp(static_cast<double>(x));
    worst_exp = std::fmax(worst_exp, std::fabs(graphloc::exp_vec(x) - want) / want);
  }
  // below it, down to -150 ln 2: subnormal results, in steps of 2^-149 from the float64 exp
  double worst_subnormal = 0;
  for (float x = -103.97f; x < -87.3f; x += 0.000131f) {
    const double want = std::exp(static_cast<double>(x));
    worst_subnormal = std::fmax(worst_subnormal, std::fabs(graphloc::exp_vec(x) - want));
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::printf("%lld %.9g %.3g\n", (long long)worst_log, worst_log_at, worst_exp);
  std::printf("%g %g %g %g %g %g\n", graphloc::log_vec(0.0f), graphloc::log_vec(-0.0f),
              graphloc::log_vec(inf), graphloc::log_vec(-1.0f), graphloc::log_vec(-inf),
              graphloc::log_vec(std::nanf("")));
  std::printf("%g %g %g %g\n", graphloc::exp_vec(-inf), graphloc::exp_vec(-104.0f),
              graphloc::exp_vec(0.0f), graphloc::exp_vec(std::nanf("")));
  std::printf("%.9g %.9g\n", worst_subnormal * std::ldexp(1.0, 149),
              graphloc::exp_vec(-100.0f) * std::ldexp(1.0, 149));
  return 0;
}
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> list[list[str]]:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++ on this machine")
    folder = tmp_path_factory.mktemp("fast_math")
    source, binary = folder / "check.cpp", folder / "check"
    source.write_text(PROGRAM)
    subprocess.run([compiler, "-O2", "-std=c++17", f"-I{CSRC}", str(source), "-o", str(binary)],
                   check=True)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines()]


def test_log_is_within_two_ulp_of_float64_log(report):
    worst_ulps, worst_at, _ = report[0]
    assert int(worst_ulps) <= 2, f"log_vec is {worst_ulps} ulp off at {worst_at}"


def test_log_special_values_follow_std_log(report):
    unsigned_nan = [v.lstrip("-") if "nan" in v else v for v in report[1]]
    assert unsigned_nan == ["-inf", "-inf", "inf", "nan", "nan", "nan"]


def test_exp_relative_error_as_documented(report):
    assert float(report[0][2]) < 2e-7


def test_exp_special_values(report):
    assert report[2][:3] == ["0", "0", "1"] and report[2][3].lstrip("-") == "nan"


def test_exp_gives_subnormals_as_float64_exp_rounded(report):
    """Between -150 ln 2 and the smallest normal result, within one subnormal step
    (2^-149) of float64's exp; exp(-100) = 3.72e-44 is 26.6 such steps, not 0."""
    worst_steps, at_minus_100 = (float(v) for v in report[3])
    assert worst_steps <= 1.0
    assert at_minus_100 == pytest.approx(26.55, abs=1.0)
