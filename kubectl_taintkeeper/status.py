"""What `taintkeeper status` reports, computed purely: the API's JSON in, a ClusterStatus out, `now` passed in.

The same decisions the controller makes: zone states and tainting rates as the node lifecycle
monitor computes them (controller/zones.py), the all-zones brake (upstream's master disruption
mode: every zone fully disrupted), and each pod's eviction deadline by the very rule the taint
eviction manager acts on (controller/tainteviction/verdict.py, as `explain` does).

One snapshot cannot know what only the running controller remembers, so:
- a zone's state comes from the Ready statuses written in the API. A node that stopped
  heartbeating counts as not ready once the controller has written Unknown for it (after
  --node-monitor-grace-period), as it does for the controller's own zone states;
- a new zone is Initial for one monitor pass in the controller; here it has its state at once.
  A zone whose every node is excluded from disruption checks never gets a state in the
  controller: it starts afresh, Initial, at every pass and is tainted at --node-eviction-rate,
  brake or not. Here it is Initial, with that rate;
- a NoExecute taint without timeAdded is counted from now (as `explain` does), and a pod's eviction
  that a not-ready <-> unreachable swap carried over is counted from the taint now on the node;
- a NoSchedule taint has no timeAdded: its age is that of the node condition that calls for it
  (its lastTransitionTime), or unknown when no condition does (`unschedulable`, a stale taint).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.describe import taint_text, toleration_text
from controller.nodelifecycle.decision import MonitorSettings
from controller.nodelifecycle.lease_annotation import LAST_MONITOR_PASS_ANNOTATION
from controller.objects import NodeView, node_view, pod_view
from controller.tainteviction.decision import evicting_taints
from controller.tainteviction.verdict import EvictionRule, pod_verdict
from controller.zones import ZoneState, compute_zone_state, eviction_rate, zone_label
from kube.timestamps import parse_time
from kubectl_taintkeeper.admission_mode import AdmissionStatus
from kubectl_taintkeeper.budgets import Budgets, budget_note
from kubectl_taintkeeper.reading import Reading
from shared.taints import (
    CONDITION_TAINT_KEYS,
    MANAGED_NO_EXECUTE_KEYS,
    NO_EXECUTE,
    managed_no_schedule_taints,
    no_execute_taints,
    node_taints,
)

Json = Mapping[str, Any]

TIME_ADDED = "timeAdded"


@dataclass(frozen=True)
class ZoneStatus:
    zone: str  # as people read it (zone_label); "" for nodes without zone labels
    state: ZoneState
    nodes: tuple[str, ...]  # every node of the zone, excluded ones too
    excluded: tuple[str, ...]  # labelled node.kubernetes.io/exclude-disruption: they do not vote on the state
    size: int  # the nodes that count
    not_ready: int  # of those
    rate: float  # nodes per second the controller may taint NoExecute now
    rate_reason: str  # which flag, or why none


@dataclass(frozen=True)
class TaintAge:
    taint: str  # key[=value]:Effect
    key: str
    effect: str
    since: float | None  # when it was added, as far as the API tells; None: unknown
    since_source: str | None  # "timeAdded", or the condition whose lastTransitionTime stands in
    age: float | None


@dataclass(frozen=True)
class TaintedNode:
    name: str
    zone: str
    ready: str | None  # the Ready condition's status; None if the node has none
    taints: tuple[TaintAge, ...]  # taintkeeper's taints only


@dataclass(frozen=True)
class PendingEviction:
    namespace: str
    pod: str
    node: str
    taint: str  # the taint that sets the deadline
    toleration: str | None  # the toleration whose seconds run out; None: the taint is not tolerated
    deadline: float
    seconds_left: float  # negative: overdue
    counted_from_now: bool  # the taint has no timeAdded: this command counts it from now
    waiting_for: str | None = None  # due, but its budget allows none: "disruption budget web (allowed 0)"


@dataclass(frozen=True)
class LeaderStatus:
    lease: str  # namespace/name
    lease_found: bool  # False: the Lease does not exist (or could not be read: lease_error)
    holder: str | None  # the Lease's holderIdentity; None: no leader
    pod: str | None  # the holder's pod (holderIdentity is `<pod name>_<uuid>`)
    renewed: float | None
    renewed_ago: float | None
    lease_duration: int | None
    expired: bool  # not renewed within its duration (by this machine's clock): no replica may be acting
    lease_error: str | None  # why the Lease could not be read
    last_pass: float | None  # when the leader's node lifecycle monitor last completed a pass
    last_pass_ago: float | None
    last_pass_error: str | None  # why that is unknown


@dataclass(frozen=True)
class ClusterStatus:
    now: float
    settings: MonitorSettings  # the four rate flags the zones' rates were computed with
    zones: tuple[ZoneStatus, ...]
    brake: bool  # every zone fully disrupted: the controller taints nothing NoExecute
    nodes: tuple[TaintedNode, ...]
    pending: tuple[PendingEviction, ...]  # soonest first
    leader: LeaderStatus
    admission: AdmissionStatus | None = None  # None: not read (a status made without the API's admission objects)


def _rate_and_reason(state: ZoneState, size: int, brake: bool, settings: MonitorSettings) -> tuple[float, str]:
    if size == 0:  # never counted: the controller re-creates it every pass (module docstring)
        return settings.node_eviction_rate, "--node-eviction-rate (no node counts: the zone never leaves Initial)"
    if brake:
        return 0.0, "stopped: every zone is fully disrupted"
    rate = eviction_rate(
        state,
        size,
        eviction_rate=settings.node_eviction_rate,
        secondary_eviction_rate=settings.secondary_node_eviction_rate,
        large_cluster_threshold=settings.large_cluster_size_threshold,
    )
    if state is not ZoneState.PARTIAL_DISRUPTION:
        return rate, "--node-eviction-rate"
    if rate:
        return (
            rate,
            f"--secondary-node-eviction-rate: partially disrupted, more than "
            f"{settings.large_cluster_size_threshold} nodes",
        )
    return (
        rate,
        f"stopped: partially disrupted, at most {settings.large_cluster_size_threshold} nodes "
        "(--large-cluster-size-threshold)",
    )


def zone_statuses(nodes: Sequence[NodeView], settings: MonitorSettings) -> tuple[tuple[ZoneStatus, ...], bool]:
    """(each zone, sorted; the brake): as the monitor's handleDisruption computes them from one pass."""
    members: dict[str, list[NodeView]] = {}
    for node in nodes:
        members.setdefault(node.zone, []).append(node)
    computed: dict[str, tuple[int, int, ZoneState]] = {}
    for zone, zone_nodes in members.items():
        counted = [
            n.ready_condition.get("status") if n.ready_condition else None
            for n in zone_nodes
            if not n.excluded_from_disruption
        ]
        if counted:
            computed[zone] = compute_zone_state(counted, settings.unhealthy_zone_threshold)
    brake = bool(computed) and all(state is ZoneState.FULL_DISRUPTION for _, _, state in computed.values())
    zones = []
    for zone, zone_nodes in members.items():
        ready, not_ready, state = computed.get(zone, (0, 0, ZoneState.INITIAL))
        rate, reason = _rate_and_reason(state, ready + not_ready, brake, settings)
        zones.append(
            ZoneStatus(
                zone=zone_label(zone),
                state=state,
                nodes=tuple(sorted(n.name for n in zone_nodes)),
                excluded=tuple(sorted(n.name for n in zone_nodes if n.excluded_from_disruption)),
                size=ready + not_ready,
                not_ready=not_ready,
                rate=rate,
                rate_reason=reason,
            )
        )
    return tuple(sorted(zones, key=lambda z: z.zone)), brake


def _condition_calling_for(node: NodeView, key: str) -> Mapping[str, Any] | None:
    """The node condition whose current status calls for the NoSchedule taint `key`, if any."""
    for (condition_type, status), taint_key in CONDITION_TAINT_KEYS.items():
        condition = node.condition(condition_type)
        if taint_key == key and condition is not None and condition.get("status") == status:
            return condition
    return None


def _taint_age(node: NodeView, taint: Mapping[str, Any], now: float) -> TaintAge:
    since: float | None = None
    source: str | None = None
    if taint.get("effect") == NO_EXECUTE:
        since = parse_time(taint.get(TIME_ADDED))
        source = TIME_ADDED if since is not None else None
    else:
        condition = _condition_calling_for(node, str(taint.get("key") or ""))
        if condition is not None:
            since = parse_time(condition.get("lastTransitionTime"))
            source = f"{condition.get('type')}.lastTransitionTime" if since is not None else None
    return TaintAge(
        taint=taint_text(taint),
        key=str(taint.get("key") or ""),
        effect=str(taint.get("effect") or ""),
        since=since,
        since_source=source,
        age=None if since is None else max(0.0, now - since),
    )


def tainted_nodes(nodes: Iterable[NodeView], now: float) -> tuple[TaintedNode, ...]:
    """The nodes carrying taintkeeper's taints (the not-ready/unreachable NoExecute taints and the
    NoSchedule condition taints, shared/taints.py), by name, each taint with its age."""
    found = []
    for node in nodes:
        ours: list[Mapping[str, Any]] = [t for t in node.no_execute_taints if t.get("key") in MANAGED_NO_EXECUTE_KEYS]
        ours += managed_no_schedule_taints(node.taints)
        if ours:
            ready = node.ready_condition
            found.append(
                TaintedNode(
                    name=node.name,
                    zone=zone_label(node.zone),
                    ready=None if ready is None else str(ready.get("status")),
                    taints=tuple(_taint_age(node, t, now) for t in ours),
                )
            )
    return tuple(sorted(found, key=lambda n: n.name))


def _counted_from_now(taint: Mapping[str, Any], now: float) -> bool:
    """Whether decide_eviction started the taint's clock at `first_seen`, which is now here: no
    timeAdded, or one in the future (taint_start's rule)."""
    added = parse_time(taint.get(TIME_ADDED))
    return added is None or added > now


def pending_evictions(
    nodes: Iterable[NodeView],
    pods: Iterable[Json],
    now: float,
    budgets: Budgets | None = None,
    rule: EvictionRule | None = None,
) -> tuple[PendingEviction, ...]:
    """Every pod the taint eviction manager will delete, soonest first, as its rule decides
    (controller/tainteviction/verdict.py): on a node with a NoExecute taint that evicts, not
    terminating, not the out-of-service handling's, not tolerating it forever; and for one that
    respects its disruption budget, the budget it waits for."""
    budgets = budgets or Budgets()
    rule = rule or EvictionRule()
    tainted = {node.name: node for node in nodes if node.no_execute_taints}
    pending = []
    for raw in pods:
        pod = pod_view(dict(raw))
        node = tainted.get(pod.node_name)
        if node is None:
            continue
        decision = pod_verdict(pod, node, lambda _t: now, now, rule).decision
        if decision.at is None or decision.taint is None:
            continue
        labels = dict((raw.get("metadata") or {}).get("labels") or {})
        waiting, _how = budget_note(pod, labels, decision, evicting_taints(node), budgets, now)
        pending.append(
            PendingEviction(
                namespace=pod.namespace,
                pod=pod.name,
                node=node.name,
                taint=taint_text(decision.taint),
                toleration=None if decision.toleration is None else toleration_text(decision.toleration),
                deadline=decision.at,
                seconds_left=decision.at - now,
                counted_from_now=_counted_from_now(decision.taint, now),
                waiting_for=waiting.removeprefix("waiting for ") or None,
            )
        )
    return tuple(sorted(pending, key=lambda p: (p.deadline, p.namespace, p.pod)))


def any_no_execute_taint(nodes: Iterable[Json]) -> bool:
    """Whether some node has a NoExecute taint: without one no eviction is pending, and the pods need no LIST."""
    return any(no_execute_taints(node_taints(node)) for node in nodes)


def leader_pod(holder: str) -> str:
    """The pod of a holderIdentity `<pod name>_<uuid>` (kube/leader.py): pod names hold no `_`."""
    return holder.rpartition("_")[0] or holder


def last_monitor_pass(lease: Json) -> Reading[float]:
    """The leader's last monitor pass, as it publishes it on its Lease, or why it is not there."""
    value = ((lease.get("metadata") or {}).get("annotations") or {}).get(LAST_MONITOR_PASS_ANNOTATION)
    if value is None:
        return Reading(
            error=f"the Lease has no {LAST_MONITOR_PASS_ANNOTATION} annotation (the leader has not completed a "
            "monitor pass yet, runs without the nodelifecycle controller, or is older than this command)"
        )
    when = parse_time(str(value))
    if when is None:
        return Reading(error=f"the Lease's {LAST_MONITOR_PASS_ANNOTATION} is not a time: {value!r}")
    return Reading(when)


def leader_status(lease_name: str, lease: Reading[Json], last_pass: Reading[float], now: float) -> LeaderStatus:
    """Who holds the controller's Lease and when its monitor last completed a pass (`last_pass`, read
    from the Lease: `last_monitor_pass`)."""
    spec = (lease.value or {}).get("spec") or {}
    holder = str(spec.get("holderIdentity") or "") or None
    renewed = parse_time(spec.get("renewTime"))
    raw_duration = spec.get("leaseDurationSeconds")
    duration = int(raw_duration) if isinstance(raw_duration, int | float) else None
    expired = holder is not None and renewed is not None and duration is not None and now - renewed > duration
    when: float | None = None
    why_not: str | None = None
    if holder is None:
        why_not = "no leader" if lease.error is None else "the Lease could not be read"
    elif last_pass.value is None:
        why_not = last_pass.error or "no answer"
    else:
        when = last_pass.value
    return LeaderStatus(
        lease=lease_name,
        lease_found=lease.value is not None,
        holder=holder,
        pod=None if holder is None else leader_pod(holder),
        renewed=renewed,
        renewed_ago=None if renewed is None else now - renewed,
        lease_duration=duration,
        expired=expired,
        lease_error=lease.error,
        last_pass=when,
        last_pass_ago=None if when is None else now - when,
        last_pass_error=why_not,
    )


def cluster_status(
    nodes: Iterable[Json],
    pods: Iterable[Json],
    lease_name: str,
    lease: Reading[Json],
    last_pass: Reading[float],
    settings: MonitorSettings,
    now: float,
    budgets: Budgets | None = None,
    rule: EvictionRule | None = None,
    admission: AdmissionStatus | None = None,
) -> ClusterStatus:
    """Everything `taintkeeper status` prints, from the API's JSON (nodes, pods) and what the leader said."""
    views = [node_view(dict(node)) for node in nodes]
    zones, brake = zone_statuses(views, settings)
    return ClusterStatus(
        now=now,
        settings=settings,
        zones=zones,
        brake=brake,
        nodes=tainted_nodes(views, now),
        pending=pending_evictions(views, pods, now, budgets, rule),
        leader=leader_status(lease_name, lease, last_pass, now),
        admission=admission,
    )
