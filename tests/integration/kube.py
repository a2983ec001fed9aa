"""Helpers the integration tests share: the cluster handle, raw reads, and waiting for a condition."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kubernetes import client

T = TypeVar("T")


@dataclass
class LocalCluster:
    directory: Path
    kubeconfig: Path
    api_client: client.ApiClient


def raw(call: Callable[..., object], *args: object, **kwargs: object) -> dict:
    """Call a kubernetes-client method and return the API's JSON as a dict (camelCase, exact)."""
    response = call(*args, _preload_content=False, **kwargs)
    return json.loads(response.data)  # type: ignore[attr-defined]


def wait_for(condition: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll `condition` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # a transient API error is retried until the deadline
            last_error = error
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_error})"
                                                                              if last_error else ""))
