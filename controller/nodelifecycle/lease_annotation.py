"""The leader's last monitor pass, published on the controller's Lease for `kubectl taintkeeper status`.

The leader elector merges these annotations into each acquire and renewal write (kube/leader.py), so
whoever may read the Lease learns when the monitor last completed a pass, without a request to the
leader's pod. The time is a MicroTime like the Lease's renewTime: RFC 3339, UTC, six fractional digits.
"""

from __future__ import annotations

from kube.timestamps import format_micro_time

LAST_MONITOR_PASS_ANNOTATION = "taintkeeper.io/last-monitor-pass"


def last_pass_annotations(last_pass: float | None) -> dict[str, str | None]:
    """The annotation for a pass completed at `last_pass` (epoch seconds); None removes it (this replica
    does not lead, or its monitor has not completed a pass in this term, or does not run)."""
    return {LAST_MONITOR_PASS_ANNOTATION: None if last_pass is None else format_micro_time(last_pass)}
