# The README's two commands: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo demo-real demo-deployed kind-up kind-down test check unit realnodes lint bench bench-admission chaos report chart-readme image release clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# The demo also draws the node failure: .local/demo/node-failure.svg (matplotlib, installed if missing).
demo: setup
	$(PY) hack/demo.py --timeline .local/demo/node-failure.svg

demo-real: setup
	$(PY) hack/demo.py --real-nodes

demo-deployed: setup
	$(PY) hack/demo.py --deployed

# taintkeeper on kind (README: Try it on kind): a kind cluster of one control plane and three workers, the
# built-ins off (Docker, kind and the node image built or installed here where missing), taintkeeper
# deployed into it from its own image; KIND_DIR/env sets KUBECONFIG, DOCKER_HOST and PATH for the shell.
KIND_DIR ?= .local/kind
kind-up: setup
	hack/local-cluster.sh kind-up $(KIND_DIR)
	PYTHON=$(abspath $(PY)) hack/local-cluster.sh deploy $(KIND_DIR)
	@echo "kind: . $(KIND_DIR)/env  # KUBECONFIG, DOCKER_HOST and kubectl for this shell"

kind-down:
	hack/local-cluster.sh kind-down $(KIND_DIR)

# Every suite on the default Kubernetes (1.37); then the old end, 1.20, on the suites that depend on
# the server (README: Supported Kubernetes versions), less the tests marked version_independent: what
# they check is the same on every version (docs/development.md lists them and why).
# TAINTKEEPER_KUBERNETES=1.20 make test runs every suite, every test, on 1.20 instead, and nothing else
# (the runner leaves the old end out when TAINTKEEPER_KUBERNETES is set).
OLD_END ?= 1.20
OLD_END_TESTS ?= tests/integration tests/realnodes
OLD_END_SELECT ?= -m "not version_independent"
# The sessions run in two lanes side by side (tests/support/lanes.py): the suites with real nodes one after
# another (one cluster with nodes per host), everything else beside them; each session's log is in
# .local/test-logs/. Each run records where its time went; the table (the run's span and each lane's, each
# suite's wall time, the slowest tests) ends the output, pass or fail (tests/support/suite_times.py).
TEST_TIMES := .local/test-times
TIMES_TABLE := $(PY) -m tests.support.suite_times $(TEST_TIMES)
test: export TAINTKEEPER_OLD_END = $(OLD_END)
test: export TAINTKEEPER_OLD_END_TESTS = $(OLD_END_TESTS)
test: export TAINTKEEPER_OLD_END_SELECT = $(OLD_END_SELECT)
test: lint
	rm -rf $(TEST_TIMES)
	TAINTKEEPER_TEST_TIMES=$(TEST_TIMES) $(PY) -m tests.support.lanes || { $(TIMES_TABLE); exit 1; }
	$(TIMES_TABLE)

# The inner loop, before every commit (a few minutes): lint, then the suites that need no cluster:
# unit, conformance (upstream's tables) and the chart's (helm template, built once if missing).
check: lint
	$(PY) -m pytest -q tests/unit tests/conformance tests/chart

unit: setup
	$(PY) -m pytest tests/unit

realnodes: setup
	$(PY) -m pytest tests/realnodes

# ruff (the rules, and the one format: `ruff format .` fixes what --check finds); shellcheck on hack/'s
# shell scripts (installed from Debian if missing); the import contracts between the packages
# ([tool.importlinter] in pyproject.toml); mypy ([tool.mypy]).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	hack/shellcheck.sh
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

bench: setup
	$(PY) -m pip install -q -e '.[test,bench]'
	hack/local-cluster.sh deps --bench
	$(PY) bench/webhook_bench.py

# Pod creations through kube-apiserver with taintkeeper's webhook, the built-in plugin, no mutation and
# an echo webhook (bench/admission_latency.py) on the complete local cluster. ADMISSION_ARGS, e.g. "--rates 20".
bench-admission: setup
	hack/local-cluster.sh deps --nodes
	$(PY) bench/admission_latency.py $(ADMISSION_ARGS)

# The chaos soak (bench/chaos.py): 60 minutes of overlapping faults on the complete local cluster,
# judged by kube-apiserver's audit log. CHAOS_ARGS, e.g. "--seed 7 --duration 10m --controller builtin".
chaos: setup
	hack/local-cluster.sh deps --nodes
	$(PY) bench/chaos.py $(CHAOS_ARGS)

# bench/REPORT.md (the goals' table, the index of runs) and its pictures in bench/figures/, made from the
# runs' result files, bench/results/*.json (bench/report.py); tests/unit/bench/test_report.py fails until
# it has run after a result file changed.
report: setup
	$(PY) -m bench.report

# charts/taintkeeper/README.md, made from the chart's Chart.yaml, values.yaml (defaults, comments) and
# values.schema.json (hack/chart_readme.py); tests/chart/test_readme.py fails until it has run after they changed.
chart-readme: setup
	$(PY) -m hack.chart_readme

# taintkeeper's container image, built offline (Debian packages + PyPI, no Docker, no registry) from
# manifests/Containerfile: prints the OCI archive's path (`ctr -n k8s.io images import PATH`).
image: setup
	@$(PY) hack/image.py

# make release VERSION=x.y.z [DRY_RUN=1] [PUSH=DIR]: stamps the version into pyproject.toml, Chart.yaml (version,
# appVersion) and every kustomization's image newTag, makes the chart's README again, builds the image
# taintkeeper:VERSION and prints its digest (hack/release.py; docs/development.md, "Cutting a release").
release: setup
	@$(PY) hack/release.py $(if $(DRY_RUN),--dry-run) $(if $(PUSH),--push '$(PUSH)') '$(VERSION)'

clean:
	rm -rf $(VENV) .pytest_cache
