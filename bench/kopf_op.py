"""kopf's admission webhook doing taintkeeper's mutation: the Python peer in the benchmark.

Run as `kopf run --standalone -A bench/kopf_op.py` with KUBECONFIG set (kopf discovers
resources from a real cluster before it serves) and BENCH_KOPF_PORT / BENCH_KOPF_CERT /
BENCH_KOPF_KEY naming where to listen. Reviews go to https://127.0.0.1:PORT/add-default-tolerations.
"""

from __future__ import annotations

import os
from typing import Any

import kopf

from shared.defaults import missing_default_tolerations

HANDLER_ID = "add-default-tolerations"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Serve admission ourselves over TLS and leave webhook configurations alone (managed=None)."""
    settings.admission.server = kopf.WebhookServer(
        host="127.0.0.1",
        port=int(os.environ["BENCH_KOPF_PORT"]),
        certfile=os.environ["BENCH_KOPF_CERT"],
        pkeyfile=os.environ["BENCH_KOPF_KEY"],
    )
    settings.admission.managed = None


@kopf.on.mutate("pods", id=HANDLER_ID, operations=["CREATE"])
async def add_default_tolerations(spec: kopf.Spec, patch: kopf.Patch, **_: Any) -> None:
    """Append the missing not-ready/unreachable NoExecute tolerations (async: no executor hop)."""
    existing = [dict(toleration) for toleration in spec.get("tolerations") or []]
    added = missing_default_tolerations(existing)
    if added:
        patch.spec["tolerations"] = [*existing, *added]
