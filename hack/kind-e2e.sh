#!/usr/bin/env bash
# The end-to-end suite on a kind cluster, as `make test` runs it (its session 1.37-e2e-kind):
#
#   hack/kind-e2e.sh [--keep] [--helm] [-- PYTEST-ARGS...]
#
# The suite's fixture (tests/e2e/conftest.py, provider `kind`) makes the cluster with
# `hack/local-cluster.sh kind-up DIR` (a Docker engine, kind v0.33 and its node image, each built or
# installed here where missing; one control plane and three workers, the built-ins off), deploys
# taintkeeper from its own image (pushed to the cluster's registry, pulled by the nodes) and
# tests/e2e/overlay/kind (--helm: the chart, with the same settings), runs tests/e2e, and takes it all down
# (`kind-down DIR`).
#
# --keep: DIR is $TAINTKEEPER_KIND_DIR (default .local/kind-e2e) and stays up for the next run, which
# reuses it; remove it with `hack/local-cluster.sh kind-down .local/kind-e2e`.
# KIND_NODE_IMAGE: another node image the Docker engine holds (kindest/node:v1.37.0 where a registry is
# reachable). PYTHON: the interpreter with the test dependencies (default .venv/bin/python).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
PYTEST_ARGS=()
unset TAINTKEEPER_E2E_CLUSTER_DIR

die() { echo "kind-e2e: error: $*" >&2; exit 1; }
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --keep) export TAINTKEEPER_E2E_CLUSTER_DIR=${TAINTKEEPER_KIND_DIR:-$ROOT/.local/kind-e2e}; shift ;;
    --helm) export TAINTKEEPER_E2E_INSTALL=helm; shift ;;
    -h|--help) usage ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    *) echo "kind-e2e: unknown argument '$1'" >&2; usage ;;
  esac
done
[ -x "$PYTHON" ] || die "no Python with taintkeeper's test dependencies at $PYTHON: run \`make setup\` first (or set PYTHON)"
cd "$ROOT"
TAINTKEEPER_E2E_PROVIDER=kind exec "$PYTHON" -m pytest -p no:cacheprovider tests/e2e "${PYTEST_ARGS[@]}"
