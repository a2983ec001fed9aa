# Debian packages and the Kubernetes binaries: apt installs (`deps`), Debian's kubernetes source
# package fetched once, kube-apiserver (`build`) and the node components (`build-node`) built from it
# and cached under $CACHE, the pause and busybox images; one build at a time per machine (flock).
# shellcheck shell=bash

KUBE_VERSION=1.20.2
KUBE_DEB_VERSION=1.20.5+really1.20.2-1.1+deb12u1
CACHE=${TAINTKEEPER_CACHE:-$HOME/.cache/taintkeeper}
KUBE_CACHE=$CACHE/kubernetes-$KUBE_VERSION
APISERVER_BIN=$KUBE_CACHE/bin/kube-apiserver
PAUSE_BIN=$KUBE_CACHE/bin/pause
IMAGES_DIR=$KUBE_CACHE/images
PAUSE_IMAGE=taintkeeper.local/pause:3.2
BUSYBOX_IMAGE=taintkeeper.local/busybox:latest
# What build-node builds from the source tree: every binary of a complete cluster but the apiserver.
NODE_COMPONENTS=(kubelet kube-proxy kube-scheduler kube-controller-manager)
BUILD_PACKAGES=(golang-1.19-go rsync golang-github-modern-go-reflect2-dev dpkg-dev make)
CONTROL_PLANE_PACKAGES=(etcd-server openssl curl)
# promtool (tests/unit/manifests/test_alert_rules.py) and the server tests/e2e/test_dashboard.py
# scrapes with come with Debian's prometheus package; tmux runs `status --watch` in a terminal
# (tests/integration/test_status_watch.py).
TEST_PACKAGES=(prometheus tmux)
# The load generators of bench/webhook_bench.py (`make bench`).
BENCH_PACKAGES=(wrk hey)
# conntrack: kube-proxy clears stale UDP conntrack entries with it. nftables: `down` deletes the
# iptables tables the nodes created on a machine that had none (host.sh remove_new_tables).
NODE_PACKAGES=(containerd runc containernetworking-plugins busybox-static iptables nftables conntrack gcc libc6-dev util-linux iproute2)

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

build_apiserver() {
  [ -x "$APISERVER_BIN" ] && return 0
  mkdir -p "$KUBE_CACHE"
  # One build at a time per machine: parallel test sessions share the cache.
  exec 9>"$KUBE_CACHE/.build.lock"
  flock 9
  [ -x "$APISERVER_BIN" ] && { exec 9>&-; return 0; }
  apt_install "${BUILD_PACKAGES[@]}"
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
  log "building kube-apiserver $KUBE_VERSION (first run on this machine only; a few minutes)"
  (cd "$src" && PATH=/usr/lib/go-1.19/bin:$PATH GOPROXY=off GOSUMDB=off CGO_ENABLED=0 GOFLAGS='' \
     make WHAT=cmd/kube-apiserver >"$KUBE_CACHE/build.log" 2>&1) \
    || die "kube-apiserver build failed (see $KUBE_CACHE/build.log)"
  mkdir -p "$KUBE_CACHE/bin"
  cp "$src/_output/bin/kube-apiserver" "$APISERVER_BIN.tmp" && mv "$APISERVER_BIN.tmp" "$APISERVER_BIN"
  log "cached $APISERVER_BIN"
  exec 9>&-
}

# kubelet, kube-proxy, kube-scheduler and kube-controller-manager come from the same source tree
# as kube-apiserver (fetched and patched by build_apiserver), built the same way under the same lock.
build_component() { # name (a cmd/ directory of the tree)
  local name=$1 bin=$KUBE_CACHE/bin/$1
  [ -x "$bin" ] && return 0
  build_apiserver
  exec 9>"$KUBE_CACHE/.build.lock"
  flock 9
  [ -x "$bin" ] && { exec 9>&-; return 0; }
  log "building $name $KUBE_VERSION (first run on this machine only; a few minutes)"
  (cd "$KUBE_CACHE/src" && PATH=/usr/lib/go-1.19/bin:$PATH GOPROXY=off GOSUMDB=off CGO_ENABLED=0 GOFLAGS='' \
     make WHAT="cmd/$name" >"$KUBE_CACHE/build-$name.log" 2>&1) \
    || die "$name build failed (see $KUBE_CACHE/build-$name.log)"
  cp "$KUBE_CACHE/src/_output/bin/$name" "$bin.tmp" && mv "$bin.tmp" "$bin"
  log "cached $bin"
  exec 9>&-
}

# The pause binary (static, from the tree's own pause.c) and two docker-archive images made
# without a registry: the pause image for pod sandboxes and busybox-static for test containers.
build_images() {
  [ -x "$PAUSE_BIN" ] && [ -f "$IMAGES_DIR/pause.tar" ] && [ -f "$IMAGES_DIR/busybox.tar" ] && return 0
  mkdir -p "$KUBE_CACHE/bin" "$IMAGES_DIR"
  exec 8>"$KUBE_CACHE/.images.lock"
  flock 8
  if [ ! -x "$PAUSE_BIN" ]; then
    [ -f "$KUBE_CACHE/src/build/pause/linux/pause.c" ] || build_apiserver
    gcc -Os -static -Wall -DVERSION=v3.2-taintkeeper -o "$PAUSE_BIN.tmp" "$KUBE_CACHE/src/build/pause/linux/pause.c" \
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

# Everything the demo and the suite need from the host, installed before any of it is used, so
# no test depends on what an earlier run or an earlier test happened to install.
cmd_deps() { # [--tools|--bench|--nodes]
  apt_install "${TEST_PACKAGES[@]}"
  [ "${1:-}" = --tools ] && return 0
  if [ "${1:-}" = --bench ]; then apt_install "${BENCH_PACKAGES[@]}"; return 0; fi
  apt_install "${CONTROL_PLANE_PACKAGES[@]}" "${BUILD_PACKAGES[@]}"
  build_apiserver
  [ "${1:-}" = --nodes ] && build_node
  return 0
}

build_node() {
  apt_install "${NODE_PACKAGES[@]}"
  local name
  for name in "${NODE_COMPONENTS[@]}"; do build_component "$name"; done
  build_images
}
