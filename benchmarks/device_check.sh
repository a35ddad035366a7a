#!/usr/bin/env bash
# The GPU check, run on a CUDA machine from the repository root with a CUDA torch and
# torch-geometric installed: build graphloc with its CUDA kernels for Hopper (sm_90), run
# the CUDA tests (GPU against CPU kernels), the GPU benchmark with a kernel profile, then the
# whole suite (the influence benchmark on the GPU: bench_influence.py --device cuda).
# The two-process tests run there too: their CPU collectives beside CUDA (distributed.py).
# Logs go to $OUT (default ./device-out); the built extension is copied there too.
set -uo pipefail
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}  # graphloc from this checkout
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'pyg', g.__version__)"
nproc

# On the H200 image the default compiler (/opt/gcc/bin/g++, a wrapper of GCC 13.3) made
# extensions that crash formatting any TORCH_CHECK message, even a one-check extension;
# the system g++ did not (2026-12-04, RESULTS.md).
[ -x /usr/bin/g++ ] && export CXX=${CXX:-/usr/bin/g++}
if ! ls graphloc/_C*.so >/dev/null 2>&1; then
  start=$(date +%s)
  GRAPHLOC_WITH_CUDA=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=$(nproc) \
    timeout 400 $PY setup.py build_ext --inplace >"$OUT/build.log" 2>&1
  rc=$?
  echo "build rc=$rc in $(( $(date +%s) - start )) s"
  if [ $rc -ne 0 ]; then grep -B2 -A8 -m5 "error" "$OUT/build.log" | head -80; tail -30 "$OUT/build.log"; exit 1; fi
fi
cp graphloc/_C*.so "$OUT/"

# the raw kernels' error messages crashed there once (2026-11-29, in c10::str): which C++
# runtime the process loads, and those two tests alone
$PY - <<'PYEOF'
import torch, graphloc  # noqa: E401,F401
print(sorted({l.split()[-1] for l in open("/proc/self/maps") if "libstdc++" in l}))
PYEOF
g++ --version | head -1
timeout 60 $PY -m pytest -q -p no:cacheprovider tests/ops/test_convert.py::test_coo_to_csr_rejects_out_of_range \
  tests/ops/test_errors.py::test_raw_kernels_check_csr_consistency 2>&1 | tail -4
timeout ${TEST_TIMEOUT:-150} $PY -m pytest -q -p no:cacheprovider -n 4 --tb=short \
  tests/ops/test_cuda.py tests/nn/conv/test_conv_cuda.py \
  tests/test_influence.py::test_cuda_gives_the_cpu_numbers \
  tests/test_influence.py::test_processes_that_measure_different_things_are_refused_not_gathered \
  tests/test_train.py::test_processes_with_different_datasets_are_refused \
  2>&1 | tee "$OUT/test_cuda.log" | grep -v "^\[gw" | tail -40
# ops (with the spmm width sweep and a profile of the main steps), then the layers
timeout ${BENCH_TIMEOUT:-300} $PY benchmarks/bench_gpu.py --profile --write "$OUT/gpu_results.md" \
  2>&1 | tee "$OUT/bench_gpu.log" | grep -v "^  |"
timeout ${SUITE_TIMEOUT:-100} $PY -m pytest -q -p no:cacheprovider -n 8 tests 2>&1 \
  | tee "$OUT/suite.log" | tail -15
