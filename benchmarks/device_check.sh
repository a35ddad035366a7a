#!/usr/bin/env bash
# The GPU check, run on a CUDA machine from the repository root with a CUDA torch and
# torch-geometric installed: build graphloc with its CUDA kernels for Hopper (sm_90), run
# the CUDA tests (GPU against CPU kernels), the GPU benchmark, then the whole suite.
# Logs go to $OUT (default ./device-out); the built extension is copied there too.
set -uo pipefail
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}  # graphloc from this checkout
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'pyg', g.__version__)"
nproc

if ! ls graphloc/_C*.so >/dev/null 2>&1; then
  start=$(date +%s)
  GRAPHLOC_WITH_CUDA=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=$(nproc) \
    timeout 400 $PY setup.py build_ext --inplace >"$OUT/build.log" 2>&1
  rc=$?
  echo "build rc=$rc in $(( $(date +%s) - start )) s"
  if [ $rc -ne 0 ]; then grep -B2 -A8 -m5 "error" "$OUT/build.log" | head -80; tail -30 "$OUT/build.log"; exit 1; fi
fi
cp graphloc/_C*.so "$OUT/"

timeout 200 $PY -m pytest -q -x -p no:cacheprovider tests/ops/test_cuda.py tests/nn/conv/test_conv_cuda.py \
  tests/test_influence.py::test_cuda_gives_the_cpu_numbers \
  2>&1 | tee "$OUT/test_cuda.log" | tail -25
timeout ${BENCH_TIMEOUT:-240} $PY benchmarks/bench_gpu.py --write "$OUT/gpu_results.md" 2>&1 \
  | tee "$OUT/bench_gpu.log" | grep -v "^  |"
timeout ${SUITE_TIMEOUT:-150} $PY -m pytest -q -p no:cacheprovider -n 8 tests 2>&1 \
  | tee "$OUT/suite.log" | tail -15
# influence on the GPU, both tools in one run (the 50x target of the influence issue)
timeout ${INFLUENCE_TIMEOUT:-240} $PY benchmarks/bench_influence.py --device cuda --seeds 2000 \
  --pyg-seeds 20 --all-nodes-depths 8 16 --write "$OUT/gpu_results.md" 2>&1 \
  | tee "$OUT/bench_influence.log" | grep -v "it/s"
