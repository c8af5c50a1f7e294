# Two commands on a fresh machine:  `make run` (the three-site demo) and `make test`.
# Everything else is a convenience.  The virtualenv is (re)built whenever pyproject changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
UP_ARGS ?=

.PHONY: install run test test-slow test-all lint typecheck bench bench-lab clean

# pip shows what it fetches and installs: on a fresh machine this takes about two minutes (torch is most of it).
$(STAMP): pyproject.toml
	@echo "==> installing onecluster and its tools into $(VENV) (the first time, or after pyproject.toml changed: about two minutes)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --disable-pip-version-check -e '.[dev,training]'
	@touch $(STAMP)
	@echo "==> $(VENV) is ready"

install: $(STAMP)

## make run: bring up the three-site fabric (server + 3 agents), replay a workload, keep the API up
## until Ctrl-C.  UP_ARGS passes options to `onecluster up`, e.g. make run UP_ARGS='--duration 30'.
# `exec`: make's child is `onecluster up` itself, never a shell, so that after Ctrl-C make sees
# its clean exit (0) and reports no error.
run: install
	exec $(BIN)/onecluster up $(UP_ARGS)

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install
	$(BIN)/mypy

## make test: lint, strict typing and the default test suite (PostgreSQL started by scripts/postgres.sh).
test: lint typecheck
	scripts/lab-host.sh
	scripts/promtool-host.sh  # promtool checks the shipped Prometheus rules (tests/deploy)
	ONECLUSTER_TEST_PG_URL="$${ONECLUSTER_TEST_PG_URL:-$$(scripts/postgres.sh start)}" \
		$(BIN)/pytest -q $(PYTEST_ARGS)

## make test-slow: the suites marked slow (end-to-end `up`, the three-site lab, long simulations).
test-slow: install
	scripts/lab-host.sh
	ONECLUSTER_TEST_PG_URL="$${ONECLUSTER_TEST_PG_URL:-$$(scripts/postgres.sh start)}" \
		$(BIN)/pytest -q -m slow $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: no slow test selected

test-all: test test-slow

## make bench: every benchmark; append their results to benchmarks/RESULTS.md by hand.
bench: install
	$(BIN)/python benchmarks/bench_scheduler.py
	$(BIN)/python benchmarks/bench_policies.py
	$(BIN)/python benchmarks/bench_api.py
	$(BIN)/python benchmarks/bench_gateway.py
	$(BIN)/python benchmarks/bench_planner.py
	ONECLUSTER_TEST_PG_URL="$${ONECLUSTER_TEST_PG_URL:-$$(scripts/postgres.sh start)}" \
		$(BIN)/python benchmarks/bench_failover.py
	$(BIN)/python benchmarks/bench_outage.py  # about 15 minutes: outages of 10 s, 60 s, 10 min
	@if command -v wrk >/dev/null; then \
		ONECLUSTER_TEST_PG_URL="$${ONECLUSTER_TEST_PG_URL:-$$(scripts/postgres.sh start)}" \
			$(BIN)/python benchmarks/bench_replicas.py; \
	else echo "==> skipping bench_replicas.py: it needs wrk (apt-get install wrk)"; fi

## make bench-lab: the lab's benchmarks (root): emulator fidelity, recovery from cuts and flaps,
## moving datasets against one TCP stream and rsync, and training across sites (about 20 minutes).
bench-lab: install
	scripts/lab-host.sh
	$(BIN)/python benchmarks/bench_lab_fidelity.py
	$(BIN)/python benchmarks/bench_recovery.py
	$(BIN)/python benchmarks/bench_transfer.py
	$(BIN)/python benchmarks/bench_training.py

clean:
	rm -rf $(VENV) .state .mypy_cache .ruff_cache .pytest_cache
