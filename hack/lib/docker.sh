# The Docker engine kind's nodes run in (`docker-up DIR`, `docker-down DIR`): a running engine of the
# user's where one answers (a laptop's; used as it is, never stopped), else Debian's docker.io installed
# and dockerd started by the project, as it starts containerd for the local cluster: its own socket,
# pidfile and state under DIR/docker, its images under the cache, stopped by `docker-down` with the
# host's networking put back as it was.
# shellcheck shell=bash
#
# The engine's flags: --bridge=none (no docker0: kind makes its own network), --exec-root short and
# per DIR (containerd's socket path must stay under 104 bytes), --data-root under the cache (a second
# run finds its images). Where the host's capability bounding set lacks a capability the kernel has
# (here CAP_SYS_RESOURCE), Docker 20.10 still asks runc for it in every --privileged container and runc
# fails ("unable to apply caps"): the engine then runs containers through hack/runc_capfilter.py,
# which withholds only those, and says so in one line.
#
# What dockerd changes on the host and `docker-down` undoes: iptables (its chains, the rules it adds
# to the built-in ones, FORWARD's policy set to DROP), the forwarding and bridge-netfilter sysctls and
# those kind's kubelets write from privileged containers (NODE_SYSCTLS), bridge and veth links,
# /lib/modules (kind mounts it; Docker creates it when missing). The baseline is DIR/docker/baseline,
# recorded before dockerd starts. The engine and the local cluster's nodes never run at once: with
# br_netfilter, dockerd's FORWARD DROP would drop the nodes' bridged traffic (and both would own
# iptables); each refuses while the other runs, under the host lock.
DOCKER_PACKAGES=(docker.io)
DOCKER_SYSCTLS=("${NODE_SYSCTLS[@]}" net.bridge.bridge-nf-call-ip6tables)
DOCKER_RUNTIME=taintkeeper-runc

docker_state() { echo "$1/docker"; } # also in host.sh docker_engine_dir
docker_socket() { echo "$(docker_state "$1")/docker.sock"; }

# 0 when a Docker engine answers the docker CLI as the caller's environment points it.
docker_answers() { # [DOCKER_HOST]
  command -v docker >/dev/null 2>&1 || return 1
  if [ $# -gt 0 ]; then DOCKER_HOST=$1 docker info >/dev/null 2>&1; else docker info >/dev/null 2>&1; fi
}

links() { ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort; }

record_docker_baseline() { # dir
  local base family
  base=$(docker_state "$1")/baseline
  rm -rf "$base" && mkdir -p "$base"
  record_sysctls "${DOCKER_SYSCTLS[@]}" >"$base/sysctls"
  for family in iptables ip6tables; do
    command -v "$family-save" >/dev/null 2>&1 && "$family-save" >"$base/$family" 2>/dev/null
  done
  iptables_chains >"$base/chains"
  links >"$base/links"
  if [ -e /lib/modules ]; then : >"$base/lib-modules-existed"; fi
  [ ! -e /etc/docker/key.json ] || : >"$base/key-existed"
  compgen -G '/sys/fs/cgroup/*/docker' >"$base/cgroups" || true
  return 0
}

restore_docker_baseline() { # dir
  local base family table chain policy script link
  base=$(docker_state "$1")/baseline
  [ -d "$base" ] || return 0
  for family in iptables ip6tables; do
    [ -f "$base/$family" ] || continue
    script=$("$family-save" 2>/dev/null | python3 "$HERE/iptables_undo.py" rules "$base/$family")
    if [ -n "$script" ]; then
      printf '%s\n' "$script" | "$family-restore" --noflush || log "could not undo dockerd's $family rules: $script"
    fi
    "$family-save" 2>/dev/null | python3 "$HERE/iptables_undo.py" policies "$base/$family" \
      | while read -r table chain policy; do
        "$family" -t "$table" -P "$chain" "$policy" || log "could not set $family $table $chain back to $policy"
      done
  done
  remove_new_tables "$base/chains"
  restore_sysctls "$base/sysctls"
  for link in $(comm -13 "$base/links" <(links)); do
    log "removing the link $link dockerd left"
    ip link delete "$link" 2>/dev/null || log "could not remove the link $link"
  done
  if [ ! -f "$base/lib-modules-existed" ] && [ -d /lib/modules ]; then
    rmdir /lib/modules 2>/dev/null || log "/lib/modules was made by the engine's containers and is not empty; left"
  fi
  [ -f "$base/key-existed" ] || rm -f /etc/docker/key.json # dockerd 20.10's trust key, written at its first start
  local cgroup
  for cgroup in /sys/fs/cgroup/*/docker; do
    if [ ! -d "$cgroup" ] || grep -qxF "$cgroup" "$base/cgroups"; then continue; fi
    rmdir "$cgroup" 2>/dev/null || log "could not remove the cgroup $cgroup (still in use?)"
  done
  rm -rf "$base"
}

# Prints the DOCKER_HOST line the engine is reached with (empty value: the caller's own engine).
cmd_docker_up() { # dir
  local dir state missing other runtime=()
  mkdir -p "$1"
  dir=$(cd "$1" && pwd)
  state=$(docker_state "$dir")
  mkdir -p "$state" "$dir/logs"
  if pid_alive "$state/dockerd.pid" "$dir"; then
    echo "DOCKER_HOST=unix://$(docker_socket "$dir")"
    return 0
  fi
  if [ ! -f "$state/owned" ] && docker_answers; then
    log "using the Docker engine that answers (${DOCKER_HOST:-its default socket}); docker-down leaves it running"
    echo "DOCKER_HOST=${DOCKER_HOST:-}"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || die "starting a Docker engine needs root; or start one and point DOCKER_HOST at it"
  apt_install "${DOCKER_PACKAGES[@]}"
  host_lock
  prune_active
  other=$(other_node_dir "")
  [ -z "$other" ] || die "$other runs real nodes on this host: dockerd's FORWARD DROP would cut them off; one at a time (run: down $other)"
  other=$(docker_engine_dir)
  [ -z "$other" ] || [ "$other" = "$dir" ] || die "$other already runs the project's Docker engine (run: docker-down $other)"
  record_docker_baseline "$dir"
  echo "$dir" >"$DOCKER_ENGINE"
  : >"$state/owned"
  host_unlock
  missing=$(python3 "$HERE/runc_capfilter.py" missing)
  if [ -n "$missing" ]; then
    runtime=(--add-runtime "$DOCKER_RUNTIME=$HERE/runc_capfilter.py" --default-runtime "$DOCKER_RUNTIME")
    log "this host's capability bounding set lacks $missing: containers run through hack/runc_capfilter.py, which withholds only that"
  fi
  echo '{}' >"$state/daemon.json"
  mkdir -p "$CACHE/docker"
  setsid dockerd --config-file "$state/daemon.json" --data-root "$CACHE/docker/data" \
    --exec-root "/run/tk-docker-$(dir_id "$dir")" --pidfile "$state/dockerd.pid" -H "unix://$(docker_socket "$dir")" \
    --bridge=none --storage-driver overlay2 "${runtime[@]}" \
    >>"$dir/logs/dockerd.log" 2>&1 </dev/null &
  local deadline=$((SECONDS + 60))
  until docker_answers "unix://$(docker_socket "$dir")"; do
    if [ $SECONDS -ge $deadline ] || ! running "$!"; then
      local tail_of_log
      tail_of_log=$(tail -n 15 "$dir/logs/dockerd.log")
      cmd_docker_down "$dir"
      die "dockerd did not answer within 60s; see $dir/logs/dockerd.log:
$tail_of_log"
    fi
    sleep 0.3
  done
  log "dockerd running (pid $(cat "$state/dockerd.pid")), DOCKER_HOST=unix://$(docker_socket "$dir")"
  echo "DOCKER_HOST=unix://$(docker_socket "$dir")"
}

cmd_docker_down() { # dir
  local dir state ids
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  state=$(docker_state "$dir")
  [ -f "$state/owned" ] || { log "no Docker engine of the project's in $dir: nothing to stop"; return 0; }
  if pid_alive "$state/dockerd.pid" "$dir"; then
    DOCKER_HOST="unix://$(docker_socket "$dir")"
    export DOCKER_HOST
    ids=$(docker ps -aq 2>/dev/null || true)
    # shellcheck disable=SC2086 # one id per word
    [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || log "could not remove the engine's containers"
    docker network prune -f >/dev/null 2>&1 || log "could not remove the engine's networks"
    stop_pidfile "$state/dockerd.pid" "$dir"
  fi
  # the containerd dockerd started, and its shims, should dockerd have been killed before stopping them
  pkill -KILL -f "/run/tk-docker-$(dir_id "$dir")/" 2>/dev/null || true
  host_lock
  restore_docker_baseline "$dir"
  [ "$(cat "$DOCKER_ENGINE" 2>/dev/null)" != "$dir" ] || rm -f "$DOCKER_ENGINE"
  rm -f "$state/owned"
  host_unlock
  log "dockerd stopped; the host's iptables, sysctls and links are as before docker-up"
}
