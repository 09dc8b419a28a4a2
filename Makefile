# Two commands: `make demo` (the import and the recalc on embedded defaults, UI left up) and
# `make test` (the Debian packages the suite needs, lint, types, import layers, the suite; `make
# test-long` the tests of minutes, CI runs both). They
# install into .venv first when needed: the pinned set of requirements.lock, then the project.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install system-packages demo test test-long faults newest-dagster image image-tests lint bench lock check-fresh clean

# The stock pip of `python3.11 -m venv` (23.2) installs the lock as it is: no upgrade first.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# chromium, prometheus and stunnel4 from Debian when missing (apt-get, through sudo when not root)
system-packages:
	@scripts/system-packages

demo: $(STAMP)
	$(BIN)/pin-chessboard dev --demo

# `dg check defs`: the definitions load ([tool.dg] in pyproject.toml), on a DAGSTER_HOME of its own
# (Dagster's local storage there, not the PostgreSQL storage of dagster.yaml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy pin_chessboard_pipelines
	$(BIN)/lint-imports
	mkdir -p .state/dg-home && printf 'telemetry:\n  enabled: false\n' > .state/dg-home/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.state/dg-home $(BIN)/dg check defs

# The suite on TEST_WORKERS processes (pytest-xdist): most tests wait (Dagster's daemon, a browser, a
# process start), so more workers than cores. Each worker starts its own PostgreSQL and broker; the
# tests of an xdist_group (a module's Dagster stack, the e2e package's stack) run on one worker.
# `make test` leaves out the tests marked `long` (minutes of real time each: processes killed or hung,
# liveness thresholds, the whole dev stack, the chart's webserver); `make test-long` runs them, and CI
# runs both.
TEST_WORKERS ?= 3
test: system-packages lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not long"

test-long: system-packages $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m long

# The fault suite: PostgreSQL restarted and crashed, the broker killed and frozen, a Talent API
# that hangs or answers 5xx/429, imports killed with SIGKILL (tests/faults/).
faults: $(STAMP)
	CHESSBOARD_FAULT_SUITE=1 $(BIN)/python -m pytest tests/faults -q

# The Dagster-facing tests on the newest Dagster on PyPI instead of the lock's (scripts/newest-dagster)
newest-dagster:
	scripts/newest-dagster

# The image of the Dockerfile built with podman (installed from Debian when missing) on a base it can
# get here (a debootstrap Debian bookworm when no registry serves python:3.11-slim-bookworm), and
# `dagster definitions validate` inside it with the k8s executor (scripts/image)
image:
	scripts/image

# The podman tests of the image (tests/k8s/test_image.py): build, validate, code server, user
image-tests: $(STAMP)
	CHESSBOARD_IMAGE_TESTS=1 $(BIN)/python -m pytest tests/k8s/test_image.py -q

bench: $(STAMP)
	for script in benchmarks/*_bench.py; do \
		[ $$script = benchmarks/scale_bench.py ] || $(BIN)/python $$script; done

# 100k, 1M and 10M objects imported, recalculated and relayed (hours; it says first what it needs)
.PHONY: bench-scale
bench-scale: $(STAMP)
	$(BIN)/python benchmarks/scale_bench.py

# requirements.lock again from pyproject.toml (after a change of its dependencies), by uv
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 --universal \
		--quiet -o requirements.lock

# What a new user does, in a clean clone of HEAD in a temporary folder: `make test`, then
# `make demo` until it leaves the UI up (scripts/check-fresh)
check-fresh:
	scripts/check-fresh

clean:
	rm -rf .state
