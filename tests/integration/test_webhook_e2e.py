"""End to end: certs -> gunicorn over TLS -> registered in a real kube-apiserver -> pods created
through the API carry the default tolerations (the upstream DefaultTolerationSeconds cases).

Every test of the webhook runs twice: with its fast paths on (`--fast-paths`, the default) and off
(webhook/fast_paths.py); the apiserver must see the same answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from hack.servers import WebhookServer, make_certs
from tests.integration.kube import LocalCluster, raw, wait_for
from webhook.registration import mutating_webhook_configuration

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"
NOT_READY_SECONDS = 301  # distinct from upstream's 300, so the webhook's own value is what we see
UNREACHABLE_SECONDS = 302


def default(key: str, seconds: int) -> dict:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def pod(name: str, tolerations: list[dict] | None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module", params=["true", "false"], ids=["fast paths on", "fast paths off"])
def webhook(
    local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[WebhookServer]:
    directory = tmp_path_factory.mktemp("webhook")
    ca_bundle = make_certs(directory / "certs")
    server = WebhookServer(
        directory / "certs",
        directory / "webhook.log",
        extra_args=(
            "--default-not-ready-toleration-seconds",
            str(NOT_READY_SECONDS),
            "--default-unreachable-toleration-seconds",
            str(UNREACHABLE_SECONDS),
            "--fast-paths",
            request.param,
        ),
    )
    admission = client.AdmissionregistrationV1Api(local_cluster.api_client)
    name = f"taintkeeper-test-{uuid.uuid4().hex[:6]}"
    # Only namespaces made by these tests are sent to the webhook; Fail makes a broken webhook visible.
    body = mutating_webhook_configuration(
        ca_bundle,
        url=server.url,
        name=name,
        failure_policy="Fail",
        namespace_selector={"matchExpressions": [{"key": "taintkeeper-test", "operator": "Exists"}]},
    )
    with server:
        admission.create_mutating_webhook_configuration(body=client.V1MutatingWebhookConfiguration.model_validate(body))
        try:
            yield server
        finally:
            admission.delete_mutating_webhook_configuration(name)


def created_tolerations(local_cluster: LocalCluster, namespace: str, manifest: dict) -> list[dict] | None:
    core = client.CoreV1Api(local_cluster.api_client)
    created = raw(core.create_namespaced_pod, namespace, body=manifest)
    stored = raw(core.read_namespaced_pod, manifest["metadata"]["name"], namespace)
    assert stored["spec"].get("tolerations") == created["spec"].get("tolerations")
    return stored["spec"].get("tolerations")


def wait_until_webhook_is_called(local_cluster: LocalCluster, namespace: str) -> None:
    """The apiserver picks a new webhook configuration up asynchronously; probe with dry-run creates."""
    core = client.CoreV1Api(local_cluster.api_client)

    def probe() -> bool:
        manifest = pod(f"probe-{uuid.uuid4().hex[:6]}", None)
        created = raw(core.create_namespaced_pod, namespace, body=manifest, dry_run="All")
        return bool(created["spec"].get("tolerations"))

    wait_for(probe, timeout=30, what="the apiserver to call the webhook")


def test_without_the_webhook_the_apiserver_adds_no_tolerations(local_cluster: LocalCluster):
    """DefaultTolerationSeconds is off, so what the other tests see is the webhook's own work."""
    core = client.CoreV1Api(local_cluster.api_client)
    name = f"plain-{uuid.uuid4().hex[:6]}"
    # no test label: the webhook never sees it
    core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": name}}))
    created = raw(core.create_namespaced_pod, name, body=pod("plain", None))
    assert created["spec"].get("tolerations") is None
    core.delete_namespaced_pod("plain", name, grace_period_seconds=0)


# The API accepts tolerationSeconds only with effect NoExecute, so the upstream unit cases that set it on
# NoSchedule or empty-effect tolerations are written here without it.
UNRELATED = {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}
CASES = [
    (
        "a pod with no tolerations gets both defaults",
        None,
        [default(NR, NOT_READY_SECONDS), default(UR, UNREACHABLE_SECONDS)],
    ),
    (
        "an existing not-ready toleration keeps its own seconds",
        [default(NR, 700)],
        [default(NR, 700), default(UR, UNREACHABLE_SECONDS)],
    ),
    (
        "an existing unreachable toleration keeps its own seconds",
        [default(UR, 700)],
        [default(UR, 700), default(NR, NOT_READY_SECONDS)],
    ),
    ("a pod with both is left alone", [default(NR, 700), default(UR, 700)], [default(NR, 700), default(UR, 700)]),
    (
        "an empty-effect toleration counts for its key",
        [{"key": UR, "operator": "Exists"}],
        [{"key": UR, "operator": "Exists"}, default(NR, NOT_READY_SECONDS)],
    ),
    ("the Exists wildcard is left alone", [{"operator": "Exists"}], [{"operator": "Exists"}]),
    (
        "an unrelated toleration stays first",
        [UNRELATED],
        [UNRELATED, default(NR, NOT_READY_SECONDS), default(UR, UNREACHABLE_SECONDS)],
    ),
]


@pytest.mark.parametrize(("tolerations", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pods_created_through_the_api_get_the_default_tolerations(
    local_cluster: LocalCluster, webhook: WebhookServer, namespace: str, tolerations, expected
):
    wait_until_webhook_is_called(local_cluster, namespace)
    assert created_tolerations(local_cluster, namespace, pod("p", tolerations)) == expected


def test_an_update_that_drops_the_defaults_gets_them_back(
    local_cluster: LocalCluster, webhook: WebhookServer, namespace: str
):
    """Tolerations may only be added to a running pod, so the webhook's UPDATE path re-adds them."""
    wait_until_webhook_is_called(local_cluster, namespace)
    core = client.CoreV1Api(local_cluster.api_client)
    core.create_namespaced_pod(namespace, body=client.V1Pod.model_validate(pod("u", None)))
    patched = raw(core.patch_namespaced_pod, "u", namespace, body={"metadata": {"labels": {"touched": "yes"}}})
    assert patched["spec"]["tolerations"] == [default(NR, NOT_READY_SECONDS), default(UR, UNREACHABLE_SECONDS)]


def test_no_fast_path_is_off_but_by_the_switch(local_cluster: LocalCluster, webhook: WebhookServer, namespace: str):
    """With the switch on, every fast path's internal is as it expects (the versions pyproject allows), so
    the start says none is off; with it off, nothing is checked, and the start says once that gunicorn's
    own worker serves, without the webhook's deadlines."""
    wait_until_webhook_is_called(local_cluster, namespace)
    log = webhook.log_text()
    said = [line for line in log.splitlines() if "fast path" in line]
    if webhook.args[webhook.args.index("--fast-paths") + 1] == "true":
        assert said == [], log[-3000:]
    else:
        assert len(said) == 1 and "fast paths off: gunicorn's own gevent worker serves" in said[0], log[-3000:]
    assert "Traceback" not in log, log[-3000:]


def test_a_stopped_webhook_with_failure_policy_fail_blocks_pod_creation(
    local_cluster: LocalCluster, webhook: WebhookServer, namespace: str, tmp_path: Path
):
    """Proves the apiserver really calls the webhook: with it stopped, Fail refuses the pod."""
    wait_until_webhook_is_called(local_cluster, namespace)
    webhook.stop()
    try:
        core = client.CoreV1Api(local_cluster.api_client)
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod(namespace, body=client.V1Pod.model_validate(pod("refused", None)))
        assert refused.value.status == 500
        assert "default-tolerations.taintkeeper.io" in str(refused.value.body)
    finally:
        webhook.start()
