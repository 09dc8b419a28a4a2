# Two commands: `make demo` (the import and the recalc on embedded defaults, UI left up) and
# `make test` (lint, types, import layers, the suite). Both install into .venv first when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test faults lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/pin-chessboard dev --demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy pin_chessboard_pipelines
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest

# The fault suite: PostgreSQL restarted and crashed, the broker killed and frozen, a Talent API
# that hangs or answers 5xx/429, imports killed with SIGKILL (tests/faults/).
faults: $(STAMP)
	CHESSBOARD_FAULT_SUITE=1 $(BIN)/python -m pytest tests/faults -q

bench: $(STAMP)
	for script in benchmarks/*_bench.py; do $(BIN)/python $$script; done

clean:
	rm -rf .state
