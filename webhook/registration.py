"""The MutatingWebhookConfiguration that registers this webhook with kube-apiserver (pure).

The demo, the tests and the self-managed certificate path all build it here, so the rules,
selectors and policies are written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.defaults import SKIP_LABEL

WEBHOOK_NAME = "default-tolerations.taintkeeper.io"
CONFIGURATION_NAME = "taintkeeper"
MUTATE_PATH = "/mutate"


def mutating_webhook_configuration(
    ca_bundle: str,
    *,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    name: str = CONFIGURATION_NAME,
    failure_policy: str = "Ignore",
    timeout_seconds: int = 5,
    namespace_selector: Mapping[str, Any] | None = None,
) -> dict[str, object]:
    """A MutatingWebhookConfiguration for pod CREATE/UPDATE, called at `url` or at a Service.

    `service` is (namespace, name, port). Pods and namespaces labelled `taintkeeper.io/skip=true`
    are never sent to the webhook. `reinvocationPolicy: IfNeeded` lets the webhook run again when
    a later webhook rewrites the tolerations; the mutation is idempotent, so that is safe.
    """
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url and service")
    if not 1 <= timeout_seconds <= 30:
        raise ValueError(f"timeout_seconds must be 1..30, got {timeout_seconds}")
    if failure_policy not in ("Ignore", "Fail"):
        raise ValueError(f"failure_policy must be Ignore or Fail, got {failure_policy!r}")
    client_config: dict[str, object] = {"caBundle": ca_bundle}
    if url is not None:
        client_config["url"] = url
    else:
        namespace, service_name, port = service  # type: ignore[misc]
        client_config["service"] = {"namespace": namespace, "name": service_name, "path": MUTATE_PATH, "port": port}
    skip = {"key": SKIP_LABEL, "operator": "NotIn", "values": ["true"]}
    selector: dict[str, Any] = dict(namespace_selector or {})
    selector["matchExpressions"] = [*selector.get("matchExpressions", []), skip]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "clientConfig": client_config,
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": failure_policy,
                "matchPolicy": "Equivalent",
                "reinvocationPolicy": "IfNeeded",
                "timeoutSeconds": timeout_seconds,
                "namespaceSelector": selector,
                "objectSelector": {"matchExpressions": [skip]},
            }
        ],
    }
