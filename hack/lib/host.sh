# What real nodes change on the host, machine-wide: the baseline recorded by the first `up` with
# nodes (sysctls, iptables chains, fixed directories) and restored by the last `down`, and the
# registry of DIRs running nodes (slots; one complete cluster per host), all under one flock.
# shellcheck shell=bash

# Host state is machine-wide, so it is tracked outside DIR under $CACHE/host (flock'ed): the
# first `up` with nodes records a baseline (sysctls, iptables chains, the fixed host directories
# that did not exist), every DIR with nodes registers itself, and the last `down` restores the
# baseline. Everything per node (cgroup root, bridge, subnet) is keyed by a machine-wide slot,
# so several DIRs can run nodes side by side.
HOST_STATE=$CACHE/host
# What a kubelet (1.20, setupKernelTunables), the CNI bridge plugin and kube-proxy (route_localnet;
# the conntrack limits and timeouts only if its config asked, which ours does not; it only reads
# bridge-nf-call-iptables) write. Keys the kernel lacks (no br_netfilter, no conntrack) are skipped.
NODE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
net.netfilter.nf_conntrack_tcp_timeout_close_wait)
# Fixed paths the kubelet, containerd and CNI use whatever their flags say; in each node's mount
# namespace a per-node directory is bind-mounted over each (host side: an empty mountpoint).
NODE_BIND_PATHS=(/var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /run/netns /run/containerd)

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
  remove_new_tables "$baseline"
}

# The first kubelet or kube-proxy on a machine brings the nat, filter and mangle tables into being;
# once their KUBE-* chains are gone, a table the baseline did not have and that holds nothing but
# empty built-in chains is deleted. Only the nf_tables backend can (legacy tables are kernel modules).
remove_new_tables() {
  local baseline=$1 family nft_family table
  command -v nft >/dev/null 2>&1 || return 0
  for family in iptables ip6tables; do
    command -v "$family-save" >/dev/null 2>&1 || continue
    "$family" -V 2>/dev/null | grep -q nf_tables || continue
    nft_family=ip
    [ "$family" = ip6tables ] && nft_family=ip6
    for table in $("$family-save" 2>/dev/null | awk -v f="$family" -v base="$baseline" '
      BEGIN { while ((getline line < base) > 0) { split(line, w, " "); known[w[1] " " w[2]] = 1 } }
      /^\*/ { t = substr($0, 2); seen[t] = 1; next }
      /^-A / { used[t] = 1; next }
      /^:/ { if ($2 == "-") used[t] = 1; next }
      END { for (t in seen) if (!(t in used) && !((f " " t) in known)) print t }'); do
      nft delete table "$nft_family" "$table" || log "could not delete the $family table $table"
    done
  done
}

record_sysctls() { # key...: the KEY=VALUE lines of those the kernel has (keys it lacks are skipped)
  local key
  for key in "$@"; do
    [ -e "/proc/sys/${key//.//}" ] || continue
    printf '%s=%s\n' "$key" "$(sysctl -n "$key")"
  done
}

restore_sysctls() { # file of record_sysctls' lines: each value that changed set back
  local line key value
  while IFS= read -r line; do
    key=${line%%=*} value=${line#*=}
    [ "$(sysctl -n "$key")" = "$value" ] || sysctl -q -w "$key=$value" || log "could not restore $key=$value"
  done <"$1"
}

record_baseline() {
  local boot
  boot=$(cat /proc/sys/kernel/random/boot_id)
  if [ -f "$HOST_STATE/baseline/boot_id" ] && [ "$(cat "$HOST_STATE/baseline/boot_id")" = "$boot" ]; then
    return 0 # an earlier run on this boot left changes behind: its baseline is still the truth
  fi
  rm -rf "$HOST_STATE/baseline"
  mkdir -p "$HOST_STATE/baseline"
  record_sysctls "${NODE_SYSCTLS[@]}" >"$HOST_STATE/baseline/sysctls"
  iptables_chains >"$HOST_STATE/baseline/iptables"
  : >"$HOST_STATE/baseline/created-dirs"
  echo "$boot" >"$HOST_STATE/baseline/boot_id"
}

restore_baseline() {
  local base=$HOST_STATE/baseline path
  [ -d "$base" ] || return 0
  restore_sysctls "$base/sysctls"
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
  for path in "${NODE_BIND_PATHS[@]}"; do
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

allocate_slot() { # the smallest slot no active DIR uses
  local slot used
  used=$(cat "$HOST_STATE"/active/* 2>/dev/null | sed -n 's/^SLOT=//p')
  for slot in $(seq 0 99); do
    grep -qx "$slot" <<<"$used" || { echo "$slot"; return 0; }
  done
  die "more than 100 directories run real nodes at once"
}

other_node_dir() { # dir -> another DIR registered with live nodes on this host (call under host_lock after prune_active)
  local dir=$1 entry d
  for entry in "$HOST_STATE"/active/*; do
    [ -f "$entry" ] || continue
    d=$(sed -n 's/^DIR=//p' "$entry")
    if [ -n "$d" ] && [ "$d" != "$dir" ]; then echo "$d"; return 0; fi
  done
}

# The DIR whose Docker engine (`docker-up`, lib/docker.sh) runs on this host, while it runs: its
# FORWARD DROP and iptables rules would cut real nodes off, so nodes wait for its `docker-down`.
DOCKER_ENGINE=$HOST_STATE/docker-engine
docker_engine_dir() {
  local d
  d=$(cat "$DOCKER_ENGINE" 2>/dev/null) || return 0
  if [ -n "$d" ] && pid_alive "$d/docker/dockerd.pid" "$d"; then echo "$d"; fi
}

# Early, before anything starts (nodes_up checks again under the host lock).
refuse_second_cluster() { # dir
  local other
  other=$(other_node_dir "$1")
  if [ -n "$other" ] && node_processes_alive "$other"; then
    die "$other already runs real nodes on this host, with kube-proxy owning the host's KUBE-* iptables chains; one complete cluster at a time (run: down $other)"
  fi
  refuse_beside_docker
}

refuse_beside_docker() {
  local engine
  engine=$(docker_engine_dir)
  [ -z "$engine" ] || die "$engine runs the project's Docker engine (kind's nodes), whose FORWARD DROP would cut real nodes off; one at a time (run: docker-down $engine)"
}
