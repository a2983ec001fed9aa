"""The apiserver's clock measured against ours: a few GETs of /version, each timed by our clock
against its Date header (kube/clock_offset.py bounds the offset from them), and the version they
answer (which says how the apiserver dates what it stores)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from kubernetes import client

from kube.clock_offset import ClockOffset, ServerClock, narrowest, offset_from
from kube.request import Timeout, send

SAMPLES = 3
VERSION_PATH = "/version"  # served to every authenticated user (system:discovery), with a Date header


def measure(
    api_client: client.ApiClient, timeout: Timeout, *, samples: int = SAMPLES, now: Callable[[], float] = time.time
) -> ServerClock:
    """The offset's bounds from `samples` requests (None if no Date header could be read) and the
    server's version. Raises on an API failure."""
    found: list[ClockOffset | None] = []
    version = ""
    for _ in range(samples):
        sent = now()
        response = send(api_client, "GET", VERSION_PATH, timeout=timeout)
        received = now()
        version = _git_version(response.read())
        found.append(offset_from(str(response.headers.get("Date") or ""), sent, received))
    return ServerClock(narrowest(found), version)


def _git_version(body: bytes) -> str:
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    return str(answer.get("gitVersion") or "") if isinstance(answer, dict) else ""
