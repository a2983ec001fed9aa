"""Helpers the integration tests share: the cluster handle, starting and restarting a control plane,
raw reads, waiting for a condition, and the apiserver's audit log."""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from hack.wait import wait_for as _wait_for
from kube.request import response_json
from kube.timestamps import parse_time

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "local-cluster.sh"


@dataclass
class LocalCluster:
    directory: Path
    kubeconfig: Path
    api_client: client.ApiClient

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log (the session starts it with `up --audit`)."""
        return self.directory / "logs" / "audit.log"


def control_plane_up(directory: Path, *options: str) -> Path:
    """`hack/local-cluster.sh up DIR [OPTIONS]`; its kubeconfig. One that cannot start fails the test (never skips)."""
    result = subprocess.run(
        ["bash", str(SCRIPT), "up", str(directory), *options], capture_output=True, text=True, timeout=1800
    )
    if result.returncode != 0:
        pytest.fail(f"local control plane did not start:\n{result.stderr[-4000:]}", pytrace=False)
    return Path(result.stdout.strip().splitlines()[-1])


def control_plane(command: str, directory: Path, *options: str, check: bool = True) -> None:
    """`hack/local-cluster.sh COMMAND DIR [OPTIONS]` (stop-apiserver, start-apiserver, down...), which must
    succeed unless not `check` (taking down what may have started only in part)."""
    result = subprocess.run(
        ["bash", str(SCRIPT), command, str(directory), *options], capture_output=True, text=True, timeout=300
    )
    assert not check or result.returncode == 0, f"local-cluster.sh {command} failed:\n{result.stderr[-3000:]}"


def raw(call: Callable[..., object], *args: object, **kwargs: object) -> dict[str, Any]:
    """Call a kubernetes-client method and return the API's JSON as a dict (camelCase, exact)."""
    response: dict[str, Any] = response_json(call(*args, _preload_content=False, **kwargs))
    return response


def api_time(value: str | None) -> float:
    """An API timestamp (RFC 3339: `timeAdded`, `lastTransitionTime`) as epoch seconds; one that is
    missing or unparseable fails the test."""
    parsed = parse_time(value)
    assert parsed is not None, f"not an API timestamp: {value!r}"
    return parsed


# Poll the local cluster every 0.1 s; any exception from the condition (a transient API error) counts
# as "not yet". A timeout raises hack.wait.WaitTimeout (a TimeoutError) naming `what`.
wait_for = functools.partial(_wait_for, interval=0.1, ignore=Exception)


def audit_events(cluster: LocalCluster, user_agent_part: str) -> list[dict[str, Any]]:
    """The requests whose User-Agent contains `user_agent_part`, as kube-apiserver's audit log has
    them (audit.k8s.io/v1 Events at ResponseComplete, or Panic), in the order they completed.

    The log is written in blocking mode: a request's event is in the file before its client has the
    response, so a request a test has made is there to read at once; nothing needs waiting for.
    Rotated backups (`audit-<time>.log`, at 2 GB) are read too, oldest first."""
    assert cluster.audit_log.exists(), f"no audit log at {cluster.audit_log}: was the apiserver started with --audit?"
    files = [*sorted(cluster.audit_log.parent.glob("audit-*.log")), cluster.audit_log]
    events: list[dict[str, Any]] = []
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if user_agent_part not in line:  # most lines are other clients': skip them unparsed
                    continue
                event = json.loads(line)
                if event.get("stage") in ("ResponseComplete", "Panic") and user_agent_part in str(
                    event.get("userAgent") or ""
                ):
                    events.append(event)
    return events
