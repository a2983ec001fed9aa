#!/usr/bin/env bash
# End-to-end tests on a real kind cluster (needs a running Docker engine and kubectl; kind itself is built
# from Go modules and cached: hack/local-cluster.sh build-kind).
#
#   hack/kind-e2e.sh [--keep] [-- PYTEST-ARGS...]
#
# 1. creates the kind cluster "taintkeeper-e2e" from hack/kind-config.yaml (or reuses it): one
#    control plane and two workers, kube-apiserver without DefaultTolerationSeconds and
#    kube-controller-manager without its node lifecycle and taint eviction controllers;
# 2. builds taintkeeper:VERSION (the tag manifests/kustomization.yaml deploys, pyproject's version) from
#    manifests/Containerfile and loads it into the cluster;
# 3. applies tests/e2e/overlay/kind (manifests/ plus short grace periods for the controller) and
#    waits for the rollouts;
# 4. runs the end-to-end suite against it: `pytest -m e2e tests/e2e` with TAINTKEEPER_E2E_PROVIDER=kind.
#
# The cluster is deleted at the end unless --keep is given (a kept cluster is reused by the next
# run, which rebuilds and reloads the image). On a failure, cluster state and logs are printed and
# `kind export logs` goes to $TAINTKEEPER_KIND_DIR/logs.
#
# Environment: KIND_NODE_IMAGE (another node image; passed as --image), PYTHON (the interpreter
# with taintkeeper's test dependencies; default .venv/bin/python, else python3),
# TAINTKEEPER_KIND_DIR (kubeconfig and logs; default .local/kind-e2e), ROLLOUT_TIMEOUT (300s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER=taintkeeper-e2e            # also `name:` in hack/kind-config.yaml; the tests use its node names
KIND_VERSION=v0.33.0               # the release hack/upstream/kind builds (hack/lib/build.sh KIND_MODULE_VERSION)
KIND=                              # its path, once check_tools has built it
# The image manifests/kustomization.yaml deploys: its tag is the version (make release stamps it there).
IMAGE=taintkeeper:$(sed -n 's/^ *newTag: *//p' "$ROOT/manifests/kustomization.yaml")
NAMESPACE=taintkeeper-system
CONFIG=$ROOT/hack/kind-config.yaml
OVERLAY=$ROOT/tests/e2e/overlay/kind
WORK=${TAINTKEEPER_KIND_DIR:-$ROOT/.local/kind-e2e}
KUBECONFIG_FILE=$WORK/kubeconfig
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-300s}
KEEP=0
REUSED=0
CLUSTER_READY=0
PYTEST_ARGS=()

die() { echo "kind-e2e: error: $*" >&2; exit 1; }
log() { echo "kind-e2e: $*" >&2; }
[ "$IMAGE" != "taintkeeper:" ] || die "manifests/kustomization.yaml sets no newTag for the image"

usage() {
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --keep) KEEP=1; shift ;;
    -h|--help) usage ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    *) echo "kind-e2e: unknown argument '$1'" >&2; usage ;;
  esac
done

check_tools() {
  command -v docker >/dev/null 2>&1 \
    || die "docker not found: this suite runs Kubernetes nodes as Docker containers (kind) and needs a Docker engine"
  local docker_error
  if ! docker_error=$(docker info 2>&1 >/dev/null); then
    die "the docker CLI is installed but no Docker engine answers ('docker info' failed: $(echo "$docker_error" | tail -n 3 | tr '\n' ' '))"
  fi
  KIND=$("$ROOT/hack/local-cluster.sh" build-kind) || die "could not build kind from its Go module (hack/local-cluster.sh build-kind)"
  command -v kubectl >/dev/null 2>&1 \
    || die "kubectl not found: install kubectl (1.30 or newer; it must include kustomize, 'kubectl apply -k')"
  local found
  found=$("$KIND" version 2>/dev/null | awk '{print $2}')
  if [ "$found" != "$KIND_VERSION" ]; then
    log "warning: kind $found found; hack/kind-config.yaml pins a node image built for kind $KIND_VERSION"
  fi

  if [ -z "${PYTHON:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
  fi
  command -v "$PYTHON" >/dev/null 2>&1 || die "python interpreter '$PYTHON' not found (set PYTHON)"
  (cd "$ROOT" && "$PYTHON" -c 'import pytest, kubernetes, controller, webhook' >/dev/null 2>&1) \
    || die "'$PYTHON' lacks taintkeeper's test dependencies: run pip install -e '.[test]' (or set PYTHON)"

  [ -f "$ROOT/manifests/kustomization.yaml" ] || die "manifests/kustomization.yaml not found"
  [ -f "$ROOT/manifests/Containerfile" ] || die "manifests/Containerfile not found"
}

cluster_exists() {
  "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"
}

create_cluster() {
  mkdir -p "$WORK"
  if cluster_exists; then
    log "reusing the existing kind cluster $CLUSTER"
    REUSED=1
    # A run killed half-way may have left a worker stopped.
    local node
    for node in $("$KIND" get nodes --name "$CLUSTER"); do
      if [ "$(docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null)" != "true" ]; then
        log "starting stopped node container $node"
        docker start "$node" >/dev/null
      fi
    done
    "$KIND" get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_FILE"
  else
    log "creating kind cluster $CLUSTER (${KIND_NODE_IMAGE:-node image from hack/kind-config.yaml})"
    local image_args=()
    [ -n "${KIND_NODE_IMAGE:-}" ] && image_args=(--image "$KIND_NODE_IMAGE")
    "$KIND" create cluster --name "$CLUSTER" --config "$CONFIG" --kubeconfig "$KUBECONFIG_FILE" \
      --wait 5m "${image_args[@]}"
  fi
  chmod 600 "$KUBECONFIG_FILE"
  export KUBECONFIG=$KUBECONFIG_FILE
  CLUSTER_READY=1
  # Ready is the kubelet's own condition; nothing but taintkeeper's controller will lift the
  # not-ready NoSchedule taint new nodes start with (upstream's node lifecycle controller is off).
  kubectl wait --for=condition=Ready nodes --all --timeout=300s >/dev/null \
    || die "the cluster's nodes did not become Ready"
}

build_image() {
  log "building $IMAGE from manifests/Containerfile"
  docker build -f "$ROOT/manifests/Containerfile" -t "$IMAGE" "$ROOT"
}

load_image() {
  log "loading $IMAGE into $CLUSTER"
  "$KIND" load docker-image "$IMAGE" --name "$CLUSTER"
}

deploy() {
  log "applying tests/e2e/overlay/kind (manifests/ with short controller grace periods)"
  kubectl apply -k "$OVERLAY"
  if [ "$REUSED" -eq 1 ]; then
    # The cluster may run an older build under the same tag: restart so the new one is used.
    kubectl -n "$NAMESPACE" rollout restart deployment/taintkeeper-webhook deployment/taintkeeper-controller >/dev/null
  fi
  local deployment
  for deployment in taintkeeper-controller taintkeeper-webhook; do
    log "waiting for deployment/$deployment"
    kubectl -n "$NAMESPACE" rollout status "deployment/$deployment" --timeout="$ROLLOUT_TIMEOUT" \
      || die "deployment/$deployment did not roll out within $ROLLOUT_TIMEOUT"
  done
}

diagnostics() {
  echo "---- kind-e2e: diagnostics ----" >&2
  {
    kubectl get nodes -o wide --show-labels
    kubectl get nodes -o custom-columns='NAME:.metadata.name,TAINTS:.spec.taints[*].key'
    kubectl get pods -A -o wide
    kubectl -n "$NAMESPACE" get all,mutatingwebhookconfiguration,lease
    kubectl -n "$NAMESPACE" logs deployment/taintkeeper-controller --all-containers --prefix --tail=300
    kubectl -n "$NAMESPACE" logs deployment/taintkeeper-webhook --all-containers --prefix --tail=100
    kubectl get events -A --sort-by=.lastTimestamp | tail -n 80
  } >&2 2>&1 || true
  if "$KIND" export logs "$WORK/logs" --name "$CLUSTER" >/dev/null 2>&1; then
    echo "kind-e2e: cluster logs exported to $WORK/logs" >&2
  fi
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ "$status" -ne 0 ] && [ "$CLUSTER_READY" -eq 1 ] && cluster_exists; then
    diagnostics
  fi
  if [ "$KEEP" -eq 1 ]; then
    if cluster_exists; then
      log "keeping cluster $CLUSTER: export KUBECONFIG=$KUBECONFIG_FILE; delete it with: kind delete cluster --name $CLUSTER"
    fi
  elif [ -n "$KIND" ] && cluster_exists; then
    log "deleting cluster $CLUSTER"
    "$KIND" delete cluster --name "$CLUSTER" >&2 || true
  fi
  exit "$status"
}

check_tools
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
build_image            # first: a broken build fails before any cluster is made
create_cluster
load_image
deploy
log "running pytest -m e2e tests/e2e on kind"
cd "$ROOT"
# TAINTKEEPER_KIND_E2E=1: a missing prerequisite now fails the suite instead of skipping it.
KUBECONFIG=$KUBECONFIG_FILE TAINTKEEPER_KIND_E2E=1 TAINTKEEPER_KIND_CLUSTER=$CLUSTER TAINTKEEPER_E2E_PROVIDER=kind \
  "$PYTHON" -m pytest -m e2e tests/e2e -v -rs "${PYTEST_ARGS[@]}"
