#!/usr/bin/env bash
# Pin the wrapper module to another Kubernetes release: hack/upstream/pin.sh 1.38.0
# rewrites go.mod (k8s.io/kubernetes vVERSION, every staging module at its v0.MINOR.PATCH release,
# the list taken from upstream's own go.mod at that tag) and go.sum. Then set the release in
# hack/lib/build.sh (KUBERNETES_RELEASES) and run the suites.
set -euo pipefail
if [ $# -ne 1 ] || ! [[ $1 =~ ^1\.[0-9]+\.[0-9]+$ ]]; then echo "usage: $0 1.MINOR.PATCH" >&2; exit 2; fi
version=$1 staging=0.${1#1.}
cd "$(dirname "$0")"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
upstream_mod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$upstream_mod" ] || { echo "pin: could not download k8s.io/kubernetes v$version" >&2; exit 1; }
{
  sed -n '1,/^module /{/^module /d;p}' go.mod
  echo "module taintkeeper.local/upstream"
  echo
  echo "go $(sed -n 's/^go //p' "$upstream_mod")"
  echo
  echo "require k8s.io/kubernetes v$version"
  echo
  echo "replace ("
  sed -n '/^replace (/,/^)/p' "$upstream_mod" | awk -v v="v$staging" '/=>/ {print "\t" $1 " => " $1 " " v}'
  echo ")"
} >go.mod.new
mv go.mod.new go.mod
rm -f go.sum
go mod tidy
echo "pinned k8s.io/kubernetes v$version; now set KUBERNETES_RELEASES in hack/lib/build.sh"
