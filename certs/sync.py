"""`python -m certs sync`: the self-managed certificate path inside a cluster.

Keeps the CA and serving pair in a Secret (type kubernetes.io/tls, plus ca.crt and ca.key) and the
CA in the MutatingWebhookConfiguration's caBundle:
1. the Secret's files are staged in a private temporary directory and `store.ensure` reuses,
   renews or creates them exactly as `python -m certs` does on disk;
2. if anything changed, the Secret is written back against the resourceVersion it was read at
   (two replicas racing: one wins, the other reads again next round);
3. every webhook of the configuration gets the caBundle. When the CA itself was replaced, the
   previous CA stays in the bundle (and in the Secret as `ca-previous.crt`) until it expires, so
   webhook pods still serving the old certificate are trusted until the kubelet refreshes their
   mounted Secret.
The webhook pods mount the Secret; gunicorn builds a TLS context per accepted connection, so a
renewed certificate is served without a restart. With `--loop` it runs as a sidecar; without, as
a Job or init container.
"""

from __future__ import annotations

import base64
import logging
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from kubernetes import client
from kubernetes.client.rest import ApiException

from certs import store
from kube.client import JSON_PATCH, REQUEST_TIMEOUT, release
from kube.errors import describe_error, is_conflict, is_not_found
from kube.request import response_json
from plumbing import certificates as issue
from plumbing.arguments import OneLineErrorParser

log = logging.getLogger("taintkeeper.certs")

PREVIOUS_CA = "ca-previous.crt"
SECRET_FILES = (store.CA_CERT, store.CA_KEY, store.TLS_CERT, store.TLS_KEY)


@dataclass(frozen=True)
class Plan:
    """What one round decided: the Secret's new data (None: unchanged) and the caBundle to publish."""

    secret_data: dict[str, bytes] | None
    ca_bundle_pem: bytes
    result: store.Result


def _still_valid(pem: bytes, now: datetime) -> bool:
    try:
        return x509.load_pem_x509_certificate(pem).not_valid_after_utc > now
    except ValueError:
        return False


def plan(
    current: dict[str, bytes] | None,
    service: str,
    namespace: str,
    *,
    ca_valid_for: timedelta,
    cert_valid_for: timedelta,
    renew_before: timedelta,
    now: datetime,
) -> Plan:
    """Decide the Secret's contents and the caBundle from its current data (None: no Secret yet)."""
    current = current or {}
    with tempfile.TemporaryDirectory(prefix="taintkeeper-certs-") as staging:
        directory = Path(staging)
        for name in SECRET_FILES:
            if name in current:
                path = directory / name
                path.write_bytes(current[name])
                path.chmod(store.KEY_MODE if name.endswith(".key") else store.CERT_MODE)
        result = store.ensure(
            directory,
            service,
            namespace,
            ca_valid_for=ca_valid_for,
            cert_valid_for=cert_valid_for,
            renew_before=renew_before,
            now=now,
        )
        files = {name: (directory / name).read_bytes() for name in SECRET_FILES}
    previous = current.get(PREVIOUS_CA)
    if current.get(store.CA_CERT) and current[store.CA_CERT] != files[store.CA_CERT]:
        previous = current[store.CA_CERT]  # the CA was replaced: keep trusting the old one for now
    if previous is not None and not _still_valid(previous, now):
        previous = None
    data = dict(files)
    if previous is not None:
        data[PREVIOUS_CA] = previous
    bundle = files[store.CA_CERT] + (previous or b"")
    changed = any(current.get(name) != value for name, value in data.items()) or (
        PREVIOUS_CA in current and PREVIOUS_CA not in data
    )
    return Plan(secret_data=data if changed else None, ca_bundle_pem=bundle, result=result)


def _decode(secret: dict[str, Any]) -> dict[str, bytes]:
    return {name: base64.b64decode(value) for name, value in (secret.get("data") or {}).items()}


def _encode(data: dict[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(value).decode() for name, value in data.items()}


class SyncError(Exception):
    """A round that could not finish; the message says which object and why."""


def sync_once(
    api_client: Any,
    *,
    namespace: str,
    secret: str,
    service: str,
    configuration: str | None,
    ca_valid_for: timedelta,
    cert_valid_for: timedelta,
    renew_before: timedelta,
) -> str:
    """One round: Secret and caBundle brought up to date. Returns a one-line summary."""
    core = client.CoreV1Api(api_client)
    try:
        found = response_json(
            core.read_namespaced_secret(secret, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        )
    except ApiException as error:
        if not is_not_found(error):
            raise SyncError(f"reading Secret {namespace}/{secret}: {describe_error(error)}") from None
        found = None
    decided = plan(
        _decode(found) if found else None,
        service,
        namespace,
        ca_valid_for=ca_valid_for,
        cert_valid_for=cert_valid_for,
        renew_before=renew_before,
        now=datetime.now(UTC),
    )
    if decided.secret_data is not None:
        try:
            if found is None:
                body: dict[str, Any] = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "kubernetes.io/tls",
                    "metadata": {
                        "name": secret,
                        "namespace": namespace,
                        "labels": {"app.kubernetes.io/managed-by": "taintkeeper-certs"},
                    },
                    "data": _encode(decided.secret_data),
                }
                release(
                    core.create_namespaced_secret(
                        namespace,
                        body,  # type: ignore[arg-type]  # the client sends a dict body as it is (it wants a model)
                        _preload_content=False,
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                )
            else:
                # Only our keys change: the Secret's type (immutable), labels, annotations, owners and
                # any other keys stay as they are; the read resourceVersion guards against a race.
                body = {
                    **found,
                    "data": {
                        **{k: v for k, v in (found.get("data") or {}).items() if k not in (*SECRET_FILES, PREVIOUS_CA)},
                        **_encode(decided.secret_data),
                    },
                }
                body["metadata"] = {k: v for k, v in found["metadata"].items() if k != "managedFields"}
                release(
                    core.replace_namespaced_secret(
                        secret,
                        namespace,
                        body,  # type: ignore[arg-type]  # the client sends a dict body as it is (it wants a model)
                        _preload_content=False,
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                )
        except ApiException as error:
            if is_conflict(error):
                raise SyncError(
                    f"Secret {namespace}/{secret} changed meanwhile (another replica?); next round reads it again"
                ) from None
            raise SyncError(f"writing Secret {namespace}/{secret}: {describe_error(error)}") from None
    bundle_note = ""
    if configuration:
        bundle_note = _publish_ca_bundle(api_client, configuration, store.ca_bundle(decided.ca_bundle_pem))
    result = decided.result
    secret_note = "written" if decided.secret_data is not None else "unchanged"
    return (
        f"CA {result.ca_action}, serving certificate {result.cert_action} (valid until "
        f"{result.cert_not_after:%Y-%m-%dT%H:%M:%SZ}); Secret {namespace}/{secret} {secret_note}{bundle_note}"
    )


def _publish_ca_bundle(api_client: Any, configuration: str, bundle: str) -> str:
    admission = client.AdmissionregistrationV1Api(api_client)
    try:
        current = response_json(
            admission.read_mutating_webhook_configuration(
                configuration, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )
    except ApiException as error:
        raise SyncError(f"reading MutatingWebhookConfiguration {configuration}: {describe_error(error)}") from None
    webhooks = current.get("webhooks") or []
    # `add` sets the field whether or not it exists (`replace` fails on a missing caBundle); the
    # `test` on the resourceVersion makes the patch fail rather than write over a concurrent edit.
    operations: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": current["metadata"]["resourceVersion"]}
    ]
    operations += [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i, webhook in enumerate(webhooks)
        if (webhook.get("clientConfig") or {}).get("caBundle") != bundle
    ]
    if len(operations) == 1:
        return f"; caBundle of {configuration} up to date"
    try:
        release(
            admission.patch_mutating_webhook_configuration(
                configuration,
                operations,
                _content_type=JSON_PATCH,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        )
    except ApiException as error:
        raise SyncError(f"patching caBundle of {configuration}: {describe_error(error)}") from None
    return f"; caBundle of {configuration} written to {len(operations) - 1} webhook(s)"


def main(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="python -m certs sync", label="certs sync", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="taintkeeper-system", help="of the Secret and the Service")
    parser.add_argument("--secret", default="taintkeeper-webhook-tls")
    parser.add_argument("--service", default="taintkeeper-webhook")
    parser.add_argument(
        "--webhook-configuration",
        default="taintkeeper",
        help="MutatingWebhookConfiguration whose caBundle to keep; '' for none",
    )
    parser.add_argument("--kubeconfig", default=None, help="default: in-cluster, then KUBECONFIG")
    parser.add_argument("--ca-days", type=int, default=3650)
    parser.add_argument("--cert-days", type=int, default=365)
    parser.add_argument("--renew-before-days", type=int, default=30)
    parser.add_argument(
        "--loop",
        type=float,
        default=0,
        metavar="SECONDS",
        help="repeat every SECONDS (a sidecar); 0: one round (a Job or init container)",
    )
    args = parser.parse_args(argv)
    try:
        issue.requested_sans(args.service, args.namespace)
    except issue.CertError as error:
        parser.error(str(error))
    if not 0 < args.renew_before_days < min(args.cert_days, args.ca_days):
        parser.error("--renew-before-days must be above 0 and below --cert-days and --ca-days")
    if args.loop < 0:
        parser.error("--loop must not be negative")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    from kube.client import ClientConfigError, make_api_client
    from kube.identity import CERTS

    try:
        api_client = make_api_client(args.kubeconfig, component=CERTS)
    except ClientConfigError as error:
        parser.error(str(error))
    while True:
        try:
            log.info(
                sync_once(
                    api_client,
                    namespace=args.namespace,
                    secret=args.secret,
                    service=args.service,
                    configuration=args.webhook_configuration or None,
                    ca_valid_for=timedelta(days=args.ca_days),
                    cert_valid_for=timedelta(days=args.cert_days),
                    renew_before=timedelta(days=args.renew_before_days),
                )
            )
        except SyncError as error:
            log.error("certs sync: %s", error)
            if not args.loop:
                return 1
        except Exception as error:  # an unreachable apiserver must not end a --loop sidecar
            log.error("certs sync: %s", describe_error(error))
            if not args.loop:
                return 1
        if not args.loop:
            return 0
        time.sleep(args.loop)  # a sidecar's period: nothing to wait for but time itself
