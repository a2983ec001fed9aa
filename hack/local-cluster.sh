#!/usr/bin/env bash
# A real kube-apiserver + etcd on loopback, for the tests and the local demo; with --nodes, a
# complete local cluster.
#
#   hack/local-cluster.sh up DIR [--kubernetes 1.37|1.20] [--nodes N] [--audit] [--builtin-node-lifecycle]
#                                     start etcd + kube-apiserver, write DIR/kubeconfig, print its path;
#                                     --kubernetes: the version (else $TAINTKEEPER_KUBERNETES, else the one
#                                     DIR holds, else 1.37), kept in DIR/kubernetes.env: every later command
#                                     on DIR uses it, and `up` refuses another version for a DIR that holds
#                                     one's data;
#                                     with N > 0 a complete cluster: also N real nodes (containerd +
#                                     kubelet each) until Ready, kube-scheduler, kube-controller-manager
#                                     without its node lifecycle controller, kube-proxy (iptables) and a
#                                     pod network across the nodes; the apiserver then serves on the
#                                     host's IP too and admits with ServiceAccount (a DIR started plain
#                                     gets its apiserver restarted so). One such cluster per host at a time.
#                                     --audit: kube-apiserver writes an audit log, DIR/logs/audit.log
#                                     (RequestResponse for writes to pods, nodes, their subresources and
#                                     leases; Metadata for the rest). --builtin-node-lifecycle (with
#                                     --nodes): the oracle: kube-controller-manager runs its own node
#                                     lifecycle controller and taint manager (two replicas, leader-elected:
#                                     kube-controller-manager and kube-controller-manager-2), kube-apiserver its
#                                     DefaultTolerationSeconds plugin, and `deploy` refuses. Both are kept
#                                     in DIR/options.env until the next `up` (which restarts what changed)
#   hack/local-cluster.sh deploy DIR [--overlay KUSTOMIZATION] [--side-load]
#                                     taintkeeper from its own image and manifests into DIR's complete
#                                     cluster (or kind-up's): build the image (make image), push it to DIR's
#                                     registry (see `registry`), point the kustomization at it by digest
#                                     (the nodes pull it), apply manifests/ or manifests/kube-1.20 (or the
#                                     overlay given; --side-load imports the image into each node instead) with
#                                     server-side apply, wait for the certificate Job's Secret and caBundle
#                                     and for both Deployments to be Available. Idempotent (hack/deploy.py;
#                                     runs with the project's .venv, or $PYTHON)
#   hack/local-cluster.sh registry DIR
#                                     DIR's OCI registry (go-containerregistry's, TLS, hack/cluster_registry.py),
#                                     started unless running, on 127.0.0.1 (kind: the kind network's gateway),
#                                     every node's containerd told to trust it (hosts.toml); prints its
#                                     address. down / kind-down stop it
#   hack/local-cluster.sh down DIR    stop exactly the processes started for DIR and undo the host changes
#                                     its nodes and kube-proxy made (sysctls, iptables chains, dirs,
#                                     cgroups, bridges)
#   hack/local-cluster.sh nodes DIR   the real nodes as JSON (name, zone, pids, containerd socket, ...)
#   hack/local-cluster.sh stop-kubelet DIR NODE [--signal KILL|TERM] / start-kubelet DIR NODE
#                                     stop (default TERM) or start one node's kubelet; containers keep running
#   hack/local-cluster.sh stop-node DIR NODE / start-node DIR NODE
#                                     a power-off: SIGKILL one node's kubelet, its containerd and every container
#                                     on it (nothing is reported); start-node starts containerd and the kubelet
#                                     again and waits until the node is Ready
#   hack/local-cluster.sh stop-runtime DIR NODE / start-runtime DIR NODE
#                                     the container runtime fails: SIGKILL one node's containerd (the kubelet
#                                     and the containers run on; the kubelet reports Ready=False, "container
#                                     runtime is down", and keeps its Lease); start-runtime starts it again
#   hack/local-cluster.sh build-node  only build (and cache) the kubelet, kube-proxy, kube-scheduler,
#                                     kube-controller-manager, pause and the node images
#   hack/local-cluster.sh status DIR  say whether DIR's control plane is running
#   hack/local-cluster.sh stop-apiserver DIR / start-apiserver DIR [--default-toleration-seconds]
#                                     stop or start only kube-apiserver (same port and mode; etcd keeps the data);
#                                     --default-toleration-seconds: this start only, with the built-in
#                                     DefaultTolerationSeconds plugin on (bench/admission_latency.py's config b)
#   hack/local-cluster.sh restart-etcd DIR
#                                     stop etcd and start it again (same data and ports)
#   hack/local-cluster.sh start-controller-manager DIR
#                                     start kube-controller-manager (each of the oracle's replicas) again if
#                                     it is not running
#   hack/local-cluster.sh start-components DIR [NAME...]
#                                     start whichever of the components named (default: kube-scheduler,
#                                     kube-controller-manager[-2], kube-proxy) exited, as a kubelet restarts
#                                     static pods; print their names
#   hack/local-cluster.sh docker-up DIR / docker-down DIR
#                                     a Docker engine for kind's nodes: the one that answers (a laptop's,
#                                     left running), else Debian's docker.io installed and dockerd started
#                                     with its socket and state in DIR/docker (lib/docker.sh); prints the
#                                     DOCKER_HOST=... line to use. docker-down stops it and puts the host's
#                                     iptables, sysctls and links back as they were. Never beside real nodes
#   hack/local-cluster.sh kind-up DIR [--image IMAGE] [--name NAME] / kind-down DIR
#                                     a kind cluster (kind v0.33 from its module) in DIR's Docker engine
#                                     (docker-up): one control plane and three workers from
#                                     hack/kind-config.yaml, the built-ins off, from the node image
#                                     hack/kind_node.py builds offline and caches (or IMAGE, already in the
#                                     engine); DIR/kubeconfig; a second kind-up of DIR is a no-op (lib/kind.sh).
#                                     kind-down deletes the cluster, then does docker-down. 1.37 only
#   hack/local-cluster.sh crds cert-manager
#                                     print the directory of cert-manager's CustomResourceDefinitions, from
#                                     its Go module (hack/upstream/cert-manager), downloaded if missing
#   hack/local-cluster.sh build       only build (and cache) kube-apiserver (and, from 1.21 on, etcd)
#   hack/local-cluster.sh build-helm  only build (and cache) helm from its Go module (hack/upstream/helm), for
#                                     the chart's tests (tests/chart/); print its path
#   hack/local-cluster.sh build-registry
#                                     only build (and cache) the OCI registry and crane (hack/upstream/registry),
#                                     for hack/registry.py; print the directory holding both
#   hack/local-cluster.sh build-kind  only build (and cache) kind from its Go module (hack/upstream/kind), for
#                                     the end-to-end suite on kind (hack/kind-e2e.sh); print its path
#   hack/local-cluster.sh build-kind-node
#                                     only build (and cache) what a kind node runs beside the Kubernetes
#                                     binaries: kubeadm, crictl (hack/upstream/crictl), CoreDNS
#                                     (hack/upstream/coredns); 1.37 only; print their paths
#   hack/local-cluster.sh build-kind-node-image
#                                     only build (and cache) kind's node image, taintkeeper.local/kind-node:v1.37.2
#                                     (hack/kind_node.py, offline: no registry); print it as JSON (tag, ID, layers)
#   hack/local-cluster.sh deps [--tools|--bench|--nodes]
#                                     install every Debian package the demo and the tests use and build
#                                     (and cache) kube-apiserver; --tools: only the test tools (promtool,
#                                     prometheus, tmux); --bench: those and the load generators (wrk, hey);
#                                     --nodes: also what build-node builds. Idempotent: the test
#                                     fixtures run it before anything else
#
# Besides DIR/kubeconfig (cluster-admin), DIR/kubeconfig-<name> authenticates as the
# ServiceAccount user system:serviceaccount:taintkeeper-system:<name> for each name in
# SERVICE_ACCOUNTS (static tokens), so tests can run components under their own RBAC.
#
# build, build-node and deps take --kubernetes too. No registry ships these binaries, so the first
# run on a machine builds them and caches them under ${TAINTKEEPER_CACHE:-~/.cache/taintkeeper}:
# 1.37.2 with Go from upstream's modules (hack/upstream/, etcd 3.6 from hack/upstream/etcd/), 1.20.2
# from Debian's `kubernetes` source package with Debian's etcd-server (lib/build.sh).
# The apiserver runs without DefaultTolerationSeconds in every mode: left on, it would add the
# very tolerations taintkeeper's webhook adds and mask a broken webhook. Without --nodes it also
# runs without ServiceAccount admission (no controller creates `default` ServiceAccounts there).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$HERE/lib/common.sh"
# shellcheck source=SCRIPTDIR/lib/build.sh
. "$HERE/lib/build.sh"
# shellcheck source=SCRIPTDIR/lib/control-plane.sh
. "$HERE/lib/control-plane.sh"
# shellcheck source=SCRIPTDIR/lib/host.sh
. "$HERE/lib/host.sh"
# shellcheck source=SCRIPTDIR/lib/nodes.sh
. "$HERE/lib/nodes.sh"
# shellcheck source=SCRIPTDIR/lib/complete-cluster.sh
. "$HERE/lib/complete-cluster.sh"
# shellcheck source=SCRIPTDIR/lib/deploy.sh
. "$HERE/lib/deploy.sh"
# shellcheck source=SCRIPTDIR/lib/docker.sh
. "$HERE/lib/docker.sh"
# shellcheck source=SCRIPTDIR/lib/kind.sh
. "$HERE/lib/kind.sh"

usage() { # the comment block at the top, up to its second empty line
  awk 'NR > 1 && /^#$/ && ++blank == 2 {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0" >&2
  exit 2
}

# --kubernetes V, wherever it stands, is taken out of the arguments here.
asked_kubernetes="" args=()
while [ $# -gt 0 ]; do
  if [ "$1" = --kubernetes ]; then
    [ $# -ge 2 ] || die "--kubernetes needs a version (1.37 or 1.20)"
    asked_kubernetes=$(kubernetes_minor "$2")
    shift 2
  else args+=("$1"); shift; fi
done
set -- "${args[@]}"
[ $# -ge 1 ] || usage
case "$1" in
  build|build-node|build-helm|build-kind|build-kind-node|build-kind-node-image|build-registry|deps|crds|-h|--help|help) minor=$(kubernetes_minor "$asked_kubernetes") ;;
  up) [ $# -ge 2 ] || usage  # the environment asks too; with neither, DIR's own version (else the default)
      [ -n "$asked_kubernetes" ] || [ -z "${TAINTKEEPER_KUBERNETES:-}" ] || asked_kubernetes=$(kubernetes_minor)
      minor=$(dir_kubernetes "$2" "$asked_kubernetes") ;;
  *) [ $# -ge 2 ] || usage
     minor=$(dir_kubernetes "$2" "$asked_kubernetes") ;;
esac
use_kubernetes "$minor"
case "$1" in
  up)
    [ $# -ge 2 ] || usage
    up_dir=$2 up_nodes=0 up_audit=0 up_builtin=0
    shift 2
    while [ $# -gt 0 ]; do
      case "$1" in
        --nodes) if [ $# -lt 2 ] || ! [[ $2 =~ ^[0-9]+$ ]]; then die "--nodes needs a number of nodes"; fi
                 up_nodes=$2; shift 2 ;;
        --audit) up_audit=1; shift ;;
        --builtin-node-lifecycle) up_builtin=1; shift ;;
        *) die "up: unknown option '$1' (expected --nodes N, --audit, --builtin-node-lifecycle)" ;;
      esac
    done
    [ "$up_builtin" = 0 ] || [ "$up_nodes" -gt 0 ] \
      || die "--builtin-node-lifecycle needs --nodes N: it runs kube-controller-manager's node lifecycle controller"
    UP_AUDIT=$up_audit UP_BUILTIN_NODE_LIFECYCLE=$up_builtin cmd_up "$up_dir" "$up_nodes" ;;
  start-apiserver)
    if [ $# -eq 2 ]; then cmd_start_apiserver "$2"
    elif [ $# -eq 3 ] && [ "$3" = --default-toleration-seconds ]; then
      APISERVER_DEFAULT_TOLERATION_SECONDS=1 cmd_start_apiserver "$2"
    else die "start-apiserver: expected DIR [--default-toleration-seconds]"; fi ;;
  down|status|stop-apiserver|nodes|start-controller-manager|restart-etcd|docker-up|docker-down)
    [ $# -eq 2 ] || usage
    "cmd_${1//-/_}" "$2" ;;
  kind-up)
    [ $# -ge 2 ] || usage
    cmd_kind_up "${@:2}" ;;
  kind-down)
    [ $# -eq 2 ] || usage
    cmd_kind_down "$2" ;;
  stop-kubelet)
    if [ $# -eq 3 ]; then cmd_stop_kubelet "$2" "$3"
    elif [ $# -eq 5 ] && [ "$4" = --signal ]; then cmd_stop_kubelet "$2" "$3" "$5"
    else usage; fi ;;
  start-kubelet)
    [ $# -eq 3 ] || usage
    cmd_start_kubelet "$2" "$3" ;;
  start-components)
    [ $# -ge 2 ] || usage
    cmd_start_components "${@:2}" ;;
  stop-node|start-node|stop-runtime|start-runtime)
    [ $# -eq 3 ] || usage
    "cmd_${1//-/_}" "$2" "$3" ;;
  build)
    [ $# -eq 1 ] || usage
    build_etcd
    build_apiserver
    echo "$APISERVER_BIN" ;;
  deps)
    if [ $# -eq 1 ]; then cmd_deps
    elif [ $# -eq 2 ] && { [ "$2" = --nodes ] || [ "$2" = --tools ] || [ "$2" = --bench ]; }; then cmd_deps "$2"
    else usage; fi ;;
  build-node)
    [ $# -eq 1 ] || usage
    build_node
    for name in "${NODE_COMPONENTS[@]}"; do echo "$KUBE_CACHE/bin/$name"; done ;;
  build-helm)
    [ $# -eq 1 ] || usage
    build_helm
    echo "$HELM_BIN" ;;
  build-kind)
    [ $# -eq 1 ] || usage
    build_kind
    echo "$KIND_BIN" ;;
  build-kind-node)
    [ $# -eq 1 ] || usage
    build_kind_node_binaries
    printf '%s\n' "$KUBE_CACHE/bin/kubeadm" "$CRICTL_DIR/bin/crictl" "$COREDNS_DIR/bin/coredns" ;;
  build-kind-node-image)
    [ $# -eq 1 ] || usage
    build_kind_node_image --describe ;;
  build-registry)
    [ $# -eq 1 ] || usage
    build_registry
    echo "$REGISTRY_DIR/bin" ;;
  crds)
    [ $# -eq 2 ] || usage
    cmd_crds "$2" ;;
  registry)
    [ $# -eq 2 ] || usage
    cmd_registry "$2" ;;
  deploy)
    { [ $# -ge 2 ] && [ "${2#-}" = "$2" ]; } || usage # DIR first; hack/deploy.py says what else it takes
    cmd_deploy "${@:2}" ;;
  -h|--help|help) usage ;;
  *) echo "local-cluster: unknown command '$1'" >&2; usage ;;
esac
