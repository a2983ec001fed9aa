# The control plane in DIR: its PKI and kubeconfigs, etcd, kube-apiserver (plain or complete mode),
# kube-scheduler and kube-controller-manager; `up`, `down`, `status`, `stop-apiserver`, `start-apiserver`.
# shellcheck shell=bash

ADMIN_TOKEN_USER=taintkeeper-admin
SA_NAMESPACE=taintkeeper-system
SERVICE_ACCOUNTS=(taintkeeper-controller taintkeeper-webhook)
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1

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
  for sa in "${SERVICE_ACCOUNTS[@]}"; do
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
  load_env "$dir/ports"
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

# 1.20's kube-apiserver, kube-scheduler and kube-controller-manager also served plain HTTP unless
# told not to (--insecure-port 0, --port 0); 1.24 removed both flags.
insecure_port_off() { # component -> the flag to pass, or nothing
  [ "$(minor_number)" -ge 24 ] && return 0
  case "${1:-}" in kube-apiserver) echo "--insecure-port 0" ;; *) echo "--port 0" ;; esac
}

# DIR/kubernetes.env: the version DIR's etcd data and binaries are, written by `up`.
record_kubernetes() { # dir
  printf 'KUBERNETES=%s\n' "$KUBE_MINOR" >"$1/kubernetes.env"
}

# The version for a command on DIR: the one it records; one asked for must be the same (an
# apiserver cannot serve an older version's etcd data, nor etcd 3.4 a 3.6 data directory).
dir_kubernetes() { # dir asked [refuse]
  local dir=$1 asked=$2 recorded
  recorded=$(sed -n 's/^KUBERNETES=//p' "$dir/kubernetes.env" 2>/dev/null || true)
  if [ -n "$recorded" ] && [ -n "$asked" ] && [ "$recorded" != "$asked" ]; then
    die "$dir holds a Kubernetes $recorded cluster, not $asked (run: down $dir, then up a new DIR)"
  fi
  if [ -n "$recorded" ]; then echo "$recorded"; elif [ -n "$asked" ]; then echo "$asked"; else kubernetes_minor; fi
}

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

api_get() { # dir path -> the object's JSON (admin token); fails on any HTTP error
  local dir=$1 path=$2
  load_env "$dir/ports"
  curl -fsS --max-time 5 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(cat "$dir/pki/admin.token")" \
    "https://127.0.0.1:$API_PORT$path" 2>/dev/null
}

# DIR/options.env: what `up` was last asked for besides the nodes (UP_AUDIT, UP_BUILTIN_NODE_LIFECYCLE
# in its environment, 0 or 1), read by every later start of the apiserver and kube-controller-manager
# (start-apiserver, a restart for a complete cluster), so a restarted component keeps its mode.
cluster_option() { # dir key -> its value, 0 when unset
  local value
  value=$(sed -n "s/^$2=//p" "$1/options.env" 2>/dev/null)
  echo "${value:-0}"
}

wanted_options() { printf 'AUDIT=%s\nBUILTIN_NODE_LIFECYCLE=%s' "${UP_AUDIT:-0}" "${UP_BUILTIN_NODE_LIFECYCLE:-0}"; }

# 0 when `up` asks for other options than DIR/options.env records (the running components must be restarted).
options_changed() { # dir
  [ "$(cat "$1/options.env" 2>/dev/null)" != "$(wanted_options)" ]
}

write_options() { # dir
  printf '%s\n' "$(wanted_options)" >"$1/options.env"
}

cmd_up() { # dir [node count]
  local dir=$1 nodes=${2:-0} changed=0 name
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  options_changed "$dir" && changed=1
  if pid_alive "$dir/apiserver.pid" "$dir" && pid_alive "$dir/etcd.pid" "$dir" && [ -f "$dir/kubeconfig" ]; then
    if [ "$changed" = 1 ]; then
      log "restarting kube-apiserver and kube-controller-manager in $dir for the options asked for"
      stop_pidfile "$dir/kube-controller-manager.pid" "$dir"
      stop_pidfile "$dir/kube-controller-manager-2.pid" "$dir"
      stop_pidfile "$dir/apiserver.pid" "$dir"
      # Recorded once both are down: an `up` interrupted before this finds them stopped and starts afresh.
      write_options "$dir"
      start_apiserver "$dir"
      if [ -f "$dir/components.env" ]; then
        for name in $(controller_managers "$dir"); do start_controller_manager "$dir" "$name"; done
      fi
    fi
    [ "$nodes" -gt 0 ] && complete_up "$dir" "$nodes"
    echo "$dir/kubeconfig"
    return 0
  fi
  [ "$nodes" -gt 0 ] && refuse_second_cluster "$dir"
  cmd_down "$dir" 2>/dev/null || true
  write_options "$dir"
  apt_install "${CONTROL_PLANE_PACKAGES[@]}"
  build_etcd
  [ -x "$ETCD_BIN" ] || die "$ETCD_BIN not found after installing etcd-server"
  build_apiserver
  record_kubernetes "$dir"
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
  load_env "$dir/ports"
  write_kubeconfig "$dir" "$dir/kubeconfig" admin "    token: $(cat "$dir/pki/admin.token")"
  local sa
  for sa in "${SERVICE_ACCOUNTS[@]}"; do
    write_kubeconfig "$dir" "$dir/kubeconfig-$sa" admin "    token: $(cat "$dir/pki/$sa.token")"
  done
  log "kube-apiserver $KUBE_VERSION ready on https://127.0.0.1:$API_PORT (logs in $dir/logs)"
  [ "$nodes" -gt 0 ] && complete_up "$dir" "$nodes"
  echo "$dir/kubeconfig"
}

start_etcd() {
  local dir=$1
  load_env "$dir/ports"
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
# creates the ServiceAccounts and their tokens). DefaultTolerationSeconds is off in both, unless
# the cluster runs the built-ins (--builtin-node-lifecycle) or APISERVER_DEFAULT_TOLERATION_SECONDS=1
# asks for it (start-apiserver --default-toleration-seconds).
start_apiserver() {
  local dir=$1 bind=127.0.0.1 advertise=127.0.0.1
  local admission=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook
  local disabled=ServiceAccount,DefaultTolerationSeconds
  load_env "$dir/ports"
  if [ "$(cluster_mode "$dir")" = complete ]; then
    bind=0.0.0.0 advertise=$(cluster_node_ip "$dir")
    [ -n "$advertise" ] || die "no node IP recorded in $dir/mode.env"
    admission=NamespaceLifecycle,ServiceAccount,MutatingAdmissionWebhook,ValidatingAdmissionWebhook
    disabled=DefaultTolerationSeconds
    if [ "$(cluster_option "$dir" BUILTIN_NODE_LIFECYCLE)" = 1 ]; then
      admission=NamespaceLifecycle,ServiceAccount,DefaultTolerationSeconds,MutatingAdmissionWebhook,ValidatingAdmissionWebhook
      disabled=""
    fi
  fi
  if [ "${APISERVER_DEFAULT_TOLERATION_SECONDS:-0}" = 1 ] && [[ $admission != *DefaultTolerationSeconds* ]]; then
    admission=${admission/NamespaceLifecycle,/NamespaceLifecycle,DefaultTolerationSeconds,}
    disabled=${disabled/DefaultTolerationSeconds/} disabled=${disabled%,}
  fi
  local legacy=()
  read -ra legacy <<<"$(insecure_port_off kube-apiserver)"
  # Plain mode advertises 127.0.0.1, which later releases refuse as the `kubernetes` Service's
  # endpoint; no pod runs there to call it, so that Service gets no endpoints at all.
  if [ "$advertise" = 127.0.0.1 ] && [ "$(minor_number)" -ge 24 ]; then legacy+=(--endpoint-reconciler-type none); fi
  local audit=()
  if [ "$(cluster_option "$dir" AUDIT)" = 1 ]; then
    write_audit_policy "$dir/audit-policy.yaml"
    # blocking: each event is written before the response goes out, so the log's order is the
    # order in which clients saw their answers. Rotated at 2 GB (the checker reads the backups too).
    audit=(--audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log"
           --audit-log-format json --audit-log-mode blocking --audit-log-maxsize 2000 --audit-log-maxbackup 5)
  fi
  # The test pods' only HTTPS client is busybox wget, whose own TLS sends no signature_algorithms
  # extension, which in TLS 1.2 means SHA-1 signatures (RFC 5246); Go 1.25+ refuses those (RFC 9155)
  # unless GODEBUG=tlssha1=1. Clients that send the extension (Go, Python, curl) are not affected.
  local environment=()
  from_debian || environment=(GODEBUG=tlssha1=1)
  if ! pid_alive "$dir/apiserver.pid" "$dir"; then
    env "${environment[@]}" setsid "$APISERVER_BIN" --etcd-servers "http://127.0.0.1:$ETCD_CLIENT" "${audit[@]}" \
      --bind-address "$bind" --advertise-address "$advertise" --secure-port "$API_PORT" "${legacy[@]}" \
      --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
      --client-ca-file "$dir/pki/ca.crt" --token-auth-file "$dir/pki/tokens.csv" \
      --authorization-mode Node,RBAC \
      --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
      --service-account-issuer https://kubernetes.default.svc \
      --service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged=true \
      --enable-admission-plugins "$admission" ${disabled:+--disable-admission-plugins "$disabled"} \
      --kubelet-preferred-address-types InternalIP \
      --profiling=false --v=1 \
      >>"$dir/logs/kube-apiserver.log" 2>&1 </dev/null &
    echo $! >"$dir/apiserver.pid"
  fi
  wait_ready "$dir" "$API_PORT"
}

# The audit policy of `up --audit`: the whole request and response of every write to pods (and
# their status, binding and eviction subresources), nodes (and their status) and Leases, which is
# what an independent check of the controller's actions reads (bench/soak/); who did what, and
# when, for everything else. RequestReceived is left out: ResponseComplete has all it has.
write_audit_policy() { # path
  cat >"$1" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - group: ""
    resources: [pods, pods/status, pods/binding, pods/eviction, nodes, nodes/status]
  - group: coordination.k8s.io
    resources: [leases]
# Events with their bodies (what they are about): a replica that may not act may not say it does (I4).
- level: Request
  verbs: [create, update, patch]
  resources:
  - group: ""
    resources: [events]
  - group: events.k8s.io
    resources: [events]
- level: Metadata
YAML
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

# etcd stopped (SIGTERM) and started again on the same data and ports: the soak's etcd restart.
cmd_restart_etcd() { # dir
  local dir
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  require_up "$dir"
  stop_pidfile "$dir/etcd.pid" "$dir"
  start_etcd "$dir"
  local _
  for _ in $(seq 1 100); do
    curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_CLIENT/health" 2>/dev/null | grep -q '"health":"true"' && {
      log "etcd restarted in $dir"; return 0; }
    sleep 0.1
  done
  die "etcd not healthy 10s after its restart; see $dir/logs/etcd.log"
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

cmd_down() {
  local dir=$1
  [ -d "$dir" ] || die "no such directory: $dir"
  dir=$(cd "$dir" && pwd)
  components_down "$dir"
  nodes_down "$dir"
  stop_pidfile "$dir/registry/pid" "$(cd "$dir" && pwd -P)" # it was started with DIR's physical path
  stop_pidfile "$dir/apiserver.pid" "$dir"
  stop_pidfile "$dir/etcd.pid" "$dir"
  log "stopped control plane in $dir"
}

cmd_status() {
  local dir=$1
  [ -d "$dir" ] || die "no such directory: $dir"
  dir=$(cd "$dir" && pwd)
  if pid_alive "$dir/apiserver.pid" "$dir" && pid_alive "$dir/etcd.pid" "$dir"; then
    load_env "$dir/ports"
    echo "running: https://127.0.0.1:$API_PORT kubeconfig $dir/kubeconfig"
  else
    echo "stopped"
    return 1
  fi
}

# ---------------------------------------------------------------------------------------------
# kube-scheduler and kube-controller-manager: started with the nodes of a complete cluster
# (complete-cluster.sh says with what credentials, pidfiles, logs and ports).
#
# kube-controller-manager runs every default controller but the node lifecycle controller and (1.29+)
# the taint eviction controller, as an operator replacing both with taintkeeper runs it: in 1.20
# `nodelifecycle` is the node monitor AND the NoExecute taint manager; 1.29 split the taint manager
# out as `taint-eviction-controller`. taintkeeper's controller is then the only one that taints
# nodes and evicts pods. nodeipam (no --allocate-node-cidrs: every node has its own CNI subnet) and,
# in 1.20, the cloud loops (no cloud provider; later releases dropped them) are off too. It signs
# ServiceAccount tokens with DIR/pki/sa.key (the apiserver verifies them with sa.pub) and runs each
# controller under its own ServiceAccount. Its FlexVolume directory is under DIR: by default it
# creates /usr/libexec/kubernetes on the host. With `up --builtin-node-lifecycle` (the oracle a soak
# compares taintkeeper with) the built-ins run.
# The oracle runs as a real kube-controller-manager does, leader-elected: one that was paused past its
# renew deadline exits when it resumes (and is started again, as a kubelet restarts a static pod), rather
# than acting on what it saw before the pause. Otherwise none: one process, nothing to elect.
kcm_leader_elect() { # dir
  if [ "$(cluster_option "$1" BUILTIN_NODE_LIFECYCLE)" = 1 ]; then echo true; else echo false; fi
}

# The oracle's replicas: two, as taintkeeper's soak runs two controller replicas and a control plane
# of more than one node runs one per node; each with its name as its hostname (its own UTS namespace),
# so the Lease's holderIdentity (hostname_uuid) names the replica leading. Otherwise one.
controller_managers() { # dir
  if [ "$(cluster_option "$1" BUILTIN_NODE_LIFECYCLE)" = 1 ]; then echo kube-controller-manager kube-controller-manager-2
  else echo kube-controller-manager; fi
}

kcm_controllers() { # dir
  local builtin
  builtin=$(cluster_option "$1" BUILTIN_NODE_LIFECYCLE)
  if [ "$(minor_number)" -lt 29 ]; then
    if [ "$builtin" = 1 ]; then echo '*,-nodeipam,-route,-service,-cloud-node-lifecycle'
    else echo '*,-nodelifecycle,-nodeipam,-route,-service,-cloud-node-lifecycle'; fi
  elif [ "$builtin" = 1 ]; then echo '*,-node-ipam-controller'
  else echo '*,-node-lifecycle-controller,-taint-eviction-controller,-node-ipam-controller'; fi
}

# kube-controller-manager's replicas alone, as a kubelet restarts a killed static pod (the soak's faults
# in the oracle mode): nothing else of `up` (which would lift the registration taints) runs.
cmd_start_controller_manager() { # dir
  local dir name
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  [ -f "$dir/components.env" ] || die "no complete cluster in $dir (run: up $dir --nodes N)"
  for name in $(controller_managers "$dir"); do
    start_controller_manager "$dir" "$name"
    log "$name running in $dir (pid $(cat "$dir/$name.pid"))"
  done
}

start_scheduler() { # dir
  local dir=$1 cd=$1/components/kube-scheduler legacy=()
  read -ra legacy <<<"$(insecure_port_off)"
  pid_alive "$dir/kube-scheduler.pid" "$dir" && return 0
  make_client_kubeconfig "$dir" "$cd" "/CN=system:kube-scheduler" system:kube-scheduler "$cd/kubeconfig"
  load_env "$dir/components.env"
  mkdir -p "$cd/certs"
  setsid "$SCHEDULER_BIN" --kubeconfig "$cd/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" "${legacy[@]}" --cert-dir "$cd/certs" \
    --leader-elect=false --profiling=false --v=1 \
    >>"$dir/logs/kube-scheduler.log" 2>&1 </dev/null &
  echo $! >"$dir/kube-scheduler.pid"
}

start_controller_manager() { # dir [name: kube-controller-manager (default) or kube-controller-manager-2]
  local dir=$1 name=${2:-kube-controller-manager} port legacy=()
  local cd=$dir/components/$name
  read -ra legacy <<<"$(insecure_port_off)"
  pid_alive "$dir/$name.pid" "$dir" && return 0
  make_client_kubeconfig "$dir" "$cd" "/CN=system:kube-controller-manager" system:kube-controller-manager "$cd/kubeconfig"
  load_env "$dir/components.env"
  case "$name" in
    kube-controller-manager) port=$CONTROLLER_MANAGER_PORT ;;
    kube-controller-manager-2) port=$CONTROLLER_MANAGER_2_PORT ;;
    *) die "no kube-controller-manager replica $name" ;;
  esac
  mkdir -p "$cd/certs"
  # shellcheck disable=SC2016 # $1 and $@ are the inner shell's: the hostname, then the command
  setsid unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$name" \
    "$CONTROLLER_MANAGER_BIN" --kubeconfig "$cd/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$port" "${legacy[@]}" --cert-dir "$cd/certs" \
    --controllers "$(kcm_controllers "$dir")" --leader-elect="$(kcm_leader_elect "$dir")" \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file "$dir/pki/ca.crt" --cluster-signing-key-file "$dir/pki/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false \
    --flex-volume-plugin-dir "$cd/volume-plugins" \
    --profiling=false --v=1 \
    >>"$dir/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}
