#!/usr/bin/env bash
# A real kube-apiserver + etcd on loopback, for the tests and the local demo.
#
#   hack/local-cluster.sh up DIR      start etcd + kube-apiserver, write DIR/kubeconfig, print its path
#   hack/local-cluster.sh down DIR    stop exactly the processes started for DIR
#   hack/local-cluster.sh status DIR  say whether DIR's control plane is running
#   hack/local-cluster.sh stop-apiserver DIR / start-apiserver DIR
#                                     stop or start only kube-apiserver (same port; etcd keeps the data)
#   hack/local-cluster.sh build       only build (and cache) kube-apiserver
#
# Besides DIR/kubeconfig (cluster-admin), DIR/kubeconfig-<name> authenticates as the
# ServiceAccount user system:serviceaccount:taintkeeper-system:<name> for each name in
# SERVICE_ACCOUNTS (static tokens), so tests can run components under their own RBAC.
#
# No registry ships a kube-apiserver binary, so the first run on a machine builds 1.20.2 from
# Debian's `kubernetes` source package (about 3-5 minutes on 2 cores) and caches it under
# ${TAINTKEEPER_CACHE:-~/.cache/taintkeeper}. etcd comes from Debian's etcd-server.
# The apiserver runs without DefaultTolerationSeconds: left on, it would add the very
# tolerations taintkeeper's webhook adds and mask a broken webhook.
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

die() { echo "local-cluster: $*" >&2; exit 1; }
log() { echo "local-cluster: $*" >&2; }

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
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
  # Debian's etcd-server would start a system etcd on 2379; taintkeeper runs its own.
  as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || { as_root apt-get update -q >&2 && as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; } \
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
  apt_install golang-1.19-go rsync golang-github-modern-go-reflect2-dev dpkg-dev make
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
  (cd "$src" && PATH=/usr/lib/go-1.19/bin:$PATH GOPROXY=off GOSUMDB=off CGO_ENABLED=0 GOFLAGS= \
     make WHAT=cmd/kube-apiserver >"$KUBE_CACHE/build.log" 2>&1) \
    || die "kube-apiserver build failed (see $KUBE_CACHE/build.log)"
  mkdir -p "$KUBE_CACHE/bin"
  cp "$src/_output/bin/kube-apiserver" "$APISERVER_BIN.tmp" && mv "$APISERVER_BIN.tmp" "$APISERVER_BIN"
  log "cached $APISERVER_BIN"
  exec 9>&-
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
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
   openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=kube-apiserver" \
     -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
   printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >"$pki/apiserver.ext"
   openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
     -days 3650 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
   openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
   openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
   python3 -c 'import secrets; print(secrets.token_hex(24))' >"$pki/admin.token")
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

write_kubeconfig() { # dir port token-file output
  local dir=$1 port=$2 token_file=$3 out=$4
  (umask 077
   cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 -w0 <"$dir/pki/ca.crt")
users:
- name: admin
  user:
    token: $(cat "$token_file")
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
EOF
  )
}

wait_ready() {
  local dir=$1 port=$2 deadline=$((SECONDS + 60))
  while [ $SECONDS -lt $deadline ]; do
    pid_alive "$dir/apiserver.pid" "$dir" || die "kube-apiserver exited; see $dir/logs/kube-apiserver.log"
    if curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(cat "$dir/pki/admin.token")" \
         "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  die "kube-apiserver not ready after 60s; see $dir/logs/kube-apiserver.log"
}

cmd_up() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if pid_alive "$dir/apiserver.pid" "$dir" && pid_alive "$dir/etcd.pid" "$dir" && [ -f "$dir/kubeconfig" ]; then
    echo "$dir/kubeconfig"
    return 0
  fi
  cmd_down "$dir" 2>/dev/null || true
  apt_install etcd-server openssl curl
  [ -x "$ETCD_BIN" ] || die "$ETCD_BIN not found after installing etcd-server"
  build_apiserver
  mkdir -p "$dir/logs"
  [ -f "$dir/pki/tokens.csv" ] || make_pki "$dir/pki"

  if [ ! -f "$dir/ports" ]; then
    printf 'ETCD_CLIENT=%s\nETCD_PEER=%s\nAPI_PORT=%s\n' "$(free_port)" "$(free_port)" "$(free_port)" >"$dir/ports"
  fi
  start_etcd "$dir"
  start_apiserver "$dir"
  # shellcheck disable=SC1091
  . "$dir/ports"
  write_kubeconfig "$dir" "$API_PORT" "$dir/pki/admin.token" "$dir/kubeconfig"
  local sa
  for sa in $SERVICE_ACCOUNTS; do
    write_kubeconfig "$dir" "$API_PORT" "$dir/pki/$sa.token" "$dir/kubeconfig-$sa"
  done
  log "kube-apiserver $KUBE_VERSION ready on https://127.0.0.1:$API_PORT (logs in $dir/logs)"
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

start_apiserver() {
  local dir=$1
  # shellcheck disable=SC1091
  . "$dir/ports"
  if ! pid_alive "$dir/apiserver.pid" "$dir"; then
    setsid "$APISERVER_BIN" --etcd-servers "http://127.0.0.1:$ETCD_CLIENT" \
      --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --insecure-port 0 \
      --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
      --client-ca-file "$dir/pki/ca.crt" --token-auth-file "$dir/pki/tokens.csv" \
      --authorization-mode Node,RBAC \
      --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
      --service-account-issuer https://kubernetes.default.svc \
      --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true \
      --enable-admission-plugins NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
      --disable-admission-plugins ServiceAccount,DefaultTolerationSeconds \
      --profiling=false --v=1 \
      >>"$dir/logs/kube-apiserver.log" 2>&1 </dev/null &
    echo $! >"$dir/apiserver.pid"
  fi
  wait_ready "$dir" "$API_PORT"
}

require_up() {
  local dir=$1
  [ -f "$dir/ports" ] && [ -f "$dir/pki/tokens.csv" ] || die "no control plane was set up in $dir (run: up $dir)"
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
      [ -d "/proc/$pid" ] || break
      sleep 0.1
    done
    [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

cmd_down() {
  local dir=$1
  [ -d "$dir" ] || die "no such directory: $dir"
  dir=$(cd "$dir" && pwd)
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

[ $# -ge 1 ] || usage
case "$1" in
  up|down|status|stop-apiserver|start-apiserver)
    [ $# -eq 2 ] || usage
    "cmd_${1//-/_}" "$2" ;;
  build)
    [ $# -eq 1 ] || usage
    build_apiserver
    echo "$APISERVER_BIN" ;;
  -h|--help|help) usage ;;
  *) echo "local-cluster: unknown command '$1'" >&2; usage ;;
esac
