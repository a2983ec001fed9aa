# Real nodes: per node a mount namespace, containerd (with its CNI bridge) and a kubelet; their
# start, readiness and teardown (processes, cgroups, bridges); `nodes`, `stop-kubelet`, `start-kubelet`,
# `stop-node`, `start-node`.
# shellcheck shell=bash

# Layout: DIR/nodes.env (NODES, SLOT, images), DIR/nodes/<name>/{node.env, pki, kubeconfig,
# kubelet.yaml, containerd.toml, cni/, host/ (what is bind-mounted over the fixed host paths in
# the node's namespace), ns.pid, containerd.pid, kubelet.pid, logs}.

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
  load_env "$nd/node.env"
  mkdir -p "$nd/cni" "$nd/host" "$nd/containerd/root" "$nd/containerd/state" "$nd/containerd/opt" "$nd/runc" \
    "$nd/volume-plugins" "$nd/logs"
  local path
  for path in "${NODE_BIND_PATHS[@]}"; do mkdir -p "$nd/host$path"; done
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
  # the cluster's registry (hack/cluster_registry.py): a hosts.toml per address, read at each pull
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$dir/registry/hosts"
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
  if [ "$(minor_number)" -ge 24 ]; then
    # This host mounts cgroup v1 (`stat -fc %T /sys/fs/cgroup` prints tmpfs): kubelet 1.35+ refuses to
    # start on it unless failCgroupV1 is false.
    cat >>"$nd/kubelet.yaml" <<YAML
containerRuntimeEndpoint: unix://$nd/containerd.sock
failCgroupV1: false
YAML
  fi
}

node_ns_holding() { # nodedir: the namespace holder of nodedir has made its mounts and runs under its name
  local nd=$1 pid
  pid=$(cat "$nd/ns.pid" 2>/dev/null) || return 1
  [ -r "/proc/$pid/cmdline" ] && [ "$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -1)" = "taintkeeper-node-ns $nd" ]
}

start_node_ns() { # dir nodedir
  local dir=$1 nd=$2 path mounts=""
  pid_alive "$nd/ns.pid" "$dir" && return 0
  for path in "${NODE_BIND_PATHS[@]}"; do
    mounts+="mount --bind '$nd/host$path' '$path' && "
  done
  # The holder keeps the namespace (and the bind mounts) alive; its command line names DIR.
  setsid unshare -m --propagation private bash -c "${mounts}exec -a 'taintkeeper-node-ns $nd' sleep infinity" \
    >>"$nd/logs/ns.log" 2>&1 </dev/null &
  echo $! >"$nd/ns.pid"
  # Ready only once the holder runs under its own name: before that the pid is still setsid, unshare or
  # the bash making the mounts (whose command lines name DIR too), and a process entering its namespace
  # then would enter the host's, or see the host's paths before the bind mounts.
  local deadline=$((SECONDS + 10))
  until node_ns_holding "$nd"; do
    [ -d "/proc/$(cat "$nd/ns.pid")" ] || die "the mount namespace for $nd did not start; see $nd/logs/ns.log"
    [ $SECONDS -lt $deadline ] || die "the mount namespace for $nd did not start; see $nd/logs/ns.log"
    sleep 0.05
  done
}

start_containerd() { # dir nodedir
  local dir=$1 nd=$2
  pid_alive "$nd/containerd.pid" "$dir" && return 0
  # containerd listens on DIR/nodes/NAME/containerd.sock.ttrpc: a unix socket path has at most 104 bytes.
  local socket="$nd/containerd.sock.ttrpc"
  [ ${#socket} -le 104 ] || die "DIR is too deep for containerd's socket ($socket is ${#socket} bytes, at most 104): use a shorter DIR"
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

start_kubelet() { # dir nodedir
  local dir=$1 nd=$2
  pid_alive "$nd/kubelet.pid" "$dir" && return 0
  pid_alive "$nd/containerd.pid" "$dir" || die "containerd of $nd is not running"
  load_env "$nd/node.env"
  # 1.20 takes the runtime as flags; later releases removed them (the endpoint is in kubelet.yaml,
  # the sandbox image is containerd's sandbox_image alone).
  local runtime=()
  [ "$(minor_number)" -lt 24 ] && runtime=(--container-runtime remote --container-runtime-endpoint "unix://$nd/containerd.sock"
                                             --pod-infra-container-image "$PAUSE_IMAGE")
  rm -f "$nd/kubelet.pid"
  # A shell waits for the kubelet and appends how it ended to its log: a kubelet killed by a signal
  # leaves no last line of its own, and "exited" alone does not say whether it quit or was killed.
  # shellcheck disable=SC2016,SC2094 # expanded by the waiting shell; it appends to the kubelet's own log
  PIDFILE="$nd/kubelet.pid" LOGFILE="$nd/logs/kubelet.log" setsid bash -c '
    "$@" & echo $! >"$PIDFILE.new" && mv "$PIDFILE.new" "$PIDFILE"
    wait $!; status=$?
    how="status $status"; [ $status -gt 128 ] && how+=" (SIG$(kill -l $((status - 128))))"
    echo "local-cluster: kubelet exited at $(date -u +%H:%M:%S.%N) with $how" >>"$LOGFILE"' kubelet \
    nsenter -t "$(cat "$nd/ns.pid")" -m -- "$KUBELET_BIN" --config "$nd/kubelet.yaml" \
    --kubeconfig "$nd/kubeconfig" "${runtime[@]}" \
    --root-dir /var/lib/kubelet --volume-plugin-dir "$nd/volume-plugins" --hostname-override "$NODE" \
    --node-ip "$NODE_IP" --node-labels "topology.kubernetes.io/zone=$ZONE,failure-domain.beta.kubernetes.io/zone=$ZONE" \
    --v=1 >>"$nd/logs/kubelet.log" 2>&1 </dev/null &
  for _ in $(seq 1 100); do [ -s "$nd/kubelet.pid" ] && return 0; sleep 0.05; done
  die "kubelet of $NODE did not start; see $nd/logs/kubelet.log"
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
  load_env "$dir/ports"
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

nodes_up() { # dir count
  local dir=$1 count=$2
  if [ -f "$dir/nodes.env" ]; then
    load_env "$dir/nodes.env"
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
  if [ -n "$(docker_engine_dir)" ]; then host_unlock; refuse_beside_docker; fi
  if ! compgen -G "$HOST_STATE/active/*" >/dev/null; then record_baseline; fi
  slot=$(allocate_slot)
  printf 'DIR=%s\nSLOT=%s\n' "$dir" "$slot" >"$HOST_STATE/active/$id"
  host_dirs
  host_unlock

  local names=() i name nd zones=(zone-b zone-a) # odd nodes in zone-a, even ones in zone-b
  for i in $(seq 1 "$count"); do
    name=node-$i
    names+=("$name")
    nd=$dir/nodes/$name
    mkdir -p "$nd/logs"
    cat >"$nd/node.env" <<ENV
NODE=$name
INDEX=$i
ZONE=${zones[i % 2]}
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
    load_env "$nd/node.env"
    pre_create_cgroups "$CGROUP_ROOT"
    start_node_ns "$dir" "$nd"
    start_containerd "$dir" "$nd"
    start_kubelet "$dir" "$nd"
  done
  wait_nodes_ready "$dir" 120 "${names[@]}"
  log "$count real node(s) Ready: ${names[*]}"
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
  local dir=$1 nd=$2 holder="" pids=()
  [ -f "$nd/node.env" ] || return 0
  set +e # best effort: one step failing must not leave the rest undone
  load_env "$nd/node.env"
  # no need to be gentle: every container of the node is killed below anyway
  kill_pidfile "$nd/kubelet.pid" "$dir" KILL
  kill_pidfile "$nd/containerd.pid" "$dir" KILL
  if pid_alive "$nd/ns.pid" "$dir"; then
    holder=$(cat "$nd/ns.pid")
    mapfile -t pids < <(ns_processes "$holder")
    [ ${#pids[@]} -gt 0 ] && kill -KILL "${pids[@]}" 2>/dev/null
  fi
  for _ in $(seq 1 50); do
    mapfile -t pids < <(cgroup_pids "$CGROUP_ROOT")
    [ ${#pids[@]} -eq 0 ] && break
    kill -KILL "${pids[@]}" 2>/dev/null || true
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

kill_node_containers() { # dir nodedir: every process of the node but its namespace holder, and its containers
  local dir=$1 nd=$2 pids=()
  load_env "$nd/node.env"
  if pid_alive "$nd/ns.pid" "$dir"; then # the containerd shims
    mapfile -t pids < <(ns_processes "$(cat "$nd/ns.pid")")
    if [ ${#pids[@]} -gt 0 ]; then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
  fi
  for _ in $(seq 1 50); do # the containers: in their own namespaces, under the node's cgroup root
    mapfile -t pids < <(cgroup_pids "$CGROUP_ROOT")
    [ ${#pids[@]} -eq 0 ] && return 0
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.1
  done
  mapfile -t pids < <(cgroup_pids "$CGROUP_ROOT")
  [ ${#pids[@]} -eq 0 ] || die "processes of node $NODE still running after SIGKILL: ${pids[*]}"
}

cmd_stop_runtime() { # dir node: the container runtime fails: containerd SIGKILLed; the kubelet and the containers run on
  local dir nd
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  nd=$(node_dir "$dir" "$2")
  pid_alive "$nd/containerd.pid" "$dir" || { log "containerd of $2 is not running"; return 0; }
  kill_pidfile "$nd/containerd.pid" "$dir" KILL
  log "stopped containerd of $2 (SIGKILL); its kubelet and its containers run on"
}

cmd_start_runtime() { # dir node: containerd again (it finds its shims and containers); the kubelet reconnects
  local dir nd
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  nd=$(node_dir "$dir" "$2")
  pid_alive "$nd/ns.pid" "$dir" || die "node $2 is down (run: up $dir --nodes N)"
  load_env "$dir/nodes.env"
  load_env "$nd/node.env"
  start_containerd "$dir" "$nd"
  log "started containerd of $2 (pid $(cat "$nd/containerd.pid"))"
}

cmd_stop_node() { # dir node: the machine loses power: kubelet, containerd and every container, at once
  local dir nd
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  nd=$(node_dir "$dir" "$2")
  pid_alive "$nd/ns.pid" "$dir" || die "node $2 is down (run: up $dir --nodes N)"
  # SIGKILL first, so nothing reports or cleans up: the node's Ready condition just stops being renewed
  kill_pidfile "$nd/kubelet.pid" "$dir" KILL
  kill_pidfile "$nd/containerd.pid" "$dir" KILL
  kill_node_containers "$dir" "$nd"
  log "stopped node $2: kubelet, containerd and its containers (SIGKILL); its mount namespace, cgroups and bridge stay for start-node"
}

cmd_start_node() { # dir node: the machine is back: containerd, then the kubelet, until the node is Ready
  local dir nd
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  nd=$(node_dir "$dir" "$2")
  pid_alive "$nd/ns.pid" "$dir" || die "node $2 is down (run: up $dir --nodes N)"
  load_env "$dir/nodes.env"
  load_env "$nd/node.env"
  pre_create_cgroups "$CGROUP_ROOT"
  start_containerd "$dir" "$nd"
  start_kubelet "$dir" "$nd"
  wait_nodes_ready "$dir" 120 "$2"
  log "started node $2 (containerd pid $(cat "$nd/containerd.pid"), kubelet pid $(cat "$nd/kubelet.pid")); Ready"
}

cmd_nodes() { # dir: one JSON object per node
  local dir nd p
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  [ -f "$dir/nodes.env" ] || { echo "[]"; return 0; }
  load_env "$dir/nodes.env"
  local entries=()
  for name in $NODES; do
    nd=$dir/nodes/$name
    load_env "$nd/node.env"
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
