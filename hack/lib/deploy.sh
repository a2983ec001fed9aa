# `deploy`: taintkeeper from its own image and manifests into DIR's complete cluster (hack/deploy.py).
# shellcheck shell=bash

cmd_deploy() { # dir [--overlay path]
  local root python
  root=$(cd "$HERE/.." && pwd)
  python=${PYTHON:-$root/.venv/bin/python}
  if [ -f "$1/options.env" ] && [ "$(cluster_option "$1" BUILTIN_NODE_LIFECYCLE)" = 1 ]; then
    die "$1 runs the built-in node lifecycle controller and DefaultTolerationSeconds (up --builtin-node-lifecycle): taintkeeper would act beside them; run up $1 --nodes N without it first"
  fi
  [ -x "$python" ] || command -v "$python" >/dev/null 2>&1 \
    || die "no Python with taintkeeper's dependencies at $python: run \`make setup\` first (or set PYTHON)"
  (cd "$root" && "$python" -m hack.deploy "$@")
}

cmd_registry() { # dir: DIR's registry (hack/cluster_registry.py), started if not running; prints its address
  local root python
  root=$(cd "$HERE/.." && pwd)
  python=${PYTHON:-$root/.venv/bin/python}
  [ -d "$1" ] || die "no such directory: $1"
  if [ -f "$1/kind.env" ]; then
    DOCKER_HOST=$(kind_env_value "$1" DOCKER_HOST)
    if [ -n "$DOCKER_HOST" ]; then export DOCKER_HOST; else unset DOCKER_HOST; fi
  fi
  (cd "$root" && "$python" -m hack.cluster_registry "$1")
}
