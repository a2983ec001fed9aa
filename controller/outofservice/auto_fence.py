"""--auto-fence-after DURATION (off by default): when the controller puts the out-of-service taint on a
node by itself. Pure: the node's Ready condition, taints and annotations, and `now`, in; a decision out.

Only a node that has been unreachable (Ready `Unknown`: its kubelet stopped posting, it did not
report NotReady) for DURATION, counted from the Ready condition's lastTransitionTime, and only if it
carries `taintkeeper.io/fencing-confirmed-at` (RFC 3339) newer than its last heartbeat: an external
fencing agent the operator trusts (a BMC power-off hook, a cloud instance-terminated hook) says the
machine was off after the kubelet was last heard. The last heartbeat is the Ready condition's
lastHeartbeatTime, or the node's Lease renewal in kube-node-lease if that is later: a kubelet with a
Lease posts its status only every 5 minutes while nothing changes (nodeStatusReportFrequency), so the
condition alone may be minutes older than the kubelet's last sign of life. The controller cannot tell
a dead node from a partitioned one; nothing else ever makes it fence a node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.describe import describe_duration
from controller.fencing import CONFIRMED_AT_ANNOTATION, out_of_service_taint
from kube.timestamps import format_time, parse_time
from shared.taints import Taint

# Why (not).
NOT_UNREACHABLE = "not unreachable (its Ready condition is not Unknown)"
ALREADY_FENCED = "already carries the out-of-service taint"
NO_TRANSITION_TIME = "Ready is Unknown without a lastTransitionTime: cannot tell since when"
TOO_SOON = "unreachable for less than --auto-fence-after"
NO_CONFIRMATION = f"no {CONFIRMED_AT_ANNOTATION} annotation"
BAD_CONFIRMATION = f"its {CONFIRMED_AT_ANNOTATION} annotation is not an RFC 3339 time"
NO_HEARTBEAT = "neither its Ready condition nor its Lease says when it was last heard, to compare the confirmation with"
STALE_CONFIRMATION = "its fencing confirmation is not newer than its last heartbeat"
CONFIRMED = "unreachable for --auto-fence-after, and fencing confirmed after its last heartbeat"


@dataclass(frozen=True)
class AutoFenceDecision:
    fence: bool
    reason: str
    recheck_at: float | None = None  # TOO_SOON: when it may be fenced, if nothing changes
    detail: str = ""  # the times the decision compared, for the log and the event


def rfc3339(text: str) -> float | None:
    """An RFC 3339 time with its offset (`2026-05-01T10:00:00Z`, `...+02:00`) -> epoch seconds; None for
    anything else, a time without an offset included (whose zone nobody could know)."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def unreachable_since(ready: Mapping[str, Any] | None, taints: Sequence[Taint]) -> float | None:
    """When the node became unreachable, if it is a candidate at all (Ready Unknown, not fenced yet)."""
    if ready is None or ready.get("status") != "Unknown" or out_of_service_taint(taints) is not None:
        return None
    return parse_time(ready.get("lastTransitionTime"))


def decide_auto_fence(
    ready: Mapping[str, Any] | None,
    taints: Sequence[Taint],
    annotations: Mapping[str, str],
    after: float,
    now: float,
    lease_renewed: float | None = None,
) -> AutoFenceDecision:
    """Whether to fence the node now. `ready` is its Ready condition, `annotations` its annotations,
    `lease_renewed` when its kubelet last renewed its Lease (None: no Lease)."""
    if ready is None or ready.get("status") != "Unknown":
        return AutoFenceDecision(False, NOT_UNREACHABLE)
    if out_of_service_taint(taints) is not None:
        return AutoFenceDecision(False, ALREADY_FENCED)
    since = parse_time(ready.get("lastTransitionTime"))
    if since is None:
        return AutoFenceDecision(False, NO_TRANSITION_TIME)
    if now - since < after:
        return AutoFenceDecision(
            False, TOO_SOON, recheck_at=since + after, detail=f"unreachable since {format_time(since)}"
        )
    unreachable = f"unreachable since {format_time(since)} ({describe_duration(now - since)})"
    raw = annotations.get(CONFIRMED_AT_ANNOTATION)
    if raw is None:
        return AutoFenceDecision(False, NO_CONFIRMATION, detail=unreachable)
    confirmed = rfc3339(raw)
    if confirmed is None:
        return AutoFenceDecision(False, BAD_CONFIRMATION, detail=f"{unreachable}; {CONFIRMED_AT_ANNOTATION}={raw!r}")
    heard = [t for t in (parse_time(ready.get("lastHeartbeatTime")), lease_renewed) if t is not None]
    heartbeat = max(heard) if heard else None
    if heartbeat is None:
        return AutoFenceDecision(False, NO_HEARTBEAT, detail=unreachable)
    compared = f"{unreachable}; fencing confirmed at {format_time(confirmed)}, last heartbeat {format_time(heartbeat)}"
    if confirmed <= heartbeat:
        return AutoFenceDecision(False, STALE_CONFIRMATION, detail=compared)
    return AutoFenceDecision(True, CONFIRMED, detail=compared)


def fenced_by(after: float) -> str:
    """The taintkeeper.io/fenced-by annotation of a node the controller fenced."""
    return f"taintkeeper-controller (--auto-fence-after {describe_duration(after)})"


def auto_fenced_message(node: str, decision: AutoFenceDecision) -> str:
    return f"Fenced node {node} (node.kubernetes.io/out-of-service:NoExecute): {decision.detail}"
