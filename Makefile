# Everything runs inside .venv, which `setup` creates and fills with the pinned constraints.
# `make demo` and `make test` work on a fresh clone by themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
OUT ?= out

.PHONY: setup demo rehearse test test-all bench bench-scale lint format clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/albert demo --out $(OUT)/demo

rehearse: setup
	$(VENV)/bin/albert rehearse

test: setup
	$(PY) -m pytest -q

test-all: setup
	$(PY) -m pytest -q -m ''

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
