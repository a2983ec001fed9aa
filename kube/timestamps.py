"""The API's timestamps <-> epoch seconds: the one codec for Time and MicroTime fields.

`Time` (creationTimestamp, timeAdded, lastHeartbeatTime) is RFC 3339 with whole seconds;
`MicroTime` (a Lease's renewTime) must carry exactly six fractional digits, or the apiserver
refuses it. Epoch seconds are what every decision compares.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime


def format_time(epoch: float) -> str:
    """Epoch seconds -> the API's RFC 3339 form with whole seconds (`2026-11-22T13:00:00Z`)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(epoch: float) -> str:
    """Epoch seconds -> a MicroTime (Lease renewTime): the API wants exactly six fractional digits."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@functools.lru_cache(maxsize=65536)  # a few timestamps (timeAdded, renewTime) are read thousands of times
def parse_time(value: str | None) -> float | None:
    """RFC 3339 (as the API writes `creationTimestamp`, `timeAdded`, MicroTime) -> epoch seconds."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
