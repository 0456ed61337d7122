# Everything runs inside .venv, which `setup` creates and fills with the pinned constraints.
# `make demo` and `make test` work on a fresh clone by themselves.
# bash with pipefail: a failed pip install fails the target even though its output is filtered.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
OUT ?= out

.PHONY: setup setup-tpu demo rehearse test test-slow test-all test-tpu bench bench-scale lint format clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing the pinned dependencies into $(VENV) (about 5 minutes on a fresh machine; pip's progress follows)"
	$(PY) -m pip install --progress-bar off -c constraints.txt -e '.[dev]' | { grep --line-buffered -E '^(Collecting|Installing|Successfully)' || true; }
	touch $(STAMP)

setup: $(STAMP)

# The TPU set (docs/tpu.md): torch 2.9 + torch_xla 2.9 (torch_xla has no release for the main set's
# torch) in .venv-tpu, pinned by constraints-tpu.txt. About 7 GB: PyPI's Linux torch is the CUDA build.
VENV_TPU := .venv-tpu
TPU_STAMP := $(VENV_TPU)/.installed-stamp

$(TPU_STAMP): pyproject.toml constraints-tpu.txt
	test -x $(VENV_TPU)/bin/python || $(PYTHON) -m venv $(VENV_TPU)
	@echo "Installing the TPU set into $(VENV_TPU) (about 5 minutes, 10 GB; pip's progress follows)"
	$(VENV_TPU)/bin/python -m pip install --progress-bar off -c constraints-tpu.txt -e '.[dev]' torch-xla | { grep --line-buffered -E '^(Collecting|Installing|Successfully)' || true; }
	touch $(TPU_STAMP)

setup-tpu: $(TPU_STAMP)

demo: setup
	$(VENV)/bin/albert demo --out $(OUT)/demo

rehearse: setup
	$(VENV)/bin/albert rehearse

# The fast suite runs in one more pytest-xdist worker than there are cores (JOBS=N: N workers):
# many of its tests spend seconds waiting on a server, a subprocess or a signal, and the extra worker
# fills the core they leave idle (on 2 cores, 3 workers took it from about 10 to 8.6 minutes). The slow
# tier's tests start process trees of their own (torchrun ranks, Beam workers, servers, a browser), so
# it runs one worker a core. A file is a unit of work, and the files that read the flows' shared chain
# are one unit, so fixtures are built once; the longest units go first (tests/scheduling.py, which takes
# over xdist's scheduling for any --dist load* mode). `make test`: the fast default suite (not marked
# slow); `make test-slow`: the slow tier only (docs/testing.md); `make test-all`: both at once.
# One folder: .venv/bin/pytest -n 2 tests/model.
CORES := $(shell nproc)
JOBS_fast := $(shell echo $$(( $(CORES) + 1 )))
JOBS_slow := $(CORES)
JOBS_all := $(CORES)
JOBS ?= $(JOBS_$(TIERS))
XDIST = -n $(JOBS) --dist loadgroup

# TIERS=fast (the default: what is not marked slow), slow, or all (both in one run, as CI runs them).
TIERS ?= fast
MARKS_fast :=
MARKS_slow := -m slow
MARKS_all := -m ''

test: setup
	@test -n "$(filter $(TIERS),fast slow all)" || { echo "make test: TIERS is fast, slow or all, not '$(TIERS)'" >&2; exit 2; }
	$(PY) -m pytest -q $(XDIST) $(MARKS_$(TIERS))

test-slow:
	$(MAKE) test TIERS=slow

test-all:
	$(MAKE) test TIERS=all

# Both tiers with each test's time (junit XML), then the per-unit seconds tests/scheduling.py orders by.
durations: TIERS = all
durations: setup
	mkdir -p $(OUT)
	$(PY) -m pytest -q $(XDIST) -m '' --junitxml=$(OUT)/durations.xml
	$(PY) -m tests.scheduling $(OUT)/durations.xml

# The trainer on XLA's CPU device (tests/tpu/), which compiles and runs the graphs a TPU would.
test-tpu: setup-tpu
	PJRT_DEVICE=CPU $(VENV_TPU)/bin/python -m pytest -q tests/tpu

bench: setup
	$(VENV)/bin/albert bench all

# The cost-growth curve (1x, 4x, 16x the sample; tens of minutes): a table, $(OUT)/bench-scale.json and .png.
bench-scale: setup
	mkdir -p $(OUT)
	$(VENV)/bin/albert bench scale --json $(OUT)/bench-scale.json

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(OUT) .pytest_cache .ruff_cache
