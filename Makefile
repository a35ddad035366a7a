# Every target sets itself up: a .venv with the pinned CPU torch, then graphloc built in place.
PYTHON_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# Pinned: any other version (or an unpinned torch) pulls a multi-GB CUDA build.
TORCH_VERSION := 2.13.0
EXTRAS := dev,pyg,osm,plot,dist
CSRC := $(shell find csrc -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')
NVCC := $(shell command -v nvcc 2>/dev/null)
# As setup.py compiles them: torch's flags (no implicit half/bfloat16 conversions), then
# setup.py's NVCC_CONVERSIONS undoing them.
NO_CONVERSIONS := __CUDA_NO_HALF_OPERATORS__ __CUDA_NO_HALF_CONVERSIONS__ \
	__CUDA_NO_BFLOAT16_CONVERSIONS__ __CUDA_NO_HALF2_OPERATORS__
NVCC_FLAGS := -std=c++20 --expt-relaxed-constexpr --fmad=false -arch=sm_90 -Icsrc \
	$(addprefix -D,$(NO_CONVERSIONS)) $(addprefix -U,$(NO_CONVERSIONS))

.PHONY: setup demo test bench bench-layers lint cuda-check clean

$(PY):
	$(PYTHON_SYS) -m venv $(VENV)

$(VENV)/.deps: $(PY) pyproject.toml
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==$(TORCH_VERSION)
	$(PIP) install -q --no-build-isolation -e ".[$(EXTRAS)]"
	touch $@ $(VENV)/.ext  # the editable install has just built graphloc/_C

# Incremental rebuild of graphloc/_C (ninja) whenever a kernel source changes.
$(VENV)/.ext: setup.py $(CSRC)
	$(PY) setup.py -q build_ext --inplace
	touch $@

# Two steps, so that a fresh install (which builds the extension) is not followed by a
# second full build: make decides on .ext only after .deps exists.
setup:
	@$(MAKE) --no-print-directory $(VENV)/.deps
	@$(MAKE) --no-print-directory $(VENV)/.ext

# The README's main job: Helsinki, GCN and GraphSAGE at 2 to 16 layers, accuracy and R.
demo: setup
	$(PY) examples/city_demo.py

test: setup lint cuda-check
	$(PY) -m pytest -q

bench: setup
	$(PY) benchmarks/bench_ops.py --write benchmarks/RESULTS.md

# Freed memory retained (glibc would fault every 51 MB buffer in again at each step, a cost
# that varied 1.5x between runs of the same code) and three rounds of every process, with
# graphloc and its floors also timed side by side in one process (bench_layers.py).
bench-layers: setup
	$(PY) benchmarks/bench_layers.py --retain-memory --rounds 3 --write benchmarks/RESULTS.md

lint: $(VENV)/.deps
	$(VENV)/bin/ruff check graphloc tests benchmarks examples
	$(VENV)/bin/clang-format --dry-run --Werror $(CSRC)

# With nvcc but a CPU torch, the CUDA build is skipped: still compile every kernel file, and
# syntax-check the ATen binding (a stub stands in for a header CPU wheels lack).
cuda-check: $(VENV)/.deps
ifneq ($(NVCC),)
	@mkdir -p .cuda-check/stub/c10/cuda/impl && echo '#pragma once' > .cuda-check/stub/c10/cuda/impl/cuda_cmake_macros.h
	@for f in csrc/cuda/*.cu; do echo "nvcc -c $$f"; $(NVCC) $(NVCC_FLAGS) -c $$f -o .cuda-check/$$(basename $$f).o || exit 1; done
	@inc=$$($(PY) -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I'+p for p in include_paths()))"); \
	  echo "g++ -fsyntax-only csrc/cuda/binding.cpp"; \
	  g++ -fsyntax-only -std=c++20 -Icsrc $$inc -I$$(dirname $$(dirname $(NVCC)))/cuda/include -I/usr/local/cuda/include -I.cuda-check/stub csrc/cuda/binding.cpp
else
	@echo "nvcc not found: skipping the CUDA compile check"
endif

clean:
	rm -rf build .cuda-check graphloc/_C*.so $(VENV)/.ext
