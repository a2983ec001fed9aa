"""How far the apiserver's clock is from ours, with the bounds a measurement can promise (pure).

A response's `Date` header is the apiserver's clock truncated to the second, read at some moment
between our request's sending and its answer's arrival: the offset (server minus ours) lies in
[date - received, date + 1 - sent]. Several samples narrow it to the intersection of their bounds.
kube/server_clock.py takes the samples; the node lifecycle monitor converts the times the apiserver
stamped on objects to its own clock with the result (controller/nodelifecycle/node_health.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

# Before 1.25 (kubernetes#110058) an update re-dated its manager's managedFields entry only when the set
# of fields it owns changed, not when a value did: a Lease renewed every 10 s kept the stamp of its creation.
DATES_EVERY_CHANGE_SINCE = (1, 25)


@dataclass(frozen=True)
class ClockOffset:
    """The apiserver's clock minus ours, in seconds: at least `low`, at most `high`."""

    low: float
    high: float

    @property
    def uncertainty(self) -> float:
        return self.high - self.low


def offset_from(date_header: str, sent: float, received: float) -> ClockOffset | None:
    """The bounds one response gives; None for a Date that cannot be read."""
    try:
        server = parsedate_to_datetime(date_header).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return ClockOffset(server - received, server + 1.0 - sent)


def narrowest(samples: Iterable[ClockOffset | None]) -> ClockOffset | None:
    """The intersection of the samples' bounds; None without a sample, or if they contradict each other
    (a clock stepped meanwhile: nothing can be promised)."""
    known = [sample for sample in samples if sample is not None]
    if not known:
        return None
    low, high = max(sample.low for sample in known), min(sample.high for sample in known)
    return ClockOffset(low, high) if low <= high else None


@dataclass(frozen=True)
class ServerClock:
    """What a new leader needs to date the apiserver's stamps: its clock against ours, and its version."""

    offset: ClockOffset | None  # None: no Date header could be read
    git_version: str  # /version's gitVersion, e.g. "v1.37.2"; "" if unread

    @property
    def dates_every_change(self) -> bool:
        return dates_every_change(self.git_version)


def dates_every_change(git_version: str) -> bool:
    """Whether an apiserver of this version re-dates a managedFields entry whenever a value its manager owns
    changes (a Lease's renewTime); False for a version that cannot be read."""
    found = re.match(r"v?(\d+)\.(\d+)", git_version)
    return found is not None and (int(found[1]), int(found[2])) >= DATES_EVERY_CHANGE_SINCE
