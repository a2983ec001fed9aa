#!/bin/sh
# The kind node's CNI agent (image taintkeeper.local/kind-cni, DaemonSet hack/kind/default-cni.yaml): what
# kind's kindnetd does for nodes on one Docker network, which this machine cannot build (its Go module is
# not served here). Every few seconds, from the API's nodes:
# - this node's pod CIDR becomes /etc/cni/net.d/10-kindnet.conflist (ptp + host-local, as kindnetd writes),
#   so the kubelet reports the network ready;
# - every other node's pod CIDR is routed via that node's InternalIP (all nodes share one bridge).
# No masquerade: cluster traffic stays inside kind's network, where every pod CIDR has a route.
set -u
: "${NODE_NAME:?NODE_NAME must be set (the downward API's spec.nodeName)}"
CONF_DIR=${CNI_CONF_DIR:-/etc/cni/net.d}
INTERVAL=${INTERVAL:-5}
# kind adds CONTROL_PLANE_ENDPOINT (host:port) so the agent need not wait for kube-proxy's Service rules.
if [ -n "${CONTROL_PLANE_ENDPOINT:-}" ]; then
  KUBERNETES_SERVICE_HOST=${CONTROL_PLANE_ENDPOINT%:*}
  KUBERNETES_SERVICE_PORT=${CONTROL_PLANE_ENDPOINT##*:}
  export KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
fi

write_conf() { # pod-cidr
  conf="{\"cniVersion\":\"0.4.0\",\"name\":\"kindnet\",\"plugins\":[{\"type\":\"ptp\",\"ipMasq\":false,\"mtu\":1500,"
  conf="$conf\"ipam\":{\"type\":\"host-local\",\"dataDir\":\"/run/cni-ipam-state\",\"routes\":[{\"dst\":\"0.0.0.0/0\"}],"
  conf="$conf\"ranges\":[[{\"subnet\":\"$1\"}]]}},{\"type\":\"portmap\",\"capabilities\":{\"portMappings\":true}}]}"
  if [ "$(cat "$CONF_DIR/10-kindnet.conflist" 2>/dev/null)" != "$conf" ]; then
    mkdir -p "$CONF_DIR"
    printf '%s' "$conf" >"$CONF_DIR/.10-kindnet.conflist.tmp" && mv "$CONF_DIR/.10-kindnet.conflist.tmp" "$CONF_DIR/10-kindnet.conflist"
    echo "kind-cni-agent: this node's pod CIDR $1 written to $CONF_DIR/10-kindnet.conflist"
  fi
}

while :; do
  if nodes=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' 2>&1); then
    echo "$nodes" | while read -r name cidr address; do
      [ -n "$cidr" ] && [ -n "$address" ] || continue
      if [ "$name" = "$NODE_NAME" ]; then
        write_conf "$cidr"
      else
        case "$(ip route show "$cidr")" in
          *"via $address "*) ;;
          *) ip route replace "$cidr" via "$address" && echo "kind-cni-agent: $cidr (node $name) via $address" ;;
        esac
      fi
    done
  else
    echo "kind-cni-agent: could not list nodes: $nodes" >&2
  fi
  sleep "$INTERVAL"
done
