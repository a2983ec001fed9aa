"""`up --nodes 2` then `down` leaves the machine as it found it: everything a kubelet, containerd or
the CNI plugins touch on the host is snapshotted before and after and compared.

Runs first in its suite (tests/realnodes/conftest.py), so no other real nodes are up: host changes
are restored by the last `down` on the machine.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import pytest
from kubernetes import client, config

from tests.integration.kube import wait_for
from tests.realnodes.conftest import bring_up
from tests.realnodes.nodes import RealCluster, checked, script, wait_default_service_account

# kubelet, CNI bridge, and kube-proxy (route_localnet; it reads bridge-nf-call-iptables and would set the
# conntrack ones if its config asked); keys this kernel lacks are left out
SYSCTLS = tuple(
    key
    for key in (
        "vm.overcommit_memory",
        "vm.panic_on_oom",
        "kernel.panic",
        "kernel.panic_on_oops",
        "kernel.keys.root_maxkeys",
        "kernel.keys.root_maxbytes",
        "net.ipv4.ip_forward",
        "net.ipv4.conf.all.route_localnet",
        "net.bridge.bridge-nf-call-iptables",
        "net.netfilter.nf_conntrack_max",
        "net.netfilter.nf_conntrack_tcp_timeout_established",
        "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
    )
    if Path("/proc/sys", *key.split(".")).exists()
)
# iptables chains kube-proxy (iptables mode) creates whatever the services; KUBE-SVC-*/KUBE-SEP-* per service
PROXY_CHAINS = (
    "iptables *nat KUBE-SERVICES",
    "iptables *nat KUBE-NODEPORTS",
    "iptables *nat KUBE-POSTROUTING",
    "iptables *nat KUBE-MARK-MASQ",
    "iptables *filter KUBE-FORWARD",
    "iptables *filter KUBE-SERVICES",
)
PATHS = (
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/usr/libexec/kubernetes",
    "/run/containerd",
    "/run/netns",
    "/var/run/netns",
    "/var/lib/cni",
    "/var/lib/containerd",
    "/opt/containerd",
    "/etc/cni",
    "/opt/cni",
    "/run/kubernetes",
    "/etc/kubernetes",
    "/var/lib/dockershim",
    "/var/lib/kubelet/pki",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The first run on a machine builds the kubelet (about 2.5 minutes on 2 cores) inside this test.
pytestmark = pytest.mark.timeout(900)


def run(*args: str) -> str:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    return result.stdout


def iptables_rules() -> list[str]:
    lines = []
    for family in ("iptables", "ip6tables"):
        for line in run(f"{family}-save").splitlines():
            if line.startswith("#"):
                continue
            if line.startswith(":"):  # chain policy with counters: keep name and policy only
                line = " ".join(line.split()[:2])
            lines.append(f"{family} {line}")
    return lines


def iptables_chains(rules: list[str]) -> set[str]:
    """ "<family> *<table> <chain>" for every chain in iptables_rules()."""
    chains, table = set(), ""
    for line in rules:
        family, rest = line.split(" ", 1)
        if rest.startswith("*"):
            table = rest
        elif rest.startswith(":"):
            chains.add(f"{family} {table} {rest[1:].split()[0]}")
    return chains


class Snapshot(TypedDict):
    sysctls: dict[str, str]
    iptables: list[str]
    mounts: list[tuple[str, str, str]]
    paths: dict[str, list[str] | None]
    cgroups: dict[str, list[str]]
    links: dict[str, list[str]]
    netns: list[str]


def snapshot() -> Snapshot:
    mounts = sorted(
        {
            (fields[4], line.split(" - ")[1].split()[0], line.split(" - ")[1].split()[1])
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            for fields in [line.split()]
        }
    )
    paths = {path: sorted(p.name for p in Path(path).iterdir()) if Path(path).is_dir() else None for path in PATHS}
    cgroups = {
        str(hierarchy): sorted(entry.name for entry in hierarchy.iterdir() if entry.is_dir())
        for hierarchy in sorted(CGROUP_ROOT.iterdir())
        if hierarchy.is_dir()
    }
    links = {
        kind: sorted(
            line.split(":")[1].strip().split("@")[0]
            for line in run("ip", "-o", "link", "show", "type", kind).splitlines()
        )
        for kind in ("bridge", "veth")
    }
    return {
        "sysctls": {key: run("sysctl", "-n", key).strip() for key in SYSCTLS},
        "iptables": iptables_rules(),
        "mounts": mounts,
        "paths": paths,
        "cgroups": cgroups,
        "links": links,
        "netns": run("ip", "netns", "list").split(),
    }


def differences(before: Mapping[str, object], after: Mapping[str, object]) -> dict[str, tuple[object, object]]:
    return {key: (before[key], after[key]) for key in before if before[key] != after[key]}


def test_down_leaves_the_host_as_up_found_it(tmp_path_factory: pytest.TempPathFactory, node_packages: None):
    before = snapshot()
    # A short directory: containerd's socket path under it may not pass 104 bytes.
    directory = tmp_path_factory.mktemp("restore") / "cluster"
    kubeconfig, _ = bring_up(directory, 2)
    try:
        cluster = RealCluster(directory, kubeconfig, config.new_client_from_config(config_file=str(kubeconfig)))
        nodes = cluster.refresh()
        core = client.CoreV1Api(cluster.api_client)
        namespace = f"host-{uuid.uuid4().hex[:6]}"
        core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": namespace}}))
        wait_default_service_account(core, namespace)
        for name, node in nodes.items():  # a running pod per node: sandboxes, netns, veths, bridges
            core.create_namespaced_pod(
                namespace,
                body=client.V1Pod.model_validate(
                    {
                        "metadata": {"name": f"p-{name}", "labels": {"taintkeeper.io/skip": "true", "app": "host"}},
                        "spec": {
                            "nodeName": name,
                            "terminationGracePeriodSeconds": 1,
                            "containers": [
                                {
                                    "name": "c",
                                    "image": node["busyboxImage"],
                                    "imagePullPolicy": "Never",
                                    "command": ["sleep", "3600"],
                                }
                            ],
                        },
                    }
                ),
            )
        for name in nodes:

            def running(name: str = name) -> bool:
                status = core.read_namespaced_pod(f"p-{name}", namespace).status
                return status is not None and status.phase == "Running"

            wait_for(running, 60, f"the pod on {name} to run")
        # a Service with endpoints on both nodes (and a NodePort): kube-proxy's per-service chains
        core.create_namespaced_service(
            namespace,
            body=client.V1Service.model_validate(
                {
                    "metadata": {"name": "host"},
                    "spec": {
                        "type": "NodePort",
                        "selector": {"app": "host"},
                        "ports": [{"port": 80, "targetPort": 8080}],
                    },
                }
            ),
        )

        def service_chains() -> set[str]:
            chains = iptables_chains(iptables_rules())
            sep = {c for c in chains if c.startswith("iptables *nat KUBE-SEP-")}
            svc = {c for c in chains if c.startswith("iptables *nat KUBE-SVC-")}
            return chains if len(svc) >= 2 and len(sep) >= 3 else set()  # kubernetes + host; 1 + 2 endpoints

        wait_for(service_chains, 30, "kube-proxy's chains for the kubernetes and host Services")
        during = snapshot()
        changed = differences(before, during)
        # the comparison below means something only if the nodes and kube-proxy did change the host
        assert {"cgroups", "links", "paths", "iptables"} <= changed.keys(), changed.keys()
        assert all(node["bridge"] in during["links"]["bridge"] for node in nodes.values())
        chains = iptables_chains(during["iptables"])
        assert set(PROXY_CHAINS) <= chains, set(PROXY_CHAINS) - chains
        assert not set(PROXY_CHAINS) & iptables_chains(before["iptables"])
        assert during["sysctls"]["net.ipv4.conf.all.route_localnet"] == "1"
        assert during["sysctls"]["net.ipv4.ip_forward"] == "1"
        cluster.api_client.close()
    finally:
        result = script("down", str(directory))
    assert result.returncode == 0, result.stderr
    after = snapshot()
    assert differences(before, after) == {}
    leftovers = [line for line in run("ps", "-eo", "pid,args").splitlines() if str(directory) in line]
    assert leftovers == []
    assert checked("nodes", str(directory)).strip() == "[]"
