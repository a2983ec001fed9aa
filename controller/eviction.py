"""When must a pod on a NoExecute-tainted node be deleted? The pure decision, with `now` passed in.

Upstream semantics (taint-eviction-controller) with taintkeeper's deliberate differences:
- the deadline comes from the taint, not from when this controller noticed it: for each NoExecute
  taint, its start (`timeAdded`, or when the controller first saw it if `timeAdded` is missing
  or in the future) plus the `tolerationSeconds` of the pod's first toleration that tolerates
  that taint (upstream `GetMatchingTolerations`); the pod's deadline is the earliest over its
  node's taints. A restart or leader hand-over therefore resets nobody's clock;
- a not-ready <-> unreachable swap does not restart the clock: `continuing_since` gives the start
  of the node's failure when the swapped-in taint is younger (upstream keeps the scheduled
  eviction's start the same way);
- a pod bound to the node after a taint was added counts from its binding (a pod that lands on an
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
from shared.tolerations import first_toleration_for_taint, min_toleration_seconds

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
    pod_arrived: float | None,
    now: float,
    continuing_since: Callable[[Taint], float | None] | None = None,
) -> EvictionDecision:
    """The eviction decision for a pod with `tolerations` on a node with NoExecute `taints`.

    `pod_arrived` is when the pod was bound to the node; `continuing_since(taint)` an earlier start
    the taint's clock carries over (a swap), or None.
    """
    earliest: EvictionDecision | None = None
    any_taint = False
    for taint in taints:
        any_taint = True
        toleration = first_toleration_for_taint(tolerations, taint)
        if toleration is None:
            return EvictionDecision(at=now, reason=UNTOLERATED, taint=taint)
        seconds = min_toleration_seconds([toleration])
        if seconds is None:
            continue
        started = taint_start(taint, first_seen(taint), now)
        carried = continuing_since(taint) if continuing_since is not None else None
        if carried is not None and carried < started:
            started = carried
        if pod_arrived is not None and pod_arrived > started:
            started = min(pod_arrived, now)
        at = started + seconds
        if earliest is None or earliest.at is None or at < earliest.at:
            earliest = EvictionDecision(at=at, reason=EXPIRES, taint=taint, toleration=toleration, started=started)
    if earliest is not None:
        return earliest
    return EvictionDecision(at=None, reason=FOREVER if any_taint else NO_TAINTS)
