# Debian packages and the Kubernetes binaries: apt installs (`deps`), kube-apiserver (`build`) and
# the node components (`build-node`) built for the cluster's Kubernetes version and cached under
# $CACHE, the pause and busybox images, helm (`build-helm`, for the chart's tests) and kind (`build-kind`); one build at a
# time per machine (flock).
#
# Two versions: 1.37 (the default), built with Go from upstream's modules through the wrapper
# module hack/upstream/ (and etcd 3.6 from hack/upstream/etcd/), and 1.20, built from Debian's
# `kubernetes` source package with Debian's etcd 3.4. A newer release is one line below plus
# `hack/upstream/pin.sh VERSION`, which rewrites the wrapper module's go.mod and go.sum.
# shellcheck shell=bash

KUBERNETES_DEFAULT=1.37
declare -A KUBERNETES_RELEASES=([1.37]=1.37.2 [1.20]=1.20.2)
ETCD_MODULE_VERSION=3.6.16
KUBE_DEB_VERSION=1.20.5+really1.20.2-1.1+deb12u1
CACHE=${TAINTKEEPER_CACHE:-$HOME/.cache/taintkeeper}
UPSTREAM_MODULE=$HERE/upstream
# helm, for the chart's tests (tests/chart/): built from hack/upstream/helm, whose go.mod requires this release.
HELM_MODULE_VERSION=3.22.0
HELM_BIN=$CACHE/helm-$HELM_MODULE_VERSION/bin/helm
# kind, for the end-to-end suite on kind (hack/kind-e2e.sh): built from hack/upstream/kind, whose go.mod requires it.
KIND_MODULE_VERSION=0.33.0
KIND_BIN=$CACHE/kind-$KIND_MODULE_VERSION/bin/kind
# The OCI registry the image and chart are pushed to (hack/registry.py) and crane, which pushes images:
# built from hack/upstream/registry (its main.go serves go-containerregistry's registry over TLS).
REGISTRY_MODULE_VERSION=0.22.1
# What a kind node (hack/kind/) runs beside the Kubernetes binaries: crictl (kind's `load` and `export logs`
# call it) and the cluster DNS kubeadm deploys.
CRICTL_MODULE_VERSION=1.37.0
CRICTL_DIR=$CACHE/crictl-$CRICTL_MODULE_VERSION
COREDNS_MODULE_VERSION=1.14.6
COREDNS_DIR=$CACHE/coredns-$COREDNS_MODULE_VERSION
REGISTRY_DIR=$CACHE/registry-$REGISTRY_MODULE_VERSION-$(sha256sum <"$UPSTREAM_MODULE/registry/main.go" | cut -c1-12)
PAUSE_IMAGE=taintkeeper.local/pause:3.2
BUSYBOX_IMAGE=taintkeeper.local/busybox:latest
# What build-node builds: every binary of a complete cluster but the apiserver.
NODE_COMPONENTS=(kubelet kube-proxy kube-scheduler kube-controller-manager)
# Built with Go from the wrapper module: those, the apiserver and kubectl, in one `go build` (the
# first on a machine: about 7 minutes on 2 cores; the six share most of their packages).
MODULE_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
DEBIAN_BUILD_PACKAGES=(golang-1.19-go rsync golang-github-modern-go-reflect2-dev dpkg-dev make)
CONTROL_PLANE_PACKAGES=(openssl curl)
# promtool (tests/unit/manifests/test_alert_rules.py) and the server tests/e2e/test_dashboard.py
# scrapes with come with Debian's prometheus package; tmux runs `status --watch` in a terminal
# (tests/integration/test_status_watch.py).
TEST_PACKAGES=(prometheus tmux)
# The load generators of bench/webhook_bench.py (`make bench`).
BENCH_PACKAGES=(wrk hey)
# conntrack: kube-proxy clears stale UDP conntrack entries with it. nftables: `down` deletes the
# iptables tables the nodes created on a machine that had none (host.sh remove_new_tables).
NODE_PACKAGES=(containerd runc containernetworking-plugins busybox-static iptables nftables conntrack gcc libc6-dev util-linux iproute2)

# The Kubernetes version asked for: the argument, else $TAINTKEEPER_KUBERNETES, else the default.
kubernetes_minor() { # [minor]
  local minor=${1:-${TAINTKEEPER_KUBERNETES:-$KUBERNETES_DEFAULT}}
  minor=${minor#v}
  [[ $minor =~ ^1\.[0-9]+\.[0-9]+$ ]] && minor=${minor%.*}
  [ -n "${KUBERNETES_RELEASES[$minor]:-}" ] \
    || die "Kubernetes $minor is not supported here (expected one of: $(printf '%s ' "${!KUBERNETES_RELEASES[@]}" | xargs -n1 | sort -rV | xargs))"
  echo "$minor"
}

# Point every binary path at that version's cache. Called once, before any command runs.
use_kubernetes() { # minor
  KUBE_MINOR=$1
  KUBE_VERSION=${KUBERNETES_RELEASES[$1]}
  KUBE_CACHE=$CACHE/kubernetes-$KUBE_VERSION
  APISERVER_BIN=$KUBE_CACHE/bin/kube-apiserver
  # shellcheck disable=SC2034  # the other binaries are started by nodes.sh, complete-cluster.sh, control-plane.sh
  KUBELET_BIN=$KUBE_CACHE/bin/kubelet
  # shellcheck disable=SC2034
  PROXY_BIN=$KUBE_CACHE/bin/kube-proxy
  # shellcheck disable=SC2034
  SCHEDULER_BIN=$KUBE_CACHE/bin/kube-scheduler
  # shellcheck disable=SC2034
  CONTROLLER_MANAGER_BIN=$KUBE_CACHE/bin/kube-controller-manager
  PAUSE_BIN=$KUBE_CACHE/bin/pause
  IMAGES_DIR=$KUBE_CACHE/images
  if from_debian; then
    ETCD_BIN=/usr/bin/etcd
    CONTROL_PLANE_PACKAGES+=(etcd-server)
  else
    ETCD_BIN=$CACHE/etcd-$ETCD_MODULE_VERSION/bin/etcd
  fi
}

from_debian() { [ "$KUBE_MINOR" = 1.20 ]; }

# The versions 1.29+ and 1.20 differ in what the scripts pass: a test of `[ "$(minor_number)" -ge 24 ]`.
minor_number() { echo "${KUBE_MINOR#1.}"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  # Debian's etcd-server would start a system etcd on 2379; taintkeeper runs its own. Another
  # install running at the same time (a second test session) holds dpkg's lock: wait for it.
  local apt=(apt-get -o DPkg::Lock::Timeout=900)
  as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || { as_root "${apt[@]}" update -q >&2 && as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}" >&2; } \
    || die "could not install ${missing[*]}"
}

# A private deb-src list made from the system's own apt sources, so the system's apt
# configuration is left untouched and no mirror host is written into this repository.
fetch_kube_source() {
  local work=$1 apt_dir=$1/apt
  mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial"
  : >"$apt_dir/sources.list"
  if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
    sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/*.sources >"$apt_dir/parts/taintkeeper-src.sources"
  fi
  if [ -f /etc/apt/sources.list ]; then
    sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list >>"$apt_dir/sources.list"
  fi
  local opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=$apt_dir/parts"
              -o "Dir::State::Lists=$apt_dir/lists")
  log "fetching Debian source package kubernetes=$KUBE_DEB_VERSION"
  apt-get "${opts[@]}" update -q >"$work/apt-update.log" 2>&1 || die "apt-get update for sources failed (see $work/apt-update.log)"
  (cd "$work" && apt-get "${opts[@]}" source --download-only "kubernetes=$KUBE_DEB_VERSION" >"$work/apt-source.log" 2>&1) \
    || die "could not download the kubernetes source package (see $work/apt-source.log)"
  (cd "$work" && dpkg-source --no-check -x kubernetes_*.dsc src >"$work/dpkg-source.log" 2>&1) \
    || die "could not unpack the kubernetes source package (see $work/dpkg-source.log)"
}

# 1.20: kube-apiserver from Debian's source tree, then (build_component) any other command of it.
build_apiserver_from_debian() {
  mkdir -p "$KUBE_CACHE"
  # One build at a time per machine: parallel test sessions share the cache.
  exec 9>"$KUBE_CACHE/.build.lock"
  flock 9
  [ -x "$APISERVER_BIN" ] && { exec 9>&-; return 0; }
  apt_install "${DEBIAN_BUILD_PACKAGES[@]}"
  local src=$KUBE_CACHE/src
  if [ ! -f "$src/Makefile" ]; then
    local work
    work=$(mktemp -d "$KUBE_CACHE/fetch.XXXXXX")
    fetch_kube_source "$work"
    rm -rf "$src"
    mv "$work/src" "$src"
    rm -rf "$work"
    # vendored reflect2 1.0.1 breaks on Go >= 1.18; Debian's 1.0.2 sources fix it.
    local reflect2=$src/vendor/github.com/modern-go/reflect2
    find "$reflect2" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' -delete
    find /usr/share/gocode/src/github.com/modern-go/reflect2 -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) \
      ! -name '*_test.go' -exec cp {} "$reflect2/" \;
  fi
  exec 9>&-
  build_from_debian kube-apiserver
}

build_from_debian() { # name (a cmd/ directory of Debian's tree)
  local name=$1 bin=$KUBE_CACHE/bin/$1
  exec 9>"$KUBE_CACHE/.build.lock"
  flock 9
  [ -x "$bin" ] && { exec 9>&-; return 0; }
  log "building $name $KUBE_VERSION from Debian's source (first run on this machine only; a few minutes)"
  (cd "$KUBE_CACHE/src" && PATH=/usr/lib/go-1.19/bin:$PATH GOPROXY=off GOSUMDB=off CGO_ENABLED=0 GOFLAGS='' \
     make WHAT="cmd/$name" >"$KUBE_CACHE/build-$name.log" 2>&1) \
    || die "$name build failed (see $KUBE_CACHE/build-$name.log)"
  mkdir -p "$KUBE_CACHE/bin"
  cp "$KUBE_CACHE/src/_output/bin/$name" "$bin.tmp" && mv "$bin.tmp" "$bin"
  log "cached $bin"
  exec 9>&-
}

go_bin() { # the Go toolchain (1.26+): on PATH, else where its tarball installs
  local go
  go=$(command -v go || true)
  [ -n "$go" ] || { [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go; }
  [ -n "$go" ] || die "Go not found: building Kubernetes $KUBE_VERSION needs Go 1.26 or newer on PATH"
  echo "$go"
}

# Go builds from the committed wrapper modules: go.sum pins every module, the toolchain is the
# installed one (never downloaded), static binaries like upstream's release builds.
go_build() { # module-dir log ldflags output-dir-or-file package...
  local module=$1 logfile=$2 ldflags=$3 out=$4 go
  shift 4
  go=$(go_bin)
  (cd "$module" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
     "$go" build -trimpath -ldflags "$ldflags" -o "$out" "$@" >"$logfile" 2>&1)
}

version_ldflags() { # what `kubectl version` and each binary's --version report
  local flags="-s -w" package
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $package.gitVersion=v$KUBE_VERSION -X $package.gitMajor=${KUBE_MINOR%%.*}"
    flags+=" -X $package.gitMinor=${KUBE_MINOR#*.} -X $package.gitTreeState=clean"
  done
  echo "$flags"
}

check_upstream_module() { # the wrapper module requires the release KUBERNETES_RELEASES names
  grep -qx "require k8s.io/kubernetes v$KUBE_VERSION" "$UPSTREAM_MODULE/go.mod" \
    || die "hack/upstream/go.mod does not require k8s.io/kubernetes v$KUBE_VERSION (run: hack/upstream/pin.sh $KUBE_VERSION)"
}

build_from_modules() { # name...: commands of k8s.io/kubernetes, built together (they share most packages)
  local wanted=() name
  for name in "$@"; do [ -x "$KUBE_CACHE/bin/$name" ] || wanted+=("$name"); done
  [ ${#wanted[@]} -eq 0 ] && return 0
  mkdir -p "$KUBE_CACHE/bin"
  exec 9>"$KUBE_CACHE/.build.lock"
  flock 9
  wanted=()
  for name in "$@"; do [ -x "$KUBE_CACHE/bin/$name" ] || wanted+=("$name"); done
  [ ${#wanted[@]} -eq 0 ] && { exec 9>&-; return 0; }
  check_upstream_module
  local out packages=()
  out=$(mktemp -d "$KUBE_CACHE/build.XXXXXX")
  for name in "${wanted[@]}"; do packages+=("k8s.io/kubernetes/cmd/$name"); done
  log "building ${wanted[*]} $KUBE_VERSION from Go modules (first run on this machine only; minutes)"
  go_build "$UPSTREAM_MODULE" "$KUBE_CACHE/build.log" "$(version_ldflags)" "$out/" "${packages[@]}" \
    || { rm -rf "$out"; die "the build of ${wanted[*]} failed (see $KUBE_CACHE/build.log)"; }
  for name in "${wanted[@]}"; do mv "$out/$name" "$KUBE_CACHE/bin/$name"; done
  rm -rf "$out"
  log "cached ${wanted[*]} in $KUBE_CACHE/bin"
  exec 9>&-
}

build_etcd() { # etcd 3.6 from its module (hack/upstream/etcd): 1.37's apiserver needs etcd >= 3.5.11
  from_debian && return 0
  [ -x "$ETCD_BIN" ] && return 0
  local dir=${ETCD_BIN%/bin/etcd}
  mkdir -p "$dir/bin"
  exec 7>"$dir/.build.lock"
  flock 7
  [ -x "$ETCD_BIN" ] && { exec 7>&-; return 0; }
  log "building etcd $ETCD_MODULE_VERSION from Go modules (first run on this machine only)"
  go_build "$UPSTREAM_MODULE/etcd" "$dir/build.log" "-s -w" "$ETCD_BIN.tmp" go.etcd.io/etcd/server/v3 \
    || die "the etcd build failed (see $dir/build.log)"
  mv "$ETCD_BIN.tmp" "$ETCD_BIN"
  log "cached $ETCD_BIN"
  exec 7>&-
}

# helm from its module (hack/upstream/helm), stamped as upstream's Makefile stamps a release: its version,
# and the Kubernetes version its client-go speaks (else `helm template` and `lint` assume 1.20).
helm_ldflags() {
  local client_go major minor
  client_go=$(cd "$UPSTREAM_MODULE/helm" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
              "$(go_bin)" list -m -f '{{.Version}}' k8s.io/client-go) \
    || die "could not read k8s.io/client-go's version from hack/upstream/helm/go.mod"
  client_go=${client_go#v0.}
  major=1 minor=${client_go%%.*}
  local flags="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_MODULE_VERSION"
  flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  local package
  for package in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    flags+=" -X $package.k8sVersionMajor=$major -X $package.k8sVersionMinor=$minor"
  done
  echo "$flags"
}

# A command (or a few) of one Go module, built from its wrapper under hack/upstream/WRAPPER and cached in DIR/bin:
# one build at a time per machine (parallel test sessions share the cache), into NAME.tmp, renamed once done.
binaries_missing() { # dir name=package...: 0 when one of the names is not in DIR/bin yet
  local dir=$1 target
  shift
  for target in "$@"; do [ -x "$dir/bin/${target%%=*}" ] || return 0; done
  return 1
}

build_module_binaries() { # dir wrapper "require line" what ldflags name=package...
  local dir=$1 wrapper=$2 require=$3 what=$4 ldflags=$5 target name
  shift 5
  binaries_missing "$dir" "$@" || return 0
  mkdir -p "$dir/bin"
  exec 6>"$dir/.build.lock"
  flock 6
  binaries_missing "$dir" "$@" || { exec 6>&-; return 0; }
  grep -qx "require $require" "$UPSTREAM_MODULE/$wrapper/go.mod" \
    || die "hack/upstream/$wrapper/go.mod does not require $require"
  log "building $what from Go modules (first run on this machine only)"
  for target in "$@"; do
    name=${target%%=*}
    go_build "$UPSTREAM_MODULE/$wrapper" "$dir/build-$name.log" "$ldflags" "$dir/bin/$name.tmp" "${target#*=}" \
      || die "the $name build failed (see $dir/build-$name.log)"
  done
  for target in "$@"; do name=${target%%=*}; mv "$dir/bin/$name.tmp" "$dir/bin/$name"; done
  log "cached $dir/bin"
  exec 6>&-
}

build_helm() {
  build_module_binaries "${HELM_BIN%/bin/helm}" helm "helm.sh/helm/v3 v$HELM_MODULE_VERSION" "helm $HELM_MODULE_VERSION" \
    "$(helm_ldflags)" helm=helm.sh/helm/v3/cmd/helm
}

# kind from its module (hack/upstream/kind): its version is the module's own (pkg/cmd/kind/version), so
# nothing needs stamping.
build_kind() {
  build_module_binaries "${KIND_BIN%/bin/kind}" kind "sigs.k8s.io/kind v$KIND_MODULE_VERSION" "kind $KIND_MODULE_VERSION" \
    "-s -w" kind=sigs.k8s.io/kind
}

# The registry (our main.go, so the cache key includes its hash) and crane, from hack/upstream/registry.
build_registry() {
  build_module_binaries "$REGISTRY_DIR" registry "github.com/google/go-containerregistry v$REGISTRY_MODULE_VERSION" \
    "the registry and crane (go-containerregistry $REGISTRY_MODULE_VERSION)" "-s -w" \
    registry=. crane=github.com/google/go-containerregistry/cmd/crane
}

build_crictl() {
  build_module_binaries "$CRICTL_DIR" crictl "sigs.k8s.io/cri-tools v$CRICTL_MODULE_VERSION" "crictl $CRICTL_MODULE_VERSION" \
    "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_MODULE_VERSION" crictl=sigs.k8s.io/cri-tools/cmd/crictl
}

build_coredns() {
  build_module_binaries "$COREDNS_DIR" coredns "github.com/coredns/coredns v$COREDNS_MODULE_VERSION" \
    "CoreDNS $COREDNS_MODULE_VERSION" "-s -w" coredns=github.com/coredns/coredns
}

# The binaries of a kind node image that the local cluster does not build: kubeadm (from the same
# Kubernetes module as the rest), crictl, CoreDNS. 1.37 only: kind v0.33 cannot run 1.20 (docs/development.md).
build_kind_node_binaries() {
  from_debian && die "kind's node image is built for Kubernetes 1.37 only (kind v$KIND_MODULE_VERSION runs no 1.20 node)"
  build_from_modules kubeadm
  build_crictl
  build_coredns
}

build_apiserver() {
  [ -x "$APISERVER_BIN" ] && return 0
  if from_debian; then build_apiserver_from_debian; else build_from_modules "${MODULE_COMPONENTS[@]}"; fi
}

# kubelet, kube-proxy, kube-scheduler and kube-controller-manager: from the same source as the apiserver.
build_components() { # name...
  if from_debian; then
    build_apiserver
    local name
    for name in "$@"; do build_from_debian "$name"; done
  else
    build_from_modules "$@"
  fi
}

pause_source() { # upstream's pause.c of this version
  if from_debian; then
    [ -f "$KUBE_CACHE/src/build/pause/linux/pause.c" ] || build_apiserver
    echo "$KUBE_CACHE/src/build/pause/linux/pause.c"
  else
    local dir
    dir=$(cd "$UPSTREAM_MODULE" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$(go_bin)" list -m -f '{{.Dir}}' k8s.io/kubernetes) \
      || die "could not find k8s.io/kubernetes $KUBE_VERSION in the Go module cache"
    echo "$dir/build/pause/linux/pause.c"
  fi
}

# The pause binary (static, from the tree's own pause.c) and two docker-archive images made
# without a registry: the pause image for pod sandboxes and busybox-static for test containers.
build_images() {
  [ -x "$PAUSE_BIN" ] && [ -f "$IMAGES_DIR/pause.tar" ] && [ -f "$IMAGES_DIR/busybox.tar" ] && return 0
  mkdir -p "$KUBE_CACHE/bin" "$IMAGES_DIR"
  exec 8>"$KUBE_CACHE/.images.lock"
  flock 8
  if [ ! -x "$PAUSE_BIN" ]; then
    gcc -Os -static -Wall -DVERSION=v3.2-taintkeeper -o "$PAUSE_BIN.tmp" "$(pause_source)" \
      || die "could not compile pause.c (needs gcc and libc6-dev)"
    mv "$PAUSE_BIN.tmp" "$PAUSE_BIN"
  fi
  [ -x /bin/busybox ] || die "/bin/busybox missing (package busybox-static)"
  if [ ! -f "$IMAGES_DIR/pause.tar" ]; then
    python3 "$HERE/real_nodes/make_image.py" --tag "$PAUSE_IMAGE" --file "$PAUSE_BIN:/pause" \
      --entrypoint /pause --out "$IMAGES_DIR/pause.tar.tmp" || die "could not build the pause image"
    mv "$IMAGES_DIR/pause.tar.tmp" "$IMAGES_DIR/pause.tar"
  fi
  if [ ! -f "$IMAGES_DIR/busybox.tar" ]; then
    python3 "$HERE/real_nodes/make_image.py" --tag "$BUSYBOX_IMAGE" --busybox /bin/busybox \
      --entrypoint /bin/sh --out "$IMAGES_DIR/busybox.tar.tmp" || die "could not build the busybox image"
    mv "$IMAGES_DIR/busybox.tar.tmp" "$IMAGES_DIR/busybox.tar"
  fi
  exec 8>&-
}

# Where cert-manager's CustomResourceDefinitions are (deploy/crds of its module, pinned by the wrapper
# module hack/upstream/cert-manager and downloaded once into the Go module cache), for `crds cert-manager`.
cmd_crds() { # name
  [ "$1" = cert-manager ] || die "crds: unknown '$1' (expected cert-manager)"
  local dir
  dir=$(cd "$UPSTREAM_MODULE/cert-manager" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
        "$(go_bin)" mod download -json github.com/cert-manager/cert-manager \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || true
  if [ -z "$dir" ] || [ ! -d "$dir/deploy/crds" ]; then
    die "could not download github.com/cert-manager/cert-manager (hack/upstream/cert-manager)"
  fi
  echo "$dir/deploy/crds"
}

# Everything the demo and the suite need from the host, installed before any of it is used, so
# no test depends on what an earlier run or an earlier test happened to install.
cmd_deps() { # [--tools|--bench|--nodes]
  apt_install "${TEST_PACKAGES[@]}"
  [ "${1:-}" = --tools ] && return 0
  if [ "${1:-}" = --bench ]; then apt_install "${BENCH_PACKAGES[@]}"; return 0; fi
  apt_install "${CONTROL_PLANE_PACKAGES[@]}"
  build_etcd
  build_apiserver
  [ "${1:-}" = --nodes ] && build_node
  return 0
}

build_node() {
  apt_install "${NODE_PACKAGES[@]}"
  local name
  build_components "${NODE_COMPONENTS[@]}"
  build_images
}
