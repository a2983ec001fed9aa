"""--replace-builtin-defaults through a real kube-apiserver whose built-in DefaultTolerationSeconds
plugin is on (as on a managed cluster that cannot switch it off): the plugin adds its 300 s
tolerations before any webhook runs, and the webhook gives them taintkeeper's seconds; without the
flag they stay as the plugin wrote them. On every Kubernetes version the suite runs (1.37, 1.20)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from hack.servers import WebhookServer, make_certs
from tests.integration.kube import LocalCluster, control_plane, raw, wait_for
from webhook.registration import mutating_webhook_configuration

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"
NOT_READY_SECONDS, UNREACHABLE_SECONDS = 61, 31  # the webhook's, distinct from the plugin's 300
PLUGIN_SECONDS = 300


@pytest.fixture(scope="module")
def plugin_on(private_cluster: LocalCluster) -> Iterator[LocalCluster]:
    control_plane("stop-apiserver", private_cluster.directory)
    control_plane("start-apiserver", private_cluster.directory, "--default-toleration-seconds")
    try:
        yield private_cluster
    finally:
        control_plane("stop-apiserver", private_cluster.directory)
        control_plane("start-apiserver", private_cluster.directory)


def webhook_in_front(
    tmp_path_factory: pytest.TempPathFactory, namespace: str, *flags: str
) -> tuple[WebhookServer, dict]:
    """A webhook process with `flags`, and its configuration for `namespace` alone (not yet created)."""
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
            *flags,
        ),
    )
    configuration = mutating_webhook_configuration(
        ca_bundle,
        url=server.url,
        name=f"taintkeeper-test-{uuid.uuid4().hex[:6]}",
        failure_policy="Fail",
        namespace_selector={"matchLabels": {"taintkeeper-test": namespace}},
    )
    return server, configuration


def seconds_by_key(tolerations: list[dict] | None) -> dict[str, int]:
    return {t["key"]: t["tolerationSeconds"] for t in tolerations or [] if t.get("effect") == "NoExecute"}


CASES = {
    "with --replace-builtin-defaults the plugin's tolerations get taintkeeper's seconds": (
        ("--replace-builtin-defaults",),
        {NR: NOT_READY_SECONDS, UR: UNREACHABLE_SECONDS},
    ),
    "without it the plugin's tolerations stay (the pod already tolerates both)": (
        (),
        {NR: PLUGIN_SECONDS, UR: PLUGIN_SECONDS},
    ),
}


@pytest.mark.parametrize(("flags", "expected"), CASES.values(), ids=CASES.keys())
def test_a_pod_created_through_the_plugin_and_the_webhook(
    plugin_on: LocalCluster, tmp_path_factory: pytest.TempPathFactory, flags: tuple[str, ...], expected: dict[str, int]
) -> None:
    core = client.CoreV1Api(plugin_on.api_client)
    private_namespace = f"t-{uuid.uuid4().hex[:10]}"  # labelled: 1.20 sets no kubernetes.io/metadata.name
    raw(
        core.create_namespace,
        body={"metadata": {"name": private_namespace, "labels": {"taintkeeper-test": private_namespace}}},
    )
    admission = client.AdmissionregistrationV1Api(plugin_on.api_client)
    server, configuration = webhook_in_front(tmp_path_factory, private_namespace, *flags)
    name = configuration["metadata"]["name"]
    with server:
        admission.create_mutating_webhook_configuration(
            body=client.V1MutatingWebhookConfiguration.model_validate(configuration)
        )
        try:

            def created() -> dict[str, int] | None:
                pod = {
                    "metadata": {"generateName": "web-"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                }
                made = raw(core.create_namespaced_pod, private_namespace, body=pod, dry_run="All")
                seconds = seconds_by_key(made["spec"].get("tolerations"))
                return seconds if seconds == expected else None

            # the apiserver picks a new webhook configuration up asynchronously
            wait_for(created, 30, f"a pod created with {expected}")
            stored = raw(
                core.create_namespaced_pod,
                private_namespace,
                body={"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            )
            assert seconds_by_key(stored["spec"]["tolerations"]) == expected
        finally:
            admission.delete_mutating_webhook_configuration(name)
