"""certs.sync.plan: what goes into the Secret and the caBundle, round after round; sync_once's writes."""

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from kubernetes.client.rest import ApiException

from certs import sync
from certs.sync import PREVIOUS_CA, plan

NOW = datetime(2030, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def run(current, now=NOW, ca_days=3650, cert_days=365, renew_days=30):
    return plan(
        current,
        "taintkeeper-webhook",
        "taintkeeper-system",
        ca_valid_for=ca_days * DAY,
        cert_valid_for=cert_days * DAY,
        renew_before=renew_days * DAY,
        now=now,
    )


def subjects(pem_bundle: bytes) -> int:
    return len(x509.load_pem_x509_certificates(pem_bundle))


def test_no_secret_creates_ca_and_serving_pair_and_publishes_the_ca():
    first = run(None)
    assert set(first.secret_data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert first.ca_bundle_pem == first.secret_data["ca.crt"]
    assert (first.result.ca_action, first.result.cert_action) == ("created", "created")


def test_a_valid_secret_is_left_alone():
    first = run(None)
    second = run(first.secret_data, now=NOW + 10 * DAY)
    assert second.secret_data is None
    assert second.ca_bundle_pem == first.secret_data["ca.crt"]


def test_a_serving_cert_close_to_expiry_is_renewed_under_the_same_ca():
    first = run(None)
    renewed = run(first.secret_data, now=NOW + 340 * DAY)
    assert renewed.secret_data is not None
    assert renewed.secret_data["ca.crt"] == first.secret_data["ca.crt"]
    assert renewed.secret_data["tls.crt"] != first.secret_data["tls.crt"]
    assert PREVIOUS_CA not in renewed.secret_data
    assert subjects(renewed.ca_bundle_pem) == 1


def test_a_replaced_ca_stays_trusted_beside_the_new_one_until_it_expires():
    first = run(None, ca_days=60, cert_days=40, renew_days=20)
    rotated = run(first.secret_data, now=NOW + 45 * DAY, ca_days=60, cert_days=40, renew_days=20)
    assert rotated.secret_data["ca.crt"] != first.secret_data["ca.crt"]
    assert rotated.secret_data[PREVIOUS_CA] == first.secret_data["ca.crt"]
    assert subjects(rotated.ca_bundle_pem) == 2
    later = run(rotated.secret_data, now=NOW + 61 * DAY, ca_days=60, cert_days=40, renew_days=20)
    assert PREVIOUS_CA not in (later.secret_data or {})
    assert subjects(later.ca_bundle_pem) == 1


class Response:
    """A `_preload_content=False` answer that notes whether it was read to the end and its connection
    handed back (kube.client.release)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()
        self.read_out = self.released = False

    def read(self) -> bytes:
        self.read_out = True
        return b""

    def release_conn(self) -> None:
        self.released = True


class FakeApi:
    """CoreV1Api and AdmissionregistrationV1Api at once: the Secret (None: none yet) and a configuration
    whose one webhook lacks the caBundle; every write answered with a Response it keeps."""

    def __init__(self, secret: dict[str, Any] | None) -> None:
        self.secret = secret
        self.writes: list[tuple[str, Response]] = []

    def __call__(self, api_client: object) -> "FakeApi":  # stands in for both API classes
        return self

    def _write(self, method: str) -> Response:
        self.writes.append((method, Response({})))
        return self.writes[-1][1]

    def read_namespaced_secret(self, name: str, namespace: str, **_: object) -> Response:
        if self.secret is None:
            raise ApiException(status=404, reason="Not Found")
        return Response(self.secret)

    def create_namespaced_secret(self, namespace: str, body: object, **_: object) -> Response:
        return self._write("create_namespaced_secret")

    def replace_namespaced_secret(self, name: str, namespace: str, body: object, **_: object) -> Response:
        return self._write("replace_namespaced_secret")

    def read_mutating_webhook_configuration(self, name: str, **_: object) -> Response:
        return Response({"metadata": {"resourceVersion": "7"}, "webhooks": [{"clientConfig": {}}]})

    def patch_mutating_webhook_configuration(self, name: str, body: object, **_: object) -> Response:
        return self._write("patch_mutating_webhook_configuration")


@pytest.mark.parametrize(
    ("secret", "written"),
    [
        (None, "create_namespaced_secret"),
        (
            {"metadata": {"name": "tls", "namespace": "ns", "resourceVersion": "3"}, "data": {}},
            "replace_namespaced_secret",
        ),
    ],
    ids=["no Secret yet", "a Secret without the files"],
)
def test_every_write_response_is_read_and_its_connection_handed_back(monkeypatch, secret, written):
    api = FakeApi(secret)
    monkeypatch.setattr(sync.client, "CoreV1Api", api)
    monkeypatch.setattr(sync.client, "AdmissionregistrationV1Api", api)
    summary = sync.sync_once(
        object(),
        namespace="ns",
        secret="tls",
        service="svc",
        configuration="taintkeeper",
        ca_valid_for=3650 * DAY,
        cert_valid_for=365 * DAY,
        renew_before=30 * DAY,
    )
    assert [method for method, _ in api.writes] == [written, "patch_mutating_webhook_configuration"], summary
    assert all(response.read_out and response.released for _, response in api.writes)
