"""When must a pod on a NoExecute-tainted node be deleted? The pure decision, with `now` passed in.

Upstream semantics (taint-eviction-controller) with taintkeeper's deliberate differences:
- the deadline comes from the taint, not from when this controller noticed it: for each NoExecute
  taint, its start (`timeAdded`, or when the controller first saw it if `timeAdded` is missing
  or in the future) plus the smallest `tolerationSeconds` among the pod's tolerations matching
  that taint; the pod's deadline is the earliest over its node's taints. A restart or leader
  hand-over therefore resets nobody's clock;
- a pod created after a taint was added counts from its own creation (a pod that lands on an
  already tainted node gets its full toleration, as upstream gives it), which is equally
  restart-proof;
- it is recomputed on every change, so toleration edits take effect both ways.
Kept from upstream: an untolerated NoExecute taint means now; tolerations without seconds mean
never; seconds <= 0 mean now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.objects import parse_time
from shared.tolerations import min_toleration_seconds, tolerations_for_taint

Taint = Mapping[str, Any]
Toleration = Mapping[str, Any]

NO_TAINTS = "no NoExecute taints"
UNTOLERATED = "untolerated taint"
EXPIRES = "toleration expires"
FOREVER = "tolerated forever"


@dataclass(frozen=True)
class EvictionDecision:
    """`at` is when to delete (epoch seconds; <= now means now), None means never.

    `taint` and `toleration` say why: the taint that sets the time and the toleration whose
    seconds run out (None for an untolerated taint).
    """

    at: float | None
    reason: str
    taint: Taint | None = None
    toleration: Toleration | None = None
    started: float | None = None

    @property
    def evicts(self) -> bool:
        return self.at is not None


def taint_start(taint: Taint, first_seen: float, now: float) -> float:
    """When the taint's clock started: its `timeAdded`, unless missing or in the future."""
    added = parse_time(taint.get("timeAdded"))
    if added is None or added > now:
        return first_seen
    return added


def decide_eviction(
    tolerations: Sequence[Toleration],
    taints: Iterable[Taint],
    first_seen: Callable[[Taint], float],
    pod_created: float | None,
    now: float,
) -> EvictionDecision:
    """The eviction decision for a pod with `tolerations` on a node with NoExecute `taints`."""
    earliest: EvictionDecision | None = None
    any_taint = False
    for taint in taints:
        any_taint = True
        matching = tolerations_for_taint(tolerations, taint)
        if not matching:
            return EvictionDecision(at=now, reason=UNTOLERATED, taint=taint)
        seconds = min_toleration_seconds(matching)
        if seconds is None:
            continue
        started = taint_start(taint, first_seen(taint), now)
        if pod_created is not None and pod_created > started:
            started = min(pod_created, now)
        at = started + seconds
        if earliest is None or earliest.at is None or at < earliest.at:
            shortest = next(t for t in matching if t.get("tolerationSeconds") is not None
                            and max(0, int(t["tolerationSeconds"])) == seconds)
            earliest = EvictionDecision(at=at, reason=EXPIRES, taint=taint, toleration=shortest, started=started)
    if earliest is not None:
        return earliest
    return EvictionDecision(at=None, reason=FOREVER if any_taint else NO_TAINTS)
