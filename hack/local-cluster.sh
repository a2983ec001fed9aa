#!/usr/bin/env bash
# A real kube-apiserver + etcd on loopback, for the tests and the local demo; with --nodes, a
# complete local cluster.
#
#   hack/local-cluster.sh up DIR [--nodes N]
#                                     start etcd + kube-apiserver, write DIR/kubeconfig, print its path;
#                                     with N > 0 a complete cluster: also N real nodes (containerd +
#                                     kubelet each) until Ready, kube-scheduler, kube-controller-manager
#                                     without its node lifecycle controller, kube-proxy (iptables) and a
#                                     pod network across the nodes; the apiserver then serves on the
#                                     host's IP too and admits with ServiceAccount (a DIR started plain
#                                     gets its apiserver restarted so). One such cluster per host at a time
#   hack/local-cluster.sh deploy DIR [--overlay KUSTOMIZATION]
#                                     taintkeeper from its own image and manifests into DIR's complete
#                                     cluster: build the image (make image), import it into every node's
#                                     containerd, apply manifests/kube-1.20 (or the overlay given) with
#                                     server-side apply, wait for the certificate Job's Secret and caBundle
#                                     and for both Deployments to be Available. Idempotent (hack/deploy.py;
#                                     runs with the project's .venv, or $PYTHON)
#   hack/local-cluster.sh down DIR    stop exactly the processes started for DIR and undo the host changes
#                                     its nodes and kube-proxy made (sysctls, iptables chains, dirs,
#                                     cgroups, bridges)
#   hack/local-cluster.sh nodes DIR   the real nodes as JSON (name, zone, pids, containerd socket, ...)
#   hack/local-cluster.sh stop-kubelet DIR NODE [--signal KILL|TERM] / start-kubelet DIR NODE
#                                     stop (default TERM) or start one node's kubelet; containers keep running
#   hack/local-cluster.sh build-node  only build (and cache) the kubelet, kube-proxy, kube-scheduler,
#                                     kube-controller-manager, pause and the node images
#   hack/local-cluster.sh status DIR  say whether DIR's control plane is running
#   hack/local-cluster.sh stop-apiserver DIR / start-apiserver DIR
#                                     stop or start only kube-apiserver (same port and mode; etcd keeps the data)
#   hack/local-cluster.sh build       only build (and cache) kube-apiserver
#   hack/local-cluster.sh deps [--tools|--nodes]
#                                     install every Debian package the demo and the tests use and build
#                                     (and cache) kube-apiserver; --tools: only the test tools (promtool);
#                                     --nodes: also what build-node builds. Idempotent: the test
#                                     fixtures run it before anything else
#
# Besides DIR/kubeconfig (cluster-admin), DIR/kubeconfig-<name> authenticates as the
# ServiceAccount user system:serviceaccount:taintkeeper-system:<name> for each name in
# SERVICE_ACCOUNTS (static tokens), so tests can run components under their own RBAC.
#
# No registry ships a kube-apiserver binary, so the first run on a machine builds 1.20.2 from
# Debian's `kubernetes` source package (about 3-5 minutes on 2 cores) and caches it under
# ${TAINTKEEPER_CACHE:-~/.cache/taintkeeper}. etcd comes from Debian's etcd-server.
# The apiserver runs without DefaultTolerationSeconds in every mode: left on, it would add the
# very tolerations taintkeeper's webhook adds and mask a broken webhook. Without --nodes it also
# runs without ServiceAccount admission (no controller creates `default` ServiceAccounts there).
set -euo pipefail

KUBE_VERSION=1.20.2
KUBE_DEB_VERSION=1.20.5+really1.20.2-1.1+deb12u1
CACHE=${TAINTKEEPER_CACHE:-$HOME/.cache/taintkeeper}
KUBE_CACHE=$CACHE/kubernetes-$KUBE_VERSION
APISERVER_BIN=$KUBE_CACHE/bin/kube-apiserver
ETCD_BIN=/usr/bin/etcd
ADMIN_TOKEN_USER=taintkeeper-admin
SA_NAMESPACE=taintkeeper-system
SERVICE_ACCOUNTS="taintkeeper-controller taintkeeper-webhook"
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1

die() { echo "local-cluster: $*" >&2; exit 1; }
log() { echo "local-cluster: $*" >&2; }

usage() { # the comment block at the top, up to its second empty line
  awk 'NR > 1 && /^#$/ && ++blank == 2 {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0" >&2
  exit 2
}

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
  # shellcheck disable=SC2086
  apt_install $BUILD_PACKAGES
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

KUBELET_BIN=$KUBE_CACHE/bin/kubelet
PROXY_BIN=$KUBE_CACHE/bin/kube-proxy
SCHEDULER_BIN=$KUBE_CACHE/bin/kube-scheduler
CONTROLLER_MANAGER_BIN=$KUBE_CACHE/bin/kube-controller-manager
# What build-node builds from the source tree: every binary of a complete cluster but the apiserver.
NODE_COMPONENTS="kubelet kube-proxy kube-scheduler kube-controller-manager"
BUILD_PACKAGES="golang-1.19-go rsync golang-github-modern-go-reflect2-dev dpkg-dev make"
CONTROL_PLANE_PACKAGES="etcd-server openssl curl"
# promtool (tests/unit/test_alert_rules.py) comes with Debian's prometheus package.
TEST_PACKAGES=prometheus
PAUSE_BIN=$KUBE_CACHE/bin/pause
IMAGES_DIR=$KUBE_CACHE/images
# conntrack: kube-proxy clears stale UDP conntrack entries with it.
NODE_PACKAGES="containerd runc containernetworking-plugins busybox-static iptables conntrack gcc libc6-dev util-linux iproute2"
PAUSE_IMAGE=taintkeeper.local/pause:3.2
BUSYBOX_IMAGE=taintkeeper.local/busybox:latest
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

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
cmd_deps() { # [--tools|--nodes]
  # shellcheck disable=SC2086
  apt_install $TEST_PACKAGES
  [ "${1:-}" = --tools ] && return 0
  # shellcheck disable=SC2086
  apt_install $CONTROL_PLANE_PACKAGES $BUILD_PACKAGES
  build_apiserver
  [ "${1:-}" = --nodes ] && build_node
  return 0
}

build_node() {
  # shellcheck disable=SC2086
  apt_install $NODE_PACKAGES
  local name
  for name in $NODE_COMPONENTS; do build_component "$name"; done
  build_images
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

running() { # pid: the process exists and is not a zombie (an exited child of ours waits for init to reap it)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

pid_alive() { # pidfile dir: the pid is alive and its command line mentions DIR
  local pidfile=$1 dir=$2 pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"
}

make_pki() {
  local pki=$1
  mkdir -p "$pki"
  (umask 077
   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
     -subj "/CN=taintkeeper-local-ca" -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
   openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
   openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
   python3 -c 'import secrets; print(secrets.token_hex(24))' >"$pki/admin.token")
  issue_apiserver_cert "$pki" 127.0.0.1 "$KUBERNETES_SERVICE_IP"
  # token,user,uid,"groups": later suites append ServiceAccount identities here.
  printf '%s,%s,%s,"system:masters"\n' "$(cat "$pki/admin.token")" "$ADMIN_TOKEN_USER" "$ADMIN_TOKEN_USER" >"$pki/tokens.csv"
  local sa token
  for sa in $SERVICE_ACCOUNTS; do
    token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
    (umask 077; echo "$token" >"$pki/$sa.token")
    printf '%s,system:serviceaccount:%s:%s,%s,"system:serviceaccounts,system:serviceaccounts:%s,system:authenticated"\n' \
      "$token" "$SA_NAMESPACE" "$sa" "$sa" "$SA_NAMESPACE" >>"$pki/tokens.csv"
  done
}

# The serving certificate, for these IPs (recorded in apiserver.ips): 127.0.0.1 for the host's
# clients, the `kubernetes` Service IP for pods' in-cluster clients, the host's IP in a complete cluster.
issue_apiserver_cert() { # pki ip...
  local pki=$1 sans="" ip
  shift
  for ip in "$@"; do sans+="IP:$ip,"; done
  (umask 077
   openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=kube-apiserver" \
     -keyout "$pki/apiserver.key.tmp" -out "$pki/apiserver.csr" 2>/dev/null
   printf 'subjectAltName=%sDNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
     "$sans" >"$pki/apiserver.ext"
   openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
     -days 3650 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt.tmp" 2>/dev/null) \
    || die "could not issue the kube-apiserver certificate in $pki"
  mv "$pki/apiserver.key.tmp" "$pki/apiserver.key"
  mv "$pki/apiserver.crt.tmp" "$pki/apiserver.crt"
  printf '%s\n' "$@" >"$pki/apiserver.ips"
}

# A client certificate signed by the cluster CA and a kubeconfig using it (for 127.0.0.1:API_PORT).
make_client_kubeconfig() { # dir keydir subject user output
  local dir=$1 kd=$2 subject=$3 user=$4 out=$5
  [ -f "$out" ] && return 0
  mkdir -p "$kd"
  (umask 077
   openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subject" \
     -keyout "$kd/client.key" -out "$kd/client.csr" 2>/dev/null
   printf 'extendedKeyUsage=clientAuth\n' >"$kd/client.ext"
   openssl x509 -req -in "$kd/client.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" -CAcreateserial \
     -days 3650 -extfile "$kd/client.ext" -out "$kd/client.crt" 2>/dev/null) \
    || die "could not make the certificate $subject"
  write_kubeconfig "$dir" "$out" "$user" "    client-certificate-data: $(base64 -w0 <"$kd/client.crt")
    client-key-data: $(base64 -w0 <"$kd/client.key")"
}

write_kubeconfig() { # dir output user credentials: a kubeconfig for DIR's apiserver on 127.0.0.1
  local dir=$1 out=$2 user=$3 credentials=$4
  # shellcheck disable=SC1091
  . "$dir/ports"
  (umask 077
   cat >"$out.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 <"$dir/pki/ca.crt")
users:
- name: $user
  user:
$credentials
contexts:
- name: local
  context: {cluster: local, user: $user}
current-context: local
KC
  )
  mv "$out.tmp" "$out"
}

wait_ready() {
  local dir=$1 port=$2 deadline=$((SECONDS + 60))
  while [ $SECONDS -lt $deadline ]; do
    # By pid alone: right after the start, /proc/PID/cmdline can read empty while setsid execs.
    running "$(cat "$dir/apiserver.pid")" || die "kube-apiserver exited; see $dir/logs/kube-apiserver.log"
    if curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(cat "$dir/pki/admin.token")" \
         "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  die "kube-apiserver not ready after 60s; see $dir/logs/kube-apiserver.log"
}

# ---------------------------------------------------------------------------------------------
# Real nodes: one containerd + one kubelet per node, each pair in its own mount namespace.
#
# Layout: DIR/nodes.env (NODES, SLOT, images), DIR/nodes/<name>/{node.env, pki, kubeconfig,
# kubelet.yaml, containerd.toml, cni/, host/ (what is bind-mounted over the fixed host paths in
# the node's namespace), ns.pid, containerd.pid, kubelet.pid, logs}.
#
# Host state is machine-wide, so it is tracked outside DIR under $CACHE/host (flock'ed): the
# first `up` with nodes records a baseline (sysctls, iptables chains, the fixed host directories
# that did not exist), every DIR with nodes registers itself, and the last `down` restores the
# baseline. Everything per node (cgroup root, bridge, subnet) is keyed by a machine-wide slot,
# so several DIRs can run nodes side by side.
HOST_STATE=$CACHE/host
# What a kubelet (1.20, setupKernelTunables), the CNI bridge plugin and kube-proxy (route_localnet;
# the conntrack limits and timeouts only if its config asked, which ours does not; it only reads
# bridge-nf-call-iptables) write. Keys the kernel lacks (no br_netfilter, no conntrack) are skipped.
NODE_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
net.netfilter.nf_conntrack_tcp_timeout_close_wait"
# Fixed paths the kubelet, containerd and CNI use whatever their flags say; in each node's mount
# namespace a per-node directory is bind-mounted over each (host side: an empty mountpoint).
NODE_BIND_PATHS="/var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /run/netns /run/containerd"

host_lock() { mkdir -p "$HOST_STATE/active"; exec 7>"$HOST_STATE/lock"; flock 7; }
host_unlock() { exec 7>&-; }

iptables_chains() { # the "<family> <table> <chain>" lines of the current rule set
  local family
  for family in iptables ip6tables; do
    command -v "$family-save" >/dev/null 2>&1 || continue
    "$family-save" 2>/dev/null | awk -v f="$family" '/^\*/ {t = substr($0, 2)} /^:/ {print f, t, substr($1, 2)}'
  done
}

# Deletes every KUBE-*/CNI-* chain not in the baseline, and the rules that jump to it.
restore_iptables() {
  local baseline=$1 family script
  for family in iptables ip6tables; do
    command -v "$family-save" >/dev/null 2>&1 || continue
    script=$("$family-save" 2>/dev/null | awk -v f="$family" -v base="$baseline" '
      BEGIN { while ((getline line < base) > 0) known[line] = 1 }
      /^\*/ { table = substr($0, 2); n = 0; split("", gone); split("", rules); next }
      /^:/ { c = substr($1, 2); if (c ~ /^(KUBE-|CNI-)/ && !((f " " table " " c) in known)) gone[c] = 1; next }
      /^-A / { rules[++n] = $0; next }
      /^COMMIT/ {
        body = ""
        for (i = 1; i <= n; i++) {
          split(rules[i], w, " ")
          if (w[2] in gone) continue
          if (match(rules[i], / -[jg] [^ ]+/)) {
            target = substr(rules[i], RSTART + 4, RLENGTH - 4)
            if (target in gone) body = body "-D " substr(rules[i], 4) "\n"
          }
        }
        for (c in gone) body = body "-F " c "\n"
        for (c in gone) body = body "-X " c "\n"
        if (body != "") printf "*%s\n%sCOMMIT\n", table, body
      }')
    if [ -n "$script" ]; then
      printf '%s\n' "$script" | "$family-restore" --noflush || log "could not remove $family chains: $script"
    fi
  done
}

record_baseline() {
  local boot
  boot=$(cat /proc/sys/kernel/random/boot_id)
  if [ -f "$HOST_STATE/baseline/boot_id" ] && [ "$(cat "$HOST_STATE/baseline/boot_id")" = "$boot" ]; then
    return 0 # an earlier run on this boot left changes behind: its baseline is still the truth
  fi
  rm -rf "$HOST_STATE/baseline"
  mkdir -p "$HOST_STATE/baseline"
  local key
  for key in $NODE_SYSCTLS; do
    [ -e "/proc/sys/${key//.//}" ] || continue
    printf '%s=%s\n' "$key" "$(sysctl -n "$key")"
  done >"$HOST_STATE/baseline/sysctls"
  iptables_chains >"$HOST_STATE/baseline/iptables"
  : >"$HOST_STATE/baseline/created-dirs"
  echo "$boot" >"$HOST_STATE/baseline/boot_id"
}

restore_baseline() {
  local base=$HOST_STATE/baseline line key value path
  [ -d "$base" ] || return 0
  while IFS= read -r line; do
    key=${line%%=*} value=${line#*=}
    [ "$(sysctl -n "$key")" = "$value" ] || sysctl -q -w "$key=$value" || log "could not restore $key=$value"
  done <"$base/sysctls"
  restore_iptables "$base/iptables"
  # deepest first
  sort -r "$base/created-dirs" | while IFS= read -r path; do
    [ -n "$path" ] || continue
    if mountpoint -q "$path"; then
      log "$path is still a mountpoint; left in place"
    else
      rmdir "$path" 2>/dev/null || log "could not remove $path (not empty?)"
    fi
  done
  rm -rf "$base"
}

host_dirs() { # create the fixed host mountpoints that are missing, recording them
  local path
  for path in $NODE_BIND_PATHS; do
    if [ ! -e "$path" ]; then
      # record every directory created, parents first
      local created=() p=$path
      while [ ! -e "$p" ]; do created=("$p" "${created[@]}"); p=$(dirname "$p"); done
      mkdir -p "$path"
      printf '%s\n' "${created[@]}" >>"$HOST_STATE/baseline/created-dirs"
    fi
  done
}

dir_id() { printf '%s' "$1" | sha1sum | cut -c1-10; }

prune_active() { # forget registrations whose DIR has no live node process
  local entry d
  for entry in "$HOST_STATE"/active/*; do
    [ -f "$entry" ] || continue
    d=$(sed -n 's/^DIR=//p' "$entry")
    if [ -z "$d" ] || ! node_processes_alive "$d"; then
      log "forgetting stale node registration for $d"
      [ -n "$d" ] && components_down "$d"
      [ -n "$d" ] && [ -d "$d/nodes" ] && teardown_nodes "$d"
      rm -f "$entry"
    fi
  done
}

node_processes_alive() {
  local d=$1 nd
  for nd in "$d"/nodes/*/; do
    [ -d "$nd" ] || continue
    if pid_alive "$nd/ns.pid" "$d" || pid_alive "$nd/containerd.pid" "$d" || pid_alive "$nd/kubelet.pid" "$d"; then
      return 0
    fi
  done
  return 1
}

allocate_slot() { # the smallest slot no active DIR uses
  local slot used
  used=$(cat "$HOST_STATE"/active/* 2>/dev/null | sed -n 's/^SLOT=//p')
  for slot in $(seq 0 99); do
    grep -qx "$slot" <<<"$used" || { echo "$slot"; return 0; }
  done
  die "more than 100 directories run real nodes at once"
}

node_ip() {
  local ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)
  [ -n "$ip" ] || ip=$(ip -4 -o addr show scope global | awk '{sub(/\/.*/, "", $4); print $4; exit}')
  [ -n "$ip" ] || die "no non-loopback IPv4 address for the nodes (a kubelet refuses a loopback --node-ip)"
  echo "$ip"
}

cgroup_v1_mounts() { findmnt -rn -t cgroup -o TARGET; }
cgroup_all_mounts() { findmnt -rn -t cgroup,cgroup2 -o TARGET; }

make_node_pki() { # dir nodedir name
  local dir=$1 nd=$2 name=$3
  make_client_kubeconfig "$dir" "$nd/pki" "/O=system:nodes/CN=system:node:$name" "$name" "$nd/kubeconfig"
}

write_node_config() { # dir nodedir
  local dir=$1 nd=$2
  # shellcheck disable=SC1091
  . "$nd/node.env"
  mkdir -p "$nd/cni" "$nd/host" "$nd/containerd/root" "$nd/containerd/state" "$nd/containerd/opt" "$nd/runc" \
    "$nd/volume-plugins" "$nd/logs"
  local path
  for path in $NODE_BIND_PATHS; do mkdir -p "$nd/host$path"; done
  cat >"$nd/containerd.toml" <<TOML
version = 2
root = "$nd/containerd/root"
state = "$nd/containerd/state"
[grpc]
  address = "$nd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # without it every sandbox fails: containerd would set a negative oom_score_adj (no CAP_SYS_RESOURCE)
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$nd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni"
TOML
  cat >"$nd/cni/10-taintkeeper.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "taintkeeper-$BRIDGE",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$SUBNET"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "$nd/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
  cat >"$nd/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $HEALTHZ_PORT
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
failSwapOn: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
nodeStatusUpdateFrequency: 1s
nodeLeaseDurationSeconds: 8
syncFrequency: 5s
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
YAML
}

start_node_ns() { # dir nodedir
  local dir=$1 nd=$2 path mounts=""
  pid_alive "$nd/ns.pid" "$dir" && return 0
  for path in $NODE_BIND_PATHS; do
    mounts+="mount --bind '$nd/host$path' '$path' && "
  done
  # The holder keeps the namespace (and the bind mounts) alive; its command line names DIR.
  setsid unshare -m --propagation private bash -c "${mounts}exec -a 'taintkeeper-node-ns $nd' sleep infinity" \
    >>"$nd/logs/ns.log" 2>&1 </dev/null &
  echo $! >"$nd/ns.pid"
  local deadline=$((SECONDS + 10))
  until pid_alive "$nd/ns.pid" "$dir"; do
    [ -d "/proc/$(cat "$nd/ns.pid")" ] || die "the mount namespace for $nd did not start; see $nd/logs/ns.log"
    [ $SECONDS -lt $deadline ] || die "the mount namespace for $nd did not start; see $nd/logs/ns.log"
    sleep 0.05
  done
}

start_containerd() { # dir nodedir
  local dir=$1 nd=$2
  pid_alive "$nd/containerd.pid" "$dir" && return 0
  setsid nsenter -t "$(cat "$nd/ns.pid")" -m -- containerd --config "$nd/containerd.toml" \
    >>"$nd/logs/containerd.log" 2>&1 </dev/null &
  echo $! >"$nd/containerd.pid"
  local deadline=$((SECONDS + 30))
  until ctr -a "$nd/containerd.sock" version >/dev/null 2>&1; do
    pid_alive "$nd/containerd.pid" "$dir" || die "containerd exited; see $nd/logs/containerd.log"
    [ $SECONDS -lt $deadline ] || die "containerd not answering after 30s; see $nd/logs/containerd.log"
    sleep 0.05
  done
  local image
  for image in pause busybox; do
    ctr -a "$nd/containerd.sock" -n k8s.io images import "$IMAGES_DIR/$image.tar" >>"$nd/logs/import.log" 2>&1 \
      || die "could not import the $image image; see $nd/logs/import.log"
  done
}

# shellcheck disable=SC2153 # NODE, ZONE, ... come from node.env
start_kubelet() { # dir nodedir
  local dir=$1 nd=$2
  pid_alive "$nd/kubelet.pid" "$dir" && return 0
  pid_alive "$nd/containerd.pid" "$dir" || die "containerd of $nd is not running"
  # shellcheck disable=SC1091
  . "$nd/node.env"
  setsid nsenter -t "$(cat "$nd/ns.pid")" -m -- "$KUBELET_BIN" --config "$nd/kubelet.yaml" \
    --kubeconfig "$nd/kubeconfig" --container-runtime remote \
    --container-runtime-endpoint "unix://$nd/containerd.sock" --pod-infra-container-image "$PAUSE_IMAGE" \
    --root-dir /var/lib/kubelet --volume-plugin-dir "$nd/volume-plugins" --hostname-override "$NODE" \
    --node-ip "$NODE_IP" --node-labels "topology.kubernetes.io/zone=$ZONE,failure-domain.beta.kubernetes.io/zone=$ZONE" \
    --v=1 >>"$nd/logs/kubelet.log" 2>&1 </dev/null &
  echo $! >"$nd/kubelet.pid"
}

pre_create_cgroups() { # cgroup-root
  local root=$1 mnt
  for mnt in $(cgroup_v1_mounts); do
    [ -d "$mnt/$root" ] && continue
    mkdir "$mnt/$root" || die "cannot create cgroup $mnt/$root"
    if [ -f "$mnt/cpuset.cpus" ]; then
      cat "$mnt/cpuset.cpus" >"$mnt/$root/cpuset.cpus"
      cat "$mnt/cpuset.mems" >"$mnt/$root/cpuset.mems"
    fi
  done
}

node_ready() { # dir name -> 0 when the Node's Ready condition is True
  local dir=$1 name=$2
  # shellcheck disable=SC1091
  . "$dir/ports"
  curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(cat "$dir/pki/admin.token")" \
    "https://127.0.0.1:$API_PORT/api/v1/nodes/$name" 2>/dev/null | python3 -c '
import json, sys
node = json.load(sys.stdin)
ready = [c for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
sys.exit(0 if ready and ready[0]["status"] == "True" else 1)' 2>/dev/null
}

wait_nodes_ready() { # dir timeout names...
  local dir=$1 timeout=$2 name nd pending
  shift 2
  local deadline=$((SECONDS + timeout))
  while :; do
    pending=""
    for name in "$@"; do
      nd=$dir/nodes/$name
      pid_alive "$nd/kubelet.pid" "$dir" || die "kubelet of $name exited; see $nd/logs/kubelet.log:
$(tail -n 15 "$nd/logs/kubelet.log")"
      node_ready "$dir" "$name" || pending+=" $name"
    done
    [ -z "$pending" ] && return 0
    [ $SECONDS -lt $deadline ] || die "nodes not Ready after ${timeout}s:$pending (logs in $dir/nodes/<name>/logs)"
    sleep 0.5
  done
}

# shellcheck disable=SC2153 # NODES comes from nodes.env
nodes_up() { # dir count
  local dir=$1 count=$2
  if [ -f "$dir/nodes.env" ]; then
    # shellcheck disable=SC1091
    . "$dir/nodes.env"
    local all_alive=1 name
    for name in $NODES; do
      for p in ns containerd kubelet; do
        pid_alive "$dir/nodes/$name/$p.pid" "$dir" || all_alive=0
      done
    done
    if [ "$all_alive" = 1 ] && [ "$(wc -w <<<"$NODES")" -eq "$count" ]; then return 0; fi
    nodes_down "$dir"
  fi
  build_node
  if [ -z "$(cgroup_v1_mounts)" ]; then die "real nodes need cgroup v1 hierarchies (none mounted)"; fi
  grep -qw overlay /proc/filesystems || die "real nodes need overlayfs (not in /proc/filesystems)"
  local ip id slot
  ip=$(node_ip)
  id=$(dir_id "$dir")
  host_lock
  prune_active
  local other
  other=$(other_node_dir "$dir")
  if [ -n "$other" ]; then
    host_unlock
    die "$other already runs real nodes on this host, with kube-proxy owning the host's KUBE-* iptables chains; one complete cluster at a time (run: down $other)"
  fi
  if ! compgen -G "$HOST_STATE/active/*" >/dev/null; then record_baseline; fi
  slot=$(allocate_slot)
  printf 'DIR=%s\nSLOT=%s\n' "$dir" "$slot" >"$HOST_STATE/active/$id"
  host_dirs
  host_unlock

  local names=() i name nd zone
  for i in $(seq 1 "$count"); do
    name=node-$i
    names+=("$name")
    nd=$dir/nodes/$name
    mkdir -p "$nd/logs"
    if [ $((i % 2)) -eq 1 ]; then zone="zone-a"; else zone="zone-b"; fi
    cat >"$nd/node.env" <<ENV
NODE=$name
INDEX=$i
ZONE=$zone
NODE_IP=$ip
KUBELET_PORT=$(free_port)
HEALTHZ_PORT=$(free_port)
CGROUP_ROOT=taintkeeper-$slot-$name
BRIDGE=tk$slot-$i
SUBNET=10.$((100 + slot)).$i.0/24
ENV
    make_node_pki "$dir" "$nd" "$name"
    write_node_config "$dir" "$nd"
  done
  printf 'NODES="%s"\nSLOT=%s\nPAUSE_IMAGE=%s\nBUSYBOX_IMAGE=%s\n' "${names[*]}" "$slot" "$PAUSE_IMAGE" \
    "$BUSYBOX_IMAGE" >"$dir/nodes.env"
  for name in "${names[@]}"; do
    nd=$dir/nodes/$name
    # shellcheck disable=SC1091
    . "$nd/node.env"
    pre_create_cgroups "$CGROUP_ROOT"
    start_node_ns "$dir" "$nd"
    start_containerd "$dir" "$nd"
    start_kubelet "$dir" "$nd"
  done
  wait_nodes_ready "$dir" 120 "${names[@]}"
  log "$count real node(s) Ready: ${names[*]}"
}

# ---------------------------------------------------------------------------------------------
# The rest of a complete cluster, started with the nodes: kube-scheduler, kube-controller-manager
# and kube-proxy, on the host, each with a client certificate (DIR/components/<name>/) for the
# user the apiserver's bootstrap RBAC already binds (system:kube-scheduler,
# system:kube-controller-manager, system:kube-proxy), pidfiles DIR/<name>.pid, logs
# DIR/logs/<name>.log, ports in DIR/components.env (health endpoints on free loopback ports;
# kube-scheduler's and kube-controller-manager's serve /healthz only: no delegated authentication,
# which without a front proxy CA would only log an error every minute).
#
# kube-controller-manager runs every default controller but nodelifecycle (in 1.20 the node
# monitor AND the NoExecute taint manager): taintkeeper's controller is the only one that taints
# nodes and evicts pods. nodeipam (no --allocate-node-cidrs: every node has its own CNI subnet) and
# the cloud loops (no cloud provider) are off too. It signs ServiceAccount tokens with DIR/pki/sa.key
# (the apiserver verifies them with sa.pub) and runs each controller under its own ServiceAccount.
#
# ONE kube-proxy, not one per node: every node lives in the host's network namespace (they differ
# only in their mount namespace), so there is one set of iptables rules for all of them. kube-proxy
# (iptables mode) owns KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ, KUBE-SVC-*,
# KUBE-SEP-*, ... outright: each sync rewrites them whole and deletes the KUBE-SVC/SEP chains it does
# not know. N kube-proxies writing the same chains would undo each other's syncs (and each would
# delete the chains of the services the others were in the middle of adding), for rules that are
# the same for every node anyway (ClusterIP rules do not depend on the node). It runs as node-1
# (--hostname-override: the node it reports events for and counts as local for
# externalTrafficPolicy=Local); every node has the same IP. For the same reason only one DIR with
# nodes can run on a host at once (nodes_up refuses a second one): two clusters' kube-proxies would
# fight over the same chains.
#
# The pod network: each node's CNI bridge tk<slot>-<i> holds its own /24 of 10.(100+slot).0.0/16,
# and all bridges are in the host's network namespace, so the host has a connected route to every
# pod subnet: it reaches every pod, and a pod on node-1 reaches a pod on node-2 through its gateway
# (the host routes between the bridges; net.ipv4.ip_forward=1, set here and restored by down). No
# overlay and no masquerading is needed; kube-proxy gets that /16 as its cluster CIDR.
#
# The 1.20 apiserver's TaintNodesByCondition admission gives every new Node
# node.kubernetes.io/not-ready:NoSchedule; the node lifecycle controller would lift it once the
# node is Ready. With that controller off and taintkeeper's controller not necessarily running,
# `up` lifts it once for the nodes it registered, so they are schedulable; after that nothing but
# taintkeeper's controller taints or untaints nodes.
COMPONENTS="kube-scheduler kube-controller-manager kube-proxy"
KCM_CONTROLLERS='*,-nodelifecycle,-nodeipam,-route,-service,-cloud-node-lifecycle'
REGISTRATION_TAINT=node.kubernetes.io/not-ready

cluster_mode() { # dir -> plain or complete (DIR/mode.env, written by up)
  local mode
  mode=$(sed -n 's/^MODE=//p' "$1/mode.env" 2>/dev/null)
  echo "${mode:-plain}"
}

cluster_node_ip() { sed -n 's/^NODE_IP=//p' "$1/mode.env" 2>/dev/null; }

set_mode() { # dir mode [node ip]
  printf 'MODE=%s\nNODE_IP=%s\n' "$2" "${3:-}" >"$1/mode.env"
}

# The apiserver of a complete cluster must be reachable from pods (the `kubernetes` Service is
# DNATed to its advertised address, and a DNAT to 127.0.0.1 from a pod is dropped as martian), so
# it serves on every address, advertises the host's IP, and that IP is in its certificate.
ensure_apiserver_cert() { # dir node-ip
  local dir=$1 ip=$2
  grep -qx -- "$ip" "$dir/pki/apiserver.ips" 2>/dev/null && grep -qx -- "$KUBERNETES_SERVICE_IP" "$dir/pki/apiserver.ips" \
    && return 0
  issue_apiserver_cert "$dir/pki" 127.0.0.1 "$KUBERNETES_SERVICE_IP" "$ip"
}

other_node_dir() { # dir -> another DIR registered with live nodes on this host (call under host_lock after prune_active)
  local dir=$1 entry d
  for entry in "$HOST_STATE"/active/*; do
    [ -f "$entry" ] || continue
    d=$(sed -n 's/^DIR=//p' "$entry")
    if [ -n "$d" ] && [ "$d" != "$dir" ]; then echo "$d"; return 0; fi
  done
}

# Early, before anything starts (nodes_up checks again under the host lock).
refuse_second_cluster() { # dir
  local other
  other=$(other_node_dir "$1")
  if [ -n "$other" ] && node_processes_alive "$other"; then
    die "$other already runs real nodes on this host, with kube-proxy owning the host's KUBE-* iptables chains; one complete cluster at a time (run: down $other)"
  fi
  return 0
}

api_get() { # dir path -> the object's JSON (admin token); fails on any HTTP error
  local dir=$1 path=$2
  # shellcheck disable=SC1091
  . "$dir/ports"
  curl -fsS --max-time 5 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(cat "$dir/pki/admin.token")" \
    "https://127.0.0.1:$API_PORT$path" 2>/dev/null
}

healthy() { # url: GET answers 200 "ok" (the components' own self-signed serving certs: -k)
  [ "$(curl -ksS --max-time 2 "$1" 2>/dev/null)" = ok ]
}

write_components_env() { # dir
  local dir=$1
  [ -f "$dir/components.env" ] && return 0
  printf 'SCHEDULER_PORT=%s\nCONTROLLER_MANAGER_PORT=%s\nPROXY_HEALTHZ_PORT=%s\nPROXY_METRICS_PORT=%s\n' \
    "$(free_port)" "$(free_port)" "$(free_port)" "$(free_port)" >"$dir/components.env"
}

start_scheduler() { # dir
  local dir=$1 cd=$1/components/kube-scheduler
  pid_alive "$dir/kube-scheduler.pid" "$dir" && return 0
  make_client_kubeconfig "$dir" "$cd" "/CN=system:kube-scheduler" system:kube-scheduler "$cd/kubeconfig"
  # shellcheck disable=SC1091
  . "$dir/components.env"
  mkdir -p "$cd/certs"
  setsid "$SCHEDULER_BIN" --kubeconfig "$cd/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --port 0 --cert-dir "$cd/certs" \
    --leader-elect=false --profiling=false --v=1 \
    >>"$dir/logs/kube-scheduler.log" 2>&1 </dev/null &
  echo $! >"$dir/kube-scheduler.pid"
}

start_controller_manager() { # dir
  local dir=$1 cd=$1/components/kube-controller-manager
  pid_alive "$dir/kube-controller-manager.pid" "$dir" && return 0
  make_client_kubeconfig "$dir" "$cd" "/CN=system:kube-controller-manager" system:kube-controller-manager "$cd/kubeconfig"
  # shellcheck disable=SC1091
  . "$dir/components.env"
  mkdir -p "$cd/certs"
  setsid "$CONTROLLER_MANAGER_BIN" --kubeconfig "$cd/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" --port 0 --cert-dir "$cd/certs" \
    --controllers "$KCM_CONTROLLERS" --leader-elect=false \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file "$dir/pki/ca.crt" --cluster-signing-key-file "$dir/pki/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false \
    --profiling=false --v=1 \
    >>"$dir/logs/kube-controller-manager.log" 2>&1 </dev/null &
  echo $! >"$dir/kube-controller-manager.pid"
}

start_proxy() { # dir node-ip slot hostname
  local dir=$1 ip=$2 slot=$3 host=$4 cd=$1/components/kube-proxy
  pid_alive "$dir/kube-proxy.pid" "$dir" && return 0
  make_client_kubeconfig "$dir" "$cd" "/CN=system:kube-proxy" system:kube-proxy "$cd/kubeconfig"
  # shellcheck disable=SC1091
  . "$dir/components.env"
  # conntrack maxPerCore 0 and timeouts 0s: leave the host's conntrack table alone. oomScoreAdj 0:
  # the default -999 needs CAP_SYS_RESOURCE, which root lacks here. bindAddress: the node IP.
  cat >"$cd/config.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $cd/kubeconfig
mode: iptables
hostnameOverride: $host
bindAddress: $ip
clusterCIDR: 10.$((100 + slot)).0.0/16
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  masqueradeAll: false
  syncPeriod: 30s
  minSyncPeriod: 0s
YAML
  setsid "$PROXY_BIN" --config "$cd/config.yaml" --v=1 \
    >>"$dir/logs/kube-proxy.log" 2>&1 </dev/null &
  echo $! >"$dir/kube-proxy.pid"
}

lift_registration_taints() { # dir names...: drop not-ready:NoSchedule from these (Ready) nodes
  local dir=$1
  shift
  # shellcheck disable=SC1091
  . "$dir/ports"
  API="https://127.0.0.1:$API_PORT" CA="$dir/pki/ca.crt" TOKEN="$(cat "$dir/pki/admin.token")" \
    TAINT="$REGISTRATION_TAINT" python3 - "$@" <<'PY' || die "could not lift the registration taints of $*"
import json, os, ssl, sys, urllib.error, urllib.request

context = ssl.create_default_context(cafile=os.environ["CA"])
headers = {"Authorization": "Bearer " + os.environ["TOKEN"]}

def call(method, path, body=None, content_type=None):
    request = urllib.request.Request(os.environ["API"] + path, method=method, headers=dict(headers),
                                     data=None if body is None else json.dumps(body).encode())
    if content_type:
        request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return json.load(response)

for name in sys.argv[1:]:
    for _ in range(10):
        node = call("GET", f"/api/v1/nodes/{name}")
        taints = node["spec"].get("taints") or []
        kept = [t for t in taints if (t["key"], t["effect"]) != (os.environ["TAINT"], "NoSchedule")]
        if kept == taints:
            break
        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
                 {"op": "replace", "path": "/spec/taints", "value": kept}]
        try:
            call("PATCH", f"/api/v1/nodes/{name}", patch, "application/json-patch+json")
            break
        except urllib.error.HTTPError as error:
            if error.code not in (409, 422):  # a failed test: the node changed, read it again
                raise
    else:
        sys.exit(f"{name}: the node kept changing")
PY
}

# 0 when the cluster serves pods: every component healthy, the `default` ServiceAccount has its
# token (pods in `default` can be admitted), the `kubernetes` Service's endpoints are the host's IP.
# What is not yet goes to PENDING (not printed: a subshell would swallow die).
components_ready() { # dir node-ip
  local dir=$1 ip=$2 name pending=""
  # shellcheck disable=SC1091
  . "$dir/ports"
  # shellcheck disable=SC1091
  . "$dir/components.env"
  for name in $COMPONENTS; do
    pid_alive "$dir/$name.pid" "$dir" || die "$name exited; see $dir/logs/$name.log:
$(tail -n 15 "$dir/logs/$name.log")"
  done
  healthy "https://127.0.0.1:$SCHEDULER_PORT/healthz" || pending+=" kube-scheduler"
  healthy "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz" || pending+=" kube-controller-manager"
  # kube-proxy's answers 200 (with JSON) once it has synced its rules, 503 before
  curl -fsS --max-time 2 "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz" >/dev/null 2>&1 || pending+=" kube-proxy"
  api_get "$dir" /api/v1/namespaces/default/serviceaccounts/default \
    | python3 -c 'import json, sys; sys.exit(0 if json.load(sys.stdin).get("secrets") else 1)' 2>/dev/null \
    || pending+=" default-serviceaccount-token"
  api_get "$dir" /api/v1/namespaces/default/endpoints/kubernetes | EXPECT="$ip:$API_PORT" python3 -c '
import json, os, sys
subsets = json.load(sys.stdin).get("subsets") or []
seen = sorted("%s:%s" % (a["ip"], p["port"]) for s in subsets for a in s.get("addresses") or [] for p in s.get("ports") or [])
sys.exit(0 if seen == [os.environ["EXPECT"]] else 1)' 2>/dev/null || pending+=" kubernetes-endpoints"
  PENDING=$pending
  [ -z "$pending" ]
}

components_up() { # dir: after nodes_up
  local dir=$1 ip
  ip=$(cluster_node_ip "$dir")
  # shellcheck disable=SC1091
  . "$dir/nodes.env"
  write_components_env "$dir"
  # the routed pod network (see above); restored with the rest of the baseline
  sysctl -q -w net.ipv4.ip_forward=1 || die "could not set net.ipv4.ip_forward=1"
  start_scheduler "$dir"
  start_controller_manager "$dir"
  local slot first
  slot=$(sed -n 's/^SLOT=//p' "$dir/nodes.env")
  first=$(sed -n 's/^NODES="\([^ "]*\).*/\1/p' "$dir/nodes.env")
  start_proxy "$dir" "$ip" "$slot" "$first"
  # shellcheck disable=SC2086
  lift_registration_taints "$dir" $NODES
  local deadline=$((SECONDS + 120))
  until components_ready "$dir" "$ip"; do
    [ $SECONDS -lt $deadline ] || die "complete cluster not ready after 120s:$PENDING (logs in $dir/logs)"
    sleep 0.3
  done
  log "kube-scheduler, kube-controller-manager (all but nodelifecycle), kube-proxy running; pods reach the apiserver at $KUBERNETES_SERVICE_IP:443 -> $ip"
}

components_down() { # dir
  local dir=$1 name
  for name in kube-proxy kube-controller-manager kube-scheduler; do
    stop_pidfile "$dir/$name.pid" "$dir"
  done
  return 0
}

# `up DIR --nodes N`: the apiserver in complete mode (restarted if it was started plain), the nodes,
# then the other components.
complete_up() { # dir count
  local dir=$1 count=$2 ip
  ip=$(node_ip)
  refuse_second_cluster "$dir"
  if [ "$(cluster_mode "$dir")" != complete ] || [ "$(cluster_node_ip "$dir")" != "$ip" ]; then
    log "restarting kube-apiserver in $dir for a complete cluster (ServiceAccount admission, serving on $ip too)"
    set_mode "$dir" complete "$ip"
    ensure_apiserver_cert "$dir" "$ip"
    stop_pidfile "$dir/apiserver.pid" "$dir"
    start_apiserver "$dir"
  fi
  nodes_up "$dir" "$count"
  components_up "$dir"
}

kill_pidfile() { # pidfile dir signal: signal a recorded process and wait (up to 10 s) for it to exit
  local pidfile=$1 dir=$2 sig=$3 pid
  pid_alive "$pidfile" "$dir" || { rm -f "$pidfile"; return 0; }
  pid=$(cat "$pidfile")
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    running "$pid" || break
    sleep 0.1
  done
  if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$pidfile"
}

ns_processes() { # pid of a namespace holder -> every other pid in its mount namespace
  local holder=$1 p
  [ -e "/proc/$holder/ns/mnt" ] || return 0
  for p in /proc/[0-9]*; do
    # -ef: same device and inode, i.e. the same namespace (no fork per process)
    if [ "${p#/proc/}" != "$holder" ] && [[ $p/ns/mnt -ef /proc/$holder/ns/mnt ]]; then echo "${p#/proc/}"; fi
  done 2>/dev/null
  return 0
}

cgroup_pids() { # cgroup root name -> pids in it (any hierarchy)
  local root=$1 mnt
  for mnt in $(cgroup_all_mounts); do
    if [ -d "$mnt/$root" ]; then find "$mnt/$root" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
  done | sort -u
}

# Stop one node's processes and undo what is per node: shims and containers, cgroups, bridge.
teardown_node() { # dir nodedir
  local dir=$1 nd=$2 holder="" pids
  [ -f "$nd/node.env" ] || return 0
  set +e # best effort: one step failing must not leave the rest undone
  # shellcheck disable=SC1091
  . "$nd/node.env"
  # no need to be gentle: every container of the node is killed below anyway
  kill_pidfile "$nd/kubelet.pid" "$dir" KILL
  kill_pidfile "$nd/containerd.pid" "$dir" KILL
  if pid_alive "$nd/ns.pid" "$dir"; then
    holder=$(cat "$nd/ns.pid")
    pids=$(ns_processes "$holder")
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  fi
  for _ in $(seq 1 50); do
    pids=$(cgroup_pids "$CGROUP_ROOT")
    [ -z "$pids" ] && break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  if [ -n "$holder" ]; then
    for _ in $(seq 1 50); do
      [ -z "$(ns_processes "$holder")" ] && break
      sleep 0.1
    done
  fi
  kill_pidfile "$nd/ns.pid" "$dir" KILL
  local mnt
  for mnt in $(cgroup_all_mounts); do
    [ -d "$mnt/$CGROUP_ROOT" ] || continue
    for _ in $(seq 1 50); do
      find "$mnt/$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$mnt/$CGROUP_ROOT" ] || break
      sleep 0.1
    done
    [ -d "$mnt/$CGROUP_ROOT" ] && log "could not remove cgroup $mnt/$CGROUP_ROOT"
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link delete "$BRIDGE" || log "could not delete bridge $BRIDGE"
  fi
  set -e
  return 0
}

teardown_nodes() { # dir
  local dir=$1 nd
  for nd in "$dir"/nodes/*/; do
    [ -d "$nd" ] && teardown_node "$dir" "${nd%/}"
  done
  return 0
}

nodes_down() { # dir
  local dir=$1 id
  [ -d "$dir/nodes" ] || return 0
  # first: a live kube-proxy would re-create the chains restore_baseline removes
  components_down "$dir"
  teardown_nodes "$dir"
  id=$(dir_id "$dir")
  host_lock
  rm -f "$HOST_STATE/active/$id"
  prune_active
  if ! compgen -G "$HOST_STATE/active/*" >/dev/null; then
    restore_baseline
  fi
  host_unlock
  rm -f "$dir/nodes.env"
  log "stopped real nodes in $dir"
}

node_dir() { # dir name -> checked node directory
  local dir=$1 name=$2
  [ -f "$dir/nodes/$name/node.env" ] || die "no node $name in $dir"
  echo "$dir/nodes/$name"
}

cmd_stop_kubelet() { # dir node [signal]
  local dir nd sig=${3:-TERM} pid
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  nd=$(node_dir "$dir" "$2")
  case "$sig" in KILL|TERM) ;; *) die "--signal must be KILL or TERM, not $sig" ;; esac
  pid_alive "$nd/kubelet.pid" "$dir" || { log "kubelet of $2 is not running"; return 0; }
  pid=$(cat "$nd/kubelet.pid")
  kill "-$sig" "$pid"
  for _ in $(seq 1 300); do
    running "$pid" || break
    sleep 0.05
  done
  running "$pid" && die "kubelet of $2 (pid $pid) still running after SIG$sig"
  rm -f "$nd/kubelet.pid"
  log "stopped kubelet of $2 (SIG$sig)"
}

cmd_start_kubelet() { # dir node
  local dir nd
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  nd=$(node_dir "$dir" "$2")
  pid_alive "$nd/ns.pid" "$dir" || die "node $2 is down (run: up $dir --nodes N)"
  start_kubelet "$dir" "$nd"
  log "started kubelet of $2 (pid $(cat "$nd/kubelet.pid"))"
}

cmd_nodes() { # dir: one JSON object per node
  local dir nd p
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  [ -f "$dir/nodes.env" ] || { echo "[]"; return 0; }
  # shellcheck disable=SC1091
  . "$dir/nodes.env"
  local entries=()
  for name in $NODES; do
    nd=$dir/nodes/$name
    # shellcheck disable=SC1091
    . "$nd/node.env"
    local pids=()
    for p in ns containerd kubelet; do
      if pid_alive "$nd/$p.pid" "$dir"; then pids+=("\"$p\": $(cat "$nd/$p.pid")"); else pids+=("\"$p\": null"); fi
    done
    entries+=("{\"name\": \"$NODE\", \"zone\": \"$ZONE\", \"dir\": \"$nd\", \"ip\": \"$NODE_IP\",
 \"kubeletPort\": $KUBELET_PORT, \"healthzPort\": $HEALTHZ_PORT, \"cgroupRoot\": \"$CGROUP_ROOT\",
 \"bridge\": \"$BRIDGE\", \"subnet\": \"$SUBNET\", \"containerdSocket\": \"$nd/containerd.sock\",
 \"pids\": {$(IFS=,; echo "${pids[*]}")}, \"pauseImage\": \"$PAUSE_IMAGE\", \"busyboxImage\": \"$BUSYBOX_IMAGE\"}")
  done
  (IFS=,; echo "[${entries[*]}]")
}

cmd_up() { # dir [node count]
  local dir=$1 nodes=${2:-0}
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if pid_alive "$dir/apiserver.pid" "$dir" && pid_alive "$dir/etcd.pid" "$dir" && [ -f "$dir/kubeconfig" ]; then
    [ "$nodes" -gt 0 ] && complete_up "$dir" "$nodes"
    echo "$dir/kubeconfig"
    return 0
  fi
  [ "$nodes" -gt 0 ] && refuse_second_cluster "$dir"
  cmd_down "$dir" 2>/dev/null || true
  # shellcheck disable=SC2086
  apt_install $CONTROL_PLANE_PACKAGES
  [ -x "$ETCD_BIN" ] || die "$ETCD_BIN not found after installing etcd-server"
  build_apiserver
  mkdir -p "$dir/logs"
  [ -f "$dir/pki/tokens.csv" ] || make_pki "$dir/pki"
  if [ "$nodes" -gt 0 ]; then
    local ip
    ip=$(node_ip)
    set_mode "$dir" complete "$ip"
    ensure_apiserver_cert "$dir" "$ip"
  else
    set_mode "$dir" plain
  fi

  if [ ! -f "$dir/ports" ]; then
    printf 'ETCD_CLIENT=%s\nETCD_PEER=%s\nAPI_PORT=%s\n' "$(free_port)" "$(free_port)" "$(free_port)" >"$dir/ports"
  fi
  start_etcd "$dir"
  start_apiserver "$dir"
  # shellcheck disable=SC1091
  . "$dir/ports"
  write_kubeconfig "$dir" "$dir/kubeconfig" admin "    token: $(cat "$dir/pki/admin.token")"
  local sa
  for sa in $SERVICE_ACCOUNTS; do
    write_kubeconfig "$dir" "$dir/kubeconfig-$sa" admin "    token: $(cat "$dir/pki/$sa.token")"
  done
  log "kube-apiserver $KUBE_VERSION ready on https://127.0.0.1:$API_PORT (logs in $dir/logs)"
  [ "$nodes" -gt 0 ] && complete_up "$dir" "$nodes"
  echo "$dir/kubeconfig"
}

start_etcd() {
  local dir=$1
  # shellcheck disable=SC1091
  . "$dir/ports"
  pid_alive "$dir/etcd.pid" "$dir" && return 0
  setsid "$ETCD_BIN" --name local --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-cluster "local=http://127.0.0.1:$ETCD_PEER" --log-level warn \
    >>"$dir/logs/etcd.log" 2>&1 </dev/null &
  echo $! >"$dir/etcd.pid"
}

# DIR/mode.env says how: plain (loopback only, no ServiceAccount admission: the integration tests
# create pods in namespaces no controller gives a `default` ServiceAccount) or complete (every
# address, advertising the host's IP, with ServiceAccount admission: kube-controller-manager
# creates the ServiceAccounts and their tokens). DefaultTolerationSeconds is off in both.
start_apiserver() {
  local dir=$1 bind=127.0.0.1 advertise=127.0.0.1
  local admission=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook
  local disabled=ServiceAccount,DefaultTolerationSeconds
  # shellcheck disable=SC1091
  . "$dir/ports"
  if [ "$(cluster_mode "$dir")" = complete ]; then
    bind=0.0.0.0 advertise=$(cluster_node_ip "$dir")
    [ -n "$advertise" ] || die "no node IP recorded in $dir/mode.env"
    admission=NamespaceLifecycle,ServiceAccount,MutatingAdmissionWebhook,ValidatingAdmissionWebhook
    disabled=DefaultTolerationSeconds
  fi
  if ! pid_alive "$dir/apiserver.pid" "$dir"; then
    setsid "$APISERVER_BIN" --etcd-servers "http://127.0.0.1:$ETCD_CLIENT" \
      --bind-address "$bind" --advertise-address "$advertise" --secure-port "$API_PORT" --insecure-port 0 \
      --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
      --client-ca-file "$dir/pki/ca.crt" --token-auth-file "$dir/pki/tokens.csv" \
      --authorization-mode Node,RBAC \
      --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
      --service-account-issuer https://kubernetes.default.svc \
      --service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged=true \
      --enable-admission-plugins "$admission" --disable-admission-plugins "$disabled" \
      --kubelet-preferred-address-types InternalIP \
      --profiling=false --v=1 \
      >>"$dir/logs/kube-apiserver.log" 2>&1 </dev/null &
    echo $! >"$dir/apiserver.pid"
  fi
  wait_ready "$dir" "$API_PORT"
}

require_up() {
  local dir=$1
  if [ ! -f "$dir/ports" ] || [ ! -f "$dir/pki/tokens.csv" ]; then
    die "no control plane was set up in $dir (run: up $dir)"
  fi
}

cmd_stop_apiserver() {
  local dir
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  require_up "$dir"
  stop_pidfile "$dir/apiserver.pid" "$dir"
  log "stopped kube-apiserver in $dir"
}

cmd_start_apiserver() {
  local dir
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  require_up "$dir"
  build_apiserver
  pid_alive "$dir/etcd.pid" "$dir" || die "etcd is not running in $dir (run: up $dir)"
  start_apiserver "$dir"
  log "kube-apiserver running in $dir"
}

stop_pidfile() {
  local pidfile=$1 dir=$2 pid
  if pid_alive "$pidfile" "$dir"; then
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do  # until it is gone: a restart must find its port free
        running "$pid" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$pidfile"
}

cmd_down() {
  local dir=$1
  [ -d "$dir" ] || die "no such directory: $dir"
  dir=$(cd "$dir" && pwd)
  components_down "$dir"
  nodes_down "$dir"
  stop_pidfile "$dir/apiserver.pid" "$dir"
  stop_pidfile "$dir/etcd.pid" "$dir"
  log "stopped control plane in $dir"
}

cmd_status() {
  local dir=$1
  [ -d "$dir" ] || die "no such directory: $dir"
  dir=$(cd "$dir" && pwd)
  if pid_alive "$dir/apiserver.pid" "$dir" && pid_alive "$dir/etcd.pid" "$dir"; then
    # shellcheck disable=SC1091
    . "$dir/ports"
    echo "running: https://127.0.0.1:$API_PORT kubeconfig $dir/kubeconfig"
  else
    echo "stopped"
    return 1
  fi
}

cmd_deploy() { # dir [--overlay path]
  local root python
  root=$(cd "$HERE/.." && pwd)
  python=${PYTHON:-$root/.venv/bin/python}
  [ -x "$python" ] || command -v "$python" >/dev/null 2>&1 \
    || die "no Python with taintkeeper's dependencies at $python: run \`make setup\` first (or set PYTHON)"
  (cd "$root" && "$python" -m hack.deploy "$@")
}

[ $# -ge 1 ] || usage
case "$1" in
  up)
    if [ $# -eq 2 ]; then cmd_up "$2"
    elif [ $# -eq 4 ] && [ "$3" = --nodes ] && [[ $4 =~ ^[0-9]+$ ]]; then cmd_up "$2" "$4"
    else usage; fi ;;
  down|status|stop-apiserver|start-apiserver|nodes)
    [ $# -eq 2 ] || usage
    "cmd_${1//-/_}" "$2" ;;
  stop-kubelet)
    if [ $# -eq 3 ]; then cmd_stop_kubelet "$2" "$3"
    elif [ $# -eq 5 ] && [ "$4" = --signal ]; then cmd_stop_kubelet "$2" "$3" "$5"
    else usage; fi ;;
  start-kubelet)
    [ $# -eq 3 ] || usage
    cmd_start_kubelet "$2" "$3" ;;
  build)
    [ $# -eq 1 ] || usage
    build_apiserver
    echo "$APISERVER_BIN" ;;
  deps)
    if [ $# -eq 1 ]; then cmd_deps
    elif [ $# -eq 2 ] && { [ "$2" = --nodes ] || [ "$2" = --tools ]; }; then cmd_deps "$2"
    else usage; fi ;;
  build-node)
    [ $# -eq 1 ] || usage
    build_node
    for name in $NODE_COMPONENTS; do echo "$KUBE_CACHE/bin/$name"; done ;;
  deploy)
    if [ $# -eq 2 ] || { [ $# -eq 4 ] && [ "$3" = --overlay ]; }; then cmd_deploy "${@:2}"
    else usage; fi ;;
  -h|--help|help) usage ;;
  *) echo "local-cluster: unknown command '$1'" >&2; usage ;;
esac
