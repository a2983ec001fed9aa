"""The manifests' RBAC, proven on the real apiserver: the Namespace, ServiceAccounts, (Cluster)Roles
and bindings from manifests/ are applied, then

* the controller (leader election on the real Lease) and the webhook run under their own
  ServiceAccount identities (hack/local-cluster.sh's DIR/kubeconfig-taintkeeper-<name>, static
  tokens for system:serviceaccount:taintkeeper-system:<name>) through a whole node failure, and
  the controller's log shows no refused call;
* every call each identity needs is authorized, and calls the roles do not grant are refused
  (HTTP 403). The certs sync identity, which has no token in the local cluster, is checked through
  impersonation by the admin.

"Authorized" means the answer is not 403: a 404 for an object that does not exist comes after
the authorization check, so it proves the verb is granted without creating anything.
"""

from __future__ import annotations

import contextlib
import inspect
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from hack.servers import ControllerProcess, WebhookServer, make_certs
from hack.simulator import Simulator
from kube.client import REQUEST_TIMEOUT
from kube.discovery import dynamic_client
from kube.request import request_json
from tests.integration.kube import LocalCluster, raw, wait_for
from tests.integration.test_manifests import manifest_documents, server_side_apply
from tests.support.refusals import REFUSED
from webhook.registration import mutating_webhook_configuration

NAMESPACE = "taintkeeper-system"
LEASE = "taintkeeper-controller"
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
UR = "node.kubernetes.io/unreachable"
NR = "node.kubernetes.io/not-ready"
FAST = (
    "--node-monitor-period=1s",
    "--node-monitor-grace-period=4s",
    "--node-startup-grace-period=10s",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
)


@pytest.fixture(scope="module")
def rbac(local_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """Apply the manifests' identities and permissions for real, and take the permissions away
    again afterwards: other tests run the same ServiceAccount users under rules of their own.
    (The Namespace and ServiceAccounts stay: they grant nothing, and without a controller-manager
    a deleted namespace would stay Terminating.)"""
    dynamic = dynamic_client(local_cluster.api_client)
    documents = [doc for _, _, doc in manifest_documents() if doc["kind"] in RBAC_KINDS]
    documents.sort(key=lambda doc: RBAC_KINDS.index(doc["kind"]))
    assert {doc["kind"] for doc in documents} == set(RBAC_KINDS)
    for doc in documents:
        server_side_apply(dynamic, doc, dry_run=False)
    yield local_cluster
    for doc in reversed(documents):
        if doc["kind"] in ("Namespace", "ServiceAccount"):
            continue
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        metadata = doc["metadata"]
        with contextlib.suppress(ApiException):
            resource.delete(name=metadata["name"], namespace=metadata.get("namespace"))


def identity_client(cluster: LocalCluster, account: str) -> client.ApiClient:
    """An API client authenticated as the ServiceAccount user: its own token where the local
    cluster has one, else the admin impersonating it."""
    kubeconfig = cluster.directory / f"kubeconfig-{account}"
    if kubeconfig.exists():
        return config.new_client_from_config(config_file=str(kubeconfig))
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    api.set_default_header("Impersonate-User", f"system:serviceaccount:{NAMESPACE}:{account}")
    return api


def status(call: Callable[[], Any]) -> int:
    try:
        call()
    except client.ApiException as error:
        return error.status
    return 200


# -- the scenario ------------------------------------------------------------------------------------


def unreachable(seconds: int) -> list[dict]:
    return [{"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}]


def default_toleration(key: str) -> dict:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}


class World:
    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.core = client.CoreV1Api(cluster.api_client)
        self.namespace = namespace

    def node(self, name: str) -> dict:
        return raw(self.core.read_node, name)

    def taints(self, name: str, effect: str) -> list[str]:
        return sorted(t["key"] for t in self.node(name)["spec"].get("taints") or [] if t["effect"] == effect)

    def ready(self, name: str) -> str:
        return next(c["status"] for c in self.node(name)["status"]["conditions"] if c["type"] == "Ready")

    def pod(self, name: str) -> dict:
        return raw(self.core.read_namespaced_pod, name, self.namespace)

    def pod_ready(self, name: str) -> str | None:
        return next(
            (c["status"] for c in self.pod(name)["status"].get("conditions") or [] if c["type"] == "Ready"), None
        )

    def deleted(self, name: str) -> bool:
        try:
            return bool(self.pod(name)["metadata"].get("deletionTimestamp"))
        except client.ApiException as error:
            return error.status == 404

    def event_reasons(self, name: str) -> list[str]:
        events = raw(self.core.list_namespaced_event, self.namespace, field_selector=f"involvedObject.name={name}")
        return [event["reason"] for event in events["items"]]


@pytest.fixture
def webhook(rbac: LocalCluster, namespace: str, tmp_path: Path) -> Iterator[WebhookServer]:
    """The webhook over TLS, as taintkeeper-webhook if WebhookServer takes a kubeconfig (it needs
    one once it reads Namespaces), registered for this test's namespace only."""
    ca_bundle = make_certs(tmp_path / "certs")
    kwargs: dict[str, Any] = {}
    if "kubeconfig" in inspect.signature(WebhookServer).parameters:
        kwargs["kubeconfig"] = rbac.directory / "kubeconfig-taintkeeper-webhook"
    server = WebhookServer(tmp_path / "certs", tmp_path / "webhook.log", **kwargs)
    admission = client.AdmissionregistrationV1Api(rbac.api_client)
    name = f"taintkeeper-rbac-{uuid.uuid4().hex[:6]}"
    body = mutating_webhook_configuration(
        ca_bundle,
        url=server.url,
        name=name,
        failure_policy="Fail",
        namespace_selector={"matchExpressions": [{"key": "taintkeeper-test", "operator": "In", "values": [namespace]}]},
    )
    core = client.CoreV1Api(rbac.api_client)

    def called() -> bool:
        probe = {
            "metadata": {"name": f"probe-{uuid.uuid4().hex[:6]}"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        return bool(raw(core.create_namespaced_pod, namespace, body=probe, dry_run="All")["spec"].get("tolerations"))

    with server:
        admission.create_mutating_webhook_configuration(body=client.V1MutatingWebhookConfiguration.model_validate(body))
        try:
            wait_for(called, 30, "the apiserver to call the webhook")
            yield server
        finally:
            admission.delete_mutating_webhook_configuration(name)


def test_a_node_failure_is_handled_under_the_manifests_identities(
    rbac: LocalCluster, webhook: WebhookServer, namespace: str, tmp_path: Path
):
    world = World(rbac, namespace)
    coordination = client.CoordinationV1Api(rbac.api_client)
    sim = Simulator(
        rbac.api_client, lease_period=1.0, status_period=30.0, node_prefix=f"r{uuid.uuid4().hex[:5]}"
    ).start()
    controller = ControllerProcess(
        rbac.directory / "kubeconfig-taintkeeper-controller",
        tmp_path / "controller.log",
        "--leader-elect=true",
        f"--leader-elect-resource-name={LEASE}",
        f"--leader-elect-resource-namespace={NAMESPACE}",
        *FAST,
    )
    try:
        dead, *_healthy = sim.add_nodes(3, zones=["a"])
        quick = sim.create_pods(dead, 1, namespace=namespace, tolerations=unreachable(3), name_prefix="quick")[0]
        patient = sim.create_pods(dead, 1, namespace=namespace, name_prefix="patient")[0]
        # The webhook admitted both: the missing defaults were added, the pod's own one kept.
        assert world.pod(quick)["spec"]["tolerations"] == [*unreachable(3), default_toleration(NR)]
        assert world.pod(patient)["spec"]["tolerations"] == [default_toleration(NR), default_toleration(UR)]

        controller.start()  # /readyz: every informer listed (nodes, pods, node leases) as this identity
        controller.wait_for_metric("taintkeeper_leader", 1, 30)
        lease = raw(coordination.read_namespaced_lease, LEASE, NAMESPACE)
        assert lease["spec"]["holderIdentity"]

        sim.stop_heartbeats(dead)
        wait_for(lambda: world.ready(dead) == "Unknown", 15, "Ready=Unknown")  # nodes/status patch
        wait_for(lambda: world.taints(dead, "NoSchedule") == [UR], 10, "unreachable:NoSchedule")  # nodes patch
        wait_for(lambda: world.taints(dead, "NoExecute") == [UR], 10, "unreachable:NoExecute")
        wait_for(lambda: world.pod_ready(patient) == "False", 10, "pods marked NotReady")  # pods/status patch
        wait_for(lambda: world.deleted(quick), 10, "the pod tolerating 3 s deleted")  # pods delete
        wait_for(lambda: "TaintManagerEviction" in world.event_reasons(quick), 10, "the eviction event")  # events
        assert not world.deleted(patient)
        assert controller.metric("taintkeeper_pod_deletion_failures_total") == 0
    finally:
        controller.terminate()
        sim.stop()
        sim.delete_nodes()
        sim.close()
    log = controller.log_text()
    assert not REFUSED.findall(log), "\n".join(line for line in log.splitlines() if REFUSED.search(line))
    # The Lease was released on SIGTERM by the same identity (update by name).
    assert not raw(coordination.read_namespaced_lease, LEASE, NAMESPACE)["spec"].get("holderIdentity")
    webhook_log = webhook.log_path.read_text(errors="replace")
    assert not REFUSED.findall(webhook_log), webhook_log[-2000:]


# -- what each identity may and may not do -------------------------------------------------------------


def calls(api: client.ApiClient) -> dict[str, Callable[[], Any]]:
    """Every probe by name; mutating ones are dry runs or aim at objects that do not exist."""
    core = client.CoreV1Api(api)
    coordination = client.CoordinationV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    storage = client.StorageV1Api(api)
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    pod = client.V1Pod.model_validate(
        {"metadata": {"name": missing}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    )
    event = client.CoreV1Event.model_validate(
        {
            "metadata": {"name": missing},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": missing},
            "reason": "Probe",
            "message": "rbac probe",
            "type": "Normal",
        }
    )
    secret = client.V1Secret.model_validate(
        {"metadata": {"name": "taintkeeper-webhook-tls"}, "type": "Opaque", "data": {}}
    )
    lease = client.V1Lease.model_validate({"metadata": {"name": missing}, "spec": {}})
    eviction = client.V1Eviction.model_validate(
        {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": missing, "namespace": "default"}}
    )
    strategic = "application/strategic-merge-patch+json"
    return {
        # the controller's calls
        "list nodes": lambda: core.list_node(limit=1),
        "get a node": lambda: core.read_node(missing),
        "patch a node": lambda: core.patch_node(missing, {}, _content_type=strategic),
        "patch a node's status": lambda: core.patch_node_status(missing, {}, _content_type=strategic),
        "list pods everywhere": lambda: core.list_pod_for_all_namespaces(limit=1),
        "patch a pod": lambda: core.patch_namespaced_pod(missing, "default", {}, _content_type=strategic),
        "patch a pod's status": lambda: core.patch_namespaced_pod_status(
            missing, "default", {}, _content_type=strategic
        ),
        "delete a pod": lambda: core.delete_namespaced_pod(missing, "default"),
        "evict a pod": lambda: core.create_namespaced_pod_eviction(missing, "default", eviction),
        "list volume attachments": lambda: storage.list_volume_attachment(limit=1),
        "delete a volume attachment": lambda: storage.delete_volume_attachment(missing),
        "list namespaces": lambda: core.list_namespace(limit=1),
        "get a namespace": lambda: core.read_namespace(NAMESPACE),
        "create an event": lambda: core.create_namespaced_event("default", event, dry_run="All"),
        "list node leases": lambda: coordination.list_namespaced_lease("kube-node-lease", limit=1),
        "get a node lease": lambda: coordination.read_namespaced_lease(missing, "kube-node-lease"),
        "get the leader lease": lambda: coordination.read_namespaced_lease(LEASE, NAMESPACE),
        "create a lease in taintkeeper-system": lambda: coordination.create_namespaced_lease(
            NAMESPACE, lease, dry_run="All"
        ),
        # the certs sync's calls
        "get the webhook secret": lambda: core.read_namespaced_secret("taintkeeper-webhook-tls", NAMESPACE),
        "create a secret in taintkeeper-system": lambda: core.create_namespaced_secret(
            NAMESPACE, secret, dry_run="All"
        ),
        "update the webhook secret": lambda: core.replace_namespaced_secret(
            "taintkeeper-webhook-tls", NAMESPACE, secret, dry_run="All"
        ),
        "get the taintkeeper webhook configuration": lambda: admission.read_mutating_webhook_configuration(
            "taintkeeper"
        ),
        "patch the taintkeeper webhook configuration": lambda: admission.patch_mutating_webhook_configuration(
            "taintkeeper", [], dry_run="All"
        ),
        # the webhook's check of /metrics callers (system:auth-delegator)
        "review a token": lambda: request_json(
            api,
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "not-a-token"}},
            timeout=REQUEST_TIMEOUT,
        ),
        "review a caller's access": lambda: request_json(
            api,
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": "someone", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
            },
            timeout=REQUEST_TIMEOUT,
        ),
        # nobody's calls
        "delete a node": lambda: core.delete_node(missing),
        "replace a node": lambda: core.replace_node(
            missing, client.V1Node.model_validate({"metadata": {"name": missing}})
        ),
        "create a pod": lambda: core.create_namespaced_pod("default", pod, dry_run="All"),
        "list secrets everywhere": lambda: core.list_secret_for_all_namespaces(limit=1),
        "list disruption budgets": lambda: request_json(
            api, "GET", "/apis/policy/v1beta1/poddisruptionbudgets", timeout=REQUEST_TIMEOUT
        ),
        "list secrets in taintkeeper-system": lambda: core.list_namespaced_secret(NAMESPACE, limit=1),
        "get another secret in taintkeeper-system": lambda: core.read_namespaced_secret(missing, NAMESPACE),
        "update another secret in taintkeeper-system": lambda: core.replace_namespaced_secret(
            missing, NAMESPACE, client.V1Secret.model_validate({"metadata": {"name": missing}}), dry_run="All"
        ),
        "delete a namespace": lambda: core.delete_namespace(missing),
        "create a namespace": lambda: core.create_namespace(
            client.V1Namespace.model_validate({"metadata": {"name": missing}}), dry_run="All"
        ),
        "list leases everywhere": lambda: coordination.list_lease_for_all_namespaces(limit=1),
        "get another lease in taintkeeper-system": lambda: coordination.read_namespaced_lease(missing, NAMESPACE),
        "update another lease in taintkeeper-system": lambda: coordination.replace_namespaced_lease(
            missing,
            NAMESPACE,
            client.V1Lease.model_validate({"metadata": {"name": missing}, "spec": {}}),
            dry_run="All",
        ),
        "delete the leader lease": lambda: coordination.delete_namespaced_lease(LEASE, NAMESPACE),
        "write a node lease": lambda: coordination.create_namespaced_lease("kube-node-lease", lease, dry_run="All"),
        "list webhook configurations": lambda: admission.list_mutating_webhook_configuration(limit=1),
        "patch another webhook configuration": lambda: admission.patch_mutating_webhook_configuration(
            missing, [], dry_run="All"
        ),
        "delete the taintkeeper webhook configuration": lambda: admission.delete_mutating_webhook_configuration(
            "taintkeeper", dry_run="All"
        ),
    }


CONTROLLER_NEEDS = (
    "list nodes",
    "get a node",
    "patch a node",
    "patch a node's status",
    "list pods everywhere",
    "patch a pod",
    "patch a pod's status",
    "delete a pod",
    "evict a pod",
    "list volume attachments",
    "delete a volume attachment",
    "list namespaces",
    "get a namespace",
    "create an event",
    "list node leases",
    "get a node lease",
    "get the leader lease",
    "create a lease in taintkeeper-system",
    "review a token",
    "review a caller's access",
)
WEBHOOK_NEEDS = ("list namespaces", "get a namespace", "review a token", "review a caller's access")
CERTS_NEEDS = (
    "get the webhook secret",
    "create a secret in taintkeeper-system",
    "update the webhook secret",
    "get the taintkeeper webhook configuration",
    "patch the taintkeeper webhook configuration",
)
IDENTITIES = {
    "taintkeeper-controller": CONTROLLER_NEEDS,
    "taintkeeper-webhook": WEBHOOK_NEEDS,
    "taintkeeper-certs": CERTS_NEEDS,
}
# Watches are authorized as the `watch` verb, separately from `list`.
WATCHES = {
    "taintkeeper-controller": ("nodes", "pods", "namespaces", "leases@kube-node-lease", "volumeattachments"),
    "taintkeeper-webhook": ("namespaces",),
}


def probe_ids() -> list[Any]:
    names = list(calls(client.ApiClient()))
    return [
        pytest.param(account, name, name in needs, id=f"{account}-{'may' if name in needs else 'not'}-{name}")
        for account, needs in IDENTITIES.items()
        for name in names
    ]


@pytest.mark.parametrize(("account", "call", "granted"), probe_ids())
def test_each_identity_may_do_what_it_needs_and_nothing_else(
    rbac: LocalCluster, account: str, call: str, granted: bool
):
    api = identity_client(rbac, account)
    try:
        code = status(calls(api)[call])
    finally:
        api.close()
    if granted:
        assert code in (200, 201, 404), f"{account} may {call}, but the apiserver answered {code}"
    else:
        assert code == 403, f"{account} must not {call}, but the apiserver answered {code}"


@pytest.mark.parametrize(("account", "resource"), [(a, r) for a, rs in WATCHES.items() for r in rs])
def test_informer_watches_are_authorized(rbac: LocalCluster, account: str, resource: str):
    api = identity_client(rbac, account)
    core, coordination = client.CoreV1Api(api), client.CoordinationV1Api(api)
    watches: dict[str, Callable[..., Any]] = {
        "nodes": core.list_node,
        "pods": core.list_pod_for_all_namespaces,
        "namespaces": core.list_namespace,
        "leases@kube-node-lease": lambda **kw: coordination.list_namespaced_lease("kube-node-lease", **kw),
        "volumeattachments": client.StorageV1Api(api).list_volume_attachment,
    }
    watch = watches[resource]
    try:
        response = watch(watch=True, timeout_seconds=1, _preload_content=False, _request_timeout=10)
        assert response.status == 200
        response.close()
    finally:
        api.close()


def test_a_watch_the_roles_do_not_grant_is_refused(rbac: LocalCluster):
    api = identity_client(rbac, "taintkeeper-webhook")
    try:
        assert (
            status(
                lambda: client.CoreV1Api(api).list_pod_for_all_namespaces(
                    watch=True, timeout_seconds=1, _preload_content=False, _request_timeout=10
                )
            )
            == 403
        )
    finally:
        api.close()


def test_the_certs_identity_is_really_impersonated(rbac: LocalCluster):
    """Guard against a vacuous check: impersonation, not the admin's own rights, answers its probes."""
    assert not (rbac.directory / "kubeconfig-taintkeeper-certs").exists()
    api = identity_client(rbac, "taintkeeper-certs")
    try:
        assert status(lambda: client.CoreV1Api(api).list_node(limit=1)) == 403
    finally:
        api.close()
