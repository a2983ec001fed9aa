# A complete cluster (`up DIR --nodes N`): the apiserver restarted in complete mode, the nodes, then
# kube-scheduler, kube-controller-manager, kube-proxy and the routed pod network, the registration
# taints lifted, and the wait until the cluster serves pods.
# shellcheck shell=bash

# The rest of a complete cluster, started with the nodes: kube-scheduler, kube-controller-manager
# and kube-proxy, on the host, each with a client certificate (DIR/components/<name>/) for the
# user the apiserver's bootstrap RBAC already binds (system:kube-scheduler,
# system:kube-controller-manager, system:kube-proxy), pidfiles DIR/<name>.pid, logs
# DIR/logs/<name>.log, ports in DIR/components.env (health endpoints on free loopback ports;
# kube-scheduler's and kube-controller-manager's serve /healthz only: no delegated authentication,
# which without a front proxy CA would only log an error every minute). Their start is in
# control-plane.sh.
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
# Every component of a complete cluster (DIR/<name>.pid each): the oracle runs two kube-controller-managers.
components() { # dir
  echo kube-scheduler "$(controller_managers "$1")" kube-proxy
}
REGISTRATION_TAINT=node.kubernetes.io/not-ready

healthy() { # url: GET answers 200 "ok" (the components' own self-signed serving certs: -k)
  [ "$(curl -ksS --max-time 2 "$1" 2>/dev/null)" = ok ]
}

write_components_env() { # dir: each port once; a DIR from before a port existed gets only the new one
  local dir=$1 key
  for key in SCHEDULER_PORT CONTROLLER_MANAGER_PORT CONTROLLER_MANAGER_2_PORT PROXY_HEALTHZ_PORT PROXY_METRICS_PORT; do
    grep -q "^$key=" "$dir/components.env" 2>/dev/null || echo "$key=$(free_port)" >>"$dir/components.env"
  done
}

start_proxy() { # dir node-ip slot hostname
  local dir=$1 ip=$2 slot=$3 host=$4 cd=$1/components/kube-proxy
  pid_alive "$dir/kube-proxy.pid" "$dir" && return 0
  make_client_kubeconfig "$dir" "$cd" "/CN=system:kube-proxy" system:kube-proxy "$cd/kubeconfig"
  load_env "$dir/components.env"
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
  load_env "$dir/ports"
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

# 0 when the cluster serves pods: every component healthy, the `default` ServiceAccount exists (with
# its token Secret on 1.20: pods in `default` can be admitted), the `kubernetes` Service's endpoints are the host's IP.
# What is not yet goes to PENDING (not printed: a subshell would swallow die).
components_ready() { # dir node-ip
  local dir=$1 ip=$2 name pending=""
  load_env "$dir/ports"
  load_env "$dir/components.env"
  for name in $(components "$dir"); do
    pid_alive "$dir/$name.pid" "$dir" || die "$name exited; see $dir/logs/$name.log:
$(tail -n 15 "$dir/logs/$name.log")"
  done
  healthy "https://127.0.0.1:$SCHEDULER_PORT/healthz" || pending+=" kube-scheduler"
  healthy "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz" || pending+=" kube-controller-manager"
  if [ "$(controller_managers "$dir")" != kube-controller-manager ]; then
    healthy "https://127.0.0.1:$CONTROLLER_MANAGER_2_PORT/healthz" || pending+=" kube-controller-manager-2"
  fi
  # kube-proxy's answers 200 (with JSON) once it has synced its rules, 503 before
  curl -fsS --max-time 2 "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz" >/dev/null 2>&1 || pending+=" kube-proxy"
  # 1.20 admits a pod only once its ServiceAccount has a token Secret; 1.24+ issues tokens on demand
  api_get "$dir" /api/v1/namespaces/default/serviceaccounts/default | MINOR="$(minor_number)" python3 -c '
import json, os, sys
account = json.load(sys.stdin)
sys.exit(0 if int(os.environ["MINOR"]) >= 24 or account.get("secrets") else 1)' 2>/dev/null \
    || pending+=" default-serviceaccount"
  api_get "$dir" /api/v1/namespaces/default/endpoints/kubernetes | EXPECT="$ip:$API_PORT" python3 -c '
import json, os, sys
subsets = json.load(sys.stdin).get("subsets") or []
seen = sorted("%s:%s" % (a["ip"], p["port"]) for s in subsets for a in s.get("addresses") or [] for p in s.get("ports") or [])
sys.exit(0 if seen == [os.environ["EXPECT"]] else 1)' 2>/dev/null || pending+=" kubernetes-endpoints"
  PENDING=$pending
  [ -z "$pending" ]
}

components_up() { # dir: after nodes_up
  local dir=$1 ip name
  ip=$(cluster_node_ip "$dir")
  load_env "$dir/nodes.env"
  write_components_env "$dir"
  # the routed pod network (see above); restored with the rest of the baseline
  sysctl -q -w net.ipv4.ip_forward=1 || die "could not set net.ipv4.ip_forward=1"
  start_scheduler "$dir"
  for name in $(controller_managers "$dir"); do start_controller_manager "$dir" "$name"; done
  local slot first
  slot=$(sed -n 's/^SLOT=//p' "$dir/nodes.env")
  first=$(sed -n 's/^NODES="\([^ "]*\).*/\1/p' "$dir/nodes.env")
  start_proxy "$dir" "$ip" "$slot" "$first"
  local names
  read -ra names <<<"$NODES"
  lift_registration_taints "$dir" "${names[@]}"
  local deadline=$((SECONDS + 120))
  until components_ready "$dir" "$ip"; do
    [ $SECONDS -lt $deadline ] || die "complete cluster not ready after 120s:$PENDING (logs in $dir/logs)"
    sleep 0.3
  done
  log "kube-scheduler, $(controller_managers "$dir") ($(kcm_controllers "$dir")), kube-proxy running; pods reach the apiserver at $KUBERNETES_SERVICE_IP:443 -> $ip"
}

# Whichever of the components named (all by default) exited, started again, as their supervisor
# would (the kubelet restarts a static pod, systemd a service): kube-scheduler exits by design when it
# finds its cache corrupted (a pod updated on another node than it was added to), trusting to be
# started again. Prints the names started. Nothing else of `up` runs.
cmd_start_components() { # dir [name...]
  local dir name ip slot first started=()
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  shift
  [ -f "$dir/components.env" ] || die "no complete cluster in $dir (run: up $dir --nodes N)"
  # shellcheck disable=SC2046 # the names, one word each
  [ $# -gt 0 ] || set -- $(components "$dir")
  load_env "$dir/nodes.env"
  for name in "$@"; do
    pid_alive "$dir/$name.pid" "$dir" && continue
    case "$name" in
      kube-scheduler) start_scheduler "$dir" ;;
      kube-controller-manager | kube-controller-manager-2)
        # only the replicas this DIR's mode runs: a second one without leader election would act beside the first
        grep -qw -- "$name" <<<"$(controller_managers "$dir")" || die "$dir runs no $name (only: $(controller_managers "$dir"))"
        start_controller_manager "$dir" "$name" ;;
      kube-proxy)
        ip=$(cluster_node_ip "$dir")
        slot=$(sed -n 's/^SLOT=//p' "$dir/nodes.env")
        first=$(sed -n 's/^NODES="\([^ "]*\).*/\1/p' "$dir/nodes.env")
        start_proxy "$dir" "$ip" "$slot" "$first" ;;
      *) die "no component $name (one of: $(components "$dir"))" ;;
    esac
    started+=("$name")
  done
  echo "${started[*]}"
}

components_down() { # dir
  local dir=$1 name
  for name in kube-proxy kube-controller-manager-2 kube-controller-manager kube-scheduler; do
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
