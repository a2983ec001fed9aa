"""After everything else: no taintkeeper component was refused by the apiserver (RBAC as deployed),
but for the moments after a restart of the apiserver when it refuses everyone."""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from kube.timestamps import parse_time
from tests.e2e.cluster import SYSTEM_NAMESPACE, E2ECluster
from tests.support.refusals import REFUSED

pytestmark = [pytest.mark.e2e, pytest.mark.last]

LOGGED_AT = re.compile(r'"time": "([^"]+)"')
# A freshly started kube-apiserver serves before its RBAC cache has synced and refuses everyone
# meanwhile (the suite restarts it: bench/admission_latency.py turns the built-in plugin on and off).
# A permission the manifests lack is refused on every retry, long after.
RBAC_SYNC_GRACE = 30.0


def refused_by_a_starting_apiserver(line: str, starts: list[float]) -> bool:
    logged = LOGGED_AT.search(line)
    moment = parse_time(logged[1]) if logged else None
    return moment is not None and any(start <= moment <= start + RBAC_SYNC_GRACE for start in starts)


def test_no_component_log_has_a_403(e2e: E2ECluster):
    pods = e2e.raw(e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE)["items"]
    assert {p["metadata"]["labels"].get("app.kubernetes.io/component") for p in pods} >= {"webhook", "controller"}
    starts = e2e.provider.apiserver_starts()
    refused: list[str] = []
    read = 0
    for pod in pods:
        name = pod["metadata"]["name"]
        for status in pod["status"].get("containerStatuses") or []:
            attempts = [False] + ([True] if status.get("restartCount") else [])  # and the killed leader's
            for previous in attempts:
                try:
                    text = e2e.core.read_namespaced_pod_log(
                        name, SYSTEM_NAMESPACE, container=status["name"], previous=previous, _request_timeout=30
                    )
                except client.ApiException as error:
                    if previous and error.status == 400:  # the previous container's log is gone already
                        continue
                    raise
                read += 1
                refused += [
                    f"{name}/{status['name']}: {line}"
                    for line in text.splitlines()
                    if REFUSED.search(line) and not refused_by_a_starting_apiserver(line, starts)
                ]
    assert read >= 4
    assert refused == [], "\n".join(refused[:20])
