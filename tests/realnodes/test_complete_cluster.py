"""`up DIR --nodes 2` is a complete cluster: kube-scheduler places pods, kube-controller-manager runs
its controllers but the node lifecycle one, kube-proxy makes ClusterIP Services work from pods on any
node and from the host, and pods reach the apiserver through the `kubernetes` Service with their
mounted ServiceAccount token.

Its own two-node cluster, brought up and down in this module, which runs before test_host_restore
and test_scenarios (file order): one cluster with real nodes runs on a host at a time.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client, config

from tests.integration.kube import raw, wait_for
from tests.realnodes.conftest import bring_up
from tests.realnodes.nodes import RealCluster, cmdline, component_pid, script, wait_default_service_account
from tests.support.kubernetes_version import server_minor

COMPONENTS = ("kube-scheduler", "kube-controller-manager", "kube-proxy")
KUBERNETES_SERVICE = "10.96.0.1:443"
# kube-controller-manager's defaults: were its node lifecycle controller on, a node silent this long
# would get Ready=Unknown and the unreachable taints within one more monitor period (5 s).
KCM_GRACE_S = 40
KCM_MONITOR_PERIOD_S = 5
# The first run on a machine builds kube-proxy, kube-scheduler and kube-controller-manager in `up`.
pytestmark = pytest.mark.timeout(1200)


@dataclass
class Complete:
    cluster: RealCluster
    namespace: str

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.cluster.api_client)

    @property
    def image(self) -> str:
        return next(iter(self.cluster.nodes.values()))["busyboxImage"]

    def pod(self, name: str) -> dict:
        return raw(self.core.read_namespaced_pod, name, self.namespace)

    def create_pod(
        self, name: str, command: str, *, node: str | None = None, labels: dict | None = None, once: bool = False
    ) -> dict:
        spec: dict = {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "c", "image": self.image, "imagePullPolicy": "Never", "command": ["sh", "-c", command]}
            ],
        }
        if node:
            spec["nodeName"] = node
        if once:
            spec["restartPolicy"] = "Never"
        return raw(
            self.core.create_namespaced_pod,
            self.namespace,
            body={"metadata": {"name": name, "labels": labels or {}}, "spec": spec},
        )

    def running(self, name: str) -> dict | None:
        pod = self.pod(name)
        return pod if pod["status"].get("phase") == "Running" and pod["status"].get("podIP") else None

    def run_to_completion(
        self, name: str, command: str, *, node: str | None = None, timeout: float = 90
    ) -> tuple[str, str]:
        """Run `command` once in a busybox pod; its phase (Succeeded/Failed) and its log."""
        self.create_pod(name, command, node=node, once=True)
        phase = wait_for(
            lambda: (
                self.pod(name)["status"].get("phase") in ("Succeeded", "Failed") and self.pod(name)["status"]["phase"]
            ),
            timeout,
            f"pod {name} to finish",
        )
        log = self.core.read_namespaced_pod_log(name, self.namespace)
        return phase, log


@pytest.fixture(scope="module")
def complete(tmp_path_factory: pytest.TempPathFactory, node_packages: None) -> Iterator[Complete]:
    directory = tmp_path_factory.mktemp("complete")
    kubeconfig, _ = bring_up(directory, 2)
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        cluster = RealCluster(directory=directory, kubeconfig=kubeconfig, api_client=api_client)
        cluster.refresh()
        core = client.CoreV1Api(api_client)
        namespace = f"cc-{uuid.uuid4().hex[:6]}"
        core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": namespace}}))
        wait_default_service_account(core, namespace)
        yield Complete(cluster, namespace)
    finally:
        api_client.close()
        result = script("down", str(directory))
        assert result.returncode == 0, result.stderr


@dataclass(frozen=True)
class ControllerNames:
    replaced: tuple[str, ...]  # what taintkeeper replaces: switched off
    running: tuple[str, ...]  # a sample of what must run
    disabled: str  # kube-controller-manager's log line for a switched-off controller ({} its name)
    started: str  # ... and for one it starts
    token_secrets: bool  # ServiceAccounts get token Secrets (before 1.24)


# False: 1.20 (the taint manager inside `nodelifecycle`); True: 1.29+ (`taint-eviction-controller` of its own).
CONTROLLER_NAMES = {
    False: ControllerNames(
        ("nodelifecycle",),
        (
            "deployment",
            "replicaset",
            "job",
            "cronjob",
            "endpoint",
            "endpointslice",
            "serviceaccount",
            "garbagecollector",
            "namespace",
            "podgc",
        ),
        '"{}" is disabled',
        'Started "{}"',
        True,
    ),
    True: ControllerNames(
        ("node-lifecycle-controller", "taint-eviction-controller"),
        (
            "deployment-controller",
            "replicaset-controller",
            "job-controller",
            "cronjob-controller",
            "endpoints-controller",
            "endpointslice-controller",
            "serviceaccount-controller",
            "garbage-collector-controller",
            "namespace-controller",
            "pod-garbage-collector-controller",
        ),
        '"Warning: controller is disabled" controller="{}"',
        '"Controller starting..." controller="{}"',
        False,
    ),
}


def test_the_components_run_and_kube_controller_manager_has_every_controller_but_nodelifecycle(complete: Complete):
    directory = complete.cluster.directory
    for name in COMPONENTS:
        assert component_pid(directory, name), f"{name} is not running"
    kcm_pid = component_pid(directory, "kube-controller-manager")
    assert kcm_pid is not None
    kcm = cmdline(kcm_pid)
    controllers = kcm[kcm.index("--controllers") + 1].split(",")
    log = (directory / "logs" / "kube-controller-manager.log").read_text()
    names = CONTROLLER_NAMES[server_minor(complete.cluster.api_client) >= 29]
    assert controllers[0] == "*"
    for replaced in names.replaced:
        assert f"-{replaced}" in controllers, (replaced, controllers)
        assert names.disabled.format(replaced) in log, replaced
        assert names.started.format(replaced) not in log, replaced
    for started in names.running:
        assert names.started.format(started) in log, started
    account = complete.core.read_namespaced_service_account("default", complete.namespace)
    if names.token_secrets:  # serviceaccount-token: the default ServiceAccount got its token (the fixture waited)
        assert account.secrets is not None and account.secrets[0].name is not None
        secret = complete.core.read_namespaced_secret(account.secrets[0].name, complete.namespace)
        assert secret.type == "kubernetes.io/service-account-token" and secret.data is not None and secret.data["token"]
    else:  # 1.24+: tokens are requested per pod (test_a_pod_reaches_the_kubernetes_service_with_its_mounted_token)
        assert not account.secrets
    # and the nodes are schedulable: the apiserver's registration taint was lifted, nothing else tainted them
    for name in complete.cluster.nodes:
        assert not raw(complete.core.read_node, name)["spec"].get("taints"), name


def test_kube_scheduler_places_a_pod_without_a_node_name(complete: Complete):
    created = complete.create_pod("unplaced", "sleep 3600")
    assert not created["spec"].get("nodeName")
    pod = wait_for(lambda: complete.running("unplaced"), 60, "the pod scheduled and running")
    assert pod["spec"]["nodeName"] in complete.cluster.nodes
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "True"
    events = complete.core.list_namespaced_event(
        complete.namespace, field_selector="involvedObject.name=unplaced,reason=Scheduled"
    )
    # the scheduler records events.k8s.io events: reportingController, no source
    assert [e.reporting_component or (e.source.component if e.source is not None else None) for e in events.items] == [
        "default-scheduler"
    ]


def test_an_exited_kube_scheduler_is_started_again_and_places_pods(complete: Complete):
    """`start-components`, the soak's supervisor (bench/soak/supervisor.py): kube-scheduler exits by design
    on a corrupted cache and trusts its supervisor to start it again."""
    directory = complete.cluster.directory
    killed = component_pid(directory, "kube-scheduler")
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    wait_for(lambda: component_pid(directory, "kube-scheduler") is None, 10, "kube-scheduler gone")
    started = script("start-components", str(directory), "kube-scheduler", "kube-proxy")
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["kube-scheduler"]  # kube-proxy was running: left alone
    assert component_pid(directory, "kube-scheduler") not in (None, killed)
    complete.create_pod("after-restart", "sleep 3600")
    wait_for(lambda: complete.running("after-restart"), 60, "a pod placed by the restarted scheduler")


def test_a_deployment_gets_its_pods(complete: Complete):
    apps = client.AppsV1Api(complete.cluster.api_client)
    labels = {"app": "deployed"}
    apps.create_namespaced_deployment(
        complete.namespace,
        body=client.V1Deployment.model_validate(
            {
                "metadata": {"name": "deployed"},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "terminationGracePeriodSeconds": 1,
                            "containers": [
                                {
                                    "name": "c",
                                    "image": complete.image,
                                    "imagePullPolicy": "Never",
                                    "command": ["sleep", "3600"],
                                }
                            ],
                        },
                    },
                },
            }
        ),
    )

    def ready_replicas() -> int | None:
        status = apps.read_namespaced_deployment("deployed", complete.namespace).status
        return status.ready_replicas if status is not None else None

    wait_for(lambda: ready_replicas() == 3, 90, "3 ready replicas")
    pods = raw(complete.core.list_namespaced_pod, complete.namespace, label_selector="app=deployed")["items"]
    assert len(pods) == 3
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"ReplicaSet"}
    assert {p["spec"]["nodeName"] for p in pods} <= set(complete.cluster.nodes)


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=3) as response:
        return response.read().decode()


def test_a_cluster_ip_service_works_from_a_pod_on_another_node_and_from_the_host(complete: Complete):
    marker = f"served-by-{uuid.uuid4().hex[:8]}"
    complete.create_pod(
        "server",
        f"mkdir -p /www && echo {marker} >/www/index.html && exec httpd -f -p 8080 -h /www",
        node="node-1",
        labels={"app": "server"},
    )
    server = wait_for(lambda: complete.running("server"), 60, "the server pod running")
    service = complete.core.create_namespaced_service(
        complete.namespace,
        body=client.V1Service.model_validate(
            {
                "metadata": {"name": "web"},
                "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8080}]},
            }
        ),
    )
    assert service.spec is not None
    cluster_ip, pod_ip = service.spec.cluster_ip, server["status"]["podIP"]
    assert cluster_ip is not None and cluster_ip.startswith("10.96.")

    # the host: kube-apiserver reaches webhooks this way (a Service's ClusterIP, DNATed by kube-proxy)
    body = wait_for(lambda: http_get(f"http://{cluster_ip}/"), 30, "the ClusterIP to answer from the host")
    assert body.strip() == marker
    assert http_get(f"http://{pod_ip}:8080/").strip() == marker  # and the pod directly

    # a pod on the other node: through the Service, and straight to the pod across the nodes
    request = r"printf 'GET / HTTP/1.0\r\n\r\n'"
    phase, log = complete.run_to_completion(
        "client",
        (
            f"{request} | nc -w 5 {cluster_ip} 80 | grep -q {marker} || {{ echo service-failed; exit 1; }}; "
            f"{request} | nc -w 5 {pod_ip} 8080 | grep -q {marker} || {{ echo pod-failed; exit 2; }}; "
            "echo both-answered"
        ),
        node="node-2",
    )
    assert (phase, log.strip()) == ("Succeeded", "both-answered"), log
    assert complete.pod("client")["spec"]["nodeName"] != server["spec"]["nodeName"]


def test_a_pod_reaches_the_kubernetes_service_with_its_mounted_token(complete: Complete):
    rbac = client.RbacAuthorizationV1Api(complete.cluster.api_client)
    rbac.create_namespaced_role_binding(
        complete.namespace,
        body=client.V1RoleBinding.model_validate(
            {
                "metadata": {"name": "default-view"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": complete.namespace}],
            }
        ),
    )
    # What an in-cluster client does: KUBERNETES_SERVICE_HOST/PORT, the mounted token and namespace,
    # HTTPS to the `kubernetes` Service. Without the token the same read is refused (anonymous): the
    # apiserver answers 401 or 403, not a failed connection.
    # (busybox wget does not verify certificates; the apiserver's certificate names 10.96.0.1 for real clients.)
    commands = r"""
sa=/var/run/secrets/kubernetes.io/serviceaccount
test -s $sa/token && test -s $sa/ca.crt && test -s $sa/namespace || { echo no-token-mounted; exit 2; }
api=https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$(cat $sa/namespace)/pods/$HOSTNAME
echo "service=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
if refused=$(wget -q -O /dev/null --no-check-certificate "$api" 2>&1); then echo anonymous-allowed; exit 3; fi
case "$refused" in *" 401 "*|*" 403 "*) ;; *) echo "anonymous-not-answered: $refused"; exit 5 ;; esac
echo BEGIN
wget -q -O - --no-check-certificate --header "Authorization: Bearer $(cat $sa/token)" "$api" || exit 4
echo
echo END
"""
    phase, log = complete.run_to_completion("in-cluster", commands)
    assert phase == "Succeeded", log
    lines = log.splitlines()
    assert lines[0] == f"service={KUBERNETES_SERVICE}"
    myself = json.loads("\n".join(lines[lines.index("BEGIN") + 1 : lines.index("END")]))
    pod = complete.pod("in-cluster")
    assert myself["kind"] == "Pod" and myself["metadata"]["uid"] == pod["metadata"]["uid"]
    # the token came from ServiceAccount admission: a token Secret's volume on 1.20, a projected
    # service account token (bound to the pod, requested by the kubelet) from 1.22 on
    if server_minor(complete.cluster.api_client) < 22:
        assert any(
            v.get("secret", {}).get("secretName", "").startswith("default-token-") for v in pod["spec"]["volumes"]
        )
    else:
        assert any(
            source.get("serviceAccountToken")
            for v in pod["spec"]["volumes"]
            if v["name"].startswith("kube-api-access-")
            for source in v["projected"]["sources"]
        )


def lease_age(complete: Complete, node: str) -> float:
    lease = client.CoordinationV1Api(complete.cluster.api_client).read_namespaced_lease(node, "kube-node-lease")
    assert lease.spec is not None and lease.spec.renew_time is not None, f"{node}'s Lease was never renewed"
    return time.time() - lease.spec.renew_time.timestamp()


def test_no_node_lifecycle_controller_taints_a_node_whose_kubelet_stopped(complete: Complete):
    node = "node-2"
    complete.cluster.stop_kubelet(node, "TERM")
    try:
        # kube-controller-manager's own grace period and monitor period, plus slack, since the last renewal
        silent = KCM_GRACE_S + 2 * KCM_MONITOR_PERIOD_S
        wait_for(lambda: lease_age(complete, node) > silent, silent + 30, f"{node}'s Lease {silent} s old", interval=1)
        status = raw(complete.core.read_node, node)
        assert {c["type"]: c["status"] for c in status["status"]["conditions"]}["Ready"] == "True"
        assert not status["spec"].get("taints")
    finally:
        complete.cluster.start_kubelet(node)
