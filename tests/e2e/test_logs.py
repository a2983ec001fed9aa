"""After everything else: no taintkeeper component was refused by the apiserver (RBAC as deployed)."""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from tests.e2e.cluster import SYSTEM_NAMESPACE, E2ECluster

pytestmark = [pytest.mark.e2e, pytest.mark.last]

# A 403 standing alone ("(403)", "status 403", "code=403"), not inside a time (".403+") or a uid ("-403a"),
# or the API's reason for it.
REFUSED = re.compile(r"(?<![\w.:-])403(?![\w.])|forbidden", re.IGNORECASE)


def test_no_component_log_has_a_403(e2e: E2ECluster):
    pods = e2e.raw(e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE)["items"]
    assert {p["metadata"]["labels"].get("app.kubernetes.io/component") for p in pods} >= {"webhook", "controller"}
    refused: list[str] = []
    read = 0
    for pod in pods:
        name = pod["metadata"]["name"]
        for status in pod["status"].get("containerStatuses") or []:
            attempts = [False] + ([True] if status.get("restartCount") else [])  # and the killed leader's
            for previous in attempts:
                try:
                    text = e2e.core.read_namespaced_pod_log(name, SYSTEM_NAMESPACE, container=status["name"],
                                                            previous=previous, _request_timeout=30)
                except client.ApiException as error:
                    if previous and error.status == 400:  # the previous container's log is gone already
                        continue
                    raise
                read += 1
                refused += [f"{name}/{status['name']}: {line}" for line in text.splitlines() if REFUSED.search(line)]
    assert read >= 4
    assert refused == [], "\n".join(refused[:20])
