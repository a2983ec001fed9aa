"""Per-namespace defaults and opting out, end to end: the webhook watches Namespaces through a real
kube-apiserver and pods created through the API get their namespace's seconds.

The webhook here is registered WITHOUT the skip selectors that `mutating_webhook_configuration`
adds (objectSelector and the namespaceSelector's skip expression), so skip-labelled pods and
namespaces still reach it and what is tested is the webhook's own check (the defence in depth),
not the apiserver's selector. Namespaces get a label of this module only, so no other test's
namespace is sent to this configuration.
"""

from __future__ import annotations

import json
import ssl
import statistics
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import urllib3
import yaml
from kubernetes import client

from hack.servers import WebhookServer, free_port, make_certs
from tests.integration.kube import LocalCluster, raw, wait_for
from webhook.registration import mutating_webhook_configuration

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"
NR_ANNOTATION = "taintkeeper.io/not-ready-toleration-seconds"
UR_ANNOTATION = "taintkeeper.io/unreachable-toleration-seconds"
SKIP = "taintkeeper.io/skip"
NOT_READY_SECONDS = 301  # the webhook's flags: the cluster defaults, distinct from upstream's 300
UNREACHABLE_SECONDS = 302
SELECTED = f"taintkeeper-ns-defaults-{uuid.uuid4().hex[:6]}"  # the label this module's configurations select


def pod(name: str, labels: dict[str, str] | None = None) -> dict:
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"metadata": metadata, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def seconds_of(tolerations: list[dict] | None) -> dict[str, int] | None:
    if tolerations is None:
        return None
    return {t["key"]: t["tolerationSeconds"] for t in tolerations if t["key"] in (NR, UR)}


def registration(ca_bundle: str, url: str, name: str, selected_value: str) -> dict[str, Any]:
    """Fail policy, only this module's namespaces, and no skip selectors (see the module docstring)."""
    body: dict[str, Any] = mutating_webhook_configuration(
        ca_bundle,
        url=url,
        name=name,
        failure_policy="Fail",
        namespace_selector={"matchLabels": {SELECTED: selected_value}},
    )
    (webhook,) = body["webhooks"]
    del webhook["objectSelector"]
    webhook["namespaceSelector"] = {"matchLabels": {SELECTED: selected_value}}
    return body


class Registered:
    def __init__(self, cluster: LocalCluster, server: WebhookServer, selected_value: str) -> None:
        self.cluster = cluster
        self.server = server
        self.selected_value = selected_value
        self.core = client.CoreV1Api(cluster.api_client)

    def namespace(self, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        metadata: dict = {
            "name": name,
            "labels": {"taintkeeper-test": name, SELECTED: self.selected_value, **(labels or {})},
        }
        if annotations:
            metadata["annotations"] = annotations
        self.core.create_namespace(body=client.V1Namespace.model_validate({"metadata": metadata}))
        return name

    def annotate(self, namespace: str, annotations: dict[str, str | None]) -> None:
        self.core.patch_namespace(namespace, body={"metadata": {"annotations": annotations}})

    def dry_run_seconds(self, namespace: str, labels: dict[str, str] | None = None) -> dict[str, int] | None:
        created = raw(
            self.core.create_namespaced_pod, namespace, body=pod(f"probe-{uuid.uuid4().hex[:6]}", labels), dry_run="All"
        )
        return seconds_of(created["spec"].get("tolerations"))

    def wait_for_seconds(self, namespace: str, expected: dict[str, int] | None, what: str) -> None:
        """The apiserver picks a configuration up, and the webhook's cache a namespace change, asynchronously."""
        wait_for(lambda: self.dry_run_seconds(namespace) == expected, timeout=30, what=what)

    def create(self, namespace: str, name: str, labels: dict[str, str] | None = None) -> list[str]:
        """Create a pod; returns the `Warning` headers of the response (the admission warnings)."""
        # With _preload_content=False the client returns the urllib3 response (its types say V1Pod).
        response = cast(
            urllib3.HTTPResponse,
            self.core.create_namespaced_pod(
                namespace, body=client.V1Pod.model_validate(pod(name, labels)), _preload_content=False
            ),
        )
        response.data  # noqa: B018 - read it all, so the connection goes back to the pool
        return response.headers.getlist("Warning")

    def stored_seconds(self, namespace: str, name: str) -> dict[str, int] | None:
        return seconds_of(raw(self.core.read_namespaced_pod, name, namespace)["spec"].get("tolerations"))

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{self.server.port}/metrics", context=self.server.ssl_context(), timeout=5
        ) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(f"{name} "):
                    return float(line.split()[-1])
        return 0.0


def serve(local_cluster: LocalCluster, directory: Path, kubeconfig: Path, selected_value: str) -> Iterator[Registered]:
    ca_bundle = make_certs(directory / "certs")
    server = WebhookServer(
        directory / "certs",
        directory / "webhook.log",
        kubeconfig=kubeconfig,
        extra_args=(
            "--default-not-ready-toleration-seconds",
            str(NOT_READY_SECONDS),
            "--default-unreachable-toleration-seconds",
            str(UNREACHABLE_SECONDS),
            # these tests read the counts, not who may (test_webhook_metrics_access.py): /metrics open to all
            "--authorization-always-allow-paths",
            "/healthz,/readyz,/livez,/metrics",
        ),
    )
    admission = client.AdmissionregistrationV1Api(local_cluster.api_client)
    name = f"taintkeeper-ns-test-{uuid.uuid4().hex[:6]}"
    with server:
        admission.create_mutating_webhook_configuration(
            body=client.V1MutatingWebhookConfiguration.model_validate(
                registration(ca_bundle, server.url, name, selected_value)
            )
        )
        try:
            yield Registered(local_cluster, server, selected_value)
        finally:
            admission.delete_mutating_webhook_configuration(name)


@pytest.fixture(scope="module")
def webhook(local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registered]:
    yield from serve(local_cluster, tmp_path_factory.mktemp("webhook"), local_cluster.kubeconfig, "watched")


DEFAULTS = {NR: NOT_READY_SECONDS, UR: UNREACHABLE_SECONDS}


def test_a_namespace_annotated_30_and_45_gives_its_pods_30_and_45(webhook: Registered):
    namespace = webhook.namespace({NR_ANNOTATION: "30", UR_ANNOTATION: "45"})
    webhook.wait_for_seconds(namespace, {NR: 30, UR: 45}, "the webhook to apply the namespace's seconds")
    webhook.create(namespace, "p")
    assert webhook.stored_seconds(namespace, "p") == {NR: 30, UR: 45}


def test_a_changed_annotation_is_picked_up(webhook: Registered):
    namespace = webhook.namespace({NR_ANNOTATION: "30", UR_ANNOTATION: "45"})
    webhook.wait_for_seconds(namespace, {NR: 30, UR: 45}, "the namespace's first seconds")
    webhook.annotate(namespace, {NR_ANNOTATION: "60"})
    webhook.wait_for_seconds(namespace, {NR: 60, UR: 45}, "the changed not-ready annotation")
    webhook.annotate(namespace, {NR_ANNOTATION: None, UR_ANNOTATION: None})
    webhook.wait_for_seconds(namespace, DEFAULTS, "the cluster defaults once the annotations are removed")
    webhook.create(namespace, "p")
    assert webhook.stored_seconds(namespace, "p") == DEFAULTS


def test_an_invalid_annotation_gives_the_default_and_a_warning_to_the_creator_and_the_log(webhook: Registered):
    namespace = webhook.namespace({NR_ANNOTATION: "soon", UR_ANNOTATION: "45"})
    # Until the cache has the namespace, both keys get the cluster defaults; then unreachable is 45.
    webhook.wait_for_seconds(namespace, {NR: NOT_READY_SECONDS, UR: 45}, "the namespace's valid annotation")
    warnings = webhook.create(namespace, "warned")
    assert any(NR_ANNOTATION in w and "soon" in w and str(NOT_READY_SECONDS) in w for w in warnings), warnings
    assert webhook.stored_seconds(namespace, "warned") == {NR: NOT_READY_SECONDS, UR: 45}
    wait_for(
        lambda: [
            line
            for line in webhook.server.log_text().splitlines()
            if "WARNING" in line
            and NR_ANNOTATION in line
            and f"namespace={namespace}" in line
            and "pod=warned" in line
            and "uid=" in line
        ],
        timeout=10,
        what="the warning log line",
    )


def test_a_pod_labelled_skip_true_is_not_mutated_by_the_webhook_itself(webhook: Registered):
    namespace = webhook.namespace()
    webhook.wait_for_seconds(namespace, DEFAULTS, "the apiserver to call the webhook")
    skipped = webhook.metric('taintkeeper_webhook_admission_reviews_total{outcome="skipped"}')
    webhook.create(namespace, "opted-out", labels={SKIP: "true"})
    assert webhook.stored_seconds(namespace, "opted-out") is None
    # The apiserver did send it (this registration has no objectSelector): the webhook skipped it.
    assert webhook.metric('taintkeeper_webhook_admission_reviews_total{outcome="skipped"}') == skipped + 1


def test_a_namespace_labelled_skip_true_is_not_mutated_once_the_cache_knows_it(webhook: Registered):
    namespace = webhook.namespace(labels={SKIP: "true"})
    # Before the cache has seen the namespace it gets the defaults (the cache never blocks admission).
    webhook.wait_for_seconds(namespace, None, "the webhook's cache to see the namespace's skip label")
    skipped = webhook.metric('taintkeeper_webhook_admission_reviews_total{outcome="skipped"}')
    webhook.create(namespace, "p")
    assert webhook.stored_seconds(namespace, "p") is None
    assert webhook.metric('taintkeeper_webhook_admission_reviews_total{outcome="skipped"}') == skipped + 1
    assert webhook.metric("taintkeeper_webhook_namespace_cache_synced") == 1


# -- the API unreachable for the cache ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cut_off(local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registered]:
    """A webhook whose kubeconfig points at a closed port: its cache can never list."""
    directory = tmp_path_factory.mktemp("cut-off")
    kubeconfig = yaml.safe_load(local_cluster.kubeconfig.read_text())
    for cluster in kubeconfig["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    (directory / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    yield from serve(local_cluster, directory, directory / "kubeconfig", "cut-off")


def review(uid: str, namespace: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "operation": "CREATE",
                "namespace": namespace,
                "name": "p",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "object": {"metadata": {"name": "p"}, "spec": {"containers": []}},
            },
        }
    ).encode()


def test_an_unreachable_api_leaves_admission_answering_with_the_cluster_defaults_at_normal_speed(cut_off: Registered):
    namespace = cut_off.namespace({NR_ANNOTATION: "30", UR_ANNOTATION: "45"})
    # Through the apiserver: the pod is admitted (failurePolicy Fail would refuse it otherwise).
    cut_off.wait_for_seconds(namespace, DEFAULTS, "the apiserver to call the cut-off webhook")
    cut_off.create(namespace, "p")
    assert cut_off.stored_seconds(namespace, "p") == DEFAULTS
    # Straight to the webhook, to time it alone: no review waits for the cache.
    context: ssl.SSLContext = cut_off.server.ssl_context()
    durations = []
    for i in range(20):
        started = time.perf_counter()
        request = urllib.request.Request(
            cut_off.server.url, data=review(f"uid-{i}", namespace), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            body = json.loads(response.read())
        durations.append(time.perf_counter() - started)
        assert body["response"]["allowed"] is True and "warnings" not in body["response"]
    assert statistics.median(durations) < 0.1, durations
    assert max(durations) < 1, durations
    log = cut_off.server.log_text()
    assert "namespace cache on" in log
    assert "namespaces: list failed" in log  # the cache really is trying, and failing, in the background
    assert cut_off.metric("taintkeeper_webhook_namespace_cache_synced") == 0
