# A kind cluster as the project's users make one (`kind-up DIR`, `kind-down DIR`): kind v0.33 built from
# its module, in the Docker engine of `docker-up DIR`, from the node image hack/kind_node.py builds offline
# (or the --image given, which must be in the engine already: no registry is reachable here), configured
# by hack/kind-config.yaml (one control plane and three workers, the built-ins off) plus what this host
# needs, each said in one line. DIR/kind.env records the cluster, its image, the engine and kind's path;
# DIR/env is for a user's shell (`. DIR/env`: KUBECONFIG, DOCKER_HOST, kubectl on PATH).
# shellcheck shell=bash

KIND_CLUSTER_DEFAULT=taintkeeper-e2e # also tests/e2e/providers.py's default
KIND_NODE_IMAGE_DEFAULT=taintkeeper.local/kind-node:v1.37.2
KIND_ETCD_TAG=3.6.16-0 # hack/kind_node_images.py ETCD_TAG

kind_env_value() { # dir key
  sed -n "s/^$2=//p" "$1/kind.env" 2>/dev/null | tail -n 1
}

kind_cluster_exists() { # name
  "$KIND_BIN" get clusters 2>/dev/null | grep -qxF "$1"
}

# kind's own module holds its base image's files: the node image is made from them.
kind_module_dir() {
  (cd "$UPSTREAM_MODULE/kind" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$(go_bin)" list -m -f '{{.Dir}}' sigs.k8s.io/kind) \
    || die "could not find sigs.k8s.io/kind v$KIND_MODULE_VERSION in the Go module cache (hack/upstream/kind)"
}

build_kind_node_image() { # [--load] [--describe]: hack/kind_node.py's; --load: into the engine DOCKER_HOST names
  apt_install mmdebstrap containerd tar
  build_kind_node_binaries
  build_from_modules "${MODULE_COMPONENTS[@]}"
  build_etcd
  build_images
  local root python
  root=$(cd "$HERE/.." && pwd)
  python=${PYTHON:-$root/.venv/bin/python}
  [ -x "$python" ] || python=python3
  (cd "$root" && "$python" -m hack.kind_node --kubernetes-bin "$KUBE_CACHE/bin" --etcd "$ETCD_BIN" \
    --coredns "$COREDNS_DIR/bin/coredns" --crictl "$CRICTL_DIR/bin/crictl" \
    --kind-files "$(kind_module_dir)/images/base/files" --cache "$CACHE/kind-node" "$@") \
    || die "the kind node image could not be built (hack/kind_node.py)"
}

# hack/kind-config.yaml plus what this host needs: kubelet 1.35+ refuses cgroup v1 unless told; a host
# whose containers lack CAP_SYS_RESOURCE (hack/runc_capfilter.py) cannot let containerd raise OOM scores.
write_kind_config() { # dir image
  local config=$1/kind-config.yaml
  cp "$HERE/kind-config.yaml" "$config"
  if [ "$2" = "$KIND_NODE_IMAGE_DEFAULT" ]; then # its etcd is the project's 3.6.16 (hack/kind_node_images.py)
    printf '%s\n' "- |" "  apiVersion: kubeadm.k8s.io/v1beta4" "  kind: ClusterConfiguration" "  etcd:" "    local:" \
      "      imageTag: $KIND_ETCD_TAG" >>"$config"
  fi
  if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
    log "this host runs cgroup v1: the kind nodes' kubelets are told failCgroupV1: false"
    printf '%s\n' "- |" "  kind: KubeletConfiguration" "  failCgroupV1: false" >>"$config"
  fi
  # As kind documents for a local registry: the nodes' containerd reads a hosts.toml per registry address
  # (hack/cluster_registry.py writes the project's registry's there).
  printf '%s\n' "containerdConfigPatches:" "- |-" '  [plugins."io.containerd.grpc.v1.cri".registry]' \
    '    config_path = "/etc/containerd/certs.d"' >>"$config"
  if [ -n "$(python3 "$HERE/runc_capfilter.py" missing)" ]; then
    log "containers here lack CAP_SYS_RESOURCE: the kind nodes' containerd restricts OOM score adjustments"
    printf '%s\n' "- |-" '  [plugins."io.containerd.grpc.v1.cri"]' "    restrict_oom_score_adj = true" >>"$config"
  fi
  echo "$config"
}

# The host reaches pods by their IPs, as on the local cluster (Prometheus on the host scrapes them): each
# node's pod CIDR routed via its address on kind's network. Recorded in DIR/kind-routes; kind-down removes
# them (they would also go with kind's bridge).
route_pod_cidrs() { # dir
  local cidr address
  if [ "$(id -u)" -ne 0 ]; then
    log "not root: no routes from this host to the kind nodes' pods (what reaches pods by IP will fail)"
    return 0
  fi
  "$KUBE_CACHE/bin/kubectl" --kubeconfig "$1/kubeconfig" get nodes \
    -o jsonpath='{range .items[*]}{.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' |
    while read -r cidr address; do
      if [ -z "$cidr" ] || [ -z "$address" ]; then continue; fi
      ip route replace "$cidr" via "$address" && echo "$cidr via $address" >>"$1/kind-routes"
    done
}

unroute_pod_cidrs() { # dir
  local cidr via address
  [ -f "$1/kind-routes" ] || return 0
  while read -r cidr via address; do
    ip route delete "$cidr" "$via" "$address" 2>/dev/null || true
  done <"$1/kind-routes"
  rm -f "$1/kind-routes"
}

# kind's network as kind makes it (IPv6 fc00:f853:ccd:e793::/64, masquerade, the MTU), but with its IPv4
# subnet given (the one Docker picks): only then does `docker network connect --ip` work, which a node cut
# off from the network needs to come back with its address (its kubelet's --node-ip, its certificates).
# A network of that name already there (a user's kind) is used as it is.
ensure_kind_network() {
  local subnet gateway
  docker network inspect kind >/dev/null 2>&1 && return 0
  docker network create kind >/dev/null || die "could not create Docker's network kind"
  subnet=$(docker network inspect kind -f '{{(index .IPAM.Config 0).Subnet}}')
  gateway=$(docker network inspect kind -f '{{(index .IPAM.Config 0).Gateway}}')
  docker network rm kind >/dev/null
  docker network create --driver bridge --subnet "$subnet" --gateway "$gateway" \
    --ipv6 --subnet fc00:f853:ccd:e793::/64 -o com.docker.network.bridge.enable_ip_masquerade=true \
    -o com.docker.network.driver.mtu=1500 kind >/dev/null || die "could not create Docker's network kind ($subnet)"
}

cmd_kind_up() { # dir [--image IMAGE] [--name NAME]
  local dir=$1 image="" name=$KIND_CLUSTER_DEFAULT line config
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --image) [ $# -ge 2 ] || die "--image needs an image (e.g. kindest/node:v1.37.0)"; image=$2; shift 2 ;;
      --name) [ $# -ge 2 ] || die "--name needs a cluster name"; name=$2; shift 2 ;;
      *) die "kind-up: unknown option '$1' (expected --image IMAGE, --name NAME)" ;;
    esac
  done
  from_debian && die "kind v$KIND_MODULE_VERSION runs no Kubernetes 1.20 node (docs/development.md): kind-up is 1.37 only"
  mkdir -p "$dir/logs"
  dir=$(cd "$dir" && pwd)
  line=$(cmd_docker_up "$dir" | tail -n 1) # first: without an engine and without root, nothing else is done
  export "${line?}"
  [ -n "$DOCKER_HOST" ] || unset DOCKER_HOST
  build_kind
  if [ -f "$dir/kind.env" ] && kind_cluster_exists "$(kind_env_value "$dir" KIND_CLUSTER)"; then
    log "kind cluster $(kind_env_value "$dir" KIND_CLUSTER) of $dir is up"
    echo "$dir/kubeconfig"
    return 0
  fi
  kind_cluster_exists "$name" \
    && die "a kind cluster named $name already exists and is not $dir's: delete it (kind delete cluster --name $name) or choose --name"
  if [ -z "$image" ]; then
    image=$(build_kind_node_image --load | tail -n 1)
  else
    docker image inspect "$image" >/dev/null 2>&1 \
      || die "$image is not in the Docker engine, and no registry is reachable from here: docker load it first"
  fi
  config=$(write_kind_config "$dir" "$image")
  ensure_kind_network
  printf '%s\n' "KIND_CLUSTER=$name" "KIND_IMAGE=$image" "KIND_BIN=$KIND_BIN" "DOCKER_HOST=${DOCKER_HOST:-}" >"$dir/kind.env"
  log "creating kind cluster $name from $image (log: $dir/logs/kind-create.log)"
  if ! "$KIND_BIN" create cluster --name "$name" --image "$image" --config "$config" \
    --kubeconfig "$dir/kubeconfig" --retain >"$dir/logs/kind-create.log" 2>&1; then
    "$KIND_BIN" export logs "$dir/logs/kind" --name "$name" >/dev/null 2>&1 || true
    "$KIND_BIN" delete cluster --name "$name" >/dev/null 2>&1 || true
    rm -f "$dir/kind.env"
    die "kind create cluster failed: $(tail -n 3 "$dir/logs/kind-create.log" | tr '\n' ' ') (nodes' logs: $dir/logs/kind)"
  fi
  chmod 600 "$dir/kubeconfig"
  "$KUBE_CACHE/bin/kubectl" --kubeconfig "$dir/kubeconfig" wait --for=condition=Ready nodes --all --timeout=300s >/dev/null \
    || die "the nodes of kind cluster $name did not become Ready (kind-down $dir to remove it)"
  # As `up` does for the local cluster's nodes (complete-cluster.sh): the apiserver gave each new node
  # not-ready:NoSchedule, which only the node lifecycle controller (off) would lift; lifted once here, so the
  # first taintkeeper can be scheduled. After that only taintkeeper's controller taints or untaints.
  local node
  for node in $("$KUBE_CACHE/bin/kubectl" --kubeconfig "$dir/kubeconfig" get nodes -o jsonpath='{.items[*].metadata.name}'); do
    "$KUBE_CACHE/bin/kubectl" --kubeconfig "$dir/kubeconfig" taint nodes "$node" "$REGISTRATION_TAINT:NoSchedule-" \
      >/dev/null || die "could not lift $REGISTRATION_TAINT:NoSchedule from $node"
  done
  route_pod_cidrs "$dir"
  { echo "export KUBECONFIG=$dir/kubeconfig PATH=$KUBE_CACHE/bin:\$PATH"
    if [ -n "${DOCKER_HOST:-}" ]; then echo "export DOCKER_HOST=$DOCKER_HOST"; fi; } >"$dir/env"
  log "kind cluster $name is up: KUBECONFIG=$dir/kubeconfig"
  echo "$dir/kubeconfig"
}

cmd_kind_down() { # dir
  local dir name
  dir=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
  if [ -f "$dir/kind.env" ]; then
    name=$(kind_env_value "$dir" KIND_CLUSTER)
    DOCKER_HOST=$(kind_env_value "$dir" DOCKER_HOST)
    if [ -n "$DOCKER_HOST" ]; then export DOCKER_HOST; else unset DOCKER_HOST; fi
    if docker_answers && [ -x "$KIND_BIN" ] && kind_cluster_exists "$name"; then
      "$KIND_BIN" delete cluster --name "$name" >&2 || log "could not delete kind cluster $name"
    fi
    rm -f "$dir/kind.env" "$dir/env"
    unroute_pod_cidrs "$dir"
  else
    log "no kind cluster in $dir"
  fi
  stop_pidfile "$dir/registry/pid" "$(cd "$dir" && pwd -P)" # it was started with DIR's physical path
  cmd_docker_down "$dir"
}
