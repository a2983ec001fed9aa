"""`python -m certs sync` against a real kube-apiserver, and gunicorn serving a renewed certificate
to new connections without a restart."""

from __future__ import annotations

import base64
import socket
import ssl
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client

from hack.servers import WebhookServer, make_certs
from tests.integration.kube import LocalCluster, raw
from webhook.registration import mutating_webhook_configuration

ROOT = Path(__file__).resolve().parents[2]


def sync(cluster: LocalCluster, namespace: str, configuration: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "certs",
            "sync",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--namespace",
            namespace,
            "--secret",
            "webhook-tls",
            "--service",
            "taintkeeper-webhook",
            "--webhook-configuration",
            configuration,
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_sync_creates_the_secret_publishes_the_ca_and_renews_in_place(local_cluster: LocalCluster, namespace: str):
    admission = client.AdmissionregistrationV1Api(local_cluster.api_client)
    core = client.CoreV1Api(local_cluster.api_client)
    name = f"tk-sync-{uuid.uuid4().hex[:6]}"
    body: dict[str, Any] = mutating_webhook_configuration(
        "", service=(namespace, "taintkeeper-webhook", 443), name=name
    )
    del body["webhooks"][0]["clientConfig"]["caBundle"]  # as a fresh install has it: no caBundle at all
    admission.create_mutating_webhook_configuration(body=client.V1MutatingWebhookConfiguration.model_validate(body))
    try:
        first = sync(local_cluster, namespace, name)
        assert first.returncode == 0, first.stderr
        secret = raw(core.read_namespaced_secret, "webhook-tls", namespace)
        assert secret["type"] == "kubernetes.io/tls"
        assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
        published = raw(admission.read_mutating_webhook_configuration, name)["webhooks"][0]["clientConfig"]
        assert base64.b64decode(published["caBundle"]) == base64.b64decode(secret["data"]["ca.crt"])

        again = sync(local_cluster, namespace, name)
        assert again.returncode == 0, again.stderr
        assert "Secret " + f"{namespace}/webhook-tls unchanged" in again.stderr
        assert (
            raw(core.read_namespaced_secret, "webhook-tls", namespace)["metadata"]["resourceVersion"]
            == secret["metadata"]["resourceVersion"]
        )

        # Someone else's label and key on the Secret survive a renewal.
        core.patch_namespaced_secret(
            "webhook-tls",
            namespace,
            {"metadata": {"labels": {"team": "platform"}}, "data": {"extra": base64.b64encode(b"kept").decode()}},
            _content_type="application/merge-patch+json",
        )
        renewed = sync(local_cluster, namespace, name, "--cert-days", "400", "--renew-before-days", "399")
        assert renewed.returncode == 0, renewed.stderr
        after = raw(core.read_namespaced_secret, "webhook-tls", namespace)
        assert after["metadata"]["labels"]["team"] == "platform"
        assert base64.b64decode(after["data"]["extra"]) == b"kept"
        assert after["data"]["tls.crt"] != secret["data"]["tls.crt"]
        assert after["data"]["ca.crt"] == secret["data"]["ca.crt"]  # same CA: the caBundle stays valid
    finally:
        admission.delete_mutating_webhook_configuration(name)


@pytest.mark.version_independent("no apiserver: the arguments are refused before any request")
def test_sync_refuses_bad_arguments_with_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "certs", "sync", "--service", "Bad_Name"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("certs sync: error:")


def served_serial(port: int, ca_file: Path) -> int:
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        served = tls.getpeercert(binary_form=True)
        assert served is not None, "the server sent no certificate"
        return x509.load_der_x509_certificate(served).serial_number


@pytest.mark.version_independent("no apiserver: gunicorn and the certificate files only")
def test_gunicorn_serves_a_renewed_certificate_to_new_connections_without_a_restart(tmp_path: Path):
    certs = tmp_path / "certs"
    make_certs(certs)
    with WebhookServer(certs, tmp_path / "webhook.log") as server:
        assert server.process is not None  # started on entering
        pid = server.process.pid
        before = served_serial(server.port, certs / "ca.crt")
        renewed = subprocess.run(
            [
                sys.executable,
                "-m",
                "certs",
                "--service",
                "taintkeeper-webhook",
                "--out-dir",
                str(certs),
                "--ip",
                "127.0.0.1",
                "--dns-name",
                "localhost",
                "--dns-name",
                "renewed.example.com",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert renewed.returncode == 0, renewed.stderr
        assert "serving certificate renewed" in renewed.stderr
        after = served_serial(server.port, certs / "ca.crt")
        assert after != before
        assert server.process.pid == pid and server.process.poll() is None


def test_unregister_deletes_the_configuration_and_a_second_run_finds_it_gone(local_cluster: LocalCluster):
    admission = client.AdmissionregistrationV1Api(local_cluster.api_client)
    name = f"tk-unregister-{uuid.uuid4().hex[:6]}"
    body: dict[str, Any] = mutating_webhook_configuration(
        "", service=("default", "taintkeeper-webhook", 443), name=name
    )
    del body["webhooks"][0]["clientConfig"]["caBundle"]
    admission.create_mutating_webhook_configuration(body=client.V1MutatingWebhookConfiguration.model_validate(body))
    command = [sys.executable, "-m", "certs", "unregister", "--kubeconfig", str(local_cluster.kubeconfig)]
    first = subprocess.run(
        [*command, "--webhook-configuration", name], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    assert first.stderr.strip() == f"certs unregister: MutatingWebhookConfiguration {name} deleted"
    names = [c["metadata"]["name"] for c in raw(admission.list_mutating_webhook_configuration)["items"]]
    assert name not in names
    again = subprocess.run(
        [*command, "--webhook-configuration", name], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0 and "was already gone" in again.stderr, again.stderr
    refused = subprocess.run([*command, "--webhook-configuration", ""], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
